//! What the readers of agents' databases share (`agents::opencode`, `agents::crush`, …): a
//! read-only connection, read transactions (a consistent snapshot; in WAL mode a reader never
//! blocks the agent's writes), columns as JSON, a session as one JSON document (which the
//! engine captures as it captures a file rewritten whole, `read::snapshot`), the state that
//! tells a SQLite file changed, and the format of a SQLite database given its agent's two
//! queries ([`SqliteFormat`]).

pub(crate) use crate::domain::Changed;
use crate::domain::{DatabaseFormat, SessionsDatabase, SnapshotSpec};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde_json::{Map, Value};
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;
use xxhash_rust::xxh3::Xxh3;

/// A read-only connection to the database at `path`, waiting up to a second for a lock.
pub(crate) fn open(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(Duration::from_secs(1))?;
    Ok(conn)
}

/// A SQLite database of sessions open read-only, read by its agent's functions.
struct OpenSqlite {
    conn: Connection,
    changed: ReadChanged,
    document: ReadDocument,
}

/// An agent's query for the sessions changed since a mark, in one read transaction.
pub(crate) type ReadChanged = fn(&Connection, i64) -> rusqlite::Result<Changed>;

/// An agent's query for one session's document.
pub(crate) type ReadDocument = fn(&Connection, &str) -> rusqlite::Result<Option<Vec<u8>>>;

/// The SQLite database at `path`, open read-only, its sessions read by `changed` and
/// `document`.
fn open_sqlite(
    path: &Path,
    changed: ReadChanged,
    document: ReadDocument,
) -> io::Result<Box<dyn SessionsDatabase>> {
    let conn = open(path).map_err(io::Error::other)?;
    Ok(Box::new(OpenSqlite {
        conn,
        changed,
        document,
    }))
}

impl SessionsDatabase for OpenSqlite {
    fn changed(&self, since: i64) -> io::Result<Changed> {
        (self.changed)(&self.conn, since).map_err(io::Error::other)
    }

    fn document(&self, id: &str) -> io::Result<Option<Vec<u8>>> {
        (self.document)(&self.conn, id).map_err(document_error)
    }
}

/// A reader's error on one session's document as I/O: a column its reader cannot decode
/// (`FromSqlConversionFailure`: a compressed blob cut short, text that is not JSON) is
/// `InvalidData`, which fails that session only; any other fails the database's read.
fn document_error(e: rusqlite::Error) -> io::Error {
    match e {
        rusqlite::Error::FromSqlConversionFailure(..) => {
            io::Error::new(io::ErrorKind::InvalidData, e)
        }
        e => io::Error::other(e),
    }
}

/// An agent's SQLite database format: what its watcher's `[[database]]` `reader` names it,
/// where a session's document keeps its messages, and its agent's two queries. The file is
/// opened read-only, and it changed when it or its `-wal` did ([`sqlite_state`]).
#[derive(Debug)]
pub(crate) struct SqliteFormat {
    /// The name a watcher's `reader` gives it.
    pub name: &'static str,
    /// Where a session's document keeps its messages.
    pub spec: fn() -> SnapshotSpec,
    /// The sessions changed since a mark.
    pub changed: ReadChanged,
    /// One session's document.
    pub document: ReadDocument,
}

impl DatabaseFormat for SqliteFormat {
    fn name(&self) -> &'static str {
        self.name
    }

    fn is_store(&self) -> bool {
        false
    }

    fn spec(&self) -> SnapshotSpec {
        (self.spec)()
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn SessionsDatabase>> {
        open_sqlite(path, self.changed, self.document)
    }

    fn state(&self, path: &Path, meta: Metadata) -> io::Result<(u64, Metadata)> {
        sqlite_state(path, meta)
    }
}

/// What tells whether the database at `path` (whose metadata is `meta`) changed since it was
/// last read, and the metadata of its part written last (for how long ago that was), for a
/// SQLite file: the file with its `-wal` (in WAL mode, writes reach the file itself only at a
/// checkpoint).
pub(crate) fn sqlite_state(path: &Path, meta: Metadata) -> io::Result<(u64, Metadata)> {
    let written = |m: &Metadata| {
        [
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime() as u64,
            m.mtime_nsec() as u64,
        ]
    };
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

/// The document of session `id` in a database of a `sessions` table (`id`) and a message
/// table, read in one read transaction: its row, then the rows `messages` selects (by `?1`),
/// in the order it gives them, each row an object of its columns; `None` when there is no such
/// session (any more).
pub(crate) fn rows_document(
    conn: &Connection,
    messages: &str,
    id: &str,
) -> rusqlite::Result<Option<Vec<u8>>> {
    in_read_transaction(conn, || session_rows(conn, messages, id))
}

/// [`rows_document`]'s reads.
fn session_rows(conn: &Connection, messages: &str, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    let session = "SELECT * FROM sessions WHERE id = ?1";
    let mut stmt = conn.prepare_cached(session)?;
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let Some(session) = stmt.query_row([id], |r| row_object(r, &names)).optional()? else {
        return Ok(None);
    };
    let mut stmt = conn.prepare_cached(messages)?;
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let rows = stmt.query_map([id], |r| row_object(r, &names))?;
    let messages = rows
        .map(|row| row.map(Value::Object))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Some(session_document(session, messages)))
}

/// Where a database says when each session was last written: its table, its sessions' id
/// column, and an SQL expression of a row giving the time (in any unit that only grows; NULL
/// for a row that says none).
pub(crate) struct Written<'a> {
    pub table: &'a str,
    pub id: &'a str,
    pub at: &'a str,
}

/// The sessions written since mark `since` (the latest time a row said then), read in one read
/// transaction, for a database that keeps no log of its changes but a time on each session's
/// row. A write within the mark's own time may have come after the read, so it is read again.
/// A mark past every row's time (the database made anew in place, its newest session deleted)
/// says nothing of what this database holds: everything is read, and each session compared
/// with its last state adds only what changed.
pub(crate) fn changed_since(
    conn: &Connection,
    written: &Written,
    since: i64,
) -> rusqlite::Result<Changed> {
    let Written { table, id, at } = written;
    in_read_transaction(conn, || {
        let latest = format!("SELECT coalesce(max({at}), 0) FROM {table}");
        let mark: i64 = conn.query_row(&latest, [], |r| r.get(0))?;
        let since = if since > mark { 0 } else { since };
        let changed = format!("SELECT {id} FROM {table} WHERE ?1 = 0 OR {at} >= ?1");
        let mut sessions = column(conn, &changed, [since])?;
        sessions.sort();
        let all = column(conn, &format!("SELECT {id} FROM {table}"), [])?;
        Ok(Changed {
            sessions,
            all: all.into_iter().collect(),
            mark,
        })
    })
}

/// `data` decompressed from zstd, when it is at most `limit` bytes decompressed (`None` when
/// more): a compressed value may stand for far more than it weighs, and no more than a
/// document may have is held.
pub(crate) fn unzstd(data: &[u8], limit: u64) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    let decoder = zstd::stream::read::Decoder::new(data)?;
    decoder.take(limit + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
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
