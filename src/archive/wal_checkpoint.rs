//! The WAL checkpointer: a thread that copies the archive's WAL into the database file after
//! commits, so that the archive writer's commits do not do it themselves.
//!
//! Live commits are gathered until they pause for [`POLICY`]'s `quiet`, or for at most its
//! `oldest`, or until [`CHECKPOINT_COMMITS`] of them are in the WAL, so one checkpoint serves
//! many of them and an idle daemon never wakes the thread. Gathering many matters beyond the
//! copying: once a checkpoint has copied the whole WAL, the next commit starts the WAL again
//! from its beginning, and SQLite then syncs the WAL's new header to disk inside that commit,
//! before the record it holds can be printed. A backfill commits megabytes at a time: once
//! [`CHECKPOINT_BYTES`] have been committed since the last checkpoint, the next one starts at
//! once, on this thread, while the writer goes on committing. (Left to the writer's own
//! automatic checkpoint, the copy would stop its commits for as long as it takes.) A
//! checkpoint that a reader held back is tried again every `retry` until it copies
//! everything, so that the last commits of a burst do not wait in the WAL for the next.
//!
//! Small commits that keep coming faster than a copy takes would never let the WAL start
//! again (a commit starts it only if every frame is copied when it begins), and the WAL would
//! grow until the writer's bound made the writer checkpoint inside a commit. So once a copy
//! of small commits finds a long WAL, what came in during it is copied again, outside any
//! turn while it is much (see [`CatchUp`]), and last in a write turn (see `write_turn`),
//! between two commits: a record that arrives meanwhile waits for that last copy only.

use crate::archive::Archive;
use crate::archive::write_turn::WriteTurn;
use crate::error::{Result, SystemContext, error_chain};
use crossbeam_channel::{Receiver, Sender, after, bounded, never, select};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// When the frames of small commits are copied.
#[derive(Clone, Copy, Debug)]
struct Policy {
    /// Once no commit has come for this long…
    quiet: Duration,
    /// …or once the first of them has waited this long, however steady the commits.
    oldest: Duration,
    /// A checkpoint a reader held back is tried again after this long.
    retry: Duration,
}

/// The daemon's policy. At 100 commits a second, the count ([`CHECKPOINT_COMMITS`]) comes
/// first: one commit in 256 pays for the WAL's new header, where one in 25 did when small
/// commits were copied every 250 ms.
const POLICY: Policy = Policy {
    quiet: Duration::from_secs(1),
    oldest: Duration::from_secs(10),
    retry: Duration::from_millis(250),
};

/// After this many bytes of records committed, a checkpoint starts without waiting: a
/// backfill's batch (8 MiB by default) is copied as soon as it is committed.
const CHECKPOINT_BYTES: u64 = 1 << 20;

/// After this many commits, a checkpoint starts without waiting. A live commit of one record
/// writes about four pages (32 KiB), so the WAL holds about 8 MiB of them by then.
const CHECKPOINT_COMMITS: u64 = 256;

/// A copy of small commits over a WAL of at least this many frames is followed by more, the
/// last in a write turn (about 8 MiB of 8 KiB pages: the count's worth of live commits).
const FINISH_IN_TURN_FRAMES: i64 = 1024;

/// The copy in the turn waits until a copy outside it had at most this many frames to copy
/// (256 KiB of 8 KiB pages: a few live commits)…
const FEW_FRAMES: i64 = 32;

/// …or until this many copies outside the turn have been made, or one had no fewer frames to
/// copy than the one before (commits outpacing the copies).
const CATCH_UP_COPIES: u32 = 4;

/// The running checkpointer thread.
pub(crate) struct WalCheckpointer {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

/// What has been committed since the last checkpoint.
#[derive(Default)]
struct Pending {
    bytes: AtomicU64,
    commits: AtomicU64,
}

impl Pending {
    fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn is_due(&self) -> bool {
        self.bytes() >= CHECKPOINT_BYTES || self.commits() >= CHECKPOINT_COMMITS
    }

