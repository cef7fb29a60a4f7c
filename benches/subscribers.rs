//! Live subscribers on the daemon's Unix socket: the time from an append's `write()` to its
//! envelope on each of 1, 10 and 100 subscribers, beside the stdout tap of the same daemon;
//! then ten reading subscribers with and without one that never reads, the daemon's memory
//! meanwhile, and whether the stalled one is told `lagged` when it reads at last.
//!
//! `cargo bench --bench subscribers` (about 3.5 minutes on a 2-core VM, after the build).
//! Every subscriber is a thread of this process with a `UnixStream` of its own whose first
//! line is `{}` (from now on); the daemon is the release binary, a separate process.
//!
//! A, one `run --sink stdout` daemon: per round, a phase with the tap alone, then one for each
//! count of `SUBSCRIBERS_COUNTS` (default `1,10,100`) attached; the next round in reverse
//! order; `SUBSCRIBERS_ROUNDS` rounds (default 3). A phase appends 50 untimed records, then
//! `SUBSCRIBERS_APPENDS` (default 1000) timed ones of ~220 bytes at `SUBSCRIBERS_RATE` per
//! second (default 100), as `benches/latency.rs` does.
//!
//! B, a `run` daemon (no tap) per run, ten reading subscribers: one run without a stalled
//! subscriber, one with it (it connects first, sends `{}` and reads nothing until
//! `SUBSCRIBERS_STALL_READ_AFTER` seconds, default 10, after the daemon logs its lag, then
//! reads to the end); `SUBSCRIBERS_STALL_ROUNDS` pairs (default 1, every other pair in
//! reverse). Each run appends `SUBSCRIBERS_STALL_SECS` seconds (default 40) of records padded
//! with `SUBSCRIBERS_STALL_BYTES` bytes (default 2000: ~2,020-byte records) at
//! `SUBSCRIBERS_STALL_RATE` per second (default 200), and samples the daemon's VmRSS every
//! 100 ms.
//!
//! `SUBSCRIBERS_BUFFER` sets `subscriber_buffer` in the daemons' config.toml (a size such as
//! `1M`; default unset: the daemon's 4M). `SUBSCRIBERS_ONLY=a` or `=b` runs one measurement.
//!
//! Each record is appended once the one before it has reached every reading subscriber (and
//! the tap), or after 1 s, and no sooner than its slot at the rate. Its latency is from just
//! before its `write()` (as in `benches/latency.rs`) to `read_line` returning its line in a
//! reader's thread: the appending thread is not always run again between the `write()`
//! returning and a reader having the line, so lines read before their `write()` returned are
//! counted ("early") rather than timed from the return. Results: tables on stdout and in
//! `target/bench/subscribers.md`.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::ops::Range;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use testkit::appends::{index_of, record};
use testkit::cpu::cpu_time;
use testkit::daemon::{self, Log, TapReader};
use testkit::env::env_or;
use testkit::machine::{self, Machine};
use testkit::procfs;
use testkit::stats::quantile;

const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");

/// Untimed appends at the start of each phase and run.
const WARM: u64 = 50;
/// Padding of measurement A's records: ~220 bytes each, as in `benches/latency.rs`.
const PAD: usize = 200;
/// How long the writer waits for the readers to show a record before it goes on.
const SHOW_WAIT: Duration = Duration::from_secs(1);
/// Reading subscribers in measurement B.
const READERS_B: usize = 10;

/// A `transcript-sync run` of its own directory: archive, config, one watched transcript.
struct Daemon {
    process: daemon::Daemon,
    /// The transcript that is appended to.
    file: PathBuf,
    socket: PathBuf,
}

