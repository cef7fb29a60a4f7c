-- Schema version 11: a person's marks on their sessions, a star, tags and a note. They are
-- kept in the archive, not in the session index, which is built again from the records and
-- would lose them. A session is named as the index names it: its machine (0 for this one),
-- its watcher and the agent's id for it.
CREATE TABLE marks (
    machine INTEGER NOT NULL,
    harness TEXT NOT NULL,
    session TEXT NOT NULL,
    starred INTEGER NOT NULL DEFAULT 0,
    note TEXT,
    changed_ms INTEGER NOT NULL,
    PRIMARY KEY (machine, harness, session)
) WITHOUT ROWID;
CREATE TABLE tags (
    machine INTEGER NOT NULL,
    harness TEXT NOT NULL,
    session TEXT NOT NULL,
    tag TEXT NOT NULL,
    PRIMARY KEY (machine, harness, session, tag)
) WITHOUT ROWID;
CREATE INDEX tags_tag ON tags (tag);
