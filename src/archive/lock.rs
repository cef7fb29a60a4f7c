//! One writer at a time: `run` holds an exclusive lock on a file beside the archive.

use crate::error::{Error, IoContext, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The held lock; released when dropped (or when the process dies, however it dies).
#[derive(Debug)]
pub(crate) struct ArchiveLock {
    _file: File,
}

/// The lock file of the archive at `archive`: `archive.db.lock`.
pub(crate) fn lock_path(archive: &Path) -> PathBuf {
    let mut name = archive.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl ArchiveLock {
    /// Takes the lock of the archive at `archive` without waiting, and writes this process's
    /// pid into the lock file. `Err(Error::Locked)` names the holder's pid.
    pub(crate) fn acquire(archive: &Path) -> Result<ArchiveLock> {
        let path = lock_path(archive);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .at_path(&path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    path: archive.to_owned(),
                    pid: holder_pid(&mut file),
                });
            }
            Err(TryLockError::Error(e)) => return Err(e).at_path(&path),
        }
        file.set_len(0).at_path(&path)?;
        writeln!(file, "{}", std::process::id()).at_path(&path)?;
        Ok(ArchiveLock { _file: file })
    }
}

/// The pid written by the process holding the lock of `archive`, if one holds it.
pub(crate) fn running_pid(archive: &Path) -> Option<u32> {
    let mut file = File::open(lock_path(archive)).ok()?;
    match file.try_lock_shared() {
        Ok(()) => None,
        Err(_) => holder_pid(&mut file),
    }
}

fn holder_pid(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_holders_pid() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        let held = ArchiveLock::acquire(&db).unwrap();
        match ArchiveLock::acquire(&db) {
            Err(Error::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Locked, got {other:?}"),
        }
        assert_eq!(running_pid(&db), Some(std::process::id()));
        drop(held);
        assert_eq!(running_pid(&db), None);
        ArchiveLock::acquire(&db).unwrap();
    }
}
