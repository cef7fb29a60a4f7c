//! The live daemon: threads and channels.
//!
//! ```text
//! inotify (one per watcher) ──poll──▶ engine ──Commit──▶ archive writer ──▶ hub ──▶ tap
//! watcher threads, signals ──Doorbell──▶ (reads)  bounded 4   (SQLite)            bounded, lossy
//! ```
//!
//! The engine thread (the caller's) reads: it waits in `poll` for its watchers' inotify
//! events (which it reads itself), its doorbell (directory changes, a signal, the writer's
//! end), or the next periodic job (the stat-only rescan, polling, the watchdog), and turns
//! dirty paths into verified reads and commits. The archive writer
//! commits in order and only then hands records to the tap. When the writer falls behind, the
//! engine blocks on the commit channel (memory stays bounded); when the tap's reader falls
//! behind, the tap is dropped (archiving never waits for stdout).

pub(crate) mod readiness;
pub(crate) mod service;

use crate::archive::follow::Hub;
use crate::archive::wal_checkpoint::WalCheckpointer;
use crate::archive::write_turn::WriteTurn;
use crate::archive::writer::{ArchiveWriter, StallReport};
use crate::archive::{Archive, Commit, Op, StateKey};
use crate::capture::harness::{Reach, Root};
use crate::capture::watch::{self, PolledRoot, Wakeups, WatcherThread};
use crate::config::Settings;
use crate::consumers::sessions;
use crate::consumers::ship::{self, Sinks};
use crate::consumers::socket::Server;
use crate::consumers::tap::Tap;
use crate::daemon::readiness::ServiceManager;
use crate::engine::progress::{Progress, ProgressShow};
use crate::engine::{Engine, EngineOptions, PassReport, Totals};
use crate::error::{Error, Result, SystemContext, error_chain};
use crate::platform::doorbell::Doorbell;
use crate::platform::logging;
use crossbeam_channel::{Receiver, TryRecvError, bounded};
use indicatif::HumanBytes;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Reads the configuration again (on SIGHUP), with the command line's flags still on top.
pub(crate) type Reload = Box<dyn FnMut() -> Result<Settings> + Send>;

/// The threads every `run` starts, wired in this one place: the engine (on the caller's
/// thread) commits through the archive writer's thread, and the WAL checkpointer copies it
/// into the database beside them.
struct Threads {
    writer: JoinHandle<Result<()>>,
    /// The sinks, durable consumers of the archive.
    sinks: Sinks,
    /// The session index, a durable consumer of the archive.
    index: JoinHandle<()>,
    /// Disconnects when the writer thread ends.
    writer_gone: Receiver<()>,
    wal_checkpointer: WalCheckpointer,
    /// The daemon's socket for subscribers (none in `run --once`).
    socket: Option<Server>,
    /// Where commits are published: its last seq is the archive's.
    hub: Arc<Hub>,
    /// Pulling other machines' records from a PostgreSQL sink with `pull = true`.
    pull: Option<ship::pull::Pulling>,
}

/// What the daemon adds to the writer: retry a commit the archive refuses for a reason that
/// passes (until the flag is set), saying so through the report; and ring the daemon's
/// doorbell if the writer ends.
type Retry = (Arc<AtomicBool>, StallReport, Arc<Doorbell>);

