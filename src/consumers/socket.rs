//! The local socket through which programs follow the archive: a subscriber says where to
//! start, gets the matching records from the archive (catch-up), one `caught_up` line, then
//! each record as it commits, with no gap and no duplicate at the switch: it registers with
//! the [`Hub`] under the lock that publishes commits before it reads the archive, as every
//! consumer does (see [`crate::archive::follow`]).
//!
//! A subscriber that does not read fast enough fills a bounded buffer of its own; it is then
//! told `lagged` (with the first `seq` it was not sent) and closed. The archive and the other
//! subscribers never wait for it.

use crate::archive::envelope::{Envelope, write_envelope};
use crate::archive::follow::{Hub, Offer, Published, Subscriber};
use crate::archive::{Archive, ExportRow};
use crate::consumers::sessions::query::{self, Found};
use crate::error::{Error, IoContext, Result, error_chain};
use crate::platform::home::{self, Env};
use crate::platform::sys;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest first line a subscriber may send.
pub(crate) const REQUEST_LIMIT: usize = 64 << 10;
/// How long a subscriber has to send its first line.
pub(crate) const REQUEST_WAIT: Duration = Duration::from_secs(10);
/// Default: how many subscribers at once.
pub(crate) const DEFAULT_MAX_SUBSCRIBERS: usize = 256;
/// Default: bytes of records waiting for one subscriber before it is told `lagged` (see
/// [`LIVE_COMMITS`] for the other bound).
pub(crate) const DEFAULT_BUFFER: u64 = 4 << 20;
/// Commits waiting for one subscriber, at most (whatever their size): with small commits,
/// this is the bound reached first.
const LIVE_COMMITS: usize = 4096;
/// Catch-up reads: records and bytes of one page.
const PAGE: (usize, u64) = (1000, 4 << 20);
/// How long one write to a subscriber may block before the connection looks at its state.
const WRITE_SLICE: Duration = Duration::from_millis(500);
/// How long a lagging subscriber has to read the line in hand, before it is told `lagged`
/// (or, if it never reads, closed without being told).
const LAGGED_GRACE: Duration = Duration::from_secs(30);

/// Where the socket of the archive at `archive` is: `$XDG_RUNTIME_DIR/transcript-sync/`
/// `<archive's file stem>-<8 hex of its path's hash>.sock`, so that two archives never share
/// one; beside the archive (`<archive>.sock`) when there is no runtime directory.
pub(crate) fn socket_path(archive: &Path, env: Env) -> PathBuf {
    match home::xdg_var(env, "XDG_RUNTIME_DIR") {
        Some(runtime) => {
            // Named after where the archive really is, however its path is spelled (a
            // symlink, `..`), so that the daemon and its clients agree.
            let real = (archive.parent())
                .and_then(|dir| std::fs::canonicalize(dir).ok())
                .zip(archive.file_name())
                .map_or_else(|| archive.to_owned(), |(dir, name)| dir.join(name));
            let hash = xxhash_rust::xxh3::xxh3_64(real.as_os_str().as_encoded_bytes());
            let stem = archive.file_stem().unwrap_or_default().to_string_lossy();
            runtime
                .join("transcript-sync")
                .join(format!("{stem}-{:08x}.sock", hash as u32))
        }
        None => {
            let mut name = archive.as_os_str().to_owned();
            name.push(".sock");
            PathBuf::from(name)
        }
    }
}

/// What a subscriber asks for: its first line, every field optional.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Request {
    /// Records after this `seq`; absent: from now on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_seq: Option<i64>,
    /// Only records of this watcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness: Option<String>,
    /// Only records of this session (its id, or a unique prefix of at least 4 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Only records of files at this path or under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
}

/// A control line from the server.
#[derive(Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Control {
    /// Every matching record up to `seq` has been sent; live records follow.
    CaughtUp {
        /// The last `seq` the catch-up covered.
        seq: i64,
    },
    /// The subscriber fell behind and is closed; `since_seq = resume_from - 1` continues.
    Lagged {
        /// The first `seq` it was not sent.
        resume_from: i64,
    },
    /// The subscriber is refused, and closed.
    Error {
        /// Why, and what to do.
        reason: String,
    },
}

