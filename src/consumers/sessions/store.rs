//! The session index's own SQLite file, beside the archive (`<archive>-index`).
//!
//! The index is kept apart from the records so that its transactions take the write lock of
//! its own file, never the archive's: a commit of records never waits for an index commit.
//! The index's connection opens its file to write and attaches the archive read-only (SQLite's
//! `BEGIN IMMEDIATE` then takes no lock on the archive); the connections that read sessions
//! attach the index read-only. Everything in the file is derived from the records, so a file
//! of another schema version, of another archive, or ahead of the archive (an older copy of
//! the archive put back) is emptied and built again from seq 0, with a log line saying why.

use crate::archive::{Archive, StateKey};
use crate::consumers::sessions::words;
use crate::error::{Error, Result};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The index file's schema; `PRAGMA user_version` is [`VERSION`] once it is made. The version
/// changes with the schema and with what the index derives from records (which sessions and
/// messages there are), so that an index built by another build is built again.
const SCHEMA: &str = include_str!("schema.sql");
const VERSION: i64 = 7;

/// The name the index takes on an archive's connection.
const INDEX: &str = "idx";
/// The name the archive takes on the index's connection.
const ARCHIVE: &str = "archive";

/// The index file of the archive at `archive`: its path with `-index` appended, beside it (as
/// SQLite's `-wal` and `-shm` files are).
pub(crate) fn path_of(archive: &Path) -> PathBuf {
    let mut name = archive.as_os_str().to_owned();
    name.push("-index");
    PathBuf::from(name)
}

/// Maps a SQLite error to [`Error::Index`] naming the index file of `archive`.
pub(crate) fn index_error(archive: &Path) -> impl Fn(rusqlite::Error) -> Error + '_ {
    move |source| Error::Index {
        path: path_of(archive),
        source,
    }
}

/// Opens the index of the archive at `archive` to write: its file as `main` (made, mode 0600,
/// when there is none), the archive attached read-only. The file is made ready first: given
/// the schema when it has none, and emptied when it cannot be this archive's index as it is.
pub(crate) fn open_to_write(archive: &Path) -> Result<Connection> {
    let path = path_of(archive);
    crate::archive::create_private(&path)?;
    let at = index_error(archive);
    let mut conn = Connection::open(&path).map_err(&at)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(&at)?;
    // Every statement an index transaction runs stays prepared (rusqlite keeps 16 by
    // default, fewer than the indexer uses, and one pushed out is prepared again).
    conn.set_prepared_statement_cache_capacity(64);
    register_words(&conn).map_err(&at)?;
    // Before the file has a page: the setting is only taken by a file not made yet
    // ([`give_back_free_pages`]).
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
        .map_err(&at)?;
    // Turning WAL on takes the file to itself, and SQLite does not wait for another process
    // making the index at that moment (a daemon starting while a command makes it): it is
    // tried again until the file is free.
    when_free(|| conn.pragma_update(None, "journal_mode", "WAL")).map_err(&at)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(&at)?;
    let uri = crate::archive::read_only_uri(archive);
    conn.execute(&format!("ATTACH ?1 AS {ARCHIVE}"), [uri])
        .map_err(&at)?;
    make_ready(&mut conn, &path).map_err(&at)?;
    Ok(conn)
}

