//! The Cursor editor's state database: what a 1 GB `state.vscdb` costs the daemon to archive,
//! and then for each change: a conversation the editor adds a message to, and a write that
//! changes no conversation (the editor keeps its UI state in the same file). Cursor keeps every
//! conversation in `cursorDiskKV`, a `composerData:<id>` row per conversation and a
//! `bubbleId:<id>:<bubble>` row per message, beside content-addressed agent blobs and
//! checkpoints that are most of the file (tests/fixtures/agents/cursor-editor/SOURCE).
//!
//! The database is generated here, deterministically: 400 conversations of 20 to 400 bubbles
//! (one of 3,000, one of 20: the two followed), bubbles of 1–8 KB of made-up prose (a tool's
//! output now and then of up to 20 KB), composers of 10–40 KB (their headers and the state
//! Cursor keeps beside them), rows written interleaved in time as a person using the editor
//! for months would leave them, and agent blobs of 8–64 KB up to the size. It is cached under
//! `target/bench/cursor-editor/`, keyed by [`RECIPE`].
//!
//! 1. Backfill: the real binary's `run`, with its built-in watchers under a HOME of the
//!    benchmark's own, until it has caught up: wall time, CPU, peak RSS.
//! 2. Finding changes: the reader's query for the conversations' times, redone here alone.
//! 3. Each change, [`CHANGES`] times, the daemon idle before each: a bubble added to the short
//!    conversation, then to the long one, each one transaction as Cursor writes it (the bubble,
//!    and the composer rewritten with its new header and `lastUpdatedAt`): the daemon's CPU
//!    until it is idle again, and the time from the commit to the bubble's record on the tap;
//!    then a write to `ItemTable` alone. Peak RSS over them all.
//!
//! `cargo bench --bench cursor_editor` (about 1.5 minutes after the build and the one-time
//! generation of about 1 minute); `CURSOR_EDITOR_QUICK=1` for a database of about 200 MB.
//! Results: a table on stdout and `target/bench/cursor-editor.md`.

use rusqlite::{Connection, params};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use testkit::daemon::{self, Daemon, TapReader};
use testkit::env::env_flag;
use testkit::machine::{self, Machine};
use testkit::procfs;
use testkit::words::Words;

const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");
/// The generator's version: a change to what it writes changes this, and so the cache's name.
const RECIPE: &str = "cursor-editor-1";
/// The conversations, and the bubbles of the two followed.
const CONVERSATIONS: usize = 400;
const LONG: usize = 3000;
const SHORT: usize = 20;
/// How many changes of each kind are measured.
const CHANGES: usize = 5;
/// The daemon is idle once its threads ran less than this in [`QUIET`].
const IDLE_CPU: Duration = Duration::from_millis(2);
const QUIET: Duration = Duration::from_millis(300);
const IDLE_FOR: Duration = Duration::from_millis(1200);
/// The reader's query for every conversation's time (`src/agents/cursor_editor.rs`).
const COMPOSERS: &str = "SELECT substr(key, 14), CASE WHEN json_valid(CAST(value AS TEXT))
    THEN CAST(coalesce(json_extract(CAST(value AS TEXT), '$.lastUpdatedAt'),
                       json_extract(CAST(value AS TEXT), '$.createdAt')) AS INTEGER) END
    FROM cursorDiskKV WHERE key >= 'composerData:' AND key < 'composerData;'";

/// One conversation as generated: its id and its bubbles' ids.
struct Conversation {
    id: String,
    bubbles: Vec<String>,
    composer_bytes: usize,
}

