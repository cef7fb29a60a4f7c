//! A subject under measurement: a separate process, its log lines (stderr) and, for the live
//! measurements, the lines of its output stream, each timestamped as it arrives here.

use crate::procfs;
use memchr::memmem;
use std::collections::{BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where a subject's output lines come from, when they are read at all.
pub enum Stream {
    /// Not read (the output goes to a file, or nowhere).
    None,
    /// Its stdout.
    Stdout,
    /// A FIFO that the subject writes to (made here, opened for reading before it starts).
    Fifo(PathBuf),
}

/// Lines that arrived, in arrival order, with what matching needs.
#[derive(Default)]
pub struct Seen {
    pub lines: u64,
    pub bytes: u64,
    pub eof: bool,
    /// Lines that hold a marker (`"mk":"<tag><id>"`).
    pub arrivals: Vec<Arrival>,
    pub per_tag: HashMap<u8, u64>,
    /// Distinct ids seen with the warm-up tag.
    pub warm: BTreeSet<u64>,
}

#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub tag: u8,
    pub id: u64,
    pub at: Instant,
    pub len: usize,
}

/// Shared between the thread that reads a stream and whoever waits on it.
pub struct Lines<T> {
    inner: Arc<(Mutex<T>, Condvar)>,
}

impl<T> Clone for Lines<T> {
    fn clone(&self) -> Self {
        Lines {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: Default> Default for Lines<T> {
    fn default() -> Self {
        Lines {
            inner: Arc::new((Mutex::new(T::default()), Condvar::new())),
        }
    }
}

impl<T> Lines<T> {
    fn update(&self, f: impl FnOnce(&mut T)) {
        let (lock, cv) = &*self.inner;
        f(&mut lock
            .lock()
            .expect("a reader thread does not panic holding the lock"));
        cv.notify_all();
    }

    /// Waits until `done` holds or `timeout` passes; returns whether it held.
    pub fn wait(&self, timeout: Duration, mut done: impl FnMut(&T) -> bool) -> bool {
        let (lock, cv) = &*self.inner;
        let deadline = Instant::now() + timeout;
        let mut state = lock.lock().expect("lock");
        loop {
            if done(&state) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = cv.wait_timeout(state, left).expect("lock").0;
        }
    }

    pub fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        f(&self.inner.0.lock().expect("lock"))
    }
}

/// Log lines with their arrival times.
pub type Logs = Lines<Vec<(Instant, String)>>;

impl Logs {
    /// The first log line containing `needle`, waiting up to `timeout` for it.
    pub fn find(&self, needle: &str, timeout: Duration) -> Option<(Instant, String)> {
        let mut found = None;
        self.wait(timeout, |lines| {
            found = lines.iter().find(|(_, l)| l.contains(needle)).cloned();
            found.is_some()
        });
        found
    }

    pub fn tail(&self, n: usize) -> String {
        self.with(|lines| {
            let start = lines.len().saturating_sub(n);
            lines[start..]
                .iter()
                .map(|(_, l)| l.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
    }
}

/// A running subject process. Dropping it kills the process.
pub struct Subject {
    pub name: String,
    child: Child,
    pub started: Instant,
    pub logs: Logs,
    pub output: Lines<Seen>,
    readers: Vec<JoinHandle<()>>,
    /// Our own write end of the subject's FIFO: the read end sees no EOF if the subject
    /// reopens it; dropped once the subject has stopped.
    fifo_keepalive: Option<File>,
}

impl Subject {
    pub fn start(name: &str, cmd: &mut Command, stream: Stream) -> Subject {
        let mut fifo_keepalive = None;
        let mut source: Option<Box<dyn Read + Send>> = None;
        if let Stream::Fifo(path) = &stream {
            let (read, keep) = open_fifo(path);
            source = Some(Box::new(read));
            fifo_keepalive = Some(keep);
        }
        cmd.stdin(Stdio::null()).stderr(Stdio::piped());
        cmd.stdout(match stream {
            Stream::Stdout => Stdio::piped(),
            _ => Stdio::null(),
        });
        let started = Instant::now();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e} ({cmd:?})"));
        if let Some(out) = child.stdout.take() {
            source = Some(Box::new(out));
        }
        let logs = Logs::default();
        let output = Lines::<Seen>::default();
        let mut readers = vec![spawn_log_reader(
            child.stderr.take().expect("piped stderr"),
            logs.clone(),
        )];
        if let Some(source) = source {
            readers.push(spawn_output_reader(source, output.clone()));
        }
        Subject {
            name: name.to_owned(),
            child,
            started,
            logs,
            output,
            readers,
            fifo_keepalive,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Exits with a message and the subject's last log lines when it is no longer running.
    pub fn check_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited ({status}); its last log lines:\n{}",
                self.name,
                self.logs.tail(20)
            );
        }
    }

    /// Peak resident memory so far, in KiB.
    pub fn peak_rss_kib(&self) -> Option<u64> {
        procfs::status_kib(self.pid(), "VmHWM")
    }

    /// Stops the subject with SIGTERM (SIGKILL after 10 s) and waits for its readers.
    pub fn stop(mut self) {
        self.terminate();
        self.fifo_keepalive.take();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }

    fn terminate(&mut self) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Subject {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// Makes the FIFO and opens it for reading without waiting for a writer, then opens our own
/// write end so the reader never sees EOF before we want it to.
fn open_fifo(path: &Path) -> (File, File) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL");
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let read = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .expect("opening the FIFO for reading");
    let keep = OpenOptions::new()
        .write(true)
        .open(path)
        .expect("opening the FIFO for writing");
    // Back to blocking reads, now that a writer exists.
    use std::os::fd::AsRawFd;
    let fd = read.as_raw_fd();
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
    (read, keep)
}

fn spawn_log_reader(from: impl Read + Send + 'static, logs: Logs) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            logs.update(|v| v.push((Instant::now(), line)));
        }
    })
}

/// Reads lines, timestamps those with a marker, and counts all of them.
fn spawn_output_reader(from: Box<dyn Read + Send>, seen: Lines<Seen>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let finder = memmem::Finder::new(b"\"mk\":\"");
        let mut reader = BufReader::with_capacity(1 << 20, from);
        let mut line = Vec::with_capacity(64 << 10);
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let at = Instant::now();
                    let marker = finder
                        .find(&line)
                        .and_then(|i| parse_marker(&line[i + 6..]));
                    seen.update(|s| {
                        s.lines += 1;
                        s.bytes += n as u64;
                        if let Some((tag, id)) = marker {
                            *s.per_tag.entry(tag).or_default() += 1;
                            if tag == b'w' {
                                s.warm.insert(id);
                            }
                            s.arrivals.push(Arrival {
                                tag,
                                id,
                                at,
                                len: n,
                            });
                        }
                    });
                }
            }
        }
        seen.update(|s| s.eof = true);
    })
}

/// `<tag><digits>"` → (tag, id).
fn parse_marker(rest: &[u8]) -> Option<(u8, u64)> {
    let (&tag, digits) = rest.split_first()?;
    let end = digits.iter().position(|&b| b == b'"')?;
    let id = std::str::from_utf8(&digits[..end]).ok()?.parse().ok()?;
    Some((tag, id))
}

/// The marker for tag and id, as records carry it.
pub fn marker(tag: u8, id: u64) -> String {
    format!("{}{id}", char::from(tag))
}
