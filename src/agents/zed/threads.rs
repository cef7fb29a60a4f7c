//! Zed's threads database, `threads/threads.db` in its data directory: one row per thread
//! (`id`, `summary`, `updated_at` in RFC 3339, `data_type`, `data`, and in later releases
//! `parent_id`, `folder_paths`, `folder_paths_order`, `created_at`), the thread serialised as
//! JSON in `data`: compressed with zstd where `data_type` is `zstd`, plain where it is `json`
//! or `thread-v1` (what the first agent's `save_thread` wrote). Each save writes the whole row
//! again (zed-industries/zed, `crates/agent/src/db.rs` at 0642ec7e49e2, and before it
//! `crates/agent/src/thread_store.rs` at 04b75d74548e).
//!
//! A thread is given to the engine as one document: `{"row": <its columns but data>,
//! "thread": <the thread without its messages>, "messages": [{"key", "message"}]}`, each
//! message as Zed wrote it with the key it is archived under ([`message_keys`]).
//!
//! Zed keeps no log of its changes and rewrites a row in place (or, in early releases,
//! deletes and inserts it): what changed since the last read is the threads whose
//! `updated_at` (the time of the thread's last change, which each save writes) is at or
//! after the mark, the latest one read, in milliseconds.

use crate::domain::{MAX_SNAPSHOT, SnapshotFormat, SnapshotSpec};
use crate::read::database::{Changed, SqliteFormat, Written, changed_since};
use crate::read::database::{column_value, in_read_transaction, unzstd};
use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::io;

/// Zed's threads database, as its watcher's `[[database]]` `reader = "zed"` names it.
pub(crate) static DATABASE: SqliteFormat = SqliteFormat {
    name: "zed",
    spec,
    changed,
    document,
};

/// The versions of a thread's JSON this reader was written from: the first agent's
/// `SerializedThread` (none, `0.1.0`, `0.2.0`) and the agent's `DbThread` (`0.3.0`).
const VERSIONS: [&str; 3] = ["0.1.0", "0.2.0", "0.3.0"];

/// A row's `updated_at` in milliseconds since the epoch (SQLite reads RFC 3339 with its
/// fraction and offset; NULL for text that is no time).
const UPDATED_MS: &str = "CAST(round((julianday(updated_at) - 2440587.5) * 86400000) AS INTEGER)";

/// How a thread's document keeps its messages.
fn spec() -> SnapshotSpec {
    SnapshotSpec {
        messages: Some("/messages".into()),
        key: "/key".into(),
        format: SnapshotFormat::Json,
    }
}

/// The threads changed since mark `since` (the latest `updated_at` then, in ms).
fn changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    let written = Written {
        table: "threads",
        id: "id",
        at: UPDATED_MS,
    };
    changed_since(conn, &written, since)
}

/// Thread `id`'s document, read in one read transaction; `None` when there is no such thread
/// (any more). Its `data` that cannot be read as JSON is a `FromSqlConversionFailure`.
fn document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    let row = in_read_transaction(conn, || {
        let mut stmt = conn.prepare_cached("SELECT * FROM threads WHERE id = ?1")?;
        let names: Vec<String> = stmt.column_names().map(String::from).collect();
        stmt.query_row([id], |r| read_row(r, &names)).optional()
    })?;
    let Some(row) = row else {
        return Ok(None);
    };
    // Fails this thread's read, not the database's (`read::database`).
    let undecodable =
        |e| rusqlite::Error::FromSqlConversionFailure(row.data_at, Type::Blob, Box::new(e));
    let data_type = row.columns.get("data_type").and_then(Value::as_str);
    let json = thread_json(data_type.unwrap_or(""), &row.data, MAX_SNAPSHOT);
    let json = json.map_err(undecodable)?;
    let path = conn.path().unwrap_or_default();
    let doc = thread_document(path, row.columns, &json).map_err(undecodable)?;
    Ok(Some(doc))
}