impl Daemon {
    /// Starts a daemon in `dir`, with the stdout tap (left to the caller) when `tap`, and
    /// returns once its socket is there.
    fn start(dir: &Path, tap: bool, buffer: Option<&str>) -> Daemon {
        let watch = dir.join("watch");
        fs::create_dir_all(&watch).expect("creating the watched directory");
        let file = watch.join("session.jsonl");
        fs::write(&file, b"").expect("creating the transcript");
        let config = dir.join("config.toml");
        let text = buffer.map_or(String::new(), |b| format!("subscriber_buffer = {b:?}\n"));
        fs::write(&config, text).expect("writing config.toml");
        let archive = dir.join("archive.db");
        let mut cmd = transcript_sync(&config);
        cmd.args(["run", "--db"])
            .arg(&archive)
            .arg("--watch")
            .arg(&watch)
            .env("RUST_LOG", "warn");
        if tap {
            cmd.args(["--sink", "stdout"]);
        }
        let process = daemon::Daemon::spawn_echoing(cmd, TapReader::Stall);
        wait_for(&archive);
        let socket = socket_of(&config, &archive);
        wait_for(&socket);
        Daemon {
            process,
            file,
            socket,
        }
    }

    fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// Stops it as a service manager would, and waits.
    fn stop(self) {
        self.process.terminate();
    }
}

/// The binary with `config` as its configuration and no runtime directory, so that the
/// socket is beside the archive, in the benchmark's own directory.
fn transcript_sync(config: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--config")
        .arg(config)
        .env_remove("XDG_RUNTIME_DIR");
    cmd
}

/// Where the daemon of `archive` listens, as `status --json` says.
fn socket_of(config: &Path, archive: &Path) -> PathBuf {
    let out = (transcript_sync(config)
        .args(["status", "--json", "--db"])
        .arg(archive))
    .output()
    .expect("running transcript-sync status");
    assert!(out.status.success(), "status --json failed: {out:?}");
    let status: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("status --json prints JSON");
    let socket = status["socket"]
        .as_str()
        .expect("status has a socket field");
    PathBuf::from(socket)
}

