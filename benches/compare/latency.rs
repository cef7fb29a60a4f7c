//! Live latency: from just before `write()` of a record to its line on the subject's output,
//! at a fixed rate spread over many files. Writes follow a schedule (open loop): a slow
//! subject does not slow the writer down, it only shows larger latencies.

use crate::Ctx;
use crate::corpus::live_dir;
use crate::peers::{self, Inputs, Out};
use crate::records::{Harness, Rng, Session, TextPool};
use crate::subject::{Stream, Subject, marker};
use serde::Serialize;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testkit::stats::quantile;

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub subject: String,
    pub rate: u64,
    pub appends: usize,
    pub files: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Appends whose line never came out within 30 s of the last write.
    pub lost: usize,
}

pub const SUBJECTS: [&str; 4] = [
    "tail -F",
    "transcript-sync",
    "rsyslog imfile",
    "syslog-ng wildcard-file",
];

pub fn run(ctx: &Ctx) -> Vec<Row> {
    let mut rows = Vec::new();
    let baseline = peers::baseline().map(|_| peers::BASELINE);
    for name in SUBJECTS.into_iter().chain(baseline) {
        if name != "tail -F" && !name.starts_with("transcript-sync") && ctx.peers.is_none() {
            continue;
        }
        let state = ctx.fresh_state(name);
        let files = live_dir(&state.path().join("live"), ctx.scale.live_files, 2);
        let mut subject = start(ctx, name, state.path(), &files);
        warm_up(&mut subject, &files);
        for (i, &rate) in ctx.scale.rates.iter().enumerate() {
            let base = (i as u64 + 1) * 1_000_000;
            let row = measure(&mut subject, &files, ctx.scale.appends, rate, base);
            println!(
                "  {:<26} {:>5}/s p50 {:>8.3} ms  p99 {:>8.3} ms  max {:>8.3} ms  lost {}",
                row.subject, row.rate, row.p50_ms, row.p99_ms, row.max_ms, row.lost
            );
            rows.push(row);
            std::thread::sleep(Duration::from_secs(1));
        }
        subject.stop();
        peers::assert_no_system_logger(ctx.had_dev_log);
    }
    rows
}

/// Starts subject `name` on the live files, its output a stream this process reads.
pub fn start(ctx: &Ctx, name: &str, state: &Path, files: &[PathBuf]) -> Subject {
    let live = files[0].parent().expect("live files have a directory");
    let inputs = Inputs {
        root: live,
        patterns: &["*.jsonl"],
        files: files.len(),
    };
    let fifo = state.join("out.fifo");
    let peers = ctx.peers.as_ref();
    match name {
        "tail -F" => Subject::start(name, &mut peers::tail_follow(files), Stream::Stdout),
        "transcript-sync" | peers::BASELINE => {
            let bin = peers::ts_binary(name);
            let mut cmd = peers::ts_daemon_of(&bin, &state.join("archive.db"), live);
            let s = Subject::start(name, &mut cmd, Stream::Stdout);
            let caught_up = s.logs.find("caught up", Duration::from_secs(120));
            assert!(caught_up.is_some(), "no 'caught up':\n{}", s.logs.tail(20));
            s
        }
        "rsyslog imfile" => {
            let cmd = &mut peers
                .expect("peers")
                .rsyslog(state, &inputs, &Out::Fifo(&fifo));
            Subject::start(name, cmd, Stream::Fifo(fifo))
        }
        _ => {
            let cmd = &mut peers
                .expect("peers")
                .syslog_ng(state, &inputs, &Out::Fifo(&fifo));
            Subject::start(name, cmd, Stream::Fifo(fifo))
        }
    }
}

/// Appends a warm-up line to every file whose line has not come out yet, every 250 ms, until
/// all have: the subject follows every file before anything is timed.
pub fn warm_up(subject: &mut Subject, files: &[PathBuf]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let seen = subject.output.with(|s| s.warm.clone());
        if seen.len() == files.len() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} showed warm-up lines of only {} of {} files in 60 s; its log:\n{}",
            subject.name,
            seen.len(),
            files.len(),
            subject.logs.tail(20)
        );
        subject.check_alive();
        for (i, path) in files.iter().enumerate() {
            if !seen.contains(&(i as u64)) {
                let line = format!(
                    "{{\"mk\":\"{}\",\"type\":\"warm-up\"}}\n",
                    marker(b'w', i as u64)
                );
                append(path).write_all(line.as_bytes()).expect("appending");
            }
        }
        let want = files.len();
        subject
            .output
            .wait(Duration::from_millis(250), |s| s.warm.len() == want);
    }
}

fn append(path: &Path) -> File {
    OpenOptions::new()
        .append(true)
        .open(path)
        .expect("opening a live file")
}

/// `n` appends at `rate` per second, file after file; ids from `base`.
fn measure(subject: &mut Subject, files: &[PathBuf], n: usize, rate: u64, base: u64) -> Row {
    let lines = marked_lines(files.len(), n, base);
    let mut handles: Vec<File> = files.iter().map(|p| append(p)).collect();
    let before = subject
        .output
        .with(|s| s.per_tag.get(&b'm').copied().unwrap_or(0));
    let gap = Duration::from_secs_f64(1.0 / rate as f64);
    let mut sent = Vec::with_capacity(n);
    let start = Instant::now();
    for (k, (file, line)) in lines.iter().enumerate() {
        let due = start + gap * k as u32;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let t = Instant::now();
        handles[*file].write_all(line).expect("appending a record");
        sent.push(t);
        if k % 1000 == 999 {
            subject.check_alive();
        }
    }
    let want = before + n as u64;
    subject.output.wait(Duration::from_secs(30), |s| {
        s.per_tag.get(&b'm').copied().unwrap_or(0) >= want
    });
    let arrived: HashMap<u64, Instant> = subject.output.with(|s| {
        s.arrivals
            .iter()
            .filter(|a| a.tag == b'm' && a.id >= base && a.id < base + n as u64)
            .map(|a| (a.id, a.at))
            .collect()
    });
    let mut ms: Vec<f64> = (0..n)
        .filter_map(|k| {
            arrived
                .get(&(base + k as u64))
                .map(|&at| (at - sent[k]).as_secs_f64() * 1e3)
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    Row {
        subject: subject.name.clone(),
        rate,
        appends: n,
        files: files.len(),
        p50_ms: quantile(&ms, 0.50),
        p99_ms: quantile(&ms, 0.99),
        max_ms: ms.last().copied().unwrap_or(f64::NAN),
        lost: n - ms.len(),
    }
}

/// Transcript records of 0.5–5 KB, each with its marker, for files in turn.
fn marked_lines(files: usize, n: usize, base: u64) -> Vec<(usize, Vec<u8>)> {
    let pool = TextPool::new(base);
    let mut rng = Rng::new(base);
    let mut sessions: Vec<Session> = (0..files)
        .map(|i| {
            let harness = if i % 5 < 3 {
                Harness::ClaudeCode
            } else {
                Harness::Codex
            };
            Session::new(harness, &mut rng, i)
        })
        .collect();
    (0..n)
        .map(|k| {
            let file = k % files;
            let mut line =
                sessions[file].marked_line(&mut rng, &pool, &marker(b'm', base + k as u64));
            line.push(b'\n');
            (file, line)
        })
        .collect()
}
