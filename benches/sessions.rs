//! The session index at scale, through the real binary: `search` and `usage` over the
//! compare corpus (archived by `run --once` with the index on), `sessions` over 10,000 small
//! Claude Code sessions, and how much of the archive the index takes.
//!
//! `cargo bench --bench sessions`; `COMPARE_QUICK=1` uses the 64 MB corpus instead of the
//! 1 GiB one (both are the compare bench's, generated once into `target/bench/corpus/`).
//! `SESSIONS_RUNS` sets how many timed runs each command gets (default 7, after one untimed).
//! Every time is from spawn to exit, so process start and opening the archive are in it; the
//! floor is `sessions --limit 1`. `SESSIONS_BASELINE_BIN=<binary>` archives the corpus again
//! with another build and times each query with it too, right after this build's runs.
//! Results: tables on stdout and `target/bench/sessions.md`. `SESSIONS_KEEP=1` keeps the
//! archives and their indexes in `target/bench/sessions-scratch/`.

use rusqlite::{Connection, OpenFlags};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use testkit::corpus;
use testkit::cpu::children_cpu_secs;
use testkit::env;
use testkit::machine::{self, Machine};
use testkit::stats::{median, quantile_of};

const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");

/// How many Claude Code sessions the `sessions` measurement lists.
const SESSIONS: usize = 10_000;

/// One `search`: what it stands for, then its arguments after `search`.
struct Query {
    label: &'static str,
    args: &'static [&'static str],
}

/// Chosen from what `testkit/src/records.rs` writes: the prose is cut from a pool of 57
/// words, so every one of them is in nearly every message ("common"); `png` and `media_type`
/// are only in the rare image results, `exit_code` only in Codex tool outputs, `Bash` only in
/// Claude Code tool calls.
const QUERIES: &[Query] = &[
    q("rare word", &["png"]),
    q("rare word with punctuation", &["media_type"]),
    q("word of Codex tool outputs", &["exit_code"]),
    q("word of Claude tool calls", &["Bash"]),
    q("common word", &["cursor"]),
    q("commonest word", &["the"]),
    q("phrase of two common words", &["\"cargo build\""]),
    q("path, as a phrase", &["src/main.rs"]),
    q("prefix of one term", &["curs*"]),
    q("two-letter prefix", &["re*"]),
    q("prefix, non-ASCII", &["rés*"]),
    q("rare OR rare", &["png OR media_type"]),
    q("common OR common", &["cursor OR offset"]),
    q("common NOT common", &["cursor NOT offset"]),
    q("medium NOT common", &["Bash NOT cargo"]),
    q("(OR) NOT", &["(build OR test) NOT fails"]),
    q("common, --project", &["cursor", "--project", "project-3"]),
    q("common, --harness codex", &["cursor", "--harness", "codex"]),
    q(
        "rare, --harness claude-code",
        &["png", "--harness", "claude-code"],
    ),
    q("no such word", &["zyzzyva"]),
];

