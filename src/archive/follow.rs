//! The archive is the log; consumers follow it.
//!
//! # The contract
//!
//! Every record committed to the archive has a `seq`, and records commit in `seq` order. The
//! archive writer publishes each commit to a [`Hub`] only after SQLite has committed it,
//! together with the records it has in hand, and moves on: publishing never waits for a
//! consumer.
//!
//! - **Catch-up, then live.** A consumer starts after a `seq` of its choosing (0 for
//!   everything, or "now"). [`Hub::subscribe`] registers it and returns the last `seq`
//!   published, both under the lock that publishing takes, so every later commit reaches the
//!   consumer live and every earlier one is in the archive. The consumer reads
//!   `(start, that seq]` from the archive in pages, then takes what was published: no gap and
//!   no duplicate at the switch (a client that got live output before the history it belonged
//!   to is the mistake this rules out).
//! - **Order.** A consumer sees records in `seq` order, each once, and each only after its
//!   commit. A record's `path` is where its file was when it was read if it came live, and
//!   where the file is now if it came from the archive; `source` is the same either way.
//! - **Never slowing the archive.** A live subscriber is offered each commit without
//!   blocking. One that cannot take it (its queue is full) is let go; a [`Follower`] then
//!   catches up from the archive from the last `seq` it saw and subscribes again, while an
//!   in-memory sink such as the stdout tap is dropped with a warning naming the last `seq` it
//!   wrote out.
//! - **Durable consumers** (an index, a shipper) keep their place in the archive: an
//!   [`Op::ConsumerDone`](crate::archive::Op::ConsumerDone) committed together with their own
//!   work, read back with [`Archive::consumer_seq`] to start from. In-memory consumers (the
//!   tap, a socket subscriber) keep nothing.
//! - **Power loss.** The archive runs with `synchronous=NORMAL`: a crash of the process loses
//!   nothing, but a power loss or kernel crash may roll back the last commits, and their
//!   records are then read again from the transcripts under new `seq` numbers, which may be
//!   the same numbers as before. A durable consumer's place rolls back with them (it commits
//!   after them, in the same log). Anything kept outside the archive (what the tap printed, a
//!   remote store) must therefore key a record on (source, generation, offset), which a
//!   re-read gives the same record again, never on `seq` alone.

use crate::archive::envelope::Envelope;
use crate::archive::{Archive, ExportRow, RecordBatch};
use crate::error::Result;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What the writer publishes after one commit: its record batches in `seq` order, with the
/// `seq` of each record.
#[derive(Debug)]
pub struct Published {
    batches: Vec<RecordBatch>,
    seqs: Vec<i64>,
    /// The bytes of its records.
    bytes: u64,
}

impl Published {
    /// The records of `batches`, which took `seqs` in that order.
    pub fn new(batches: Vec<RecordBatch>, seqs: Vec<i64>) -> Published {
        let bytes = (batches.iter().flat_map(|b| &b.records))
            .map(|r| r.bytes.len() as u64)
            .sum();
        Published {
            batches,
            seqs,
            bytes,
        }
    }

    /// The bytes of its records.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The last `seq` it holds, or `None` for a commit without records.
    pub fn last_seq(&self) -> Option<i64> {
        self.seqs.last().copied()
    }

    /// Its records as envelopes, in `seq` order.
    pub fn envelopes(&self) -> impl Iterator<Item = Envelope<'_>> {
        self.entries().map(|(_, envelope)| envelope)
    }

    /// Its records as envelopes, in `seq` order, each with where its bytes are for
    /// [`Published::record`].
    pub fn entries(&self) -> impl Iterator<Item = (RecordAt, Envelope<'_>)> {
        let records = (self.batches.iter().enumerate()).flat_map(|(b, batch)| {
            (batch.records.iter().enumerate()).map(move |(r, rec)| (b, r, batch, rec))
        });
        records.zip(&self.seqs).map(|((b, r, batch, rec), seq)| {
            let envelope = Envelope {
                seq: *seq,
                source: batch.source,
                harness: &batch.harness,
                path: &batch.path,
                generation: batch.generation,
                offset: rec.offset,
                record: &rec.bytes,
            };
            (
                RecordAt {
                    batch: b,
                    record: r,
                },
                envelope,
            )
        })
    }

    /// The bytes of the record at `at`.
    pub fn record(&self, at: RecordAt) -> &[u8] {
        &self.batches[at.batch].records[at.record].bytes
    }
}

/// Where a record is in a [`Published`]: which batch, which record of it.
#[derive(Clone, Copy, Debug)]
pub struct RecordAt {
    batch: usize,
    record: usize,
}

