//! `export` and `status` as a user sees them.

use crate::util::*;
use serde_json::Value;

#[test]
fn export_filters_by_path_and_seq_and_prints_envelopes() {
    let env = Env::new();
    env.write("p1/a.jsonl", &lines(&records("a", 2)));
    env.write("p2/b.jsonl", &lines(&records("b", 2)));
    env.run_once(&[]);
    let all = env.export(&[]);
    assert_eq!(all.len(), 4);
    let first: Value = serde_json::from_str(&all[0]).unwrap();
    assert_eq!(first["seq"], 1);
    assert_eq!(first["harness"], "generic");
    assert_eq!(first["source"], 1);
    assert_eq!(first["path"], env.path("p1/a.jsonl").to_str().unwrap());
    assert_eq!(first["generation"], 0);
    assert_eq!(first["offset"], 0);
    assert_eq!(first["record"]["tag"], "a");
    let dir = env.path("p2");
    assert_eq!(env.export(&["--path", dir.to_str().unwrap()]).len(), 2);
    let later = env.export(&["--since-seq", "3"]);
    assert_eq!(later.len(), 1);
    assert!(later[0].starts_with("{\"seq\":4,"));
}

#[test]
fn export_into_a_closed_pipe_ends_quietly() {
    let env = Env::new();
    env.write("a.jsonl", &lines(&records("a", 50_000)));
    env.run_once(&[]);
    let mut child = env
        .cmd()
        .args(["export", "--db"])
        .arg(&env.db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn status_reports_cursor_lag_held_back_and_counts() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\nbad\n{\"b\"");
    env.run_once(&[]);
    env.append("s.jsonl", b":2}\n{\"c\":3}\n");
    let st = env.status();
    let s = &st["sources"][0];
    assert_eq!(s["path"], env.path("s.jsonl").to_str().unwrap());
    assert_eq!(s["harness"], "generic");
    assert_eq!(s["generation"], 0);
    assert_eq!(s["cursor"], 12);
    assert_eq!(s["size"], 28);
    assert_eq!(s["lag"], 16);
    assert_eq!(s["held_back"], 4);
    assert_eq!(s["records"], 1);
    assert_eq!(s["rejects"], 1);
    assert!(s["last_archived"].as_str().unwrap().ends_with('Z'));
    assert_eq!(st["totals"]["records"], 1);
    assert_eq!(st["running_pid"], Value::Null);
    let status = |extra: &[&str]| {
        let out = (env.cmd().args(["status", "--db"]).arg(&env.db).args(extra))
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    // A summary by default; a row for each source with --sources.
    let text = status(&[]);
    assert!(text.contains("(no run active)"), "{text}");
    assert!(
        text.contains("total: sources=1 gone=0 records=1 rejects=1 held_back=4 lag=16"),
        "{text}"
    );
    assert!(!text.contains("s.jsonl"), "{text}");
    assert!(text.contains("status --sources"), "{text}");
    let text = status(&["--sources"]);
    assert!(
        text.contains("GEN, CURSOR and HELD are the current generation's; RECORDS and REJECTS count every generation"),
        "{text}"
    );
    assert!(
        text.contains(env.path("s.jsonl").to_str().unwrap()),
        "{text}"
    );
    assert!(
        text.contains("total: sources=1 gone=0 records=1 rejects=1 held_back=4 lag=16"),
        "{text}"
    );
}

#[test]
fn errors_name_the_path_and_exit_non_zero() {
    let env = Env::new();
    let out = env
        .cmd()
        .args(["seed", "/nonexistent/x.jsonl", "--db"])
        .arg(&env.db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("/nonexistent/x.jsonl"),
        "{}",
        stderr(&out)
    );
    let out = env
        .cmd()
        .args(["run", "--once", "--record-limit", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("is not a size"), "{}", stderr(&out));
}

#[test]
fn logs_go_to_stderr_and_export_output_to_stdout_only() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"b\":2}\n");
    let out = env.run_once_output(&[]);
    assert!(out.stdout.is_empty());
    assert!(stderr(&out).contains("pass complete"));
    // With every log line on, `export` still prints envelopes alone on stdout.
    let out = (env.cmd().env("RUST_LOG", "debug"))
        .args(["export", "--db"])
        .arg(&env.db)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let lines: Vec<Value> = (stdout.lines())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines
            .iter()
            .all(|e| e["seq"].is_i64() && e["record"].is_object())
    );
    assert!(!stderr(&out).contains("\"seq\""), "{}", stderr(&out));
}

#[test]
fn a_file_whose_name_is_not_utf8_is_archived_and_exported_lossily() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    let name = OsStr::from_bytes(b"caf\xe9.jsonl");
    std::fs::write(env.root.join(name), b"{\"a\":1}\n").unwrap();
    env.run_once(&[]);
    let out = env.export(&[]);
    assert_eq!(out.len(), 1);
    let v: Value = serde_json::from_str(&out[0]).unwrap();
    assert!(
        v["path"].as_str().unwrap().ends_with("caf\u{fffd}.jsonl"),
        "{v}"
    );
    let again = env.run_once(&[]);
    assert_eq!(counter(&again, "unchanged"), 1);
}