fn wait_for(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{path:?} did not appear in 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The record the writer waits for, and how many readers have shown it so far.
struct Seen {
    state: Mutex<Awaited>,
    all_shown: Condvar,
}

struct Awaited {
    index: u64,
    readers: usize,
    shown: usize,
}

impl Seen {
    fn new() -> Arc<Seen> {
        Arc::new(Seen {
            state: Mutex::new(Awaited {
                index: u64::MAX,
                readers: 0,
                shown: 0,
            }),
            all_shown: Condvar::new(),
        })
    }

    /// From now on, record `index` is awaited from `readers` readers.
    fn expect(&self, index: u64, readers: usize) {
        *self.state.lock().expect("seen lock") = Awaited {
            index,
            readers,
            shown: 0,
        };
    }

    /// A reader showed record `index`.
    fn saw(&self, index: u64) {
        let mut state = self.state.lock().expect("seen lock");
        if state.index == index {
            state.shown += 1;
            if state.shown == state.readers {
                self.all_shown.notify_one();
            }
        }
    }

    /// Waits until every reader has shown the awaited record, or `timeout`; true if they all
    /// did.
    fn wait(&self, timeout: Duration) -> bool {
        let state = self.state.lock().expect("seen lock");
        let (state, _) = (self.all_shown)
            .wait_timeout_while(state, timeout, |s| s.shown < s.readers)
            .expect("seen lock");
        state.shown >= state.readers
    }
}

/// What one reader saw: when the line of each record came, and the control lines.
#[derive(Default)]
struct Reading {
    arrivals: Vec<(u64, Instant)>,
    controls: Vec<String>,
}

/// Reads lines on a thread until the input ends, timing each record's line.
fn spawn_reader(mut input: impl BufRead + Send + 'static, seen: Arc<Seen>) -> JoinHandle<Reading> {
    std::thread::spawn(move || {
        let mut reading = Reading::default();
        let mut line = String::new();
        loop {
            line.clear();
            if !matches!(input.read_line(&mut line), Ok(n) if n > 0) {
                return reading;
            }
            let now = Instant::now();
            match index_of(&line) {
                Some(i) => {
                    reading.arrivals.push((i, now));
                    seen.saw(i);
                }
                None if line.starts_with("{\"event\"") => {
                    reading.controls.push(line.trim_end().to_owned())
                }
                None => {}
            }
        }
    })
}

/// A reading subscriber: its stream (to close it) and its reader thread.
struct Attached {
    stream: UnixStream,
    reader: JoinHandle<Reading>,
}

/// Connects, asks for records from now on, and returns once `caught_up` has come.
fn attach(socket: &Path, seen: &Arc<Seen>) -> Attached {
    let mut stream = UnixStream::connect(socket).expect("connecting to the daemon's socket");
    stream.write_all(b"{}\n").expect("sending the request");
    let mut input = BufReader::with_capacity(64 << 10, stream.try_clone().expect("a clone"));
    let mut first = String::new();
    input.read_line(&mut first).expect("reading caught_up");
    assert!(
        first.starts_with("{\"event\":\"caught_up\""),
        "the first line is not caught_up: {first:?}"
    );
    let reader = spawn_reader(input, Arc::clone(seen));
    Attached { stream, reader }
}

fn detach(attached: Attached) -> Reading {
    let _ = attached.stream.shutdown(std::net::Shutdown::Both);
    attached.reader.join().expect("a reader thread")
}

/// Appends records to the watched transcript, paced, keeping when each `write()` began and
/// when it returned.
struct Appender {
    file: File,
    seen: Arc<Seen>,
    /// Just before the write of record `i`, at `i`: where its latency starts.
    written: Vec<Instant>,
    /// When the write of record `i` returned, at `i`.
    returned: Vec<Instant>,
    /// Records some reader had not shown within [`SHOW_WAIT`].
    unshown: u64,
}

impl Appender {
    fn open(path: &Path, seen: Arc<Seen>) -> Appender {
        let file = OpenOptions::new().append(true).open(path);
        Appender {
            file: file.expect("opening the transcript"),
            seen,
            written: Vec::new(),
            returned: Vec::new(),
            unshown: 0,
        }
    }

    /// Appends `count` records of ~`pad` + 20 bytes at `rate` per second at most, each once
    /// the one before has reached all `readers` (or [`SHOW_WAIT`] has passed); returns their
    /// indices.
    fn run(&mut self, count: u64, rate: u64, pad: usize, readers: usize) -> Range<u64> {
        let gap = Duration::from_secs_f64(1.0 / rate as f64);
        let first = self.written.len() as u64;
        for i in first..first + count {
            let slot = Instant::now() + gap;
            let record = record(i, pad);
            self.seen.expect(i, readers);
            self.written.push(Instant::now());
            self.file.write_all(record.as_bytes()).expect("appending");
            self.returned.push(Instant::now());
            if !self.seen.wait(SHOW_WAIT) {
                self.unshown += 1;
            }
            std::thread::sleep(slot.saturating_duration_since(Instant::now()));
        }
        first..first + count
    }

    /// Milliseconds from each write to its line in `reading`, for the records of `range`.
    fn latencies(&self, reading: &Reading, range: &Range<u64>) -> Vec<f64> {
        (reading.arrivals.iter())
            .filter(|(i, _)| range.contains(i))
            .map(|(i, at)| ms(at.saturating_duration_since(self.written[*i as usize])))
            .collect()
    }

    /// How many lines of `range` in `reading` were read before their `write()` returned.
    fn early(&self, reading: &Reading, range: &Range<u64>) -> usize {
        (reading.arrivals.iter())
            .filter(|(i, at)| range.contains(i) && *at < self.returned[*i as usize])
            .count()
    }

    /// p50 and p99 of how long `write()` took, in milliseconds.
    fn write_times(&self) -> Option<Stats> {
        let times = self.written.iter().zip(&self.returned);
        Stats::of(times.map(|(w, r)| ms(*r - *w)).collect())
    }

    /// The first record written at `at` or later.
    fn index_at(&self, at: Instant) -> u64 {
        self.written.partition_point(|w| *w < at) as u64
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// p50, p99 and max of latencies, in milliseconds.
struct Stats {
    p50: f64,
    p99: f64,
    max: f64,
}

impl Stats {
    fn of(mut lat: Vec<f64>) -> Option<Stats> {
        if lat.is_empty() {
            return None;
        }
        lat.sort_by(f64::total_cmp);
        Some(Stats {
            p50: quantile(&lat, 0.5),
            p99: quantile(&lat, 0.99),
            max: *lat.last()?,
        })
    }

    fn cells(stats: &Option<Stats>) -> String {
        match stats {
            Some(s) => format!("{:.3} | {:.3} | {:.3}", s.p50, s.p99, s.max),
            None => "– | – | –".into(),
        }
    }
}

fn cpu(pid: u32) -> Duration {
    cpu_time(pid).unwrap_or_default()
}

/// Measurement A's settings.
struct PlanA {
    counts: Vec<usize>,
    rounds: u64,
    appends: u64,
    rate: u64,
}

/// One phase of measurement A: `subscribers` attached while `range` was appended.
struct Phase {
    round: u64,
    subscribers: usize,
    range: Range<u64>,
    /// Every subscriber's latencies, pooled.
    pooled: Vec<f64>,
    /// The highest p99 of one subscriber.
    slowest_p99: Option<f64>,
    /// Lines expected on the subscribers and not seen.
    missing: usize,
    /// Lines the subscribers read before the `write()` of their record returned.
    early: usize,
    /// Control lines other than `caught_up`.
    controls: Vec<String>,
    daemon_cpu: Duration,
    client_cpu: Duration,
    rss_kib: u64,
    threads: u64,
}

fn measure_a(dir: &Path, plan: &PlanA, buffer: Option<&str>, md: &mut String) {
    let mut daemon = Daemon::start(dir, true, buffer);
    let seen = Seen::new();
    let stdout = daemon.process.take_stdout().expect("piped stdout");
    let tap = spawn_reader(
        BufReader::with_capacity(64 << 10, stdout),
        Arc::clone(&seen),
    );
    let mut app = Appender::open(&daemon.file, Arc::clone(&seen));
    warm_tap(&mut app, plan.rate);
    let mut phases = Vec::new();
    for round in 0..plan.rounds {
        let mut order: Vec<usize> = std::iter::once(0).chain(plan.counts.clone()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for n in order {
            phases.push(phase(&daemon, &mut app, plan, n, round));
        }
    }
    daemon.stop();
    let tap = tap.join().expect("the tap's reader");
    report_a(md, plan, &phases, &app, &tap);
}

/// Appends until the tap shows a record, so that start-up is not timed.
fn warm_tap(app: &mut Appender, rate: u64) {
    for _ in 0..1000 {
        let unshown = app.unshown;
        app.run(1, rate, PAD, 1);
        if app.unshown == unshown {
            return;
        }
    }
    panic!("the tap showed no record");
}

fn phase(daemon: &Daemon, app: &mut Appender, plan: &PlanA, n: usize, round: u64) -> Phase {
    let subs: Vec<Attached> = (0..n).map(|_| attach(&daemon.socket, &app.seen)).collect();
    app.run(WARM, plan.rate, PAD, n + 1);
    let (cpu0, client0) = (cpu(daemon.pid()), cpu(std::process::id()));
    let range = app.run(plan.appends, plan.rate, PAD, n + 1);
    let (cpu1, client1) = (cpu(daemon.pid()), cpu(std::process::id()));
    let rss_kib = procfs::status_kib(daemon.pid(), "VmRSS").unwrap_or(0);
    let threads = procfs::status_kib(daemon.pid(), "Threads").unwrap_or(0);
    let readings: Vec<Reading> = subs.into_iter().map(detach).collect();
    let per_sub: Vec<Vec<f64>> = readings.iter().map(|r| app.latencies(r, &range)).collect();
    let slowest_p99 = (per_sub.iter().cloned())
        .filter_map(|l| Stats::of(l).map(|s| s.p99))
        .max_by(f64::total_cmp);
    let pooled: Vec<f64> = per_sub.concat();
    let missing = n * (range.end - range.start) as usize - pooled.len();
    let early = readings.iter().map(|r| app.early(r, &range)).sum();
    let controls = (readings.into_iter().flat_map(|r| r.controls)).collect();
    eprintln!("round {round}, {n} subscribers: done");
    Phase {
        round,
        subscribers: n,
        range,
        pooled,
        slowest_p99,
        missing,
        early,
        controls,
        daemon_cpu: cpu1 - cpu0,
        client_cpu: client1 - client0,
        rss_kib,
        threads,
    }
}

fn report_a(md: &mut String, plan: &PlanA, phases: &[Phase], app: &Appender, tap: &Reading) {
    let _ = writeln!(
        md,
        "### A. Latency beside the tap\n\n{} timed appends of ~220 bytes per phase at {}/s, \
         {} rounds; milliseconds from just before write() to the line. \"early\": lines read \
         before their write() returned (tap / subscribers). CPU: ms per append.\n",
        plan.appends, plan.rate, plan.rounds
    );
    let _ = writeln!(
        md,
        "| subscribers | round | tap p50 | tap p99 | tap max | subs p50 | subs p99 | subs max \
         | slowest sub's p99 | missing | early | daemon CPU | client CPU | VmRSS MiB | threads |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for p in phases {
        let tap_stats = Stats::of(app.latencies(tap, &p.range));
        let per = |d: Duration| ms(d) / (p.range.end - p.range.start) as f64;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} / {} | {:.3} | {:.3} | {:.1} | {} |",
            p.subscribers,
            p.round + 1,
            Stats::cells(&tap_stats),
            Stats::cells(&Stats::of(p.pooled.clone())),
            p.slowest_p99.map_or("–".into(), |v| format!("{v:.3}")),
            p.missing,
            app.early(tap, &p.range),
            p.early,
            per(p.daemon_cpu),
            per(p.client_cpu),
            p.rss_kib as f64 / 1024.0,
            p.threads,
        );
    }
    pooled_a(md, plan, phases, app, tap);
    let controls: Vec<&String> = phases.iter().flat_map(|p| &p.controls).collect();
    let _ = writeln!(
        md,
        "\nControl lines other than caught_up: {controls:?}. Appends not shown by every \
         reader within 1 s: {}. {}\n",
        app.unshown,
        write_line(app)
    );
}

/// The rounds pooled, per subscriber count, with the ratios the target is about.
fn pooled_a(md: &mut String, plan: &PlanA, phases: &[Phase], app: &Appender, tap: &Reading) {
    let tap_of = |n: usize| -> Vec<f64> {
        (phases.iter().filter(|p| p.subscribers == n))
            .flat_map(|p| app.latencies(tap, &p.range))
            .collect()
    };
    let alone = Stats::of(tap_of(0));
    let _ = writeln!(
        md,
        "\nRounds pooled:\n\n\
         | subscribers | tap p50 | tap p99 | tap max | subs p50 | subs p99 | subs max \
         | slowest sub's p99 | subs p99 / tap p99 (same phases) | subs p99 / tap-alone p99 \
         | daemon CPU (mean) |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for &n in std::iter::once(&0).chain(&plan.counts) {
        let mine: Vec<&Phase> = phases.iter().filter(|p| p.subscribers == n).collect();
        let tap_stats = Stats::of(tap_of(n));
        let subs = Stats::of(mine.iter().flat_map(|p| p.pooled.clone()).collect());
        let slowest = (mine.iter().filter_map(|p| p.slowest_p99)).max_by(f64::total_cmp);
        let ratio = |base: &Option<Stats>| match (&subs, base) {
            (Some(s), Some(b)) => format!("{:.2}", s.p99 / b.p99),
            _ => "–".into(),
        };
        let appends: u64 = mine.iter().map(|p| p.range.end - p.range.start).sum();
        let cpu: Duration = mine.iter().map(|p| p.daemon_cpu).sum();
        let _ = writeln!(
            md,
            "| {n} | {} | {} | {} | {} | {} | {:.3} |",
            Stats::cells(&tap_stats),
            Stats::cells(&subs),
            slowest.map_or("–".into(), |v| format!("{v:.3}")),
            ratio(&tap_stats),
            ratio(&alone),
            ms(cpu) / appends.max(1) as f64,
        );
    }
}

/// Measurement B's settings.
struct PlanB {
    rounds: u64,
    secs: u64,
    rate: u64,
    bytes: usize,
    read_after: Duration,
}

/// What the stalled subscriber saw once it read.
#[derive(Default)]
struct Stalled {
    /// When the daemon logged that it lagged.
    lag_logged: Option<Instant>,
    read_at: Option<Instant>,
    caught_up: Option<i64>,
    seqs: Vec<i64>,
    /// Its last control line after the catch-up, and when it came.
    last_control: Option<(String, Instant)>,
    eof_at: Option<Instant>,
}

/// One run of measurement B.
struct StallRun {
    stalled: Option<Stalled>,
    app: Appender,
    range: Range<u64>,
    readings: Vec<Reading>,
    started: Instant,
    rss: Vec<(Instant, u64)>,
}

fn stall_run(dir: &Path, with_stalled: bool, plan: &PlanB, buffer: Option<&str>) -> StallRun {
    let daemon = Daemon::start(dir, false, buffer);
    let stalled = with_stalled.then(|| {
        let mut stream = UnixStream::connect(&daemon.socket).expect("connecting");
        stream.write_all(b"{}\n").expect("sending the request");
        stream
    });
    let seen = Seen::new();
    let subs: Vec<Attached> = (0..READERS_B)
        .map(|_| attach(&daemon.socket, &seen))
        .collect();
    let mut app = Appender::open(&daemon.file, seen);
    app.run(WARM, plan.rate, plan.bytes, READERS_B);
    let (appending, sampling) = (
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicBool::new(true)),
    );
    let rss = sample_rss(daemon.pid(), Arc::clone(&sampling));
    let stalled = stalled.map(|s| {
        let (log, appending) = (daemon.process.log_book(), Arc::clone(&appending));
        let read_after = plan.read_after;
        std::thread::spawn(move || read_when_lagged(s, &log, &appending, read_after))
    });
    let started = Instant::now();
    let range = app.run(plan.secs * plan.rate, plan.rate, plan.bytes, READERS_B);
    appending.store(false, Ordering::Release);
    let stalled = stalled.map(|t| t.join().expect("the stalled subscriber"));
    std::thread::sleep(Duration::from_secs(1));
    sampling.store(false, Ordering::Release);
    let rss = rss.join().expect("the sampler");
    let readings = subs.into_iter().map(detach).collect();
    daemon.stop();
    eprintln!("stall run (stalled one: {with_stalled}): done");
    StallRun {
        stalled,
        app,
        range,
        readings,
        started,
        rss,
    }
}

/// VmRSS of `pid` every 100 ms until `sampling` is cleared.
fn sample_rss(pid: u32, sampling: Arc<AtomicBool>) -> JoinHandle<Vec<(Instant, u64)>> {
    std::thread::spawn(move || {
        let mut samples = Vec::new();
        while sampling.load(Ordering::Acquire) {
            if let Some(kib) = procfs::status_kib(pid, "VmRSS") {
                samples.push((Instant::now(), kib));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        samples
    })
}

/// The stalled subscriber: reads nothing until `read_after` past the daemon's log of its lag
/// (or the end of the appends, if it never lags), then everything until the connection ends.
fn read_when_lagged(
    stream: UnixStream,
    log: &Log,
    appending: &AtomicBool,
    read_after: Duration,
) -> Stalled {
    let lag_logged = loop {
        let lag = log.first("subscriber lagged").map(|line| line.at);
        if lag.is_some() || !appending.load(Ordering::Acquire) {
            break lag;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Some(at) = lag_logged {
        std::thread::sleep((at + read_after).saturating_duration_since(Instant::now()));
    }
    let mut stalled = Stalled {
        lag_logged,
        read_at: Some(Instant::now()),
        ..Stalled::default()
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
    read_to_end(BufReader::new(stream), &mut stalled);
    stalled
}

fn read_to_end(mut input: impl BufRead, stalled: &mut Stalled) {
    let mut line = String::new();
    loop {
        line.clear();
        if !matches!(input.read_line(&mut line), Ok(n) if n > 0) {
            stalled.eof_at = Some(Instant::now());
            return;
        }
        if let Some(seq) = (line.strip_prefix("{\"seq\":"))
            .and_then(|rest| rest.split(',').next())
            .and_then(|s| s.parse().ok())
        {
            stalled.seqs.push(seq);
        } else if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
            match (stalled.caught_up, v["event"].as_str()) {
                (None, Some("caught_up")) => stalled.caught_up = v["seq"].as_i64(),
                _ => stalled.last_control = Some((line.trim_end().to_owned(), Instant::now())),
            }
        }
    }
}

fn write_line(app: &Appender) -> String {
    match app.write_times() {
        Some(s) => format!(
            "write() took p50 {:.3}, p99 {:.3}, max {:.3} ms.",
            s.p50, s.p99, s.max
        ),
        None => String::new(),
    }
}

fn measure_b(dir: &Path, plan: &PlanB, buffer: Option<&str>, md: &mut String) {
    let mut runs = Vec::new();
    for round in 0..plan.rounds {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for with in order {
            let run_dir = dir.join(format!("b{}", runs.len()));
            runs.push(stall_run(&run_dir, with, plan, buffer));
        }
    }
    report_b(md, plan, &runs);
}

fn report_b(md: &mut String, plan: &PlanB, runs: &[StallRun]) {
    let _ = writeln!(
        md,
        "### B. A stalled subscriber beside {READERS_B} reading ones\n\n{} s of appends of \
         ~{} bytes at {}/s per run; the stalled one reads {} s after its lag is logged. \
         Milliseconds from just before write() to the line, pooled over the reading ones; \
         \"the lag\" splits each run at the record appended when the (first) with-stalled \
         run's lag was logged; \"early\" as in A.\n",
        plan.secs,
        plan.bytes + 20,
        plan.rate,
        plan.read_after.as_secs()
    );
    let split = (runs.iter())
        .find_map(|r| {
            let lag = r.stalled.as_ref()?.lag_logged?;
            Some(r.app.index_at(lag) - r.range.start)
        })
        .unwrap_or(0);
    let _ = writeln!(
        md,
        "| run | stalled one | window | appends | p50 | p99 | max | early |\n\
         |---:|---|---|---:|---:|---:|---:|---:|"
    );
    for (k, run) in runs.iter().enumerate() {
        let at = run.range.start + split;
        let windows = [
            ("whole run", run.range.clone()),
            ("before the lag", run.range.start..at),
            ("from the lag", at..run.range.end),
        ];
        for (name, window) in windows {
            let lat: Vec<f64> = (run.readings.iter())
                .flat_map(|r| run.app.latencies(r, &window))
                .collect();
            let early: usize = run.readings.iter().map(|r| run.app.early(r, &window)).sum();
            let _ = writeln!(
                md,
                "| {} | {} | {name} | {} | {} | {early} |",
                k + 1,
                if run.stalled.is_some() { "yes" } else { "no" },
                window.end - window.start,
                Stats::cells(&Stats::of(lat)),
            );
        }
    }
    for (k, run) in runs.iter().enumerate() {
        let _ = writeln!(md, "\nRun {}: {}", k + 1, write_line(&run.app));
    }
    memory_b(md, runs);
    for (k, run) in runs.iter().enumerate() {
        if let Some(stalled) = &run.stalled {
            stalled_b(md, k + 1, run, stalled);
        }
    }
}

fn memory_b(md: &mut String, runs: &[StallRun]) {
    let _ = writeln!(
        md,
        "\nDaemon VmRSS (MiB), sampled every 100 ms from the first timed append until 1 s \
         after the stalled one's connection ended (or the appends did):\n\n\
         | run | stalled one | at start | max | at the lag | at the end |\n|---:|---|---:|---:|---:|---:|"
    );
    for (k, run) in runs.iter().enumerate() {
        let mib = |kib: u64| format!("{:.1}", kib as f64 / 1024.0);
        let at = |t: Instant| {
            (run.rss.iter().find(|(s, _)| *s >= t)).map_or("–".into(), |(_, kib)| mib(*kib))
        };
        let lag = run.stalled.as_ref().and_then(|s| s.lag_logged);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            k + 1,
            if run.stalled.is_some() { "yes" } else { "no" },
            run.rss.first().map_or("–".into(), |(_, kib)| mib(*kib)),
            run.rss
                .iter()
                .map(|(_, kib)| *kib)
                .max()
                .map_or("–".into(), mib),
            lag.map_or("–".into(), at),
            run.rss.last().map_or("–".into(), |(_, kib)| mib(*kib)),
        );
    }
}

fn stalled_b(md: &mut String, k: usize, run: &StallRun, s: &Stalled) {
    let since = |t: Option<Instant>, from: Option<Instant>| match (t, from) {
        (Some(t), Some(from)) => {
            format!("{:.3} s", t.saturating_duration_since(from).as_secs_f64())
        }
        _ => "–".into(),
    };
    let contiguous = s.seqs.windows(2).all(|w| w[1] == w[0] + 1);
    let lag_index = s.lag_logged.map(|t| run.app.index_at(t) - run.range.start);
    let _ = writeln!(
        md,
        "\nRun {k}, the stalled one: lag logged {} after the first timed append (at timed \
         append {}); it read from {} after the lag was logged; caught_up seq {}; {} envelopes \
         (seq {} to {}, contiguous: {contiguous}); then `{}`, {} after it began to read; \
         connection ended {} after it began to read.",
        since(s.lag_logged, Some(run.started)),
        shown(lag_index),
        since(s.read_at, s.lag_logged),
        shown(s.caught_up),
        s.seqs.len(),
        shown(s.seqs.first()),
        shown(s.seqs.last()),
        shown(s.last_control.as_ref().map(|(line, _)| line)),
        since(s.last_control.as_ref().map(|(_, at)| *at), s.read_at),
        since(s.eof_at, s.read_at),
    );
}

fn shown(value: Option<impl std::fmt::Display>) -> String {
    value.map_or("none".into(), |v| v.to_string())
}

fn main() {
    let only = std::env::var("SUBSCRIBERS_ONLY").unwrap_or_else(|_| "a,b".into());
    let wanted = |m: &str| only.split(',').any(|o| o.trim() == m);
    let buffer = std::env::var("SUBSCRIBERS_BUFFER").ok();
    let counts = std::env::var("SUBSCRIBERS_COUNTS").unwrap_or_else(|_| "1,10,100".into());
    let plan_a = PlanA {
        counts: (counts.split(',').filter_map(|c| c.trim().parse().ok())).collect(),
        rounds: env_or("SUBSCRIBERS_ROUNDS", 3).max(1),
        appends: env_or("SUBSCRIBERS_APPENDS", 1000).max(1),
        rate: env_or("SUBSCRIBERS_RATE", 100).max(1),
    };
    let plan_b = PlanB {
        rounds: env_or("SUBSCRIBERS_STALL_ROUNDS", 1).max(1),
        secs: env_or("SUBSCRIBERS_STALL_SECS", 40).max(1),
        rate: env_or("SUBSCRIBERS_STALL_RATE", 200).max(1),
        bytes: env_or("SUBSCRIBERS_STALL_BYTES", 2000) as usize,
        read_after: Duration::from_secs(env_or("SUBSCRIBERS_STALL_READ_AFTER", 10)),
    };
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let started = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let mut md = format!(
        "Taken {started}; subscriber_buffer {}. {}\n\n",
        buffer.as_deref().unwrap_or("default (4M)"),
        Machine::summary()
    );
    if wanted("a") {
        measure_a(
            &scratch.path().join("a"),
            &plan_a,
            buffer.as_deref(),
            &mut md,
        );
    }
    if wanted("b") {
        measure_b(
            &scratch.path().join("b"),
            &plan_b,
            buffer.as_deref(),
            &mut md,
        );
    }
    let _ = writeln!(md, "Load average at end {}.", machine::load());
    println!("\n{md}");
    let out = machine::target_dir().join("bench");
    fs::create_dir_all(&out).expect("creating target/bench");
    fs::write(out.join("subscribers.md"), &md).expect("writing subscribers.md");
    println!("wrote {}", out.join("subscribers.md").display());
}
