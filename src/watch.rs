//! Watching: the only module that touches `notify`. Events are wake-ups, never data: each one
//! marks a path dirty and wakes the engine, which re-fingerprints the file and reads from its
//! cursor.
//!
//! Each watcher (agent harness) runs one `notify` instance on a thread of its own, never one per
//! directory (inotify instances are limited to 128 per user). Directories are watched one by
//! one rather than with notify's recursive mode, so that one directory that cannot be watched
//! is reported and skipped instead of ending the walk, and so that a new directory can be
//! scanned for files created in it before its watch existed.

use crossbeam_channel::{Receiver, Sender, TrySendError, bounded, select};
use notify::event::{CreateKind, ModifyKind, RemoveKind};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::collections::{HashMap, HashSet};
use std::mem;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use walkdir::WalkDir;

/// How many directory events may wait for a watcher thread; past that, the thread re-arms
/// every root instead (and the engine rescans).
const CONTROL_BACKLOG: usize = 4096;

/// What the watchers have seen since the engine last looked.
#[derive(Debug, Default)]
pub struct Dirty {
    /// Files that had events.
    pub files: HashSet<PathBuf>,
    /// True when something requires a full scan: a queue overflow, a new or re-armed
    /// directory, an event that could not be queued.
    pub rescan: bool,
    /// Roots that cannot be watched (fully) and must be polled from now on, with the reason
    /// and the fix.
    pub polled: Vec<PolledRoot>,
}

/// A root the watchers cannot cover: events from it are missing or incomplete.
#[derive(Clone, Debug)]
pub struct PolledRoot {
    /// The root.
    pub root: PathBuf,
    /// Why it cannot be watched.
    pub reason: String,
    /// What would let it be watched.
    pub fix: &'static str,
}

/// The shared dirty set and the engine's wake-up channel. Marking never blocks: the set is
/// held only to insert or to swap it out, and the wake-up channel holds one token, so events
/// that arrive while the engine works coalesce into one follow-up read.
pub struct Wakeups {
    dirty: Mutex<Dirty>,
    wake: Sender<()>,
}

impl Wakeups {
    /// A new dirty set, and the receiver the engine waits on.
    pub fn new() -> (Arc<Wakeups>, Receiver<()>) {
        let (wake, rx) = bounded(1);
        let w = Wakeups {
            dirty: Mutex::new(Dirty::default()),
            wake,
        };
        (Arc::new(w), rx)
    }

