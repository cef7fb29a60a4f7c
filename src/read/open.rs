//! Opening a transcript so that what is read belongs to one owned handle, and keeping the
//! handles of transcripts being appended to open between reads.

use crate::domain::fingerprint::Identity;
use std::collections::HashMap;
use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Opens `path` read-only without following a final symlink and without blocking: a FIFO or
/// socket that took a transcript's name between `lstat` and `open` cannot stall the reader.
/// The caller must `fstat` the handle and read only if it is a regular file.
pub(crate) fn open_regular(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Transcripts kept open between reads, so that reading an append to a file read a moment ago
/// neither opens it again nor closes it (two system calls, and the path looked up again).
///
/// A handle is used again only for the path it was opened by, while a `lstat` of that path,
/// made when the handle is taken, shows the same file with the same mode and owner: a file
/// deleted is not read any further than an open would let it be, one replaced or made again
/// is opened again, and so is one whose mode or owner changed, so that what an open would
/// refuse is refused as before. The `lstat` replaces an open and a close, and wakes no one. At most [`MAX_KEPT`] stay open, the least
/// recently read closed first, and none longer than [`IDLE`] after its last read once
/// [`Kept::close_idle`] runs (every read does); a full pass (every deletion makes one, and every
/// rescan) also closes the handles of files deleted or replaced.
#[derive(Default)]
pub(crate) struct Kept {
    files: HashMap<PathBuf, KeptFile>,
}

struct KeptFile {
    file: File,
    identity: Identity,
    /// Mode and owner: what decides whether an open would be refused.
    access: (u32, u32, u32),
    used: Instant,
}

/// What decides whether an open of the file `meta` describes would be refused.
fn access(meta: &Metadata) -> (u32, u32, u32) {
    (meta.mode(), meta.uid(), meta.gid())
}

/// The most transcripts kept open.
pub(crate) const MAX_KEPT: usize = 64;

/// How long a transcript is kept open after its last read.
pub(crate) const IDLE: Duration = Duration::from_secs(5);

impl Kept {
    /// The handle kept for `path`, when the path still names the file it was opened on, with
    /// the same mode and owner; a handle that no longer fits is closed.
    pub(crate) fn take(&mut self, path: &Path) -> Option<File> {
        let kept = self.files.remove(path)?;
        let now = std::fs::symlink_metadata(path).ok()?;
        (kept.identity == Identity::of(&now) && kept.access == access(&now)).then_some(kept.file)
    }

    /// Keeps `file`, opened on `path` and described by `meta` (an `fstat` of it).
    pub(crate) fn keep(&mut self, path: &Path, file: File, meta: &Metadata) {
        if self.files.len() >= MAX_KEPT && !self.files.contains_key(path) {
            let oldest = (self.files.iter())
                .min_by_key(|(_, k)| k.used)
                .map(|(p, _)| p.clone());
            if let Some(oldest) = oldest {
                self.files.remove(&oldest);
            }
        }
        let kept = KeptFile {
            file,
            identity: Identity::of(meta),
            access: access(meta),
            used: Instant::now(),
        };
        self.files.insert(path.to_owned(), kept);
    }

    /// Closes the handle kept for `path`, if any.
    pub(crate) fn forget(&mut self, path: &Path) {
        self.files.remove(path);
    }

    /// Closes every handle not read for [`IDLE`].
    pub(crate) fn close_idle(&mut self) {
        self.files.retain(|_, k| k.used.elapsed() < IDLE);
    }

    /// Closes every handle not read for [`IDLE`], and every one whose path no longer names its
    /// file (one `lstat` each). A deleted file's handle must not outlive the deletion's pass:
    /// it would keep the file's space, and keep its directory from being reported deleted
    /// (inotify says a directory is deleted once nothing inside it is open).
    pub(crate) fn close_stale(&mut self) {
        self.close_idle();
        self.files.retain(|path, k| {
            std::fs::symlink_metadata(path).is_ok_and(|m| Identity::of(&m) == k.identity)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn opened(path: &Path) -> (File, Metadata) {
        let file = open_regular(path).unwrap();
        let meta = file.metadata().unwrap();
        (file, meta)
    }

    #[test]
    fn a_handle_is_used_again_only_while_its_path_shows_the_same_file_and_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        std::fs::write(&path, b"{}\n").unwrap();
        let mut kept = Kept::default();
        let (file, meta) = opened(&path);
        kept.keep(&path, file, &meta);
        assert!(kept.take(&path).is_some());
        assert!(kept.take(&path).is_none(), "taken, it is no longer kept");

        // Permissions changed: opened again, so that a refusal is seen as before.
        let (file, meta) = opened(&path);
        kept.keep(&path, file, &meta);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(kept.take(&path).is_none());

        // Another file at the path (replaced, or deleted and made again).
        let (file, meta) = opened(&path);
        kept.keep(&path, file, &meta);
        let other = dir.path().join("other.jsonl");
        std::fs::write(&other, b"{}\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert!(kept.take(&path).is_none());
        assert!(kept.files.is_empty());
    }

    #[test]
    fn the_least_recently_read_is_closed_past_the_bound_and_idle_ones_are_closed() {
        let dir = tempfile::tempdir().unwrap();
        let mut kept = Kept::default();
        let paths: Vec<PathBuf> = (0..=MAX_KEPT)
            .map(|i| dir.path().join(format!("{i}.jsonl")))
            .collect();
        for path in &paths {
            std::fs::write(path, b"{}\n").unwrap();
            let (file, meta) = opened(path);
            kept.keep(path, file, &meta);
        }
        assert_eq!(kept.files.len(), MAX_KEPT);
        assert!(!kept.files.contains_key(&paths[0]), "the oldest was closed");
        assert!(kept.files.contains_key(&paths[MAX_KEPT]));
        kept.close_idle();
        assert_eq!(kept.files.len(), MAX_KEPT, "none idle yet");
        for k in kept.files.values_mut() {
            k.used -= IDLE;
        }
        kept.close_idle();
        assert!(kept.files.is_empty());
    }

    #[test]
    fn a_pass_closes_the_handles_of_files_deleted_or_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let mut kept = Kept::default();
        let [stays, deleted, replaced] = ["a", "b", "c"].map(|n| dir.path().join(n));
        for path in [&stays, &deleted, &replaced] {
            std::fs::write(path, b"{}\n").unwrap();
            let (file, meta) = opened(path);
            kept.keep(path, file, &meta);
        }
        std::fs::remove_file(&deleted).unwrap();
        std::fs::write(dir.path().join("new"), b"{}\n").unwrap();
        std::fs::rename(dir.path().join("new"), &replaced).unwrap();
        kept.close_stale();
        assert_eq!(kept.files.keys().collect::<Vec<_>>(), [&stays]);
    }
}
