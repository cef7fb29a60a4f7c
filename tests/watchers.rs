//! The built-in watchers: Claude Code, Codex CLI, Cursor and Gemini CLI, found under HOME or
//! their variables.

use crate::util::*;
use std::fs;
use std::path::Path;

fn write(p: &Path, bytes: &[u8]) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, bytes).unwrap();
}

fn run_builtin(env: &Env, vars: &[(&str, &Path)]) -> String {
    let mut cmd = env.cmd();
    cmd.args(["run", "--once", "--db"]).arg(&env.db);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stderr(&out)
}

#[test]
fn claude_code_sessions_and_subagents_are_archived_from_home() {
    let env = Env::new();
    let projects = env.dir.path().join("home/.claude/projects/-home-u-app");
    write(&projects.join("s1.jsonl"), b"{\"type\":\"user\"}\n");
    write(
        &projects.join("s1/subagents/agent-a1.jsonl"),
        b"{\"type\":\"assistant\"}\n",
    );
    write(&projects.join("notes.txt"), b"not a transcript\n");
    let log = run_builtin(&env, &[]);
    assert_log_has(&log, "harness=claude-code");
    let out = env.export(&[]);
    assert_eq!(out.len(), 2);
    assert!(
        out.iter()
            .all(|l| l.contains("\"harness\":\"claude-code\""))
    );
}

#[test]
fn claude_config_dir_and_codex_home_move_the_roots() {
    let env = Env::new();
    let claude = env.dir.path().join("claude-elsewhere");
    let codex = env.dir.path().join("codex-elsewhere");
    write(&claude.join("projects/p/s.jsonl"), b"{\"c\":1}\n");
    write(
        &codex.join("sessions/2026/11/29/rollout-1.jsonl"),
        b"{\"x\":1}\n",
    );
    run_builtin(
        &env,
        &[("CLAUDE_CONFIG_DIR", &claude), ("CODEX_HOME", &codex)],
    );
    let out = env.export(&[]);
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(out[0].contains("\"harness\":\"claude-code\""));
    assert!(out[1].contains("\"harness\":\"codex\""));
}

#[test]
fn a_codex_session_moved_to_archived_sessions_keeps_its_source() {
    let env = Env::new();
    let codex = env.dir.path().join("home/.codex");
    let live = codex.join("sessions/2026/11/29/rollout-1.jsonl");
    write(&live, b"{\"n\":1}\n");
    run_builtin(&env, &[]);
    let archived = codex.join("archived_sessions/rollout-1.jsonl");
    fs::create_dir_all(archived.parent().unwrap()).unwrap();
    fs::rename(&live, &archived).unwrap();
    let log = run_builtin(&env, &[]);
    assert_log_has(&log, "moved path=");
    assert_eq!(env.export(&[]).len(), 1);
    assert_eq!(
        env.sql("SELECT path FROM sources"),
        vec![archived.to_str().unwrap()]
    );
}

#[test]
fn a_copied_real_world_tree_is_reproduced_line_for_line_by_export() {
    // Records as Claude Code writes them: long lines, nested content, unicode, escapes.
    let env = Env::new();
    let projects = env.dir.path().join("home/.claude/projects");
    let mut expected = Vec::new();
    for s in 0..5 {
        let mut text = String::new();
        for i in 0..40 {
            let line = format!(
                r#"{{"parentUuid":null,"isSidechain":false,"type":"assistant","sessionId":"s{s}","message":{{"role":"assistant","content":[{{"type":"text","text":"step {i}: ✓ \"quoted\" \\ back\n{}"}}]}},"uuid":"u{s}-{i}"}}"#,
                "pad ".repeat(i * 50)
            );
            text.push_str(&line);
            text.push('\n');
            expected.push(line);
        }
        write(
            &projects.join(format!("-home-u-p{s}/session-{s}.jsonl")),
            text.as_bytes(),
        );
    }
    run_builtin(&env, &[]);
    assert_eq!(env.records(), expected);
}

/// A Gemini CLI chat as its ChatRecordingService writes it: a metadata line, then messages,
/// metadata patches and a rewind marker.
const GEMINI_CHAT: &[&str] = &[
    r#"{"sessionId":"ab12cd34-0000-4000-8000-000000000001","projectHash":"3f2a","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"2026-11-30T10:00:00.000Z","kind":"main"}"#,
    r#"{"id":"m1","timestamp":"2026-11-30T10:00:01.000Z","type":"user","content":[{"text":"list the files"}]}"#,
    r#"{"id":"m2","timestamp":"2026-11-30T10:00:03.000Z","type":"gemini","content":"Here they are.","model":"gemini-2.5-pro","tokens":{"input":812,"output":40,"total":852}}"#,
    r#"{"$set":{"lastUpdated":"2026-11-30T10:00:03.000Z"}}"#,
    r#"{"$rewindTo":"m2"}"#,
];