/// A live subscriber: offered each commit as it is published, on the publishing thread,
/// under the hub's lock. An offer must not block.
pub trait Subscriber: Send {
    /// Takes `published`, or says it cannot keep up (or has stopped) and is to be let go.
    fn offer(&mut self, published: &Arc<Published>) -> Offer;

    /// Told, as it is registered, the last `seq` published before it: what it is offered
    /// follows that.
    fn subscribed(&mut self, _after: i64) {}
}

/// A subscriber's answer to an offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Taken; keep offering.
    Taken,
    /// Not taken: let this subscriber go.
    LetGo,
}

/// A commit of at least this many bytes of records is a backfill's (or a large pull's): a live
/// append commits what an agent wrote at once, far less, and the writer compresses a batch this
/// large on two threads.
pub(crate) const BULK_BYTES: u64 = 1 << 20;

/// Where commits are published, and consumers subscribe.
pub struct Hub {
    state: Mutex<HubState>,
}

struct HubState {
    /// The last `seq` published.
    published: i64,
    subscribers: Vec<Box<dyn Subscriber>>,
    /// Set when the writer ends: nothing more will be published.
    closed: bool,
    /// When the last commit of `BULK_BYTES` or more was published.
    bulk_at: Option<Instant>,
}

impl Hub {
    /// A hub whose archive holds records up to `last_seq`.
    pub fn new(last_seq: i64) -> Arc<Hub> {
        Arc::new(Hub {
            state: Mutex::new(HubState {
                published: last_seq,
                subscribers: Vec::new(),
                closed: false,
                bulk_at: None,
            }),
        })
    }

    /// Called by the writer after each commit, in commit order: offers `published` to every
    /// subscriber, letting go of those that do not take it.
    pub fn publish(&self, published: Published) {
        let Some(last) = published.last_seq() else {
            return;
        };
        let published = Arc::new(published);
        let let_go: Vec<Box<dyn Subscriber>> = {
            let mut state = self.lock();
            state.published = last;
            if published.bytes() >= BULK_BYTES {
                state.bulk_at = Some(Instant::now());
            }
            (state.subscribers)
                .extract_if(.., |s| s.offer(&published) == Offer::LetGo)
                .collect()
        };
        // Dropped outside the lock: letting one go may take a moment (a tap's thread).
        drop(let_go);
    }

    /// Registers `subscriber` for every commit published from now on, and returns the last
    /// `seq` published before it: records up to it are in the archive, records after it
    /// reach the subscriber. `None` once the hub is closed.
    pub fn subscribe(&self, subscriber: Box<dyn Subscriber>) -> Option<i64> {
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        let mut subscriber = subscriber;
        subscriber.subscribed(state.published);
        state.subscribers.push(subscriber);
        Some(state.published)
    }

    /// True once the writer has ended.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The last `seq` published.
    pub fn published(&self) -> i64 {
        self.lock().published
    }

    /// How long ago the last commit of `BULK_BYTES` or more was published; `None` if none
    /// was.
    pub fn since_bulk(&self) -> Option<Duration> {
        self.lock().bulk_at.map(|at| at.elapsed())
    }

    /// The writer has ended: lets every subscriber go (a tap writes out what it holds) and
    /// tells followers that nothing more will come.
    pub fn close(&self) {
        let subscribers = {
            let mut state = self.lock();
            state.closed = true;
            std::mem::take(&mut state.subscribers)
        };
        drop(subscribers);
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        // A subscriber that panicked in an offer leaves the list as it was: still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How many commits a follower's live queue holds before the follower is let go and catches
/// up from the archive instead.
const LIVE_BACKLOG: usize = 1024;

/// How many bytes of records a follower's live queue holds, at most, before it is let go (one
/// commit over it is still taken into an empty queue): a backfill's commits are megabytes each.
/// A follower let go reads what it missed from the archive, so the bound costs reads, not
/// records; at 64 MiB, the session index's queue during a backfill was half of the daemon's
/// peak memory (BENCHMARKS.md).
const LIVE_BYTES: u64 = 8 << 20;

/// How many records one catch-up read takes from the archive, at most, and after how many
/// bytes of records it stops (past at least one record).
const PAGE: usize = 1000;
const PAGE_BYTES: u64 = 8 << 20;

/// Where a [`Follower`] starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// After this `seq` (0: every record in the archive).
    After(i64),
    /// After the last `seq` published when it subscribes: only what commits from then on.
    Now,
}

/// A consumer that follows the archive: catch-up from the archive, then live, in `seq` order,
/// each record once, falling back to the archive whenever it falls behind.
pub struct Follower {
    hub: Arc<Hub>,
    archive: Archive,
    /// The last `seq` handed out.
    done: i64,
    /// Records before this `seq` are read from the archive; after it, from `live`.
    live_after: i64,
    live: Option<Receiver<Arc<Published>>>,
    /// The bytes of records in `live`.
    live_bytes: Arc<AtomicU64>,
    /// How many commits, and bytes of records, `live` holds at most.
    backlog: (usize, u64),
    /// Records read or received and not yet handed out.
    pending: std::collections::VecDeque<ExportRow>,
    /// What a record is handed out as, when not as it is.
    shrink: Option<Shrink>,
}

/// A record as a follower hands it out, made from the record (borrowed when it is the same).
pub(crate) type Shrink = for<'a> fn(&'a [u8]) -> std::borrow::Cow<'a, [u8]>;

