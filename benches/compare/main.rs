//! Side by side: transcript-sync beside `cat`, GNU `tail -F`, rsyslog's imfile and syslog-ng's
//! wildcard-file, on one synthetic transcript corpus, in one run: backfill throughput, live
//! latency, restart cost, idle cost and memory, each against its target.
//!
//! `cargo bench --bench compare`, after `benches/setup.sh` has installed the peers (without
//! them only transcript-sync, `cat` and `tail` are measured, and the run says so).
//! `COMPARE_QUICK=1` makes a small run (64 MB corpus, 1,000 appends per rate, 10 s idle);
//! `COMPARE_ONLY=backfill,latency,restart,idle,memory` picks measurements. Results: a table on
//! stdout, `target/bench/compare.json` and `target/bench/compare.md` (to paste into
//! BENCHMARKS.md). Corpora are generated once, from a fixed seed, into
//! `target/bench/corpus/`.

mod backfill;
mod latency;
mod memory;
mod peers;
mod report;
mod restart;
mod subject;

use testkit::{corpus, cpu, machine, procfs, records};

use serde::Serialize;
use std::path::{Path, PathBuf};

/// How big a run is.
#[derive(Clone, Debug, Serialize)]
pub struct Scale {
    pub corpus_bytes: u64,
    pub corpus_files: usize,
    pub appends: usize,
    pub rates: Vec<u64>,
    pub live_files: usize,
    pub restart_files: usize,
    pub idle_files: usize,
    pub idle_secs: u64,
    pub big_record: u64,
}

impl Scale {
    fn from_env(quick: bool) -> Scale {
        let mut s = if quick {
            Scale {
                corpus_bytes: 64 << 20,
                corpus_files: 100,
                appends: 1000,
                rates: vec![100, 1000],
                live_files: 100,
                restart_files: 2000,
                idle_files: 1000,
                idle_secs: 10,
                big_record: 60 << 20,
            }
        } else {
            Scale {
                corpus_bytes: 1 << 30,
                corpus_files: 1000,
                appends: 10_000,
                rates: vec![100, 1000],
                live_files: 100,
                restart_files: 10_000,
                idle_files: 1000,
                idle_secs: 60,
                big_record: 60 << 20,
            }
        };
        if let Some(n) = env_number("COMPARE_APPENDS") {
            s.appends = n as usize;
        }
        if let Some(n) = env_number("COMPARE_IDLE_SECS") {
            s.idle_secs = n;
        }
        s
    }
}

fn env_number(key: &str) -> Option<u64> {
    std::env::var(key).ok()?.parse().ok()
}

/// What every measurement needs.
pub struct Ctx {
    pub scale: Scale,
    pub peers: Option<peers::Peers>,
    /// Fresh state directories are made under here, one per subject run.
    pub scratch: PathBuf,
    pub had_dev_log: bool,
}

impl Ctx {
    /// A new, empty directory for one subject's run (archive, configuration, state, output).
    pub fn fresh_state(&self, subject: &str) -> tempfile::TempDir {
        // Write back what earlier subjects left dirty in the page cache, so that no subject
        // is throttled for another's writes (a backfill leaves about a gigabyte).
        let _ = std::process::Command::new("sync").status();
        let prefix: String = subject
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        tempfile::Builder::new()
            .prefix(&format!("{prefix}-"))
            .tempdir_in(&self.scratch)
            .expect("a state directory")
    }
}

/// Everything a run measured.
#[derive(Serialize)]
pub struct Results {
    pub mode: &'static str,
    pub started_at: String,
    pub machine: machine::Machine,
    pub scale: Scale,
    pub page_cache: &'static str,
    pub corpus: Option<corpus::Summary>,
    pub verdicts: Vec<report::Verdict>,
    pub backfill: Vec<backfill::Row>,
    pub latency: Vec<latency::Row>,
    pub restart: Option<restart::Restart>,
    pub idle: Vec<restart::IdleRow>,
    pub memory: Vec<memory::Row>,
}

/// The number after `key=` in a log line.
pub fn log_value(line: &str, key: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

fn main() {
    let quick = std::env::var_os("COMPARE_QUICK").is_some_and(|v| v != "0" && !v.is_empty());
    let only = std::env::var("COMPARE_ONLY").unwrap_or_default();
    let wanted = |m: &str| only.is_empty() || only.split(',').any(|o| o.trim() == m);
    let target = machine::target_dir();
    let bench = target.join("bench");
    let scratch = bench.join("scratch");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).expect("creating target/bench/scratch");
    let peers = match peers::Peers::locate(&target) {
        Ok(p) => Some(p),
        Err(why) => {
            eprintln!(
                "compare: {why}; run `bash benches/setup.sh` (as root) to install rsyslog and \
                 syslog-ng; measuring without them"
            );
            None
        }
    };
    let versions = peers.as_ref().map(|p| p.versions()).unwrap_or_default();
    let ctx = Ctx {
        scale: Scale::from_env(quick),
        peers,
        scratch,
        had_dev_log: Path::new("/dev/log").exists(),
    };
    let mut results = Results {
        mode: if quick { "quick" } else { "full" },
        started_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        machine: machine::Machine::describe(&target, versions),
        scale: ctx.scale.clone(),
        page_cache: "warm (the corpus is read with cat before each timed run)",
        corpus: None,
        verdicts: Vec::new(),
        backfill: Vec::new(),
        latency: Vec::new(),
        restart: None,
        idle: Vec::new(),
        memory: Vec::new(),
    };
    let cache = bench.join("corpus");
    if wanted("backfill") {
        let spec = corpus::Spec::transcripts(ctx.scale.corpus_files, ctx.scale.corpus_bytes);
        let c = corpus::ensure(&cache, &spec);
        println!(
            "backfill: {} files, {} records, {:.1} MB",
            c.files.len(),
            c.records,
            c.bytes as f64 / 1e6
        );
        results.backfill = backfill::run(&ctx, &c);
        results.corpus = Some(c.summary());
    }
    if wanted("latency") {
        println!(
            "latency: {} appends per rate over {} files",
            ctx.scale.appends, ctx.scale.live_files
        );
        results.latency = latency::run(&ctx);
    }
    if wanted("restart") {
        let spec = small_spec("restart", ctx.scale.restart_files);
        results.restart = Some(restart::restart(&ctx, &corpus::ensure(&cache, &spec)));
    }
    if wanted("idle") {
        let spec = small_spec("idle", ctx.scale.idle_files);
        results.idle = restart::idle(&ctx, &corpus::ensure(&cache, &spec));
    }
    if wanted("memory") {
        results.memory = memory::run(&ctx);
    }
    results.machine.load_at_end = machine::load();
    results.verdicts = report::verdicts(&results);
    let md = report::markdown(&results);
    println!("\n{md}");
    let json = serde_json::to_string_pretty(&results).expect("results serialize");
    std::fs::write(bench.join("compare.json"), json).expect("writing compare.json");
    std::fs::write(bench.join("compare.md"), md).expect("writing compare.md");
    println!(
        "wrote {} and {}",
        bench.join("compare.json").display(),
        bench.join("compare.md").display()
    );
    let _ = std::fs::remove_dir_all(&ctx.scratch);
}

fn small_spec(name: &'static str, files: usize) -> corpus::Spec {
    corpus::Spec {
        name,
        files,
        shape: corpus::Shape::Small { records: 4 },
    }
}
