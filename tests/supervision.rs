//! Running under a service manager: readiness and watchdog over a real notify socket, signals,
//! reloads, logs shaped for the journal, progress, and polling where watching fails.

use crate::util::*;
use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A datagram socket standing in for systemd's `NOTIFY_SOCKET`; every message it receives
/// arrives on `messages`.
struct NotifySocket {
    path: PathBuf,
    messages: crossbeam_channel::Receiver<String>,
}

impl NotifySocket {
    fn bind(env: &Env) -> NotifySocket {
        let path = env.dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = socket.recv(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                if tx.send(text).is_err() {
                    break;
                }
            }
        });
        NotifySocket { path, messages: rx }
    }

    /// Messages up to and including the first that contains `needle`.
    fn until(&self, needle: &str) -> Vec<String> {
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let m = self
                .messages
                .recv_deadline(deadline)
                .unwrap_or_else(|_| panic!("no notify message with {needle:?}; got {seen:?}"));
            let done = m.contains(needle);
            seen.push(m);
            if done {
                return seen;
            }
        }
    }
}

/// True when a tap line carries a record made by `records(tag, _)`.
fn tagged(line: &str, tag: &str) -> bool {
    line.contains(&format!("\"tag\":\"{tag}\""))
}

fn daemon_cmd(env: &Env) -> Command {
    crate::util::home_daemon_cmd(env)
}

#[test]
fn readiness_status_watchdog_and_stopping_reach_the_notify_socket() {
    let env = Env::new();
    let socket = NotifySocket::bind(&env);
    env.write("t.jsonl", &lines(&records("old", 3)));
    let mut cmd = daemon_cmd(&env);
    cmd.arg("--watch")
        .arg(&env.root)
        .env("NOTIFY_SOCKET", &socket.path)
        .env("WATCHDOG_USEC", "200000");
    let daemon = Daemon::spawn(cmd, TapReader::Read);
    let first = socket.until("READY=1");
    assert_eq!(first.len(), 1, "READY=1 comes first: {first:?}");
    assert!(first[0].contains("STATUS=watching 1 roots"), "{first:?}");
    // Ready means watched: a record appended now arrives through an event.
    let new = records("new", 1);
    env.append("t.jsonl", &lines(&new));
    let tap = daemon.take_tap(4);
    assert!(tagged(&tap[3], "new"), "{tap:?}");
    socket.until("records archived");
    // Keep-alives keep coming from the idle loop, at half the timeout.
    let start = std::time::Instant::now();
    for _ in 0..3 {
        socket.until("WATCHDOG=1");
    }
    assert!(
        start.elapsed() >= Duration::from_millis(150),
        "{:?}",
        start.elapsed()
    );
    let (status, _) = daemon.terminate();
    assert!(status.success());
    socket.until("STOPPING=1");
}

#[test]
fn no_watchdog_keep_alives_are_sent_for_another_process() {
    let env = Env::new();
    let socket = NotifySocket::bind(&env);
    let mut cmd = daemon_cmd(&env);
    cmd.arg("--watch")
        .arg(&env.root)
        .env("NOTIFY_SOCKET", &socket.path)
        .env("WATCHDOG_USEC", "20000")
        .env("WATCHDOG_PID", "1");
    let daemon = Daemon::spawn(cmd, TapReader::Read);
    socket.until("READY=1");
    daemon.wait_log("caught up");
    let (status, _) = daemon.terminate();
    assert!(status.success());
    let all = socket.until("STOPPING=1");
    assert!(
        !all.iter().any(|m| m.contains("WATCHDOG=1")),
        "WATCHDOG_PID names another process: {all:?}"
    );
}

/// A configuration that watches only `dirs`, with the test's archive.
fn watch_only(env: &Env, dirs: &[&Path]) {
    let mut text = format!("archive = {:?}\n{}", env.db, watchers_off_but(&[]));
    for d in dirs {
        text.push_str(&format!("[[watch]]\npath = {d:?}\n"));
    }
    env.write_config(&text);
}

