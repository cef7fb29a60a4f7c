//! The live daemon: threads and channels.
//!
//! ```text
//! notify (one per watcher) ──marks──▶ Wakeups ──wake──▶ engine ──Commit──▶ archive writer ──▶ tap
//!                                      (dirty set)       (reads)  bounded 4   (SQLite)   bounded, lossy
//! ```
//!
//! The engine thread (the caller's) reads: it waits for a wake-up, a periodic stat-only rescan
//! or a signal, and turns dirty paths into verified reads and commits. The archive writer
//! commits in order and only then hands records to the tap. When the writer falls behind, the
//! engine blocks on the commit channel (memory stays bounded); when the tap's reader falls
//! behind, the tap is dropped (archiving never waits for stdout).

use crate::archive::{Archive, Commit};
use crate::engine::{Engine, EngineOptions};
use crate::error::{Error, IoContext, Result};
use crate::harness::Root;
use crate::tap::Tap;
use crate::watch::{self, Wakeups, WatcherThread};
use crate::writer::ArchiveWriter;
use crossbeam_channel::{Receiver, bounded, select, tick};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The key under which the daemon keeps its caught-up figures for `status`.
pub const CAUGHT_UP: &str = "caught_up";

/// Settings of the live loop.
#[derive(Clone, Copy, Debug)]
pub struct LiveOptions {
    /// How often every root is rescanned (stat only) to catch what events cannot show.
    pub rescan_interval: Duration,
}

/// How often the checkpointer copies the WAL into the database.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// Runs the daemon on the archive at `db` until SIGINT or SIGTERM: watches, backfills, then
/// archives each change as it happens. `Ok` after a clean stop; `Err` when the archive fails.
pub fn run_live(
    db: &Path,
    tap: Option<Tap>,
    roots: Vec<Root>,
    options: EngineOptions,
    live: LiveOptions,
) -> Result<()> {
    let reads = Archive::open(db)?;
    let write = Archive::open(db)?;
    // Checkpoints run on their own connection and thread, never inside a commit.
    write.disable_autocheckpoint()?;
    let checkpointer = Checkpointer::start(Archive::open(db)?)?;
    let writer = ArchiveWriter::new(write, tap)
        .spawn()
        .at_path("<archive writer thread>")?;
    let engine = Engine::new(reads, Box::new(writer.committer), options)?;
    let stop = engine.stop_flag();
    let (signals, signal_rx) = listen_for_stop(Arc::clone(&stop))?;
    let (wakeups, wake_rx) = Wakeups::new();
    let watchers = start_watchers(&roots, &wakeups);
    let mut daemon = Daemon {
        engine,
        roots,
        wakeups,
        stop,
    };
    let result = daemon.run(&wake_rx, &signal_rx, &writer.gone, live);
    for w in watchers {
        w.stop();
    }
    signals.close();
    // Dropping the engine drops the committer: the writer commits what it holds, then ends.
    drop(daemon);
    let written = writer.handle.join().unwrap_or(Err(Error::WriterStopped));
    checkpointer.stop();
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
    roots: Vec<Root>,
    wakeups: Arc<Wakeups>,
    stop: Arc<AtomicBool>,
}

impl Daemon {
    fn run(
        &mut self,
        wake: &Receiver<()>,
        signal: &Receiver<()>,
        writer_gone: &Receiver<()>,
        live: LiveOptions,
    ) -> Result<()> {
        self.set_caught_up(String::new())?;
        self.backfill()?;
        let rescan = tick(live.rescan_interval);
        while !self.stop.load(Ordering::Relaxed) {
            select! {
                recv(wake) -> _ => self.on_wake()?,
                recv(rescan) -> _ => self.on_rescan()?,
                recv(signal) -> _ => break,
                recv(writer_gone) -> _ => return Err(Error::WriterStopped),
            }
        }
        Ok(())
    }

