//! The registry's checks: sorted, one module per watcher file and one watcher file per
//! module, every definition read; and what the agents' definitions give (roots, sessions).

use super::*;
use crate::capture::harness::Reach;

#[test]
fn the_registry_is_sorted_and_each_agent_is_named_as_its_watcher() {
    let names: Vec<&str> = names().collect();
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted, "keep AGENTS sorted, each name once");
    for agent in AGENTS {
        let watcher = agent.watcher().unwrap();
        assert_eq!(watcher.name, agent.name);
        globset::Glob::new(watcher.glob.as_deref().unwrap_or("")).unwrap();
        assert!(std::ptr::eq(get(agent.name).unwrap(), *agent));
    }
    assert!(get("no-such-agent").is_none());
}

#[test]
fn every_watcher_file_has_its_agent_and_every_agent_its_file() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("watchers");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, names().collect::<Vec<_>>());
    // Each module is the agent's file: `watchers/NAME.toml` and `src/agents/NAME.rs`.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/agents");
    for name in &on_disk {
        let module = src.join(format!("{}.rs", name.replace('-', "_")));
        assert!(
            module.is_file(),
            "{name} has no module {}",
            module.display()
        );
    }
}

#[test]
fn every_reader_a_watcher_names_is_one_its_agent_defines() {
    // A root resolves the names of its watcher's readers; one a module does not define is
    // an error naming the watcher.
    for agent in AGENTS {
        agent.roots_at(&[PathBuf::from("/r")], None).unwrap();
    }
    let crush = get("crush").unwrap();
    let wrong = Agent {
        formats: get("amp").unwrap().formats,
        ..*crush
    };
    let err = wrong.roots_at(&[PathBuf::from("/r")], None).unwrap_err();
    assert!(
        err.to_string()
            .contains("watchers/crush.toml names database reader \"crush\""),
        "{err}"
    );
}

