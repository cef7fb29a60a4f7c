//! Every agent, checked on what the agent itself wrote: the transcripts in
//! `tests/fixtures/agents/<agent>/` were recorded by running the real agent offline against
//! the scripted model (`scripts/agents/record`, which names each agent's version in
//! `RECORDED`): one prompt, one shell tool call, one final answer. The agents themselves
//! (installed from npm at the pinned versions) then take back what `restore` wrote.

use crate::util::{Env, copy_agent_fixture, stderr, stdout_of};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use testkit::agents::{self, ModelServer};

/// The prompt, the tool's output and the final answer `scripts/agents/record` scripts.
const PROMPT: &str = "Run the scripted command, please.";
const TOOL_OUTPUT: &str = "scripted-tool-output";
const ANSWER: &str = "Scripted answer: done.";
/// Where the recording ran each agent.
const PROJECT: &str = "/tmp/transcript-sync-agents/project";

/// The agents recorded, by fixture folder: the watcher's name, or the watcher's name and what
/// sets the release apart (`codex-json`: a TypeScript release of Codex CLI, whose sessions
/// are JSON documents rewritten whole; `gemini-cli-json`: Gemini CLI 0.38, whose chats are
/// too; `cline-tasks`: Cline's CLI 2, whose task folders its VS Code extension
/// keeps too; `mistral-vibe-legacy`: Mistral Vibe 2, which appended `messages.jsonl`;
/// `opencode-storage`: OpenCode 1.1, which kept JSON files under `storage/`; `openclaw-jsonl`:
/// OpenClaw 2026.7.1, which appended JSONL before its SQLite database; `llm-responses`: LLM
/// 0.31.1, which logged to `responses` before its message store).
const AGENTS: [&str; 33] = [
    "aider",
    "amp",
    "claude-code",
    "cline",
    "cline-tasks",
    "code-puppy",
    "codex",
    "codex-json",
    "continue",
    "copilot-cli",
    "crush",
    "droid",
    "gemini-cli",
    "gemini-cli-json",
    "gptme",
    "hermes",
    "kilo-code",
    "kimi-cli",
    "llm",
    "llm-responses",
    "mini-swe-agent",
    "mistral-vibe",
    "mistral-vibe-legacy",
    "nanocoder",
    "open-interpreter",
    "openclaw",
    "openclaw-jsonl",
    "opencode",
    "opencode-storage",
    "openhands",
    "pi",
    "qwen-code",
    "ra-aid",
];

/// The watcher that reads `agent`'s sessions.
fn harness_of(agent: &str) -> &str {
    match agent {
        "codex-json" => "codex",
        "gemini-cli-json" => "gemini-cli",
        "cline-tasks" => "cline",
        "mistral-vibe-legacy" => "mistral-vibe",
        "opencode-storage" => "opencode",
        "openclaw-jsonl" => "openclaw",
        "llm-responses" => "llm",
        _ => agent,
    }
}

/// True for a file the session is archived from: JSONL appended to (not OpenClaw's trace of a
/// run beside its session), a database, or a document rewritten whole (a Codex CLI TypeScript
/// release's rollout, a Gemini chat, Cline's
/// session files and task folder, an Amp thread, Aider's Markdown history, everything in a
/// Mistral Vibe, Kimi CLI or OpenHands session's folder, a Continue or Nanocoder session, not
/// their lists of sessions, an Open Interpreter conversation, a mini-swe-agent trajectory, a
/// Code Puppy session and its metadata).
fn is_transcript(file: &Path) -> bool {
    let name = file.file_name().unwrap().to_string_lossy();
    let cline = file.ancestors().any(|a| a.ends_with(".cline/data"));
    (name.ends_with(".jsonl") && !name.ends_with(".trajectory.jsonl"))
        || name.ends_with(".db")
        || name == "openclaw-agent.sqlite"
        || name == ".aider.chat.history.md"
        || name.ends_with(".traj.json")
        || (name.starts_with("T-") && name.ends_with(".json"))
        || file.ancestors().any(|a| a.ends_with(".vibe/logs/session"))
        || file.ancestors().any(|a| a.ends_with(".kimi/sessions"))
        || file
            .ancestors()
            .any(|a| a.ends_with(".openhands/conversations"))
        || file.ancestors().any(|a| a.ends_with("opencode/storage"))
        || (name.starts_with("session-") && name.ends_with(".json"))
        || (name.starts_with("rollout-") && name.ends_with(".json"))
        || (cline && name.ends_with(".json"))
        || (file.ancestors().any(|a| a.ends_with(".continue/sessions")) && name != "sessions.json")
        || (file.ancestors().any(|a| a.ends_with("nanocoder/sessions")) && name != "sessions.json")
        || file
            .ancestors()
            .any(|a| a.ends_with("open-interpreter/conversations"))
        || file.ancestors().any(|a| a.ends_with(".code_puppy"))
}

