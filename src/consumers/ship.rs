//! Shipping: every configured sink (a PostgreSQL database, an HTTP collector, a mirror
//! directory) is a durable consumer of the archive, and the archive is its buffer.
//!
//! A sink's thread follows the archive from its own cursor (the consumer `sink:<name>`),
//! gathers records into batches bounded by records, bytes and time (`flush_interval`), and
//! hands each batch to its [`Destination`]. Only once the destination has acknowledged the
//! whole batch does the cursor move, in one archive transaction with the dead letters of the
//! batch and the destination's own state (a mirror's file lengths): a crash at any point
//! ships the batch again, and every destination keys what it stores on (machine, source,
//! generation, offset), so shipping it again changes nothing there.
//!
//! - A failure that may pass (the destination is down, slow, busy) is retried with
//!   exponential backoff and jitter up to 60 s, honouring a `Retry-After`; the archive keeps
//!   archiving meanwhile, and memory stays bounded (a follower that falls behind reads from
//!   the archive again instead of queueing).
//! - A batch refused for good is bisected down to the records at fault; each goes to
//!   `dead_letters` with the destination's answer, and the sink moves on.
//! - `run --once` ships too, and ends at the first failure that may pass, with an error.
//!
//! A sink with `marks = true` also follows the archive's order of mark changes from a place
//! of its own ([`marks::MarksCursor`]), committed with its cursor: after each batch, and when
//! idle, the sessions whose marks changed get their marks as they are now, once the records
//! the archive held at the change are shipped. Shipped again after a crash, they are stored
//! again as they are, which changes nothing.

mod http;
mod marks;
mod mirror;
mod postgres;
pub(crate) mod pull;
mod spec;

pub use postgres::copy_text;
pub(crate) use spec::{SinkSpec, SinkTable, Target, from_table as spec_from_table, parse_ship};

use crate::archive::follow::{Follower, Hub, Start};
use crate::archive::marks::MarksNow;
use crate::archive::sinks::{DeadLetter, Shipped, sink_consumer};
use crate::archive::wal_checkpoint::CommitSignal;
use crate::archive::write_turn::WriteTurn;
use crate::archive::{Archive, ExportRow, StateKey};
use crate::consumers::redact::Redactor;
use crate::error::{Error, Result, error_chain};
use crossbeam_channel::Receiver;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A sink's live queue: at most this many commits and bytes before it reads from the archive
/// instead (memory stays bounded through an outage).
const LIVE_BACKLOG: (usize, u64) = (256, 8 << 20);
/// The first retry's delay; each failure doubles it, up to [`MAX_DELAY`].
pub(crate) const FIRST_DELAY: Duration = Duration::from_millis(500);
/// The longest pause between two attempts.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(60);
/// How often an outage is summed up in the log while it lasts.
const SUMMARY_EVERY: Duration = Duration::from_secs(60);

/// Who ships: the archive's machine id (made once with the archive) and the host's name, a
/// label only.
#[derive(Clone, Debug)]
pub(crate) struct Machine {
    /// A UUID.
    pub id: String,
    /// The host name when it was started.
    pub host: String,
}

impl Machine {
    /// The machine of the archive `archive`.
    pub(crate) fn of(archive: &Archive) -> Result<Machine> {
        let Some(id) = archive.state(StateKey::MachineId)? else {
            return Err(Error::Sink {
                name: archive.path().display().to_string(),
                message: "the archive has no machine id (state key machine_id, made by its schema 5); it cannot key what it ships".into(),
            });
        };
        let host = crate::platform::sys::host_name();
        Ok(Machine { id, host })
    }
}

/// Why a delivery failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// It may pass (unreachable, timed out, busy, a transient server error): retried.
    Transient {
        /// What the destination, or the connection, said.
        message: String,
        /// How long the destination asked to wait (`Retry-After`).
        retry_after: Option<Duration>,
    },
    /// The destination refused the batch for good: it is bisected down to the records at fault.
    Refused {
        /// What the destination said.
        message: String,
    },
}

impl Failure {
    /// A failure that may pass, without a wait asked for.
    pub(crate) fn transient(message: impl Into<String>) -> Failure {
        Failure::Transient {
            message: message.into(),
            retry_after: None,
        }
    }
}

