//! The archive: one SQLite database holding sources, cursors, records, rejects, prefix marks,
//! scanned roots and the engine's own events.
//!
//! Every change the engine makes goes through one [`Tx`]: the records of a batch and the cursor
//! past them commit together, so a crash at any instant loses nothing and duplicates nothing.

pub(crate) mod envelope;
pub(crate) mod follow;
pub(crate) mod lock;
pub(crate) mod machines;
pub(crate) mod sinks;
pub(crate) mod snapshots;
pub(crate) mod wal_checkpoint;
pub(crate) mod write_turn;
pub(crate) mod writer;

mod codec;
mod compact;

use crate::domain::fingerprint::{Fingerprint, Identity, MARKER_WINDOW, Markers, Window};
use crate::domain::{
    Cursor, HELD_BACK_PREFIX, Position, PrefixMark, Record, Reject, SourceId, SourceRow,
};
use crate::error::{ArchiveContext, Error, IoContext, Result};
use crate::platform::time::now_ms;
use codec::{Codec, Wait};
pub(crate) use codec::{MAX_SAMPLES as SAMPLE_BYTES, MIN_COMPRESSED};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use std::cell::RefCell;
use std::ffi::OsStr;
use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How big the WAL may grow before a commit checkpoints it, and what it is cut back to.
pub(crate) const WAL_LIMIT: i64 = 64 << 20;

/// Records, rejected lines and held-back bytes longer than this are written into their row in
/// place rather than bound as a value, which SQLite would copy twice (the bound value, then
/// the row).
const WRITTEN_IN_PLACE: usize = 1 << 20;

/// The page size of a new archive. Measured on records of 1–15 KiB (BENCHMARKS.md): backfill
/// speed did not separate the sizes beyond the noise, a one-record commit costs least at 8 KiB
/// (p50) and 8–16 KiB (p99), and 16 KiB pages waste 39 % on such records (one 9 KiB record per
/// page) against 17 % at 8 KiB.
pub(crate) const PAGE_SIZE: u32 = 8 * 1024;

/// Schema migrations; `PRAGMA user_version` is the number applied.
const MIGRATIONS: &[&str] = &[
    include_str!("archive/schema_v1.sql"),
    include_str!("archive/schema_v2.sql"),
    include_str!("archive/schema_v3.sql"),
    include_str!("archive/schema_v4.sql"),
    include_str!("archive/schema_v5.sql"),
    include_str!("archive/schema_v6.sql"),
    include_str!("archive/schema_v7.sql"),
    include_str!("archive/schema_v8.sql"),
    include_str!("archive/schema_v9.sql"),
    include_str!("archive/schema_v10.sql"),
];

/// One archived record as exported.
pub struct ExportRow {
    /// Global sequence number.
    pub seq: i64,
    /// The source's id: the same across moves, renames and generations of one file.
    pub source: SourceId,
    /// The source's watcher.
    pub harness: String,
    /// The source's current path.
    pub path: PathBuf,
    /// The generation the record belongs to.
    pub generation: i64,
    /// The record's offset in that generation.
    pub offset: u64,
    /// The record, verbatim.
    pub record: Vec<u8>,
}

/// The keys of the archive's `state` table: the one list of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKey {
    /// The archive's machine id, a UUID made with the archive (schema 5): what its records
    /// are keyed by wherever they are shipped.
    MachineId,
    /// The running daemon's caught-up figures, for `status` (JSON).
    CaughtUp,
}

impl StateKey {
    /// The key as the table holds it.
    pub fn name(self) -> &'static str {
        match self {
            StateKey::MachineId => "machine_id",
            StateKey::CaughtUp => "caught_up",
        }
    }
}

/// True for a source pulled from another machine (their ids are negative, this machine's
/// positive): its records are in the archive, but not this machine's to ship.
pub(crate) fn is_pulled(source: SourceId) -> bool {
    source < 0
}

/// The query of an [`ExportRow`], to be followed by its `WHERE`.
const EXPORT_ROW: &str = "SELECT r.seq, s.harness, s.path, r.generation, r.offset, r.record, s.id
     FROM records r JOIN sources s ON s.id = r.source_id";

/// A stored record that could not be read back: its frame is damaged, or names a dictionary
/// the archive does not hold.
#[derive(Debug, thiserror::Error)]
#[error("record {seq} cannot be read: {why}")]
struct Unreadable {
    seq: i64,
    why: codec::DecodeError,
}

/// The records of an archive as they are stored: the connection, and how records were
/// compressed.
pub(crate) struct Records<'a> {
    conn: &'a Connection,
    codec: &'a Codec,
}

impl Records<'_> {
    /// The connection.
    pub(crate) fn connection(&self) -> &Connection {
        self.conn
    }

    /// The record stored in column `at` of `r`, the record numbered `seq`.
    pub(crate) fn record(
        &self,
        r: &rusqlite::Row,
        at: usize,
        seq: i64,
    ) -> rusqlite::Result<Vec<u8>> {
        let stored = r.get_ref(at)?.as_blob()?;
        self.codec.decode_record(self.conn, stored, seq)
    }

    /// One row of [`EXPORT_ROW`] whose columns start at `at`.
    fn export_row(&self, r: &rusqlite::Row, at: usize) -> rusqlite::Result<ExportRow> {
        let seq = r.get(at)?;
        Ok(ExportRow {
            seq,
            harness: r.get(at + 1)?,
            path: path_from_blob(r.get(at + 2)?),
            generation: r.get(at + 3)?,
            offset: r.get::<_, i64>(at + 4)? as u64,
            record: self.record(r, at + 5, seq)?,
            source: r.get(at + 6)?,
        })
    }
}

/// What an archive's records take.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Storage {
    /// The records' bytes.
    pub record_bytes: u64,
    /// What storing them takes (compressed, most of them).
    pub stored_bytes: u64,
    /// Compression dictionaries trained.
    pub dictionaries: u64,
}

/// One rejected line as listed, without its bytes.
pub struct RejectRow {
    /// The reject's id (`rejects --raw ID`).
    pub id: i64,
    /// When it was recorded (Unix ms).
    pub at_ms: i64,
    /// The source's id.
    pub source: SourceId,
    /// The source's current path.
    pub path: PathBuf,
    /// The generation the line belonged to.
    pub generation: i64,
    /// Where the line started in that generation.
    pub offset: u64,
    /// The line's length on disk, without its `\n`.
    pub length: u64,
    /// How many of its bytes are kept: `length`, or the record limit for a longer line.
    pub kept: u64,
    /// Why it is not a record.
    pub reason: String,
}

/// Sources whose current path is a given path or lies under it, as SQL over `s.path` and the
/// values of its three parameters (null: every source).
struct PathFilter {
    exact: Option<Vec<u8>>,
    under: Option<Vec<u8>>,
}

impl PathFilter {
    /// The condition, with its parameters numbered from `first`.
    fn sql(first: usize) -> String {
        let (exact, len, under) = (first, first + 1, first + 2);
        format!("(?{exact} IS NULL OR s.path = ?{exact} OR substr(s.path, 1, ?{len}) = ?{under})")
    }

    fn new(path: Option<&Path>) -> PathFilter {
        let under = path.map(|p| {
            let mut b = blob(p);
            if !b.ends_with(b"/") {
                b.push(b'/');
            }
            b
        });
        PathFilter {
            exact: path.map(blob),
            under,
        }
    }

    fn params(&self) -> (&Option<Vec<u8>>, i64, &Option<Vec<u8>>) {
        let len = self.under.as_ref().map_or(0, |u| u.len() as i64);
        (&self.exact, len, &self.under)
    }
}

/// An open archive.
pub struct Archive {
    conn: Connection,
    path: PathBuf,
    codec: Codec,
}

impl Archive {
    /// Opens the archive at `path`, creating it (mode 0600, in a 0700 directory if the
    /// directory is created too) when it does not exist, and applying migrations.
    pub fn open(path: &Path) -> Result<Archive> {
        let created = create_private(path)?;
        Archive::connect(path, created)
    }