/// A Cursor agent transcript: role and content blocks, no ids or timestamps.
const CURSOR_TRANSCRIPT: &[&str] = &[
    r#"{"role":"user","message":{"content":[{"type":"text","text":"fix the build"}]}}"#,
    r#"{"role":"assistant","message":{"content":[{"type":"tool_use","name":"run_terminal_cmd","input":{"command":"cargo build"}}]}}"#,
];

#[test]
fn gemini_chats_and_cursor_transcripts_are_archived_from_home() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    let chats = home.join(".gemini/tmp/3f2a/chats");
    write(
        &chats.join("session-2026-11-30T10-00-ab12cd34.jsonl"),
        &lines_of(GEMINI_CHAT),
    );
    write(
        &chats.join("ab12cd34/sub-1.jsonl"),
        &lines_of(&GEMINI_CHAT[..2]),
    );
    write(
        &chats.join("session-2026-10-01T09-00-old.json"),
        b"{\"messages\":[]}\n",
    );
    write(
        &home.join(".gemini/tmp/3f2a/logs.jsonl"),
        b"{\"not\":\"a chat\"}\n",
    );
    let projects = home.join(".cursor/projects/home-u-app/agent-transcripts");
    write(&projects.join("5e1c.jsonl"), &lines_of(CURSOR_TRANSCRIPT));
    write(
        &projects.join("9a0b/9a0b.jsonl"),
        &lines_of(CURSOR_TRANSCRIPT),
    );
    let log = run_builtin(&env, &[]);
    assert_log_has(&log, "harness=gemini-cli");
    assert_log_has(&log, "harness=cursor");
    let out = env.export(&[]);
    let count = |harness: &str| {
        (out.iter())
            .filter(|l| l.contains(&format!("\"harness\":\"{harness}\"")))
            .count()
    };
    // The older whole-file chat is a snapshot source: the document around its (empty) list.
    assert_eq!((count("gemini-cli"), count("cursor")), (8, 4), "{out:?}");
    let session = chats.join("session-2026-11-30T10-00-ab12cd34.jsonl");
    assert_eq!(env.export_records_of(&session), GEMINI_CHAT);
}

#[test]
fn gemini_cli_home_stands_in_for_the_home_directory() {
    let env = Env::new();
    let profile = env.dir.path().join("gemini-profile");
    let chat = profile.join(".gemini/tmp/77aa/chats/session-2026-11-30T11-00-ffee0011.jsonl");
    write(&chat, &lines_of(&GEMINI_CHAT[..2]));
    run_builtin(&env, &[("GEMINI_CLI_HOME", &profile)]);
    assert_eq!(env.export_records_of(&chat), &GEMINI_CHAT[..2]);
}

fn lines_of(records: &[&str]) -> Vec<u8> {
    records
        .iter()
        .flat_map(|r| [r.as_bytes(), b"\n"].concat())
        .collect()
}

/// The files of folder `from` and of its folders, copied into folder `to` (made).
fn copy_files(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for file in fs::read_dir(from).unwrap() {
        let file = file.unwrap().path();
        let copy = to.join(file.file_name().unwrap());
        match file.is_dir() {
            true => copy_files(&file, &copy),
            false => drop(fs::copy(&file, copy).unwrap()),
        }
    }
}

