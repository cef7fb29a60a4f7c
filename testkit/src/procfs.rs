//! What the kernel says about a process besides its CPU time: memory, threads, bytes read,
//! inotify watches.

use std::fs;

/// A numeric field of `/proc/PID/status` (`VmHWM`, `VmRSS` in KiB, `Threads` a count).
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// `rchar` (bytes asked of read-like calls, page cache included) and `read_bytes` (bytes
/// fetched from storage) of `/proc/PID/io`.
pub fn io(pid: u32) -> Option<(u64, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(": "))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("rchar")?, field("read_bytes")?))
}

/// The inodes of the directories that process `pid`'s inotify instances watch, one per watch
/// (`/proc/PID/fdinfo`).
pub fn watched_inodes(pid: i32) -> Vec<u64> {
    let mut inodes = Vec::new();
    for fd in fs::read_dir(format!("/proc/{pid}/fdinfo")).unwrap() {
        let info = fs::read_to_string(fd.unwrap().path()).unwrap_or_default();
        let watches = info.lines().filter(|l| l.starts_with("inotify wd:"));
        let ino = |l: &str| {
            let hex = l.split_whitespace().find_map(|w| w.strip_prefix("ino:"))?;
            u64::from_str_radix(hex, 16).ok()
        };
        inodes.extend(watches.filter_map(ino));
    }
    inodes
}
