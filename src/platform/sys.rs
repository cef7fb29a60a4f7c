//! The operating-system calls the program makes beyond what std offers, as safe functions
//! (on rustix), and the one table of network filesystems that the daemon and `doctor` share.

use std::io;
use std::os::fd::AsFd;
use std::path::Path;

/// Gives the calling thread the lowest scheduling class there is, so that every other thread
/// goes first when the cores are busy: on Linux, `SCHED_IDLE`, under which any other thread
/// that wakes takes the core at once, and which gets almost nothing of a core that other
/// threads keep busy (a weight of 3, against 1,024 at nice 0). An unprivileged thread cannot
/// leave it again, and the threads it starts are in it too. Elsewhere it does nothing.
pub(crate) fn idle_thread_policy() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    thread_policy(libc::SCHED_IDLE)?;
    Ok(())
}

/// How long the calling thread has waited for a core, in all, while it could run: the second
/// field of Linux's `/proc/thread-self/schedstat`. `None` where there is none.
pub(crate) fn thread_core_wait() -> Option<std::time::Duration> {
    core_wait_of(&std::fs::read_to_string("/proc/thread-self/schedstat").ok()?)
}

/// The time waited for a core in a `schedstat` line: time on a core, time waiting for one
/// (both in ns), time slices.
fn core_wait_of(schedstat: &str) -> Option<std::time::Duration> {
    let ns = schedstat.split_whitespace().nth(1)?.parse().ok()?;
    Some(std::time::Duration::from_nanos(ns))
}

/// The Unix time (seconds) of a wall-clock time of this machine's time zone (`TZ`, else the
/// system's), as `mktime(3)` reads it (a time that a clock change skipped or repeated is taken
/// as it decides). `None` when it cannot say.
#[allow(unsafe_code)] // mktime: rustix has no wrapper
pub(crate) fn local_time_to_unix(
    (year, month, day): (i32, u32, u32),
    (hour, minute, second): (u32, u32, u32),
) -> Option<i64> {
    let field = |v: u32| libc::c_int::try_from(v).ok();
    // SAFETY: an all-zero `tm` is a valid value (its pointer field, where there is one, null).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = year.checked_sub(1900)?;
    tm.tm_mon = field(month)?.checked_sub(1)?;
    tm.tm_mday = field(day)?;
    tm.tm_hour = field(hour)?;
    tm.tm_min = field(minute)?;
    tm.tm_sec = field(second)?;
    // Daylight saving time unknown: mktime decides.
    tm.tm_isdst = -1;
    // SAFETY: `tm` is a valid, exclusively borrowed `tm`; mktime reads and normalises it.
    let t = unsafe { libc::mktime(&mut tm) };
    #[allow(clippy::useless_conversion)] // time_t is narrower than i64 on some targets
    (t != -1).then_some(i64::from(t))
}

/// How far this machine's time zone (`TZ`, else the system's) is ahead of UTC at Unix time
/// `secs`, in seconds, as `localtime_r(3)` says (the zone's daylight saving time included);
/// SQLite's `'localtime'` asks the same. `None` when it cannot say.
#[allow(unsafe_code)] // localtime_r: rustix has no wrapper
pub(crate) fn local_offset_at(secs: i64) -> Option<i64> {
    let t = libc::time_t::try_from(secs).ok()?;
    // SAFETY: an all-zero `tm` is a valid value (its pointer field, where there is one, null).
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call; localtime_r writes `tm` only, and is
    // safe to call from several threads at once.
    let done = unsafe { libc::localtime_r(&t, &mut tm) };
    #[allow(clippy::useless_conversion)] // tm_gmtoff is narrower than i64 on some targets
    (!done.is_null()).then(|| i64::from(tm.tm_gmtoff))
}

/// Puts the calling thread in the batch scheduling class: it keeps its share of the cores (a
/// nice of 0), but its wake-ups never preempt the thread running on a core; it waits for that
/// thread to sleep or for its slice to end. Linux only (`SCHED_BATCH`: unlike `SCHED_IDLE`, an
/// unprivileged thread may leave it again, and other programs' threads do not starve it);
/// elsewhere it does nothing.
pub(crate) fn batch_thread_policy() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    thread_policy(libc::SCHED_BATCH)?;
    Ok(())
}

