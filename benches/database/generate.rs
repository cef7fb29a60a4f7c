//! The database, generated once and cached under `target/bench/database/`.

use crate::agent::{Agent, Session, apply, project_id};
use crate::{BYTES_PER_MESSAGE, FIXTURE, PROJECTS, RECIPE, SHORT, SPAN_DAYS, Shape, TABLES};
use rusqlite::{Connection, OpenFlags, params};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;
use testkit::records::Rng;

/// What was generated, kept beside the database.
#[derive(Serialize, Deserialize)]
pub(crate) struct Made {
    /// The database's file, and its tables' shares of it.
    pub(crate) bytes: u64,
    pub(crate) sessions: u64,
    pub(crate) messages: u64,
    pub(crate) parts: u64,
    pub(crate) events: u64,
    /// Bytes of `data` in `message`, `part` and `event`.
    pub(crate) message_data: u64,
    pub(crate) part_data: u64,
    pub(crate) event_data: u64,
    /// The followed sessions: the longest, and one of [`SHORT`] messages.
    pub(crate) long: String,
    pub(crate) short: String,
    pub(crate) generate_secs: f64,
}

/// The database of `shape` under `dir`, generated unless it is there; and what it holds.
pub(crate) fn cached_database(dir: &Path, shape: &Shape) -> (PathBuf, Made) {
    let db = dir.join(format!("{RECIPE}-{}.db", shape.mode));
    let about = db.with_extension("json");
    // The note is written last: with it, the database is whole.
    let noted = (fs::read(&about).ok()).and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(made) = noted.filter(|_| db.exists()) {
        eprintln!("database: {} (cached)", db.display());
        return (db, made);
    }
    fs::create_dir_all(dir).expect("creating target/bench/database");
    let partial = db.with_extension("partial");
    let _ = fs::remove_file(&partial);
    eprintln!("database: generating {} (once)", db.display());
    let start = Instant::now();
    let (long, short) = generate(&partial, shape);
    let mut made = measure(&partial, long, short);
    made.generate_secs = start.elapsed().as_secs_f64();
    fs::rename(&partial, &db).expect("renaming the generated database");
    fs::write(&about, serde_json::to_vec(&made).expect("serializes")).expect("writing its note");
    eprintln!(
        "database: {:.0} MB in {:.0} s",
        made.bytes as f64 / 1e6,
        made.generate_secs
    );
    (db, made)
}

/// The sessions' lengths, in messages: the long ones, the short followed one, then others of
/// 2–60 until the database is about its size.
fn plan(shape: &Shape) -> Vec<usize> {
    let mut lengths = shape.long.to_vec();
    lengths.push(SHORT);
    let mut rng = Rng::new(3);
    let mut total: usize = lengths.iter().sum();
    while (total as u64) * BYTES_PER_MESSAGE < shape.target {
        let n = rng.log_uniform(2.0, 60.0);
        lengths.push(n);
        total += n;
    }
    lengths
}

/// Writes the database at `path`; returns the ids of the longest session and the short
/// followed one. Sessions are written side by side: each has a start in the 90 days and a
/// time between its turns (the long ones span most of the 90 days), and the turn due first
/// is written next, as an agent used every day would have written them.
fn generate(path: &Path, shape: &Shape) -> (String, String) {
    let conn = Connection::open(path).expect("creating the database");
    conn.execute_batch(
        "PRAGMA page_size = 4096; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;",
    )
    .expect("pragmas");
    create_tables(&conn);
    for n in 0..PROJECTS {
        conn.execute(
            "INSERT INTO project (id, worktree, vcs, time_created, time_updated, sandboxes)
             VALUES (?1, ?2, 'git', 1785542400000, 1785542400000, '[]')",
            params![project_id(n), format!("/home/dev/src/project-{n}")],
        )
        .expect("a project");
    }
    let lengths = plan(shape);
    let base = 1_785_542_400_000; // 2026-08-01
    let span = SPAN_DAYS * 86_400_000;
    let mut rng = Rng::new(5);
    let mut due = BinaryHeap::new();
    let mut gaps = Vec::with_capacity(lengths.len());
    for (i, &n) in lengths.iter().enumerate() {
        let turns = (n as i64 / 3).max(1);
        let (start, gap) = if i < shape.long.len() {
            (base + rng.below(86_400_000) as i64, span * 9 / 10 / turns)
        } else {
            let start = base + (rng.unit() * span as f64) as i64;
            (start, 60_000 + rng.below(600_000) as i64)
        };
        gaps.push(gap);
        due.push(Reverse((start, i)));
    }
    let mut agent = Agent::new(7);
    let mut sessions: Vec<Option<Session>> = (0..lengths.len()).map(|_| None).collect();
    let mut ids = vec![String::new(); lengths.len()];
    let mut writes = 0;
    conn.execute_batch("BEGIN").expect("begin");
    while let Some(Reverse((mut at, i))) = due.pop() {
        let mut steps = Vec::new();
        let session = sessions[i].get_or_insert_with(|| {
            let (s, first) = agent.session(lengths[i], i % PROJECTS, at);
            ids[i] = s.id.clone();
            steps.push(first);
            s
        });
        for m in agent.turn(session, &mut at) {
            steps.extend(m.steps);
        }
        for w in steps.iter().flatten() {
            apply(&conn, &session.id, w).expect("writing a row");
            writes += 1;
        }
        if session.written < session.planned {
            due.push(Reverse((at + gaps[i], i)));
        } else {
            sessions[i] = None;
        }
        if writes >= 20_000 {
            conn.execute_batch("COMMIT; BEGIN").expect("commit");
            writes = 0;
        }
    }
    conn.execute_batch("COMMIT; PRAGMA journal_mode = WAL;")
        .expect("commit, and WAL mode as OpenCode keeps it");
    (ids[0].clone(), ids[shape.long.len()].clone())
}

/// The tables and indexes of [`TABLES`], as the recorded fixture has them.
fn create_tables(conn: &Connection) {
    let fixture = Connection::open_with_flags(FIXTURE, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("opening the recorded OpenCode database");
    let mut stmt = fixture
        .prepare(&format!(
            "SELECT sql FROM sqlite_master WHERE tbl_name IN ({TABLES}) AND sql IS NOT NULL
             ORDER BY type = 'index', rowid"
        ))
        .expect("reading its schema");
    let sql: Vec<String> = (stmt.query_map([], |r| r.get(0)))
        .expect("reading its schema")
        .map(|r| r.expect("a statement"))
        .collect();
    assert!(
        sql.len() >= 6,
        "the fixture's schema has the tables: {sql:?}"
    );
    for statement in sql {
        conn.execute_batch(&statement).expect("creating a table");
    }
}

/// What the database at `path` holds.
fn measure(path: &Path, long: String, short: String) -> Made {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("opening the database");
    let n = |sql: &str| -> u64 {
        (conn.query_row(sql, [], |r| r.get::<_, i64>(0))).unwrap_or_else(|e| panic!("{sql}: {e}"))
            as u64
    };
    Made {
        bytes: fs::metadata(path).map_or(0, |m| m.len()),
        sessions: n("SELECT count(*) FROM session"),
        messages: n("SELECT count(*) FROM message"),
        parts: n("SELECT count(*) FROM part"),
        events: n("SELECT count(*) FROM event"),
        message_data: n("SELECT sum(length(data)) FROM message"),
        part_data: n("SELECT sum(length(data)) FROM part"),
        event_data: n("SELECT sum(length(data)) FROM event"),
        long,
        short,
        generate_secs: 0.0,
    }
}
