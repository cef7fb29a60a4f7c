//! OpenCode's SQLite database (OpenCode 1.2 and later: `opencode.db`), read as one JSON
//! document per session (`read::database`): the session's row, then its messages in order,
//! each with its parts, in OpenCode's own shape (`{"info": {...}, "parts": [...]}`).
//!
//! What changed since the last read is found through OpenCode's own log of changes (`event`,
//! whose rowid only grows), or, in a database without one, through the sessions' and
//! messages' `time_updated`.
//!
//! Its records: the documents its database is read as (below), a session's
//! row (`{"session": {...}, "messages": []}`) and each message with its parts
//! (`{"info": {...}, "parts": [...]}`: text, reasoning, tool calls with their state).

pub(crate) mod storage;

use super::Agent;
use super::message::*;
use super::restore::{self, Restore};
use super::session::Identified;
use crate::capture::harness::Formats;
use crate::domain::{SnapshotFormat, SnapshotSpec};
use crate::read::database::SqliteFormat;
use crate::read::database::{
    Changed, column, in_read_transaction, object, row_object, session_document,
};
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// OpenCode (its SQLite database, and its store of files before 1.2).
pub(crate) static AGENT: Agent = Agent {
    name: "opencode",
    watcher: include_str!("../../watchers/opencode.toml"),
    formats: Formats {
        databases: &[&DATABASE, &storage::Storage],
        documents: &[],
    },
    parse: opencode,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};

pub(super) fn opencode(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed::default();
    if let Some(session) = obj.get("session").and_then(Value::as_object) {
        parsed.session_id = string(session, "id");
        parsed.project = string(session, "directory");
        // Until its title is made, a session is "New session - <time>".
        let title = string(session, "title").filter(|t| !t.starts_with("New session - "));
        parsed.title = title.map(|t| (title_of(&t), 2));
        return Some(parsed);
    }
    let info = obj.get("info")?.as_object()?;
    parsed.session_id = string(info, "sessionID");
    parsed.at_ms = info.get("time").and_then(|t| t.get("created")?.as_i64());
    let mut parts = Vec::new();
    for part in obj.get("parts")?.as_array()? {
        let part = part.as_object()?;
        match part.get("type").and_then(Value::as_str)? {
            "text" => parts.extend(string(part, "text").map(Part::Text)),
            "reasoning" => parts.extend(string(part, "text").map(Part::Thinking)),
            "tool" => {
                let state = part.get("state").and_then(Value::as_object);
                parts.push(Part::ToolCall {
                    name: string(part, "tool").unwrap_or_default(),
                    input: input_text(state.and_then(|s| s.get("input"))),
                });
                let output = state.and_then(|s| s.get("output").or_else(|| s.get("error")));
                if output.is_some() {
                    parts.push(Part::ToolResult(result_text(output)));
                }
            }
            "file" => {
                let name = string(part, "filename").or_else(|| string(part, "url"));
                parts.push(Part::Text(format!("[file {}]", name.unwrap_or_default())));
            }
            // Steps, snapshots and patches are the agent's bookkeeping.
            _ => {}
        }
    }
    let role = match info.get("role").and_then(Value::as_str)? {
        "user" => role_of(Role::User, &parts),
        "assistant" => Role::Assistant,
        _ => Role::System,
    };
    match role {
        Role::User => parsed.prompt = typed_prompt(&parts),
        Role::Assistant => parsed.model = string(info, "modelID"),
        _ => {}
    }
    // A reply's tokens (its input without the cached), written again as it streams.
    if let Some(tokens) = info.get("tokens").and_then(Value::as_object) {
        let cache = tokens.get("cache").and_then(Value::as_object);
        let n = |o: Option<&Map<String, Value>>, k: &str| {
            o.and_then(|o| o.get(k)?.as_i64()).unwrap_or(0)
        };
        parsed.usage = Some(
            Usage {
                input: n(Some(tokens), "input"),
                output: n(Some(tokens), "output") + n(Some(tokens), "reasoning"),
                cache_read: n(cache, "read"),
                cache_write: n(cache, "write"),
                ..Usage::default()
            }
            .keyed(string(info, "id"), parsed.model.clone()),
        );
    }
    parsed.message = Some(Message {
        upsert: true,
        ..Message::new(string(info, "id"), role, parts)
    });
    Some(parsed)
}

