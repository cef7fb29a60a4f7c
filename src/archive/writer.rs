//! The archive writer: applies the engine's commits in order, then publishes their records to
//! the archive's consumers (see `follow`), so no consumer sees a record before it is durable.

use crate::archive::Committer;
use crate::archive::follow::{Hub, Published};
use crate::archive::wal_checkpoint::CommitSignal;
use crate::archive::write_turn::WriteTurn;
use crate::archive::{Archive, Commit};
use crate::error::{Error, Result, error_chain};
use crate::platform::doorbell::Doorbell;
use crossbeam_channel::{Receiver, Sender, bounded};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How many commits may wait for the writer. The engine blocks when they are all taken, so a
/// slow disk slows reading instead of growing memory (each commit holds at most one batch).
const WRITER_BACKLOG: usize = 4;

/// The longest wait between two attempts at a commit the archive refused.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);

/// Called while the archive refuses commits, with what to tell the service manager; it also
/// keeps the watchdog fed, since a writer that retries is waiting, not wedged.
pub(crate) type StallReport = Box<dyn Fn(&str) + Send>;

/// Owns the archive's write connection.
pub struct ArchiveWriter {
    archive: Archive,
    hub: Option<Arc<Hub>>,
    /// Ends retrying (the daemon is stopping); unset means retry until the archive recovers.
    stop: Option<Arc<AtomicBool>>,
    stalled: Option<StallReport>,
    /// Told (without blocking) after every commit.
    committed: Option<CommitSignal>,
    /// Taken for every commit, when other threads of the process write the archive too.
    turns: Option<Arc<WriteTurn>>,
    /// Rung when the writer's thread ends, so that a daemon waiting for changes notices.
    at_end: Option<Arc<Doorbell>>,
}

impl ArchiveWriter {
    /// A writer on `archive`, publishing each commit to `hub` if given; the hub is closed
    /// when the writer ends.
    pub fn new(archive: Archive, hub: Option<Arc<Hub>>) -> ArchiveWriter {
        ArchiveWriter {
            archive,
            hub,
            stop: None,
            stalled: None,
            committed: None,
            turns: None,
            at_end: None,
        }
    }

    /// Takes a turn of `turns` for every commit, ahead of the archive's other writers in this
    /// process (see `write_turn`).
    pub fn taking_turns(mut self, turns: Arc<WriteTurn>) -> ArchiveWriter {
        self.turns = Some(turns);
        self
    }

    /// Applies `commit` to the archive, in its turn.
    fn apply(&mut self, commit: &Commit) -> Result<Vec<i64>> {
        let _turn = self.turns.as_ref().map(|t| t.for_records());
        self.archive.apply(commit)
    }

    /// Tells `committed` of each commit and the bytes of records it held.
    pub fn after_commit(mut self, committed: CommitSignal) -> ArchiveWriter {
        self.committed = Some(committed);
        self
    }

    /// On its own thread, the writer retries commits the archive refuses for a passing reason
    /// (see [`Error::is_transient`]) until they succeed or `stop` is set; `stalled` hears of
    /// each wait.
    pub fn retrying(mut self, stop: Arc<AtomicBool>, stalled: StallReport) -> ArchiveWriter {
        self.stop = Some(stop);
        self.stalled = Some(stalled);
        self
    }

    /// Rings `bell` when the writer's thread ends (see [`ArchiveWriter::spawn`]).
    pub fn ringing_at_end(mut self, bell: Arc<Doorbell>) -> ArchiveWriter {
        self.at_end = Some(bell);
        self
    }