    /// Opens an archive that must already exist, read-only (for `status` and `export`): a
    /// file that is not an archive is refused, never changed.
    pub fn open_existing(path: &Path) -> Result<Archive> {
        let unreadable = |source| Error::ArchiveUnreadable {
            path: path.to_owned(),
            source,
        };
        // Only a path that is not there is "no archive": one this user may not reach or read
        // is there, and the fix is another user or another mode, never `run`.
        match std::fs::metadata(path).and_then(|m| Ok((m, std::fs::File::open(path)?))) {
            Ok((meta, _)) if meta.is_file() => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(unreadable(e));
            }
            _ => {
                return Err(Error::NoArchive {
                    path: path.to_owned(),
                });
            }
        }
        // URIs, for the session index attached read-only (`attach_read_only`).
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(path, flags).at_archive(path)?;
        let archive = Archive {
            conn,
            path: path.to_owned(),
            codec: Codec::default(),
        };
        archive.db(archive.conn.busy_timeout(Duration::from_secs(10)))?;
        let version = archive.schema_version()?;
        if version == 0 || !archive.has_table("sources")? {
            return Err(Error::NotAnArchive {
                path: path.to_owned(),
            });
        }
        Ok(archive)
    }

    /// Opens an archive that must already exist, to write: refused as by
    /// [`Archive::open_existing`] when it is missing or not an archive, else migrated.
    pub fn open_existing_to_write(path: &Path) -> Result<Archive> {
        drop(Archive::open_existing(path)?);
        Archive::connect(path, false)
    }

    fn schema_version(&self) -> Result<i64> {
        let found = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0));
        let found: i64 = self.db(found)?;
        let known = MIGRATIONS.len() as i64;
        if found > known {
            return Err(Error::NewerSchema {
                path: self.path.clone(),
                found,
                known,
            });
        }
        Ok(found)
    }

    pub(crate) fn has_table(&self, name: &str) -> Result<bool> {
        let n = self.conn.query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [name],
            |r| r.get::<_, i64>(0),
        );
        Ok(self.db(n)? > 0)
    }

    fn connect(path: &Path, created: bool) -> Result<Archive> {
        let conn = Connection::open(path).at_archive(path)?;
        let mut archive = Archive {
            conn,
            path: path.to_owned(),
            codec: Codec::default(),
        };
        archive.configure(created)?;
        archive.migrate()?;
        Ok(archive)
    }

    /// For the writing connection: its commits checkpoint the WAL only once it holds
    /// `WAL_LIMIT` bytes (SQLite's default is every 1,000 pages, inside the commit), and a
    /// WAL that has been checkpointed is cut back to that size. Small commits stay short while
    /// another connection runs [`Archive::checkpoint`]; a long backfill, which commits faster
    /// than passive checkpoints can catch up, cannot make the WAL as big as itself.
    pub fn bound_wal(&self) -> Result<()> {
        let pages = WAL_LIMIT / i64::from(PAGE_SIZE);
        self.db(self.conn.pragma_update(None, "wal_autocheckpoint", pages))?;
        self.db(self
            .conn
            .pragma_update(None, "journal_size_limit", WAL_LIMIT))
    }

    /// Copies committed WAL frames into the database without waiting for readers or writers
    /// (a passive checkpoint). Returns whether every frame the WAL holds is copied (a reader
    /// still on an older snapshot, or a writer, may leave some for a later one), and how many
    /// frames it holds.
    pub fn checkpoint(&self) -> Result<(bool, i64)> {
        let frames = (self.conn).query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        });
        let (busy, log, copied) = self.db(frames)?;
        Ok((busy == 0 && copied >= log, log))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn configure(&mut self, created: bool) -> Result<()> {
        let conn = &self.conn;
        self.db(conn.busy_timeout(Duration::from_secs(10)))?;
        if created {
            // Must precede WAL: once the file is in WAL mode a new page size is ignored.
            self.db(conn.pragma_update(None, "page_size", PAGE_SIZE))?;
        }
        self.db(conn.pragma_update(None, "journal_mode", "WAL"))?;
        self.db(conn.pragma_update(None, "synchronous", "NORMAL"))
    }

    fn migrate(&mut self) -> Result<()> {
        let found = self.schema_version()?;
        if found as usize >= MIGRATIONS.len() {
            return Ok(());
        }
        // A migration may make a table again (SQLite's way to change its constraints), whose
        // rows other tables reference: foreign keys are checked once it is done, not
        // statement by statement. The pragma is a no-op inside a transaction, so it is set
        // around them.
        self.db(self.conn.pragma_update(None, "foreign_keys", false))?;
        let migrated = self.apply_migrations(found);
        let restored = self.conn.pragma_update(None, "foreign_keys", true);
        migrated?;
        self.db(restored)
    }

    fn apply_migrations(&mut self, found: i64) -> Result<()> {
        for (version, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate);
            let tx = tx.at_archive(&self.path)?;
            // Another process may have applied it since the version was read (a command run
            // while a daemon creates the archive): the version is read again under the lock.
            let now = tx.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0));
            if now.at_archive(&self.path)? > version as i64 {
                continue;
            }
            let applied = tx
                .execute_batch(sql)
                .and_then(|()| tx.pragma_update(None, "user_version", version as i64 + 1))
                .and_then(|()| {
                    let broken: Option<String> = tx
                        .query_row("PRAGMA foreign_key_check", [], |r| r.get(0))
                        .optional()?;
                    match broken {
                        None => Ok(()),
                        Some(table) => Err(rusqlite::Error::SqliteFailure(
                            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT),
                            Some(format!(
                                "schema {} would leave rows of {table} referencing none",
                                version + 1
                            )),
                        )),
                    }
                })
                .and_then(|()| tx.commit());
            self.db(applied)?;
        }
        Ok(())
    }

    /// Every source with its cursor. A row that cannot be a cursor (a corrupted archive) does
    /// not fail the call: its source comes with `SourceRow::invalid` saying why, and a
    /// default cursor that is never to be used.
    pub fn sources(&self) -> Result<Vec<SourceRow>> {
        let mut stmt = self.db(self.conn.prepare(
            "SELECT s.id, s.dev, s.ino, s.path, s.harness, s.generation, s.gone, s.records,
                    s.rejects, s.last_archived_ms, c.offset, c.head_len, c.head_hash, c.tail_len,
                    c.tail_hash, c.size, c.mtime_ns, c.ctime_ns, c.held_back, c.held_back_prefix
             FROM sources s JOIN cursors c ON c.source_id = s.id ORDER BY s.id",
        ))?;
        let rows = stmt.query_map([], |r| {
            let id: SourceId = r.get(0)?;
            Ok(source_row(r).unwrap_or_else(|why| {
                let identity = Identity {
                    dev: r.get::<_, i64>(1).unwrap_or_default() as u64,
                    ino: r.get::<_, i64>(2).unwrap_or_default() as u64,
                };
                let path = r.get(3).map(path_from_blob).unwrap_or_default();
                let harness = r.get(4).unwrap_or_default();
                let mut row = SourceRow::new(id, identity, path, harness);
                row.invalid = Some(why);
                row
            }))
        });
        let rows = self.db(rows)?;
        self.db(rows.collect())
    }

    /// The prefix mark recorded for `identity`, if any.
    pub fn prefix_mark(&self, identity: Identity) -> Result<Option<PrefixMark>> {
        let row = self.conn.query_row(
            "SELECT path, offset, head_len, head_hash, tail_len, tail_hash, skipped_records
             FROM prefix_marks WHERE dev = ?1 AND ino = ?2",
            params![identity.dev as i64, identity.ino as i64],
            |r| {
                Ok(PrefixMark {
                    identity,
                    path: path_from_blob(r.get(0)?),
                    position: Position {
                        offset: r.get::<_, i64>(1)? as u64,
                        markers: Markers {
                            head: window(r.get(2)?, r.get(3)?),
                            tail: window(r.get(4)?, r.get(5)?),
                        },
                    },
                    skipped_records: r.get::<_, i64>(6)? as u64,
                })
            },
        );
        self.db(row.optional())
    }

    /// Applies `commit` in one transaction: all of it, or (on `Err`) none of it. Returns the
    /// `seq` of every record inserted, in the order of [`Commit::records`].
    ///
    /// Dictionaries trained meanwhile are stored first. When the commit holds records of a
    /// harness whose dictionary is being trained from a backlog's samples, it waits for that
    /// dictionary (a fraction of a second, once per large backfill) and compresses them with
    /// it; if it cannot be stored for a passing reason, they are compressed as before.
    pub fn apply(&mut self, commit: &Commit) -> Result<Vec<i64>> {
        for _ in 0..self.codec.pending() {
            self.store_trained(Wait::No);
        }
        // A backlog's dictionary is waited for by its records, for which it was trained.
        for b in commit.records() {
            if self.codec.awaits(&b.harness) {
                self.store_trained(Wait::For(&b.harness));
            }
        }
        let tx = self.write()?;
        let mut seqs = Vec::new();
        for op in &commit.ops {
            tx.apply(op, &mut seqs)?;
        }
        tx.commit()?;
        self.codec.start_training();
        Ok(seqs)
    }

    /// Whether the records of later commits are compressed (they are unless told otherwise).
    pub fn set_compress(&mut self, compress: bool) {
        self.codec.set_compress(compress);
    }

    /// Waits for the compression dictionaries being trained, and stores them, so that the next
    /// run starts with them. For a writer that is done.
    pub fn finish_training(&mut self) {
        while self.codec.pending() > 0 {
            self.store_trained(Wait::Any);
        }
    }

    /// Stores a compression dictionary that has been trained (or the one `wait` waits for),
    /// and puts it in use. One that cannot be stored for a passing reason is tried again at
    /// the next commit, unless the writer is done; otherwise it is logged and left unused: the
    /// records go on being compressed as they were.
    fn store_trained(&mut self, wait: Wait) {
        let Some(trained) = self.codec.take_trained(wait) else {
            return;
        };
        match codec::store(&self.conn, &trained, now_ms()) {
            Ok(true) => {
                log::info!(
                    "trained a compression dictionary for {} ({} bytes, id {}) from {} records ({} bytes)",
                    trained.harness,
                    trained.bytes.len(),
                    trained.id,
                    trained.samples,
                    trained.sample_bytes
                );
                self.codec.install(&trained);
            }
            Ok(false) => {
                log::warn!(
                    "archive {}: the compression dictionary trained for {} has id {}, which another \
                     dictionary has; it is not used",
                    self.path.display(),
                    trained.harness,
                    trained.id
                );
                self.codec.discard(&trained);
            }
            Err(e) => match self.db::<()>(Err(e)).unwrap_err() {
                // A full disk or a busy archive passes: stored at a later commit.
                e if e.is_transient() && !matches!(wait, Wait::Any) => {
                    log::debug!(
                        "compression dictionary for {} kept for later: {e}",
                        trained.harness
                    );
                    self.codec.keep_trained(trained);
                }
                e => {
                    log::warn!(
                        "cannot store the compression dictionary trained for {}: {}; it is not used",
                        trained.harness,
                        crate::error::error_chain(&e)
                    );
                    self.codec.discard(&trained);
                }
            },
        }
    }

    /// The connection and what reading its records takes.
    pub(crate) fn records_reader(&self) -> Records<'_> {
        Records {
            conn: &self.conn,
            codec: &self.codec,
        }
    }

    /// The next free source id (the engine allocates ids: only one `run` writes).
    pub fn next_source_id(&self) -> Result<SourceId> {
        // Pulled sources take the negative ids.
        let max = self.conn.query_row("SELECT max(id) FROM sources", [], |r| {
            r.get::<_, Option<i64>>(0)
        });
        Ok(self.db(max)?.unwrap_or(0).max(0) + 1)
    }

    /// Every root that has had its first scan.
    pub fn scanned_roots(&self) -> Result<Vec<PathBuf>> {
        let mut stmt = self.db(self.conn.prepare("SELECT path FROM roots"))?;
        let rows = self.db(stmt.query_map([], |r| r.get::<_, Vec<u8>>(0)))?;
        let blobs: Vec<Vec<u8>> = self.db(rows.collect())?;
        Ok(blobs.into_iter().map(path_from_blob).collect())
    }

    /// The value kept under `key`, if there is one.
    pub fn state(&self, key: StateKey) -> Result<Option<String>> {
        if !self.has_table("state")? {
            return Ok(None);
        }
        let v = self.conn.query_row(
            "SELECT value FROM state WHERE key = ?1",
            [key.name()],
            |r| r.get(0),
        );
        self.db(v.optional())
    }

    /// Begins a write transaction.
    fn write(&mut self) -> Result<Tx<'_>> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate);
        let tx = tx.at_archive(&self.path)?;
        Ok(Tx {
            tx,
            path: &self.path,
            codec: RefCell::new(&mut self.codec),
        })
    }

    /// Calls `each` for every archived record with `seq > since_seq`, in `seq` order,
    /// optionally only those of sources whose current path is `path` or lies under it.
    /// An `Err` from `each` stops the export and is returned.
    pub fn export(
        &self,
        since_seq: i64,
        path: Option<&Path>,
        mut each: impl FnMut(ExportRow) -> std::io::Result<()>,
    ) -> Result<std::io::Result<()>> {
        let filter = PathFilter::new(path);
        let mut stmt = self.db(self.conn.prepare(&format!(
            "{EXPORT_ROW} WHERE r.seq > ?1 AND {} ORDER BY r.seq",
            PathFilter::sql(2)
        )))?;
        let (exact, len, under) = filter.params();
        let mut rows = self.db(stmt.query(params![since_seq, exact, len, under]))?;
        let records = self.records_reader();
        while let Some(r) = self.db(rows.next())? {
            let row = self.db(records.export_row(r, 0))?;
            if let Err(e) = each(row) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// Records with `after < seq <= through`, in `seq` order, up to `limit` of them and
    /// stopping once they hold `max_bytes` (past at least one): one page of a consumer's
    /// catch-up (see `follow`).
    pub fn records_page(
        &self,
        after: i64,
        through: i64,
        limit: usize,
        max_bytes: u64,
    ) -> Result<Vec<ExportRow>> {
        let mut stmt = self.db(self.conn.prepare_cached(&format!(
            "{EXPORT_ROW} WHERE r.seq > ?1 AND r.seq <= ?2 ORDER BY r.seq LIMIT ?3"
        )))?;
        let mut rows = self.db(stmt.query(params![after, through, limit as i64]))?;
        let (mut page, mut bytes) = (Vec::new(), 0);
        let records = self.records_reader();
        while bytes < max_bytes
            && let Some(r) = self.db(rows.next())?
        {
            let row = self.db(records.export_row(r, 0))?;
            bytes += row.record.len() as u64;
            page.push(row);
        }
        Ok(page)
    }

    /// The connection, for a consumer that keeps its own tables in the archive (the session
    /// index) and writes them in transactions of its own.
    pub(crate) fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Attaches the database at `path` to this connection, read-only, as `alias`: its tables
    /// are then found by their names, after the archive's own. Errors name this archive.
    pub(crate) fn attach_read_only(&self, path: &Path, alias: &str) -> Result<()> {
        let attached = (self.conn).execute(&format!("ATTACH ?1 AS {alias}"), [read_only_uri(path)]);
        self.db(attached).map(drop)
    }

    /// Maps a SQLite error to [`Error::Archive`] naming this archive.
    pub(crate) fn db<T>(&self, result: rusqlite::Result<T>) -> Result<T> {
        result.at_archive(&self.path)
    }

    /// The rows of `sql` with `params`, each made by `row`.
    fn rows<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        row: impl FnMut(&rusqlite::Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let rows = (|| {
            let mut stmt = self.conn.prepare(sql)?;
            let rows = stmt.query_map(params, row)?;
            rows.collect::<rusqlite::Result<Vec<T>>>()
        })();
        self.db(rows)
    }

    /// The `seq` before the `n`th last record (0 when there are fewer): `export --since-seq`
    /// of it gives the last `n` records.
    pub fn before_last(&self, n: u64) -> Result<i64> {
        if n == 0 {
            return self.last_seq();
        }
        let seq = (self.conn).query_row(
            "SELECT seq FROM records ORDER BY seq DESC LIMIT 1 OFFSET ?1",
            [i64::try_from(n - 1).unwrap_or(i64::MAX)],
            |r| r.get::<_, i64>(0),
        );
        match seq {
            Ok(seq) => Ok(seq - 1),
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok(0),
            Err(e) => self.db(Err(e)),
        }
    }

    /// The highest `seq` committed, or 0 in an archive without records.
    pub fn last_seq(&self) -> Result<i64> {
        let last = (self.conn).query_row("SELECT max(seq) FROM records", [], |r| {
            r.get::<_, Option<i64>>(0)
        });
        Ok(self.db(last)?.unwrap_or(0))
    }

    /// The last `seq` the durable consumer `name` recorded as done ([`Op::ConsumerDone`]), if
    /// it ever did.
    pub fn consumer_seq(&self, name: &str) -> Result<Option<i64>> {
        let seq = (self.conn).query_row("SELECT seq FROM consumers WHERE name = ?1", [name], |r| {
            r.get(0)
        });
        self.db(seq.optional())
    }

    /// The bytes of the records committed after `seq` (reading each of them: callers bound
    /// how many).
    pub fn bytes_after(&self, seq: i64) -> Result<i64> {
        let mut stmt = self.db((self.conn).prepare("SELECT record FROM records WHERE seq > ?1"))?;
        let mut rows = self.db(stmt.query([seq]))?;
        let mut bytes = 0;
        while let Some(r) = self.db(rows.next())? {
            bytes += codec::record_len(self.db(r.get_ref(0).and_then(|v| Ok(v.as_blob()?)))?);
        }
        Ok(bytes as i64)
    }

    /// The sources that have captured states (snapshot files, and sessions in databases);
    /// none in an archive of a schema before 10, which `status` reads as it is.
    pub(crate) fn snapshot_sources(&self) -> Result<std::collections::HashSet<SourceId>> {
        let has: bool = self.db(self.conn.query_row(
            "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'",
            [],
            |r| r.get(0),
        ))?;
        if !has {
            return Ok(Default::default());
        }
        let mut stmt = self.db(self
            .conn
            .prepare("SELECT DISTINCT source_id FROM snapshots"))?;
        let ids = self.db(stmt.query_map([], |r| r.get(0)))?;
        self.db(ids.collect())
    }

    /// The latest captured state of snapshot source `source` (a file rewritten whole), if it
    /// has one.
    pub(crate) fn latest_snapshot(&self, source: SourceId) -> Result<Option<Vec<u8>>> {
        self.db(snapshots::latest(&self.conn, source))
    }

    /// Calls `each` with the bytes of every record of `source`'s `generation` up to seq
    /// `through`, in `seq` order; an `Err` from `each` stops and is returned.
    pub fn source_records(
        &self,
        source: SourceId,
        generation: i64,
        through: i64,
        mut each: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut stmt = self.db((self.conn).prepare_cached(
            "SELECT seq, record FROM records WHERE source_id = ?1 AND generation = ?2 AND seq <= ?3
             ORDER BY seq",
        ))?;
        let mut rows = self.db(stmt.query(params![source, generation, through]))?;
        let records = self.records_reader();
        while let Some(r) = self.db(rows.next())? {
            let record = self.db(r.get(0).and_then(|seq| records.record(r, 1, seq)))?;
            each(&record)?;
        }
        Ok(())
    }

    /// Calls `each` for every rejected line, in the order they were recorded, optionally only
    /// those of sources whose current path is `path` or lies under it. Their bytes are not
    /// loaded: [`Archive::write_reject_raw`] writes them out. An `Err` from `each` stops the
    /// listing and is returned.
    pub fn rejects(
        &self,
        path: Option<&Path>,
        mut each: impl FnMut(RejectRow) -> std::io::Result<()>,
    ) -> Result<std::io::Result<()>> {
        let filter = PathFilter::new(path);
        let mut stmt = self.db(self.conn.prepare(&format!(
            "SELECT j.id, j.at_ms, s.id, s.path, j.generation, j.offset, j.length,
                    length(j.raw), j.reason
             FROM rejects j JOIN sources s ON s.id = j.source_id
             WHERE {} ORDER BY j.id",
            PathFilter::sql(1)
        )))?;
        let (exact, len, under) = filter.params();
        let mut rows = self.db(stmt.query(params![exact, len, under]))?;
        while let Some(r) = self.db(rows.next())? {
            let row = self.db((|| {
                Ok(RejectRow {
                    id: r.get(0)?,
                    at_ms: r.get(1)?,
                    source: r.get(2)?,
                    path: path_from_blob(r.get(3)?),
                    generation: r.get(4)?,
                    offset: r.get::<_, i64>(5)? as u64,
                    length: r.get::<_, i64>(6)? as u64,
                    kept: r.get::<_, i64>(7)? as u64,
                    reason: r.get(8)?,
                })
            })())?;
            if let Err(e) = each(row) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// Writes the bytes kept of reject `id` to `out`, as they were on disk, without loading
    /// them whole. `Ok(None)` when there is no such reject; `Ok(Some(Err))` when `out` failed.
    pub fn write_reject_raw(
        &self,
        id: i64,
        out: &mut impl std::io::Write,
    ) -> Result<Option<std::io::Result<u64>>> {
        let exists = self
            .conn
            .query_row("SELECT 1 FROM rejects WHERE id = ?1", [id], |_| Ok(()));
        if self.db(exists.optional())?.is_none() {
            return Ok(None);
        }
        let blob = self
            .conn
            .blob_open(rusqlite::MAIN_DB, "rejects", "raw", id, true);
        let mut blob = self.db(blob)?;
        Ok(Some(std::io::copy(&mut blob, out)))
    }

    /// What the records take: their bytes, the bytes storing them takes, and how many
    /// compression dictionaries there are; `None` for an archive of an earlier schema opened
    /// without upgrading it.
    pub fn storage(&self) -> Result<Option<Storage>> {
        if !self.has_table("dictionaries")? {
            return Ok(None);
        }
        let storage = self.conn.query_row(
            "SELECT coalesce(sum(bytes), 0), coalesce(sum(stored), 0),
                    (SELECT count(*) FROM dictionaries)
             FROM sources",
            [],
            |r| {
                Ok(Storage {
                    record_bytes: r.get::<_, i64>(0)? as u64,
                    stored_bytes: r.get::<_, i64>(1)? as u64,
                    dictionaries: r.get::<_, i64>(2)? as u64,
                })
            },
        );
        self.db(storage).map(Some)
    }

    /// How many lifecycle events are recorded, for `status` (rejects are counted per source).
    pub fn event_count(&self) -> Result<u64> {
        let n = self
            .conn
            .query_row("SELECT count(*) FROM events", [], |r| r.get::<_, i64>(0));
        Ok(self.db(n)? as u64)
    }
}

/// One write transaction. Dropped without `commit`, it rolls back.
struct Tx<'a> {
    tx: rusqlite::Transaction<'a>,
    path: &'a Path,
    codec: RefCell<&'a mut Codec>,
}

impl Tx<'_> {
    fn db<T>(&self, result: rusqlite::Result<T>) -> Result<T> {
        result.at_archive(self.path)
    }

    fn insert_source(
        &self,
        id: SourceId,
        identity: Identity,
        path: &Path,
        harness: &str,
        cursor: &Cursor,
    ) -> Result<()> {
        self.db(self.tx.execute(
            "INSERT INTO sources (id, dev, ino, path, harness, generation, gone, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, ?6)",
            params![
                id,
                identity.dev as i64,
                identity.ino as i64,
                blob(path),
                harness,
                now_ms()
            ],
        ))?;
        self.put_cursor(id, cursor)
    }

    fn update_source(
        &self,
        id: SourceId,
        identity: Identity,
        path: &Path,
        generation: i64,
        gone: bool,
    ) -> Result<()> {
        let mut stmt = self.db(self.tx.prepare_cached(
            "UPDATE sources SET dev = ?2, ino = ?3, path = ?4, generation = ?5, gone = ?6
             WHERE id = ?1",
        ))?;
        let n = stmt.execute(params![
            id,
            identity.dev as i64,
            identity.ino as i64,
            blob(path),
            generation,
            gone
        ]);
        self.db(n).map(drop)
    }

    fn put_cursor(&self, id: SourceId, cursor: &Cursor) -> Result<()> {
        let m = &cursor.position.markers;
        let fp = cursor.fingerprint.as_ref();
        let mut stmt = self.db(self.tx.prepare_cached(
            "INSERT OR REPLACE INTO cursors (source_id, offset, head_len, head_hash, tail_len,
                 tail_hash, size, mtime_ns, ctime_ns, held_back, held_back_prefix, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        ))?;
        let n = stmt.execute(params![
            id,
            cursor.position.offset as i64,
            m.head.len as i64,
            m.head.hash as i64,
            m.tail.len as i64,
            m.tail.hash as i64,
            fp.map(|f| f.size as i64),
            fp.map(|f| f.mtime_ns),
            fp.map(|f| f.ctime_ns),
            cursor.held_back as i64,
            cursor.held_back_prefix,
            now_ms()
        ]);
        self.db(n).map(drop)
    }

    fn insert_records(&self, batch: &RecordBatch, seqs: &mut Vec<i64>) -> Result<()> {
        let (id, records) = (batch.source, &batch.records);
        if records.is_empty() {
            return Ok(());
        }
        let mut stmt = self.db(self.tx.prepare_cached(
            "INSERT INTO records (source_id, generation, offset, record) VALUES (?1, ?2, ?3, ?4)",
        ))?;
        let bytes_of: Vec<&[u8]> = records.iter().map(|r| &r.bytes[..]).collect();
        let encoded = (self.codec.borrow_mut()).encode_batch(&self.tx, &batch.harness, &bytes_of);
        let (mut bytes, mut stored_bytes) = (0, 0);
        for (r, stored) in records.iter().zip(self.db(encoded)?) {
            let row = params![id, batch.generation, r.offset as i64, bound(&stored)];
            self.db(stmt.execute(row))?;
            let seq = self.tx.last_insert_rowid();
            self.fill_in_place("records", "record", seq, &stored)?;
            seqs.push(seq);
            bytes += r.bytes.len() as i64;
            stored_bytes += stored.len() as i64;
        }
        let mut stmt = self.db(self.tx.prepare_cached(
            "UPDATE sources SET records = records + ?2, last_archived_ms = ?3, bytes = bytes + ?4,
                 stored = stored + ?5
             WHERE id = ?1",
        ))?;
        let counts = params![id, records.len() as i64, batch.read_ms, bytes, stored_bytes];
        self.db(stmt.execute(counts)).map(drop)
    }

    /// Writes `bytes` into `table.column` of row `rowid` when [`bound`] gave that row a
    /// zero-filled blob in their place; does nothing otherwise.
    fn fill_in_place(&self, table: &str, column: &str, rowid: i64, bytes: &[u8]) -> Result<()> {
        use std::io::Write;
        if bytes.len() <= WRITTEN_IN_PLACE {
            return Ok(());
        }
        let blob = self
            .tx
            .blob_open(rusqlite::MAIN_DB, table, column, rowid, false);
        let mut blob = self.db(blob)?;
        blob.write_all(bytes).map_err(|e| self.blob_error(e))
    }

    /// SQLite's error inside a blob write's `io::Error`, so a full disk stays one.
    fn blob_error(&self, e: std::io::Error) -> Error {
        match e
            .into_inner()
            .map(|inner| inner.downcast::<rusqlite::Error>())
        {
            Some(Ok(sqlite)) => self.db::<()>(Err(*sqlite)).unwrap_err(),
            Some(Err(other)) => Error::Io {
                path: self.path.to_owned(),
                source: std::io::Error::other(other),
            },
            None => Error::Io {
                path: self.path.to_owned(),
                source: std::io::Error::other("blob write failed"),
            },
        }
    }

    fn insert_rejects(&self, id: SourceId, generation: i64, rejects: &[Reject]) -> Result<()> {
        if rejects.is_empty() {
            return Ok(());
        }
        let mut stmt = self.db(self.tx.prepare_cached(
            "INSERT INTO rejects (source_id, generation, offset, length, reason, at_ms, raw)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        ))?;
        for r in rejects {
            let row = params![
                id,
                generation,
                r.offset as i64,
                r.length as i64,
                r.reason,
                now_ms(),
                bound(&r.raw)
            ];
            self.db(stmt.execute(row))?;
            let rowid = self.tx.last_insert_rowid();
            self.fill_in_place("rejects", "raw", rowid, &r.raw)?;
        }
        let mut stmt = self.db(self
            .tx
            .prepare_cached("UPDATE sources SET rejects = rejects + ?2 WHERE id = ?1"))?;
        self.db(stmt.execute(params![id, rejects.len() as i64]))
            .map(drop)
    }

    // A line that grew since the last read adds a piece from the end of what is stored.
    fn put_held_back(&self, id: SourceId, offset: u64, bytes: &[u8], grown: bool) -> Result<()> {
        let stored = self.tx.query_row(
            "SELECT min(offset), sum(length(bytes)) FROM held_back WHERE source_id = ?1",
            [id],
            |r| Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<i64>>(1)?)),
        );
        let stored = match self.db(stored)? {
            (Some(at), Some(len)) if grown && at == offset as i64 => len as usize,
            _ => 0,
        };
        if stored == bytes.len() && stored > 0 {
            return Ok(());
        }
        if stored == 0 || stored > bytes.len() {
            let mut stmt = self.db(self
                .tx
                .prepare_cached("DELETE FROM held_back WHERE source_id = ?1"))?;
            self.db(stmt.execute([id]))?;
        }
        let start = if stored > bytes.len() { 0 } else { stored };
        let piece = &bytes[start..];
        if piece.is_empty() {
            return Ok(());
        }
        let mut stmt = self.db(self.tx.prepare_cached(
            "INSERT INTO held_back (source_id, start, offset, bytes) VALUES (?1, ?2, ?3, ?4)",
        ))?;
        self.db(stmt.execute(params![id, start as i64, offset as i64, bound(piece)]))?;
        let rowid = self.tx.last_insert_rowid();
        self.fill_in_place("held_back", "bytes", rowid, piece)
    }

    // The bytes go from blob to blob in small pieces (an `INSERT … SELECT` would load them
    // whole).
    fn reject_held_back(
        &self,
        id: SourceId,
        generation: i64,
        length: u64,
        reason: &str,
    ) -> Result<()> {
        let mut stmt = self.db(self.tx.prepare_cached(
            "SELECT rowid, start, offset, length(bytes) FROM held_back WHERE source_id = ?1
             ORDER BY start",
        ))?;
        let pieces = stmt.query_map([id], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        });
        let pieces: Vec<(i64, i64, i64, i64)> = self.db(self.db(pieces)?.collect())?;
        let Some(&(_, last_start, offset, last_len)) = pieces.last() else {
            return Ok(());
        };
        let mut stmt = self.db(self.tx.prepare_cached(
            "INSERT INTO rejects (source_id, generation, offset, length, reason, at_ms, raw)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, zeroblob(?7))",
        ))?;
        let kept = last_start + last_len;
        let row = params![
            id,
            generation,
            offset,
            length as i64,
            reason,
            now_ms(),
            kept
        ];
        self.db(stmt.execute(row))?;
        let reject = self.tx.last_insert_rowid();
        let main = rusqlite::MAIN_DB;
        let mut to = self.db(self.tx.blob_open(main, "rejects", "raw", reject, false))?;
        for (rowid, start, ..) in pieces {
            use std::io::{Seek, SeekFrom};
            let mut from = self.db(self.tx.blob_open(main, "held_back", "bytes", rowid, true))?;
            let copied = to
                .seek(SeekFrom::Start(start as u64))
                .and_then(|_| std::io::copy(&mut from, &mut to));
            copied.map_err(|e| self.blob_error(e))?;
        }
        let mut stmt = self.db(self
            .tx
            .prepare_cached("UPDATE sources SET rejects = rejects + 1 WHERE id = ?1"))?;
        self.db(stmt.execute([id]))?;
        self.put_held_back(id, 0, &[], false)
    }

    fn event(&self, source: Option<SourceId>, kind: &str, path: &Path, detail: &str) -> Result<()> {
        self.db(insert_event(&self.tx, source, kind, &blob(path), detail))
    }

    fn put_prefix_mark(&self, mark: &PrefixMark) -> Result<()> {
        let id = mark.identity;
        let m = &mark.position.markers;
        self.db(self.tx.execute(
            "INSERT OR REPLACE INTO prefix_marks (dev, ino, path, offset, head_len, head_hash,
                 tail_len, tail_hash, skipped_records, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                id.dev as i64,
                id.ino as i64,
                blob(&mark.path),
                mark.position.offset as i64,
                m.head.len as i64,
                m.head.hash as i64,
                m.tail.len as i64,
                m.tail.hash as i64,
                mark.skipped_records as i64,
                now_ms()
            ],
        ))
        .map(drop)
    }

    fn consumer_done(&self, name: &str, seq: i64) -> Result<()> {
        self.db(record_consumer_done(&self.tx, name, seq))
    }

    fn set_state(&self, key: &str, value: &str) -> Result<()> {
        self.db(self.tx.execute(
            "INSERT OR REPLACE INTO state (key, value, updated_ms) VALUES (?1, ?2, ?3)",
            params![key, value, now_ms()],
        ))
        .map(drop)
    }

    /// Writes `op`, pushing the `seq` of each record it inserts to `seqs`.
    fn apply(&self, op: &Op, seqs: &mut Vec<i64>) -> Result<()> {
        match op {
            Op::InsertSource {
                id,
                identity,
                path,
                harness,
                cursor,
            } => self.insert_source(*id, *identity, path, harness, cursor),
            Op::UpdateSource {
                id,
                identity,
                path,
                generation,
                gone,
            } => self.update_source(*id, *identity, path, *generation, *gone),
            Op::PutCursor { id, cursor } => self.put_cursor(*id, cursor),
            Op::Records(r) => self.insert_records(r, seqs),
            Op::Snapshot { id, bytes } => self.db(snapshots::store(&self.tx, *id, bytes)).map(drop),
            Op::Rejects {
                id,
                generation,
                rejects,
            } => self.insert_rejects(*id, *generation, rejects),
            Op::Event {
                source,
                kind,
                path,
                detail,
            } => self.event(*source, kind, path, detail),
            Op::PutHeldBack {
                id,
                offset,
                bytes,
                grown,
            } => self.put_held_back(*id, *offset, bytes, *grown),
            Op::RejectHeldBack {
                id,
                generation,
                length,
                reason,
            } => self.reject_held_back(*id, *generation, *length, reason),
            Op::PutPrefixMark(mark) => self.put_prefix_mark(mark),
            Op::RemovePrefixMark(identity) => self.remove_prefix_mark(*identity),
            Op::RootScanned(root) => self.mark_root_scanned(root),
            Op::SetState { key, value } => self.set_state(key.name(), value),
            Op::Samples { harness, lines } => {
                let mut codec = self.codec.borrow_mut();
                self.db(codec.prime(&self.tx, harness, lines))
            }
            Op::ConsumerDone { name, seq } => self.consumer_done(name, *seq),
            Op::Machine { id, uuid, host } => self.db(self.tx.execute(
                "INSERT INTO machines (id, uuid, host, first_pulled_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (id) DO UPDATE SET host = excluded.host",
                params![id, uuid, host, now_ms()],
            ))
            .map(drop),
            Op::PulledSource {
                id,
                machine,
                remote_id,
                harness,
                path,
                generation,
            } => self.db(self.tx.execute(
                "INSERT INTO sources (id, dev, ino, path, harness, generation, gone, created_ms,
                     machine, remote_id)
                 VALUES (?1, 0, 0, ?2, ?3, ?4, 0, ?5, ?6, ?7)
                 ON CONFLICT (id) DO UPDATE SET path = excluded.path,
                     generation = excluded.generation",
                params![id, blob(path), harness, generation, now_ms(), machine, remote_id],
            ))
            .map(drop),
            Op::Pulled {
                sink,
                machine,
                pulled_id,
                records,
                shipped_ms,
                sessions_at,
            } => self.db(self.tx.execute(
                "INSERT INTO pulls (sink, machine, pulled_id, sessions_at, records, last_pulled_ms,
                     last_shipped_ms)
                 VALUES (?1, ?2, ?3, coalesce(?4, ''), ?5, ?6, ?7)
                 ON CONFLICT (sink, machine) DO UPDATE SET
                     pulled_id = max(pulled_id, excluded.pulled_id),
                     sessions_at = coalesce(?4, sessions_at),
                     records = records + excluded.records,
                     last_pulled_ms = excluded.last_pulled_ms,
                     last_shipped_ms = coalesce(excluded.last_shipped_ms, last_shipped_ms)",
                params![sink, machine, pulled_id, sessions_at, records, now_ms(), shipped_ms],
            ))
            .map(drop),
            Op::PulledSession {
                machine,
                harness,
                session,
                git_remote,
            } => self.db(self.tx.execute(
                "INSERT INTO pulled_sessions (machine, harness, session, git_remote)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (machine, harness, session) DO UPDATE SET
                     git_remote = excluded.git_remote",
                params![machine, harness, session, git_remote],
            ))
            .map(drop),
        }
    }

    fn remove_prefix_mark(&self, identity: Identity) -> Result<()> {
        self.db(self.tx.execute(
            "DELETE FROM prefix_marks WHERE dev = ?1 AND ino = ?2",
            params![identity.dev as i64, identity.ino as i64],
        ))
        .map(drop)
    }

    fn mark_root_scanned(&self, root: &Path) -> Result<()> {
        self.db(self.tx.execute(
            "INSERT OR IGNORE INTO roots (path, first_scan_ms) VALUES (?1, ?2)",
            params![blob(root), now_ms()],
        ))
        .map(drop)
    }

    /// Commits everything done in this transaction.
    fn commit(self) -> Result<()> {
        let path = self.path;
        self.tx.commit().at_archive(path)
    }
}

