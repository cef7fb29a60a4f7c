-- The archive's schema after every migration (schema_v1.sql to schema_v12.sql).
-- Written by the test schema_current_is_what_every_migration_makes; do not edit.

CREATE TABLE consumers (
    name TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);

CREATE TABLE cursors (
    source_id INTEGER PRIMARY KEY REFERENCES sources (id),
    offset INTEGER NOT NULL,
    head_len INTEGER NOT NULL,
    head_hash INTEGER NOT NULL,
    tail_len INTEGER NOT NULL,
    tail_hash INTEGER NOT NULL,
    size INTEGER,
    mtime_ns INTEGER,
    ctime_ns INTEGER,
    held_back INTEGER NOT NULL,
    held_back_prefix BLOB NOT NULL,
    updated_ms INTEGER NOT NULL
);

CREATE TABLE dead_letters (
    id INTEGER PRIMARY KEY,
    sink TEXT NOT NULL,
    source_id INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    answer TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    UNIQUE (sink, source_id, generation, offset)
);

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

CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    source_id INTEGER,
    kind TEXT NOT NULL,
    path BLOB NOT NULL,
    detail TEXT NOT NULL
);

CREATE TABLE held_back (
    source_id INTEGER NOT NULL REFERENCES sources (id),
    start INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    bytes BLOB NOT NULL,
    PRIMARY KEY (source_id, start)
);

CREATE TABLE machines (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    host TEXT NOT NULL,
    first_pulled_ms INTEGER NOT NULL
);

CREATE TABLE mark_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    machine INTEGER NOT NULL,
    harness TEXT NOT NULL,
    session TEXT NOT NULL,
    -- The archive's last record seq when the marks changed: a sink ships the change once it
    -- has shipped the records up to it, so marks never reach a sink before their records.
    records_seq INTEGER NOT NULL,
    UNIQUE (machine, harness, session)
);

CREATE TABLE marks (
    machine INTEGER NOT NULL,
    harness TEXT NOT NULL,
    session TEXT NOT NULL,
    starred INTEGER NOT NULL DEFAULT 0,
    note TEXT,
    changed_ms INTEGER NOT NULL,
    PRIMARY KEY (machine, harness, session)
) WITHOUT ROWID;

CREATE TABLE prefix_marks (
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    path BLOB NOT NULL,
    offset INTEGER NOT NULL,
    head_len INTEGER NOT NULL,
    head_hash INTEGER NOT NULL,
    tail_len INTEGER NOT NULL,
    tail_hash INTEGER NOT NULL,
    skipped_records INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (dev, ino)
);

CREATE TABLE pulled_sessions (
    machine INTEGER NOT NULL REFERENCES machines (id),
    harness TEXT NOT NULL,
    session TEXT NOT NULL,
    git_remote TEXT,
    PRIMARY KEY (machine, harness, session)
);

CREATE TABLE pulls (
    sink TEXT NOT NULL,
    machine INTEGER NOT NULL REFERENCES machines (id),
    pulled_id INTEGER NOT NULL DEFAULT 0,
    sessions_at TEXT NOT NULL DEFAULT '',
    records INTEGER NOT NULL DEFAULT 0,
    last_pulled_ms INTEGER,
    -- When the last record pulled was shipped by its machine (Unix ms).
    last_shipped_ms INTEGER,
    PRIMARY KEY (sink, machine)
);

CREATE TABLE records (
    seq INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources (id),
    generation INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    record BLOB NOT NULL,
    UNIQUE (source_id, generation, offset)
);

CREATE TABLE "rejects" (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources (id),
    generation INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL,
    reason TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    raw BLOB NOT NULL
);

CREATE TABLE roots (
    path BLOB PRIMARY KEY,
    first_scan_ms INTEGER NOT NULL
);

CREATE TABLE sink_state (
    sink TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (sink, key)
);

CREATE TABLE sinks (
    name TEXT PRIMARY KEY,
    -- `postgres`, `http` or `mirror`, and where to (a URL without its password, or a directory).
    kind TEXT NOT NULL,
    target TEXT NOT NULL,
    last_ok_ms INTEGER,
    -- The last time the sink had shipped everything committed before it.
    caught_up_ms INTEGER,
    last_error TEXT,
    last_error_ms INTEGER,
    -- Set while deliveries fail: since when.
    failing_since_ms INTEGER
);

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

CREATE TABLE sources (
    id INTEGER PRIMARY KEY,
    dev INTEGER NOT NULL,
    ino INTEGER NOT NULL,
    path BLOB NOT NULL,
    harness TEXT NOT NULL,
    generation INTEGER NOT NULL,
    gone INTEGER NOT NULL,
    records INTEGER NOT NULL DEFAULT 0,
    rejects INTEGER NOT NULL DEFAULT 0,
    last_archived_ms INTEGER,
    created_ms INTEGER NOT NULL
, bytes INTEGER NOT NULL DEFAULT 0, stored INTEGER NOT NULL DEFAULT 0, machine INTEGER NOT NULL DEFAULT 0, remote_id INTEGER);

CREATE TABLE state (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);

CREATE TABLE tags (
    machine INTEGER NOT NULL,
    harness TEXT NOT NULL,
    session TEXT NOT NULL,
    tag TEXT NOT NULL,
    PRIMARY KEY (machine, harness, session, tag)
) WITHOUT ROWID;

CREATE INDEX snapshots_source ON snapshots (source_id, id);

CREATE INDEX sources_identity ON sources (dev, ino);

CREATE INDEX sources_path ON sources (path);

CREATE UNIQUE INDEX sources_remote ON sources (machine, remote_id) WHERE machine <> 0;

CREATE INDEX tags_tag ON tags (tag);
