//! An HTTP collector down while records are appended: a daemon (`run`) whose sink points at a
//! port where nothing listens, records appended at a steady rate, the daemon's RSS sampled
//! throughout; then the collector starts on that port, the catch-up is timed until `status`
//! shows the sink without lag, and the keys the collector counted are checked against the
//! archive's.

use crate::Ctx;
use rusqlite::{Connection, OpenFlags};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use testkit::collector::{Body, Collector, Key, Tally};
use testkit::daemon::{Daemon, TapReader};
use testkit::ports::free_port;
use testkit::procfs;
use testkit::records::{Rng, TextPool};

/// Files the records are appended to, in turn.
const FILES: usize = 4;
/// Bytes of text in each appended record (about 1 KiB as a JSON line).
const TEXT_BYTES: usize = 940;
/// How often the daemon's RSS is read.
const RSS_EVERY: Duration = Duration::from_secs(5);
/// The sink's name in the daemon's configuration.
const SINK: &str = "collector";

/// One reading during the outage.
struct Reading {
    at: Duration,
    rss_kib: u64,
    /// The sink's lag, read at some of the readings only.
    lag: Option<Lag>,
}

/// A sink's lag as `status --json` gives it: records, and their bytes where `status` sums
/// them (it stops past a bound of records, and gives null).
#[derive(Clone, Copy)]
struct Lag {
    records: i64,
    bytes: Option<i64>,
}

/// What the catch-up took.
struct CatchUp {
    /// From the collector's start to its first request (the sink's retry pause).
    first_request: Duration,
    /// From the collector's start to `status` showing no lag.
    caught_up: Duration,
    rss_after_kib: u64,
    hwm_kib: u64,
}

pub fn run(ctx: &Ctx, secs: u64, rate: u64, md: &mut String) {
    let dir = ctx.scratch.join("outage");
    let files = live_files(&dir.join("live"));
    let db = dir.join("archive.db");
    let port = free_port();
    let config = write_config(&dir, port);
    let daemon = start_daemon(ctx, &db, &dir.join("live"), &config);
    let pid = daemon.child.id();
    println!("outage: daemon {pid} up, nothing on port {port}; {secs} s at {rate}/s");
    let appender = Appender::start(files, rate);
    let readings = watch(ctx, &db, pid, Duration::from_secs(secs));
    let (appended, appended_bytes) = appender.stop();
    wait_archived(&db, appended);
    let lag_at_end = (sink_lag(ctx, &db).records, bytes_waiting(&db));
    let collector = Collector::listen(port, Body::CountKeys);
    let catch_up = catch_up(ctx, &db, &collector, pid);
    let log = daemon.log_book();
    let (status, _) = daemon.terminate();
    assert!(status.success(), "the daemon exited with {status}");
    let tally = collector.take();
    let log = log.text();
    let outcome = Outcome {
        secs,
        rate,
        appended,
        appended_bytes,
        lag_at_end,
        readings,
        catch_up,
        check: check(&db, &tally),
        recovered: log_line(&log, "delivering again after"),
        tally,
    };
    outcome.report(md);
}

/// `FILES` empty transcript files under `live`, there before the daemon starts.
fn live_files(live: &Path) -> Vec<PathBuf> {
    fs::create_dir_all(live).expect("creating the live directory");
    (0..FILES)
        .map(|i| {
            let path = live.join(format!("session-{i}.jsonl"));
            File::create(&path).expect("creating a live file");
            path
        })
        .collect()
}

fn write_config(dir: &Path, port: u16) -> PathBuf {
    let path = dir.join("config.toml");
    let table = format!(
        "[[sink]]\nname = \"{SINK}\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/in\"\n\
         flush_interval = \"1s\"\n"
    );
    fs::write(&path, table).expect("writing config.toml");
    path
}

/// The daemon under test, `run --db DB --watch LIVE --config CONFIG`; returns once it has
/// caught up with the (empty) files. Killed if the benchmark ends before it is stopped.
fn start_daemon(ctx: &Ctx, db: &Path, live: &Path, config: &Path) -> Daemon {
    let mut cmd = ctx.ts();
    cmd.args(["run", "--db"])
        .arg(db)
        .arg("--watch")
        .arg(live)
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "info");
    let daemon = Daemon::spawn(cmd, TapReader::Stall);
    daemon.wait_log("caught up");
    daemon
}

/// Appends records at a steady rate, in turn to each file, until stopped.
struct Appender {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<(u64, u64)>,
}

impl Appender {
    fn start(files: Vec<PathBuf>, rate: u64) -> Appender {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::spawn(move || append(&files, rate, &flag));
        Appender { stop, handle }
    }

