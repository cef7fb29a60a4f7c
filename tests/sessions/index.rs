//! The session index itself: following live commits, catching up, and older archives' upgrades.

use super::{
    CLAUDE_ID, CODEX_ID, CURSOR_ID, GEMINI_ID, Home, archive_home, put, record_count, start_daemon,
};
use crate::util::{Daemon, Env, SandboxDaemon, cli, stderr, stdout_of, wait_until};
use serde_json::Value;
use std::fs;
use std::path::PathBuf;

#[test]
fn the_index_follows_live_commits() {
    let env = Env::new();
    let home = Home::write(&env);
    let daemon = start_daemon(&env);
    let messages = || {
        let out = cli(&env, &["sessions", "--json", "--harness", "cursor"]);
        let list: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        list.first().and_then(|s| s["messages"].as_i64())
    };
    wait_until("the backfill is indexed", || messages() == Some(3));
    let line = br#"{"role":"user","message":{"content":[{"type":"text","text":"now the tests"}]}}"#;
    fs::OpenOptions::new()
        .append(true)
        .open(&home.cursor)
        .map(|mut f| {
            use std::io::Write;
            f.write_all(line).and_then(|()| f.write_all(b"\n")).unwrap()
        })
        .unwrap();
    wait_until("the new message is indexed", || messages() == Some(4));
    drop(daemon);
}

/// A command run right after a record was archived, while the running daemon's index has
/// not indexed it yet, waits for the index rather than answering without it. The index is held
/// back deterministically: the test holds the index file's write lock from before the append
/// until the commands say they wait.
#[test]
fn commands_wait_for_the_running_daemons_index_to_reach_what_was_archived() {
    let env = Env::new();
    let home = Home::write(&env);
    let daemon = start_daemon(&env);
    wait_until("the backfill is indexed", || {
        let out = cli(&env, &["sessions", "--json"]);
        let listed = String::from_utf8_lossy(&out.stdout).into_owned();
        [CLAUDE_ID, CODEX_ID, GEMINI_ID, CURSOR_ID]
            .iter()
            .all(|id| listed.contains(id))
    });
    let lock = rusqlite::Connection::open(env.index_file()).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let archived = record_count(&env);
    let new_id = "5a1e0c3d-2b4f-4e6a-8c9d-0e1f2a3b4c5d";
    let new_session = home.cursor.with_file_name(format!("{new_id}.jsonl"));
    put(
        &new_session,
        br#"{"role":"user","message":{"content":[{"type":"text","text":"rename the ledger"}]}}
"#,
    );
    wait_until("the new session is archived", || {
        record_count(&env) > archived
    });
    let waiting = |args: &[&str]| {
        let mut child = env
            .cmd()
            .args(args)
            .arg("--db")
            .arg(&env.db)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut log = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut said = String::new();
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut log, &mut line).unwrap() > 0 {
            said.push_str(&line);
            if line.contains("waiting for the running daemon's session index") {
                return (child, log);
            }
            line.clear();
        }
        let ended = child.wait().unwrap();
        panic!("{args:?} did not wait for the index ({ended}):\n{said}");
    };
    let (sessions, _) = waiting(&["sessions", "--json"]);
    let (restore, _) = waiting(&["restore", &new_id[..8], "--dry-run"]);
    drop(lock);
    let listed = sessions.wait_with_output().unwrap();
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains(new_id));
    let restored = restore.wait_with_output().unwrap();
    assert!(restored.status.success(), "{}", stderr(&restored));
    assert!(
        String::from_utf8_lossy(&restored.stdout).contains(&new_session.display().to_string()),
        "{}",
        String::from_utf8_lossy(&restored.stdout)
    );
    drop(daemon);
}

/// "caught up" means the session index too, or says that it does not: a daemon whose index
/// cannot keep up (held back here by the test holding the index file's write lock from before
/// the daemon starts) says how far behind it is, in the log and in `status`, and says when it
/// has caught up.
#[test]
fn caught_up_says_whether_the_session_index_has_caught_up_too() {
    let env = Env::new();
    fs::create_dir_all(env.dir.path().join("home")).unwrap();
    let made = cli(&env, &["run", "--once"]);
    assert!(made.status.success(), "{}", stderr(&made));
    Home::write(&env);
    let lock = rusqlite::Connection::open(env.index_file()).unwrap();
    lock.execute_batch("BEGIN IMMEDIATE").unwrap();
    let daemon = start_daemon(&env);
    let log = daemon.wait_log("caught up sources=");
    let line = log
        .lines()
        .find(|l| l.contains("caught up sources="))
        .unwrap();
    assert!(line.contains("the session index is"), "{line}");
    let status = stdout_of(&env, &["status"]);
    assert!(
        status
            .lines()
            .next()
            .is_some_and(|l| l.contains("caught up") && l.contains("the session index is")),
        "{status}"
    );
    drop(lock);
    daemon.wait_log("session index caught up at seq");
    let status = stdout_of(&env, &["status"]);
    assert!(!status.contains("the session index is"), "{status}");
}

