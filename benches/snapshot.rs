//! Rewriting agents: what a snapshot source costs the daemon and the archive. Gemini CLI 0.38
//! keeps each chat as one JSON document that it saves whole at every change
//! (`~/.gemini/tmp/<project>/chats/session-*.json`); the real binary's `run`, with its
//! built-in watchers under a HOME of the benchmark's own, captures such a file once it has
//! gone 0.5 s unmodified (at least every 10 s while it keeps changing).
//!
//! A, settled rewrites: a chat grows one message at a time (a prompt of 100 B–2 KB, then a
//! reply of 1–8 KB with one shell call whose result is 1–4 KB, and so on) to
//! `SNAPSHOT_MESSAGES` messages (default 200). Each state is written pretty-printed, as the
//! agent does, to a temporary file renamed over the chat, once the daemon has captured the
//! state before (one row more in the archive's `snapshots`, polled every 5 ms). Per capture:
//! the daemon's CPU (utime + stime of `/proc/PID/stat`, from one capture to the next), the
//! archive's growth (`length(bytes)` of `snapshots` and `length(record)` of `records`), beside
//! what the agent wrote, what storing each state whole with zstd -3 would take (compressed
//! here, and timed) and the message added. At the end, the archive's file with its WAL after
//! a checkpoint, against the empty archive the daemon started with.
//!
//! B, a token storm: a chat of `SNAPSHOT_STORM_MB` MB (default 5) whose last message grows by
//! a word at each rewrite, `SNAPSHOT_STORM_RATE` rewrites a second (50) for
//! `SNAPSHOT_STORM_SECS` seconds (12), then left to settle. What was captured and when, the
//! daemon's CPU (over the storm, and over the rewrites before its first forced capture), its
//! reads (`rchar`) and peak RSS (`VmHWM`, reset after the chat's first capture), and the
//! archive's growth, beside storing every rewrite as written or whole with zstd -3
//! (estimated from every 60th state: they differ by a few bytes), and beside three lone
//! rewrites of the same chat, each left to settle: what one capture costs.
//!
//! Between phases the benchmark waits for the daemon to be idle: its session index has
//! every record and its threads ran under 2 ms in 300 ms.
//!
//! `cargo bench --bench snapshot` (about 2 minutes on a 2-core VM, after the build);
//! `SNAPSHOT_QUICK=1` for a run of about 30 s (16 messages, a storm on a 1 MB chat);
//! `SNAPSHOT_ONLY=settled` or `=storm` runs one scenario. Results: tables on stdout and
//! `target/bench/snapshot.md`.

use rusqlite::{Connection, OpenFlags};
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};
use testkit::daemon::{self, TapReader};
use testkit::env::{env_flag, env_or};
use testkit::machine::{self, Machine};
use testkit::procfs;
use testkit::records::Rng;
use testkit::stats::quantile_of;
use testkit::words::Words;

const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");
/// How often the archive is asked whether a state has been captured.
const POLL: Duration = Duration::from_millis(5);
/// zstd's level for the baseline: the archive's own for states and records.
const LEVEL: i32 = 3;
/// The daemon is idle once its threads ran less than this in [`QUIET`].
const IDLE_CPU: Duration = Duration::from_millis(2);
const QUIET: Duration = Duration::from_millis(300);
/// The daemon's own: a file rewritten without a pause is captured this often.
const MAX_WAIT_SECS: u64 = 10;
/// Where the chat's document ends its `lastUpdated` and the growing message's text, in the
/// storm's template.
const UPDATED_MARK: &str = "\"@@UPDATED@@\"";
const GROWING_MARK: &str = "@@GROWING@@";

fn main() {
    let quick = env_flag("SNAPSHOT_QUICK");
    let messages = env_or("SNAPSHOT_MESSAGES", if quick { 16 } else { 200 }) as usize;
    let storm = Storm {
        bytes: env_or("SNAPSHOT_STORM_MB", if quick { 1 } else { 5 }) as usize * 1_000_000,
        rate: env_or("SNAPSHOT_STORM_RATE", 50).max(1),
        secs: env_or("SNAPSHOT_STORM_SECS", 12).max(1),
    };
    let only = std::env::var("SNAPSHOT_ONLY").unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || only == name;
    let bench = machine::target_dir().join("bench");
    let scratch = bench.join("snapshot-scratch");
    let _ = fs::remove_dir_all(&scratch);
    let started = humantime::format_rfc3339_seconds(SystemTime::now());
    let mode = if quick { "quick" } else { "full" };
    let mut md = format!("Taken {started} ({mode} mode). {}\n\n", Machine::summary());
    if wanted("settled") {
        let run = settled(&scratch.join("settled"), messages);
        report_settled(&mut md, &run);
    }
    if wanted("storm") {
        let run = token_storm(&scratch.join("storm"), &storm);
        report_storm(&mut md, &storm, &run);
    }
    let _ = writeln!(md, "Load average at end {}.", machine::load());
    println!("\n{md}");
    fs::create_dir_all(&bench).expect("creating target/bench");
    fs::write(bench.join("snapshot.md"), &md).expect("writing snapshot.md");
    println!("wrote {}", bench.join("snapshot.md").display());
    let _ = fs::remove_dir_all(&scratch);
}

