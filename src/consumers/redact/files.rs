//! `redact` over files: each line written redacted, or each secret reported (`--check`).

use super::Redactor;
use crate::error::{IoContext, Result};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// What `redact --check` found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Checked {
    /// Secrets found.
    pub secrets: u64,
    /// Inputs holding at least one.
    pub files: u64,
}

/// Writes each line of `inputs` (stdin for `-` or none) to `out` with its secrets replaced.
/// `Err` when an input cannot be read (naming it); the inner `Err` is `out`'s.
pub(crate) fn redact_files(
    redactor: &Redactor,
    inputs: &[PathBuf],
    out: &mut impl Write,
) -> Result<io::Result<()>> {
    each_line(inputs, |_, line| {
        let (body, end) = split_newline(line);
        out.write_all(&redactor.redact_record(body))?;
        out.write_all(end)
    })
}

/// Writes one line per secret of `inputs` to `out`, `FILE:LINE:OFFSET: RULE PREVIEW`, and
/// never a secret's value.
pub(crate) fn check_files(
    redactor: &Redactor,
    inputs: &[PathBuf],
    out: &mut impl Write,
) -> Result<io::Result<Checked>> {
    let mut checked = Checked::default();
    let mut last_input = None;
    let written = each_line(inputs, |at, line| {
        for f in redactor.findings(split_newline(line).0) {
            if last_input != Some(at.input) {
                checked.files += 1;
                last_input = Some(at.input);
            }
            checked.secrets += 1;
            let (name, number) = (at.name, at.line);
            writeln!(
                out,
                "{name}:{number}:{}: {} {}",
                f.offset, f.rule, f.preview
            )?;
        }
        Ok(())
    })?;
    Ok(written.map(|()| checked))
}

/// A line without its line ending, and the ending.
fn split_newline(line: &[u8]) -> (&[u8], &[u8]) {
    let body = line.strip_suffix(b"\n").unwrap_or(line);
    let body = body.strip_suffix(b"\r").unwrap_or(body);
    line.split_at(body.len())
}

/// Where a line is.
struct At<'a> {
    /// The input's index.
    input: usize,
    /// Its name (`-` for stdin).
    name: &'a str,
    /// The line's number, from 1.
    line: u64,
}

/// Calls `f` with each line (with its newline, if it has one) and where it is, input after
/// input.
fn each_line(
    inputs: &[PathBuf],
    mut f: impl FnMut(At, &[u8]) -> io::Result<()>,
) -> Result<io::Result<()>> {
    let stdin = [PathBuf::from("-")];
    let inputs = if inputs.is_empty() {
        &stdin[..]
    } else {
        inputs
    };
    let mut line = Vec::new();
    for (input, path) in inputs.iter().enumerate() {
        let (name, mut reader) = open(path)?;
        let mut number = 0;
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line).at_path(path)? == 0 {
                break;
            }
            number += 1;
            let at = At {
                input,
                name: &name,
                line: number,
            };
            if let Err(e) = f(at, &line) {
                return Ok(Err(e));
            }
        }
    }
    Ok(Ok(()))
}

fn open(path: &Path) -> Result<(String, Box<dyn BufRead>)> {
    if path == Path::new("-") {
        return Ok(("-".into(), Box::new(io::stdin().lock())));
    }
    let file = File::open(path).at_path(path)?;
    let reader = BufReader::with_capacity(256 * 1024, file);
    Ok((path.display().to_string(), Box::new(reader)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_keep_their_endings_and_findings_name_file_line_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let token = "ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz";
        std::fs::write(
            &path,
            format!("{{\"a\":1}}\r\n{{\"t\":\"{token}\"}}\nx {token}"),
        )
        .unwrap();
        let r = Redactor::builtin();
        let mut out = Vec::new();
        redact_files(&r, std::slice::from_ref(&path), &mut out)
            .unwrap()
            .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"a\":1}\r\n{\"t\":\"[REDACTED:github-token]\"}\nx [REDACTED:github-token]"
        );
        let mut out = Vec::new();
        let checked = check_files(&r, &[path.clone(), path.clone()], &mut out)
            .unwrap()
            .unwrap();
        assert_eq!(
            checked,
            Checked {
                secrets: 4,
                files: 2
            }
        );
        let name = path.display();
        let report = String::from_utf8(out).unwrap();
        assert!(report.starts_with(&format!(
            "{name}:2:6: github-token ghp_****…\n{name}:3:2: github-token ghp_****…\n"
        )));
        assert!(!report.contains(token));
    }
}