/// `sessions --json` as printed, and as JSON.
fn sessions_listed(env: &Env) -> (String, Vec<serde_json::Value>) {
    let listed = stdout_of(env, &["sessions", "--json"]);
    let sessions = (listed.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (listed, sessions)
}

/// `search QUERY --json` finds session `id`.
fn found(env: &Env, query: &str, id: &str) {
    let hits = stdout_of(env, &["search", query, "--json"]);
    assert!(hits.contains(id), "{query} not found in {id}: {hits}");
}

/// Session `id` as `show --format json` prints it, and the parts of its messages.
fn shown_parts(env: &Env, id: &str) -> (String, Vec<serde_json::Value>) {
    let shown = stdout_of(env, &["show", id, "--format", "json"]);
    let parts = (shown.lines())
        .map(|m| serde_json::from_str::<serde_json::Value>(m).unwrap())
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .collect();
    (shown, parts)
}

/// The first part of `kind` among `parts` (of `shown`, named when there is none).
fn part_of(parts: &[serde_json::Value], kind: &str, shown: &str) -> serde_json::Value {
    let part = parts.iter().find(|p| p["type"] == kind);
    part.cloned()
        .unwrap_or_else(|| panic!("no {kind}: {shown}"))
}

/// Cline's VS Code extension keeps its tasks in the editor's global storage, and the same
/// extension runs in VS Code's forks and on a machine an editor works on over SSH: a task
/// kept by Cursor and one kept by VS Code's remote server are each archived, and restored
/// where that editor keeps it.
#[test]
fn an_extensions_tasks_are_archived_from_every_editor_and_remote_server() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    let recorded = env.dir.path().join("recorded");
    copy_agent_fixture("cline-tasks", &recorded);
    let task = recorded.join(".cline/data/tasks/1796311362233");
    let storage = |editor: &str| {
        home.join(editor)
            .join("User/globalStorage/saoudrizwan.claude-dev")
    };
    let cursor = storage(".config/Cursor").join("tasks/1796311362233");
    let server = storage(".vscode-server/data").join("tasks/1796311362234");
    for dir in [&cursor, &server] {
        copy_files(&task, dir);
    }
    env.run_once_home();
    let (listed, sessions) = sessions_listed(&env);
    let ids: Vec<&str> = sessions.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 2, "{listed}");
    assert!(sessions.iter().all(|s| s["harness"] == "cline"), "{listed}");
    assert!(
        ids.contains(&"1796311362233") && ids.contains(&"1796311362234"),
        "{listed}"
    );

    let history = server.join("api_conversation_history.json");
    let bytes = fs::read(&history).unwrap();
    fs::remove_file(&history).unwrap();
    env.run_once_home();
    stdout_of(&env, &["restore", "1796311362234"]);
    assert_eq!(
        fs::read(&history).unwrap(),
        bytes,
        "restored where the server keeps it"
    );
}

/// Roo Code's task folders (a fork of Cline's extension, from its source: see
/// `tests/fixtures/roo-code/SOURCE`), in either shape of its conversation, kept by VS Code and
/// by Cursor: each a session of its prompt and workspace, its tool call and result read, and
/// restored byte for byte.
#[test]
fn roo_code_tasks_are_read_in_both_of_its_formats_from_every_editor() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roo-code");
    let tasks = |editor: &str| {
        (home.join(editor)).join("User/globalStorage/rooveterinaryinc.roo-cline/tasks")
    };
    for (task, editor) in [
        ("1796400000000", ".config/Code"),
        ("1796300000000", ".config/Cursor"),
    ] {
        copy_files(&fixtures.join(task), &tasks(editor).join(task));
    }
    env.run_once_home();
    let (_, sessions) = sessions_listed(&env);
    let session = |id: &str| sessions.iter().find(|s| s["id"] == id).unwrap().clone();
    let (versioned, listed_before) = (session("1796400000000"), session("1796300000000"));
    for (s, title, project) in [
        (
            &versioned,
            "Run the scripted command, please.",
            "/tmp/roo/project",
        ),
        (&listed_before, "List the files.", "/tmp/roo/other"),
    ] {
        assert_eq!(s["harness"], "roo-code", "{s}");
        assert_eq!(
            (s["title"].as_str(), s["project"].as_str()),
            (Some(title), Some(project))
        );
        assert_eq!(s["unparsed"], 0, "every record read: {s}");
        assert_eq!(
            (s["user_messages"].clone(), s["assistant_messages"].clone()),
            (1.into(), 2.into()),
            "{s}"
        );
    }
    found(&env, "scripted-tool-output", "1796400000000");
    let (shown, parts) = shown_parts(&env, "1796400000000");
    let kind = |k: &str| part_of(&parts, k, &shown);
    assert_eq!(kind("tool_call")["name"], "execute_command", "{shown}");
    assert!(
        kind("tool_result")["text"]
            .as_str()
            .unwrap_or("")
            .contains("scripted-tool-output")
    );
    assert_eq!(kind("thinking")["text"], "The user wants the command run.");

    let history = tasks(".config/Code").join("1796400000000/api_conversation_history.json");
    let bytes = fs::read(&history).unwrap();
    fs::remove_file(&history).unwrap();
    env.run_once_home();
    stdout_of(&env, &["restore", "1796400000000"]);
    assert_eq!(
        fs::read(&history).unwrap(),
        bytes,
        "restored where VS Code keeps it"
    );
}

/// Kilo Code's VS Code extension, in its releases forked from Roo Code, keeps a task as Roo
/// Code does, in its own global storage: read as Kilo Code's.
#[test]
fn a_kilo_code_extension_task_is_read_as_roo_codes_are() {
    let env = Env::new();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/roo-code");
    let storage = env
        .dir
        .path()
        .join("home/.config/Code/User/globalStorage/kilocode.kilo-code");
    copy_files(
        &fixtures.join("1796300000000"),
        &storage.join("tasks/1796300000000"),
    );
    env.run_once_home();
    let (listed, sessions) = sessions_listed(&env);
    let [session] = &sessions[..] else {
        panic!("one session: {listed}")
    };
    assert_eq!(session["harness"], "kilo-code-vscode", "{listed}");
    assert_eq!(session["title"], "List the files.", "{listed}");
    assert_eq!(session["unparsed"], 0, "{listed}");
}