    /// Stops appending; the records and bytes appended (newlines included).
    fn stop(self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("the appender panicked")
    }
}

fn append(paths: &[PathBuf], rate: u64, stop: &AtomicBool) -> (u64, u64) {
    let mut files: Vec<File> = paths
        .iter()
        .map(|p| {
            OpenOptions::new()
                .append(true)
                .open(p)
                .expect("opening a live file")
        })
        .collect();
    let pool = TextPool::new(0x0a7a_6e5e);
    let mut rng = Rng::new(0x0a7a_6e5e);
    let start = Instant::now();
    let (mut n, mut bytes) = (0u64, 0u64);
    while !stop.load(Ordering::Relaxed) {
        let due = start + Duration::from_secs_f64(n as f64 / rate as f64);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let record = serde_json::json!({"type": "note", "n": n,
            "at_ms": start.elapsed().as_millis() as u64, "text": pool.text(&mut rng, TEXT_BYTES)});
        let mut line = record.to_string().into_bytes();
        line.push(b'\n');
        // One write per record, so the daemon never sees half a line for long.
        let file = n as usize % files.len();
        files[file].write_all(&line).expect("appending a record");
        n += 1;
        bytes += line.len() as u64;
    }
    (n, bytes)
}

/// Reads the daemon's RSS every [`RSS_EVERY`] for `outage`, and the sink's lag at about ten
/// of those readings.
fn watch(ctx: &Ctx, db: &Path, pid: u32, outage: Duration) -> Vec<Reading> {
    let start = Instant::now();
    let lag_every = (outage.as_secs() / 10 / RSS_EVERY.as_secs()).max(1);
    let mut readings = Vec::new();
    for k in 0.. {
        let at = RSS_EVERY * k as u32;
        if at > outage {
            break;
        }
        std::thread::sleep((start + at).saturating_duration_since(Instant::now()));
        let rss_kib = procfs::status_kib(pid, "VmRSS").expect("the daemon is running");
        let lag = (k % lag_every == 0 || at + RSS_EVERY > outage).then(|| sink_lag(ctx, db));
        if let Some(lag) = lag {
            println!(
                "  {:>4} s: RSS {:.1} MiB, {} records waiting",
                at.as_secs(),
                rss_kib as f64 / 1024.0,
                lag.records
            );
        }
        readings.push(Reading {
            at: start.elapsed(),
            rss_kib,
            lag,
        });
    }
    readings
}

/// The sink's lag from `status --json`.
fn sink_lag(ctx: &Ctx, db: &Path) -> Lag {
    let out = ctx
        .ts()
        .args(["status", "--json", "--db"])
        .arg(db)
        .output()
        .expect("starting transcript-sync status");
    assert!(
        out.status.success(),
        "status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status JSON");
    let sinks = status["sinks"].as_array().expect("status has sinks");
    let sink = sinks
        .iter()
        .find(|s| s["name"] == SINK)
        .expect("status shows the sink");
    Lag {
        records: sink["lag_records"].as_i64().expect("lag_records"),
        bytes: sink["lag_bytes"].as_i64(),
    }
}

/// Bytes of the records the sink has not shipped, summed from the archive.
fn bytes_waiting(db: &Path) -> i64 {
    crate::archive_count(
        db,
        &format!(
            "SELECT coalesce(sum(length(CAST(record AS BLOB))), 0) FROM records WHERE seq > \
             coalesce((SELECT seq FROM consumers WHERE name = 'sink:{SINK}'), 0)"
        ),
    )
}

