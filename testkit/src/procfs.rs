//! What the kernel says about a process besides its CPU time: memory, threads, bytes read.

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
