//! Append-to-tap latency: the time from `write()` of a record to its line on a subscriber's
//! stdout, for `transcript-sync run --sink stdout` (which commits each record to the archive
//! before printing it) beside GNU `tail -F` (which only copies bytes), in the same run.
//!
//! `cargo bench --bench latency` (`LATENCY_APPENDS`, default 1000, at `LATENCY_RATE` per
//! second, default 100). The timing process is this one; each subject is a separate process.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};
use testkit::appends::{index_of, record};
use testkit::env::env_or;
use testkit::stats::quantile;

/// A subscriber process and its stdout.
struct Subject {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Subject {
    fn start(cmd: &mut Command) -> Subject {
        let mut child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting a subject");
        let out = BufReader::new(child.stdout.take().expect("piped stdout"));
        Subject { child, out }
    }
}

/// Appends `n` records to `file` at `rate` per second, one at a time, and times each until a
/// line holding its marker comes out of the subject's stdout.
fn measure(subject: &mut Subject, file: &Path, n: u64, rate: u64) -> Vec<f64> {
    let out = &mut subject.out;
    let mut f = OpenOptions::new().append(true).open(file).unwrap();
    let mut line = String::new();
    let gap = Duration::from_secs_f64(1.0 / rate as f64);
    let mut lat = Vec::with_capacity(n as usize);
    for i in 0..n {
        let record = record(i, 200);
        let next = Instant::now() + gap;
        let start = Instant::now();
        f.write_all(record.as_bytes()).unwrap();
        loop {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "subject closed its output"
            );
            if index_of(&line) == Some(i) {
                break;
            }
        }
        lat.push(start.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    lat
}

/// Appends warm-up lines until the subject shows one, so start-up is not timed (a subscriber
/// that starts at the end of the file may miss lines written before it looked).
fn warm_up(subject: &mut Subject, file: &Path) {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = std::sync::Arc::clone(&done);
    let path = file.to_owned();
    let writer = std::thread::spawn(move || {
        let mut f = OpenOptions::new().append(true).open(path).unwrap();
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            f.write_all(b"{\"warm\":1}\n").unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let mut line = String::new();
    assert!(
        subject.out.read_line(&mut line).unwrap() > 0,
        "subject closed its output"
    );
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}

fn summary(name: &str, mut lat: Vec<f64>) {
    lat.sort_by(f64::total_cmp);
    println!(
        "{name:<40} {:>8.3} {:>8.3} {:>8.3}",
        quantile(&lat, 0.5),
        quantile(&lat, 0.99),
        lat[lat.len() - 1]
    );
}

fn main() {
    let n = env_or("LATENCY_APPENDS", 1000);
    let rate = env_or("LATENCY_RATE", 100);
    let dir = tempfile::tempdir().unwrap();
    let watch = dir.path().join("watch");
    std::fs::create_dir_all(&watch).unwrap();
    println!("{n} appends of ~220 bytes at {rate}/s; milliseconds from write() to the line");
    println!("{:<40} {:>8} {:>8} {:>8}", "subject", "p50", "p99", "max");

    let tail_file = watch.join("tail.log");
    std::fs::write(&tail_file, b"").unwrap();
    let mut tail = Subject::start(
        Command::new("tail")
            .args(["-F", "-n", "0"])
            .arg(&tail_file)
            .stderr(Stdio::null()),
    );
    warm_up(&mut tail, &tail_file);
    let lat = measure(&mut tail, &tail_file, n, rate);
    summary("tail -F (bytes only)", lat);
    let _ = tail.child.kill();

    let ts_file = watch.join("session.jsonl");
    std::fs::write(&ts_file, b"").unwrap();
    let mut ts = Subject::start(
        Command::new(env!("CARGO_BIN_EXE_transcript-sync"))
            .args(["run", "--sink", "stdout", "--db"])
            .arg(dir.path().join("archive.db"))
            .arg("--watch")
            .arg(&watch)
            .env("RUST_LOG", "warn"),
    );
    warm_up(&mut ts, &ts_file);
    let lat = measure(&mut ts, &ts_file, n, rate);
    summary("transcript-sync (committed, then tapped)", lat);
    unsafe { libc::kill(ts.child.id() as i32, libc::SIGTERM) };
    let _ = ts.child.wait();
}
