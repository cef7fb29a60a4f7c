//! Everywhere but Linux: the `notify` crate (FSEvents on macOS, kqueue on the BSDs), whose
//! own thread receives the events; its callback marks the paths and rings the engine's
//! doorbell. Compiled and tested on Linux too (over notify's inotify backend), where the
//! daemon reads inotify itself instead.

use super::{Link, Seen, WatchError, Watches};
use notify::event::{CreateKind, ModifyKind, RemoveKind};
use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use std::path::Path;

/// A `notify` watcher whose events go to `link`.
pub(super) struct Portable(RecommendedWatcher);

impl Portable {
    /// Starts notify's thread; its events are marked through `link`.
    pub(super) fn start(link: Link) -> Result<Portable, WatchError> {
        let handler = move |res: notify::Result<Event>| on_event(res, &link);
        notify::recommended_watcher(handler)
            .map(Portable)
            .map_err(|e| error(&e))
    }
}

impl Watches for Portable {
    fn watch(&mut self, dir: &Path) -> Result<(), WatchError> {
        (self.0.watch(dir, RecursiveMode::NonRecursive)).map_err(|e| error(&e))
    }

    fn unwatch(&mut self, dir: &Path) {
        let _ = self.0.unwatch(dir);
    }
}

fn error(e: &notify::Error) -> WatchError {
    match &e.kind {
        notify::ErrorKind::MaxFilesWatch => WatchError::watch_limit(e),
        notify::ErrorKind::Io(io) => match io.raw_os_error() {
            Some(code) => WatchError::from_errno(rustix::io::Errno::from_raw_os_error(code)),
            None => WatchError::other(e),
        },
        _ => WatchError::other(e),
    }
}

/// The notify callback, on notify's own thread: never blocks.
fn on_event(res: notify::Result<Event>, link: &Link) {
    let event = match res {
        Ok(event) => event,
        Err(e) => {
            log::warn!("watch error: {e}; rescanning every root");
            link.wakeups.mark_rescan();
            return;
        }
    };
    if event.need_rescan() {
        link.seen(Seen::Overflow);
    } else {
        for seen in meaning(&event) {
            link.seen(seen);
        }
    }
    link.wakeups.ring();
}

/// What one notify event says, path by path.
fn meaning(event: &Event) -> Vec<Seen> {
    let paths = event.paths.iter().cloned();
    match event.kind {
        // Opens and closes carry no news (a close after writing follows a modification).
        EventKind::Access(_) => Vec::new(),
        EventKind::Create(CreateKind::Folder) => paths.map(Seen::DirAppeared).collect(),
        EventKind::Create(CreateKind::File | CreateKind::Other) => paths.map(Seen::Named).collect(),
        // A rename's event does not say whether it moved something in or out: the path says.
        EventKind::Modify(ModifyKind::Name(_)) | EventKind::Create(CreateKind::Any) => {
            paths.map(Seen::Renamed).collect()
        }
        EventKind::Remove(RemoveKind::Folder | RemoveKind::Any) => paths.map(Seen::Gone).collect(),
        _ => paths.map(Seen::Changed).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::watch::Wakeups;
    use crate::platform::doorbell::Doorbell;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn an_append_seen_by_notify_is_marked_and_rings_the_doorbell() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a.jsonl");
        std::fs::write(&file, b"").unwrap();
        let bell = Arc::new(Doorbell::new().unwrap());
        let wakeups = Wakeups::new(Arc::clone(&bell));
        let (link, _ctl) = Link::for_test(Arc::clone(&wakeups));
        let mut watcher = Portable::start(link).unwrap();
        watcher.watch(tmp.path()).unwrap();
        std::fs::write(&file, b"{}\n").unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            bell.wait(&[], Some(Duration::from_secs(10))).unwrap();
            if wakeups.take().files.contains(&file) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the append was never marked"
            );
        }
    }
}
