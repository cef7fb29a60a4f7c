//! Goose's sessions database, `sessions/sessions.db` in its data directory (in WAL mode from
//! the releases whose pool sets it): a row of `sessions` per session and a row of `messages`
//! per message, which Goose reads back ordered by `created_timestamp`, then `id`; its
//! version in `schema_version` (aaif-goose/goose, `crates/goose/src/session/session_manager.rs`
//! at 017176d06077, schema 17; block/goose at 0164300649cf, schema 5, before `message_id`).
//!
//! Goose keeps no log of its changes. It sets a session's `updated_at` to `datetime('now')`
//! (in seconds) when it adds a message and when it changes the session's row: what changed
//! since the last read is the sessions whose `updated_at` is at or after the mark, the latest
//! one read (its second is read again, as a write within it may follow the read). A change
//! Goose makes without it (a message's metadata, a conversation it replaces whole) is read
//! with the session's next change.

use crate::domain::{SnapshotFormat, SnapshotSpec};
use crate::read::database::rows_document;
use crate::read::database::{Changed, SqliteFormat, Written, changed_since};
use rusqlite::Connection;

/// Goose's database, as its watcher's `[[database]]` `reader = "goose"` names it.
pub(crate) static DATABASE: SqliteFormat = SqliteFormat {
    name: "goose",
    spec,
    changed,
    document,
};

/// How a session's document keeps its messages: each by its `message_id` (by its place in a
/// database from before schema 7, which has none).
fn spec() -> SnapshotSpec {
    SnapshotSpec {
        messages: Some("/messages".into()),
        key: "/message_id".into(),
        format: SnapshotFormat::Json,
    }
}

/// A session's `updated_at` in seconds since the epoch (`datetime('now')`, or RFC 3339 where
/// Goose bound a time itself; NULL for text that is neither).
const UPDATED: &str = "CAST(strftime('%s', updated_at) AS INTEGER)";

/// The sessions changed since mark `since` (the latest `updated_at` then, in seconds).
fn changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    let written = Written {
        table: "sessions",
        id: "id",
        at: UPDATED,
    };
    changed_since(conn, &written, since)
}

/// Session `id`'s document, read in one read transaction; `None` when there is no such
/// session (any more).
fn document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    let messages = "SELECT * FROM messages WHERE session_id = ?1 ORDER BY created_timestamp, id";
    rows_document(conn, messages, id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::database::open;
    use serde_json::Value;

    /// Goose's two tables, reduced to the columns read, in WAL mode as Goose keeps them.
    fn database(path: &std::path::Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE sessions (id TEXT PRIMARY KEY, working_dir TEXT NOT NULL,
                 updated_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP);
             CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT,
                 session_id TEXT NOT NULL REFERENCES sessions(id), role TEXT NOT NULL,
                 content_json TEXT NOT NULL, created_timestamp INTEGER NOT NULL,
                 metadata_json TEXT);",
        )
        .unwrap();
        conn
    }

    /// Session `id` written at `at`, as Goose's `datetime('now')` writes it.
    fn written(conn: &Connection, id: &str, at: &str) {
        conn.execute(
            "INSERT INTO sessions VALUES (?1, '/p', ?2)
             ON CONFLICT DO UPDATE SET updated_at = ?2",
            (id, at),
        )
        .unwrap();
    }

    fn say(conn: &Connection, session: &str, message_id: Option<&str>, created: i64) {
        conn.execute(
            "INSERT INTO messages (message_id, session_id, role, content_json,
                 created_timestamp, metadata_json)
             VALUES (?1, ?2, 'user', '[{\"type\":\"text\",\"text\":\"hi\"}]', ?3, '{}')",
            (message_id, session, created),
        )
        .unwrap();
    }

    #[test]
    fn the_sessions_written_at_or_after_the_marks_second_are_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let conn = database(&path);
        written(&conn, "a", "2026-09-23 08:00:00");
        written(&conn, "b", "2026-09-23 08:00:05");
        let reader = open(&path).unwrap();
        let first = changed(&reader, 0).unwrap();
        assert_eq!((first.sessions.len(), first.mark), (2, 1_790_150_405));
        // The mark's second is read again: a write within it may follow the read.
        let quiet = changed(&reader, first.mark).unwrap();
        assert_eq!(
            (quiet.sessions.as_slice(), quiet.all.len()),
            (&["b".to_owned()][..], 2)
        );
        // A time Goose bound itself (RFC 3339) is read as one (`b` again: it was written in
        // the mark's second).
        written(&conn, "a", "2026-09-23T08:00:09.25+00:00");
        let next = changed(&reader, quiet.mark).unwrap();
        let both = vec!["a".to_owned(), "b".into()];
        assert_eq!((next.sessions, next.mark), (both, 1_790_150_409));
        assert_eq!(changed(&reader, next.mark).unwrap().sessions, ["a"]);
        assert_eq!(next.all.len(), 2);
        // A mark past the latest write (the database made anew) reads everything.
        assert_eq!(changed(&reader, 1_900_000_000).unwrap().sessions.len(), 2);
    }

    #[test]
    fn a_session_is_its_row_then_its_messages_in_goose_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sessions.db");
        let conn = database(&path);
        written(&conn, "s", "2026-09-23 08:00:00");
        // Inserted after, but earlier: Goose reads it first.
        say(&conn, "s", Some("msg_later"), 20);
        say(&conn, "s", Some("msg_first"), 10);
        say(&conn, "s", None, 20);
        let reader = open(&path).unwrap();
        let doc: Value = serde_json::from_slice(&document(&reader, "s").unwrap().unwrap()).unwrap();
        assert_eq!(doc["session"]["working_dir"], "/p");
        let ids: Vec<&Value> = (doc["messages"].as_array().unwrap().iter())
            .map(|m| &m["message_id"])
            .collect();
        assert_eq!(
            ids,
            [&Value::from("msg_first"), &"msg_later".into(), &Value::Null]
        );
        assert_eq!(doc["messages"][0]["content_json"][0]["text"], "hi");
        assert!(document(&reader, "none").unwrap().is_none());
    }
}
