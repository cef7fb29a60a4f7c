-- Schema version 7: the full-text index keeps no copy of the text it indexes (`content = ''`):
-- the text is the records', which the archive holds (compressed), and a search's snippets are
-- made from them. The copy took as much room as the text itself, more than the compressed
-- records. `contentless_delete` lets a message's text be replaced or deleted as before.
--
-- The index is rebuilt: its tables are emptied and its consumer starts again from seq 0 (the
-- daemon, or the first `sessions`, `show` or `search`, catches it up).
DROP TABLE message_vocab;
DROP TABLE message_text;
CREATE VIRTUAL TABLE message_text USING fts5 (
    body,
    content = '',
    contentless_delete = 1,
    tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO message_text (message_text, rank) VALUES ('automerge', 0);
CREATE VIRTUAL TABLE message_vocab USING fts5vocab (message_text, row);
-- Without its trigger, which would update the message's session and delete its text one
-- message at a time, `DELETE FROM messages` empties the table at once.
DROP TRIGGER messages_removed;
DELETE FROM messages;
CREATE TRIGGER messages_removed AFTER DELETE ON messages BEGIN
    UPDATE sessions SET
        user_messages = user_messages - (OLD.role = 'user'),
        assistant_messages = assistant_messages - (OLD.role = 'assistant'),
        compactions = compactions - (OLD.role = 'compact'),
        unparsed = unparsed - (OLD.role = 'unparsed')
    WHERE id = OLD.session;
    DELETE FROM message_text WHERE rowid = OLD.id;
END;
DELETE FROM session_models;
DELETE FROM session_sources;
DELETE FROM sessions;
DELETE FROM consumers WHERE name = 'index';
