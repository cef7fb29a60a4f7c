//! Shipping to sinks: a mirror directory, a real PostgreSQL cluster of the test's own, and an
//! HTTP server on loopback that misbehaves on purpose. Every record arrives, once in effect,
//! through restarts, outages and refusals.

use crate::util::{
    Answer, Collector, Daemon, Env, PG_PASSWORD, PgCluster, SandboxDaemon, TapReader, lines,
    records, stderr, wait_until, watchers_off_but,
};
use std::fs;
use std::path::Path;

/// `run --ship ARG` as a daemon over the env's root.
fn daemon_shipping(env: &Env, ship: &str) -> Daemon {
    Daemon::start(env, &[], &["--ship", ship], TapReader::Read)
}

fn read(path: &Path) -> Vec<u8> {
    fs::read(path).unwrap_or_default()
}

/// The mirror of `rel` under `mirror` for the generic harness of `--watch`.
fn mirrored(mirror: &Path, rel: &str) -> std::path::PathBuf {
    mirror.join("generic").join(rel)
}

/// A mirrored file equals the archive's records of its generation, each with its `\n`: after
/// appends, after a truncation (the earlier generation kept as `.gen0`), and after a restart
/// that finds lines in the mirror past what was acknowledged (cut back, then written again,
/// never doubled).
#[test]
fn a_mirror_equals_the_archive_byte_for_byte_after_appends_a_truncation_and_a_restart() {
    let env = Env::new();
    let mirror = env.dir.path().join("mirror");
    let ship = format!("mirror:{}", mirror.display());
    let first = lines(&records("a", 3));
    env.write("proj/s.jsonl", &first);
    let quiet = lines(&records("q", 2));
    env.write("proj/quiet.jsonl", &quiet);
    let daemon = daemon_shipping(&env, &ship);
    let copy = mirrored(&mirror, "proj/s.jsonl");
    let quiet_copy = mirrored(&mirror, "proj/quiet.jsonl");
    wait_until("the first lines are mirrored", || {
        read(&copy) == first && read(&quiet_copy) == quiet
    });

    let more = lines(&records("b", 2));
    env.append("proj/s.jsonl", &more);
    let whole = [first.clone(), more.clone()].concat();
    wait_until("the appended lines are mirrored", || read(&copy) == whole);

    let after_cut = lines(&records("c", 1));
    env.write("proj/s.jsonl", &after_cut);
    let kept = mirrored(&mirror, "proj/s.gen0.jsonl");
    wait_until("the new generation is mirrored", || {
        read(&copy) == after_cut && read(&kept) == whole
    });
    let (status, _) = daemon.terminate();
    assert!(status.success());

    // Lines past the committed length (a crash after writing, before the cursor moved) are
    // cut back at the next start; what follows is written once.
    for unacknowledged in [&copy, &quiet_copy] {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(unacknowledged)
            .unwrap();
        std::io::Write::write_all(&mut f, b"{\"not\":\"acknowledged\"}\n").unwrap();
    }
    let last = lines(&records("d", 2));
    env.append("proj/s.jsonl", &last);
    let expected = [after_cut.clone(), last.clone()].concat();
    let daemon = daemon_shipping(&env, &ship);
    wait_until("the restart mirrors exactly the file", || {
        read(&copy) == expected
    });
    let (status, _) = daemon.terminate();
    assert!(status.success());
    assert_eq!(read(&copy), read(&env.path("proj/s.jsonl")));
    assert_eq!(
        read(&quiet_copy),
        quiet,
        "cut back at the start, with nothing new to write"
    );
    assert_eq!(read(&kept), whole, "the earlier generation stays as it was");
    let status = env.status();
    let sink = &status["sinks"][0];
    assert!(
        sink["name"].as_str().unwrap().starts_with("mirror-"),
        "{sink}"
    );
    assert_eq!(sink["lag_records"], 0);
    assert_eq!(sink["dead_letters"], 0);
}

/// A mirrored file shorter than what was shipped to it (changed behind the mirror's back) is
/// written again from the archive, and said so.
#[test]
fn a_mirror_file_cut_short_behind_its_back_is_written_again_from_the_archive() {
    let env = Env::new();
    let mirror = env.dir.path().join("mirror");
    let ship = format!("mirror:{}", mirror.display());
    let text = lines(&records("a", 4));
    env.write("s.jsonl", &text);
    env.run_once(&["--ship", &ship]);
    let copy = mirrored(&mirror, "s.jsonl");
    assert_eq!(read(&copy), text);
    fs::write(&copy, &text[..10]).unwrap();
    let log = env.run_once(&["--ship", &ship]);
    assert!(log.contains("writing it again from the archive"), "{log}");
    assert_eq!(read(&copy), text);
}

