//! Two machines, one PostgreSQL store: how long a record appended on machine A takes to be in
//! machine B's archive, through the real binary with the defaults (`flush_interval` 1 s,
//! `pull_interval` 5 s, pulling woken by the store's notifications).
//!
//! Two daemons (`run --sink stdout`, each with its own HOME, archive and machine name) ship to
//! and pull from one cluster of the benchmark's own. Records are appended to a file A watches,
//! at a steady rate, each carrying its index; the time of each `write()` is taken, and the time
//! its envelope appears on each daemon's stdout (printed only once committed to that daemon's
//! archive). A's own figure is the baseline of the same run: append to A's archive. The
//! store's `shipped_at` splits B's time into A to the store and the store to B.
//!
//! Then a first pull: machine A ships a corpus of the compare benchmark's (`run --once`), and a
//! new machine C pulls all of it (`run --once`, timed to the log line saying every record is
//! committed, and to its exit once its session index has caught up), beside `psql` reading
//! the same records out of the store to `/dev/null`.
//!
//! `cargo bench --bench team`. `TEAM_RECORDS` (default 300) records at `TEAM_RATE` per second
//! (default 10); `COMPARE_QUICK=1` pulls the 64 MB corpus instead of the 1 GiB one (both are
//! made once into `target/bench/corpus/`). Results: tables on stdout and
//! `target/bench/team.md`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};
use testkit::appends::{index_of, record};
use testkit::corpus;
use testkit::daemon::{self, TapReader};
use testkit::env::{env_flag, env_or};
use testkit::machine::{self, Machine};
use testkit::postgres::{self, Cluster};
use testkit::stats::quantile;
use transcript_sync::RECORDS_COMMITTED;

const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");
/// Records written before the measured ones, so that connections and schemas are set up.
const WARM_UP: u64 = 5;

/// One daemon: `run --sink stdout` as machine `name`, its tap lines timed as they arrive.
struct Daemon(daemon::Daemon);

impl Daemon {
    /// Writes `home`'s configuration: one PostgreSQL sink on `pg`, pulling, with the defaults.
    fn configure(home: &Path, pg: &Cluster) {
        let config = home.join(".config/transcript-sync/config.toml");
        fs::create_dir_all(config.parent().unwrap()).unwrap();
        let pw = home.join("pg-password");
        fs::write(&pw, postgres::PASSWORD).unwrap();
        fs::write(
            &config,
            format!(
                "[[sink]]\nname = \"team\"\ntype = \"postgres\"\nurl = \"{}\"\n\
                 password_file = \"{}\"\npull = true\n",
                pg.url(),
                pw.display()
            ),
        )
        .unwrap();
    }

    fn start(home: &Path, db: &Path, watch: &Path, name: &str, pg: &Cluster) -> Daemon {
        Daemon::configure(home, pg);
        let mut cmd = ts(home, name);
        cmd.args([
            "run",
            "--sink",
            "stdout",
            "--rescan-interval",
            "3600",
            "--db",
        ])
        .arg(db)
        .arg("--watch")
        .arg(watch);
        Daemon(daemon::Daemon::spawn(cmd, TapReader::Read))
    }

    /// When each record index arrived, for the next `n` of them.
    fn arrivals(&self, n: usize) -> HashMap<u64, Instant> {
        let mut seen = HashMap::new();
        while seen.len() < n {
            let line = (self.0.tap.recv_timeout(daemon::PATIENCE))
                .unwrap_or_else(|_| panic!("{} of {n} records arrived", seen.len()));
            if let Some(i) = index_of(&line.text) {
                seen.entry(i).or_insert(line.at);
            }
        }
        seen
    }
}

