//! Fuzzes the record reader: arbitrary bytes as a file's content, read at once and as a file
//! that grows by appends cut at fuzzer-chosen points, in batches of a fuzzer-chosen size.
//! Every complete line must be a record, a reject or a blank line, as an independent splitter
//! says; records must be valid by the reference rule; offsets must grow; records, rejects (whole,
//! up to the record limit), blank lines and held-back bytes must account for every byte; and
//! reading in pieces must equal reading at once, position and markers included.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::fs::File;
use std::os::unix::fs::FileExt;
use transcript_sync::fuzzing::{
    Batch, Position, Record, Reject, read_complete_records, reference_accepts,
};
use transcript_sync::{Markers, ReadLimits};

#[derive(Arbitrary, Debug)]
struct Input {
    content: Vec<u8>,
    /// Where appends end, taken modulo the content's length plus one.
    cuts: Vec<u16>,
    record_limit: u16,
    batch_bytes: u16,
}

/// Everything read from one file, over one or more calls.
#[derive(Debug, Default, PartialEq)]
struct Reading {
    records: Vec<Record>,
    rejects: Vec<Reject>,
    blank_lines: u64,
    position: Position,
    held_back: u64,
    held_back_bytes: Vec<u8>,
}

impl Reading {
    fn absorb(&mut self, batch: Batch) {
        self.records.extend(batch.records);
        self.rejects.extend(batch.rejects);
        self.blank_lines += batch.blank_lines;
        self.position = Position {
            offset: batch.end,
            markers: batch.markers,
        };
        self.held_back = batch.held_back;
        self.held_back_bytes = batch.held_back_bytes;
    }
}

fuzz_target!(|input: Input| {
    let record_limit = u64::from(input.record_limit).max(1);
    let whole = ReadLimits {
        record_limit,
        batch_bytes: u64::MAX,
    };
    let small = ReadLimits {
        record_limit,
        batch_bytes: u64::from(input.batch_bytes).max(1),
    };
    let content = &input.content;
    SCRATCH.with(|file| {
        let at_once = read_growing(file, content, &[], &whole);
        check_against_lines(content, &at_once, record_limit);
        let markers = Markers::measure(file, at_once.position.offset).expect("measure markers");
        assert_eq!(at_once.position.markers, markers, "markers from the read");
        let in_pieces = read_growing(file, content, &cut_points(&input), &small);
        assert_eq!(
            at_once, in_pieces,
            "reading in pieces differs from reading at once"
        );
    });
});

thread_local! {
    /// One scratch file, emptied for each input, rather than a file created per input.
    static SCRATCH: File = tempfile::tempfile().expect("a scratch file");
}

fn cut_points(input: &Input) -> Vec<usize> {
    let len = input.content.len();
    let mut cuts: Vec<usize> = input.cuts.iter().map(|c| *c as usize % (len + 1)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Writes `content` to `file` in appends ending at `cuts`, reading after each append until
/// the reader says it reached the size it was given.
fn read_growing(file: &File, content: &[u8], cuts: &[usize], limits: &ReadLimits) -> Reading {
    file.set_len(0).expect("empty the scratch file");
    let mut reading = Reading::default();
    let mut written = 0;
    for end in cuts.iter().copied().chain([content.len()]) {
        file.write_all_at(&content[written..end], written as u64)
            .expect("append");
        written = end;
        loop {
            let from = reading.position;
            let batch = read_complete_records(file, &from, end as u64, limits)
                .expect("read the scratch file")
                .expect("a file that only grew matches its cursor");
            let finished = batch.finished;
            assert!(
                finished || batch.end > from.offset,
                "a full batch must move the cursor"
            );
            reading.absorb(batch);
            if finished {
                break;
            }
        }
    }
    reading
}

/// Compares a reading of all of `content` with an independent split into lines.
fn check_against_lines(content: &[u8], reading: &Reading, record_limit: u64) {
    let end = content
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |i| i + 1);
    assert_eq!(
        reading.position.offset, end as u64,
        "the cursor ends after the last line"
    );
    assert_eq!(
        reading.held_back,
        (content.len() - end) as u64,
        "held back: the rest"
    );
    let rest = &content[end..];
    let kept = |bytes: &[u8]| bytes[..bytes.len().min(record_limit as usize)].to_vec();
    assert_eq!(reading.held_back_bytes, kept(rest), "held-back bytes");
    let (mut records, mut rejects, mut blank) = (Vec::new(), Vec::new(), 0);
    let mut offset = 0;
    for line in content[..end].split_inclusive(|b| *b == b'\n') {
        let line = &line[..line.len() - 1];
        let bytes = line.strip_suffix(b"\r").unwrap_or(line);
        if bytes.len() as u64 > record_limit {
            rejects.push((offset, line, kept(line)));
        } else if bytes.iter().all(u8::is_ascii_whitespace) {
            blank += 1;
        } else if reference_accepts(bytes) {
            records.push((offset, bytes));
        } else {
            rejects.push((offset, line, line.to_vec()));
        }
        offset += line.len() as u64 + 1;
    }
    let got: Vec<(u64, &[u8])> = (reading.records.iter())
        .map(|r| (r.offset, r.bytes.as_slice()))
        .collect();
    assert_eq!(got, records, "records");
    assert_eq!(reading.blank_lines, blank, "blank lines");
    assert_eq!(reading.rejects.len(), rejects.len(), "rejects");
    for (r, (offset, line, raw)) in reading.rejects.iter().zip(rejects) {
        assert_eq!(r.offset, offset, "reject offset");
        assert_eq!(r.length, line.len() as u64, "reject length at {offset}");
        assert_eq!(r.raw, raw, "reject raw at {offset}");
        assert!(!r.reason.is_empty(), "a reject says why");
    }
}