/// Passwords never come from the command line, and never reach a message.
#[test]
fn a_password_on_the_command_line_is_refused_without_being_repeated() {
    let env = Env::new();
    let out = env.run_once_output(&["--ship", "postgres://me:hunter2@127.0.0.1:1/db"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("`ps`") && err.contains("me:***@"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
    assert!(!env.db.exists(), "refused before the archive was opened");
}

/// `config check` validates `[[sink]]` tables, naming the line, and shows the valid ones
/// without their secrets.
#[test]
fn config_check_validates_sink_tables() {
    let env = Env::new();
    let config = env.write_config("[[sink]]\nname = \"team\"\ntype = \"kafka\"\nurl = \"x\"\n");
    let check = |env: &Env| {
        env.cmd()
            .args(["config", "check", "--db"])
            .arg(&env.db)
            .output()
            .unwrap()
    };
    let out = check(&env);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains(&format!("{}:1:", config.display())), "{err}");
    assert!(err.contains("unknown sink type \"kafka\""), "{err}");

    env.write_config(
        "[[sink]]\nname = \"team\"\ntype = \"postgres\"\nurl = \"postgres://me@db.example/t\"\n\
         password_file = \"/run/secrets/pg\"\nflush_interval = \"250ms\"\nmarks = true\n",
    );
    let out = check(&env);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("[[sink]]") && text.contains("name = \"team\""),
        "{text}"
    );
    assert!(text.contains("flush_interval = \"250ms\""), "{text}");
    assert!(
        text.contains("redact = true"),
        "redacting by default: {text}"
    );
    assert!(text.contains("marks = true"), "{text}");
    assert!(!text.contains("/run/secrets"), "{text}");
}

/// A `[[sink]]` table for `pg` with the password in a file.
fn pg_config(env: &Env, pg: &PgCluster, password_file: &Path) {
    env.write_config(&format!(
        "[[sink]]\nname = \"team\"\ntype = \"postgres\"\nurl = \"{}\"\npassword_file = \"{}\"\n\
         flush_interval = \"100ms\"\ntimeout = \"5s\"\n",
        pg.url(),
        password_file.display()
    ));
}

/// Counts of records in PostgreSQL: all, and distinct keys; none before the schema exists.
fn pg_counts(pg: &PgCluster) -> (u64, u64) {
    let out = pg.try_psql(
        "SELECT count(*), count(DISTINCT (machine, source, generation, \"offset\"))
         FROM transcript_sync.records",
    );
    if !out.status.success() {
        assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
        return (0, 0);
    }
    let row = String::from_utf8(out.stdout).unwrap();
    let (a, b) = row.trim().split_once('|').unwrap();
    (a.parse().unwrap(), b.parse().unwrap())
}

/// An empty database gets the schema; every record arrives once, as archived; shipping again
/// (a retry, a restart with an older cursor) adds nothing.
#[test]
fn an_empty_database_gets_the_schema_and_every_record_once() {
    let pg = PgCluster::start();
    let env = Env::new();
    pg_config(&env, &pg, &pg.password_file());
    let recs = records("a", 50);
    env.write("p/s.jsonl", &lines(&recs));
    env.run_once(&[]);
    assert_eq!(
        pg.psql("SELECT max(version) FROM transcript_sync.schema_version"),
        ["4"]
    );
    assert_eq!(pg_counts(&pg), (50, 50));
    let machine = env.sql("SELECT value FROM state WHERE key = 'machine_id'");
    assert_eq!(
        pg.psql("SELECT machine FROM transcript_sync.machines"),
        machine
    );
    let shipped = pg.psql("SELECT record FROM transcript_sync.records ORDER BY seq");
    assert_eq!(shipped, recs);
    let docs = pg.psql("SELECT count(*) FROM transcript_sync.records WHERE doc IS NOT NULL");
    assert_eq!(docs, ["50"]);

    // As after a crash between the insert and the cursor's commit: everything again.
    env.sql("UPDATE consumers SET seq = 0 WHERE name = 'sink:team' RETURNING seq");
    env.run_once(&[]);
    assert_eq!(pg_counts(&pg), (50, 50));
    assert_eq!(
        env.sql("SELECT count(*) FROM dead_letters"),
        ["0"],
        "taken, not refused"
    );
    let status = env.status();
    assert_eq!(status["sinks"][0]["seq"], 50);
    assert_eq!(status["sinks"][0]["lag_records"], 0);
}

/// A daemon killed with SIGKILL in the middle of a batch (its insert sent and waiting on a
/// lock the test holds, so the kill lands there every time) ships that batch again after its
/// restart: every record in PostgreSQL once.
#[test]
fn a_sigkill_mid_batch_leaves_every_record_once_after_the_restart() {
    use std::io::{BufRead, BufReader, Write};
    let pg = PgCluster::start();
    let env = Env::new();
    pg_config(&env, &pg, &pg.password_file());
    for f in 0..5 {
        env.write(
            &format!("f{f}.jsonl"),
            &lines(&records(&format!("f{f}"), 1000)),
        );
    }
    let daemon = Daemon::start_without_tap(&env);
    wait_until("the backlog reaches PostgreSQL", || {
        pg_counts(&pg).0 == 5000
    });

    let mut holder = pg.psql_session();
    let stdin = holder.stdin.as_mut().unwrap();
    stdin
        .write_all(b"BEGIN; LOCK TABLE transcript_sync.records IN ACCESS EXCLUSIVE MODE; SELECT 'locked';\n")
        .unwrap();
    let mut out = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("locked") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "psql ended");
    }
    env.append("f0.jsonl", &lines(&records("late", 1000)));
    wait_until("the sink's insert waits on the lock", || {
        pg.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
             AND query LIKE 'INSERT INTO transcript_sync.records%'",
        ) == ["1"]
    });
    daemon.signal(libc::SIGKILL);
    drop(daemon);
    let stdin = holder.stdin.as_mut().unwrap();
    stdin.write_all(b"ROLLBACK;\n").unwrap();
    drop(holder.stdin.take());
    holder.wait().unwrap();
    assert_eq!(
        pg_counts(&pg),
        (5000, 5000),
        "the batch in hand died with its connection"
    );

    let daemon = Daemon::start_without_tap(&env);
    wait_until("every record reaches PostgreSQL", || {
        pg_counts(&pg).0 == 6000
    });
    assert_eq!(pg_counts(&pg), (6000, 6000));
    drop(daemon);
}

