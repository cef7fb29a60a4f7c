//! The daemon's one wake-up: a file descriptor that any thread rings without blocking and
//! that the engine waits on with `poll(2)`, beside the inotify descriptors it reads itself.
//! Waiting on descriptors rather than on a channel is what lets a change to a transcript wake
//! the engine directly, without first waking a watcher thread that wakes the engine.

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fd::{BorrowedFd, OwnedFd};
use rustix::io::Errno;
use std::io;
use std::time::Duration;

/// An eventfd on Linux, a non-blocking pipe elsewhere. Rings coalesce: however many arrive
/// before the engine looks, it wakes once.
#[derive(Debug)]
pub struct Doorbell {
    /// What the engine polls and drains.
    read: OwnedFd,
    /// What ringing writes to (the same descriptor as `read` for an eventfd).
    #[cfg(not(target_os = "linux"))]
    write: OwnedFd,
}

impl Doorbell {
    /// A new doorbell, not rung.
    pub fn new() -> io::Result<Doorbell> {
        #[cfg(target_os = "linux")]
        {
            use rustix::event::{EventfdFlags, eventfd};
            let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
            Ok(Doorbell { read: fd })
        }
        #[cfg(not(target_os = "linux"))]
        {
            use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
            use rustix::io::{FdFlags, fcntl_setfd};
            let (read, write) = rustix::pipe::pipe()?;
            for fd in [&read, &write] {
                fcntl_setfl(fd, fcntl_getfl(fd)? | OFlags::NONBLOCK)?;
                fcntl_setfd(fd, FdFlags::CLOEXEC)?;
            }
            Ok(Doorbell { read, write })
        }
    }

    /// Rings: the next (or current) wait returns. Never blocks, never fails in a way the
    /// caller could act on: a full pipe or a saturated counter means it is already rung.
    pub fn ring(&self) {
        #[cfg(target_os = "linux")]
        let _ = rustix::io::write(&self.read, &1u64.to_ne_bytes());
        #[cfg(not(target_os = "linux"))]
        let _ = rustix::io::write(&self.write, &[1]);
    }

    /// Waits until the doorbell rings, one of `also` is readable, or `timeout` passes (none:
    /// no limit). Returns which of `also` are readable, in their order; the doorbell's rings
    /// so far are taken. An interrupted wait returns as if it timed out.
    pub fn wait(
        &self,
        also: &[BorrowedFd<'_>],
        timeout: Option<Duration>,
    ) -> io::Result<Vec<bool>> {
        let mut fds = Vec::with_capacity(also.len() + 1);
        fds.push(PollFd::new(&self.read, PollFlags::IN));
        fds.extend(
            also.iter()
                .map(|fd| PollFd::from_borrowed_fd(*fd, PollFlags::IN)),
        );
        // A timeout too large for the kernel is as good as none.
        let timeout = timeout.and_then(|t| Timespec::try_from(t).ok());
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            Err(Errno::INTR) => return Ok(vec![false; also.len()]),
            Err(e) => return Err(e.into()),
        }
        if !fds[0].revents().is_empty() {
            self.drain();
        }
        Ok(fds[1..].iter().map(|fd| !fd.revents().is_empty()).collect())
    }

    /// Takes every ring so far.
    fn drain(&self) {
        let mut buf = [0u8; 64];
        while let Ok(n) = rustix::io::read(&self.read, &mut buf) {
            if n == 0 || cfg!(target_os = "linux") {
                break;
            }
        }
    }

    /// The descriptor the engine polls.
    #[cfg(test)]
    fn fd(&self) -> BorrowedFd<'_> {
        rustix::fd::AsFd::as_fd(&self.read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_ring_before_the_wait_ends_it_at_once_and_is_taken_by_it() {
        let bell = Doorbell::new().unwrap();
        bell.ring();
        bell.ring();
        let started = Instant::now();
        bell.wait(&[], Some(Duration::from_secs(10))).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5));
        // Both rings were taken by that wait: the next one times out.
        let started = Instant::now();
        bell.wait(&[], Some(Duration::from_millis(50))).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn a_ring_from_another_thread_wakes_a_wait_without_limit() {
        let bell = Arc::new(Doorbell::new().unwrap());
        let ringer = Arc::clone(&bell);
        let t = std::thread::spawn(move || ringer.ring());
        bell.wait(&[], None).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn a_readable_descriptor_beside_it_is_reported_and_the_doorbell_is_not() {
        let (bell, other) = (Doorbell::new().unwrap(), Doorbell::new().unwrap());
        other.ring();
        let ready = bell.wait(&[other.fd()], None).unwrap();
        assert_eq!(ready, vec![true]);
        let ready = other.wait(&[bell.fd()], Some(Duration::ZERO)).unwrap();
        assert_eq!(ready, vec![false], "the first doorbell was never rung");
    }
}
