//! The daemon running: followed while the agent writes, and idle.

use crate::agent::{Agent, Message, Session, apply};
use crate::backfill::{daemon_cmd, with_suffix};
use crate::read::{document, own_read, read_only};
use crate::{EVERY, IDLE_CPU, LONE, POLL, QUIET, STEP_GAP};
use rusqlite::{Connection, OpenFlags};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use testkit::daemon::{self, TapReader};
use testkit::procfs;

/// A `transcript-sync run` with its tap, and its archive read beside it.
pub(crate) struct Run {
    daemon: daemon::Daemon,
    archive: PathBuf,
    conn: Connection,
    /// Tap lines taken from the daemon and not yet used.
    tap: std::cell::RefCell<Vec<daemon::Line>>,
    /// From the start to "caught up".
    pub(crate) caught_up: Duration,
}

impl Run {
    /// Starts the daemon on the backfilled archive; returns once it has caught up and gone
    /// idle.
    pub(crate) fn start(home: &Path, archive: &Path) -> Run {
        let mut cmd = daemon_cmd(home, archive);
        cmd.args(["--sink", "stdout"]);
        let start = Instant::now();
        let daemon = daemon::Daemon::spawn(cmd, TapReader::Read);
        daemon.wait_log("caught up");
        let run = Run {
            daemon,
            archive: archive.to_owned(),
            conn: read_only(archive),
            tap: Default::default(),
            caught_up: start.elapsed(),
        };
        run.wait_idle();
        run
    }

    fn pid(&self) -> u32 {
        self.daemon.child.id()
    }

    /// Its bytes read so far (`rchar`).
    fn read(&self) -> u64 {
        procfs::io(self.pid()).map_or(0, |io| io.0)
    }

    /// Its peak RSS (KiB) since the last [`Run::reset_peak`].
    fn peak_kib(&self) -> u64 {
        procfs::status_kib(self.pid(), "VmHWM").unwrap_or(0)
    }

    fn reset_peak(&self) {
        fs::write(format!("/proc/{}/clear_refs", self.pid()), "5")
            .expect("resetting the daemon's peak RSS (clear_refs)");
    }

    /// Its reads of the database so far, from its log's `database read` lines: when each
    /// was logged (once the sessions changed were found, before they were read), and how many
    /// sessions had changed.
    fn reads(&self) -> Vec<(SystemTime, u64)> {
        (self.daemon.log().lines())
            .filter(|l| l.contains("database read"))
            .filter_map(|l| {
                let at = humantime::parse_rfc3339(l.split_whitespace().next()?).ok()?;
                let changed = l.rsplit("sessions_changed=").next()?.trim().parse().ok()?;
                Some((at, changed))
            })
            .collect()
    }

    /// True when the session index has indexed every record.
    fn indexed_all(&self) -> bool {
        let last: i64 = (self.conn)
            .query_row("SELECT coalesce(max(seq), 0) FROM records", [], |r| {
                r.get(0)
            })
            .expect("the last seq");
        let index = with_suffix(&self.archive, "-index");
        let indexed = (Connection::open_with_flags(index, OpenFlags::SQLITE_OPEN_READ_ONLY))
            .and_then(|c| c.query_row("SELECT seq FROM progress", [], |r| r.get::<_, i64>(0)));
        indexed.is_ok_and(|seq| seq >= last)
    }

    /// Waits until the session index has every record and the daemon's threads have been
    /// all but idle for [`QUIET`].
    fn wait_idle(&self) {
        let deadline = Instant::now() + daemon::PATIENCE * 5;
        loop {
            let before = self.daemon.cpu_precise();
            std::thread::sleep(QUIET);
            let after = self.daemon.cpu_precise();
            if after.saturating_sub(before) < IDLE_CPU && self.indexed_all() {
                return;
            }
            assert!(Instant::now() < deadline, "the daemon never went idle");
        }
    }

