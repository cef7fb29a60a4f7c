//! Hermes Agent (Nous Research): every session in one SQLite database in WAL mode,
//! `~/.hermes/state.db` (`$HERMES_HOME`; a profile's under `profiles/<name>/`), read as one
//! JSON document per session (`read::database`): `{"session": <its row>, "messages": [<each
//! row>]}`, the messages in the order written (`id`, which only grows).
//!
//! The tables (hermes-agent 0.19.0's `hermes_state.py`, schema version 22): `sessions` (`id`,
//! `source`, `model`, `cwd`, `git_branch`, `title`, `parent_session_id`, `started_at` and
//! `ended_at` in seconds, token counts, …) and `messages` (`id`, `session_id`, `role`
//! `user`/`assistant`/`tool`/`system`, `content`, `tool_calls` as OpenAI's list of function
//! calls, `tool_name`, `reasoning`, `timestamp` in seconds, `active`, …).
//!
//! Hermes keeps no log of its changes and no time of a row's last write: what changed since
//! the last read is the sessions of the messages added since (the mark is the last message's
//! id), every session still open (no `ended_at`), whose row and messages may still be
//! written, and every session that ended after the mark's message was written.

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

/// Hermes Agent (its SQLite database).
pub(crate) static AGENT: Agent = Agent {
    name: "hermes",
    watcher: include_str!("../../watchers/hermes.toml"),
    formats: Formats {
        databases: &[&DATABASE],
        documents: &[],
    },
    parse: hermes,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};

/// A session's row, or one of its messages' rows.
fn hermes(obj: &Map<String, Value>) -> Option<Parsed> {
    if let Some(session) = obj.get("session").and_then(Value::as_object) {
        return Some(Parsed {
            session_id: string(session, "id"),
            project: string(session, "cwd"),
            branch: string(session, "git_branch").filter(|b| !b.is_empty()),
            title: string(session, "title").map(|t| (title_of(&t), 2)),
            model: string(session, "model"),
            at_ms: seconds_ms(session.get("started_at")),
            ..Parsed::default()
        });
    }
    let mut parsed = Parsed {
        session_id: string(obj, "session_id"),
        at_ms: seconds_ms(obj.get("timestamp")),
        ..Parsed::default()
    };
    let parts = parts(obj);
    let role = role_named(obj.get("role").and_then(Value::as_str)?, &parts);
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    let key = obj
        .get("id")
        .and_then(Value::as_i64)
        .map(|id| id.to_string());
    // A row may be written again: the latest wins. (A message a rewind set aside, `active`
    // 0, is kept and shown as it was.)
    parsed.message = Some(Message {
        upsert: true,
        ..Message::new(key, role, parts)
    });
    Some(parsed)
}

/// A message row's parts: its reasoning, its text (a tool's result, for a tool's row), its
/// tool calls.
fn parts(obj: &Map<String, Value>) -> Vec<Part> {
    // A column's JSON text (a tool's result is an object) is read as its value: its text again.
    let text = |key: &str| match obj.get(key) {
        None | Some(Value::Null) => None,
        value => Some(input_text(value)).filter(|t| !t.is_empty()),
    };
    let mut parts = Vec::new();
    parts.extend(text("reasoning").map(Part::Thinking));
    let tool = obj.get("role").and_then(Value::as_str) == Some("tool");
    parts.extend(text("content").map(|t| match tool {
        true => Part::ToolResult(t),
        false => Part::Text(t),
    }));
    let calls = obj.get("tool_calls").and_then(Value::as_array);
    parts.extend(calls.into_iter().flatten().filter_map(|call| {
        let function = call.get("function")?.as_object()?;
        Some(Part::ToolCall {
            name: string(function, "name")?,
            input: input_text(function.get("arguments")),
        })
    }));
    parts
}

/// Milliseconds since the epoch of a time in seconds (a real number).
fn seconds_ms(value: Option<&Value>) -> Option<i64> {
    let seconds = value?.as_f64()?;
    Some((seconds * 1000.0).round() as i64)
}

/// Hermes's database, as its watcher's `[[database]]` `reader = "hermes"` names it.
pub(crate) static DATABASE: SqliteFormat = SqliteFormat {
    name: "hermes",
    spec,
    changed,
    document,
};

/// How a session's document keeps its messages.
fn spec() -> SnapshotSpec {
    SnapshotSpec {
        messages: Some("/messages".into()),
        key: "/id".into(),
        format: SnapshotFormat::Json,
    }
}

