//! Agents' SQLite databases (OpenCode's `opencode.db`, Crush's `crush.db`), and OpenCode's
//! store of files before them, read as one JSON document per session, which the engine captures as it captures a file rewritten whole
//! (`read::snapshot`). Each agent's tables have a reader of their own (`agents::opencode`,
//! `agents::crush`); what they share is here: a read-only connection, read transactions (a
//! consistent snapshot; in WAL mode a reader never blocks the agent's writes), and columns
//! as JSON.

use crate::agents::opencode::storage as opencode_storage;
use crate::agents::{crush, opencode};
use crate::domain::{DatabaseReader, SnapshotSpec};
use rusqlite::{Connection, OpenFlags};
use serde_json::{Map, Value};
use std::collections::HashSet;
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use xxhash_rust::xxh3::Xxh3;

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

/// An agent's database, open for reading: a read-only connection to a SQLite file, or the
/// folder of a store of files (`agents::opencode::storage`), named by a file in it.
pub(crate) enum Db {
    /// A SQLite database, and the reader of its tables.
    Sqlite(Connection, DatabaseReader),
    /// The folder of OpenCode's storage before 1.2.
    OpenCodeStorage(PathBuf),
}

impl Db {
    /// `path` opened for `reader`.
    pub(crate) fn open(reader: DatabaseReader, path: &Path) -> io::Result<Db> {
        match reader {
            DatabaseReader::OpenCodeStorage => Ok(Db::OpenCodeStorage(store_of(path))),
            _ => open(path)
                .map(|c| Db::Sqlite(c, reader))
                .map_err(io::Error::other),
        }
    }

    /// The sessions changed since mark `since` (0: everything), read at once (in one read
    /// transaction, for SQLite).
    pub(crate) fn changed(&self, since: i64) -> io::Result<Changed> {
        match self {
            Db::Sqlite(conn, DatabaseReader::Crush) => crush::changed(conn, since),
            Db::Sqlite(conn, _) => opencode::changed(conn, since),
            Db::OpenCodeStorage(store) => return opencode_storage::changed(store, since),
        }
        .map_err(io::Error::other)
    }

    /// Session `id`'s document; `None` when there is no such session (any more).
    pub(crate) fn document(&self, id: &str) -> io::Result<Option<Vec<u8>>> {
        match self {
            Db::Sqlite(conn, DatabaseReader::Crush) => crush::document(conn, id),
            Db::Sqlite(conn, _) => opencode::document(conn, id),
            Db::OpenCodeStorage(store) => return opencode_storage::document(store, id),
        }
        .map_err(io::Error::other)
    }
}

/// The folder of a store that `path` (a file in it) names.
fn store_of(path: &Path) -> PathBuf {
    path.parent().unwrap_or(path).to_owned()
}

/// Where a session's document keeps its messages.
pub(crate) fn spec(reader: DatabaseReader) -> SnapshotSpec {
    match reader {
        DatabaseReader::Crush => crush::spec(),
        DatabaseReader::OpenCode | DatabaseReader::OpenCodeStorage => opencode::spec(),
    }
}

/// What tells whether the database at `path` (whose metadata is `meta`) changed since it was
/// last read, and the metadata of its part written last (for how long ago that was): a SQLite
/// file with its `-wal` (in WAL mode, writes reach the file itself only at a checkpoint); a
/// store's files.
pub(crate) fn state(
    reader: DatabaseReader,
    path: &Path,
    meta: Metadata,
) -> io::Result<(u64, Metadata)> {
    let written = |m: &Metadata| {
        [
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime() as u64,
            m.mtime_nsec() as u64,
        ]
    };
    if reader == DatabaseReader::OpenCodeStorage {
        let (hash, newest) = opencode_storage::state(&store_of(path))?;
        return Ok((hash, newest.unwrap_or(meta)));
    }
    let wal = fs::metadata(format!("{}-wal", path.display())).ok();
    let mut hash = Xxh3::new();
    for n in written(&meta)
        .into_iter()
        .chain(wal.iter().flat_map(written))
    {
        hash.update(&n.to_le_bytes());
    }
    let newer = wal.filter(|w| w.modified().ok() > meta.modified().ok());
    Ok((hash.digest(), newer.unwrap_or(meta)))
}

/// A session's document: its row (or file), then its messages, as the engine captures it.
pub(crate) fn session_document(session: impl serde::Serialize, messages: Vec<Value>) -> Vec<u8> {
    let doc = serde_json::json!({"session": session, "messages": messages});
    serde_json::to_vec(&doc).expect("a JSON value serialises")
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
