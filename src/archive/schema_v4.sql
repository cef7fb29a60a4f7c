-- Schema version 4: the session index, derived from the records alone by the durable consumer
-- `index` (`reindex` empties these tables and builds them again). An archive upgraded to this
-- version has no `index` consumer row yet: the index catches up from seq 0.

-- One session of an agent: a main transcript, or a subagent's (with `parent`).
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    harness TEXT NOT NULL,
    -- The agent's own id for the session.
    session TEXT NOT NULL,
    -- The agent's id of the parent session, for a subagent.
    parent TEXT,
    project TEXT,
    branch TEXT,
    -- The title the agent recorded, and which kind of record gave it (a higher rank wins:
    -- 1 summary, 2 generated title, 3 title the user gave).
    agent_title TEXT,
    title_rank INTEGER NOT NULL DEFAULT 0,
    first_prompt TEXT,
    started_ms INTEGER,
    last_ms INTEGER,
    user_messages INTEGER NOT NULL DEFAULT 0,
    assistant_messages INTEGER NOT NULL DEFAULT 0,
    compactions INTEGER NOT NULL DEFAULT 0,
    -- Records whose fields were missing or of an unexpected type.
    unparsed INTEGER NOT NULL DEFAULT 0,
    UNIQUE (harness, session)
);
CREATE INDEX sessions_last ON sessions (last_ms);
CREATE INDEX sessions_parent ON sessions (harness, parent);

-- Which session each source's records belong to.
CREATE TABLE session_sources (
    source_id INTEGER PRIMARY KEY REFERENCES sources (id),
    session INTEGER NOT NULL REFERENCES sessions (id)
);
CREATE INDEX session_sources_session ON session_sources (session);

CREATE TABLE session_models (
    session INTEGER NOT NULL REFERENCES sessions (id),
    model TEXT NOT NULL,
    PRIMARY KEY (session, model)
) WITHOUT ROWID;

-- A session's messages after de-duplication and upserts: `key` is the agent's id for the
-- message (or its place in the file, for agents that write none); `ord` orders the session
-- (the seq of its first copy); `seq` is the record shown (the latest copy, for upserts).
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    session INTEGER NOT NULL REFERENCES sessions (id),
    key TEXT NOT NULL,
    ord INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    at_ms INTEGER,
    UNIQUE (session, key)
);
CREATE INDEX messages_order ON messages (session, ord);

-- The searchable text of each message (rowid = messages.id). No prefix indexes: they would
-- add every token's postings twice more, for `pre*` queries that scan the terms instead.
CREATE VIRTUAL TABLE message_text USING fts5 (
    body,
    tokenize = 'unicode61 remove_diacritics 2'
);
-- Segments are merged a bounded amount with every index transaction (`sessions.rs`), not all
-- at once inside whichever one tips a level over.
INSERT INTO message_text (message_text, rank) VALUES ('automerge', 0);
-- Its terms, with how many messages hold each (a prefix search reads them).
CREATE VIRTUAL TABLE message_vocab USING fts5vocab (message_text, row);

-- The session's counts and times follow its messages.
CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN
    UPDATE sessions SET
        user_messages = user_messages + (NEW.role = 'user'),
        assistant_messages = assistant_messages + (NEW.role = 'assistant'),
        compactions = compactions + (NEW.role = 'compact'),
        unparsed = unparsed + (NEW.role = 'unparsed'),
        started_ms = min(coalesce(started_ms, NEW.at_ms), coalesce(NEW.at_ms, started_ms)),
        last_ms = max(coalesce(last_ms, NEW.at_ms), coalesce(NEW.at_ms, last_ms))
    WHERE id = NEW.session;
END;
CREATE TRIGGER messages_removed AFTER DELETE ON messages BEGIN
    UPDATE sessions SET
        user_messages = user_messages - (OLD.role = 'user'),
        assistant_messages = assistant_messages - (OLD.role = 'assistant'),
        compactions = compactions - (OLD.role = 'compact'),
        unparsed = unparsed - (OLD.role = 'unparsed')
    WHERE id = OLD.session;
    DELETE FROM message_text WHERE rowid = OLD.id;
END;
CREATE TRIGGER messages_replaced AFTER UPDATE OF role ON messages BEGIN
    UPDATE sessions SET
        user_messages = user_messages + (NEW.role = 'user') - (OLD.role = 'user'),
        assistant_messages = assistant_messages + (NEW.role = 'assistant') - (OLD.role = 'assistant'),
        compactions = compactions + (NEW.role = 'compact') - (OLD.role = 'compact'),
        unparsed = unparsed + (NEW.role = 'unparsed') - (OLD.role = 'unparsed')
    WHERE id = NEW.session;
END;