/// A follower's live queue, the bytes of records in it, and how many it may hold.
struct Queue {
    tx: Sender<Arc<Published>>,
    bytes: Arc<AtomicU64>,
    max_bytes: u64,
}

impl Subscriber for Queue {
    fn offer(&mut self, published: &Arc<Published>) -> Offer {
        let queued = self.bytes.load(Ordering::Acquire);
        if queued > 0 && queued + published.bytes > self.max_bytes {
            return Offer::LetGo;
        }
        match self.tx.try_send(Arc::clone(published)) {
            Ok(()) => {
                self.bytes.fetch_add(published.bytes, Ordering::AcqRel);
                Offer::Taken
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => Offer::LetGo,
        }
    }
}

impl Follower {
    /// Follows the archive from `start`, reading catch-up through `archive` (a connection of
    /// the follower's own). `Ok(None)` when the hub is closed already.
    pub fn start(hub: Arc<Hub>, archive: Archive, start: Start) -> Result<Option<Follower>> {
        Follower::start_with(hub, archive, start, (LIVE_BACKLOG, LIVE_BYTES))
    }

    /// With a live queue of `backlog` commits and bytes at most.
    fn start_with(
        hub: Arc<Hub>,
        archive: Archive,
        start: Start,
        backlog: (usize, u64),
    ) -> Result<Option<Follower>> {
        let follower = Follower::start_to_end(hub, archive, start, backlog)?;
        Ok(follower.live.is_some().then_some(follower))
    }

    /// Follows the archive from `start` with a live queue of `backlog` commits and bytes at
    /// most; when the hub is closed already, reads the archive to its end and then ends.
    pub fn start_to_end(
        hub: Arc<Hub>,
        archive: Archive,
        start: Start,
        backlog: (usize, u64),
    ) -> Result<Follower> {
        let mut follower = Follower {
            hub,
            archive,
            done: 0,
            live_after: 0,
            live: None,
            live_bytes: Arc::new(AtomicU64::new(0)),
            backlog,
            pending: Default::default(),
            shrink: None,
        };
        if !follower.subscribe() {
            follower.live_after = follower.archive.last_seq()?;
        }
        follower.done = match start {
            Start::After(seq) => seq.min(follower.live_after),
            Start::Now => follower.live_after,
        };
        Ok(follower)
    }

    /// Registers a new live queue; false when the hub is closed.
    fn subscribe(&mut self) -> bool {
        let (tx, rx) = bounded(self.backlog.0);
        // A queue of its own: what a queue let go still holds is read before its end.
        self.live_bytes = Arc::new(AtomicU64::new(0));
        let bytes = Arc::clone(&self.live_bytes);
        let max_bytes = self.backlog.1;
        let queue = Queue {
            tx,
            bytes,
            max_bytes,
        };
        match self.hub.subscribe(Box::new(queue)) {
            Some(published) => {
                self.live_after = published;
                self.live = Some(rx);
                true
            }
            None => {
                self.live = None;
                false
            }
        }
    }