/// PostgreSQL stopped while records are appended: the daemon keeps archiving, says the sink
/// fails (log, status, event), and ships every record once when PostgreSQL is back.
#[test]
fn records_appended_while_postgresql_is_down_arrive_once_when_it_is_back() {
    let pg = PgCluster::start();
    let env = Env::new();
    pg_config(&env, &pg, &pg.password_file());
    env.write("s.jsonl", &lines(&records("a", 5)));
    let daemon = Daemon::start_without_tap(&env);
    wait_until("the first records arrive", || pg_counts(&pg).0 == 5);
    pg.stop();
    env.append("s.jsonl", &lines(&records("b", 5)));
    // The delivery failing (not only the session rows sent when idle, which are "tried again
    // later"): refused, or, when the delivery comes first on the connection the server closed
    // as it stopped, that connection's "terminating connection due to administrator command".
    daemon.wait_log("; retrying in");
    env.append("s.jsonl", &lines(&records("c", 5)));
    wait_until("the archive has every record", || env.records().len() == 15);
    // The failure is logged before it is recorded.
    wait_until("the failure recorded", || {
        env.status()["sinks"][0]["failing_since"].is_string()
    });
    let status = env.status();
    let sink = &status["sinks"][0];
    assert!(sink["lag_records"].as_i64().unwrap() > 0, "{sink}");
    pg.start_again();
    wait_until("every record arrives once", || pg_counts(&pg) == (15, 15));
    daemon.wait_log("sink team: delivering again after");
    // Idle again, the sink sends the session index's row of the file's session.
    wait_until("the session's row arrives", || {
        pg.try_psql("SELECT count(*) FROM transcript_sync.session_sources")
            .stdout
            .starts_with(b"1\n")
    });
    let (status, _) = daemon.terminate();
    assert!(status.success());
    assert_eq!(
        env.sql("SELECT kind FROM events WHERE kind LIKE 'sink-%' ORDER BY id"),
        ["sink-failing", "sink-recovered"]
    );
    assert!(env.status()["sinks"][0]["failing_since"].is_null());
}