/// Where a sink's batches go.
pub(crate) trait Destination: Send {
    /// Delivers `batch` (records in `seq` order). `Ok` means the destination has stored every
    /// record of it (as durably as it promises); storing a record again must change nothing.
    fn deliver(&mut self, batch: &[ExportRow]) -> std::result::Result<(), Failure>;

    /// Delivers the marks of the sessions in `marks` as they are now, in the order they
    /// changed. `Ok` means the destination has stored them; storing them again must change
    /// nothing. Only called for a sink with `marks = true`.
    fn deliver_marks(&mut self, marks: &[MarksNow]) -> std::result::Result<(), Failure>;

    /// Called when no record waits, with the last `seq` shipped: work that follows the
    /// archive at its own pace (PostgreSQL ships the session index's rows). `Ok(true)` when
    /// it has state to commit.
    fn idle(&mut self, _shipped: i64) -> std::result::Result<bool, Failure> {
        Ok(false)
    }

    /// State to commit with the cursor after the last delivery, as (key, value) pairs; read
    /// back with [`Archive`]'s `sink_state` when the sink starts again.
    fn take_state(&mut self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// What it is, in a sentence such as "PostgreSQL unreachable".
    fn kind(&self) -> &'static str;
}

/// Opens the destination of `spec`, shipping as `machine`, over the archive at `db`:
/// redacting records when the sink does, and its messages always.
pub(crate) fn open_destination(
    spec: &SinkSpec,
    machine: &Machine,
    db: &Path,
) -> Result<Box<dyn Destination>> {
    let redact = spec.redact.then(|| Arc::clone(&spec.redactor));
    let inner: Box<dyn Destination> = match &spec.target {
        Target::Postgres { .. } => Box::new(postgres::Postgres::new(spec, machine, db)?),
        Target::Http { .. } => Box::new(http::Http::new(spec, machine)?),
        Target::Mirror { dir, roots } => Box::new(mirror::Mirror::open(
            &spec.name,
            dir,
            roots.clone(),
            db,
            redact,
        )?),
    };
    Ok(Box::new(Redacting {
        inner,
        records: spec.redact,
        redactor: Arc::clone(&spec.redactor),
    }))
}

/// A destination seen through the redactor: the records it is given are redacted (when
/// `records`), and every message it answers with is, always (an answer may quote a record,
/// and it is logged, kept in `status` and in dead letters).
struct Redacting {
    inner: Box<dyn Destination>,
    records: bool,
    redactor: Arc<Redactor>,
}

impl Redacting {
    fn message(&self, failure: Failure) -> Failure {
        let clean = |mut m: String| {
            self.redactor.redact_text_in_place(&mut m);
            m
        };
        match failure {
            Failure::Transient {
                message,
                retry_after,
            } => Failure::Transient {
                message: clean(message),
                retry_after,
            },
            Failure::Refused { message } => Failure::Refused {
                message: clean(message),
            },
        }
    }

    /// The batch with its records redacted, when one holds a secret.
    fn redacted(&self, batch: &[ExportRow]) -> Option<Vec<ExportRow>> {
        if !self.records {
            return None;
        }
        let changed: Vec<Option<Vec<u8>>> = (batch.iter())
            .map(|row| match self.redactor.redact_record(&row.record) {
                std::borrow::Cow::Owned(record) => Some(record),
                std::borrow::Cow::Borrowed(_) => None,
            })
            .collect();
        changed.iter().any(Option::is_some).then(|| {
            (batch.iter().zip(changed))
                .map(|(row, record)| ExportRow {
                    seq: row.seq,
                    source: row.source,
                    harness: row.harness.clone(),
                    path: row.path.clone(),
                    generation: row.generation,
                    offset: row.offset,
                    record: record.unwrap_or_else(|| row.record.clone()),
                })
                .collect()
        })
    }
}

impl Destination for Redacting {
    fn deliver(&mut self, batch: &[ExportRow]) -> std::result::Result<(), Failure> {
        let redacted = self.redacted(batch);
        let batch = redacted.as_deref().unwrap_or(batch);
        self.inner.deliver(batch).map_err(|f| self.message(f))
    }

    fn deliver_marks(&mut self, marks: &[MarksNow]) -> std::result::Result<(), Failure> {
        // A note and a tag are the user's own text, and may hold a secret pasted into them.
        let mut redacted = marks.to_vec();
        if self.records {
            for marks in redacted.iter_mut().map(|m| &mut m.marks) {
                let texts = marks.tags.iter_mut().chain(marks.note.as_mut());
                texts.for_each(|text| self.redactor.redact_text_in_place(text));
            }
        }
        self.inner
            .deliver_marks(&redacted)
            .map_err(|f| self.message(f))
    }

