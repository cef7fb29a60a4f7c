//! Sources are identities: moves keep them, replacements make new ones (unless only appended),
//! deletions mark them gone, and two paths to one file are one source.

use crate::util::*;
use std::fs;

#[test]
fn atomic_replacement_with_unrelated_content_is_a_new_source_linked_by_an_event() {
    let env = Env::new();
    let old = records("old", 3);
    env.write("s.jsonl", &lines(&old));
    env.run_once(&[]);
    let new = records("new", 2);
    env.replace_atomically("s.jsonl", &lines(&new));
    let log = env.run_once(&[]);
    assert_log_has(&log, "replaced path=");
    let mut want = old;
    want.extend(new);
    assert_eq!(env.records(), want);
    assert_eq!(env.sql("SELECT count(*) FROM sources"), vec!["2"]);
    assert_eq!(
        env.sql("SELECT gone FROM sources ORDER BY id"),
        vec!["1", "0"]
    );
    assert_eq!(
        env.sql("SELECT count(*) FROM events WHERE kind = 'replaced'"),
        vec!["1"]
    );
}

#[test]
fn atomic_replacement_that_only_appended_continues_the_source() {
    let env = Env::new();
    let all = records("r", 8);
    env.write("s.jsonl", &lines(&all[..5]));
    env.run_once(&[]);
    env.replace_atomically("s.jsonl", &lines(&all));
    let log = env.run_once(&[]);
    assert_log_has(&log, "continued path=");
    assert_eq!(env.records(), all);
    assert_eq!(env.sql("SELECT count(*) FROM sources"), vec!["1"]);
}

#[test]
fn a_file_moved_between_roots_keeps_its_source_and_cursor() {
    // A Codex session moved from sessions/ to archived_sessions/.
    let env = Env::new();
    let other = env.dir.path().join("archived");
    fs::create_dir_all(&other).unwrap();
    let both = |extra: &[&str]| {
        let mut args = vec!["--watch", other.to_str().unwrap()];
        args.extend_from_slice(extra);
        env.run_once(&args)
    };
    let all = records("m", 6);
    env.write("2026/11/s.jsonl", &lines(&all[..3]));
    both(&[]);
    let moved = other.join("s.jsonl");
    fs::rename(env.path("2026/11/s.jsonl"), &moved).unwrap();
    let log = both(&[]);
    assert_log_has(&log, "moved path=");
    assert_eq!(counter(&log, "records"), 0);
    std::fs::OpenOptions::new()
        .append(true)
        .open(&moved)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &lines(&all[3..])))
        .unwrap();
    both(&[]);
    assert_eq!(env.records(), all);
    assert_eq!(
        env.sql("SELECT path FROM sources"),
        vec![moved.to_str().unwrap()]
    );
}

#[test]
fn a_rename_within_a_root_and_a_new_file_at_the_old_name_are_told_apart() {
    let env = Env::new();
    let first = records("first", 3);
    env.write("s.jsonl", &lines(&first));
    env.run_once(&[]);
    fs::rename(env.path("s.jsonl"), env.path("s.1.jsonl")).unwrap();
    let second = records("second", 2);
    env.write("s.jsonl", &lines(&second));
    env.run_once(&[]);
    assert_eq!(env.records_of("s.1.jsonl"), first);
    assert_eq!(env.records_of("s.jsonl"), second);
}

#[test]
fn a_source_whose_cursor_verifies_nothing_is_not_followed_to_another_path() {
    // Regression: a truncated source (cursor at 0, its records in an earlier generation) whose
    // inode turned up at another path was taken to have moved there, and the records it had
    // archived were relabelled with a path they were never written at. With the cursor at 0
    // no marker window can tell a moved file from a reused inode: the crash loop met a
    // replacement's freed inode taken by another file's replacement. A rename stands in for
    // that reuse here, since the two look the same.
    let env = Env::new();
    let history = records("history", 3);
    env.write("a.jsonl", &lines(&history));
    env.run_once(&[]);
    let a = fs::OpenOptions::new().write(true).open(env.path("a.jsonl"));
    a.and_then(|f| f.set_len(0)).unwrap();
    env.run_once(&[]);
    fs::rename(env.path("a.jsonl"), env.path("b.jsonl")).unwrap();
    let (at_a, at_b) = (records("a", 2), records("b", 2));
    env.write("a.jsonl", &lines(&at_a));
    env.append("b.jsonl", &lines(&at_b));
    env.run_once(&[]);
    let mut written_at_a = history;
    written_at_a.extend(at_a);
    assert_eq!(env.records_of("a.jsonl"), written_at_a);
    assert_eq!(env.records_of("b.jsonl"), at_b);
}

#[test]
fn a_deleted_source_is_marked_gone_and_keeps_its_archive() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"partial");
    env.run_once(&[]);
    fs::remove_file(env.path("s.jsonl")).unwrap();
    let log = env.run_once(&[]);
    assert_log_has(&log, "source_gone path=");
    assert_eq!(env.records(), vec![r#"{"a":1}"#]);
    let st = env.status();
    assert_eq!(st["sources"][0]["gone"], true);
    assert_eq!(st["totals"]["gone"], 1);
    assert_eq!(env.sql("SELECT raw FROM rejects"), vec!["{\"partial"]);
}

#[test]
fn a_file_reachable_by_two_paths_is_one_source() {
    let env = Env::new();
    env.write("a.jsonl", &lines(&records("h", 2)));
    fs::hard_link(env.path("a.jsonl"), env.path("b.jsonl")).unwrap();
    let log = env.run_once(&[]);
    assert_log_has(&log, "same file under two paths");
    env.run_once(&[]);
    assert_eq!(env.records().len(), 2);
    assert_eq!(env.sql("SELECT count(*) FROM sources"), vec!["1"]);
}

#[test]
fn symlinks_are_not_followed_out_of_a_root() {
    let env = Env::new();
    let outside = env.dir.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("secret.jsonl"), b"{\"secret\":1}\n").unwrap();
    std::os::unix::fs::symlink(&outside, env.path("linkdir")).unwrap();
    std::os::unix::fs::symlink(outside.join("secret.jsonl"), env.path("link.jsonl")).unwrap();
    let log = env.run_once(&[]);
    assert!(env.records().is_empty());
    assert_log_has(&log, "a symlink, not followed");
}
