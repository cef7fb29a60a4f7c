-- Schema version 3: rejected lines are kept whole (up to the record limit), and so are the
-- bytes held back past a cursor.
--
-- `rejects` is rebuilt with `raw` as its last column: SQLite stores a zero-filled blob, which
-- a long line is written into in place, without allocating it only when it ends the row.
CREATE TABLE rejects_v3 (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources (id),
    generation INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL,
    reason TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    raw BLOB NOT NULL
);
INSERT INTO rejects_v3 (id, source_id, generation, offset, length, reason, at_ms, raw)
    SELECT id, source_id, generation, offset, length, reason, at_ms, raw FROM rejects;
DROP TABLE rejects;
ALTER TABLE rejects_v3 RENAME TO rejects;

-- The held-back bytes, apart from the cursor row, so that a commit which leaves them as they
-- were does not write them again. The cursor keeps only their first 64 KiB, to tell an
-- overwrite at the next read.
CREATE TABLE held_back (
    source_id INTEGER PRIMARY KEY REFERENCES sources (id),
    offset INTEGER NOT NULL,
    bytes BLOB NOT NULL
);
INSERT INTO held_back (source_id, offset, bytes)
    SELECT source_id, offset, held_back_prefix FROM cursors WHERE held_back > 0;