    /// Takes the tap's lines, each given to `done`, until it says it is done; panics with
    /// the log after [`daemon::PATIENCE`].
    fn tap_until(&self, what: &str, mut done: impl FnMut(&daemon::Line) -> bool) {
        let deadline = Instant::now() + daemon::PATIENCE;
        let mut tap = self.tap.borrow_mut();
        loop {
            match self.daemon.tap.recv_timeout(POLL) {
                Ok(line) => {
                    let finished = done(&line);
                    tap.push(line);
                    if finished {
                        return;
                    }
                }
                Err(_) => assert!(
                    Instant::now() < deadline,
                    "{what}: never; log:\n{}",
                    self.daemon.log()
                ),
            }
        }
    }

    /// Takes the tap's lines that have come, and gives every line taken so far.
    fn take_tap(&self) -> Vec<daemon::Line> {
        let mut tap = self.tap.borrow_mut();
        tap.extend(self.daemon.tap.try_iter());
        std::mem::take(&mut *tap)
    }

    pub(crate) fn stop(self) {
        let (status, _) = self.daemon.terminate();
        assert!(status.success(), "the daemon exited with {status}");
    }
}

/// A message the agent added while followed: its id, what its record holds once complete,
/// when the write completing it committed, and when that record came out of the tap.
pub(crate) struct Appended {
    /// `"id":"<its id>"`, as its record holds it.
    needle: String,
    marker: &'static str,
    committed: Instant,
    archived: Option<Instant>,
}

impl Appended {
    pub(crate) fn latency_ms(&self) -> f64 {
        let archived = self.archived.expect("archived");
        archived
            .saturating_duration_since(self.committed)
            .as_secs_f64()
            * 1e3
    }

    /// Whether `line` is this message's complete record.
    fn is(&self, line: &str) -> bool {
        line.contains(&self.needle) && line.contains(self.marker)
    }

    fn of(m: Message, committed: Instant) -> Appended {
        Appended {
            needle: format!("\"id\":\"{}\"", m.id),
            marker: m.marker,
            committed,
            archived: None,
        }
    }
}

/// The agent's side of one session: its connection, and where the session stands.
struct Writer {
    conn: Connection,
    agent: Agent,
    session: Session,
}

