//! [`Commit`]: the changes of one transaction, where the engine sends them, and the archive
//! applying them.

use super::codec::{self, Wait};
use super::{Archive, Op};
use crate::domain::{Record, SourceId};
use crate::error::Result;
use crate::platform::time::now_ms;
use std::path::PathBuf;

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

impl Archive {
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
}