/// How many subscribers, and how much buffer each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Subscribers at once.
    pub max_subscribers: usize,
    /// Bytes of records waiting for one subscriber.
    pub buffer: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_subscribers: DEFAULT_MAX_SUBSCRIBERS,
            buffer: DEFAULT_BUFFER,
        }
    }
}

/// The listening socket and its thread.
pub(crate) struct Server {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

/// What every connection of one server shares.
struct Shared {
    db: PathBuf,
    hub: Arc<Hub>,
    limits: Limits,
    /// Connections being served.
    active: AtomicUsize,
    stop: Arc<AtomicBool>,
    uid: u32,
}

impl Server {
    /// Listens at `path` (its directory made 0700, the socket 0600; a socket left there by a
    /// process that died is replaced: the archive's lock, held by the caller, says no other
    /// daemon of this archive runs). Each subscriber is served on a thread of its own.
    pub(crate) fn start(path: PathBuf, db: &Path, hub: Arc<Hub>, limits: Limits) -> Result<Server> {
        let listener = bind(&path)?;
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            db: db.to_owned(),
            hub,
            limits,
            active: AtomicUsize::new(0),
            stop: Arc::clone(&stop),
            uid: sys::uid(),
        });
        let handle = std::thread::Builder::new()
            .name("socket".into())
            .spawn(move || accept(&listener, &shared))
            .map_err(|source| Error::Thread {
                name: "socket",
                source,
            })?;
        log::info!("subscribers: listening path={path:?}");
        Ok(Server { path, stop, handle })
    }

    /// Stops listening and removes the socket. Connections end as the archive's writer does
    /// (their live feed closes); none is waited for.
    pub(crate) fn stop(self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accepting thread, which sees the flag. When that cannot be done (the
        // socket file was removed behind the daemon's back), the thread is left to end with
        // the process rather than waited for.
        match UnixStream::connect(&self.path) {
            Ok(_) => {
                if self.handle.join().is_err() {
                    log::error!("the socket thread panicked");
                }
            }
            Err(e) => log::warn!(
                "subscribers: the socket {} cannot be reached to stop listening ({e}); going on",
                self.path.display()
            ),
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A listening socket at `path`, mode 0600, in a directory made 0700 if it had to be made.
fn bind(path: &Path) -> Result<UnixListener> {
    // A directory made here (under the runtime directory) is this user's alone; one that is
    // there already (systemd's, made 0700; or the archive's own) is left as it is.
    if let Some(dir) = path.parent()
        && !dir.exists()
    {
        std::fs::create_dir_all(dir).at_path(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).at_path(dir)?;
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e).at_path(path),
        _ => {}
    }
    let listener = UnixListener::bind(path).map_err(|source| Error::Socket {
        path: path.to_owned(),
        source,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).at_path(path)?;
    Ok(listener)
}

/// Accepts until the server stops: each connection on a thread of its own, or refused when
/// the limit is reached.
fn accept(listener: &UnixListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                log::warn!("subscribers: accepting a connection failed: {e}");
                // A lasting failure (out of file descriptors) is not retried in a busy loop.
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let max = shared.limits.max_subscribers;
        if shared.active.load(Ordering::Acquire) >= max {
            let reason = format!(
                "{max} subscribers are attached, the most allowed (max_subscribers in config.toml)"
            );
            // On a thread of its own: a refusal waits a moment for the peer to close.
            let _ = std::thread::Builder::new()
                .name("subscriber".into())
                .spawn(move || refuse(stream, &reason));
            continue;
        }
        shared.active.fetch_add(1, Ordering::AcqRel);
        let conn = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("subscriber".into())
            .spawn(move || {
                let served = serve(stream, &conn);
                // Before the refusal is written or the departure logged: a peer told no, or
                // one waiting for a place, may count on it.
                conn.active.fetch_sub(1, Ordering::AcqRel);
                match served {
                    Ok(left) => log::info!("{left}"),
                    Err(Refusal(stream, reason)) => refuse(stream, &reason),
                }
            });
        if let Err(e) = spawned {
            shared.active.fetch_sub(1, Ordering::AcqRel);
            log::warn!("subscribers: cannot start a thread for a subscriber: {e}");
        }
    }
}

/// Writes `reason` as an error line, logs it, and closes.
fn refuse(mut stream: UnixStream, reason: &str) {
    log::warn!("subscriber refused: {reason}");
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.write_all(&control_line(&Control::Error {
        reason: reason.to_owned(),
    }));
    // Closing with unread input would reset the connection, and the peer could lose the
    // line: what it sent is read (for a moment, and a bounded amount) until it closes.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = io::copy(&mut (&stream).take(1 << 20), &mut io::sink());
}

fn control_line(control: &Control) -> Vec<u8> {
    let mut line = serde_json::to_vec(control).expect("a control line serializes");
    line.push(b'\n');
    line
}

/// A connection turned away before it streamed: its stream, and why.
struct Refusal(UnixStream, String);

/// One connection: checks the peer and its request, then streams.
/// `Ok` with a line saying how it left, once it has.
fn serve(stream: UnixStream, shared: &Shared) -> std::result::Result<String, Refusal> {
    match sys::peer_uid(&stream) {
        Ok(uid) if uid == shared.uid => {}
        Ok(uid) => {
            let own = shared.uid;
            let reason = format!("uid {uid} may not follow the archive of uid {own}");
            return Err(Refusal(stream, reason));
        }
        Err(e) => {
            let reason = format!("the peer's uid cannot be read: {e}");
            return Err(Refusal(stream, reason));
        }
    }
    let request = match read_request(&stream) {
        Ok(request) => request,
        Err(reason) => return Err(Refusal(stream, reason)),
    };
    let filter = match Filter::of(&request, &shared.db) {
        Ok(filter) => filter,
        Err(reason) => return Err(Refusal(stream, reason)),
    };
    let mut conn = Connection {
        stream,
        shared,
        filter,
        covered: 0,
        lagged: Arc::new(AtomicBool::new(false)),
        lag_deadline: None,
    };
    let asked = serde_json::to_string(&request).expect("a request serializes");
    log::info!("subscriber attached: {asked}");
    let ended = match conn.run(request.since_seq) {
        Ok(()) => "closed".to_owned(),
        Err(e) => e.to_string(),
    };
    Ok(format!(
        "subscriber left ({ended}); every record up to seq {} was sent",
        conn.covered
    ))
}

/// The first line, within [`REQUEST_WAIT`] and [`REQUEST_LIMIT`]; `Err` says why not.
fn read_request(stream: &UnixStream) -> std::result::Result<Request, String> {
    let _ = stream.set_read_timeout(Some(REQUEST_WAIT));
    let mut line = Vec::new();
    let mut reader = BufReader::new(stream.take(REQUEST_LIMIT as u64 + 1));
    match reader.read_until(b'\n', &mut line) {
        Ok(_) if line.len() > REQUEST_LIMIT => Err(format!(
            "the first line is longer than {} KiB",
            REQUEST_LIMIT >> 10
        )),
        Ok(_) if !line.ends_with(b"\n") => {
            Err("the connection ended before the first line did".into())
        }
        Ok(_) => serde_json::from_slice(&line).map_err(|e| {
            format!(
                "the first line is not a request ({e}); send one JSON object such as \
                 {{\"since_seq\":0}}, with since_seq, harness, session and path all optional"
            )
        }),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Err(format!("no first line within {} s", REQUEST_WAIT.as_secs()))
        }
        Err(e) => Err(format!("reading the first line failed: {e}")),
    }
}

/// Which records a subscriber wants.
#[derive(Clone, Debug, Default)]
pub(crate) struct Filter {
    harness: Option<String>,
    path: Option<PathBuf>,
    /// The session's sources, when one was asked for.
    sources: Option<HashSet<i64>>,
}

impl Filter {
    /// The filter of `request`; `Err` names a session that cannot be told.
    pub(crate) fn of(request: &Request, db: &Path) -> std::result::Result<Filter, String> {
        let sources = match &request.session {
            Some(id) => Some(session_sources(db, id)?),
            None => None,
        };
        Ok(Filter {
            harness: request.harness.clone(),
            path: request.path.clone(),
            sources,
        })
    }

    /// Whether a record of `source` (`harness`, now at `path`) is wanted.
    pub(crate) fn matches(&self, harness: &str, path: &Path, source: i64) -> bool {
        self.harness.as_ref().is_none_or(|h| h == harness)
            && self.path.as_ref().is_none_or(|p| path.starts_with(p))
            && self.sources.as_ref().is_none_or(|s| s.contains(&source))
    }

    fn matches_envelope(&self, e: &Envelope) -> bool {
        self.matches(e.harness, e.path, e.source)
    }
}

/// The sources holding session `id` (or a unique prefix of it), as the index has them now.
fn session_sources(db: &Path, id: &str) -> std::result::Result<HashSet<i64>, String> {
    let text = |e: Error| error_chain(&e);
    let mut archive = Archive::open(db).map_err(text)?;
    crate::consumers::sessions::store::attach(&archive).map_err(text)?;
    let session = match query::find(&mut archive, id, None).map_err(text)? {
        Found::One(s) => *s,
        Found::None => return Err(format!("no session {id:?} in the session index")),
        Found::Many(_) => return Err(format!("{id:?} names several sessions; give more of it")),
    };
    let files = query::session_files(&mut archive, &session).map_err(text)?;
    Ok((files
        .iter()
        .flat_map(|f| f.pieces.iter().map(|(source, _)| *source)))
    .collect())
}

/// A subscriber's live feed, offered each commit by the hub: it takes the commit if the
/// matching records fit its buffer, else marks the subscriber as lagging and lets go.
struct Feed {
    tx: Sender<Item>,
    /// The queue's other end, to empty it on a lag: what it holds will never be sent.
    rx: Receiver<Item>,
    /// Bytes of matching records queued.
    queued: Arc<AtomicU64>,
    buffer: u64,
    filter: Arc<Filter>,
    lagged: Arc<AtomicBool>,
}

/// What a subscriber's queue holds: a commit with a record it wants (counted whole: the
/// commit is what stays in memory), or the seq of one without.
enum Item {
    Commit(Arc<Published>, u64),
    Passed(i64),
}

impl Subscriber for Feed {
    fn offer(&mut self, published: &Arc<Published>) -> Offer {
        let wanted = (published.envelopes()).any(|e| self.filter.matches_envelope(&e));
        let item = match (wanted, published.last_seq()) {
            (true, _) => Item::Commit(Arc::clone(published), published.bytes()),
            (false, Some(seq)) => Item::Passed(seq),
            (false, None) => return Offer::Taken,
        };
        let bytes = match &item {
            Item::Commit(_, bytes) => *bytes,
            Item::Passed(_) => 0,
        };
        let queued = self.queued.load(Ordering::Acquire);
        if queued > 0 && queued + bytes > self.buffer {
            return self.lag();
        }
        match self.tx.try_send(item) {
            Ok(()) => {
                self.queued.fetch_add(bytes, Ordering::AcqRel);
                Offer::Taken
            }
            Err(TrySendError::Full(_)) => self.lag(),
            Err(TrySendError::Disconnected(_)) => Offer::LetGo,
        }
    }
}

impl Feed {
    /// The subscriber fell behind: marked, its queue emptied (the memory goes now, not when
    /// the connection ends), and let go.
    fn lag(&mut self) -> Offer {
        self.lagged.store(true, Ordering::Release);
        while self.rx.try_recv().is_ok() {}
        Offer::LetGo
    }
}

/// Why a connection stopped sending.
enum Stop {
    /// It lagged: it was sent everything up to `covered`, and is told so.
    Lagged,
    /// The peer went away, or would not read the line in hand.
    Gone,
}

/// A subscriber being served.
struct Connection<'a> {
    stream: UnixStream,
    shared: &'a Shared,
    filter: Filter,
    /// Every matching record up to this `seq` has been sent.
    covered: i64,
    lagged: Arc<AtomicBool>,
    /// Set once lagging: until when it may take to read the line in hand.
    lag_deadline: Option<Instant>,
}

