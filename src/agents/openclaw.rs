//! OpenClaw: each agent's sessions under `~/.openclaw/agents/<agent>/` (`$OPENCLAW_STATE_DIR`),
//! as Pi's session entries (OpenClaw runs Pi's agent), kept two ways.
//!
//! Since 2026.7.2 in one SQLite database in WAL mode, `agent/openclaw-agent.sqlite` (agent
//! schema 23 in 2026.9.6), read as one JSON document per session (`read::database`):
//! `{"session": <its row of session_windows>, "messages": [<each event>]}`. An event is a row
//! of `transcript_events` (`session_id`, `seq` from 0, `created_at` in ms), its JSON in
//! `event_json`, or, for one of 1 KiB or more that compresses, zstd-compressed in `event_zstd`
//! with its length in `event_utf8_bytes`; the first is the `session` header, which names the
//! working folder. Events are only appended; a compaction is one more (`compaction`).
//!
//! Until 2026.7.1 as Pi's JSONL, `sessions/<id>.jsonl`, appended to, read as Pi's are.

use super::Agent;
use super::message::*;
use super::pi::pi;
use super::restore::{self, Restore, Resume};
use super::session;
use crate::capture::harness::Formats;
use crate::domain::{MAX_SNAPSHOT, SnapshotFormat, SnapshotSpec};
use crate::read::database::unzstd;
use crate::read::database::{Changed, SqliteFormat, Written, changed_since};
use crate::read::database::{column_value, in_read_transaction, row_object, session_document};
use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension};
use serde_json::{Map, Value};

/// OpenClaw (its SQLite database, its JSONL before).
pub(crate) static AGENT: Agent = Agent {
    name: "openclaw",
    watcher: include_str!("../../watchers/openclaw.toml"),
    formats: Formats {
        databases: &[&DATABASE],
        documents: &[],
    },
    parse: openclaw,
    unread: &[],
    identify: session::by_record_or_uuid,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `openclaw agent --local --session-id ID`, which takes the next message with `--message`
/// (its embedded agent: no Gateway). Its state directory holds its configuration too: there
/// is no command for files put elsewhere.
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!(
        "{}openclaw agent --local --session-id {}",
        r.cd,
        restore::shell_quote(r.id)
    ))
}

/// A session's row of the database, or one of its events (a line of its JSONL): Pi's entries.
fn openclaw(obj: &Map<String, Value>) -> Option<Parsed> {
    match obj.get("session").and_then(Value::as_object) {
        Some(row) => Some(window(row)),
        None => pi(obj),
    }
}

/// What a session's row says: its id, model, start (ms) and the name it was given.
fn window(row: &Map<String, Value>) -> Parsed {
    Parsed {
        session_id: string(row, "session_id"),
        title: string(row, "display_name").map(|t| (title_of(&t), 2)),
        model: string(row, "model"),
        at_ms: row.get("created_at").and_then(Value::as_i64),
        ..Parsed::default()
    }
}

/// OpenClaw's database, as its watcher's `[[database]]` `reader = "openclaw"` names it.
pub(crate) static DATABASE: SqliteFormat = SqliteFormat {
    name: "openclaw",
    spec,
    changed,
    document,
};

/// How a session's document keeps its events: each by its id (the header's is the session's).
fn spec() -> SnapshotSpec {
    SnapshotSpec {
        messages: Some("/messages".into()),
        key: "/id".into(),
        format: SnapshotFormat::Json,
    }
}

/// When a session's row last said it was written, in ms: `transcript_updated_at`, which
/// OpenClaw moves on in the transaction that changes its events, or `updated_at`, at each
/// event appended and each change of the row.
const WRITTEN: &str = "max(updated_at, coalesce(transcript_updated_at, 0))";

/// The sessions written since mark `since` (the latest time a row said, in ms).
fn changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    let written = Written {
        table: "session_windows",
        id: "session_id",
        at: WRITTEN,
    };
    changed_since(conn, &written, since)
}

/// Session `id`'s document, read in one read transaction; `None` when there is no such
/// session (any more). An event whose payload does not decompress fails it
/// (`FromSqlConversionFailure`, naming the event).
fn document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    in_read_transaction(conn, || {
        let mut stmt =
            conn.prepare_cached("SELECT * FROM session_windows WHERE session_id = ?1")?;
        let names: Vec<String> = stmt.column_names().map(String::from).collect();
        let Some(row) = stmt.query_row([id], |r| row_object(r, &names)).optional()? else {
            return Ok(None);
        };
        Ok(Some(session_document(row, events(conn, id)?)))
    })
}

/// Session `id`'s events in the order appended, each its JSON value.
fn events(conn: &Connection, id: &str) -> rusqlite::Result<Vec<Value>> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, event_json, event_zstd, event_utf8_bytes FROM transcript_events
         WHERE session_id = ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map([id], |r| match r.get::<_, Option<Vec<u8>>>(2)? {
        None => Ok(column_value(r.get_ref(1)?)),
        Some(zstd) => decompressed(&zstd, r.get(3)?).map_err(|source| {
            let event = Undecodable {
                session: id.to_owned(),
                seq: r.get(0).unwrap_or(-1),
                source,
            };
            rusqlite::Error::FromSqlConversionFailure(2, Type::Blob, Box::new(event))
        }),
    })?;
    rows.collect()
}

/// An event's JSON from its zstd frame (its length as OpenClaw recorded it, which may be
/// missing, is not trusted: no more than a document may have is held).
fn decompressed(zstd: &[u8], _length: Option<i64>) -> std::io::Result<Value> {
    let Some(bytes) = unzstd(zstd, MAX_SNAPSHOT)? else {
        let why = format!("an event of more than {MAX_SNAPSHOT} bytes");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
    };
    let text = String::from_utf8(bytes).map_err(std::io::Error::other)?;
    Ok(column_value(rusqlite::types::ValueRef::Text(
        text.as_bytes(),
    )))
}

