//! Which thread the session index does its work on: a helper in the idle scheduling class
//! while the cores have room for it, or its own thread, at a fair share, while other programs
//! keep them busy.
//!
//! - In the idle class, any thread that wakes takes the core from the index at once, so a
//!   record on its way never waits for it (live latency, BENCHMARKS.md).
//! - But on a machine that other programs keep busy, the idle class gets almost nothing (a
//!   weight of 3, against 1,024 for each busy thread), and the index fell behind for as long
//!   as the machine stayed busy: `search` missed what had been archived.
//! - So each job on the helper (one transaction of records) is
//!   timed. One that waited for a core for at least 100 ms and half its time ([`starved`])
//!   sends the next ones to the index's own thread, in the batch class: a fair share of the
//!   cores, and wake-ups that preempt nobody. The helper is tried again after
//!   [`FIRST_HOLD`], and after twice as long each time it is found starved again, up to
//!   [`LONGEST_HOLD`]. (How long the own thread waits for a core does not tell whether the
//!   idle class would get one: a thread that slept is given a core soon even on a busy
//!   machine.)
//! - Where that wait cannot be read (no `/proc/thread-self/schedstat`: not Linux, or a kernel
//!   without scheduler statistics), there is no helper: nothing would tell that it starves.
//! - Merging the search segments after a backfill is done on the index's own thread too.
//! - Reading and parsing the records to index, and cutting their text into terms, is done on
//!   the index's own thread, before a job is given out (a `reindex` does it on a reader
//!   thread instead, a page ahead: [`super::Indexer::catch_up`]).

use super::{Indexer, Ready};
use crate::error::{Result, SystemContext};
use crossbeam_channel::{Receiver, Sender, bounded};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A job on the helper waited at least this long for a core, and for half its time or more:
/// the idle class is starved.
const STARVED: Duration = Duration::from_millis(100);

/// How long the index works on its own thread after the helper was first found starved.
const FIRST_HOLD: Duration = Duration::from_secs(10);
const LONGEST_HOLD: Duration = Duration::from_secs(320);

/// How long one job took, and how much of that its thread waited for a core.
#[derive(Clone, Copy, Debug)]
struct Timed {
    took: Duration,
    waited: Duration,
}

impl Timed {
    /// Runs `f` on the calling thread and times it; no time where the wait cannot be read.
    fn of<T>(f: impl FnOnce() -> T) -> (T, Option<Timed>) {
        let (started, before) = (Instant::now(), crate::platform::sys::thread_core_wait());
        let out = f();
        let timed = before
            .zip(crate::platform::sys::thread_core_wait())
            .map(|(before, after)| Timed {
                took: started.elapsed(),
                waited: after.saturating_sub(before),
            });
        (out, timed)
    }
}

/// Whether a job on the idle helper shows the idle class starved.
fn starved(t: Timed) -> bool {
    t.waited >= STARVED && t.waited * 2 >= t.took
}

/// Where the next job goes.
#[derive(Debug)]
struct Place {
    /// `None`: on the helper. Else on the own thread until then.
    own_until: Option<Instant>,
    /// How long the next hold on the own thread is.
    hold: Duration,
}

impl Place {
    fn new() -> Place {
        Place {
            own_until: None,
            hold: FIRST_HOLD,
        }
    }

    /// Whether the job to start at `now` goes to the helper.
    fn on_helper(&mut self, now: Instant) -> bool {
        if self.own_until.is_some_and(|until| now >= until) {
            self.own_until = None;
        }
        self.own_until.is_none()
    }

    /// After a job on the helper that ended at `now`: starved, it holds the next ones on the
    /// own thread, for twice as long as the hold before if it was starved then too. Returns
    /// the hold begun.
    fn after_helper(&mut self, starved: bool, now: Instant) -> Option<Duration> {
        if !starved {
            self.hold = FIRST_HOLD;
            return None;
        }
        let hold = self.hold;
        self.own_until = Some(now + hold);
        self.hold = (hold * 2).min(LONGEST_HOLD);
        Some(hold)
    }
}

/// The indexer, and where its jobs go.
pub(super) struct Share {
    /// `None` only while the helper has it.
    indexer: Option<Indexer>,
    helper: Option<Helper>,
    place: Place,
}

impl Share {
    /// Work for `indexer`, on the idle helper first where there can be one.
    pub(super) fn new(indexer: Indexer) -> Share {
        let helper = match crate::platform::sys::thread_core_wait() {
            Some(_) => Helper::spawn()
                .inspect_err(|e| log::warn!("session index: {e}; it works on its own thread"))
                .ok(),
            None => None,
        };
        Share {
            indexer: Some(indexer),
            helper,
            place: Place::new(),
        }
    }

    /// Indexes `rows` (as [`Indexer::index`] does): each transaction where [`Place`] says.
    pub(super) fn index(&mut self, mut rows: Vec<Ready>) -> Result<()> {
        let mut from = 0;
        while from < rows.len() {
            let n;
            (rows, n) = self.run(Job { rows, from });
            from += n?;
        }
        Ok(())
    }

    /// [`Indexer::merge_when_grown`], on the index's own thread: once after a backfill, and
    /// rarely after (its time is a tenth of the index's build).
    pub(super) fn merge_when_grown(&mut self) {
        (self.indexer.as_mut())
            .expect("the indexer is here between jobs")
            .merge_when_grown();
    }

