//! The archive's read queries, and the rows they return.

use super::codec::{self, Codec};
use super::{Archive, StateKey, blob, path_from_blob, snapshots};
use crate::domain::fingerprint::{Fingerprint, Identity, MARKER_WINDOW, Markers, Window};
use crate::domain::{Cursor, HELD_BACK_PREFIX, Position, PrefixMark, SourceId, SourceRow};
use crate::error::Result;
use rusqlite::{Connection, OptionalExtension, params};
use std::path::{Path, PathBuf};

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

/// The query of an [`ExportRow`], to be followed by its `WHERE`.
pub(super) const EXPORT_ROW: &str =
    "SELECT r.seq, s.harness, s.path, r.generation, r.offset, r.record, s.id
     FROM records r JOIN sources s ON s.id = r.source_id";

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
    pub(super) fn export_row(&self, r: &rusqlite::Row, at: usize) -> rusqlite::Result<ExportRow> {
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

impl Archive {
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

    /// The last `seq` the durable consumer `name` recorded as done
    /// ([`Op::ConsumerDone`](super::Op::ConsumerDone)), if it ever did.
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
