//! `compact`: every record stored again with a dictionary trained from a sample spread over
//! all of its harness's records, then the file rewritten without the freed pages.
//!
//! The daemon trains its dictionaries from what it has seen so far, so the records archived
//! before a harness had a good dictionary (or before compression existed) keep the room they
//! took; this gives every record the best dictionary the archive's own records make.

use super::Archive;
use super::codec::{self, COMPACT_SAMPLES, Samples};
use crate::error::Result;
use crate::platform::time::now_ms;
use rusqlite::params;
use std::collections::BTreeSet;

/// Records rewritten per transaction, at most, and the bytes of them read at most (past at
/// least one).
const PAGE: usize = 2000;
const PAGE_BYTES: usize = 8 << 20;

/// What `compact` did.
#[derive(Debug, Default, serde::Serialize)]
pub struct Compacted {
    /// Records read.
    pub records: u64,
    /// Records whose stored form changed.
    pub rewritten: u64,
    /// Their bytes.
    pub record_bytes: u64,
    /// What storing them took before, and takes now.
    pub stored_before: u64,
    pub stored_after: u64,
    /// Dictionaries trained, by harness.
    pub trained: Vec<String>,
    /// Dictionaries no record names any more, deleted.
    pub dropped_dictionaries: u64,
    /// The archive file's size before and after (after the WAL is checkpointed).
    pub file_before: u64,
    pub file_after: u64,
}

