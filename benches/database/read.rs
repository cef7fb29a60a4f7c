//! Reading the database without the daemon: the baselines the daemon's reads are set beside.

use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;
use testkit::procfs;

/// A plain `SELECT` of every message's and part's row.
pub(crate) struct BareRead {
    pub(crate) rows: u64,
    pub(crate) bytes: u64,
    pub(crate) secs: f64,
}

pub(crate) fn bare_read(db: &Path) -> BareRead {
    let conn = read_only(db);
    let start = Instant::now();
    let (mut rows, mut bytes) = (0, 0);
    for sql in [
        "SELECT id, session_id, time_created, data FROM message",
        "SELECT id, message_id, session_id, time_created, data FROM part",
    ] {
        let mut stmt = conn.prepare(sql).expect("preparing");
        let mut it = stmt.query([]).expect("querying");
        while let Some(r) = it.next().expect("a row") {
            rows += 1;
            for i in 0..r.as_ref().column_count() {
                bytes += r
                    .get_ref(i)
                    .expect("a column")
                    .as_bytes()
                    .map_or(8, <[u8]>::len) as u64;
            }
        }
    }
    BareRead {
        rows,
        bytes,
        secs: start.elapsed().as_secs_f64(),
    }
}

/// The reader's work redone here: each session's row, parts and messages by its queries,
/// each `data` parsed and the document serialized (`src/agents/opencode.rs`).
pub(crate) struct DocumentsRead {
    pub(crate) sessions: u64,
    pub(crate) bytes: u64,
    pub(crate) secs: f64,
    /// What this process read meanwhile (`rchar`: SQLite's pages).
    pub(crate) read: u64,
}

pub(crate) fn documents_read(db: &Path) -> DocumentsRead {
    let conn = read_only(db);
    let read0 = own_read();
    let start = Instant::now();
    let mut stmt = conn.prepare("SELECT id FROM session").expect("preparing");
    let ids: Vec<String> = (stmt.query_map([], |r| r.get(0)))
        .expect("querying")
        .map(|r| r.expect("an id"))
        .collect();
    let bytes = ids.iter().map(|id| document(&conn, id).len() as u64).sum();
    DocumentsRead {
        sessions: ids.len() as u64,
        bytes,
        secs: start.elapsed().as_secs_f64(),
        read: own_read() - read0,
    }
}

/// This process's `rchar` so far.
pub(crate) fn own_read() -> u64 {
    procfs::io(std::process::id()).map_or(0, |io| io.0)
}

pub(crate) fn read_only(db: &Path) -> Connection {
    Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("opening the database")
}

/// Session `id`'s document, built as the reader builds it.
pub(crate) fn document(conn: &Connection, id: &str) -> Vec<u8> {
    let mut stmt = conn
        .prepare_cached("SELECT * FROM session WHERE id = ?1")
        .expect("preparing");
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let session = stmt
        .query_row([id], |r| {
            let row = names.iter().enumerate().map(|(i, n)| {
                let v = r.get_ref(i).map(json_of).unwrap_or(Value::Null);
                (n.clone(), v)
            });
            Ok(Map::from_iter(row))
        })
        .expect("the session's row");
    let mut parts: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, message_id, data FROM part WHERE session_id = ?1 ORDER BY message_id, id",
        )
        .expect("preparing");
    let mut rows = stmt.query([id]).expect("querying");
    while let Some(r) = rows.next().expect("a part") {
        let (part, message): (String, String) = (r.get(0).expect("id"), r.get(1).expect("id"));
        let mut data = json_of(r.get_ref(2).expect("data"));
        data["id"] = part.into();
        data["messageID"] = message.clone().into();
        parts.entry(message).or_default().push(data);
    }
    let mut messages = Vec::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created, id",
        )
        .expect("preparing");
    let mut rows = stmt.query([id]).expect("querying");
    while let Some(r) = rows.next().expect("a message") {
        let message: String = r.get(0).expect("id");
        let mut info = json_of(r.get_ref(1).expect("data"));
        info["id"] = message.clone().into();
        info["sessionID"] = id.into();
        let parts = parts.remove(&message).unwrap_or_default();
        messages.push(json!({"info": info, "parts": parts}));
    }
    serde_json::to_vec(&json!({"session": session, "messages": messages})).expect("serializes")
}

/// A column as JSON: text holding an object or a list as that value.
fn json_of(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => json!(f),
        ValueRef::Text(t) if t.starts_with(b"{") || t.starts_with(b"[") => {
            serde_json::from_slice(t).unwrap_or_else(|_| String::from_utf8_lossy(t).into())
        }
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into(),
    }
}

/// The daemon's query for the sessions changed since its mark (`src/agents/opencode.rs`), and
/// the same kept to the rowid range (`+` makes `aggregate_id` no index's column).
const CHANGED: [(&str, &str); 2] = [
    (
        "the daemon's: `SELECT DISTINCT aggregate_id FROM event WHERE rowid > ?1 AND \
         aggregate_id IN (SELECT id FROM session)`",
        "SELECT DISTINCT aggregate_id FROM event WHERE rowid > ?1
         AND aggregate_id IN (SELECT id FROM session)",
    ),
    (
        "the same with `+aggregate_id` (the rowid range only)",
        "SELECT DISTINCT +aggregate_id FROM event WHERE rowid > ?1
         AND +aggregate_id IN (SELECT id FROM session)",
    ),
];

/// One way of finding what changed: its plan, and its time and `rchar` on a new connection
/// (as the daemon opens one for each read), best of three.
pub(crate) struct Finding {
    pub(crate) label: &'static str,
    pub(crate) plan: String,
    pub(crate) ms: f64,
    pub(crate) read: u64,
}

/// [`CHANGED`]'s queries asked for what changed in the last 20 events.
pub(crate) fn finding_changes(db: &Path) -> Vec<Finding> {
    let last: i64 = (read_only(db).query_row("SELECT max(rowid) FROM event", [], |r| r.get(0)))
        .expect("the last event");
    let since = last - 20;
    (CHANGED.iter())
        .map(|&(label, sql)| {
            let conn = read_only(db);
            let mut stmt = (conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))).expect("explain");
            let plan: Vec<String> = (stmt.query_map([since], |r| r.get(3)))
                .expect("explain")
                .map(|r| r.expect("a step"))
                .collect();
            let (mut ms, mut read) = (f64::MAX, u64::MAX);
            for _ in 0..3 {
                let conn = read_only(db);
                let (read0, start) = (own_read(), Instant::now());
                let mut stmt = conn.prepare(sql).expect("preparing");
                let ids = (stmt.query_map([since], |r| r.get::<_, String>(0)))
                    .expect("querying")
                    .count();
                assert!(ids > 0, "the last events name a session");
                ms = ms.min(start.elapsed().as_secs_f64() * 1e3);
                read = read.min(own_read() - read0);
            }
            Finding {
                label,
                plan: plan.join("; "),
                ms,
                read,
            }
        })
        .collect()
}