    /// The initial scan and backfill; appends during it are marked dirty and read after it.
    fn backfill(&mut self) -> Result<()> {
        self.wakeups.take();
        let report = self.engine.run_pass(&self.roots)?;
        if self.stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        for (path, bytes) in &report.held_back {
            log::info!("held back path={path:?} bytes={bytes} (an incomplete last line)");
        }
        log::info!("backfill complete {report}");
        let (sources, records) = self.engine.totals();
        let figures = serde_json::json!({
            "sources": sources,
            "records": records,
            "pid": std::process::id(),
            "at_ms": crate::archive::now_ms(),
        });
        self.set_caught_up(figures.to_string())?;
        // Said only once everything it counts, and the figures for `status`, are committed.
        log::info!("caught up sources={sources} records={records}");
        Ok(())
    }

    fn set_caught_up(&mut self, value: String) -> Result<()> {
        let mut c = Commit::default();
        c.set_state(CAUGHT_UP, value);
        self.engine.submit(c)?;
        self.engine.flush()
    }

    /// Reads what the watchers marked. Events that arrive meanwhile coalesce into the next
    /// wake-up.
    fn on_wake(&mut self) -> Result<()> {
        let dirty = self.wakeups.take();
        let report = if dirty.rescan {
            self.engine.run_pass(&self.roots)?
        } else if dirty.files.is_empty() {
            return Ok(());
        } else {
            self.engine
                .sync_paths(&self.roots, dirty.files.into_iter().collect())?
        };
        log::debug!("sync complete {report}");
        Ok(())
    }

    /// The periodic stat-only rescan: finds what events could not show.
    fn on_rescan(&mut self) -> Result<()> {
        let report = self.engine.run_pass(&self.roots)?;
        if report.records + report.rejects + report.new_sources + report.gone > 0 {
            log::info!("rescan found changes {report}");
        }
        Ok(())
    }
}

/// A thread that checkpoints the WAL every [`CHECKPOINT_EVERY`] while the daemon runs.
struct Checkpointer {
    stop: crossbeam_channel::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Checkpointer {
    fn start(archive: Archive) -> Result<Checkpointer> {
        let (stop, stopped) = bounded::<()>(1);
        let thread = std::thread::Builder::new()
            .name("checkpointer".into())
            .spawn(move || {
                let every = tick(CHECKPOINT_EVERY);
                loop {
                    select! {
                        recv(every) -> _ => {
                            if let Err(e) = archive.checkpoint() {
                                log::debug!("checkpoint skipped: {e:#}");
                            }
                        }
                        recv(stopped) -> _ => return,
                    }
                }
            })
            .at_path("<checkpointer thread>")?;
        Ok(Checkpointer { stop, thread })
    }

    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// One watcher thread per harness, over that harness's roots.
fn start_watchers(roots: &[Root], wakeups: &Arc<Wakeups>) -> Vec<WatcherThread> {
    let mut by_harness: BTreeMap<&str, Vec<PathBuf>> = BTreeMap::new();
    for r in roots {
        by_harness
            .entry(&r.harness)
            .or_default()
            .push(r.path.clone());
    }
    let mut threads = Vec::new();
    for (name, paths) in by_harness {
        match watch::spawn(name, paths, Arc::clone(wakeups)) {
            Ok(t) => threads.push(t),
            Err(e) => log::error!("cannot start the watcher thread for {name}: {e}"),
        }
    }
    threads
}

/// SIGINT and SIGTERM set `stop` (which ends a pass after the batch in hand) and wake the loop.
fn listen_for_stop(stop: Arc<AtomicBool>) -> Result<(signal_hook::iterator::Handle, Receiver<()>)> {
    let mut signals = Signals::new([SIGINT, SIGTERM]).at_path("<signal handlers>")?;
    let handle = signals.handle();
    let (tx, rx) = bounded(1);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                log::info!("stopping on signal {sig}: committing the batch in hand");
                stop.store(true, Ordering::Relaxed);
                let _ = tx.try_send(());
            }
        })
        .at_path("<signal thread>")?;
    Ok((handle, rx))
}
