//! Crush's SQLite database (`<project>/.crush/crush.db`), read as one JSON document per
//! session (`read::database`): `{"session": <its row>, "messages": [<each row>]}`, the
//! messages in the order Crush wrote them (`created_at`, then `rowid`: their ids are random
//! UUIDs and many share a second), each message's `parts` column (a JSON list of
//! `{"type", "data"}`) as that list.
//!
//! Crush keeps no log of its changes: what changed since the last read is found through the
//! sessions' and messages' `updated_at`, which it sets (in seconds) at each write, the
//! messages' as they stream (the tables of crush v0.92.0's migrations, `internal/db/`).
//!
//! Its records: the documents its database is read as (below), a session's row
//! (`{"session": {...}, "messages": []}`) and each message's row (`{id, role, parts, model,
//! created_at, is_summary_message, …}`, times in seconds), whose `parts` are `{type, data}`:
//! `text`, `reasoning`, `tool_call` (its `input` a JSON text), `tool_result`, `image_url`,
//! `binary`, `finish` (as crush v0.92.0's `internal/message/content.go` writes them).

use super::Agent;
use super::message::*;
use super::restore::{self, Restore};
use super::session::Identified;
use crate::capture::harness::Formats;
use crate::domain::{SnapshotFormat, SnapshotSpec};
use crate::read::database::SqliteFormat;
use crate::read::database::{Changed, column, in_read_transaction, rows_document};
use rusqlite::Connection;
use serde_json::{Map, Value};
use std::path::Path;

/// Crush (a SQLite database per project).
pub(crate) static AGENT: Agent = Agent {
    name: "crush",
    watcher: include_str!("../../watchers/crush.toml"),
    formats: Formats {
        databases: &[&DATABASE],
        documents: &[],
    },
    parse: crush,
    unread: &[],
    identify,
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};

/// `<project>/.crush/crush.db/<session id>`: a session in a project's database. The project
/// is the folder of its `.crush`, or else the data directory itself.
fn identify(path: &Path, first: &Parsed) -> Identified {
    let db = path.parent().unwrap_or(path);
    let data = db.parent().unwrap_or(db);
    let project = match data.ends_with(".crush") {
        true => data.parent(),
        false => None,
    };
    Identified {
        project: Some(project.unwrap_or(data).to_string_lossy().into_owned()),
        ..Identified::by_record(path, first)
    }
}

pub(super) fn crush(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed::default();
    let seconds = |o: &Map<String, Value>| o.get("created_at")?.as_i64()?.checked_mul(1000);
    if let Some(session) = obj.get("session").and_then(Value::as_object) {
        parsed.session_id = string(session, "id");
        parsed.at_ms = seconds(session);
        // Until the small model names it, a session is "Untitled Session".
        let title = string(session, "title").filter(|t| t != "Untitled Session");
        parsed.title = title.map(|t| (title_of(&t), 2));
        return Some(parsed);
    }
    parsed.session_id = string(obj, "session_id");
    parsed.at_ms = seconds(obj);
    let parts: Vec<Part> = (obj.get("parts")?.as_array()?.iter())
        .filter_map(|p| crush_part(p.as_object()?))
        .collect();
    let summary = obj.get("is_summary_message").and_then(Value::as_i64) == Some(1);
    let role = match obj.get("role").and_then(Value::as_str)? {
        _ if summary => Role::Compact,
        name => role_named(name, &parts),
    };
    match role {
        Role::User => parsed.prompt = typed_prompt(&parts),
        Role::Assistant => parsed.model = string(obj, "model").filter(|m| !m.is_empty()),
        _ => {}
    }
    // A row is written again as its reply streams: the latest wins.
    parsed.message = Some(Message {
        upsert: true,
        ..Message::new(string(obj, "id"), role, parts)
    });
    Some(parsed)
}

fn crush_part(part: &Map<String, Value>) -> Option<Part> {
    let data = part.get("data")?.as_object()?;
    Some(match part.get("type").and_then(Value::as_str)? {
        "text" => Part::Text(string(data, "text")?),
        "reasoning" => Part::Thinking(string(data, "thinking")?),
        "tool_call" => Part::ToolCall {
            name: string(data, "name")?,
            input: string(data, "input").unwrap_or_default(),
        },
        "tool_result" => Part::ToolResult(string(data, "content").unwrap_or_default()),
        "image_url" => Part::Text(format!("[image {}]", string(data, "url")?)),
        "binary" => Part::Text(format!(
            "[file {}]",
            string(data, "Path").unwrap_or_default()
        )),
        // The reason a reply ended is the agent's bookkeeping.
        _ => return None,
    })
}

