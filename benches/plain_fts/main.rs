//! `search` beside a plain FTS5 application: the same messages' text in a bare FTS5 table,
//! queried by Debian's `sqlite3` shell, each query a process of its own on both sides.
//!
//! `cargo bench --bench plain_fts`: the `index` bench's real-shaped tree (generated once into
//! `target/bench/index-corpus/`, shared with it), archived by `run --once` with the index on.
//! The plain application's table holds the text of the same messages (`index/text.rs`, the
//! text the `index` bench inserts), contentful so that `snippet()` works, tokenized by
//! `unicode61 remove_diacritics 2` with the index's categories (the shell has no `words`, so
//! Chinese, Japanese and Korean runs are one token each there), in transactions of 20,000 rows.
//! Each round runs every query once with each subject in turn (the builds taking turns at
//! going first): `transcript-sync search Q --limit 20`, the baseline build's, and `sqlite3
//! -readonly` with `ORDER BY bm25(t) LIMIT 20` and a snippet per hit; each timed from spawn to
//! exit with its output read.
//!
//! `INDEX_MB` sets the corpus size (default 256; `COMPARE_QUICK=1` makes it 32),
//! `PLAIN_FTS_RUNS` the timed rounds (default 5, after one untimed), `PLAIN_FTS_BASELINE_BIN`
//! another build's binary (it archives the tree into an archive of its own). `PLAIN_FTS_SQLITE`
//! names the shell (default `sqlite3`). Results: a table on stdout and in
//! `target/bench/plain_fts.md`.

// `real_shaped`'s generator and the `index` bench's corpus and text, from their folders.
#[path = "../real_shaped"]
mod real_shaped {
    #[allow(dead_code)]
    pub(crate) mod tree;
}
#[path = "../index/corpus.rs"]
#[allow(dead_code)]
mod corpus;
#[path = "../index/text.rs"]
mod text;

use corpus::{ensure_corpus, fake_home, remove_archive};
use rusqlite::{Connection, params};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;
use testkit::env;
use testkit::machine::{self, Machine};
use testkit::stats::{median, quantile_of};

/// One kind of query: what it stands for, as `search` takes it, and as FTS5 takes it (a path
/// is a phrase there; `search` quotes it itself).
struct Kind {
    label: &'static str,
    ours: &'static str,
    plain: &'static str,
}

const fn k(label: &'static str, ours: &'static str, plain: &'static str) -> Kind {
    Kind { label, ours, plain }
}

/// Chosen from the real-shaped tree: its prose is the Markdown and text of this machine's
/// crates and `/usr/share/doc`, its tool output `cargo build`, `git status` and `rg -n` over
/// a crate, its paths the crates' files. Its Chinese, Japanese and Korean words are in the
/// tree of `REAL_SHAPED_PROSE=cjk` (the translated man pages' "file"); the other tree has
/// none, so there they time a search that finds nothing.
const KINDS: &[Kind] = &[
    k("common word", "the", "the"),
    k("rare word", "panicked", "panicked"),
    k("two words", "error file", "error file"),
    k("phrase", "\"cargo build\"", "\"cargo build\""),
    k("short prefix", "re*", "re*"),
    k("longer prefix", "serial*", "serial*"),
    k("OR", "tokio OR async", "tokio OR async"),
    k("NOT", "error NOT warning", "error NOT warning"),
    k("path", "src/lib.rs", "\"src/lib.rs\""),
    k("word of tool output", "Compiling", "Compiling"),
    k("word with punctuation", "Cargo.toml", "\"Cargo.toml\""),
    k("no such word", "zyzzyva", "zyzzyva"),
    k(
        "(OR) NOT",
        "(build OR test) NOT fails",
        "(build OR test) NOT fails",
    ),
    k("Chinese word", "文件", "文件"),
    k("Japanese word", "ファイル", "ファイル"),
    k("Korean word", "파일", "파일"),
];

/// One program timed: its label and the milliseconds of each kind's runs, by kind.
struct Subject {
    label: String,
    ms: Vec<Vec<f64>>,
    lines: Vec<usize>,
}

impl Subject {
    fn new(label: &str) -> Subject {
        Subject {
            label: label.into(),
            ms: vec![Vec::new(); KINDS.len()],
            lines: vec![0; KINDS.len()],
        }
    }

    fn all_ms(&self) -> Vec<f64> {
        self.ms.concat()
    }
}