/// The session index's own file, beside the env's archive.
/// Removes the session index's file (with its WAL and shared memory).
fn remove_index(env: &Env) {
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", env.index_file().display()));
        if file.exists() {
            fs::remove_file(file).unwrap();
        }
    }
}

/// Puts the env's index back where archives of schema 8 and older kept it, in the archive
/// itself, with `text` as the indexed text of every message (to tell it from an index built
/// again), and removes the index's own file. Returns the archive's connection, for the caller
/// to take the archive back to its schema.
fn index_back_into_the_archive(env: &Env, text: &str) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    // Those archives' index cut its text with SQLite's own unicode61.
    let schema = include_str!("../../src/consumers/sessions/schema.sql");
    let words = "tokenize = 'terms remove_diacritics 2 categories ''L* N* Co M*'''";
    assert!(schema.contains(words), "the schema's tokenizer changed");
    let schema = schema.replace(words, "tokenize = 'unicode61 remove_diacritics 2'");
    conn.execute_batch(&schema).unwrap();
    let index = env.index_file();
    conn.execute("ATTACH ?1 AS i", [index.to_str().unwrap()])
        .unwrap();
    conn.execute_batch(
        "DROP TABLE main.progress;
         INSERT INTO main.sessions SELECT * FROM i.sessions;
         INSERT INTO main.session_sources SELECT * FROM i.session_sources;
         INSERT INTO main.session_models SELECT * FROM i.session_models;
         INSERT INTO main.messages SELECT * FROM i.messages;
         INSERT INTO main.consumers (name, seq, updated_ms) SELECT 'index', seq, 0 FROM i.progress;
         DETACH i;",
    )
    .unwrap();
    conn.execute(
        "INSERT INTO message_text (rowid, body) SELECT id, ?1 FROM messages",
        [text],
    )
    .unwrap();
    // Those archives counted a session's messages with a trigger (gone from the index's
    // schema since), which schema 9 drops with the rest: made after the rows above, as it
    // would count them again.
    conn.execute_batch(
        "CREATE TRIGGER messages_added AFTER INSERT ON messages BEGIN
             UPDATE sessions SET user_messages = user_messages + (NEW.role = 'user')
             WHERE id = NEW.session;
         END;",
    )
    .unwrap();
    remove_index(env);
    conn
}

/// Schema 9 moves the index out of the archive into a file of its own: an archive that holds
/// one loses it (the index is derived), and the index is built again in its file, finding
/// the same.
#[test]
fn an_archive_that_kept_its_index_inside_moves_it_to_a_file_of_its_own_and_finds_the_same() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    let query = ["search", "\"nightly backup\"", "--json"];
    let found = stdout_of(&env, &query);
    assert!(found.contains("**nightly backup**"), "{found}");
    let listed = stdout_of(&env, &["sessions", "--json"]);
    let conn = index_back_into_the_archive(&env, "stale text");
    conn.execute_batch(
        "DROP TABLE tags; DROP TABLE marks; DROP TABLE mark_changes; DROP TABLE snapshots; PRAGMA user_version = 8;",
    )
    .unwrap();
    drop(conn);
    let tables = "SELECT count(*) FROM sqlite_master WHERE name IN ('sessions', 'message_text')";
    assert_eq!(env.sql(tables), ["2"]);
    let out = cli(&env, &query);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("session index up to date"),
        "{}",
        stderr(&out)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), found);
    assert_eq!(env.sql("PRAGMA user_version"), ["12"]);
    assert_eq!(env.sql(tables), ["0"]);
    assert_eq!(
        env.sql("SELECT count(*) FROM consumers WHERE name = 'index'"),
        ["0"]
    );
    assert!(env.index_file().is_file());
    let stale = cli(&env, &["search", "stale", "--json"]);
    assert_eq!(stale.status.code(), Some(1), "{}", stderr(&stale));
    assert!(stale.stdout.is_empty());
    assert_eq!(stdout_of(&env, &["sessions", "--json"]), listed);
}