    fn idle(&mut self, shipped: i64) -> std::result::Result<bool, Failure> {
        self.inner.idle(shipped).map_err(|f| self.message(f))
    }

    fn take_state(&mut self) -> Vec<(String, String)> {
        self.inner.take_state()
    }

    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
}

/// A running sink thread.
pub(crate) struct Shipping {
    /// The sink it runs.
    pub spec: SinkSpec,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Result<()>>,
}

impl Shipping {
    /// Asks the sink to stop after the batch in hand (a retry pause ends at once).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// True once the thread has ended, waiting for it until `deadline` at most.
    fn finished_by(&self, deadline: Instant) -> bool {
        while !self.handle.is_finished() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Waits for the thread, logging how it ended.
    fn join_logged(self, what: &str) {
        let name = self.spec.name.clone();
        match self.join() {
            Ok(()) => log::info!("sink {name}: {what}"),
            Err(e) => log::warn!("sink {name}: {what}: {}", error_chain(&e)),
        }
    }

    /// Waits for the thread; its error, if it ended with one.
    pub(crate) fn join(self) -> Result<()> {
        let name = self.spec.name.clone();
        self.handle.join().unwrap_or_else(|_| {
            Err(Error::ShipFailed {
                name,
                message: "its thread panicked".into(),
            })
        })
    }
}

/// How a sink thread runs.
#[derive(Clone)]
pub(crate) struct Wiring {
    /// The archive's path.
    pub db: PathBuf,
    /// Where commits are published.
    pub hub: Arc<Hub>,
    /// Told of each cursor commit (the WAL checkpointer).
    pub committed: CommitSignal,
    /// Turns at writing the archive, records first.
    pub turns: Arc<WriteTurn>,
    /// True for `run --once`: stop at the first failure, with an error, and end once caught
    /// up with a closed hub.
    pub once: bool,
    /// Disconnects when the session index's thread ends.
    pub index_done: Receiver<()>,
}

/// Starts the thread of sink `spec`. It follows the archive until the hub closes and every
/// record is shipped, or [`Shipping::stop`]; in a daemon an archive error is logged and the
/// sink follows again after a pause, while in `run --once` it is the thread's error. Given
/// the stopped sink it replaces (a reload), the thread first waits for that one to end, off
/// the daemon's thread: two threads never ship under one name.
pub(crate) fn spawn(
    spec: SinkSpec,
    wiring: &Wiring,
    stop_all: Option<Arc<AtomicBool>>,
    replaces: Option<Shipping>,
) -> Result<Shipping> {
    let stop = Arc::new(AtomicBool::new(false));
    let ctx = ShipContext {
        wiring: wiring.clone(),
        stop: Arc::clone(&stop),
        stop_all,
    };
    let thread_spec = spec.clone();
    let handle = std::thread::Builder::new()
        .name(format!("sink {}", spec.name))
        .spawn(move || {
            if let Some(before) = replaces {
                before.join_logged("stopped for the new configuration");
            }
            ctx.run(thread_spec)
        })
        .map_err(|source| Error::Thread {
            name: "sink",
            source,
        })?;
    Ok(Shipping { spec, stop, handle })
}

/// How long a stopping daemon waits for its sinks to finish the delivery in hand: under
/// the unit's `TimeoutStopSec=` (15 s). A delivery still going then is abandoned, and shipped
/// again at the next start (its cursor never moved).
const STOP_WAIT: Duration = Duration::from_secs(5);

/// The running sinks of one `run`.
pub(crate) struct Sinks {
    wiring: Wiring,
    stop_all: Option<Arc<AtomicBool>>,
    running: Vec<Shipping>,
    /// Removed by a reload, still finishing the delivery in hand.
    retiring: Vec<Shipping>,
}

impl Sinks {
    /// Starts a thread for each of `specs`; `stop_all` (the daemon's stop flag) stops them all.
    pub(crate) fn start(
        specs: &[SinkSpec],
        wiring: Wiring,
        stop_all: Option<Arc<AtomicBool>>,
    ) -> Result<Sinks> {
        let mut sinks = Sinks {
            wiring,
            stop_all,
            running: Vec::new(),
            retiring: Vec::new(),
        };
        for spec in specs {
            let started = spawn(spec.clone(), &sinks.wiring, sinks.stop_all.clone(), None)?;
            sinks.running.push(started);
        }
        Ok(sinks)
    }

