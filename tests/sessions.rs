//! The session index and what people do with it: `sessions`, `show`, `search`, `restore` and
//! `reindex`, over a home holding transcripts of the four agents (fixtures in
//! `tests/fixtures/sessions/`, written in the agents' formats).

use crate::util::{
    BIN, Daemon, Env, SandboxDaemon, TapReader, cli, on_a_terminal, raw_record, stderr, stdout_of,
    wait_until, wait_until_else,
};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

const CLAUDE_ID: &str = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
const CODEX_ID: &str = "0199d3a2-5b7c-7e10-9a4f-3c2b1a0f9e8d";
const GEMINI_ID: &str = "e3b0c442-98fc-4c14-9afb-f4c8996fb924";
const CURSOR_ID: &str = "4f6c1d2e-8a9b-4c3d-9e8f-7a6b5c4d3e2f";

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sessions")
        .join(name);
    fs::read(path).unwrap()
}

fn put(path: &Path, bytes: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, bytes).unwrap();
}

/// The transcripts' paths under the env's HOME, as each agent lays them out.
struct Home {
    claude: PathBuf,
    subagent: PathBuf,
    codex: PathBuf,
    gemini: PathBuf,
    cursor: PathBuf,
}

impl Home {
    fn write(env: &Env) -> Home {
        let h = env.dir.path().join("home");
        let project = h.join(".claude/projects/-home-dana-src-ledger");
        let home = Home {
            claude: project.join(format!("{CLAUDE_ID}.jsonl")),
            subagent: project.join(format!("{CLAUDE_ID}/subagents/agent-b41c2d.jsonl")),
            codex: h.join(format!(
                ".codex/sessions/2026/11/29/rollout-2026-11-29T14-02-11-{CODEX_ID}.jsonl"
            )),
            gemini: h.join(".gemini/tmp/ledger/chats/session-2026-11-30T08-30-e3b0c442.jsonl"),
            cursor: h.join(format!(
                ".cursor/projects/home-dana-src-ledger/agent-transcripts/{CURSOR_ID}.jsonl"
            )),
        };
        put(&home.claude, &fixture("claude-code.jsonl"));
        put(&home.subagent, &fixture("claude-code-subagent.jsonl"));
        put(&home.codex, &fixture("codex.jsonl"));
        put(&home.gemini, &fixture("gemini-cli.jsonl"));
        put(&home.cursor, &fixture("cursor.jsonl"));
        home
    }
}

/// `run --once` with the built-in watchers under the env's HOME.
fn archive_home(env: &Env) {
    env.run_once_home();
}

fn json_lines(env: &Env, args: &[&str]) -> Vec<Value> {
    let text = stdout_of(env, args);
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn session<'a>(list: &'a [Value], id: &str) -> &'a Value {
    (list.iter())
        .find(|s| s["id"] == id)
        .unwrap_or_else(|| panic!("no session {id} in {list:#?}"))
}

/// The roles of a session's messages, and their texts, from `show --format json`.
fn conversation(env: &Env, id: &str) -> Vec<(String, String)> {
    let messages = json_lines(env, &["show", id, "--format", "json"]);
    (messages.iter())
        .map(|m| {
            let texts: Vec<&str> = (m["parts"].as_array().unwrap().iter())
                .map(|p| p["text"].as_str().or(p["name"].as_str()).unwrap_or(""))
                .collect();
            (m["role"].as_str().unwrap().to_owned(), texts.join(" | "))
        })
        .collect()
}

