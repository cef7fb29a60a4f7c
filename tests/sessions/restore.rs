//! Restoring a session: a deleted one comes back byte for byte and is not archived again.

use super::{
    CLAUDE_ID, CODEX_ID, GEMINI_ID, Home, archive_home, conversation, fixture, json_lines,
    record_count, session, start_daemon,
};
use crate::util::{Daemon, Env, cli, stderr, stdout_of, wait_until, wait_until_else};
use std::fs;
use std::path::Path;
use std::process::Output;

fn restore(env: &Env, args: &[&str]) -> Output {
    let mut all = vec!["restore"];
    all.extend(args);
    cli(env, &all)
}

#[test]
fn a_deleted_session_comes_back_byte_for_byte_and_is_not_archived_again() {
    let env = Env::new();
    let home = Home::write(&env);
    append(&home.codex, b"");
    let mut daemon = start_daemon(&env);
    // `sessions` runs while the daemon creates and migrates the archive: neither may fail.
    wait_until("the index has the session", || {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            panic!("the daemon ended ({status}):\n{}", daemon.log());
        }
        let out = cli(&env, &["sessions", "--json"]);
        String::from_utf8_lossy(&out.stdout).contains("\"records\":11")
    });
    let original = fs::read(&home.claude).unwrap();
    let original_sub = fs::read(&home.subagent).unwrap();
    fs::remove_file(&home.claude).unwrap();
    fs::remove_dir_all(home.claude.with_extension("")).unwrap();
    // Both deletions recorded: the session file's and its subagent's.
    daemon.wait_log_times("source_gone", 2);
    let gone = json_lines(&env, &["sessions", "--json", "--harness", "claude-code"]);
    assert_eq!(session(&gone, CLAUDE_ID)["on_disk"], false);

    let out = restore(&env, &[&CLAUDE_ID[..8]]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(
        said.contains(&format!("wrote {}", home.claude.display())),
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "cd /home/dana/src/ledger && claude --resume {CLAUDE_ID}"
        )),
        "{said}"
    );
    assert_eq!(fs::read(&home.claude).unwrap(), original);
    assert_eq!(fs::read(&home.subagent).unwrap(), original_sub);
    let age = fs::metadata(&home.claude)
        .unwrap()
        .modified()
        .unwrap()
        .elapsed()
        .unwrap();
    assert!(age.as_secs() < 60, "mtime is now, not the original's");

    // The daemon sees the restored file, and archives only what is appended to it.
    let records = || record_count(&env);
    let before = records();
    append_after_restore(&env, &home, daemon, before);
    let said = conversation(&env, CLAUDE_ID);
    assert_eq!(
        said.last().unwrap().1,
        "and the credit notes?",
        "it joins its session"
    );

    // Deleted and restored while no daemon runs, from an original that held a blank line
    // (which is not a record, so not restored): at the daemon's start the file is shorter
    // than its cursor, and would be read again from its start if restore had not marked it.
    fs::remove_file(&home.codex).unwrap();
    let out = restore(&env, &[CODEX_ID]);
    assert!(out.status.success(), "{}", stderr(&out));
    let before = records();
    append(&home.codex, br#"{"timestamp":"2026-11-29T15:00:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"one more"}]}}"#);
    let daemon = start_daemon(&env);
    wait_until("the record appended after the restore", || {
        records() > before
    });
    daemon.terminate();
    assert_eq!(
        records(),
        before + 1,
        "the restored records were archived again"
    );

    // Deleted again after what the agent appended to a restored file was archived (as a new
    // source continuing the restored one): it all comes back.
    for path in [&home.claude, &home.codex] {
        let whole = fs::read(path).unwrap();
        fs::remove_file(path).unwrap();
        let id = if *path == home.claude {
            CLAUDE_ID
        } else {
            CODEX_ID
        };
        let out = restore(&env, &[id]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            fs::read(path).unwrap() == whole,
            "{path:?} is not what it was"
        );
    }
}

/// The daemon runs but has not yet seen the deletion (it is stopped): the archive still
/// tracks the deleted file's source, and the file system hands its freed inode to the next
/// file made in its directory, the restore's. On a busy disk another test's file may take
/// that inode first, and the restore then shows nothing: the scenario is played again, on a
/// fresh archive, up to eight times (on a loaded machine, three were once not enough).
#[test]
fn a_session_restored_before_the_running_daemon_saw_its_deletion_is_not_archived_again() {
    const TRIES: usize = 8;
    for n in 1..=TRIES {
        if restored_on_the_tracked_inode(n == TRIES) {
            return;
        }
    }
}

