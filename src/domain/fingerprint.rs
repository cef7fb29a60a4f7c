//! File identity, fingerprint and marker windows: how the engine tells "unchanged", "appended"
//! and "rewritten" apart without reading a whole file.

use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};

/// The length of each marker window: the first and the last bytes before a cursor.
pub(crate) const MARKER_WINDOW: u64 = 1024;

/// One file identity: (device, inode). A source is one identity; its path is an attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl Identity {
    /// The identity of the file `meta` describes.
    pub fn of(meta: &Metadata) -> Identity {
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }
}

/// What a file looked like when it was last read. A file whose fingerprint equals its cursor's
/// is not opened again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// Device and inode.
    pub identity: Identity,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Status change time, nanoseconds since the epoch.
    pub ctime_ns: i64,
}

impl Fingerprint {
    /// The fingerprint of the file `meta` describes (from `lstat` or `fstat`).
    pub fn of(meta: &Metadata) -> Fingerprint {
        Fingerprint {
            identity: Identity::of(meta),
            size: meta.size(),
            mtime_ns: nanos(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: nanos(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Seconds and nanoseconds as nanoseconds, saturating for times past the year 2262 (a file
/// can carry any timestamp).
fn nanos(secs: i64, nsec: i64) -> i64 {
    secs.saturating_mul(1_000_000_000).saturating_add(nsec)
}

/// A checksum over one window of a file, with the window's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Window {
    /// How many bytes the window covers.
    pub len: u64,
    /// XXH3-64 of those bytes.
    pub hash: u64,
}

impl Window {
    /// The window over `bytes`. The empty window is `Window::default()`, so the markers of
    /// a cursor at offset 0 are `Markers::default()`.
    pub fn over(bytes: &[u8]) -> Window {
        if bytes.is_empty() {
            return Window::default();
        }
        Window {
            len: bytes.len() as u64,
            hash: xxhash_rust::xxh3::xxh3_64(bytes),
        }
    }
}

/// The two marker windows of a cursor at offset `c`: `[0, min(1 KiB, c))` and
/// `[c − min(1 KiB, c), c)`. If both still match, the bytes before the cursor are taken to be
/// the ones already archived.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Markers {
    /// The first bytes of the file.
    pub head: Window,
    /// The bytes just before the cursor.
    pub tail: Window,
}

impl Markers {
    /// Measures the markers of `file` at `offset` with positioned reads. Used where the bytes
    /// before `offset` are not being read anyway (seeding); the reader computes markers from
    /// the very bytes it parsed instead.
    pub fn measure(file: &File, offset: u64) -> io::Result<Markers> {
        let len = offset.min(MARKER_WINDOW);
        let mut head = vec![0; len as usize];
        file.read_exact_at(&mut head, 0)?;
        let mut tail = vec![0; len as usize];
        file.read_exact_at(&mut tail, offset - len)?;
        Ok(Markers {
            head: Window::over(&head),
            tail: Window::over(&tail),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn far_future_timestamps_saturate_instead_of_overflowing() {
        assert_eq!(nanos(10_000_000_000, 5), i64::MAX);
        assert_eq!(nanos(1, 5), 1_000_000_005);
    }

    #[test]
    fn markers_cover_the_first_and_last_kibibyte_before_the_offset() {
        let mut file = tempfile::tempfile().unwrap();
        let bytes: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
        file.write_all(&bytes).unwrap();
        let m = Markers::measure(&file, 2500).unwrap();
        assert_eq!(m.head, Window::over(&bytes[..1024]));
        assert_eq!(m.tail, Window::over(&bytes[1476..2500]));
        let short = Markers::measure(&file, 10).unwrap();
        assert_eq!(short.head, Window::over(&bytes[..10]));
        assert_eq!(short.tail, short.head);
    }
}