#[test]
fn builtin_roots_honour_the_harness_home_variables() {
    let env = |k: &str| match k {
        "HOME" => Some("/home/u".to_owned()),
        "CODEX_HOME" => Some("/data/codex".to_owned()),
        "GEMINI_CLI_HOME" => Some("/g".to_owned()),
        "COPILOT_HOME" => Some("/c".to_owned()),
        "XDG_DATA_HOME" => Some("/x".to_owned()),
        "PI_CODING_AGENT_DIR" => Some("/p/agent".to_owned()),
        "QWEN_HOME" => Some("/q".to_owned()),
        "HERMES_HOME" => Some("/h/hermes".to_owned()),
        "CONTINUE_GLOBAL_DIR" => Some("/k/continue".to_owned()),
        "KIMI_SHARE_DIR" => Some("/k/kimi".to_owned()),
        "LLM_USER_PATH" => Some("/l/llm".to_owned()),
        "XDG_CONFIG_HOME" => Some("/k/config".to_owned()),
        "MSWEA_GLOBAL_CONFIG_DIR" => Some("/m/mini".to_owned()),
        "OPENHANDS_PERSISTENCE_DIR" => Some("/o/openhands".to_owned()),
        _ => None,
    };
    let mut roots: Vec<_> = builtin_roots(&env)
        .unwrap()
        .into_iter()
        .map(|r| (r.harness, r.path))
        .collect();
    // Cline's, Kilo Code's and Roo Code's extensions: their global storage in every editor of
    // the VS Code family.
    let editors = global_storage(Os::current(), &env, "saoudrizwan.claude-dev").unwrap();
    let mut expected: Vec<(String, PathBuf)> = vec![
        ("amp".into(), PathBuf::from("/x/amp/threads")),
        (
            "claude-code".into(),
            PathBuf::from("/home/u/.claude/projects"),
        ),
        ("cline".into(), PathBuf::from("/home/u/.cline/data")),
        ("code-puppy".into(), PathBuf::from("/home/u/.code_puppy")),
        ("codex".into(), PathBuf::from("/data/codex/sessions")),
        (
            "codex".into(),
            PathBuf::from("/data/codex/archived_sessions"),
        ),
        ("continue".into(), PathBuf::from("/k/continue/sessions")),
        ("copilot-cli".into(), PathBuf::from("/c/session-state")),
        ("cursor".into(), PathBuf::from("/home/u/.cursor/projects")),
        (
            "cursor-editor".into(),
            (user_folder(Os::current(), &env, "Cursor").unwrap()).unwrap(),
        ),
        ("droid".into(), PathBuf::from("/home/u/.factory/sessions")),
        ("gemini-cli".into(), PathBuf::from("/g/.gemini/tmp")),
        ("goose".into(), PathBuf::from("/x/goose/sessions")),
        ("gptme".into(), PathBuf::from("/x/gptme/logs")),
        ("hermes".into(), PathBuf::from("/h/hermes")),
        ("kilo-code".into(), PathBuf::from("/x/kilo")),
        ("kimi-cli".into(), PathBuf::from("/k/kimi/sessions")),
        ("llm".into(), PathBuf::from("/l/llm")),
        ("mini-swe-agent".into(), PathBuf::from("/m/mini")),
        (
            "mistral-vibe".into(),
            PathBuf::from("/home/u/.vibe/logs/session"),
        ),
        ("nanocoder".into(), PathBuf::from("/x/nanocoder/sessions")),
        (
            "open-interpreter".into(),
            PathBuf::from("/k/config/open-interpreter/conversations"),
        ),
        ("openclaw".into(), PathBuf::from("/home/u/.openclaw/agents")),
        ("opencode".into(), PathBuf::from("/x/opencode")),
        (
            "openhands".into(),
            PathBuf::from("/o/openhands/conversations"),
        ),
        ("pi".into(), PathBuf::from("/p/agent/sessions")),
        ("qwen-code".into(), PathBuf::from("/q/projects")),
        (
            "windsurf".into(),
            PathBuf::from("/home/u/.codeium/windsurf"),
        ),
    ];
    expected.extend(editors.into_iter().map(|d| ("cline".to_owned(), d)));
    for (agent, extension) in [
        ("roo-code", "rooveterinaryinc.roo-cline"),
        ("kilo-code-vscode", "kilocode.kilo-code"),
    ] {
        let dirs = global_storage(Os::current(), &env, extension).unwrap();
        expected.extend(dirs.into_iter().map(|d| (agent.to_owned(), d)));
    }
    // GitHub Copilot Chat's: every editor's user folder.
    let users = user_folders(Os::current(), &env).unwrap();
    expected.extend(users.into_iter().map(|d| ("copilot-chat".to_owned(), d)));
    expected.push(("zed".into(), PathBuf::from("/x/zed")));
    roots.sort();
    expected.sort();
    assert_eq!(roots, expected);
}

#[test]
fn a_watcher_naming_an_editor_the_table_does_not_hold_is_an_error_naming_it() {
    let mut watcher = get("cursor-editor").unwrap().watcher().unwrap();
    let env = |k: &str| (k == "HOME").then(|| "/h".to_owned());
    let folder = editor_folder(&watcher, &env).unwrap().unwrap();
    assert!(folder.ends_with("Cursor/User"), "{}", folder.display());
    watcher.editor = Some("Notepad".into());
    let err = editor_folder(&watcher, &env).unwrap_err().to_string();
    assert!(
        err.contains("watchers/cursor-editor.toml names editor \"Notepad\""),
        "{err}"
    );
}

