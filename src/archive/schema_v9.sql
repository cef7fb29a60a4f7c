-- Schema version 9: the session index moves out of the archive into a SQLite file of its own
-- beside it (`<archive>-index`, `sessions/store.rs`). Its transactions then take that file's
-- write lock, never the archive's: a commit of records no longer waits for an index commit
-- (which set the live p99 at 1,000 appends a second, BENCHMARKS.md).
--
-- The index is derived from the records: its tables are dropped here, and the new file is
-- built from seq 0 (by the daemon, or the first `sessions`, `show` or `search`). What other
-- machines' indexes said (`pulled_sessions`) is not derived, and stays.
DROP TABLE message_vocab;
DROP TABLE message_text;
DROP TRIGGER messages_added;
DROP TRIGGER messages_removed;
DROP TRIGGER messages_replaced;
DROP TABLE messages;
DROP TABLE session_models;
DROP TABLE session_sources;
DROP TABLE sessions;
DELETE FROM consumers WHERE name = 'index';