/// GitHub Copilot Chat's sessions as VS Code keeps them (from its source: see
/// `tests/fixtures/copilot-chat/SOURCE`): a JSON document in VS Code's workspace storage and a
/// log of changes in its remote server's, each a session of its workspace's folder; the log's
/// answer, captured while it streams and again once done, is one message in its final state.
#[test]
fn copilot_chat_sessions_are_read_as_documents_and_as_logs_of_changes() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/copilot-chat");
    let workspaces = |editor: &str| home.join(editor).join("User/workspaceStorage");
    let (flat, logged) = ("6f1c0b9a2d", "a93e5d7c41");
    for (editor, workspace) in [(".config/Code", flat), (".vscode-server/data", logged)] {
        copy_files(
            &fixtures.join(workspace),
            &workspaces(editor).join(workspace),
        );
    }
    let (document, log_id) = (
        "4d7c2a10-8b3e-4f61-a9d2-5e6f7a8b9c0d",
        "9e1f3b5d-7a2c-4e8f-b6d4-1c3e5a7b9d0f",
    );
    // A window without a folder keeps its sessions in the global storage: no project.
    let empty_window = home.join(".config/VSCodium/User/globalStorage/emptyWindowChatSessions");
    fs::create_dir_all(&empty_window).unwrap();
    fs::copy(
        fixtures
            .join(flat)
            .join(format!("chatSessions/{document}.json")),
        empty_window.join("0a0b0c0d-no-folder.json"),
    )
    .unwrap();
    let log = (workspaces(".vscode-server/data").join(logged))
        .join(format!("chatSessions/{log_id}.jsonl"));
    let whole = fs::read_to_string(&log).unwrap();
    // The state while the terminal call runs: the log's first 7 lines (SOURCE).
    let streaming: String = whole.split_inclusive('\n').take(7).collect();
    fs::write(&log, &streaming).unwrap();
    env.run_once_home();
    fs::write(&log, &whole).unwrap();
    env.run_once_home();

    let (listed, sessions) = sessions_listed(&env);
    let session = |id: &str| sessions.iter().find(|s| s["id"] == id).unwrap().clone();
    for (id, title, project) in [
        (
            document,
            "Connection pool leak under load",
            "/home/dev/shop",
        ),
        (
            log_id,
            "Running the scripted command",
            "/tmp/transcript-sync-agents/project",
        ),
    ] {
        let s = session(id);
        assert_eq!(s["harness"], "copilot-chat", "{listed}");
        assert_eq!(
            (s["title"].as_str(), s["project"].as_str()),
            (Some(title), Some(project)),
            "{s}"
        );
        assert_eq!(s["unparsed"], 0, "every entry read: {s}");
        assert_eq!(
            (s["user_messages"].clone(), s["assistant_messages"].clone()),
            (1.into(), 1.into()),
            "{s}"
        );
    }
    let no_folder = session("0a0b0c0d-no-folder");
    assert_eq!(no_folder["project"], serde_json::Value::Null, "{no_folder}");
    found(&env, "finally", document);
    found(&env, "scripted-tool-output", log_id);

    let shown = stdout_of(&env, &["show", log_id, "--format", "json"]);
    let messages: Vec<serde_json::Value> = (shown.lines())
        .map(|m| serde_json::from_str(m).unwrap())
        .collect();
    assert_eq!(messages.len(), 2, "the answer once, as it ended: {shown}");
    let parts = messages[1]["parts"].as_array().unwrap();
    let kinds: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["thinking", "text", "tool_call", "tool_result", "text"],
        "{shown}"
    );
    assert_eq!(parts[2]["name"], "run_in_terminal");
    assert_eq!(parts[3]["text"], "scripted-tool-output");
    assert_eq!(parts[4]["text"], "Scripted answer: done.");

    fs::remove_file(&log).unwrap();
    env.run_once_home();
    let (listed, sessions) = sessions_listed(&env);
    let deleted = sessions.iter().find(|s| s["id"] == log_id).unwrap();
    assert_eq!(deleted["on_disk"], false, "kept, marked deleted: {listed}");
    assert_eq!(deleted["assistant_messages"], 1, "{listed}");
    let restored = stdout_of(&env, &["restore", log_id]);
    assert!(
        restored.contains("open it from the agent's own history"),
        "{restored}"
    );
    assert_eq!(
        fs::read_to_string(&log).unwrap(),
        whole,
        "restored where the remote server keeps it"
    );
}