#[test]
fn the_gemini_and_cursor_globs_take_chats_and_transcripts_flat_or_nested() {
    let roots = builtin_roots(&|k| (k == "HOME").then(|| "/h".to_owned())).unwrap();
    let glob = |harness: &str| &roots.iter().find(|r| r.harness == harness).unwrap().glob;
    let gemini = glob("gemini-cli");
    assert!(gemini.is_match("3f2a/chats/session-2026-11-30T10-00-ab12cd34.jsonl"));
    assert!(gemini.is_match("3f2a/chats/ab12cd34-parent/sub-1.jsonl"));
    assert!(!gemini.is_match("3f2a/chats/session-2026-11-30T10-00-ab12cd34.json"));
    assert!(!gemini.is_match("3f2a/logs.jsonl"));
    let cursor = glob("cursor");
    assert!(cursor.is_match("home-u-app/agent-transcripts/5e1c.jsonl"));
    assert!(cursor.is_match("home-u-app/agent-transcripts/5e1c/5e1c.jsonl"));
    assert!(!cursor.is_match("home-u-app/worker.jsonl"));
}

#[test]
fn a_root_reaches_the_directories_its_globs_can_match_under() {
    let reach = |globs: &[&str], dir: &str| {
        Reach::of_globs(globs.iter().copied())
            .unwrap()
            .holds(Path::new(dir))
    };
    let aider = [".aider.chat.history.md", "*/.aider.chat.history.md"];
    assert!(reach(&aider, ""));
    assert!(reach(&aider, "app"));
    assert!(!reach(&aider, "app/node_modules"));
    let cline = ["sessions/*/*.messages.json", "tasks/*/{a,b}.json"];
    assert!(reach(&cline, "tasks/17"));
    assert!(!reach(&cline, "cache"));
    assert!(!reach(&cline, "tasks/17/deeper"));
    assert!(reach(&["logs/**"], "logs/a/b/c"));
    assert!(!reach(&["logs/**"], "other"));
    // A brace holding a `/` is not split: every directory.
    assert!(reach(&["{a,b/c}.json"], "x/y"));
    let roots = builtin_roots(&|k| (k == "HOME").then(|| "/h".to_owned())).unwrap();
    let claude = roots.iter().find(|r| r.harness == "claude-code").unwrap();
    assert!(claude.reach.holds(Path::new("-h-proj/abc/subagents")));
    // A built-in glob's `*` stays within a component, as its reach does; a glob a person
    // gave keeps `*` crossing `/`, and reaches everywhere.
    let pi = roots.iter().find(|r| r.harness == "pi").unwrap();
    assert!(pi.matches(Path::new("/h/.pi/agent/sessions/--w--/1_a.jsonl")));
    assert!(!pi.matches(Path::new("/h/.pi/agent/sessions/--w--/x/1_a.jsonl")));
    let given = &watch_roots(&[PathBuf::from("/w")], "*.jsonl").unwrap()[0];
    assert!(given.matches(Path::new("/w/a/b/c.jsonl")));
    assert!(given.reach.holds(Path::new("a/b")));
}

#[test]
fn each_project_crush_lists_is_a_root_and_an_unreadable_list_lists_none() {
    let home = tempfile::tempdir().unwrap();
    let listed = home.path().join(".local/share/crush/projects.json");
    std::fs::create_dir_all(listed.parent().unwrap()).unwrap();
    let home_of = home.path().to_string_lossy().into_owned();
    let env = move |k: &str| (k == "HOME").then(|| home_of.clone());
    let crush = |env: &dyn Fn(&str) -> Option<String>| -> Vec<PathBuf> {
        (builtin_roots(env).unwrap().into_iter())
            .filter(|r| r.harness == "crush")
            .map(|r| r.path)
            .collect()
    };
    assert!(crush(&env).is_empty(), "no projects.json, no roots");
    let projects = r#"{"projects": [
            {"path": "/src/app", "data_dir": "/src/app/.crush"},
            {"path": "rel", "data_dir": "rel/.crush"},
            {"path": "/src/lib"}]}"#;
    std::fs::write(&listed, projects).unwrap();
    assert_eq!(crush(&env), [PathBuf::from("/src/app/.crush")]);
    let roots = builtin_roots(&env).unwrap();
    let app = roots.iter().find(|r| r.harness == "crush").unwrap();
    assert!(app.is_database(Path::new("/src/app/.crush/crush.db")));
    std::fs::write(&listed, "{not json").unwrap();
    assert!(crush(&env).is_empty());
}