fn main() {
    let target: u64 = if env_flag("CURSOR_EDITOR_QUICK") {
        100_000_000
    } else {
        1_000_000_000
    };
    let bench = machine::target_dir().join("bench");
    let cached = cached_database(&bench.join("cursor-editor"), target);
    let scratch = bench.join("cursor-editor-scratch");
    let _ = fs::remove_dir_all(&scratch);
    let home = scratch.join("home");
    let db = home.join(".config/Cursor/User/globalStorage/state.vscdb");
    fs::create_dir_all(db.parent().expect("a parent")).expect("creating globalStorage");
    fs::copy(&cached, &db).expect("copying the database into the HOME");
    let mut md = format!(
        "Taken {} ({} MB database). {}\n\n",
        humantime::format_rfc3339_seconds(SystemTime::now()),
        fs::metadata(&db).map_or(0, |m| m.len()) / 1_000_000,
        Machine::summary()
    );
    let finding = finding_changes(&db);
    let _ = writeln!(
        md,
        "Finding changes (the reader's query over every composer's row, median of 5): {} ms\n",
        ms(finding)
    );
    let (daemon, backfill) = backfill(&home, &scratch.join("archive.db"));
    md.push_str(&backfill);
    md.push_str("| change | CPU per change, median (max) | commit to tap, median (max) |\n");
    md.push_str("| --- | --- | --- |\n");
    let writer = Connection::open(&db).expect("opening the database as Cursor");
    for (name, conversation) in [("short", SHORT), ("long", LONG)] {
        let (id, bubbles) = conversation_of(&writer, conversation);
        let (cpu, latency) = follow(&daemon, &writer, &id, bubbles);
        row(
            &mut md,
            &format!("a bubble added to the {name} conversation ({conversation}+)"),
            &cpu,
            &latency,
        );
    }
    let cpu = unrelated_writes(&daemon, &writer);
    row(&mut md, "an `ItemTable` write alone", &cpu, &[]);
    let peak = procfs::status_kib(daemon.child.id(), "VmHWM").unwrap_or(0);
    let _ = writeln!(
        md,
        "\nPeak RSS over it all: {} MiB. Load average at end {}.",
        peak / 1024,
        machine::load()
    );
    daemon.terminate();
    println!("\n{md}");
    fs::write(bench.join("cursor-editor.md"), &md).expect("writing cursor-editor.md");
    println!("wrote {}", bench.join("cursor-editor.md").display());
    let _ = fs::remove_dir_all(&scratch);
}

/// The generated database of about `target` bytes, made once and kept under `dir`.
fn cached_database(dir: &Path, target: u64) -> PathBuf {
    let path = dir.join(format!("{RECIPE}-{}.vscdb", target / 1_000_000));
    if path.exists() {
        return path;
    }
    fs::create_dir_all(dir).expect("creating the cache folder");
    let partial = path.with_extension("partial");
    let _ = fs::remove_file(&partial);
    let started = Instant::now();
    generate(&partial, target);
    fs::rename(&partial, &path).expect("keeping the generated database");
    eprintln!("generated {} in {:.0?}", path.display(), started.elapsed());
    path
}

/// Writes the database: conversations interleaved in time, then blobs up to `target`.
fn generate(path: &Path, target: u64) {
    let conn = Connection::open(path).expect("creating the database");
    conn.execute_batch(
        "CREATE TABLE ItemTable (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
         CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);
         BEGIN;",
    )
    .expect("making the tables");
    let mut words = Words::new(7);
    let scale = target as f64 / 1e9;
    let lengths: Vec<usize> = (0..CONVERSATIONS)
        .map(|c| match c {
            0 => LONG,
            1 => SHORT,
            _ => 20 + (words.rng.below(380) as f64 * scale.max(0.1)) as usize,
        })
        .collect();
    let mut conversations: Vec<Conversation> = (0..CONVERSATIONS)
        .map(|c| Conversation {
            id: format!("c{c:04}-bench"),
            bubbles: Vec::new(),
            composer_bytes: 10_000 + words.rng.below(30_000) as usize,
        })
        .collect();
    let mut written: u64 = 0;
    let mut at: i64 = 1_780_000_000_000;
    // Interleaved: at each step a bubble of a conversation not yet finished, and now and
    // then an agent blob.
    while let Some(c) = next_open(&mut words, &conversations, &lengths) {
        at += 1000 + words.rng.below(60_000) as i64;
        written += add_bubble(&conn, &mut words, &mut conversations[c], at);
        if conversations[c].bubbles.len() == lengths[c] {
            written += write_composer(&conn, &mut words, &conversations[c], at) as u64;
        }
        if written < target && words.rng.below(2) == 0 {
            written += add_blob(&conn, &mut words);
        }
    }
    while written < target {
        written += add_blob(&conn, &mut words);
    }
    conn.execute_batch("COMMIT;")
        .expect("committing the generated rows");
}

fn next_open(
    words: &mut Words,
    conversations: &[Conversation],
    lengths: &[usize],
) -> Option<usize> {
    let open: Vec<usize> = (0..conversations.len())
        .filter(|&c| conversations[c].bubbles.len() < lengths[c])
        .collect();
    (!open.is_empty()).then(|| open[words.rng.below(open.len() as u64) as usize])
}

