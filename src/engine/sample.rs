//! Samples of a backlog: before a large backfill, lines taken from places spread evenly over
//! everything about to be read, from which the archive trains a harness's compression
//! dictionary (see `archive::codec`) before most of its records are stored.
//!
//! Without them, a backfill's dictionaries come from the records committed first (the first
//! sessions read), and everything after is compressed with a dictionary that suits those:
//! the real-shaped corpus was stored in 29 % of its bytes so, and in 23 % when sampled first
//! (BENCHMARKS.md). Only bytes that are about to be archived are sampled (past each cursor;
//! never a file that starts at its end), and a sample is only ever training input: a file
//! that cannot be read is simply left out (reading it for the archive reports it).

use crate::read::open::open_regular;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// A harness's backlog smaller than this is not sampled: it is soon archived, and the
/// dictionaries trained from what was committed serve it.
pub(crate) const MIN_BACKLOG: u64 = 64 << 20;

/// How many bytes of samples are gathered for one harness, at most: as many as the archive
/// keeps from the records it stores. On the real-shaped corpus, twice as many gave the same
/// ratio at twice the training time (BENCHMARKS.md).
pub(crate) const BUDGET: usize = crate::archive::SAMPLE_BYTES;

/// How many places are sampled: each gives at most `BUDGET / PLACES` bytes of lines.
const PLACES: u64 = 512;

/// Lines shorter than this are not sampled, as the archive stores them uncompressed.
const MIN_LINE: usize = crate::archive::MIN_COMPRESSED;

/// The bytes `[from, to)` of the file at `path`, about to be read.
#[derive(Clone, Debug)]
pub(crate) struct Span {
    /// The file.
    pub path: PathBuf,
    /// Where reading it starts: a line's start (a cursor, or 0).
    pub from: u64,
    /// Its size when it was planned.
    pub to: u64,
}

impl Span {
    /// How many bytes of it are to be read.
    pub(crate) fn len(&self) -> u64 {
        self.to.saturating_sub(self.from)
    }
}

/// At most [`BUDGET`] bytes of lines of `spans`, from [`PLACES`] places spread evenly over
/// their bytes: at each, the lines that begin there or after it, each cut where the place's
/// share of the budget ends (a sample is a record's start, as the archive samples records).
/// Only lines that begin within a span are taken. Each file is opened once; one that cannot
/// be opened, or is no longer a regular file, gives none.
pub(crate) fn spread(spans: &[Span]) -> Vec<Vec<u8>> {
    let total: u64 = spans.iter().map(Span::len).sum();
    let share = BUDGET / PLACES as usize;
    let mut samples = Vec::new();
    let (mut place, mut passed) = (0, 0u64);
    for span in spans {
        let mut file = None;
        while place < PLACES {
            // u128: a place's position is total * place / PLACES.
            let at = (u128::from(total) * u128::from(place) / u128::from(PLACES)) as u64;
            if at >= passed + span.len() {
                break;
            }
            let file = file.get_or_insert_with(|| open_regular_file(span));
            if let Some(f) = file {
                samples.extend(lines_at(f, span, span.from + (at - passed), share));
            }
            place += 1;
        }
        passed += span.len();
    }
    samples
}

fn open_regular_file(span: &Span) -> Option<File> {
    let file = open_regular(&span.path).ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// The lines of `span` that begin at or after `at`, `want` bytes of them at most.
fn lines_at(file: &File, span: &Span, at: u64, want: usize) -> Vec<Vec<u8>> {
    // One byte before `at` tells whether a line begins at `at`; what lies before the first
    // line break after it belongs to a line begun earlier.
    let start = if at == span.from { at } else { at - 1 };
    let len = (span.to - start).min((want + LINE_SEARCH) as u64) as usize;
    let mut window = vec![0; len];
    let read = read_up_to(file, &mut window, start);
    window.truncate(read);
    let mut rest = &window[..];
    if start != span.from {
        match memchr::memchr(b'\n', rest) {
            Some(i) => rest = &rest[i + 1..],
            None => return Vec::new(),
        }
    }
    let mut lines = Vec::new();
    let mut left = want;
    while left >= MIN_LINE && !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..end.min(left)];
        if line.len() >= MIN_LINE {
            left -= line.len();
            lines.push(line.to_vec());
        }
        rest = rest.get(end + 1..).unwrap_or_default();
    }
    lines
}

/// How far past a place the start of a line is looked for.
const LINE_SEARCH: usize = 16 << 10;

/// Fills `buf` from `offset` as far as the file goes; how many bytes were read.
fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> usize {
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
    fn samples_are_line_starts_from_every_part_of_a_backlog() {
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
        assert!(bytes > BUDGET / 2 && bytes <= BUDGET, "{bytes}");
        // Each sample is the start of a line (none begins inside one) and holds no other.
        let mut files = std::collections::BTreeSet::new();
        for s in &samples {
            let text = std::str::from_utf8(s).unwrap();
            assert!(
                text.starts_with("{\"file\":") && !text.contains('\n'),
                "{text}"
            );
            files.insert(text.as_bytes()[8]);
        }
        assert_eq!(files, std::collections::BTreeSet::from([b'0', b'1', b'2']));
    }

    #[test]
    fn only_lines_past_a_cursor_are_sampled() {
        let dir = tempfile::tempdir().unwrap();
        let old: Vec<String> = (0..5000)
            .map(|i| format!("{{\"old\":{i},\"text\":\"{}\"}}", "o".repeat(80)))
            .collect();
        let mut span = file_of(dir.path(), "a.jsonl", &old);
        let cursor = span.to;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&span.path)
            .unwrap();
        for i in 0..5000 {
            writeln!(f, "{{\"new\":{i},\"text\":\"{}\"}}", "n".repeat(80)).unwrap();
        }
        span.from = cursor;
        span.to = f.metadata().unwrap().len();
        let samples = spread(&[span]);
        assert!(!samples.is_empty());
        assert!(samples.iter().all(|s| s.starts_with(b"{\"new\":")));
        // No sample holds a line break: each is one line's start.
        assert!(samples.iter().all(|s| !s.contains(&b'\n')));
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
