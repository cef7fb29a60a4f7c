//! Snapshot sources: chat files that the agent rewrites whole (Gemini CLI before 0.39 keeps
//! each chat as one JSON document, `chats/session-*.json`). Each message is archived once per
//! version of it, what the agent drops stays, a state that is not JSON is a reject, `restore`
//! writes the file back as the agent last kept it, and the daemon captures a file rewritten
//! many times a second once it settles.

use crate::util::{
    Daemon, Env, TapReader, home_daemon_cmd, stdout_of, wait_until_else, watched_inodes,
};
use serde_json::{Value, json};
use std::fs;
use std::path::PathBuf;

const SESSION: &str = "5b0c7e52-9d51-4a53-8f1c-0d8a3e6f2a11";

/// Where Gemini CLI 0.38 keeps the chat, under the test's HOME.
fn chat_path(env: &Env) -> PathBuf {
    (env.dir.path()).join("home/.gemini/tmp/proj/chats/session-2026-12-03T10-00-5b0c7e52.json")
}

/// A chat document as Gemini CLI 0.38 writes it (two-space indents), of `messages`: (id,
/// type, text).
fn chat(messages: &[(&str, &str, &str)], updated: &str) -> Vec<u8> {
    let messages: Vec<Value> = (messages.iter().enumerate())
        .map(|(i, (id, kind, text))| {
            json!({
                "id": id,
                "timestamp": format!("2026-12-03T10:00:{i:02}.000Z"),
                "type": kind,
                "content": text,
            })
        })
        .collect();
    let doc = json!({
        "sessionId": SESSION,
        "projectHash": "9f1e",
        "startTime": "2026-12-03T10:00:00.000Z",
        "lastUpdated": updated,
        "messages": messages,
    });
    serde_json::to_vec_pretty(&doc).unwrap()
}

fn write(env: &Env, bytes: &[u8]) {
    let path = chat_path(env);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let temp = path.with_extension("tmp");
    fs::write(&temp, bytes).unwrap();
    fs::rename(&temp, &path).unwrap();
}

fn count(env: &Env, sql: &str) -> u64 {
    env.sql(sql)[0].parse().unwrap()
}

#[test]
fn a_chat_rewritten_whole_is_archived_by_message_once_and_restored_as_last_kept() {
    let env = Env::new();
    let first = [
        ("m1", "user", "first question alpha"),
        ("m2", "gemini", "first answer bravo"),
    ];
    write(&env, &chat(&first, "2026-12-03T10:00:01.000Z"));
    env.run_once_home();
    // The document around the messages, then each message.
    assert_eq!(env.records().len(), 3);
    // Captured whole: no byte cursor lags behind the file.
    let status = env.status();
    assert_eq!(status["sources"][0]["lag"], Value::Null, "{status}");
    assert_eq!(status["totals"]["lag"], 0, "{status}");

    // The same chat written again, compactly: the same messages, nothing new to archive, but
    // these bytes are the file now.
    let doc: Value = serde_json::from_slice(&chat(&first, "2026-12-03T10:00:01.000Z")).unwrap();
    write(&env, doc.to_string().as_bytes());
    env.run_once_home();
    assert_eq!(env.records().len(), 3);
    assert_eq!(count(&env, "SELECT count(*) FROM snapshots"), 2);

    // The agent drops m1 (a compression, a rewind), grows m2 and adds m3.
    let second = [
        ("m2", "gemini", "first answer bravo, longer now"),
        ("m3", "user", "second question charlie"),
    ];
    let last = chat(&second, "2026-12-03T10:00:09.000Z");
    write(&env, &last);
    env.run_once_home();
    let records = env.records();
    assert_eq!(records.len(), 6, "{records:#?}");
    assert!(records[3].contains("10:00:09") && records[3].contains("\"messages\":[]"));
    assert!(records[4].contains("longer now") && records[5].contains("charlie"));
    let dropped = "SELECT count(*) FROM events WHERE kind = 'snapshot_dropped'";
    assert_eq!(count(&env, dropped), 1);

    // What the agent dropped is still the session's; m2 is shown as it is now.
    let listed = stdout_of(&env, &["sessions", "--json"]);
    let session: Value = serde_json::from_str(listed.trim()).unwrap();
    assert_eq!(session["id"], SESSION);
    assert_eq!(session["title"], "first question alpha");
    assert_eq!(
        (&session["user_messages"], &session["assistant_messages"]),
        (&json!(2), &json!(1))
    );
    let hits = stdout_of(&env, &["search", "alpha", "--json"]);
    assert!(hits.contains(SESSION), "{hits}");
    let shown = stdout_of(&env, &["show", SESSION, "--no-pager"]);
    assert!(shown.contains("first question alpha") && shown.contains("longer now"));
    assert!(!shown.contains("first answer bravo\n"), "{shown}");

    // Deleted: written back as the agent last kept it, and nothing archived again.
    fs::remove_file(chat_path(&env)).unwrap();
    env.run_once_home();
    stdout_of(&env, &["restore", SESSION]);
    assert!(fs::read(chat_path(&env)).unwrap() == last);
    let raw = stdout_of(&env, &["show", SESSION, "--format", "raw"]);
    assert!(raw.as_bytes() == last);
    env.run_once_home();
    assert_eq!(env.records().len(), 6);
    assert_eq!(count(&env, "SELECT count(*) FROM sources"), 1);
}