/// OpenCode's database (1.2 and later), as its watcher's `[[database]]` `reader = "opencode"` names it.
pub(crate) static DATABASE: SqliteFormat = SqliteFormat {
    name: "opencode",
    spec,
    changed,
    document,
};

/// How a session's document keeps its messages.
pub(crate) fn spec() -> SnapshotSpec {
    SnapshotSpec {
        messages: Some("/messages".into()),
        key: "/info/id".into(),
        format: SnapshotFormat::Json,
    }
}

/// The sessions changed since `since`, read in one read transaction.
pub(crate) fn changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    in_read_transaction(conn, || read_changed(conn, since))
}

fn read_changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    let has_events: bool = conn.query_row(
        "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'event'",
        [],
        |r| r.get(0),
    )?;
    let mut changed = Changed::default();
    let ids: Vec<String> = if has_events {
        let last: i64 = conn.query_row("SELECT coalesce(max(rowid), 0) FROM event", [], |r| {
            r.get(0)
        })?;
        // A mark past the log's end is not a rowid of it (the log was emptied, or the mark
        // came from a database without one): everything is read again.
        let since = if since > last { 0 } else { since };
        changed.mark = last;
        match since {
            0 => column(conn, "SELECT id FROM session", [])?,
            _ => column(
                conn,
                // `+`: the rowid range, not an index search per session over the whole log
                // (which read 15 MB at each change of a 1 GB database, BENCHMARKS.md).
                "SELECT DISTINCT aggregate_id FROM event WHERE rowid > ?1
                 AND +aggregate_id IN (SELECT id FROM session)",
                [since],
            )?,
        }
    } else {
        changed.mark = conn.query_row(
            "SELECT max(coalesce((SELECT max(time_updated) FROM session), 0),
                        coalesce((SELECT max(time_updated) FROM message), 0))",
            [],
            |r| r.get(0),
        )?;
        // Changes within the mark's millisecond may have come after it: read again.
        column(
            conn,
            "SELECT id FROM session WHERE time_updated >= ?1
             UNION SELECT session_id FROM message WHERE time_updated >= ?1",
            [since],
        )?
    };
    changed.sessions = ids;
    changed.sessions.sort();
    changed.sessions.dedup();
    changed.all = column(conn, "SELECT id FROM session", [])?
        .into_iter()
        .collect();
    Ok(changed)
}

/// Session `id`'s document, read in one read transaction: its row, then its messages (by
/// creation, then id) with their parts (by id: OpenCode's ids grow with time); `None` when
/// there is no such session (any more).
pub(crate) fn document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    in_read_transaction(conn, || read_document(conn, id))
}

