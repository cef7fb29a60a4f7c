//! Archive faults: the daemon waits out what passes (a full disk) and loses nothing.

use crate::util::*;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Records of about 4 KiB each.
fn padded(tag: &str, n: usize) -> Vec<String> {
    let pad = "p".repeat(4000);
    (0..n)
        .map(|i| format!(r#"{{"tag":"{tag}","n":{i},"pad":"{pad}"}}"#))
        .collect()
}

/// Fills the filesystem under `path` with one file; panics if it takes more than 64 MiB (the
/// path would not be the small filesystem the test made).
fn fill(path: &Path) {
    let mut f = fs::File::create(path).unwrap();
    let chunk = vec![0u8; 16 * 1024];
    for _ in 0..4096 {
        if let Err(e) = f.write_all(&chunk).and_then(|()| f.sync_all()) {
            assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
            return;
        }
    }
    panic!("{path:?} took 64 MiB without filling up: not the test's small filesystem");
}

/// The archive warning is logged once, at WARN, with SQLite's `reason` in it.
fn assert_warned_of(log: &str, reason: &str) {
    let warnings: Vec<&str> = (log.lines())
        .filter(|l| l.contains("cannot write the archive"))
        .collect();
    assert!(
        warnings.len() == 1 && warnings[0].contains("WARN") && warnings[0].contains(reason),
        "one WARN naming {reason:?}:\n{log}"
    );
}

#[test]
fn a_full_disk_pauses_archiving_and_loses_nothing() {
    let env = Env::new();
    let state = env.dir.path().join("small");
    fs::create_dir_all(&state).unwrap();
    let db = state.join("archive.db");
    env.write("t.jsonl", &lines(&records("old", 3)));
    // The archive lives on a 2 MiB tmpfs mounted in a mount namespace of the daemon's own;
    // the test reaches it through /proc/PID/root.
    let script = format!(
        "mount -t tmpfs -o size=2m tmpfs {} && exec {BIN} run --sink stdout \
         --rescan-interval 3600 --db {} --watch {}",
        state.display(),
        db.display(),
        env.root.display()
    );
    let mut cmd = env.command("unshare");
    cmd.args(["--user", "--map-root-user", "--mount", "sh", "-c", &script]);
    let daemon = Daemon::spawn(cmd, TapReader::Read);
    daemon.take_tap(3);
    daemon.wait_log("caught up");
    let inside = PathBuf::from(format!("/proc/{}/root{}", daemon.pid(), state.display()));
    assert!(
        inside.join("archive.db").exists() && !db.exists(),
        "not the daemon's view"
    );

    let filler = inside.join("filler");
    fill(&filler);
    let new = padded("new", 200);
    env.append("t.jsonl", &lines(&new));
    let log = daemon.wait_log("cannot write the archive");
    // SQLite's own words: the hint after them mentions a full disk whatever the reason.
    assert_warned_of(&log, "database or disk is full");
    assert!(
        daemon.tap.try_recv().is_err(),
        "nothing is printed before it is committed"
    );

    fs::remove_file(&filler).unwrap();
    let tap = daemon.take_tap(new.len());
    let got: Vec<&str> = tap.iter().map(|l| raw_record(l)).collect();
    assert_eq!(
        got, new,
        "every record once, in order, after the space came back"
    );
    daemon.wait_log("archive writable again");
    // `export` in the daemon's namespaces, where the archive's path is the one it opened.
    let exported = env
        .command("nsenter")
        .args(["--target", &daemon.pid().to_string(), "--user", "--mount"])
        .args(["--preserve-credentials", BIN, "export", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&exported.stdout).lines().count(),
        203
    );
    let (status, _) = daemon.terminate();
    assert!(status.success());
}

#[test]
fn a_write_lock_held_by_another_process_pauses_archiving_and_loses_nothing() {
    // Another process holding the archive's write lock past SQLite's busy timeout (10 s, which
    // this test waits out) is a fault that passes: the daemon says why once, keeps the
    // records, prints nothing it has not committed, and commits them once the lock is gone.
    let env = Env::new();
    env.write("t.jsonl", &lines(&records("old", 3)));
    let daemon = Daemon::start(&env, &[], &[], TapReader::Read);
    daemon.take_tap(3);
    daemon.wait_log("caught up");
    let holder = rusqlite::Connection::open(&env.db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let new = records("new", 50);
    env.append("t.jsonl", &lines(&new));
    let log = daemon.wait_log("cannot write the archive");
    assert_warned_of(&log, "database is locked");
    assert!(
        daemon.tap.try_recv().is_err(),
        "nothing is printed before it is committed"
    );
    holder.execute_batch("ROLLBACK").unwrap();
    let tap = daemon.take_tap(new.len());
    let got: Vec<&str> = tap.iter().map(|l| raw_record(l)).collect();
    assert_eq!(
        got, new,
        "every record once, in order, after the lock was released"
    );
    daemon.wait_log("archive writable again");
    assert_eq!(env.records().len(), 3 + new.len());
    let (status, _) = daemon.terminate();
    assert!(status.success());
}