/// Gives the memory the allocator holds free back to the system, where the allocator is
/// glibc's (which keeps what each thread's arena freed); elsewhere nothing.
#[allow(unsafe_code)] // malloc_trim: rustix has no wrapper
pub(crate) fn return_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer; it only unmaps or shrinks free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Sets the calling thread's scheduling policy (one without priorities).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)] // sched_setscheduler: rustix has no wrapper
fn thread_policy(policy: libc::c_int) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid `sched_param` for the call's duration; pid 0 names the
    // calling thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Renames `from` to `to` unless `to` exists: `Err` with `ErrorKind::AlreadyExists` then
/// (`renameat2` with `RENAME_NOREPLACE` on Linux, `renameatx_np` with `RENAME_EXCL` on macOS).
pub(crate) fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE).map_err(io::Error::from)
}

/// The width of the terminal on stdout, when stdout is one.
pub(crate) fn terminal_width() -> Option<usize> {
    let size = rustix::termios::tcgetwinsize(io::stdout()).ok()?;
    (size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// Free and total space of a filesystem, in bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Space {
    /// Bytes an unprivileged user can still write.
    pub available: u64,
    /// The filesystem's size.
    pub total: u64,
}

/// `statvfs(path)`: the space of the filesystem holding `path`.
// The field types differ by platform (`fsblkcnt_t` is 32 bits on macOS).
#[allow(clippy::useless_conversion)]
pub(crate) fn space(path: &Path) -> io::Result<Space> {
    let st = rustix::fs::statvfs(path)?;
    let frsize = u64::from(st.f_frsize);
    Ok(Space {
        available: u64::from(st.f_bavail).saturating_mul(frsize),
        total: u64::from(st.f_blocks).saturating_mul(frsize),
    })
}

/// The network filesystems by their statfs magic numbers (linux/magic.h and the filesystems'
/// own headers). On them, a change made by another machine raises no inotify event, so the
/// daemon polls roots there and `doctor` says so.
#[cfg(target_os = "linux")]
const NETWORK: &[(u64, &str)] = &[
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

/// The network filesystems by the type names statfs gives on macOS.
#[cfg(target_os = "macos")]
const NETWORK: &[&str] = &["nfs", "smbfs", "afpfs", "webdav", "macfuse", "osxfuse"];

/// The network filesystem `path` is on, by name, or `None` for a local one.
#[cfg(target_os = "linux")]
pub(crate) fn network_filesystem(path: &Path) -> io::Result<Option<&'static str>> {
    let magic = rustix::fs::statfs(path)?.f_type as u64;
    Ok(network_kind(magic))
}

/// The network filesystem with this statfs magic number, if it is one.
#[cfg(target_os = "linux")]
fn network_kind(magic: u64) -> Option<&'static str> {
    NETWORK.iter().find(|(m, _)| *m == magic).map(|(_, n)| *n)
}

/// The network filesystem `path` is on, by name, or `None` for a local one.
#[cfg(target_os = "macos")]
pub fn network_filesystem(path: &Path) -> io::Result<Option<&'static str>> {
    let st = rustix::fs::statfs(path)?;
    let name: Vec<u8> = (st.f_fstypename.iter())
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    Ok(NETWORK.iter().find(|n| name == n.as_bytes()).copied())
}

/// The network filesystem `path` is on; not known on this platform.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn network_filesystem(_path: &Path) -> io::Result<Option<&'static str>> {
    Ok(None)
}

/// True when this user may both read and write `path` (`access(R_OK | W_OK)`).
pub(crate) fn can_read_and_write(path: &Path) -> bool {
    use rustix::fs::Access;
    rustix::fs::access(path, Access::READ_OK | Access::WRITE_OK).is_ok()
}

/// True when this user may create and remove files in the directory `dir`
/// (`access(W_OK | X_OK)`).
pub(crate) fn can_write_into(dir: &Path) -> bool {
    use rustix::fs::Access;
    rustix::fs::access(dir, Access::WRITE_OK | Access::EXEC_OK).is_ok()
}

/// The real user id.
pub(crate) fn uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// The effective user id.
pub(crate) fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Writes to file descriptor 1 directly, without std's stdout buffer (so that two writers
/// sharing it cannot reorder each other's bytes). Returns how many bytes were written.
pub(crate) fn write_stdout(buf: &[u8]) -> io::Result<usize> {
    Ok(rustix::io::write(io::stdout().as_fd(), buf)?)
}

