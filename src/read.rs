//! Exact byte ranges of an owned handle → complete records, rejects and held-back bytes.
//!
//! The reader never trusts a path: it is given an open handle and the size observed on that
//! handle, verifies the cursor's marker windows against the bytes it reads, and computes the
//! new markers from those same bytes, so a cursor never describes bytes other than the ones
//! that were archived.

pub(crate) mod database;
pub(crate) mod open;
pub(crate) mod record;
pub(crate) mod snapshot;

use crate::domain::fingerprint::{MARKER_WINDOW, Markers, Window};
use crate::domain::{Position, ReadLimits, Record, Reject};
use memchr::memchr;
use std::borrow::Cow;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// How much is read per `pread`.
const CHUNK: u64 = 256 * 1024;

/// The smallest `pread`, however small the batch.
const MIN_CHUNK: u64 = 4 * 1024;

/// What one read produced.
#[derive(Debug, Default)]
pub struct Batch {
    /// Valid records, in file order.
    pub records: Vec<Record>,
    /// Rejected lines, in file order.
    pub rejects: Vec<Reject>,
    /// White-space-only lines skipped.
    pub blank_lines: u64,
    /// The new cursor: just past the last complete line consumed.
    pub end: u64,
    /// The markers at `end`, computed from the bytes read.
    pub markers: Markers,
    /// Bytes after `end` that form no complete line yet (only when `finished`).
    pub held_back: u64,
    /// Those bytes, up to the record limit.
    pub held_back_bytes: Vec<u8>,
    /// True when the read reached the size it was given; false when the batch filled first.
    pub finished: bool,
    /// How many bytes were read from the file, marker windows included.
    pub bytes_read: u64,
}

/// Why the bytes before a cursor are not the ones that were archived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mismatch {
    /// The file is shorter than the cursor.
    Truncated {
        /// The size observed.
        size: u64,
    },
    /// A marker window's checksum differs: the file was rewritten.
    Rewritten,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Truncated { size } => write!(f, "truncated to {size} bytes"),
            Mismatch::Rewritten => f.write_str("rewritten (marker windows differ)"),
        }
    }
}

/// Verifies `from` against `file`, then reads the complete lines of `[from.offset, size)`.
///
/// `Ok(Err(mismatch))` means the cursor does not apply to this file any more and nothing was
/// read; the caller starts a new generation or a new source. `Err` is an I/O error on the
/// handle.
pub fn read_complete_records(
    file: &File,
    from: &Position,
    size: u64,
    limits: &ReadLimits,
) -> io::Result<Result<Batch, Mismatch>> {
    let window = match verified_tail(file, from, size)? {
        Ok(window) => window,
        Err(mismatch) => return Ok(Err(mismatch)),
    };
    let start = from.offset - from.markers.tail.len;
    let mut scan = Scan::new(from, window, start == 0, limits);
    // A small batch reads small chunks: what lies past the batch's end is read again next turn.
    let chunk_len = CHUNK.min(limits.batch_bytes.max(MIN_CHUNK));
    let mut chunk = vec![0; chunk_len.min(size - from.offset) as usize];
    let mut pos = from.offset;
    while pos < size && !scan.full {
        let want = (size - pos).min(chunk_len) as usize;
        let n = file.read_at(&mut chunk[..want], pos)?;
        if n == 0 {
            // The file shrank under the handle; the next look sees the truncation.
            break;
        }
        scan.feed(&chunk[..n], pos);
        pos += n as u64;
    }
    Ok(Ok(scan.finish(from, pos)))
}

/// Verifies `from`'s marker windows against `file`, whose size is `size`: `Ok(Ok(()))` when
/// the bytes before the cursor are still the ones that were archived (the file is the same
/// document, however it is named now), `Ok(Err(mismatch))` when not, `Err` on an I/O error.
pub(crate) fn cursor_applies(
    file: &File,
    from: &Position,
    size: u64,
) -> io::Result<Result<(), Mismatch>> {
    Ok(verified_tail(file, from, size)?.map(drop))
}

/// The bytes of `from`'s tail window, once both its windows are verified against `file`.
fn verified_tail(file: &File, from: &Position, size: u64) -> io::Result<Result<Vec<u8>, Mismatch>> {
    if size < from.offset {
        return Ok(Err(Mismatch::Truncated { size }));
    }
    let start = from.offset - from.markers.tail.len;
    let mut window = vec![0; from.markers.tail.len as usize];
    match file.read_exact_at(&mut window, start) {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
            return Ok(Err(Mismatch::Truncated { size }));
        }
        other => other?,
    }
    if Window::over(&window) != from.markers.tail || !head_matches(file, from, start)? {
        return Ok(Err(Mismatch::Rewritten));
    }
    Ok(Ok(window))
}

