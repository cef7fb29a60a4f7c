//! Record validation alone, side by side on the same lines: UTF-8 checks (`str::from_utf8`,
//! `simdutf8`), the single-pass check the reader uses first, and serde_json's verdict (what the
//! reader used before, and still uses for what the single pass is not sure of).
//!
//! `cargo bench --bench validate` reads every line of the side-by-side corpus into memory
//! (`VALIDATE_CORPUS`, default `target/bench/corpus/transcripts-1000f-1073741824b`, made by
//! `cargo bench --bench compare`), then times each check over all lines, best of
//! `VALIDATE_ROUNDS` (default 3). Nothing is read from disk while timing.

use testkit::corpus_lines::{Corpus, best_of};
use transcript_sync::fuzzing::{certainly_valid, validate_slowly};

/// One way of checking a line: true when it accepts the line.
type Check<'a> = &'a dyn Fn(&[u8]) -> bool;

fn main() {
    let corpus = Corpus::load("VALIDATE");
    let (lines, bytes) = corpus.lines();
    let rounds = corpus.rounds;
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
