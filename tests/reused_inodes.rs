//! Two files, one inode: an atomic save (a temporary file renamed over the old one) frees the
//! old file's inode, and the filesystem gives it to the next file made, often another
//! writer's temporary file. Such a file is never taken for the source whose inode it got:
//! a file found away from its source's path is that source only when its content agrees with
//! what was captured of it, and never when it is another agent's.

use crate::util::*;
use rusqlite::Connection;
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

const CLINE_SESSION: &str = "1796311346532_t87ya";
const GEMINI_SESSION: &str = "d8bc5fca-b273-44e2-a18a-799374e3995c";

/// Cline's messages file and Gemini CLI's chat, copied from the recorded fixtures into the
/// env's home.
fn cline_and_gemini(env: &Env) -> (PathBuf, PathBuf) {
    let home = env.dir.path().join("home");
    copy_agent_fixture("cline", &home);
    copy_agent_fixture("gemini-cli-json", &home);
    let cline = home.join(format!(
        ".cline/data/sessions/{CLINE_SESSION}/{CLINE_SESSION}.messages.json"
    ));
    let gemini = home.join(".gemini/tmp/project/chats/session-2026-12-03T15-14-d8bc5fca.json");
    (cline, gemini)
}

/// `doc` with `message` added to its list `messages`, two-space indented as both agents write.
fn with_message(doc: &[u8], message: Value) -> Vec<u8> {
    let mut doc: Value = serde_json::from_slice(doc).unwrap();
    doc["messages"].as_array_mut().unwrap().push(message);
    serde_json::to_vec_pretty(&doc).unwrap()
}

/// The message the Gemini chat gets, as Gemini CLI 0.38 writes one.
fn gemini_added() -> Value {
    serde_json::json!({"id": "gemini-added", "timestamp": "2026-12-03T15:15:00.000Z",
        "type": "user", "content": [{"text": "gemini added words"}]})
}

fn sessions(env: &Env) -> Vec<Value> {
    (stdout_of(env, &["sessions", "--json"]).lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn session<'a>(all: &'a [Value], id: &str) -> &'a Value {
    (all.iter().find(|s| s["id"] == id)).unwrap_or_else(|| panic!("no session {id}: {all:?}"))
}