    /// Commits `commit`, waiting out passing archive errors when retrying is on. Meanwhile
    /// the commit channel fills and reading stops: nothing is dropped and nothing advances.
    fn write_retrying(&mut self, commit: Commit) -> Result<()> {
        let mut stall: Option<(Instant, Duration)> = None;
        loop {
            let err = match self.apply(&commit) {
                Ok(seqs) => {
                    if let Some((since, _)) = stall {
                        let waited = humantime::format_duration(round(since.elapsed()));
                        log::info!("archive writable again after {waited}; archiving resumed");
                    }
                    self.applied(commit, seqs);
                    return Ok(());
                }
                Err(e) if e.is_transient() && self.stop.is_some() => e,
                Err(e) => return Err(e),
            };
            if self
                .stop
                .as_ref()
                .is_some_and(|s| s.load(Ordering::Relaxed))
            {
                log::error!(
                    "stopping while the archive refuses commits; what was not committed is read again at the next start"
                );
                return Err(err);
            }
            let reason = error_chain(&err);
            let (_, delay) = stall.get_or_insert_with(|| {
                log::warn!(
                    "cannot write the archive: {reason}; reading waits and nothing is dropped; \
                     retrying until it succeeds (a full disk: free space on the archive's \
                     filesystem)"
                );
                (Instant::now(), Duration::from_millis(50))
            });
            if let Some(report) = &self.stalled {
                report(&format!("archive refuses commits ({reason}); retrying"));
            }
            std::thread::sleep(*delay);
            *delay = (*delay * 2).min(MAX_RETRY_DELAY);
        }
    }

    /// Commits `commit`, then publishes its records in `seq` order.
    pub fn write(&mut self, commit: Commit) -> Result<()> {
        let seqs = self.apply(&commit)?;
        self.applied(commit, seqs);
        Ok(())
    }

    /// After a commit: wakes the WAL checkpointer and publishes the records, which move into the
    /// published commit (a record of tens of MiB is not copied for its consumers).
    fn applied(&mut self, commit: Commit, seqs: Vec<i64>) {
        if let Some(committed) = &self.committed {
            committed.committed(commit.record_bytes());
        }
        if let Some(hub) = &self.hub {
            hub.publish(Published::new(commit.into_records().collect(), seqs));
        }
    }

    /// Moves the writer to a thread of its own; commits sent to the returned committer are
    /// applied in order. The thread ends when the committer is dropped (after applying
    /// everything sent) or on the first archive error, which it returns; `gone` disconnects
    /// when it ends, so a loop that is not committing notices too.
    ///
    /// A small commit sent while nothing is queued is applied on the sender's thread at once,
    /// which saves a thread hand-off on the way from an append to the tap; large ones (a
    /// backfill's batches) go through the thread, so reading the next batch overlaps with
    /// committing the last.
    pub fn spawn(mut self) -> std::io::Result<WriterThread> {
        let (tx, rx) = bounded::<ToWriter>(WRITER_BACKLOG);
        let (alive, gone) = bounded::<()>(0);
        let at_end = self.at_end.take();
        let writer = Arc::new(Mutex::new(self));
        let queued = Arc::new(AtomicUsize::new(0));
        let (shared, in_flight) = (Arc::clone(&writer), Arc::clone(&queued));
        let handle = std::thread::Builder::new()
            .name("archive-writer".into())
            .spawn(move || {
                let _end = End {
                    alive: Some(alive),
                    at_end,
                };
                apply_queued(&rx, &shared, &in_flight)
            })?;
        Ok(WriterThread {
            committer: ChannelCommitter { tx, queued, writer },
            handle,
            gone,
        })
    }
}

/// The end of the writer's thread, also by a panic: `gone` disconnects, and only then the
/// doorbell rings, so that whoever it wakes sees the writer gone.
struct End {
    alive: Option<Sender<()>>,
    at_end: Option<Arc<Doorbell>>,
}

impl Drop for End {
    fn drop(&mut self) {
        drop(self.alive.take());
        if let Some(bell) = &self.at_end {
            bell.ring();
        }
    }
}

