//! Which paths: walks each root (never following symlinks) and lists the transcript files in
//! it, reporting everything it passes over.

use crate::capture::harness::Root;
use std::fs::Metadata;
use std::path::PathBuf;
use walkdir::WalkDir;

/// A transcript file found by a scan, with its `lstat`.
#[derive(Debug)]
pub(crate) struct Candidate {
    /// Where it was found.
    pub path: PathBuf,
    /// Its `lstat` metadata at the scan.
    pub meta: Metadata,
    /// The index of the root it was found under.
    pub root: usize,
}

/// A path matching a root's glob that is not read, and why.
#[derive(Debug)]
pub(crate) struct Passed {
    /// The path.
    pub path: PathBuf,
    /// Why it is not read.
    pub why: String,
}

/// What a scan of all roots found.
#[derive(Debug, Default)]
pub(crate) struct Discovery {
    /// Regular files matching their root's glob.
    pub candidates: Vec<Candidate>,
    /// Matching paths that are not regular files, and entries that could not be read.
    pub passed: Vec<Passed>,
    /// Roots that do not exist (nothing to read there yet).
    pub missing_roots: Vec<PathBuf>,
    /// Directories that could not be listed: sources under them are not taken for gone.
    pub unlisted: Vec<PathBuf>,
    /// Paths that were in their directory's listing but gone when the scan came to them
    /// (deleted or moved during it): absent, like a path that was never listed, so that
    /// sources under a vanished directory are taken for gone.
    pub vanished: Vec<PathBuf>,
}

/// Scans every root. Errors on single entries are reported in `passed`, never fatal.
pub(crate) fn discover(roots: &[Root]) -> Discovery {
    let mut found = Discovery::default();
    for (index, root) in roots.iter().enumerate() {
        if !root.path.exists() {
            found.missing_roots.push(root.path.clone());
            continue;
        }
        let walk = WalkDir::new(&root.path).follow_links(false);
        scan(index, root, walk, &mut found);
    }
    found
}

/// Scans `walk`, a walk of `root` (given whole, so that a test can change the tree during it).
fn scan(index: usize, root: &Root, walk: WalkDir, found: &mut Discovery) {
    // Directories that can hold none of the root's files are not walked into.
    let reached = |e: &walkdir::DirEntry| {
        let relative = e.path().strip_prefix(&root.path).unwrap_or(e.path());
        e.depth() == 0 || !e.file_type().is_dir() || root.reach.holds(relative)
    };
    for entry in walk.into_iter().filter_entry(reached) {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                let path = e.path().unwrap_or(&root.path).to_owned();
                if not_found(&e) {
                    found.vanished.push(path);
                    continue;
                }
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
        if entry.file_type().is_dir() || !root.matches_relative(relative) {
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
            Err(e) if not_found(&e) => found.vanished.push(entry.into_path()),
            Err(e) => found.passed.push(Passed {
                path: entry.into_path(),
                why: format!("cannot be examined: {e}"),
            }),
        }
    }
}

/// Whether `e` says the path is not there (any more).
fn not_found(e: &walkdir::Error) -> bool {
    e.io_error()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

/// What a path that is not a regular file is, for the log and the archive's events.
pub(crate) fn file_kind(meta: &Metadata) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::harness::given_root;
    use std::fs;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A directory and a file deleted after their directory was listed, before the scan came
    /// to them (as `rm -r` of a session's directory can, during a scan), are absent: not
    /// unlisted, so that the sources under the directory are taken for gone, and not passed
    /// over (nothing there needs a fix).
    #[test]
    fn paths_deleted_after_their_directory_was_listed_are_absent_not_unlisted() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().to_owned();
        for sub in ["kept", "deleted"] {
            fs::create_dir(top.join(sub)).unwrap();
            fs::write(top.join(sub).join("s.jsonl"), b"{}\n").unwrap();
        }
        fs::write(top.join("deleted.jsonl"), b"{}\n").unwrap();
        let root = given_root(&top, "**/*.jsonl");
        // The walk sorts each directory's entries once it has read them, before it goes on:
        // deleting there is deleting between the listing and the visit.
        let deleted = AtomicBool::new(false);
        let at = top.clone();
        let walk = WalkDir::new(&top).follow_links(false).sort_by(move |a, b| {
            if !deleted.swap(true, Ordering::Relaxed) {
                fs::remove_dir_all(at.join("deleted")).unwrap();
                fs::remove_file(at.join("deleted.jsonl")).unwrap();
            }
            a.file_name().cmp(b.file_name())
        });
        let mut found = Discovery::default();
        scan(0, &root, walk, &mut found);
        assert!(found.unlisted.is_empty(), "{:?}", found.unlisted);
        assert!(found.passed.is_empty(), "{:?}", found.passed);
        found.vanished.sort();
        assert_eq!(
            found.vanished,
            [top.join("deleted"), top.join("deleted.jsonl")]
        );
        let candidates: Vec<&PathBuf> = found.candidates.iter().map(|c| &c.path).collect();
        assert_eq!(candidates, [&top.join("kept").join("s.jsonl")]);
    }
}