/// A build of transcript-sync and the archive it made of the tree.
struct Build {
    bin: PathBuf,
    db: PathBuf,
    timed: Subject,
    floor: [Vec<f64>; 2],
}

fn main() {
    let quick = env::env_flag("COMPARE_QUICK");
    let mb = env::env_or("INDEX_MB", if quick { 32 } else { 256 });
    let runs = env::env_or("PLAIN_FTS_RUNS", 5) as usize;
    let shell = std::env::var("PLAIN_FTS_SQLITE").unwrap_or_else(|_| "sqlite3".into());
    let machine = Machine::summary();
    let bench = machine::target_dir().join("bench");
    let corpus = ensure_corpus(&bench.join("index-corpus"), mb);
    let scratch = tempfile::tempdir_in(&bench).expect("creating a scratch directory");
    let home = fake_home(scratch.path(), &corpus);
    let mut builds = vec![build(
        "this build",
        env!("CARGO_BIN_EXE_transcript-sync"),
        scratch.path(),
    )];
    if let Some(other) = std::env::var_os("PLAIN_FTS_BASELINE_BIN") {
        builds.push(build("baseline", &other.to_string_lossy(), scratch.path()));
    }
    for b in &builds {
        remove_archive(&b.db);
        let secs = timed(&mut ours(&b.bin, &home, &b.db, &["run", "--once"])).0;
        println!("{}: run --once {:.2} s", b.timed.label, secs / 1e3);
    }
    let plain_db = scratch.path().join("plain.db");
    let messages = plain_table(&plain_db, &text::of_tree(&corpus));
    let mut plain = Subject::new("plain FTS5 (`sqlite3`)");
    let mut plain_floor = Vec::new();
    for round in 0..=runs {
        // The builds take turns at going first, so that neither always runs right after the
        // shell's process.
        let order: Vec<usize> = match round % 2 {
            0 => (0..builds.len()).collect(),
            _ => (0..builds.len()).rev().collect(),
        };
        for (i, kind) in KINDS.iter().enumerate() {
            for &j in &order {
                let b = &mut builds[j];
                let args = ["search", kind.ours, "--limit", "20"];
                let (ms, lines) = timed(&mut ours(&b.bin, &home, &b.db, &args));
                record(&mut b.timed, i, round, ms, lines);
            }
            let (ms, lines) = timed(&mut plain_query(&shell, &plain_db, kind.plain));
            record(&mut plain, i, round, ms, lines);
        }
        for b in &mut builds {
            let version = timed(&mut ours(&b.bin, &home, &b.db, &["--version"])).0;
            let sessions = ["sessions", "--limit", "1"];
            let listed = timed(&mut ours(&b.bin, &home, &b.db, &sessions)).0;
            if round > 0 {
                b.floor[0].push(version);
                b.floor[1].push(listed);
            }
        }
        let select = timed(Command::new(&shell).args([":memory:", "select 1"])).0;
        if round > 0 {
            plain_floor.push(select);
        }
        println!("round {round} of {runs} done");
    }
    let head = format!(
        "Taken {}: a {:.1} MB real-shaped tree (`INDEX_MB={mb}`), {messages} messages, \
         {runs} rounds. {machine} Load average at end {}.\n\n",
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()),
        corpus::tree_bytes(&corpus) as f64 / 1e6,
        machine::load(),
    );
    let md = head + &report(&builds, &plain, &plain_floor);
    println!("\n{md}");
    fs::write(bench.join("plain_fts.md"), &md).expect("writing plain_fts.md");
}

fn build(label: &str, bin: &str, scratch: &Path) -> Build {
    Build {
        bin: bin.into(),
        db: scratch.join(format!("{}.db", label.replace(' ', "-"))),
        timed: Subject::new(label),
        floor: [Vec::new(), Vec::new()],
    }
}

/// Keeps a timed run (round 0 is untimed) and the lines it printed.
fn record(subject: &mut Subject, kind: usize, round: usize, ms: f64, lines: usize) {
    subject.lines[kind] = lines;
    if round > 0 {
        subject.ms[kind].push(ms);
    }
}

/// transcript-sync with nothing of this machine's environment: `HOME` is `home`.
fn ours(bin: &Path, home: &Path, db: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .args(args)
        .arg("--db")
        .arg(db);
    cmd
}