/// Creates the archive file 0600 (and its directory 0700) if it does not exist; true if it
/// was created. SQLite gives the `-wal` and `-shm` files the database file's mode.
pub(crate) fn create_private(path: &Path) -> Result<bool> {
    if path.exists() {
        return Ok(false);
    }
    ensure_dir(path)?;
    // Created with mode 0600: the umask can only take bits away, so no other bits appear,
    // even for an instant.
    let created = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match created {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Error::Io {
            path: path.to_owned(),
            source: e,
        }),
    }
}

/// Creates the archive's directory (0700, and any missing parents) if it does not exist. An
/// existing directory is left as it is.
pub(crate) fn ensure_dir(archive: &Path) -> Result<()> {
    let Some(dir) = archive.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.exists() && !dir.is_dir() {
        let source = std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory");
        return Err(Error::Io {
            path: dir.to_owned(),
            source,
        });
    }
    if dir.exists() {
        return Ok(());
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .at_path(dir)
}

/// A `file:` URI opening `path` read-only (for `ATTACH`): every byte of the path but the
/// unreserved ones and `/` is percent-encoded, so that no `?`, `#` or `%` in it is taken for
/// URI syntax.
pub(crate) fn read_only_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                uri.push(char::from(b))
            }
            _ => uri.push_str(&format!("%{b:02X}")),
        }
    }
    uri.push_str("?mode=ro");
    uri
}

