//! The archive file: permissions, the single-writer lock, and crash safety.

use crate::util::*;
use serde_json::Value;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn mode(p: &std::path::Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_new_archive_is_private_and_an_existing_directory_is_left_alone() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n");
    env.run_once(&[]);
    assert_eq!(mode(&env.db), 0o600);
    assert_eq!(mode(env.db.parent().unwrap()), 0o700);
    let shared = env.dir.path().join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o755)).unwrap();
    let db = shared.join("a.db");
    let out = env
        .cmd()
        .args(["run", "--once", "--db"])
        .arg(&db)
        .arg("--watch")
        .arg(&env.root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(mode(&shared), 0o755);
    assert_eq!(mode(&db), 0o600);
}

#[test]
fn a_second_run_on_the_same_archive_is_refused_with_the_holders_pid() {
    let env = Env::new();
    env.run_once(&[]);
    let mut lock_path = env.db.as_os_str().to_owned();
    lock_path.push(".lock");
    let mut lock = fs::OpenOptions::new().write(true).open(&lock_path).unwrap();
    lock.try_lock().unwrap();
    lock.set_len(0).unwrap();
    writeln!(lock, "4242").unwrap();
    let out = env.run_once_output(&[]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("archive {} is in use", env.db.display())),
        "{err}"
    );
    assert!(err.contains("(pid 4242)"), "{err}");
}

#[test]
fn status_and_export_on_a_missing_archive_say_how_to_create_it() {
    let env = Env::new();
    let out = env
        .cmd()
        .args(["status", "--db"])
        .arg(&env.db)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("no archive at"), "{}", stderr(&out));
    assert!(!env.db.exists(), "status must not create an archive");
}