impl Writer {
    /// Opens the database as OpenCode does (WAL, `synchronous = NORMAL`) and picks up
    /// session `id` where it is.
    fn open(db: &Path, id: &str, seed: u64) -> Writer {
        let conn = Connection::open(db).expect("opening the database as the agent");
        conn.execute_batch("PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL;")
            .expect("pragmas");
        let (directory, created, slug, title): (String, i64, String, String) = conn
            .query_row(
                "SELECT directory, time_created, slug, title FROM session WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .expect("the followed session");
        let seq: i64 = conn
            .query_row(
                "SELECT seq FROM event_sequence WHERE aggregate_id = ?1",
                [id],
                |r| r.get(0),
            )
            .expect("its event sequence");
        let (written, prompt): (i64, String) = conn
            .query_row(
                "SELECT count(*),
                     coalesce(max(CASE WHEN data ->> '$.role' = 'user' THEN id END), '')
                 FROM message WHERE session_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("its messages");
        let session = Session {
            id: id.to_owned(),
            directory,
            seq: seq + 1,
            prompt,
            created,
            slug,
            title,
            written: written as usize,
            planned: usize::MAX,
        };
        Writer {
            conn,
            agent: Agent::new(seed),
            session,
        }
    }

    /// The `k`th message added: a prompt, a reply calling tools, a reply ending the turn.
    fn next(&mut self, k: usize) -> Message {
        let mut at = now_ms();
        let s = &mut self.session;
        match k % 3 {
            0 => self.agent.prompt(s, &mut at),
            1 => self.agent.reply(s, &mut at, 1 + k % 2),
            _ => self.agent.reply(s, &mut at, 0),
        }
    }

    /// Writes `m`, each step one transaction, [`STEP_GAP`] apart; returns when the step that
    /// completes its record committed.
    fn write(&mut self, m: &Message) -> Instant {
        let mut completed = Instant::now();
        for (i, step) in m.steps.iter().enumerate() {
            let tx = self.conn.transaction().expect("a write transaction");
            for w in step {
                apply(&tx, &self.session.id, w).expect("writing a row");
            }
            tx.commit().expect("committing");
            if i == m.last {
                completed = Instant::now();
            }
            std::thread::sleep(STEP_GAP);
        }
        completed
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// One following: a session, and what the daemon did while the agent wrote into it.
pub(crate) struct Following {
    pub(crate) messages_before: usize,
    pub(crate) document: u64,
    /// Building that document here, and what this process read for it.
    pub(crate) document_secs: f64,
    pub(crate) document_read: u64,
    pub(crate) appended: Vec<Appended>,
    pub(crate) secs: f64,
    /// Database reads in the run, and those that found the session changed.
    pub(crate) reads: usize,
    pub(crate) captures: usize,
    /// When each read that found the session changed was logged, in seconds from the first
    /// write.
    pub(crate) captured_at: Vec<f64>,
    pub(crate) cpu: Duration,
    pub(crate) read: u64,
    pub(crate) peak_kib: u64,
    pub(crate) records: usize,
    /// One message alone, left to settle (mean of [`LONE`]): CPU, commit to tap, `rchar`.
    pub(crate) lone_cpu: Duration,
    pub(crate) lone_latency_ms: Vec<f64>,
    pub(crate) lone_read: u64,
}

/// The agent adds a message to session `id` every [`EVERY`] for `secs`, then [`LONE`]
/// more, each once the daemon is idle again.
pub(crate) fn follow(run: &Run, db: &Path, id: &str, secs: Duration) -> Following {
    let (document, document_secs, document_read) = timed_document(db, id);
    let mut writer = Writer::open(db, id, 17);
    let messages_before = writer.session.written;
    eprintln!("following {id}: {messages_before} messages, a document of {document} B");
    run.take_tap();
    let (reads0, cpu0, read0) = (run.reads().len(), run.daemon.cpu(), run.read());
    run.reset_peak();
    let (start, began) = (Instant::now(), SystemTime::now());
    let mut due = start;
    let mut appended = Vec::new();
    while start.elapsed() < secs {
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let m = writer.next(appended.len());
        let committed = writer.write(&m);
        appended.push(Appended::of(m, committed));
        due += EVERY;
    }
    let secs = start.elapsed().as_secs_f64();
    run.tap_until("every appended message archived", |line| {
        mark_archived(&mut appended, line)
    });
    run.wait_idle();
    let (cpu, read, peak_kib) = (run.daemon.cpu() - cpu0, run.read() - read0, run.peak_kib());
    let reads = run.reads().split_off(reads0);
    let lines = run.take_tap();
    let captured_at: Vec<f64> = (reads.iter())
        .filter(|(_, changed)| *changed > 0)
        .map(|(at, _)| at.duration_since(began).unwrap_or_default().as_secs_f64())
        .collect();
    let (lone_cpu, lone_latency_ms, lone_read) = lone(run, &mut writer);
    Following {
        messages_before,
        document,
        document_secs,
        document_read,
        secs,
        reads: reads.len(),
        captures: captured_at.len(),
        captured_at,
        cpu,
        read,
        peak_kib,
        records: lines.len(),
        appended,
        lone_cpu,
        lone_latency_ms,
        lone_read,
    }
}

/// Session `id`'s document built here as the reader builds it: its length, how long that
/// took, and what this process read for it (`rchar`: SQLite's pages).
fn timed_document(db: &Path, id: &str) -> (u64, f64, u64) {
    let conn = read_only(db);
    let read0 = own_read();
    let start = Instant::now();
    let len = document(&conn, id).len() as u64;
    let secs = start.elapsed().as_secs_f64();
    (len, secs, own_read() - read0)
}

/// Marks the appended message whose complete record `line` is, if one is; true when all
/// are marked.
fn mark_archived(appended: &mut [Appended], line: &daemon::Line) -> bool {
    let unmarked = appended.iter_mut().filter(|a| a.archived.is_none());
    if let Some(a) = unmarked.into_iter().find(|a| a.is(&line.text)) {
        a.archived = Some(line.at);
    }
    appended.iter().all(|a| a.archived.is_some())
}

/// [`LONE`] messages, each written whole and left to settle: the daemon's CPU and reads
/// from the first write until it is idle again (mean), and each one's commit to tap.
fn lone(run: &Run, writer: &mut Writer) -> (Duration, Vec<f64>, u64) {
    let (mut cpu, mut read, mut latency) = (Duration::ZERO, 0, Vec::new());
    for k in 0..LONE {
        let m = writer.next(k);
        let (cpu0, read0) = (run.daemon.cpu(), run.read());
        let committed = writer.write(&m);
        let mut one = [Appended::of(m, committed)];
        run.tap_until("a lone message archived", |line| {
            mark_archived(&mut one, line)
        });
        latency.push(one[0].latency_ms());
        run.wait_idle();
        // The idle wait's own [`QUIET`] is in the reading; the daemon spends under
        // [`IDLE_CPU`] of it.
        cpu += run.daemon.cpu() - cpu0;
        read += run.read() - read0;
        run.take_tap();
    }
    (cpu / LONE as u32, latency, read / LONE as u64)
}

pub(crate) struct Idle {
    pub(crate) secs: f64,
    pub(crate) cpu: Duration,
    pub(crate) read: u64,
    /// The daemon's reads of the database meanwhile.
    pub(crate) reads: Vec<(SystemTime, u64)>,
    /// What it logged meanwhile.
    pub(crate) log: String,
    /// Its threads that read meanwhile (`rchar`), by name.
    pub(crate) readers: BTreeMap<String, u64>,
    /// The seconds of the window in which it read, and how much.
    pub(crate) read_at: Vec<(u64, u64)>,
}

/// The daemon's CPU and reads over `secs` with nothing written, once it is idle and has
/// seen the agent's last connection close (which checkpoints the WAL into the database).
pub(crate) fn idle(run: &Run, secs: Duration) -> Idle {
    std::thread::sleep(Duration::from_secs(2));
    run.wait_idle();
    eprintln!("idle: {} s", secs.as_secs());
    let (log0, reads0) = (run.daemon.log().len(), run.reads().len());
    let (cpu0, read0, threads0) = (run.daemon.cpu(), run.read(), thread_reads(run.pid()));
    let start = Instant::now();
    let (mut read_at, mut last) = (Vec::new(), read0);
    for second in 1..=secs.as_secs() {
        let due = start + Duration::from_secs(second);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let now = run.read();
        if now > last {
            read_at.push((second, now - last));
        }
        last = now;
    }
    let (cpu, read) = (run.daemon.cpu() - cpu0, run.read() - read0);
    let mut readers = BTreeMap::new();
    for ((tid, name), n) in thread_reads(run.pid()) {
        let before = threads0.get(&(tid, name.clone())).copied().unwrap_or(0);
        if n > before {
            *readers.entry(name).or_default() += n - before;
        }
    }
    let log = run.daemon.log().split_off(log0);
    eprint!("{log}");
    Idle {
        secs: start.elapsed().as_secs_f64(),
        cpu,
        read,
        reads: run.reads().split_off(reads0),
        log,
        readers,
        read_at,
    }
}

/// Each live thread of process `pid` (id, name) and its `rchar` so far.
fn thread_reads(pid: u32) -> BTreeMap<(u32, String), u64> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    (tasks.flatten())
        .filter_map(|t| {
            let tid: u32 = t.file_name().to_str()?.parse().ok()?;
            let name = fs::read_to_string(t.path().join("comm")).ok()?;
            let io = fs::read_to_string(t.path().join("io")).ok()?;
            let rchar = io.lines().find_map(|l| l.strip_prefix("rchar: "))?;
            Some(((tid, name.trim().to_owned()), rchar.trim().parse().ok()?))
        })
        .collect()
}