/// Milliseconds from each write to its arrival, sorted.
fn latencies(written: &HashMap<u64, Instant>, arrived: &HashMap<u64, Instant>) -> Vec<f64> {
    let mut ms: Vec<f64> = (written.iter())
        .filter_map(|(i, w)| {
            arrived
                .get(i)
                .map(|a| a.duration_since(*w).as_secs_f64() * 1e3)
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms
}

fn row(md: &mut String, what: &str, ms: &[f64]) {
    let _ = writeln!(
        md,
        "| {what} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
        ms.len(),
        quantile(ms, 0.5),
        quantile(ms, 0.9),
        quantile(ms, 0.99),
        ms.last().copied().unwrap_or(0.0)
    );
}

fn main() {
    let n = env_or("TEAM_RECORDS", 300);
    let rate = env_or("TEAM_RATE", 10).max(1);
    let bench = machine::target_dir().join("bench");
    let scratch = bench.join("team-scratch");
    let _ = fs::remove_dir_all(&scratch);
    let dir = |p: &str| -> PathBuf {
        let d = scratch.join(p);
        fs::create_dir_all(&d).unwrap();
        d
    };
    let (home_a, home_b, watch_a, watch_b) =
        (dir("a/home"), dir("b/home"), dir("a/watch"), dir("b/watch"));
    let pg = Cluster::start_for_benchmark();
    let a = Daemon::start(
        &home_a,
        &scratch.join("a/archive.db"),
        &watch_a,
        "machine-a",
        &pg,
    );
    let b = Daemon::start(
        &home_b,
        &scratch.join("b/archive.db"),
        &watch_b,
        "machine-b",
        &pg,
    );
    a.0.wait_log("caught up");
    b.0.wait_log("pull team: pulling");

    let file = watch_a.join("session.jsonl");
    let mut out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .unwrap();
    for i in 0..WARM_UP {
        out.write_all(record(i, 200).as_bytes()).unwrap();
    }
    a.arrivals(WARM_UP as usize);
    b.arrivals(WARM_UP as usize);

    let started = humantime::format_rfc3339_seconds(SystemTime::now());
    let every = Duration::from_secs_f64(1.0 / rate as f64);
    let mut written = HashMap::new();
    let first = Instant::now();
    for k in 0..n {
        let i = WARM_UP + k;
        let due = first + every * k as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let line = record(i, 200);
        written.insert(i, Instant::now());
        out.write_all(line.as_bytes()).unwrap();
    }
    let at_a = a.arrivals(n as usize);
    let at_b = b.arrivals(n as usize);
    let (ms_a, ms_b) = (latencies(&written, &at_a), latencies(&written, &at_b));
    // A to the store: `shipped_at` against the write, on one clock (the same host).
    let shipped = pg.psql(&format!(
        "SELECT (record::jsonb->>'i'), (extract(epoch FROM shipped_at) * 1e6)::bigint
         FROM transcript_sync.records WHERE record::jsonb->>'i' IS NOT NULL
           AND (record::jsonb->>'i')::bigint >= {WARM_UP}"
    ));
    let now_wall = SystemTime::now();
    let now_mono = Instant::now();
    let mut ms_store: Vec<f64> = shipped
        .iter()
        .filter_map(|r| {
            let (i, us) = r.split_once('|')?;
            let (i, us): (u64, u64) = (i.parse().ok()?, us.parse().ok()?);
            let at = SystemTime::UNIX_EPOCH + Duration::from_micros(us);
            let ago = now_wall.duration_since(at).ok()?;
            let mono = now_mono.checked_sub(ago)?;
            Some(mono.duration_since(*written.get(&i)?).as_secs_f64() * 1e3)
        })
        .collect();
    ms_store.sort_by(f64::total_cmp);

    let m = Machine::describe(&machine::target_dir(), Default::default());
    let mut md = format!(
        "Taken {started}: {n} records of about 220 bytes appended at {rate}/s to one file on \
         machine A, defaults (`flush_interval` 1 s, `pull_interval` 5 s); two daemons and \
         {} on one host. Machine: {}, {} cores, {} GiB, {}, Linux {}; {}. Load average at \
         start {}.\n\n",
        pg.version(),
        m.cpu,
        m.cores,
        m.memory_gib,
        m.disk,
        m.kernel,
        m.rustc,
        m.load_at_start
    );
    let _ = writeln!(
        md,
        "| from `write()` on A to | records | p50 ms | p90 ms | p99 ms | max ms |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|");
    row(&mut md, "A's archive (A's tap; the baseline)", &ms_a);
    row(&mut md, "the store (`shipped_at`)", &ms_store);
    row(&mut md, "B's archive (B's tap)", &ms_b);
    // Stopped cleanly (SIGTERM), as a person would, before the first pull.
    for d in [a, b] {
        d.0.terminate();
    }
    first_pull(&scratch, &bench, &pg, &mut md);
    let _ = writeln!(md, "\nLoad average at end {}.", machine::load());
    println!("\n{md}");
    fs::write(bench.join("team.md"), &md).expect("writing team.md");
    println!("wrote {}", bench.join("team.md").display());
    let _ = fs::remove_dir_all(&scratch);
}

/// transcript-sync as machine `name` under `home`, nothing of this machine's environment.
fn ts(home: &Path, name: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("RUST_LOG", "info")
        .env("TRANSCRIPT_SYNC_MACHINE_NAME", name);
    cmd
}

/// Runs `cmd` to its end; seconds to the first stderr line holding `mark`, and to the exit.
fn timed(cmd: &mut Command, mark: &str) -> (Option<f64>, f64) {
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting transcript-sync");
    let mut marked = None;
    let mut log = String::new();
    for line in BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map_while(Result::ok)
    {
        if marked.is_none() && line.contains(mark) {
            marked = Some(start.elapsed().as_secs_f64());
        }
        log.push_str(&line);
        log.push('\n');
    }
    let status = child.wait().expect("waiting for transcript-sync");
    assert!(status.success(), "{cmd:?} failed:\n{log}");
    (marked, start.elapsed().as_secs_f64())
}

/// A corpus shipped by machine A, then pulled whole by a new machine C.
fn first_pull(scratch: &Path, bench: &Path, pg: &Cluster, md: &mut String) {
    let quick = env_flag("COMPARE_QUICK");
    let spec = corpus::Spec::transcripts_for(quick);
    let c = corpus::ensure(&bench.join("corpus"), &spec);
    let (home_a, home_c) = (scratch.join("pull/a"), scratch.join("pull/c"));
    // The same sink as the live part's machines, pulling, in fresh homes.
    Daemon::configure(&home_a, pg);
    Daemon::configure(&home_c, pg);
    println!(
        "machine A ships {:.1} MB ({} records)",
        c.bytes as f64 / 1e6,
        c.records
    );
    let mut ship = ts(&home_a, "shipper");
    ship.args(["run", "--once", "--db"])
        .arg(scratch.join("pull/a.db"))
        .arg("--watch")
        .arg(&c.dir);
    let (_, shipped) = timed(&mut ship, RECORDS_COMMITTED);
    println!("machine C pulls it");
    let mut pull = ts(&home_c, "newcomer");
    pull.args(["run", "--once", "--db"])
        .arg(scratch.join("pull/c.db"))
        .arg("--watch")
        .arg(scratch.join("pull/empty"));
    fs::create_dir_all(scratch.join("pull/empty")).unwrap();
    let (committed, exited) = timed(&mut pull, RECORDS_COMMITTED);
    let committed = committed.expect("the pull's log says every record is committed");
    let pulled: i64 = {
        let conn = rusqlite::Connection::open(scratch.join("pull/c.db")).unwrap();
        conn.query_row(
            "SELECT count(*) FROM records r JOIN sources s ON s.id = r.source_id
             JOIN machines m ON m.id = s.machine WHERE m.host = 'shipper'",
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(
        pulled as u64, c.records,
        "machine C holds every record of A's"
    );
    let script = scratch.join("pull/copy.sql");
    fs::write(
        &script,
        "\\copy (SELECT record FROM transcript_sync.records r \
         JOIN transcript_sync.machines m USING (machine) WHERE m.host = 'shipper' \
         ORDER BY pull_id) TO '/dev/null'\n",
    )
    .unwrap();
    let copied = pg.time_script(&script).as_secs_f64();
    let mb = |secs: f64| c.bytes as f64 / 1e6 / secs;
    let _ = writeln!(
        md,
        "\nFirst pull: {} records, {:.1} MB, shipped by A (`run --once`, archiving and \
         shipping, {shipped:.1} s), then pulled by a new machine C (`run --once`):\n",
        c.records,
        c.bytes as f64 / 1e6
    );
    let _ = writeln!(md, "| subject | s | MB/s |");
    let _ = writeln!(md, "|---|---:|---:|");
    let _ = writeln!(
        md,
        "| `psql \\copy` of the records out of the store (the baseline) | {copied:.2} | {:.0} |",
        mb(copied)
    );
    let _ = writeln!(
        md,
        "| C: every record pulled and committed | {committed:.2} | {:.0} |",
        mb(committed)
    );
    let _ = writeln!(
        md,
        "| C: to exit, its session index caught up | {exited:.2} | {:.0} |",
        mb(exited)
    );
}
