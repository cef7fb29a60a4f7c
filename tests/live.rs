//! The live daemon: `run --sink stdout` against real files, waiting on its log, its tap and
//! its archive, never on fixed sleeps.

use crate::util::*;
use std::fs;

const CAUGHT_UP: &str = "INFO  caught up sources=";

#[test]
fn an_appended_record_is_archived_then_tapped_without_another_event() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"n\":1}\n");
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"n":1}"#);
    let st = env.status();
    assert_eq!(st["running_pid"], d.pid());
    assert_eq!(st["caught_up"]["sources"], 1);
    assert_eq!(st["caught_up"]["records"], 1);
    env.append("s.jsonl", b"{\"n\":2}\n");
    let line = &d.take_tap(1)[0];
    assert!(line.starts_with("{\"seq\":2,"), "{line}");
    // Printed only after the commit: it is already in the archive.
    assert_eq!(env.records(), vec![r#"{"n":1}"#, r#"{"n":2}"#]);
    let (status, _) = d.terminate();
    assert!(status.success());
}

#[test]
fn a_partial_line_is_tapped_once_it_is_completed() {
    let env = Env::new();
    env.write("s.jsonl", b"");
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    env.append("s.jsonl", b"{\"half\":");
    env.append("s.jsonl", b"1}\n{\"next\":2}\n");
    let lines = d.take_tap(2);
    assert_eq!(raw_record(&lines[0]), r#"{"half":1}"#);
    assert_eq!(raw_record(&lines[1]), r#"{"next":2}"#);
}

#[test]
fn a_directory_that_arrives_with_files_inside_is_scanned() {
    // notify adds a watch for a new directory but reports nothing for what is already in it.
    let env = Env::new();
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    let outside = env.dir.path().join("staging/project");
    fs::create_dir_all(outside.join("session/subagents")).unwrap();
    fs::write(outside.join("a.jsonl"), b"{\"a\":1}\n").unwrap();
    fs::write(outside.join("session/subagents/b.jsonl"), b"{\"b\":1}\n").unwrap();
    fs::rename(&outside, env.path("project")).unwrap();
    let mut got: Vec<String> = d
        .take_tap(2)
        .iter()
        .map(|l| raw_record(l).to_owned())
        .collect();
    got.sort();
    assert_eq!(got, vec![r#"{"a":1}"#, r#"{"b":1}"#]);
    // And the new directories are watched from now on.
    env.append("project/session/subagents/b.jsonl", b"{\"b\":2}\n");
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"b":2}"#);
}

#[test]
fn a_root_that_does_not_exist_yet_is_waited_for_level_by_level() {
    let env = Env::new();
    let root = env.dir.path().join("later/projects/deep");
    let d = Daemon::start(&env, &[&root], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    d.wait_log("waiting for it at");
    fs::create_dir(env.dir.path().join("later")).unwrap();
    fs::create_dir(env.dir.path().join("later/projects")).unwrap();
    fs::create_dir(&root).unwrap();
    fs::write(root.join("s.jsonl"), b"{\"first\":1}\n").unwrap();
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"first":1}"#);
    // The scan that found the first record is over: only a watch on the new root sees this.
    fs::OpenOptions::new()
        .append(true)
        .open(root.join("s.jsonl"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"second\":2}\n"))
        .unwrap();
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"second":2}"#);
}

#[test]
fn a_root_deleted_and_recreated_is_watched_again() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"old\":1}\n");
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    d.take_tap(1);
    fs::remove_dir_all(&env.root).unwrap();
    d.wait_log("root removed");
    fs::create_dir(&env.root).unwrap();
    env.write("t.jsonl", b"{\"new\":1}\n");
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"new":1}"#);
    // Only a watch on the recreated root sees this one.
    env.append("t.jsonl", b"{\"new\":2}\n");
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"new":2}"#);
    let st = env.status();
    let gone: Vec<_> = st["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["gone"].clone())
        .collect();
    assert_eq!(
        gone,
        vec![true, false],
        "the deleted source keeps its archive"
    );
}