#[test]
fn sessions_of_the_four_agents_are_listed_with_their_fields() {
    let env = Env::new();
    let home = Home::write(&env);
    archive_home(&env);
    let list = json_lines(&env, &["sessions", "--json"]);
    let ids: Vec<&str> = list.iter().map(|s| s["id"].as_str().unwrap()).collect();
    // Newest activity first; the subagent right after its parent.
    assert_eq!(
        ids,
        [CURSOR_ID, GEMINI_ID, CODEX_ID, CLAUDE_ID, "agent-b41c2d"]
    );

    let claude = session(&list, CLAUDE_ID);
    assert_eq!(claude["harness"], "claude-code");
    assert_eq!(claude["project"], "/home/dana/src/ledger");
    assert_eq!(claude["branch"], "fix/rounding");
    assert_eq!(claude["title"], "Cent rounding in invoice totals");
    assert_eq!(claude["started"], "2026-11-28T09:14:02Z");
    assert_eq!(claude["last_activity"], "2026-11-28T09:20:00Z");
    // The command line and the prompt (its copy counts once); two answers.
    assert_eq!(
        (
            claude["user_messages"].as_i64(),
            claude["assistant_messages"].as_i64()
        ),
        (Some(2), Some(2))
    );
    assert_eq!(claude["messages"], 4);
    assert_eq!(
        (claude["compactions"].as_i64(), claude["unparsed"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(claude["records"], 11);
    assert_eq!(claude["models"], serde_json::json!(["claude-sonnet-4-5"]));
    assert_eq!(
        (claude["parent"].is_null(), claude["subagents"].as_i64()),
        (true, Some(1))
    );
    assert_eq!(claude["files"], serde_json::json!([home.claude]));
    assert_eq!(claude["on_disk"], true);
    let sub = session(&list, "agent-b41c2d");
    assert_eq!(sub["parent"], CLAUDE_ID);
    assert_eq!(sub["title"], "List every call site of Invoice::total");

    let codex = session(&list, CODEX_ID);
    assert_eq!(codex["title"], "Add a --dry-run flag to the import command");
    assert_eq!(
        (codex["project"].as_str(), codex["branch"].as_str()),
        (Some("/home/dana/src/ledger"), Some("main"))
    );
    assert_eq!(codex["models"], serde_json::json!(["gpt-5-codex"]));
    assert_eq!(
        codex["user_messages"], 1,
        "the environment context is not a prompt"
    );

    let gemini = session(&list, GEMINI_ID);
    assert_eq!(
        (gemini["title"].as_str(), gemini["project"].as_str()),
        (Some("Slow nightly backup"), Some("ledger"))
    );
    assert_eq!(
        (
            gemini["user_messages"].as_i64(),
            gemini["assistant_messages"].as_i64()
        ),
        (Some(1), Some(1))
    );

    let cursor = session(&list, CURSOR_ID);
    assert_eq!(
        cursor["title"],
        "Rename the config key retry_ms to retry_interval"
    );
    assert_eq!(cursor["project"], "home-dana-src-ledger");
    assert_eq!(cursor["messages"], 3);
    // Cursor writes no times: they are when the records were archived.
    assert!(
        cursor["started"].as_str().unwrap().starts_with("20"),
        "{cursor}"
    );

    let only_codex = json_lines(&env, &["sessions", "--json", "--harness", "codex"]);
    assert_eq!(only_codex.len(), 1);
    let since = json_lines(&env, &["sessions", "--json", "--since", "2026-11-29"]);
    let since: Vec<&str> = since.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(since, [CURSOR_ID, GEMINI_ID, CODEX_ID]);
    let project = json_lines(
        &env,
        &[
            "sessions",
            "--json",
            "--project",
            "DANA-src",
            "--limit",
            "1",
        ],
    );
    assert_eq!(project.len(), 1);
    assert_eq!(project[0]["id"], CURSOR_ID);
}

#[test]
fn copies_count_once_and_compactions_and_unreadable_records_are_shown() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    let roles: Vec<String> = conversation(&env, CLAUDE_ID)
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "user",
            "assistant",
            "tool",
            "assistant",
            "compact",
            "system",
            "unparsed"
        ]
    );
    let unparsed = conversation(&env, CLAUDE_ID).pop().unwrap().1;
    let raw: Value = serde_json::from_str(&unparsed).unwrap();
    assert_eq!(raw["message"]["content"], 42, "shown as its raw JSON");
}