#[test]
fn a_chat_that_is_not_json_is_a_reject_and_read_again_once_it_is() {
    let env = Env::new();
    let cut = br#"{"sessionId": "5b0c7e52", "messages": [{"id": "m1", "#;
    write(&env, cut);
    env.run_once_home();
    let rejects = env.rejects(&[]);
    assert_eq!(rejects.len(), 1, "{rejects:?}");
    let reason = rejects[0]["reason"].as_str().unwrap();
    assert!(reason.contains("not a document of messages"), "{reason}");
    assert!(env.reject_raw(&rejects[0]["id"]) == cut);
    assert!(env.records().is_empty());

    write(
        &env,
        &chat(&[("m1", "user", "hello")], "2026-12-03T10:00:01Z"),
    );
    env.run_once_home();
    assert_eq!(env.records().len(), 2);
}

/// An agent that rewrites its chat at every token: 50 states in a burst are one capture,
/// made once the file has gone unmodified for the settle time, with every message in it.
#[test]
fn a_chat_rewritten_many_times_a_second_is_captured_once_it_settles() {
    let env = Env::new();
    let mut cmd = home_daemon_cmd(&env);
    cmd.env("RUST_LOG", "info,transcript_sync::engine::snapshot=debug");
    let daemon = Daemon::spawn(cmd, TapReader::Read);
    daemon.wait_log("caught up");

    let texts: Vec<String> = (0..50).map(|i| format!("streamed token {i}")).collect();
    for n in 1..=texts.len() {
        let ids: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
        let messages: Vec<(&str, &str, &str)> = (0..n)
            .map(|i| (ids[i].as_str(), "gemini", texts[i].as_str()))
            .collect();
        write(&env, &chat(&messages, &format!("2026-12-03T10:01:{n:02}Z")));
    }
    let mut tapped = String::new();
    wait_until_else(
        "the last state's messages on the tap",
        || {
            while let Ok(line) = daemon.tap.try_recv() {
                tapped.push_str(&line.text);
                tapped.push('\n');
            }
            tapped.contains("streamed token 49")
        },
        || daemon.log(),
    );
    let log = daemon.log();
    let captured = count(&env, "SELECT count(*) FROM snapshots");
    assert!(
        captured <= 2,
        "{captured} states captured of a burst of 50:\n{log}"
    );
    assert!(log.contains("snapshot not settled"), "{log}");
    for text in &texts {
        assert!(tapped.contains(&format!("\\\"{text}\\\"")) || tapped.contains(text));
    }
    daemon.terminate();
}

