-- Schema version 1.
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
);
CREATE INDEX sources_identity ON sources (dev, ino);
CREATE INDEX sources_path ON sources (path);

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

CREATE TABLE records (
    seq INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources (id),
    generation INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    record BLOB NOT NULL,
    UNIQUE (source_id, generation, offset)
);

CREATE TABLE rejects (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources (id),
    generation INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    length INTEGER NOT NULL,
    reason TEXT NOT NULL,
    raw BLOB NOT NULL,
    at_ms INTEGER NOT NULL
);

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

CREATE TABLE roots (
    path BLOB PRIMARY KEY,
    first_scan_ms INTEGER NOT NULL
);

CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    at_ms INTEGER NOT NULL,
    source_id INTEGER,
    kind TEXT NOT NULL,
    path BLOB NOT NULL,
    detail TEXT NOT NULL
);