impl Threads {
    /// Opens the archive at `db` three times (reads, writes, checkpoints), starts the writer
    /// and WAL checkpointer threads, and returns the engine that commits through them. Records
    /// committed go to `tap` too.
    fn start(
        db: &Path,
        tap: Option<Tap>,
        settings: &Settings,
        retry: Option<Retry>,
    ) -> Result<(Engine, Threads)> {
        let limits = settings.limits;
        let reads = Archive::open(db)?;
        let mut write = Archive::open(db)?;
        write.set_compress(settings.compress);
        // Checkpoints run on their own connection and thread, not inside commits; only a
        // commit that takes the WAL past its limit (copying fell behind) checkpoints it.
        write.bound_wal()?;
        let turns = Arc::new(WriteTurn::default());
        let (wal_checkpointer, committed) =
            WalCheckpointer::start(Archive::open(db)?, Arc::clone(&turns))?;
        let hub = Hub::new(reads.last_seq()?);
        if let Some(tap) = tap {
            // The tap starts now: it prints what commits from here on.
            hub.subscribe(Box::new(tap));
        }
        let stop = retry.as_ref().map(|(stop, _, _)| Arc::clone(stop));
        // Nothing is ever sent: the sender goes with the index's thread.
        let (index_exit, index_done) = bounded::<()>(0);
        let index = sessions::spawn(db.to_owned(), Arc::clone(&hub), stop.clone(), index_exit)
            .starting("session index")?;
        let wiring = ship::Wiring {
            db: db.to_owned(),
            hub: Arc::clone(&hub),
            committed: committed.clone(),
            turns: Arc::clone(&turns),
            once: retry.is_none(),
            index_done,
        };
        let sinks = Sinks::start(&settings.sinks, wiring, stop.clone())?;
        let socket = match retry.is_some() {
            true => listen(settings, db, &hub),
            false => None,
        };
        let mut writer = ArchiveWriter::new(write, Some(Arc::clone(&hub)))
            .after_commit(committed)
            .taking_turns(turns);
        if let Some((stop, stalled, bell)) = retry {
            writer = writer.retrying(stop, stalled).ringing_at_end(bell);
        }
        let writer = writer.spawn().starting("archive writer")?;
        let pull = match settings.sinks.iter().find(|s| s.pull.is_some()) {
            Some(spec) => Some(ship::pull::spawn(
                spec,
                db,
                writer.shared(),
                stop.is_none(),
                stop.clone(),
            )?),
            None => None,
        };
        let engine = Engine::new(reads, Box::new(writer.committer), EngineOptions { limits })?;
        let threads = Threads {
            writer: writer.handle,
            sinks,
            index,
            writer_gone: writer.gone,
            wal_checkpointer,
            socket,
            pull,
            hub,
        };
        Ok((engine, threads))
    }

    /// Drops `engine`, which closes its commit channel, waits for the writer to commit what
    /// it holds and for the index and the sinks to take it (or stop), then stops the
    /// WAL checkpointer. `Err` is the writer's, else a sink's.
    fn finish(self, engine: Engine) -> Result<()> {
        if let Some(socket) = self.socket {
            socket.stop();
        }
        // The puller commits through the writer: it ends first (a daemon's once stopping,
        // `run --once`'s once it has pulled everything), and only then can the writer end.
        let pulled = match self.pull {
            Some(pull) => pull.join(),
            None => Ok(()),
        };
        drop(engine);
        let written = self.writer.join().unwrap_or(Err(Error::WriterStopped));
        if written.is_ok() {
            log::info!("{RECORDS_COMMITTED}; waiting for the session index and the sinks");
        }
        let shipped = self.sinks.finish();
        if self.index.join().is_err() {
            log::error!(
                "session index: its thread panicked; `transcript-sync reindex` rebuilds it"
            );
        }
        self.wal_checkpointer.stop();
        written.and(shipped).and(pulled)
    }
}

/// Said once the writer has committed every record, before the session index and the sinks
/// are waited for.
pub const RECORDS_COMMITTED: &str = "every record committed";

/// The daemon's socket for subscribers. Not being able to listen stops nothing but the
/// subscribers: archiving goes on, and the reason is logged with its fix.
fn listen(settings: &Settings, db: &Path, hub: &Arc<Hub>) -> Option<Server> {
    let started = Server::start(
        settings.socket.clone(),
        db,
        Arc::clone(hub),
        settings.subscribers,
    );
    match started {
        Ok(server) => Some(server),
        Err(e) => {
            log::warn!(
                "subscribers: {}; the daemon runs without its socket, so `tail -f` and programs cannot attach. As a systemd service installed by an earlier release, run `transcript-sync service install` again (the unit now lets it make the socket's directory)",
                error_chain(&e)
            );
            None
        }
    }
}