/// The scenario above; false when the restore was not given the tracked inode (unless `last`,
/// when that fails the test).
fn restored_on_the_tracked_inode(last: bool) -> bool {
    use std::os::unix::fs::MetadataExt;
    // On the project's disk, whose file system (ext4) hands a freed inode to the next file.
    let env = Env::outside_tmp();
    let home = Home::write(&env);
    let daemon = start_daemon(&env);
    wait_until("the index has the session", || {
        let out = cli(&env, &["sessions", "--json"]);
        String::from_utf8_lossy(&out.stdout).contains("\"records\":11")
    });
    let records = || record_count(&env);
    let before = records();
    let original = fs::read(&home.claude).unwrap();
    let inode = fs::metadata(&home.claude).unwrap().ino();
    daemon.signal(libc::SIGSTOP);
    fs::remove_file(&home.claude).unwrap();
    let out = (env.cmd().args(["restore", CLAUDE_ID, "--db"]).arg(&env.db))
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    daemon.signal(libc::SIGCONT);
    assert!(out.status.success(), "{}", stderr(&out));
    let given = stderr(&out).contains("writing it again on another inode");
    if !given && !last {
        return false;
    }
    assert!(
        given,
        "the restore was not given the tracked inode in any try, so this test shows nothing:\n{}",
        stderr(&out)
    );
    assert_eq!(fs::read(&home.claude).unwrap(), original);
    assert_ne!(
        fs::metadata(&home.claude).unwrap().ino(),
        inode,
        "the restored file is on the inode of the source the daemon still tracks"
    );
    let left: Vec<_> = fs::read_dir(home.claude.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains(".restoring-"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");

    // The deleted file's source ends: the restored file replaced it at its path.
    let path = home.claude.to_str().unwrap();
    daemon.wait_log(&format!("replaced path={path:?}"));
    // Said as the old source ends, before the new one is recorded: the rows are awaited.
    let count = |gone: bool| {
        env.sql(&format!(
            "SELECT count(*) FROM sources WHERE gone = {gone} AND CAST(path AS TEXT) = '{path}'"
        ))
    };
    wait_until_else(
        "one live source at the restored path, the deleted file's gone",
        || count(false) == ["1"] && count(true) != ["0"],
        || format!("{:?} {:?}\n{}", count(false), count(true), daemon.log()),
    );
    append_after_restore(&env, &home, daemon, before);
    true
}

/// Appends a record to the restored Claude Code session, stops `daemon` once it is archived,
/// and requires it to be the only record archived since there were `before`.
fn append_after_restore(env: &Env, home: &Home, daemon: Daemon, before: u64) {
    append(
        &home.claude,
        br#"{"type":"user","uuid":"after-restore","sessionId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","message":{"role":"user","content":"and the credit notes?"}}"#,
    );
    wait_until("the appended record", || record_count(env) > before);
    daemon.terminate();
    assert_eq!(
        record_count(env),
        before + 1,
        "the restored records were archived again"
    );
}

fn append(path: &Path, line: &[u8]) {
    use std::io::Write;
    let mut f = fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(line).and_then(|()| f.write_all(b"\n")).unwrap();
}

#[test]
fn restore_leaves_an_identical_file_alone_and_a_different_one_unless_forced() {
    let env = Env::new();
    let home = Home::write(&env);
    archive_home(&env);
    let month_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(30 * 86_400);
    let file = fs::OpenOptions::new()
        .write(true)
        .open(&home.codex)
        .unwrap();
    file.set_modified(month_ago).unwrap();
    let out = restore(&env, &[CODEX_ID]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("unchanged (identical)"));
    let age = fs::metadata(&home.codex)
        .unwrap()
        .modified()
        .unwrap()
        .elapsed()
        .unwrap();
    assert!(
        age.as_secs() < 60,
        "an identical file is not rewritten, but its age is"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("codex resume {CODEX_ID}")));

    fs::write(&home.codex, b"{\"other\":1}\n").unwrap();
    let refused = restore(&env, &[CODEX_ID]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        stderr(&refused).contains("give --force to overwrite it"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(fs::read(&home.codex).unwrap(), b"{\"other\":1}\n");
    let forced = restore(&env, &[CODEX_ID, "--force"]);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert_eq!(fs::read(&home.codex).unwrap(), fixture("codex.jsonl"));

    let to = env.dir.path().join("elsewhere");
    let dry = restore(
        &env,
        &[GEMINI_ID, "--to", to.to_str().unwrap(), "--dry-run"],
    );
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert!(!to.exists(), "a dry run writes nothing");
    let copied = restore(&env, &[GEMINI_ID, "--to", to.to_str().unwrap()]);
    assert!(copied.status.success(), "{}", stderr(&copied));
    let copy = to.join("tmp/ledger/chats/session-2026-11-30T08-30-e3b0c442.jsonl");
    assert_eq!(fs::read(copy).unwrap(), fixture("gemini-cli.jsonl"));
}

/// A session restored under `--to DIR` is resumed with the agent pointed at DIR (Claude
/// Code's `CLAUDE_CONFIG_DIR`, Codex's `CODEX_HOME`: the files are written under DIR as under
/// the agent's own directory), and a project directory that does not exist here is said so.
#[test]
fn a_restore_elsewhere_prints_a_resume_command_for_that_directory() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    let to = env.dir.path().join("elsewhere");
    let said = stdout_of(&env, &["restore", CLAUDE_ID, "--to", to.to_str().unwrap()]);
    let written = to.join(format!("projects/-home-dana-src-ledger/{CLAUDE_ID}.jsonl"));
    assert!(written.is_file(), "{said}");
    assert!(
        said.contains(&format!(
            "cd /home/dana/src/ledger && CLAUDE_CONFIG_DIR={} claude --resume {CLAUDE_ID}",
            to.display()
        )),
        "{said}"
    );
    assert!(
        said.contains("its project directory /home/dana/src/ledger does not exist here"),
        "{said}"
    );
    let said = stdout_of(&env, &["restore", CODEX_ID, "--to", to.to_str().unwrap()]);
    assert!(
        said.contains(&format!(
            "CODEX_HOME={} codex resume {CODEX_ID}",
            to.display()
        )),
        "{said}"
    );
}
