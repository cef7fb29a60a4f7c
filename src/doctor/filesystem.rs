//! What `statfs` and `statvfs` say about a path: the kind of filesystem (network ones matter,
//! since inotify sees no change made on another machine) and its free space.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Free and total space of a filesystem, in bytes.
#[derive(Clone, Copy, Debug)]
pub struct Space {
    /// Bytes an unprivileged user can still write.
    pub available: u64,
    /// The filesystem's size.
    pub total: u64,
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

/// `statvfs(path)`: the space of the filesystem holding `path`.
// The field types differ by platform (`fsblkcnt_t` is 32 bits on macOS).
#[allow(clippy::useless_conversion)]
pub fn space(path: &Path) -> io::Result<Space> {
    let c = c_path(path)?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a valid NUL-terminated string and `st` is writable memory of the right
    // type; statvfs fills it on success, which is checked before it is read.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it initialised `st`.
    let st = unsafe { st.assume_init() };
    let frsize = u64::from(st.f_frsize);
    Ok(Space {
        available: u64::from(st.f_bavail).saturating_mul(frsize),
        total: u64::from(st.f_blocks).saturating_mul(frsize),
    })
}

/// The network or remote filesystem `path` is on, by name, or `None` for a local one.
#[cfg(target_os = "linux")]
// `f_type` is `__fsword_t`, whose width differs by architecture.
#[allow(clippy::useless_conversion)]
pub fn network_kind(path: &Path) -> io::Result<Option<&'static str>> {
    // Magic numbers from linux/magic.h and the filesystems' own headers.
    const NETWORK: &[(i64, &str)] = &[
        (0x6969, "nfs"),
        (0x517B, "smb"),
        (0xFF53_4D42, "cifs"),
        (0xFE53_4D42, "smb2"),
        (0x0102_1997, "9p"),
        (0x00C3_6400, "ceph"),
        (
            0x6573_5546,
            "fuse (sshfs, rclone or another userspace filesystem)",
        ),
        (0x6B41_4653, "afs"),
        (0x5346_414F, "openafs"),
        (0x7375_7245, "coda"),
        (0x564C, "ncp"),
        (0x0BD0_0BD0, "lustre"),
        (0x4750_4653, "gpfs"),
        (0x0116_1970, "gfs2"),
        (0x7461_636F, "ocfs2"),
    ];
    let c = c_path(path)?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: as in `space`: a valid C string, writable memory, checked result.
    if unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statfs returned 0, so it initialised `st`.
    let kind = i64::from(unsafe { st.assume_init() }.f_type);
    Ok(NETWORK.iter().find(|(m, _)| *m == kind).map(|(_, n)| *n))
}

/// The network or remote filesystem `path` is on, by name, or `None` for a local one.
#[cfg(target_os = "macos")]
pub fn network_kind(path: &Path) -> io::Result<Option<&'static str>> {
    const NETWORK: &[&str] = &["nfs", "smbfs", "afpfs", "webdav", "macfuse", "osxfuse"];
    let c = c_path(path)?;
    let mut st = std::mem::MaybeUninit::<libc::statfs>::zeroed();
    // SAFETY: as in `space`: a valid C string, writable memory, checked result.
    if unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: statfs returned 0, so it initialised `st`, whose type name is NUL-terminated.
    let st = unsafe { st.assume_init() };
    let name = unsafe { std::ffi::CStr::from_ptr(st.f_fstypename.as_ptr()) };
    let name = name.to_string_lossy();
    Ok(NETWORK.iter().find(|n| name == **n).copied())
}

/// The network or remote filesystem `path` is on; not known on this platform.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn network_kind(_path: &Path) -> io::Result<Option<&'static str>> {
    Ok(None)
}

/// Mount points strictly below `dir`, from `/proc/self/mountinfo` (none where it is missing).
pub fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mount_point(p)))
        .filter(|p| p != dir && p.starts_with(dir))
        .collect()
}

/// Mount points in mountinfo escape space, tab, newline and backslash as `\ooo`.
fn unescape_mount_point(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// The path itself if it exists, else its nearest existing ancestor.
pub fn nearest_existing(path: &Path) -> Option<&Path> {
    path.ancestors().find(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_directory_has_space_and_is_not_on_a_network() {
        let dir = tempfile::tempdir().unwrap();
        let space = space(dir.path()).unwrap();
        assert!(space.total >= space.available && space.total > 0);
        #[cfg(target_os = "linux")]
        assert_eq!(network_kind(Path::new("/proc")).unwrap(), None);
    }

    #[test]
    fn mount_points_with_spaces_are_unescaped() {
        assert_eq!(unescape_mount_point("/mnt/a\\040b"), "/mnt/a b");
    }
}
