//! `mark`: a person's star, tags and note on a session, kept in the archive, shown and
//! filtered on by `sessions`, `search` and the MCP server, and kept through `reindex`.

use crate::util::{Env, copy_agent_fixture, stderr, stdout_of};
use serde_json::{Value, json};

/// Two recorded agents' sessions in the sandbox's home, archived; their ids, Claude Code's
/// first.
fn two_sessions(env: &Env) -> [String; 2] {
    let home = env.dir.path().join("home");
    copy_agent_fixture("claude-code", &home);
    copy_agent_fixture("codex", &home);
    env.run_once_home();
    let listed = listed(env, &[]);
    let id = |harness: &str| {
        let s = listed.iter().find(|s| s["harness"] == harness).unwrap();
        s["id"].as_str().unwrap().to_owned()
    };
    [id("claude-code"), id("codex")]
}

/// `sessions --json` with `extra` arguments.
fn listed(env: &Env, extra: &[&str]) -> Vec<Value> {
    let args = [&["sessions", "--json"], extra].concat();
    (stdout_of(env, &args).lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn ids(sessions: &[Value]) -> Vec<&str> {
    sessions.iter().map(|s| s["id"].as_str().unwrap()).collect()
}

#[test]
fn a_marked_session_is_listed_and_searched_by_its_marks_and_keeps_them_through_reindex() {
    let env = Env::new();
    let [claude, codex] = two_sessions(&env);
    let args = [
        "mark",
        claude.as_str(),
        "--star",
        "--tag",
        "infra",
        "--tag",
        "bug",
    ];
    let shown = stdout_of(&env, &[&args[..], &["--note", "the pool ran dry"]].concat());
    assert!(
        shown.contains("starred: yes\ntags: bug infra\nnote: the pool ran dry"),
        "{shown}"
    );
    stdout_of(&env, &["mark", &codex, "--tag", "infra"]);

    assert_eq!(ids(&listed(&env, &["--starred"])), [claude.as_str()]);
    assert_eq!(ids(&listed(&env, &["--tag", "bug"])), [claude.as_str()]);
    assert_eq!(listed(&env, &["--tag", "infra"]).len(), 2);
    assert!(listed(&env, &["--tag", "nothing"]).is_empty());
    let marked = &listed(&env, &["--starred"])[0];
    assert_eq!(
        (&marked["starred"], &marked["tags"], &marked["note"]),
        (
            &json!(true),
            &json!(["bug", "infra"]),
            &json!("the pool ran dry")
        )
    );
    let hits = stdout_of(&env, &["search", "scripted", "--json", "--tag", "bug"]);
    assert!(!hits.is_empty());
    for hit in hits
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        assert_eq!(hit["session"], claude.as_str(), "{hit}");
    }

    stdout_of(&env, &["reindex"]);
    assert_eq!(ids(&listed(&env, &["--starred"])), [claude.as_str()]);

    let args = [
        "mark",
        claude.as_str(),
        "--unstar",
        "--untag",
        "bug",
        "--clear-note",
    ];
    let shown = stdout_of(&env, &args);
    assert!(
        shown.contains("starred: no\ntags: infra\nnote: -"),
        "{shown}"
    );
    assert!(listed(&env, &["--starred"]).is_empty());
}

#[test]
fn the_session_list_shows_a_star_and_tags_after_the_title() {
    let env = Env::new();
    let [claude, _] = two_sessions(&env);
    stdout_of(&env, &["mark", &claude, "--star", "--tag", "infra"]);
    let table = stdout_of(&env, &["sessions", "--starred"]);
    let row = table.lines().nth(1).unwrap();
    assert!(row.ends_with(" #infra ★"), "{table}");
    assert_eq!(table.lines().count(), 2, "{table}");
}

#[test]
fn a_tag_that_is_not_one_word_is_refused_and_nothing_changes() {
    let env = Env::new();
    let [claude, _] = two_sessions(&env);
    let out = (env
        .cmd()
        .args(["mark", &claude, "--star", "--tag", "two words", "--db"]))
    .arg(&env.db)
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("tag \"two words\" cannot be used: a tag is one word"),
        "{}",
        stderr(&out)
    );
    assert!(listed(&env, &["--starred"]).is_empty());
}

#[test]
fn a_notes_control_characters_never_reach_the_terminal_and_search_keeps_the_starred() {
    let env = Env::new();
    let [claude, codex] = two_sessions(&env);
    let shown = stdout_of(
        &env,
        &["mark", &codex, "--star", "--note", "red \x1b[31mtext"],
    );
    assert!(shown.contains("note: red ?[31mtext"), "{shown:?}");
    assert!(!shown.contains('\x1b'), "{shown:?}");
    let hits = stdout_of(&env, &["search", "scripted", "--json", "--starred"]);
    assert!(!hits.is_empty());
    for hit in hits
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        assert_eq!(hit["session"], codex.as_str(), "{hit}");
        assert_ne!(hit["session"], claude.as_str());
    }
}