impl Connection<'_> {
    /// Registers the live feed, sends the catch-up and `caught_up`, then live records, until
    /// the feed ends (the daemon stops), the peer goes, or it lags.
    fn run(&mut self, since: Option<i64>) -> io::Result<()> {
        let (tx, rx) = bounded(LIVE_COMMITS);
        let queued = Arc::new(AtomicU64::new(0));
        let feed = Feed {
            tx,
            rx: rx.clone(),
            queued: Arc::clone(&queued),
            buffer: self.shared.limits.buffer,
            filter: Arc::new(self.filter.clone()),
            lagged: Arc::clone(&self.lagged),
        };
        // Registered before the archive is read, under the lock publishing takes: records up
        // to `live_after` are in the archive, every later one comes through the feed.
        // A stopping daemon closes without a word, as it does every connection when it
        // stops: the client connects again, to the next daemon.
        let Some(live_after) = self.shared.hub.subscribe(Box::new(feed)) else {
            return Ok(());
        };
        self.covered = since.unwrap_or(live_after);
        let _ = self.stream.set_write_timeout(Some(WRITE_SLICE));
        let outcome = match self.catch_up(live_after) {
            Ok(()) => {
                let seq = self.covered.max(live_after);
                self.send_control(&Control::CaughtUp { seq })?;
                self.covered = seq;
                self.follow(&rx, &queued)
            }
            Err(stop) => Err(stop),
        };
        match outcome {
            Ok(()) | Err(Stop::Gone) => Ok(()),
            Err(Stop::Lagged) => self.tell_lagged(),
        }
    }

    /// Sends the matching records of `(covered, through]` from the archive, page by page.
    fn catch_up(&mut self, through: i64) -> std::result::Result<(), Stop> {
        if self.covered >= through {
            return Ok(());
        }
        let archive = Archive::open(&self.shared.db).map_err(|e| {
            log::warn!("subscriber: the archive cannot be read: {e:#}");
            Stop::Gone
        })?;
        while self.covered < through {
            if self.lagged.load(Ordering::Acquire) {
                return Err(Stop::Lagged);
            }
            let page =
                (archive.records_page(self.covered, through, PAGE.0, PAGE.1)).map_err(|e| {
                    log::warn!("subscriber: reading the archive failed: {e:#}");
                    Stop::Gone
                })?;
            let Some(last) = page.last().map(|r| r.seq) else {
                break;
            };
            let mut lines = Vec::new();
            for row in page.iter().filter(|r| self.matches_row(r)) {
                write_envelope(&mut lines, row).expect("writing to a Vec");
            }
            self.send(&lines)?;
            self.covered = last;
        }
        Ok(())
    }

    fn matches_row(&self, row: &ExportRow) -> bool {
        self.filter.matches(&row.harness, &row.path, row.source)
    }

    /// Sends each commit of the feed as it comes, until it ends.
    fn follow(&mut self, rx: &Receiver<Item>, queued: &AtomicU64) -> std::result::Result<(), Stop> {
        loop {
            if self.lagged.load(Ordering::Acquire) {
                return Err(Stop::Lagged);
            }
            let (published, bytes) = match rx.recv_timeout(WRITE_SLICE) {
                Ok(Item::Commit(published, bytes)) => (published, bytes),
                Ok(Item::Passed(seq)) => {
                    self.covered = self.covered.max(seq);
                    continue;
                }
                Err(RecvTimeoutError::Timeout) if self.peer_closed() => return Err(Stop::Gone),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) if self.lagged.load(Ordering::Acquire) => {
                    return Err(Stop::Lagged);
                }
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            };
            queued.fetch_sub(bytes, Ordering::AcqRel);
            let mut lines = Vec::new();
            for e in published.envelopes() {
                if e.seq > self.covered && self.filter.matches_envelope(&e) {
                    e.write_to(&mut lines).expect("writing to a Vec");
                }
            }
            self.send(&lines)?;
            if let Some(last) = published.last_seq() {
                self.covered = self.covered.max(last);
            }
        }
    }

    /// Whether the peer has closed its end: a quiet subscriber that went away frees its place
    /// without waiting for the next record to fail to reach it.
    fn peer_closed(&self) -> bool {
        // A hang-up, not an end of input: a client may shut down its writing side after its
        // request (as `nc -N` does) and go on reading.
        sys::hung_up(&self.stream)
    }

    /// Writes `bytes` (whole lines) to the peer. A write that blocks is given time while
    /// the subscriber is in good standing, and [`LAGGED_GRACE`] once it lags.
    fn send(&mut self, bytes: &[u8]) -> std::result::Result<(), Stop> {
        let mut rest = bytes;
        while !rest.is_empty() {
            match self.stream.write(rest) {
                Ok(0) => return Err(Stop::Gone),
                Ok(n) => rest = &rest[n..],
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if self.given_up() {
                        return Err(Stop::Gone);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Stop::Gone),
            }
        }
        Ok(())
    }

    /// True when a blocked write is to be given up: the daemon is stopping, or the
    /// subscriber lags and has not read for [`LAGGED_GRACE`].
    fn given_up(&mut self) -> bool {
        if self.shared.stop.load(Ordering::Acquire) && self.shared.hub.is_closed() {
            return true;
        }
        if !self.lagged.load(Ordering::Acquire) {
            return false;
        }
        Instant::now() >= self.lag_noticed()
    }

    /// Logs, the first time, that the subscriber lags; returns until when it may take to
    /// read what is in hand.
    fn lag_noticed(&mut self) -> Instant {
        let buffer = self.shared.limits.buffer;
        *self.lag_deadline.get_or_insert_with(|| {
            log::warn!(
                "subscriber lagged: its buffer ({buffer} bytes of records, or {LIVE_COMMITS} commits) filled; it is told so, and closed, once it has read the records in hand (within {} s)",
                LAGGED_GRACE.as_secs()
            );
            Instant::now() + LAGGED_GRACE
        })
    }

    /// Says `lagged` and ends.
    fn tell_lagged(&mut self) -> io::Result<()> {
        self.lag_noticed();
        let resume_from = self.covered + 1;
        log::debug!("subscriber told it lagged: resume from seq {resume_from}");
        self.send_control(&Control::Lagged { resume_from })
    }

    fn send_control(&mut self, control: &Control) -> io::Result<()> {
        match self.send(&control_line(control)) {
            Ok(()) => Ok(()),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the subscriber went away",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_in_the_runtime_directory_named_for_its_archive_or_beside_it() {
        let with = |k: &str| (k == "XDG_RUNTIME_DIR").then(|| "/run/user/1000".to_owned());
        let a = socket_path(
            Path::new("/home/u/.local/share/transcript-sync/archive.db"),
            &with,
        );
        let b = socket_path(Path::new("/home/u/other/archive.db"), &with);
        assert!(a.starts_with("/run/user/1000/transcript-sync"), "{a:?}");
        let name = a.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("archive-") && name.ends_with(".sock"),
            "{name}"
        );
        assert_ne!(a, b, "two archives, two sockets");
        let without = |_: &str| None;
        assert_eq!(
            socket_path(Path::new("/data/archive.db"), &without),
            Path::new("/data/archive.db.sock")
        );
    }

    #[test]
    fn an_archive_reached_through_a_symlink_or_dotdot_has_the_same_socket() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("data");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let env = |k: &str| (k == "XDG_RUNTIME_DIR").then(|| "/run/user/1000".to_owned());
        let socket = |p: PathBuf| socket_path(&p, &env);
        let direct = socket(real.join("archive.db"));
        assert_eq!(socket(dir.path().join("link/archive.db")), direct);
        assert_eq!(socket(real.join("../data/archive.db")), direct);
    }

    #[test]
    fn control_lines_are_tagged_by_event() {
        let line = |c: &Control| String::from_utf8(control_line(c)).unwrap();
        assert_eq!(
            line(&Control::CaughtUp { seq: 7 }),
            "{\"event\":\"caught_up\",\"seq\":7}\n"
        );
        assert_eq!(
            line(&Control::Lagged { resume_from: 8 }),
            "{\"event\":\"lagged\",\"resume_from\":8}\n"
        );
    }

    #[test]
    fn a_filter_matches_harness_path_prefix_and_sources() {
        let f = Filter {
            harness: Some("codex".into()),
            path: Some("/home/u/.codex/sessions".into()),
            sources: Some([3].into_iter().collect()),
        };
        assert!(f.matches(
            "codex",
            Path::new("/home/u/.codex/sessions/2026/a.jsonl"),
            3
        ));
        assert!(!f.matches(
            "claude-code",
            Path::new("/home/u/.codex/sessions/a.jsonl"),
            3
        ));
        assert!(!f.matches("codex", Path::new("/home/u/.codex/sessions-old/a.jsonl"), 3));
        assert!(!f.matches("codex", Path::new("/home/u/.codex/sessions/a.jsonl"), 4));
        assert!(Filter::default().matches("x", Path::new("/y"), 1));
    }
}
