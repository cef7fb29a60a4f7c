//! `mcp`: the archive served over the Model Context Protocol, driven by the official MCP
//! Python SDK's client (PyPI `mcp`, `scripts/mcp-client.py`) as an agent would drive it.

use crate::util::{BIN, Env, stdout_of};
use serde_json::{Value, json};
use std::fs;

/// A secret said in a session, which what the server returns must not hold.
const TOKEN: &str = "ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz";

/// A Claude Code session of `n` prompts, the first holding [`TOKEN`].
fn session(env: &Env, n: usize) {
    let dir = env.dir.path().join("home/.claude/projects/-w-app");
    fs::create_dir_all(&dir).unwrap();
    let id = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
    let lines: Vec<String> = (0..n)
        .map(|i| {
            let text = match i {
                0 => format!("deploy the invoices service with {TOKEN}"),
                i => format!("prompt number {i} about invoices"),
            };
            json!({"type": "user", "uuid": format!("u{i}"), "sessionId": id, "cwd": "/w/app",
                "timestamp": format!("2026-12-01T10:{:02}:00.000Z", i % 60),
                "message": {"role": "user", "content": text}})
            .to_string()
        })
        .collect();
    fs::write(dir.join(format!("{id}.jsonl")), lines.join("\n") + "\n").unwrap();
}

/// The MCP client's lines: the tools listed, then each call's result.
fn drive(env: &Env, calls: Value, extra: &[&str]) -> (Vec<String>, Vec<Value>) {
    let python = testkit::agents::install("mcp-client");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/mcp-client.py");
    let mut cmd = env.command(&python.to_string_lossy());
    cmd.arg(script).arg(calls.to_string()).arg(BIN);
    cmd.args(["mcp", "--db"]).arg(&env.db).args(extra);
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the MCP client failed:\n{stderr}");
    let mut lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect::<Vec<_>>()
        .into_iter();
    let tools = lines.next().unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    (tools, lines.collect())
}

/// An agent's MCP client lists the tools, searches, lists sessions, reads a window of one
/// and sums usage; what comes back is redacted, unless the server is told not to.
#[test]
fn an_mcp_client_searches_lists_and_reads_sessions_with_secrets_redacted() {
    let env = Env::new();
    session(&env, 3);
    env.run_once_home();
    let calls = json!([
        ["search", {"query": "invoices", "limit": 5}],
        ["list_sessions", {"project": "app"}],
        ["read_session", {"session": "7c9e", "offset": 1, "limit": 1}],
        ["usage", {"by": "agent"}],
        ["read_session", {"session": "nope"}],
    ]);
    let (tools, results) = drive(&env, calls.clone(), &[]);
    assert_eq!(tools, ["search", "list_sessions", "read_session", "usage"]);
    let text = |i: usize| results[i]["text"].as_str().unwrap().to_owned();
    for (i, result) in results.iter().enumerate().take(4) {
        assert_eq!(result["is_error"], false, "{result}");
        assert!(!text(i).contains(TOKEN), "a secret went out: {}", text(i));
    }
    let hits: Vec<Value> = text(0)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(hits.len(), 3, "{hits:?}");
    assert!(text(0).contains("[REDACTED:"), "{}", text(0));
    assert!(
        text(1).contains("\"id\":\"7c9e6679-7425-40de-944b-e07fc1f90ae7\""),
        "{}",
        text(1)
    );
    let window: Vec<Value> = text(2)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        (window[0]["messages"].clone(), window.len()),
        (json!(3), 2),
        "{window:?}"
    );
    assert_eq!(
        window[1]["parts"][0]["text"],
        "prompt number 1 about invoices"
    );
    assert!(
        text(3).lines().last().unwrap().contains("\"of\":null"),
        "{}",
        text(3)
    );
    assert_eq!(results[4]["is_error"], true);
    assert!(text(4).contains("no session \"nope\""), "{}", text(4));

    let (_, plain) = drive(&env, calls, &["--no-redact"]);
    assert!(plain[0]["text"].as_str().unwrap().contains(TOKEN));
}

