//! SQLite FTS5 beside tantivy on the session index's text: time to index, size on disk and
//! query latency, both engines on the same messages in the same process.
//!
//! `cargo run --release --manifest-path benches/engines/Cargo.toml` (from the repository
//! root; set `CARGO_TARGET_DIR` to keep tantivy's build out of `target/`). The messages are
//! `text::of_tree` of the tree in `ENGINES_CORPUS` (default
//! `target/bench/index-corpus/256mb-seed1`, written by `cargo bench --bench index`).
//! `ENGINES_RUNS` rounds (default 3) each build, in turn: the bare FTS5 baseline of
//! `benches/index`, tantivy with one indexing thread, tantivy with its default thread count.
//! The queries then run on the last round's indexes. A Markdown report goes to stdout.

#[path = "../../index/text.rs"]
mod text;

mod fts5;
mod report;
mod tantivy_index;

use report::{Build, QueryRow};
use std::path::{Path, PathBuf};
use std::time::Instant;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// The memory budget of tantivy's `IndexWriter`, shared by all its indexing threads.
const TANTIVY_BUDGET: usize = 200_000_000;

/// Timed runs of each query; the first, untimed, warms the caches.
const QUERY_RUNS: usize = 7;

/// One query, in each engine's syntax.
pub struct Probe {
    pub label: &'static str,
    pub fts5: &'static str,
    /// tantivy's `QueryParser` syntax, or `word*` for a prefix of one term.
    pub tantivy: &'static str,
}

const PROBES: &[Probe] = &[
    probe("word", "error", "error"),
    probe("word", "function", "function"),
    probe("word", "tokio", "tokio"),
    probe("stop word", "the", "the"),
    probe("rare word", "heuristic", "heuristic"),
    probe("prefix", "curs*", "curs*"),
    probe("prefix", "re*", "re*"),
    probe("phrase", "\"cargo build\"", "\"cargo build\""),
    probe("path", "\"src/main.rs\"", "\"src/main.rs\""),
    probe("AND", "error AND tokio", "error AND tokio"),
];

const fn probe(label: &'static str, fts5: &'static str, tantivy: &'static str) -> Probe {
    Probe {
        label,
        fts5,
        tantivy,
    }
}

/// An index open for queries.
pub trait Search {
    /// How many messages match `probe`.
    fn count(&self, probe: &Probe) -> Result<u64>;
    /// The message numbers of the 20 best matches by BM25, best first.
    fn top(&self, probe: &Probe) -> Result<Vec<u64>>;
}

fn main() {
    if let Err(err) = run() {
        eprintln!("engines-bench: {err}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let load_at_start = report::load();
    let corpus = std::env::var_os("ENGINES_CORPUS").map_or_else(default_corpus, PathBuf::from);
    let corpus = std::fs::canonicalize(&corpus)?;
    let runs = std::env::var("ENGINES_RUNS").map_or(Ok(3), |v| v.parse())?;
    let texts = text::of_tree(&corpus);
    let scratch = std::env::temp_dir().join(format!("engines-bench-{}", std::process::id()));
    let rss_texts = report::memory_mb("VmRSS");
    let mut builds = [
        Build::new("FTS5 (1 thread)"),
        Build::new("tantivy, 1 indexing thread"),
        Build::new(&format!(
            "tantivy, default ({}) threads",
            tantivy_index::default_threads()
        )),
    ];
    for round in 1..=runs {
        for (i, build) in builds.iter_mut().enumerate() {
            let dir = scratch.join(i.to_string());
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir)?;
            let _ = std::process::Command::new("sync").status();
            let cpu = report::cpu_secs();
            let measured = match i {
                0 => fts5::build(&dir, &texts)?,
                1 => tantivy_index::build(&dir, &texts, Some(1), TANTIVY_BUDGET)?,
                _ => tantivy_index::build(&dir, &texts, None, TANTIVY_BUDGET)?,
            };
            eprintln!("round {round}: {} {:.2} s", build.label, measured.secs);
            build.add(
                measured,
                report::cpu_secs() - cpu,
                report::memory_mb("VmHWM"),
            );
        }
    }
    let engines: Vec<Box<dyn Search>> = vec![
        Box::new(fts5::Fts5::open(&scratch.join("0"))?),
        Box::new(tantivy_index::TantivyIndex::open(&scratch.join("1"))?),
        Box::new(tantivy_index::TantivyIndex::open(&scratch.join("2"))?),
    ];
    let rows = PROBES
        .iter()
        .map(|p| query_row(p, &engines))
        .collect::<Result<Vec<_>>>()?;
    drop(engines);
    std::fs::remove_dir_all(&scratch)?;
    let md = report::Report {
        corpus: &corpus,
        corpus_bytes: report::tree_bytes(&corpus),
        texts: &texts,
        runs,
        rss_texts,
        builds: &builds,
        rows: &rows,
        load_at_start,
    };
    println!("{}", md.render());
    Ok(())
}

fn default_corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench/index-corpus/256mb-seed1")
}

/// `probe`'s match count and median milliseconds to its top 20, in each engine, and how many
/// of FTS5's top 20 the last engine's top 20 share.
fn query_row(probe: &Probe, engines: &[Box<dyn Search>]) -> Result<QueryRow> {
    let mut row = QueryRow {
        label: format!("{} `{}`", probe.label, probe.fts5),
        counts: Vec::new(),
        ms: Vec::new(),
        shared: 0,
    };
    let mut tops = Vec::new();
    for engine in engines {
        row.counts.push(engine.count(probe)?);
        tops.push(engine.top(probe)?);
        let mut ms = Vec::new();
        for _ in 0..QUERY_RUNS {
            let start = Instant::now();
            engine.top(probe)?;
            ms.push(start.elapsed().as_secs_f64() * 1e3);
        }
        row.ms.push(report::median(&mut ms));
    }
    if let [first, .., last] = &tops[..] {
        row.shared = first.iter().filter(|id| last.contains(id)).count();
    }
    Ok(row)
}