    /// Takes everything marked so far.
    pub fn take(&self) -> Dirty {
        mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Dirty> {
        // A panic while holding this lock leaves a set of paths, still usable.
        self.dirty.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn mark_files(&self, paths: &[PathBuf]) {
        self.lock().files.extend(paths.iter().cloned());
        self.poke();
    }

    /// Asks the engine to poll `root` from now on, and to scan it now.
    fn mark_polled(&self, polled: PolledRoot) {
        let mut dirty = self.lock();
        dirty.polled.push(polled);
        dirty.rescan = true;
        drop(dirty);
        self.poke();
    }

    /// Asks the engine for a full scan.
    pub fn mark_rescan(&self) {
        self.lock().rescan = true;
        self.poke();
    }

    fn poke(&self) {
        // Full means a wake-up is already pending; the engine will see this mark too.
        let _ = self.wake.try_send(());
    }
}

/// A running watcher thread.
pub struct WatcherThread {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl WatcherThread {
    /// Stops the thread and waits for it.
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// Starts one watcher thread for the roots of one harness, and returns once its watches are
/// in place: a change made after this returns is seen.
pub fn spawn(
    name: &str,
    roots: Vec<PathBuf>,
    wakeups: Arc<Wakeups>,
) -> std::io::Result<WatcherThread> {
    let (stop, stop_rx) = bounded(1);
    let (ready, ready_rx) = bounded(1);
    let label = name.to_owned();
    let thread = std::thread::Builder::new()
        .name(format!("watch-{name}"))
        .spawn(move || run(&label, roots, wakeups, stop_rx, ready))?;
    // An Err means the thread ended before it was ready; it has logged why.
    let _ = ready_rx.recv();
    Ok(WatcherThread { stop, thread })
}

/// A directory event the watcher thread acts on.
enum Control {
    /// A directory appeared (created or moved in): watch it and what is under it.
    Appeared(PathBuf),
    /// Something was removed or moved away: a root may be gone.
    Vanished(PathBuf),
    /// Events were lost: re-arm every root.
    Rearm,
}

fn run(
    name: &str,
    roots: Vec<PathBuf>,
    wakeups: Arc<Wakeups>,
    stop: Receiver<()>,
    ready: Sender<()>,
) {
    let (ctl_tx, ctl_rx) = bounded::<Control>(CONTROL_BACKLOG);
    let rearm = Arc::new(AtomicBool::new(false));
    let link = Link {
        wakeups: Arc::clone(&wakeups),
        ctl: ctl_tx,
        rearm: Arc::clone(&rearm),
    };
    let handler = move |res: notify::Result<Event>| on_event(res, &link);
    let watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            for root in roots {
                wakeups.mark_polled(PolledRoot {
                    root,
                    reason: format!("watcher {name} cannot start: {e}"),
                    fix: limit_hint(&e),
                });
            }
            return;
        }
    };
    let mut state = Roots::new(name, roots, watcher, Arc::clone(&wakeups));
    state.arm_all();
    let _ = ready.send(());
    loop {
        select! {
            recv(ctl_rx) -> msg => match msg {
                Ok(c) => {
                    let mut rescan = state.handle(c);
                    if rearm.swap(false, Ordering::Relaxed) {
                        state.rearm();
                        rescan = true;
                    }
                    if rescan {
                        wakeups.mark_rescan();
                    }
                }
                Err(_) => return,
            },
            recv(stop) -> _ => return,
        }
    }
}

/// What the notify callback reaches: the engine's wake-ups and its watcher thread.
struct Link {
    wakeups: Arc<Wakeups>,
    ctl: Sender<Control>,
    /// Set when the watcher thread must re-arm every root (events were lost).
    rearm: Arc<AtomicBool>,
}

impl Link {
    fn send(&self, c: Control) {
        if let Err(TrySendError::Full(_)) = self.ctl.try_send(c) {
            self.request_rearm();
        }
    }

    /// Asks the watcher thread to re-arm every root and the engine to rescan. The request is
    /// a flag, so it cannot be lost to a full channel: the thread checks it after every
    /// message, and the `Rearm` message only wakes it when nothing else is queued.
    fn request_rearm(&self) {
        self.rearm.store(true, Ordering::Relaxed);
        let _ = self.ctl.try_send(Control::Rearm);
        self.wakeups.mark_rescan();
    }
}

/// The notify callback, on notify's own thread: never blocks.
fn on_event(res: notify::Result<Event>, link: &Link) {
    let wakeups = &link.wakeups;
    let event = match res {
        Ok(event) => event,
        Err(e) => {
            log::warn!("watch error: {e}; {}", limit_hint(&e));
            wakeups.mark_rescan();
            return;
        }
    };
    if event.need_rescan() {
        log::warn!("watch queue overflowed; rescanning every root");
        link.request_rearm();
        return;
    }
    match event.kind {
        // Our own reads open and close files; access events carry no news.
        EventKind::Access(_) => {}
        EventKind::Create(CreateKind::Folder) => {
            for p in &event.paths {
                link.send(Control::Appeared(p.clone()));
            }
        }
        EventKind::Modify(ModifyKind::Name(_)) | EventKind::Create(CreateKind::Any) => {
            for p in &event.paths {
                if is_real_dir(p) {
                    link.send(Control::Appeared(p.clone()));
                } else if !p.exists() {
                    link.send(Control::Vanished(p.clone()));
                }
            }
            wakeups.mark_files(&event.paths);
        }
        EventKind::Remove(RemoveKind::Folder | RemoveKind::Any) => {
            for p in &event.paths {
                link.send(Control::Vanished(p.clone()));
            }
            wakeups.mark_files(&event.paths);
        }
        _ => wakeups.mark_files(&event.paths),
    }
}

/// A directory, not a symlink to one: symlinks are never followed into or out of a root.
fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// The fix for a failure to watch: which limit to raise, and how.
fn limit_hint(e: &notify::Error) -> &'static str {
    let instances = matches!(&e.kind, notify::ErrorKind::Io(io)
        if io.raw_os_error() == Some(libc::EMFILE));
    match e.kind {
        notify::ErrorKind::MaxFilesWatch => {
            "raise the inotify watch limit: `sudo sysctl fs.inotify.max_user_watches=524288`, and \
             `echo fs.inotify.max_user_watches=524288 | sudo tee /etc/sysctl.d/60-inotify.conf` \
             to keep it"
        }
        _ if instances => {
            "raise the inotify instance limit: `sudo sysctl fs.inotify.max_user_instances=1024`, \
             and `echo fs.inotify.max_user_instances=1024 | sudo tee \
             /etc/sysctl.d/60-inotify.conf` to keep it"
        }
        _ => "check the directory's permissions, and `transcript-sync doctor`",
    }
}

/// Where each root stands: watched, or waiting for a missing level to appear.
struct Roots {
    name: String,
    roots: Vec<PathBuf>,
    watcher: RecommendedWatcher,
    wakeups: Arc<Wakeups>,
    /// Roots handed to the engine for polling (each once).
    polled: HashSet<PathBuf>,
    /// Directories watched (non-recursively), each under a root.
    watched: HashSet<PathBuf>,
    /// For each missing root, the nearest existing ancestor being watched for it.
    waiting: HashMap<PathBuf, PathBuf>,
}

impl Roots {
    fn new(
        name: &str,
        roots: Vec<PathBuf>,
        watcher: RecommendedWatcher,
        wakeups: Arc<Wakeups>,
    ) -> Roots {
        Roots {
            name: name.to_owned(),
            roots,
            watcher,
            wakeups,
            polled: HashSet::new(),
            watched: HashSet::new(),
            waiting: HashMap::new(),
        }
    }

