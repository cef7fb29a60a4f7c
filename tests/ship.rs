//! Shipping to sinks: a mirror directory, a real PostgreSQL cluster of the test's own, and an
//! HTTP server on loopback that misbehaves on purpose. Every record arrives, once in effect,
//! through restarts, outages and refusals.

use crate::util::{
    Daemon, Env, PG_PASSWORD, PgCluster, TapReader, lines, records, stderr, wait_until,
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
    let daemon = daemon_shipping(&env, &ship);
    let copy = mirrored(&mirror, "proj/s.jsonl");
    wait_until("the first lines are mirrored", || read(&copy) == first);

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
    let mut f = fs::OpenOptions::new().append(true).open(&copy).unwrap();
    std::io::Write::write_all(&mut f, b"{\"not\":\"acknowledged\"}\n").unwrap();
    drop(f);
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
    assert_eq!(read(&kept), whole, "the earlier generation stays as it was");
    let status = env.status();
    let sink = &status["sinks"][0];
    assert_eq!(sink["name"], "mirror");
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
         password_file = \"/run/secrets/pg\"\nflush_interval = \"250ms\"\n",
    );
    let out = check(&env);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("[[sink]]") && text.contains("name = \"team\""),
        "{text}"
    );
    assert!(text.contains("flush_interval = \"250ms\""), "{text}");
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
        ["1"]
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
    let status = env.status();
    assert_eq!(status["sinks"][0]["seq"], 50);
    assert_eq!(status["sinks"][0]["lag_records"], 0);
}

/// A daemon killed with SIGKILL in the middle of shipping a backlog ships the rest after its
/// restart: every record in PostgreSQL once.
#[test]
fn a_sigkill_mid_shipping_leaves_every_record_once_after_the_restart() {
    let pg = PgCluster::start();
    let env = Env::new();
    pg_config(&env, &pg, &pg.password_file());
    let n = 20;
    for f in 0..n {
        env.write(
            &format!("f{f}.jsonl"),
            &lines(&records(&format!("f{f}"), 1000)),
        );
    }
    let daemon = Daemon::start_without_tap(&env);
    wait_until("some records reach PostgreSQL", || pg_counts(&pg).0 > 0);
    daemon.signal(libc::SIGKILL);
    drop(daemon);
    let shipped_before = pg_counts(&pg).0;
    let daemon = Daemon::start_without_tap(&env);
    wait_until("every record reaches PostgreSQL", || {
        pg_counts(&pg).0 == 20_000
    });
    assert_eq!(pg_counts(&pg), (20_000, 20_000));
    drop(daemon);
    assert!(
        shipped_before < 20_000,
        "the kill came after everything was shipped"
    );
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
    daemon.wait_log("sink team: PostgreSQL at");
    env.append("s.jsonl", &lines(&records("c", 5)));
    wait_until("the archive has every record", || env.records().len() == 15);
    let status = env.status();
    let sink = &status["sinks"][0];
    assert!(sink["failing_since"].is_string(), "{sink}");
    assert!(sink["lag_records"].as_i64().unwrap() > 0, "{sink}");
    pg.start_again();
    wait_until("every record arrives once", || pg_counts(&pg) == (15, 15));
    daemon.wait_log("sink team: delivering again after");
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