/// An event of OpenClaw's database whose compressed payload could not be read.
#[derive(Debug, thiserror::Error)]
#[error("event {seq} of session {session} does not decompress")]
struct Undecodable {
    session: String,
    seq: i64,
    #[source]
    source: std::io::Error,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::database::open;

    /// OpenClaw's two tables, reduced to the columns read, in WAL mode as OpenClaw keeps them.
    fn database(path: &std::path::Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE session_windows (session_id TEXT PRIMARY KEY, model TEXT,
                 display_name TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
                 transcript_updated_at INTEGER);
             CREATE TABLE transcript_events (session_id TEXT NOT NULL, seq INTEGER NOT NULL,
                 event_json TEXT, created_at INTEGER NOT NULL, event_zstd BLOB,
                 event_utf8_bytes INTEGER, PRIMARY KEY (session_id, seq)) STRICT;",
        )
        .unwrap();
        conn
    }

    /// Session `id` written at `at` ms: its row made or moved on, as OpenClaw does.
    fn written(conn: &Connection, id: &str, at: i64) {
        conn.execute(
            "INSERT INTO session_windows VALUES (?1, 'm', NULL, ?2, ?2, ?2)
             ON CONFLICT DO UPDATE SET transcript_updated_at = ?2",
            (id, at),
        )
        .unwrap();
    }

    fn append(conn: &Connection, id: &str, seq: i64, event: &Value) {
        let json = event.to_string();
        let sql = "INSERT INTO transcript_events VALUES (?1, ?2, ?3, 1, NULL, ?4)";
        conn.execute(sql, (id, seq, &json, json.len() as i64))
            .unwrap();
    }

    #[test]
    fn the_sessions_written_at_or_after_the_mark_are_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw-agent.sqlite");
        let conn = database(&path);
        written(&conn, "a", 1000);
        written(&conn, "b", 2000);
        let reader = open(&path).unwrap();
        let first = changed(&reader, 0).unwrap();
        assert_eq!((first.sessions.len(), first.mark), (2, 2000));
        // The mark's millisecond is read again: a write within it may follow the read.
        let quiet = changed(&reader, first.mark).unwrap();
        assert_eq!(quiet.sessions, ["b"]);
        // An event appended to `a` moves its transcript time on, not its row's `updated_at`
        // (`b` is read again: it was written in the mark's millisecond).
        written(&conn, "a", 3000);
        let next = changed(&reader, quiet.mark).unwrap();
        assert_eq!(
            (next.sessions, next.mark),
            (vec!["a".into(), "b".into()], 3000)
        );
        assert_eq!(changed(&reader, next.mark).unwrap().sessions, ["a"]);
        assert_eq!(next.all.len(), 2);
        // A mark past the latest write (the database made anew) reads everything.
        assert_eq!(changed(&reader, 9000).unwrap().sessions.len(), 2);
    }

    #[test]
    fn a_session_is_its_row_then_its_events_a_compressed_one_decompressed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw-agent.sqlite");
        let conn = database(&path);
        written(&conn, "s", 1250);
        let header = serde_json::json!({"type": "session", "version": 4, "id": "s",
            "timestamp": "2026-12-05T01:07:06.662Z", "cwd": "/p"});
        append(&conn, "s", 0, &header);
        let long = "words ".repeat(300);
        let reply = serde_json::json!({"type": "message", "id": "e2", "parentId": "e1",
            "timestamp": "2026-12-05T01:07:09.273Z",
            "message": {"role": "assistant", "content": [{"type": "text", "text": long}]}});
        let json = reply.to_string();
        let zstd = zstd::bulk::compress(json.as_bytes(), 1).unwrap();
        conn.execute(
            "INSERT INTO transcript_events VALUES ('s', 1, NULL, 2, ?1, ?2)",
            (&zstd, json.len() as i64),
        )
        .unwrap();
        let reader = open(&path).unwrap();
        let doc: Value = serde_json::from_slice(&document(&reader, "s").unwrap().unwrap()).unwrap();
        assert_eq!(doc["messages"][0], header);
        assert_eq!(doc["messages"][1], reply);
        let session = openclaw(doc.as_object().unwrap()).unwrap();
        assert_eq!(
            (session.session_id.as_deref(), session.at_ms),
            (Some("s"), Some(1250))
        );
        let first = openclaw(doc["messages"][0].as_object().unwrap()).unwrap();
        assert_eq!(first.project.as_deref(), Some("/p"));
        let message = openclaw(doc["messages"][1].as_object().unwrap()).unwrap();
        assert_eq!(message.message.unwrap().role, Role::Assistant);
        assert!(document(&reader, "none").unwrap().is_none());
    }

    #[test]
    fn an_event_that_does_not_decompress_fails_its_session_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("openclaw-agent.sqlite");
        let conn = database(&path);
        written(&conn, "s", 1);
        conn.execute(
            "INSERT INTO transcript_events VALUES ('s', 7, NULL, 1, x'00112233', 2000)",
            [],
        )
        .unwrap();
        let reader = open(&path).unwrap();
        let err = document(&reader, "s").unwrap_err();
        assert!(
            matches!(err, rusqlite::Error::FromSqlConversionFailure(..)),
            "{err}"
        );
        assert!(err.to_string().contains("event 7 of session s"), "{err}");
    }

    #[test]
    fn an_event_without_its_recorded_length_decompresses() {
        let frame = zstd::bulk::compress(br#"{"type":"message"}"#, 3).unwrap();
        let event = decompressed(&frame, None).unwrap();
        assert_eq!(event["type"], "message");
    }
}