#[test]
fn the_first_append_after_a_long_idle_is_archived_at_once() {
    // With the periodic rescan an hour away, only the watch can deliver this record.
    let env = Env::new();
    env.write("s.jsonl", b"{\"n\":1}\n");
    let d = Daemon::start(&env, &[], &["--rescan-interval", "3600"], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    d.take_tap(1);
    // The idle period is the scenario, not a synchronisation.
    std::thread::sleep(std::time::Duration::from_secs(3));
    env.append("s.jsonl", b"{\"n\":2}\n");
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"n":2}"#);
}

#[test]
fn sigterm_during_a_large_backfill_exits_zero_quickly_and_a_restart_completes_it_once() {
    let env = Env::new();
    let backfill = LargeBackfill::write(&env);
    let d = Daemon::start(&env, &[], &["--batch-bytes", "256"], TapReader::Read);
    wait_until("the backfill to start", || archived(&env) > 100);
    let (status, took) = d.terminate();
    assert_eq!(status.code(), Some(0));
    assert!(took < std::time::Duration::from_secs(3), "took {took:?}");
    backfill.finish_and_check(&env);
}

#[test]
fn a_second_daemon_on_the_same_archive_is_refused() {
    let env = Env::new();
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    let out = env
        .cmd()
        .args(["run", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("is in use by another `transcript-sync run`"),
        "{err}"
    );
    assert!(err.contains(&format!("(pid {})", d.pid())), "{err}");
}

#[test]
fn tap_lines_keep_seq_order_across_direct_writes_and_the_tap_thread() {
    // Small commits are made on the reading thread and their lines written straight into an
    // empty stdout pipe; big batches and a pipe with unread data go through the writer and
    // tap threads. Mixing the paths must never reorder or lose a line.
    let env = Env::new();
    let big = records("big", 80_000);
    env.write("big.jsonl", &lines(&big));
    env.write("small.jsonl", b"");
    let (open, gate) = crossbeam_channel::bounded::<()>(0);
    // Batches of 300 KiB: the file's last, smaller batch must not overtake the queued ones.
    let daemon = Daemon::start(
        &env,
        &[],
        &["--batch-bytes", "300K"],
        TapReader::Gated(gate),
    );
    daemon.wait_log("caught up");
    let mut small = Vec::new();
    for i in 0..150 {
        let rec = format!(r#"{{"small":{i},"pad":"{}"}}"#, "s".repeat(500));
        env.append("small.jsonl", format!("{rec}\n").as_bytes());
        small.push(rec);
    }
    wait_until("the small records are archived", || {
        archived(&env) == (big.len() + small.len()) as u64
    });
    drop(open);
    // Appends while the tap thread drains its backlog must queue behind it.
    for i in 150..200 {
        let rec = format!(r#"{{"small":{i}}}"#);
        env.append("small.jsonl", format!("{rec}\n").as_bytes());
        small.push(rec);
    }
    let mut tap = daemon.take_tap(big.len() + small.len());
    // With the pipe drained, these go the direct way again.
    for i in 200..250 {
        let rec = format!(r#"{{"small":{i}}}"#);
        env.append("small.jsonl", format!("{rec}\n").as_bytes());
        small.push(rec);
        tap.extend(daemon.take_tap(1));
    }
    let seqs: Vec<i64> = tap
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_i64()
                .unwrap()
        })
        .collect();
    let expected: Vec<i64> = (1..=seqs.len() as i64).collect();
    assert_eq!(seqs, expected, "every line once, in seq order");
    let of = |file: &str| -> Vec<&str> {
        tap.iter()
            .filter(|l| l.contains(file))
            .map(|l| raw_record(l))
            .collect()
    };
    assert_eq!(of("/big.jsonl"), big);
    assert_eq!(of("/small.jsonl"), small);
    assert!(!daemon.log().contains("tap dropped"), "{}", daemon.log());
}

#[test]
fn a_long_live_backfill_does_not_grow_the_wal_to_its_own_size() {
    // Passive checkpoints cannot catch up with a backfill that commits back to back, so
    // without a bound the WAL grew as big as everything archived, and stayed that size.
    let env = Env::new();
    let pad = "w".repeat(4000);
    for f in 0..4 {
        let recs: Vec<String> = (0..6000)
            .map(|i| format!(r#"{{"f":{f},"i":{i},"p":"{pad}"}}"#))
            .collect();
        env.write(&format!("f{f}.jsonl"), &lines(&recs));
    }
    let d = Daemon::start(&env, &[], &["--batch-bytes", "1M"], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    let mut wal = env.db.as_os_str().to_owned();
    wal.push("-wal");
    let wal_size = fs::metadata(std::path::PathBuf::from(wal)).unwrap().len();
    // 96 MB archived; the WAL may hold 64 MiB plus the commit that crossed that line.
    assert!(wal_size < 70 << 20, "the WAL grew to {wal_size} bytes");
    drop(d);
}

#[test]
fn a_long_record_reaches_the_tap_whole_between_short_ones() {
    // A record over 64 KiB goes to the tap as a piece of its own rather than being copied
    // into its envelope; the line must still be one envelope with the record verbatim.
    let env = Env::new();
    env.write("t.jsonl", b"");
    let daemon = Daemon::start(&env, &[], &[], TapReader::Read);
    daemon.wait_log("caught up");
    let long = format!(r#"{{"tool_result":"{}"}}"#, "r".repeat(300 * 1024));
    let recs = vec![r#"{"n":1}"#.to_owned(), long, r#"{"n":2}"#.to_owned()];
    env.append("t.jsonl", &lines(&recs));
    let tap = daemon.take_tap(3);
    for (line, rec) in tap.iter().zip(&recs) {
        let envelope: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(envelope["seq"].is_i64());
        assert_eq!(raw_record(line), rec);
    }
}

#[test]
fn the_tap_survives_its_reader_closing_the_pipe() {
    let env = Env::new();
    let d = Daemon::start(&env, &[], &[], TapReader::Close);
    d.wait_log(CAUGHT_UP);
    env.write("s.jsonl", b"{\"n\":1}\n");
    d.wait_log("tap stopped");
    wait_until("the first record archived", || archived(&env) == 1);
    env.append("s.jsonl", b"{\"n\":2}\n");
    wait_until("archiving to go on", || archived(&env) == 2);
    let log = d.log();
    assert_eq!(log.matches("tap stopped").count(), 1, "{log}");
    let (status, _) = d.terminate();
    assert!(status.success());
}

#[test]
fn a_stalled_tap_is_dropped_and_archiving_goes_on() {
    let env = Env::new();
    let files = 2000;
    for i in 0..files {
        env.write(
            &format!("f{i:04}.jsonl"),
            format!("{{\"f\":{i}}}\n").as_bytes(),
        );
    }
    let mut d = Daemon::start(&env, &[], &[], TapReader::Stall);
    d.wait_log("tap dropped");
    d.wait_log(CAUGHT_UP);
    assert_eq!(archived(&env), files);
    assert_log_has(&d.log(), "export --since-seq");
    // A tap blocked on a pipe nobody reads must not keep the daemon from stopping.
    d.signal(libc::SIGTERM);
    let (status, took) = d.wait_exit();
    assert_eq!(status.code(), Some(0));
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
    // Once dropped, the tap is not waited for again: not when it is let go (which would stall
    // the commit that found it full for a second), nor at the stop.
    let log = d.wait_log("stopped; every record read was committed");
    assert!(!log.contains("stdout is not being read"), "{log}");
}

#[test]
fn the_seed_protocol_works_against_a_running_daemon() {
    // Write the synthesized prefix outside the tree, seed it, rename it in, then append: only
    // the appended record is forwarded, however soon the daemon looks.
    let env = Env::new();
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    let staging = env.dir.path().join("staging.jsonl");
    fs::write(&staging, lines(&records("history", 3))).unwrap();
    env.seed_ok(&staging, &[]);
    fs::rename(&staging, env.path("resumed.jsonl")).unwrap();
    env.append("resumed.jsonl", b"{\"after\":\"seed\"}\n");
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"after":"seed"}"#);
    // The log is read on a thread of its own: it may come after the tap.
    d.wait_log("source=prefix skipped_records=3");
    assert_eq!(env.records(), vec![r#"{"after":"seed"}"#]);
}

#[test]
fn a_directory_deleted_and_recreated_at_once_is_watched_again() {
    // The kernel drops the watches of a deleted directory even when the path is back by the
    // time the daemon hears of it.
    let env = Env::new();
    env.write("d/x.jsonl", b"{\"x\":1}\n");
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    d.take_tap(1);
    // Stopped, the daemon hears of the deletion only once the directory is back.
    d.signal(libc::SIGSTOP);
    fs::remove_dir_all(env.path("d")).unwrap();
    fs::create_dir(env.path("d")).unwrap();
    env.write("d/y.jsonl", b"{\"y\":1}\n");
    d.signal(libc::SIGCONT);
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"y":1}"#);
    env.append("d/y.jsonl", b"{\"y\":2}\n");
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"y":2}"#);
}

#[test]
fn a_symlinked_directory_moved_into_a_root_is_not_followed() {
    let env = Env::new();
    let outside = env.dir.path().join("outside");
    fs::create_dir_all(outside.join("sub")).unwrap();
    fs::write(outside.join("sub/x.jsonl"), b"{\"outside\":1}\n").unwrap();
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    let link = env.dir.path().join("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    fs::rename(&link, env.path("l")).unwrap();
    // Once this record is out, the daemon has seen the link arrive.
    env.write("real1.jsonl", b"{\"inside\":1}\n");
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"inside":1}"#);
    fs::OpenOptions::new()
        .append(true)
        .open(outside.join("sub/x.jsonl"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"outside\":2}\n"))
        .unwrap();
    env.write("real2.jsonl", b"{\"inside\":2}\n");
    assert_eq!(raw_record(&d.take_tap(1)[0]), r#"{"inside":2}"#);
    let (status, _) = d.terminate();
    assert!(status.success());
    assert_eq!(env.records(), vec![r#"{"inside":1}"#, r#"{"inside":2}"#]);
}

#[test]
fn the_wal_is_checkpointed_outside_commits_and_does_not_grow_without_bound() {
    // Commits never checkpoint (that would stall a record behind a copy of the WAL); the
    // checkpointer thread does it. Each round waits until the main file has taken the round's
    // records, so the WAL is reused instead of growing by every round. Which thread wrote
    // what comes from the kernel's per-thread I/O counts: the threads that commit write each
    // record once (into the WAL), the checkpointer once more (into the main file).
    let env = Env::new();
    // The records' bytes are weighed as written: stored as they are.
    env.write_config("compress = false\n");
    let d = Daemon::start_without_tap(&env);
    d.wait_log(CAUGHT_UP);
    let big = "x".repeat(4000);
    let mut expected = 0u64;
    let size = |p: &std::path::Path| fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = env.db.as_os_str().to_owned();
    wal.push("-wal");
    let wal = std::path::PathBuf::from(wal);
    for round in 0..3 {
        let recs: Vec<String> = (0..1200)
            .map(|i| format!(r#"{{"r":{round},"i":{i},"p":"{big}"}}"#))
            .collect();
        env.write(&format!("round{round}.jsonl"), &lines(&recs));
        expected += 1200;
        wait_until("the round archived", || archived(&env) == expected);
        // The session index's work is done before the WAL is measured (it reads the records).
        wait_until("the round indexed", || env.status()["index"]["behind"] == 0);
        let want = expected * 4000;
        wait_until(
            "the checkpointer to copy the round into the main file",
            || size(&env.db) > want,
        );
    }
    assert!(
        size(&wal) < 12_000_000,
        "the WAL grew to {} bytes",
        size(&wal)
    );
    let records = expected * 4000;
    let (checkpointer, others) = written_by_thread(d.pid(), "checkpointer");
    // The session index commits its own pages (and leaves checkpoints to the checkpointer
    // too, which the WAL bound above shows); only the archive's commits are weighed here.
    let (index, _) = written_by_thread(d.pid(), "session index");
    let others = others - index;
    assert!(
        checkpointer > records * 9 / 10,
        "the checkpointer wrote {checkpointer} bytes for {records} bytes of records"
    );
    assert!(
        others < records * 3 / 2,
        "the committing threads wrote {others} bytes for {records} bytes of records: they \
         checkpoint too"
    );
    drop(d);
}

/// Bytes written (`wchar`) by the threads of `pid` named `name`, and by all the others.
fn written_by_thread(pid: i32, name: &str) -> (u64, u64) {
    let (mut named, mut others) = (0, 0);
    for task in fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let io = fs::read_to_string(dir.join("io")).unwrap_or_default();
        let wchar = (io.lines())
            .find_map(|l| l.strip_prefix("wchar: "))
            .map_or(0, |n| n.trim().parse::<u64>().unwrap());
        if comm.trim() == name {
            named += wchar;
        } else {
            others += wchar;
        }
    }
    (named, others)
}

#[test]
fn every_envelope_names_its_source_the_same_before_and_after_a_move() {
    // A Codex session moves from sessions/ to archived_sessions/: the tap printed the old path
    // and `export` prints the new one, so only `source` ties the two together.
    let env = Env::new();
    env.write("sessions/rollout-1.jsonl", b"{\"n\":1}\n");
    env.write("other.jsonl", b"{\"other\":1}\n");
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    let parse = |l: &String| serde_json::from_str::<serde_json::Value>(l).unwrap();
    let before: Vec<_> = d.take_tap(2).iter().map(parse).collect();
    let first = before
        .iter()
        .find(|e| e["record"]["n"] == 1)
        .unwrap()
        .clone();
    fs::create_dir_all(env.path("archived_sessions")).unwrap();
    let archived = env.path("archived_sessions/rollout-1.jsonl");
    fs::rename(env.path("sessions/rollout-1.jsonl"), &archived).unwrap();
    env.append("archived_sessions/rollout-1.jsonl", b"{\"n\":2}\n");
    let after = parse(&d.take_tap(1)[0]);
    assert_eq!(after["path"], archived.to_str().unwrap());
    assert_ne!(first["path"], after["path"]);
    assert!(first["source"].is_i64(), "{first}");
    assert_eq!(first["source"], after["source"]);
    let exported: Vec<_> = env.export(&[]).iter().map(parse).collect();
    let session: Vec<_> = exported
        .iter()
        .filter(|e| e["record"]["n"].is_i64())
        .collect();
    assert_eq!(session.len(), 2);
    assert!(session.iter().all(|e| e["source"] == first["source"]));
    let other = exported.iter().find(|e| e["record"]["other"] == 1).unwrap();
    assert_ne!(other["source"], first["source"]);
}

/// The daemon's open handles on `path` (links in /proc/PID/fd).
fn handles_on(pid: i32, path: &std::path::Path) -> usize {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.filter_map(|fd| fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| {
            target == path || target.to_string_lossy() == format!("{} (deleted)", path.display())
        })
        .count()
}

/// Counts the `IN_OPEN` events of `path`, as the watcher's inotify sees them.
struct Opens(std::os::fd::OwnedFd);

impl Opens {
    fn watch(path: &std::path::Path) -> Opens {
        use rustix::fs::inotify;
        let fd = inotify::init(inotify::CreateFlags::NONBLOCK | inotify::CreateFlags::CLOEXEC)
            .expect("an inotify instance");
        inotify::add_watch(&fd, path, inotify::WatchFlags::OPEN).expect("a watch on the file");
        Opens(fd)
    }

    /// The `IN_OPEN` events since the last call.
    fn count(&self) -> usize {
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        let mut events = rustix::fs::inotify::Reader::new(&self.0, &mut buf);
        let mut n = 0;
        while events.next().is_ok() {
            n += 1;
        }
        n
    }
}

#[test]
fn a_file_being_appended_to_stays_open_between_reads_and_is_closed_when_idle_or_gone() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"n\":0}\n");
    let path = env.path("s.jsonl");
    let d = Daemon::start(&env, &[], &["--rescan-interval", "1"], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    d.take_tap(1);
    // One writer's handle for every append, so that every open seen is the daemon's.
    let mut writer = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut writer, b"{\"n\":1}\n").unwrap();
    d.take_tap(1);
    let opens = Opens::watch(&path);
    // Counted after each append (inotify merges an event with an unread one just like it).
    let mut opened = 0;
    for n in 2..10 {
        std::io::Write::write_all(&mut writer, format!("{{\"n\":{n}}}\n").as_bytes()).unwrap();
        assert_eq!(raw_record(&d.take_tap(1)[0]), format!("{{\"n\":{n}}}"));
        assert_eq!(handles_on(d.pid(), &path), 1);
        opened += opens.count();
    }
    assert_eq!(opened, 0, "the daemon opened the file again for appends");
    // Idle: closed (by the rescan after the idle time), and opened again for the next append.
    wait_until("the idle file closed", || handles_on(d.pid(), &path) == 0);
    std::io::Write::write_all(&mut writer, b"{\"n\":10}\n").unwrap();
    d.take_tap(1);
    assert_eq!(opens.count(), 1);
    // Deleted: the source is gone as before, and its space is let go.
    drop(writer);
    fs::remove_file(&path).unwrap();
    d.wait_log("source_gone");
    wait_until("the deleted file closed", || {
        handles_on(d.pid(), &path) == 0
    });
    assert_eq!(env.records().len(), 11);
}

/// How many times the daemon's thread named `name` has given up its core (it waits, then is
/// woken), from `/proc`.
fn times_woken(pid: i32, name: &str) -> u64 {
    voluntary_switches(&thread_named(pid, name)).expect("a count of voluntary switches")
}

/// How many times the thread whose `/proc` directory is `task` has been woken.
fn voluntary_switches(task: &std::path::Path) -> Option<u64> {
    let status = fs::read_to_string(task.join("status")).ok()?;
    let line = status
        .lines()
        .find(|l| l.starts_with("voluntary_ctxt_switches:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A daemon with a tap on one transcript, caught up, and the transcript open for appending.
fn daemon_on_one_file(env: &Env) -> (Daemon, fs::File) {
    env.write("s.jsonl", b"{\"n\":0}\n");
    let d = Daemon::start(env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    d.take_tap(1);
    let writer = fs::OpenOptions::new()
        .append(true)
        .open(env.path("s.jsonl"))
        .unwrap();
    (d, writer)
}

/// Appends records `1..=n`, one commit each: each append waits for the last one's envelope.
fn append_one_commit_each(d: &Daemon, writer: &mut fs::File, n: u64) {
    for i in 1..=n {
        std::io::Write::write_all(writer, format!("{{\"n\":{i}}}\n").as_bytes()).unwrap();
        d.take_tap(1);
    }
}

/// Pins that an append wakes only the thread that reads it. Through notify, every append woke
/// notify's own thread first, which woke the engine's: a hand-off on the way from each append
/// to the tap, about a quarter of its latency at 100 appends a second (BENCHMARKS.md).
///
/// The ordering is made the same on a quiet machine and a busy one: each append waits until
/// the engine sleeps in `poll(2)` again, so that it has to wake it (an append that comes while
/// the engine is still busy with the one before is found by its next `poll` without a
/// wake-up, as many were on a loaded machine). And the appends are the pieces of one line,
/// each read and held back, so that no record is committed until the last: the archive's
/// consumers, woken by new records (the session index, up to a few times a second), stay out
/// of the count.
#[test]
fn an_append_wakes_the_thread_that_reads_it_and_no_other() {
    const READ: &str = "DEBUG sync complete";
    let env = Env::new();
    env.write("s.jsonl", b"");
    let mut cmd = Daemon::command(&env, &[], &[]);
    cmd.env("RUST_LOG", "debug");
    let d = Daemon::spawn(cmd, TapReader::Read);
    d.wait_log(CAUGHT_UP);
    let engine = std::path::PathBuf::from(format!("/proc/{0}/task/{0}", d.pid()));
    let asleep = || wait_until("the engine asleep in poll", || asleep_in_poll(&engine));
    let mut writer = fs::OpenOptions::new()
        .append(true)
        .open(env.path("s.jsonl"))
        .unwrap();
    asleep();
    let (before, mut read) = (switches_by_thread(d.pid()), d.log().matches(READ).count());
    let appends = 100;
    for n in 0..appends {
        let piece = if n == 0 { "{\"pad\":\"" } else { "x" };
        std::io::Write::write_all(&mut writer, piece.as_bytes()).unwrap();
        read += 1;
        d.wait_log_times(READ, read);
        asleep();
    }
    let after = switches_by_thread(d.pid());
    let woken = |tid: &i32| after[tid].1 - before.get(tid).map_or(0, |(_, n)| *n);
    let engine_woken = woken(&d.pid());
    assert!(
        engine_woken >= appends,
        "the engine's thread woke {engine_woken} times for {appends} appends"
    );
    let others: Vec<(&str, u64)> = (after.iter())
        .filter(|(tid, _)| **tid != d.pid())
        .map(|(tid, (name, _))| (name.as_str(), woken(tid)))
        .filter(|(_, n)| *n >= appends / 2)
        .collect();
    assert_eq!(others, vec![], "other threads woken by every append");
    // What the engine read in pieces is one record.
    std::io::Write::write_all(&mut writer, b"\"}\n").unwrap();
    let want = format!("{{\"pad\":\"{}\"}}", "x".repeat(appends as usize - 1));
    assert_eq!(raw_record(&d.take_tap(1)[0]), want);
}

/// Whether the thread whose `/proc` directory is `task` sleeps in `poll(2)`: its state is
/// sleeping, in the system call numbered as poll or ppoll on this machine.
fn asleep_in_poll(task: &std::path::Path) -> bool {
    #[cfg(target_arch = "x86_64")]
    const POLL_CALLS: &[&str] = &["7", "271"];
    #[cfg(target_arch = "aarch64")]
    const POLL_CALLS: &[&str] = &["73"];
    let call = fs::read_to_string(task.join("syscall")).unwrap_or_default();
    let sleeping = stat_after_name(task).is_some_and(|s| s.starts_with("S "));
    sleeping && POLL_CALLS.contains(&call.split_whitespace().next().unwrap_or(""))
}

/// The fields of the thread's `stat` (in its `/proc` directory `task`) from the third on:
/// what follows the name in parentheses, which may hold spaces.
fn stat_after_name(task: &std::path::Path) -> Option<String> {
    let stat = fs::read_to_string(task.join("stat")).ok()?;
    Some(stat[stat.rfind(')')? + 2..].to_owned())
}

/// Each thread of `pid` by id: its name and how many times it has been woken.
fn switches_by_thread(pid: i32) -> std::collections::BTreeMap<i32, (String, u64)> {
    (threads(pid).into_iter())
        .filter_map(|(t, name)| {
            let tid = t.file_name()?.to_str()?.parse().ok()?;
            Some((tid, (name, voluntary_switches(&t)?)))
        })
        .collect()
}

/// Each thread of `pid` still running: its `/proc` directory and its name.
fn threads(pid: i32) -> Vec<(std::path::PathBuf, String)> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    (tasks.map(|t| t.unwrap().path()))
        .filter_map(|t| {
            let comm = fs::read_to_string(t.join("comm")).ok()?;
            Some((t, comm.trim_end().to_owned()))
        })
        .collect()
}

/// The `/proc` directory of the thread of `pid` named `name`.
fn thread_named(pid: i32, name: &str) -> std::path::PathBuf {
    (threads(pid).into_iter())
        .find_map(|(t, n)| (n == name).then_some(t))
        .unwrap_or_else(|| panic!("no thread named {name:?}"))
}

/// The scheduling policy of each thread of `pid`, by name: field 41 of its `stat`.
fn policies(pid: i32) -> Vec<(String, u32)> {
    (threads(pid).into_iter())
        .filter_map(|(t, name)| {
            let policy = stat_after_name(&t)?
                .split_whitespace()
                .nth(41 - 3)?
                .parse()
                .ok()?;
            Some((name, policy))
        })
        .collect()
}

/// Pins that the session index works on a helper in the idle class while the cores have room
/// for it: any thread that wakes takes the core from it, so a record on its way never waits
/// for it (in a backfill on two cores at nice 10 it took a core from the archive's writer for
/// much of the time, BENCHMARKS.md). That the index's own thread, where it works while other
/// programs keep the cores busy, and the checkpointer are in the batch class: their wake-ups
/// (the checkpointer's at the end of each of its fsyncs) do not preempt the engine. And that
/// every other thread is in the normal class.
#[test]
fn the_index_works_in_the_idle_class_its_thread_and_the_checkpointer_are_in_batch_and_nothing_else()
{
    const SCHED_OTHER: u32 = 0;
    const SCHED_BATCH: u32 = 3;
    const SCHED_IDLE: u32 = 5;
    let env = Env::new();
    let d = Daemon::start_without_tap(&env);
    d.wait_log(CAUGHT_UP);
    let want = |name: &str| match name {
        "index (idle)" => SCHED_IDLE,
        "session index" | "checkpointer" => SCHED_BATCH,
        _ => SCHED_OTHER,
    };
    // Set by each thread itself, when it starts.
    wait_until("the classes set", || {
        let set = policies(d.pid());
        ["index (idle)", "session index", "checkpointer"]
            .iter()
            .all(|n| set.iter().any(|(name, p)| name == n && *p == want(n)))
    });
    for (name, policy) in policies(d.pid()) {
        assert_eq!(policy, want(&name), "thread {name:?}");
    }
}

/// Other programs keeping one core busy: `n` shell loops pinned to it, killed when dropped.
struct BusyCore(Vec<std::process::Child>);

impl BusyCore {
    /// The first core this process may run on (a container may not have core 0).
    fn first() -> String {
        let status = fs::read_to_string("/proc/self/status").unwrap();
        let cpus = (status.lines())
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list in /proc/self/status");
        let first = cpus.trim().split([',', '-']).next().unwrap();
        first.to_owned()
    }

    fn start(n: usize) -> BusyCore {
        BusyCore(
            (0..n)
                .map(|_| {
                    std::process::Command::new("taskset")
                        .args(["-c", &BusyCore::first(), "sh", "-c", "while :; do :; done"])
                        .spawn()
                        .expect("taskset (util-linux)")
                })
                .collect(),
        )
    }
}

impl Drop for BusyCore {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The session index keeps up with the archive on a machine kept busy by other programs. In
/// the idle scheduling class it got almost no share of a busy core (a weight of 3 against
/// 1,024 for each busy loop), and `search` missed what was archived for as long as the
/// machine stayed busy: a store-outage test timed out that way under a full test run. Here
/// the daemon shares one core with three busy loops.
#[test]
fn the_session_index_keeps_up_on_a_core_kept_busy_by_other_programs() {
    let env = Env::new();
    env.write("s.jsonl", b"");
    let d = Daemon::start_without_tap(&env);
    d.wait_log(CAUGHT_UP);
    let pinned = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &BusyCore::first(), &d.pid().to_string()])
        .output()
        .expect("taskset (util-linux)");
    assert!(pinned.status.success(), "{}", stderr(&pinned));
    let _busy = BusyCore::start(3);
    let n = 2000;
    let lines: String = (1..=n)
        .map(|i| format!("{{\"type\":\"user\",\"text\":\"note {i} marker{i}\"}}\n"))
        .collect();
    env.append("s.jsonl", lines.as_bytes());
    wait_until("the records archived", || archived(&env) == n);
    let said = std::cell::RefCell::new(String::new());
    let found = || {
        let out = (env.cmd())
            .args(["search", &format!("marker{n}"), "--json", "--db"])
            .arg(&env.db)
            .output()
            .unwrap();
        *said.borrow_mut() = stderr(&out);
        String::from_utf8(out.stdout).unwrap().lines().count() == 1
    };
    let context = || format!("search said: {}\nlog:\n{}", said.borrow(), d.log());
    wait_until_else("the last record found by search", found, context);
}

/// Pins that the session index gathers live commits without being woken by each: waiting on
/// its queue, it was woken once per commit, which cost the writer a system call and the other
/// core a wake-up on the way from every append to the tap.
#[test]
fn the_session_index_is_not_woken_by_every_commit() {
    let env = Env::new();
    let (d, mut writer) = daemon_on_one_file(&env);
    let before = times_woken(d.pid(), "session index");
    append_one_commit_each(&d, &mut writer, 200);
    let woken = times_woken(d.pid(), "session index") - before;
    assert!(
        woken < 100,
        "the session index woke {woken} times for 200 commits"
    );
}