/// Windsurf encrypts its Cascade conversations: each is archived byte for byte, every settled
/// state, and restored as it last was; the plan Cascade wrote for it is read and found.
#[test]
fn a_windsurf_conversation_is_kept_byte_for_byte_and_its_plan_is_read() {
    let env = Env::new();
    let windsurf = env.dir.path().join("home/.codeium/windsurf");
    let id = "3c2b1a09-8f7e-4d6c-b5a4-938271605f4e";
    let conversation = windsurf.join(format!("cascade/{id}.pb"));
    // Bytes as high in entropy as an encrypted file's, every value of a byte among them.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut bytes: Vec<u8> = (0..4096)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    write(&conversation, &bytes);
    let plan = "# Move the session cache to Redis\n\n1. Read the cache module.\n";
    write(
        &windsurf.join(format!("brain/{id}/plan.md")),
        plan.as_bytes(),
    );
    env.run_once_home();
    bytes.extend_from_slice(b"\x00\x01\xfe\xff later state");
    write(&conversation, &bytes);
    env.run_once_home();

    let (listed, sessions) = sessions_listed(&env);
    let [session] = &sessions[..] else {
        panic!("one conversation: {listed}")
    };
    assert_eq!(session["harness"], "windsurf", "{listed}");
    assert_eq!(
        session["title"], "Move the session cache to Redis",
        "{listed}"
    );
    assert_eq!(session["unparsed"], 0, "{listed}");
    found(&env, "Redis", id);

    fs::remove_file(&conversation).unwrap();
    env.run_once_home();
    stdout_of(&env, &["restore", id]);
    assert_eq!(fs::read(&conversation).unwrap(), bytes, "as it last was");
}

