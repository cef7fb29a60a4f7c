-- transcript-sync's PostgreSQL schema, version 1. `{schema}` is the sink's schema.

-- Each machine that ships: a UUID made once with its archive, and its host name (a label).
CREATE TABLE {schema}.machines (
    machine uuid PRIMARY KEY,
    host text NOT NULL,
    first_seen timestamptz NOT NULL DEFAULT now(),
    last_seen timestamptz NOT NULL DEFAULT now()
);

-- Each transcript file: `source` is the archive's id, the same across moves and generations.
CREATE TABLE {schema}.sources (
    machine uuid NOT NULL REFERENCES {schema}.machines,
    source bigint NOT NULL,
    harness text NOT NULL,
    path text NOT NULL,
    generation bigint NOT NULL,
    PRIMARY KEY (machine, source)
);

-- Each record, keyed on (machine, source, generation, offset): shipping it again changes
-- nothing. `record` is the line exactly as archived; `doc` the same as jsonb, or null where
-- jsonb refuses valid JSON (a \u0000 escape, a lone surrogate).
CREATE TABLE {schema}.records (
    machine uuid NOT NULL,
    source bigint NOT NULL,
    generation bigint NOT NULL,
    "offset" bigint NOT NULL,
    seq bigint NOT NULL,
    harness text NOT NULL,
    shipped_at timestamptz NOT NULL DEFAULT now(),
    record text NOT NULL,
    doc jsonb,
    PRIMARY KEY (machine, source, generation, "offset"),
    FOREIGN KEY (machine, source) REFERENCES {schema}.sources
);
CREATE INDEX records_shipped ON {schema}.records (shipped_at);