/// The plain application's query: the best 20 by BM25, each with its snippet.
fn plain_query(shell: &str, db: &Path, query: &str) -> Command {
    let sql = format!(
        "SELECT rowid, snippet(t, 0, '[', ']', '…', 24) FROM t WHERE t MATCH '{}' \
         ORDER BY bm25(t) LIMIT 20;",
        query.replace('\'', "''")
    );
    let mut cmd = Command::new(shell);
    cmd.arg("-readonly").arg(db).arg(sql);
    cmd
}

/// Milliseconds from spawn to exit with the whole output read, and the lines printed; panics
/// when the command fails (a search that finds nothing exits 1 and says so: a result too).
fn timed(cmd: &mut Command) -> (f64, usize) {
    let start = Instant::now();
    let out: Output = cmd.output().expect("starting a timed command");
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let nothing = out.status.code() == Some(1) && stderr.contains("no message matches");
    assert!(out.status.success() || nothing, "{cmd:?} failed:\n{stderr}");
    (ms, out.stdout.split(|b| *b == b'\n').count() - 1)
}

/// A new contentful FTS5 table `t` at `path` holding `texts`, in transactions of 20,000
/// rows, as a plain application would fill it; returns how many rows.
fn plain_table(path: &Path, texts: &[String]) -> usize {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let _ = fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let mut conn = Connection::open(path).expect("opening the plain table");
    conn.execute_batch(
        "CREATE VIRTUAL TABLE t USING fts5 (body,
             tokenize = 'unicode61 remove_diacritics 2 categories ''L* N* Co M*''');",
    )
    .expect("making the plain table");
    for (n, chunk) in texts.chunks(20_000).enumerate() {
        let tx = conn.transaction().expect("a transaction");
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO t (rowid, body) VALUES (?1, ?2)")
                .expect("preparing the insert");
            for (i, text) in chunk.iter().enumerate() {
                let rowid = (n * 20_000 + i + 1) as i64;
                insert.execute(params![rowid, text]).expect("inserting");
            }
        }
        tx.commit().expect("committing");
    }
    texts.len()
}

fn report(builds: &[Build], plain: &Subject, plain_floor: &[f64]) -> String {
    let q = |v: &[f64], p: f64| quantile_of(v, p);
    let mut md = String::from("| kind | query | lines, ours / plain |");
    for b in builds {
        let _ = write!(md, " {} p50 / p95 ms |", b.timed.label);
    }
    md.push_str(" plain p50 / p95 ms | ours ÷ plain (p50) |\n|---|---|---:|");
    md.push_str(&"---:|".repeat(builds.len() + 2));
    md.push('\n');
    let ours = &builds[0].timed;
    for (i, kind) in KINDS.iter().enumerate() {
        let _ = write!(
            md,
            "| {} | `{}` | {} / {} |",
            kind.label, kind.ours, ours.lines[i], plain.lines[i]
        );
        for b in builds {
            let ms = &b.timed.ms[i];
            let _ = write!(md, " {:.1} / {:.1} |", q(ms, 0.5), q(ms, 0.95));
        }
        let ratio = median(&ours.ms[i]) / median(&plain.ms[i]);
        let _ = writeln!(
            md,
            " {:.1} / {:.1} | {ratio:.2} |",
            median(&plain.ms[i]),
            q(&plain.ms[i], 0.95)
        );
    }
    md.push_str("\nOver every timed run of every kind:\n\n");
    md.push_str("| subject | p50 ms | p95 ms | slowest kind's p50 ÷ overall p50 | floor ms |\n");
    md.push_str("|---|---:|---:|---:|---|\n");
    let mut row = |s: &Subject, floor: String| {
        let all = s.all_ms();
        let worst = (s.ms.iter()).map(|ms| median(ms)).fold(0.0, f64::max);
        let _ = writeln!(
            md,
            "| {} | {:.1} | {:.1} | {:.2} | {floor} |",
            s.label,
            median(&all),
            q(&all, 0.95),
            worst / median(&all)
        );
    };
    for b in builds {
        let floor = format!(
            "`--version` {:.1}, `sessions --limit 1` {:.1}",
            median(&b.floor[0]),
            median(&b.floor[1])
        );
        row(&b.timed, floor);
    }
    row(
        plain,
        format!("`sqlite3 :memory: 'select 1'` {:.1}", median(plain_floor)),
    );
    md
}