/// Crush's database, as its watcher's `[[database]]` `reader = "crush"` names it.
pub(crate) static DATABASE: SqliteFormat = SqliteFormat {
    name: "crush",
    spec,
    changed,
    document,
};

/// How a session's document keeps its messages.
pub(crate) fn spec() -> SnapshotSpec {
    SnapshotSpec {
        messages: Some("/messages".into()),
        key: "/id".into(),
        format: SnapshotFormat::Json,
    }
}

/// The sessions changed since `since`, read in one read transaction.
pub(crate) fn changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    in_read_transaction(conn, || read_changed(conn, since))
}

fn read_changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    let mark = conn.query_row(
        "SELECT max(coalesce((SELECT max(updated_at) FROM sessions), 0),
                    coalesce((SELECT max(updated_at) FROM messages), 0))",
        [],
        |r| r.get(0),
    )?;
    // A write within the mark's second may come after the read: that second is read again.
    let mut sessions = column(
        conn,
        "SELECT id FROM sessions WHERE updated_at >= ?1
         UNION SELECT session_id FROM messages WHERE updated_at >= ?1",
        [since],
    )?;
    sessions.sort();
    let all = column(conn, "SELECT id FROM sessions", [])?;
    Ok(Changed {
        sessions,
        all: all.into_iter().collect(),
        mark,
    })
}

/// Session `id`'s document, read in one read transaction; `None` when there is no such
/// session (any more).
pub(crate) fn document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    // The messages in the order Crush wrote them: their ids are random and many share a second.
    let messages = "SELECT * FROM messages WHERE session_id = ?1 ORDER BY created_at, rowid";
    rows_document(conn, messages, id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::database::open;

    /// Crush's two tables, reduced to the columns read, in WAL mode as Crush keeps them.
    fn database(path: &std::path::Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE sessions (id TEXT PRIMARY KEY, title TEXT NOT NULL,
                 updated_at INTEGER NOT NULL, created_at INTEGER NOT NULL);
             CREATE TABLE messages (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,
                 role TEXT NOT NULL, parts TEXT NOT NULL DEFAULT '[]',
                 created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);",
        )
        .unwrap();
        conn
    }

    fn add(conn: &Connection, session: &str, message: &str, text: &str, at: i64) {
        conn.execute(
            "INSERT OR REPLACE INTO sessions VALUES (?1, 'T', ?2, 1)",
            (session, at),
        )
        .unwrap();
        let parts = serde_json::json!([{"type": "text", "data": {"text": text}}]).to_string();
        conn.execute(
            "INSERT INTO messages VALUES (?1, ?2, 'user', ?3, ?4, ?4)",
            (message, session, parts, at),
        )
        .unwrap();
    }

    #[test]
    fn a_session_is_its_row_then_its_messages_in_the_order_written_parts_as_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crush.db");
        let conn = database(&path);
        // Random ids, one second: the order written is the rowid's.
        add(&conn, "s1", "ffff", "first", 10);
        add(&conn, "s1", "0000", "second", 10);
        let reader = open(&path).unwrap();
        let doc = document(&reader, "s1").unwrap().unwrap();
        let doc: Value = serde_json::from_slice(&doc).unwrap();
        assert_eq!(doc["session"]["title"], "T");
        assert_eq!(doc["messages"][0]["parts"][0]["data"]["text"], "first");
        assert_eq!(doc["messages"][1]["id"], "0000");
        assert!(document(&reader, "s2").unwrap().is_none());
    }

    #[test]
    fn only_sessions_written_since_the_marks_second_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crush.db");
        let conn = database(&path);
        add(&conn, "s1", "m1", "one", 10);
        add(&conn, "s2", "m2", "two", 20);
        let reader = open(&path).unwrap();
        let first = changed(&reader, 0).unwrap();
        assert_eq!(
            (&first.sessions, first.mark),
            (&vec!["s1".to_owned(), "s2".into()], 20)
        );
        conn.execute("UPDATE messages SET updated_at = 30 WHERE id = 'm1'", [])
            .unwrap();
        let next = changed(&reader, first.mark).unwrap();
        // s2's second (the mark's) is read again; s1 changed since.
        assert_eq!(next.sessions, ["s1", "s2"]);
        let last = changed(&reader, next.mark).unwrap();
        assert_eq!(last.sessions, ["s1"]);
        assert_eq!(last.all.len(), 2);
    }
}