/// The head window lies inside the tail window when the cursor is within the first KiB;
/// otherwise it is read on its own.
fn head_matches(file: &File, from: &Position, start: u64) -> io::Result<bool> {
    if start == 0 {
        return Ok(true);
    }
    let mut head = vec![0; from.markers.head.len as usize];
    match file.read_exact_at(&mut head, 0) {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
        Ok(()) => Ok(Window::over(&head) == from.markers.head),
    }
}

/// The line splitter's state across chunks.
struct Scan<'a> {
    limits: &'a ReadLimits,
    batch: Batch,
    /// Bytes of the current, incomplete line (only its first bytes once it is oversized).
    line: Vec<u8>,
    line_start: u64,
    /// Length so far of a line known to be over the limit.
    oversized: Option<u64>,
    consumed: u64,
    full: bool,
    /// The last bytes (up to a window) before the chunk being fed.
    recent: Vec<u8>,
    /// The bytes before `batch.end` (up to a window).
    tail_bytes: Vec<u8>,
    /// The file's first bytes, collected when reading starts at offset 0's window.
    first: Option<Vec<u8>>,
    bytes_read: u64,
}

impl<'a> Scan<'a> {
    fn new(from: &Position, window: Vec<u8>, at_start: bool, limits: &'a ReadLimits) -> Self {
        Scan {
            limits,
            batch: Batch {
                end: from.offset,
                ..Batch::default()
            },
            line: Vec::new(),
            line_start: from.offset,
            oversized: None,
            consumed: 0,
            full: false,
            bytes_read: window.len() as u64,
            first: at_start.then(|| window.clone()),
            tail_bytes: window.clone(),
            recent: window,
        }
    }

    fn feed(&mut self, chunk: &[u8], chunk_pos: u64) {
        self.bytes_read += chunk.len() as u64;
        let mut i = 0;
        let mut end_in_chunk = None;
        while let Some(k) = memchr(b'\n', &chunk[i..]) {
            self.complete_line(&chunk[i..i + k]);
            i += k + 1;
            self.batch.end = chunk_pos + i as u64;
            self.line_start = self.batch.end;
            end_in_chunk = Some(i);
            if self.consumed >= self.limits.batch_bytes {
                self.full = true;
                break;
            }
        }
        if !self.full {
            self.extend_line(&chunk[i..]);
        }
        if let Some(e) = end_in_chunk {
            self.tail_bytes = last_window(&self.recent, &chunk[..e]);
        }
        if let Some(first) = &mut self.first {
            let room = (MARKER_WINDOW as usize).saturating_sub(first.len());
            first.extend_from_slice(&chunk[..room.min(chunk.len())]);
        }
        self.recent = last_window(&self.recent, chunk);
    }

    /// Appends the start of a line whose end is not in this chunk, switching to "oversized"
    /// before the held bytes would pass the limit (a `\r` before the `\n` is allowed for).
    /// An oversized line keeps its first `record_limit` bytes, for its reject, and counts the
    /// rest.
    fn extend_line(&mut self, part: &[u8]) {
        if let Some(len) = &mut self.oversized {
            *len += part.len() as u64;
            return;
        }
        let total = (self.line.len() + part.len()) as u64;
        if total > self.limits.record_limit + 1 {
            let limit = self.limits.record_limit as usize;
            self.line.truncate(limit);
            let room = limit - self.line.len();
            self.reserve_within_limit(limit);
            self.line.extend_from_slice(&part[..room]);
            self.oversized = Some(total);
        } else {
            self.reserve_within_limit(total as usize);
            self.line.extend_from_slice(part);
        }
    }

    /// Grows the line buffer geometrically, but never past the record limit: a record just
    /// under the limit must not cost twice the limit in memory.
    fn reserve_within_limit(&mut self, needed: usize) {
        if needed <= self.line.capacity() {
            return;
        }
        let cap = self.limits.record_limit as usize + 1;
        let target = (self.line.capacity() * 2).max(needed).min(cap.max(needed));
        self.line.reserve_exact(target - self.line.len());
    }

    /// Handles a line whose last bytes (before `\n`) are `part`.
    fn complete_line(&mut self, part: &[u8]) {
        let length = match self.oversized {
            Some(len) => len + part.len() as u64,
            None => (self.line.len() + part.len()) as u64,
        };
        self.consumed += length + 1;
        if self.oversized.is_some() || length > self.limits.record_limit + 1 {
            self.extend_line(part);
            let raw = std::mem::take(&mut self.line);
            self.oversized = None;
            self.reject_oversized(length, raw);
        } else if self.line.is_empty() {
            self.accept(part);
        } else {
            self.reserve_within_limit(length as usize);
            let mut line = std::mem::take(&mut self.line);
            line.extend_from_slice(part);
            // The buffer becomes the record: a record of tens of MiB is not copied again.
            self.accept_line(Cow::Owned(line));
        }
    }

