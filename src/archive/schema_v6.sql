-- Schema version 6: records may be stored compressed (see `archive/codec.rs`).
--
-- A `records.record` that begins with the bytes 28 b5 2f fd is one zstd frame holding the
-- record; any other is the record as it is. A frame compressed with a dictionary names it by
-- its id, a row of `dictionaries`. Records stored before this version stay as they are.
CREATE TABLE dictionaries (
    -- The dictionary's own id, as its frames name it.
    id INTEGER PRIMARY KEY,
    -- The watcher whose records it was trained from, and is used for.
    harness TEXT NOT NULL,
    trained_ms INTEGER NOT NULL,
    -- What it was trained from: how many records, how many bytes of them.
    samples INTEGER NOT NULL,
    sample_bytes INTEGER NOT NULL,
    bytes BLOB NOT NULL
);

-- The bytes of each source's records, and what storing them takes.
ALTER TABLE sources ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sources ADD COLUMN stored INTEGER NOT NULL DEFAULT 0;
UPDATE sources SET bytes = (SELECT coalesce(sum(length(r.record)), 0) FROM records r
                            WHERE r.source_id = sources.id);
UPDATE sources SET stored = bytes;
