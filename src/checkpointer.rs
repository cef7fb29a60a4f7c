//! The checkpointer: a thread that copies the archive's WAL into the database file after
//! commits, so that the archive writer's commits do not do it themselves.
//!
//! Small live commits are gathered for up to [`CHECKPOINT_EVERY`], so one checkpoint serves
//! many of them and an idle daemon never wakes the thread. A backfill commits megabytes at a
//! time: once [`CHECKPOINT_BYTES`] have been committed since the last checkpoint, the next one
//! starts at once, on this thread, while the writer goes on committing. (Left to the writer's
//! own automatic checkpoint, the copy would stop its commits for as long as it takes.) A
//! checkpoint that a reader held back is tried again every [`CHECKPOINT_EVERY`] until it
//! copies everything, so that the last commits of a burst do not wait in the WAL for the next.

use crate::archive::Archive;
use crate::error::{Result, SystemContext, error_chain};
use crossbeam_channel::{Receiver, Sender, after, bounded, never, select};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest that committed frames wait for a checkpoint while commits are small.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// After this many bytes of records committed, a checkpoint starts without waiting: a
/// backfill's batch (8 MiB by default) is copied as soon as it is committed.
const CHECKPOINT_BYTES: u64 = 1 << 20;

/// The running checkpointer thread.
pub struct Checkpointer {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

/// What the archive writer tells the checkpointer after each commit.
#[derive(Clone)]
pub struct CommitSignal {
    wake: Sender<()>,
    bytes: Arc<AtomicU64>,
}

impl CommitSignal {
    /// Counts `bytes` of records committed, and wakes the checkpointer (without blocking) only
    /// when this is the first commit since its last checkpoint, which starts its wait, or the
    /// one that reaches [`CHECKPOINT_BYTES`], which ends it. The small commits in between do not
    /// wake the thread: each wake-up would take a core from the record on its way out.
    pub fn committed(&self, bytes: u64) {
        // A commit without records still wrote to the WAL.
        let bytes = bytes.max(1);
        let before = self.bytes.fetch_add(bytes, Ordering::Relaxed);
        if before == 0 || (before < CHECKPOINT_BYTES && before + bytes >= CHECKPOINT_BYTES) {
            let _ = self.wake.try_send(());
        }
    }
}

impl Checkpointer {
    /// Starts the thread on its own connection to the archive.
    pub fn start(archive: Archive) -> Result<(Checkpointer, CommitSignal)> {
        Checkpointer::start_every(archive, CHECKPOINT_EVERY)
    }

    fn start_every(archive: Archive, every: Duration) -> Result<(Checkpointer, CommitSignal)> {
        let (stop, stopped) = bounded::<()>(1);
        let (wake, commits) = bounded::<()>(1);
        let bytes = Arc::new(AtomicU64::new(0));
        let signal = CommitSignal {
            wake,
            bytes: Arc::clone(&bytes),
        };
        let thread = std::thread::Builder::new()
            .name("checkpointer".into())
            .spawn(move || checkpoint_after_commits(&archive, every, &commits, &stopped, &bytes))
            .starting("checkpointer")?;
        Ok((Checkpointer { stop, thread }, signal))
    }

    /// Stops the thread (a checkpoint in progress finishes first).
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

fn checkpoint_after_commits(
    archive: &Archive,
    every: Duration,
    commits: &Receiver<()>,
    stop: &Receiver<()>,
    bytes: &AtomicU64,
) {
    let mut last = Instant::now();
    // A checkpoint a reader held back is tried again after `every`, commits or not: otherwise
    // the frames it left would wait for the next commit, however long the daemon is idle.
    let mut unfinished = false;
    loop {
        let retry = if unfinished { after(every) } else { never() };
        select! {
            recv(commits) -> msg => if msg.is_err() { return },
            recv(stop) -> _ => return,
            recv(retry) -> _ => {}
        }
        let due = last + every;
        while bytes.load(Ordering::Relaxed) < CHECKPOINT_BYTES {
            select! {
                recv(commits) -> msg => if msg.is_err() { return },
                recv(stop) -> _ => return,
                default(due.saturating_duration_since(Instant::now())) => break,
            }
        }
        bytes.store(0, Ordering::Relaxed);
        unfinished = match archive.checkpoint() {
            Ok(done) => !done,
            Err(e) => {
                log::debug!("checkpoint skipped: {}", error_chain(&e));
                true
            }
        };
        last = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{Commit, Op};
    use std::path::Path;

    #[test]
    fn small_commits_wake_the_checkpointer_once_and_a_megabyte_again() {
        let (wake, woken) = bounded(10);
        let signal = CommitSignal {
            wake,
            bytes: Arc::new(AtomicU64::new(0)),
        };
        for _ in 0..3 {
            signal.committed(2000);
        }
        signal.committed(0);
        assert_eq!(woken.len(), 1, "only the first small commit wakes it");
        signal.committed(CHECKPOINT_BYTES);
        assert_eq!(woken.len(), 2, "reaching the threshold wakes it");
        signal.committed(2000);
        assert_eq!(woken.len(), 2, "past the threshold, nothing more to say");
    }

    /// Waits up to 20 s for the archive file at `db` to reach `len` bytes.
    fn wait_for_len(db: &Path, len: u64, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::fs::metadata(db).unwrap().len() < len {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn event_of(bytes: usize) -> Commit {
        let mut commit = Commit::default();
        commit.push(Op::event(None, "test", Path::new("/t"), &"x".repeat(bytes)));
        commit
    }

    #[test]
    fn a_checkpoint_a_reader_held_back_is_finished_without_another_commit() {
        // The last commit of a burst was checkpointed while a reader (the session index, a
        // command) still read an older snapshot: the frames after it stayed in the WAL until
        // the next commit, which an idle daemon may not make for hours.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("archive.db");
        let mut writer = Archive::open(&db).unwrap();
        writer.bound_wal().unwrap();
        let (checkpointer, signal) =
            Checkpointer::start_every(Archive::open(&db).unwrap(), Duration::from_millis(50))
                .unwrap();
        let before = std::fs::metadata(&db).unwrap().len();
        writer.apply(&event_of(1 << 20)).unwrap();
        // A reader's snapshot: everything up to the first MiB.
        let reader = rusqlite::Connection::open(&db).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = (reader.query_row("SELECT count(*) FROM events", [], |r| r.get(0))).unwrap();
        writer.apply(&event_of(2 << 20)).unwrap();
        signal.committed(3 << 20);
        // The checkpoint copies what the reader's snapshot allows: the first MiB.
        wait_for_len(&db, before + (1 << 20), "no checkpoint of the first MiB");
        reader.execute_batch("COMMIT").unwrap();
        wait_for_len(&db, before + (3 << 20), "the rest was left in the WAL");
        checkpointer.stop();
    }

    #[test]
    fn a_megabyte_committed_is_checkpointed_without_waiting_for_the_interval() {
        // A backfill commits faster than a timer would copy; waiting for it let the WAL reach
        // the writer's own limit, and the writer's commits stopped for the copy.
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("archive.db");
        let mut writer = Archive::open(&db).unwrap();
        writer.bound_wal().unwrap();
        let (checkpointer, signal) =
            Checkpointer::start_every(Archive::open(&db).unwrap(), Duration::from_secs(3600))
                .unwrap();
        let before = std::fs::metadata(&db).unwrap().len();
        writer.apply(&event_of(2 << 20)).unwrap();
        signal.committed(2 << 20);
        wait_for_len(
            &db,
            before + (2 << 20),
            "no checkpoint after 2 MiB committed",
        );
        checkpointer.stop();
    }
}