/// Codex writes each prompt twice: the `response_item` user message sent to the model, and
/// the `event_msg` of type `user_message` (`EventMsg::UserMessage`, persisted by
/// `codex-rs/core/src/rollout/policy.rs` `should_persist_event_msg`, openai/codex 0.63.0),
/// in that order; a session may hold the event alone (`codex-events.jsonl`). The prompt
/// counts once, the same words typed again count again, the event alone is a prompt (title
/// and search), and neither tool calls nor reasoning are counted as messages; reasoning
/// with no text (only `encrypted_content`) is not shown.
#[test]
fn codex_prompts_count_once_from_either_copy_and_tool_calls_and_reasoning_are_not_messages() {
    const TWICE: &str = "0199e0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f";
    const EVENTS: &str = "0199e0f1-2b3c-7d4e-9f50-6b7c8d9e0f1a";
    let env = Env::new();
    Home::write(&env);
    let day = env.dir.path().join("home/.codex/sessions/2026/12/01");
    let twice = day.join(format!("rollout-2026-12-01T10-00-00-{TWICE}.jsonl"));
    let events = day.join(format!("rollout-2026-12-01T11-00-00-{EVENTS}.jsonl"));
    put(&twice, &fixture("codex-prompts.jsonl"));
    put(&events, &fixture("codex-events.jsonl"));
    archive_home(&env);

    let list = json_lines(&env, &["sessions", "--json", "--harness", "codex"]);
    let counts = |id: &str| {
        let s = session(&list, id);
        (
            s["title"].as_str().map(str::to_owned),
            s["user_messages"].as_i64(),
            s["assistant_messages"].as_i64(),
        )
    };
    assert_eq!(
        counts(TWICE),
        (
            Some("Why does the import skip the last row?".into()),
            Some(3),
            Some(3)
        )
    );
    assert_eq!(
        counts(EVENTS),
        (
            Some("List the importers and what each reads".into()),
            Some(1),
            Some(1)
        )
    );
    let roles: Vec<String> = (conversation(&env, TWICE).into_iter())
        .map(|(r, _)| r)
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "tool",
            "tool",
            "reasoning",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ]
    );
    let text = stdout_of(&env, &["show", TWICE]);
    assert_eq!(
        text.matches("(thinking)").count(),
        1,
        "no empty reasoning:\n{text}"
    );
    assert!(
        text.contains("(thinking) **Checking the loop bound**"),
        "{text}"
    );
    let hits = json_lines(&env, &["search", "importers", "--json"]);
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(
        (hits[0]["session"].as_str(), hits[0]["role"].as_str()),
        (Some(EVENTS), Some("user"))
    );
}

/// Claude Code keeps more than subagents in a session's folder: a workflow's journal
/// (`subagents/workflows/<run>/journal.jsonl`, the same name in every session) and tool
/// results. Each is that session's, never a top-level session (nor one shared by every
/// session's journal). Times come from the records, else the files' modification times,
/// never from when they were archived or indexed.
#[test]
fn files_in_a_claude_session_folder_are_the_sessions_and_times_fall_back_to_mtime() {
    const OTHER: &str = "9b2f7c1e-3d4a-4e5f-8a6b-7c8d9e0f1a2b";
    let env = Env::new();
    let home = Home::write(&env);
    let project = home.claude.parent().unwrap().to_owned();
    let step = br#"{"type":"workflow_step","step":"plan","status":"done"}"#;
    let at = |secs: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    // 2026-11-28T09:25:00Z and 2026-11-30T12:00:00Z.
    let (journal_time, cursor_time) = (at(1_795_857_900), at(1_796_040_000));
    for session in [CLAUDE_ID, OTHER] {
        let journal = project.join(format!("{session}/subagents/workflows/wf-1/journal.jsonl"));
        put(&journal, &[&step[..], b"\n"].concat());
        let file = fs::File::options().write(true).open(&journal).unwrap();
        file.set_modified(journal_time).unwrap();
    }
    let result = project.join(format!("{CLAUDE_ID}/tool-results/toolu_01.jsonl"));
    put(&result, b"{\"output\":\"a.txt\"}\n");
    let cursor = fs::File::options().write(true).open(&home.cursor).unwrap();
    cursor.set_modified(cursor_time).unwrap();
    archive_home(&env);

    let list = json_lines(&env, &["sessions", "--json"]);
    let top: Vec<&str> = (list.iter())
        .filter(|s| s["parent"].is_null())
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        top,
        [CURSOR_ID, GEMINI_ID, CODEX_ID, CLAUDE_ID],
        "{list:#?}"
    );
    assert_eq!(session(&list, CLAUDE_ID)["subagents"], 3);
    let journal = session(
        &list,
        &format!("{CLAUDE_ID}/subagents/workflows/wf-1/journal"),
    );
    assert_eq!(journal["parent"], CLAUDE_ID);
    assert_eq!(
        (
            journal["started"].as_str(),
            journal["last_activity"].as_str()
        ),
        (Some("2026-11-28T09:25:00Z"), Some("2026-11-28T09:25:00Z"))
    );
    let other = session(&list, &format!("{OTHER}/subagents/workflows/wf-1/journal"));
    assert_eq!(other["parent"], OTHER);
    let cursor = session(&list, CURSOR_ID);
    assert_eq!(cursor["started"], "2026-11-30T12:00:00Z", "{cursor}");
}

