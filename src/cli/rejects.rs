//! `rejects`: the lines that are not records, as a table or JSON lines, and the bytes of any
//! one of them exactly as they were on disk.

use crate::archive::RejectRow;
use serde::Serialize;
use std::io::{self, Write};

/// One reject as `rejects` shows it.
#[derive(Debug, Serialize)]
pub(crate) struct RejectEntry {
    /// The reject's id, for `rejects --raw ID`.
    pub id: i64,
    /// When it was recorded, RFC 3339.
    pub time: String,
    /// The source's current path.
    pub path: String,
    /// The source's id, as in the envelopes of `export`.
    pub source: i64,
    /// The generation the line belonged to.
    pub generation: i64,
    /// Where the line started in that generation.
    pub offset: u64,
    /// The line's length on disk, without its newline.
    pub length: u64,
    /// How many of its bytes are kept (`length`, or the record limit for a longer line).
    pub kept: u64,
    /// Why it is not a record.
    pub reason: String,
}

impl From<RejectRow> for RejectEntry {
    fn from(r: RejectRow) -> RejectEntry {
        RejectEntry {
            id: r.id,
            time: crate::platform::time::format_time(r.at_ms),
            path: r.path.to_string_lossy().into_owned(),
            source: r.source,
            generation: r.generation,
            offset: r.offset,
            length: r.length,
            kept: r.kept,
            reason: r.reason,
        }
    }
}

/// Writes rejects as a table for people, one line each (the path, then the reason, after the
/// columns of numbers), with a header and a count.
pub(crate) struct TextWriter<W: Write> {
    out: W,
    count: u64,
}

impl<W: Write> TextWriter<W> {
    /// Writes the header.
    pub(crate) fn new(mut out: W) -> io::Result<TextWriter<W>> {
        writeln!(
            out,
            "{:>6}  {:<20}  {:>6} {:>4} {:>12} {:>10} {:>10}  PATH  REASON",
            "ID", "TIME", "SOURCE", "GEN", "OFFSET", "LENGTH", "KEPT"
        )?;
        Ok(TextWriter { out, count: 0 })
    }

    /// Writes one reject's line.
    pub(crate) fn write(&mut self, r: &RejectEntry) -> io::Result<()> {
        self.count += 1;
        writeln!(
            self.out,
            "{:>6}  {:<20}  {:>6} {:>4} {:>12} {:>10} {:>10}  {}  {}",
            r.id, r.time, r.source, r.generation, r.offset, r.length, r.kept, r.path, r.reason
        )
    }

    /// Writes the count, with how to see one reject's bytes.
    pub(crate) fn finish(mut self) -> io::Result<()> {
        match self.count {
            0 => writeln!(self.out, "total: rejects=0"),
            n => writeln!(
                self.out,
                "total: rejects={n}; `transcript-sync rejects --raw ID` writes one out as it was on disk"
            ),
        }?;
        self.out.flush()
    }
}

/// Writes one reject as a JSON line.
pub(crate) fn write_json(out: &mut impl Write, r: &RejectEntry) -> io::Result<()> {
    serde_json::to_writer(&mut *out, r)?;
    out.write_all(b"\n")
}
