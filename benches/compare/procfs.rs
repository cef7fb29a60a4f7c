//! What the kernel says about a subject process: peak memory, CPU time, bytes read.

use std::fs;
use std::time::Duration;

/// A `kB` field of `/proc/PID/status` (`VmHWM`, `VmRSS`), in KiB.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// CPU time of the process, all threads, from `/proc/PID/stat` (utime + stime): clock-tick
/// resolution, usually 10 ms.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after it start after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos(ticks * 1_000_000_000 / hz))
}

/// CPU time summed over the process's threads from `/proc/PID/task/*/schedstat`, with
/// nanosecond resolution (threads that ended are not counted).
pub fn cpu_time_precise(pid: u32) -> Option<Duration> {
    let mut total = 0u64;
    for task in fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let path = task.ok()?.path().join("schedstat");
        let text = fs::read_to_string(path).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
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