/// `op`, tried again while the database is busy (another connection holds a lock it needs and
/// SQLite did not wait for it), for up to 10 seconds.
fn when_free<T>(mut op: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match op() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// Attaches the index of `archive` to its connection, read-only, so that the session queries
/// find its tables; the index is made first when there is none, or when its file is there but
/// not made yet (a daemon that is starting has created it and not yet given it its schema).
pub(crate) fn attach(archive: &Archive) -> Result<()> {
    let at = index_error(archive.path());
    register_words(archive.records_reader().connection()).map_err(&at)?;
    let path = path_of(archive.path());
    if !(path.exists() && attached_is_made(archive, &path)?) {
        drop(open_to_write(archive.path())?);
        archive.attach_read_only(&path, INDEX)?;
    }
    // The session queries read the marks with the index's tables.
    archive.marks_readable()
}

/// Attaches the index file at `path` to `archive` and says whether it has this build's
/// schema; detached again when it has not. Its version is read through the attachment, so a
/// command opens the file once.
fn attached_is_made(archive: &Archive, path: &Path) -> Result<bool> {
    archive.attach_read_only(path, INDEX)?;
    let records = archive.records_reader();
    let conn = records.connection();
    let at = index_error(archive.path());
    let version: i64 =
        (conn.pragma_query_value(Some(INDEX), "user_version", |r| r.get(0))).map_err(&at)?;
    if version != VERSION {
        conn.execute(&format!("DETACH {INDEX}"), []).map_err(&at)?;
    }
    Ok(version == VERSION)
}

/// The last seq the index attached to `archive` ([`attach`]) holds, read through the
/// attachment.
pub(crate) fn attached_done(archive: &Archive) -> Result<i64> {
    let records = archive.records_reader();
    let sql = format!("SELECT seq FROM {INDEX}.progress");
    let seq = records.connection().query_row(&sql, [], |r| r.get(0));
    seq.optional()
        .map_err(index_error(archive.path()))
        .map(Option::unwrap_or_default)
}

/// Registers the index's tokenizers (`words`, and `terms` over it) on `conn`, which every
/// connection that reads or writes the index's text needs, and the search's ranking
/// ([`BM25`]), and keeps FTS5's own statements prepared (below).
pub(crate) fn register_words(conn: &Connection) -> rusqlite::Result<()> {
    // FTS5 finds a term in each segment with one statement of its own (`segid = ? AND term
    // <= ?`), bound again for every segment. SQLite prepares a statement again when a bound
    // value its plan looked at changes to or from 0 or 1; with the planner's stability
    // guarantee it looks at none, so a query over segments 1 and 2.. is not re-prepared at
    // every segment it moves between.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    crate::platform::fts5::register(conn, words::TOKENIZER, words::split)?;
    crate::platform::fts5::register_ready(conn, words::TERMS, words::split)?;
    crate::platform::fts5::bm25::register(conn, BM25)
}

/// The name of FTS5's `bm25()` told the rows of some terms (`platform::fts5::bm25`), on every
/// connection to the index.
pub(crate) const BM25: &str = "bm25_known";

/// The last seq the index of the archive at `archive` holds: 0 when it has no index yet.
pub(crate) fn done(archive: &Path) -> Result<i64> {
    let Some(conn) = made(archive)? else {
        return Ok(0);
    };
    let seq = conn.query_row("SELECT seq FROM progress", [], |r| r.get::<_, i64>(0));
    seq.optional()
        .map_err(index_error(archive))
        .map(Option::unwrap_or_default)
}

/// A read-only connection to the index of the archive at `archive`, when its file exists and
/// has this build's schema.
fn made(archive: &Path) -> Result<Option<Connection>> {
    let path = path_of(archive);
    if !path.exists() {
        return Ok(None);
    }
    let at = index_error(archive);
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(&path, flags).map_err(&at)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(&at)?;
    let version: i64 =
        (conn.pragma_query_value(None, "user_version", |r| r.get(0))).map_err(&at)?;
    Ok((version == VERSION).then_some(conn))
}

/// The last seq indexed, read on the index's connection.
pub(crate) fn progress(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT seq FROM main.progress", [], |r| r.get(0))
}

/// Records `seq` as the last indexed, inside the transaction that indexed it.
pub(crate) fn set_progress(tx: &Connection, seq: i64) -> rusqlite::Result<()> {
    tx.prepare_cached("UPDATE main.progress SET seq = ?1")?
        .execute([seq])
        .map(drop)
}

/// How FTS5 merges the search segments the index's transactions write (its `automerge`,
/// `crisismerge` and `hashsize`, kept in the index file).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Merging {
    /// While the index follows the archive, FTS5's defaults: each transaction merges work in
    /// proportion to the pages it wrote, once a level has four segments (`automerge` 4), and
    /// all of a level's at once at sixteen (`crisismerge` 16); the terms of a transaction are
    /// written out as a segment whenever they hold a megabyte (`hashsize`).
    Follow,
    /// While the index is built from nothing (a `reindex`, a first start, a new index version):
    /// no merge as it goes (`automerge` 0), a level's segments merged only when it has 64
    /// (`crisismerge`), and 16 MiB of terms held before they are written out (`hashsize`), so
    /// that a transaction writes one segment. The segments are merged into one at the end.
    /// Merging as it goes writes each posting again at every level of four segments, and took
    /// 13 % of a `reindex`'s samples (BENCHMARKS.md). The index is in this mode when its
    /// `automerge` is 0 ([`building`]), so a build stopped halfway goes on in it.
    Build,
}

