-- Schema version 3: rejected lines are kept whole (up to the record limit), and so are the
-- bytes held back past a cursor; durable consumers keep their place.
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

-- The bytes held back past a source's cursor (its unfinished last line, from `offset`), in
-- pieces: `start` is where a piece begins within them. A line that grows between two reads
-- adds a piece rather than writing again what is stored. The cursor keeps only their first
-- 64 KiB, to tell an overwrite at the next read; a cursor holds back bytes exactly when this
-- table has pieces for its source.
CREATE TABLE held_back (
    source_id INTEGER NOT NULL REFERENCES sources (id),
    start INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (source_id, start)
);
-- A gone source's held-back bytes were recorded as a reject when it went.
INSERT INTO held_back (source_id, start, offset, bytes)
    SELECT c.source_id, 0, c.offset, c.held_back_prefix
    FROM cursors c JOIN sources s ON s.id = c.source_id
    WHERE c.held_back > 0 AND s.gone = 0;
UPDATE cursors SET held_back = 0, held_back_prefix = x''
    WHERE source_id IN (SELECT id FROM sources WHERE gone = 1);

-- Durable consumers of the archive (an index, a shipper): the last `seq` each is done with,
-- committed with its own work, so that it resumes where it left off.
CREATE TABLE consumers (
    name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
