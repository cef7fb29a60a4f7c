//! Watching: turns changes under the roots into dirty paths for the engine. Events are
//! wake-ups, never data: each one marks a path dirty, and the engine re-fingerprints the file
//! and reads from its cursor.
//!
//! Each watcher (agent harness) has one watch instance and a thread of its own that keeps its
//! directories watched, never one instance per directory (inotify instances are limited to
//! 128 per user). Directories are watched one by one rather than recursively, so that one
//! directory that cannot be watched is reported and skipped instead of ending the walk, and so
//! that a new directory can be scanned for files created in it before its watch existed.
//!
//! On Linux the instance is inotify, and the engine reads its events itself (`inotify`): an
//! append wakes the engine's thread only. Elsewhere it is the `notify` crate (`portable`),
//! whose own thread marks the paths and rings the engine's [`Doorbell`].

#[cfg(target_os = "linux")]
mod inotify;
#[cfg_attr(target_os = "linux", allow(dead_code))]
mod portable;

use crate::capture::harness::Reach;
use crate::platform::doorbell::Doorbell;
use crossbeam_channel::{Receiver, Sender, TrySendError, bounded, select};
use rustix::io::Errno;
use std::collections::{HashMap, HashSet};
use std::fmt;
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
pub(crate) struct Dirty {
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
pub(crate) struct PolledRoot {
    /// The root.
    pub root: PathBuf,
    /// Why it cannot be watched.
    pub reason: String,
    /// What would let it be watched.
    pub fix: &'static str,
}

/// The shared dirty set and the engine's doorbell. Marking never blocks: the set is held only
/// to insert or to swap it out, and rings coalesce, so events that arrive while the engine
/// works turn into one follow-up read.
pub(crate) struct Wakeups {
    dirty: Mutex<Dirty>,
    bell: Arc<Doorbell>,
}

impl Wakeups {
    /// A new dirty set, whose marks from other threads ring `bell`.
    pub(crate) fn new(bell: Arc<Doorbell>) -> Arc<Wakeups> {
        Arc::new(Wakeups {
            dirty: Mutex::new(Dirty::default()),
            bell,
        })
    }