#[test]
fn sighup_reloads_roots_without_reading_archived_records_again() {
    let env = Env::new();
    let (a, b) = (env.path("a"), env.path("b"));
    fs::create_dir_all(&a).unwrap();
    fs::create_dir_all(&b).unwrap();
    let a_recs = records("a", 3);
    let b_recs = records("b", 2);
    env.write("a/t.jsonl", &lines(&a_recs));
    env.write("b/t.jsonl", &lines(&b_recs));
    watch_only(&env, &[&a]);
    let mut cmd = env.cmd();
    cmd.args(["run", "--sink", "stdout", "--rescan-interval", "3600"]);
    let daemon = Daemon::spawn(cmd, TapReader::Read);
    assert!(daemon.take_tap(3).iter().all(|l| l.contains("/a/t.jsonl")));

    // Adding b: its records arrive, a's are not read again.
    watch_only(&env, &[&a, &b]);
    daemon.signal(libc::SIGHUP);
    let tap = daemon.take_tap(2);
    assert!(tap.iter().all(|l| l.contains("/b/t.jsonl")), "{tap:?}");
    daemon.wait_log("reload pass complete");

    // Removing a: appends there are no longer archived, b still flows.
    watch_only(&env, &[&b]);
    daemon.signal(libc::SIGHUP);
    daemon.wait_log(&format!("removed=[{a:?}]"));
    daemon.wait_log_times("reload pass complete", 2);
    assert_eq!(inotify_watches(daemon.pid()), 1, "only b is watched now");
    env.append("a/t.jsonl", &lines(&records("a-late", 1)));
    env.append("b/t.jsonl", &lines(&records("b-late", 1)));
    let next = daemon.take_tap(1);
    assert!(tagged(&next[0], "b-late"), "{next:?}");

    // A bad file changes nothing, and says why.
    env.write_config("watch = 5\n");
    daemon.signal(libc::SIGHUP);
    let log = daemon.wait_log("reload refused");
    assert!(log.contains("config.toml:1:9"), "{log}");
    env.append("b/t.jsonl", &lines(&records("b-after", 1)));
    assert!(tagged(&daemon.take_tap(1)[0], "b-after"));
    let (status, _) = daemon.terminate();
    assert!(status.success());
    assert_eq!(
        env.records_of("a/t.jsonl"),
        a_recs,
        "a: archived once, nothing late"
    );
    assert_eq!(env.records_of("b/t.jsonl").len(), 4);
}

/// Pins that a directory moved out of a root loses its watch: the kernel keeps the inotify
/// watch of a moved directory, which would go on reporting changes there under the path it
/// had in the root.
#[test]
fn a_directory_moved_out_of_the_root_is_no_longer_watched_and_one_moved_in_is() {
    let env = Env::new();
    let root = env.path("root");
    fs::create_dir_all(root.join("d")).unwrap();
    env.write("root/d/t.jsonl", &lines(&records("d", 1)));
    watch_only(&env, &[&root]);
    let mut cmd = env.cmd();
    cmd.args(["run", "--sink", "stdout"]);
    let daemon = Daemon::spawn(cmd, TapReader::Read);
    daemon.take_tap(1);
    assert_eq!(inotify_watches(daemon.pid()), 2, "the root and d");
    fs::rename(root.join("d"), env.path("away")).unwrap();
    wait_until("d's watch removed", || inotify_watches(daemon.pid()) == 1);
    fs::rename(env.path("away"), root.join("e")).unwrap();
    wait_until("e watched", || inotify_watches(daemon.pid()) == 2);
    env.append("root/e/t.jsonl", &lines(&records("e", 1)));
    let next = daemon.take_tap(1);
    assert!(tagged(&next[0], "e"), "{next:?}");
}

