//! inotify's per-user limits against what the daemon needs: one watch per directory under
//! the roots, one instance per watcher thread, on top of what the user's other processes hold.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The sysctl a limit is raised with, and the file that names it inside a user namespace.
#[derive(Clone, Copy, Debug)]
pub(super) struct LimitKind {
    /// The global sysctl, as `sysctl` names it.
    pub sysctl: &'static str,
    /// The per-user-namespace sysctl, as `sysctl` names it.
    pub namespace_sysctl: &'static str,
}

/// Watches: `fs.inotify.max_user_watches`, `user.max_inotify_watches`.
pub(super) const WATCHES: LimitKind = LimitKind {
    sysctl: "fs.inotify.max_user_watches",
    namespace_sysctl: "user.max_inotify_watches",
};

/// Instances: `fs.inotify.max_user_instances`, `user.max_inotify_instances`.
pub(super) const INSTANCES: LimitKind = LimitKind {
    sysctl: "fs.inotify.max_user_instances",
    namespace_sysctl: "user.max_inotify_instances",
};

/// A limit in force and the sysctl that sets it.
#[derive(Clone, Debug)]
pub(super) struct Limit {
    /// The lowest value that applies.
    pub value: u64,
    /// The sysctl that holds it (the namespace one when that is lower).
    pub sysctl: &'static str,
}

/// The limit of `kind` in force: the global sysctl, or the user namespace's when that is
/// lower (inside a user namespace, `/proc/sys/fs/inotify/` shows the host's value). `None`
/// when neither can be read.
pub(super) fn limit(kind: LimitKind) -> Option<Limit> {
    let read = |name: &str| -> Option<u64> {
        let path = Path::new("/proc/sys").join(name.replace('.', "/"));
        fs::read_to_string(path).ok()?.trim().parse().ok()
    };
    let global = read(kind.sysctl).map(|value| Limit {
        value,
        sysctl: kind.sysctl,
    });
    let namespace = read(kind.namespace_sysctl).map(|value| Limit {
        value,
        sysctl: kind.namespace_sysctl,
    });
    match (global, namespace) {
        (Some(g), Some(n)) if n.value < g.value => Some(n),
        (Some(g), _) => Some(g),
        (None, n) => n,
    }
}

/// inotify instances and watches held by this user's processes, except `skip` (a running
/// daemon, whose own are what this check computes).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct InUse {
    /// inotify file descriptors.
    pub instances: u64,
    /// Watches on them.
    pub watches: u64,
}

/// Counts the inotify instances (`anon_inode:inotify` links in `/proc/PID/fd`) and their
/// watches (`inotify wd:` lines in `/proc/PID/fdinfo/FD`) of this user's processes.
/// Processes that cannot be read are passed over.
pub(super) fn in_use(skip: Option<u32>) -> InUse {
    let uid = crate::platform::sys::effective_uid();
    let mut total = InUse::default();
    let Ok(procs) = fs::read_dir("/proc") else {
        return total;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let mine = entry.metadata().is_ok_and(|m| m.uid() == uid);
        if mine && Some(pid) != skip {
            let found = in_use_by(&entry.path());
            total.instances += found.instances;
            total.watches += found.watches;
        }
    }
    total
}

fn in_use_by(proc_dir: &Path) -> InUse {
    let mut found = InUse::default();
    let Ok(fds) = fs::read_dir(proc_dir.join("fd")) else {
        return found;
    };
    for fd in fds.flatten() {
        let is_inotify =
            fs::read_link(fd.path()).is_ok_and(|t| t == Path::new("anon_inode:inotify"));
        if !is_inotify {
            continue;
        }
        found.instances += 1;
        let info = fs::read_to_string(proc_dir.join("fdinfo").join(fd.file_name()));
        found.watches += info.map_or(0, |i| {
            i.lines().filter(|l| l.starts_with("inotify wd:")).count() as u64
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_sees_its_own_inotify_instance_and_watch() {
        use rustix::fs::inotify;
        let before = in_use_by(Path::new("/proc/self"));
        let fd = inotify::init(inotify::CreateFlags::CLOEXEC).unwrap();
        let dir = tempfile::tempdir().unwrap();
        inotify::add_watch(&fd, dir.path(), inotify::WatchFlags::CREATE).unwrap();
        let mine = in_use_by(Path::new("/proc/self"));
        drop(fd);
        let added = (
            mine.instances - before.instances,
            mine.watches - before.watches,
        );
        assert_eq!(added, (1, 1));
        assert!(limit(WATCHES).is_some_and(|l| l.value > 0));
    }
}