/// Sets how FTS5 merges the index's segments, in one transaction.
pub(crate) fn set_merging(conn: &mut Connection, merging: Merging) -> rusqlite::Result<()> {
    let (automerge, crisismerge, hashsize) = match merging {
        Merging::Follow => (4, 16, 1 << 20),
        Merging::Build => (0, 64, 16 << 20),
    };
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut set =
        tx.prepare("INSERT INTO main.message_text (message_text, rank) VALUES (?1, ?2)")?;
    set.execute(rusqlite::params!["automerge", automerge])?;
    set.execute(rusqlite::params!["crisismerge", crisismerge])?;
    set.execute(rusqlite::params!["hashsize", hashsize])?;
    drop(set);
    tx.commit()
}

/// Gives the index file's free pages back to the filesystem, and returns how many bytes it
/// gave. A merge of the search segments writes them into one new segment before it frees
/// them, so that it leaves as many pages free as the full-text index holds: after the merge at
/// the end of a 1 GiB build, 90 MB of a 292 MB file (BENCHMARKS.md). The index file moves its
/// last pages into the free ones and is cut short (`auto_vacuum` INCREMENTAL, set as the file
/// is made). A file made without it (by an earlier build) is rewritten once with it
/// (`VACUUM`): at once when it is emptied to be built again, or at its next merge.
pub(crate) fn give_back_free_pages(conn: &Connection) -> rusqlite::Result<u64> {
    let pragma = |name: &str| -> rusqlite::Result<i64> {
        conn.pragma_query_value(Some("main"), name, |r| r.get(0))
    };
    let before = pragma("page_count")?;
    // 2 is INCREMENTAL.
    if pragma("auto_vacuum")? == 2 {
        // One page is moved at each step.
        let mut vacuum = conn.prepare("PRAGMA main.incremental_vacuum")?;
        let mut steps = vacuum.query([])?;
        while steps.next()?.is_some() {}
    } else {
        conn.execute_batch("PRAGMA main.auto_vacuum = INCREMENTAL; VACUUM main;")?;
    }
    let given = (before - pragma("page_count")?) * pragma("page_size")?;
    Ok(u64::try_from(given).unwrap_or(0))
}