#[test]
fn sigkill_during_a_large_backfill_then_a_rerun_loses_and_duplicates_nothing() {
    let env = Env::new();
    let backfill = LargeBackfill::write(&env);
    // Tiny batches make thousands of commits, so the kill lands between two of them.
    let mut child = env
        .cmd()
        .args(["run", "--once", "--batch-bytes", "256", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let archived = env.db.exists() && archived(&env) > 100;
        if archived {
            break;
        }
        assert!(Instant::now() < deadline, "no progress");
        assert!(
            child.try_wait().unwrap().is_none(),
            "finished before the kill"
        );
        std::thread::yield_now();
    }
    child.kill().unwrap();
    child.wait().unwrap();
    backfill.finish_and_check(&env);
}

#[test]
fn the_archive_is_wal_at_the_current_schema_and_a_newer_schema_is_refused() {
    let env = Env::new();
    env.run_once(&[]);
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    let v: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(v, 12);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let out = env.run_once_output(&[]);
    assert!(
        stderr(&out).contains("has schema version 99, newer than this build understands"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_archive_of_the_first_schema_is_migrated_and_keeps_its_records_and_rejects() {
    let env = Env::new();
    fs::create_dir_all(env.db.parent().unwrap()).unwrap();
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    conn.execute_batch(include_str!("../src/archive/schema_v1.sql"))
        .unwrap();
    conn.execute_batch(
        "INSERT INTO sources (id, dev, ino, path, harness, generation, gone, created_ms)
             VALUES (1, 1, 1, CAST('/old.jsonl' AS BLOB), 'generic', 0, 1, 0);
         INSERT INTO cursors VALUES (1, 8, 8, 0, 8, 0, NULL, NULL, NULL, 0, x'', 0);
         INSERT INTO records (source_id, generation, offset, record) VALUES (1, 0, 0, CAST('{\"old\":1}' AS BLOB));
         INSERT INTO rejects VALUES (4, 1, 0, 8, 3, 'invalid JSON: old', CAST('bad' AS BLOB), 1000);
         PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(conn);
    env.write("s.jsonl", b"{\"new\":1}\n");
    env.run_once(&[]);
    assert_eq!(env.records(), vec![r#"{"old":1}"#, r#"{"new":1}"#]);
    assert_eq!(env.sql("PRAGMA user_version"), vec!["12"]);
    // The upgrade counts what the records stored before it take: all of it, uncompressed.
    assert_eq!(
        env.sql("SELECT bytes || ' ' || stored FROM sources ORDER BY id"),
        vec!["9 9", "9 9"]
    );
    assert_eq!(env.status()["storage"]["record_bytes"], 18);
    assert_eq!(
        env.sql("SELECT count(*) FROM state WHERE key <> 'machine_id'"),
        vec!["0"]
    );
    // The upgrade gives the archive its machine id, a version 4 UUID, made once.
    let machine = env.sql("SELECT value FROM state WHERE key = 'machine_id'");
    let id = machine[0].as_bytes();
    assert_eq!(
        (id.len(), id[8], id[13], id[14], id[18]),
        (36, b'-', b'-', b'4', b'-')
    );
    assert!(b"89ab".contains(&id[19]), "{machine:?}");
    env.run_once(&[]);
    assert_eq!(
        env.sql("SELECT value FROM state WHERE key = 'machine_id'"),
        machine
    );
    let rejects = env.rejects(&[]);
    assert_eq!(rejects.len(), 1);
    assert_eq!(rejects[0]["reason"], "invalid JSON: old");
    assert_eq!(rejects[0]["time"], "1970-01-01T00:00:01Z");
    assert_eq!(env.reject_raw(&rejects[0]["id"]), b"bad");
}

#[test]
fn held_back_bytes_of_an_archive_of_the_second_schema_are_kept_and_become_a_reject() {
    // A v2 archive kept the held-back bytes only in its cursor row: the migration must carry
    // them over, so that the reject recorded when the generation ends still has them.
    // A gone source's held-back bytes were recorded when it went (v2 left them in its cursor):
    // they must not be carried over, to be recorded a second time.
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"cut");
    env.write("g.jsonl", b"{\"g\":1}\n{\"gone");
    env.run_once(&[]);
    fs::remove_file(env.path("g.jsonl")).unwrap();
    env.run_once(&[]);
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    conn.execute_batch(
        "DROP TABLE held_back;
         DROP TABLE consumers;
         DROP TABLE sinks; DROP TABLE dead_letters; DROP TABLE sink_state;
         DELETE FROM state WHERE key = 'machine_id';
         DROP TABLE dictionaries;
         ALTER TABLE sources DROP COLUMN bytes; ALTER TABLE sources DROP COLUMN stored;
         DROP TABLE machines; DROP TABLE pulls; DROP TABLE pulled_sessions; DROP INDEX sources_remote;
         ALTER TABLE sources DROP COLUMN machine; ALTER TABLE sources DROP COLUMN remote_id;
         DROP TABLE snapshots;
         DROP TABLE tags; DROP TABLE marks; DROP TABLE mark_changes;
         UPDATE cursors SET held_back = 6, held_back_prefix = CAST('{\"gone' AS BLOB)
             WHERE source_id = (SELECT id FROM sources WHERE gone = 1);
         PRAGMA user_version = 2;",
    )
    .unwrap();
    drop(conn);
    env.write("s.jsonl", b"{\"b\":2}\n");
    env.run_once(&[]);
    assert_eq!(env.sql("PRAGMA user_version"), vec!["12"]);
    assert_eq!(
        env.sql(
            "SELECT offset || ' ' || length || ' ' || CAST(raw AS TEXT) FROM rejects ORDER BY id"
        ),
        vec!["8 6 {\"gone", "8 5 {\"cut"]
    );
    assert_eq!(env.sql("SELECT count(*) FROM held_back"), vec!["0"]);
    assert_eq!(
        env.sql("SELECT held_back FROM cursors ORDER BY source_id"),
        vec!["0", "0"]
    );
}

#[test]
fn corrupted_cursor_rows_are_reported_and_skipped_while_the_others_carry_on() {
    // A damaged archive must not panic the daemon, nor make it allocate whatever a row
    // claims, nor read a file again from its start as a new source: each bad row's source is
    // skipped, named in the log, in an event and in `status`; the others are read as usual.
    let env = Env::new();
    for name in ["a", "b", "c", "d", "e", "ok"] {
        env.write(&format!("{name}.jsonl"), b"{\"n\":1}\n");
    }
    env.run_once(&[]);
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    let corrupt = |name: &str, set: &str| {
        let sql = format!(
            "UPDATE cursors SET {set} WHERE source_id =
                 (SELECT id FROM sources WHERE CAST(path AS TEXT) LIKE '%/{name}.jsonl')"
        );
        assert_eq!(conn.execute(&sql, []).unwrap(), 1, "{sql}");
    };
    corrupt("a", "tail_len = 5000");
    corrupt("b", "head_len = -3");
    corrupt("c", "held_back = 2, held_back_prefix = zeroblob(70000)");
    corrupt("d", "offset = 'eight'");
    corrupt("e", "size = -1");
    drop(conn);
    for name in ["a", "b", "c", "d", "e", "ok"] {
        env.append(&format!("{name}.jsonl"), b"{\"n\":2}\n");
    }
    fs::rename(env.path("e.jsonl"), env.path("moved-e.jsonl")).unwrap();
    let log = env.run_once(&[]);
    assert_eq!(
        counter(&log, "new_sources"),
        0,
        "no file is taken for new: {log}"
    );
    assert_eq!(counter(&log, "records"), 1, "only ok.jsonl is read: {log}");
    for (name, why) in [
        ("a", "tail window 5000 is longer than 8 bytes"),
        ("b", "head window is negative (-3)"),
        ("c", "held-back prefix of 70000 bytes for 2 held-back bytes"),
        ("d", "Invalid column type Text at index: 10"),
        ("e", "size is negative (-1)"),
    ] {
        let line = log
            .lines()
            .find(|l| {
                l.contains(&format!("/{name}.jsonl\"")) && l.contains("cursor row is invalid")
            })
            .unwrap_or_else(|| panic!("no warning for {name}: {log}"));
        assert!(line.contains(why), "{line}");
    }
    assert_eq!(
        env.sql("SELECT count(*) FROM events WHERE kind = 'invalid_cursor'"),
        vec!["5"]
    );
    let st = env.status();
    let invalid: Vec<&Value> = (st["sources"].as_array().unwrap().iter())
        .filter(|s| !s["invalid"].is_null())
        .collect();
    assert_eq!(invalid.len(), 5, "{st}");
    assert_eq!(env.records_of("ok.jsonl"), vec![r#"{"n":1}"#, r#"{"n":2}"#]);
    assert_eq!(env.records_of("a.jsonl"), vec![r#"{"n":1}"#]);
}