impl Archive {
    /// Stores every record again, compressed with a dictionary per harness trained from a
    /// sample of all its records (`progress` hears of each harness), then, with `vacuum`,
    /// rewrites the file so that the freed room goes back to the filesystem. The caller holds
    /// the archive's lock.
    pub fn compact(&mut self, vacuum: bool, progress: &mut dyn FnMut(&str)) -> Result<Compacted> {
        let mut done = Compacted {
            file_before: self.file_size()?,
            ..Compacted::default()
        };
        self.codec.set_compress(true);
        let harnesses: Vec<(String, i64, i64)> = {
            let mut stmt = self.db(self.conn.prepare(
                "SELECT harness, sum(records), sum(bytes) FROM sources GROUP BY harness ORDER BY harness",
            ))?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)));
            self.db(rows.and_then(|r| r.collect()))?
        };
        let mut named = BTreeSet::new();
        for (harness, records, bytes) in harnesses {
            progress(&format!(
                "{harness}: {records} records ({bytes} bytes): training"
            ));
            if let Some(trained) = self.train_from_archive(&harness, bytes)? {
                named.insert(trained.id);
                done.trained.push(harness.clone());
            }
            progress(&format!("{harness}: storing the records again"));
            self.store_again(&harness, &mut done, &mut named)?;
        }
        self.db(self.conn.execute_batch(
            "UPDATE sources SET stored = (SELECT coalesce(sum(length(r.record)), 0) FROM records r
                                          WHERE r.source_id = sources.id)",
        ))?;
        let unnamed: Vec<i64> = {
            let mut stmt = self.db(self.conn.prepare("SELECT id FROM dictionaries"))?;
            let ids = stmt.query_map([], |r| r.get::<_, i64>(0));
            let ids: Vec<i64> = self.db(ids.and_then(|r| r.collect()))?;
            ids.into_iter()
                .filter(|id| !named.contains(&(*id as u32)))
                .collect()
        };
        for id in &unnamed {
            self.db(self
                .conn
                .execute("DELETE FROM dictionaries WHERE id = ?1", [id]))?;
        }
        done.dropped_dictionaries = unnamed.len() as u64;
        if vacuum {
            progress("rewriting the file");
            self.db(self
                .conn
                .execute_batch("PRAGMA main.wal_checkpoint(TRUNCATE); VACUUM;"))?;
        }
        self.db(self
            .conn
            .execute_batch("PRAGMA main.wal_checkpoint(TRUNCATE)"))?;
        done.file_after = self.file_size()?;
        Ok(done)
    }

    /// Trains and stores a dictionary for `harness` from a sample spread over its records
    /// (`bytes` of them), and puts it in use; `None` when they are too few.
    fn train_from_archive(&mut self, harness: &str, bytes: i64) -> Result<Option<codec::Trained>> {
        // About twice the samples kept are offered; every other is then dropped.
        let every = (bytes as u64 / (2 * COMPACT_SAMPLES as u64)).max(1) as i64;
        let mut samples = Samples::default();
        {
            let mut stmt = self.db(self.conn.prepare(
                "SELECT r.seq, r.record FROM records r JOIN sources s ON s.id = r.source_id
                 WHERE s.harness = ?1 AND r.seq % ?2 = 0 AND length(r.record) <= ?3
                 ORDER BY r.seq",
            ))?;
            let records = self.records_reader();
            let mut rows =
                self.db(stmt.query(params![harness, every, codec::MAX_COMPRESSED as i64]))?;
            while let Some(r) = self.db(rows.next())? {
                let record = self.db(r.get(0).and_then(|seq| records.record(r, 1, seq)))?;
                samples.offer(&record, COMPACT_SAMPLES);
            }
        }
        let trained = match codec::train(harness, &samples) {
            Ok(Some(trained)) => trained,
            Ok(None) => return Ok(None),
            Err(e) => {
                log::warn!("no compression dictionary for {harness}: training failed: {e}");
                return Ok(None);
            }
        };
        if !self.db(codec::store(&self.conn, &trained, now_ms()))? {
            log::warn!(
                "the dictionary trained for {harness} has id {}, which another has; not used",
                trained.id
            );
            return Ok(None);
        }
        self.codec.install(&trained);
        Ok(Some(trained))
    }

    /// Stores every record of `harness` again with its current dictionary, in transactions of
    /// [`PAGE`] records; adds the dictionaries the stored records name to `named`.
    fn store_again(
        &mut self,
        harness: &str,
        done: &mut Compacted,
        named: &mut BTreeSet<u32>,
    ) -> Result<()> {
        let mut after = 0;
        loop {
            // A record too long to be compressed is stored as it is: counted, never loaded.
            let mut page: Vec<(i64, Option<Vec<u8>>, i64)> = Vec::new();
            {
                let mut stmt = self.db(self.conn.prepare_cached(
                    "SELECT r.seq, CASE WHEN length(r.record) <= ?3 THEN r.record END,
                            length(r.record)
                     FROM records r JOIN sources s ON s.id = r.source_id
                     WHERE s.harness = ?1 AND r.seq > ?2 ORDER BY r.seq",
                ))?;
                let mut rows =
                    self.db(stmt.query(params![harness, after, codec::MAX_COMPRESSED as i64]))?;
                let mut bytes = 0;
                while page.len() < PAGE
                    && bytes < PAGE_BYTES
                    && let Some(r) = self.db(rows.next())?
                {
                    let row: (i64, Option<Vec<u8>>, i64) =
                        self.db((|| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))())?;
                    bytes += row.1.as_ref().map_or(0, Vec::len);
                    page.push(row);
                }
            }
            let Some((last, ..)) = page.last() else {
                return Ok(());
            };
            after = *last;
            let tx = self.write()?;
            for (seq, stored, len) in &page {
                let Some(stored) = stored else {
                    done.records += 1;
                    done.record_bytes += *len as u64;
                    done.stored_before += *len as u64;
                    done.stored_after += *len as u64;
                    continue;
                };
                let record = tx.db(tx.codec.borrow().decode_record(&tx.tx, stored, *seq))?;
                let again = tx.db(tx
                    .codec
                    .borrow_mut()
                    .encode_sampling(&tx.tx, harness, &record, false))?;
                done.records += 1;
                done.record_bytes += record.len() as u64;
                done.stored_before += stored.len() as u64;
                let keep = again.len() >= stored.len();
                let now: &[u8] = if keep { &stored[..] } else { &again };
                done.stored_after += now.len() as u64;
                named.extend(codec::dictionary_of(now));
                if !keep {
                    let update = "UPDATE records SET record = ?2 WHERE seq = ?1";
                    tx.db(tx.tx.execute(update, params![seq, &again[..]]))?;
                    done.rewritten += 1;
                }
            }
            tx.commit()?;
        }
    }

    /// The archive file's size.
    fn file_size(&self) -> Result<u64> {
        use crate::error::IoContext;
        Ok(std::fs::metadata(&self.path).at_path(&self.path)?.len())
    }
}
