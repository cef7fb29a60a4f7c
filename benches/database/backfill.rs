//! Backfill: `run --once` over the database, timed and measured.

use crate::BIN;
use crate::read::read_only;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Instant, SystemTime};
use testkit::cpu;
use testkit::procfs;
use transcript_sync::RECORDS_COMMITTED;

pub(crate) struct Backfill {
    pub(crate) wall: f64,
    /// From the start to the log's line saying every record is committed.
    pub(crate) committed: Option<f64>,
    pub(crate) cpu: f64,
    pub(crate) peak_mib: f64,
    /// `rchar`, read once it exited and before it was reaped.
    pub(crate) read: u64,
    /// The daemon's reads of the database (its log's `database read` lines).
    pub(crate) reads: usize,
    pub(crate) records: u64,
    pub(crate) sessions: u64,
    /// `sources.bytes` and `sources.stored`: the records as read and as stored.
    pub(crate) record_bytes: u64,
    pub(crate) record_stored: u64,
    /// The latest states, zstd frames in `snapshots`.
    pub(crate) states: u64,
    pub(crate) state_bytes: u64,
    pub(crate) state_stored: u64,
    pub(crate) archive: u64,
    pub(crate) index: u64,
}

/// `run --once` into a fresh archive at `archive`, under `home`; timed from spawn to exit,
/// its CPU and peak RSS from `wait4`.
pub(crate) fn backfill(home: &Path, archive: &Path) -> Backfill {
    let log = archive.with_extension("once.log");
    let mut cmd = daemon_cmd(home, archive);
    cmd.arg("--once")
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log).expect("a log file"));
    eprintln!("backfill: run --once");
    let spawned = SystemTime::now();
    let start = Instant::now();
    // Reaped by `wait_measured`, which also gives its resource usage; std's wait() does not.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().expect("starting transcript-sync run --once");
    let exited = wait_measured(child.id());
    let wall = start.elapsed().as_secs_f64();
    let text = fs::read_to_string(&log).unwrap_or_default();
    assert!(exited.status == 0, "run --once failed:\n{text}");
    let committed = (text.lines())
        .find(|l| l.contains(RECORDS_COMMITTED))
        .and_then(|l| humantime::parse_rfc3339(l.split_whitespace().next()?).ok())
        .and_then(|at| at.duration_since(spawned).ok())
        .map(|d| d.as_secs_f64());
    let conn = read_only(archive);
    let n = |sql: &str| -> u64 {
        (conn.query_row(sql, [], |r| r.get::<_, Option<i64>>(0)))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap_or(0) as u64
    };
    let size = |p: &Path| fs::metadata(p).map_or(0, |m| m.len());
    let with_wal = |p: &Path| size(p) + size(&with_suffix(p, "-wal"));
    Backfill {
        wall,
        committed,
        cpu: cpu::rusage_secs(&exited.usage),
        peak_mib: exited.usage.ru_maxrss as f64 / 1024.0,
        read: exited.read,
        reads: text.matches("database read").count(),
        records: n("SELECT count(*) FROM records"),
        sessions: n("SELECT count(DISTINCT source_id) FROM snapshots"),
        record_bytes: n("SELECT sum(bytes) FROM sources"),
        record_stored: n("SELECT sum(stored) FROM sources"),
        states: n("SELECT count(*) FROM snapshots"),
        state_bytes: n("SELECT sum(size) FROM snapshots"),
        state_stored: n("SELECT sum(length(bytes)) FROM snapshots"),
        archive: with_wal(archive),
        index: with_wal(&with_suffix(archive, "-index")),
    }
}

/// How a child ended, what it used, and what it read.
struct Exited {
    status: i32,
    usage: libc::rusage,
    read: u64,
}

/// Waits for child `pid` to exit, reads its `/proc/PID/io` while it is a zombie, then reaps
/// it with `wait4` for its resource usage.
fn wait_measured(pid: u32) -> Exited {
    // SAFETY: waitid and wait4 write only the structs they are given, which live on this
    // stack; the pid is our own child, not reaped before wait4 here.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOWAIT;
        assert_eq!(
            libc::waitid(libc::P_PID, pid, &mut info, flags),
            0,
            "waitid"
        );
        let read = procfs::io(pid).map_or(0, |io| io.0);
        let mut status = 0;
        let mut usage: libc::rusage = std::mem::zeroed();
        let r = libc::wait4(pid as i32, &mut status, 0, &mut usage);
        assert_eq!(r, pid as i32, "wait4");
        let status = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            -1
        };
        Exited {
            status,
            usage,
            read,
        }
    }
}

/// `transcript-sync run` with the built-in watchers under `home`, into `archive`, logging
/// each read of a database.
pub(crate) fn daemon_cmd(home: &Path, archive: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_LOG", "info,transcript_sync::engine::database=debug")
        .args(["run", "--db"])
        .arg(archive);
    cmd
}

/// `path` with `suffix` after its file name, as SQLite names a database's companions.
pub(crate) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.to_owned().into_os_string();
    p.push(suffix);
    PathBuf::from(p)
}