    /// Runs `specs` from now on: a sink no longer configured stops, a changed one stops and
    /// starts again as configured, a new one starts. Every cursor stays (it is the name's).
    /// Nothing here waits for a sink to stop.
    pub(crate) fn reload(&mut self, specs: &[SinkSpec]) -> Result<()> {
        let (keep, stop): (Vec<Shipping>, Vec<Shipping>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|s| specs.contains(&s.spec));
        self.running = keep;
        let mut stopped: Vec<Shipping> = stop;
        stopped.iter().for_each(Shipping::stop);
        for spec in specs {
            if self.running.iter().any(|s| s.spec == *spec) {
                continue;
            }
            let replaces = (stopped.iter().position(|s| s.spec.name == spec.name))
                .map(|i| stopped.swap_remove(i));
            let started = spawn(spec.clone(), &self.wiring, self.stop_all.clone(), replaces)?;
            self.running.push(started);
        }
        for s in &stopped {
            log::info!(
                "sink {}: removed from the configuration; stopping",
                s.spec.name
            );
        }
        self.retiring.extend(stopped);
        let (ended, still): (Vec<Shipping>, Vec<Shipping>) = std::mem::take(&mut self.retiring)
            .into_iter()
            .partition(|s| s.handle.is_finished());
        ended.into_iter().for_each(|s| s.join_logged("stopped"));
        self.retiring = still;
        Ok(())
    }

    /// Waits for every sink to end (caught up with a closed hub, or stopped); the first
    /// error, if any ended with one. A daemon's sinks get [`STOP_WAIT`] to finish the
    /// delivery in hand; `run --once` waits for them to catch up.
    pub(crate) fn finish(self) -> Result<()> {
        let deadline = (!self.wiring.once).then(|| Instant::now() + STOP_WAIT);
        for s in self.retiring {
            s.join_logged("stopped");
        }
        let mut first = Ok(());
        for s in self.running {
            if let Some(deadline) = deadline
                && !s.finished_by(deadline)
            {
                log::warn!(
                    "sink {}: still delivering after {}s; the batch in hand is shipped again at the next start",
                    s.spec.name,
                    STOP_WAIT.as_secs()
                );
                continue;
            }
            match s.join() {
                Err(e) if first.is_ok() => first = Err(e),
                Err(e) => log::error!("{}", error_chain(&e)),
                Ok(()) => {}
            }
        }
        first
    }
}

/// What `sink retry` did.
#[derive(Debug, Default)]
pub(crate) struct RetryReport {
    /// Dead letters delivered, and removed.
    pub shipped: u64,
    /// Dead letters refused again (kept, with the new answer).
    pub refused: u64,
}

/// Ships the dead letters of `spec` again, one record at a time, over the archive at `db`.
/// Stops at the first failure that may pass, with [`Error::ShipFailed`].
pub(crate) fn retry_dead_letters(spec: &SinkSpec, db: &Path) -> Result<RetryReport> {
    if let Target::Mirror { .. } = spec.target {
        return Err(Error::Sink {
            name: spec.name.clone(),
            message: "a mirror refuses nothing, so it has no dead letters to ship".into(),
        });
    }
    let mut archive = Archive::open_existing_to_write(db)?;
    let machine = Machine::of(&archive)?;
    let mut destination = open_destination(spec, &machine, db)?;
    let mut report = RetryReport::default();
    for (id, row) in archive.dead_letters(&spec.name)? {
        match destination.deliver(std::slice::from_ref(&row)) {
            Ok(()) => {
                report.shipped += 1;
                archive.remove_dead_letter(id)?;
            }
            Err(Failure::Refused { message }) => {
                report.refused += 1;
                log::warn!(
                    "sink {}: seq {} refused again: {message}",
                    spec.name,
                    row.seq
                );
                archive.refused_again(id, &message)?;
            }
            Err(Failure::Transient { message, .. }) => {
                return Err(Error::ShipFailed {
                    name: spec.name.clone(),
                    message,
                });
            }
        }
    }
    Ok(report)
}

/// What a sink thread shares with the daemon.
struct ShipContext {
    wiring: Wiring,
    stop: Arc<AtomicBool>,
    /// The daemon's stop flag.
    stop_all: Option<Arc<AtomicBool>>,
}

impl ShipContext {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            || self
                .stop_all
                .as_ref()
                .is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// Ships until done; archive errors in a daemon are retried after a pause.
    fn run(self, spec: SinkSpec) -> Result<()> {
        if !spec.redact && !matches!(spec.target, Target::Mirror { .. }) {
            log::warn!(
                "sink {}: redact = false: records leave this machine as archived, with any secret they hold",
                spec.name
            );
        }
        loop {
            let err = match Shipper::open(&self, &spec) {
                Ok(mut shipper) => match shipper.follow(&self) {
                    Ok(()) => return Ok(()),
                    Err(e) => e,
                },
                Err(e) => e,
            };
            if self.wiring.once || matches!(err, Error::ShipFailed { .. }) {
                return Err(err);
            }
            let name = &spec.name;
            log::error!("sink {name}: {}; following again in 5s", error_chain(&err));
            if !self.pause(Duration::from_secs(5)) {
                return Ok(());
            }
        }
    }

