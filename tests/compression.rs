//! Records stored compressed: per record, with a dictionary trained from the harness's own
//! records, and every way out of the archive byte for byte.

use crate::util::{Env, stderr};
use std::fs;
use std::path::{Path, PathBuf};

const SESSION: &str = "3d2f8a41-6b0c-4e57-9a1d-2c7e5f90b813";

/// A Claude Code session file under the env's HOME.
fn session_path(env: &Env) -> PathBuf {
    let project = env
        .dir
        .path()
        .join("home/.claude/projects/-home-dana-src-ledger");
    fs::create_dir_all(&project).unwrap();
    project.join(format!("{SESSION}.jsonl"))
}

/// Claude Code records `from..to`, each different, about 700 bytes.
fn transcript(from: usize, to: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in from..to {
        let (kind, text) = match i % 2 {
            0 => (
                "user",
                format!("Why does test {i} of the ledger fail after rounding?"),
            ),
            _ => (
                "assistant",
                format!(
                    "Step {i}: `cargo test ledger::rounding_{i}` fails because the half-even rule rounds {i}.5 down; the fix is in src/round.rs line {}.",
                    i * 3
                ),
            ),
        };
        let record = serde_json::json!({
            "parentUuid": format!("8d0e1f2a-0001-4000-8000-{:012}", i.saturating_sub(1)),
            "isSidechain": false,
            "userType": "external",
            "cwd": "/home/dana/src/ledger",
            "sessionId": SESSION,
            "version": "2.0.14",
            "gitBranch": "fix/rounding",
            "type": kind,
            "message": {"role": kind, "content": [{"type": "text", "text": text}],
                        "usage": {"input_tokens": i * 13 % 997, "output_tokens": i * 7 % 331}},
            "uuid": format!("8d0e1f2a-0001-4000-8000-{i:012}"),
            "timestamp": format!("2026-11-28T09:{:02}:{:02}.{:03}Z", i / 60 % 60, i % 60, i % 1000),
        });
        serde_json::to_writer(&mut out, &record).unwrap();
        out.push(b'\n');
    }
    out
}

fn run_once(env: &Env, config: Option<&str>) -> String {
    if let Some(text) = config {
        env.write_config(text);
    }
    env.run_once_home()
}

/// What `export` gives back, as the file it came from: each record with its `\n`.
fn exported(env: &Env) -> Vec<u8> {
    (env.records().iter())
        .flat_map(|r| r.bytes().chain([b'\n']))
        .collect()
}

fn cli(env: &Env, args: &[&str]) -> Vec<u8> {
    let out = env
        .cmd()
        .args(args)
        .arg("--db")
        .arg(&env.db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    out.stdout
}

/// (dictionary named by the frame, or `None` for none or a raw record) of every record
/// after `seq`.
fn frames_after(db: &Path, seq: i64) -> Vec<Option<Option<u32>>> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn
        .prepare("SELECT record FROM records WHERE seq > ?1 ORDER BY seq")
        .unwrap();
    let rows = stmt.query_map([seq], |r| r.get::<_, Vec<u8>>(0)).unwrap();
    rows.map(|r| {
        let stored = r.unwrap();
        (stored.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]))
            .then(|| zstd::zstd_safe::get_dict_id_from_frame(&stored).map(|id| id.get()))
    })
    .collect()
}

#[test]
fn a_session_is_stored_compressed_with_its_harness_dictionary_and_comes_back_byte_for_byte() {
    let env = Env::new();
    let path = session_path(&env);
    fs::write(&path, transcript(0, 2400)).unwrap();
    let log = run_once(&env, None);
    assert!(
        log.contains("trained a compression dictionary for claude-code"),
        "{log}"
    );
    let dictionaries = env.sql("SELECT id FROM dictionaries WHERE harness = 'claude-code'");
    assert_eq!(dictionaries.len(), 1);
    let id: u32 = dictionaries[0].parse().unwrap();
    // Before the dictionary, records were compressed without one.
    let first = frames_after(&env.db, 0);
    assert_eq!(first.len(), 2400);
    assert!(first.iter().all(|f| *f == Some(None)), "{:?}", &first[..3]);

    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, &transcript(2400, 2700)).unwrap();
    run_once(&env, None);
    let later = frames_after(&env.db, 2400);
    assert_eq!(later.len(), 300);
    assert!(
        later.iter().all(|f| *f == Some(Some(id))),
        "{:?}",
        &later[..3]
    );

    // Out of the archive, byte for byte: export, show --format raw, restore.
    let written = fs::read(&path).unwrap();
    assert!(exported(&env) == written, "export differs from the file");
    assert!(
        cli(&env, &["show", SESSION, "--format", "raw"]) == written,
        "show differs"
    );
    fs::remove_file(&path).unwrap();
    cli(&env, &["restore", SESSION]);
    assert!(fs::read(&path).unwrap() == written, "restore differs");

    let storage = &env.status()["storage"];
    assert_eq!(storage["record_bytes"], written.len() as u64 - 2700);
    assert_eq!(storage["dictionaries"], 1);
    let stored: u64 = storage["stored_bytes"].as_u64().unwrap();
    assert!(stored < written.len() as u64, "{storage}");
    // As a person sees it.
    let inner = format!("{} status --db {}", crate::util::BIN, env.db.display());
    let screen = crate::util::on_a_terminal(&env, &inner);
    let bytes = storage["record_bytes"].as_u64().unwrap() as f64;
    let line = format!(
        "storage: records {:.1} MB stored in {:.1} MB ({:.1} %); 1 compression dictionary\n",
        bytes / 1e6,
        stored as f64 / 1e6,
        100.0 * stored as f64 / bytes
    );
    assert!(screen.replace("\r\n", "\n").contains(&line), "{screen}");
    // With the dictionary, a record takes a fraction of what it takes without one.
    let size = |q: &str| env.sql(q)[0].parse::<u64>().unwrap();
    let with = size("SELECT sum(length(record)) FROM records WHERE seq > 2400");
    let without = size("SELECT sum(length(record)) FROM records WHERE seq BETWEEN 2101 AND 2400");
    let raw = transcript(2400, 2700).len() as u64 - 300;
    assert!(
        with * 4 < raw && with * 2 < without,
        "{with} {without} {raw}"
    );
}

