//! Opening the archive: creating its file and directory private, the pragmas of a connection,
//! and the schema migrations.

use super::Archive;
use super::codec::Codec;
use crate::error::{ArchiveContext, Error, IoContext, Result};
use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::time::Duration;

/// How big the WAL may grow before a commit checkpoints it, and what it is cut back to.
pub(crate) const WAL_LIMIT: i64 = 64 << 20;

/// The page size of a new archive. Measured on records of 1–15 KiB (BENCHMARKS.md): backfill
/// speed did not separate the sizes beyond the noise, a one-record commit costs least at 8 KiB
/// (p50) and 8–16 KiB (p99), and 16 KiB pages waste 39 % on such records (one 9 KiB record per
/// page) against 17 % at 8 KiB.
pub(crate) const PAGE_SIZE: u32 = 8 * 1024;

/// Schema migrations; `PRAGMA user_version` is the number applied.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("schema_v1.sql"),
    include_str!("schema_v2.sql"),
    include_str!("schema_v3.sql"),
    include_str!("schema_v4.sql"),
    include_str!("schema_v5.sql"),
    include_str!("schema_v6.sql"),
    include_str!("schema_v7.sql"),
    include_str!("schema_v8.sql"),
    include_str!("schema_v9.sql"),
    include_str!("schema_v10.sql"),
    include_str!("schema_v11.sql"),
    include_str!("schema_v12.sql"),
];

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
        let archive = Archive::open_read_only(path)?;
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
        // The version is read on a read-only connection (from the file's header: no schema
        // is read), so that a file that is not a database of SQLite, or has no version, is
        // never opened to write. The tables are checked on the connection kept, before it
        // writes anything, so that the schema is read once.
        let found = Archive::open_read_only(path)?.schema_version()?;
        let not_an_archive = || Error::NotAnArchive {
            path: path.to_owned(),
        };
        if found == 0 {
            return Err(not_an_archive());
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(path, flags).at_archive(path)?;
        let mut archive = Archive {
            conn,
            path: path.to_owned(),
            codec: Codec::default(),
        };
        archive.db(archive.conn.busy_timeout(Duration::from_secs(10)))?;
        if !archive.has_table("sources")? {
            return Err(not_an_archive());
        }
        archive.configure(false)?;
        archive.migrate()?;
        Ok(archive)
    }

    /// A read-only connection to the file at `path`, which must exist and be readable; its
    /// contents are not looked at.
    fn open_read_only(path: &Path) -> Result<Archive> {
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
        Ok(archive)
    }

    pub(super) fn schema_version(&self) -> Result<i64> {
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
        let frames = (self.conn).query_row("PRAGMA main.wal_checkpoint(PASSIVE)", [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
            ))
        });
        let (busy, log, copied) = self.db(frames)?;
        Ok((busy == 0 && copied >= log, log))
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

    pub(super) fn apply_migrations(&mut self, found: i64) -> Result<()> {
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

    /// Attaches the database at `path` to this connection, read-only, as `alias`: its tables
    /// are then found by their names, after the archive's own. Errors name this archive.
    pub(crate) fn attach_read_only(&self, path: &Path, alias: &str) -> Result<()> {
        let attached = (self.conn).execute(&format!("ATTACH ?1 AS {alias}"), [read_only_uri(path)]);
        self.db(attached).map(drop)
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