/// An agent's SQLite database in WAL mode (OpenCode's tables, reduced to the columns read):
/// its writes go to the `-wal` file, which the daemon follows as the database itself, while
/// the agent keeps it open (no checkpoint touches the database file).
#[test]
fn a_database_written_through_its_wal_is_followed_while_the_agent_keeps_it_open() {
    let env = Env::new();
    let dir = env.dir.path().join("home/.local/share/opencode");
    fs::create_dir_all(&dir).unwrap();
    let agent = rusqlite::Connection::open(dir.join("opencode.db")).unwrap();
    agent
        .execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
             CREATE TABLE session (id TEXT PRIMARY KEY, directory TEXT, title TEXT,
                 time_created INTEGER, time_updated INTEGER);
             CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT, time_created INTEGER,
                 time_updated INTEGER, data TEXT);
             CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT, session_id TEXT,
                 time_created INTEGER, time_updated INTEGER, data TEXT);
             CREATE TABLE event (id TEXT PRIMARY KEY, aggregate_id TEXT, seq INTEGER,
                 type TEXT, data TEXT);",
        )
        .unwrap();
    let db_file = || {
        fs::metadata(dir.join("opencode.db"))
            .unwrap()
            .modified()
            .unwrap()
    };
    let mut cmd = home_daemon_cmd(&env);
    cmd.env("RUST_LOG", "info,transcript_sync::engine::database=debug");
    let daemon = Daemon::spawn(cmd, TapReader::Read);
    // Read once it has settled, with no session yet: the one change left to see is below.
    daemon.wait_log("database read");
    let before = db_file();
    agent
        .execute_batch(
            r#"BEGIN;
               INSERT INTO session VALUES ('ses_1', '/w/app', 'Fix the build', 1, 2);
               INSERT INTO message VALUES ('msg_1', 'ses_1', 1, 1,
                   '{"role":"user","time":{"created":1796300000000}}');
               INSERT INTO part VALUES ('prt_1', 'msg_1', 'ses_1', 1, 1,
                   '{"type":"text","text":"fix the build please"}');
               INSERT INTO event VALUES ('evt_1', 'ses_1', 1, 'message.updated.1', '{}');
               COMMIT;"#,
        )
        .unwrap();
    let listed = || stdout_of(&env, &["sessions", "--json"]);
    wait_until_else(
        "the session in the database listed",
        || listed().contains("ses_1"),
        || daemon.log(),
    );
    assert_eq!(db_file(), before, "the database file itself was written");
    let session: Value = serde_json::from_str(listed().trim()).unwrap();
    assert_eq!(session["title"], "Fix the build");
    assert_eq!(session["project"], "/w/app");
    assert_eq!(session["user_messages"], 1);
    // Reading it raises events (SQLite changes the owner or mode of the `-wal` and `-shm` it
    // opens), which must not make it read again: a read that leads to another would go on
    // for ever, and open the database hundreds of times a second under the agent.
    // The read that saw the agent's one transaction (its one event) is the last one due.
    daemon.wait_log("to=1 sessions_changed=1");
    let reads = || daemon.log().matches("database read").count();
    let settled = reads();
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(reads(), settled, "{}", daemon.log());

    // A session is there while its database holds it (no file is at its path); once the
    // agent deletes it, it is gone, and its records stay.
    assert_eq!(session["on_disk"], true, "{session}");
    agent
        .execute_batch(
            "BEGIN; DELETE FROM part; DELETE FROM message; DELETE FROM session;
             INSERT INTO event VALUES ('evt_2', 'ses_1', 2, 'session.deleted.1', '{}');
             COMMIT;",
        )
        .unwrap();
    // The daemon says so before it records it: the listing is what is awaited.
    let session = || -> Value { serde_json::from_str(listed().trim()).unwrap() };
    wait_until_else(
        "the session shown as no longer in its database",
        || session()["on_disk"] == false,
        || daemon.log(),
    );
    daemon.wait_log("its session is no longer in the database");
    assert_eq!(session()["user_messages"], 1);
    daemon.terminate();
}