    /// Sleeps `wait`, ending early when the sink stops; false when it did.
    fn pause(&self, wait: Duration) -> bool {
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if self.stopping() {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
        !self.stopping()
    }
}

/// An outage in progress: since when, how many attempts, when to sum it up next.
struct Outage {
    since: Instant,
    attempts: u32,
    next_summary: Instant,
}

/// One sink following the archive.
struct Shipper {
    spec: SinkSpec,
    consumer: String,
    archive: Archive,
    destination: Box<dyn Destination>,
    outage: Option<Outage>,
    /// Failures of the destination's idle work in a row, and when to try it again.
    idle_failed: Option<(u32, Instant)>,
    /// Where it is in the order of mark changes, when it ships marks.
    marks: Option<marks::MarksCursor>,
}

impl Shipper {
    fn open(ctx: &ShipContext, spec: &SinkSpec) -> Result<Shipper> {
        let mut archive = Archive::open(&ctx.wiring.db)?;
        let machine = Machine::of(&archive)?;
        let destination = open_destination(spec, &machine, &ctx.wiring.db)?;
        register(&mut archive, spec)?;
        let marks = match spec.marks {
            true => Some(marks::MarksCursor::load(&archive, &spec.name)?),
            false => None,
        };
        Ok(Shipper {
            marks,
            spec: spec.clone(),
            consumer: sink_consumer(&spec.name),
            archive,
            destination,
            outage: None,
            idle_failed: None,
        })
    }