    fn accept(&mut self, line: &[u8]) {
        self.accept_line(Cow::Borrowed(line));
    }

    fn accept_line(&mut self, line: Cow<'_, [u8]>) {
        let len = line.len() - usize::from(line.ends_with(b"\r"));
        let offset = self.line_start;
        let verdict = {
            let bytes = &line[..len];
            if len as u64 > self.limits.record_limit {
                Err(None)
            } else if record::is_blank(bytes) {
                self.batch.blank_lines += 1;
                return;
            } else {
                record::validate(bytes).map_err(Some)
            }
        };
        match verdict {
            Err(None) => self.reject_oversized(len as u64, line.into_owned()),
            Err(Some(reason)) => self.batch.rejects.push(Reject {
                offset,
                length: line.len() as u64,
                reason,
                raw: line.into_owned(),
            }),
            Ok(()) => {
                let mut bytes = line.into_owned();
                bytes.truncate(len);
                self.batch.records.push(Record { offset, bytes });
            }
        }
    }

    fn reject_oversized(&mut self, length: u64, mut raw: Vec<u8>) {
        raw.truncate(self.limits.record_limit as usize);
        self.batch.rejects.push(Reject {
            offset: self.line_start,
            length,
            reason: format!(
                "line of {length} bytes is longer than the record limit ({} bytes)",
                self.limits.record_limit
            ),
            raw,
        });
    }

    fn finish(mut self, from: &Position, pos: u64) -> Batch {
        let end = self.batch.end;
        self.batch.markers = Markers {
            head: match &self.first {
                Some(first) => Window::over(&first[..first.len().min(end as usize)]),
                None => from.markers.head,
            },
            tail: Window::over(&self.tail_bytes),
        };
        self.batch.finished = !self.full;
        if self.batch.finished {
            self.batch.held_back = pos - end;
            self.line.truncate(self.limits.record_limit as usize);
            self.batch.held_back_bytes = self.line;
        }
        self.batch.bytes_read = self.bytes_read;
        self.batch
    }
}

/// The last `MARKER_WINDOW` bytes of `before ++ bytes`.
fn last_window(before: &[u8], bytes: &[u8]) -> Vec<u8> {
    let w = MARKER_WINDOW as usize;
    if bytes.len() >= w {
        return bytes[bytes.len() - w..].to_vec();
    }
    let keep = (w - bytes.len()).min(before.len());
    let mut out = Vec::with_capacity(keep + bytes.len());
    out.extend_from_slice(&before[before.len() - keep..]);
    out.extend_from_slice(bytes);
    out
}

/// Where the complete records of a file end, for seeding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Boundary {
    /// The end of a complete line (just past its `\n`), or 0.
    pub offset: u64,
    /// How many non-blank lines lie before `offset`.
    pub records: u64,
}