    fn arm_all(&mut self) {
        for root in self.roots.clone() {
            self.arm(&root);
        }
    }

    /// Watches `root` and every directory under it, or, if it does not exist, its nearest
    /// existing ancestor (non-recursively) until it does.
    fn arm(&mut self, root: &Path) {
        if root.is_dir() {
            if let Some(parent) = self.waiting.remove(root) {
                self.unwatch_parent(&parent);
            }
            if let Ok(Some(kind)) = crate::sys::network_filesystem(root) {
                let reason = format!(
                    "it is on a network filesystem ({kind}), where changes made by other machines raise no events"
                );
                self.poll(root, reason, "none needed; polling finds every change");
            }
            self.watch_tree(root);
            return;
        }
        let Some(parent) = root.ancestors().skip(1).find(|a| a.is_dir()) else {
            return;
        };
        if self.waiting.get(root).map(PathBuf::as_path) == Some(parent) {
            return;
        }
        if let Some(old) = self.waiting.insert(root.to_owned(), parent.to_owned()) {
            self.unwatch_parent(&old);
        }
        log::info!(
            "root does not exist yet path={root:?}; waiting for it at {parent:?} (watcher {})",
            self.name
        );
        if let Err(e) = self.watcher.watch(parent, RecursiveMode::NonRecursive) {
            let reason = format!("cannot watch {parent:?}, where it is waited for: {e}");
            self.poll(root, reason, limit_hint(&e));
            return;
        }
        // A level created between the look and the watch sent no event to this watch.
        if root.ancestors().skip(1).find(|a| a.is_dir()) != Some(parent) || root.is_dir() {
            self.arm(root);
        }
    }

    fn unwatch_parent(&mut self, parent: &Path) {
        if !self.watched.contains(parent) && !self.waiting.values().any(|p| p == parent) {
            let _ = self.watcher.unwatch(parent);
        }
    }

    /// Adds a watch to each directory under `dir`. A directory that cannot be watched is
    /// reported and skipped; the others are still watched.
    fn watch_tree(&mut self, dir: &Path) {
        for entry in WalkDir::new(dir).follow_links(false) {
            let entry = match entry {
                Ok(e) if e.file_type().is_dir() => e,
                Ok(_) => continue,
                Err(e) => {
                    log::warn!("cannot list a directory to watch: {e}");
                    continue;
                }
            };
            let path = entry.into_path();
            if self.watched.contains(&path) {
                continue;
            }
            match self.watcher.watch(&path, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    self.watched.insert(path);
                }
                Err(e) => {
                    log::debug!("cannot watch path={path:?}: {e}");
                    if let Some(root) = self.roots.iter().find(|r| path.starts_with(r)) {
                        let reason = format!("cannot watch {path:?}: {e}");
                        self.poll(&root.clone(), reason, limit_hint(&e));
                    }
                }
            }
        }
    }

    /// Hands `root` to the engine for polling, the first time only.
    fn poll(&mut self, root: &Path, reason: String, fix: &'static str) {
        if self.polled.insert(root.to_owned()) {
            self.wakeups.mark_polled(PolledRoot {
                root: root.to_owned(),
                reason,
                fix,
            });
        }
    }

    /// Acts on one directory event; true when the engine should rescan.
    fn handle(&mut self, c: Control) -> bool {
        match c {
            Control::Appeared(dir) => self.appeared(&dir),
            Control::Vanished(path) => self.vanished(&path),
            // The flag, checked by the caller, says what to do.
            Control::Rearm => false,
        }
    }

    /// A directory appeared: arm the roots that waited for it, watch it if it is in a root.
    fn appeared(&mut self, dir: &Path) -> bool {
        let waited: Vec<PathBuf> = self
            .waiting
            .keys()
            .filter(|root| root.starts_with(dir))
            .cloned()
            .collect();
        for root in &waited {
            self.arm(root);
        }
        let under_root = self.roots.iter().any(|r| dir.starts_with(r));
        if under_root && is_real_dir(dir) {
            self.watch_tree(dir);
        }
        under_root || !waited.is_empty()
    }

    /// Something was removed or moved away. The kernel dropped the watches under it, even if
    /// the path exists again by now, so they are forgotten and, where the path is back,
    /// added again.
    fn vanished(&mut self, path: &Path) -> bool {
        self.watched.retain(|w| !w.starts_with(path));
        let hit: Vec<PathBuf> = self
            .roots
            .iter()
            .filter(|r| r.starts_with(path))
            .cloned()
            .collect();
        for root in &hit {
            if !root.is_dir() {
                log::info!("root removed path={root:?}; waiting for it to return");
            }
            self.arm(root);
        }
        let back = is_real_dir(path) && self.roots.iter().any(|r| path.starts_with(r));
        if back {
            self.watch_tree(path);
        }
        !hit.is_empty() || back
    }

    /// Forgets every watch and arms every root again (after lost events).
    fn rearm(&mut self) {
        self.watched.clear();
        self.arm_all();
    }
}