    fn clear(&self) {
        self.bytes.store(0, Ordering::Relaxed);
        self.commits.store(0, Ordering::Relaxed);
    }
}

/// What the archive writer tells the checkpointer after each commit.
#[derive(Clone)]
pub struct CommitSignal {
    wake: Sender<()>,
    pending: Arc<Pending>,
}

impl CommitSignal {
    /// Counts a commit of `bytes` of records, and wakes the checkpointer (without blocking)
    /// only when this is the first commit since its last checkpoint, which starts its wait, or
    /// the one that reaches [`CHECKPOINT_BYTES`] or [`CHECKPOINT_COMMITS`], which ends it. The
    /// small commits in between do not wake the thread: each wake-up would take a core from
    /// the record on its way out.
    pub fn committed(&self, bytes: u64) {
        let before = self.pending.bytes.fetch_add(bytes, Ordering::Relaxed);
        let commits = self.pending.commits.fetch_add(1, Ordering::Relaxed) + 1;
        let bytes_reached = before < CHECKPOINT_BYTES && before + bytes >= CHECKPOINT_BYTES;
        if commits == 1 || commits == CHECKPOINT_COMMITS || bytes_reached {
            let _ = self.wake.try_send(());
        }
    }
}

impl WalCheckpointer {
    /// Starts the thread on its own connection to the archive; it takes `turns` with the
    /// process's other writers of the archive when it must copy between two commits.
    pub(crate) fn start(
        archive: Archive,
        turns: Arc<WriteTurn>,
    ) -> Result<(WalCheckpointer, CommitSignal)> {
        WalCheckpointer::start_with(archive, POLICY, turns)
    }

    fn start_with(
        archive: Archive,
        policy: Policy,
        turns: Arc<WriteTurn>,
    ) -> Result<(WalCheckpointer, CommitSignal)> {
        let (stop, stopped) = bounded::<()>(1);
        let (wake, woken) = bounded::<()>(1);
        let pending = Arc::new(Pending::default());
        let signal = CommitSignal {
            wake,
            pending: Arc::clone(&pending),
        };
        let thread = std::thread::Builder::new()
            .name("checkpointer".into())
            .spawn(move || {
                // Its copies wake on each fsync's end; in the normal class each such wake-up
                // could take the core from the engine with a record on its way (BENCHMARKS.md).
                if let Err(e) = crate::platform::sys::batch_thread_policy() {
                    log::debug!("checkpointer: cannot enter the batch scheduling class: {e}");
                }
                let wait = Wait {
                    policy,
                    woken,
                    stopped,
                    pending,
                    turns,
                };
                wait.checkpoint_after_commits(&archive);
            })
            .starting("checkpointer")?;
        Ok((WalCheckpointer { stop, thread }, signal))
    }

    /// Stops the thread (a checkpoint in progress finishes first).
    pub(crate) fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// The thread's side: what it waits on.
struct Wait {
    policy: Policy,
    woken: Receiver<()>,
    stopped: Receiver<()>,
    pending: Arc<Pending>,
    turns: Arc<WriteTurn>,
}

impl Wait {
    fn checkpoint_after_commits(&self, archive: &Archive) {
        // A checkpoint a reader held back is tried again, commits or not: otherwise the frames
        // it left would wait for the next commit, however long the daemon is idle.
        let mut unfinished = false;
        loop {
            let retry = if unfinished {
                after(self.policy.retry)
            } else {
                never()
            };
            select! {
                recv(self.woken) -> msg => if msg.is_err() { return },
                recv(self.stopped) -> _ => return,
                recv(retry) -> _ => {}
            }
            if self.pending.commits() > 0 && !self.until_due() {
                return;
            }
            let live = self.pending.bytes() < CHECKPOINT_BYTES;
            self.pending.clear();
            unfinished = match self.copy(archive, live) {
                Ok(done) => !done,
                Err(e) => {
                    log::debug!("checkpoint skipped: {}", error_chain(&e));
                    true
                }
            };
        }
    }

    /// Copies the WAL into the database; true when all of it is copied. A copy of small
    /// (`live`) commits that leaves a long WAL is followed by others: a copy takes only the
    /// frames the WAL held when it began, and commits that came in meanwhile would keep the
    /// next commit from starting the WAL again. Those are copied outside any turn while they
    /// are many (see [`CatchUp`]), and what came during the last such copy in a write turn,
    /// with no commit between its end and the next. (A backfill's large commits are not held
    /// up so: the writer's bound covers them, and the WAL starts again when they pause.)
    fn copy(&self, archive: &Archive, live: bool) -> Result<bool> {
        let (whole, frames) = archive.checkpoint()?;
        if !live || frames < FINISH_IN_TURN_FRAMES {
            return Ok(whole);
        }
        let mut catch_up = CatchUp::after(frames);
        while catch_up.again() {
            let (whole, frames) = archive.checkpoint()?;
            if !catch_up.copied(frames) {
                // A commit started the WAL again (nothing is left for a turn to finish), or
                // another connection was checkpointing (this copy is tried again later).
                return Ok(whole);
            }
        }
        let _turn = self.turns.for_consumer();
        let (whole, frames) = archive.checkpoint()?;
        log::trace!(
            "checkpoint: the WAL at {frames} frames in a write turn, at {} after {} more copies",
            catch_up.frames,
            catch_up.copies
        );
        Ok(whole)
    }

