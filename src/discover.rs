//! Which paths: walks each root (never following symlinks) and lists the transcript files in
//! it, reporting everything it passes over.

use crate::harness::Root;
use std::fs::Metadata;
use std::path::PathBuf;
use walkdir::WalkDir;

/// A transcript file found by a scan, with its `lstat`.
#[derive(Debug)]
pub struct Candidate {
    /// Where it was found.
    pub path: PathBuf,
    /// Its `lstat` metadata at the scan.
    pub meta: Metadata,
    /// The index of the root it was found under.
    pub root: usize,
}

/// A path matching a root's glob that is not read, and why.
#[derive(Debug)]
pub struct Passed {
    /// The path.
    pub path: PathBuf,
    /// Why it is not read.
    pub why: String,
}

/// What a scan of all roots found.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Regular files matching their root's glob.
    pub candidates: Vec<Candidate>,
    /// Matching paths that are not regular files, and entries that could not be read.
    pub passed: Vec<Passed>,
    /// Roots that do not exist (nothing to read there yet).
    pub missing_roots: Vec<PathBuf>,
    /// Directories that could not be listed: sources under them are not taken for gone.
    pub unlisted: Vec<PathBuf>,
}

/// Scans every root. Errors on single entries are reported in `passed`, never fatal.
pub fn discover(roots: &[Root]) -> Discovery {
    let mut found = Discovery::default();
    for (index, root) in roots.iter().enumerate() {
        if !root.path.exists() {
            found.missing_roots.push(root.path.clone());
            continue;
        }
        scan_root(index, root, &mut found);
    }
    found
}

fn scan_root(index: usize, root: &Root, found: &mut Discovery) {
    for entry in WalkDir::new(&root.path).follow_links(false) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                let path = e.path().unwrap_or(&root.path).to_owned();
                found.unlisted.push(path.clone());
                found.passed.push(Passed {
                    path,
                    why: format!("cannot be listed: {e}"),
                });
                continue;
            }
        };
        let relative = entry
            .path()
            .strip_prefix(&root.path)
            .unwrap_or(entry.path());
        if entry.file_type().is_dir() || !root.glob.is_match(relative) {
            continue;
        }
        match entry.metadata() {
            Ok(meta) if meta.file_type().is_file() => found.candidates.push(Candidate {
                path: entry.into_path(),
                meta,
                root: index,
            }),
            Ok(meta) => found.passed.push(Passed {
                path: entry.into_path(),
                why: format!("not a regular file ({})", file_kind(&meta)),
            }),
            Err(e) => found.passed.push(Passed {
                path: entry.into_path(),
                why: format!("cannot be examined: {e}"),
            }),
        }
    }
}

/// What a path that is not a regular file is, for the log and the archive's events.
pub fn file_kind(meta: &Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_symlink() {
        "a symlink, not followed"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else {
        "not a file"
    }
}