#[test]
fn the_openclaw_root_takes_its_sessions_not_the_traces_beside_them() {
    let roots = builtin_roots(&|k| (k == "HOME").then(|| "/h".to_owned())).unwrap();
    let openclaw = roots.iter().find(|r| r.harness == "openclaw").unwrap();
    let sessions = Path::new("/h/.openclaw/agents/main/sessions");
    let id = "9b314da8-d6d4-4df6-a37f-9665503e60fd";
    for name in [format!("{id}.jsonl"), format!("{id}-topic-42.jsonl")] {
        assert!(openclaw.matches(&sessions.join(&name)), "{name}");
    }
    // What 2026.7.1 keeps beside them: a trace of each run, ACP's stream, its index.
    for name in [
        format!("{id}.trajectory.jsonl"),
        format!("{id}.acp-stream.jsonl"),
        "sessions.json".to_owned(),
    ] {
        assert!(!openclaw.matches(&sessions.join(&name)), "{name}");
    }
    let database = Path::new("/h/.openclaw/agents/main/agent/openclaw-agent.sqlite");
    assert!(openclaw.is_database(database));
}

#[test]
fn the_goose_root_takes_its_database_and_session_files_not_their_temporaries() {
    let env = |k: &str| (k == "HOME").then(|| "/h".to_owned());
    let roots = builtin_roots(&env).unwrap();
    let goose = roots.iter().find(|r| r.harness == "goose").unwrap();
    let sessions = Path::new("/h/.local/share/goose/sessions");
    assert!(goose.is_database(&sessions.join("sessions.db")));
    let snapshot = |name: &str| goose.snapshot.iter().any(|s| s.glob.is_match(name));
    assert!(snapshot("20250915_101500.jsonl") && snapshot("project-x.jsonl"));
    // What a save writes before renaming it over the session, and the database's backups.
    assert!(!snapshot("20250915_101500.tmp"));
    assert!(!goose.is_database(&sessions.join("backups/backup_20251020_120000.db")));
}

#[test]
fn a_source_is_in_a_database_by_the_globs_of_its_agent() {
    let database = Path::new("/h/.openclaw/agents/main/agent/openclaw-agent.sqlite");
    assert!(in_database("openclaw", database));
    assert!(in_database("openclaw", &database.join("faf40c7b")));
    let jsonl = Path::new("/h/.openclaw/agents/main/sessions/faf40c7b.jsonl");
    assert!(!in_database("openclaw", jsonl));
    assert!(!in_database("pi", &database.join("faf40c7b")));
    let storage = Path::new("/h/.local/share/opencode/storage/migration");
    assert!(in_database("opencode", &storage.join("ses_1")));
    assert!(in_database(
        "hermes",
        Path::new("/h/.hermes/profiles/p/state.db/s1")
    ));
}

#[test]
fn the_claude_glob_includes_subagent_transcripts() {
    let roots = builtin_roots(&|k| (k == "HOME").then(|| "/h".to_owned())).unwrap();
    let claude = &roots
        .iter()
        .find(|r| r.harness == "claude-code")
        .unwrap()
        .glob;
    assert!(claude.is_match("-home-u-proj/abc.jsonl"));
    assert!(claude.is_match("-home-u-proj/abc/subagents/agent-1.jsonl"));
    assert!(!claude.is_match("-home-u-proj/abc.json"));
}

fn identified(harness: &str, path: &str, first: &[u8]) -> Identified {
    identify(harness, Path::new(path), &message::parse(harness, first))
}

