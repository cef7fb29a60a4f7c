//! Agents' SQLite databases (OpenCode's `opencode.db`, Crush's `crush.db`), read as one JSON
//! document per session, which the engine captures as it captures a file rewritten whole
//! (`read::snapshot`). Each agent's tables have a reader of their own (`read::opencode`,
//! `read::crush`); what they share is here: a read-only connection, read transactions (a
//! consistent snapshot; in WAL mode a reader never blocks the agent's writes), and columns
//! as JSON.

use super::{crush, opencode};
use crate::domain::{DatabaseReader, SnapshotSpec};
use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

/// A read-only connection to the database at `path`, waiting up to a second for a lock.
pub(crate) fn open(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(Duration::from_secs(1))?;
    Ok(conn)
}

/// What changed since mark `since` (0: everything).
#[derive(Debug, Default)]
pub(crate) struct Changed {
    /// The sessions whose rows, messages or parts changed, in id order: each is read with
    /// [`document`], one at a time.
    pub sessions: Vec<String>,
    /// Every session the database holds.
    pub all: HashSet<String>,
    /// The mark to give the next read: taken before any document is read, so that what
    /// changes while they are read is read again (and found the same where it is).
    pub mark: i64,
}

/// The sessions of `reader`'s database changed since mark `since` (0: everything), read in
/// one read transaction.
pub(crate) fn changed(
    reader: DatabaseReader,
    conn: &Connection,
    since: i64,
) -> rusqlite::Result<Changed> {
    match reader {
        DatabaseReader::OpenCode => opencode::changed(conn, since),
        DatabaseReader::Crush => crush::changed(conn, since),
    }
}

/// Session `id`'s document, read in one read transaction; `None` when there is no such
/// session (any more).
pub(crate) fn document(
    reader: DatabaseReader,
    conn: &Connection,
    id: &str,
) -> rusqlite::Result<Option<Vec<u8>>> {
    match reader {
        DatabaseReader::OpenCode => opencode::document(conn, id),
        DatabaseReader::Crush => crush::document(conn, id),
    }
}

/// Where a session's document keeps its messages.
pub(crate) fn spec(reader: DatabaseReader) -> SnapshotSpec {
    match reader {
        DatabaseReader::OpenCode => opencode::spec(),
        DatabaseReader::Crush => crush::spec(),
    }
}

/// `read`, in a read transaction.
pub(crate) fn in_read_transaction<T>(
    conn: &Connection,
    read: impl FnOnce() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.execute_batch("BEGIN")?;
    let result = read();
    conn.execute_batch("COMMIT")?;
    result
}

/// The first column of `sql`'s rows, as text.
pub(crate) fn column(
    conn: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map(p, |r| r.get(0))?;
    rows.collect()
}

/// A row as a JSON object of its columns (as [`column_value`] gives them).
pub(crate) fn row_object(
    r: &rusqlite::Row<'_>,
    names: &[String],
) -> rusqlite::Result<Map<String, Value>> {
    let mut row = Map::new();
    for (i, name) in names.iter().enumerate() {
        row.insert(name.clone(), column_value(r.get_ref(i)?));
    }
    Ok(row)
}

/// A column's value as JSON: text that holds a JSON object or list (the agents' JSON columns)
/// as that value, other text as a string.
pub(crate) fn column_value(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        ValueRef::Text(t) => {
            let text = String::from_utf8_lossy(t);
            let json = (text.starts_with('{') || text.starts_with('['))
                .then(|| serde_json::from_str::<Value>(&text).ok())
                .flatten();
            json.unwrap_or_else(|| Value::String(text.into_owned()))
        }
        ValueRef::Blob(b) => Value::String(String::from_utf8_lossy(b).into_owned()),
    }
}

/// A `data` column's JSON object; anything else kept under `data`.
pub(crate) fn object(v: rusqlite::types::ValueRef<'_>) -> Map<String, Value> {
    match column_value(v) {
        Value::Object(map) => map,
        other => Map::from_iter([("data".to_owned(), other)]),
    }
}
