//! Truncation and in-place rewrites start a new generation; earlier generations stay archived.

use crate::util::*;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::time::{Duration, SystemTime};

/// Bumps the mtime past the last read, so that a same-size rewrite is certain to change the
/// fingerprint even on a filesystem with coarse timestamps (see README, Known limits).
fn touch_later(env: &Env, rel: &str) {
    let f = File::options().write(true).open(env.path(rel)).unwrap();
    f.set_modified(SystemTime::now() + Duration::from_secs(5))
        .unwrap();
}

#[test]
fn truncation_starts_a_new_generation_and_keeps_the_old_one() {
    let env = Env::new();
    let old = records("old", 4);
    env.write("s.jsonl", &lines(&old));
    env.run_once(&[]);
    let new = records("new", 2);
    env.write("s.jsonl", &lines(&new));
    let log = env.run_once(&[]);
    assert_log_has(&log, "new generation");
    assert_log_has(&log, "truncated to");
    let mut want = old.clone();
    want.extend(new);
    assert_eq!(env.records(), want);
    assert_eq!(
        env.sql("SELECT DISTINCT generation FROM records ORDER BY generation"),
        vec!["0", "1"]
    );
    assert_eq!(
        env.sql("SELECT count(*) FROM events WHERE kind = 'generation_reset'"),
        vec!["1"]
    );
}

#[test]
fn a_same_size_rewrite_in_place_starts_a_new_generation() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"v\":\"aaaa\"}\n{\"v\":\"bbbb\"}\n");
    env.run_once(&[]);
    let f = OpenOptions::new()
        .write(true)
        .open(env.path("s.jsonl"))
        .unwrap();
    f.write_all_at(b"{\"v\":\"cccc\"}\n{\"v\":\"dddd\"}\n", 0)
        .unwrap();
    touch_later(&env, "s.jsonl");
    let log = env.run_once(&[]);
    assert_log_has(&log, "rewritten (marker windows differ)");
    assert_eq!(
        env.records(),
        vec![
            r#"{"v":"aaaa"}"#,
            r#"{"v":"bbbb"}"#,
            r#"{"v":"cccc"}"#,
            r#"{"v":"dddd"}"#
        ]
    );
}

#[test]
fn a_rewrite_that_also_grows_is_caught_by_the_tail_window_after_a_restart() {
    // Only the bytes just before the cursor change; the head window still matches.
    let env = Env::new();
    let head = records("head", 100);
    env.write("s.jsonl", &lines(&head));
    env.run_once(&[]);
    let mut rewritten = head[..99].to_vec();
    rewritten.push(r#"{"tag":"head","n":"X"}"#.to_owned());
    rewritten.push(r#"{"tag":"tail","n":0}"#.to_owned());
    env.write("s.jsonl", &lines(&rewritten));
    let log = env.run_once(&[]);
    assert_log_has(&log, "generation 0 -> 1: rewritten");
    assert_eq!(env.records().len(), 100 + 101);
}

#[test]
fn held_back_bytes_of_an_ended_generation_are_recorded_as_a_reject() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"half");
    env.run_once(&[]);
    env.write("s.jsonl", b"{\"b\":2}\n");
    env.run_once(&[]);
    let rows =
        env.sql("SELECT generation || ' ' || offset || ' ' || length || ' ' || raw FROM rejects");
    assert_eq!(rows, vec!["0 8 6 {\"half"]);
    let reason = env.sql("SELECT reason FROM rejects");
    assert!(
        reason[0].contains("incomplete record never completed"),
        "{reason:?}"
    );
}

#[test]
fn held_back_bytes_overwritten_before_their_line_ends_are_recorded() {
    // A writer that truncates to the last complete record and writes again.
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"partial\":");
    env.run_once(&[]);
    let f = OpenOptions::new()
        .write(true)
        .open(env.path("s.jsonl"))
        .unwrap();
    f.set_len(8).unwrap();
    drop(f);
    env.append("s.jsonl", b"{\"b\":2}\n");
    let log = env.run_once(&[]);
    assert_log_has(
        &log,
        "held-back bytes overwritten before their line was completed",
    );
    assert_eq!(env.records(), vec![r#"{"a":1}"#, r#"{"b":2}"#]);
    assert_eq!(env.sql("SELECT raw FROM rejects"), vec!["{\"partial\":"]);
    assert_eq!(
        env.sql("SELECT count(*) FROM events WHERE kind = 'held_back_dropped'"),
        vec!["1"]
    );
}