/// Waits until the archive holds `appended` records.
fn wait_archived(db: &Path, appended: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while (crate::archive_count(db, "SELECT count(*) FROM records") as u64) < appended {
        assert!(
            Instant::now() < deadline,
            "the daemon did not archive every append"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits, after the collector started, until the sink has no lag.
fn catch_up(ctx: &Ctx, db: &Path, collector: &Collector, pid: u32) -> CatchUp {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(900);
    while sink_lag(ctx, db).records > 0 {
        assert!(
            Instant::now() < deadline,
            "the sink did not catch up in 15 minutes"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let caught_up = start.elapsed();
    let first = collector
        .first_request()
        .expect("the collector got requests");
    CatchUp {
        first_request: first.saturating_duration_since(start),
        caught_up,
        rss_after_kib: procfs::status_kib(pid, "VmRSS").unwrap_or(0),
        hwm_kib: procfs::status_kib(pid, "VmHWM").unwrap_or(0),
    }
}

/// The collector's keys beside the archive's.
struct Check {
    archived: usize,
    lost: usize,
    unknown: usize,
}

fn check(db: &Path, tally: &Tally) -> Check {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("opening the archive");
    let mut stmt = conn
        .prepare("SELECT source_id, generation, offset FROM records")
        .expect("querying the archive");
    let archived: HashSet<Key> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64))
        })
        .expect("querying the archive")
        .collect::<rusqlite::Result<_>>()
        .expect("reading the archive");
    Check {
        archived: archived.len(),
        lost: archived.difference(&tally.keys).count(),
        unknown: tally.keys.difference(&archived).count(),
    }
}

/// The first log line holding `needle`, from its `sink ` on (without timestamp and level).
fn log_line(log: &str, needle: &str) -> String {
    let line = log
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or("(not in the log)");
    line.find("sink ").map_or(line, |at| &line[at..]).to_owned()
}

/// Everything the report says.
struct Outcome {
    secs: u64,
    rate: u64,
    appended: u64,
    appended_bytes: u64,
    lag_at_end: (i64, i64),
    readings: Vec<Reading>,
    catch_up: CatchUp,
    check: Check,
    recovered: String,
    tally: Tally,
}

impl Outcome {
    fn report(&self, md: &mut String) {
        let mib = |kib: u64| kib as f64 / 1024.0;
        let rss: Vec<u64> = self.readings.iter().map(|r| r.rss_kib).collect();
        let (first, last) = (rss[0], rss[rss.len() - 1]);
        let max = rss.iter().copied().max().unwrap_or(0);
        let c = &self.catch_up;
        let _ = writeln!(
            md,
            "### Outage\n\n{} s with the collector down, {} appends/s into {FILES} files: {} \
             records, {:.1} MB ({:.0} B a line). At the end {} records ({:.1} MB of records, summed \
             from the archive) waited.\n",
            self.secs,
            self.rate,
            self.appended,
            self.appended_bytes as f64 / 1e6,
            self.appended_bytes as f64 / self.appended.max(1) as f64,
            self.lag_at_end.0,
            self.lag_at_end.1 as f64 / 1e6
        );
        let _ = writeln!(
            md,
            "| measure | value |\n|---|---:|\n\
             | RSS at the start of the outage | {:.1} MiB |\n\
             | RSS, highest reading during it (every {} s) | {:.1} MiB |\n\
             | RSS at its end | {:.1} MiB |\n\
             | RSS once caught up | {:.1} MiB |\n\
             | peak RSS of the whole run (VmHWM) | {:.1} MiB |\n\
             | collector up → its first request | {:.1} s |\n\
             | collector up → `status` lag 0 (catch-up) | {:.1} s |\n\
             | requests / records received | {} / {} |\n\
             | records archived | {} |\n\
             | lost (archived, never received) | {} |\n\
             | doubled (received more than once) | {} |\n\
             | received but not in the archive | {} |\n",
            mib(first),
            RSS_EVERY.as_secs(),
            mib(max),
            mib(last),
            mib(c.rss_after_kib),
            mib(c.hwm_kib),
            c.first_request.as_secs_f64(),
            c.caught_up.as_secs_f64(),
            self.tally.requests,
            self.tally.lines,
            self.check.archived,
            self.check.lost,
            self.tally.duplicates,
            self.check.unknown
        );
        let _ = writeln!(
            md,
            "RSS within 16 MiB of its start throughout the outage: {} (highest {:+.1} MiB). \
             The daemon's log: \"{}\".{}\n",
            if max - first <= 16 * 1024 {
                "yes"
            } else {
                "**no**"
            },
            mib(max) - mib(first),
            self.recovered,
            match self.tally.bad_bodies.first() {
                Some(why) => format!(
                    " **{} bodies unreadable**: {why}",
                    self.tally.bad_bodies.len()
                ),
                None => String::new(),
            }
        );
        self.timeline(md);
    }

    fn timeline(&self, md: &mut String) {
        md.push_str(
            "| time | RSS MiB | records waiting | MB waiting (`status`) |\n|---:|---:|---:|---:|\n",
        );
        for r in &self.readings {
            let Some(lag) = r.lag else { continue };
            let bytes = lag.bytes.map_or("not summed".to_owned(), |b| {
                format!("{:.1}", b as f64 / 1e6)
            });
            let _ = writeln!(
                md,
                "| {} s | {:.1} | {} | {bytes} |",
                r.at.as_secs(),
                r.rss_kib as f64 / 1024.0,
                lag.records
            );
        }
        md.push('\n');
    }
}