/// A bubble: the person's prompt, or the model's text or tool call with its output.
fn bubble_json(words: &mut Words, id: &str, person: bool, at: i64) -> String {
    let created = humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(at as u64));
    let len = 1000 + words.rng.below(7000) as usize;
    let text = words.prose(len);
    let mut bubble = serde_json::json!({"_v": 3, "type": if person { 1 } else { 2 },
        "bubbleId": id, "text": text, "createdAt": created.to_string(),
        "tokenCount": {"inputTokens": 0, "outputTokens": 0}});
    if !person && words.rng.below(3) == 0 {
        let len = words.rng.below(20_000) as usize;
        let output = words.prose(len);
        bubble["text"] = "".into();
        bubble["toolFormerData"] = serde_json::json!({"name": "run_terminal_cmd",
            "status": "completed", "params": "{\"command\":\"cargo test\"}",
            "result": serde_json::json!({"output": output, "exitCode": 0}).to_string()});
    }
    bubble.to_string()
}

fn add_bubble(conn: &Connection, words: &mut Words, c: &mut Conversation, at: i64) -> u64 {
    let id = format!("b{:05}", c.bubbles.len());
    let json = bubble_json(words, &id, c.bubbles.len().is_multiple_of(4), at);
    put(conn, &format!("bubbleId:{}:{id}", c.id), &json);
    c.bubbles.push(id);
    json.len() as u64
}

/// The composer of `c` as it is at `at`: its headers and the state Cursor keeps beside them.
fn composer_json(words: &mut Words, c: &Conversation, at: i64) -> String {
    let headers: Vec<serde_json::Value> = (c.bubbles.iter().enumerate())
        .map(|(i, b)| serde_json::json!({"bubbleId": b, "type": if i.is_multiple_of(4) { 1 } else { 2 }}))
        .collect();
    serde_json::json!({"_v": 10, "composerId": c.id, "name": words.prose(40).trim(),
        "createdAt": 1_780_000_000_000_i64, "lastUpdatedAt": at, "status": "completed",
        "fullConversationHeadersOnly": headers,
        "context": {"notes": words.prose(c.composer_bytes)}})
    .to_string()
}

fn write_composer(conn: &Connection, words: &mut Words, c: &Conversation, at: i64) -> usize {
    let json = composer_json(words, c, at);
    put(conn, &format!("composerData:{}", c.id), &json);
    json.len()
}

fn add_blob(conn: &Connection, words: &mut Words) -> u64 {
    let len = 8_000 + words.rng.below(56_000) as usize;
    let text = words.prose(len);
    let key = format!(
        "agentKv:blob:{:016x}{:016x}",
        words.rng.next_u64(),
        words.rng.next_u64()
    );
    put(conn, &key, &text);
    text.len() as u64
}

fn put(conn: &Connection, key: &str, value: &str) {
    let mut stmt = conn
        .prepare_cached("INSERT INTO cursorDiskKV VALUES (?1, ?2)")
        .expect("an insert");
    stmt.execute(params![key, value]).expect("writing a row");
}

/// The reader's query alone, on a read-only connection: the median of five.
fn finding_changes(db: &Path) -> Duration {
    let conn = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("opening the database read-only");
    let mut times: Vec<Duration> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let mut stmt = conn.prepare(COMPOSERS).expect("the reader's query");
            let rows = stmt
                .query_map([], |r| r.get::<_, Option<i64>>(1))
                .expect("running it");
            assert_eq!(rows.count(), CONVERSATIONS);
            start.elapsed()
        })
        .collect();
    times.sort();
    times[2]
}

/// The daemon started on an empty archive, once it has caught up and gone idle, and a report
/// of its backfill.
fn backfill(home: &Path, archive: &Path) -> (Daemon, String) {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_LOG", "info")
        .args(["run", "--sink", "stdout", "--db"])
        .arg(archive);
    let start = Instant::now();
    let daemon = Daemon::spawn(cmd, TapReader::Read);
    // The conversations are captured once the database's first change has settled, after
    // the first scan has caught up: the backfill ends when the daemon goes idle.
    daemon.wait_log("caught up");
    wait_idle(&daemon);
    let took = start.elapsed().saturating_sub(IDLE_FOR);
    let cpu = daemon.cpu_precise();
    let peak = procfs::status_kib(daemon.child.id(), "VmHWM").unwrap_or(0);
    while daemon.tap.try_recv().is_ok() {}
    let archived = fs::metadata(archive).map_or(0, |m| m.len());
    let report = format!(
        "Backfill (every conversation archived): {:.1} s, CPU {:.1} s, peak RSS {} MiB, archive {} MB.\n\n",
        took.as_secs_f64(),
        cpu.as_secs_f64(),
        peak / 1024,
        archived / 1_000_000
    );
    (daemon, report)
}