/// A thread's row: its columns but `data`, as JSON, and `data` (a blob, or text in the first
/// agent's table) with its place among the columns.
struct Row {
    columns: Map<String, Value>,
    data: Vec<u8>,
    data_at: usize,
}

fn read_row(r: &rusqlite::Row<'_>, names: &[String]) -> rusqlite::Result<Row> {
    let mut row = Row {
        columns: Map::new(),
        data: Vec::new(),
        data_at: 0,
    };
    for (i, name) in names.iter().enumerate() {
        let value = r.get_ref(i)?;
        if name == "data" {
            row.data = value.as_bytes_or_null()?.unwrap_or_default().to_vec();
            row.data_at = i;
        } else {
            row.columns.insert(name.clone(), column_value(value));
        }
    }
    Ok(row)
}

/// Why a thread's `data` is not read.
#[derive(Debug, thiserror::Error)]
enum DataError {
    #[error("its data cannot be decompressed (zstd): {0}")]
    Zstd(io::Error),
    #[error("its data is more bytes decompressed than a document may have")]
    TooLarge,
    #[error("its data is not a thread's JSON: {0}")]
    Json(serde_json::Error),
}

/// The thread's JSON: `data` decompressed where `data_type` says zstd (at most `limit` bytes
/// of it), else as it is.
fn thread_json(data_type: &str, data: &[u8], limit: u64) -> Result<Vec<u8>, DataError> {
    if data_type != "zstd" {
        return Ok(data.to_vec());
    }
    unzstd(data, limit)
        .map_err(DataError::Zstd)?
        .ok_or(DataError::TooLarge)
}

/// A thread's document as the engine captures it.
#[derive(Serialize)]
struct Document<'a> {
    row: Map<String, Value>,
    thread: BTreeMap<String, &'a RawValue>,
    messages: Vec<Keyed<'a>>,
}

/// A message as Zed wrote it, with the key it is archived under.
#[derive(Serialize)]
struct Keyed<'a> {
    key: String,
    message: &'a RawValue,
}

/// The document of the thread in database `path` whose row is `row` and JSON is `json`: its
/// messages taken out of the thread (a thread without a list of messages keeps what it has).
fn thread_document(path: &str, row: Map<String, Value>, json: &[u8]) -> Result<Vec<u8>, DataError> {
    let mut thread: BTreeMap<String, &RawValue> =
        serde_json::from_slice(json).map_err(DataError::Json)?;
    note_version(path, &thread);
    let list = thread.get("messages").copied();
    let messages = match list.and_then(|l| serde_json::from_str::<Vec<&RawValue>>(l.get()).ok()) {
        Some(messages) => {
            thread.remove("messages");
            messages
        }
        None => Vec::new(),
    };
    let keys = message_keys(&messages);
    let messages = (keys.into_iter().zip(messages))
        .map(|(key, message)| Keyed { key, message })
        .collect();
    let doc = Document {
        row,
        thread,
        messages,
    };
    Ok(serde_json::to_vec(&doc).expect("a document of JSON values serialises"))
}

/// The key each message is archived under: a user message's id (a UUID), the first agent's
/// message number, and for a reply or a resume (which have no id) the key of the user message
/// before it with its place after that one (`<id>+1`, `<id>+2`): a reply that grows keeps its
/// key, and the replies to a prompt edited and sent again (Zed truncates the thread there and
/// sends it under a new id) get keys of their own.
fn message_keys(messages: &[&RawValue]) -> Vec<String> {
    let mut after = String::new();
    let mut place = 0;
    let key = |message: &&RawValue| match own_id(message) {
        Some(OwnId::User(id)) => {
            (after, place) = (id.clone(), 0);
            id
        }
        Some(OwnId::Numbered(id)) => id,
        None => {
            place += 1;
            format!("{after}+{place}")
        }
    };
    messages.iter().map(key).collect()
}

/// The id a message has of its own.
enum OwnId {
    /// The agent's user message's (`{"User": {"id": …}}`).
    User(String),
    /// The first agent's message's (`{"id": 3, "role": …}`).
    Numbered(String),
}

