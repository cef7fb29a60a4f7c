-- transcript-sync's PostgreSQL schema, version 4: the marks a person put on each machine's
-- sessions (sinks with `marks = true`), as they are now: one row per session, made when it
-- was first marked and updated at each change (an unstarred, untagged session without a note
-- keeps its row, with nothing in it).

CREATE TABLE {schema}.marks (
    machine uuid NOT NULL REFERENCES {schema}.machines,
    harness text NOT NULL,
    -- The agent's own id for the session, as in `sessions`.
    session text NOT NULL,
    starred boolean NOT NULL,
    tags text[] NOT NULL,
    note text,
    -- When the marks last changed, on the machine where they were made.
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (machine, harness, session)
);
CREATE INDEX marks_tags ON {schema}.marks USING gin (tags);