/// `run --once`: one pass over the configured roots, each file read up to the size it has
/// when it is read, then every commit made. Returns the pass's report.
pub(crate) fn run_once(
    db: &Path,
    tap: Option<Tap>,
    settings: &Settings,
    show: ProgressShow,
) -> Result<PassReport> {
    let (mut engine, threads) = Threads::start(db, tap, settings, None)?;
    let mut display = show.start();
    engine.observe(Box::new(move |p| display.update(p)));
    let pass = engine.run_pass(&settings.roots);
    let written = threads.finish(engine);
    // The writer's own error says why; the engine's is then only "the writer stopped".
    written.and(pass)
}

/// Runs the daemon on the archive at `db` until SIGINT or SIGTERM: watches, backfills, then
/// archives each change as it happens. `Ok` after a clean stop; `Err` when the archive fails.
pub(crate) fn run_live(
    db: &Path,
    tap: Option<Tap>,
    settings: Settings,
    show: ProgressShow,
    reload: Reload,
) -> Result<()> {
    let manager = Arc::new(ServiceManager::from_env());
    let stop = Arc::new(AtomicBool::new(false));
    let stalled: StallReport = {
        let manager = Arc::clone(&manager);
        Box::new(move |why: &str| {
            manager.watchdog();
            manager.status(why, false);
        })
    };
    let bell = Arc::new(Doorbell::new().map_err(|source| Error::Wait { source })?);
    let retry = (Arc::clone(&stop), stalled, Arc::clone(&bell));
    // Before any thread starts: a SIGTERM while the archive opens or the index begins to
    // catch up is a clean stop, not the default action's kill.
    let signals = SignalListener::start(Arc::clone(&stop), Arc::clone(&bell))?;
    let (engine, threads) = match Threads::start(db, tap, &settings, Some(retry)) {
        Ok(started) => started,
        Err(e) => {
            signals.handle.close();
            return Err(e);
        }
    };
    let mut engine = engine.with_stop(stop);
    engine.settle_snapshots(SNAPSHOT_SETTLE);
    let stop = engine.stop_flag();
    let wakeups = Wakeups::new(Arc::clone(&bell));
    let writer_gone = threads.writer_gone.clone();
    let mut daemon = Daemon {
        engine,
        threads,
        rescan: Every::new(settings.rescan_interval),
        settings,
        wakeups,
        stop,
        manager,
        watchers: Vec::new(),
        polled: BTreeSet::new(),
        poll: None,
        index_pending: None,
        bell,
        reload,
        show,
    };
    let result = daemon.run(&signals, &writer_gone);
    // However the loop ended (a signal, an error), the sinks and the index stop too: a sink
    // retrying a down destination would otherwise hold the exit forever.
    daemon.stop.store(true, Ordering::Relaxed);
    daemon.manager.stopping();
    daemon.stop_watchers();
    let written = daemon.threads.finish(daemon.engine);
    // Only now: until here a second SIGINT must still reach the signal thread.
    signals.handle.close();
    match (result, written) {
        (_, Err(e)) => Err(e),
        (Ok(()), Ok(())) => {
            log::info!("stopped; every record read was committed");
            Ok(())
        }
        (result, Ok(())) => result,
    }
}

struct Daemon {
    engine: Engine,
    /// The threads beside the engine's; the sinks change on reload.
    threads: Threads,
    settings: Settings,
    wakeups: Arc<Wakeups>,
    stop: Arc<AtomicBool>,
    manager: Arc<ServiceManager>,
    watchers: Vec<WatcherThread>,
    /// Roots the watchers cannot cover, polled every `poll_interval`.
    polled: BTreeSet<PathBuf>,
    rescan: Every,
    /// Set once a root is polled.
    poll: Option<Every>,
    /// After `caught up`, while the session index has not reached its seq: that seq, and when
    /// to look again.
    index_pending: Option<(i64, Every)>,
    /// What wakes the loop: watcher threads, the signal thread, the writer's end.
    bell: Arc<Doorbell>,
    reload: Reload,
    show: ProgressShow,
}