fn window(len: i64, hash: i64) -> Window {
    Window {
        len: len as u64,
        hash: hash as u64,
    }
}

/// One row of [`Archive::sources`], checked: `Err` says what makes it unusable (a value of the
/// wrong type, a negative count or size, marker windows longer than a window or than the
/// bytes before the cursor, held-back bytes shorter than their prefix). Reading such a cursor
/// could index past a buffer or allocate whatever length the row claims.
fn source_row(r: &rusqlite::Row) -> std::result::Result<SourceRow, String> {
    let get_i64 = |i: usize| r.get::<_, i64>(i).map_err(|e| e.to_string());
    let count = |i: usize, what: &str| match get_i64(i)? {
        n if n < 0 => Err(format!("{what} is negative ({n})")),
        n => Ok(n as u64),
    };
    let identity = Identity {
        dev: get_i64(1)? as u64,
        ino: get_i64(2)? as u64,
    };
    let offset = count(10, "offset")?;
    let window_at = |len_at: usize, what: &str| {
        let len = count(len_at, what)?;
        let most = offset.min(MARKER_WINDOW);
        if len > most {
            return Err(format!("{what} {len} is longer than {most} bytes"));
        }
        Ok(window(len as i64, get_i64(len_at + 1)?))
    };
    let markers = Markers {
        head: window_at(11, "head window")?,
        tail: window_at(13, "tail window")?,
    };
    let size = r.get::<_, Option<i64>>(15).map_err(|e| e.to_string())?;
    let fingerprint = match size {
        None => None,
        Some(size) if size < 0 => return Err(format!("size is negative ({size})")),
        Some(size) => Some(Fingerprint {
            identity,
            size: size as u64,
            mtime_ns: get_i64(16)?,
            ctime_ns: get_i64(17)?,
        }),
    };
    let held_back = count(18, "held-back length")?;
    let held_back_prefix: Vec<u8> = r.get(19).map_err(|e| e.to_string())?;
    let prefix = held_back_prefix.len();
    if prefix > HELD_BACK_PREFIX || prefix as u64 > held_back {
        return Err(format!(
            "held-back prefix of {prefix} bytes for {held_back} held-back bytes"
        ));
    }
    let generation = count(5, "generation")? as i64;
    Ok(SourceRow {
        id: get_i64(0)?,
        identity,
        path: path_from_blob(r.get(3).map_err(|e| e.to_string())?),
        harness: r.get(4).map_err(|e| e.to_string())?,
        generation,
        gone: r.get(6).map_err(|e| e.to_string())?,
        records: count(7, "record count")?,
        rejects: count(8, "reject count")?,
        last_archived_ms: r.get(9).map_err(|e| e.to_string())?,
        cursor: Cursor {
            position: Position { offset, markers },
            fingerprint,
            held_back,
            held_back_prefix,
        },
        invalid: None,
    })
}