#[test]
fn gemini_upserts_replace_messages_and_rewinds_drop_them() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    let said = conversation(&env, GEMINI_ID);
    assert_eq!(
        said,
        [
            (
                "user".to_owned(),
                "Why is the nightly backup job slow?".to_owned()
            ),
            (
                "assistant".to_owned(),
                "The job spends 85 minutes in xz -9; zstd -3 would take minutes.".to_owned()
            ),
        ]
    );
    let rewound = cli(&env, &["search", "draft", "--json"]);
    assert_eq!(rewound.status.code(), Some(1), "{}", stderr(&rewound));
    assert!(rewound.stdout.is_empty());
}

#[test]
fn search_finds_a_phrase_deep_inside_a_tool_result() {
    let env = Env::new();
    let home = Home::write(&env);
    let mut output = "compiling crate\n".repeat(20_000);
    output.push_str("error: the lock file needs to be updated but --locked was passed\n");
    output.push_str(&"warning: unused import\n".repeat(20_000));
    let result = serde_json::json!({
        "type": "user",
        "uuid": "deep-1",
        "timestamp": "2026-11-28T09:30:00.000Z",
        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": output}]},
    });
    let mut bytes = fs::read(&home.claude).unwrap();
    bytes.extend(serde_json::to_vec(&result).unwrap());
    bytes.push(b'\n');
    fs::write(&home.claude, bytes).unwrap();
    archive_home(&env);

    let hits = json_lines(
        &env,
        &["search", "\"lock file needs to be updated\"", "--json"],
    );
    assert_eq!(hits.len(), 1, "{hits:?}");
    let hit = &hits[0];
    assert_eq!(
        (hit["session"].as_str(), hit["role"].as_str()),
        (Some(CLAUDE_ID), Some("tool"))
    );
    assert_eq!(
        (hit["harness"].as_str(), hit["project"].as_str()),
        (Some("claude-code"), Some("/home/dana/src/ledger"))
    );
    assert_eq!(hit["timestamp"], "2026-11-28T09:30:00Z");
    assert!(
        hit["snippet"]
            .as_str()
            .unwrap()
            .contains("the **lock file needs to be updated** but"),
        "{hit}"
    );
    let seq = hit["seq"].as_i64().unwrap();
    let record = env.export(&["--since-seq", &(seq - 1).to_string()]);
    assert!(raw_record(&record[0]).contains("deep-1"));

    // Prefixes, OR, NOT, filters, and punctuation taken literally.
    let sessions = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["search"];
        all.extend(args);
        all.push("--json");
        let mut ids: Vec<String> = (json_lines(&env, &all).iter())
            .map(|h| h["session"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids.dedup();
        ids
    };
    assert_eq!(sessions(&["retry_interv*"]), [CURSOR_ID]);
    assert_eq!(sessions(&["xz OR dry-run"]), [CODEX_ID, GEMINI_ID]);
    assert_eq!(sessions(&["backup NOT xz"]), [GEMINI_ID]);
    assert_eq!(
        sessions(&["minutes", "--harness", "gemini-cli"]),
        [GEMINI_ID]
    );
    assert_eq!(sessions(&["src/pdf.rs"]), ["agent-b41c2d"]);

    // A word finds exactly itself, or with --stem the words of its stem.
    let singular = cli(&env, &["search", "minute"]);
    assert_eq!(singular.status.code(), Some(1), "{}", stderr(&singular));
    let minutes = sessions(&["minutes"]);
    assert!(!minutes.is_empty());
    assert_eq!(sessions(&["minute", "--stem"]), minutes);
}

/// As grep and rg: 1 and nothing on stdout when nothing matched, 2 for a query that cannot
/// be read, explained in the query's terms rather than SQLite's.
#[test]
fn search_exits_1_when_nothing_matched_and_2_for_a_query_it_cannot_read() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    for args in [
        &["minutes", "--harness", "codex"][..],
        &["draft"],
        &["nowhere", "--json"],
    ] {
        let none = cli(&env, &[&["search"][..], args].concat());
        assert_eq!(none.status.code(), Some(1), "{args:?}: {}", stderr(&none));
        assert!(none.stdout.is_empty(), "{args:?}");
        assert!(
            stderr(&none).contains("no message matches"),
            "{}",
            stderr(&none)
        );
    }
    for (query, why) in [
        (
            "NOT",
            "NOT at character 1 needs a word or a group on each side",
        ),
        ("\"lock file", "the `\"` at character 1 is never closed"),
        ("(xz OR backup", "the `(` at character 1 is never closed"),
    ] {
        let bad = cli(&env, &["search", query]);
        assert_eq!(bad.status.code(), Some(2), "{query}");
        let said = stderr(&bad);
        assert!(
            said.contains(&format!("search query {query:?} cannot be read: {why}")),
            "{said}"
        );
        assert!(
            !said.contains("fts5") && !said.contains("syntax error"),
            "{said}"
        );
        assert!(bad.stdout.is_empty());
    }
}