/// A wrong password is a clear error in the log and in `status`, never the password itself;
/// archiving goes on meanwhile.
#[test]
fn a_wrong_password_is_a_clear_error_and_archiving_goes_on() {
    let pg = PgCluster::start();
    let env = Env::new();
    let wrong = env.dir.path().join("wrong-pw");
    fs::write(&wrong, "not-the-password\n").unwrap();
    pg_config(&env, &pg, &wrong);
    env.write("s.jsonl", &lines(&records("a", 3)));
    let daemon = Daemon::start_without_tap(&env);
    let log = daemon.wait_log("password authentication failed");
    wait_until("the records are archived", || env.records().len() == 3);
    assert!(
        !log.contains("not-the-password") && !log.contains(PG_PASSWORD),
        "{log}"
    );
    // The failure is logged before it is recorded.
    wait_until("the error recorded", || {
        env.status()["sinks"][0]["last_error"].is_string()
    });
    let status = env.status();
    let error = status["sinks"][0]["last_error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(error.contains("password authentication failed"), "{error}");
    drop(daemon);

    // `run --once` says so and exits 1; the records stay for the next run.
    let out = env.run_once_output(&[]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("shipped by the next run"),
        "{}",
        stderr(&out)
    );
    pg_config(&env, &pg, &pg.password_file());
    env.run_once(&[]);
    assert_eq!(pg_counts(&pg), (3, 3));
}

/// A record PostgreSQL's jsonb refuses (a `\u0000` escape, a lone surrogate) is valid JSON
/// and archived: its text is shipped exactly, its `doc` left null.
#[test]
fn a_record_jsonb_refuses_keeps_its_text_with_a_null_doc() {
    let pg = PgCluster::start();
    let env = Env::new();
    pg_config(&env, &pg, &pg.password_file());
    let refused = [r#"{"nul":"a\u0000b"}"#, r#"{"lone":"\ud800"}"#];
    let fine = r#"{"ok":"\u00e9"}"#;
    let all: Vec<String> = [refused[0], fine, refused[1]].map(str::to_owned).to_vec();
    env.write("s.jsonl", &lines(&all));
    env.run_once(&[]);
    let rows = pg.psql("SELECT record, doc IS NULL FROM transcript_sync.records ORDER BY seq");
    assert_eq!(
        rows,
        [
            format!("{}|t", refused[0]),
            format!("{fine}|f"),
            format!("{}|t", refused[1])
        ]
    );
}

/// Through a reset, a slow answer and 503s, every record reaches the collector, under the
/// batch's idempotency key; one record it refuses with a 400 is bisected out into
/// `dead_letters` with the answer, and `sink retry` ships it once the collector takes it.
#[test]
fn an_http_collector_gets_every_record_through_resets_slowness_and_503s() {
    use std::time::Duration;
    // The first batch holds the refused record: it is answered by the script first, then
    // refused and bisected; the slow answer comes to a half without it.
    let script = [
        Answer::Reset,
        Answer::Accept,
        Answer::Unavailable,
        Answer::Unavailable,
        Answer::Accept,
        Answer::Slow(Duration::from_millis(1500)),
    ];
    let collector = Collector::start(&script, Some("poison"));
    let env = Env::new();
    let token = env.dir.path().join("token");
    fs::write(&token, "tok-123\n").unwrap();
    env.write_config(&format!(
        "[[sink]]\nname = \"collector\"\ntype = \"http\"\nurl = \"{}\"\ntoken_file = \"{}\"\n\
         flush_interval = \"100ms\"\ntimeout = \"1s\"\nheaders = {{ X-Team = \"blue\" }}\n",
        collector.url(),
        token.display()
    ));
    let mut recs = records("a", 20);
    recs[7] = r#"{"type":"user","text":"poison"}"#.to_owned();
    env.write("s.jsonl", &lines(&recs));
    let daemon = Daemon::start_without_tap(&env);
    wait_until("every other record is accepted", || {
        collector.accepted().len() == 19
    });
    wait_until("the refused record is a dead letter", || {
        env.sql("SELECT count(*) FROM dead_letters") == ["1"]
    });
    daemon.wait_log("refused: HTTP");
    drop(daemon);
    let answer = env.sql("SELECT answer FROM dead_letters");
    assert!(
        answer[0].contains("400") && answer[0].contains("bad record"),
        "{answer:?}"
    );
    let dead_offset = env.sql("SELECT offset FROM dead_letters")[0]
        .parse::<i64>()
        .unwrap();
    assert!(!collector.accepted().keys().any(|k| k.2 == dead_offset));

    let received = collector.received.lock().unwrap().clone();
    let statuses: Vec<u16> = received.iter().map(|r| r.status).take(5).collect();
    assert_eq!(statuses, [0, 400, 503, 503, 400], "the script was played");
    // A batch sent again (after the reset, after a 503) has the same key; its halves, keys
    // of their own.
    let key = |i: usize| received[i].headers["idempotency-key"].clone();
    let first_key = key(0);
    assert_eq!(key(1), first_key, "the batch again after the reset");
    assert_eq!(key(3), key(2), "a half again after the 503");
    assert_ne!(key(2), first_key, "a half");
    let machine = env.sql("SELECT value FROM state WHERE key = 'machine_id'");
    assert!(first_key.starts_with(&machine[0]), "{first_key}");
    let h = &received[0].headers;
    assert_eq!(h["content-type"], "application/x-ndjson");
    assert_eq!(h["content-encoding"], "gzip");
    assert_eq!(h["authorization"], "Bearer tok-123");
    assert_eq!(h["x-team"], "blue");
    let first: serde_json::Value =
        serde_json::from_slice(received[0].body.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["machine"], machine[0].as_str());
    assert_eq!(
        first["record"],
        serde_json::from_str::<serde_json::Value>(&recs[0]).unwrap()
    );

    assert!(
        collector.script.lock().unwrap().is_empty(),
        "every scripted answer was given"
    );
    let status = env.status();
    assert_eq!(status["sinks"][0]["dead_letters"], 1);
    *collector.refuse.lock().unwrap() = None;
    let out = (env.cmd().args(["sink", "retry", "collector", "--db"]))
        .arg(&env.db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(
        said.contains("1 dead letters shipped, 0 refused again"),
        "{said}"
    );
    assert_eq!(env.sql("SELECT count(*) FROM dead_letters"), ["0"]);
    assert_eq!(collector.accepted().len(), 20);
}

/// `config.toml` watching the env's root only, with `sinks` appended.
fn root_config(env: &Env, sinks: &str) {
    env.write_config(&format!(
        "archive = {:?}\n{}[[watch]]\npath = {:?}\n{sinks}",
        env.db,
        watchers_off_but(&[]),
        env.root
    ));
}

fn mirror_table(dir: &Path, flush: &str) -> String {
    format!(
        "[[sink]]\nname = \"m\"\ntype = \"mirror\"\ndir = {:?}\nflush_interval = \"{flush}\"\n",
        dir
    )
}

/// SIGHUP adds a sink (which ships everything archived), restarts a changed one from its
/// cursor, and stops a removed one.
#[test]
fn sighup_adds_changes_and_removes_sinks_keeping_their_cursors() {
    let env = Env::new();
    let mirror = env.dir.path().join("mirror");
    let first = lines(&records("a", 3));
    env.write("s.jsonl", &first);
    root_config(&env, "");
    let mut cmd = env.cmd();
    cmd.args(["run", "--rescan-interval", "3600"]);
    let daemon = Daemon::spawn(cmd, TapReader::Read);
    daemon.wait_log("caught up");

    root_config(&env, &mirror_table(&mirror, "100ms"));
    daemon.signal(libc::SIGHUP);
    let copy = mirrored(&mirror, "s.jsonl");
    wait_until("the new sink ships what was archived", || {
        read(&copy) == first
    });
    daemon.wait_log("sink m: shipping to");

    root_config(&env, &mirror_table(&mirror, "200ms"));
    daemon.signal(libc::SIGHUP);
    daemon.wait_log("sink m: stopped for the new configuration");
    daemon.wait_log("from seq 3");
    let more = lines(&records("b", 2));
    env.append("s.jsonl", &more);
    let whole = [first, more].concat();
    wait_until("the changed sink goes on", || read(&copy) == whole);

    root_config(&env, "");
    daemon.signal(libc::SIGHUP);
    daemon.wait_log("sink m: removed from the configuration; stopping");
    env.append("s.jsonl", &lines(&records("c", 1)));
    wait_until("the late record is archived", || env.records().len() == 6);
    let (status, _) = daemon.terminate();
    assert!(status.success());
    assert_eq!(read(&copy), whole, "a removed sink ships nothing more");
    assert_eq!(env.status()["sinks"][0]["lag_records"], 1);
}

/// `status` as a person reads it on a terminal: one line per sink with its cursor and lag,
/// the failure while it lasts, and the dead letters with the command that ships them again.
#[test]
fn status_on_a_terminal_shows_each_sink() {
    let env = Env::new();
    let port = crate::util::free_port();
    env.write_config(&format!(
        "[[sink]]\nname = \"collector\"\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/in\"\n"
    ));
    let recs = records("a", 4);
    let bytes: usize = recs.iter().map(String::len).sum();
    env.write("s.jsonl", &lines(&recs));
    let out = env.run_once_output(&[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "nothing listens on {port}: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("shipped by the next run"),
        "{}",
        stderr(&out)
    );
    env.sql(
        "INSERT INTO dead_letters (sink, source_id, generation, offset, seq, answer, at_ms)
         SELECT 'collector', source_id, generation, offset, seq, 'HTTP 400', 0 FROM records
         WHERE seq = 1 RETURNING id",
    );
    let inner = format!("{} status --db {}", crate::util::BIN, env.db.display());
    let text = crate::util::on_a_terminal(&env, &inner);
    let sink_line = format!(
        "sink collector (http http://127.0.0.1:{port}/in): shipped to seq 0, 4 records ({bytes} B) waiting; last success never\n"
    );
    assert!(text.contains(&sink_line), "{text}");
    assert!(text.contains("  failing since "), "{text}");
    assert!(text.contains("Connection refused"), "{text}");
    assert!(
        text.contains("  1 dead letters (records refused for good); `transcript-sync sink retry collector` ships them again"),
        "{text}"
    );
}

/// The queries docs/shipping.md shows run as written against a store the sink filled from a
/// Claude Code session, and answer: the last gives the transcript back byte for byte.
#[test]
fn the_documented_queries_answer_over_a_shipped_claude_session() {
    let pg = PgCluster::start();
    let env = Env::new();
    let fixture = fs::read("tests/fixtures/sessions/claude-code.jsonl").unwrap();
    let project = env
        .dir
        .path()
        .join("home/.claude/projects/-home-dana-src-ledger");
    fs::create_dir_all(&project).unwrap();
    fs::write(
        project.join("7c9e6679-7425-40de-944b-e07fc1f90ae7.jsonl"),
        &fixture,
    )
    .unwrap();
    env.write_config(&format!(
        "archive = {:?}\n[[sink]]\nname = \"team\"\ntype = \"postgres\"\nurl = \"{}\"\n\
         password_file = \"{}\"\n",
        env.db,
        pg.url(),
        pg.password_file().display()
    ));
    let out = env.cmd().args(["run", "--once"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let docs = fs::read_to_string("docs/shipping.md").unwrap();
    let queries: Vec<&str> = docs
        .split("```sql\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap())
        .collect();
    assert_eq!(queries.len(), 6, "the documented queries");
    for q in &queries {
        let rows = pg.psql(q);
        assert!(!rows.is_empty(), "no rows from\n{q}");
    }
    let tools = pg.psql(queries[2]);
    assert_eq!(tools, ["Grep|1"]);
    let back = pg.psql(queries[5]);
    assert_eq!(lines(&back), fixture, "the transcript, byte for byte");
    let hit = pg.psql(queries[1]);
    assert!(
        hit[0].contains("<b>one</b> <b>cent</b> <b>short</b>"),
        "{hit:?}"
    );

    // The session index's row, as `sessions --json` shows it here.
    let out = (env.cmd().args(["sessions", "--json", "--db"]))
        .arg(&env.db)
        .output()
        .unwrap();
    let listed = String::from_utf8(out.stdout).unwrap();
    let local: serde_json::Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
    let row = pg.psql(
        "SELECT session, title, user_messages + assistant_messages, array_to_string(models, ',')
         FROM transcript_sync.sessions WHERE parent IS NULL",
    );
    let expected = format!(
        "{}|{}|{}|claude-sonnet-4-5",
        local["id"].as_str().unwrap(),
        local["title"].as_str().unwrap(),
        local["messages"]
    );
    assert_eq!(row, [expected], "{listed}");
}

/// TLS to PostgreSQL, against a cluster that takes TLS connections only: `verify-full` with
/// the server's certificate as `ca_file` ships; `verify-full` against the roots compiled in
/// refuses the self-signed certificate (and ships nothing); `require` encrypts without
/// checking; `disable` is turned away by the server.
#[test]
fn tls_to_postgresql_checks_the_server_as_sslmode_says() {
    let pg = PgCluster::start_tls();
    let env = Env::new();
    let config = |tls: &str| {
        env.write_config(&format!(
            "[[sink]]\nname = \"team\"\ntype = \"postgres\"\nurl = \"{}\"\npassword_file = \"{}\"\n{tls}",
            pg.url(),
            pg.password_file().display()
        ));
    };
    env.write("s.jsonl", &lines(&records("a", 3)));
    config(&format!(
        "sslmode = \"verify-full\"\nca_file = \"{}\"\n",
        pg.certificate().display()
    ));
    env.run_once(&[]);
    assert_eq!(pg_counts(&pg), (3, 3));

    env.append("s.jsonl", &lines(&records("b", 1)));
    config("sslmode = \"verify-full\"\n");
    let out = env.run_once_output(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("certificate"), "{}", stderr(&out));
    assert_eq!(pg_counts(&pg), (3, 3));

    config("sslmode = \"disable\"\n");
    let out = env.run_once_output(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no encryption"), "{}", stderr(&out));

    config("sslmode = \"require\"\n");
    env.run_once(&[]);
    assert_eq!(pg_counts(&pg), (4, 4));
}

/// A file replaced by another (a new source at the same path) and truncations on both sides
/// of it: every earlier copy is kept under a name of its own, none is written over, and a
/// restart changes nothing.
#[test]
fn a_replaced_file_and_its_generations_keep_one_mirror_copy_each_across_restarts() {
    let env = Env::new();
    let mirror = env.dir.path().join("mirror");
    let ship = format!("mirror:{}", mirror.display());
    let rel = "p/s.jsonl";
    let copy = |name: &str| mirrored(&mirror, &format!("p/{name}"));
    let a0 = lines(&records("a0", 3));
    env.write(rel, &a0);
    env.run_once(&["--ship", &ship]);
    let a1 = lines(&records("a1", 1));
    env.write(rel, &a1);
    env.run_once(&["--ship", &ship]);
    assert_eq!(
        (read(&copy("s.jsonl")), read(&copy("s.gen0.jsonl"))),
        (a1.clone(), a0.clone())
    );

    // Another file takes the path: the first source's copy moves aside.
    let b0 = lines(&records("b0", 2));
    env.replace_atomically(rel, &b0);
    env.run_once(&["--ship", &ship]);
    let a = env.sql("SELECT id FROM sources ORDER BY id")[0].clone();
    let kept_a = copy(&format!("s.source{a}.jsonl"));
    assert_eq!(read(&copy("s.jsonl")), b0);
    assert_eq!(read(&kept_a), a1);
    env.run_once(&["--ship", &ship]);
    assert_eq!(
        read(&copy("s.jsonl")),
        b0,
        "a restart puts nothing back over it"
    );
    assert_eq!(read(&copy("s.gen0.jsonl")), a0);

    // The new file's own first generation cannot take `s.gen0.jsonl`, which is kept.
    let b1 = lines(&records("b1", 1));
    env.write(rel, &b1);
    env.run_once(&["--ship", &ship]);
    let b = env.sql("SELECT id FROM sources ORDER BY id")[1].clone();
    assert_eq!(read(&copy("s.jsonl")), b1);
    assert_eq!(read(&copy(&format!("s.source{b}.gen0.jsonl"))), b0);
    assert_eq!(read(&copy("s.gen0.jsonl")), a0);
    assert_eq!(read(&kept_a), a1);
    let files = fs::read_dir(mirror.join("generic/p")).unwrap().count();
    assert_eq!(files, 4, "one copy per source and generation");
}

/// A rename the mirror recorded and made, but whose commit never came (a crash between the
/// two), is undone at the next start: the file the archive's state names is back, with
/// exactly what was shipped to it.
#[test]
fn a_mirror_rename_without_its_commit_is_undone_at_the_next_start() {
    let env = Env::new();
    let mirror = env.dir.path().join("mirror");
    let ship = format!("mirror:{}", mirror.display());
    let text = lines(&records("a", 3));
    env.write("s.jsonl", &text);
    env.run_once(&["--ship", &ship]);
    // As after a crash: the copy moved aside for a new generation and a new file begun in
    // its place, the rename recorded, the commit never made.
    let copy = mirrored(&mirror, "s.jsonl");
    fs::rename(&copy, mirrored(&mirror, "s.gen0.jsonl")).unwrap();
    fs::write(&copy, b"{\"new\":\"generation, never acknowledged\"}\n").unwrap();
    let renames = r#"[{"from":"generic/s.jsonl","to":"generic/s.gen0.jsonl"}]"#;
    let sink = env.sql("SELECT name FROM sinks")[0].clone();
    env.sql(&format!(
        "INSERT OR REPLACE INTO sink_state VALUES ('{sink}', 'renames', '{renames}') RETURNING key"
    ));
    env.run_once(&["--ship", &ship]);
    assert_eq!(read(&copy), text);
    assert!(!mirrored(&mirror, "s.gen0.jsonl").exists());
    assert_eq!(
        env.sql("SELECT value FROM sink_state WHERE key = 'renames'"),
        ["[]"]
    );
}

/// A sink whose destination changed under the same name goes on from its cursor and says so
/// (a mirror writes its files again from the archive); `--ship` names a sink after its
/// destination, so another destination is another sink, which ships everything.
#[test]
fn a_sink_given_another_destination_says_so_and_another_ship_destination_is_another_sink() {
    let env = Env::new();
    let (first, second) = (env.dir.path().join("m1"), env.dir.path().join("m2"));
    let text = lines(&records("a", 2));
    env.write("s.jsonl", &text);
    let table = |dir: &Path| {
        env.write_config(&format!(
            "[[sink]]\nname = \"m\"\ntype = \"mirror\"\ndir = {dir:?}\n"
        ));
    };
    table(&first);
    env.run_once(&[]);
    table(&second);
    let log = env.run_once(&[]);
    assert!(
        log.contains(&format!("its directory changed from {}", first.display())),
        "{log}"
    );
    assert_eq!(
        read(&mirrored(&second, "s.jsonl")),
        text,
        "written again from the archive"
    );
    assert_eq!(
        env.sql("SELECT count(*) FROM events WHERE kind = 'sink-retargeted'"),
        ["1"]
    );

    env.write_config("");
    let third = env.dir.path().join("m3");
    env.run_once(&["--ship", &format!("mirror:{}", first.display())]);
    let log = env.run_once(&["--ship", &format!("mirror:{}", third.display())]);
    assert!(!log.contains("changed from"), "{log}");
    assert_eq!(
        read(&mirrored(&third, "s.jsonl")),
        text,
        "a sink of its own ships everything"
    );
    assert_eq!(env.sql("SELECT count(*) FROM sinks"), ["3"]);
}

/// A mirror inside a watched directory would archive its own copies and mirror them again
/// without end: refused, naming both; `mirror:~/…` is the home directory's.
#[test]
fn a_mirror_inside_a_watched_directory_is_refused_and_a_tilde_is_home() {
    let env = Env::new();
    env.write("s.jsonl", &lines(&records("a", 1)));
    let inside = env.root.join("copies");
    let out = env.run_once_output(&["--ship", &format!("mirror:{}", inside.display())]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "its directory {} and the watched directory {}",
            inside.display(),
            env.root.display()
        )),
        "{err}"
    );
    assert!(!inside.exists());
    env.run_once(&["--ship", "mirror:~/copies"]);
    let home_copy = env.dir.path().join("home/copies");
    assert_eq!(
        read(&mirrored(&home_copy, "s.jsonl")),
        lines(&records("a", 1))
    );
}

/// A stopping daemon gives a sink a few seconds to finish the delivery in hand, then exits
/// without it (under a service manager's stop timeout): the batch is shipped again at the
/// next start, since its cursor never moved.
#[test]
fn a_stopping_daemon_does_not_wait_out_a_slow_collector() {
    use std::time::Duration;
    let collector = Collector::start(&[Answer::Slow(Duration::from_secs(60))], None);
    let env = Env::new();
    env.write_config(&format!(
        "[[sink]]\nname = \"slow\"\ntype = \"http\"\nurl = \"{}\"\ntimeout = \"50s\"\nflush_interval = \"100ms\"\n",
        collector.url()
    ));
    env.write("s.jsonl", &lines(&records("a", 2)));
    let mut daemon = Daemon::start_without_tap(&env);
    wait_until("the collector has the request", || {
        !collector.received.lock().unwrap().is_empty()
    });
    daemon.signal(libc::SIGTERM);
    let (status, took) = daemon.wait_exit();
    assert!(status.success());
    assert!(
        took < Duration::from_secs(12),
        "took {took:?}:\n{}",
        daemon.log()
    );
    assert!(
        daemon
            .log()
            .contains("sink slow: still delivering after 5s"),
        "{}",
        daemon.log()
    );
    assert_eq!(
        env.sql("SELECT seq FROM consumers WHERE name = 'sink:slow'"),
        Vec::<String>::new()
    );
}
