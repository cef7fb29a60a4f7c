//! Linux: one inotify instance per watcher, read by the engine thread itself when `poll` says
//! it is readable, so that an append wakes the thread that reads it and no other. The
//! watcher's thread adds and removes the watches; both threads share the map from watch
//! descriptor to directory.
//!
//! Only the events that can mean news are asked for: the daemon's own opens, reads and closes
//! of a transcript raise none.

use super::{Seen, WatchError, Watches};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// What each directory's watch reports: its entries created, written, changed in metadata,
/// deleted or moved in and out, and the directory itself deleted or moved.
fn mask() -> WatchFlags {
    WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
}

/// An inotify instance and the directories it watches.
pub(super) struct Inotify {
    fd: OwnedFd,
    dirs: Mutex<Dirs>,
}

/// Watch descriptors and directories, both ways.
#[derive(Default)]
struct Dirs {
    by_wd: HashMap<i32, PathBuf>,
    by_path: HashMap<PathBuf, i32>,
}

impl Inotify {
    /// A new instance, non-blocking (it is read until it would block).
    pub(super) fn new() -> Result<Arc<Inotify>, WatchError> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
            .map_err(WatchError::from_errno)?;
        Ok(Arc::new(Inotify {
            fd,
            dirs: Mutex::default(),
        }))
    }

    /// What the engine polls.
    pub(super) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn dirs(&self) -> MutexGuard<'_, Dirs> {
        // A panic while holding this lock leaves two maps, still usable.
        self.dirs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads every queued event and reports each as what it means for the daemon. An event
    /// of a watch removed meanwhile is dropped: whoever removed it has the engine rescan.
    pub(super) fn read(&self, mut seen: impl FnMut(Seen)) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut events = inotify::Reader::new(&self.fd, &mut buf);
        let mut dirs = self.dirs();
        loop {
            let event = match events.next() {
                Ok(event) => event,
                Err(Errno::WOULDBLOCK) => return,
                Err(Errno::INTR) => continue,
                Err(e) => {
                    log::warn!("cannot read the inotify queue: {e}; rescanning every root");
                    return seen(Seen::Overflow);
                }
            };
            let flags = event.events();
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                seen(Seen::Overflow);
                continue;
            }
            if flags.contains(ReadFlags::IGNORED) {
                dirs.forget(event.wd());
                continue;
            }
            let Some(dir) = dirs.by_wd.get(&event.wd()) else {
                log::debug!("inotify event of a watch already removed: {event:?}");
                continue;
            };
            let path = match event.file_name() {
                Some(name) => dir.join(std::ffi::OsStr::from_bytes(name.to_bytes())),
                None => dir.clone(),
            };
            seen(meaning(flags, path));
        }
    }
}

/// What one event says: a directory appeared or went, a name appeared, or a path has news.
fn meaning(flags: ReadFlags, path: PathBuf) -> Seen {
    let dir = flags.contains(ReadFlags::ISDIR);
    if flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
        Seen::Gone(path)
    } else if dir && flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
        Seen::DirAppeared(path)
    } else if dir && flags.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
        Seen::Gone(path)
    } else if flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
        Seen::Named(path)
    } else {
        Seen::Changed(path)
    }
}

impl Dirs {
    fn forget(&mut self, wd: i32) {
        if let Some(path) = self.by_wd.remove(&wd)
            && self.by_path.get(&path) == Some(&wd)
        {
            self.by_path.remove(&path);
        }
    }
}

impl Watches for Arc<Inotify> {
    fn watch(&mut self, dir: &Path) -> Result<(), WatchError> {
        // Held across the call, so that the engine resolves the new watch's first events.
        let mut dirs = self.dirs();
        let wd = inotify::add_watch(&self.fd, dir, mask()).map_err(WatchError::from_errno)?;
        if let Some(old) = dirs.by_path.insert(dir.to_owned(), wd)
            && old != wd
        {
            dirs.by_wd.remove(&old);
            let _ = inotify::remove_watch(&self.fd, old);
        }
        dirs.by_wd.insert(wd, dir.to_owned());
        Ok(())
    }

    fn unwatch(&mut self, dir: &Path) {
        let mut dirs = self.dirs();
        if let Some(wd) = dirs.by_path.remove(dir) {
            dirs.by_wd.remove(&wd);
            // Fails when the kernel has dropped the watch already (its directory is gone).
            let _ = inotify::remove_watch(&self.fd, wd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(inotify: &Inotify) -> Vec<Seen> {
        let mut seen = Vec::new();
        inotify.read(|s| seen.push(s));
        seen
    }

    #[test]
    fn the_daemons_own_open_read_and_close_of_a_file_raise_no_event() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("a.jsonl");
        std::fs::write(&file, b"{}\n").unwrap();
        let mut inotify = Inotify::new().unwrap();
        inotify.watch(tmp.path()).unwrap();
        let _ = std::fs::read(&file).unwrap();
        assert!(events(&inotify).is_empty());
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{}\n"))
            .unwrap();
        assert_eq!(events(&inotify), vec![Seen::Changed(file)]);
    }

    #[test]
    fn directories_appearing_and_going_are_told_apart_from_files() {
        let tmp = tempfile::tempdir().unwrap();
        let mut inotify = Inotify::new().unwrap();
        inotify.watch(tmp.path()).unwrap();
        let (dir, moved) = (tmp.path().join("d"), tmp.path().join("e"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::rename(&dir, &moved).unwrap();
        std::fs::remove_dir(&moved).unwrap();
        let file = tmp.path().join("f.jsonl");
        std::fs::write(&file, b"").unwrap();
        std::fs::remove_file(&file).unwrap();
        let expected = vec![
            Seen::DirAppeared(dir.clone()),
            Seen::Gone(dir),
            Seen::DirAppeared(moved.clone()),
            Seen::Gone(moved),
            Seen::Named(file.clone()),
            Seen::Changed(file),
        ];
        assert_eq!(events(&inotify), expected);
    }

    #[test]
    fn a_watched_directory_removed_is_gone_and_its_watch_forgotten() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        let mut inotify = Inotify::new().unwrap();
        inotify.watch(&dir).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        assert_eq!(events(&inotify), vec![Seen::Gone(dir)]);
        assert!(inotify.dirs().by_wd.is_empty() && inotify.dirs().by_path.is_empty());
    }
}