/// Zed's agent panel keeps its threads in one SQLite database under its data directory, a
/// row per thread rewritten whole: the agent's thread (its JSON zstd-compressed) and the
/// first agent's (plain JSON, an older shape) are each listed with their title, project,
/// time, model and messages, found by what was said, and shown; a thread Zed deletes keeps
/// its records and is marked gone; `restore` never writes into Zed's database.
#[test]
fn zed_threads_are_read_in_both_of_its_shapes_and_kept_once_deleted() {
    const AGENT_THREAD: &str = "5d9e2c4a-1f3b-4e8a-9c67-0b2d4f6a8e13";
    const FIRST_AGENT_THREAD: &str = "c41b7e92-6d3a-4f05-8e2c-9a7b1d5f3e60";
    let env = Env::new();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents/zed/threads/threads.db");
    let db = (env.dir.path()).join("home/.local/share/zed/threads/threads.db");
    fs::create_dir_all(db.parent().unwrap()).unwrap();
    fs::copy(&fixture, &db).unwrap();
    env.run_once_home();
    let (listed, sessions) = sessions_listed(&env);
    let session = |id: &str| {
        let found = sessions.iter().find(|s| s["id"] == id);
        found
            .unwrap_or_else(|| panic!("{id} not listed: {listed}"))
            .clone()
    };
    for (id, title, project, at) in [
        (
            AGENT_THREAD,
            "Scripted title",
            "/tmp/transcript-sync-agents/project",
            "2026-09-23T08:00:02Z",
        ),
        (
            FIRST_AGENT_THREAD,
            "List the files",
            "/tmp/transcript-sync-agents/other",
            "2025-05-01T10:00:03Z",
        ),
    ] {
        let s = session(id);
        assert_eq!(s["harness"], "zed", "{s}");
        assert_eq!(
            (s["title"].as_str(), s["project"].as_str()),
            (Some(title), Some(project)),
            "{s}"
        );
        // Zed keeps no time per message: the thread's last change.
        assert_eq!(
            (s["started"].as_str(), s["last_activity"].as_str()),
            (Some(at), Some(at)),
            "{s}"
        );
        assert_eq!(
            (s["user_messages"].clone(), s["assistant_messages"].clone()),
            (1.into(), 2.into()),
            "{s}"
        );
        assert_eq!(s["unparsed"], 0, "every record read: {s}");
        assert_eq!(s["models"], serde_json::json!(["scripted-model"]), "{s}");
        assert_eq!(s["on_disk"], true, "{s}");
    }
    for query in [
        "\"Run the scripted command, please.\"",
        "\"Scripted answer: done.\"",
        "scripted-tool-output",
    ] {
        found(&env, query, AGENT_THREAD);
    }
    found(&env, "README.md", FIRST_AGENT_THREAD);
    let (shown, parts) = shown_parts(&env, AGENT_THREAD);
    let kind = |k: &str| part_of(&parts, k, &shown);
    assert_eq!(kind("tool_call")["name"], "terminal", "{shown}");
    let result = kind("tool_result")["text"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    assert!(result.contains("scripted-tool-output"), "{shown}");
    let thinking = kind("thinking");
    assert_eq!(thinking["text"], "The user wants the scripted command run.");

    // Deleted in Zed: its row is gone, its records stay.
    let zed = rusqlite::Connection::open(&db).unwrap();
    zed.execute("DELETE FROM threads WHERE id = ?1", [AGENT_THREAD])
        .unwrap();
    drop(zed);
    env.run_once_home();
    let (listed, after) = sessions_listed(&env);
    let on_disk = |id: &str| {
        let s = after.iter().find(|s| s["id"] == id);
        let s = s.unwrap_or_else(|| panic!("{id} not listed: {listed}"));
        assert_eq!(s["assistant_messages"], 2, "{s}");
        s["on_disk"].clone()
    };
    assert_eq!(on_disk(AGENT_THREAD), false, "{listed}");
    assert_eq!(on_disk(FIRST_AGENT_THREAD), true, "{listed}");
    found(&env, "\"Scripted answer: done.\"", AGENT_THREAD);

    // Its database is Zed's: never written into; the thread is given as JSON.
    let before = fs::read(&db).unwrap();
    for id in [FIRST_AGENT_THREAD, AGENT_THREAD] {
        let out = crate::util::cli(&env, &["restore", id]);
        let said = stderr(&out);
        assert!(!out.status.success(), "{said}");
        assert!(
            said.contains("never writes into") && said.contains(&format!("show {id} --format raw")),
            "{said}"
        );
    }
    assert_eq!(fs::read(&db).unwrap(), before, "Zed's database was written");
    let raw = stdout_of(&env, &["show", FIRST_AGENT_THREAD, "--format", "raw"]);
    let doc: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(doc["thread"]["version"], "0.2.0", "{raw}");
    assert_eq!(doc["messages"].as_array().unwrap().len(), 3, "{raw}");
}

/// The Cursor editor's own agent keeps every conversation in the editor's global state
/// database (built from its public readers' sources: see
/// `tests/fixtures/agents/cursor-editor/SOURCE`): a conversation is listed with its title,
/// project, times, messages and model, found by what was said, shown, kept once deleted from
/// Cursor, and never written back into the database.
#[test]
fn cursor_editor_conversations_are_read_from_its_state_database_and_kept_once_deleted() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    copy_agent_fixture("cursor-editor", &home);
    let db = home.join(".config/Cursor/User/globalStorage/state.vscdb");
    env.run_once_home();
    let (listed, sessions) = sessions_listed(&env);
    let [s] = &sessions[..] else {
        panic!("one conversation: {listed}")
    };
    let id = "5b0e7c8a-2f41-4d6e-9a3b-1c7d9e2f4a60";
    assert_eq!(
        (s["harness"].as_str(), s["id"].as_str()),
        (Some("cursor-editor"), Some(id))
    );
    assert_eq!(s["title"], "Scripted title", "{s}");
    assert_eq!(s["project"], "/tmp/transcript-sync-agents/project", "{s}");
    assert_eq!(
        (s["started"].as_str(), s["last_activity"].as_str()),
        (Some("2026-09-23T08:00:00Z"), Some("2026-09-23T08:00:06Z"))
    );
    assert_eq!(s["unparsed"], 0, "every record read: {s}");
    assert_eq!(
        (s["user_messages"].clone(), s["assistant_messages"].clone()),
        (1.into(), 2.into()),
        "the prompt, the plan and the answer: {s}"
    );
    assert!(listed.contains("claude-4.5-sonnet"), "{listed}");
    for said in [
        "\"Run the scripted command, please.\"",
        "\"Scripted answer: done.\"",
        "scripted-tool-output",
    ] {
        found(&env, said, id);
    }
    let (shown, parts) = shown_parts(&env, id);
    let kind = |k: &str| part_of(&parts, k, &shown);
    assert_eq!(kind("tool_call")["name"], "run_terminal_cmd", "{shown}");
    assert_eq!(
        kind("tool_result")["text"],
        "scripted-tool-output\n",
        "{shown}"
    );
    assert_eq!(
        kind("thinking")["text"],
        "The user wants the scripted command run."
    );

    // Deleted from Cursor (its rows gone): kept, and marked gone.
    let cursor = rusqlite::Connection::open(&db).unwrap();
    let gone = format!(
        "DELETE FROM cursorDiskKV WHERE key LIKE 'composerData:{id}' OR key LIKE 'bubbleId:{id}:%'"
    );
    assert_eq!(cursor.execute(&gone, []).unwrap(), 6);
    drop(cursor);
    env.run_once_home();
    let (listed, sessions) = sessions_listed(&env);
    let [s] = &sessions[..] else {
        panic!("the conversation kept: {listed}")
    };
    assert_eq!(
        (s["id"].as_str(), s["on_disk"].clone()),
        (Some(id), false.into()),
        "{s}"
    );
    let shown = stdout_of(&env, &["show", id, "--no-pager"]);
    assert!(shown.contains("Scripted answer: done."), "{shown}");

    // Never written back into Cursor's database: the conversation is given as JSON.
    let before = fs::read(&db).unwrap();
    let out = crate::util::cli(&env, &["restore", id]);
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(
        said.contains("never writes into") && said.contains(&format!("show {id} --format raw")),
        "{said}"
    );
    assert_eq!(
        fs::read(&db).unwrap(),
        before,
        "the database is left as it was"
    );
    let raw = stdout_of(&env, &["show", id, "--format", "raw"]);
    let doc: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(doc["bubbles"].as_array().unwrap().len(), 5, "{raw}");
}