    /// Waits until the commits since the last checkpoint are to be copied: enough of them,
    /// a pause of `quiet` (seen from the count, looked at once per `quiet`), or `oldest` since
    /// the wait began. False when the thread is to stop.
    fn until_due(&self) -> bool {
        let began = Instant::now();
        let last_possible = began + self.policy.oldest;
        let mut seen = self.pending.commits();
        let mut next_look = began + self.policy.quiet;
        while !self.pending.is_due() {
            select! {
                recv(self.woken) -> msg => if msg.is_err() { return false },
                recv(self.stopped) -> _ => return false,
                default(next_look.min(last_possible).saturating_duration_since(Instant::now())) => {
                    let now = self.pending.commits();
                    if now == seen || Instant::now() >= last_possible {
                        return true;
                    }
                    seen = now;
                    next_look = Instant::now() + self.policy.quiet;
                }
            }
        }
        true
    }
}

/// Whether the frames committed during a copy are copied again outside the write turn. A
/// copy of a long WAL takes long enough (its `fsync` of megabytes) for tens of live commits
/// to come in; copied in the turn, they kept the engine waiting while the WAL was synced
/// with all of them. A copy outside the turn copies only what came during the one before,
/// so it is usually shorter, and fewer come in during it: the frames left for the turn
/// shrink with each. When they do not (commits coming faster than copies), copying more
/// outside the turn would not help, and the turn is taken.
#[derive(Debug)]
struct CatchUp {
    /// The WAL's frames when the last copy began (all of them copied, unless a reader held
    /// some back).
    frames: i64,
    /// The frames the last copy had to copy: the whole WAL for the first, then those that
    /// came in during the copy before.
    came: i64,
    /// What `came` was for the copy before the last (`i64::MAX` after the first).
    came_before: i64,
    /// Copies made outside the turn after the first.
    copies: u32,
}

impl CatchUp {
    /// After a first copy of a WAL of `frames` frames.
    fn after(frames: i64) -> CatchUp {
        CatchUp {
            frames,
            came: frames,
            came_before: i64::MAX,
            copies: 0,
        }
    }

    /// Whether to copy again outside the turn: the last copy had many frames to copy, so many
    /// more may have come in meanwhile, and fewer than the one before.
    fn again(&self) -> bool {
        self.came > FEW_FRAMES && self.came < self.came_before && self.copies < CATCH_UP_COPIES
    }

    /// Counts a copy that found the WAL at `frames` frames. False when it found fewer than
    /// the last: the WAL was started again since (a commit found it all copied), or the copy
    /// did not run (SQLite reports -1 while another connection checkpoints); either ends the
    /// catching up. A restart followed by more frames than the WAL held is not told apart:
    /// the turn then comes one copy early or late, which costs nothing but that copy.
    fn copied(&mut self, frames: i64) -> bool {
        self.copies += 1;
        if frames < self.frames {
            return false;
        }
        self.came_before = self.came;
        self.came = frames - self.frames;
        self.frames = frames;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::open::WAL_LIMIT;
    use crate::archive::{Commit, Op};
    use std::path::Path;

    #[test]
    fn small_commits_wake_the_checkpointer_at_the_first_at_the_count_and_at_a_megabyte() {
        let (wake, woken) = bounded(10);
        let signal = CommitSignal {
            wake,
            pending: Arc::new(Pending::default()),
        };
        signal.committed(2000);
        assert_eq!(woken.len(), 1, "the first commit wakes it");
        for _ in 1..CHECKPOINT_COMMITS - 1 {
            signal.committed(0);
        }
        assert_eq!(woken.len(), 1, "the commits in between do not");
        signal.committed(0);
        assert_eq!(woken.len(), 2, "reaching the count wakes it");
        signal.committed(CHECKPOINT_BYTES);
        assert_eq!(woken.len(), 3, "reaching a megabyte wakes it");
        signal.committed(2000);
        assert_eq!(woken.len(), 3, "past both, nothing more to say");
    }

    fn policy(quiet: Duration, oldest: Duration) -> Policy {
        Policy {
            quiet,
            oldest,
            retry: Duration::from_millis(50),
        }
    }

    const HOUR: Duration = Duration::from_secs(3600);
    const MS_50: Duration = Duration::from_millis(50);

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
        let mut t = archive_with(policy(MS_50, MS_50));
        t.writer.apply(&event_of(1 << 20)).unwrap();
        // A reader's snapshot: everything up to the first MiB.
        let reader = rusqlite::Connection::open(&t.db).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = (reader.query_row("SELECT count(*) FROM events", [], |r| r.get(0))).unwrap();
        t.writer.apply(&event_of(2 << 20)).unwrap();
        t.signal.committed(3 << 20);
        // The checkpoint copies what the reader's snapshot allows: the first MiB.
        wait_for_len(
            &t.db,
            t.before + (1 << 20),
            "no checkpoint of the first MiB",
        );
        reader.execute_batch("COMMIT").unwrap();
        wait_for_len(&t.db, t.before + (3 << 20), "the rest was left in the WAL");
        t.checkpointer.stop();
    }