    /// Takes everything marked so far.
    pub(crate) fn take(&self) -> Dirty {
        mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Dirty> {
        // A panic while holding this lock leaves a set of paths, still usable.
        self.dirty.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks `path` without ringing: the engine marks what it reads itself, and another
    /// thread rings once after a batch.
    fn mark_file(&self, path: PathBuf) {
        self.lock().files.insert(path);
    }

    /// Asks the engine to poll `root` from now on, and to scan it now.
    fn mark_polled(&self, polled: PolledRoot) {
        let mut dirty = self.lock();
        dirty.polled.push(polled);
        dirty.rescan = true;
        drop(dirty);
        self.ring();
    }

    /// Asks the engine for a full scan.
    pub(crate) fn mark_rescan(&self) {
        self.lock().rescan = true;
        self.ring();
    }

    /// Wakes the engine to look at what is marked.
    fn ring(&self) {
        self.bell.ring();
    }
}

/// What a watch saw, in the terms the daemon acts on, whichever backend saw it.
#[derive(Debug, PartialEq)]
enum Seen {
    /// A file (or something not known to be a directory) was created, written, truncated,
    /// deleted or changed in metadata.
    Changed(PathBuf),
    /// A directory was created or moved in.
    DirAppeared(PathBuf),
    /// Something not a directory was created or moved in: a file, or a symlink, which may be
    /// a root given as a symlink to a directory.
    Named(PathBuf),
    /// A directory was deleted or moved away, or a watched one was.
    Gone(PathBuf),
    /// Something was renamed to or from this path; what is there now says which.
    Renamed(PathBuf),
    /// Events were lost.
    Overflow,
}

/// Why a directory (or a watcher) cannot be watched, and the fix.
#[derive(Debug)]
struct WatchError {
    reason: String,
    fix: &'static str,
}

/// The fix for a directory that cannot be watched for another reason than a limit.
const CHECK_PERMISSIONS: &str = "check the directory's permissions, and `transcript-sync doctor`";

impl WatchError {
    /// The error of a system call, with the limit to raise when it names one.
    fn from_errno(e: Errno) -> WatchError {
        let (reason, fix) = match e {
            Errno::NOSPC => ("the inotify watch limit is reached".to_owned(), WATCH_LIMIT),
            Errno::MFILE => (
                "the inotify instance limit is reached".to_owned(),
                "raise the inotify instance limit: `sudo sysctl fs.inotify.max_user_instances=1024`, \
                 and `echo fs.inotify.max_user_instances=1024 | sudo tee \
                 /etc/sysctl.d/60-inotify.conf` to keep it",
            ),
            _ => (std::io::Error::from(e).to_string(), CHECK_PERMISSIONS),
        };
        WatchError { reason, fix }
    }

    #[cfg_attr(target_os = "linux", allow(dead_code))]
    fn watch_limit(e: &dyn fmt::Display) -> WatchError {
        WatchError {
            reason: e.to_string(),
            fix: WATCH_LIMIT,
        }
    }

    #[cfg_attr(target_os = "linux", allow(dead_code))]
    fn other(e: &dyn fmt::Display) -> WatchError {
        WatchError {
            reason: e.to_string(),
            fix: CHECK_PERMISSIONS,
        }
    }
}

/// The fix for the inotify watch limit.
const WATCH_LIMIT: &str = "raise the inotify watch limit: `sudo sysctl \
     fs.inotify.max_user_watches=524288`, and `echo fs.inotify.max_user_watches=524288 | sudo \
     tee /etc/sysctl.d/60-inotify.conf` to keep it";

impl fmt::Display for WatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// Adding and removing the (non-recursive) watch of one directory.
trait Watches: Send {
    fn watch(&mut self, dir: &Path) -> Result<(), WatchError>;
    /// Removes the watch, if there is one; the kernel may have dropped it already.
    fn unwatch(&mut self, dir: &Path);
}

/// A running watcher: its thread, and on Linux the inotify instance the engine reads.
pub(crate) struct WatcherThread {
    stop: Sender<()>,
    thread: JoinHandle<()>,
    #[cfg(target_os = "linux")]
    events: Option<(Arc<inotify::Inotify>, Link)>,
}

impl WatcherThread {
    /// Stops the thread and waits for it.
    pub(crate) fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }

    /// The descriptor that is readable when this watcher has events for the engine to read
    /// with [`WatcherThread::read_events`]; none when its own thread marks them.
    pub(crate) fn events_fd(&self) -> Option<rustix::fd::BorrowedFd<'_>> {
        #[cfg(target_os = "linux")]
        return self.events.as_ref().map(|(inotify, _)| inotify.fd());
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Reads the watcher's queued events, on the caller's (the engine's) thread, and marks
    /// what they say; directory events go to the watcher's thread.
    pub(crate) fn read_events(&self) {
        #[cfg(target_os = "linux")]
        if let Some((inotify, link)) = &self.events {
            inotify.read(|seen| link.seen(seen));
        }
    }
}

/// Starts one watcher for the roots of one harness, and returns once its watches are in
/// place: a change made after this returns is seen. A watcher that cannot start hands its
/// roots to the engine for polling.
pub(crate) fn spawn(
    name: &str,
    roots: Vec<(PathBuf, Arc<Reach>)>,
    wakeups: Arc<Wakeups>,
) -> std::io::Result<WatcherThread> {
    let (ctl_tx, ctl_rx) = bounded::<Control>(CONTROL_BACKLOG);
    let link = Link {
        wakeups,
        ctl: ctl_tx,
        rearm: Arc::new(AtomicBool::new(false)),
    };
    let (stop, stop_rx) = bounded(1);
    let (ready, ready_rx) = bounded(1);
    let label = name.to_owned();
    #[cfg(target_os = "linux")]
    let (events, backend) = match inotify::Inotify::new() {
        Ok(i) => (Some((Arc::clone(&i), link.clone())), Ok(i)),
        Err(e) => (None, Err(e)),
    };
    let thread = std::thread::Builder::new()
        .name(format!("watch-{name}"))
        .spawn(move || {
            #[cfg(target_os = "linux")]
            let watcher = backend.map(|i| Box::new(i) as Box<dyn Watches>);
            #[cfg(not(target_os = "linux"))]
            let watcher =
                portable::Portable::start(link.clone()).map(|p| Box::new(p) as Box<dyn Watches>);
            run(&label, roots, watcher, link, ctl_rx, stop_rx, ready)
        })?;
    // An Err means the thread ended before it was ready; it has logged why.
    let _ = ready_rx.recv();
    Ok(WatcherThread {
        stop,
        thread,
        #[cfg(target_os = "linux")]
        events,
    })
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

/// The watcher thread: arms the roots, says it is ready, then keeps the watches in step with
/// the directories that appear and go.
fn run(
    name: &str,
    roots: Vec<(PathBuf, Arc<Reach>)>,
    watcher: Result<Box<dyn Watches>, WatchError>,
    link: Link,
    ctl: Receiver<Control>,
    stop: Receiver<()>,
    ready: Sender<()>,
) {
    let wakeups = Arc::clone(&link.wakeups);
    let watcher = match watcher {
        Ok(w) => w,
        Err(e) => {
            for (root, _) in roots {
                wakeups.mark_polled(PolledRoot {
                    root,
                    reason: format!("watcher {name} cannot start: {e}"),
                    fix: e.fix,
                });
            }
            return;
        }
    };
    let mut state = Roots::new(name, roots, watcher, Arc::clone(&wakeups));
    state.arm_all();
    let _ = ready.send(());
    drop(ready);
    loop {
        select! {
            recv(ctl) -> msg => match msg {
                Ok(c) => {
                    let mut rescan = state.handle(c);
                    if link.rearm.swap(false, Ordering::Relaxed) {
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

/// What reads events reaches: the engine's wake-ups and the watcher's thread.
#[derive(Clone)]
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

    /// Acts on what a watch saw: marks the path, and tells the watcher thread of directories.
    /// Never blocks.
    fn seen(&self, seen: Seen) {
        let path = match seen {
            Seen::Overflow => {
                log::warn!("watch queue overflowed; rescanning every root");
                return self.request_rearm();
            }
            Seen::Changed(p) => p,
            Seen::DirAppeared(p) => {
                self.send(Control::Appeared(p.clone()));
                p
            }
            Seen::Named(p) => {
                // Only a root is followed as a symlink; the watcher thread knows the roots.
                if p.is_symlink() {
                    self.send(Control::Appeared(p.clone()));
                }
                p
            }
            Seen::Gone(p) => {
                self.send(Control::Vanished(p.clone()));
                p
            }
            Seen::Renamed(p) => {
                if is_real_dir(&p) || p.is_symlink() {
                    self.send(Control::Appeared(p.clone()));
                } else if !p.exists() {
                    self.send(Control::Vanished(p.clone()));
                }
                p
            }
        };
        self.wakeups.mark_file(path);
    }

    /// A link whose directory events are received by the test.
    #[cfg(test)]
    fn for_test(wakeups: Arc<Wakeups>) -> (Link, Receiver<Control>) {
        let (ctl, rx) = bounded(CONTROL_BACKLOG);
        let rearm = Arc::new(AtomicBool::new(false));
        (
            Link {
                wakeups,
                ctl,
                rearm,
            },
            rx,
        )
    }
}

/// A directory, not a symlink to one: symlinks under a root are never followed (a root given
/// as a symlink is).
fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Where each root stands: watched, or waiting for a missing level to appear.
struct Roots {
    name: String,
    roots: Vec<PathBuf>,
    watcher: Box<dyn Watches>,
    wakeups: Arc<Wakeups>,
    /// The directories under each root that its globs reach (`Root::reach`): those of every
    /// root at that path (two `[[watch]]` tables may name one directory).
    reach: HashMap<PathBuf, Vec<Arc<Reach>>>,
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
        roots: Vec<(PathBuf, Arc<Reach>)>,
        watcher: Box<dyn Watches>,
        wakeups: Arc<Wakeups>,
    ) -> Roots {
        Roots {
            name: name.to_owned(),
            roots: roots.iter().map(|(r, _)| r.clone()).collect(),
            reach: roots
                .into_iter()
                .fold(HashMap::new(), |mut all, (root, reach)| {
                    all.entry(root).or_insert_with(Vec::new).push(reach);
                    all
                }),
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
            if root.is_symlink() {
                let target = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned());
                log::info!(
                    "root path={root:?} is a symlink to {target:?}; followed (symlinks under it are not)"
                );
            }
            if let Some(parent) = self.waiting.remove(root) {
                self.unwatch_unless_needed(&parent);
            }
            if let Ok(Some(kind)) = crate::platform::sys::network_filesystem(root) {
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
            self.unwatch_unless_needed(&old);
        }
        log::info!(
            "root does not exist yet path={root:?}; waiting for it at {parent:?} (watcher {})",
            self.name
        );
        if let Err(e) = self.watcher.watch(parent) {
            let reason = format!("cannot watch {parent:?}, where it is waited for: {e}");
            self.poll(root, reason, e.fix);
            return;
        }
        // A level created between the look and the watch sent no event to this watch.
        if root.ancestors().skip(1).find(|a| a.is_dir()) != Some(parent) || root.is_dir() {
            self.arm(root);
        }
    }

    /// Removes the watch of `dir` unless it is still needed: watched as part of a root, or
    /// where a missing root is waited for.
    fn unwatch_unless_needed(&mut self, dir: &Path) {
        if !self.watched.contains(dir) && !self.waiting.values().any(|p| p == dir) {
            self.watcher.unwatch(dir);
        }
    }

    /// Adds a watch to each directory under `dir` that can hold a file of its root. A
    /// directory that cannot be watched is reported and skipped; the others are still watched.
    fn watch_tree(&mut self, dir: &Path) {
        let (roots, reach) = (self.roots.clone(), self.reach.clone());
        // Whether a root `dir` is in reaches it (`dir` can hold a file of the root's globs).
        let reached = move |dir: &Path| {
            (roots.iter().filter(|r| dir.starts_with(r))).any(|root| {
                let relative = dir.strip_prefix(root).unwrap_or(dir);
                reach
                    .get(root)
                    .is_none_or(|all| all.iter().any(|r| r.holds(relative)))
            })
        };
        if !reached(dir) {
            return;
        }
        let walk = WalkDir::new(dir).follow_links(false).into_iter();
        for entry in walk.filter_entry(|e| !e.file_type().is_dir() || reached(e.path())) {
            let entry = match entry {
                Ok(e) if e.file_type().is_dir() => e,
                // A root given as a symlink to a directory is listed through the link (as a
                // scan lists it), so its own directory is watched too.
                Ok(e) if e.depth() == 0 && e.path().is_dir() => e,
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
            match self.watcher.watch(&path) {
                Ok(()) => {
                    self.watched.insert(path);
                }
                Err(e) => {
                    log::debug!("cannot watch path={path:?}: {e}");
                    if let Some(root) = self.roots.iter().find(|r| path.starts_with(r)) {
                        let reason = format!("cannot watch {path:?}: {e}");
                        self.poll(&root.clone(), reason, e.fix);
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
        // A symlink under a root is not followed, and is no news for the engine.
        let under_root = self.roots.iter().any(|r| dir.starts_with(r)) && is_real_dir(dir);
        if under_root {
            self.watch_tree(dir);
        }
        under_root || !waited.is_empty()
    }

    /// Something was removed or moved away. The watches under it are removed (a deleted
    /// directory's by the kernel already; a moved one's would report under its old path),
    /// even if the path exists again by now, and, where the path is back, added again.
    fn vanished(&mut self, path: &Path) -> bool {
        let under: Vec<PathBuf> = (self.watched.iter())
            .filter(|w| w.starts_with(path))
            .cloned()
            .collect();
        for dir in &under {
            self.watched.remove(dir);
            self.unwatch_unless_needed(dir);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::harness;

    /// Watches nothing, noting what it was asked to watch.
    struct Noted(Arc<Mutex<Vec<PathBuf>>>);

    impl Watches for Noted {
        fn watch(&mut self, dir: &Path) -> Result<(), WatchError> {
            self.0.lock().unwrap().push(dir.to_owned());
            Ok(())
        }
        fn unwatch(&mut self, _dir: &Path) {}
    }

    /// Two `[[watch]]` tables may name one directory with other globs: the directories either
    /// reaches are watched, and no others.
    #[test]
    fn two_roots_at_one_path_watch_what_either_reaches() {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["logs/day", "cache/deep"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        let root = dir.path().to_owned();
        let of = |glob: &str| {
            let r = harness::given_root(&root, glob);
            (root.clone(), Arc::clone(&r.reach))
        };
        // Built like a watcher's roots: two reaches, one of them limited.
        let limited =
            Arc::new(harness::Reach::of_globs(["*.jsonl", "logs/*/*.jsonl"].into_iter()).unwrap());
        let roots = vec![(root.clone(), limited), of("**/*.jsonl")];
        let noted = Arc::new(Mutex::new(Vec::new()));
        let wakeups = Wakeups::new(Arc::new(Doorbell::new().unwrap()));
        let mut state = Roots::new("t", roots, Box::new(Noted(Arc::clone(&noted))), wakeups);
        state.arm_all();
        let watched = noted.lock().unwrap().clone();
        assert!(watched.contains(&root.join("cache/deep")), "{watched:?}");

        let limited = Arc::new(harness::Reach::of_globs(["logs/*/*.jsonl"].into_iter()).unwrap());
        let other = Arc::new(harness::Reach::of_globs(["cache/*.jsonl"].into_iter()).unwrap());
        let roots = vec![(root.clone(), limited), (root.clone(), other)];
        let noted = Arc::new(Mutex::new(Vec::new()));
        let wakeups = Wakeups::new(Arc::new(Doorbell::new().unwrap()));
        let mut state = Roots::new("t", roots, Box::new(Noted(Arc::clone(&noted))), wakeups);
        state.arm_all();
        let mut watched = noted.lock().unwrap().clone();
        watched.sort();
        let want: Vec<PathBuf> = ["", "cache", "logs", "logs/day"]
            .iter()
            .map(|d| {
                if d.is_empty() {
                    root.clone()
                } else {
                    root.join(d)
                }
            })
            .collect();
        assert_eq!(watched, want);
    }
}