// ---------------------------------------------------------------------------------------
// The chat, as Gemini CLI 0.38 writes it (`tests/fixtures/agents/gemini-cli-json/`)

/// A chat document; the fields in the agent's order, which serde keeps for a struct.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Chat {
    session_id: String,
    project_hash: String,
    start_time: String,
    last_updated: String,
    messages: Vec<Message>,
    kind: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Message {
    id: String,
    timestamp: String,
    #[serde(rename = "type")]
    kind: &'static str,
    content: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    thoughts: Option<Vec<Thought>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens: Option<Tokens>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ToolCall>,
}

#[derive(Serialize)]
struct Thought {
    subject: String,
    description: String,
    timestamp: String,
}

#[derive(Serialize)]
struct Tokens {
    input: u64,
    output: u64,
    cached: u64,
    thoughts: u64,
    tool: u64,
    total: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolCall {
    id: String,
    name: &'static str,
    args: Value,
    result: Value,
    status: &'static str,
    timestamp: String,
    result_display: String,
    description: String,
    display_name: &'static str,
    render_output_as_markdown: bool,
}

impl Chat {
    /// The document as the agent saves it: `JSON.stringify(chat, null, 2)`.
    fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a chat serializes")
    }
}

/// Deterministic chats. Their text is `testkit::words` (made-up words, not cut from
/// `testkit::records::TextPool`: cuts from its 1 MiB pool repeat long passages, which
/// compressing a whole document would find and a real chat does not have).
struct Author {
    rng: Rng,
    words: Words,
    clock: SystemTime,
}

impl Author {
    fn new(seed: u64) -> Author {
        let clock = humantime::parse_rfc3339("2026-12-03T15:14:00Z").expect("a valid time");
        Author {
            rng: Rng::new(seed),
            words: Words::new(seed ^ 0x5eed),
            clock,
        }
    }

    fn word(&mut self) -> String {
        self.words.word().to_owned()
    }

    fn prose(&mut self, len: usize) -> String {
        self.words.prose(len)
    }

    /// About `len` bytes of what a search over a source tree prints.
    fn output(&mut self, len: usize) -> String {
        let mut text = String::with_capacity(len + 128);
        while text.len() < len {
            let [a, b, c, d] = std::array::from_fn(|_| self.word());
            let (line, n) = (1 + self.rng.below(2000), self.rng.below(100));
            let _ = writeln!(
                text,
                "src/{a}/{b}.rs:{line}:    let {c} = {d}::{a}_{b}(&{c}, {n})?;"
            );
        }
        text
    }

    /// The time of the next message: a few seconds on.
    fn tick(&mut self) -> String {
        self.clock += Duration::from_millis(2000 + self.rng.below(20_000));
        humantime::format_rfc3339_millis(self.clock).to_string()
    }

    fn chat(&mut self) -> Chat {
        let start = humantime::format_rfc3339_millis(self.clock).to_string();
        Chat {
            session_id: self.rng.uuid(),
            project_hash: self.rng.hex(64),
            start_time: start.clone(),
            last_updated: start,
            messages: Vec::new(),
            kind: "main",
        }
    }

    /// The `n`th message (from 1): a prompt when `n` is odd, a reply when it is even.
    fn message(&mut self, n: usize) -> Message {
        if n % 2 == 1 {
            let len = self.rng.log_uniform(100.0, 2000.0);
            self.prompt(len)
        } else {
            let (text, result) = (
                self.rng.log_uniform(1000.0, 8000.0),
                1000 + self.rng.below(3000),
            );
            self.reply(text, result as usize)
        }
    }

    fn prompt(&mut self, len: usize) -> Message {
        Message {
            id: self.rng.uuid(),
            timestamp: self.tick(),
            kind: "user",
            content: json!([{ "text": self.prose(len) }]),
            thoughts: None,
            tokens: None,
            model: None,
            tool_calls: Vec::new(),
        }
    }

    /// A reply of about `len` bytes of text and, with `result` > 0, one shell call whose
    /// output is about `result` bytes.
    fn reply(&mut self, len: usize, result: usize) -> Message {
        let timestamp = self.tick();
        let thinking = 200 + self.rng.below(400) as usize;
        let thought = Thought {
            subject: self.prose(30),
            description: self.prose(thinking),
            timestamp: timestamp.clone(),
        };
        let tool_calls = if result > 0 {
            vec![self.shell_call(result)]
        } else {
            Vec::new()
        };
        let output = (len / 4) as u64;
        Message {
            id: self.rng.uuid(),
            timestamp,
            kind: "gemini",
            content: Value::String(self.prose(len)),
            thoughts: Some(vec![thought]),
            tokens: Some(Tokens {
                input: 20_000 + self.rng.below(100_000),
                output,
                cached: self.rng.below(20_000),
                thoughts: 150,
                tool: 0,
                total: 120_000 + output,
            }),
            model: Some("gemini-2.5-pro"),
            tool_calls,
        }
    }

