//! Opening a transcript so that what is read belongs to one owned handle.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Opens `path` read-only without following a final symlink and without blocking: a FIFO or
/// socket that took a transcript's name between `lstat` and `open` cannot stall the reader.
/// The caller must `fstat` the handle and read only if it is a regular file.
pub fn open_regular(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}
