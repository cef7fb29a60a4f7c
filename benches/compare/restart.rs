//! Restart and idle cost: the daemon started on transcripts it has archived already (time to
//! `caught up`, content bytes read), and the CPU time it and its peers use while nothing
//! changes.

use crate::backfill::{LineCounter, durable_peers};
use crate::corpus::Corpus;
use crate::peers;
use crate::subject::{Stream, Subject};
use crate::{Ctx, cpu, log_value, procfs};
use serde::Serialize;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Serialize)]
pub struct Restart {
    pub files: usize,
    /// `run --once` over the files into a fresh archive, the archive the restarts start on.
    pub first_archive_secs: f64,
    pub runs: Vec<RestartRun>,
    pub median_secs: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct RestartRun {
    /// From spawn to the `caught up` log line.
    pub secs: f64,
    /// `bytes_read=` of the `backfill complete` line: transcript content read.
    pub content_bytes_read: u64,
    pub unchanged: u64,
    pub opened: u64,
    /// `/proc/PID/io` at `caught up`: every read (archive, /proc, …) and storage reads.
    pub rchar: u64,
    pub read_bytes: u64,
}

pub fn restart(ctx: &Ctx, corpus: &Corpus) -> Restart {
    let state = ctx.fresh_state("restart");
    let db = state.path().join("archive.db");
    let first_archive_secs = archive_once(&db, &corpus.dir);
    let runs: Vec<RestartRun> = (0..3).map(|_| restart_once(&db, &corpus.dir)).collect();
    for r in &runs {
        println!(
            "  restart over {} archived files: caught up in {:.3} s, content bytes read {}, \
             rchar {}, read_bytes {}",
            corpus.files.len(),
            r.secs,
            r.content_bytes_read,
            r.rchar,
            r.read_bytes
        );
    }
    let mut secs: Vec<f64> = runs.iter().map(|r| r.secs).collect();
    secs.sort_by(f64::total_cmp);
    Restart {
        files: corpus.files.len(),
        first_archive_secs,
        median_secs: secs[secs.len() / 2],
        runs,
    }
}

/// `run --once` into `db`; its wall time.
fn archive_once(db: &Path, dir: &Path) -> f64 {
    let start = Instant::now();
    let out = peers::ts_once(db, dir)
        .stdout(Stdio::null())
        .output()
        .expect("running transcript-sync run --once");
    assert!(
        out.status.success(),
        "run --once failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    start.elapsed().as_secs_f64()
}

fn restart_once(db: &Path, dir: &Path) -> RestartRun {
    let mut cmd = peers::ts_daemon(db, dir);
    let subject = Subject::start("transcript-sync", &mut cmd, Stream::None);
    let (at, _) = subject
        .logs
        .find("caught up", Duration::from_secs(120))
        .unwrap_or_else(|| panic!("no 'caught up':\n{}", subject.logs.tail(20)));
    let (rchar, read_bytes) = procfs::io(subject.pid()).unwrap_or((0, 0));
    let backfill = subject
        .logs
        .find("backfill complete", Duration::from_secs(1))
        .map(|(_, line)| line)
        .unwrap_or_default();
    let run = RestartRun {
        secs: (at - subject.started).as_secs_f64(),
        content_bytes_read: log_value(&backfill, "bytes_read").unwrap_or(u64::MAX),
        unchanged: log_value(&backfill, "unchanged").unwrap_or(0),
        opened: log_value(&backfill, "opened").unwrap_or(0),
        rchar,
        read_bytes,
    };
    subject.stop();
    run
}

#[derive(Clone, Debug, Serialize)]
pub struct IdleRow {
    pub subject: String,
    pub files: usize,
    pub secs: f64,
    /// utime + stime from /proc/PID/stat (clock ticks).
    pub cpu_ms: f64,
    /// The same from the threads' schedstat (nanoseconds).
    pub cpu_ms_precise: f64,
    /// Percent of one core, from schedstat unless utime+stime shows more than its 10 ms
    /// rounding can explain: schedstat misses threads that ended within the window (syslog-ng's
    /// come and go).
    pub core_percent: f64,
}

/// Starts every subject on the same unchanging files, waits until each has caught up, then
/// samples their CPU time over the idle window (they run side by side: idle, they do not
/// compete).
pub fn idle(ctx: &Ctx, corpus: &Corpus) -> Vec<IdleRow> {
    let paths = corpus.paths();
    let mut subjects: Vec<(Subject, tempfile::TempDir)> = Vec::new();
    let ts_state = ctx.fresh_state("idle transcript-sync");
    let db = ts_state.path().join("archive.db");
    archive_once(&db, &corpus.dir);
    let mut cmd = peers::ts_daemon(&db, &corpus.dir);
    let ts = Subject::start("transcript-sync", &mut cmd, Stream::None);
    assert!(
        ts.logs
            .find("caught up", Duration::from_secs(120))
            .is_some()
    );
    subjects.push((ts, ts_state));
    let tail = Subject::start("tail -F", &mut peers::tail_follow(&paths), Stream::None);
    subjects.push((tail, ctx.fresh_state("idle tail")));
    for (name, state, out, mut cmd) in durable_peers(ctx, corpus) {
        let mut s = Subject::start(name, &mut cmd, Stream::None);
        wait_for_lines(&mut s, &out, corpus.records);
        subjects.push((s, state));
    }
    std::thread::sleep(Duration::from_secs(2));
    let before: Vec<_> = subjects.iter().map(|(s, _)| cpu(s.pid())).collect();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(ctx.scale.idle_secs));
    let after: Vec<_> = subjects.iter().map(|(s, _)| cpu(s.pid())).collect();
    let secs = start.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    for (((s, _), b), a) in subjects.iter().zip(&before).zip(&after) {
        let cpu_ms = (a.0 - b.0).as_secs_f64() * 1e3;
        let precise = (a.1 - b.1).as_secs_f64() * 1e3;
        let row = IdleRow {
            subject: s.name.clone(),
            files: corpus.files.len(),
            secs,
            cpu_ms,
            cpu_ms_precise: precise,
            core_percent: if cpu_ms > precise + 10.0 {
                cpu_ms
            } else {
                precise
            } / 1e3
                / secs
                * 100.0,
        };
        println!(
            "  idle {:<26} {:>8.1} ms CPU (schedstat), {:.0} ms (utime+stime) in {:.0} s: \
             {:.4} % of a core",
            row.subject, precise, cpu_ms, secs, row.core_percent
        );
        rows.push(row);
    }
    for (s, _) in subjects {
        s.stop();
    }
    peers::assert_no_system_logger(ctx.had_dev_log);
    rows
}

fn cpu(pid: u32) -> (Duration, Duration) {
    (
        cpu::cpu_time(pid).unwrap_or_default(),
        cpu::cpu_time_precise(pid).unwrap_or_default(),
    )
}

fn wait_for_lines(subject: &mut Subject, out: &Path, lines: u64) {
    let mut counter = LineCounter::default();
    let deadline = Instant::now() + Duration::from_secs(300);
    while counter.lines < lines {
        assert!(
            Instant::now() < deadline,
            "{} wrote {} of {lines} lines",
            subject.name,
            counter.lines
        );
        subject.check_alive();
        counter.poll(out);
        std::thread::sleep(Duration::from_millis(20));
    }
}