/// The sessions changed since mark `since` (the last message's id then), read in one read
/// transaction.
fn changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    in_read_transaction(conn, || {
        let mark = conn.query_row("SELECT coalesce(max(id), 0) FROM messages", [], |r| {
            r.get(0)
        })?;
        // A mark past the last message (the table made anew) says nothing of this one.
        let since = if since > mark { 0 } else { since };
        let mut sessions = column(
            conn,
            "SELECT session_id FROM messages WHERE id > ?1
             UNION SELECT id FROM sessions WHERE ended_at IS NULL OR ?1 = 0
                 OR ended_at >= (SELECT timestamp FROM messages WHERE id = ?1)",
            [since],
        )?;
        sessions.sort();
        let all = column(conn, "SELECT id FROM sessions", [])?;
        Ok(Changed {
            sessions,
            all: all.into_iter().collect(),
            mark,
        })
    })
}

/// Session `id`'s document, read in one read transaction; `None` when there is no such
/// session (any more).
fn document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    let messages = "SELECT * FROM messages WHERE session_id = ?1 ORDER BY id";
    rows_document(conn, messages, id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::database::open;

    /// Hermes's two tables, reduced to the columns read, in WAL mode as Hermes keeps them.
    fn database(path: &std::path::Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT, title TEXT,
                 started_at REAL NOT NULL, ended_at REAL);
             CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
                 session_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT,
                 timestamp REAL NOT NULL);",
        )
        .unwrap();
        conn
    }

    fn say(conn: &Connection, session: &str, text: &str) {
        let sql = "INSERT INTO messages (session_id, role, content, timestamp) \
                   VALUES (?1, 'user', ?2, 1.5)";
        conn.execute(sql, (session, text)).unwrap();
    }

    #[test]
    fn the_sessions_of_new_messages_and_the_open_ones_are_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let conn = database(&path);
        conn.execute_batch(
            "INSERT INTO sessions VALUES ('open', '/p', NULL, 1.0, NULL);
             INSERT INTO sessions VALUES ('ended', '/p', 'T', 1.0, 1.2);
             INSERT INTO sessions VALUES ('later', '/p', NULL, 1.0, 1.2);",
        )
        .unwrap();
        say(&conn, "ended", "one");
        let reader = open(&path).unwrap();
        let first = changed(&reader, 0).unwrap();
        assert_eq!((first.sessions.len(), first.mark), (3, 1));
        let quiet = changed(&reader, first.mark).unwrap();
        assert_eq!(quiet.sessions, ["open"], "an open session may still change");
        say(&conn, "later", "two");
        let next = changed(&reader, quiet.mark).unwrap();
        assert_eq!(
            (next.sessions.as_slice(), next.mark),
            (&["later".to_owned(), "open".into()][..], 2)
        );
        assert_eq!(next.all.len(), 3);
        // Its end, with no message after the mark, is read (and again at each change, until a
        // message written after it moves the mark past its time).
        conn.execute("UPDATE sessions SET ended_at = 9.0 WHERE id = 'open'", [])
            .unwrap();
        let ended = changed(&reader, next.mark).unwrap();
        assert_eq!(ended.sessions, ["open"]);
        // A mark past the last message (the table made anew) reads everything.
        let anew = changed(&reader, 100).unwrap();
        assert_eq!(anew.sessions.len(), 3);
    }

    #[test]
    fn a_session_is_its_row_then_its_messages_in_the_order_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let conn = database(&path);
        conn.execute(
            "INSERT INTO sessions VALUES ('s', '/p', 'Fix', 1.25, NULL)",
            [],
        )
        .unwrap();
        say(&conn, "s", "first");
        say(&conn, "s", "second");
        let reader = open(&path).unwrap();
        let doc: Value = serde_json::from_slice(&document(&reader, "s").unwrap().unwrap()).unwrap();
        assert_eq!(doc["session"]["cwd"], "/p");
        assert_eq!(doc["messages"][1]["content"], "second");
        let session = hermes(doc.as_object().unwrap()).unwrap();
        assert_eq!(session.at_ms, Some(1250));
        assert_eq!(session.title, Some(("Fix".into(), 2)));
        assert!(document(&reader, "none").unwrap().is_none());
    }

    #[test]
    fn a_reply_with_a_tool_call_and_the_tools_row_are_read_as_such() {
        let reply = serde_json::json!({"id": 2, "session_id": "s", "role": "assistant",
            "content": "Running it.", "timestamp": 2.0, "tool_calls": [{"id": "c1",
            "type": "function", "function": {"name": "terminal",
            "arguments": "{\"command\": \"echo hi\"}"}}]});
        let parsed = hermes(reply.as_object().unwrap()).unwrap();
        let message = parsed.message.unwrap();
        assert_eq!(message.role, Role::Assistant);
        assert!(matches!(&message.parts[1], Part::ToolCall { name, .. } if name == "terminal"));
        // As the database's reader gives it: the column's JSON text as its value.
        let result = serde_json::json!({"id": 3, "session_id": "s", "role": "tool",
            "content": {"output": "hi"}, "timestamp": 2.5});
        let message = hermes(result.as_object().unwrap())
            .unwrap()
            .message
            .unwrap();
        assert_eq!(message.role, Role::Tool);
        assert!(matches!(&message.parts[0], Part::ToolResult(t) if t.contains("hi")));
    }
}
