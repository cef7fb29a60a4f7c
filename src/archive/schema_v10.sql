-- Schema version 10: the states of snapshot sources, files that their agent rewrites whole (a
-- JSON chat file) rather than appends to. Each distinct state is kept once, in the order it
-- was captured, so a state the agent later rewrites or deletes can be written back. The
-- latest state of a source is one zstd frame of its bytes (`base` NULL); an earlier one is a
-- zstd frame made with the state after it (`base`) as its prefix, so a rewrite that changes a
-- little of a large file costs about what it changed (`snapshots.rs`).
CREATE TABLE snapshots (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources (id),
    taken_ms INTEGER NOT NULL,
    -- The state's length, and the xxh3-128 of its bytes.
    size INTEGER NOT NULL,
    hash BLOB NOT NULL,
    base INTEGER REFERENCES snapshots (id),
    bytes BLOB NOT NULL
);
CREATE INDEX snapshots_source ON snapshots (source_id, id);
