//! Writes a tree of real-shaped transcripts (`benches/real_shaped/tree.rs`) and says how well
//! it compresses as one stream, the yardstick for the archive's record-level compression.
//!
//! `cargo bench --bench real_shaped -- DIR [MB] [SEED]` (default 256 MB, seed 1) writes the
//! tree into DIR, prints what it holds, then the size of every file concatenated in path order
//! after `zstd -1` and `zstd -19` (when the `zstd` command is installed) and after gzip -6
//! (flate2); then archives it with `transcript-sync run --once` (the Claude Code and Codex
//! watchers, under a HOME of links to the tree) and says what the records take, per harness,
//! before and after `transcript-sync compact`.

mod tree;

use flate2::Compression;
use flate2::write::GzEncoder;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;
use tree::{Count, Stats};

fn main() -> ExitCode {
    // `cargo bench` adds `--bench`; the rest are ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let Some(dir) = args.first().map(PathBuf::from) else {
        eprintln!("usage: cargo bench --bench real_shaped -- DIR [MB] [SEED]");
        return ExitCode::from(2);
    };
    let mb: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(256);
    let seed: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1);
    match run(&dir, mb, seed) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("real_shaped: {}: {e}", dir.display());
            ExitCode::FAILURE
        }
    }
}

fn run(dir: &Path, mb: u64, seed: u64) -> io::Result<()> {
    clear_tree(dir)?;
    let start = Instant::now();
    let stats = tree::write_tree(dir, mb * 1_000_000, seed)?;
    let secs = start.elapsed().as_secs_f64();
    print_stats(&stats);
    println!("written in {secs:.1} s into {}", dir.display());
    let files = jsonl_files(dir)?;
    let bytes = stats.bytes();
    for level in ["-1", "-19"] {
        let start = Instant::now();
        match zstd_size(&files, level) {
            Ok(size) => print_ratio(&format!("zstd {level}"), size, bytes, start),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                println!("zstd {level}: skipped (no zstd command)")
            }
            Err(e) => println!("zstd {level}: skipped ({e})"),
        }
    }
    let start = Instant::now();
    let mut gzip = GzEncoder::new(Counter(0), Compression::new(6));
    concatenate(&files, &mut gzip)?;
    print_ratio("gzip -6 (flate2)", gzip.finish()?.0, bytes, start);
    archive(dir)
}

/// Archives the tree at `dir` into a fresh archive, then compacts it, saying what the records
/// take after each.
fn archive(dir: &Path) -> io::Result<()> {
    let state = tempfile::tempdir()?;
    let home = state.path().join("home");
    std::fs::create_dir_all(home.join(".claude"))?;
    std::fs::create_dir_all(home.join(".codex"))?;
    std::os::unix::fs::symlink(
        dir.canonicalize()?.join("claude"),
        home.join(".claude/projects"),
    )?;
    std::os::unix::fs::symlink(
        dir.canonicalize()?.join("codex"),
        home.join(".codex/sessions"),
    )?;
    let db = state.path().join("archive.db");
    let bin = env!("CARGO_BIN_EXE_transcript-sync");
    let run = |args: &[&str]| -> io::Result<f64> {
        let start = Instant::now();
        let out = Command::new(bin)
            .args(args)
            .arg("--db")
            .arg(&db)
            .env("HOME", &home)
            .env("RUST_LOG", "warn")
            .output()?;
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr).into_owned();
            return Err(io::Error::other(format!("transcript-sync {args:?}: {why}")));
        }
        Ok(start.elapsed().as_secs_f64())
    };
    let secs = run(&["run", "--once"])?;
    println!("\ntranscript-sync run --once: {secs:.1} s (the session index included)");
    print_storage(&db)?;
    let secs = run(&["compact"])?;
    println!("transcript-sync compact: {secs:.1} s");
    print_storage(&db)
}

