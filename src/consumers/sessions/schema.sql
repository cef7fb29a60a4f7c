-- The session index's file (`<archive>-index`), of the version `store.rs` names (`PRAGMA
-- user_version`). Everything here is derived from the archive's records: a file of another
-- version, or of another archive, is emptied and built again from seq 0 (`store.rs`). Sources
-- and records are the archive's, attached read-only as `archive`; `source_id` names an archive
-- source, which SQLite cannot check across files.

-- Which archive this index is of (its `machine_id`), and the last seq indexed; one row.
CREATE TABLE progress (
    archive TEXT NOT NULL,
    seq INTEGER NOT NULL
);

-- One session of an agent on one machine (0: this one): a main transcript, or a subagent's
-- (with `parent`).
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    machine INTEGER NOT NULL DEFAULT 0,
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
    -- The project's git remote (origin's URL), read when this machine's index first saw the
    -- session's project; NULL when there is none, or not yet read (`remote_read`).
    git_remote TEXT,
    remote_read INTEGER NOT NULL DEFAULT 0,
    UNIQUE (machine, harness, session)
);
CREATE INDEX sessions_last ON sessions (last_ms);
CREATE INDEX sessions_parent ON sessions (machine, harness, parent);

-- Which session each source's records belong to.
CREATE TABLE session_sources (
    source_id INTEGER PRIMARY KEY,
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
    -- The size of its searchable text in `message_text`, in places, as FTS5 counts it: the
    -- ranking reads it here, with the row, rather than look it up in FTS5's own sizes.
    places INTEGER,
    UNIQUE (session, key)
);
CREATE INDEX messages_order ON messages (session, ord);

-- The tokens of each model call the agents recorded, once per call: `key` is the agent's id
-- for the call (its reply's or request's; the session's id before it when that id is unique
-- only within a session), which a copy of it in another session (a resume, a compaction, a
-- fork) repeats, or the record's place for an agent that writes none. `session` is the first
-- session it was seen in; a later copy of the call updates its counts (a reply written again
-- as it streams). `input` is the input not read from the cache; `output` counts thinking.
CREATE TABLE usage (
    id INTEGER PRIMARY KEY,
    machine INTEGER NOT NULL,
    harness TEXT NOT NULL,
    key TEXT NOT NULL,
    session INTEGER NOT NULL REFERENCES sessions (id),
    at_ms INTEGER,
    model TEXT,
    input INTEGER NOT NULL,
    output INTEGER NOT NULL,
    cache_read INTEGER NOT NULL,
    cache_write INTEGER NOT NULL,
    UNIQUE (machine, harness, key)
);
CREATE INDEX usage_time ON usage (at_ms);

-- The searchable text of each message (rowid = messages.id). It keeps no copy of the text
-- (`content = ''`): the text is the records', and a search's snippets are made from them.
-- `contentless_delete` lets a message's text be replaced or deleted. Its text is cut by `words`:
-- `unicode61` for scripts with spaces and pairs of characters for those without (`words.rs`).
-- A message is inserted as the terms `words` makes of it, cut before the insert, which the
-- table's own tokenizer (`terms`) only reads; a query is cut by `words`. Every connection to
-- this file registers both first. No prefix indexes: they
-- would add every token's postings twice more, for `pre*` queries that scan the terms instead.
CREATE VIRTUAL TABLE message_text USING fts5 (
    body,
    content = '',
    contentless_delete = 1,
    tokenize = 'terms remove_diacritics 2 categories ''L* N* Co M*'''
);
-- Segments are merged by FTS5 itself (`automerge`, 4 by default): each transaction does merge
-- work in proportion to the pages it wrote. (Version 2 merged in steps of 32 pages after each
-- transaction instead, each a transaction of its own: slower to index and to follow live,
-- docs/benchmarks-log.md.) An index built from nothing merges none as it goes, and all into
-- one at the end (`store::Merging`).
-- Its terms, with how many messages hold each (a prefix search reads them).
CREATE VIRTUAL TABLE message_vocab USING fts5vocab (message_text, row);

-- The session's counts follow its messages: a message added is counted with the session's
-- other changes of its transaction (`SessionChanges` in sessions.rs), which also take its
-- time; a message removed, or whose role changes, is counted here.
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
