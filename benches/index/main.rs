//! How fast the session index makes an archive searchable, beside the FTS5 engine it uses.
//!
//! `cargo bench --bench index`: writes a real-shaped tree of transcripts (Claude Code sessions
//! with subagents, and Codex rollouts: real code and prose of this machine, `real_shaped`'s
//! generator, seed 1) into `target/bench/index-corpus/`. Then each round times, in turn:
//! `run --once` into a new archive (every record committed, then indexed); `transcript-sync
//! reindex` (the index built again from the archive's records, and the time until it is
//! searchable: less the merge of its segments at the end, which its log times); the
//! index threads' CPU per live record (`live`); and a bare FTS5 insert of the same messages'
//! text (one connection, contentless, the index's tokenizer, transactions of 20,000 rows).
//! Last, what `search --stem` adds for twenty common words (`stem`).
//!
//! `INDEX_MB` sets the corpus size (default 256; `COMPARE_QUICK=1` makes it 32),
//! `REAL_SHAPED_PROSE=cjk` a corpus whose prose is Chinese, Japanese and Korean, `INDEX_RUNS`
//! how many rounds (default 3), `INDEX_BASELINE_BIN` another build's binary, measured in the
//! same rounds right after this one. Results: a table on stdout and in
//! `target/bench/index.md`.

// `real_shaped`'s generator, from that bench's folder: an inline module given the folder as
// its path, so that `tree.rs` finds its parts in `tree/` there, as it does in `real_shaped`.
#[path = "../real_shaped"]
mod real_shaped {
    #[allow(dead_code)]
    pub(crate) mod tree;
}

mod corpus;
mod live;
mod stem;
mod text;

use corpus::{ensure_corpus, fake_home, remove_archive, tree_bytes};
use real_shaped::tree;
use rusqlite::{Connection, params};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use testkit::cpu::children_cpu_secs;
use testkit::machine::{self, Machine};
use testkit::stats::median;

/// Rows per transaction of the bare FTS5 baseline.
const FTS_TRANSACTION: usize = 20_000;

/// One build of the daemon, timed.
struct Subject {
    label: String,
    bin: PathBuf,
    secs: Vec<f64>,
    cpu_secs: Vec<f64>,
    /// Seconds of `run --once` into a new archive: every record committed and indexed.
    once_secs: Vec<f64>,
    /// CPU microseconds of the index threads per live record.
    live_us: Vec<f64>,
    /// Bytes of the index's file (with its WAL) after each `reindex`.
    index_bytes: Vec<f64>,
    /// Seconds of each `reindex` before its search segments were merged into one: the index
    /// answers searches from its last commit, before the merge starts.
    searchable_secs: Vec<f64>,
}