/// Aider appends to one Markdown history per project, in the projects a `[[watch]]` table
/// names: the daemon follows it as it grows, the block still growing at its end archived
/// again under its key (the index holds each block once, as last seen), and it watches no
/// deeper than a history can be (a project's `node_modules` is not watched, directory by
/// directory).
#[test]
fn an_aider_history_is_followed_as_it_grows_and_no_deeper_directory_is_watched() {
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    let env = Env::new();
    let project = env.dir.path().join("home/src/app");
    let deep = project.join("node_modules/left-pad/lib/util");
    fs::create_dir_all(&deep).unwrap();
    env.write_config("[[watch]]\npath = \"~/src\"\nharness = \"aider\"\n");
    let history = project.join(".aider.chat.history.md");
    let append = |text: &str| {
        let open = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&history);
        let mut f = open.unwrap();
        f.write_all(text.as_bytes()).unwrap();
    };
    append("\n# aider chat started at 2026-12-03 10:00:00\n\n> Aider v0.86.2  \n\n");
    append("#### fix the flaky test  \n\nLooking at the test first.\n");

    let daemon = Daemon::spawn(home_daemon_cmd(&env), TapReader::Read);
    daemon.wait_log("caught up");
    let watched = watched_inodes(daemon.pid());
    let inode = |p: &std::path::Path| fs::metadata(p).unwrap().ino();
    assert!(watched.contains(&inode(&project)), "{watched:?}");
    for dir in deep.ancestors().take_while(|d| *d != project) {
        assert!(!watched.contains(&inode(dir)), "{dir:?} is watched");
    }

    let show = |id: &str| -> Vec<Value> {
        let out = stdout_of(&env, &["show", id, "--format", "json"]);
        out.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let session = || -> Value {
        let listed = stdout_of(&env, &["sessions", "--json"]);
        serde_json::from_str(listed.trim()).unwrap_or(Value::Null)
    };
    wait_until_else(
        "the prompt in the index",
        || session()["user_messages"] == 1,
        || daemon.log(),
    );
    let id = session()["id"].as_str().unwrap().to_owned();
    assert_eq!(session()["title"], "fix the flaky test");
    assert_eq!(session()["project"], project.to_str().unwrap());
    // The reply goes on (a second paragraph), and a second chat starts.
    append("\nIt waits on a sleep; it should wait on the file.\n\n");
    append("# aider chat started at 2026-12-03 11:00:00\n\n");
    let replies = || -> Vec<String> {
        (show(&id).iter())
            .filter(|m| m["role"] == "assistant")
            .map(|m| m["parts"][0]["text"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    wait_until_else(
        "the reply's second paragraph in the index",
        || replies().iter().any(|r| r.contains("wait on the file")),
        || daemon.log(),
    );
    daemon.terminate();
    assert_eq!(
        replies(),
        ["Looking at the test first.\n\nIt waits on a sleep; it should wait on the file."]
    );
    let session = session();
    assert_eq!(session["assistant_messages"], 1, "{session}");
    assert_eq!(
        session["last_activity"], "2026-12-03T11:00:00Z",
        "{session}"
    );
}

/// OpenCode before 1.2 keeps a session as JSON files under `storage/` (a file per session,
/// message and part), rewritten in place: a file written there is a change to the store,
/// which is read again once it settles. A part rewritten as its text streams (no folder
/// made, so no rescan) is archived again; a message added later is archived too.
#[test]
fn opencodes_older_storage_is_followed_file_by_file() {
    let env = Env::new();
    let store = env.dir.path().join("home/.local/share/opencode/storage");
    let put = |rel: &str, value: Value| {
        let path = store.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    };
    let message = |n: u32, text: &str| {
        let (id, part) = (format!("msg_{n}"), format!("prt_{n}"));
        let info = json!({"id": id, "sessionID": "ses_1", "role": "user",
            "time": {"created": 1796300000000_u64 + u64::from(n)}});
        put(&format!("message/ses_1/{id}.json"), info);
        let text = json!({"id": part, "sessionID": "ses_1", "messageID": id, "type": "text",
            "text": text});
        put(&format!("part/{id}/{part}.json"), text);
    };
    fs::create_dir_all(&store).unwrap();
    fs::write(store.join("migration"), "2").unwrap();
    put(
        "session/global/ses_1.json",
        json!({"id": "ses_1", "directory": "/w/app", "title": "Fix the build"}),
    );
    message(1, "fix the build please");
    // Another session, one of whose files is cut short (as a crash leaves it): only that
    // session waits for it to be whole.
    put(
        "session/global/ses_2.json",
        json!({"id": "ses_2", "directory": "/w/lib", "title": "Cut short"}),
    );
    put(
        "message/ses_2/msg_9.json",
        json!({"id": "msg_9", "sessionID": "ses_2", "role": "user", "time": {"created": 1}}),
    );
    let cut = store.join("part/msg_9/prt_9.json");
    fs::create_dir_all(cut.parent().unwrap()).unwrap();
    fs::write(&cut, "{\"id\": \"prt_9\", \"type\": \"te").unwrap();
    let daemon = Daemon::spawn(home_daemon_cmd(&env), TapReader::Read);
    daemon.wait_log("caught up");
    let listed = || stdout_of(&env, &["sessions", "--json"]);
    let session = || -> Value {
        let line = listed()
            .lines()
            .find(|l| l.contains("ses_1"))
            .map(String::from);
        line.and_then(|l| serde_json::from_str(&l).ok())
            .unwrap_or(Value::Null)
    };
    wait_until_else(
        "the session in the index",
        || session()["user_messages"] == 1,
        || daemon.log(),
    );
    assert_eq!(session()["title"], "Fix the build");
    let found = |text: &str| {
        let quoted = format!("\"{text}\"");
        let out = crate::util::cli(&env, &["search", &quoted, "--json"]);
        String::from_utf8_lossy(&out.stdout).contains("ses_1")
    };
    message(1, "fix the build please, then the docs");
    wait_until_else(
        "the rewritten part in the index",
        || found("then the docs"),
        || daemon.log(),
    );
    message(2, "and the tests");
    wait_until_else(
        "the message written later in the index",
        || session()["user_messages"] == 2,
        || daemon.log(),
    );
    assert!(!listed().contains("ses_2"), "{}", listed());
    assert!(
        daemon.log().contains("session ses_2 in"),
        "{}",
        daemon.log()
    );
    let part = json!({"id": "prt_9", "type": "text", "text": "whole again"});
    fs::write(&cut, serde_json::to_vec(&part).unwrap()).unwrap();
    wait_until_else(
        "the session whose file is whole again",
        || listed().contains("ses_2"),
        || daemon.log(),
    );
    daemon.terminate();
    assert!(found("and the tests"));
}