/// A harness misspelt (`claude` for `claude-code`) listed nothing and exited 0, as if there
/// were no such sessions; it is an error naming the harnesses there are.
#[test]
fn an_unknown_harness_is_an_error_listing_the_known_ones() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    for args in [
        &["sessions", "--harness", "claude"][..],
        &["search", "backup", "--harness", "claude"],
    ] {
        let out = cli(&env, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty());
        assert!(
            stderr(&out).contains(
                "no harness \"claude\"; give one of: aider, amp, claude-code, cline, codex, \
                 copilot-cli, crush, cursor, droid, gemini-cli, generic, gptme, kilo-code, \
                 mistral-vibe, opencode, pi, qwen-code"
            ),
            "{}",
            stderr(&out)
        );
    }
    // A known harness without sessions here is no error.
    assert_eq!(
        stdout_of(&env, &["sessions", "--harness", "generic", "--json"]),
        ""
    );
}

#[test]
fn show_takes_a_unique_prefix_and_names_the_candidates_of_an_ambiguous_one() {
    let env = Env::new();
    let home = Home::write(&env);
    // A second Claude session whose id shares its first characters with the fixture's.
    let twin = home
        .claude
        .with_file_name("7c9e0000-0000-4000-8000-000000000000.jsonl");
    put(
        &twin,
        br#"{"type":"user","uuid":"x","message":{"content":"hello"}}"#,
    );
    fs::OpenOptions::new()
        .append(true)
        .open(&twin)
        .map(|mut f| {
            use std::io::Write;
            f.write_all(b"\n").unwrap()
        })
        .unwrap();
    archive_home(&env);
    let text = stdout_of(&env, &["show", "7c9e6"]);
    assert!(
        text.starts_with("Cent rounding in invoice totals\n"),
        "{text}"
    );
    let ambiguous = cli(&env, &["show", "7c9e"]);
    assert_eq!(ambiguous.status.code(), Some(2));
    let why = stderr(&ambiguous);
    assert!(
        why.contains(CLAUDE_ID) && why.contains("7c9e0000-0000-4000-8000-000000000000"),
        "{why}"
    );
    for unknown in ["ffff0000", "7c9"] {
        let out = cli(&env, &["show", unknown]);
        assert_eq!(out.status.code(), Some(1), "{unknown}");
        assert!(stderr(&out).contains("`transcript-sync sessions` lists them"));
    }
}