/// The writer thread's loop: applies each queued commit, then counts it done.
fn apply_queued(
    rx: &Receiver<ToWriter>,
    writer: &Mutex<ArchiveWriter>,
    queued: &AtomicUsize,
) -> Result<()> {
    for msg in rx {
        match msg {
            ToWriter::Commit(commit) => {
                lock(writer).write_retrying(commit)?;
                queued.fetch_sub(1, Ordering::AcqRel);
            }
            ToWriter::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
    Ok(())
}

/// The writer, also after a panic on another thread (it holds no invariant a panic breaks:
/// a commit is one SQLite transaction).
fn lock(writer: &Mutex<ArchiveWriter>) -> std::sync::MutexGuard<'_, ArchiveWriter> {
    writer.lock().unwrap_or_else(|e| e.into_inner())
}

/// The archive writer, for another thread of the process that adds records of its own (the
/// puller): its commits take their turn with the engine's, on the same connection, and are
/// published in the same order.
#[derive(Clone)]
pub struct SharedWriter(Arc<Mutex<ArchiveWriter>>);

impl SharedWriter {
    /// Commits `commit` (retrying as the writer does), then publishes its records.
    pub fn write(&self, commit: Commit) -> Result<()> {
        lock(&self.0).write_retrying(commit)
    }
}

impl WriterThread {
    /// The writer, shared: the hub closes only once every copy is dropped.
    pub fn shared(&self) -> SharedWriter {
        SharedWriter(Arc::clone(&self.committer.writer))
    }
}

/// The archive writer on its own thread.
pub struct WriterThread {
    /// Where the engine sends its commits.
    pub committer: ChannelCommitter,
    /// The thread; joins to its result.
    pub handle: JoinHandle<Result<()>>,
    /// Disconnects when the thread ends.
    pub gone: Receiver<()>,
}

impl Drop for ArchiveWriter {
    /// Nothing more will be published: the hub lets its subscribers go (a tap writes out what
    /// it holds) and tells followers so. A compression dictionary being trained is waited for
    /// and stored, for the next run.
    fn drop(&mut self) {
        if let Some(hub) = &self.hub {
            hub.close();
        }
        self.archive.finish_training();
    }
}

/// A duration to the millisecond, for people.
fn round(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

impl Committer for ArchiveWriter {
    fn submit(&mut self, commit: Commit) -> Result<()> {
        self.write(commit)
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

/// What the writer thread receives.
enum ToWriter {
    Commit(Commit),
    /// Answered once every earlier commit is applied.
    Flush(Sender<()>),
}

/// Commits at most this many record bytes may be applied on the sender's thread.
const INLINE_COMMIT_BYTES: u64 = 256 * 1024;

/// Sends commits to a writer thread, or applies a small one itself when nothing is queued.
pub struct ChannelCommitter {
    tx: Sender<ToWriter>,
    /// Commits sent to the thread and not yet applied. Only this committer sends, so when it
    /// reads 0, everything sent before is committed and a commit made here stays in order.
    queued: Arc<AtomicUsize>,
    writer: Arc<Mutex<ArchiveWriter>>,
}

impl Committer for ChannelCommitter {
    fn submit(&mut self, commit: Commit) -> Result<()> {
        if self.queued.load(Ordering::Acquire) == 0 && commit.record_bytes() <= INLINE_COMMIT_BYTES
        {
            return lock(&self.writer).write_retrying(commit);
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        self.tx
            .send(ToWriter::Commit(commit))
            .map_err(|_| Error::WriterStopped)
    }

    fn flush(&mut self) -> Result<()> {
        if self.queued.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        let (done, applied) = bounded(1);
        self.tx
            .send(ToWriter::Flush(done))
            .map_err(|_| Error::WriterStopped)?;
        applied.recv().map_err(|_| Error::WriterStopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossbeam_channel::TryRecvError;

    /// Pins that a daemon waiting for changes hears of its writer's end at once: it waits on
    /// its doorbell, and would otherwise notice only at its next rescan.
    #[test]
    fn the_end_of_the_writers_thread_rings_the_doorbell_once_gone_has_disconnected() {
        let tmp = tempfile::tempdir().unwrap();
        let archive = Archive::open(&tmp.path().join("archive.db")).unwrap();
        let bell = Arc::new(Doorbell::new().unwrap());
        let writer = ArchiveWriter::new(archive, None).ringing_at_end(Arc::clone(&bell));
        let WriterThread {
            committer,
            handle,
            gone,
        } = writer.spawn().unwrap();
        drop(committer);
        let (started, limit) = (Instant::now(), Duration::from_secs(30));
        bell.wait(&[], Some(limit)).unwrap();
        assert!(started.elapsed() < limit, "the doorbell never rang");
        assert_eq!(gone.try_recv(), Err(TryRecvError::Disconnected));
        handle.join().unwrap().unwrap();
    }
}
