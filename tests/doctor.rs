//! `doctor`: each finding a user can act on, with its path and its fix, and the exit status.

use crate::util::*;
use serde_json::Value;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

/// `doctor --db DB --watch ROOT` plus `extra`.
fn doctor(env: &Env, extra: &[&str]) -> Output {
    env.cmd()
        .args(["doctor", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root)
        .args(extra)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The report's line that contains `needle`; it must start with `level`.
fn line_with<'a>(report: &'a str, level: &str, needle: &str) -> &'a str {
    let line = report
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?}:\n{report}"));
    assert!(line.starts_with(level), "not {level}: {line}");
    line
}

/// With seven agents' watchers on by default, most are of agents a person does not use: their
/// missing directories are reported as such, not as warnings with a fix.
#[test]
fn an_agent_not_used_here_is_listed_without_a_warning() {
    let env = Env::new();
    fs::create_dir_all(env.dir.path().join("home/.qwen/projects/-p/chats")).unwrap();
    let out = (env.cmd().args(["doctor", "--db"]).arg(&env.db))
        .output()
        .unwrap();
    let report = stdout(&out);
    let pi = line_with(&report, "ok", "(pi)");
    assert!(pi.contains("no pi sessions here"), "{pi}");
    assert!(!pi.contains("fix:"), "{pi}");
    let qwen = line_with(&report, "ok", "(qwen-code)");
    assert!(qwen.contains("3 directories"), "{qwen}");
}

/// Aider keeps its history in each project: where it has run (`~/.aider`) and no `[[watch]]`
/// table names its projects, nothing of it is archived, which is a warning with the table to
/// add; with one, a project is a root like another, its directories counted as far as its
/// globs reach (a project's own folders, not what is in them).
#[test]
fn aider_without_a_watch_table_is_a_warning_and_with_one_its_projects_are_roots() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    fs::create_dir_all(home.join(".aider")).unwrap();
    fs::create_dir_all(home.join("src/app/node_modules/left-pad/lib")).unwrap();
    let run = || {
        let out = (env.cmd().args(["doctor", "--db"]).arg(&env.db))
            .output()
            .unwrap();
        stdout(&out)
    };
    let report = run();
    let line = line_with(&report, "warn", "Aider has run here");
    assert!(line.contains("harness = \"aider\""), "{line}");
    env.write_config("[[watch]]\npath = \"~/src\"\nharness = \"aider\"\n");
    let report = run();
    assert!(!report.contains("Aider has run here"), "{report}");
    let root = line_with(&report, "ok", "(aider)");
    // ~/src and ~/src/app.
    assert!(root.contains("2 directories"), "{root}");
}

/// Aider CE, its fork, keeps its files in each project too: where it has run (`~/.cecli`) and
/// no table names its projects, the same warning with its own harness; with one, none.
#[test]
fn aider_ce_without_a_watch_table_is_a_warning_of_its_own() {
    let env = Env::new();
    fs::create_dir_all(env.dir.path().join("home/.cecli")).unwrap();
    let run = || {
        let out = (env.cmd().args(["doctor", "--db"]).arg(&env.db))
            .output()
            .unwrap();
        stdout(&out)
    };
    let report = run();
    let line = line_with(&report, "warn", "Aider CE has run here");
    assert!(line.contains("harness = \"aider-ce\""), "{line}");
    assert!(!report.contains("Aider has run here"), "{report}");
    env.write_config("[[watch]]\npath = \"~/src\"\nharness = \"aider-ce\"\n");
    assert!(!run().contains("Aider CE has run here"));
}

#[test]
fn a_missing_root_is_reported_with_its_path() {
    let env = Env::new();
    let missing = env.dir.path().join("not-yet");
    let out = doctor(&env, &["--watch", missing.to_str().unwrap()]);
    let report = stdout(&out);
    let line = line_with(&report, "warn", &format!("root {} ", missing.display()));
    assert!(line.contains("does not exist yet"), "{line}");
    assert!(
        line.contains(&format!("fix: mkdir -p {}", missing.display())),
        "{line}"
    );
    assert!(
        out.status.success(),
        "a missing root is waited for:\n{report}"
    );
}

#[test]
fn a_root_that_is_a_file_fails() {
    let env = Env::new();
    let file = env.dir.path().join("file");
    fs::write(&file, "").unwrap();
    let out = doctor(&env, &["--watch", file.to_str().unwrap()]);
    let report = stdout(&out);
    let line = line_with(&report, "FAIL", &format!("root {} ", file.display()));
    assert!(line.contains("is not a directory"), "{line}");
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_log_has(&stderr(&out), "1 check(s) failed");
}

#[test]
fn a_world_readable_archive_gets_a_warn_naming_chmod_600() {
    // Transcripts hold whatever was typed into a session; the daemon creates the archive
    // 0600, and a copy or a restore that widened it should be noticed.
    let env = Env::new();
    env.write("a.jsonl", &lines(&records("a", 1)));
    env.run_once(&[]);
    fs::set_permissions(&env.db, fs::Permissions::from_mode(0o644)).unwrap();
    let out = doctor(&env, &[]);
    let report = stdout(&out);
    let line = line_with(&report, "warn", "is open to group or others");
    assert!(line.contains("mode 0644"), "{line}");
    assert!(
        line.contains(&format!("fix: chmod 600 {}", env.db.display())),
        "{line}"
    );
}

