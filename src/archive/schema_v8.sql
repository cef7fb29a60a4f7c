-- Schema version 8: other machines' records, pulled from a PostgreSQL store (`pull = true`).
--
-- A pulled transcript is a source of its own with a negative id (this machine's sources take
-- the positive ids its engine allocates), no cursor (no watcher reads it) and the machine it
-- came from. Its records take the next `seq` like any other, so every consumer follows them;
-- sinks skip them (they are never shipped back).

-- The other machines: their UUID (the `machine_id` of their archive) and host name, a label.
-- This machine is 0 in `sources.machine` and `sessions.machine`, and has no row.
CREATE TABLE machines (
    id INTEGER PRIMARY KEY,
    uuid TEXT NOT NULL UNIQUE,
    host TEXT NOT NULL,
    first_pulled_ms INTEGER NOT NULL
);

ALTER TABLE sources ADD COLUMN machine INTEGER NOT NULL DEFAULT 0;
-- A pulled source's id on the machine it came from.
ALTER TABLE sources ADD COLUMN remote_id INTEGER;
CREATE UNIQUE INDEX sources_remote ON sources (machine, remote_id) WHERE machine <> 0;

-- How far each sink has pulled each machine's records (the store's `pull_id`), and the time
-- of the last session row it took; `status` shows them.
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

-- What the other machines' indexes say of their sessions and this index cannot derive from
-- the records: the project's git remote.
CREATE TABLE pulled_sessions (
    machine INTEGER NOT NULL REFERENCES machines (id),
    harness TEXT NOT NULL,
    session TEXT NOT NULL,
    git_remote TEXT,
    PRIMARY KEY (machine, harness, session)
);

-- A session is one machine's: the same agent id on two machines is two sessions. The table
-- is made again with the machine in its key (SQLite cannot change a table's constraints);
-- what references it references it by name, and the index keeps every row.
CREATE TABLE sessions_v8 (
    id INTEGER PRIMARY KEY,
    machine INTEGER NOT NULL DEFAULT 0,
    harness TEXT NOT NULL,
    session TEXT NOT NULL,
    parent TEXT,
    project TEXT,
    branch TEXT,
    agent_title TEXT,
    title_rank INTEGER NOT NULL DEFAULT 0,
    first_prompt TEXT,
    started_ms INTEGER,
    last_ms INTEGER,
    user_messages INTEGER NOT NULL DEFAULT 0,
    assistant_messages INTEGER NOT NULL DEFAULT 0,
    compactions INTEGER NOT NULL DEFAULT 0,
    unparsed INTEGER NOT NULL DEFAULT 0,
    -- The project's git remote (origin's URL), read when this machine's index first saw the
    -- session's project; NULL when there is none, or not yet read (`remote_read`).
    git_remote TEXT,
    remote_read INTEGER NOT NULL DEFAULT 0,
    UNIQUE (machine, harness, session)
);
INSERT INTO sessions_v8 (id, harness, session, parent, project, branch, agent_title,
    title_rank, first_prompt, started_ms, last_ms, user_messages, assistant_messages,
    compactions, unparsed)
SELECT id, harness, session, parent, project, branch, agent_title, title_rank, first_prompt,
    started_ms, last_ms, user_messages, assistant_messages, compactions, unparsed
FROM sessions;
-- The triggers on `messages` name `sessions`, which does not exist between the DROP and the
-- RENAME: the legacy rename leaves them unchecked, as they are.
PRAGMA legacy_alter_table = ON;
DROP TABLE sessions;
ALTER TABLE sessions_v8 RENAME TO sessions;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX sessions_last ON sessions (last_ms);
CREATE INDEX sessions_parent ON sessions (machine, harness, parent);