    #[test]
    fn a_megabyte_committed_is_checkpointed_without_waiting_for_the_interval() {
        // A backfill commits faster than a timer would copy; waiting for it let the WAL reach
        // the writer's own limit, and the writer's commits stopped for the copy.
        let mut t = archive_with(policy(HOUR, HOUR));
        t.writer.apply(&event_of(2 << 20)).unwrap();
        t.signal.committed(2 << 20);
        wait_for_len(
            &t.db,
            t.before + (2 << 20),
            "no checkpoint after 2 MiB committed",
        );
        t.checkpointer.stop();
    }

    /// A fresh archive, its writer, and a checkpointer on it with its own policy.
    struct Setup {
        _dir: tempfile::TempDir,
        db: std::path::PathBuf,
        writer: Archive,
        checkpointer: WalCheckpointer,
        signal: CommitSignal,
        /// The archive file's size before any commit.
        before: u64,
        /// The turns the checkpointer takes with the writer.
        turns: Arc<WriteTurn>,
    }

    fn archive_with(policy: Policy) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("archive.db");
        let writer = Archive::open(&db).unwrap();
        writer.bound_wal().unwrap();
        let turns = Arc::new(WriteTurn::default());
        let (checkpointer, signal) =
            WalCheckpointer::start_with(Archive::open(&db).unwrap(), policy, Arc::clone(&turns))
                .unwrap();
        let before = std::fs::metadata(&db).unwrap().len();
        Setup {
            _dir: dir,
            db,
            writer,
            checkpointer,
            signal,
            before,
            turns,
        }
    }

    /// Commits an event of 10 kB (its own pages), and says so.
    fn commit_one(writer: &mut Archive, signal: &CommitSignal) {
        writer.apply(&event_of(10_000)).unwrap();
        signal.committed(0);
    }

    #[test]
    fn steady_small_commits_are_copied_once_they_pause() {
        // Each checkpoint that copies the whole WAL makes the next commit start the WAL again
        // and sync its header before its record can be printed: small commits that keep
        // coming are left in the WAL until they pause.
        let mut t = archive_with(policy(Duration::from_secs(2), HOUR));
        for _ in 0..50 {
            commit_one(&mut t.writer, &t.signal);
            std::thread::sleep(Duration::from_millis(20));
        }
        let len = std::fs::metadata(&t.db).unwrap().len();
        assert_eq!(
            len, t.before,
            "a checkpoint copied commits that had not paused"
        );
        wait_for_len(
            &t.db,
            t.before + 50 * 10_000,
            "no checkpoint once the commits paused",
        );
        t.checkpointer.stop();
    }

