//! The session index's CPU per live record: a daemon (`run`) follows one Claude Code
//! transcript to which records of the corpus are appended at a steady rate, and the CPU time
//! of its index threads (`session index`, `index (idle)`) is read from `/proc` once every
//! record is indexed.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Records appended, and how many a second.
pub const RECORDS: usize = 1_000;
const PER_SECOND: u64 = 200;

/// The index threads' CPU time per appended record, in microseconds, for the daemon `bin`.
pub fn cpu_per_record(bin: &Path, scratch: &Path, lines: &[Vec<u8>]) -> f64 {
    let dir = scratch.join("live");
    let _ = fs::remove_dir_all(&dir);
    let file = dir.join("home/.claude/projects/-live/5e551017-0000-4000-8000-000000000001.jsonl");
    fs::create_dir_all(file.parent().expect("a parent")).expect("creating the live home");
    fs::write(&file, b"").expect("creating the live transcript");
    let db = dir.join("archive.db");
    let mut daemon = Command::new(bin)
        .args(["run", "--db"])
        .arg(&db)
        .env("HOME", dir.join("home"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("starting transcript-sync run");
    await_indexed(&db, 0, &mut daemon);
    let before = index_cpu(daemon.id());
    append(&file, lines);
    await_indexed(&db, RECORDS as i64, &mut daemon);
    let cpu = index_cpu(daemon.id()) - before;
    let _ = daemon.kill();
    let _ = daemon.wait();
    cpu.as_secs_f64() * 1e6 / RECORDS as f64
}

/// Appends [`RECORDS`] of `lines` to `file`, [`PER_SECOND`] a second.
fn append(file: &Path, lines: &[Vec<u8>]) {
    let mut out = OpenOptions::new()
        .append(true)
        .open(file)
        .expect("opening the live transcript");
    let start = Instant::now();
    for (i, line) in lines.iter().cycle().take(RECORDS).enumerate() {
        let due = start + Duration::from_micros(i as u64 * 1_000_000 / PER_SECOND);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        out.write_all(line).expect("appending a record");
    }
}

/// Waits until the archive at `db` holds at least `records` records and its index has every
/// one of them.
fn await_indexed(db: &Path, records: i64, daemon: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some((last, done)) = progress(db)
            && last >= records
            && done >= last
        {
            return;
        }
        let exited = daemon.try_wait().expect("polling the daemon");
        assert!(exited.is_none(), "the daemon ended: {exited:?}");
        assert!(Instant::now() < deadline, "not indexed within 2 minutes");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The archive's last seq and the index's, once both files are there.
fn progress(db: &Path) -> Option<(i64, i64)> {
    let index = db.with_file_name("archive.db-index");
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let archive = rusqlite::Connection::open_with_flags(db, flags).ok()?;
    let last: Option<i64> =
        (archive.query_row("SELECT max(seq) FROM records", [], |r| r.get(0))).ok()?;
    let index = rusqlite::Connection::open_with_flags(index, flags).ok()?;
    let done = (index.query_row("SELECT seq FROM progress", [], |r| r.get(0))).ok()?;
    Some((last.unwrap_or(0), done))
}

/// CPU time of the daemon's index threads, from their `schedstat` (nanoseconds).
fn index_cpu(pid: u32) -> Duration {
    let mut ns = 0;
    for task in fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
    {
        let path = task.expect("a task").path();
        let comm = fs::read_to_string(path.join("comm")).unwrap_or_default();
        if !matches!(comm.trim(), "session index" | "index (idle)") {
            continue;
        }
        let stat = fs::read_to_string(path.join("schedstat")).unwrap_or_default();
        ns += (stat.split_whitespace().next()).map_or(0, |v| v.parse::<u64>().unwrap_or(0));
    }
    Duration::from_nanos(ns)
}

/// The first [`RECORDS`] records of the Claude Code transcripts under `corpus`, with their
/// newlines.
pub fn claude_lines(corpus: &Path) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    for path in crate::text::transcripts(&corpus.join("claude")) {
        let text = fs::read(&path).expect("reading a transcript");
        lines.extend(text.split_inclusive(|b| *b == b'\n').map(<[u8]>::to_vec));
        if lines.len() >= RECORDS {
            break;
        }
    }
    lines.truncate(RECORDS);
    lines
}
