-- transcript-sync's PostgreSQL schema, version 2: the session index's rows, as each machine's
-- index has them (updated as its index follows the records).

CREATE TABLE {schema}.sessions (
    machine uuid NOT NULL REFERENCES {schema}.machines,
    harness text NOT NULL,
    -- The agent's own id for the session, and its parent's for a subagent.
    session text NOT NULL,
    parent text,
    project text,
    branch text,
    -- The title the agent recorded, else the first prompt typed.
    title text,
    started_at timestamptz,
    last_at timestamptz,
    user_messages integer NOT NULL,
    assistant_messages integer NOT NULL,
    compactions integer NOT NULL,
    models text[] NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (machine, harness, session)
);

-- Which session each source's records belong to: join `records` on (machine, source).
CREATE TABLE {schema}.session_sources (
    machine uuid NOT NULL,
    source bigint NOT NULL,
    harness text NOT NULL,
    session text NOT NULL,
    PRIMARY KEY (machine, source),
    FOREIGN KEY (machine, harness, session) REFERENCES {schema}.sessions
);
