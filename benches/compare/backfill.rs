//! Backfill: the whole corpus into a fresh state, for `cat` (the read limit), transcript-sync
//! `run --once` (into a fresh archive), transcript-sync's reader alone (in this process, nothing
//! stored), rsyslog's imfile and syslog-ng's wildcard-file (into an output file).

use crate::Ctx;
use crate::corpus::{Corpus, PATTERNS};
use crate::peers::{self, BATCH_BYTES, Inputs, Out, RECORD_LIMIT};
use crate::subject::{Stream, Subject};
use crate::{cpu, log_value};
use serde::Serialize;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use transcript_sync::RECORDS_COMMITTED;
use transcript_sync::{Archive, Commit, Committer, Engine, EngineOptions, ReadLimits};

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub subject: String,
    pub secs: f64,
    pub mb_per_s: f64,
    pub records_per_s: f64,
    /// Records (or lines) that came out, and whether that is all of them.
    pub records: u64,
    pub complete: bool,
    pub peak_rss_mib: Option<f64>,
    pub cpu_secs: Option<f64>,
    /// What the archive's records take, as a share of their bytes (the index apart).
    pub stored_share: Option<f64>,
    pub note: String,
}

impl Row {
    fn new(subject: &str, corpus: &Corpus, secs: f64, records: u64) -> Row {
        Row {
            subject: subject.to_owned(),
            secs,
            mb_per_s: corpus.bytes as f64 / secs / 1e6,
            records_per_s: records as f64 / secs,
            records,
            complete: records == corpus.records,
            peak_rss_mib: None,
            cpu_secs: None,
            stored_share: None,
            note: String::new(),
        }
    }
}

pub fn run(ctx: &Ctx, corpus: &Corpus) -> Vec<Row> {
    let paths = corpus.paths();
    // Warm the page cache, untimed, before each subject: every subject then reads from
    // memory. Once at the start was not enough: the kernel's proactive reclaim (DAMON, on
    // these machines) dropped much of the corpus from the cache during the minute-long runs
    // before the reader's, which then read from disk at a third of its speed.
    run_cat(&paths);
    let mut rows = vec![cat(corpus, &paths)];
    println!("  {}", summary(&rows[0]));
    let mut names = vec!["transcript-sync"];
    if peers::baseline().is_some() {
        names.push(peers::BASELINE);
    }
    for name in names {
        run_cat(&paths);
        for row in transcript_sync_once(ctx, corpus, name) {
            println!("  {}", summary(&row));
            rows.push(row);
        }
    }
    run_cat(&paths);
    rows.push(reader_only(ctx, corpus));
    println!("  {}", summary(rows.last().expect("just pushed")));
    for (name, _state, out, mut cmd) in durable_peers(ctx, corpus) {
        run_cat(&paths);
        let row = shipper(ctx, name, &mut cmd, &out, corpus);
        println!("  {}", summary(&row));
        rows.push(row);
    }
    rows
}