/// What the records take in the archive at `db`, per harness, and the file's size.
fn print_storage(db: &Path) -> io::Result<()> {
    let conn = rusqlite::Connection::open(db).map_err(io::Error::other)?;
    let mut stmt = conn
        .prepare(
            "SELECT harness, sum(bytes), sum(stored), (SELECT count(*) FROM dictionaries d
                 WHERE d.harness = s.harness)
             FROM sources s GROUP BY harness ORDER BY harness",
        )
        .map_err(io::Error::other)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })
        .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        .map_err(io::Error::other)?;
    let (mut bytes, mut stored) = (0, 0);
    for (harness, b, s, dictionaries) in rows {
        println!(
            "  {harness:<12} records {:>7.1} MB stored in {:>6.1} MB ({:>4.1} %), {dictionaries} dictionaries",
            b as f64 / 1e6,
            s as f64 / 1e6,
            100.0 * s as f64 / b.max(1) as f64
        );
        (bytes, stored) = (bytes + b, stored + s);
    }
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .map_err(io::Error::other)?;
    let file = std::fs::metadata(db)?.len();
    println!(
        "  all          records {:>7.1} MB stored in {:>6.1} MB ({:>4.1} %); archive file {:.1} MB",
        bytes as f64 / 1e6,
        stored as f64 / 1e6,
        100.0 * stored as f64 / bytes.max(1) as f64,
        file as f64 / 1e6
    );
    Ok(())
}

/// Removes the tree an earlier run left in `dir`; refuses a directory holding anything else,
/// so that a mistyped path does not cost someone their files.
fn clear_tree(dir: &Path) -> io::Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries {
        let name = entry?.file_name();
        if name != "claude" && name != "codex" {
            return Err(io::Error::other(format!(
                "holds {} besides a generated tree; give a new or empty directory",
                name.to_string_lossy()
            )));
        }
    }
    for tree in ["claude", "codex"] {
        if dir.join(tree).exists() {
            std::fs::remove_dir_all(dir.join(tree))?;
        }
    }
    Ok(())
}

fn print_stats(stats: &Stats) {
    let mut total = stats.claude;
    total += stats.codex;
    println!("| harness | files | records | MB | bytes/record |");
    println!("|---|---:|---:|---:|---:|");
    for (name, c) in [
        ("Claude Code", stats.claude),
        ("Codex", stats.codex),
        ("all", total),
    ] {
        print_count(name, c);
    }
}

fn print_count(name: &str, c: Count) {
    let per_record = c.bytes / c.records.max(1);
    let mb = c.bytes as f64 / 1e6;
    println!(
        "| {name} | {} | {} | {mb:.1} | {per_record} |",
        c.files, c.records
    );
}

fn print_ratio(name: &str, size: u64, bytes: u64, start: Instant) {
    let percent = size as f64 * 100.0 / bytes.max(1) as f64;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{name}: {:.1} MB, {percent:.1} % ({secs:.1} s)",
        size as f64 / 1e6
    );
}

/// Every `.jsonl` file under `dir`, in path order.
fn jsonl_files(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.map_err(io::Error::other)?;
        if entry.file_type().is_file() && entry.path().extension().is_some_and(|e| e == "jsonl") {
            files.push(entry.into_path());
        }
    }
    Ok(files)
}

fn concatenate(files: &[PathBuf], out: &mut impl Write) -> io::Result<()> {
    for file in files {
        io::copy(&mut std::fs::File::open(file)?, out)?;
    }
    Ok(())
}

/// The size of `files` concatenated through `zstd LEVEL` on one thread; `Err` when there is
/// no `zstd` command.
fn zstd_size(files: &[PathBuf], level: &str) -> io::Result<u64> {
    let mut child = Command::new("zstd")
        .args([level, "-T1", "-q", "-c"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("stdin was piped");
    let mut stdout = child.stdout.take().expect("stdout was piped");
    // Read the output while feeding the input: a full pipe either way would stall both.
    let reader = std::thread::spawn(move || io::copy(&mut stdout, &mut io::sink()));
    let fed = concatenate(files, &mut stdin);
    drop(stdin);
    let size = reader.join().expect("the reading thread does not panic")?;
    let status = child.wait()?;
    fed?;
    if !status.success() {
        return Err(io::Error::other(format!("zstd exited with {status}")));
    }
    Ok(size)
}

/// A writer that only counts.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
