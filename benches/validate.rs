//! Record validation alone, side by side on the same lines: UTF-8 checks (`str::from_utf8`,
//! `simdutf8`), the single-pass check the reader uses first, and serde_json's verdict (what the
//! reader used before, and still uses for what the single pass is not sure of).
//!
//! `cargo bench --bench validate` reads every line of the side-by-side corpus into memory
//! (`VALIDATE_CORPUS`, default `target/bench/corpus/transcripts-1000f-1073741824b`, made by
//! `cargo bench --bench compare`), then times each check over all lines, best of
//! `VALIDATE_ROUNDS` (default 3). Nothing is read from disk while timing.

#[path = "shared/corpus_lines.rs"]
mod corpus_lines;

use corpus_lines::{best_of, read_jsonl};
use std::path::PathBuf;
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