/// Waits until the daemon has run less than [`IDLE_CPU`] in each [`QUIET`] for [`IDLE_FOR`]:
/// longer than a change takes to settle (0.5 s), so that a change waiting to be read is not
/// taken for rest.
fn wait_idle(daemon: &Daemon) {
    let deadline = Instant::now() + daemon::PATIENCE * 5;
    let mut quiet = Duration::ZERO;
    while quiet < IDLE_FOR {
        let before = daemon.cpu_precise();
        std::thread::sleep(QUIET);
        quiet = match daemon.cpu_precise().saturating_sub(before) < IDLE_CPU {
            true => quiet + QUIET,
            false => Duration::ZERO,
        };
        assert!(Instant::now() < deadline, "the daemon never went idle");
    }
}

/// The conversation of `bubbles` bubbles: its id and its bubbles' ids, as written.
fn conversation_of(conn: &Connection, bubbles: usize) -> (String, Vec<String>) {
    let id = format!("c{:04}-bench", if bubbles == LONG { 0 } else { 1 });
    let composer: String = conn
        .query_row(
            "SELECT value FROM cursorDiskKV WHERE key = ?1",
            [format!("composerData:{id}")],
            |r| r.get(0),
        )
        .expect("the followed conversation");
    let composer: serde_json::Value = serde_json::from_str(&composer).expect("its composer");
    let ids = composer["fullConversationHeadersOnly"]
        .as_array()
        .expect("its headers");
    (
        id,
        ids.iter()
            .map(|h| h["bubbleId"].as_str().unwrap_or_default().to_owned())
            .collect(),
    )
}

/// [`CHANGES`] bubbles added to conversation `id`, each as Cursor writes one, the daemon
/// idle before each: its CPU for each, and the time from each commit to the bubble on the tap.
fn follow(
    daemon: &Daemon,
    conn: &Connection,
    id: &str,
    mut bubbles: Vec<String>,
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut cpu, mut latency) = (Vec::new(), Vec::new());
    let mut words = Words::new(99);
    for n in 0..CHANGES {
        let before = daemon.cpu_precise();
        let marker = format!("cursor-bench-marker-{id}-{n}");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_millis() as i64;
        let bubble_id = format!("added{n}");
        let json = bubble_json(&mut words, &bubble_id, false, now).replacen(
            "\"text\":\"",
            &format!("\"text\":\"{marker} "),
            1,
        );
        bubbles.push(bubble_id.clone());
        let c = Conversation {
            id: id.to_owned(),
            bubbles: bubbles.clone(),
            composer_bytes: 20_000,
        };
        conn.execute_batch("BEGIN").expect("a transaction");
        put(conn, &format!("bubbleId:{id}:{bubble_id}"), &json);
        put(
            conn,
            &format!("composerData:{id}"),
            &composer_json(&mut words, &c, now),
        );
        conn.execute_batch("COMMIT").expect("committing the change");
        let committed = Instant::now();
        latency.push(tap_until(daemon, &marker).saturating_duration_since(committed));
        wait_idle(daemon);
        cpu.push(daemon.cpu_precise().saturating_sub(before));
    }
    (cpu, latency)
}

/// When the tap printed a line holding `needle`.
fn tap_until(daemon: &Daemon, needle: &str) -> Instant {
    let deadline = Instant::now() + daemon::PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match daemon.tap.recv_timeout(left) {
            Ok(line) if line.text.contains(needle) => return line.at,
            Ok(_) => {}
            Err(_) => panic!("{needle} never reached the tap:\n{}", daemon.log()),
        }
    }
}

/// [`CHANGES`] writes of the editor's UI state alone: the daemon's CPU for each.
fn unrelated_writes(daemon: &Daemon, conn: &Connection) -> Vec<Duration> {
    (0..CHANGES)
        .map(|n| {
            let before = daemon.cpu_precise();
            conn.execute(
                "INSERT INTO ItemTable VALUES ('workbench.state', ?1)",
                [format!("{{\"n\":{n}}}")],
            )
            .expect("writing UI state");
            wait_idle(daemon);
            daemon.cpu_precise().saturating_sub(before)
        })
        .collect()
}

fn row(md: &mut String, what: &str, cpu: &[Duration], latency: &[Duration]) {
    let _ = writeln!(md, "| {what} | {} | {} |", spread(cpu), spread(latency));
}

/// The median and the max, in ms.
fn spread(times: &[Duration]) -> String {
    if times.is_empty() {
        return "–".into();
    }
    let mut sorted = times.to_vec();
    sorted.sort();
    format!(
        "{} ms ({} ms)",
        ms(sorted[sorted.len() / 2]),
        ms(sorted[sorted.len() - 1])
    )
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}
