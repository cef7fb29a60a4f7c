//! The export format: one JSON object per archived record, the record embedded verbatim.

use crate::archive::ExportRow;
use std::io::{self, Write};
use std::path::Path;

/// Writes `row` as one line:
/// `{"seq":…,"source":…,"harness":"…","path":"…","generation":…,"offset":…,"record":<verbatim>}`.
/// `source` stays the same across a file's moves and generations, so (source, generation,
/// offset) names a record wherever its file has gone; `path` is where it is now.
/// A path that is not UTF-8 is written lossily; the record bytes were validated as JSON when
/// they were archived and are copied as they are.
pub(crate) fn write_envelope(out: &mut impl Write, row: &ExportRow) -> io::Result<()> {
    Envelope::of(row).write_to(out)
}

/// The fields of one envelope, borrowed.
pub struct Envelope<'a> {
    /// Global sequence number.
    pub seq: i64,
    /// The source's id.
    pub source: i64,
    /// The source's watcher.
    pub harness: &'a str,
    /// The source's current path.
    pub path: &'a Path,
    /// The record's generation.
    pub generation: i64,
    /// The record's offset in that generation.
    pub offset: u64,
    /// The record, verbatim.
    pub record: &'a [u8],
}

impl<'a> Envelope<'a> {
    /// The fields of `row`.
    pub fn of(row: &'a ExportRow) -> Envelope<'a> {
        Envelope {
            seq: row.seq,
            source: row.source,
            harness: &row.harness,
            path: &row.path,
            generation: row.generation,
            offset: row.offset,
            record: &row.record,
        }
    }

    /// Appends this envelope, as one line, to `out`.
    pub fn write_to(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(b"{")?;
        self.write_fields(out)
    }

    /// Appends this envelope, as one line, with the machine that shipped it first:
    /// `{"machine":"<uuid>","host":"…","seq":…}`. (machine, source, generation, offset) is
    /// the record's key anywhere it is shipped.
    pub fn write_shipped(&self, out: &mut impl Write, machine: &str, host: &str) -> io::Result<()> {
        out.write_all(b"{\"machine\":")?;
        serde_json::to_writer(&mut *out, machine)?;
        out.write_all(b",\"host\":")?;
        serde_json::to_writer(&mut *out, host)?;
        out.write_all(b",")?;
        self.write_fields(out)
    }

    /// Everything after the envelope's opening brace.
    fn write_fields(&self, out: &mut impl Write) -> io::Result<()> {
        write!(
            out,
            "\"seq\":{},\"source\":{},\"harness\":",
            self.seq, self.source
        )?;
        serde_json::to_writer(&mut *out, self.harness)?;
        out.write_all(b",\"path\":")?;
        serde_json::to_writer(&mut *out, &self.path.to_string_lossy())?;
        write!(
            out,
            ",\"generation\":{},\"offset\":{},\"record\":",
            self.generation, self.offset
        )?;
        out.write_all(self.record)?;
        out.write_all(b"}\n")
    }
}

/// The `seq` and `source` of an envelope line.
pub(crate) fn seq_of(line: &[u8]) -> (Option<i64>, Option<i64>) {
    #[derive(serde::Deserialize)]
    struct Seq {
        seq: i64,
        source: i64,
    }
    match serde_json::from_slice::<Seq>(line) {
        Ok(s) => (Some(s.seq), Some(s.source)),
        Err(_) => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::path::PathBuf;

    #[test]
    fn envelope_is_one_json_object_with_the_record_verbatim() {
        let row = ExportRow {
            seq: 7,
            source: 3,
            harness: "claude-code".into(),
            path: PathBuf::from(OsStr::from_bytes(b"/t/\"odd\"\xff.jsonl")),
            generation: 1,
            offset: 42,
            record: br#"{"b":1,  "a":[2]}"#.to_vec(),
        };
        let mut out = Vec::new();
        write_envelope(&mut out, &row).unwrap();
        assert_eq!(out.last(), Some(&b'\n'));
        assert!(out.starts_with(b"{\"seq\":7,\"source\":3,\"harness\":\"claude-code\",\"path\":"));
        assert!(out.ends_with(b"\"record\":{\"b\":1,  \"a\":[2]}}\n"));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["source"], 3);
        assert_eq!(v["path"], "/t/\"odd\"\u{fffd}.jsonl");
        assert_eq!(v["generation"], 1);
        assert_eq!(v["offset"], 42);
        assert_eq!(v["record"]["a"][0], 2);
    }
}
