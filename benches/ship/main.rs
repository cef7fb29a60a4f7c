//! Shipping, through the real binary: the compare corpus archived once, then shipped by
//! `run --once` to a PostgreSQL cluster of the benchmark's own (beside `psql \copy` of the
//! same rows into the same table) and to an HTTP collector on loopback that drops what it
//! gets, each by the default sink (redacting) and by one with `redact = false`; then a daemon
//! whose HTTP collector is down for ten minutes while records are appended: its memory
//! meanwhile, and the catch-up once the collector is up.
//!
//! `cargo bench --bench ship`. `COMPARE_QUICK=1` uses the 64 MB corpus instead of the 1 GiB
//! one (both are the compare bench's, generated once into `target/bench/corpus/`);
//! `SHIP_RUNS` sets the timed runs of each throughput subject (default 3, taken in turns);
//! `SHIP_OUTAGE_SECS` the outage (default 600) and `SHIP_RATE` its appends per second
//! (default 200); `SHIP_ONLY=postgres,http,outage` picks measurements; `SHIP_PG_OPTIONS`
//! adds server settings (`-c name=value …`) for every PostgreSQL subject. Results: tables on
//! stdout and `target/bench/ship.md`.

mod http;
mod outage;
mod postgres;

use rusqlite::{Connection, OpenFlags};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use testkit::corpus;
use testkit::cpu::children_cpu_secs;
use testkit::env::{env_flag, env_or};
use testkit::machine::{self, Machine};

const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");

/// What every measurement shares.
pub struct Ctx {
    /// Scratch space under `target/bench/`, removed at the end.
    pub scratch: PathBuf,
    /// `HOME` of every transcript-sync run: empty, so no configuration or watcher of this
    /// machine is found.
    pub home: PathBuf,
    /// Timed runs of each throughput subject.
    pub runs: usize,
}

impl Ctx {
    /// `run --once --db DB --watch TREE`, logging warnings only.
    pub fn run_once(&self, db: &Path, tree: &Path) -> Command {
        let mut cmd = self.ts();
        cmd.args(["run", "--once", "--db"])
            .arg(db)
            .arg("--watch")
            .arg(tree)
            .env("RUST_LOG", "warn");
        cmd
    }

    /// transcript-sync with nothing of this machine's environment.
    pub fn ts(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("NO_COLOR", "1");
        cmd
    }
}

/// The archive every shipping run reads.
pub struct Archived {
    pub db: PathBuf,
    /// The corpus's directory, given to `run` with `--watch`.
    pub corpus: PathBuf,
    pub records: u64,
    /// Bytes of the records, without their newlines: what MB/s is of.
    pub record_bytes: u64,
}

impl Archived {
    /// MB/s and records/s over `secs`.
    pub fn rates(&self, secs: f64) -> (f64, f64) {
        (
            self.record_bytes as f64 / 1e6 / secs,
            self.records as f64 / secs,
        )
    }
}

/// One process run: wall seconds from spawn to exit, and its CPU seconds.
#[derive(Clone, Copy)]
pub struct Timed {
    pub secs: f64,
    pub cpu_secs: f64,
}

/// Runs `cmd` to its end with its output read; panics with its stderr if it fails.
pub fn time_run(cmd: &mut Command, what: &str) -> Timed {
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let before = children_cpu_secs();
    let start = Instant::now();
    let out = cmd.output().expect("starting transcript-sync");
    let secs = start.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Timed {
        secs,
        cpu_secs: children_cpu_secs() - before,
    }
}

/// Makes every sink start again from the first record: their cursors are forgotten, as if
/// they had never shipped (a `--ship` sink's name carries a hash of its destination, so all
/// are forgotten rather than one by name). Only while no transcript-sync runs on `db`.
pub fn forget_sinks(db: &Path) {
    let conn = Connection::open(db).expect("opening the archive");
    conn.execute("DELETE FROM consumers WHERE name LIKE 'sink:%'", [])
        .expect("forgetting the sinks' cursors");
}

/// `SELECT`s one integer from the archive at `db`.
pub fn archive_count(db: &Path, sql: &str) -> i64 {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("opening the archive");
    conn.query_row(sql, [], |r| r.get(0))
        .expect("querying the archive")
}