impl Daemon {
    fn run(&mut self, signals: &SignalListener, writer_gone: &Receiver<()>) -> Result<()> {
        self.start_watchers();
        let roots = self.settings.roots.len();
        self.manager
            .ready(&format!("watching {roots} roots; backfill starting"));
        self.set_caught_up(String::new())?;
        self.backfill()?;
        let mut watchdog = self.manager.ping_every().map(Every::new);
        while !self.stop.load(Ordering::Relaxed) {
            let status_due = self.manager.held_back_status_due();
            let index = self.index_pending.as_ref().map(|(_, every)| every);
            let timers = [
                Some(&self.rescan),
                self.poll.as_ref(),
                watchdog.as_ref(),
                index,
            ];
            let next = timers.into_iter().flatten().map(Every::left);
            let settled =
                (self.engine.next_settled()).map(|at| at.saturating_duration_since(Instant::now()));
            self.wait(next.chain(status_due).chain(settled).min())?;
            if signals.stop.try_recv().is_ok() {
                break;
            }
            if let Err(TryRecvError::Disconnected) = writer_gone.try_recv() {
                return Err(Error::WriterStopped);
            }
            if signals.reload.try_recv().is_ok() {
                self.on_reload()?;
            }
            self.on_wake()?;
            self.on_settled()?;
            if self.rescan.due() {
                self.on_rescan()?;
            }
            if self.poll.as_mut().is_some_and(Every::due) {
                self.on_poll()?;
            }
            if watchdog.as_mut().is_some_and(Every::due) {
                self.manager.watchdog();
            }
            if (self.index_pending.as_mut()).is_some_and(|(_, every)| every.due()) {
                self.on_index_check();
            }
            if status_due.is_some_and(|d| d.is_zero()) {
                self.manager.send_held_back_status();
            }
        }
        Ok(())
    }