/// Each durable peer (when installed) with a fresh state directory and its command to forward
/// `corpus` into `out.jsonl` there. Lazy: each state is made (after a `sync`) only when that
/// peer's turn comes.
pub fn durable_peers<'a>(
    ctx: &'a Ctx,
    corpus: &'a Corpus,
) -> impl Iterator<Item = (&'static str, tempfile::TempDir, std::path::PathBuf, Command)> + 'a {
    let peers = ctx.peers.as_ref();
    let names = peers.map_or(&[][..], |_| {
        &["rsyslog imfile", "syslog-ng wildcard-file"][..]
    });
    names.iter().filter_map(move |&name| {
        let peers = peers?;
        let inputs = Inputs {
            root: &corpus.dir,
            patterns: &PATTERNS,
            files: corpus.files.len(),
        };
        let state = ctx.fresh_state(name);
        let out = state.path().join("out.jsonl");
        let cmd = peers.shipper(name, state.path(), &inputs, &Out::File(&out));
        Some((name, state, out, cmd))
    })
}

fn summary(r: &Row) -> String {
    format!(
        "{:<34} {:>7.2} s {:>8.1} MB/s {:>9.0} records/s{}",
        r.subject,
        r.secs,
        r.mb_per_s,
        r.records_per_s,
        if r.complete { "" } else { "  INCOMPLETE" }
    )
}

fn run_cat(paths: &[std::path::PathBuf]) {
    let status = Command::new("cat")
        .args(paths)
        .stdout(Stdio::null())
        .status()
        .expect("running cat");
    assert!(status.success(), "cat failed");
}

fn cat(corpus: &Corpus, paths: &[std::path::PathBuf]) -> Row {
    let start = Instant::now();
    run_cat(paths);
    let mut row = Row::new(
        "cat > /dev/null",
        corpus,
        start.elapsed().as_secs_f64(),
        corpus.records,
    );
    row.note = "read limit: bytes only, no line splitting".into();
    row
}

/// `run --once` into a fresh archive, timed from spawn until every record is committed (the
/// log line saying so, absent from builds before it) and from spawn to exit (the session
/// index caught up too); peak memory and CPU time from `wait4`, what the records take from
/// the archive.
fn transcript_sync_once(ctx: &Ctx, corpus: &Corpus, name: &str) -> Vec<Row> {
    let state = ctx.fresh_state(name);
    let db = state.path().join("archive.db");
    let log = state.path().join("stderr.log");
    let mut cmd = peers::ts_once_of(&peers::ts_binary(name), &db, &corpus.dir);
    cmd.stdout(Stdio::null())
        .stderr(File::create(&log).expect("a log file"));
    let start = Instant::now();
    let spawned = std::time::SystemTime::now();
    // Reaped by wait4, which also gives its resource usage; std's wait() does not.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().expect("starting transcript-sync");
    let (status, usage) = wait4(child.id());
    let secs = start.elapsed().as_secs_f64();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(status == 0, "transcript-sync run --once failed:\n{text}");
    let line = text
        .lines()
        .find(|l| l.contains("pass complete"))
        .unwrap_or_default();
    let records = log_value(line, "records").unwrap_or(0);
    let committed = (text.lines())
        .find(|l| l.contains(RECORDS_COMMITTED))
        .and_then(|l| humantime::parse_rfc3339(l.split_whitespace().next()?).ok())
        .and_then(|at| at.duration_since(spawned).ok());
    let mut rows = Vec::new();
    if let Some(at) = committed {
        let mut row = Row::new(
            &format!("{name} run --once"),
            corpus,
            at.as_secs_f64(),
            records,
        );
        row.note = "until every record is committed".into();
        rows.push(row);
    }
    let mut row = Row::new(
        &format!("{name} run --once, indexed"),
        corpus,
        secs,
        records,
    );
    row.peak_rss_mib = Some(usage.ru_maxrss as f64 / 1024.0);
    row.cpu_secs = Some(cpu::rusage_secs(&usage));
    let archive = dir_size(state.path()) as f64 / 1e6;
    let stored = stored(&db);
    row.stored_share = stored.map(|(bytes, stored)| stored as f64 / bytes.max(1) as f64);
    row.note = format!(
        "to exit, the session index caught up; {archive:.0} MB on disk{}",
        stored.map_or_else(String::new, |s| format!(", {}", storage(s)))
    );
    rows.push(row);
    rows
}

/// The bytes of the records in the archive at `db`, and what storing them takes; `None` for
/// an archive without the figures (a build before them).
fn stored(db: &Path) -> Option<(i64, i64)> {
    let conn = rusqlite::Connection::open(db).ok()?;
    conn.query_row("SELECT sum(bytes), sum(stored) FROM sources", [], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })
    .ok()
}

/// What the records take, said briefly.
fn storage((bytes, stored): (i64, i64)) -> String {
    format!(
        "records {:.0} MB stored in {:.0} MB ({:.1} %), the rest is the session index",
        bytes as f64 / 1e6,
        stored as f64 / 1e6,
        100.0 * stored as f64 / bytes.max(1) as f64
    )
}