/// What of a message's shape says its id.
#[derive(Deserialize)]
struct Shape {
    #[serde(rename = "User")]
    user: Option<UserShape>,
    id: Option<Value>,
}

#[derive(Deserialize)]
struct UserShape {
    id: Option<String>,
}

fn own_id(message: &RawValue) -> Option<OwnId> {
    let shape: Shape = serde_json::from_str(message.get()).ok()?;
    if let Some(id) = shape.user.and_then(|u| u.id) {
        return Some(OwnId::User(id));
    }
    match shape.id? {
        Value::String(id) => Some(OwnId::Numbered(id)),
        Value::Number(n) => Some(OwnId::Numbered(n.to_string())),
        _ => None,
    }
}

/// Logs, once per database and version, a thread of a version this reader does not know: it
/// is archived as it is, its messages read where their shape is one it knows.
fn note_version(path: &str, thread: &BTreeMap<String, &RawValue>) {
    let Some(raw) = thread.get("version") else {
        return;
    };
    let version = serde_json::from_str::<String>(raw.get()).unwrap_or_else(|_| raw.to_string());
    if VERSIONS.contains(&version.as_str()) {
        return;
    }
    static WARNED: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    let seen = (path.to_owned(), version);
    if !warned.contains(&seen) {
        log::warn!(
            "{path}: a thread of version {:?}, which this release does not know: archived as it \
             is, its messages read where their shape is one it knows",
            seen.1
        );
        warned.push(seen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::database::open;

    /// Zed's table as the agent makes it, in an older database whose `data` was text.
    fn database(path: &std::path::Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "CREATE TABLE threads (id TEXT PRIMARY KEY, summary TEXT NOT NULL,
                 updated_at TEXT NOT NULL, data_type TEXT NOT NULL, data TEXT NOT NULL);
             ALTER TABLE threads ADD COLUMN parent_id TEXT;
             ALTER TABLE threads ADD COLUMN folder_paths TEXT;
             ALTER TABLE threads ADD COLUMN folder_paths_order TEXT;
             ALTER TABLE threads ADD COLUMN created_at TEXT;",
        )
        .unwrap();
        conn
    }

    /// Saves thread `id` as Zed does, its JSON compressed when `zstd`.
    fn save(conn: &Connection, id: &str, at: &str, thread: &Value, zstd: bool) {
        let json = serde_json::to_vec(thread).unwrap();
        let (data_type, data) = match zstd {
            true => ("zstd", zstd::encode_all(json.as_slice(), 3).unwrap()),
            false => ("json", json),
        };
        conn.execute(
            "INSERT INTO threads (id, summary, updated_at, data_type, data, created_at)
             VALUES (?1, 'T', ?2, ?3, ?4, ?2)
             ON CONFLICT(id) DO UPDATE SET updated_at = excluded.updated_at,
                 data_type = excluded.data_type, data = excluded.data",
            (id, at, data_type, data),
        )
        .unwrap();
    }

    fn thread(messages: Value) -> Value {
        serde_json::json!({"title": "T", "messages": messages, "version": "0.3.0",
            "updated_at": "2026-09-23T08:00:00Z"})
    }

    #[test]
    fn only_threads_saved_since_the_marks_millisecond_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("threads.db");
        let conn = database(&path);
        let empty = thread(serde_json::json!([]));
        save(&conn, "a", "2026-09-23T08:00:00.250+00:00", &empty, true);
        save(&conn, "b", "2026-09-23T08:00:01+00:00", &empty, false);
        let reader = open(&path).unwrap();
        let first = changed(&reader, 0).unwrap();
        assert_eq!(
            (&first.sessions[..], first.mark),
            (&["a".to_owned(), "b".into()][..], 1_790_150_401_000)
        );
        let again = changed(&reader, first.mark).unwrap();
        assert_eq!(
            again.sessions,
            ["b"],
            "the mark's millisecond is read again"
        );
        save(&conn, "a", "2026-09-23T08:00:02.123456+00:00", &empty, true);
        let next = changed(&reader, again.mark).unwrap();
        assert_eq!(next.mark, 1_790_150_402_123);
        assert_eq!(next.sessions, ["a", "b"], "a saved since, b at the mark");
        assert_eq!(changed(&reader, next.mark).unwrap().sessions, ["a"]);
        conn.execute("DELETE FROM threads WHERE id = 'a'", [])
            .unwrap();
        // The newest thread deleted, the mark is past every row: each is read again (and
        // compared with its last state).
        let gone = changed(&reader, next.mark).unwrap();
        assert_eq!(
            (gone.all.len(), gone.sessions, gone.mark),
            (1, vec!["b".to_owned()], 1_790_150_401_000)
        );
    }

    #[test]
    fn a_thread_is_its_row_its_json_and_its_messages_each_keyed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("threads.db");
        let conn = database(&path);
        let messages = serde_json::json!([
            {"User": {"id": "u1", "content": [{"Text": "first"}]}},
            {"Agent": {"content": [{"Text": "one"}], "tool_results": {}}},
            "Resume",
            {"Agent": {"content": [{"Text": "two"}], "tool_results": {}}},
            {"User": {"id": "u2", "content": [{"Text": "second"}]}},
            {"Agent": {"content": [{"Text": "three"}], "tool_results": {}}},
        ]);
        save(
            &conn,
            "t",
            "2026-09-23T08:00:00+00:00",
            &thread(messages),
            true,
        );
        let reader = open(&path).unwrap();
        let doc: Value = serde_json::from_slice(&document(&reader, "t").unwrap().unwrap()).unwrap();
        assert_eq!(doc["row"]["summary"], "T");
        assert!(doc["row"].get("data").is_none());
        assert_eq!(doc["thread"]["version"], "0.3.0");
        assert!(doc["thread"].get("messages").is_none());
        let keys: Vec<&str> = (doc["messages"].as_array().unwrap().iter())
            .map(|m| m["key"].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["u1", "u1+1", "u1+2", "u1+3", "u2", "u2+1"]);
        assert_eq!(doc["messages"][2]["message"], "Resume");
        assert!(document(&reader, "none").unwrap().is_none());
    }

    #[test]
    fn the_first_agents_messages_are_keyed_by_their_numbers() {
        let json = serde_json::json!({"version": "0.2.0", "summary": "S", "messages": [
            {"id": 0, "role": "user", "segments": []},
            {"id": 1, "role": "assistant", "segments": []}]});
        let row = Map::new();
        let doc = thread_document("db", row, json.to_string().as_bytes()).unwrap();
        let doc: Value = serde_json::from_slice(&doc).unwrap();
        assert_eq!(doc["messages"][1]["key"], "1");
        assert_eq!(doc["thread"]["summary"], "S");
    }

    #[test]
    fn data_that_is_not_a_thread_fails_that_thread_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("threads.db");
        let conn = database(&path);
        conn.execute(
            "INSERT INTO threads (id, summary, updated_at, data_type, data)
             VALUES ('cut', 'T', '2026-09-23T08:00:00+00:00', 'zstd', X'28B52FFD00')",
            [],
        )
        .unwrap();
        // As the engine reads it: that thread's data is invalid, the database is readable.
        use crate::domain::DatabaseFormat;
        let db = DATABASE.open(&path).unwrap();
        let err = db.document("cut").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        assert!(err.to_string().contains("cannot be decompressed"), "{err}");
        assert_eq!(db.changed(0).unwrap().sessions, ["cut"]);
        // A bomb: more than a document may have, never held whole.
        let bomb = zstd::encode_all(&[b' '; 4096][..], 3).unwrap();
        assert!(matches!(
            thread_json("zstd", &bomb, 1024),
            Err(DataError::TooLarge)
        ));
        assert_eq!(thread_json("zstd", &bomb, 4096).unwrap().len(), 4096);
        assert_eq!(thread_json("thread-v1", b"{}", 1).unwrap(), b"{}");
    }
}