/// `bytes` as a value to bind: themselves, or, past [`WRITTEN_IN_PLACE`], a zero-filled blob
/// of their length for [`Tx::fill_in_place`] to fill.
fn bound(bytes: &[u8]) -> rusqlite::types::ToSqlOutput<'_> {
    use rusqlite::types::{ToSqlOutput, ValueRef};
    if bytes.len() > WRITTEN_IN_PLACE {
        ToSqlOutput::ZeroBlob(bytes.len() as u64)
    } else {
        ToSqlOutput::Borrowed(ValueRef::Blob(bytes))
    }
}

fn blob(path: &Path) -> Vec<u8> {
    path.as_os_str().as_bytes().to_vec()
}

/// A path stored as its bytes.
pub(crate) fn path_from_blob(bytes: Vec<u8>) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(&bytes))
}

/// Records, inside `tx`, that the durable consumer `name` is done with every record up to
/// `seq` ([`Op::ConsumerDone`], and consumers that write their own transactions).
/// Adds one row to `events`, now: the one statement that writes an event.
fn insert_event(
    conn: &Connection,
    source: Option<SourceId>,
    kind: &str,
    path: &[u8],
    detail: &str,
) -> rusqlite::Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO events (at_ms, source_id, kind, path, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    stmt.execute(params![now_ms(), source, kind, path, detail])
        .map(drop)
}

