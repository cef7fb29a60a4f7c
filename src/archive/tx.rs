//! One write transaction, [`Tx`]: where each [`Op`] is written.

use super::codec::Codec;
use super::marks::{MarkChange, SessionKey};
use super::{Archive, Op, RecordBatch, blob, snapshots};
use crate::domain::fingerprint::Identity;
use crate::domain::{Cursor, PrefixMark, Reject, SourceId};
use crate::error::{ArchiveContext, Error, Result};
use crate::platform::time::now_ms;
use rusqlite::{Connection, TransactionBehavior, params};
use std::cell::RefCell;
use std::path::Path;

/// Records, rejected lines and held-back bytes longer than this are written into their row in
/// place rather than bound as a value, which SQLite would copy twice (the bound value, then
/// the row).
const WRITTEN_IN_PLACE: usize = 1 << 20;

impl Archive {
    /// Begins a write transaction.
    pub(super) fn write(&mut self) -> Result<Tx<'_>> {
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
}

/// One write transaction. Dropped without `commit`, it rolls back.
pub(super) struct Tx<'a> {
    pub(super) tx: rusqlite::Transaction<'a>,
    path: &'a Path,
    pub(super) codec: RefCell<&'a mut Codec>,
}

impl Tx<'_> {
    pub(super) fn db<T>(&self, result: rusqlite::Result<T>) -> Result<T> {
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

    /// Changes a session's marks, when they last changed, and their place in `mark_changes`.
    fn mark(&self, s: &SessionKey, change: &MarkChange) -> Result<()> {
        let run = |sql: &str, value: &dyn rusqlite::ToSql| {
            let args = params![s.machine, s.harness, s.session, value];
            self.db(self.tx.execute(sql, args)).map(drop)
        };
        run(
            "INSERT INTO marks (machine, harness, session, changed_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT DO UPDATE SET changed_ms = excluded.changed_ms",
            &now_ms(),
        )?;
        // Made again, so that its seq is the newest: sinks ship the session's marks anew.
        self.db(self.tx.execute(
            "INSERT OR REPLACE INTO mark_changes (machine, harness, session, records_seq)
             VALUES (?1, ?2, ?3, (SELECT coalesce(max(seq), 0) FROM records))",
            params![s.machine, s.harness, s.session],
        ))?;
        let this = "machine = ?1 AND harness = ?2 AND session = ?3";
        match change {
            MarkChange::Star(on) => run(&format!("UPDATE marks SET starred = ?4 WHERE {this}"), on),
            MarkChange::Note(note) => {
                run(&format!("UPDATE marks SET note = ?4 WHERE {this}"), note)
            }
            MarkChange::Tag(tag) => run("INSERT OR IGNORE INTO tags VALUES (?1, ?2, ?3, ?4)", tag),
            MarkChange::Untag(tag) => {
                run(&format!("DELETE FROM tags WHERE {this} AND tag = ?4"), tag)
            }
        }
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
    pub(super) fn apply(&self, op: &Op, seqs: &mut Vec<i64>) -> Result<()> {
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
            Op::Mark { session, change } => self.mark(session, change),
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
    pub(super) fn commit(self) -> Result<()> {
        let path = self.path;
        self.tx.commit().at_archive(path)
    }
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

/// Adds one row to `events`, now: the one statement that writes an event.
pub(super) fn insert_event(
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

/// Records, inside `tx`, that the durable consumer `name` is done with every record up to
/// `seq` ([`Op::ConsumerDone`], and consumers that write their own transactions).
pub(crate) fn record_consumer_done(tx: &Connection, name: &str, seq: i64) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT OR REPLACE INTO consumers (name, seq, updated_ms) VALUES (?1, ?2, ?3)",
        params![name, seq, now_ms()],
    )
    .map(drop)
}
