//! Live subscribers: the daemon's socket and `tail`. A subscriber gets the archived records it
//! asked for, `caught_up`, then each record as it commits, exactly once in `seq` order, also
//! when it attaches while appends run; a slow one is told `lagged` and resumes exactly; the
//! others never wait for it; `tail -f` goes on across a daemon restart.

use crate::util::{Daemon, Env, TapReader, lines, on_a_terminal, stderr, wait_until};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A daemon over the env's root, without a tap, with `extra` arguments.
fn daemon(env: &Env, extra: &[&str]) -> Daemon {
    let mut cmd = env.cmd();
    cmd.args(["run", "--rescan-interval", "3600", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root)
        .args(extra);
    let d = Daemon::spawn(cmd, TapReader::Read);
    d.wait_log("subscribers: listening");
    d
}

/// Where the daemon listens, as `status --json` says.
fn socket(env: &Env) -> PathBuf {
    PathBuf::from(env.status()["socket"].as_str().unwrap())
}

/// One subscriber on the socket.
struct Sub {
    reader: BufReader<UnixStream>,
}

impl Sub {
    /// Connects and sends `request` as the first line.
    fn attach(socket: &Path, request: &str) -> Sub {
        let mut stream = UnixStream::connect(socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        stream.write_all(b"\n").unwrap();
        Sub {
            reader: BufReader::new(stream),
        }
    }

    /// The next line, parsed; `None` at the end of the stream.
    fn line(&mut self) -> Option<Value> {
        let mut line = String::new();
        match self.reader.read_line(&mut line).unwrap() {
            0 => None,
            _ => Some(serde_json::from_str(&line).unwrap()),
        }
    }

    /// Lines until `n` envelopes came (or a control line other than `caught_up`): their seqs,
    /// the `caught_up` seq if one came, and the control line that ended it.
    fn records(&mut self, n: usize) -> Received {
        let mut got = Received::default();
        while got.seqs.len() < n {
            let Some(v) = self.line() else { break };
            match v["event"].as_str() {
                Some("caught_up") => {
                    assert!(got.caught_up.is_none(), "one caught_up: {v}");
                    got.caught_up = Some((v["seq"].as_i64().unwrap(), got.seqs.len()));
                }
                Some(_) => {
                    got.ended = Some(v);
                    break;
                }
                None => got.seqs.push(v["seq"].as_i64().unwrap()),
            }
        }
        got
    }
}

/// Asserts that `seqs` are `from..=to`, saying where they differ (not printing thousands).
fn assert_run(seqs: &[i64], from: i64, to: i64, what: &str) {
    let want: Vec<i64> = (from..=to).collect();
    if seqs != want {
        let at = seqs.iter().zip(&want).position(|(a, b)| a != b);
        panic!(
            "{what}: {} seqs from {:?} to {:?}, wanted {from}..={to}; first difference at {at:?}",
            seqs.len(),
            seqs.first(),
            seqs.last()
        );
    }
}

#[derive(Debug, Default)]
struct Received {
    seqs: Vec<i64>,
    /// The `caught_up` seq, and how many envelopes came before it.
    caught_up: Option<(i64, usize)>,
    ended: Option<Value>,
}

/// Waits until the daemon has published `n` records to subscribers: a probe that attaches
/// from now on is caught up at `n` (the archive's count can come a moment before).
fn wait_published(socket: &Path, n: i64) {
    wait_until("the records published", || {
        let mut probe = Sub::attach(socket, "{}");
        probe.line().unwrap()["seq"] == n
    });
}

/// Records of about `size` bytes each, numbered from `from`.
fn numbered(from: usize, n: usize, size: usize) -> Vec<String> {
    let pad = "x".repeat(size.saturating_sub(30));
    (from..from + n)
        .map(|i| format!(r#"{{"n":{i},"pad":"{pad}"}}"#))
        .collect()
}

/// Seqs 1..=n, as a subscriber from the start gets them.
fn all(n: usize) -> Vec<i64> {
    (1..=n as i64).collect()
}

/// A subscriber that attaches while records commit gets every record once, in order: the
/// archive's up to `caught_up`, then the live ones, with nothing lost or doubled at the
/// switch (the race this guards against: live output before the history it belongs to).
/// The ordering is made, not hoped for (and the archive is not a whole number of catch-up
/// pages, so that a catch-up reading past its end would show): the subscriber reads its first record (so it is
/// registered and its catch-up has begun), then stops reading, which holds the catch-up in
/// the middle of the archive while more records commit; only then does it read on.
#[test]
fn a_subscriber_attaching_mid_stream_gets_every_record_once_in_seq_order() {
    let env = Env::new();
    let before = 4_321;
    env.write("a.jsonl", &lines(&numbered(0, before, 1000)));
    let d = daemon(&env, &[]);
    let socket = socket(&env);
    wait_until("the first records archived", || {
        env.status()["totals"]["records"] == before
    });
    // Archived is not yet published: a subscriber attaching in between is caught up at 0.
    wait_published(&socket, before as i64);
    let mut sub = Sub::attach(&socket, r#"{"since_seq":0}"#);
    let first = sub.line().unwrap();
    assert_eq!(first["seq"], 1, "{first}");
    let during = 500;
    for chunk in numbered(before, during, 100).chunks(50) {
        env.append("a.jsonl", &lines(chunk));
    }
    wait_until("the appends archived", || {
        env.status()["totals"]["records"] == before + during
    });
    let mut seqs = vec![1];
    let caught_up = loop {
        let v = sub.line().expect("a line");
        match v["event"].as_str() {
            Some("caught_up") => break v["seq"].as_i64().unwrap(),
            _ => seqs.push(v["seq"].as_i64().unwrap()),
        }
    };
    let after = 300;
    env.append("a.jsonl", &lines(&numbered(before + during, after, 100)));
    let total = before + during + after;
    seqs.extend(sub.records(total - seqs.len()).seqs);
    assert_run(&seqs, 1, total as i64, "every record once, in order");
    // It was registered before the 500 committed (its catch-up had begun): they came live.
    assert!(
        (1..=before as i64).contains(&caught_up),
        "caught up at {caught_up}"
    );
    drop(d);
}

/// A hundred subscribers at once, some from the start and some from now on: each gets every
/// record it asked for, once and in order.
#[test]
fn a_hundred_subscribers_each_get_every_record() {
    let env = Env::new();
    env.write("a.jsonl", &lines(&numbered(0, 50, 80)));
    let d = daemon(&env, &[]);
    let socket = socket(&env);
    wait_published(&socket, 50);
    let mut subs: Vec<(Sub, bool)> = (0..100)
        .map(|i| match i % 2 {
            0 => (Sub::attach(&socket, r#"{"since_seq":0}"#), true),
            _ => (Sub::attach(&socket, "{}"), false),
        })
        .collect();
    // Every one is attached (its caught_up read) before the appends.
    for (sub, from_start) in &mut subs {
        if *from_start {
            let got = sub.records(50);
            assert_run(&got.seqs, 1, 50, "the archived records");
        }
        let v = sub.line().unwrap();
        assert_eq!(v["event"], "caught_up", "{v}");
        assert_eq!(v["seq"], 50);
    }
    env.append("a.jsonl", &lines(&numbered(50, 200, 80)));
    for (sub, _) in &mut subs {
        let got = sub.records(200);
        assert_run(&got.seqs, 51, 250, "the live records");
    }
    assert!(
        d.log().matches("subscriber refused").count() == 0,
        "{}",
        d.log()
    );
}

/// A subscriber that stops reading is told `lagged` once its buffer fills, with the first seq
/// it was not sent, and a new connection from there continues exactly; the subscribers that
/// read get every record meanwhile.
#[test]
fn a_stalled_subscriber_is_told_lagged_and_resumes_exactly_while_others_keep_up() {
    let env = Env::new();
    env.write("a.jsonl", b"");
    env.write_config("subscriber_buffer = \"256K\"\n");
    let d = daemon(&env, &[]);
    let socket = socket(&env);
    let mut stalled = Sub::attach(&socket, r#"{"since_seq":0}"#);
    let total = 4000;
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let mut reader = Sub::attach(&socket, r#"{"since_seq":0}"#);
            std::thread::spawn(move || reader.records(total))
        })
        .collect();
    // Appends at a pace a reader keeps up with (each chunk archived before the next), and
    // more than the stalled one's buffer and its socket's hold.
    let recs = numbered(0, total, 400);
    for (i, chunk) in recs.chunks(100).enumerate() {
        env.append("a.jsonl", &lines(chunk));
        wait_until("the chunk archived", || {
            env.status()["totals"]["records"] == (i + 1) * 100
        });
    }
    // Read at once: a lagging subscriber that reads nothing for 30 s is closed untold.
    let got = stalled.records(total);
    d.wait_log("subscriber lagged");
    for reader in readers {
        let got = reader.join().unwrap();
        assert_run(&got.seqs, 1, total as i64, "a reader keeps up");
    }
    let lagged = got.ended.expect("told lagged");
    assert_eq!(lagged["event"], "lagged", "{lagged}");
    let resume_from = lagged["resume_from"].as_i64().unwrap();
    assert_run(
        &got.seqs,
        1,
        resume_from - 1,
        "the stalled one, up to its lag",
    );
    assert!((resume_from as usize) < total, "{resume_from}");
    assert!(stalled.line().is_none(), "closed after lagged");

    let mut again = Sub::attach(&socket, &format!(r#"{{"since_seq":{}}}"#, resume_from - 1));
    let rest = again.records(total - resume_from as usize + 1);
    assert_run(&rest.seqs, resume_from, total as i64, "resumed exactly");
}

/// `tail -f` through a daemon killed and started again (records appended while it was
/// down): every record printed once, in order.
#[test]
fn tail_follow_goes_on_across_a_daemon_restart_without_gap_or_duplicate() {
    let env = Env::new();
    env.write("a.jsonl", &lines(&numbered(0, 10, 60)));
    let d = daemon(&env, &[]);
    let mut tail = (env.cmd().args(["tail", "-f", "--since-seq", "0", "--db"]))
        .arg(&env.db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, printed) = crossbeam_channel::unbounded();
    let out = tail.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let v: Value = serde_json::from_str(&line).unwrap();
            if tx.send(v["seq"].as_i64().unwrap()).is_err() {
                break;
            }
        }
    });
    let take = |n: usize| -> Vec<i64> {
        (0..n)
            .map(|_| printed.recv_timeout(Duration::from_secs(60)).unwrap())
            .collect()
    };
    assert_eq!(take(10), all(10));
    // Killed, as a crash would: its socket is left behind, and replaced at the next start.
    let mut d = d;
    d.signal(libc::SIGKILL);
    d.wait_exit();
    env.append("a.jsonl", &lines(&numbered(10, 10, 60)));
    let d = daemon(&env, &[]);
    env.append("a.jsonl", &lines(&numbered(20, 10, 60)));
    assert_eq!(take(20), (11..=30).collect::<Vec<i64>>());
    assert!(
        printed.recv_timeout(Duration::from_millis(500)).is_err(),
        "nothing more"
    );
    let _ = tail.kill();
    let err = stderr(&tail.wait_with_output().unwrap());
    assert!(err.contains("the daemon went away"), "{err}");
    drop(d);
}

/// Another user is refused: by the socket's permissions (its directory and the socket are
/// the daemon user's alone), and, were those opened up, by the peer's uid, with a reason.
/// Runs when the tests run as root (the client then runs as nobody).
#[test]
fn another_uid_is_refused() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run a client as another user");
        return;
    }
    let env = Env::new();
    env.write("a.jsonl", &lines(&numbered(0, 3, 60)));
    let d = daemon(&env, &[]);
    let socket = socket(&env);
    // Under `timeout`: a client let in would follow for ever; it must be turned away.
    let as_nobody = || {
        let mut cmd = env.command("timeout");
        cmd.args(["30", "setpriv", "--reuid", "nobody", "--regid", "nogroup"])
            .args(["--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_transcript-sync"))
            .args(["tail", "-f", "--since-seq", "0", "--db"])
            .arg(&env.db);
        cmd.output().unwrap()
    };
    let mode = |path: &Path| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    };
    assert_eq!(mode(&socket), 0o600);
    let out = as_nobody();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no daemon is running"),
        "{}",
        stderr(&out)
    );

    // Opened up, as a misconfiguration might: the uid check still refuses.
    for dir in socket
        .ancestors()
        .skip(1)
        .take_while(|p| p.starts_with(env.dir.path()))
    {
        chmod(dir, 0o755);
    }
    chmod(&socket, 0o777);
    let out = as_nobody();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("tail: uid 65534 may not follow the archive of uid 0"),
        "{err}"
    );
    d.wait_log("subscriber refused: uid 65534 may not follow the archive of uid 0");
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A first line that is not a request, one too long, one that never comes, and a subscriber
/// past the limit: each gets an error line saying why, is closed, and is logged once.
#[test]
fn bad_first_lines_and_one_subscriber_too_many_are_refused_with_a_reason() {
    let env = Env::new();
    env.write_config("max_subscribers = 2\n");
    let d = daemon(&env, &[]);
    let socket = socket(&env);
    let refused = |sub: &mut Sub| {
        let v = sub.line().expect("an error line");
        assert_eq!(v["event"], "error", "{v}");
        assert!(sub.line().is_none(), "closed");
        v["reason"].as_str().unwrap().to_owned()
    };
    let reason = refused(&mut Sub::attach(&socket, "since_seq=0"));
    assert!(
        reason.contains("the first line is not a request"),
        "{reason}"
    );
    let reason = refused(&mut Sub::attach(&socket, r#"{"since":0}"#));
    assert!(reason.contains("unknown field `since`"), "{reason}");
    let reason = refused(&mut Sub::attach(&socket, r#"{"session":"zzzz"}"#));
    assert!(reason.contains("no session \"zzzz\""), "{reason}");
    let long = format!(r#"{{"path":"{}"}}"#, "a".repeat(70_000));
    let reason = refused(&mut Sub::attach(&socket, &long));
    assert!(reason.contains("longer than 64 KiB"), "{reason}");

    let silent = UnixStream::connect(&socket).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut silent = Sub {
        reader: BufReader::new(silent),
    };
    let reason = refused(&mut silent);
    assert_eq!(reason, "no first line within 10 s");
    drop(silent);

    let mut a = Sub::attach(&socket, "{}");
    let mut b = Sub::attach(&socket, "{}");
    assert_eq!(a.line().unwrap()["event"], "caught_up");
    assert_eq!(b.line().unwrap()["event"], "caught_up");
    let reason = refused(&mut Sub::attach(&socket, "{}"));
    assert!(reason.contains("2 subscribers are attached"), "{reason}");
    // One that goes away while nothing commits frees its place.
    drop(a);
    d.wait_log("subscriber left");
    let mut c = Sub::attach(&socket, "{}");
    assert_eq!(c.line().unwrap()["event"], "caught_up");
    // Each logged once (the log is read as the daemon writes it).
    let log = d.wait_log_times("subscriber refused:", 6);
    assert_eq!(log.matches("subscriber refused:").count(), 6, "{log}");
}

/// Without `-f`, `tail` reads the archive alone: the last 10 records by default, `--last N`,
/// `--since-seq`, filters, `--redact`; with `-f` and no daemon, it says so and exits 1.
#[test]
fn tail_prints_archived_records_without_a_daemon() {
    let env = Env::new();
    env.write("a.jsonl", &lines(&numbered(0, 30, 60)));
    env.write(
        "b.jsonl",
        b"{\"token\":\"ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz\"}\n",
    );
    env.run_once(&[]);
    let tail = |args: &[&str]| {
        let out = (env.cmd().arg("tail").args(args).arg("--db").arg(&env.db))
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout.clone()).unwrap(),
            stderr(&out),
        )
    };
    let seqs = |text: &str| -> Vec<i64> {
        (text.lines())
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["seq"]
                    .as_i64()
                    .unwrap()
            })
            .collect()
    };
    let (code, out, _) = tail(&[]);
    assert_eq!(code, Some(0));
    assert_eq!(seqs(&out), (22..=31).collect::<Vec<i64>>());
    let a = env.path("a.jsonl");
    let (_, out, _) = tail(&["--last", "3", "--path", a.to_str().unwrap()]);
    assert_eq!(seqs(&out), [28, 29, 30]);
    let (_, out, _) = tail(&["--since-seq", "29"]);
    assert_eq!(seqs(&out), [30, 31]);
    let (_, out, _) = tail(&["--last", "1"]);
    assert!(out.contains("ghp_Wi3v"), "as archived: {out}");
    let (_, out, _) = tail(&["--last", "1", "--redact"]);
    assert!(out.contains("[REDACTED:github-token]"), "{out}");

    let (code, _, err) = tail(&["-f"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("no daemon is running for the archive"),
        "{err}"
    );
    assert!(err.contains("transcript-sync run"), "{err}");
}

/// `tail --format text` as a person watching sees it: one line per record, time, harness,
/// session, role and the first line of the text.
#[test]
fn tail_text_on_a_terminal_is_one_readable_line_per_record() {
    let env = Env::new();
    let fixture = std::fs::read("tests/fixtures/sessions/claude-code.jsonl").unwrap();
    let project = (env.dir.path()).join("home/.claude/projects/-home-dana-src-ledger");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(
        project.join("7c9e6679-7425-40de-944b-e07fc1f90ae7.jsonl"),
        &fixture,
    )
    .unwrap();
    env.write_config(&format!("archive = {:?}\n", env.db));
    let out = env.cmd().args(["run", "--once"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let cmd = format!(
        "{} tail --last 11 --format text",
        env!("CARGO_BIN_EXE_transcript-sync")
    );
    let screen = on_a_terminal(&env, &cmd);
    let shown: Vec<&str> = screen.lines().collect();
    assert_eq!(shown.len(), 11, "{screen}");
    assert!(
        shown.contains(
            &"2026-11-28T09:14:10Z  claude-code  7c9e6679  user       Invoices over 1000 EUR come out one cent short. Find out why."
        ),
        "{screen}"
    );
}

/// A client may shut down its writing side once its request is sent (as `nc -N` does) and
/// go on reading.
#[test]
fn a_client_that_shuts_down_its_writing_side_goes_on_reading() {
    let env = Env::new();
    env.write("a.jsonl", b"");
    let d = daemon(&env, &[]);
    let socket = socket(&env);
    let mut sub = Sub::attach(&socket, "{}");
    sub.reader
        .get_ref()
        .shutdown(std::net::Shutdown::Write)
        .unwrap();
    assert_eq!(sub.line().unwrap()["event"], "caught_up");
    // Longer than the half-second in which a quiet connection is looked at.
    d.wait_log("subscriber attached");
    let quiet = std::time::Instant::now();
    wait_until("a second of quiet", || {
        quiet.elapsed() > Duration::from_secs(1)
    });
    env.append("a.jsonl", &lines(&numbered(0, 3, 60)));
    assert_run(&sub.records(3).seqs, 1, 3, "read after the half-close");
}

/// A daemon whose socket cannot be made (here, a runtime directory whose path is too long
/// for a Unix socket) says why and how to fix it, and archives all the same; one whose
/// socket file is removed while it runs still stops at SIGTERM.
#[test]
fn the_socket_is_not_needed_to_archive_or_to_stop() {
    let env = Env::new();
    let long = env.dir.path().join("r".repeat(120));
    std::fs::create_dir_all(&long).unwrap();
    let mut cmd = env.cmd();
    cmd.env("XDG_RUNTIME_DIR", &long)
        .args(["run", "--rescan-interval", "3600", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root);
    let d = Daemon::spawn(cmd, TapReader::Read);
    d.wait_log("the daemon runs without its socket");
    env.write("a.jsonl", &lines(&numbered(0, 2, 60)));
    wait_until("archived", || env.status()["totals"]["records"] == 2);
    let status_text = |env: &Env| {
        let out = (env.cmd().args(["status", "--db"]).arg(&env.db)).output();
        String::from_utf8(out.unwrap().stdout).unwrap()
    };
    let text = status_text(&env);
    assert!(text.contains("no socket for subscribers"), "{text}");
    let (status, _) = d.terminate();
    assert!(status.success());

    let d = daemon(&env, &[]);
    let text = status_text(&env);
    assert!(
        text.contains(&format!("subscribers attach at {}", socket(&env).display())),
        "{text}"
    );
    std::fs::remove_file(socket(&env)).unwrap();
    let (status, _) = d.terminate();
    assert!(status.success(), "stopped");
}