pub(crate) fn record_consumer_done(tx: &Connection, name: &str, seq: i64) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT OR REPLACE INTO consumers (name, seq, updated_ms) VALUES (?1, ?2, ?3)",
        params![name, seq, now_ms()],
    )
    .map(drop)
}

/// One change inside a [`Commit`]: what each variant writes is its contract, and
/// `Tx::apply` is the one place that writes it.
#[derive(Debug)]
pub enum Op {
    /// Adds source `id` at generation 0 with its first cursor.
    InsertSource {
        /// The new source's id (the engine allocates ids: only one `run` writes).
        id: SourceId,
        /// The identity it owns.
        identity: Identity,
        /// Where its file is.
        path: PathBuf,
        /// The watcher that found it.
        harness: String,
        /// Where reading starts.
        cursor: Cursor,
    },
    /// Records a source's identity, path, generation and gone flag.
    UpdateSource {
        /// The source.
        id: SourceId,
        /// Its identity now.
        identity: Identity,
        /// Its path now.
        path: PathBuf,
        /// Its generation now.
        generation: i64,
        /// Whether its file is gone.
        gone: bool,
    },
    /// Stores a source's cursor.
    PutCursor {
        /// The source.
        id: SourceId,
        /// Its cursor now.
        cursor: Cursor,
    },
    /// Appends records; they take the next `seq` numbers, returned by [`Archive::apply`] in
    /// the order of [`Commit::records`].
    Records(RecordBatch),
    /// Keeps `bytes` as the latest state of snapshot source `id` (a file rewritten whole),
    /// unless it is that already (`snapshots`).
    Snapshot {
        /// The source.
        id: SourceId,
        /// The file's bytes as captured.
        bytes: Vec<u8>,
    },
    /// Records rejected lines, whole (up to the record limit), and counts them on the source.
    Rejects {
        /// The source.
        id: SourceId,
        /// The generation they belong to.
        generation: i64,
        /// The lines.
        rejects: Vec<Reject>,
    },
    /// Keeps the bytes held back past a source's cursor, all of them (up to the record limit),
    /// for the reject they become if the generation ends first; empty `bytes` forget them.
    PutHeldBack {
        /// The source.
        id: SourceId,
        /// Where the unfinished line starts (the cursor's offset).
        offset: u64,
        /// Its bytes so far.
        bytes: Vec<u8>,
        /// They begin with the bytes kept at the last read (the same line, longer now): only
        /// what they add is written.
        grown: bool,
    },
    /// Records the held-back bytes kept for a source as a reject, counts it, and forgets
    /// them; nothing when none are kept.
    RejectHeldBack {
        /// The source.
        id: SourceId,
        /// The generation they belong to.
        generation: i64,
        /// The unfinished line's length so far (more than is kept, past the record limit).
        length: u64,
        /// Why it is rejected.
        reason: String,
    },
    /// Appends to the lifecycle log.
    Event {
        /// The source concerned, if any.
        source: Option<SourceId>,
        /// What happened (`seeded`, `moved`, `reject`, …).
        kind: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The details.
        detail: String,
    },
    /// Stores a prefix mark, replacing any earlier one for the same identity.
    PutPrefixMark(PrefixMark),
    /// Deletes the prefix mark of an identity (a mark is used once).
    RemovePrefixMark(Identity),
    /// Remembers that a root has had its first scan.
    RootScanned(PathBuf),
    /// Records that the durable consumer `name` is done with every record up to `seq`,
    /// committed together with the consumer's own work (see `follow`).
    ConsumerDone {
        /// The consumer.
        name: String,
        /// The last `seq` it is done with.
        seq: i64,
    },
    /// Lines spread over a backlog of `harness`'s transcripts about to be archived (see
    /// `sample`): a dictionary for it is trained from them at once, in place of those it
    /// would train from the records first committed.
    Samples {
        /// The harness.
        harness: String,
        /// The lines, each cut as the archive cuts its samples.
        lines: Vec<Vec<u8>>,
    },
    /// Keeps a value in `state`.
    SetState {
        /// Its name.
        key: StateKey,
        /// Its value.
        value: String,
    },
    /// Adds another machine, whose records are pulled.
    Machine {
        /// Its id in this archive (1 and up).
        id: i64,
        /// Its UUID, the `machine_id` of its archive.
        uuid: String,
        /// Its host name, a label.
        host: String,
    },
    /// Adds or updates a source pulled from another machine: a negative id, no cursor.
    PulledSource {
        /// Its id here (negative).
        id: SourceId,
        /// Its machine's id here.
        machine: i64,
        /// Its id on that machine.
        remote_id: i64,
        /// Its watcher there.
        harness: String,
        /// Its path there.
        path: PathBuf,
        /// Its generation there.
        generation: i64,
    },
    /// Moves sink `sink`'s place in what it pulls of `machine`, with the records pulled.
    Pulled {
        /// The sink.
        sink: String,
        /// The machine's id here.
        machine: i64,
        /// The store's last `pull_id` taken.
        pulled_id: i64,
        /// How many records this pull added.
        records: i64,
        /// When the last of them was shipped by its machine (Unix ms).
        shipped_ms: Option<i64>,
        /// The time of the last session row taken, as the store writes it.
        sessions_at: Option<String>,
    },
    /// What another machine's index says of one of its sessions.
    PulledSession {
        /// The machine's id here.
        machine: i64,
        /// The watcher.
        harness: String,
        /// The agent's id of the session.
        session: String,
        /// The project's git remote.
        git_remote: Option<String>,
    },
}