#[test]
fn sessions_are_identified_by_path_and_first_record() {
    let sub = identified(
        "claude-code",
        "/h/.claude/projects/-h-app/5f1e/subagents/agent-a1.jsonl",
        b"{}",
    );
    assert_eq!(
        (sub.session.as_str(), sub.parent.as_deref()),
        ("agent-a1", Some("5f1e"))
    );
    let old = identified(
        "claude-code",
        "/h/.claude/projects/-h-app/agent-b2.jsonl",
        br#"{"type":"user","sessionId":"5f1e","message":{"content":"x"}}"#,
    );
    assert_eq!(old.parent.as_deref(), Some("5f1e"));
    // A workflow's journal, and any other file in a session's folder, is the session's,
    // named by its path there (every workflow's journal is `journal.jsonl`).
    let folder = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
    for inside in ["subagents/workflows/wf-1/journal", "tool-results/toolu_01"] {
        let file = identified(
            "claude-code",
            &format!("/h/.claude/projects/-h-app/{folder}/{inside}.jsonl"),
            b"{}",
        );
        assert_eq!(
            (file.session, file.parent.as_deref()),
            (format!("{folder}/{inside}"), Some(folder))
        );
    }
    let codex = identified(
        "codex",
        "/h/.codex/sessions/2026/11/30/rollout-2026-11-30T10-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl",
        br#"{"type":"event_msg","payload":{}}"#,
    );
    assert_eq!(codex.session, "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
    let gemini = identified(
        "gemini-cli",
        "/h/.gemini/tmp/app/chats/g1/sub.jsonl",
        br#"{"sessionId":"g2","projectHash":"x"}"#,
    );
    assert_eq!(
        gemini,
        Identified {
            session: "g2".into(),
            parent: Some("g1".into()),
            project: Some("app".into())
        }
    );
    let cursor = identified(
        "cursor",
        "/h/.cursor/projects/h-app/agent-transcripts/9a/9a.jsonl",
        b"{}",
    );
    assert_eq!(
        (cursor.session.as_str(), cursor.project.as_deref()),
        ("9a", Some("h-app"))
    );
}

/// The README's table of agents, as (first cell, where, resume) of each row.
fn readme_rows() -> Vec<(String, String, String)> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"));
    let readme = readme.unwrap();
    let table = readme
        .split("\n| agent |")
        .nth(1)
        .expect("the README has its table of agents");
    let rows = table.lines().skip(2).take_while(|l| l.starts_with("| "));
    rows.map(|row| {
        let cells: Vec<&str> = row.split(" | ").collect();
        let cell = |i: usize| cells[i].trim_matches(|c| c == '|' || c == ' ').to_owned();
        (cell(0), cell(1), cell(4))
    })
    .collect()
}

// The README's table is what a person reads to know whether their agent is kept and how to
// resume a session: it must say what the registry does, agent by agent.
#[test]
fn the_readme_table_says_where_each_agent_is_read_and_how_it_resumes() {
    let rows = readme_rows();
    let titles: Vec<(String, &Agent)> = (AGENTS.iter()).map(|a| (title(a), *a)).collect();
    let agent_of = |row: &str| {
        let named = titles
            .iter()
            .filter(|(title, _)| row.starts_with(title.as_str()));
        named.max_by_key(|(title, _)| title.len()).map(|(_, a)| *a)
    };
    for (title, _, _) in &rows {
        assert!(
            agent_of(title).is_some(),
            "README row {title:?} names no agent"
        );
    }
    for agent in AGENTS.iter().filter(|a| a.name != GENERIC) {
        let mine: Vec<_> = (rows.iter())
            .filter(|(title, _, _)| agent_of(title).is_some_and(|a| a.name == agent.name))
            .collect();
        assert!(
            !mine.is_empty(),
            "the README's table has no row for {}",
            agent.name
        );
        let watcher = agent.watcher().unwrap();
        let home = watcher.home_default.clone().unwrap_or_default();
        let said = |text: &str| mine.iter().any(|(_, where_, _)| where_.contains(text));
        for root in &watcher.roots {
            let at = format!("{home}/{root}");
            assert!(
                said(&at),
                "the README does not say {} is read at {at}",
                agent.name
            );
        }
        if let Some(extension) = &watcher.extension {
            let said_it = said(&format!("globalStorage/{extension}/"));
            assert!(
                said_it,
                "the README does not say where {}'s extension keeps it",
                agent.name
            );
        }
        for root in &watcher.editor_roots {
            assert!(
                said(&format!("User/{root}")),
                "the README does not say where in the editors {} is read",
                agent.name
            );
        }
        if let Some(editor) = &watcher.editor {
            let said_it = said(&format!("{editor}/User/"));
            assert!(
                said_it,
                "the README does not say where {} keeps its state",
                agent.name
            );
        }
        if let Some(var) = &watcher.home_env {
            assert!(
                said(&format!("${var}")),
                "the README does not name {}'s ${var}",
                agent.name
            );
        }
        for (title, where_, resume) in &mine {
            assert!(
                resumes_as_said(agent, resume, &first_path(where_)),
                "README row {title:?}: {resume:?}"
            );
        }
    }
}