#[test]
fn show_raw_is_the_main_transcript_byte_for_byte_and_text_reads_as_a_conversation() {
    let env = Env::new();
    let home = Home::write(&env);
    archive_home(&env);
    let raw = cli(&env, &["show", CODEX_ID, "--format", "raw"]);
    assert!(raw.status.success());
    assert_eq!(raw.stdout, fs::read(&home.codex).unwrap());

    let text = stdout_of(&env, &["show", CLAUDE_ID, "--subagents"]);
    for line in [
        "7c9e6679-7425-40de-944b-e07fc1f90ae7 · claude-code · /home/dana/src/ledger (fix/rounding)",
        "user · 2026-11-28T09:14:10Z",
        "Invoices over 1000 EUR come out one cent short. Find out why.",
        "→ Grep fn total",
        "── conversation compacted ──",
        "List every call site of Invoice::total",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "no line {line:?} in:\n{text}"
        );
    }
    assert!(
        text.contains("← result (136 B) src/invoice.rs:88:"),
        "{text}"
    );
    let markdown = stdout_of(&env, &["show", CURSOR_ID, "--format", "markdown"]);
    assert!(
        markdown.starts_with("# Rename the config key retry_ms to retry_interval\n"),
        "{markdown}"
    );
    assert!(
        markdown.contains("- Tool call **run_terminal_cmd**: `rg -l retry_ms`"),
        "{markdown}"
    );
}

/// `show` as a person sees it: on a pseudo-terminal, under `script`.
/// The table's ID column is what `show` takes: ids that are not UUIDs (the files' names)
/// get the shortest prefix that names them, which may be more than 8 characters; and the
/// `[+N subagents]` and `[deleted]` marks stay when a title is cut to the terminal's width.
#[test]
fn the_sessions_table_shows_ids_show_takes_and_keeps_its_marks_on_a_narrow_terminal() {
    let env = Env::new();
    let home = Home::write(&env);
    for (name, prompt) in [("alpha", "first scratch"), ("beta", "second scratch")] {
        let path = home
            .claude
            .with_file_name(format!("scratch-session-{name}.jsonl"));
        let line = format!(
            r#"{{"type":"user","uuid":"{name}","timestamp":"2026-11-27T10:00:00.000Z","message":{{"content":"{prompt}"}}}}"#
        );
        put(&path, format!("{line}\n").as_bytes());
    }
    archive_home(&env);
    fs::remove_file(&home.claude).unwrap();
    let table = stdout_of(&env, &["sessions"]);
    for (id, title) in [
        ("scratch-session-a  ", "first scratch"),
        ("scratch-session-b  ", "second scratch"),
        ("7c9e6679           ", "Cent rounding"),
    ] {
        assert!(
            table.lines().any(|l| l.contains(id) && l.contains(title)),
            "{id:?}:\n{table}"
        );
    }
    let shown = stdout_of(&env, &["show", "scratch-session-b"]);
    assert!(shown.starts_with("second scratch\n"), "{shown}");

    let command = format!("stty cols 100 && {BIN} sessions --db {}", env.db.display());
    let screen = on_a_terminal(&env, &command);
    let claude = (screen.lines())
        .find(|l| l.contains("7c9e6679"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(
        claude.ends_with("… [+1 subagent] [deleted]") && claude.contains("Cent"),
        "{claude:?}"
    );
}

#[test]
fn show_on_a_terminal_is_styled_and_keeps_its_lines() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    // As a person with `PAGER=cat` sees it (the test environment's; the pager's own test is
    // below).
    let command = format!("{BIN} show {GEMINI_ID} --db {}", env.db.display());
    let screen = on_a_terminal(&env, &command);
    assert!(
        screen.starts_with("\x1b[1mSlow nightly backup\x1b[22m\n"),
        "{screen:?}"
    );
    assert!(
        screen.contains(
            "\x1b[1muser · 2026-11-30T08:30:05Z\x1b[22m\nWhy is the nightly backup job slow?\n"
        ),
        "{screen:?}"
    );
}

/// On a terminal, `show` pages through `$PAGER` as git does (here a pager that marks each
/// line it shows), keeping its styling; `--no-pager` writes to the terminal; `--color` says
/// when to style, whatever the output is.
#[test]
fn show_pages_on_a_terminal_and_color_says_when_to_style() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    let show = format!("{BIN} show {GEMINI_ID} --db {}", env.db.display());
    let paged = on_a_terminal(&env, &format!("PAGER='sed s/^/paged:/' {show}"));
    assert!(paged.lines().count() > 3, "{paged:?}");
    assert!(paged.lines().all(|l| l.starts_with("paged:")), "{paged:?}");
    assert!(paged.contains("\x1b[1m"), "{paged:?}");
    let unpaged = on_a_terminal(&env, &format!("PAGER='sed s/^/paged:/' {show} --no-pager"));
    assert!(!unpaged.contains("paged:"), "{unpaged:?}");
    let plain = on_a_terminal(&env, &format!("PAGER=cat {show} --color never"));
    assert!(!plain.contains('\x1b'), "{plain:?}");
    let piped = stdout_of(&env, &["show", GEMINI_ID, "--color", "always"]);
    assert!(piped.starts_with("\x1b[1mSlow nightly backup"), "{piped:?}");
}