/// `sessions --json`'s session `id`, which must be listed.
fn listed_session(listed: &str, sessions: &[serde_json::Value], id: &str) -> serde_json::Value {
    let found = sessions.iter().find(|s| s["id"] == id);
    (found.unwrap_or_else(|| panic!("{id} not listed: {listed}"))).clone()
}

/// Goose keeps its sessions in one SQLite database in its data directory (built from its
/// source: `scripts/agents/goose-fixture`): each is listed with its title, project, times,
/// messages and model, found by what was said and shown; a session Goose deletes keeps its
/// records and is marked gone; `restore` never writes into Goose's database.
#[test]
fn goose_sessions_are_read_from_its_database_and_kept_once_deleted() {
    const SESSION: &str = "20260923_1";
    const NAMED: &str = "20260923_2";
    let env = Env::new();
    let home = env.dir.path().join("home");
    copy_agent_fixture("goose", &home);
    let db = home.join(".local/share/goose/sessions/sessions.db");
    env.run_once_home();
    let (listed, sessions) = sessions_listed(&env);
    for (id, title, project, times, assistant) in [
        (
            SESSION,
            "Scripted title",
            "/tmp/transcript-sync-agents/project",
            ["2026-09-23T08:00:00Z", "2026-09-23T08:00:02Z"],
            2,
        ),
        (
            NAMED,
            "Readme check",
            "/tmp/transcript-sync-agents/other",
            ["2026-09-23T09:00:00Z", "2026-09-23T09:00:03Z"],
            1,
        ),
    ] {
        let s = listed_session(&listed, &sessions, id);
        assert_eq!(s["harness"], "goose", "{s}");
        assert_eq!(
            (s["title"].as_str(), s["project"].as_str()),
            (Some(title), Some(project))
        );
        let at = [&s["started"], &s["last_activity"]].map(|t| t.as_str().unwrap_or(""));
        assert_eq!(at, times, "{s}");
        assert_eq!(
            (s["user_messages"].clone(), s["assistant_messages"].clone()),
            (1.into(), assistant.into()),
            "the prompt, and the plan and the answer: {s}"
        );
        assert_eq!(s["unparsed"], 0, "every record read: {s}");
        assert_eq!(s["models"], serde_json::json!(["scripted-model"]), "{s}");
        assert_eq!(s["on_disk"], true, "{s}");
    }
    for query in [
        "\"Run the scripted command, please.\"",
        "\"Scripted answer: done.\"",
        "scripted-tool-output",
    ] {
        found(&env, query, SESSION);
    }
    found(&env, "README.md", NAMED);
    let (shown, parts) = shown_parts(&env, SESSION);
    let kind = |k: &str| part_of(&parts, k, &shown);
    assert_eq!(kind("tool_call")["name"], "developer__shell", "{shown}");
    assert_eq!(kind("tool_result")["text"], "scripted-tool-output\n");
    assert_eq!(
        kind("thinking")["text"],
        "The user wants the scripted command run."
    );

    // Deleted in Goose (its messages, then its row, as `delete_session` does): kept, marked.
    // The session deleted is the one written last: the mark is then past the database's
    // latest write, and every session is read again (nothing archived twice).
    let goose = rusqlite::Connection::open(&db).unwrap();
    let gone = format!(
        "DELETE FROM messages WHERE session_id = '{NAMED}';
         DELETE FROM usage_ledger WHERE session_id = '{NAMED}';
         DELETE FROM sessions WHERE id = '{NAMED}';"
    );
    goose.execute_batch(&gone).unwrap();
    drop(goose);
    env.run_once_home();
    let (listed, after) = sessions_listed(&env);
    let gone = listed_session(&listed, &after, NAMED);
    assert_eq!(
        (gone["on_disk"].clone(), gone["assistant_messages"].clone()),
        (false.into(), 1.into()),
        "{listed}"
    );
    let kept = listed_session(&listed, &after, SESSION);
    assert_eq!(kept["on_disk"], true, "{listed}");
    found(&env, "README.md", NAMED);

    // Its database is Goose's: never written into; the session is given as JSON.
    let before = fs::read(&db).unwrap();
    for id in [SESSION, NAMED] {
        let out = crate::util::cli(&env, &["restore", id]);
        let said = stderr(&out);
        assert!(!out.status.success(), "{said}");
        assert!(
            said.contains("never writes into") && said.contains(&format!("show {id} --format raw")),
            "{said}"
        );
    }
    assert_eq!(
        fs::read(&db).unwrap(),
        before,
        "Goose's database was written"
    );
    let raw = stdout_of(&env, &["show", SESSION, "--format", "raw"]);
    let doc: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(doc["session"]["name"], "Scripted title", "{raw}");
    assert_eq!(doc["messages"].as_array().unwrap().len(), 4, "{raw}");
}