const fn q(label: &'static str, args: &'static [&'static str]) -> Query {
    Query { label, args }
}

/// The times of one command's runs, in milliseconds, and the lines it printed.
struct Timed {
    ms: Vec<f64>,
    lines: usize,
}

impl Timed {
    fn median(&self) -> f64 {
        median(&self.ms)
    }
}

/// transcript-sync with nothing of this machine's environment: `HOME` is `home`, so the
/// built-in watchers look there and nowhere else.
fn ts(bin: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("NO_COLOR", "1");
    cmd
}

/// What archiving took: wall and CPU seconds over every attempt, and why earlier attempts
/// failed.
struct Archived {
    secs: f64,
    cpu_secs: f64,
    failures: Vec<String>,
}

/// `run --once` into `db` over what the built-in watchers find under `home`. A run that fails
/// is run again (it resumes from its cursors, the index from its last batch), at most twice,
/// and the failure is reported rather than hidden.
fn archive(bin: &Path, home: &Path, db: &Path) -> Archived {
    let _ = Command::new("sync").status();
    let mut archived = Archived {
        secs: 0.0,
        cpu_secs: 0.0,
        failures: Vec::new(),
    };
    loop {
        let mut cmd = ts(bin, home);
        cmd.args(["run", "--once", "--db"])
            .arg(db)
            .env("RUST_LOG", "warn");
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let before = children_cpu_secs();
        let start = Instant::now();
        let out = cmd.output().expect("starting transcript-sync run --once");
        archived.secs += start.elapsed().as_secs_f64();
        archived.cpu_secs += children_cpu_secs() - before;
        if out.status.success() {
            return archived;
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        let why = stderr.lines().last().unwrap_or_default().to_owned();
        println!("  run --once failed after {:.1} s: {why}", archived.secs);
        archived
            .failures
            .push(format!("{why} (after {:.1} s)", archived.secs));
        assert!(
            archived.failures.len() < 3,
            "run --once failed 3 times:\n{stderr}"
        );
    }
}

impl Archived {
    /// "; failed first: …, then run again" when it had to be.
    fn note(&self) -> String {
        if self.failures.is_empty() {
            return String::new();
        }
        format!(
            " **`run --once` failed {} time(s) and was run again** (time summed): {}",
            self.failures.len(),
            self.failures.join("; ")
        )
    }
}

/// Runs `args` against `db` once untimed, then `runs` times, each from spawn to exit with
/// its whole output read.
fn time_command(bin: &Path, home: &Path, db: &Path, args: &[&str], runs: usize) -> Timed {
    let mut timed = Timed {
        ms: Vec::new(),
        lines: 0,
    };
    for run in 0..=runs {
        let mut cmd = ts(bin, home);
        cmd.args(args).arg("--db").arg(db);
        let start = Instant::now();
        let out = cmd.output().expect("starting transcript-sync");
        let ms = start.elapsed().as_secs_f64() * 1e3;
        // A search that finds nothing says so and exits 1: a result like another.
        let stderr = String::from_utf8_lossy(&out.stderr);
        let nothing = out.status.code() == Some(1) && stderr.contains("no message matches");
        assert!(
            out.status.success() || nothing,
            "{args:?} failed:\n{stderr}"
        );
        timed.lines = out.stdout.split(|b| *b == b'\n').count() - 1;
        if run > 0 {
            timed.ms.push(ms);
        }
    }
    timed
}

/// Bytes of pages by what they hold, in the archive and in the session index's own file
/// beside it: from `dbstat`, or, where SQLite lacks it, the two files' sizes.
fn size_split(db: &Path) -> Vec<(String, u64)> {
    let index = Path::new(&format!("{}-index", db.display())).to_owned();
    let mut groups = vec![
        ("archive: records (table and index)".to_owned(), 0u64),
        ("archive: everything else".to_owned(), 0),
        (
            "index: FTS5 postings (message_text_data, _idx)".to_owned(),
            0,
        ),
        ("index: sessions, messages and the rest".to_owned(), 0),
    ];
    for (file, of_index) in [(db, false), (index.as_path(), true)] {
        let Some(pages) = pages_by_table(file) else {
            let size = fs::metadata(file).map_or(0, |m| m.len());
            groups[if of_index { 3 } else { 1 }].1 += size;
            continue;
        };
        for (table, bytes) in pages {
            let group = match (of_index, table.as_str()) {
                (false, "records") => 0,
                (false, _) => 1,
                (true, "message_text_data" | "message_text_idx") => 2,
                (true, _) => 3,
            };
            groups[group].1 += bytes;
        }
    }
    groups
}

/// The bytes of each table's pages (an index's counted with its table), from `dbstat`.
fn pages_by_table(db: &Path) -> Option<Vec<(String, u64)>> {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    let sql = "SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat d
               LEFT JOIN sqlite_master m ON m.name = d.name GROUP BY 1";
    let mut stmt = conn.prepare(sql).ok()?;
    let rows = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64))
        })
        .expect("reading dbstat");
    Some(rows.map(|r| r.expect("a dbstat row")).collect())
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// The search half: archives the corpus under a fake home, times the queries. Appends its
/// tables to `md`.
fn search_bench(md: &mut String, scratch: &Path, cache: &Path, quick: bool, runs: usize) {
    let spec = corpus::Spec::transcripts_for(quick);
    let c = corpus::ensure(cache, &spec);
    let home = scratch.join("corpus-home");
    corpus::link_home(&c.dir, &home);
    // Untimed: the page cache holds the corpus before the backfill is timed.
    let _ = Command::new("cat")
        .args(c.paths())
        .stdout(Stdio::null())
        .status();
    let db = scratch.join("corpus.db");
    println!("search: archiving {} files, {}", c.files.len(), mb(c.bytes));
    let a = archive(Path::new(BIN), &home, &db);
    let _ = writeln!(
        md,
        "Corpus: {} files, {} records, {}. `run --once` (backfill with the index on, until \
         the index has caught up): {:.2} s wall, {:.2} s CPU, {:.1} MB/s.{}\n",
        c.files.len(),
        c.records,
        mb(c.bytes),
        a.secs,
        a.cpu_secs,
        c.bytes as f64 / 1e6 / a.secs,
        a.note()
    );
    size_table(md, &db);
    let baseline = std::env::var_os("SESSIONS_BASELINE_BIN").map(PathBuf::from);
    let baseline = baseline.map(|bin| {
        let base_db = scratch.join("corpus-baseline.db");
        println!("search: archiving again with {}", bin.display());
        let b = archive(&bin, &home, &base_db);
        let _ = writeln!(
            md,
            "The baseline build (`SESSIONS_BASELINE_BIN`), into an archive of its own: \
             `run --once` {:.2} s wall, {:.2} s CPU; session index {}.{}\n",
            b.secs,
            b.cpu_secs,
            mb(fs::metadata(format!("{}-index", base_db.display())).map_or(0, |m| m.len())),
            b.note()
        );
        (bin, base_db)
    });
    query_table(md, &home, &db, baseline.as_ref(), runs);
    usage_table(md, &home, &db, runs);
}