/// A search on a terminal marks its matches in colour (bold red, as grep does), and with `**`
/// where it is not styled.
#[test]
fn search_marks_matches_in_colour_on_a_terminal() {
    let env = Env::new();
    Home::write(&env);
    archive_home(&env);
    let command = format!("{BIN} search nightly --db {}", env.db.display());
    let screen = on_a_terminal(&env, &command);
    assert!(
        screen.contains("\x1b[1;31mnightly\x1b[39;22m"),
        "{screen:?}"
    );
    let piped = stdout_of(&env, &["search", "nightly"]);
    assert!(piped.contains("**nightly**"), "{piped:?}");
    let forced = stdout_of(&env, &["search", "nightly", "--color", "always"]);
    assert!(
        forced.contains("\x1b[1;31mnightly\x1b[39;22m"),
        "{forced:?}"
    );
}

/// `run` with the built-in watchers under the env's HOME, with no rescan while a test runs.
fn start_daemon(env: &Env) -> Daemon {
    let mut cmd = env.cmd();
    cmd.args(["run", "--rescan-interval", "3600", "--db"])
        .arg(&env.db);
    Daemon::spawn(cmd, TapReader::Read)
}

/// The records in the archive.
fn record_count(env: &Env) -> u64 {
    env.sql("SELECT count(*) FROM records")[0].parse().unwrap()
}

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
    let schema = include_str!("../src/consumers/sessions/schema.sql");
    let words = "tokenize = 'words remove_diacritics 2 categories ''L* N* Co M*'''";
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
    conn.execute_batch("DROP TABLE snapshots; PRAGMA user_version = 8;")
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
    assert_eq!(env.sql("PRAGMA user_version"), ["10"]);
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
         DROP TABLE snapshots; PRAGMA user_version = 7;",
    )
    .unwrap();
    drop(conn);
    let out = cli(&env, &["sessions", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).unwrap(), listed);
    assert_eq!(env.sql("PRAGMA user_version"), ["10"]);
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
         DROP TABLE snapshots; PRAGMA user_version = 3;",
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

#[test]
fn raw_of_a_session_kept_in_several_files_is_its_transcript_and_names_the_others() {
    // Regression: `show --format raw` of a Cline session printed its manifest (`<id>.json`,
    // the first of its files), not the conversation.
    let env = Env::new();
    let home = env.dir.path().join("home");
    crate::util::copy_agent_fixture("cline", &home);
    env.run_once_home();
    let id = "1796311346532_t87ya";
    let folder = home.join(format!(".cline/data/sessions/{id}"));
    let (messages, manifest) = (
        folder.join(format!("{id}.messages.json")),
        folder.join(format!("{id}.json")),
    );
    let out = cli(&env, &["show", id, "--format", "raw"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        out.stdout == fs::read(&messages).unwrap(),
        "not the messages file"
    );
    let said = stderr(&out);
    let names = |p: &Path| said.contains(p.to_str().unwrap());
    assert!(
        names(&messages) && names(&manifest) && said.contains("--file"),
        "{said}"
    );
    let out = cli(&env, &["show", id, "--file", manifest.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        out.stdout == fs::read(&manifest).unwrap(),
        "not the manifest"
    );
    let out = cli(&env, &["show", id, "--file", "elsewhere.json"]);
    assert_eq!(out.status.code(), Some(2));
    let refused = stderr(&out);
    let lists = refused.contains(manifest.to_str().unwrap());
    assert!(
        refused.contains("has no file elsewhere.json") && lists,
        "{refused}"
    );
}