    /// Runs `job` where [`Place`] says, and decides where the next goes; gives the job's rows
    /// back.
    fn run(&mut self, job: Job) -> (Vec<Ready>, Result<usize>) {
        let helper = match self.helper.as_mut() {
            Some(h) if self.place.on_helper(Instant::now()) => h,
            _ => return job.run(self.indexer.as_mut().expect("the indexer is back")),
        };
        let indexer = (self.indexer.take()).expect("the indexer is here between jobs");
        let (indexer, rows, result, timed) = helper.run(indexer, job);
        self.indexer = Some(indexer);
        let starving = timed.filter(|t| starved(*t));
        if let Some(hold) = self.place.after_helper(starving.is_some(), Instant::now())
            && let Some(t) = starving
        {
            log::debug!(
                "session index: waited {} of {} ms for a core in the idle class; at a fair share for {} s",
                t.waited.as_millis(),
                t.took.as_millis(),
                hold.as_secs()
            );
        }
        (rows, result)
    }
}

/// One piece of the index's work, a transaction: a starved helper holds up one at a time.
struct Job {
    rows: Vec<Ready>,
    /// The rows from this one on are to index.
    from: usize,
}

impl Job {
    /// Indexes a first part of the rows from `from` on, in one transaction; how many.
    fn run(self, indexer: &mut Indexer) -> (Vec<Ready>, Result<usize>) {
        let n = indexer.index_some(&self.rows[self.from..]);
        (self.rows, n)
    }
}

/// What the helper gives back: the indexer, the job's rows, its result and its time.
type Done = (Indexer, Vec<Ready>, Result<usize>, Option<Timed>);

/// The thread in the idle class that runs the jobs it is given. Dropped, it ends on its own: a
/// stop does not wait for a thread that a busy machine may give no core for a while, and it
/// holds nothing between jobs.
struct Helper {
    work: Sender<(Indexer, Job)>,
    done: Receiver<Done>,
    handle: Option<JoinHandle<()>>,
}

impl Helper {
    fn spawn() -> Result<Helper> {
        let (work, work_rx) = bounded::<(Indexer, Job)>(1);
        let (done_tx, done) = bounded::<Done>(1);
        let handle = std::thread::Builder::new()
            .name("index (idle)".into())
            .spawn(move || {
                if let Err(e) = crate::platform::sys::idle_thread_policy() {
                    log::debug!("session index: cannot enter the idle scheduling class: {e}");
                }
                for (mut indexer, job) in work_rx {
                    let ((rows, result), timed) = Timed::of(|| job.run(&mut indexer));
                    if done_tx.send((indexer, rows, result, timed)).is_err() {
                        return;
                    }
                }
            })
            .starting("index (idle)")?;
        Ok(Helper {
            work,
            done,
            handle: Some(handle),
        })
    }

    /// Has the helper run `job` with `indexer`, and waits for it. A panic there is raised
    /// here, as if the job had been run on this thread.
    fn run(&mut self, indexer: Indexer, job: Job) -> Done {
        let sent = self.work.send((indexer, job)).is_ok();
        match sent.then(|| self.done.recv().ok()).flatten() {
            Some(done) => done,
            // The helper has ended: its end of either channel is gone.
            None => {
                let handle = self.handle.take().expect("a helper ends once");
                match handle.join() {
                    Err(panic) => std::panic::resume_unwind(panic),
                    Ok(()) => unreachable!("the helper ends only when its work channel closes"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(took: u64, waited: u64) -> Timed {
        Timed {
            took: Duration::from_millis(took),
            waited: Duration::from_millis(waited),
        }
    }

    #[test]
    fn the_idle_class_is_starved_once_a_transaction_waited_for_most_of_its_time_and_long() {
        assert!(starved(ms(2_000, 1_900)));
        assert!(starved(ms(200, 100)));
        // Half its time, but briefly: a core taken by a record on its way.
        assert!(!starved(ms(150, 90)));
        // Long, but under half of a long transaction: the idle class still gets on.
        assert!(!starved(ms(2_000, 900)));
    }

    #[test]
    fn a_starved_helper_is_held_off_for_a_time_that_doubles_while_it_starves() {
        let second = Duration::from_secs(1);
        let mut now = Instant::now();
        let mut place = Place::new();
        assert!(place.on_helper(now));
        assert_eq!(place.after_helper(false, now), None);
        for hold in [FIRST_HOLD, FIRST_HOLD * 2, FIRST_HOLD * 4] {
            assert_eq!(place.after_helper(true, now), Some(hold));
            assert!(!place.on_helper(now + hold - second), "held off");
            now += hold;
            assert!(place.on_helper(now), "tried again after {hold:?}");
        }
        // Not starved: the next hold is the first again.
        assert_eq!(place.after_helper(false, now), None);
        assert!(place.on_helper(now));
        assert_eq!(place.after_helper(true, now), Some(FIRST_HOLD));
        let holds: Vec<Duration> = (0..10)
            .filter_map(|_| place.after_helper(true, now))
            .collect();
        assert_eq!(holds.last(), Some(&LONGEST_HOLD));
        assert!(holds.iter().all(|h| *h <= LONGEST_HOLD));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_transaction_is_timed_with_the_time_its_thread_waited_for_a_core() {
        let (out, timed) = Timed::of(|| {
            std::thread::sleep(Duration::from_millis(20));
            7
        });
        assert_eq!(out, 7);
        let t = timed.expect("Linux reads its threads' waits");
        assert!(t.took >= Duration::from_millis(20), "{t:?}");
        assert!(t.waited <= t.took, "{t:?}");
    }
}