    /// Waits for the doorbell, a watcher's events, or `timeout`; reads the events of each
    /// watcher that has some (on this thread: an append wakes no other).
    fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        let (read, fds): (Vec<_>, Vec<_>) = (self.watchers.iter())
            .filter_map(|w| Some((w, w.events_fd()?)))
            .unzip();
        let ready = (self.bell.wait(&fds, timeout)).map_err(|source| Error::Wait { source })?;
        for (watcher, _) in read.into_iter().zip(ready).filter(|(_, r)| *r) {
            watcher.read_events();
        }
        Ok(())
    }

    /// The initial scan and backfill; appends during it are marked dirty and read after it.
    fn backfill(&mut self) -> Result<()> {
        self.take_dirty();
        let mut display = self.show.start();
        let manager = Arc::clone(&self.manager);
        self.engine.observe(Box::new(move |p| {
            display.update(p);
            manager.watchdog();
            manager.status(&backfill_status(p), false);
        }));
        let report = self.engine.run_pass(&self.settings.roots)?;
        let manager = Arc::clone(&self.manager);
        self.engine.observe(Box::new(move |_| manager.watchdog()));
        if self.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        for (path, bytes) in &report.held_back {
            log::info!("held back path={path:?} bytes={bytes} (an incomplete last line)");
        }
        log::info!("backfill complete {report}");
        let Totals {
            sources, records, ..
        } = self.engine.totals();
        let figures = serde_json::json!({
            "sources": sources,
            "records": records,
            "pid": std::process::id(),
            "at_ms": crate::platform::time::now_ms(),
        });
        self.set_caught_up(figures.to_string())?;
        // Said only once everything it counts, and the figures for `status`, are committed.
        let last = self.threads.hub.published();
        match self.index_behind(last) {
            Ok(0) => log::info!("caught up sources={sources} records={records}; session index too"),
            Ok(behind) => {
                log::info!(
                    "caught up sources={sources} records={records}; the session index is {behind} \
                     records behind (sessions, show, search and restore wait for it)"
                );
                self.index_pending = Some((last, Every::new(INDEX_CHECK)));
            }
            Err(e) => {
                log::info!("caught up sources={sources} records={records}");
                log::warn!(
                    "cannot tell how far the session index is: {}",
                    error_chain(&e)
                );
            }
        }
        self.report_status(true);
        Ok(())
    }

    fn set_caught_up(&mut self, value: String) -> Result<()> {
        let mut c = Commit::default();
        c.push(Op::SetState {
            key: StateKey::CaughtUp,
            value,
        });
        self.engine.submit(c)?;
        self.engine.flush()
    }

    /// How many records up to seq `last` the session index has still to index.
    fn index_behind(&self, last: i64) -> Result<i64> {
        let done = sessions::store::done(&self.settings.archive)?;
        Ok((last - done).max(0))
    }

    /// Says once the session index has indexed the backfill that `caught up` counted. The
    /// index's file is the index's: a failure to read it is its to report, and is looked at
    /// again at the next check.
    fn on_index_check(&mut self) {
        let Some((last, _)) = self.index_pending else {
            return;
        };
        match self.index_behind(last) {
            Ok(0) => {
                log::info!("session index caught up at seq {last}");
                self.index_pending = None;
            }
            Ok(_) => {}
            Err(e) => log::debug!(
                "cannot tell how far the session index is: {}",
                error_chain(&e)
            ),
        }
    }

    /// Takes what the watchers marked, starting to poll the roots they cannot cover.
    fn take_dirty(&mut self) -> watch::Dirty {
        let mut dirty = self.wakeups.take();
        for p in std::mem::take(&mut dirty.polled) {
            self.start_polling(p);
        }
        dirty
    }

    /// Reads what the watchers marked. Events that arrive meanwhile coalesce into the next
    /// wake-up.
    fn on_wake(&mut self) -> Result<()> {
        let dirty = self.take_dirty();
        let report = if dirty.rescan {
            self.engine.run_pass(&self.settings.roots)?
        } else if dirty.files.is_empty() {
            return Ok(());
        } else {
            let files = dirty.files.into_iter().collect();
            self.engine.sync_paths(&self.settings.roots, files)?
        };
        log::debug!("sync complete {report}");
        self.report_status(false);
        Ok(())
    }

    /// Looks again at the snapshot files that were waiting to settle and are due.
    fn on_settled(&mut self) -> Result<()> {
        let due = self.engine.take_settled();
        if !due.is_empty() {
            let report = self.engine.sync_paths(&self.settings.roots, due)?;
            log::debug!("settled snapshots read {report}");
            self.report_status(false);
        }
        Ok(())
    }

    /// The periodic stat-only rescan: finds what events could not show.
    fn on_rescan(&mut self) -> Result<()> {
        let report = self.engine.run_pass(&self.settings.roots)?;
        if changed(&report) {
            log::info!("rescan found changes {report}");
        }
        Ok(())
    }

    /// A stat-only pass over the roots that cannot be watched.
    fn on_poll(&mut self) -> Result<()> {
        let roots: Vec<Root> = (self.settings.roots.iter())
            .filter(|r| self.polled.contains(&r.path))
            .cloned()
            .collect();
        let report = self.engine.run_pass(&roots)?;
        if changed(&report) {
            log::debug!("poll found changes {report}");
            self.report_status(false);
        }
        Ok(())
    }

    fn start_polling(&mut self, p: PolledRoot) {
        if !self.polled.insert(p.root.clone()) {
            return;
        }
        let every = self.settings.poll_interval;
        log::warn!(
            "cannot watch root path={:?}: {}; polling it every {} (stat only) instead; fix: {}",
            p.root,
            p.reason,
            humantime::format_duration(every),
            p.fix
        );
        self.poll = Some(Every::new(every));
    }

    /// Sends the live status line, unless no service manager listens: it sums over every
    /// source, and is asked for after every wake-up.
    fn report_status(&self, now: bool) {
        if self.manager.listening() {
            self.manager.status(&self.live_status(), now);
        }
    }

    fn live_status(&self) -> String {
        let Totals {
            sources,
            records,
            lag,
        } = self.engine.totals();
        let roots = self.settings.roots.len();
        let polled = match self.polled.len() {
            0 => String::new(),
            n => format!(" ({n} polled)"),
        };
        let lag = HumanBytes(lag);
        format!(
            "watching {roots} roots{polled}: {sources} sources, {records} records archived; lag \
             {lag}"
        )
    }

    /// SIGHUP: reads the configuration again and applies it; a bad file changes nothing.
    fn on_reload(&mut self) -> Result<()> {
        self.manager.reloading();
        let file = self.settings.source.path.clone();
        match (self.reload)() {
            Err(e) => {
                log::warn!("reload refused, still running the previous configuration: {e}");
                let status = format!("reload refused ({e}); {}", self.live_status());
                self.manager.reloaded(&status);
                Ok(())
            }
            Ok(new) => {
                log::info!("reloading configuration path={file:?}");
                self.apply(new)?;
                self.manager.reloaded(&self.live_status());
                Ok(())
            }
        }
    }

    /// Applies reloaded settings: new roots are watched and scanned (from their cursors, so
    /// nothing archived is read again), removed ones are no longer watched.
    fn apply(&mut self, mut new: Settings) -> Result<()> {
        if new.archive != self.settings.archive {
            log::warn!(
                "the archive path changed to {:?}; that takes effect at the next start, this \
                 daemon keeps {:?}",
                new.archive,
                self.settings.archive
            );
            new.archive = self.settings.archive.clone();
        }
        if let Err(why) = logging::set_level(new.log_level) {
            log::debug!("log_level not applied: {why}");
        }
        self.engine.set_limits(new.limits);
        if new.sinks != self.settings.sinks {
            self.threads.sinks.reload(&new.sinks)?;
        }
        let pulling = |s: &Settings| s.sinks.iter().find(|k| k.pull.is_some()).cloned();
        if pulling(&new) != pulling(&self.settings) {
            log::warn!(
                "the pulling sink changed in the configuration; pulling goes on as it started until the daemon is restarted"
            );
        }
        if new.rescan_interval != self.settings.rescan_interval {
            self.rescan = Every::new(new.rescan_interval);
        }
        let (added, removed) = root_changes(&self.settings.roots, &new.roots);
        let roots_changed = !added.is_empty() || !removed.is_empty();
        self.settings = new;
        if roots_changed {
            self.stop_watchers();
            self.polled.clear();
            self.poll = None;
            self.start_watchers();
        } else if !self.polled.is_empty() {
            self.poll = Some(Every::new(self.settings.poll_interval));
        }
        log::info!(
            "reloaded roots={} added={added:?} removed={removed:?}",
            self.settings.roots.len()
        );
        self.take_dirty();
        let report = self.engine.run_pass(&self.settings.roots)?;
        log::info!("reload pass complete {report}");
        Ok(())
    }

    /// One watcher thread per harness, over that harness's roots; each returns once its
    /// watches are in place. A watcher that cannot start has its roots polled.
    fn start_watchers(&mut self) {
        let mut by_harness: BTreeMap<&str, Vec<(PathBuf, Arc<Reach>)>> = BTreeMap::new();
        for r in &self.settings.roots {
            by_harness
                .entry(&r.harness)
                .or_default()
                .push((r.path.clone(), Arc::clone(&r.reach)));
        }
        let mut failed = Vec::new();
        for (name, roots) in by_harness {
            match watch::spawn(name, roots.clone(), Arc::clone(&self.wakeups)) {
                Ok(t) => self.watchers.push(t),
                Err(e) => failed.extend(roots.into_iter().map(|(root, _)| PolledRoot {
                    root,
                    reason: format!("the thread of watcher {name} cannot start: {e}"),
                    fix: "check the process and thread limits (`ulimit -u`)",
                })),
            }
        }
        for p in failed {
            self.start_polling(p);
        }
    }

    fn stop_watchers(&mut self) {
        for w in self.watchers.drain(..) {
            w.stop();
        }
    }
}

