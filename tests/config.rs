//! The configuration file: where it is found, how it is checked, and how flags override it.

use crate::util::*;

fn check(env: &Env) -> std::process::Output {
    env.cmd().args(["config", "check"]).output().unwrap()
}

#[test]
fn config_check_prints_the_resolved_configuration() {
    let env = Env::new();
    let text = format!(
        "archive = {:?}\nrecord_limit = \"1K\"\nlog_level = \"debug\"\n\
         [watchers]\ncodex = false\n\n[[watch]]\npath = {:?}\nglob = \"*.log\"\nstart_at = \"end\"\n",
        env.db, env.root
    );
    let path = env.write_config(&text);
    let out = check(&env);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(
        printed.contains(&format!("configuration file {} is valid", path.display())),
        "{printed}"
    );
    let body: String = printed
        .lines()
        .filter(|l| !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let resolved: toml::Value = toml::from_str(&body).unwrap();
    assert_eq!(resolved["archive"].as_str(), env.db.to_str());
    assert_eq!(resolved["record_limit"].as_integer(), Some(1024));
    assert_eq!(resolved["log_level"].as_str(), Some("debug"));
    let roots = resolved["root"].as_array().unwrap();
    let mut harnesses: Vec<&str> = roots
        .iter()
        .map(|r| r["harness"].as_str().unwrap())
        .collect();
    harnesses.dedup();
    // Every built-in watcher but codex, then the [[watch]] table's; Crush's roots are the
    // projects it lists, none here.
    let mut expected = watcher_names(true);
    expected.retain(|n| n != "codex" && n != "crush");
    expected.push("generic".into());
    assert_eq!(harnesses, expected, "codex is off: {printed}");
    let given = roots.last().unwrap();
    assert_eq!(given["path"].as_str(), env.root.to_str());
    assert_eq!(given["glob"].as_str(), Some("*.log"));
    assert_eq!(given["start_at"].as_str(), Some("end"));
}

#[test]
fn without_a_configuration_file_the_defaults_apply() {
    let env = Env::new();
    let out = check(&env);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    assert!(printed.contains("defaults apply"), "{printed}");
    assert!(printed.contains("record_limit = 67108864"), "{printed}");
    assert!(printed.contains("harness = \"codex\""), "{printed}");
}

#[test]
fn a_bad_configuration_is_refused_with_its_file_line_and_column() {
    let env = Env::new();
    let path = env.write_config("# archive settings\n\nrecord_limit = \"12Q\"\n");
    for args in [&["config", "check"][..], &["run", "--once"][..]] {
        let out = env.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        let at = format!("{}:3:16", path.display());
        assert!(err.contains(&at), "{args:?} should name {at}:\n{err}");
        assert!(err.contains("unknown unit"), "{err}");
    }
    assert!(
        !env.db.exists(),
        "a refused configuration must not create an archive"
    );
}

#[test]
fn an_unknown_key_or_watcher_is_refused_with_what_is_known() {
    let env = Env::new();
    env.write_config("recrod_limit = 5\n");
    let err = stderr(&check(&env));
    assert!(
        err.contains("config.toml:1:1") && err.contains("unknown field"),
        "{err}"
    );
    assert!(
        err.contains("record_limit"),
        "the message lists the known keys: {err}"
    );
    env.write_config("[watchers]\nclaude = false\n");
    let err = stderr(&check(&env));
    assert!(err.contains("config.toml:2:1"), "{err}");
    assert!(
        err.contains(&format!(
            "the built-in watchers are {}",
            watcher_names(true).join(", ")
        )),
        "{err}"
    );
}

#[test]
fn a_given_configuration_file_must_exist() {
    let env = Env::new();
    let missing = env.dir.path().join("nope.toml");
    let out = env
        .cmd()
        .args(["config", "check", "--config"])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(missing.to_str().unwrap()),
        "{}",
        stderr(&out)
    );
}

#[test]
fn flags_win_over_the_configuration_file() {
    let env = Env::new();
    env.write_config("record_limit = 100\n");
    let long = format!("{{\"pad\":\"{}\"}}\n", "x".repeat(200));
    env.write("t.jsonl", long.as_bytes());
    let log = env.run_once(&[]);
    assert_eq!(
        counter(&log, "rejects"),
        1,
        "the file's limit applies:\n{log}"
    );
    env.append("t.jsonl", long.as_bytes());
    env.run_once(&["--record-limit", "1K"]);
    assert_eq!(
        env.records_of("t.jsonl").len(),
        1,
        "the flag's limit applies"
    );
}

#[test]
fn watch_tables_are_archived_with_their_own_start_policy() {
    let env = Env::new();
    let text = format!(
        "archive = {:?}\n[watchers]\nclaude-code = false\ncodex = false\n\
         [[watch]]\npath = {:?}\nstart_at = \"end\"\n",
        env.db, env.root
    );
    env.write_config(&text);
    env.write("t.jsonl", &lines(&records("old", 3)));
    let once = || {
        let out = env.cmd().args(["run", "--once"]).output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    };
    once();
    assert!(env.records().is_empty(), "start_at = end skips the history");
    let new = records("new", 2);
    env.append("t.jsonl", &lines(&new));
    once();
    assert_eq!(env.records_of("t.jsonl"), new);
}

#[test]
fn log_level_in_the_configuration_applies_unless_rust_log_is_set() {
    let env = Env::new();
    env.write_config("log_level = \"warn\"\n");
    let run = |rust_log: Option<&str>| {
        let mut cmd = env.cmd();
        cmd.env_remove("RUST_LOG");
        if let Some(v) = rust_log {
            cmd.env("RUST_LOG", v);
        }
        let out = cmd
            .args(["run", "--once", "--db"])
            .arg(&env.db)
            .arg("--watch")
            .arg(&env.root)
            .output()
            .unwrap();
        assert!(out.status.success());
        stderr(&out)
    };
    let quiet = run(None);
    assert!(
        !quiet.contains("pass complete"),
        "log_level = warn:\n{quiet}"
    );
    let loud = run(Some("info"));
    assert!(loud.contains("pass complete"), "RUST_LOG wins:\n{loud}");
}