/// Schema 8 makes the sessions table again, keyed by machine, under messages and the other
/// tables that reference it: an archive of schema 7 with its index inside upgrades (through
/// schema 9, which then drops the index from the archive) and lists the same sessions.
#[test]
fn an_indexed_archive_of_schema_7_upgrades_and_lists_the_same_sessions() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    let listed = stdout_of(&env, &["sessions", "--json"]);
    let found = stdout_of(&env, &["search", "\"one cent\"", "--json"]);
    let conn = index_back_into_the_archive(&env, "one cent");
    conn.execute_batch(
        "DROP TABLE machines; DROP TABLE pulls; DROP TABLE pulled_sessions; DROP INDEX sources_remote;
         ALTER TABLE sources DROP COLUMN machine; ALTER TABLE sources DROP COLUMN remote_id;
         DROP TABLE snapshots; DROP TABLE tags; DROP TABLE marks; DROP TABLE mark_changes; PRAGMA user_version = 7;",
    )
    .unwrap();
    drop(conn);
    let out = cli(&env, &["sessions", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), listed);
    assert_eq!(env.sql("PRAGMA user_version"), ["12"]);
    assert_eq!(env.sql("PRAGMA foreign_key_check"), Vec::<String>::new());
    assert_eq!(
        stdout_of(&env, &["search", "\"one cent\"", "--json"]),
        found
    );
}

#[test]
fn an_archive_from_before_the_index_gets_it_on_upgrade_and_reindex_rebuilds_the_same() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    let indexed = stdout_of(&env, &["sessions", "--json"]);
    // Back to schema 3, as an archive written by the previous version.
    let conn = rusqlite::Connection::open(&env.db).unwrap();
    conn.execute_batch(
        "DELETE FROM consumers;
         DROP TABLE sinks; DROP TABLE dead_letters; DROP TABLE sink_state;
         DELETE FROM state WHERE key = 'machine_id'; DROP TABLE dictionaries;
         ALTER TABLE sources DROP COLUMN bytes; ALTER TABLE sources DROP COLUMN stored;
         DROP TABLE machines; DROP TABLE pulls; DROP TABLE pulled_sessions; DROP INDEX sources_remote;
         ALTER TABLE sources DROP COLUMN machine; ALTER TABLE sources DROP COLUMN remote_id;
         DROP TABLE snapshots; DROP TABLE tags; DROP TABLE marks; DROP TABLE mark_changes; PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(conn);
    remove_index(&env);
    let index = |env: &Env| {
        let i = &env.status()["index"];
        (i["seq"].as_i64().unwrap(), i["behind"].as_i64().unwrap())
    };
    assert_eq!(index(&env), (0, 32));
    let out = cli(&env, &["sessions", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(index(&env), (32, 0));
    assert!(
        stderr(&out).contains("session index up to date: 32 records indexed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), indexed);

    let rebuilt = cli(&env, &["reindex"]);
    assert!(rebuilt.status.success(), "{}", stderr(&rebuilt));
    assert_eq!(stdout_of(&env, &["sessions", "--json"]), indexed);

    let daemon = Daemon::start_without_tap(&env);
    daemon.wait_log("watching");
    let refused = cli(&env, &["reindex"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("in use by another `transcript-sync run`"),
        "{}",
        stderr(&refused)
    );
}

/// A stopping daemon does not wait for the index to catch up (a service manager would kill it
/// at its stop timeout): the index stops after its transaction in hand and catches up at the
/// next start, with nothing lost.
#[test]
fn the_daemon_stops_without_waiting_for_the_index_which_catches_up_later() {
    let env = Env::new();
    let text = "word ".repeat(800);
    for f in 0..20 {
        let lines: Vec<String> = (0..1000)
            .map(|i| format!(r#"{{"role":"user","n":{i},"text":"{text} {f}"}}"#))
            .collect();
        env.write(&format!("f{f}.jsonl"), &crate::util::lines(&lines));
    }
    env.run_once(&[]);
    remove_index(&env);
    let mut daemon = Daemon::start_without_tap(&env);
    daemon.wait_log("session index: catching up from seq 0 to 20000");
    daemon.signal(libc::SIGTERM);
    let (status, _) = daemon.wait_exit();
    assert!(status.success(), "{status}:\n{}", daemon.log());
    let behind = env.status()["index"]["behind"].as_i64().unwrap();
    assert!(behind > 0, "the index caught up before the daemon stopped");
    env.run_once(&[]);
    assert_eq!(env.status()["index"]["behind"], 0);
}