/// `usage` over the archived corpus, by what it reads from the index's table of calls.
fn usage_table(md: &mut String, home: &Path, db: &Path, runs: usize) {
    let calls = Connection::open_with_flags(
        format!("{}-index", db.display()),
        OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .and_then(|c| c.query_row("SELECT count(*) FROM usage", [], |r| r.get::<_, i64>(0)))
    .unwrap_or(0);
    let _ = writeln!(
        md,
        "`usage` over the {calls} model calls the index holds:\n\n| arguments | rows | median ms | min ms | max ms |\n|---|---:|---:|---:|---:|"
    );
    for by in ["day", "model", "project", "session"] {
        let args = ["usage", "--json", "--by", by];
        let t = time_command(Path::new(BIN), home, db, &args, runs);
        println!("  usage --by {by:<10} {:>8.1} ms", t.median());
        let _ = writeln!(
            md,
            "| `--by {by}` | {} | {:.1} | {:.1} | {:.1} |",
            t.lines,
            t.median(),
            quantile_of(&t.ms, 0.0),
            quantile_of(&t.ms, 1.0)
        );
    }
    md.push('\n');
}

fn size_table(md: &mut String, db: &Path) {
    let file = fs::metadata(db).map_or(0, |m| m.len());
    let index = fs::metadata(format!("{}-index", db.display())).map_or(0, |m| m.len());
    let _ = writeln!(
        md,
        "Archive {}, session index {} after the run:\n\n| what | size | share |\n|---|---:|---:|",
        mb(file),
        mb(index)
    );
    let groups = size_split(db);
    let total: u64 = groups.iter().map(|g| g.1).sum();
    for (what, bytes) in groups {
        let share = 100.0 * bytes as f64 / total.max(1) as f64;
        let _ = writeln!(md, "| {what} | {} | {share:.1} % |", mb(bytes));
    }
    md.push('\n');
}

/// `search` for each of [`QUERIES`], by this build over `db` and, when given, by a baseline
/// build over its own archive.
fn query_table(
    md: &mut String,
    home: &Path,
    db: &Path,
    baseline: Option<&(PathBuf, PathBuf)>,
    runs: usize,
) {
    let this = Path::new(BIN);
    let floor = time_command(this, home, db, &["sessions", "--limit", "1"], runs);
    md.push_str(
        "| query | arguments | hits | median ms | min ms | max ms | baseline median ms |\n",
    );
    md.push_str("|---|---|---:|---:|---:|---:|---:|\n");
    let (mut medians, mut base_medians) = (Vec::new(), Vec::new());
    for query in QUERIES {
        let mut args = vec!["search"];
        args.extend(query.args);
        args.extend(["--json", "--limit", "20"]);
        let t = time_command(this, home, db, &args, runs);
        let base = baseline.map(|(bin, base_db)| time_command(bin, home, base_db, &args, runs));
        let base_ms = base.as_ref().map(Timed::median);
        println!(
            "  {:<32} {:>8.1} ms {}",
            query.label,
            t.median(),
            base_ms.map_or(String::new(), |ms| format!("(baseline {ms:.1} ms)"))
        );
        let _ = writeln!(
            md,
            "| {} | `{}` | {} | {:.1} | {:.1} | {:.1} | {} |",
            query.label,
            query.args.join(" "),
            t.lines,
            t.median(),
            quantile_of(&t.ms, 0.0),
            quantile_of(&t.ms, 1.0),
            base_ms.map_or("–".to_owned(), |ms| format!("{ms:.1}"))
        );
        medians.push(t.median());
        base_medians.extend(base_ms);
    }
    let _ = writeln!(
        md,
        "\nOver the {} queries' medians: p50 {:.1} ms, p95 {:.1} ms (target ≤ 50 ms). Floor, \
         `sessions --limit 1`: median {:.1} ms.\n",
        medians.len(),
        median(&medians),
        quantile_of(&medians, 0.95),
        floor.median()
    );
    if !base_medians.is_empty() {
        let _ = writeln!(
            md,
            "The baseline build over the same queries: p50 {:.1} ms, p95 {:.1} ms.\n",
            median(&base_medians),
            quantile_of(&base_medians, 0.95)
        );
    }
}

/// The listing half: 10,000 sessions archived under a fake home, then `sessions`. Appends its
/// table to `md`.
fn sessions_bench(md: &mut String, scratch: &Path, runs: usize) {
    let home = scratch.join("sessions-home");
    corpus::claude_sessions(&home, SESSIONS);
    let db = scratch.join("sessions.db");
    println!("sessions: archiving {SESSIONS} sessions");
    let a = archive(Path::new(BIN), &home, &db);
    let _ = writeln!(
        md,
        "{SESSIONS} Claude Code sessions of 4 records (0.1–1.5 KB of text each) in 100 \
         projects, archived by `run --once` in {:.2} s ({:.2} s CPU).{}\n",
        a.secs,
        a.cpu_secs,
        a.note()
    );
    md.push_str("| command | lines out | p50 ms | p95 ms | min ms | max ms |\n");
    md.push_str("|---|---:|---:|---:|---:|---:|\n");
    let commands: [&[&str]; 4] = [
        &["sessions", "--limit", "1"],
        &["sessions"],
        &["sessions", "--limit", "0"],
        &["sessions", "--limit", "0", "--json"],
    ];
    for args in commands {
        let t = time_command(Path::new(BIN), &home, &db, args, runs);
        println!("  {:<32} {:>8.1} ms", args.join(" "), t.median());
        let _ = writeln!(
            md,
            "| `{}` | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
            args.join(" "),
            t.lines,
            t.median(),
            quantile_of(&t.ms, 0.95),
            quantile_of(&t.ms, 0.0),
            quantile_of(&t.ms, 1.0)
        );
    }
    md.push('\n');
}

fn main() {
    let quick = env::env_flag("COMPARE_QUICK");
    let runs = env::env_or("SESSIONS_RUNS", 7) as usize;
    let bench = machine::target_dir().join("bench");
    let scratch = bench.join("sessions-scratch");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).expect("creating target/bench/sessions-scratch");
    let started = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let mode = if quick { "quick" } else { "full" };
    let mut md = format!(
        "Taken {started} ({mode} mode, {runs} runs each). {}\n\n",
        Machine::summary()
    );
    search_bench(&mut md, &scratch, &bench.join("corpus"), quick, runs);
    sessions_bench(&mut md, &scratch, runs);
    let _ = writeln!(md, "Load average at end {}.", machine::load());
    println!("\n{md}");
    fs::write(bench.join("sessions.md"), &md).expect("writing sessions.md");
    println!("wrote {}", bench.join("sessions.md").display());
    // Kept on request, to look at the archives and indexes the queries were timed over.
    if env::env_flag("SESSIONS_KEEP") {
        println!("kept {}", scratch.display());
    } else {
        let _ = fs::remove_dir_all(&scratch);
    }
}
