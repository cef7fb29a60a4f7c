//! The export format: one JSON object per archived record, the record embedded verbatim.

use crate::archive::ExportRow;
use std::io::{self, Write};

/// Writes `row` as one line:
/// `{"seq":…,"harness":"…","path":"…","generation":…,"offset":…,"record":<verbatim>}`.
/// A path that is not UTF-8 is written lossily; the record bytes were validated as JSON when
/// they were archived and are copied as they are.
pub fn write_envelope(out: &mut impl Write, row: &ExportRow) -> io::Result<()> {
    write!(out, "{{\"seq\":{},\"harness\":", row.seq)?;
    serde_json::to_writer(&mut *out, &row.harness)?;
    out.write_all(b",\"path\":")?;
    serde_json::to_writer(&mut *out, &row.path.to_string_lossy())?;
    write!(
        out,
        ",\"generation\":{},\"offset\":{},\"record\":",
        row.generation, row.offset
    )?;
    out.write_all(&row.record)?;
    out.write_all(b"}\n")
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
            harness: "claude-code".into(),
            path: PathBuf::from(OsStr::from_bytes(b"/t/\"odd\"\xff.jsonl")),
            generation: 1,
            offset: 42,
            record: br#"{"b":1,  "a":[2]}"#.to_vec(),
        };
        let mut out = Vec::new();
        write_envelope(&mut out, &row).unwrap();
        assert_eq!(out.last(), Some(&b'\n'));
        assert!(out.ends_with(b"\"record\":{\"b\":1,  \"a\":[2]}}\n"));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["path"], "/t/\"odd\"\u{fffd}.jsonl");
        assert_eq!(v["generation"], 1);
        assert_eq!(v["offset"], 42);
        assert_eq!(v["record"]["a"][0], 2);
    }
}