fn wait4(pid: u32) -> (i32, libc::rusage) {
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
    assert_eq!(r, pid as i32, "wait4");
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    (code, usage)
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Counts the records of each commit and drops it: the engine reads, validates and batches
/// exactly as it does for the archive, and nothing is stored.
struct Discard(Arc<AtomicU64>);

impl Committer for Discard {
    fn submit(&mut self, commit: Commit) -> transcript_sync::Result<()> {
        let n: usize = commit.records().map(|b| b.records.len()).sum();
        self.0.fetch_add(n as u64, Ordering::Relaxed);
        Ok(())
    }

    fn flush(&mut self) -> transcript_sync::Result<()> {
        Ok(())
    }
}

/// Passes of the reader alone; the fastest is reported. It is the one subject measured in
/// this process and bound by one core alone, so a pass slowed by a neighbour on a shared
/// machine says more about the machine than about the reader (its first pass ran at a third
/// of its speed in some runs, the others at full speed).
pub const READER_PASSES: usize = 3;

fn reader_only(ctx: &Ctx, corpus: &Corpus) -> Row {
    let passes: Vec<(f64, u64, u64)> = (0..READER_PASSES)
        .map(|i| reader_pass(ctx, corpus, i))
        .collect();
    let (secs, records, bytes_read) = passes
        .iter()
        .copied()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("at least one pass");
    let all: Vec<String> = passes.iter().map(|p| format!("{:.2} s", p.0)).collect();
    let mut row = Row::new("transcript-sync reader only", corpus, secs, records);
    row.note = format!(
        "in-process Engine, commits discarded; fastest of {READER_PASSES} passes ({}); \
         bytes_read={bytes_read}",
        all.join(", ")
    );
    row
}

/// One pass of the reader over the corpus into a scratch archive: its time, the records it
/// gave, and the bytes it read.
fn reader_pass(ctx: &Ctx, corpus: &Corpus, pass: usize) -> (f64, u64, u64) {
    let state = ctx.fresh_state(&format!("reader-{pass}"));
    let reads = Archive::open(&state.path().join("reads.db")).expect("a scratch archive");
    let count = Arc::new(AtomicU64::new(0));
    let options = EngineOptions {
        limits: ReadLimits {
            record_limit: RECORD_LIMIT,
            batch_bytes: BATCH_BYTES,
        },
    };
    let mut engine = Engine::new(reads, Box::new(Discard(Arc::clone(&count))), options)
        .expect("an engine over a scratch archive");
    let roots = transcript_sync::watch_roots(std::slice::from_ref(&corpus.dir), "**/*.jsonl")
        .expect("roots for the corpus");
    let start = Instant::now();
    let report = engine.run_pass(&roots).expect("a reader-only pass");
    let secs = start.elapsed().as_secs_f64();
    (secs, count.load(Ordering::Relaxed), report.bytes_read)
}

/// Starts a log shipper on the corpus and times it until its output file holds a line for
/// every record, or it stops making progress for 30 s.
fn shipper(ctx: &Ctx, name: &str, cmd: &mut Command, out: &Path, corpus: &Corpus) -> Row {
    let mut subject = Subject::start(name, cmd, Stream::None);
    let mut counter = LineCounter::default();
    let mut last_growth = Instant::now();
    let mut done_at = None;
    while last_growth.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
        subject.check_alive();
        if counter.poll(out) {
            last_growth = Instant::now();
        }
        if counter.lines >= corpus.records && counter.bytes >= corpus.bytes {
            done_at = Some(Instant::now());
            break;
        }
    }
    let end = done_at.unwrap_or(last_growth);
    let secs = (end - subject.started).as_secs_f64();
    let peak = subject.peak_rss_kib().map(|k| k as f64 / 1024.0);
    let cpu = cpu::cpu_time(subject.pid()).map(|d| d.as_secs_f64());
    subject.stop();
    peers::assert_no_system_logger(ctx.had_dev_log);
    let mut row = Row::new(name, corpus, secs, counter.lines);
    row.complete = done_at.is_some() && counter.lines == corpus.records;
    row.peak_rss_mib = peak;
    row.cpu_secs = cpu;
    row.note = format!(
        "{} lines, {} bytes out (corpus: {} records, {} bytes){}",
        counter.lines,
        counter.bytes,
        corpus.records,
        corpus.bytes,
        if done_at.is_none() {
            "; stalled for 30 s"
        } else {
            ""
        }
    );
    row
}

/// Counts the lines of a growing file as it grows.
#[derive(Default)]
pub struct LineCounter {
    file: Option<File>,
    buf: Vec<u8>,
    pub lines: u64,
    pub bytes: u64,
}

impl LineCounter {
    /// Reads what was added since the last call; true when there was something.
    pub fn poll(&mut self, path: &Path) -> bool {
        if self.file.is_none() {
            self.file = File::open(path).ok();
            self.buf = vec![0; 4 << 20];
        }
        let Some(file) = self.file.as_mut() else {
            return false;
        };
        let mut grew = false;
        while let Ok(n) = file.read(&mut self.buf) {
            if n == 0 {
                break;
            }
            grew = true;
            self.bytes += n as u64;
            self.lines += memchr::memchr_iter(b'\n', &self.buf[..n]).count() as u64;
        }
        grew
    }
}