#[test]
fn a_healthy_setup_exits_0_with_ok_lines() {
    let env = Env::new();
    env.write("p/a.jsonl", &lines(&records("a", 1)));
    env.run_once(&[]);
    let out = doctor(&env, &[]);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}\n{}", stderr(&out));
    assert!(!report.contains("FAIL"), "{report}");
    line_with(&report, "ok", &format!("root {} ", env.root.display()));
    line_with(&report, "ok", "2 directories under the roots");
    line_with(
        &report,
        "ok",
        &format!("archive {}: mode 0600", env.db.display()),
    );
}

#[test]
fn a_watch_limit_below_the_directory_count_fails_with_the_sysctl_fix() {
    // Inside a user namespace /proc/sys/fs/inotify/ shows the host's limit while the
    // namespace's own, lower one applies; the check must take the lower.
    let env = Env::new();
    for d in ["a", "b", "c", "d"] {
        fs::create_dir_all(env.path(d)).unwrap();
    }
    let script = "echo 3 > /proc/sys/user/max_inotify_watches && exec \"$@\"";
    let out = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c", script, "sh", BIN])
        .args(["doctor", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root)
        .env_clear()
        .env("HOME", env.dir.path().join("home"))
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .output()
        .expect("unshare (util-linux) runs this test");
    let report = stdout(&out);
    let line = line_with(&report, "FAIL", "5 directories under the roots");
    assert!(
        line.contains("limit 3 (user.max_inotify_watches)"),
        "{line}"
    );
    assert!(
        line.contains("fix: sysctl -w user.max_inotify_watches="),
        "{line}"
    );
    assert_eq!(out.status.code(), Some(1), "{report}\n{}", stderr(&out));
}

#[test]
fn json_output_parses() {
    let env = Env::new();
    env.run_once(&[]);
    let out = doctor(&env, &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["failures"], 0);
    let findings = report["findings"].as_array().unwrap();
    let root = findings
        .iter()
        .find(|f| f["check"] == "roots")
        .expect("a roots finding");
    assert_eq!(root["level"], "ok");
    assert_eq!(root["path"], env.root.to_str().unwrap());
    assert!(findings.iter().any(|f| f["check"] == "inotify"));
}

/// An archive this user cannot reach or read is a permission problem of that path, never
/// "no archive" (whose fix, `run`, would not help), for the commands that read it; and
/// `doctor` fails on an archive directory it cannot write, where SQLite keeps the WAL.
#[test]
fn an_archive_this_user_cannot_read_is_a_permission_error_and_doctor_fails_on_its_directory() {
    let env = Env::new();
    env.write("a.jsonl", &lines(&records("a", 1)));
    env.run_once(&[]);
    let state = env.db.parent().unwrap().to_owned();
    let unprivileged = |args: &[&str]| {
        let mut cmd = env.cmd_unprivileged();
        cmd.args(args).arg("--db").arg(&env.db);
        cmd.output().unwrap()
    };
    // Its directory of mode 000 (it cannot be reached), or the archive itself.
    let said_for = |path: &Path, mode: u32, back: u32| {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
        let outs: Vec<Output> = [&["sessions"][..], &["status"], &["export"]]
            .iter()
            .map(|args| unprivileged(args))
            .collect();
        fs::set_permissions(path, fs::Permissions::from_mode(back)).unwrap();
        outs
    };
    let mut outs = said_for(&state, 0o000, 0o700);
    outs.extend(said_for(&env.db, 0o000, 0o600));
    for out in outs {
        let said = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(
            said.contains(&format!(
                "the archive {} cannot be read by this user",
                env.db.display()
            )),
            "{said}"
        );
        assert!(
            said.contains("Permission denied") && !said.contains("no archive"),
            "{said}"
        );
    }
    // The directory readable but not writable: doctor fails, naming it and the fix.
    fs::set_permissions(&state, fs::Permissions::from_mode(0o500)).unwrap();
    let out = unprivileged(&["doctor", "--watch", env.root.to_str().unwrap()]);
    fs::set_permissions(&state, fs::Permissions::from_mode(0o700)).unwrap();
    let report = stdout(&out);
    let line = line_with(
        &report,
        "FAIL",
        &format!(
            "the archive's directory {} cannot be written",
            state.display()
        ),
    );
    assert!(line.contains("fix: sudo chown"), "{line}");
    assert_eq!(out.status.code(), Some(1), "{report}");
}

/// An editor changes its store without notice: a Copilot Chat log with a line of a kind this
/// release does not know is kept as it was (a reject), and `doctor` names it with its path
/// and why, with the command that lists them all.
#[test]
fn a_file_in_a_shape_this_release_cannot_read_is_named_with_its_reason() {
    let env = Env::new();
    let chats =
        (env.dir.path()).join("home/.config/Code/User/workspaceStorage/w1/chatSessions/s1.jsonl");
    fs::create_dir_all(chats.parent().unwrap()).unwrap();
    let log = concat!(
        r#"{"kind":0,"v":{"version":3,"sessionId":"s1","requests":[]}}"#,
        "\n",
        r#"{"kind":7,"k":["requests"],"v":[]}"#,
        "\n"
    );
    fs::write(&chats, log).unwrap();
    env.run_once_home();
    let out = (env.cmd().args(["doctor", "--db"]).arg(&env.db))
        .output()
        .unwrap();
    let report = stdout(&out);
    let unread = line_with(&report, "warn", "could not be read");
    assert!(unread.contains(chats.to_str().unwrap()), "{unread}");
    assert!(unread.contains("line 2"), "{unread}");
    assert!(unread.contains("fix: transcript-sync rejects"), "{unread}");
}