    /// The next record, waiting up to `wait` for one to commit. `Ok(None)` when none came in
    /// that time, or the writer has ended and every record has been handed out.
    pub fn next(&mut self, wait: Duration) -> Result<Option<ExportRow>> {
        loop {
            if let Some(row) = self.pending.pop_front() {
                self.done = row.seq;
                return Ok(Some(row));
            }
            if self.done < self.live_after {
                let mut page =
                    self.archive
                        .records_page(self.done, self.live_after, PAGE, PAGE_BYTES)?;
                if let Some(shrink) = self.shrink {
                    for row in &mut page {
                        if let std::borrow::Cow::Owned(less) = shrink(&row.record) {
                            row.record = less;
                        }
                    }
                }
                self.pending.extend(page);
                continue;
            }
            let Some(live) = &self.live else {
                return Ok(None);
            };
            match live.recv_timeout(wait) {
                Ok(published) => {
                    self.live_bytes.fetch_sub(published.bytes, Ordering::AcqRel);
                    self.take(&published);
                }
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                // Let go (it fell behind) or closed: catch up from the archive, then follow
                // again, or end once the hub is closed and the archive read to its end.
                Err(RecvTimeoutError::Disconnected) => {
                    if !self.subscribe() {
                        let last = self.archive.last_seq()?;
                        if self.done >= last {
                            return Ok(None);
                        }
                        self.live_after = last;
                    }
                }
            }
        }
    }

    /// Queues the records of a live commit: all past what was handed out, since the catch-up
    /// stopped where the subscription began.
    fn take(&mut self, published: &Published) {
        for e in published.envelopes() {
            debug_assert!(e.seq > self.live_after, "live records follow the catch-up");
            self.pending.push_back(ExportRow {
                seq: e.seq,
                source: e.source,
                harness: e.harness.to_owned(),
                path: e.path.to_owned(),
                generation: e.generation,
                offset: e.offset,
                record: match self.shrink {
                    Some(shrink) => shrink(e.record).into_owned(),
                    None => e.record.to_vec(),
                },
            });
        }
    }

    /// Hands out each record as `shrink` makes it, a live one without copying it whole first
    /// (the session index reads records with their long strings cut).
    pub fn shrinking(mut self, shrink: Shrink) -> Follower {
        self.shrink = Some(shrink);
        self
    }

    /// The last `seq` handed out.
    pub fn done(&self) -> i64 {
        self.done
    }