    /// Follows the archive until the hub closes and every record is shipped, or it stops.
    fn follow(&mut self, ctx: &ShipContext) -> Result<()> {
        let after = self.archive.consumer_seq(&self.consumer)?.unwrap_or(0);
        let hub = Arc::clone(&ctx.wiring.hub);
        let reads = Archive::open(&ctx.wiring.db)?;
        let mut follower = Follower::start_to_end(hub, reads, Start::After(after), LIVE_BACKLOG)?;
        log::info!(
            "sink {}: shipping to {} from seq {after}",
            self.spec.name,
            self.spec.target.display()
        );
        while !ctx.stopping() {
            let mut batch = self.next_batch(&mut follower, ctx)?;
            let taken = batch.len();
            // Other machines' records, pulled into this archive, are theirs to ship.
            batch.retain(|row| !crate::archive::is_pulled(row.source));
            if taken == 0 {
                if follower.ended() {
                    if !self.ship_marks(&follower, ctx)? {
                        return Ok(());
                    }
                    return self.last_idle(&follower, ctx);
                }
                self.idle(&follower, ctx)?;
            } else {
                let mut dead = Vec::new();
                if !batch.is_empty() && !self.settle(&batch, &mut dead, ctx, &follower)? {
                    return Ok(());
                }
                let caught_up = follower.done() >= ctx.wiring.hub.published();
                self.commit(follower.done(), &dead, caught_up, ctx)?;
            }
            if !self.ship_marks(&follower, ctx)? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Ships the marks changed since the last time whose records are shipped (when the sink
    /// ships marks), and commits its place after each delivery. False when the sink stopped
    /// before they were delivered.
    fn ship_marks(&mut self, follower: &Follower, ctx: &ShipContext) -> Result<bool> {
        loop {
            let Some(cursor) = &self.marks else {
                return Ok(true);
            };
            let changed = cursor.next(&self.archive, follower.done(), self.spec.batch_records)?;
            let Some(last) = changed.last().map(|c| c.seq) else {
                return Ok(true);
            };
            // Marks on other machines' sessions, pulled into this archive, stay here.
            let ours: Vec<MarksNow> = changed.into_iter().filter(|c| c.key.machine == 0).collect();
            if !ours.is_empty() && !self.settle_marks(&ours, follower, ctx)? {
                return Ok(false);
            }
            if let Some(cursor) = &mut self.marks {
                cursor.shipped(last);
            }
            let caught_up = follower.done() >= ctx.wiring.hub.published();
            self.commit(follower.done(), &[], caught_up, ctx)?;
        }
    }

    /// Delivers `marks` (retried while the destination fails for a while). When it refuses
    /// them, each session's are sent alone, so that only those it refuses by themselves are
    /// passed over (logged, and sent again when they next change). False when the sink
    /// stopped before the destination had them.
    fn settle_marks(
        &mut self,
        marks: &[MarksNow],
        follower: &Follower,
        ctx: &ShipContext,
    ) -> Result<bool> {
        match self.until_settled(ctx, follower, |d| d.deliver_marks(marks))? {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(_)) if marks.len() > 1 => {
                for one in marks.chunks(1) {
                    if !self.settle_marks(one, follower, ctx)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            // Logged here: the answer may quote a note, and the sink's messages are redacted.
            Some(Err(message)) => {
                log::warn!(
                    "sink {}: the marks of session {} were refused: {message}; they are sent again when they change",
                    self.spec.name,
                    marks[0].key.session
                );
                Ok(true)
            }
        }
    }

    /// Lets the destination do what follows the archive at its own pace, and commits its
    /// state. A failure is left for the next delivery to report, and tried again.
    fn idle(&mut self, follower: &Follower, ctx: &ShipContext) -> Result<()> {
        if self
            .idle_failed
            .as_ref()
            .is_some_and(|(_, next)| Instant::now() < *next)
        {
            return Ok(());
        }
        match self.destination.idle(follower.done()) {
            Ok(changed) => {
                if let Some((failures, _)) = self.idle_failed.take() {
                    log::info!(
                        "sink {}: idle work goes again after {failures} failures",
                        self.spec.name
                    );
                }
                if !changed {
                    return Ok(());
                }
                let caught_up = follower.done() >= ctx.wiring.hub.published();
                self.commit(follower.done(), &[], caught_up, ctx)
            }
            Err(Failure::Transient { message, .. } | Failure::Refused { message }) => {
                let failures = self.idle_failed.as_ref().map_or(0, |(n, _)| *n) + 1;
                if failures == 1 {
                    log::warn!("sink {}: {message}; tried again later", self.spec.name);
                }
                self.idle_failed = Some((failures, Instant::now() + backoff(failures)));
                Ok(())
            }
        }
    }

    /// Everything is shipped and the writer has ended (`run --once`): once the session index
    /// has indexed it all too, the destination's last idle work.
    fn last_idle(&mut self, follower: &Follower, ctx: &ShipContext) -> Result<()> {
        // Disconnects when the index's thread ends.
        let _ = ctx.wiring.index_done.recv();
        match self.destination.idle(follower.done()) {
            Ok(true) => self.commit(follower.done(), &[], true, ctx),
            Ok(false) => Ok(()),
            Err(Failure::Transient { message, .. } | Failure::Refused { message }) => {
                Err(Error::ShipFailed {
                    name: self.spec.name.clone(),
                    message,
                })
            }
        }
    }

    /// The next batch: waits a moment for a first record, then gathers more until the batch
    /// is full or `flush_interval` has passed since the first. Empty when none came.
    fn next_batch(&self, follower: &mut Follower, ctx: &ShipContext) -> Result<Vec<ExportRow>> {
        let Some(first) = follower.next(Duration::from_millis(100))? else {
            return Ok(Vec::new());
        };
        if ctx.stopping() {
            // Not in hand yet: the cursor stays before it, for the next start or sink.
            return Ok(Vec::new());
        }
        let deadline = Instant::now() + self.spec.flush_interval;
        let mut bytes = first.record.len() as u64;
        let mut batch = vec![first];
        while batch.len() < self.spec.batch_records && bytes < self.spec.batch_bytes {
            let wait = deadline.saturating_duration_since(Instant::now());
            // A stopping daemon ships what it has without waiting for more.
            let wait = if ctx.stopping() { Duration::ZERO } else { wait };
            let Some(row) = follower.next(wait)? else {
                break;
            };
            bytes += row.record.len() as u64;
            batch.push(row);
        }
        Ok(batch)
    }

    /// Delivers `batch`, retrying failures that may pass and bisecting refusals down to the
    /// records at fault (into `dead`). False when the sink stopped before it was settled.
    fn settle(
        &mut self,
        batch: &[ExportRow],
        dead: &mut Vec<DeadLetter>,
        ctx: &ShipContext,
        follower: &Follower,
    ) -> Result<bool> {
        match self.until_settled(ctx, follower, |d| d.deliver(batch))? {
            None => Ok(false),
            Some(Ok(())) => Ok(true),
            Some(Err(message)) => self.bisect(batch, message, dead, ctx, follower),
        }
    }

    /// Calls `deliver` until the destination has what it delivers or refuses it for good,
    /// retrying failures that may pass: `Some(Err)` holds the refusal, `None` says the sink
    /// stopped first.
    fn until_settled(
        &mut self,
        ctx: &ShipContext,
        follower: &Follower,
        mut deliver: impl FnMut(&mut dyn Destination) -> std::result::Result<(), Failure>,
    ) -> Result<Option<std::result::Result<(), String>>> {
        loop {
            match deliver(self.destination.as_mut()) {
                Ok(()) => {
                    self.recovered()?;
                    return Ok(Some(Ok(())));
                }
                Err(Failure::Transient {
                    message,
                    retry_after,
                }) => {
                    let delay = self.failed(&message, retry_after, ctx, follower)?;
                    if ctx.wiring.once {
                        return Err(Error::ShipFailed {
                            name: self.spec.name.clone(),
                            message,
                        });
                    }
                    if !ctx.pause(delay) {
                        return Ok(None);
                    }
                }
                Err(Failure::Refused { message }) => return Ok(Some(Err(message))),
            }
        }
    }

    /// A refused batch: halves settled one after the other; a single record is dead-lettered.
    fn bisect(
        &mut self,
        batch: &[ExportRow],
        message: String,
        dead: &mut Vec<DeadLetter>,
        ctx: &ShipContext,
        follower: &Follower,
    ) -> Result<bool> {
        if let [row] = batch {
            log::warn!(
                "sink {}: seq {} (source {} generation {} offset {}, {}) refused: {message}; kept in dead_letters",
                self.spec.name,
                row.seq,
                row.source,
                row.generation,
                row.offset,
                row.path.display()
            );
            dead.push(DeadLetter {
                source: row.source,
                generation: row.generation,
                offset: row.offset,
                seq: row.seq,
                answer: message,
            });
            return Ok(true);
        }
        let (a, b) = batch.split_at(batch.len() / 2);
        Ok(self.settle(a, dead, ctx, follower)? && self.settle(b, dead, ctx, follower)?)
    }

    /// Notes a failure that may pass: logged the first time and summed up while it lasts,
    /// kept for `status`. Returns how long to wait before the next attempt.
    fn failed(
        &mut self,
        message: &str,
        retry_after: Option<Duration>,
        ctx: &ShipContext,
        follower: &Follower,
    ) -> Result<Duration> {
        let now = Instant::now();
        let outage = self.outage.get_or_insert(Outage {
            since: now,
            attempts: 0,
            next_summary: now,
        });
        outage.attempts += 1;
        let delay = retry_delay(outage.attempts, retry_after);
        let name = &self.spec.name;
        let first = outage.attempts == 1;
        if first && ctx.wiring.once {
            log::warn!("sink {name}: {message}");
        } else if first {
            log::warn!(
                "sink {name}: {message}; retrying in {}",
                humantime::format_duration(round(delay))
            );
        } else if now >= outage.next_summary && !ctx.wiring.once {
            let waiting = ctx.wiring.hub.published() - follower.done();
            log::warn!(
                "sink {name}: {} for {}, {waiting} records waiting; retrying every {}: {message}",
                self.destination.kind(),
                humantime::format_duration(round(now - outage.since)),
                humantime::format_duration(round(delay.max(backoff(outage.attempts)))),
            );
        }
        if now >= outage.next_summary {
            outage.next_summary = now + SUMMARY_EVERY;
            self.note_failure(message, first)?;
        }
        Ok(delay)
    }

    /// Keeps the failure for `status` (and, the first time, as an event).
    fn note_failure(&mut self, message: &str, first: bool) -> Result<()> {
        (self.archive).note_sink_failure(&self.spec.name, message, first)
    }

    /// Ends an outage, if there was one: logged, and an event.
    fn recovered(&mut self) -> Result<()> {
        let Some(outage) = self.outage.take() else {
            return Ok(());
        };
        let name = self.spec.name.clone();
        let detail = format!(
            "delivering again after {} and {} failed attempts",
            humantime::format_duration(round(outage.since.elapsed())),
            outage.attempts
        );
        log::info!("sink {name}: {detail}");
        self.archive.sink_event(&name, "sink-recovered", &detail)
    }

    /// Moves the cursor to `seq`, with the dead letters and the destination's state, in one
    /// transaction.
    fn commit(
        &mut self,
        seq: i64,
        dead: &[DeadLetter],
        caught_up: bool,
        ctx: &ShipContext,
    ) -> Result<()> {
        let mut state = self.destination.take_state();
        state.extend(self.marks.as_mut().and_then(marks::MarksCursor::take_state));
        let shipped = Shipped {
            name: &self.spec.name,
            seq,
            dead,
            state: &state,
            caught_up,
        };
        let _turn = ctx.wiring.turns.for_consumer();
        self.archive.record_shipped(&shipped)?;
        ctx.wiring.committed.committed(1);
        Ok(())
    }
}

/// Makes or updates the sink's row. A sink whose destination changed under the same name
/// goes on from its cursor, so the new destination does not get what came before: said, and
/// recorded as an event.
fn register(archive: &mut Archive, spec: &SinkSpec) -> Result<()> {
    let (kind, target) = (spec.target.kind(), spec.target.display());
    let before = archive.register_sink(&spec.name, kind, &target)?;
    let Some(before) = before.filter(|b| *b != target) else {
        return Ok(());
    };
    let detail = match spec.target {
        Target::Mirror { .. } => format!(
            "its directory changed from {before} to {target}; it goes on from its cursor, and writes every file it shipped before again from the archive"
        ),
        _ => format!(
            "its destination changed from {before} to {target}; it goes on from its cursor, so records shipped before went to {before} only (a sink of another name ships everything)"
        ),
    };
    log::warn!("sink {}: {detail}", spec.name);
    archive.sink_event(&spec.name, "sink-retargeted", &detail)
}

/// The pause after `attempts` failures: what the destination asked for (`Retry-After`, up to
/// [`MAX_DELAY`]), else [`backoff`].
fn retry_delay(attempts: u32, retry_after: Option<Duration>) -> Duration {
    retry_after.map_or_else(|| backoff(attempts), |d| d.min(MAX_DELAY))
}

/// The pause before attempt `attempts + 1`: doubling from [`FIRST_DELAY`] up to
/// [`MAX_DELAY`], then between half and all of that at random, so that sinks (and machines)
/// that failed together do not retry together.
fn backoff(attempts: u32) -> Duration {
    let full = FIRST_DELAY
        .saturating_mul(1 << attempts.saturating_sub(1).min(16))
        .min(MAX_DELAY);
    full / 2 + full.mul_f64(fastrand::f64() / 2.0)
}

/// A duration for log lines: to the millisecond under a second, else to the second.
fn round(d: Duration) -> Duration {
    match d.as_secs() {
        0 => Duration::from_millis(d.as_millis() as u64),
        s => Duration::from_secs(s + u64::from(d.subsec_millis() >= 500)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_minute_with_jitter() {
        for attempts in 1..40 {
            let full = FIRST_DELAY
                .saturating_mul(1 << (attempts - 1).min(16))
                .min(MAX_DELAY);
            let d = backoff(attempts);
            assert!(d >= full / 2 && d <= full, "{attempts}: {d:?} of {full:?}");
        }
        assert_eq!(backoff(30).max(MAX_DELAY), MAX_DELAY);
    }

    #[test]
    fn a_retry_after_is_honoured_up_to_a_minute() {
        let asked = Some(Duration::from_secs(7));
        assert_eq!(retry_delay(5, asked), Duration::from_secs(7));
        assert_eq!(retry_delay(1, Some(Duration::ZERO)), Duration::ZERO);
        assert_eq!(retry_delay(1, Some(Duration::from_secs(3600))), MAX_DELAY);
    }
}
