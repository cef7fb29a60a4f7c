//! Where a new source starts: its persisted cursor, its prefix mark (`transcript-sync seed`),
//! or the start policy, in that order.

use crate::archive::{Archive, Commit, Op};
use crate::domain::fingerprint::{Identity, Markers};
use crate::domain::{Position, PrefixMark, StartAt};
use crate::error::{Error, IoContext, Result};
use crate::read::{Boundary, find_boundary};
use std::fmt;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// Which rule placed a source's cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SeedOrigin {
    /// The cursor stored in the archive.
    Persisted,
    /// A prefix mark recorded by `seed`.
    Prefix,
    /// The `beginning` policy, or any file or generation that appears after a first scan.
    Beginning,
    /// The `end` policy at a root's first scan.
    End,
}

impl fmt::Display for SeedOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SeedOrigin::Persisted => "persisted",
            SeedOrigin::Prefix => "prefix",
            SeedOrigin::Beginning => "beginning",
            SeedOrigin::End => "end",
        })
    }
}

/// Where a new source starts, and why.
#[derive(Clone, Debug)]
pub(crate) struct Seed {
    /// The starting cursor.
    pub position: Position,
    /// The rule that chose it.
    pub origin: SeedOrigin,
    /// Complete records before the cursor, which are not archived.
    pub skipped_records: u64,
    /// A prefix mark that was found but did not match the file, and why.
    pub rejected_mark: Option<(PrefixMark, String)>,
}

impl Seed {
    /// The level its `seeded` line is logged at: debug for a file read from its first byte
    /// (a first pass over a home seeds thousands; the pass's summary counts them), info when a
    /// rule left records out or a mark placed it.
    pub(crate) fn log_level(&self) -> log::Level {
        let whole = self.origin == SeedOrigin::Beginning && self.skipped_records == 0;
        if whole && self.rejected_mark.is_none() {
            log::Level::Debug
        } else {
            log::Level::Info
        }
    }
}

/// Chooses where a new source with handle `file` (of `size` bytes) starts: its prefix mark if
/// one is recorded for its identity and still matches, else the start policy (`end` only when
/// `first_scan`).
pub(crate) fn seed_new_source(
    archive: &Archive,
    file: &File,
    size: u64,
    identity: Identity,
    start_at: StartAt,
    first_scan: bool,
) -> Result<std::io::Result<Seed>> {
    let mut rejected_mark = None;
    if let Some(mark) = archive.prefix_mark(identity)? {
        match verify_mark(file, size, &mark) {
            Ok(None) => {
                return Ok(Ok(Seed {
                    position: mark.position,
                    origin: SeedOrigin::Prefix,
                    skipped_records: mark.skipped_records,
                    rejected_mark: None,
                }));
            }
            Ok(Some(why)) => rejected_mark = Some((mark, why)),
            Err(e) => return Ok(Err(e)),
        }
    }
    let seed = if start_at == StartAt::End && first_scan {
        match find_boundary(file, size, None) {
            Ok((_, end)) => Markers::measure(file, end.offset).map(|markers| Seed {
                position: Position {
                    offset: end.offset,
                    markers,
                },
                origin: SeedOrigin::End,
                skipped_records: end.records,
                rejected_mark,
            }),
            Err(e) => Err(e),
        }
    } else {
        Ok(Seed {
            position: Position::default(),
            origin: SeedOrigin::Beginning,
            skipped_records: 0,
            rejected_mark,
        })
    };
    Ok(seed)
}

/// `Ok(None)` when the file still holds the bytes the mark was measured on.
fn verify_mark(file: &File, size: u64, mark: &PrefixMark) -> std::io::Result<Option<String>> {
    let offset = mark.position.offset;
    if size < offset {
        return Ok(Some(format!(
            "the file is {size} bytes, shorter than the mark at {offset}"
        )));
    }
    if Markers::measure(file, offset)? != mark.position.markers {
        return Ok(Some(format!(
            "the bytes before offset {offset} changed since `seed`"
        )));
    }
    Ok(None)
}

/// What `transcript-sync seed` recorded.
#[derive(Clone, Debug)]
pub(crate) struct Seeded {
    /// The resolved offset: history ends here.
    pub offset: u64,
    /// Complete records in the prefix.
    pub records: u64,
    /// Warnings about how `--prefix-bytes` was resolved.
    pub warnings: Vec<String>,
    /// The offset of an earlier mark on the same file that this one replaced.
    pub replaced: Option<u64>,
}

/// Records that the first bytes of `path` are history not to be forwarded. Resolves the mark
/// once, against the bytes on disk now: without `prefix_bytes`, the end of the last complete
/// record; inside a complete record, the end of that record; past the last complete record,
/// that record's end. Refused for an identity the archive already tracks.
pub(crate) fn seed_prefix(
    archive: &mut Archive,
    path: &Path,
    prefix_bytes: Option<u64>,
) -> Result<Seeded> {
    let file = crate::read::open::open_regular(path).at_path(path)?;
    let meta = file.metadata().at_path(path)?;
    if !meta.file_type().is_file() {
        return Err(Error::NotRegular {
            path: path.to_owned(),
        });
    }
    let identity = Identity::of(&meta);
    refuse_tracked(archive, path, identity)?;
    let (end, warnings) = resolve_prefix(&file, meta.size(), prefix_bytes).at_path(path)?;
    let markers = Markers::measure(&file, end.offset).at_path(path)?;
    let mark = PrefixMark {
        identity,
        path: path.to_owned(),
        position: Position {
            offset: end.offset,
            markers,
        },
        skipped_records: end.records,
    };
    let replaced = archive
        .prefix_mark(identity)?
        .map(|old| old.position.offset);
    let mut tx = Commit::default();
    tx.push(Op::PutPrefixMark(mark));
    let detail = format!("prefix mark offset={} records={}", end.offset, end.records);
    tx.push(Op::event(None, "prefix_marked", path, &detail));
    archive.apply(&tx)?;
    Ok(Seeded {
        offset: end.offset,
        records: end.records,
        warnings,
        replaced,
    })
}

/// Where the prefix ends, against the bytes on disk now, with a warning for each adjustment
/// made to `--prefix-bytes`.
fn resolve_prefix(
    file: &File,
    size: u64,
    prefix_bytes: Option<u64>,
) -> std::io::Result<(Boundary, Vec<String>)> {
    let (hit, last) = find_boundary(file, size, prefix_bytes)?;
    Ok(match (prefix_bytes, hit) {
        (None, _) => (last, Vec::new()),
        (Some(n), Some(hit)) if hit.offset == n => (hit, Vec::new()),
        (Some(n), Some(hit)) => {
            let at = hit.offset;
            let why = format!(
                "--prefix-bytes {n} falls inside a record; the prefix ends with that record, at offset {at}"
            );
            (hit, vec![why])
        }
        (Some(n), None) => {
            let at = last.offset;
            let why = format!(
                "--prefix-bytes {n} is past the last complete record; clamped to offset {at}"
            );
            (last, vec![why])
        }
    })
}

fn refuse_tracked(archive: &Archive, path: &Path, identity: Identity) -> Result<()> {
    let tracked = archive
        .sources()?
        .into_iter()
        .find(|s| s.identity == identity && !s.gone);
    match tracked {
        Some(s) => Err(Error::AlreadyTracked {
            path: path.to_owned(),
            source_id: s.id,
            generation: s.generation,
            offset: s.cursor.position.offset,
        }),
        None => Ok(()),
    }
}
