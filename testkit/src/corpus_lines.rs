//! What the benchmarks over the compare corpus's lines share: reading them into memory, and
//! timing a pass over them.

use std::path::{Path, PathBuf};
use std::time::Instant;

const DEFAULT_CORPUS: &str = "target/bench/corpus/transcripts-1000f-1073741824b";

/// A corpus read whole into memory, and how many rounds each pass gets.
pub struct Corpus {
    /// Where it was read from.
    pub dir: PathBuf,
    /// Every `.jsonl` file's bytes, one after the other.
    pub text: Vec<u8>,
    /// Rounds per pass (the best is kept).
    pub rounds: usize,
}

impl Corpus {
    /// The corpus `<PREFIX>_CORPUS` names (default: the 1 GiB one `cargo bench --bench
    /// compare` makes) with `<PREFIX>_ROUNDS` rounds (default 3). Exits with status 2, saying
    /// how to make it, when there is none.
    pub fn load(prefix: &str) -> Corpus {
        let var = |name: &str| std::env::var(format!("{prefix}_{name}")).ok();
        let dir = PathBuf::from(var("CORPUS").unwrap_or(DEFAULT_CORPUS.into()));
        if !dir.is_dir() {
            eprintln!(
                "no corpus at {}: `cargo bench --bench compare` makes it (COMPARE_ONLY=backfill \
                 is enough), or set {prefix}_CORPUS to a directory of .jsonl files",
                dir.display()
            );
            std::process::exit(2);
        }
        let rounds = var("ROUNDS").and_then(|v| v.parse().ok()).unwrap_or(3);
        let text = read_jsonl(&dir);
        Corpus { dir, text, rounds }
    }

    /// Its non-empty lines and their bytes, said in one line on stdout.
    pub fn lines(&self) -> (Vec<&[u8]>, usize) {
        let lines: Vec<&[u8]> = (self.text.split(|b| *b == b'\n'))
            .filter(|l| !l.is_empty())
            .collect();
        let bytes: usize = lines.iter().map(|l| l.len()).sum();
        println!(
            "{} lines, {:.1} MB, from {}",
            lines.len(),
            bytes as f64 / 1e6,
            self.dir.display()
        );
        (lines, bytes)
    }
}

/// Every `.jsonl` file under `dir`, in name order, each followed by a newline.
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

/// The fastest of `rounds` runs of `run` (at least one), in seconds, with what it returned.
pub fn best_of(rounds: usize, run: impl Fn() -> usize) -> (f64, usize) {
    (0..rounds.max(1))
        .map(|_| {
            let start = Instant::now();
            let n = std::hint::black_box(run());
            (start.elapsed().as_secs_f64(), n)
        })
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .expect("at least one round")
}
