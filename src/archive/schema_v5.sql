-- Schema version 5: shipping to sinks (PostgreSQL, HTTP collectors, a mirror directory). Each
-- sink is a durable consumer named `sink:<name>` in `consumers`.

-- The machine's identity, made once (with the archive, or on this upgrade): every record
-- shipped elsewhere is keyed on (machine, source, generation, offset).
INSERT OR IGNORE INTO state (key, value, updated_ms)
VALUES (
    'machine_id',
    lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4'
        || substr(lower(hex(randomblob(2))), 2) || '-'
        || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(lower(hex(randomblob(2))), 2)
        || '-' || lower(hex(randomblob(6))),
    CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
);

-- What `status` shows of each sink beside its cursor.
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

-- A record a destination refused for good (after bisecting its batch down to it), with the
-- destination's answer. `sink retry` ships them again.
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

-- State a sink keeps with its cursor, committed in the same transaction (a mirror's file
-- lengths).
CREATE TABLE sink_state (
    sink TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (sink, key)
);