fn read_document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    let mut stmt = conn.prepare_cached("SELECT * FROM session WHERE id = ?1")?;
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let session = stmt.query_row([id], |r| row_object(r, &names)).optional()?;
    let Some(session) = session else {
        return Ok(None);
    };
    let mut parts: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut stmt = conn.prepare_cached(
        "SELECT id, message_id, data FROM part WHERE session_id = ?1 ORDER BY message_id, id",
    )?;
    let mut rows = stmt.query(params![id])?;
    while let Some(r) = rows.next()? {
        let (part, message): (String, String) = (r.get(0)?, r.get(1)?);
        let mut data = object(r.get_ref(2)?);
        data.insert("id".into(), part.into());
        data.insert("messageID".into(), message.clone().into());
        parts.entry(message).or_default().push(Value::Object(data));
    }
    let mut messages = Vec::new();
    let mut stmt = conn.prepare_cached(
        "SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created, id",
    )?;
    let mut rows = stmt.query(params![id])?;
    while let Some(r) = rows.next()? {
        let message: String = r.get(0)?;
        let mut info = object(r.get_ref(1)?);
        info.insert("id".into(), message.clone().into());
        info.insert("sessionID".into(), id.into());
        let parts = parts.remove(&message).unwrap_or_default();
        messages.push(serde_json::json!({"info": info, "parts": parts}));
    }
    Ok(Some(session_document(session, messages)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::database::open;
    use std::path::Path;

    /// The tables OpenCode 1.18 reads and writes here, reduced to the columns read.
    fn database(dir: &Path, events: bool) -> Connection {
        let conn = Connection::open(dir.join("opencode.db")).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE session (id TEXT PRIMARY KEY, directory TEXT, title TEXT,
                 model TEXT, time_created INTEGER, time_updated INTEGER);
             CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER,
                 time_updated INTEGER, data TEXT);
             CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT,
                 time_created INTEGER, time_updated INTEGER, data TEXT);",
        )
        .unwrap();
        if events {
            conn.execute_batch(
                "CREATE TABLE event (id TEXT PRIMARY KEY, aggregate_id TEXT, seq INTEGER,
                     type TEXT, data TEXT);",
            )
            .unwrap();
        }
        conn
    }

    fn add(conn: &Connection, session: &str, message: &str, text: &str, at: i64, events: bool) {
        conn.execute(
            "INSERT OR REPLACE INTO session VALUES (?1, '/w', 'T', '{\"id\":\"m\"}', 1, ?2)",
            params![session, at],
        )
        .unwrap();
        let data = serde_json::json!({"role": "user", "time": {"created": at}}).to_string();
        conn.execute(
            "INSERT INTO message VALUES (?1, ?2, ?3, ?3, ?4)",
            params![message, session, at, data],
        )
        .unwrap();
        let part = serde_json::json!({"type": "text", "text": text}).to_string();
        conn.execute(
            "INSERT INTO part VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
            params![format!("prt_{message}"), message, session, at, part],
        )
        .unwrap();
        if events {
            conn.execute(
                "INSERT INTO event VALUES (?1, ?2, 1, 'message.updated.1', '{}')",
                params![format!("evt_{message}"), session],
            )
            .unwrap();
        }
    }

    #[test]
    fn a_session_is_its_row_then_its_messages_each_with_its_parts() {
        let dir = tempfile::tempdir().unwrap();
        let conn = database(dir.path(), true);
        add(&conn, "ses_a", "msg_1", "hello", 10, true);
        let reader = open(&dir.path().join("opencode.db")).unwrap();
        let read = changed(&reader, 0).unwrap();
        assert_eq!(read.sessions, ["ses_a"]);
        let doc = document(&reader, "ses_a").unwrap().unwrap();
        let doc: Value = serde_json::from_slice(&doc).unwrap();
        assert_eq!(doc["session"]["model"]["id"], "m");
        assert_eq!(doc["session"]["directory"], "/w");
        let message = &doc["messages"][0];
        assert_eq!(message["info"]["id"], "msg_1");
        assert_eq!(message["info"]["sessionID"], "ses_a");
        assert_eq!(message["parts"][0]["text"], "hello");
        assert_eq!(message["parts"][0]["messageID"], "msg_1");
    }

    #[test]
    fn only_sessions_changed_since_the_mark_are_read_by_the_log_or_by_time() {
        for events in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let conn = database(dir.path(), events);
            add(&conn, "ses_a", "msg_1", "one", 10, events);
            add(&conn, "ses_b", "msg_2", "two", 20, events);
            let reader = open(&dir.path().join("opencode.db")).unwrap();
            let first = changed(&reader, 0).unwrap();
            assert_eq!(first.sessions, ["ses_a", "ses_b"]);
            add(&conn, "ses_b", "msg_3", "three", 30, events);
            let next = changed(&reader, first.mark).unwrap();
            assert_eq!(next.sessions, ["ses_b"], "events: {events}");
            assert_eq!(next.all.len(), 2);
            assert!(document(&reader, "ses_x").unwrap().is_none());
        }
    }
}
