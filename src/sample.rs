//! Samples of a backlog: before a large backfill, lines taken from places spread evenly over
//! everything about to be read, from which the archive trains a harness's compression
//! dictionary (see `archive::codec`) before most of its records are stored.
//!
//! Without them, a backfill's dictionaries come from the records committed first (the first
//! sessions read), and everything after is compressed with a dictionary that suits those:
//! the real-shaped corpus was stored in 28.7 % of its bytes so, and in 23.6 % once `compact`
//! had trained from a sample of everything (BENCHMARKS.md). A sample is only ever training
//! input: nothing read here is archived, and a file that cannot be read is simply left out
//! (reading it for the archive reports it).

use crate::open::open_regular;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// A harness's backlog smaller than this is not sampled: it is soon archived, and the
/// dictionaries trained from what was committed serve it.
pub const MIN_BACKLOG: u64 = 64 << 20;

/// About how many bytes of samples are gathered for one harness: as many as the archive keeps
/// from records it stores. On the real-shaped corpus, 8 MiB (what `compact` trains from) gave
/// the same ratio at twice the training time (BENCHMARKS.md).
pub const BUDGET: usize = 4 << 20;

/// How many places are sampled: each gives about `BUDGET / PLACES` bytes of lines.
const PLACES: usize = 512;

/// A line is sampled for at most this much of its start, as the archive samples records.
const LINE_PREFIX: usize = 16 << 10;

/// The bytes `[from, to)` of the file at `path`, about to be read.
#[derive(Clone, Debug)]
pub struct Span {
    /// The file.
    pub path: PathBuf,
    /// Where reading it starts (its cursor).
    pub from: u64,
    /// Its size when it was planned.
    pub to: u64,
}

/// About [`BUDGET`] bytes of lines of `spans`, from [`PLACES`] places spread evenly over their
/// bytes: at each, the lines that begin there or after it, each cut at [`LINE_PREFIX`]. Only
/// lines that begin within a span are taken (a cursor is always at a line's start).
pub fn spread(spans: &[Span]) -> Vec<Vec<u8>> {
    let total: u64 = spans.iter().map(|s| s.to.saturating_sub(s.from)).sum();
    if total == 0 {
        return Vec::new();
    }
    let per_place = BUDGET / PLACES;
    let mut samples = Vec::new();
    let (mut span, mut passed) = (0, 0u64);
    for place in 0..PLACES as u64 {
        let at = total * place / PLACES as u64;
        while passed + (spans[span].to.saturating_sub(spans[span].from)) <= at {
            passed += spans[span].to.saturating_sub(spans[span].from);
            span += 1;
        }
        let s = &spans[span];
        samples.extend(lines_at(s, s.from + (at - passed), per_place));
    }
    samples
}

/// The lines of `span` that begin at or after `at`, up to `want` bytes of them; none when the
/// file cannot be read.
fn lines_at(span: &Span, at: u64, want: usize) -> Vec<Vec<u8>> {
    // One byte before `at` tells whether a line begins at `at`.
    let start = if at == span.from { at } else { at - 1 };
    let len = (span.to - start).min((want + LINE_PREFIX) as u64) as usize;
    let mut window = vec![0; len];
    let Ok(file) = open_regular(&span.path) else {
        return Vec::new();
    };
    let read = match file.metadata() {
        Ok(m) if m.is_file() => read_up_to(&file, &mut window, start),
        _ => return Vec::new(),
    };
    window.truncate(read);
    let mut rest = &window[..];
    if start != span.from {
        match memchr::memchr(b'\n', rest) {
            Some(i) => rest = &rest[i + 1..],
            None => return Vec::new(),
        }
    }
    let mut lines = Vec::new();
    let mut taken = 0;
    while taken < want && !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..end.min(LINE_PREFIX)];
        if !line.is_empty() {
            taken += line.len();
            lines.push(line.to_vec());
        }
        rest = rest.get(end + 1..).unwrap_or_default();
    }
    lines
}

/// Fills `buf` from `offset` as far as the file goes; how many bytes were read.
fn read_up_to(file: &std::fs::File, buf: &mut [u8], offset: u64) -> usize {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => done += n,
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(dir: &std::path::Path, name: &str, lines: &[String]) -> Span {
        let path = dir.join(name);
        let mut f = std::fs::File::create(&path).unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
        let to = f.metadata().unwrap().len();
        Span { path, from: 0, to }
    }

    #[test]
    fn samples_are_whole_lines_from_every_part_of_a_backlog() {
        let dir = tempfile::tempdir().unwrap();
        // Three files of numbered lines; the samples must reach into all three, and each must
        // be one line exactly (no line cut at a window's start).
        let spans: Vec<Span> = (0..3)
            .map(|f| {
                let lines: Vec<String> = (0..20_000)
                    .map(|i| {
                        format!(
                            "{{\"file\":{f},\"line\":{i},\"pad\":\"{}\"}}",
                            "x".repeat(i % 97)
                        )
                    })
                    .collect();
                file_of(dir.path(), &format!("{f}.jsonl"), &lines)
            })
            .collect();
        let samples = spread(&spans);
        let bytes: usize = samples.iter().map(Vec::len).sum();
        assert!(
            bytes > BUDGET / 2 && bytes <= BUDGET + PLACES * LINE_PREFIX,
            "{bytes}"
        );
        let mut files = std::collections::BTreeSet::new();
        for s in &samples {
            let v: serde_json::Value = serde_json::from_slice(s).expect("a whole line");
            files.insert(v["file"].as_i64().unwrap());
        }
        assert_eq!(files.len(), 3);
    }

    #[test]
    fn only_lines_past_a_cursor_are_sampled() {
        let dir = tempfile::tempdir().unwrap();
        let old: Vec<String> = (0..5000).map(|i| format!("{{\"old\":{i}}}")).collect();
        let mut span = file_of(dir.path(), "a.jsonl", &old);
        let cursor = span.to;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&span.path)
            .unwrap();
        for i in 0..5000 {
            writeln!(f, "{{\"new\":{i}}}").unwrap();
        }
        span.from = cursor;
        span.to = f.metadata().unwrap().len();
        let samples = spread(&[span]);
        assert!(!samples.is_empty());
        assert!(samples.iter().all(|s| s.starts_with(b"{\"new\":")));
    }

    #[test]
    fn a_file_gone_before_it_is_sampled_gives_nothing() {
        let span = Span {
            path: PathBuf::from("/nonexistent/transcript.jsonl"),
            from: 0,
            to: 1 << 30,
        };
        assert!(spread(&[span]).is_empty());
    }
}