/// The earliest and latest time of the transcripts' messages (their `timestamp`, or Cline's
/// `ts` in ms, or the Unix seconds of a Kimi CLI event or of a mini-swe-agent message's
/// `extra.timestamp`), to the second, as `sessions` prints. What Cline's extension showed
/// (`ui_messages.json`) is not the conversation.
fn time_span(transcripts: &[&PathBuf]) -> (String, String) {
    let mut records: Vec<Value> = Vec::new();
    for t in transcripts
        .iter()
        .filter(|t| !t.ends_with("ui_messages.json"))
    {
        if t.extension().is_some_and(|e| e == "db" || e == "sqlite") {
            let db = rusqlite::Connection::open(t).unwrap();
            // OpenCode's `message` (ms), Crush's `messages` (seconds), Hermes's sessions'
            // start and messages (seconds, real numbers), OpenClaw's sessions' start and
            // events (ms), or LLM's turns, or before them its responses (text in UTC, to the
            // second).
            let sql = match t.file_name().unwrap().to_str().unwrap() {
                "crush.db" => "SELECT created_at * 1000 FROM messages",
                "state.db" => {
                    "SELECT CAST(round(started_at * 1000) AS INTEGER) FROM sessions
                     UNION ALL SELECT CAST(round(timestamp * 1000) AS INTEGER) FROM messages"
                }
                // RA.Aid's session and its trajectory (local time; the recording's was UTC).
                "pk.db" => {
                    "SELECT CAST(strftime('%s', start_time) AS INTEGER) * 1000 FROM session
                     UNION ALL SELECT CAST(strftime('%s', created_at) AS INTEGER) * 1000
                     FROM trajectory"
                }
                "logs.db" if has_table(&db, "turns") => {
                    "SELECT CAST(strftime('%s', datetime_utc) AS INTEGER) * 1000 FROM turns"
                }
                "logs.db" => {
                    "SELECT CAST(strftime('%s', datetime_utc) AS INTEGER) * 1000 FROM responses"
                }
                "openclaw-agent.sqlite" => {
                    "SELECT created_at FROM session_windows
                     UNION ALL SELECT created_at FROM transcript_events"
                }
                _ => "SELECT time_created FROM message",
            };
            let mut stmt = db.prepare(sql).unwrap();
            let times = stmt.query_map([], |r| r.get::<_, i64>(0)).unwrap();
            records.extend(times.map(|t| serde_json::json!({"ts": t.unwrap()})));
            continue;
        }
        let text = fs::read_to_string(t).unwrap();
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Array(list)) => records.extend(list),
            // An OpenCode 1.1 message.
            Ok(info) if info["role"].is_string() && info["time"]["created"].is_i64() => {
                records.push(serde_json::json!({"ts": info["time"]["created"]}));
            }
            // A Mistral Vibe session's start.
            Ok(meta) if meta["start_time"].is_string() => records.push(meta),
            // A Nanocoder session: its creation and its last save (its messages have no times).
            Ok(session) if session["createdAt"].is_string() => {
                for at in ["createdAt", "lastAccessedAt"] {
                    records.push(serde_json::json!({"timestamp": session[at]}));
                }
            }
            // A Codex CLI TypeScript release's rollout: its items have no times.
            Ok(rollout) if rollout["session"]["timestamp"].is_string() => {
                records.push(rollout["session"].clone())
            }
            // An OpenHands event.
            Ok(event) if event["timestamp"].is_string() => records.push(event),
            // An Amp thread: created (ms), and when each prompt was sent.
            Ok(thread) if thread["created"].is_i64() => {
                records.push(serde_json::json!({"ts": thread["created"]}));
                let messages = thread["messages"].as_array().unwrap().iter();
                let sent = messages.filter_map(|m| m["meta"]["sentAt"].as_i64());
                records.extend(sent.map(|ms| serde_json::json!({"ts": ms})));
            }
            Ok(document) => {
                records.extend(document["messages"].as_array().cloned().unwrap_or_default())
            }
            // Aider's history: each run's start, in local time (the tests' zone is UTC).
            Err(_) if t.ends_with(".aider.chat.history.md") => records.extend(
                (text.lines())
                    .filter_map(|l| l.strip_prefix("# aider chat started at "))
                    .map(|at| serde_json::json!({"timestamp": at.replace(' ', "T")})),
            ),
            Err(_) => records.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok())),
        }
    }
    let second = |ms: i64| {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms as u64);
        humantime::format_rfc3339_seconds(t).to_string()
    };
    let mut times: Vec<String> = (records.iter())
        .map(|r| {
            let kimi = (r["timestamp"].as_f64()).filter(|_| r["message"]["type"].is_string());
            let seconds = kimi.or(r["extra"]["timestamp"].as_f64());
            let ms = (r["ts"].as_i64().or(r["createdAt"].as_i64()))
                .or(seconds.map(|s| (s * 1000.0) as i64));
            (r["timestamp"].as_str().or(r["start_time"].as_str()), ms)
        })
        .filter_map(|at_ms| match at_ms {
            (Some(t), _) => Some(format!("{}Z", &t[..19])),
            (None, Some(ms)) => Some(second(ms)),
            _ => None,
        })
        .collect();
    times.sort();
    (times[0].clone(), times[times.len() - 1].clone())
}