#[test]
fn a_snapshot_files_freed_inode_taken_by_another_agents_save_is_not_a_move() {
    // Regression: Cline saves atomically and frees its messages file's inode; Gemini CLI's
    // next temporary file gets it and is renamed over Gemini's chat. The chat was taken for
    // the Cline session moved there: the Gemini source marked gone while its file was on
    // disk, Cline's own path read as a new source, and Gemini's new message in no Gemini
    // session. A hard link stands for the reuse (the same inode at the temporary name).
    let env = Env::new();
    let (cline, gemini) = cline_and_gemini(&env);
    env.run_once_home();
    let gemini_temp = gemini.with_extension("json.tmp");
    fs::hard_link(&cline, &gemini_temp).unwrap();
    let cline_next = with_message(
        &fs::read(&cline).unwrap(),
        serde_json::json!({"id": "cline-added", "role": "user",
            "content": [{"type": "text", "text": "cline added words"}], "ts": 1796311349000u64}),
    );
    let cline_temp = cline.with_extension("tmp");
    fs::write(&cline_temp, &cline_next).unwrap();
    fs::rename(&cline_temp, &cline).unwrap();
    let gemini_next = with_message(&fs::read(&gemini).unwrap(), gemini_added());
    // Written in place: the temporary file keeps the inode it was given.
    fs::write(&gemini_temp, &gemini_next).unwrap();
    fs::rename(&gemini_temp, &gemini).unwrap();
    let log = env.run_once_home();

    assert_log_has(&log, "inode reused path=");
    let sources = env.sql("SELECT harness || ' ' || path || ' ' || gone FROM sources ORDER BY id");
    let manifest = cline.with_file_name(format!("{CLINE_SESSION}.json"));
    let live = |harness: &str, path: &Path| format!("{harness} {} 0", path.display());
    assert_eq!(
        sources,
        [
            live("cline", &manifest),
            live("cline", &cline),
            live("gemini-cli", &gemini)
        ],
        "{log}"
    );
    let moves = "SELECT count(*) FROM events WHERE kind IN ('moved', 'source_gone', 'replaced')";
    assert_eq!(env.sql(moves), ["0"]);
    let all = sessions(&env);
    assert_eq!(all.len(), 2, "{all:?}");
    let files = |id: &str| session(&all, id)["files"].clone();
    assert_eq!(files(GEMINI_SESSION), serde_json::json!([gemini]));
    assert_eq!(files(CLINE_SESSION), serde_json::json!([manifest, cline]));
    let shown_gemini = stdout_of(&env, &["show", GEMINI_SESSION, "--no-pager"]);
    let shown_cline = stdout_of(&env, &["show", CLINE_SESSION, "--no-pager"]);
    assert!(
        shown_gemini.contains("gemini added words"),
        "{shown_gemini}"
    );
    assert!(shown_cline.contains("cline added words"), "{shown_cline}");
    assert!(!shown_cline.contains("gemini added words"), "{shown_cline}");
    // Each is restored as its agent last kept it.
    fs::remove_file(&cline).unwrap();
    fs::remove_file(&gemini).unwrap();
    for id in [CLINE_SESSION, GEMINI_SESSION] {
        let out = cli(&env, &["restore", id]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    assert_eq!(fs::read(&cline).unwrap(), cline_next);
    assert_eq!(fs::read(&gemini).unwrap(), gemini_next);
}

#[test]
fn a_transcripts_freed_inode_taken_by_another_file_leaves_the_source_at_its_path() {
    // One agent, appended transcripts: a.jsonl is saved anew (its records and one more) and
    // its old inode goes to a new file, c.jsonl, whose bytes are another session's. The
    // marker windows of a's cursor do not verify on c, so c is new, and a goes on in its
    // next state from its cursor: nothing archived twice.
    let env = Env::new();
    let a = records("a", 4);
    env.write("a.jsonl", &lines(&a[..3]));
    env.run_once(&[]);
    fs::hard_link(env.path("a.jsonl"), env.path("c.tmp")).unwrap();
    env.replace_atomically("a.jsonl", &lines(&a));
    let c = records("c", 3);
    fs::write(env.path("c.tmp"), lines(&c)).unwrap();
    fs::rename(env.path("c.tmp"), env.path("c.jsonl")).unwrap();
    let log = env.run_once(&[]);

    assert_log_has(&log, "continued path=");
    assert_eq!(env.records_of("a.jsonl"), a);
    assert_eq!(env.records_of("c.jsonl"), c);
    assert_eq!(
        env.sql("SELECT count(*) FROM events WHERE kind IN ('moved', 'source_gone', 'replaced')"),
        ["0"]
    );
}

#[test]
fn a_database_replaced_by_a_copy_is_read_again_from_its_beginning() {
    // The mark of a database's source says what was read of that file. A copy put in its
    // place (a backup, another machine's) may hold a session changed below the mark: here
    // the copy's event log is as long as the original's, one of its events now another
    // session's. That session is read too.
    let env = Env::new();
    let home = env.dir.path().join("home");
    copy_agent_fixture("opencode", &home);
    env.run_once_home();
    assert_eq!(sessions(&env).len(), 1);
    let db = home.join(".local/share/opencode/opencode.db");
    let copy = db.with_extension("db.copy");
    fs::copy(&db, &copy).unwrap();
    let conn = Connection::open(&copy).unwrap();
    conn.execute_batch(
        "PRAGMA foreign_keys = OFF;
         CREATE TEMP TABLE s AS SELECT * FROM session;
         UPDATE s SET id = 'ses_copy', title = 'The copied session';
         INSERT INTO session SELECT * FROM s;
         CREATE TEMP TABLE m AS SELECT * FROM message;
         UPDATE m SET id = id || '_copy', session_id = 'ses_copy';
         INSERT INTO message SELECT * FROM m;
         CREATE TEMP TABLE p AS SELECT * FROM part;
         UPDATE p SET id = id || '_copy', message_id = message_id || '_copy',
             session_id = 'ses_copy';
         INSERT INTO part SELECT * FROM p;
         UPDATE event SET aggregate_id = 'ses_copy' WHERE rowid = (SELECT min(rowid) FROM event);",
    )
    .unwrap();
    drop(conn);
    fs::rename(&copy, &db).unwrap();
    env.run_once_home();

    let all = sessions(&env);
    let titles: Vec<&str> = all.iter().map(|s| s["title"].as_str().unwrap()).collect();
    assert_eq!(all.len(), 2, "{titles:?}");
    assert!(titles.contains(&"The copied session"), "{titles:?}");
}

#[test]
fn a_snapshot_file_moved_and_saved_again_keeps_its_source() {
    // The evidence a move needs, met: the chat's old path holds nothing, and its next state
    // shares its messages' ids with the state captured last.
    let env = Env::new();
    let (_, gemini) = cline_and_gemini(&env);
    env.run_once_home();
    let moved = gemini.with_file_name("session-2026-12-03T15-14-d8bc5fca-kept.json");
    fs::rename(&gemini, &moved).unwrap();
    let next = with_message(&fs::read(&moved).unwrap(), gemini_added());
    // Written in place: the moved file keeps its inode.
    fs::write(&moved, &next).unwrap();
    let log = env.run_once_home();

    assert_log_has(&log, "moved path=");
    let gemini_sources = "SELECT path || ' ' || gone FROM sources WHERE harness = 'gemini-cli'";
    assert_eq!(env.sql(gemini_sources), [format!("{} 0", moved.display())]);
    let all = sessions(&env);
    assert_eq!(session(&all, GEMINI_SESSION)["messages"], 4, "{all:?}");
}