/// What people call an agent: the words its watcher's description starts with that are a
/// name (capitalised, or the agent's own: "gptme").
fn title(agent: &Agent) -> String {
    let description = agent.watcher().unwrap().description;
    let words = description.split(' ');
    let named = words.take_while(|w| w.starts_with(char::is_uppercase) || *w == agent.name);
    named.collect::<Vec<_>>().join(" ")
}

/// The first path a README cell names (`~/…` in backquotes), its `<…>` parts filled in: a
/// file of the store the row is about.
fn first_path(cell: &str) -> Vec<PathBuf> {
    let Some(path) = cell
        .split('`')
        .skip(1)
        .step_by(2)
        .find(|p| p.starts_with('~'))
    else {
        return Vec::new();
    };
    let mut filled = String::new();
    for (i, part) in path.split(['<', '>']).enumerate() {
        filled.push_str(if i % 2 == 0 { part } else { "x" });
    }
    vec![PathBuf::from(filled.replacen('~', "/h", 1))]
}

/// Whether `said`, a README cell, gives the command the agent's module makes for a session
/// of `files` (named `ID` in the README; Cline's tasks are named by a time, so try a number
/// too), or, where it makes none, sends a database's sessions to `show`, and names no
/// command for an agent without one (an editor's extension, reopened from the editor) or
/// says none resumes it.
fn resumes_as_said(agent: &Agent, said: &str, files: &[PathBuf]) -> bool {
    let command = |id: &str| {
        let asked = restore::Resume {
            id,
            cd: "",
            to: None,
            files,
        };
        (agent.restore.resume)(&asked)
    };
    let Some(_) = command("ID") else {
        return match agent.formats.databases.is_empty() {
            true => said.starts_with("none") || (!said.is_empty() && !said.contains('`')),
            false => said.contains("--format raw") || said.starts_with("as for OpenCode"),
        };
    };
    ["ID", "1"].iter().any(|id| {
        let made = command(id).unwrap_or_default();
        let made = made.split("   (").next().unwrap_or_default();
        said.replace("ID", id).contains(&format!("`{made}`"))
    })
}

#[test]
fn an_agent_kept_elsewhere_on_macos_and_windows_is_read_there() {
    let env = |k: &str| match k {
        "HOME" => Some("/Users/u".to_owned()),
        "LOCALAPPDATA" => Some("/c/Users/u/AppData/Local".to_owned()),
        "APPDATA" => Some("/c/Users/u/AppData/Roaming".to_owned()),
        "XDG_DATA_HOME" => Some("/xdg".to_owned()),
        _ => None,
    };
    let at_of = |agent: &str, os: Os| {
        let w = get(agent).unwrap().watcher().unwrap().on(os);
        let home = watcher_home(&w, &env).unwrap();
        (w.roots.iter().map(|r| home.join(r))).collect::<Vec<_>>()
    };
    let at = |os: Os| at_of("zed", os);
    assert_eq!(at(Os::Linux), [PathBuf::from("/xdg/zed")]);
    assert_eq!(
        at(Os::Mac),
        [PathBuf::from("/Users/u/Library/Application Support/Zed")]
    );
    assert_eq!(
        at(Os::Windows),
        [PathBuf::from("/c/Users/u/AppData/Local/Zed")]
    );
    // Goose: XDG's on macOS too (etcetera's app strategy), its author's folder on Windows.
    let at = |os: Os| at_of("goose", os);
    assert_eq!(at(Os::Mac), [PathBuf::from("/xdg/goose/sessions")]);
    assert_eq!(
        at(Os::Windows),
        [PathBuf::from(
            "/c/Users/u/AppData/Roaming/Block/goose/data/sessions"
        )]
    );
    // LLM: click's application folder for io.datasette.llm.
    let at = |os: Os| at_of("llm", os);
    assert_eq!(
        at(Os::Mac),
        [PathBuf::from(
            "/Users/u/Library/Application Support/io.datasette.llm"
        )]
    );
    assert_eq!(
        at(Os::Windows),
        [PathBuf::from("/Users/u/AppData/Roaming/io.datasette.llm")]
    );
}