    /// True once the writer has ended and every record has been handed out: `next` returns
    /// `Ok(None)` from then on.
    pub fn ended(&self) -> bool {
        self.live.is_none() && self.pending.is_empty() && self.done >= self.live_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::writer::ArchiveWriter;
    use crate::archive::{Commit, Op};
    use crate::domain::fingerprint::Identity;
    use crate::domain::{Cursor, Record};

    /// A writer publishing to a hub, over a temp archive holding one source.
    struct Setup {
        dir: tempfile::TempDir,
        hub: Arc<Hub>,
        writer: ArchiveWriter,
        offset: u64,
    }

    impl Setup {
        fn new() -> Setup {
            let dir = tempfile::tempdir().unwrap();
            let archive = Archive::open(&dir.path().join("a.db")).unwrap();
            let hub = Hub::new(archive.last_seq().unwrap());
            let mut writer = ArchiveWriter::new(archive, Some(Arc::clone(&hub)));
            let mut tx = Commit::default();
            tx.push(Op::InsertSource {
                id: 1,
                identity: Identity { dev: 1, ino: 1 },
                path: "/t/a.jsonl".into(),
                harness: "generic".into(),
                cursor: Cursor::default(),
            });
            writer.write(tx).unwrap();
            Setup {
                dir,
                hub,
                writer,
                offset: 0,
            }
        }

        /// Commits `n` records, one commit each.
        fn commit(&mut self, n: usize) {
            for _ in 0..n {
                let bytes = format!("{{\"at\":{}}}", self.offset).into_bytes();
                self.commit_record(bytes);
            }
        }

        /// Commits one record of `bytes`.
        fn commit_record(&mut self, bytes: Vec<u8>) {
            let at = self.offset;
            // A line apart, and 10 apart at least (the small records' offsets).
            self.offset += (bytes.len() as u64 + 1).max(10);
            let mut tx = Commit::default();
            tx.push(Op::Records(RecordBatch {
                source: 1,
                harness: "generic".into(),
                path: "/t/a.jsonl".into(),
                generation: 0,
                read_ms: 0,
                records: vec![Record { offset: at, bytes }],
            }));
            self.writer.write(tx).unwrap();
        }

        fn follow(&self, start: Start, backlog: (usize, u64)) -> Follower {
            let archive = Archive::open(&self.dir.path().join("a.db")).unwrap();
            Follower::start_with(Arc::clone(&self.hub), archive, start, backlog)
                .unwrap()
                .unwrap()
        }
    }

    /// The seqs a follower hands out until none is waiting.
    fn drain(f: &mut Follower) -> Vec<i64> {
        let mut seqs = Vec::new();
        while let Some(row) = f.next(Duration::ZERO).unwrap() {
            assert_eq!(
                row.record,
                format!("{{\"at\":{}}}", row.offset).into_bytes()
            );
            seqs.push(row.seq);
        }
        seqs
    }

    #[test]
    fn catch_up_then_live_hands_out_every_record_once_in_order() {
        // Records committed after the follower subscribed are in the archive too by the time
        // it reads its catch-up: it must read only up to where it subscribed, and take the
        // rest live, or it would hand them out twice.
        let mut s = Setup::new();
        s.commit(10);
        let mut f = s.follow(Start::After(0), (64, LIVE_BYTES));
        s.commit(10);
        assert_eq!(drain(&mut f), (1..=20).collect::<Vec<_>>());
        s.commit(3);
        assert_eq!(drain(&mut f), [21, 22, 23]);
        assert_eq!(f.done(), 23);
    }

    #[test]
    fn a_follower_that_falls_behind_is_let_go_and_catches_up_from_the_archive() {
        let mut s = Setup::new();
        let mut f = s.follow(Start::After(0), (4, LIVE_BYTES));
        s.commit(25);
        assert_eq!(s.hub.lock().subscribers.len(), 0, "let go");
        assert_eq!(drain(&mut f), (1..=25).collect::<Vec<_>>());
        s.commit(2);
        assert_eq!(drain(&mut f), [26, 27], "it follows live again");
    }

    #[test]
    fn a_follower_whose_queue_holds_too_many_bytes_is_let_go_and_catches_up() {
        // Each commit here holds 8 or 9 bytes of records: a queue of at most 25 takes two.
        let mut s = Setup::new();
        let mut f = s.follow(Start::After(0), (64, 25));
        s.commit(9);
        assert_eq!(s.hub.lock().subscribers.len(), 0, "let go");
        assert_eq!(drain(&mut f), (1..=9).collect::<Vec<_>>());
        assert_eq!(s.hub.lock().subscribers.len(), 1, "subscribed again");
        s.commit(1);
        assert_eq!(drain(&mut f), [10], "it follows live again");
    }

    #[test]
    fn a_commit_of_bulk_bytes_is_known_as_a_backfill_and_smaller_ones_are_not() {
        let mut s = Setup::new();
        s.commit(200);
        let padded = |len: usize| format!("{{\"p\":\"{}\"}}", "x".repeat(len - 8)).into_bytes();
        s.commit_record(padded(BULK_BYTES as usize - 1));
        assert_eq!(s.hub.since_bulk(), None);
        s.commit_record(padded(BULK_BYTES as usize));
        assert!(s.hub.since_bulk().is_some(), "a bulk commit");
        let at = s.hub.lock().bulk_at;
        s.commit(1);
        assert_eq!(s.hub.lock().bulk_at, at, "a small commit leaves it");
    }

    #[test]
    fn a_follower_started_now_or_after_a_seq_gets_only_what_follows() {
        let mut s = Setup::new();
        s.commit(5);
        let mut now = s.follow(Start::Now, (64, LIVE_BYTES));
        let mut after = s.follow(Start::After(3), (64, LIVE_BYTES));
        s.commit(2);
        assert_eq!(drain(&mut now), [6, 7]);
        assert_eq!(drain(&mut after), [4, 5, 6, 7]);
    }

    #[test]
    fn when_the_writer_ends_a_follower_hands_out_the_rest_then_ends() {
        let mut s = Setup::new();
        let mut f = s.follow(Start::After(0), (2, LIVE_BYTES));
        s.commit(6);
        let Setup {
            dir, hub, writer, ..
        } = s;
        drop(writer);
        assert_eq!(drain(&mut f), (1..=6).collect::<Vec<_>>());
        assert!(
            f.next(Duration::from_secs(5)).unwrap().is_none(),
            "ended, not waiting"
        );
        let archive = Archive::open(&dir.path().join("a.db")).unwrap();
        assert!(Follower::start(hub, archive, Start::Now).unwrap().is_none());
    }

    #[test]
    fn a_durable_consumer_keeps_its_place_with_its_work() {
        let mut s = Setup::new();
        s.commit(4);
        let mut f = s.follow(Start::After(0), (64, LIVE_BYTES));
        let done = drain(&mut f);
        let mut tx = Commit::default();
        let name = "index".to_owned();
        let seq = *done.last().unwrap();
        tx.push(Op::ConsumerDone { name, seq });
        s.writer.write(tx).unwrap();
        let archive = Archive::open(&s.dir.path().join("a.db")).unwrap();
        assert_eq!(archive.consumer_seq("index").unwrap(), Some(4));
        assert_eq!(archive.consumer_seq("other").unwrap(), None);
    }
}