/// A root given as a symlink to a directory is followed, at the start and when the link
/// appears later: the directory it names is watched, not only those under it.
#[test]
fn a_root_given_as_a_symlink_to_a_directory_is_watched_through_the_link() {
    use std::os::unix::fs::symlink;
    let env = Env::new();
    let real = env.path("real");
    fs::create_dir_all(real.join("d")).unwrap();
    env.write("real/t.jsonl", &lines(&records("old", 1)));
    let (link, later) = (env.path("link"), env.path("later/link"));
    symlink(&real, &link).unwrap();
    fs::create_dir(env.path("later")).unwrap();
    let daemon = Daemon::start(&env, &[&link, &later], &[], TapReader::Read);
    daemon.take_tap(1);
    daemon.wait_log(&format!("root path={link:?} is a symlink to"));
    env.append("real/t.jsonl", &lines(&records("root", 1)));
    assert!(tagged(&daemon.take_tap(1)[0], "root"));
    env.write("real/new.jsonl", &lines(&records("new", 1)));
    assert!(tagged(&daemon.take_tap(1)[0], "new"));
    env.write("real/d/t.jsonl", &lines(&records("under", 1)));
    assert!(tagged(&daemon.take_tap(1)[0], "under"));

    let other = env.path("other");
    fs::create_dir(&other).unwrap();
    env.write("other/t.jsonl", &lines(&records("other", 1)));
    symlink(&other, &later).unwrap();
    assert!(tagged(&daemon.take_tap(1)[0], "other"));
    env.append("other/t.jsonl", &lines(&records("later", 1)));
    assert!(tagged(&daemon.take_tap(1)[0], "later"));
}

/// The inotify watches process `pid` holds, counted from `/proc/PID/fdinfo`.
fn inotify_watches(pid: i32) -> usize {
    watched_inodes(pid).len()
}