/// stdout's pipe capacity, when stdout is a pipe whose capacity can be read (Linux).
#[cfg(target_os = "linux")]
pub(crate) fn stdout_pipe_capacity() -> Option<usize> {
    let stdout = io::stdout();
    let stat = rustix::fs::fstat(stdout.as_fd()).ok()?;
    let fifo = rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Fifo;
    fifo.then(|| rustix::pipe::fcntl_getpipe_size(stdout.as_fd()).ok())
        .flatten()
        .filter(|c| *c > 0)
}

/// Not known on this platform.
#[cfg(not(target_os = "linux"))]
pub fn stdout_pipe_capacity() -> Option<usize> {
    None
}

/// How many bytes written to stdout its reader has not read yet (`FIONREAD`).
pub(crate) fn stdout_unread() -> io::Result<u64> {
    Ok(rustix::io::ioctl_fionread(io::stdout().as_fd())?)
}

/// The user id of the process at the other end of a Unix socket (`SO_PEERCRED` on Linux,
/// `getpeereid` on macOS).
#[cfg(target_os = "linux")]
pub(crate) fn peer_uid(socket: &impl AsFd) -> io::Result<u32> {
    Ok(rustix::net::sockopt::socket_peercred(socket)?.uid.as_raw())
}

/// See the Linux version.
#[cfg(not(target_os = "linux"))]
#[allow(unsafe_code)] // getpeereid: rustix has no wrapper
pub fn peer_uid(socket: &impl AsFd) -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    let (mut uid, mut gid) = (0, 0);
    // SAFETY: a valid socket descriptor, and pointers to two locals of the types asked for.
    let done = unsafe { libc::getpeereid(socket.as_fd().as_raw_fd(), &mut uid, &mut gid) };
    match done {
        0 => Ok(uid),
        _ => Err(io::Error::last_os_error()),
    }
}

/// Whether the other end of a socket has hung up (`poll` says `POLLHUP` or `POLLERR`), as
/// opposed to having only shut down its writing side.
pub(crate) fn hung_up(socket: &impl AsFd) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let mut fds = [PollFd::new(socket, PollFlags::empty())];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    match poll(&mut fds, Some(&now)) {
        Ok(_) => (fds[0].revents()).intersects(PollFlags::HUP | PollFlags::ERR),
        Err(_) => false,
    }
}

/// The environment variable that names this machine instead of its host name (in what it
/// ships, and in `--machine`).
pub(crate) const MACHINE_NAME: &str = "TRANSCRIPT_SYNC_MACHINE_NAME";

/// This machine's name: [`MACHINE_NAME`] when set, else the host's name (`uname -n`),
/// lossily as UTF-8; a label only.
pub(crate) fn host_name() -> String {
    if let Some(name) = std::env::var_os(MACHINE_NAME).filter(|n| !n.is_empty()) {
        return name.to_string_lossy().into_owned();
    }
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_for_a_core_is_the_second_field_of_schedstat() {
        let wait = core_wait_of("5113412 2000417 31\n");
        assert_eq!(wait, Some(std::time::Duration::from_nanos(2_000_417)));
        assert_eq!(core_wait_of("5113412\n"), None);
    }

    #[test]
    fn a_temp_directory_has_space_and_is_not_on_a_network() {
        let dir = tempfile::tempdir().unwrap();
        let space = space(dir.path()).unwrap();
        assert!(space.total >= space.available && space.total > 0);
        assert_eq!(network_filesystem(dir.path()).unwrap(), None);
    }

    /// One table serves the daemon and `doctor`; each magic number names one filesystem.
    #[cfg(target_os = "linux")]
    #[test]
    fn network_filesystems_are_named_by_their_magic_numbers() {
        assert_eq!(network_kind(0x6969), Some("nfs"));
        assert_eq!(network_kind(0x6B41_4653), Some("afs"));
        assert_eq!(network_kind(0x7375_7245), Some("coda"));
        assert_eq!(network_kind(0xEF53), None, "ext4 is local");
        let mut magics: Vec<u64> = NETWORK.iter().map(|(m, _)| *m).collect();
        magics.sort_unstable();
        magics.dedup();
        assert_eq!(magics.len(), NETWORK.len());
    }

    #[test]
    fn this_user_can_read_and_write_its_own_temp_file() {
        let file = tempfile::NamedTempFile::new().unwrap();
        assert!(can_read_and_write(file.path()));
        assert!(!can_read_and_write(Path::new("/nonexistent/file")));
        assert_eq!(uid(), effective_uid());
    }
}