    fn shell_call(&mut self, result: usize) -> ToolCall {
        let id = format!(
            "run_shell_command_{}_0",
            1_796_310_841_046 + self.rng.below(1 << 30)
        );
        let command = format!("grep -rn {} src", self.word());
        ToolCall {
            id: id.clone(),
            name: "run_shell_command",
            args: json!({ "command": command }),
            result: json!([{ "functionResponse": {
                "id": id,
                "name": "run_shell_command",
                "response": { "output": self.output(result) },
            }}]),
            status: "success",
            timestamp: self.tick(),
            result_display: "Command exited with code 0".into(),
            description: command,
            display_name: "Shell",
            render_output_as_markdown: false,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The daemon, the chat file and the archive

/// The chat file where the agent keeps it under a HOME; each state is written to a
/// temporary file beside it (which no watcher's glob takes) and renamed over it.
struct ChatFile {
    path: PathBuf,
    temp: PathBuf,
}

impl ChatFile {
    fn in_home(home: &Path) -> ChatFile {
        let dir = home.join(".gemini/tmp/project/chats");
        fs::create_dir_all(&dir).expect("creating the chats directory");
        ChatFile {
            path: dir.join("session-2026-12-03T15-14-d8bc5fca.json"),
            temp: dir.join(".session-2026-12-03T15-14-d8bc5fca.json.tmp"),
        }
    }

    /// Saves a state made of `parts`; returns when it was renamed into place.
    fn save(&self, parts: &[&[u8]]) -> Instant {
        let mut file = File::create(&self.temp).expect("creating the temporary chat");
        for part in parts {
            file.write_all(part).expect("writing the temporary chat");
        }
        drop(file);
        fs::rename(&self.temp, &self.path).expect("renaming the chat into place");
        Instant::now()
    }
}

/// The archive, read beside the daemon that writes it.
struct Archive {
    path: PathBuf,
    conn: Connection,
}

/// What the archive's rows take.
#[derive(Clone, Copy, Default)]
struct Stored {
    states: u64,
    /// `length(bytes)` of every state: the latest whole, the others as differences.
    snapshots: u64,
    /// The latest state's frame alone.
    latest: u64,
    records: u64,
    record_bytes: u64,
}

impl Stored {
    fn total(&self) -> u64 {
        self.snapshots + self.record_bytes
    }
}

/// The archive's files after a checkpoint.
#[derive(Clone, Copy, Default)]
struct OnDisk {
    /// The database and its WAL.
    archive: u64,
    free_pages: u64,
    page_size: u64,
    /// The session index's files, beside it.
    index: u64,
}

impl Archive {
    fn open(path: &Path) -> Archive {
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .expect("opening the daemon's archive");
        conn.busy_timeout(Duration::from_secs(10))
            .expect("setting a busy timeout");
        Archive {
            path: path.to_owned(),
            conn,
        }
    }

    fn number(&self, sql: &str) -> u64 {
        let n: i64 =
            (self.conn.query_row(sql, [], |r| r.get(0))).unwrap_or_else(|e| panic!("{sql}: {e}"));
        n as u64
    }

    /// True when the session index (`archive.db-index`) has indexed every record.
    fn indexed_all(&self) -> bool {
        let last = self.number("SELECT coalesce(max(seq), 0) FROM records");
        let index = with_suffix(&self.path, "-index");
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY;
        let indexed = (Connection::open_with_flags(index, flags))
            .and_then(|c| c.query_row("SELECT seq FROM progress", [], |r| r.get::<_, i64>(0)));
        indexed.is_ok_and(|seq| seq as u64 >= last)
    }

    fn states(&self) -> u64 {
        self.number("SELECT count(*) FROM snapshots")
    }

    fn largest_state(&self) -> u64 {
        self.number("SELECT coalesce(max(size), 0) FROM snapshots")
    }

    fn stored(&self) -> Stored {
        let latest = "SELECT coalesce(sum(length(bytes)), 0) FROM snapshots WHERE base IS NULL";
        Stored {
            states: self.states(),
            snapshots: self.number("SELECT coalesce(sum(length(bytes)), 0) FROM snapshots"),
            latest: self.number(latest),
            records: self.number("SELECT count(*) FROM records"),
            record_bytes: self.number("SELECT coalesce(sum(length(record)), 0) FROM records"),
        }
    }

    /// The latest state, decompressed here: what the daemon would restore.
    fn latest_state(&self) -> Vec<u8> {
        let frame: Vec<u8> = (self.conn)
            .query_row(
                "SELECT bytes FROM snapshots WHERE base IS NULL ORDER BY id DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .expect("a latest state");
        zstd::stream::decode_all(&frame[..]).expect("the latest state is one zstd frame")
    }

    /// When each state after the `skip` first was captured (Unix ms).
    fn taken_ms(&self, skip: u64) -> Vec<i64> {
        let mut stmt = (self.conn)
            .prepare("SELECT taken_ms FROM snapshots ORDER BY id LIMIT -1 OFFSET ?1")
            .expect("preparing");
        let rows = stmt
            .query_map([skip as i64], |r| r.get(0))
            .expect("querying");
        rows.map(|r| r.expect("a row")).collect()
    }

    /// Checkpoints the archive's WAL and the session index's into their databases
    /// (truncating them), then measures the files.
    fn on_disk(&self) -> OnDisk {
        let index = with_suffix(&self.path, "-index");
        checkpoint(&self.conn);
        if index.exists() {
            let conn = Connection::open_with_flags(&index, OpenFlags::SQLITE_OPEN_READ_WRITE)
                .expect("opening the session index");
            conn.busy_timeout(Duration::from_secs(10))
                .expect("setting a busy timeout");
            checkpoint(&conn);
        }
        let size = |p: &Path| fs::metadata(p).map_or(0, |m| m.len());
        let with_wal = |p: &Path| size(p) + size(&with_suffix(p, "-wal"));
        OnDisk {
            archive: with_wal(&self.path),
            free_pages: self.number("PRAGMA freelist_count"),
            page_size: self.number("PRAGMA page_size"),
            index: with_wal(&index),
        }
    }
}

/// `path` with `suffix` after its file name, as SQLite names a database's companions.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.to_owned().into_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

/// Moves everything in the WAL of `conn`'s database into it and truncates the WAL; retried
/// while the daemon is in the middle of a transaction.
fn checkpoint(conn: &Connection) {
    let deadline = Instant::now() + daemon::PATIENCE;
    loop {
        let busy: i64 = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0))
            .expect("checkpointing");
        if busy == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "the checkpoint stayed blocked");
        std::thread::sleep(POLL);
    }
}

/// A `transcript-sync run` under a HOME of its own, its archive and the chat it watches.
struct Run {
    daemon: daemon::Daemon,
    archive: Archive,
    chat: ChatFile,
}

impl Run {
    /// Starts the daemon with its built-in watchers and the defaults, and returns once it
    /// has caught up and gone idle.
    fn start(dir: &Path) -> Run {
        let home = dir.join("home");
        let chat = ChatFile::in_home(&home);
        let db = dir.join("archive.db");
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("HOME", &home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RUST_LOG", "info")
            .args(["run", "--db"])
            .arg(&db);
        let daemon = daemon::Daemon::spawn(cmd, TapReader::Read);
        daemon.wait_log("caught up");
        let run = Run {
            archive: Archive::open(&db),
            daemon,
            chat,
        };
        run.wait_idle();
        run
    }

    fn pid(&self) -> u32 {
        self.daemon.child.id()
    }

    /// Polls `done` until it holds; returns when it did. Panics with the daemon's log after
    /// [`daemon::PATIENCE`].
    fn wait(&self, what: &str, mut done: impl FnMut() -> bool) -> Instant {
        let deadline = Instant::now() + daemon::PATIENCE;
        loop {
            if done() {
                return Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "{what}: never; log:\n{}",
                self.daemon.log()
            );
            std::thread::sleep(POLL);
        }
    }

    /// Waits until the session index has every record and the daemon's threads have been
    /// all but idle for [`QUIET`] (a dictionary trained, a checkpoint done). The index's
    /// thread runs in the idle class, so on a busy machine a quiet daemon may still owe it
    /// work: its place is asked of the index itself.
    fn wait_idle(&self) {
        let deadline = Instant::now() + daemon::PATIENCE;
        loop {
            let before = self.daemon.cpu_precise();
            std::thread::sleep(QUIET);
            let quiet = self.daemon.cpu_precise().saturating_sub(before) < IDLE_CPU;
            if quiet && self.archive.indexed_all() {
                return;
            }
            assert!(Instant::now() < deadline, "the daemon never went idle");
        }
    }

    /// Starts the daemon's peak resident memory (`VmHWM`) again from what it holds now.
    fn reset_peak(&self) {
        fs::write(format!("/proc/{}/clear_refs", self.pid()), "5")
            .expect("resetting the daemon's peak RSS (clear_refs)");
    }

    /// The daemon's peak resident memory (KiB) and bytes read (`rchar`) so far.
    fn peak_and_read(&self) -> (u64, u64) {
        let peak = procfs::status_kib(self.pid(), "VmHWM").unwrap_or(0);
        let read = procfs::io(self.pid()).map_or(0, |io| io.0);
        (peak, read)
    }

    /// Stops the daemon as a service manager would; the archive stays open for reading.
    fn stop(self) -> Archive {
        let (status, _) = self.daemon.terminate();
        assert!(status.success(), "the daemon exited with {status}");
        self.archive
    }
}

fn zstd3(bytes: &[u8]) -> Vec<u8> {
    zstd::bulk::compress(bytes, LEVEL).expect("zstd compresses")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

// ---------------------------------------------------------------------------------------
// A: settled rewrites

/// One captured rewrite of A.
struct Capture {
    /// What the agent wrote: the whole chat.
    written: u64,
    /// That state whole, with zstd -3, and how long compressing it took here.
    whole: u64,
    whole_ms: f64,
    /// The message added, as the compact JSON of its record, and that with zstd -3.
    added: u64,
    added_zstd: u64,
    /// The archive's rows, from the capture before to this one.
    growth: i64,
    /// The daemon's CPU time, from the capture before to this one, in clock ticks (so its
    /// sum over many captures is exact to a tick or two).
    cpu: Duration,
    /// From the rename to the state's row in the archive.
    latency_ms: f64,
}

struct Settled {
    captures: Vec<Capture>,
    stored: Stored,
    empty: OnDisk,
    full: OnDisk,
    peak_kib: u64,
    read: u64,
}

fn settled(dir: &Path, n: usize) -> Settled {
    let run = Run::start(dir);
    let empty = run.archive.on_disk();
    let read_before = run.peak_and_read().1;
    let (mut stored, mut cpu) = (run.archive.stored().total(), run.daemon.cpu());
    let mut author = Author::new(1);
    let mut chat = author.chat();
    let mut captures = Vec::with_capacity(n);
    for k in 1..=n {
        let message = author.message(k);
        let added = serde_json::to_vec(&message).expect("a message serializes");
        chat.last_updated = message.timestamp.clone();
        chat.messages.push(message);
        let state = chat.bytes();
        let timer = Instant::now();
        let whole = zstd3(&state).len() as u64;
        let whole_ms = ms(timer.elapsed());
        let saved = run.chat.save(&[&state]);
        let at = run.wait(&format!("state {k} in `snapshots`"), || {
            run.archive.states() >= k as u64
        });
        let (cpu_now, stored_now) = (run.daemon.cpu(), run.archive.stored().total());
        captures.push(Capture {
            written: state.len() as u64,
            whole,
            whole_ms,
            added: added.len() as u64,
            added_zstd: zstd3(&added).len() as u64,
            growth: stored_now as i64 - stored as i64,
            cpu: cpu_now - cpu,
            latency_ms: ms(at - saved),
        });
        (cpu, stored) = (cpu_now, stored_now);
        if k % 25 == 0 {
            eprintln!("settled: {k} of {n} states captured");
        }
    }
    run.wait_idle();
    assert!(
        run.archive.latest_state() == chat.bytes(),
        "the archive's latest state is the chat as last saved"
    );
    let (peak_kib, read) = run.peak_and_read();
    let stored = run.archive.stored();
    let archive = run.stop();
    Settled {
        captures,
        stored,
        empty,
        full: archive.on_disk(),
        peak_kib,
        read: read - read_before,
    }
}

fn size(bytes: f64) -> String {
    if bytes.abs() >= 1e6 {
        format!("{:.2} MB", bytes / 1e6)
    } else if bytes.abs() >= 1e3 {
        format!("{:.1} KB", bytes / 1e3)
    } else {
        format!("{bytes:.0} B")
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    sum / n.max(1) as f64
}

fn report_settled(md: &mut String, run: &Settled) {
    let c = &run.captures;
    let n = c.len();
    let _ = writeln!(
        md,
        "### A. Settled rewrites\n\nA chat growing one message at a time to {n} messages, each \
         state saved whole (pretty-printed, written to a temporary file and renamed over the \
         chat) once the daemon had captured the one before. Means per captured rewrite, by \
         quarter of the chat's growth:\n"
    );
    let _ = writeln!(
        md,
        "| captures | chat at the end | agent wrote | whole, zstd -3 | message added \
         (zstd -3) | archive grew | daemon CPU | zstd -3 here | rename → captured p50 / max |"
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for q in 0..4 {
        let part = &c[q * n / 4..(q + 1) * n / 4];
        if let Some(last) = part.last() {
            band_row(md, q * n / 4 + 1, (q + 1) * n / 4, last, part);
        }
    }
    band_row(md, 1, n, &c[n - 1], c);
    settled_totals(md, run);
}

fn band_row(md: &mut String, from: usize, to: usize, last: &Capture, part: &[Capture]) {
    let avg = |f: fn(&Capture) -> f64| mean(part.iter().map(f));
    let latency: Vec<f64> = part.iter().map(|c| c.latency_ms).collect();
    let _ = writeln!(
        md,
        "| {from}–{to} | {} | {} | {} | {} ({}) | {} | {:.1} ms | {:.1} ms | {:.0} / {:.0} ms |",
        size(last.written as f64),
        size(avg(|c| c.written as f64)),
        size(avg(|c| c.whole as f64)),
        size(avg(|c| c.added as f64)),
        size(avg(|c| c.added_zstd as f64)),
        size(avg(|c| c.growth as f64)),
        avg(|c| ms(c.cpu)),
        avg(|c| c.whole_ms),
        quantile_of(&latency, 0.5),
        quantile_of(&latency, 1.0),
    );
}

fn settled_totals(md: &mut String, run: &Settled) {
    let c = &run.captures;
    let n = c.len() as f64;
    let s = &run.stored;
    let sum = |f: fn(&Capture) -> u64| c.iter().map(f).sum::<u64>() as f64;
    let archive = s.total() as f64;
    let grown = run.full.archive as f64 - run.empty.archive as f64;
    let _ = writeln!(
        md,
        "\nTotals over the {n} captures (\"× archive rows\": the row against the archive's \
         rows for the chat, `snapshots` and `records` together):\n"
    );
    let _ = writeln!(md, "| what | bytes | per capture | × archive rows |");
    let _ = writeln!(md, "|---|---:|---:|---:|");
    let row = |md: &mut String, what: &str, bytes: f64| {
        let _ = writeln!(
            md,
            "| {what} | {} | {} | {:.2} |",
            size(bytes),
            size(bytes / n),
            bytes / archive
        );
    };
    row(md, "the agent wrote (every state)", sum(|c| c.written));
    row(md, "every state whole, zstd -3", sum(|c| c.whole));
    row(md, "the messages added, compact JSON", sum(|c| c.added));
    row(
        md,
        "the messages added, each zstd -3",
        sum(|c| c.added_zstd),
    );
    let states = format!(
        "archive: `snapshots`, {} states (the latest whole {}, the others as differences)",
        s.states,
        size(s.latest as f64)
    );
    row(md, &states, s.snapshots as f64);
    let records = format!("archive: `records`, {} records", s.records);
    row(md, &records, s.record_bytes as f64);
    row(md, "archive: rows together", archive);
    let file = format!(
        "archive file with its WAL after a checkpoint, grown by ({} → {}; free pages of {} B \
         {} → {})",
        size(run.empty.archive as f64),
        size(run.full.archive as f64),
        run.full.page_size,
        run.empty.free_pages,
        run.full.free_pages,
    );
    row(md, &file, grown);
    let index = format!(
        "session index (`archive.db-index`) beside it, grown by ({} → {})",
        size(run.empty.index as f64),
        size(run.full.index as f64)
    );
    row(md, &index, run.full.index as f64 - run.empty.index as f64);
    let cpu: Duration = c.iter().map(|c| c.cpu).sum();
    let _ = writeln!(
        md,
        "\nDaemon CPU {:.2} s in all ({:.1} ms per capture); zstd -3 of every state whole, \
         here, {:.2} s. The daemon read {} (`rchar`: the states, SQLite's pages) where the \
         agent wrote {}; its peak RSS was {:.1} MiB.\n",
        cpu.as_secs_f64(),
        ms(cpu) / n,
        c.iter().map(|c| c.whole_ms).sum::<f64>() / 1e3,
        size(run.read as f64),
        size(sum(|c| c.written)),
        run.peak_kib as f64 / 1024.0
    );
}

// ---------------------------------------------------------------------------------------
// B: a token storm

struct Storm {
    bytes: usize,
    rate: u64,
    secs: u64,
}

/// The storm's chat as three pieces around its two changing values, so that a rewrite
/// costs the agent a write and not a serialization.
struct Template {
    head: Vec<u8>,
    middle: Vec<u8>,
    tail: Vec<u8>,
}

impl Template {
    fn state(&self, updated: &str, growing: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.head.len() + self.middle.len() + self.tail.len());
        for part in self.parts(updated, growing) {
            out.extend_from_slice(part);
        }
        out
    }

    fn parts<'a>(&'a self, updated: &'a str, growing: &'a str) -> [&'a [u8]; 5] {
        [
            &self.head,
            updated.as_bytes(),
            &self.middle,
            growing.as_bytes(),
            &self.tail,
        ]
    }
}

/// A chat of at least `bytes`, its last message a reply being streamed; the template and
/// the reply's text so far (JSON-escaped).
fn storm_chat(bytes: usize) -> (Template, String) {
    let mut author = Author::new(2);
    let mut chat = author.chat();
    // Pretty-printed after every 25 messages, until the chat is large enough.
    while chat.bytes().len() < bytes {
        for _ in 0..25 {
            let message = author.message(chat.messages.len() + 1);
            chat.messages.push(message);
        }
    }
    let mut streaming = author.reply(0, 0);
    streaming.content = Value::String(GROWING_MARK.into());
    chat.messages.push(streaming);
    chat.last_updated = "@@UPDATED@@".into();
    let doc = chat.bytes();
    let text = std::str::from_utf8(&doc).expect("JSON is UTF-8");
    let (head, rest) = text.split_once(UPDATED_MARK).expect("the updated mark");
    let (middle, tail) = rest.split_once(GROWING_MARK).expect("the growing mark");
    let template = Template {
        head: format!("{head}\"").into_bytes(),
        middle: format!("\"{middle}").into_bytes(),
        tail: tail.as_bytes().to_vec(),
    };
    let growing = author.prose(300).replace('\n', "\\n");
    (template, growing)
}

struct StormRun {
    chat_bytes: u64,
    rewrites: u64,
    storm_secs: f64,
    /// When each state of the storm was captured, in seconds from its first rewrite.
    captured_at: Vec<f64>,
    cpu: Duration,
    /// The daemon's CPU time and the rewrites made until just before the first capture
    /// that the storm forces (none when the storm is shorter).
    uncaptured: Option<(Duration, u64)>,
    read: u64,
    /// What the storm added to `snapshots`, and to `records` (how many, how many bytes).
    states_growth: i64,
    records_growth: (u64, u64),
    /// The storm's states with zstd -3: the sum, estimated from every 60th, and the
    /// smallest and largest of those.
    whole_sum: f64,
    whole_range: (u64, u64),
    /// One capture of the chat alone, left to settle: CPU and growth, mean of three.
    lone_cpu: Duration,
    lone_growth: f64,
    /// The daemon's peak RSS up to the chat's first capture (a new source: every message a
    /// record), and over the storm alone.
    first_peak_kib: u64,
    peak_kib: u64,
    /// The archive's file with its WAL, and the session index's, after a checkpoint.
    grown_on_disk: i64,
    /// The archive's free pages before the storm and after it, and their size.
    free_pages: (u64, u64, u64),
    index_grown: i64,
}

fn token_storm(dir: &Path, storm: &Storm) -> StormRun {
    let run = Run::start(dir);
    let (template, mut growing) = storm_chat(storm.bytes);
    let mut clock = humantime::parse_rfc3339("2026-12-03T18:00:00Z").expect("a valid time");
    let mut stamp = || {
        clock += Duration::from_millis(1000 / storm.rate);
        humantime::format_rfc3339_millis(clock).to_string()
    };
    // The chat before the storm, captured and digested first (its records train the
    // harness's first dictionary).
    let first = template.state(&stamp(), &growing);
    run.chat.save(&[&first]);
    run.wait("the chat before the storm", || run.archive.states() >= 1);
    run.wait_idle();
    let first_peak_kib = run.peak_and_read().0;
    run.reset_peak();
    let disk0 = run.archive.on_disk();
    let (before, cpu0, read0) = (
        run.archive.stored(),
        run.daemon.cpu(),
        run.peak_and_read().1,
    );
    let began = SystemTime::now();
    let start = Instant::now();
    let Rewrites { states, uncaptured } = rewrite(&run, storm, &template, &mut growing, &mut stamp);
    let storm_secs = start.elapsed().as_secs_f64();
    let last = template.state(&states[states.len() - 1].updated, &growing);
    run.wait("the storm's last state", || {
        run.archive.largest_state() >= last.len() as u64
    });
    run.wait_idle();
    let (after, cpu1, (peak_kib, read1)) =
        (run.archive.stored(), run.daemon.cpu(), run.peak_and_read());
    let disk1 = run.archive.on_disk();
    let began_ms = began
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64;
    let captured_at = (run.archive.taken_ms(before.states).iter())
        .map(|t| (t - began_ms) as f64 / 1e3)
        .collect();
    let (lone_cpu, lone_growth) = lone_captures(&run, &template, &mut growing, &mut stamp);
    let (whole_sum, whole_range) = estimate_whole(&template, &growing, &states);
    run.stop();
    StormRun {
        chat_bytes: first.len() as u64,
        rewrites: states.len() as u64,
        storm_secs,
        captured_at,
        cpu: cpu1 - cpu0,
        uncaptured: uncaptured.map(|(cpu, n)| (cpu - cpu0, n)),
        read: read1 - read0,
        states_growth: after.snapshots as i64 - before.snapshots as i64,
        records_growth: (
            after.records - before.records,
            after.record_bytes - before.record_bytes,
        ),
        whole_sum,
        whole_range,
        lone_cpu,
        lone_growth,
        first_peak_kib,
        peak_kib,
        grown_on_disk: disk1.archive as i64 - disk0.archive as i64,
        index_grown: disk1.index as i64 - disk0.index as i64,
        free_pages: (disk0.free_pages, disk1.free_pages, disk1.page_size),
    }
}

/// One rewrite of the storm: its `lastUpdated`, and the length of the growing text then.
struct Rewritten {
    updated: String,
    growing: usize,
}

/// The storm's rewrites, and the daemon's CPU time and the rewrites made until half a second
/// before its [`MAX_WAIT_SECS`] would force a capture.
struct Rewrites {
    states: Vec<Rewritten>,
    uncaptured: Option<(Duration, u64)>,
}

/// The storm: the growing message a word longer at each rewrite, at the storm's rate (a
/// rewrite that comes late is not made up for).
fn rewrite(
    run: &Run,
    storm: &Storm,
    template: &Template,
    growing: &mut String,
    stamp: &mut impl FnMut() -> String,
) -> Rewrites {
    let mut states = Vec::new();
    let mut tokens = Author::new(3);
    let mut uncaptured = None;
    let forced = Duration::from_millis(MAX_WAIT_SECS * 1000 - 500);
    let start = Instant::now();
    let every = Duration::from_secs(1) / storm.rate as u32;
    let mut due = start;
    while start.elapsed() < Duration::from_secs(storm.secs) {
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if uncaptured.is_none() && start.elapsed() >= forced {
            uncaptured = Some((run.daemon.cpu(), states.len() as u64));
        }
        let updated = stamp();
        let _ = write!(growing, " {}", tokens.word());
        run.chat.save(&template.parts(&updated, growing));
        states.push(Rewritten {
            updated,
            growing: growing.len(),
        });
        due = (due + every).max(Instant::now());
    }
    Rewrites { states, uncaptured }
}

/// Three rewrites of the chat, each left to settle and captured alone: the daemon's CPU
/// from the rename until it is idle again, and the archive's growth, on average.
fn lone_captures(
    run: &Run,
    template: &Template,
    growing: &mut String,
    stamp: &mut impl FnMut() -> String,
) -> (Duration, f64) {
    const LONE: u32 = 3;
    let (stored0, mut cpu) = (run.archive.stored().total(), Duration::ZERO);
    for _ in 0..LONE {
        growing.push_str(" settled");
        let state = template.state(&stamp(), growing);
        let before = run.daemon.cpu();
        run.chat.save(&[&state]);
        run.wait("a lone rewrite", || {
            run.archive.largest_state() >= state.len() as u64
        });
        run.wait_idle();
        // The idle wait's own [`QUIET`] is in the reading; the daemon spends under
        // [`IDLE_CPU`] of it.
        cpu += run.daemon.cpu() - before;
    }
    let grown = run.archive.stored().total() as f64 - stored0 as f64;
    (cpu / LONE, grown / f64::from(LONE))
}

/// The sum of the storm's states each compressed whole with zstd -3, estimated from every
/// 60th state and the last (they differ by a few bytes), and the smallest and largest of
/// those.
fn estimate_whole(template: &Template, growing: &str, states: &[Rewritten]) -> (f64, (u64, u64)) {
    let picked: Vec<u64> = (states.iter().enumerate())
        .filter(|(i, _)| i % 60 == 0 || *i == states.len() - 1)
        .map(|(_, r)| zstd3(&template.state(&r.updated, &growing[..r.growing])).len() as u64)
        .collect();
    let avg = mean(picked.iter().map(|&b| b as f64));
    let range = (
        picked.iter().copied().min().unwrap_or(0),
        picked.iter().copied().max().unwrap_or(0),
    );
    (avg * states.len() as f64, range)
}

fn report_storm(md: &mut String, storm: &Storm, run: &StormRun) {
    let expected = storm.secs / MAX_WAIT_SECS + 1;
    let captured: Vec<String> = (run.captured_at.iter())
        .map(|s| format!("{s:.1} s"))
        .collect();
    let naive_cpu = run.lone_cpu * run.rewrites as u32;
    let _ = writeln!(
        md,
        "### B. A token storm\n\nA chat of {} whose last message grows by a word at each \
         rewrite, {} rewrites in {:.1} s ({:.1} a second, {} asked for), then left to settle; \
         then three lone rewrites of it, each left to settle.\n",
        size(run.chat_bytes as f64),
        run.rewrites,
        run.storm_secs,
        run.rewrites as f64 / run.storm_secs,
        storm.rate
    );
    let _ = writeln!(md, "| measure | value |\n|---|---:|");
    let mut row = |what: &str, value: String| {
        let _ = writeln!(md, "| {what} | {value} |");
    };
    row(
        "states captured (one per 10 s of change, one once settled: expected)",
        format!("{} ({expected})", run.captured_at.len()),
    );
    row(
        "captured at, from the storm's first rewrite",
        captured.join(", "),
    );
    row(
        "daemon CPU, storm to its last capture (idle again)",
        format!(
            "{:.2} s ({:.1} % of a core over the storm)",
            run.cpu.as_secs_f64(),
            run.cpu.as_secs_f64() / run.storm_secs * 100.0
        ),
    );
    row(
        "daemon CPU per rewrite",
        format!("{:.2} ms", ms(run.cpu) / run.rewrites as f64),
    );
    if let Some((cpu, n)) = run.uncaptured {
        row(
            &format!("daemon CPU per rewrite not captured (the first {n}, until 9.5 s)"),
            format!("{:.2} ms", ms(cpu) / n.max(1) as f64),
        );
    }
    row(
        "one capture of this chat alone (mean of 3)",
        format!(
            "{:.0} ms CPU, archive +{}",
            ms(run.lone_cpu),
            size(run.lone_growth)
        ),
    );
    row(
        "capturing every rewrite would cost (rewrites × one capture)",
        format!("{:.1} s CPU", naive_cpu.as_secs_f64()),
    );
    row(
        "the daemon read (`rchar`), storm to its last capture",
        size(run.read as f64),
    );
    row(
        "archive rows grew: `snapshots`",
        size(run.states_growth as f64),
    );
    row(
        "archive rows grew: `records`",
        format!(
            "{} ({} records)",
            size(run.records_growth.1 as f64),
            run.records_growth.0
        ),
    );
    row(
        "archive file with its WAL grew, checkpointed before and after",
        format!(
            "{} (free pages of {} B: {} → {})",
            size(run.grown_on_disk as f64),
            run.free_pages.2,
            run.free_pages.0,
            run.free_pages.1
        ),
    );
    row(
        "session index file grew, checkpointed before and after",
        size(run.index_grown as f64),
    );
    row(
        "the agent wrote (every rewrite as written)",
        size(run.chat_bytes as f64 * run.rewrites as f64),
    );
    row(
        "every rewrite's state whole, zstd -3 (estimated)",
        format!(
            "{} ({} to {} each)",
            size(run.whole_sum),
            size(run.whole_range.0 as f64),
            size(run.whole_range.1 as f64)
        ),
    );
    row(
        "daemon peak RSS over the storm (up to the chat's first capture)",
        format!(
            "{:.1} MiB ({:.1} MiB)",
            run.peak_kib as f64 / 1024.0,
            run.first_peak_kib as f64 / 1024.0
        ),
    );
    md.push('\n');
}