#[test]
fn compress_false_stores_records_as_they_are_and_an_archive_may_hold_both() {
    let env = Env::new();
    let path = session_path(&env);
    fs::write(&path, transcript(0, 100)).unwrap();
    run_once(&env, Some("compress = false\n"));
    assert!(frames_after(&env.db, 0).iter().all(Option::is_none));
    let storage = &env.status()["storage"];
    assert_eq!(storage["record_bytes"], storage["stored_bytes"]);

    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, &transcript(100, 200)).unwrap();
    run_once(&env, Some(""));
    assert!(frames_after(&env.db, 100).iter().all(|f| *f == Some(None)));
    assert!(
        exported(&env) == fs::read(&path).unwrap(),
        "export differs from the file"
    );
}

#[test]
fn compact_stores_an_uncompressed_archive_again_smaller_and_byte_for_byte() {
    let env = Env::new();
    let path = session_path(&env);
    fs::write(&path, transcript(0, 1500)).unwrap();
    run_once(&env, Some("compress = false\n"));
    let before = env.records();
    assert!(frames_after(&env.db, 0).iter().all(Option::is_none));
    let file_before = fs::metadata(&env.db).unwrap().len();

    let out = cli(&env, &["compact", "--json"]);
    let done: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(done["records"], 1500);
    assert_eq!(done["rewritten"], 1500);
    assert_eq!(done["trained"], serde_json::json!(["claude-code"]));
    let id = env.sql("SELECT id FROM dictionaries")[0]
        .parse::<u32>()
        .unwrap();
    assert!(
        frames_after(&env.db, 0)
            .iter()
            .all(|f| *f == Some(Some(id)))
    );
    assert_eq!(env.records(), before);
    let storage = &env.status()["storage"];
    assert_eq!(storage["stored_bytes"], done["stored_after"]);
    let stored = storage["stored_bytes"].as_u64().unwrap();
    assert!(
        stored * 4 < done["record_bytes"].as_u64().unwrap(),
        "{done}"
    );
    assert!(fs::metadata(&env.db).unwrap().len() < file_before, "{done}");

    // The daemon's archive is not compacted under it.
    let mut daemon = env.cmd();
    daemon.args(["run", "--db"]).arg(&env.db);
    let d = crate::util::Daemon::spawn(daemon, crate::util::TapReader::Read);
    d.wait_log("INFO  caught up sources=");
    let refused = env
        .cmd()
        .args(["compact", "--db"])
        .arg(&env.db)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("is in use by"),
        "{}",
        stderr(&refused)
    );
}

/// Pins that a large backfill is stored with one dictionary trained from lines spread over all
/// of it, and that its records wait for it: before, the first records of a backfill were
/// stored with no dictionary and most of the rest with ones trained from the first sessions
/// read (28.7 % of the real-shaped corpus's bytes, against 23 % now; BENCHMARKS.md).
#[test]
fn a_large_backfill_is_stored_with_one_dictionary_trained_from_all_of_it() {
    let env = Env::new();
    let mut lines = write_backlog(&env);
    let log = env.run_once(&[]);
    let dictionaries = env.sql("SELECT id FROM dictionaries WHERE harness = 'generic'");
    assert_eq!(dictionaries.len(), 1, "{log}");
    let id: u32 = dictionaries[0].parse().unwrap();
    let frames = frames_after(&env.db, 0);
    assert_eq!(frames.len(), lines.len());
    let other = frames.iter().position(|f| *f != Some(Some(id)));
    assert_eq!(
        other, None,
        "record {other:?} is not stored with dictionary {id}"
    );
    // Byte for byte, each record once.
    let mut exported: Vec<Vec<u8>> = (env.records().iter())
        .map(|r| r.bytes().chain([b'\n']).collect())
        .collect();
    exported.sort();
    lines.sort();
    assert!(exported == lines, "export differs from the files");
}

/// 90 sessions of about 0.8 MB in the env's watched root (past the 64 MiB from which a
/// backlog is sampled); their lines, each with its `\n`.
fn write_backlog(env: &Env) -> Vec<Vec<u8>> {
    let mut lines = Vec::new();
    for k in 0..90 {
        let bytes = transcript(k * 1500, (k + 1) * 1500);
        env.write(&format!("8d0e1f2a-0002-4000-8000-{k:012}.jsonl"), &bytes);
        lines.extend(bytes.split_inclusive(|b| *b == b'\n').map(<[u8]>::to_vec));
    }
    lines
}

/// Pins that only what is about to be archived is sampled: a history a root skips
/// (`start_at = "end"`) must not end up in a dictionary, which holds fragments of its samples
/// and takes one of the harness's dictionaries.
#[test]
fn a_large_history_that_is_not_archived_is_not_sampled() {
    let env = Env::new();
    write_backlog(&env);
    let config = format!(
        "archive = {:?}\n[watchers]\nclaude-code = false\ncodex = false\n\
         [[watch]]\npath = {:?}\nstart_at = \"end\"\n",
        env.db, env.root
    );
    env.write_config(&config);
    let out = env.cmd().args(["run", "--once"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(env.records().is_empty(), "start_at = end skips the history");
    assert_eq!(env.sql("SELECT count(*) FROM dictionaries"), ["0"]);
}
