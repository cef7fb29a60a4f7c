//! Appends, partial lines, blank lines, bad lines, special files, and no needless reads.

use crate::util::*;
use std::os::unix::net::UnixListener;

#[test]
fn appended_records_are_archived_once_across_runs() {
    let env = Env::new();
    let all = records("a", 6);
    env.write("s.jsonl", &lines(&all[..3]));
    env.run_once(&[]);
    env.append("s.jsonl", &lines(&all[3..]));
    env.run_once(&[]);
    env.run_once(&[]);
    assert_eq!(env.records(), all);
}

#[test]
fn a_record_cut_at_any_byte_is_held_back_until_complete() {
    // One file per cut point, multi-byte UTF-8 included, so every cut is tried in two runs.
    let env = Env::new();
    let record = r#"{"text":"héllo → wörld ✓ 𝄞","n":1}"#;
    let bytes = format!("{record}\n").into_bytes();
    for cut in 1..bytes.len() {
        env.write(&format!("cut{cut:03}.jsonl"), &bytes[..cut]);
    }
    let log = env.run_once(&[]);
    assert_eq!(counter(&log, "records"), 0, "nothing is complete yet");
    assert_eq!(counter(&log, "held_back_files"), bytes.len() as u64 - 1);
    for cut in 1..bytes.len() {
        env.append(&format!("cut{cut:03}.jsonl"), &bytes[cut..]);
    }
    let log = env.run_once(&[]);
    assert_eq!(counter(&log, "rejects"), 0, "{log}");
    for cut in 1..bytes.len() {
        assert_eq!(
            env.records_of(&format!("cut{cut:03}.jsonl")),
            vec![record.to_owned()],
            "cut {cut}"
        );
    }
}

