-- Schema version 3: the bytes held back past a cursor, whole (up to the record limit), apart
-- from the cursor row, so that a commit which leaves them as they were does not write them
-- again. The cursor keeps only their first 64 KiB, to tell an overwrite at the next read.
CREATE TABLE held_back (
    source_id INTEGER PRIMARY KEY REFERENCES sources (id),
    offset INTEGER NOT NULL,
    bytes BLOB NOT NULL
);
INSERT INTO held_back (source_id, offset, bytes)
    SELECT source_id, offset, held_back_prefix FROM cursors WHERE held_back > 0;
