//! CPU time: of a running process (from `/proc`), of a process and its children, and of
//! every child this process has waited for (from `getrusage`).

use std::fs;
use std::time::Duration;

/// CPU time of the process, all threads, from `/proc/PID/stat` (utime + stime): clock-tick
/// resolution, usually 10 ms.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let fields = stat_fields(pid)?;
    Some(ticks(fields[11] + fields[12]))
}

/// CPU time summed over the process's threads from `/proc/PID/task/*/schedstat`, with
/// nanosecond resolution (threads that ended are not counted).
pub fn cpu_time_precise(pid: u32) -> Option<Duration> {
    let mut total = 0u64;
    for task in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
        // A thread that ends between the listing and the read is one that ended.
        let Ok(text) = fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(total))
}

/// CPU time of `parent` so far with its children: its own, that of the children it has
/// reaped, and that of its live children (one level down); zero when it is not running.
pub fn cpu_time_with_children(parent: u32) -> Duration {
    let mut total = stat_fields(parent).map_or(0, |f| f[11] + f[12] + f[13] + f[14]);
    let children = fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat_fields)
        .filter(|f| f[1] == u64::from(parent));
    total += children.map(|f| f[11] + f[12]).sum::<u64>();
    ticks(total)
}

/// CPU seconds (user + system) of every child this process has waited for so far.
pub fn children_cpu_secs() -> f64 {
    // SAFETY: getrusage only writes the struct it is given, which lives on this stack.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    rusage_secs(&usage)
}

/// CPU seconds (user + system) of a `rusage`, as `wait4` or `getrusage` filled it.
pub fn rusage_secs(usage: &libc::rusage) -> f64 {
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

/// The numeric fields of `/proc/PID/stat` after the command name, from the state on (the
/// state itself as 0): index 1 is the parent, 11–14 utime, stime, cutime, cstime in ticks.
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after it start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .take(15)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    (fields.len() == 15).then_some(fields)
}

/// `n` clock ticks as a duration.
fn ticks(n: u64) -> Duration {
    // SAFETY: sysconf reads a constant of the system and touches no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos(n * 1_000_000_000 / hz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_cpu_time_and_a_nonexistent_one_has_none() {
        let me = std::process::id();
        assert!(cpu_time(me).is_some());
        assert!(cpu_time_precise(me).is_some_and(|d| d > Duration::ZERO));
        assert_eq!(cpu_time(u32::MAX), None);
    }
}