/// Whether the index is in [`Merging::Build`].
pub(crate) fn building(conn: &Connection) -> rusqlite::Result<bool> {
    let automerge: Option<i64> = conn
        .query_row(
            "SELECT v FROM main.message_text_config WHERE k = 'automerge'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    Ok(automerge == Some(0))
}

/// Gives the index file the schema, or empties it and gives it the schema again, as it needs;
/// under the file's write lock, so that two processes opening it at once agree.
fn make_ready(conn: &mut Connection, path: &Path) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let archive_id: String = tx
        .query_row(
            &format!("SELECT value FROM {ARCHIVE}.state WHERE key = ?1"),
            [StateKey::MachineId.name()],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or_default();
    let version: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let why = match version {
        0 => Some(None),
        VERSION => stale(&tx, &archive_id)?.map(Some),
        other => Some(Some(format!(
            "its schema version is {other}, this build's is {VERSION}"
        ))),
    };
    if let Some(why) = why {
        if let Some(why) = why {
            log::warn!(
                "session index {}: {why}; it is emptied and built again from the archive's records",
                path.display()
            );
        }
        rebuild(&tx, &archive_id)?;
    }
    tx.commit()
}

/// Why an index of this version cannot be the archive's index as it is, if it cannot.
fn stale(tx: &Connection, archive_id: &str) -> rusqlite::Result<Option<String>> {
    let (of, seq): (String, i64) =
        tx.query_row("SELECT archive, seq FROM main.progress", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    let last: i64 = tx.query_row(
        &format!("SELECT coalesce(max(seq), 0) FROM {ARCHIVE}.records"),
        [],
        |r| r.get(0),
    )?;
    Ok(if of != archive_id {
        Some(format!(
            "it is the index of another archive (machine id {of}, this archive's is {archive_id})"
        ))
    } else if seq > last {
        Some(format!(
            "it holds records up to seq {seq}, and the archive ends at seq {last} (an older copy of the archive?)"
        ))
    } else {
        None
    })
}

/// Drops whatever the file holds and makes the schema, empty, for the archive `archive_id`.
fn rebuild(tx: &Connection, archive_id: &str) -> rusqlite::Result<()> {
    // Tables are dropped in no particular order, and dropping one deletes its rows first,
    // which would break the references of the rows of another not dropped yet: the foreign
    // keys are checked at the commit, when every table is made again, empty.
    tx.pragma_update(None, "defer_foreign_keys", true)?;
    // Virtual tables first: dropping one drops its shadow tables, which cannot be dropped
    // before it.
    for virtual_only in [true, false] {
        let names: Vec<String> = tx
            .prepare(
                "SELECT name FROM main.sqlite_master WHERE type = 'table'
                 AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
                 AND (?1 = 0 OR sql LIKE 'CREATE VIRTUAL TABLE%')",
            )?
            .query_map([virtual_only], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for name in names {
            tx.execute_batch(&format!(
                "DROP TABLE main.\"{}\"",
                name.replace('"', "\"\"")
            ))?;
        }
    }
    tx.execute_batch(SCHEMA)?;
    tx.pragma_update(None, "user_version", VERSION)?;
    tx.execute(
        "INSERT INTO main.progress (archive, seq) VALUES (?1, 0)",
        [archive_id],
    )
    .map(drop)
}

/// Removes the index file of `archive` (with its `-wal` and `-shm`), for `reindex`: the next
/// [`open_to_write`] makes it again, empty. A file that is not there is no error.
pub(crate) fn remove(archive: &Path) -> Result<()> {
    let path = path_of(archive);
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = PathBuf::from(name);
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(Error::Io { path: file, source }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An archive in a directory whose name holds what a `file:` URI would otherwise read as
    /// syntax, with one record.
    fn archive() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a ?#%20.d").join("archive.db");
        let mut archive = Archive::open(&db).unwrap();
        archive
            .connection()
            .execute_batch(
                "INSERT INTO sources (id, dev, ino, path, harness, generation, gone, created_ms)
                     VALUES (1, 1, 1, x'2f61', 'codex', 0, 0, 0);
                 INSERT INTO records (seq, source_id, generation, offset, record)
                     VALUES (1, 1, 0, 0, x'7b7d');",
            )
            .unwrap();
        (dir, db)
    }

    fn tables(conn: &Connection) -> Vec<String> {
        let mut stmt = conn
            .prepare("SELECT name FROM main.sqlite_master WHERE type = 'table' ORDER BY name")
            .unwrap();
        let names = stmt.query_map([], |r| r.get(0)).unwrap();
        names.collect::<rusqlite::Result<_>>().unwrap()
    }

    /// The point of the file of its own: the archive writer's `BEGIN IMMEDIATE` must not wait
    /// for an index transaction, which would take the archive's lock if the archive were
    /// attached to write.
    #[test]
    fn an_index_transaction_takes_no_lock_on_the_archive() {
        let (_dir, db) = archive();
        let mut index = open_to_write(&db).unwrap();
        let tx = index
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .unwrap();
        set_progress(&tx, 1).unwrap();
        let mut writer = Connection::open(&db).unwrap();
        writer.busy_timeout(Duration::ZERO).unwrap();
        let records = writer.transaction_with_behavior(TransactionBehavior::Immediate);
        records.expect("the archive's write lock is free during an index transaction");
        tx.commit().unwrap();
    }

    /// A daemon that starts while a command makes the index (or the other way round): both
    /// open it, whichever holds it first.
    #[test]
    fn two_processes_making_the_index_at_once_both_open_it() {
        for _ in 0..30 {
            let (_dir, db) = archive();
            let opened: Vec<Result<Connection>> = std::thread::scope(|s| {
                let a = s.spawn(|| open_to_write(&db));
                let b = s.spawn(|| open_to_write(&db));
                vec![a.join().unwrap(), b.join().unwrap()]
            });
            for o in opened {
                o.unwrap();
            }
        }
    }

    #[test]
    fn readers_see_the_index_through_the_archive_and_cannot_write_it() {
        let (_dir, db) = archive();
        let mut archive = Archive::open(&db).unwrap();
        attach(&archive).unwrap();
        assert!(path_of(&db).ends_with("archive.db-index"));
        let conn = archive.connection();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
        let written = conn.execute(
            "INSERT INTO sessions (harness, session) VALUES ('a', 'b')",
            [],
        );
        assert!(written.is_err(), "attached read-only");
        assert_eq!(done(&db).unwrap(), 0);
        let mut writer = open_to_write(&db).unwrap();
        let tx = writer.transaction().unwrap();
        set_progress(&tx, 7).unwrap();
        tx.commit().unwrap();
        assert_eq!(
            attached_done(&archive).unwrap(),
            7,
            "read through the attachment"
        );
    }

    /// Without the planner's stability guarantee, SQLite prepares FTS5's own look-up of a
    /// term in a segment again each time it moves between segment 1 and another: a prefix
    /// search of 256 terms over 15 segments spent a third of its time preparing it again.
    #[test]
    fn connections_to_the_index_text_keep_their_plans_whatever_is_bound() {
        let (_dir, db) = archive();
        let qpsg = |conn: &Connection| conn.db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG);
        let writer = open_to_write(&db).unwrap();
        assert!(qpsg(&writer).unwrap(), "the indexer's");
        let archive = Archive::open(&db).unwrap();
        attach(&archive).unwrap();
        assert!(
            qpsg(archive.records_reader().connection()).unwrap(),
            "a reader's"
        );
    }

    /// A daemon that is starting creates the index file before it gives it its schema: a
    /// reader attaching in between (a `tail --session` at once) must find the tables.
    #[test]
    fn a_reader_attaching_to_an_index_file_not_made_yet_makes_it() {
        let (_dir, db) = archive();
        crate::archive::create_private(&path_of(&db)).unwrap();
        let mut archive = Archive::open(&db).unwrap();
        attach(&archive).unwrap();
        let n: i64 = (archive.connection())
            .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn an_index_ahead_of_its_archive_or_of_another_archive_is_built_again() {
        let (_dir, db) = archive();
        let index = open_to_write(&db).unwrap();
        index
            .execute_batch("INSERT INTO sessions (harness, session) VALUES ('codex', 's')")
            .unwrap();
        set_progress(&index, 1).unwrap();
        drop(index);
        assert_eq!(done(&db).unwrap(), 1, "within the archive: kept");
        let index = open_to_write(&db).unwrap();
        assert_eq!(progress(&index).unwrap(), 1);
        set_progress(&index, 2).unwrap();
        drop(index);
        let index = open_to_write(&db).unwrap();
        assert_eq!(progress(&index).unwrap(), 0, "past the archive's last seq");
        let n: i64 = index
            .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 0);
        set_progress(&index, 1).unwrap();
        index
            .execute("UPDATE main.progress SET archive = 'another'", [])
            .unwrap();
        drop(index);
        let index = open_to_write(&db).unwrap();
        assert_eq!(progress(&index).unwrap(), 0, "another archive's index");
    }

    /// A new index file is made so that the pages its merges free can be given back
    /// (`give_back_free_pages`), without a rewrite of it.
    #[test]
    fn a_new_index_file_can_give_its_free_pages_back() {
        let (_dir, db) = archive();
        let index = open_to_write(&db).unwrap();
        let mode: i64 = index
            .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, 2, "INCREMENTAL");
    }

    #[test]
    fn an_index_of_another_schema_version_is_built_again() {
        let (_dir, db) = archive();
        let index = open_to_write(&db).unwrap();
        let fresh = tables(&index);
        index
            .execute_batch(&format!(
                "CREATE TABLE later (x); PRAGMA user_version = {};",
                VERSION + 1
            ))
            .unwrap();
        set_progress(&index, 1).unwrap();
        drop(index);
        assert_eq!(done(&db).unwrap(), 0, "not this build's schema");
        let index = open_to_write(&db).unwrap();
        assert_eq!(tables(&index), fresh);
        assert_eq!(progress(&index).unwrap(), 0);
    }
}