/// The user's marks reach the agent: `list_sessions` says them and lists by them.
#[test]
fn an_mcp_client_lists_the_sessions_the_user_starred_or_tagged() {
    let env = Env::new();
    session(&env, 1);
    // A second session, left unmarked, which no filter by marks lists.
    let home = env.dir.path().join("home");
    crate::util::copy_agent_fixture("codex", &home);
    env.run_once_home();
    let id = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
    stdout_of(
        &env,
        &[
            "mark",
            id,
            "--star",
            "--tag",
            "billing",
            "--note",
            "see the retry",
        ],
    );
    let calls = json!([
        ["list_sessions", {"starred": true}],
        ["list_sessions", {"tag": "billing"}],
        ["list_sessions", {"tag": "other"}],
    ]);
    let (_, results) = drive(&env, calls, &[]);
    let listed = |i: usize| -> Vec<Value> {
        (results[i]["text"].as_str().unwrap().lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let starred = listed(0);
    assert_eq!(starred.len(), 1, "{starred:?}");
    assert_eq!(
        (
            &starred[0]["starred"],
            &starred[0]["tags"],
            &starred[0]["note"]
        ),
        (&json!(true), &json!(["billing"]), &json!("see the retry"))
    );
    assert_eq!(listed(1).len(), 1);
    assert_eq!(results[2]["text"], "no session matches");
}

/// What a call returns is bounded: a session read whole comes back in windows of at most 100
/// messages, a part of at most 4,000 characters, a call of at most 64 KiB, each cut with a
/// note saying what was left out.
#[test]
fn what_one_call_returns_is_bounded() {
    let env = Env::new();
    session(&env, 250);
    let dir = env.dir.path().join("home/.claude/projects/-w-long");
    fs::create_dir_all(&dir).unwrap();
    let long = "invoices ".repeat(1000);
    let lines: Vec<String> = (0..30)
        .map(|i| {
            json!({"type": "user", "uuid": format!("l{i}"), "sessionId": "long-session",
                "cwd": "/w/long", "timestamp": "2026-12-01T11:00:00.000Z",
                "message": {"role": "user", "content": long}})
            .to_string()
        })
        .collect();
    fs::write(dir.join("long-session.jsonl"), lines.join("\n") + "\n").unwrap();
    env.run_once_home();
    let calls = json!([
        ["read_session", {"session": "7c9e", "limit": 1000}],
        ["read_session", {"session": "long-session", "limit": 30}],
    ]);
    let (_, results) = drive(&env, calls, &[]);
    let text = results[0]["text"].as_str().unwrap();
    let head: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        (head["messages"].clone(), head["shown"].clone()),
        (json!(250), json!(100))
    );
    assert_eq!(text.lines().count(), 101);
    let text = results[1]["text"].as_str().unwrap();
    assert!(text.len() < 65 * 1024, "{}", text.len());
    assert!(text.contains("… [9000 characters in all]"), "a part is cut");
    assert!(
        text.ends_with("ask for fewer (limit) or a later window (offset)]"),
        "the call is cut"
    );
}

/// A real agent uses the server: Claude Code, given it in an MCP configuration and run offline
/// against the scripted model, lists its tools and calls `search` when the model asks, and
/// what the archive holds (a session recorded from Claude Code itself) reaches the model.
#[test]
fn claude_code_searches_the_archive_through_mcp() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    crate::util::copy_agent_fixture("claude-code", &home);
    env.run_once_home();
    let session = stdout_of(&env, &["sessions", "--json"]);
    let session: Value = serde_json::from_str(session.trim()).unwrap();
    let id = session["id"].as_str().unwrap().to_owned();

    let model = testkit::agents::ModelServer::start(env.dir.path());
    let config = env.dir.path().join("mcp.json");
    let server = json!({"mcpServers": {"transcript-sync": {
        "command": BIN, "args": ["mcp", "--db", env.db.to_str().unwrap()]}}});
    fs::write(&config, server.to_string()).unwrap();
    let project = env.dir.path().join("project");
    fs::create_dir_all(&project).unwrap();
    let claude = testkit::agents::install("claude-code");
    let out = env
        .command(&claude.to_string_lossy())
        .current_dir(&project)
        .env("PATH", testkit::agents::path_with_node())
        .env("ANTHROPIC_BASE_URL", model.url())
        .env("ANTHROPIC_API_KEY", "sk-scripted")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        // Its MCP tools in the request, rather than found through its tool search first.
        .env("ENABLE_TOOL_SEARCH", "false")
        .args(["-p", "Search my history, please.", "--mcp-config"])
        .arg(&config)
        .args(["--allowedTools", "mcp__transcript-sync__search"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = model.requests();
    let tools: Vec<&str> = (requests[0]["body"]["tools"].as_array().unwrap().iter())
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        tools.contains(&"mcp__transcript-sync__read_session"),
        "{tools:?}"
    );
    // The tool results the model was sent back.
    let results: Vec<String> = (requests.iter())
        .flat_map(|r| {
            r["body"]["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "tool_result")
        .map(|block| block["content"].to_string())
        .collect();
    assert!(
        results
            .iter()
            .any(|r| r.contains(&id) && r.contains("**scripted-tool-output**")),
        "the archive's hit reached the model: {results:?}"
    );
}
