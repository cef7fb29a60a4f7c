//! The daemon driver: the real binary's `run` as a child process, its log (stderr) kept in
//! memory where a caller can wait for a line, its tap (stdout) read onto a channel, signals,
//! and a stop that waits for the exit.

use crossbeam_channel::Receiver;
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a caller waits for a condition before it fails.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A line the daemon wrote, and when this process read it.
#[derive(Clone, Debug)]
pub struct Line {
    pub at: Instant,
    pub text: String,
}

/// What to do with a daemon's stdout (the tap).
#[derive(Clone)]
pub enum TapReader {
    /// Read every line onto [`Daemon::tap`].
    Read,
    /// Keep the pipe open and read nothing of it; the caller may take it with
    /// [`Daemon::take_stdout`].
    Stall,
    /// Close the read end at once.
    Close,
    /// Start reading every line once something arrives on (or closes) this channel.
    Gated(Receiver<()>),
}

/// The daemon's log: its stderr, whole, and when each line was read. Cloning shares it.
#[derive(Clone, Default)]
pub struct Log(Arc<(Mutex<Lines>, Condvar)>);

#[derive(Default)]
struct Lines {
    text: String,
    read_at: Vec<Instant>,
}

impl Log {
    /// Everything logged so far, a `\n` after each line.
    pub fn text(&self) -> String {
        self.lock().text.clone()
    }

    /// The first line holding `needle`, if one has been logged.
    pub fn first(&self, needle: &str) -> Option<Line> {
        let lines = self.lock();
        let (i, text) = lines
            .text
            .lines()
            .enumerate()
            .find(|(_, l)| l.contains(needle))?;
        let at = lines.read_at[i];
        Some(Line {
            at,
            text: text.to_owned(),
        })
    }

    /// Waits until the log holds `needle` `n` times; returns the log. Panics with the log
    /// after [`PATIENCE`].
    pub fn wait_for(&self, needle: &str, n: usize) -> String {
        let (lines, cond) = &*self.0;
        let deadline = Instant::now() + PATIENCE;
        let mut guard = lines.lock().expect("a log reader panicked");
        while guard.text.matches(needle).count() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "log never showed {needle:?}:\n{}",
                guard.text
            );
            guard = cond.wait_timeout(guard, left).expect("log lock").0;
        }
        guard.text.clone()
    }

    fn push(&self, line: &str) {
        let (lines, cond) = &*self.0;
        let mut lines = lines.lock().expect("a log reader panicked");
        lines.text.push_str(line);
        lines.text.push('\n');
        lines.read_at.push(Instant::now());
        cond.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Lines> {
        self.0.0.lock().expect("a log reader panicked")
    }
}

/// A running `transcript-sync run`. Its stderr is collected so callers can wait for a log
/// line; its tap lines arrive on a channel. Killed (SIGKILL) when dropped; stop it with
/// [`Daemon::terminate`] for a clean exit.
pub struct Daemon {
    pub child: Child,
    log: Log,
    pub tap: Receiver<Line>,
    stdout: Option<ChildStdout>,
}

impl Daemon {
    /// Starts `cmd` (a `run` command line) with its stdout and stderr piped.
    pub fn spawn(cmd: Command, tap: TapReader) -> Daemon {
        Daemon::launch(cmd, tap, false)
    }

    /// [`Daemon::spawn`], each log line also written to this process's stderr as it comes,
    /// for someone watching a long benchmark.
    pub fn spawn_echoing(cmd: Command, tap: TapReader) -> Daemon {
        Daemon::launch(cmd, tap, true)
    }

    fn launch(mut cmd: Command, tap: TapReader, echo: bool) -> Daemon {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("starting transcript-sync run");
        let log = Log::default();
        let stderr = child.stderr.take().expect("piped stderr");
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if echo {
                    eprintln!("daemon: {line}");
                }
                sink.push(&line);
            }
        });
        let (tap, stdout) = read_tap(child.stdout.take().expect("piped stdout"), tap);
        Daemon {
            child,
            log,
            tap,
            stdout,
        }
    }

    /// The process id, as signals take it.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Its CPU time so far, threads that ended included, in clock ticks.
    pub fn cpu(&self) -> Duration {
        crate::cpu::cpu_time(self.child.id()).expect("the daemon is running")
    }

    /// Its CPU time so far to the nanosecond, threads that ended left out (the daemon starts
    /// short-lived ones: a compressor for a large commit, a dictionary's training, the session
    /// index's reader while it catches up).
    pub fn cpu_precise(&self) -> Duration {
        crate::cpu::cpu_time_precise(self.child.id()).expect("the daemon is running")
    }

    /// Everything logged so far.
    pub fn log(&self) -> String {
        self.log.text()
    }

    /// The log, shared, for another thread to read.
    pub fn log_book(&self) -> Log {
        self.log.clone()
    }

    /// Waits until the log contains `needle`; returns the log.
    pub fn wait_log(&self, needle: &str) -> String {
        self.log.wait_for(needle, 1)
    }

    /// Waits until the log contains `needle` `n` times; returns the log.
    pub fn wait_log_times(&self, needle: &str, n: usize) -> String {
        self.log.wait_for(needle, n)
    }

    /// The tap's pipe, with [`TapReader::Stall`]; `None` otherwise or once taken.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take()
    }

    /// The text of the next `n` tap lines; panics with the log after [`PATIENCE`].
    pub fn take_tap(&self, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                let line = self.tap.recv_timeout(PATIENCE).unwrap_or_else(|_| {
                    panic!("tap line {i} of {n} never came; log:\n{}", self.log())
                });
                line.text
            })
            .collect()
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill sends a signal to our own child, which has not been reaped.
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    /// Sends SIGTERM and waits for the exit; returns the status and how long it took.
    pub fn terminate(mut self) -> (ExitStatus, Duration) {
        self.signal(libc::SIGTERM);
        self.wait_exit()
    }

    /// Waits for the daemon to exit; returns the status and how long that took. Panics with
    /// the log after [`PATIENCE`].
    pub fn wait_exit(&mut self) -> (ExitStatus, Duration) {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for the daemon") {
                return (status, start.elapsed());
            }
            assert!(
                start.elapsed() < PATIENCE,
                "daemon did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Does with the daemon's stdout what `tap` says: the channel its lines arrive on, and the
/// pipe when it is left open unread.
fn read_tap(out: ChildStdout, tap: TapReader) -> (Receiver<Line>, Option<ChildStdout>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let gate = match tap {
        TapReader::Stall => return (rx, Some(out)),
        TapReader::Close => return (rx, None),
        TapReader::Read => None,
        TapReader::Gated(gate) => Some(gate),
    };
    std::thread::spawn(move || {
        if let Some(gate) = gate {
            let _ = gate.recv();
        }
        for text in BufReader::new(out).lines().map_while(Result::ok) {
            let line = Line {
                at: Instant::now(),
                text,
            };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (rx, None)
}