#[test]
fn status_and_export_refuse_a_file_that_is_not_an_archive_and_leave_it_alone() {
    let env = Env::new();
    let other = env.dir.path().join("other.db");
    let conn = rusqlite::Connection::open(&other).unwrap();
    conn.execute_batch("CREATE TABLE mine (x); INSERT INTO mine VALUES (1);")
        .unwrap();
    drop(conn);
    let before = std::fs::read(&other).unwrap();
    for cmd in ["status", "export"] {
        let out = env.cmd().args([cmd, "--db"]).arg(&other).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{cmd}");
        assert!(
            stderr(&out).contains("is not a transcript-sync archive"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(
        std::fs::read(&other).unwrap(),
        before,
        "the file was changed"
    );
}

#[test]
fn bad_paths_are_refused_with_the_path_and_create_nothing() {
    let env = Env::new();
    env.write("file.jsonl", b"{}\n");
    let out = env
        .cmd()
        .args(["run", "--once", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(env.path("file.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is not a directory"),
        "{}",
        stderr(&out)
    );
    let out = env
        .cmd()
        .args(["run", "--once", "--db"])
        .arg(&env.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is a directory; --db takes the archive's file path"),
        "{}",
        stderr(&out)
    );
    let fresh = env.dir.path().join("fresh/archive.db");
    let out = env
        .cmd()
        .args(["seed", "/nonexistent/x.jsonl", "--db"])
        .arg(&fresh)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        !fresh.exists() && !fresh.parent().unwrap().exists(),
        "seed created an archive"
    );
    let out = env
        .cmd()
        .args(["run", "--once", "--record-limit", "18446744073709551615"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("more than SQLite stores in one value"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn completions_load_in_bash_and_every_shell_gets_the_subcommands() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = env.cmd().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {}", stderr(&out));
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains("rejects") && script.contains("completions"),
            "{shell}"
        );
    }
    // Loaded into a real bash, the script registers completion for the command.
    let line = format!(
        "source <({} completions bash) && complete -p transcript-sync",
        BIN
    );
    let out = env.command("bash").args(["-c", &line]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let registered = String::from_utf8(out.stdout).unwrap();
    assert!(registered.contains("transcript-sync"), "{registered}");
}

#[test]
fn the_man_page_is_roff_with_every_command() {
    let env = Env::new();
    let out = env.cmd().arg("man").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(page.contains(".TH transcript-sync 1"), "{page}");
    let dir = env.dir.path().join("man1");
    std::fs::create_dir(&dir).unwrap();
    let out = env.cmd().args(["man", "--dir"]).arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for command in [
        "run", "seed", "export", "status", "rejects", "doctor", "service",
    ] {
        assert!(
            page.contains(&format!("transcript\\-sync\\-{command}(1)")),
            "{command}: {page}"
        );
        let sub = dir.join(format!("transcript-sync-{command}.1"));
        let text = std::fs::read_to_string(&sub).unwrap_or_else(|e| panic!("{sub:?}: {e}"));
        assert!(
            text.contains(&format!(".TH transcript-sync-{command} 1")),
            "{text}"
        );
    }
    // man itself formats the page, as a person would read it.
    let shown = (env.command("man").env("MANWIDTH", "80"))
        .arg("-l")
        .arg(dir.join("transcript-sync-rejects.1"))
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", stderr(&shown));
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("--raw"), "{shown}");
}

/// Each size in `status` carries its unit once (the index's line said `MB MB`), and every
/// time in `status --json` is RFC 3339 (the daemon's caught-up figures gave Unix ms).
#[test]
fn status_writes_each_unit_once_and_every_time_in_one_format() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"n\":1}\n");
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log("INFO  caught up sources=");
    let out = (env.cmd().args(["status", "--db"]).arg(&env.db))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let index = (text.lines())
        .find(|l| l.starts_with("session index:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(index.matches("MB").count(), 1, "{index}");
    assert!(!text.contains("MB MB"), "{text}");

    let st = env.status();
    let at = st["caught_up"]["at"]
        .as_str()
        .unwrap_or_else(|| panic!("{st}"));
    assert!(
        at.len() == 20 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
        "{at}"
    );
    // No time anywhere as a number of milliseconds.
    fn ms_keys(v: &Value, into: &mut Vec<String>) {
        match v {
            Value::Object(o) => o.iter().for_each(|(k, v)| {
                if k.ends_with("_ms") {
                    into.push(k.clone());
                }
                ms_keys(v, into);
            }),
            Value::Array(a) => a.iter().for_each(|v| ms_keys(v, into)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    ms_keys(&st, &mut found);
    assert!(found.is_empty(), "{found:?} in {st}");
    let (status, _) = d.terminate();
    assert!(status.success());
}

/// `--help` as a person first reads it: it says what is archived (every kind of store, not
/// only JSONL) and ends on where the configuration is, with no word of the source code in it.
#[test]
fn help_says_what_is_archived_and_where_the_configuration_is() {
    let env = Env::new();
    let help = stdout_of(&env, &["--help"]);
    let first = help.lines().next().unwrap();
    assert!(first.contains("sessions"), "{first}");
    assert!(!first.contains("JSONL"), "{first}");
    let last = help.lines().last().unwrap();
    assert!(last.starts_with("Configuration: "), "{last}");
    assert!(!help.contains("pub(crate)"), "{help}");
}

/// `--version` says the version, the commit it was built from (a git hash, `-dirty` for a tree
/// with changes) and the day it was built.
#[test]
fn version_names_the_commit_and_the_day_it_was_built() {
    let env = Env::new();
    let said = stdout_of(&env, &["--version"]);
    let shape = regex::Regex::new(
        r"^transcript-sync \d+\.\d+\.\d+ \(([0-9a-f]{12,}(-dirty)?|unknown), built (\d{4}-\d{2}-\d{2})\)\n$",
    )
    .unwrap();
    let found = shape.captures(&said).unwrap_or_else(|| panic!("{said:?}"));
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let head = String::from_utf8(head.stdout).unwrap();
    assert!(found[1].starts_with(head.trim()), "{said} at {head}");
}