impl Op {
    /// An [`Op::Event`].
    pub fn event(source: Option<SourceId>, kind: &'static str, path: &Path, detail: &str) -> Op {
        Op::Event {
            source,
            kind,
            path: path.to_owned(),
            detail: detail.to_owned(),
        }
    }
}

/// Records of one source and generation, with what an envelope needs.
#[derive(Debug)]
pub struct RecordBatch {
    /// The source.
    pub source: SourceId,
    /// Its watcher.
    pub harness: String,
    /// Its current path.
    pub path: PathBuf,
    /// The generation.
    pub generation: i64,
    /// When they were read (Unix ms), kept as the source's last archived time.
    pub read_ms: i64,
    /// The records, in file order.
    pub records: Vec<Record>,
}

/// Where the engine's commits go.
pub trait Committer {
    /// Hands over one transaction. `Ok` means it is committed, or accepted by an archive
    /// writer that commits every commit in order; `Err` is fatal (the archive is unusable or
    /// its writer has stopped).
    fn submit(&mut self, commit: Commit) -> Result<()>;

    /// Returns once everything submitted so far is committed.
    fn flush(&mut self) -> Result<()>;
}

/// The changes of one transaction, built by the engine and applied by the archive writer:
/// everything in it commits together or not at all.
#[derive(Debug, Default)]
pub struct Commit {
    ops: Vec<Op>,
}

impl Commit {
    /// True when there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Its operations, in order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Adds `op` (record and reject batches only when they hold some).
    pub fn push(&mut self, op: Op) {
        let empty = match &op {
            Op::Records(batch) => batch.records.is_empty(),
            Op::Rejects { rejects, .. } => rejects.is_empty(),
            _ => false,
        };
        if !empty {
            self.ops.push(op);
        }
    }

    /// The record batches, in the order their `seq` numbers are returned by
    /// [`Archive::apply`].
    pub fn records(&self) -> impl Iterator<Item = &RecordBatch> {
        self.ops.iter().filter_map(|op| match op {
            Op::Records(batch) => Some(batch),
            _ => None,
        })
    }

    /// The bytes of all its records.
    pub fn record_bytes(&self) -> u64 {
        (self.records().flat_map(|b| &b.records))
            .map(|r| r.bytes.len() as u64)
            .sum()
    }

