//! What the benchmarks over the compare corpus's lines share: reading them into memory, and
//! timing a pass over them.

use std::path::Path;
use std::time::Instant;

/// Every `.jsonl` file under `dir`, in name order, each followed by a newline.
pub fn read_jsonl(dir: &Path) -> Vec<u8> {
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
