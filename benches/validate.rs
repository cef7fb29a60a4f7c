//! Record validation alone, side by side on the same lines: UTF-8 checks (`str::from_utf8`,
//! `simdutf8`), the single-pass check the reader uses first, and serde_json's verdict (what the
//! reader used before, and still uses for what the single pass is not sure of).
//!
//! `cargo bench --bench validate` reads every line of the side-by-side corpus into memory
//! (`VALIDATE_CORPUS`, default `target/bench/corpus/transcripts-1000f-1073741824b`, made by
//! `cargo bench --bench compare`), then times each check over all lines, best of
//! `VALIDATE_ROUNDS` (default 3). Nothing is read from disk while timing.

use std::path::{Path, PathBuf};
use std::time::Instant;
use transcript_sync::fuzzing::{certainly_valid, validate_slowly};

const DEFAULT_CORPUS: &str = "target/bench/corpus/transcripts-1000f-1073741824b";

/// One way of checking a line: true when it accepts the line.
type Check<'a> = &'a dyn Fn(&[u8]) -> bool;

fn main() {
    let dir = PathBuf::from(std::env::var("VALIDATE_CORPUS").unwrap_or(DEFAULT_CORPUS.into()));
    if !dir.is_dir() {
        eprintln!(
            "no corpus at {}: `cargo bench --bench compare` makes it (COMPARE_ONLY=backfill is \
             enough), or set VALIDATE_CORPUS to a directory of .jsonl files",
            dir.display()
        );
        std::process::exit(2);
    }
    let rounds: usize = (std::env::var("VALIDATE_ROUNDS").ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let text = read_jsonl(&dir);
    let lines: Vec<&[u8]> = (text.split(|b| *b == b'\n'))
        .filter(|l| !l.is_empty())
        .collect();
    let bytes: usize = lines.iter().map(|l| l.len()).sum();
    println!(
        "{} lines, {:.1} MB, from {}",
        lines.len(),
        bytes as f64 / 1e6,
        dir.display()
    );
    let checks: [(&str, Check); 4] = [
        ("str::from_utf8", &|l| std::str::from_utf8(l).is_ok()),
        ("simdutf8", &|l| simdutf8::basic::from_utf8(l).is_ok()),
        ("single pass", &|l| certainly_valid(l)),
        ("serde_json", &|l| validate_slowly(l).is_ok()),
    ];
    println!("| check | best of {rounds} | GB/s | lines accepted |");
    println!("|---|---:|---:|---:|");
    for (name, check) in checks {
        let (secs, accepted) = best_of(rounds, || lines.iter().filter(|l| check(l)).count());
        let rate = bytes as f64 / secs / 1e9;
        println!("| {name} | {secs:.3} s | {rate:.2} | {accepted} |");
    }
}

fn best_of(rounds: usize, run: impl Fn() -> usize) -> (f64, usize) {
    (0..rounds.max(1))
        .map(|_| {
            let start = Instant::now();
            let n = std::hint::black_box(run());
            (start.elapsed().as_secs_f64(), n)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("at least one round")
}

fn read_jsonl(dir: &Path) -> Vec<u8> {
    let mut text = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry.expect("walking the corpus");
        let is_jsonl = entry.path().extension().is_some_and(|e| e == "jsonl");
        if entry.file_type().is_file() && is_jsonl {
            text.extend(std::fs::read(entry.path()).expect("reading a corpus file"));
            text.push(b'\n');
        }
    }
    text
}