/// An agent's unread members (`Agent::unread`) are left out of its records without changing
/// anything it reads from them: over every record of its fixtures (the real agent's files, and
/// the hand-shaped ones), what it says is the same as from the whole record. Each member is
/// met in them, so the check is made.
#[test]
fn an_agents_unread_members_change_nothing_it_reads() {
    use crate::read::record::{Unread, parse_value};
    /// Whether `whole`, an object, holds one of `unread`: each met is added to `met`.
    fn meet(whole: &Value, unread: &'static [Unread], met: &mut Vec<&'static str>) {
        for u in unread {
            match (u, whole.get(u.key())) {
                (Unread::Member(key), Some(_)) => met.push(key),
                (Unread::Within(_, inner), Some(within)) => meet(within, inner, met),
                (_, None) => {}
            }
        }
    }
    fn leaves(unread: &'static [Unread]) -> Vec<&'static str> {
        let leaf = |u: &'static Unread| match u {
            Unread::Member(key) => vec![*key],
            Unread::Within(_, inner) => leaves(inner),
        };
        unread.iter().flat_map(leaf).collect()
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let with_unread: Vec<_> = AGENTS.iter().filter(|a| !a.unread.is_empty()).collect();
    assert!(!with_unread.is_empty());
    for agent in with_unread {
        let mine = |name: &str| name == agent.name || name.starts_with(&format!("{}-", agent.name));
        let stem = |p: &Path| p.file_stem().unwrap().to_string_lossy().into_owned();
        let dirs = std::fs::read_dir(fixtures.join("agents"))
            .unwrap()
            .map(Result::unwrap);
        let dirs = dirs.filter(|d| mine(&d.file_name().to_string_lossy()));
        let theirs = dirs.flat_map(|d| walkdir::WalkDir::new(d.path()));
        let theirs = theirs.map(|e| e.unwrap().into_path());
        let shaped = std::fs::read_dir(fixtures.join("sessions")).unwrap();
        let shaped = shaped.map(|e| e.unwrap().path()).filter(|p| mine(&stem(p)));
        let files = (theirs.chain(shaped)).filter(|p| p.extension().is_some_and(|x| x == "jsonl"));
        let (mut met, mut records) = (Vec::new(), 0);
        for file in files {
            let text = std::fs::read(&file).unwrap();
            for (n, line) in text.split(|&b| b == b'\n').enumerate() {
                let Some(whole) = parse_value(line, &[]) else {
                    continue;
                };
                let without = parse_value(line, agent.unread).unwrap();
                let said = |v: &Value| v.as_object().and_then(agent.parse);
                let at = format!("{}:{}", file.display(), n + 1);
                assert_eq!(said(&whole), said(&without), "{at}");
                let mut left = Vec::new();
                meet(&without, agent.unread, &mut left);
                assert!(left.is_empty(), "{at}: {left:?} left in");
                meet(&whole, agent.unread, &mut met);
                records += 1;
            }
        }
        assert!(records > 0, "{}: no fixture records", agent.name);
        for leaf in leaves(agent.unread) {
            assert!(met.contains(&leaf), "{}: no fixture has {leaf}", agent.name);
        }
    }
}