#[test]
fn a_second_sigint_exits_at_once() {
    let env = Env::new();
    env.write("t.jsonl", &lines(&records("old", 1)));
    let mut cmd = daemon_cmd(&env);
    cmd.arg("--watch").arg(&env.root).env("RUST_LOG", "debug");
    let mut daemon = Daemon::spawn(cmd, TapReader::Read);
    daemon.take_tap(1);
    daemon.wait_log("caught up");
    // Another process holds the archive's write lock, so the next commit waits (SQLite's
    // busy timeout is 10 s, then retries): the first SIGINT cannot finish before the second
    // arrives.
    let blocker = rusqlite::Connection::open(&env.db).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    env.append("t.jsonl", &lines(&records("new", 1)));
    // The backfill's commit was the first.
    daemon.wait_log_times("committing path=", 2);
    daemon.signal(libc::SIGINT);
    daemon.wait_log("stopping on signal 2");
    daemon.signal(libc::SIGINT);
    let (status, took) = daemon.wait_exit();
    assert_eq!(
        status.code(),
        Some(130),
        "a second SIGINT exits at once: {}",
        daemon.log()
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    blocker.execute_batch("ROLLBACK").unwrap();
    drop(blocker);
    // Commits are transactions: the record not committed is read again, once.
    env.run_once(&[]);
    assert_eq!(env.records_of("t.jsonl").len(), 2);
}

/// `run --once` with stderr in a file, and `JOURNAL_STREAM` naming `journal` (`DEV:INO`).
fn run_with_stderr_file(env: &Env, journal: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let log_path = env.dir.path().join("stderr.log");
    let file = fs::File::create(&log_path).unwrap();
    let meta = fs::metadata(journal).unwrap();
    let status = env
        .cmd()
        .args(["run", "--once", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root)
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .stderr(file)
        .status()
        .unwrap();
    assert!(status.success());
    fs::read_to_string(log_path).unwrap()
}

#[test]
fn under_the_journal_lines_carry_priorities_and_no_timestamps() {
    let env = Env::new();
    env.write("t.jsonl", b"{\"ok\":1}\nnot json\n");
    let log_path = env.dir.path().join("stderr.log");
    fs::write(&log_path, "").unwrap();
    let journal = run_with_stderr_file(&env, &log_path);
    assert!(
        journal.lines().any(|l| l.starts_with("<6>pass complete")),
        "{journal}"
    );
    assert!(
        journal.lines().any(|l| l.starts_with("<4>rejected")),
        "{journal}"
    );
    assert!(journal.lines().all(|l| l.starts_with('<')), "{journal}");

    // The variable names another file: stderr is not the journal.
    let other = env.dir.path().join("other");
    fs::write(&other, "").unwrap();
    let plain = run_with_stderr_file(&env, &other);
    let line = plain.lines().next().unwrap();
    assert!(line.starts_with("20") && line.contains(" INFO "), "{plain}");
    assert!(
        !plain.contains('\x1b'),
        "no colour when not a terminal: {plain:?}"
    );
}

#[test]
fn a_terminal_shows_a_backfill_progress_bar() {
    let env = Env::new();
    env.write("t.jsonl", &lines(&records("r", 2000)));
    let inner = format!(
        "{} run --once --db {} --watch {}",
        BIN,
        env.db.display(),
        env.root.display()
    );
    let out = on_a_terminal(&env, &inner);
    assert!(out.contains("backfill ["), "no bar drawn:\n{out}");
    assert!(out.contains("ETA"), "{out}");
    assert!(out.contains("files 0/1"), "{out}");
    assert!(out.contains("pass complete"), "{out}");
}

#[test]
fn outside_a_terminal_the_backfill_logs_its_progress() {
    let env = Env::new();
    env.write("a.jsonl", &lines(&records("a", 10)));
    env.write("b.jsonl", &lines(&records("b", 10)));
    let log = env.run_once(&["--progress-every", "0"]);
    assert_log_has(&log, "backfill progress files=1/2 ");
    assert!(log.contains("rate=") && log.contains("eta="), "{log}");
    let quiet = env.run_once(&[]);
    assert!(
        !quiet.contains("backfill progress"),
        "every 5s by default:\n{quiet}"
    );
}

#[test]
fn a_root_that_cannot_be_watched_is_polled() {
    let env = Env::new();
    fs::create_dir_all(env.path("a/b")).unwrap();
    env.write("a/b/t.jsonl", &lines(&records("old", 1)));
    // In a user namespace of its own, the daemon may hold one inotify watch: the root gets
    // it, its subdirectories cannot be watched.
    let script = format!(
        "echo 1 > /proc/sys/user/max_inotify_watches && exec {BIN} run --sink stdout \
         --rescan-interval 3600 --poll-interval 50ms --db {} --watch {}",
        env.db.display(),
        env.root.display()
    );
    let mut unshare = env.command("unshare");
    unshare.args(["--user", "--map-root-user", "sh", "-c", &script]);
    let daemon = Daemon::spawn(unshare, TapReader::Read);
    daemon.take_tap(1);
    let log = daemon.wait_log("polling it every 50ms");
    assert!(log.contains("max_user_watches"), "the fix is named:\n{log}");
    env.append("a/b/t.jsonl", &lines(&records("new", 1)));
    let tap = daemon.take_tap(1);
    assert!(tagged(&tap[0], "new"), "{tap:?}\n{}", daemon.log());
    let (status, _) = daemon.terminate();
    assert!(status.success());
}

#[test]
fn the_status_line_reports_the_bytes_not_yet_archived() {
    // An unfinished last line is lag: written to the transcript, in no record yet.
    let env = Env::new();
    let socket = NotifySocket::bind(&env);
    let mut bytes = lines(&records("old", 2));
    bytes.extend_from_slice(b"{\"unfinished\":");
    env.write("t.jsonl", &bytes);
    let mut cmd = daemon_cmd(&env);
    cmd.arg("--watch")
        .arg(&env.root)
        .env("NOTIFY_SOCKET", &socket.path);
    let daemon = Daemon::spawn(cmd, TapReader::Read);
    let caught_up = socket.until("records archived");
    let last = caught_up.last().unwrap();
    assert!(
        last.contains("2 records archived; lag 14 B"),
        "{caught_up:?}"
    );
    env.append("t.jsonl", b"1}\n");
    socket.until("3 records archived; lag 0 B");
    drop(daemon);
}