/// Goose's sessions before its database: a JSONL file per session, its metadata first,
/// rewritten whole at each save (built from its source: `scripts/agents/goose-fixture`). It is
/// listed, found and shown as the database's are, and `restore` writes it back byte for byte
/// and names the command that resumes it.
#[test]
fn a_goose_jsonl_session_is_read_as_a_document_and_restored_byte_for_byte() {
    const SESSION: &str = "20250915_101500";
    let env = Env::new();
    let home = env.dir.path().join("home");
    copy_agent_fixture("goose-jsonl", &home);
    let file = home.join(format!(".local/share/goose/sessions/{SESSION}.jsonl"));
    let bytes = fs::read(&file).unwrap();
    env.run_once_home();
    let (listed, sessions) = sessions_listed(&env);
    let [s] = &sessions[..] else {
        panic!("one session: {listed}")
    };
    assert_eq!(
        (s["harness"].as_str(), s["id"].as_str()),
        (Some("goose"), Some(SESSION))
    );
    assert_eq!(s["title"], "Scripted title", "{s}");
    assert_eq!(s["project"], "/tmp/transcript-sync-agents/project", "{s}");
    let at = [&s["started"], &s["last_activity"]].map(|t| t.as_str().unwrap_or(""));
    assert_eq!(at, ["2025-09-15T10:15:00Z", "2025-09-15T10:15:02Z"], "{s}");
    assert_eq!(
        (s["user_messages"].clone(), s["assistant_messages"].clone()),
        (1.into(), 2.into()),
        "{s}"
    );
    assert_eq!(s["unparsed"], 0, "every line read: {s}");
    for query in [
        "\"Run the scripted command, please.\"",
        "\"Scripted answer: done.\"",
        "scripted-tool-output",
    ] {
        let hits = stdout_of(&env, &["search", query, "--json"]);
        assert!(hits.contains(SESSION), "{query}: {hits}");
    }
    let shown = stdout_of(&env, &["show", SESSION, "--no-pager"]);
    assert!(shown.contains("developer__shell"), "{shown}");

    fs::remove_file(&file).unwrap();
    env.run_once_home();
    let said = stdout_of(&env, &["restore", SESSION]);
    assert_eq!(fs::read(&file).unwrap(), bytes, "as Goose wrote it");
    let resume = format!("goose session --resume --name {SESSION}");
    assert!(said.contains(&resume), "{said}");
}

/// A session archived from both its agent's files and its database (Goose imports its JSONL
/// into `sessions.db`, keeping the session's id): `restore` writes its file back and leaves
/// the database alone, saying so, instead of planning a file inside the database.
#[test]
fn a_session_in_a_database_and_a_file_is_restored_from_its_file_alone() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    copy_agent_fixture("goose", &home);
    let sessions = home.join(".local/share/goose/sessions");
    let jsonl = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "tests/fixtures/agents/goose-jsonl/.local/share/goose/sessions/20250915_101500.jsonl",
    );
    let file = sessions.join("20260923_1.jsonl");
    fs::copy(&jsonl, &file).unwrap();
    let database = sessions.join("sessions.db");
    env.run_once_home();
    let bytes = fs::read(&file).unwrap();
    fs::remove_file(&file).unwrap();
    env.run_once_home();
    let before = fs::read(&database).unwrap();
    let out = cli(&env, &["restore", "20260923_1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(fs::read(&file).unwrap(), bytes, "the file back");
    assert_eq!(
        fs::read(&database).unwrap(),
        before,
        "the database untouched"
    );
    assert!(
        stderr(&out).contains("is in goose's database"),
        "{}",
        stderr(&out)
    );
}