/// Listed with the prompt as title, the project, the times of the records and one user
/// message and two replies; found by its prompt and its tool's output; shown as a
/// conversation; restored byte for byte once deleted.
#[test]
fn each_recorded_agent_is_listed_searched_shown_and_restored() {
    for agent in AGENTS {
        let env = Env::new();
        let files = copy_agent_fixture(agent, &env.dir.path().join("home"));
        let transcripts: Vec<&PathBuf> = files.iter().filter(|f| is_transcript(f)).collect();
        assert!(
            !transcripts.is_empty(),
            "{agent}: no transcript in {files:?}"
        );
        // Aider keeps its history in the project, and RA.Aid its database, which config.toml
        // names; Crush its database, which it lists in its projects.json.
        let aider = agent == "aider";
        let ra_aid = agent == "ra-aid";
        let home = env.dir.path().join("home");
        if aider || ra_aid {
            let watch = format!("[[watch]]\npath = \"~/project\"\nharness = \"{agent}\"\n");
            env.write_config(&watch);
        }
        if agent == "crush" {
            let listed = home.join(".local/share/crush/projects.json");
            let project = home.join("project");
            let projects = serde_json::json!({"projects": [{"path": project,
                "data_dir": project.join(".crush"), "last_accessed": "2026-09-23T08:00:00Z"}]});
            fs::create_dir_all(listed.parent().unwrap()).unwrap();
            fs::write(listed, projects.to_string()).unwrap();
        }
        env.run_once_home();

        let listed = stdout_of(&env, &["sessions", "--json"]);
        let sessions: Vec<Value> = (listed.lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let [session] = &sessions[..] else {
            panic!("{agent}: one session, listed {listed}")
        };
        let got = |k: &str| session[k].clone();
        assert_eq!(got("harness"), harness_of(agent));
        assert_eq!(got("on_disk"), true, "{agent}: {session}");
        assert_eq!(got("unparsed"), 0, "{agent}: every record read: {session}");
        // OpenCode (and Kilo Code, its fork) and Crush have the model name the session: the
        // scripted model's title. Hermes names none in a one-shot run.
        let titled = matches!(
            agent,
            "opencode" | "opencode-storage" | "kilo-code" | "crush"
        );
        let database = titled
            || matches!(
                agent,
                "hermes" | "llm" | "llm-responses" | "openclaw" | "ra-aid"
            );
        let title = if titled { "Scripted title" } else { PROMPT };
        assert_eq!(got("title"), title, "{agent}: {session}");
        let in_project = aider || ra_aid || agent == "crush";
        let project = home.join("project");
        let project = if in_project {
            project.to_str().unwrap().into()
        } else if agent == "mini-swe-agent" {
            // A trajectory names no working directory unless its configuration sets one.
            Value::Null
        } else {
            PROJECT.into()
        };
        // Open Interpreter, LLM and Codex CLI's TypeScript releases keep no working directory.
        match agent {
            "open-interpreter" | "codex-json" | "llm" | "llm-responses" => {
                assert_eq!(got("project"), Value::Null, "{agent}: {session}")
            }
            _ => assert_eq!(got("project"), project, "{agent}"),
        }
        // Continue and Open Interpreter write no times: their sessions' are when they were
        // archived.
        if matches!(agent, "continue" | "open-interpreter") {
            assert!(got("started").is_string() && got("last_activity").is_string());
        } else {
            let (first, last) = time_span(&transcripts);
            assert_eq!(
                (got("started"), got("last_activity")),
                (first.into(), last.into())
            );
        }
        // Aider offers the model no tools: its reply is the answer. RA.Aid keeps no reply of
        // the model's but the message of the call that ends its task. OpenClaw's recording
        // went on in its session once more, compacted first.
        let turns = if agent == "openclaw" { 2 } else { 1 };
        let replies = if aider || ra_aid { 1 } else { 2 * turns };
        assert_eq!(
            (got("user_messages"), got("assistant_messages")),
            (turns.into(), replies.into()),
            "{agent}: the prompt, then the reply with its tool call and the answer: {session}"
        );
        let id = session["id"].as_str().unwrap();
        let said = if aider { ANSWER } else { TOOL_OUTPUT };

        for query in [&format!("\"{PROMPT}\""), said] {
            let hits = stdout_of(&env, &["search", query, "--json"]);
            assert!(
                hits.lines().any(|h| h.contains(id)),
                "{agent}: {query} not found: {hits}"
            );
        }
        // The tool's output is read as its result (the command that printed it names it too).
        // RA.Aid keeps the shell's command, not its output.
        if !aider && !ra_aid {
            let messages = stdout_of(&env, &["show", id, "--format", "json"]);
            let result = (messages.lines())
                .map(|m| serde_json::from_str::<Value>(m).unwrap())
                .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
                .find(|p| p["type"] == "tool_result");
            let result = result.unwrap_or_else(|| panic!("{agent}: no tool result: {messages}"));
            assert!(
                result["text"].as_str().unwrap().contains(TOOL_OUTPUT),
                "{agent}: {result}"
            );
        }
        let shown = stdout_of(&env, &["show", id, "--no-pager"]);
        for said in [PROMPT, said, ANSWER] {
            assert!(shown.contains(said), "{agent}: {said} not shown:\n{shown}");
        }
        if agent == "openclaw" {
            // Its summary is the scripted model's answer to the request to compact.
            let messages = stdout_of(&env, &["show", id, "--format", "json"]);
            let compacted = (messages.lines())
                .map(|m| serde_json::from_str::<Value>(m).unwrap())
                .any(|m| m["role"] == "compact" && m.to_string().contains("Scripted title"));
            assert!(compacted, "{agent}: no compaction: {messages}");
        }

        if database {
            // Its database is the agent's: never written into; the session is given as JSON.
            let out = crate::util::cli(&env, &["restore", id]);
            assert!(!out.status.success());
            assert!(
                stderr(&out).contains("never writes into")
                    && stderr(&out).contains(&format!("{}/", home.display()))
                    && stderr(&out).contains(match agent {
                        "opencode-storage" => "opencode/storage)",
                        "openclaw" => ".sqlite)",
                        _ => ".db)",
                    }),
                "{}",
                stderr(&out)
            );
            let raw = stdout_of(&env, &["show", id, "--format", "raw"]);
            let doc: Value = serde_json::from_str(&raw).unwrap();
            // OpenCode's reply is one message; Crush's, Hermes's and LLM's tool result is a
            // message of its own; OpenClaw's document holds every event of its database.
            let messages = match agent {
                "crush" | "hermes" | "llm" | "llm-responses" => 4,
                // Its query, the research stage, the project's status, the shell call and
                // the call that ended the research.
                "ra-aid" => 5,
                "openclaw" => openclaw_events(transcripts[0]),
                _ => 3,
            };
            assert_eq!(doc["messages"].as_array().unwrap().len(), messages, "{raw}");
            continue;
        }
        let recorded: Vec<Vec<u8>> = transcripts.iter().map(|t| fs::read(t).unwrap()).collect();
        for t in &transcripts {
            fs::remove_file(t).unwrap();
        }
        env.run_once_home();
        let restored = stdout_of(&env, &["restore", id]);
        // mini-swe-agent starts every run afresh, and no release of Codex CLI resumes its
        // TypeScript releases' sessions: neither has a command to resume one.
        let resumable = !matches!(agent, "mini-swe-agent" | "codex-json");
        assert_eq!(
            !restored.contains("no command resumes"),
            resumable,
            "{agent}: {restored}"
        );
        for (t, bytes) in transcripts.iter().zip(&recorded) {
            // An empty file too (Mistral Vibe's journal segment not yet written to).
            let back = fs::read(t)
                .unwrap_or_else(|e| panic!("{agent}: {} not restored: {e}", t.display()));
            assert!(
                &back == bytes,
                "{agent}: {} is not restored byte for byte",
                t.display()
            );
        }
    }
}

/// Whether the database `db` has a table `name`.
fn has_table(db: &rusqlite::Connection, name: &str) -> bool {
    let sql = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1";
    db.query_row(sql, [name], |r| r.get::<_, i64>(0)).unwrap() > 0
}

/// The events in OpenClaw's database at `path`.
fn openclaw_events(path: &Path) -> usize {
    let db = rusqlite::Connection::open(path).unwrap();
    let sql = "SELECT count(*) FROM transcript_events";
    let count: i64 = db.query_row(sql, [], |r| r.get(0)).unwrap();
    count as usize
}

/// Deletes the files of `files` that `deleted` picks (as the agent deletes a session), has the
/// deletion archived, restores each session of `ids`, and asserts that every file of `files`
/// holds its recorded bytes again. Returns how many were deleted and what each restore said.
fn delete_and_restore(
    env: &Env,
    files: &[PathBuf],
    deleted: fn(&Path) -> bool,
    ids: &[&str],
) -> (usize, Vec<String>) {
    let recorded: Vec<Vec<u8>> = files.iter().map(|f| fs::read(f).unwrap()).collect();
    let gone: Vec<&PathBuf> = files.iter().filter(|f| deleted(f)).collect();
    for f in &gone {
        fs::remove_file(f).unwrap();
    }
    env.run_once_home();
    let said = ids
        .iter()
        .map(|id| stdout_of(env, &["restore", id]))
        .collect();
    for (f, bytes) in files.iter().zip(&recorded) {
        let back = fs::read(f).unwrap_or_else(|e| panic!("{} not restored: {e}", f.display()));
        assert!(
            &back == bytes,
            "{} is not restored byte for byte",
            f.display()
        );
    }
    (gone.len(), said)
}

/// Kimi CLI's subagent (recorded with a prompt that asks for one, which the scripted model
/// hands to Kimi's `Agent` tool): a session of its own, listed after the session that started
/// it, holding the shell call and its output, which the session's own events repeat and do not
/// show again; `restore` of the session writes the subagent's files back too, byte for byte.
#[test]
fn a_kimi_cli_subagent_is_listed_under_its_session_and_restored_with_it() {
    let env = Env::new();
    let files = copy_agent_fixture("kimi-cli-subagent", &env.dir.path().join("home"));
    env.run_once_home();
    let listed = stdout_of(&env, &["sessions", "--json"]);
    let sessions: Vec<Value> = (listed.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let [session, subagent] = &sessions[..] else {
        panic!("a session and its subagent, listed {listed}")
    };
    let id = session["id"].as_str().unwrap();
    assert_eq!(session["subagents"], 1, "{session}");
    assert_eq!(subagent["parent"], id, "{subagent}");
    assert_eq!(subagent["project"], PROJECT);
    assert_eq!(subagent["title"], PROMPT);
    assert_eq!(
        (session["unparsed"].clone(), subagent["unparsed"].clone()),
        (0.into(), 0.into())
    );
    let shown = stdout_of(
        &env,
        &["show", subagent["id"].as_str().unwrap(), "--no-pager"],
    );
    assert!(
        shown.contains(TOOL_OUTPUT) && shown.contains(ANSWER),
        "{shown}"
    );
    let shown = stdout_of(&env, &["show", id, "--no-pager"]);
    assert!(
        shown.contains("Agent") && !shown.contains(TOOL_OUTPUT),
        "{shown}"
    );

    let (deleted, _) = delete_and_restore(&env, &files, is_transcript, &[id]);
    assert_eq!(deleted, 6, "{files:?}");
}

/// Nanocoder's subagent (recorded with a prompt that asks for one, which the scripted model
/// hands to Nanocoder's `agent` tool): Nanocoder keeps its messages in memory only, so the
/// session is the one listed, holding the call and what the subagent answered as its result.
#[test]
fn a_nanocoder_subagent_is_its_call_and_its_answer_in_its_session() {
    let env = Env::new();
    copy_agent_fixture("nanocoder-subagent", &env.dir.path().join("home"));
    env.run_once_home();
    let listed = stdout_of(&env, &["sessions", "--json"]);
    let [session] = &(listed.lines())
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect::<Vec<_>>()[..]
    else {
        panic!("one session, listed {listed}")
    };
    assert_eq!(
        (
            session["user_messages"].clone(),
            session["unparsed"].clone()
        ),
        (1.into(), 0.into()),
        "{session}"
    );
    let id = session["id"].as_str().unwrap();
    let messages = stdout_of(&env, &["show", id, "--format", "json"]);
    let parts: Vec<Value> = (messages.lines())
        .map(|m| serde_json::from_str::<Value>(m).unwrap())
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .collect();
    let called = (parts.iter()).any(|p| p["type"] == "tool_call" && p["name"] == "agent");
    let answered = (parts.iter()).any(|p| p["type"] == "tool_result" && p["text"] == ANSWER);
    assert!(called && answered, "{messages}");
}

/// Aider CE, recorded with `--auto-save` in its agent mode: its session (the payload and the
/// reference that points at it) is listed with the prompt as title, the project, the prompt
/// and the two replies (the agent's own report of a subagent is neither), found by its tool's
/// output, shown, and restored byte for byte with its reference, with the command that loads
/// it; its chat log is a session of its own. The second
/// recording's subagent is listed under its session, holds the shell call, and comes back with
/// the session's restore.
#[test]
fn aider_ce_sessions_their_subagents_and_chat_logs_are_read_and_restored() {
    for agent in ["aider-ce", "aider-ce-subagent"] {
        let env = Env::new();
        let home = env.dir.path().join("home");
        let files = copy_agent_fixture(agent, &home);
        env.write_config("[[watch]]\npath = \"~/project\"\nharness = \"aider-ce\"\n");
        env.run_once_home();
        let listed = stdout_of(&env, &["sessions", "--json"]);
        let sessions: Vec<Value> = (listed.lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let holds = |s: &Value, name: &str| {
            (s["files"].as_array().unwrap().iter()).any(|f| f.as_str().unwrap().ends_with(name))
        };
        let log = sessions.iter().find(|s| holds(s, "/.cecli/chat.history"));
        let log = log.unwrap_or_else(|| panic!("{agent}: no chat log in {listed}"));
        let saved = (sessions.iter()).find(|s| holds(s, "/.cecli/sessions/auto-save.json"));
        let saved = saved.unwrap_or_else(|| panic!("{agent}: no saved session in {listed}"));
        let subagents: Vec<&Value> = (sessions.iter())
            .filter(|s| s["parent"] == saved["id"])
            .collect();
        let project = home.join("project");
        for s in &sessions {
            assert_eq!(s["harness"], "aider-ce", "{s}");
            assert_eq!(s["unparsed"], 0, "{agent}: every record read: {s}");
            assert_eq!(s["project"].as_str(), project.to_str(), "{s}");
        }
        let id = saved["id"].as_str().unwrap();
        let (asked, calls) = match agent {
            "aider-ce" => (PROMPT, 2),
            _ => ("Ask a subagent to run the scripted command, please.", 3),
        };
        assert_eq!(saved["title"], asked, "{saved}");
        assert_eq!(log["title"], asked, "{log}");
        assert_eq!(
            (
                saved["user_messages"].clone(),
                saved["assistant_messages"].clone()
            ),
            (1.into(), calls.into()),
            "{agent}: {saved}"
        );
        assert_eq!(
            subagents.len(),
            usize::from(agent != "aider-ce"),
            "{listed}"
        );
        assert_eq!(sessions.len(), 2 + subagents.len(), "{listed}");
        let hits = stdout_of(&env, &["search", TOOL_OUTPUT, "--json"]);
        assert!(hits.lines().any(|h| h.contains(id)), "{agent}: {hits}");
        let shown = stdout_of(&env, &["show", id, "--no-pager"]);
        for said in [asked, TOOL_OUTPUT, ANSWER] {
            assert!(shown.contains(said), "{agent}: {said} not shown:\n{shown}");
        }
        for sub in &subagents {
            assert_eq!(sub["title"], PROMPT, "{sub}");
            let shown = stdout_of(&env, &["show", sub["id"].as_str().unwrap(), "--no-pager"]);
            assert!(shown.contains(TOOL_OUTPUT), "{shown}");
        }

        let saved_files: Vec<PathBuf> = (files.iter())
            .filter(|f| !f.ends_with("chat.history"))
            .cloned()
            .collect();
        assert_eq!(saved_files.len(), 2 + subagents.len(), "{files:?}");
        let (_, said) = delete_and_restore(&env, &saved_files, |_| true, &[id]);
        assert!(said[0].contains("cecli --auto-load"), "{}", said[0]);
    }
}

/// OpenHands' subagent (recorded with a prompt that asks for one, which the scripted model
/// hands to its `task` tool): a session of its own under its conversation, holding the shell
/// call and its output, which the conversation sees only as the subagent's answer; `restore`
/// of the conversation writes the subagent's files back too, byte for byte.
#[test]
fn an_openhands_subagent_is_listed_under_its_conversation_and_restored_with_it() {
    let env = Env::new();
    let files = copy_agent_fixture("openhands-subagent", &env.dir.path().join("home"));
    env.run_once_home();
    let listed = stdout_of(&env, &["sessions", "--json"]);
    let sessions: Vec<Value> = (listed.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (subagents, conversations): (Vec<&Value>, Vec<&Value>) =
        sessions.iter().partition(|s| s["parent"].is_string());
    let ([session], [subagent]) = (&conversations[..], &subagents[..]) else {
        panic!("a conversation and its subagent, listed {listed}")
    };
    let id = session["id"].as_str().unwrap();
    assert_eq!(session["subagents"], 1, "{session}");
    assert_eq!(subagent["parent"], id, "{subagent}");
    assert_eq!(subagent["project"], PROJECT);
    assert_eq!(subagent["title"], PROMPT);
    assert_eq!(
        (session["unparsed"].clone(), subagent["unparsed"].clone()),
        (0.into(), 0.into())
    );
    let shown = stdout_of(
        &env,
        &["show", subagent["id"].as_str().unwrap(), "--no-pager"],
    );
    assert!(
        shown.contains(TOOL_OUTPUT) && shown.contains(ANSWER),
        "{shown}"
    );
    let shown = stdout_of(&env, &["show", id, "--no-pager"]);
    assert!(
        shown.contains("task") && !shown.contains(TOOL_OUTPUT),
        "{shown}"
    );

    let (deleted, _) = delete_and_restore(&env, &files, is_transcript, &[id]);
    assert_eq!(deleted, 12, "{files:?}");
}

/// OpenHands' compaction (recorded with its summarizing condenser set to condense past six
/// events, and the conversation resumed once more, past them): its `Condensation` event is
/// shown as a compaction holding the scripted model's summary, and every message stays, those
/// it forgot too (the model ran the command again after it); the conversation is restored byte
/// for byte.
#[test]
fn an_openhands_compaction_is_shown_and_every_message_kept() {
    let env = Env::new();
    let files = copy_agent_fixture("openhands-compaction", &env.dir.path().join("home"));
    env.run_once_home();
    let listed = stdout_of(&env, &["sessions", "--json"]);
    let session: Value = serde_json::from_str(listed.trim()).unwrap();
    let counts = [
        "user_messages",
        "assistant_messages",
        "compactions",
        "unparsed",
    ];
    assert_eq!(
        counts.map(|k| session[k].as_i64().unwrap()),
        [2, 5, 1, 0],
        "{session}"
    );
    let id = session["id"].as_str().unwrap();
    let messages = stdout_of(&env, &["show", id, "--format", "json"]);
    let compacted = (messages.lines())
        .map(|m| serde_json::from_str::<Value>(m).unwrap())
        .any(|m| m["role"] == "compact" && m.to_string().contains("Scripted title"));
    assert!(compacted, "no compaction: {messages}");

    delete_and_restore(&env, &files, is_transcript, &[id]);
}

/// RA.Aid's research subagent (recorded with a prompt that asks for one, which the scripted
/// model hands to its `request_research`) writes into its session's trajectory: one session,
/// holding the subagent's shell call and the two completions, its own and the session's.
#[test]
fn an_ra_aid_research_subagent_is_read_within_its_session() {
    let env = Env::new();
    copy_agent_fixture("ra-aid-subagent", &env.dir.path().join("home"));
    env.write_config("[[watch]]\npath = \"~/project\"\nharness = \"ra-aid\"\n");
    env.run_once_home();
    let listed = stdout_of(&env, &["sessions", "--json"]);
    let session: Value = serde_json::from_str(listed.trim()).unwrap();
    assert_eq!(
        (
            session["user_messages"].clone(),
            session["assistant_messages"].clone()
        ),
        (1.into(), 2.into()),
        "{session}"
    );
    assert_eq!(session["subagents"], 0, "{session}");
    assert_eq!(session["unparsed"], 0, "{session}");
    let shown = stdout_of(
        &env,
        &["show", session["id"].as_str().unwrap(), "--no-pager"],
    );
    assert!(
        shown.contains("run_shell_command") && shown.matches(ANSWER).count() >= 2,
        "{shown}"
    );
}

/// Code Puppy's subagent (recorded with a prompt that asks for one, which the scripted model
/// hands to its `invoke_agent`): a session of its own, in `subagent_sessions/`, holding the
/// shell call and its output; the session that started it holds the call and the answer.
/// Nothing in the subagent's files names its parent or its project. `restore` of each writes
/// its files back byte for byte.
#[test]
fn a_code_puppy_subagent_is_a_session_of_its_own_restored_byte_for_byte() {
    let env = Env::new();
    let files = copy_agent_fixture("code-puppy-subagent", &env.dir.path().join("home"));
    env.run_once_home();
    let listed = stdout_of(&env, &["sessions", "--json"]);
    let sessions: Vec<Value> = (listed.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let [session] = &(sessions.iter())
        .filter(|s| s["id"].as_str().unwrap().starts_with("auto_session_"))
        .collect::<Vec<_>>()[..]
    else {
        panic!("a session and its subagent, listed {listed}")
    };
    let [subagent] = &(sessions.iter())
        .filter(|s| s["id"].as_str().unwrap().starts_with("code-puppy-session-"))
        .collect::<Vec<_>>()[..]
    else {
        panic!("a session and its subagent, listed {listed}")
    };
    assert_eq!(session["project"], PROJECT);
    assert_eq!(subagent["title"], PROMPT);
    assert_eq!(
        (session["unparsed"].clone(), subagent["unparsed"].clone()),
        (0.into(), 0.into())
    );
    let shown = |s: &Value| stdout_of(&env, &["show", s["id"].as_str().unwrap(), "--no-pager"]);
    let sub = shown(subagent);
    assert!(sub.contains(TOOL_OUTPUT) && sub.contains(ANSWER), "{sub}");
    let main = shown(session);
    assert!(
        main.contains("invoke_agent") && main.contains(ANSWER),
        "{main}"
    );

    let ids = [session, subagent].map(|s| s["id"].as_str().unwrap());
    let (deleted, _) = delete_and_restore(&env, &files, is_transcript, &ids);
    assert_eq!(deleted, 4, "{files:?}");
}

/// The agents whose own resume takes a session offline (Continue's CLI goes on from a copy of
/// it, `--fork`). Not Mistral Vibe, Kimi CLI nor OpenHands, which need a Python the tests do
/// not install (their resume was checked by hand); not Droid: `droid exec -s ID` exits 1
/// without a word here even on the session it has just written (with a custom model, offline);
/// not Cline's CLI 3, which resumes a session by id only in its terminal interface or over ACP.
const RESUMED: [&str; 13] = [
    "aider",
    "amp",
    "claude-code",
    "cline-tasks",
    "codex",
    "continue",
    "copilot-cli",
    "gemini-cli",
    "gemini-cli-json",
    "gptme",
    "openclaw-jsonl",
    "pi",
    "qwen-code",
];

/// What the resumed session is asked.
const AGAIN: &str = "Once more.";

/// `agent` run offline against `model` in `project`: on [`PROMPT`] in a new session, or on
/// [`AGAIN`] in the session `resume` names.
fn run_agent(env: &Env, agent: &str, model: &ModelServer, project: &Path, resume: Option<&str>) {
    let bin = agents::install(agent);
    let mut cmd = env.command(&bin.to_string_lossy());
    cmd.current_dir(project)
        .stdin(Stdio::null())
        .env("PATH", agents::path_for(agent));
    // Whether the prompt is given with `-p` (else as the last argument).
    let with_flag = match agent {
        "claude-code" => {
            cmd.env("ANTHROPIC_BASE_URL", model.url())
                .env("ANTHROPIC_API_KEY", "sk-scripted")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .args(["--allowedTools", "Bash(echo:*)"]);
            if let Some(id) = resume {
                cmd.args(["--resume", id]);
            }
            true
        }
        "codex" => {
            let dir = env.dir.path().join("home/.codex");
            fs::create_dir_all(&dir).unwrap();
            let config = format!(
                "model = \"scripted-model\"\nmodel_provider = \"scripted\"\n\
                 [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}/v1\"\n\
                 wire_api = \"responses\"\nenv_key = \"SCRIPTED_API_KEY\"\n",
                model.url()
            );
            fs::write(dir.join("config.toml"), config).unwrap();
            cmd.env("SCRIPTED_API_KEY", "sk-scripted")
                .args(["exec", "--skip-git-repo-check"]);
            if let Some(id) = resume {
                cmd.args(["resume", id]);
            }
            false
        }
        "gemini-cli" | "gemini-cli-json" => {
            let dir = env.dir.path().join("home/.gemini");
            fs::create_dir_all(&dir).unwrap();
            let settings = serde_json::json!({"security": {
                "auth": {"selectedType": "gemini-api-key"},
                "folderTrust": {"enabled": false},
            }});
            fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
            cmd.env("GEMINI_API_KEY", "sk-scripted")
                .env("GOOGLE_GEMINI_BASE_URL", model.url())
                .args(["--approval-mode", "yolo", "-m", "scripted-model"]);
            if let Some(id) = resume {
                cmd.args(["--resume", id]);
            }
            true
        }
        "copilot-cli" => {
            cmd.env("COPILOT_AUTO_UPDATE", "false")
                .env("COPILOT_PROVIDER_BASE_URL", format!("{}/v1", model.url()))
                .env("COPILOT_PROVIDER_API_KEY", "sk-scripted")
                .env("COPILOT_MODEL", "scripted-model")
                .arg("--allow-all-tools");
            if let Some(id) = resume {
                cmd.arg(format!("--resume={id}"));
            }
            true
        }
        "cline-tasks" => {
            let dir = env.dir.path().join("home/.cline/data");
            fs::create_dir_all(&dir).unwrap();
            let state = serde_json::json!({
                "actModeApiProvider": "anthropic",
                "planModeApiProvider": "anthropic",
                "actModeApiModelId": "claude-sonnet-4-5-20250929",
                "planModeApiModelId": "claude-sonnet-4-5-20250929",
                "anthropicBaseUrl": model.url(),
                "welcomeViewCompleted": true,
            });
            fs::write(dir.join("globalState.json"), state.to_string()).unwrap();
            fs::write(dir.join("secrets.json"), r#"{"apiKey": "sk-scripted"}"#).unwrap();
            cmd.env("CLINE_NO_AUTO_UPDATE", "1").args(["-y", "--json"]);
            if let Some(id) = resume {
                cmd.args(["-T", id]);
            }
            false
        }
        "aider" => {
            let home = env.dir.path().join("home");
            let metadata = serde_json::json!({"openai/scripted-model": {
                "max_input_tokens": 128000, "max_output_tokens": 4096,
                "input_cost_per_token": 0, "output_cost_per_token": 0,
                "litellm_provider": "openai", "mode": "chat"}});
            fs::write(
                home.join(".aider.model.metadata.json"),
                metadata.to_string(),
            )
            .unwrap();
            // Its history is where it runs (no git repository), which config.toml names.
            let watch = format!("[[watch]]\npath = {:?}\nharness = \"aider\"\n", project);
            env.write_config(&watch);
            cmd.env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                .env("OPENAI_API_BASE", format!("{}/v1", model.url()))
                .env("OPENAI_API_KEY", "sk-scripted")
                .args([
                    "--model",
                    "openai/scripted-model",
                    "--yes-always",
                    "--no-git",
                ])
                .args([
                    "--no-check-update",
                    "--analytics-disable",
                    "--no-show-release-notes",
                ])
                .args(["--no-show-model-warnings", "--no-fancy-input"]);
            if resume.is_some() {
                // A project has one history: Aider sends it all back.
                cmd.arg("--restore-chat-history");
            }
            cmd.arg("--message");
            false
        }
        "amp" => {
            // Its inference goes to $AMP_URL/api/provider/anthropic/v1/messages.
            cmd.env("AMP_URL", model.url())
                .env("AMP_API_KEY", "sk-scripted");
            if let Some(id) = resume {
                cmd.args(["threads", "continue", id]);
            }
            cmd.args(["--dangerously-allow-all", "-x"]);
            false
        }
        "gptme" => {
            cmd.env("OPENAI_BASE_URL", format!("{}/v1", model.url()))
                .env("OPENAI_API_KEY", "sk-scripted")
                .args(["-n", "-m", "local/scripted-model"])
                .args(["--name", resume.unwrap_or("scripted-session")]);
            false
        }
        "qwen-code" => {
            cmd.env("OPENAI_API_KEY", "sk-scripted")
                .env("OPENAI_BASE_URL", format!("{}/v1", model.url()))
                .env("OPENAI_MODEL", "scripted-model")
                .args(["--yolo", "--auth-type", "openai"]);
            if let Some(id) = resume {
                cmd.args(["--resume", id]);
            }
            true
        }
        "pi" => {
            let dir = env.dir.path().join("home/.pi/agent");
            fs::create_dir_all(&dir).unwrap();
            let models = serde_json::json!({"providers": {"scripted": {
                "baseUrl": format!("{}/v1", model.url()),
                "api": "openai-completions",
                "apiKey": "sk-scripted",
                "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
                "models": [{"id": "scripted-model"}],
            }}});
            fs::write(dir.join("models.json"), models.to_string()).unwrap();
            cmd.args(["--provider", "scripted", "--model", "scripted-model"]);
            if let Some(id) = resume {
                cmd.args(["--session", id]);
            }
            true
        }
        "opencode" | "opencode-storage" => {
            let dir = env.dir.path().join("home/.config/opencode");
            fs::create_dir_all(&dir).unwrap();
            let config = serde_json::json!({
                "autoupdate": false, "share": "disabled",
                "model": "scripted/scripted-model", "small_model": "scripted/scripted-model",
                "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
                "provider": {"scripted": {"npm": "@ai-sdk/openai-compatible", "name": "Scripted",
                    "options": {"baseURL": format!("{}/v1", model.url()), "apiKey": "sk-scripted"},
                    "models": {"scripted-model": {"name": "Scripted Model"}}}},
            });
            fs::write(dir.join("opencode.json"), config.to_string()).unwrap();
            // Its plugin install is pointed at a registry that refuses at once.
            cmd.env("OPENCODE_DISABLE_MODELS_FETCH", "1")
                .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
                .env("npm_config_registry", "http://127.0.0.1:9/")
                .arg("run");
            if let Some(id) = resume {
                cmd.args(["--session", id]);
            }
            // `run` quotes a prompt given as one argument: it is given on stdin.
            cmd.stdin(Stdio::piped());
            false
        }
        "continue" => {
            let dir = env.dir.path().join("home/.continue");
            fs::create_dir_all(&dir).unwrap();
            let config = format!(
                "name: scripted\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: scripted\n    \
                 provider: openai\n    model: scripted-model\n    apiBase: {}/v1\n    \
                 apiKey: sk-scripted\n    roles: [chat, edit, apply]\n",
                model.url()
            );
            let config_file = dir.join("config.yaml");
            fs::write(&config_file, config).unwrap();
            cmd.arg("--config").arg(&config_file).arg("--auto");
            if let Some(id) = resume {
                cmd.args(["--fork", id]);
            }
            true
        }
        "openclaw" | "openclaw-jsonl" => {
            let dir = env.dir.path().join("home/.openclaw");
            fs::create_dir_all(&dir).unwrap();
            let config = serde_json::json!({
                "models": {"mode": "replace", "providers": {"scripted": {
                    "baseUrl": format!("{}/v1", model.url()), "apiKey": "sk-scripted",
                    "api": "openai-completions",
                    "models": [{"id": "scripted-model", "name": "Scripted", "reasoning": false,
                        "input": ["text"], "contextWindow": 128000, "maxTokens": 4096}]}}},
                "agents": {"defaults": {"model": {"primary": "scripted/scripted-model"},
                    "workspace": project, "skipBootstrap": true}},
            });
            fs::write(dir.join("openclaw.json"), config.to_string()).unwrap();
            // Its embedded agent (no Gateway); a session resumed as `restore` says.
            cmd.args(["agent", "--local"]);
            match resume {
                Some(id) => cmd.args(["--session-id", id]),
                None => cmd.args(["--agent", "main"]),
            };
            cmd.arg("--message");
            false
        }
        "llm" => {
            // The scripted model as an extra OpenAI model of its user directory (the default
            // one, under HOME); a shell tool as a Python function, which llm runs.
            let dir = env.dir.path().join("home/.config/io.datasette.llm");
            fs::create_dir_all(&dir).unwrap();
            let models = format!(
                "- model_id: scripted\n  model_name: scripted-model\n  api_base: {}/v1\n  \
                 supports_tools: true\n",
                model.url()
            );
            fs::write(dir.join("extra-openai-models.yaml"), models).unwrap();
            cmd.args(["-m", "scripted", "--functions", LLM_SHELL_TOOL]);
            if let Some(id) = resume {
                cmd.args(["--cid", id]);
            }
            false
        }
        other => panic!("no way known to run {other}"),
    };
    let prompt = resume.map_or(PROMPT, |_| AGAIN);
    let on_stdin = matches!(agent, "opencode" | "opencode-storage");
    match (with_flag, on_stdin) {
        (_, true) => &mut cmd,
        (true, false) => cmd.args(["-p", prompt]),
        (false, false) => cmd.arg(prompt),
    };
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(mut stdin) = child.stdin.take().filter(|_| on_stdin) {
        use std::io::Write;
        stdin.write_all(prompt.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{agent} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
}

/// The shell tool LLM is given (`--functions`), as `scripts/agents/record` gives it.
const LLM_SHELL_TOOL: &str = "import subprocess
def bash(command: str) -> str:
    \"Run a shell command and return what it printed.\"
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout
";

/// OpenCode writes its sessions into its SQLite database (before 1.2, into JSON files under
/// `storage/`): a session it writes is archived from it, and when the agent goes on in the
/// same session, only what it adds is archived (each message once: the session's counts add
/// up), read while the agent writes.
#[test]
fn opencode_sessions_are_followed_in_its_database_and_its_older_storage() {
    for agent in ["opencode", "opencode-storage"] {
        follow_database(agent);
    }
}

/// OpenClaw (2026.7.2 on) appends a session's events to its SQLite database: followed as
/// OpenCode's is, and resumed by `restore`'s command while the session is there.
#[test]
fn openclaw_sessions_are_followed_in_its_database() {
    follow_database("openclaw");
}

/// LLM (0.36 on) logs each model call to its SQLite database: followed as OpenCode's is, and
/// taken up again by `llm --cid ID`.
#[test]
fn llm_threads_are_followed_in_its_database() {
    follow_database("llm");
}

fn follow_database(agent: &str) {
    let env = Env::new();
    let model = ModelServer::start(env.dir.path());
    let project = env.dir.path().join("project");
    fs::create_dir_all(&project).unwrap();
    run_agent(&env, agent, &model, &project, None);
    env.run_once_home();
    let listed = stdout_of(&env, &["sessions", "--json"]);
    let session: Value = serde_json::from_str(listed.trim()).unwrap();
    let id = session["id"].as_str().unwrap().to_owned();
    let counts = |s: &Value| (s["user_messages"].clone(), s["assistant_messages"].clone());
    assert_eq!(counts(&session), (1.into(), 2.into()), "{agent}: {session}");
    // LLM records no project.
    let kept = project.to_str().filter(|_| agent != "llm");
    assert_eq!(session["project"].as_str(), kept);
    let records = env.records().len();
    // The session's row and its messages: OpenCode's three, LLM's four (the tool's result is
    // a message of its own), each of OpenClaw's events.
    let messages = match agent {
        "llm" => 4,
        "openclaw" => openclaw_events(
            &(env.dir.path()).join("home/.openclaw/agents/main/agent/openclaw-agent.sqlite"),
        ),
        _ => 3,
    };
    assert_eq!(
        records,
        1 + messages,
        "{agent}: the session's row and its messages"
    );

    // The daemon follows the database as the agent writes it (into its `-wal`; or the files
    // of its storage): no rescan.
    let cmd = crate::util::home_daemon_cmd(&env);
    let daemon = crate::util::Daemon::spawn(cmd, crate::util::TapReader::Read);
    daemon.wait_log("caught up");
    run_agent(&env, agent, &model, &project, Some(&id));
    let listed = || -> Value {
        let listed = stdout_of(&env, &["sessions", "--json"]);
        serde_json::from_str(listed.trim()).unwrap()
    };
    crate::util::wait_until_else(
        "the resumed session's messages in the index",
        || counts(&listed()) == (2.into(), 4.into()),
        || format!("{agent}: {}\n{}", listed(), daemon.log()),
    );
    daemon.terminate();
    let session = listed();
    assert_eq!(session["id"], id.as_str());
    let hits = stdout_of(&env, &["search", "\"Once more\"", "--json"]);
    assert!(hits.contains(&id), "{hits}");
    // The second run added its messages, and the versions of them the daemon saw as they
    // were written (and what it had not yet seen settle when it stopped); no record twice,
    // and a run that finds nothing new adds nothing.
    env.run_once_home();
    let all = env.records();
    assert!(all.len() > records + 2, "{all:#?}");
    let distinct: std::collections::HashSet<&String> = all.iter().collect();
    assert_eq!(
        distinct.len(),
        all.len(),
        "a record archived twice: {all:#?}"
    );
    env.run_once_home();
    assert_eq!(env.records().len(), all.len());
}

/// The real agent writes a session (offline, against the scripted model); deleted, it is
/// restored byte for byte, and the agent's own resume takes it: the model is then sent the
/// restored conversation's prompt with the new one.
#[test]
fn each_agent_resumes_a_session_restored_after_its_deletion() {
    for agent in RESUMED {
        let env = Env::new();
        let model = ModelServer::start(env.dir.path());
        let project = env.dir.path().join("project");
        fs::create_dir_all(&project).unwrap();
        run_agent(&env, agent, &model, &project, None);
        env.run_once_home();
        let listed = stdout_of(&env, &["sessions", "--json"]);
        let session: Value = serde_json::from_str(listed.lines().next().unwrap()).unwrap();
        let id = session["id"].as_str().unwrap();
        let files: Vec<PathBuf> = (session["files"].as_array().unwrap().iter())
            .map(|f| PathBuf::from(f.as_str().unwrap()))
            .collect();

        let written: Vec<Vec<u8>> = files.iter().map(|f| fs::read(f).unwrap()).collect();
        for f in &files {
            fs::remove_file(f).unwrap();
        }
        stdout_of(&env, &["restore", id]);
        for (f, bytes) in files.iter().zip(&written) {
            let back = fs::read(f).unwrap_or_default();
            assert!(&back == bytes, "{agent}: {} not byte for byte", f.display());
        }

        let before = model.requests().len();
        run_agent(&env, agent, &model, &project, Some(id));
        let sent = model.requests()[before..]
            .iter()
            .map(|r| r["body"].to_string())
            .find(|body| body.contains(AGAIN));
        let sent =
            sent.unwrap_or_else(|| panic!("{agent}: the resumed prompt never reached the model"));
        // Aider offers the model no tools: the answer is what there is to carry back.
        let said = if agent == "aider" {
            ANSWER
        } else {
            TOOL_OUTPUT
        };
        assert!(
            sent.contains(PROMPT) && sent.contains(said),
            "{agent}: the resumed request does not carry the restored conversation: {sent}"
        );
    }
}