/// The corpus archived by `run --once --watch` (no sink): what every shipping run reads.
fn archive_corpus(ctx: &Ctx, md: &mut String, cache: &Path, quick: bool) -> Archived {
    let spec = corpus::Spec::transcripts_for(quick);
    let c = corpus::ensure(cache, &spec);
    let db = ctx.scratch.join("corpus.db");
    println!(
        "archiving {} files, {:.1} MB",
        c.files.len(),
        c.bytes as f64 / 1e6
    );
    let mut cmd = ctx.run_once(&db, &c.dir);
    let t = time_run(&mut cmd, "run --once (archiving the corpus)");
    let a = Archived {
        records: archive_count(&db, "SELECT count(*) FROM records") as u64,
        record_bytes: archive_count(&db, "SELECT sum(length(CAST(record AS BLOB))) FROM records")
            as u64,
        db,
        corpus: c.dir.clone(),
    };
    assert_eq!(
        a.records, c.records,
        "the archive holds every corpus record"
    );
    let _ = writeln!(
        md,
        "Corpus: {} files, {} records, {:.1} MB of records ({:.1} MB with newlines); archived \
         beforehand by `run --once --watch` (no sink) in {:.1} s.\n",
        c.files.len(),
        a.records,
        a.record_bytes as f64 / 1e6,
        c.bytes as f64 / 1e6,
        t.secs
    );
    a
}

/// `run --once` over the archived tree with no sink: start-up and a pass over the files that
/// finds nothing new, the floor of every shipping run's time.
fn floor(ctx: &Ctx, a: &Archived, md: &mut String) {
    let mut secs = Vec::new();
    for _ in 0..3 {
        let mut cmd = ctx.run_once(&a.db, &a.corpus);
        secs.push(time_run(&mut cmd, "run --once (nothing new)").secs);
    }
    let _ = writeln!(
        md,
        "Floor: `run --once --watch` over the archived tree, nothing new and no sink: {} s \
         (three runs).\n",
        list(&secs)
    );
}

/// `values` to two decimals, comma-separated.
pub fn list(values: &[f64]) -> String {
    let v: Vec<String> = values.iter().map(|v| format!("{v:.2}")).collect();
    v.join(", ")
}

fn main() {
    let quick = env_flag("COMPARE_QUICK");
    let only = std::env::var("SHIP_ONLY").unwrap_or_else(|_| "postgres,http,outage".into());
    let wanted = |m: &str| only.split(',').any(|o| o.trim() == m);
    let bench = machine::target_dir().join("bench");
    let scratch = bench.join("ship-scratch");
    let _ = fs::remove_dir_all(&scratch);
    let ctx = Ctx {
        home: scratch.join("home"),
        scratch,
        runs: env_or("SHIP_RUNS", 3).max(1) as usize,
    };
    fs::create_dir_all(&ctx.home).expect("creating target/bench/ship-scratch");
    let started = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let mode = if quick { "quick" } else { "full" };
    let mut md = format!(
        "Taken {started} ({mode} mode, {} timed runs per throughput subject). {}\n\n",
        ctx.runs,
        Machine::summary()
    );
    if wanted("postgres") || wanted("http") {
        let a = archive_corpus(&ctx, &mut md, &bench.join("corpus"), quick);
        floor(&ctx, &a, &mut md);
        if wanted("postgres") {
            postgres::run(&ctx, &a, &mut md);
        }
        if wanted("http") {
            http::run(&ctx, &a, &mut md);
        }
    }
    if wanted("outage") {
        let secs = env_or("SHIP_OUTAGE_SECS", 600);
        let rate = env_or("SHIP_RATE", 200);
        outage::run(&ctx, secs, rate, &mut md);
    }
    let _ = writeln!(md, "Load average at end {}.", machine::load());
    println!("\n{md}");
    fs::write(bench.join("ship.md"), &md).expect("writing ship.md");
    println!("wrote {}", bench.join("ship.md").display());
    let _ = fs::remove_dir_all(&ctx.scratch);
}
