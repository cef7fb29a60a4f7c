//! `seed` prefix marks and the start policy.

use crate::util::*;

fn seed(env: &Env, rel: &str, extra: &[&str]) -> std::process::Output {
    env.seed(&env.path(rel), extra)
}

fn seed_ok(env: &Env, rel: &str, extra: &[&str]) -> (String, String) {
    env.seed_ok(&env.path(rel), extra)
}

#[test]
fn prefix_seed_keeps_a_record_appended_during_boot() {
    // The race this pins: a writer appends between `seed` and the daemon's first look at the
    // file. A cursor taken at "end of file, whenever we look" would skip that record.
    let env = Env::new();
    let history = records("history", 4);
    env.write("s.jsonl", &lines(&history));
    let (out, _) = seed_ok(&env, "s.jsonl", &[]);
    let size = lines(&history).len();
    assert!(
        out.contains(&format!("history ends at offset {size} (4 records)")),
        "{out}"
    );
    assert!(out.contains(env.db.to_str().unwrap()), "{out}");
    env.append("s.jsonl", b"{\"during\":\"boot\"}\n");
    let log = env.run_once(&[]);
    assert_log_has(
        &log,
        &format!("offset={size} source=prefix skipped_records=4"),
    );
    assert_eq!(env.records(), vec![r#"{"during":"boot"}"#]);
}

#[test]
fn without_prefix_bytes_the_mark_is_the_end_of_the_last_complete_record() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"b\":2}\n{\"partial\":");
    let (out, _) = seed_ok(&env, "s.jsonl", &[]);
    assert!(
        out.contains("history ends at offset 16 (2 records)"),
        "{out}"
    );
    env.append("s.jsonl", b"3}\n");
    env.run_once(&[]);
    assert_eq!(env.records(), vec![r#"{"partial":3}"#]);
}

#[test]
fn prefix_bytes_inside_a_record_round_up_to_its_end_with_a_warning() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n");
    let (out, err) = seed_ok(&env, "s.jsonl", &["--prefix-bytes", "10"]);
    assert!(
        out.contains("history ends at offset 16 (2 records)"),
        "{out}"
    );
    assert_log_has(
        &err,
        "falls inside a record; the prefix ends with that record, at offset 16",
    );
    env.run_once(&[]);
    assert_eq!(env.records(), vec![r#"{"c":3}"#]);
}

#[test]
fn prefix_bytes_on_a_record_boundary_are_used_as_they_are() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"b\":2}\n");
    let (out, err) = seed_ok(&env, "s.jsonl", &["--prefix-bytes", "8"]);
    assert!(
        out.contains("history ends at offset 8 (1 records)"),
        "{out}"
    );
    assert!(!err.contains("WARN"), "{err}");
    env.run_once(&[]);
    assert_eq!(env.records(), vec![r#"{"b":2}"#]);
}

#[test]
fn prefix_bytes_past_the_last_complete_record_are_clamped_with_a_warning() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"b\"");
    let (out, err) = seed_ok(&env, "s.jsonl", &["--prefix-bytes", "1000"]);
    assert!(
        out.contains("history ends at offset 8 (1 records)"),
        "{out}"
    );
    assert_log_has(&err, "past the last complete record; clamped to offset 8");
    env.append("s.jsonl", b":2}\n");
    env.run_once(&[]);
    assert_eq!(env.records(), vec![r#"{"b":2}"#]);
}

#[test]
fn seeding_a_tracked_file_is_refused_with_its_cursor() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n");
    env.run_once(&[]);
    let out = seed(&env, "s.jsonl", &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("is already tracked (source 1, generation 0, cursor at offset 8)"),
        "{err}"
    );
    assert!(err.contains(env.path("s.jsonl").to_str().unwrap()), "{err}");
}

#[test]
fn a_mark_whose_prefix_changed_is_not_used_and_the_file_is_read_from_the_start() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n");
    seed_ok(&env, "s.jsonl", &[]);
    // Same inode, other bytes before the mark.
    std::fs::write(env.path("s.jsonl"), b"{\"z\":9}\n{\"b\":2}\n").unwrap();
    let log = env.run_once(&[]);
    assert_log_has(&log, "prefix mark not used");
    assert_eq!(env.records(), vec![r#"{"z":9}"#, r#"{"b":2}"#]);
    assert_eq!(env.sql("SELECT count(*) FROM prefix_marks"), vec!["0"]);
}

#[test]
fn a_mark_is_used_once() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n");
    seed_ok(&env, "s.jsonl", &[]);
    env.run_once(&[]);
    assert_eq!(env.sql("SELECT count(*) FROM prefix_marks"), vec!["0"]);
    // Truncated later: the new generation starts at 0, the mark does not apply again.
    env.write("s.jsonl", b"{\"b\":2}\n");
    env.run_once(&[]);
    assert_eq!(env.records(), vec![r#"{"b":2}"#]);
}

#[test]
fn start_at_end_skips_files_present_at_the_first_scan_only() {
    let env = Env::new();
    env.write("old.jsonl", b"{\"old\":1}\n{\"old\":2}\n{\"part");
    let log = env.run_once(&["--start-at", "end"]);
    assert_log_has(&log, "offset=20 source=end skipped_records=2");
    env.append("old.jsonl", b"ial\":3}\n");
    env.write("new.jsonl", b"{\"new\":1}\n");
    env.run_once(&["--start-at", "end"]);
    assert_eq!(env.records_of("old.jsonl"), vec![r#"{"partial":3}"#]);
    assert_eq!(env.records_of("new.jsonl"), vec![r#"{"new":1}"#]);
}

#[test]
fn seeding_works_while_another_process_holds_the_run_lock() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n");
    env.run_once(&[]);
    env.write("t.jsonl", b"{\"t\":1}\n");
    let lock = std::fs::File::open(lock_path(&env)).unwrap();
    lock.try_lock().unwrap();
    seed_ok(&env, "t.jsonl", &[]);
    let st = env
        .cmd()
        .args(["status", "--db"])
        .arg(&env.db)
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", stderr(&st));
}

fn lock_path(env: &Env) -> std::path::PathBuf {
    let mut p = env.db.as_os_str().to_owned();
    p.push(".lock");
    p.into()
}

#[test]
fn a_seeded_file_renamed_over_a_tracked_one_starts_at_its_mark() {
    // The new file holds the old one's bytes and more, so without the mark it would continue
    // the old source and forward the seeded history.
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n");
    env.run_once(&[]);
    let staging = env.dir.path().join("staging.jsonl");
    std::fs::write(&staging, b"{\"a\":1}\n{\"history\":2}\n").unwrap();
    env.seed_ok(&staging, &[]);
    std::fs::rename(&staging, env.path("s.jsonl")).unwrap();
    env.append("s.jsonl", b"{\"new\":3}\n");
    let log = env.run_once(&[]);
    assert_log_has(&log, "source=prefix skipped_records=2");
    assert_eq!(env.records(), vec![r#"{"a":1}"#, r#"{"new":3}"#]);
}

#[test]
fn start_at_end_does_not_skip_files_of_a_root_that_appears_later() {
    let env = Env::new();
    let later = env.dir.path().join("later");
    let run = |env: &Env| {
        let out = env
            .cmd()
            .args(["run", "--once", "--start-at", "end", "--db"])
            .arg(&env.db)
            .arg("--watch")
            .arg(&later)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    run(&env);
    std::fs::create_dir(&later).unwrap();
    std::fs::write(later.join("s.jsonl"), b"{\"first\":1}\n").unwrap();
    run(&env);
    assert_eq!(env.records(), vec![r#"{"first":1}"#]);
}

#[test]
fn a_restart_reports_the_sources_it_seeded_from_persisted_cursors() {
    let env = Env::new();
    env.write("a.jsonl", b"{\"a\":1}\n");
    env.write("b.jsonl", b"{\"b\":1}\n");
    env.run_once(&[]);
    let log = env.run_once(&[]);
    assert_log_has(&log, "seeded sources=2 source=persisted");
    let mut cmd = env.cmd();
    cmd.env("RUST_LOG", "debug")
        .args(["run", "--once", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root);
    let debug = stderr(&cmd.output().unwrap());
    assert_log_has(&debug, "offset=8 source=persisted skipped_records=0");
}

#[test]
fn files_read_from_their_first_byte_are_seeded_at_debug_and_counted_at_info() {
    // A first pass over a home seeds every session in it: a line each would bury the log.
    let env = Env::new();
    env.write("a.jsonl", b"{\"a\":1}\n");
    env.write("b.jsonl", b"{\"b\":1}\n");
    let info = env.run_once(&[]);
    assert!(
        !info.contains("seeded path="),
        "a seeded line at info:\n{info}"
    );
    assert_log_has(&info, "new_sources=2");
    env.write("c.jsonl", b"{\"c\":1}\n");
    let mut cmd = env.cmd();
    cmd.env("RUST_LOG", "debug")
        .args(["run", "--once", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root);
    let debug = stderr(&cmd.output().unwrap());
    assert_log_has(&debug, "offset=0 source=beginning skipped_records=0");
}