    #[test]
    fn small_commits_that_never_pause_are_copied_once_the_first_has_waited_long_enough() {
        let mut t = archive_with(policy(Duration::from_secs(2), Duration::from_millis(300)));
        // Fewer commits than the count that would start a checkpoint by itself.
        let mut commits = 0;
        while std::fs::metadata(&t.db).unwrap().len() == t.before {
            assert!(
                commits < CHECKPOINT_COMMITS - 1,
                "{commits} commits that never paused were never copied"
            );
            commit_one(&mut t.writer, &t.signal);
            commits += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        t.checkpointer.stop();
    }

    #[test]
    fn small_commits_that_keep_coming_let_the_wal_start_again_long_before_its_bound() {
        // At 1,000 appends a second no copy finished between two commits, so no commit could
        // start the WAL again: it grew to the writer's bound (64 MiB), and then the writer
        // checkpointed inside a commit, on the engine's thread, every two seconds
        // (BENCHMARKS.md). The commits here come as the writer's do, each in its turn.
        let mut t = archive_with(policy(HOUR, HOUR));
        let wal = t.db.with_file_name("archive.db-wal");
        let mut longest = 0;
        let started = Instant::now();
        for n in 1..=8 * CHECKPOINT_COMMITS as u32 {
            let turn = t.turns.for_records();
            t.writer.apply(&event_of(10_000)).unwrap();
            drop(turn);
            t.signal.committed(0);
            longest = longest.max(std::fs::metadata(&wal).unwrap().len());
            // Commits arrive at that live rate, not back to back: there is room for a turn.
            // (Paced only by a short sleep after each, they came twice as fast, and on a
            // loaded machine the WAL's growth then measured the machine more than this.)
            let next = started + Duration::from_millis(1) * n;
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        assert!(
            longest < WAL_LIMIT as u64 / 3,
            "the WAL grew to {longest} bytes (bound {WAL_LIMIT})"
        );
        t.checkpointer.stop();
    }

    /// Pins that the turn waits until little is left to copy in it: at 1,000 appends a second,
    /// the copy in the turn had copied the tens of commits that came during an 8 MiB copy, and
    /// the records behind it waited for two syncs of them (p99 1.2–1.5 ms, BENCHMARKS.md).
    #[test]
    fn what_came_during_a_long_copy_is_copied_outside_the_turn_until_little_is_left() {
        let mut catch_up = CatchUp::after(FINISH_IN_TURN_FRAMES);
        assert!(
            catch_up.again(),
            "a long WAL was copied: more came meanwhile"
        );
        assert!(catch_up.copied(FINISH_IN_TURN_FRAMES + 150));
        assert!(catch_up.again(), "150 frames came during the first copy");
        assert!(catch_up.copied(FINISH_IN_TURN_FRAMES + 150 + FEW_FRAMES));
        assert!(
            !catch_up.again(),
            "few came during the second: the turn copies the rest"
        );
        assert_eq!(catch_up.copies, 2);
    }

    #[test]
    fn catching_up_ends_after_a_bounded_number_of_copies_or_when_the_wal_starts_again() {
        let mut catch_up = CatchUp::after(FINISH_IN_TURN_FRAMES);
        let mut frames = FINISH_IN_TURN_FRAMES;
        let mut came = 1000;
        while catch_up.again() {
            frames += came;
            came -= 1;
            assert!(catch_up.copied(frames));
        }
        assert_eq!(
            catch_up.copies, CATCH_UP_COPIES,
            "a bound on copies whose work shrinks slowly"
        );
        let mut restarted = CatchUp::after(FINISH_IN_TURN_FRAMES);
        assert!(!restarted.copied(5), "a commit started the WAL again");
    }

    #[test]
    fn commits_outpacing_the_copies_send_the_last_copy_to_the_turn_at_once() {
        let mut catch_up = CatchUp::after(FINISH_IN_TURN_FRAMES);
        assert!(catch_up.copied(FINISH_IN_TURN_FRAMES + 200));
        assert!(catch_up.again());
        assert!(catch_up.copied(FINISH_IN_TURN_FRAMES + 200 + 200));
        assert!(
            !catch_up.again(),
            "as many came during the second copy as during the first"
        );
    }

    #[test]
    fn a_checkpoint_that_did_not_run_ends_the_catching_up() {
        let mut catch_up = CatchUp::after(FINISH_IN_TURN_FRAMES);
        assert!(
            !catch_up.copied(-1),
            "SQLite's count while another checkpoints"
        );
    }

    #[test]
    fn a_copy_that_found_nothing_new_leaves_nothing_for_another_outside_the_turn() {
        let mut catch_up = CatchUp::after(FINISH_IN_TURN_FRAMES);
        assert!(catch_up.copied(FINISH_IN_TURN_FRAMES));
        assert!(!catch_up.again());
    }

    #[test]
    fn enough_small_commits_are_copied_without_a_pause() {
        let mut t = archive_with(policy(HOUR, HOUR));
        for _ in 0..CHECKPOINT_COMMITS {
            commit_one(&mut t.writer, &t.signal);
        }
        wait_for_len(
            &t.db,
            t.before + CHECKPOINT_COMMITS * 10_000,
            "no checkpoint after enough commits",
        );
        t.checkpointer.stop();
    }
}
