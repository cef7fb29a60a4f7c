//! The session index and what people do with it: `sessions`, `show`, `search`, `restore` and
//! `reindex`, over a home holding transcripts of the four agents (fixtures in
//! `tests/fixtures/sessions/`, written in the agents' formats).

mod index;
mod restore;

use crate::util::{
    BIN, Daemon, Env, TapReader, cli, on_a_terminal, raw_record, stderr, stdout_of, watcher_names,
};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

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

/// `sessions --grep` keeps the sessions whose title, project or id holds the text: ASCII
/// letters in any case, a CJK text as a substring of a prompt; a text that none holds lists
/// none, as any filter that keeps nothing does (the header alone, exit 0).
#[test]
fn sessions_grep_keeps_those_whose_title_project_or_id_holds_the_text() {
    let env = Env::new();
    Home::write(&env);
    let cjk = "9b2f4c1e-3d5a-4e6b-8c7d-1a2b3c4d5e6f";
    let prompt = serde_json::json!({"type": "user", "uuid": "c1", "sessionId": cjk,
        "cwd": "/w/账本", "timestamp": "2026-11-20T10:00:00.000Z",
        "message": {"role": "user", "content": "修复发票合计的舍入问题"}});
    let claude = env.dir.path().join("home/.claude/projects/-w-zhang");
    put(
        &claude.join(format!("{cjk}.jsonl")),
        format!("{prompt}\n").as_bytes(),
    );
    archive_home(&env);
    let ids = |text: &str| -> Vec<String> {
        let list = json_lines(&env, &["sessions", "--grep", text, "--json"]);
        (list.iter())
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    // The title, in another case; its subagent follows it, as --json lists subagents.
    assert_eq!(ids("ROUNDING"), [CLAUDE_ID, "agent-b41c2d"]);
    assert_eq!(ids("dry-RUN flag"), [CODEX_ID]);
    // A substring of a CJK prompt, and of a CJK project.
    assert_eq!(ids("发票合计"), [cjk]);
    assert_eq!(ids("账本"), [cjk]);
    // The id, in another case.
    assert_eq!(ids("4F6C1D2E-8A9B"), [CURSOR_ID]);
    // The project, with the other filters.
    let ledger = json_lines(
        &env,
        &[
            "sessions",
            "--grep",
            "LEDGER",
            "--harness",
            "claude-code",
            "--json",
        ],
    );
    let ledger: Vec<&str> = ledger.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ledger, [CLAUDE_ID, "agent-b41c2d"]);
    assert!(ids("nowhere at all").is_empty());
    let none = cli(&env, &["sessions", "--grep", "nowhere at all"]);
    assert_eq!(none.status.code(), Some(0), "{}", stderr(&none));
    let table = String::from_utf8(none.stdout).unwrap();
    assert_eq!(table.lines().count(), 1, "{table}");
    assert!(table.starts_with("LAST ACTIVE"), "{table}");
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
            stderr(&out).contains(&format!(
                "no harness \"claude\"; give one of: {}",
                watcher_names(false).join(", ")
            )),
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
