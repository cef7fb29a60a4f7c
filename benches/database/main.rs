//! Following OpenCode's database: what a 1 GB `opencode.db` costs the daemon to archive, to
//! follow while the agent writes into it, and to keep an eye on while it is idle. OpenCode
//! 1.2+ keeps every session in one SQLite database in WAL mode
//! (`~/.local/share/opencode/opencode.db`): tables `session`, `message` and `part`, whose
//! rows it updates in place, and `event`, the log of its changes, whose rowid only grows. The
//! real binary's `run`, with its built-in watchers under a HOME of the benchmark's own, reads
//! it read-only, finds the sessions changed since its mark through `event`, and captures each
//! as one whole document (its row, every message with its parts), archived by difference.
//!
//! The database is generated here, deterministically, with the tables' schema copied from the
//! recorded fixture (`tests/fixtures/agents/opencode/`) and rows in its shapes: about 2,000
//! sessions of 2–60 messages and a few of thousands, written interleaved in time as an agent
//! used over three months would (a long session's rows are spread over the whole file); each
//! turn a prompt, then replies that each open a step, think now and then, say something, call
//! one or two tools (bash, read, grep, edit; output 1–20 KB) and close the step; text of
//! 0.2–4 KB from a made-up vocabulary (no passage repeats); and the events OpenCode writes
//! for each change, each carrying the row as it then was. It is cached under
//! `target/bench/database/`, keyed by [`RECIPE`].
//!
//! 1. Backfill: `run --once` over a copy of it, beside a plain `SELECT` of every message and
//!    part, and the reader's own queries with its JSON building redone here: wall time, CPU
//!    and peak RSS (`wait4`), the bytes read (`rchar`), records, the archive against the
//!    database. And the daemon's query for the sessions changed since a mark, alone, beside
//!    the same kept to the rowid range.
//! 2. Following: `run` (caught up) while this process, as the agent, adds a message every
//!    0.5 s to one session, each write one transaction as OpenCode makes them, for 20 s; once
//!    to a session of 20 messages, once to the longest. The daemon's CPU and reads, its
//!    captures, each message's time from the commit that completes it to its record on the
//!    tap; then three lone messages, each left to settle.
//! 3. Idle: the daemon's CPU and reads over 60 s with nothing written.
//!
//! `cargo bench --bench database` (about 2.5 minutes on a 2-core VM, after the build and the
//! one-time generation of about 15 s); `DATABASE_QUICK=1` for a 100 MB database (one long
//! session of 1,200 messages) and a run of about a minute. Results: tables on stdout and
//! `target/bench/database.md`.

mod agent;
mod backfill;
mod generate;
mod live;
mod read;
mod report;
mod text;

use backfill::backfill;
use generate::cached_database;
use live::{Run, follow, idle};
use read::{bare_read, documents_read, finding_changes};
use report::{report_backfill, report_database, report_finding, report_following, report_idle};
use std::fmt::Write as _;
use std::fs;
use std::time::{Duration, SystemTime};
use testkit::env::env_flag;
use testkit::machine::{self, Machine};

const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");
/// The generator's version: a change to what it writes changes this, and so the cache's name.
const RECIPE: &str = "opencode-2";
/// The database OpenCode 1.18.33 wrote, recorded: the schema is copied from it.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/agents/opencode/.local/share/opencode/opencode.db"
);
/// The tables the generated database has, and their indexes.
const TABLES: &str = "'project', 'session', 'message', 'part', 'event_sequence', 'event'";
/// What one message takes in the file, all told (its parts, its events, pages), measured on
/// this generator; used to decide how many sessions make the database's size.
const BYTES_PER_MESSAGE: u64 = 25_000;
/// The days over which the sessions were written, and in how many projects.
const SPAN_DAYS: i64 = 90;
const PROJECTS: usize = 12;
/// How often the agent adds a message while followed, and the pause between the writes of
/// one message (a model streaming it).
const EVERY: Duration = Duration::from_millis(500);
const STEP_GAP: Duration = Duration::from_millis(8);
/// How many messages the short followed session has.
const SHORT: usize = 20;
/// How often the archive or the tap is looked at.
const POLL: Duration = Duration::from_millis(5);
/// The daemon is idle once its threads ran less than this in [`QUIET`].
const IDLE_CPU: Duration = Duration::from_millis(2);
const QUIET: Duration = Duration::from_millis(300);
/// Lone messages added after each following, each left to settle.
const LONE: usize = 3;

/// How large a run is.
struct Shape {
    mode: &'static str,
    /// The database's size, about.
    target: u64,
    /// The long sessions' lengths, in messages; the first is followed.
    long: &'static [usize],
    follow: Duration,
    idle: Duration,
}

const FULL: Shape = Shape {
    mode: "full",
    target: 1_000_000_000,
    long: &[4000, 2500, 1500],
    follow: Duration::from_secs(20),
    idle: Duration::from_secs(60),
};

const QUICK: Shape = Shape {
    mode: "quick",
    target: 100_000_000,
    long: &[1200],
    follow: Duration::from_secs(10),
    idle: Duration::from_secs(20),
};

fn main() {
    let shape = if env_flag("DATABASE_QUICK") {
        QUICK
    } else {
        FULL
    };
    let bench = machine::target_dir().join("bench");
    let (cached, made) = cached_database(&bench.join("database"), &shape);
    let scratch = bench.join("database-scratch");
    let _ = fs::remove_dir_all(&scratch);
    let home = scratch.join("home");
    let db = home.join(".local/share/opencode/opencode.db");
    fs::create_dir_all(db.parent().expect("a parent")).expect("creating the opencode directory");
    fs::copy(&cached, &db).expect("copying the database into the HOME");
    let started = humantime::format_rfc3339_seconds(SystemTime::now());
    let mut md = format!(
        "Taken {started} ({} mode). {}\n\n",
        shape.mode,
        Machine::summary()
    );
    report_database(&mut md, &made);
    let archive = scratch.join("archive.db");
    let bare = bare_read(&db);
    let documents = documents_read(&db);
    let finding = finding_changes(&db);
    let backfill = backfill(&home, &archive);
    report_backfill(&mut md, &made, &bare, &documents, &backfill);
    report_finding(&mut md, &made, &finding);
    let run = Run::start(&home, &archive);
    let short = follow(&run, &db, &made.short, shape.follow);
    let long = follow(&run, &db, &made.long, shape.follow);
    report_following(&mut md, &shape, run.caught_up, &short, &long);
    let idle = idle(&run, shape.idle);
    report_idle(&mut md, &idle);
    run.stop();
    let _ = writeln!(md, "Load average at end {}.", machine::load());
    println!("\n{md}");
    fs::write(bench.join("database.md"), &md).expect("writing database.md");
    println!("wrote {}", bench.join("database.md").display());
    let _ = fs::remove_dir_all(&scratch);
}