/// How often the daemon looks whether the session index has caught up with the backfill.
/// How long a snapshot file (one its agent rewrites whole) must go unmodified before it is
/// captured: an agent that rewrites it at every token is captured once it pauses.
const SNAPSHOT_SETTLE: Duration = Duration::from_millis(500);

const INDEX_CHECK: Duration = Duration::from_millis(250);

/// A periodic job's next time.
struct Every {
    next: Instant,
    every: Duration,
}

impl Every {
    /// First due one period from now.
    fn new(every: Duration) -> Every {
        Every {
            next: Instant::now() + every,
            every,
        }
    }

    /// How long until it is due (zero once it is).
    fn left(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    /// True once it is due, and then not again until a period later.
    fn due(&mut self) -> bool {
        let now = Instant::now();
        if now < self.next {
            return false;
        }
        self.next = now + self.every;
        true
    }
}

fn changed(report: &PassReport) -> bool {
    report.records + report.rejects + report.new_sources + report.gone > 0
}

fn backfill_status(p: &Progress) -> String {
    format!(
        "backfill: {}/{} files, {} records; lag {}",
        p.files_done,
        p.files_total,
        p.records,
        HumanBytes(p.bytes_left())
    )
}

/// Roots in `new` and not in `old`, and the reverse, by path, harness, glob and start policy.
fn root_changes(old: &[Root], new: &[Root]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let key = |r: &Root| {
        (
            r.path.clone(),
            r.harness.clone(),
            r.glob.glob().to_string(),
            r.start_at == crate::domain::StartAt::End,
        )
    };
    let old_keys: BTreeSet<_> = old.iter().map(key).collect();
    let new_keys: BTreeSet<_> = new.iter().map(key).collect();
    let added = new_keys
        .difference(&old_keys)
        .map(|k| k.0.clone())
        .collect();
    let removed = old_keys
        .difference(&new_keys)
        .map(|k| k.0.clone())
        .collect();
    (added, removed)
}

/// The signal thread's channels.
struct SignalListener {
    handle: signal_hook::iterator::Handle,
    /// SIGINT or SIGTERM arrived.
    stop: Receiver<()>,
    /// SIGHUP arrived.
    reload: Receiver<()>,
}

impl SignalListener {
    /// SIGINT and SIGTERM set `stop` (which ends a pass after the batch in hand) and wake the
    /// loop; a second SIGINT exits at once. SIGHUP asks for a reload.
    fn start(stop: Arc<AtomicBool>, bell: Arc<Doorbell>) -> Result<SignalListener> {
        let mut signals =
            Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(|source| Error::Signals { source })?;
        let handle = signals.handle();
        // One pending token each is enough: a stop is a stop, and reloads coalesce.
        let (stop_tx, stop_rx) = bounded(1);
        let (reload_tx, reload_rx) = bounded(1);
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    if sig == SIGHUP {
                        let _ = reload_tx.try_send(());
                        bell.ring();
                        continue;
                    }
                    if stop.swap(true, Ordering::Relaxed) && sig == SIGINT {
                        exit_now();
                    }
                    log::info!("stopping on signal {sig}: committing the batch in hand");
                    let _ = stop_tx.try_send(());
                    bell.ring();
                }
            })
            .starting("signal")?;
        Ok(SignalListener {
            handle,
            stop: stop_rx,
            reload: reload_rx,
        })
    }
}

/// A second SIGINT: the person wants out now. Every commit is one SQLite transaction, so the
/// archive holds whole batches with their cursors; the batch in hand is read again next time.
fn exit_now() -> ! {
    log::warn!("second SIGINT: exiting now without waiting for the batch in hand");
    std::process::exit(130);
}