    /// The record batches, taken out of the commit (once it is applied).
    pub fn into_records(self) -> impl Iterator<Item = RecordBatch> {
        self.ops.into_iter().filter_map(|op| match op {
            Op::Records(batch) => Some(batch),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two processes may open a new archive at once (a daemon creating it, a command run
    /// beside it): one that read the schema version before the other migrated must not apply
    /// a migration again.
    #[test]
    fn a_migration_applied_meanwhile_by_another_process_is_not_applied_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("archive.db");
        let mut stale = Archive::open(&path).unwrap();
        // As if this connection had read the version before the schema was made.
        stale.apply_migrations(0).unwrap();
        stale.apply_migrations(MIGRATIONS.len() as i64 - 1).unwrap();
        assert_eq!(stale.schema_version().unwrap(), MIGRATIONS.len() as i64);
    }

    /// The archive's schema as every migration leaves it, one statement per table, index,
    /// view and trigger, ordered by kind and name.
    fn current_schema(archive: &Archive) -> String {
        let mut stmt = (archive.conn)
            .prepare(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'
                 ORDER BY type DESC, name",
            )
            .unwrap();
        let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
        let statements: Vec<String> = rows.map(|r| format!("{};\n", r.unwrap())).collect();
        statements.join("\n")
    }

    /// `schema_current.sql` is the one place to read the archive's schema: it must be what the
    /// migrations make. After a new migration, write it again with
    /// `TRANSCRIPT_SYNC_WRITE_SCHEMA=1 cargo test --lib schema_current`.
    #[test]
    fn schema_current_is_what_every_migration_makes() {
        let (_dir, archive) = archive();
        let made = format!(
            "-- The archive's schema after every migration (schema_v1.sql to schema_v{}.sql).\n\
             -- Written by the test schema_current_is_what_every_migration_makes; do not edit.\n\n{}",
            MIGRATIONS.len(),
            current_schema(&archive)
        );
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/archive/schema_current.sql");
        if std::env::var_os("TRANSCRIPT_SYNC_WRITE_SCHEMA").is_some() {
            std::fs::write(&file, &made).unwrap();
        }
        let committed = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(
            committed == made,
            "{} differs from the schema the migrations make; write it again with \
             TRANSCRIPT_SYNC_WRITE_SCHEMA=1 cargo test --lib schema_current",
            file.display()
        );
    }

    fn archive() -> (tempfile::TempDir, Archive) {
        let dir = tempfile::tempdir().unwrap();
        let archive = Archive::open(&dir.path().join("a.db")).unwrap();
        (dir, archive)
    }

    fn add_source(archive: &mut Archive, id: SourceId, path: &str) {
        let mut tx = Commit::default();
        tx.push(Op::InsertSource {
            id,
            identity: Identity {
                dev: 1,
                ino: id as u64,
            },
            path: path.into(),
            harness: "generic".into(),
            cursor: Cursor::default(),
        });
        archive.apply(&tx).unwrap();
    }

    fn apply(archive: &mut Archive, op: Op) {
        let mut tx = Commit::default();
        tx.push(op);
        archive.apply(&tx).unwrap();
    }

    fn pieces(archive: &Archive) -> Vec<(i64, Vec<u8>)> {
        let mut stmt = (archive.conn)
            .prepare("SELECT start, bytes FROM held_back ORDER BY source_id, start")
            .unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(Result::unwrap).collect()
    }

    fn raw(archive: &Archive, id: i64) -> Vec<u8> {
        let mut out = Vec::new();
        archive
            .write_reject_raw(id, &mut out)
            .unwrap()
            .unwrap()
            .unwrap();
        out
    }

    #[test]
    fn held_back_bytes_that_grow_are_stored_as_pieces_and_rejected_whole() {
        let (_dir, mut archive) = archive();
        add_source(&mut archive, 1, "/t/a.jsonl");
        let put = |archive: &mut Archive, bytes: &[u8], grown| {
            let bytes = bytes.to_vec();
            apply(
                archive,
                Op::PutHeldBack {
                    id: 1,
                    offset: 8,
                    bytes,
                    grown,
                },
            );
        };
        put(&mut archive, b"{\"a\"", false);
        put(&mut archive, b"{\"a\":[1", true);
        put(&mut archive, b"{\"a\":[1", true);
        assert_eq!(
            pieces(&archive),
            [(0, b"{\"a\"".to_vec()), (4, b":[1".to_vec())],
            "a grown line adds a piece; an unchanged one adds nothing"
        );
        put(&mut archive, b"{\"a\"", true);
        assert_eq!(
            pieces(&archive),
            [(0, b"{\"a\"".to_vec())],
            "shorter: rewritten"
        );
        put(&mut archive, b"[[[", false);
        assert_eq!(
            pieces(&archive),
            [(0, b"[[[".to_vec())],
            "another line: rewritten"
        );
        put(&mut archive, b"[[[[[", true);
        let reject = |archive: &mut Archive| {
            let reason = "unfinished".to_owned();
            let op = Op::RejectHeldBack {
                id: 1,
                generation: 0,
                length: 9,
                reason,
            };
            apply(archive, op);
        };
        reject(&mut archive);
        assert!(pieces(&archive).is_empty(), "forgotten once rejected");
        let mut listed = Vec::new();
        (archive.rejects(None, |r| {
            listed.push(r);
            Ok(())
        }))
        .unwrap()
        .unwrap();
        assert_eq!(
            (listed[0].offset, listed[0].length, listed[0].kept),
            (8, 9, 5)
        );
        assert_eq!(raw(&archive, listed[0].id), b"[[[[[");
        assert_eq!(archive.sources().unwrap()[0].rejects, 1);
        reject(&mut archive);
        assert_eq!(
            archive.sources().unwrap()[0].rejects,
            1,
            "none kept: nothing recorded"
        );
    }

    #[test]
    fn rejects_longer_than_a_value_are_written_in_place_and_read_back_whole() {
        let (_dir, mut archive) = archive();
        add_source(&mut archive, 1, "/t/a/s.jsonl");
        add_source(&mut archive, 2, "/t/b.jsonl");
        let long: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let reject = |raw: Vec<u8>| Reject {
            offset: 0,
            length: raw.len() as u64,
            reason: "invalid".into(),
            raw,
        };
        let rejects = vec![reject(long.clone())];
        apply(
            &mut archive,
            Op::Rejects {
                id: 1,
                generation: 0,
                rejects,
            },
        );
        let rejects = vec![reject(b"short".to_vec())];
        apply(
            &mut archive,
            Op::Rejects {
                id: 2,
                generation: 0,
                rejects,
            },
        );
        let mut under_a = Vec::new();
        let dir = Path::new("/t/a");
        (archive.rejects(Some(dir), |r| {
            under_a.push(r.id);
            Ok(())
        }))
        .unwrap()
        .unwrap();
        assert_eq!(under_a.len(), 1);
        assert!(raw(&archive, under_a[0]) == long);
        assert!(
            archive
                .write_reject_raw(99, &mut Vec::new())
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_catch_up_page_stops_at_its_row_limit_its_byte_budget_or_its_last_seq() {
        let (_dir, mut archive) = archive();
        add_source(&mut archive, 1, "/t/a.jsonl");
        let records = (0..5u64)
            .map(|i| Record {
                offset: i * 10,
                bytes: b"[1,2,3]".to_vec(),
            })
            .collect();
        let batch = RecordBatch {
            source: 1,
            harness: "generic".into(),
            path: "/t/a.jsonl".into(),
            generation: 0,
            read_ms: 0,
            records,
        };
        apply(&mut archive, Op::Records(batch));
        let seqs = |page: Vec<ExportRow>| page.iter().map(|r| r.seq).collect::<Vec<_>>();
        assert_eq!(
            seqs(archive.records_page(0, 5, 3, 1 << 20).unwrap()),
            [1, 2, 3]
        );
        assert_eq!(seqs(archive.records_page(1, 5, 10, 8).unwrap()), [2, 3]);
        assert_eq!(
            seqs(archive.records_page(1, 5, 10, 1).unwrap()),
            [2],
            "at least one"
        );
        assert_eq!(
            seqs(archive.records_page(2, 4, 10, 1 << 20).unwrap()),
            [3, 4]
        );
        assert_eq!(archive.last_seq().unwrap(), 5);
    }

    #[test]
    fn a_cursor_row_that_cannot_be_a_cursor_makes_its_source_invalid_not_the_archive() {
        let (_dir, mut archive) = archive();
        add_source(&mut archive, 1, "/t/a.jsonl");
        add_source(&mut archive, 2, "/t/b.jsonl");
        (archive.conn)
            .execute("UPDATE cursors SET held_back = -1 WHERE source_id = 1", [])
            .unwrap();
        let rows = archive.sources().unwrap();
        let why = rows[0].invalid.as_deref().unwrap();
        assert_eq!(why, "held-back length is negative (-1)");
        assert_eq!(rows[0].path, Path::new("/t/a.jsonl"));
        assert!(rows[1].invalid.is_none());
    }
}