fn main() {
    let quick = std::env::var_os("COMPARE_QUICK").is_some_and(|v| v != "0" && !v.is_empty());
    let mb: u64 = env_number("INDEX_MB").unwrap_or(if quick { 32 } else { 256 });
    let runs = env_number("INDEX_RUNS").unwrap_or(3) as usize;
    let machine = Machine::summary();
    let bench = machine::target_dir().join("bench");
    let corpus = ensure_corpus(&bench.join("index-corpus"), mb);
    let scratch = tempfile::tempdir_in(&bench).expect("creating a scratch directory");
    let home = fake_home(scratch.path(), &corpus);
    let db = scratch.path().join("archive.db");
    let mut subjects = vec![subject("this build", env!("CARGO_BIN_EXE_transcript-sync"))];
    if let Some(other) = std::env::var_os("INDEX_BASELINE_BIN") {
        subjects.push(subject("baseline build", &other.to_string_lossy()));
    }
    let texts = text::of_tree(&corpus);
    let text_bytes: usize = texts.iter().map(String::len).sum();
    let bytes = tree_bytes(&corpus);
    let lines = live::claude_lines(&corpus);
    let mut fts = Vec::new();
    for round in 1..=runs {
        for s in &mut subjects {
            remove_archive(&db);
            let secs = run_secs(&s.bin, &home, &db, &["run", "--once"]);
            s.once_secs.push(secs);
            println!("round {round}: {} run --once {secs:.2} s", s.label);
        }
        for s in &mut subjects {
            let before = children_cpu_secs();
            let (secs, merge_secs) = reindex_secs(&s.bin, &home, &db);
            s.cpu_secs.push(children_cpu_secs() - before);
            s.secs.push(secs);
            s.searchable_secs.push(secs - merge_secs);
            s.index_bytes.push(index_bytes(&db));
            println!(
                "round {round}: {} reindex {secs:.2} s, searchable at {:.2} s",
                s.label,
                secs - merge_secs
            );
        }
        for s in &mut subjects {
            let us = live::cpu_per_record(&s.bin, scratch.path(), &lines);
            s.live_us.push(us);
            println!(
                "round {round}: {} live {us:.0} µs of CPU per record",
                s.label
            );
        }
        let secs = bare_fts(scratch.path(), &texts);
        println!("round {round}: bare FTS5 {secs:.2} s");
        fts.push(secs);
    }
    let corpus = Corpus {
        mb,
        bytes,
        messages: texts.len(),
        text_bytes,
    };
    let mut md = report(&machine, &corpus, runs, &subjects, &fts);
    // The archive and index the last `reindex` of this build left.
    let this = &subjects[0];
    run_secs(&this.bin, &home, &db, &["reindex"]);
    md.push_str("\n`search --stem`, on this corpus:\n\n");
    md.push_str(&stem::report(&this.bin, &home, &db));
    println!("\n{md}");
    fs::write(bench.join("index.md"), &md).expect("writing index.md");
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn subject(label: &str, bin: &str) -> Subject {
    Subject {
        label: label.into(),
        bin: bin.into(),
        secs: Vec::new(),
        cpu_secs: Vec::new(),
        once_secs: Vec::new(),
        live_us: Vec::new(),
        index_bytes: Vec::new(),
        searchable_secs: Vec::new(),
    }
}

/// Bytes of the index of the archive at `db`: its file and its WAL.
fn index_bytes(db: &Path) -> f64 {
    let size =
        |suffix: &str| fs::metadata(format!("{}{suffix}", db.display())).map_or(0, |m| m.len());
    (size("-index") + size("-index-wal")) as f64
}

/// Runs `bin args --db db` under `home`, from spawn to exit; panics if it fails.
fn run_secs(bin: &Path, home: &Path, db: &Path, args: &[&str]) -> f64 {
    run_logged(bin, home, db, args, "warn").0
}

/// Runs `bin reindex --db db` under `home`: its seconds from spawn to exit, and the seconds
/// its log says the merge of the search segments at the end took (0 without one).
fn reindex_secs(bin: &Path, home: &Path, db: &Path) -> (f64, f64) {
    let (secs, log) = run_logged(bin, home, db, &["reindex"], "info");
    let merge_ms = log.lines().find_map(|line| {
        let (_, after) = line.split_once("merged into one in ")?;
        after.split_once(" ms")?.0.parse::<f64>().ok()
    });
    if merge_ms.is_none() {
        println!(
            "no merge time in the log of {}: its searchable-at is its whole reindex",
            bin.display()
        );
    }
    (secs, merge_ms.unwrap_or(0.0) / 1000.0)
}

/// Runs `bin args --db db` under `home` logging at `level`: its seconds from spawn to exit, and
/// its log; panics if it fails.
fn run_logged(bin: &Path, home: &Path, db: &Path, args: &[&str], level: &str) -> (f64, String) {
    let _ = Command::new("sync").status();
    let start = Instant::now();
    let out = Command::new(bin)
        .args(args)
        .arg("--db")
        .arg(db)
        .env("HOME", home)
        .env("RUST_LOG", level)
        .output()
        .expect("starting transcript-sync");
    let secs = start.elapsed().as_secs_f64();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{} {args:?} failed:\n{log}",
        bin.display()
    );
    (secs, log)
}