/// Scans `[0, size)` of `file` for line ends. Returns the first line end at or after `at`
/// (`None` when `at` lies past the last complete line or no `at` is given) and the last line
/// end of all.
pub(crate) fn find_boundary(
    file: &File,
    size: u64,
    at: Option<u64>,
) -> io::Result<(Option<Boundary>, Boundary)> {
    let mut last = Boundary {
        offset: 0,
        records: 0,
    };
    if at == Some(0) {
        return Ok((Some(last), last));
    }
    let mut chunk = vec![0; CHUNK.min(size) as usize];
    let (mut pos, mut content) = (0u64, false);
    while pos < size {
        let want = (size - pos).min(CHUNK) as usize;
        let n = file.read_at(&mut chunk[..want], pos)?;
        if n == 0 {
            break;
        }
        let mut i = 0;
        while let Some(k) = memchr(b'\n', &chunk[i..n]) {
            content |= !record::is_blank(&chunk[i..i + k]);
            i += k + 1;
            last.offset = pos + i as u64;
            last.records += u64::from(content);
            content = false;
            if at.is_some_and(|at| last.offset >= at) {
                return Ok((Some(last), last));
            }
        }
        content |= !record::is_blank(&chunk[i..n]);
        pos += n as u64;
    }
    Ok((None, last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f
    }

    const LIMITS: ReadLimits = ReadLimits {
        record_limit: 1 << 20,
        batch_bytes: 1 << 30,
    };

    fn read_all(bytes: &[u8], from: &Position, limits: &ReadLimits) -> Batch {
        let f = file_with(bytes);
        read_complete_records(&f, from, bytes.len() as u64, limits)
            .unwrap()
            .unwrap()
    }

    #[test]
    fn splits_records_drops_cr_and_skips_blank_lines() {
        let b = read_all(
            b"{\"a\":1}\r\n\n  \n[2]\n{\"c\"",
            &Position::default(),
            &LIMITS,
        );
        let got: Vec<_> = b
            .records
            .iter()
            .map(|r| (r.offset, r.bytes.clone()))
            .collect();
        assert_eq!(got, vec![(0, b"{\"a\":1}".to_vec()), (13, b"[2]".to_vec())]);
        assert_eq!(b.blank_lines, 2);
        assert_eq!(b.end, 17);
        assert_eq!(
            (b.held_back, b.held_back_bytes.as_slice()),
            (4, &b"{\"c\""[..])
        );
    }

    #[test]
    fn markers_from_the_read_equal_markers_measured_on_disk() {
        let mut bytes = Vec::new();
        for i in 0..400 {
            bytes.extend_from_slice(format!("{{\"n\":{i}}}\n").as_bytes());
        }
        let f = file_with(&bytes);
        let mut pos = Position::default();
        for cut in [5u64, 900, 1500, 4000, bytes.len() as u64] {
            let b = read_complete_records(&f, &pos, cut, &LIMITS)
                .unwrap()
                .unwrap();
            assert_eq!(b.markers, Markers::measure(&f, b.end).unwrap(), "cut {cut}");
            pos = Position {
                offset: b.end,
                markers: b.markers,
            };
        }
        assert_eq!(pos.offset, bytes.len() as u64);
    }

    #[test]
    fn a_changed_window_is_a_mismatch() {
        let good = b"{\"a\":1}\n{\"b\":2}\n";
        let f = file_with(good);
        let at = Position {
            offset: 8,
            markers: Markers::measure(&f, 8).unwrap(),
        };
        let rewritten = file_with(b"{\"A\":1}\n{\"b\":2}\n");
        let got = read_complete_records(&rewritten, &at, 16, &LIMITS).unwrap();
        assert_eq!(got.unwrap_err(), Mismatch::Rewritten);
        let got = read_complete_records(&f, &at, 4, &LIMITS).unwrap();
        assert_eq!(got.unwrap_err(), Mismatch::Truncated { size: 4 });
    }

    #[test]
    fn an_oversized_line_is_rejected_without_being_held_and_the_next_line_is_read() {
        let limits = ReadLimits {
            record_limit: 100_000,
            batch_bytes: 1 << 30,
        };
        let mut bytes = vec![b'x'; 600_000];
        bytes.extend_from_slice(b"\n{\"after\":1}\n");
        let b = read_all(&bytes, &Position::default(), &limits);
        assert_eq!(b.rejects.len(), 1);
        assert_eq!(b.rejects[0].length, 600_000);
        assert_eq!(b.rejects[0].raw, bytes[..100_000]);
        assert_eq!(b.records.len(), 1);
        assert_eq!(b.records[0].offset, 600_001);
    }

    #[test]
    fn a_record_just_under_the_limit_is_read_without_doubling_the_buffer_past_it() {
        let limits = ReadLimits {
            record_limit: 3_000_000,
            batch_bytes: 1 << 30,
        };
        let mut bytes = b"[\"".to_vec();
        bytes.extend(std::iter::repeat_n(b'x', 2_999_990));
        bytes.extend_from_slice(b"\"]");
        let from = Position::default();
        let mut scan = Scan::new(&from, Vec::new(), true, &limits);
        let mut pos = 0;
        for chunk in bytes.chunks(CHUNK as usize) {
            scan.feed(chunk, pos);
            pos += chunk.len() as u64;
            assert!(
                scan.line.capacity() <= 3_000_001,
                "{}",
                scan.line.capacity()
            );
        }
        scan.feed(b"\n", pos);
        assert_eq!(scan.batch.records.len(), 1);
    }

    #[test]
    fn a_full_batch_stops_at_a_line_end() {
        let limits = ReadLimits {
            record_limit: 1000,
            batch_bytes: 20,
        };
        let b = read_all(
            b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\":4}\n",
            &Position::default(),
            &limits,
        );
        assert_eq!(b.records.len(), 3);
        assert_eq!(b.end, 24);
        assert!(!b.finished);
    }

    #[test]
    fn boundary_finds_the_end_of_the_record_holding_an_offset() {
        let f = file_with(b"{\"a\":1}\n\n{\"b\":2}\n{\"c\"");
        let size = 22;
        assert_eq!(
            find_boundary(&f, size, None).unwrap().1,
            Boundary {
                offset: 17,
                records: 2
            }
        );
        let (hit, _) = find_boundary(&f, size, Some(3)).unwrap();
        assert_eq!(
            hit,
            Some(Boundary {
                offset: 8,
                records: 1
            })
        );
        let (hit, _) = find_boundary(&f, size, Some(9)).unwrap();
        assert_eq!(
            hit,
            Some(Boundary {
                offset: 9,
                records: 1
            })
        );
        assert_eq!(find_boundary(&f, size, Some(18)).unwrap().0, None);
    }
}