#[test]
fn crlf_endings_and_blank_lines_are_not_part_of_records() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\r\n\n   \n{\"b\":2}\n");
    let log = env.run_once(&[]);
    assert_eq!(env.records(), vec![r#"{"a":1}"#, r#"{"b":2}"#]);
    assert_eq!(counter(&log, "blank_lines"), 2);
}

#[test]
fn bad_lines_are_rejected_logged_and_skipped_without_blocking_the_rest() {
    let env = Env::new();
    let deep = "[".repeat(100_000) + &"]".repeat(100_000);
    let long = format!(r#"{{"big":"{}"}}"#, "x".repeat(300_000));
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"{\"ok\":1}\n");
    bytes.extend_from_slice(b"not json at all\n");
    bytes.extend_from_slice(b"{\"bad\":\"\xff\xfe\"}\n");
    bytes.extend_from_slice(b"{\"nul\":1}\0\n");
    bytes.extend_from_slice(format!("{deep}\n").as_bytes());
    bytes.extend_from_slice(format!("{long}\n").as_bytes());
    bytes.extend_from_slice(b"{\"ok\":2}\n");
    env.write("s.jsonl", &bytes);
    let log = env.run_once(&["--record-limit", "256K"]);
    assert_eq!(env.records(), vec![r#"{"ok":1}"#, r#"{"ok":2}"#]);
    assert_eq!(counter(&log, "rejects"), 5);
    assert_log_has(&log, "WARN  rejected path=");
    assert_log_has(&log, "offset=9 ");
    let reasons = env.sql("SELECT reason FROM rejects ORDER BY offset");
    assert!(reasons[3].contains("recursion limit"), "{reasons:?}");
    assert!(
        reasons[4].contains("longer than the record limit (262144 bytes)"),
        "{reasons:?}"
    );
    let raw = env.sql("SELECT length(raw) || '/' || length FROM rejects ORDER BY offset");
    assert_eq!(raw[3], "200000/200000", "a rejected line is kept whole");
    assert_eq!(
        raw[4], "262144/300010",
        "a line over the limit keeps the limit"
    );
    assert_eq!(
        env.sql("SELECT count(*) FROM events WHERE kind = 'reject'"),
        vec!["5"]
    );
}

#[test]
fn an_oversized_line_longer_than_a_batch_is_rejected_and_reading_goes_on() {
    let env = Env::new();
    let mut bytes = b"{\"before\":1}\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', 3 << 20));
    bytes.extend_from_slice(b"\n{\"after\":1}\n");
    env.write("s.jsonl", &bytes);
    let log = env.run_once(&["--record-limit", "1M", "--batch-bytes", "64K"]);
    assert_eq!(env.records(), vec![r#"{"before":1}"#, r#"{"after":1}"#]);
    assert_eq!(counter(&log, "rejects"), 1);
}

#[test]
fn fifos_and_sockets_named_jsonl_are_passed_over_without_blocking() {
    let env = Env::new();
    env.write("ok.jsonl", b"{\"a\":1}\n");
    let fifo = env.path("pipe.jsonl");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let _socket = UnixListener::bind(env.path("sock.jsonl")).unwrap();
    let log = env.run_once(&[]);
    assert_eq!(env.records(), vec![r#"{"a":1}"#]);
    assert_eq!(counter(&log, "passed_over"), 2);
    assert_log_has(&log, "a FIFO");
    assert_log_has(&log, "a socket");
    // A skip leaves a trace in the archive too, so it can be diagnosed after the fact.
    assert_eq!(
        env.sql("SELECT detail FROM events WHERE kind = 'passed_over' ORDER BY path"),
        vec![
            "not a regular file (a FIFO)",
            "not a regular file (a socket)"
        ]
    );
}

#[test]
fn an_unchanged_file_is_not_opened_again() {
    let env = Env::new();
    env.write("a.jsonl", &lines(&records("a", 3)));
    env.write("b.jsonl", &lines(&records("b", 3)));
    let log = env.run_once(&[]);
    assert_eq!(counter(&log, "opened"), 2);
    let log = env.run_once(&[]);
    assert_eq!(
        (counter(&log, "opened"), counter(&log, "unchanged")),
        (0, 2)
    );
    env.append("a.jsonl", b"{\"more\":1}\n");
    let log = env.run_once(&[]);
    assert_eq!(
        (counter(&log, "opened"), counter(&log, "unchanged")),
        (1, 1)
    );
}

#[test]
fn a_full_batch_yields_to_other_files() {
    // Small batches: the big file is read in many turns, interleaved with the small ones, and
    // its cursor is not taken for caught up until the last turn.
    let env = Env::new();
    let big = records("big", 2000);
    env.write("big.jsonl", &lines(&big));
    env.write("small.jsonl", &lines(&records("small", 2)));
    env.run_once(&["--batch-bytes", "1K"]);
    let seqs = env.sql(
        "SELECT min(r.seq) FROM records r JOIN sources s ON s.id = r.source_id GROUP BY s.path ORDER BY s.path",
    );
    let (big_first, small_first): (i64, i64) = (seqs[0].parse().unwrap(), seqs[1].parse().unwrap());
    assert!(
        small_first < big_first + 100,
        "small file waited for the big one: {seqs:?}"
    );
    assert_eq!(env.records_of("big.jsonl"), big);
    let log = env.run_once(&[]);
    assert_eq!(counter(&log, "opened"), 0);
}

#[test]
fn a_file_is_read_only_up_to_the_size_it_had_when_first_read_in_a_pass() {
    // A file that keeps growing must not hold a pass forever: what is appended after its first
    // read in a pass waits for the next pass. To append at that moment, not before nor after
    // the pass, the daemon's stderr is a pipe of one page that the test stops reading once
    // the big file's first batch is logged: the daemon then blocks on its next log lines,
    // well inside the file's hundreds of turns, and the test appends while it waits.
    use std::io::{BufRead, BufReader, Read};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let env = Env::new();
    let big = records("big", 6000);
    env.write("big.jsonl", &lines(&big));
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: pipe(2) just opened both; each is owned once from here on.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: F_SETPIPE_SZ takes an int and changes only the pipe's capacity.
    assert!(unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, 4096) } >= 4096);
    let mut child = (env.cmd().env("RUST_LOG", "debug"))
        .args(["run", "--once", "--batch-bytes", "1K", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root)
        .stderr(std::process::Stdio::from(write))
        .spawn()
        .unwrap();
    let mut log = BufReader::new(std::fs::File::from(read));
    let mut seen = String::new();
    while !seen.contains("committing path=") {
        seen.clear();
        assert!(log.read_line(&mut seen).unwrap() > 0, "no batch was logged");
    }
    let full = |fd: i32| {
        let mut unread: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer given.
        unsafe { libc::ioctl(fd, libc::FIONREAD, &mut unread) };
        unread >= 4096 - 200
    };
    wait_until("the daemon to block on a full stderr", || {
        full(log.get_ref().as_raw_fd())
    });
    let more = records("more", 5);
    env.append("big.jsonl", &lines(&more));
    let mut rest = String::new();
    log.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
    assert_eq!(counter(&rest, "records"), 6000, "{rest}");
    assert_eq!(
        env.records_of("big.jsonl"),
        big,
        "the appended records wait"
    );
    let log = env.run_once(&[]);
    assert_eq!(counter(&log, "records"), 5);
    assert_eq!(env.records_of("big.jsonl"), [big, more].concat());
}

#[test]
fn a_file_dated_far_in_the_future_is_read() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n");
    let f = std::fs::File::options()
        .write(true)
        .open(env.path("s.jsonl"))
        .unwrap();
    f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(10_000_000_000))
        .unwrap();
    env.run_once(&[]);
    let log = env.run_once(&[]);
    assert_eq!(counter(&log, "unchanged"), 1);
    assert_eq!(env.records(), vec![r#"{"a":1}"#]);
}

#[test]
fn a_record_of_several_mib_is_archived_and_exported_byte_for_byte() {
    // Records over 1 MiB are written into their row in place instead of being bound as one
    // value; what comes back must be the same bytes, next to small records in order.
    let env = Env::new();
    let big = format!(r#"{{"image":"{}"}}"#, "QUJD".repeat(768 * 1024));
    let recs = vec![
        r#"{"before":1}"#.to_owned(),
        big,
        r#"{"after":2}"#.to_owned(),
    ];
    env.write("t.jsonl", &lines(&recs));
    env.run_once(&[]);
    assert_eq!(env.records_of("t.jsonl"), recs);
}