/// Seconds to insert `texts` into a new contentless FTS5 table of the index's tokenizer, in
/// transactions of [`FTS_TRANSACTION`] rows on one connection, and to commit the last.
fn bare_fts(scratch: &Path, texts: &[String]) -> f64 {
    let path = scratch.join("bare-fts.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let mut conn = Connection::open(&path).expect("opening the FTS5 baseline");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE VIRTUAL TABLE t USING fts5 (body, content = '',
             tokenize = 'unicode61 remove_diacritics 2');",
    )
    .expect("making the FTS5 baseline");
    let _ = Command::new("sync").status();
    let start = Instant::now();
    for (n, chunk) in texts.chunks(FTS_TRANSACTION).enumerate() {
        let tx = conn.transaction().expect("a transaction");
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO t (rowid, body) VALUES (?1, ?2)")
                .expect("preparing the insert");
            for (i, text) in chunk.iter().enumerate() {
                let rowid = (n * FTS_TRANSACTION + i + 1) as i64;
                insert.execute(params![rowid, text]).expect("inserting");
            }
        }
        tx.commit().expect("committing");
    }
    start.elapsed().as_secs_f64()
}

/// What was indexed.
struct Corpus {
    mb: u64,
    bytes: u64,
    messages: usize,
    text_bytes: usize,
}

fn report(machine: &str, c: &Corpus, runs: usize, subjects: &[Subject], fts: &[f64]) -> String {
    let started = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let mut md = format!(
        "Taken {started}: a {:.1} MB real-shaped tree (`INDEX_MB={}`{}), {} messages of {:.1} MB \
         of text, {runs} rounds. {machine}\n\n",
        c.bytes as f64 / 1e6,
        c.mb,
        if tree::cjk_prose() {
            ", `REAL_SHAPED_PROSE=cjk`"
        } else {
            ""
        },
        c.messages,
        c.text_bytes as f64 / 1e6,
    );
    md.push_str(
        "| subject | median s | MB/s of transcript | CPU s (median) | × bare FTS5 | searchable at, s | × bare FTS5 | index MB |\n",
    );
    md.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    let fts_secs = median(fts);
    let mbps = |secs: f64| c.bytes as f64 / 1e6 / secs;
    for s in subjects {
        let secs = median(&s.secs);
        let searchable = median(&s.searchable_secs);
        let _ = writeln!(
            md,
            "| {} `reindex` | {secs:.2} | {:.1} | {:.2} | {:.2} | {searchable:.2} | {:.2} | {:.1} |",
            s.label,
            mbps(secs),
            median(&s.cpu_secs),
            fts_secs / secs,
            fts_secs / searchable,
            median(&s.index_bytes) / 1e6
        );
    }
    let _ = writeln!(
        md,
        "| bare FTS5 insert, same text | {fts_secs:.2} | {:.1} | – | 1.00 | {fts_secs:.2} | 1.00 | – |",
        mbps(fts_secs)
    );
    md.push_str(
        "\n\"Searchable at\": the `reindex` less the merge of its search segments into one at \
         the end, as its log times it; the index answers searches from its last commit, before \
         the merge starts. The bare insert's segments are left as FTS5's own merging leaves \
         them.\n",
    );
    md.push_str(
        "\n`run --once` into a new archive (every record committed, then indexed), median:\n\n",
    );
    for s in subjects {
        let secs = median(&s.once_secs);
        let _ = writeln!(md, "- {}: {secs:.2} s ({:.1} MB/s)", s.label, mbps(secs));
    }
    let _ = writeln!(
        md,
        "\nThe index threads' CPU per live record ({} records appended at 200/s to one \
         transcript of a running daemon), median of the rounds:\n",
        live::RECORDS
    );
    for s in subjects {
        let _ = writeln!(md, "- {}: {:.0} µs", s.label, median(&s.live_us));
    }
    let _ = writeln!(md, "\nLoad average at end {}.", machine::load());
    md
}
