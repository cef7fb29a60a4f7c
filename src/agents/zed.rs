//! Zed's agent panel: its threads, kept in one SQLite database in Zed's data directory
//! (`~/.local/share/zed/threads/threads.db` on Linux), each read as one document
//! (`threads`).
//!
//! Its records: the document around a thread's messages (`{"row", "thread", "messages": []}`),
//! which says the thread's title (`summary`), project (the first of its `folder_paths`, else
//! the first worktree of its `initial_project_snapshot`), branch, model, last change
//! (`updated_at`; Zed keeps no time per message) and tokens (`cumulative_token_usage`), and
//! each message with its key (`{"key", "message"}`), in either shape Zed has written: the
//! agent's `Message`, `{"User": {id, content}}`, `{"Agent": {content, tool_results}}` or
//! `"Resume"` (`crates/agent/src/thread.rs` at 000e783fddd7, `DbThread` 0.3.0), and the first
//! agent's `SerializedMessage`, `{id, role, segments, tool_uses, tool_results, is_hidden}`
//! (`crates/agent/src/legacy_thread.rs` at 4410b97021c7, `SerializedThread` 0.1.0 and 0.2.0,
//! and its earliest, with `text` for `segments`). A message of another shape is unparsed.

mod threads;

use super::Agent;
use super::message::*;
use super::restore::{self, Restore};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Zed's agent panel (its SQLite database).
pub(crate) static AGENT: Agent = Agent {
    name: "zed",
    watcher: include_str!("../../watchers/zed.toml"),
    formats: Formats {
        databases: &[&threads::DATABASE],
        documents: &[],
    },
    parse: zed,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};

/// The title Zed gives a thread until the model names it.
const UNTITLED: &str = "New Thread";

/// What Zed sends the model in the user's place when a thread is resumed (`Message::Resume`).
const RESUME: &str = "Continue where you left off";

/// The document around a thread's messages, or one of its messages.
fn zed(obj: &Map<String, Value>) -> Option<Parsed> {
    if let Some(row) = obj.get("row").and_then(Value::as_object) {
        let empty = Map::new();
        let thread = obj.get("thread").and_then(Value::as_object);
        return Some(thread_facts(row, thread.unwrap_or(&empty)));
    }
    let (role, parts) = message(obj.get("message")?)?;
    let prompt = (role == Role::User).then(|| typed_prompt(&parts)).flatten();
    // A message is written again at each save of its thread: the latest wins.
    let message = Message {
        upsert: true,
        ..Message::new(string(obj, "key"), role, parts)
    };
    Some(Parsed {
        prompt,
        message: Some(message),
        ..Parsed::default()
    })
}

/// What a thread's row and JSON say of it.
fn thread_facts(row: &Map<String, Value>, thread: &Map<String, Value>) -> Parsed {
    let model = (thread.get("model").and_then(Value::as_object)).and_then(|m| string(m, "model"));
    let title = (string(row, "summary").or_else(|| string(thread, "title")))
        .or_else(|| string(thread, "summary"))
        .filter(|t| t != UNTITLED && !t.is_empty());
    let updated = string(row, "updated_at").or_else(|| string(thread, "updated_at"));
    Parsed {
        session_id: string(row, "id"),
        project: first_folder(row).or_else(|| worktree(thread, "worktree_path")),
        branch: worktree(thread, "current_branch"),
        title: title.map(|t| (title_of(&t), 2)),
        model: model.clone(),
        at_ms: updated.as_deref().and_then(utc_ms),
        usage: cumulative_usage(thread, model),
        ..Parsed::default()
    }
}

/// Milliseconds since the epoch of a time Zed wrote: `+00:00` in its rows, `Z` in its JSON.
fn utc_ms(text: &str) -> Option<i64> {
    time_ms(text.strip_suffix("+00:00").unwrap_or(text))
}

/// The folder the thread was started in: of its `folder_paths` (sorted, one a line), the one
/// `folder_paths_order` (their places as given, by comma) puts first.
fn first_folder(row: &Map<String, Value>) -> Option<String> {
    let paths = string(row, "folder_paths")?;
    let paths: Vec<&str> = paths.split('\n').collect();
    let order = string(row, "folder_paths_order").unwrap_or_default();
    let first = (order.split(',').map(str::parse::<usize>)).position(|i| i == Ok(0));
    let path = paths.get(first.unwrap_or(0)).or(paths.first())?;
    (!path.is_empty()).then(|| path.to_string())
}

/// A fact of the first worktree of the thread's project snapshot that has it: its path
/// (`worktree_path`), or its git state's `current_branch`.
fn worktree(thread: &Map<String, Value>, fact: &str) -> Option<String> {
    let snapshot = thread.get("initial_project_snapshot")?.as_object()?;
    let worktrees = snapshot.get("worktree_snapshots")?.as_array()?;
    worktrees.iter().find_map(|w| {
        let w = w.as_object()?;
        let git = w.get("git_state").and_then(Value::as_object);
        string(w, fact).or_else(|| git.and_then(|g| string(g, fact)))
    })
}

/// The thread's tokens, all its model calls summed (`cumulative_token_usage`, whose counts
/// Zed leaves out when they are 0), kept as one call of the thread's that grows.
fn cumulative_usage(thread: &Map<String, Value>, model: Option<String>) -> Option<Usage> {
    let counts = thread.get("cumulative_token_usage")?.as_object()?;
    let n = |k: &str| counts.get(k).and_then(Value::as_i64).unwrap_or(0);
    let usage = Usage {
        input: n("input_tokens"),
        output: n("output_tokens"),
        cache_read: n("cache_read_input_tokens"),
        cache_write: n("cache_creation_input_tokens"),
        ..Usage::default()
    };
    let none = usage == Usage::default();
    (!none).then(|| usage.keyed_in_session(Some("cumulative".into()), model))
}

/// A message of either shape, as its role and parts; `None` for another shape.
fn message(message: &Value) -> Option<(Role, Vec<Part>)> {
    if message.as_str() == Some("Resume") {
        return Some((Role::System, vec![Part::Text(RESUME.into())]));
    }
    let obj = message.as_object()?;
    if let Some(user) = obj.get("User") {
        let parts = user_parts(user.get("content")?.as_array()?);
        return Some((Role::User, parts));
    }
    if let Some(agent) = obj.get("Agent") {
        let parts = agent_parts(agent.as_object()?)?;
        return Some((role_of(Role::Assistant, &parts), parts));
    }
    serialized_message(obj)
}

/// The one member of an enum's variant as serde writes it (`{"Text": "…"}`).
fn variant(value: &Value) -> Option<(&str, &Value)> {
    let obj = value.as_object()?;
    let (name, inner) = obj.iter().next()?;
    (obj.len() == 1).then_some((name.as_str(), inner))
}

/// A user message's content: text, mentions (a file, a symbol, a thread, a URL…, whose
/// content Zed attached is left out), images.
fn user_parts(content: &[Value]) -> Vec<Part> {
    let part = |item: &Value| {
        let (kind, inner) = variant(item)?;
        Some(match kind {
            "Text" => Part::Text(inner.as_str()?.to_owned()),
            "Mention" => Part::Text(mention(inner.get("uri")?)),
            "Image" => Part::Text("[image]".into()),
            _ => return None,
        })
    };
    content.iter().filter_map(part).collect()
}

/// A mention as `@` and what it names (`{"File": {"abs_path": …}}`, `{"Fetch": {"url": …}}`).
fn mention(uri: &Value) -> String {
    let names = [
        "abs_path",
        "url",
        "name",
        "file_path",
        "skill_file_path",
        "base_ref",
    ];
    let Some((kind, fields)) = variant(uri) else {
        return "@".into();
    };
    let named = names.iter().find_map(|k| fields.get(k)?.as_str());
    format!("@{}", named.unwrap_or(kind))
}

/// A reply's content (text, thinking, tool calls) and its tool calls' results.
fn agent_parts(agent: &Map<String, Value>) -> Option<Vec<Part>> {
    let part = |item: &Value| {
        let (kind, inner) = variant(item)?;
        Some(match kind {
            "Text" => Part::Text(inner.as_str()?.to_owned()),
            "Thinking" => Part::Thinking(string(inner.as_object()?, "text")?),
            "ToolUse" => tool_call(inner.as_object()?)?,
            // Redacted thinking is the provider's, encrypted.
            _ => return None,
        })
    };
    let mut parts: Vec<Part> = agent
        .get("content")?
        .as_array()?
        .iter()
        .filter_map(part)
        .collect();
    let results = agent.get("tool_results").and_then(Value::as_object);
    let results = results.into_iter().flat_map(|r| r.values());
    parts.extend(results.map(|r| Part::ToolResult(result_content(r.get("content")))));
    Some(parts)
}

/// A tool call: its name and its input, which later releases wrap as `{"type": "json" or
/// "text", "value": …}` (`language_model_core`'s `LanguageModelToolUseInput`).
fn tool_call(tool_use: &Map<String, Value>) -> Option<Part> {
    let input = tool_use.get("input");
    let wrapped = input.and_then(Value::as_object).filter(|i| {
        i.len() == 2 && matches!(i.get("type").and_then(Value::as_str), Some("json" | "text"))
    });
    let input = match wrapped {
        Some(wrapped) => wrapped.get("value"),
        None => input,
    };
    Some(Part::ToolCall {
        name: string(tool_use, "name")?,
        input: input_text(input),
    })
}

/// A tool result's content as text: a string, `{"Text": …}`, `{"type": "text", "text": …}`,
/// an image, or a list of these (later releases).
fn result_content(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(items)) => {
            let texts = items.iter().map(|i| result_content(Some(i)));
            texts.collect::<Vec<_>>().join("\n")
        }
        Some(Value::Object(o)) => (o.get("Text").or(o.get("text")))
            .and_then(Value::as_str)
            .map_or_else(|| "[image]".to_owned(), str::to_owned),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// The first agent's message: its segments (text, thinking), tool calls and their results
/// (on the reply since 0.2.0, on the user message after it in 0.1.0); a hidden one is Zed's.
fn serialized_message(obj: &Map<String, Value>) -> Option<(Role, Vec<Part>)> {
    let role = obj.get("role")?.as_str()?;
    let segments = obj.get("segments").and_then(Value::as_array);
    let segment = |s: &Value| {
        let s = s.as_object()?;
        match s.get("type").and_then(Value::as_str)? {
            "text" => Some(Part::Text(string(s, "text")?)),
            "thinking" => Some(Part::Thinking(string(s, "text")?)),
            _ => None,
        }
    };
    let mut parts: Vec<Part> = segments.into_iter().flatten().filter_map(segment).collect();
    // Its earliest messages had one text.
    parts.extend(string(obj, "text").map(Part::Text));
    let calls = obj.get("tool_uses").and_then(Value::as_array);
    parts.extend(
        calls
            .into_iter()
            .flatten()
            .filter_map(|c| tool_call(c.as_object()?)),
    );
    let results = obj.get("tool_results").and_then(Value::as_array);
    let results = results.into_iter().flatten();
    parts.extend(results.map(|r| Part::ToolResult(result_content(r.get("content")))));
    let hidden = obj.get("is_hidden").and_then(Value::as_bool) == Some(true);
    let role = match role {
        "user" if hidden => Role::System,
        name => role_named(name, &parts),
    };
    Some((role, parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(record: Value) -> Parsed {
        zed(record.as_object().unwrap()).unwrap()
    }

    fn message_of(key: &str, message: Value) -> Message {
        parsed(json!({"key": key, "message": message}))
            .message
            .unwrap()
    }

    #[test]
    fn a_threads_row_and_json_say_its_title_project_branch_model_time_and_tokens() {
        let around = json!({"row": {"id": "t1", "summary": "Fix the build",
            "updated_at": "2026-09-23T08:00:02.500+00:00",
            "folder_paths": "/w/api\n/w/app", "folder_paths_order": "1,0"},
            "thread": {"model": {"provider": "anthropic", "model": "claude-sonnet-4-5"},
                "initial_project_snapshot": {"worktree_snapshots": [{"worktree_path": "/w/app",
                    "git_state": {"current_branch": "main"}}]},
                "cumulative_token_usage": {"input_tokens": 120, "output_tokens": 30,
                    "cache_read_input_tokens": 40}},
            "messages": []});
        let p = parsed(around);
        assert_eq!(p.session_id.as_deref(), Some("t1"));
        assert_eq!(
            p.project.as_deref(),
            Some("/w/app"),
            "the folder given first"
        );
        assert_eq!(p.branch.as_deref(), Some("main"));
        assert_eq!(p.title, Some(("Fix the build".into(), 2)));
        assert_eq!(p.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(p.at_ms, Some(1_790_150_402_500));
        let usage = p.usage.unwrap();
        assert_eq!(
            (
                usage.input,
                usage.output,
                usage.cache_read,
                usage.cache_write
            ),
            (120, 30, 40, 0)
        );
        assert_eq!(
            (usage.key.as_deref(), usage.in_session),
            (Some("cumulative"), true)
        );
        // Without folders, the snapshot's worktree; Zed's placeholder title is no title.
        let untitled = json!({"row": {"id": "t2", "summary": "New Thread"},
            "thread": {"initial_project_snapshot": {"worktree_snapshots": [
                {"worktree_path": "/w/lib", "git_state": null}]}}, "messages": []});
        let p = parsed(untitled);
        assert_eq!(
            (p.project.as_deref(), p.title, p.usage),
            (Some("/w/lib"), None, None)
        );
    }

    #[test]
    fn the_agents_messages_are_a_prompt_a_reply_with_its_tool_results_and_a_resume() {
        let user = json!({"User": {"id": "u1", "content": [{"Text": "Run it, please."},
            {"Mention": {"uri": {"File": {"abs_path": "/w/app/build.rs"}}, "content": "fn main"}},
            {"Image": {"source": "iVBORw0KGgo"}}]}});
        let p = parsed(json!({"key": "u1", "message": user}));
        assert_eq!(p.prompt.as_deref(), Some("Run it, please."));
        let m = p.message.unwrap();
        assert_eq!(
            (m.key.as_deref(), m.role, m.upsert),
            (Some("u1"), Role::User, true)
        );
        assert_eq!(m.parts[1], Part::Text("@/w/app/build.rs".into()));
        assert_eq!(m.parts[2], Part::Text("[image]".into()));
        let reply = json!({"Agent": {"content": [
            {"Thinking": {"text": "Run the command.", "signature": null}},
            {"RedactedThinking": "opaque"},
            {"Text": "Running it."},
            {"ToolUse": {"id": "c1", "name": "terminal", "raw_input": "{}",
                "input": {"command": "echo hi", "cd": "app"}, "is_input_complete": true}}],
            "tool_results": {"c1": {"tool_use_id": "c1", "tool_name": "terminal",
                "is_error": false, "content": [{"Text": "hi"}], "output": null}},
            "reasoning_details": null}});
        let m = message_of("u1+1", reply);
        assert_eq!(m.role, Role::Assistant);
        assert_eq!(
            m.parts,
            [
                Part::Thinking("Run the command.".into()),
                Part::Text("Running it.".into()),
                Part::ToolCall {
                    name: "terminal".into(),
                    input: r#"{"cd":"app","command":"echo hi"}"#.into()
                },
                Part::ToolResult("hi".into())
            ]
        );
        let resume = message_of("u1+2", json!("Resume"));
        assert_eq!(
            (resume.role, resume.parts[0].text()),
            (Role::System, RESUME.into())
        );
    }

    #[test]
    fn later_tool_inputs_and_results_are_read_unwrapped() {
        let reply = json!({"Agent": {"content": [{"ToolUse": {"id": "c1", "name": "grep",
            "input": {"type": "json", "value": {"regex": "fn"}}}}],
            "tool_results": {"c1": {"content": {"Text": "one"}}, "c2": {"content": "two"},
                "c3": {"content": {"type": "text", "text": "three"}}}}});
        let m = message_of("u1+1", reply);
        assert_eq!(m.parts[0].text(), r#"grep {"regex":"fn"}"#);
        let results: Vec<String> = m.parts[1..].iter().map(Part::text).collect();
        assert_eq!(results, ["one", "two", "three"]);
        assert_eq!(m.role, Role::Tool, "a reply of tool calls and results only");
    }

    #[test]
    fn the_first_agents_messages_are_read_in_each_of_its_versions() {
        let user = json!({"id": 0, "role": "user", "segments": [{"type": "text",
            "text": "List the files."}], "tool_uses": [], "tool_results": [], "context": "",
            "creases": [], "is_hidden": false});
        let p = parsed(json!({"key": "0", "message": user}));
        assert_eq!(p.prompt.as_deref(), Some("List the files."));
        let reply = json!({"id": 1, "role": "assistant", "segments": [
            {"type": "thinking", "text": "A listing.", "signature": "s"},
            {"type": "RedactedThinking", "data": [1, 2]},
            {"type": "text", "text": "Listing them."}],
            "tool_uses": [{"id": "c1", "name": "list_directory", "input": {"path": "."}}],
            "tool_results": [{"tool_use_id": "c1", "is_error": false,
                "content": "README.md", "output": null}]});
        let m = message_of("1", reply);
        assert_eq!(m.role, Role::Assistant);
        let kinds: Vec<String> = m.parts.iter().map(Part::text).collect();
        assert_eq!(
            kinds,
            [
                "A listing.",
                "Listing them.",
                r#"list_directory {"path":"."}"#,
                "README.md"
            ]
        );
        // 0.1.0 kept a reply's results on the user message after it.
        let results = json!({"id": 2, "role": "user", "segments": [], "tool_results": [
            {"tool_use_id": "c1", "is_error": false, "content": "README.md"}]});
        assert_eq!(message_of("2", results).role, Role::Tool);
        // Its earliest had one text; a hidden user message is Zed's own.
        let legacy = json!({"id": 3, "role": "assistant", "text": "Done."});
        assert_eq!(message_of("3", legacy).parts, [Part::Text("Done.".into())]);
        let hidden = json!({"id": 4, "role": "user", "segments": [{"type": "text",
            "text": "Continue"}], "is_hidden": true});
        assert_eq!(message_of("4", hidden).role, Role::System);
    }

    #[test]
    fn a_message_of_a_shape_zed_has_not_written_is_unparsed() {
        for odd in [
            json!({"Compaction": {"summary": "x"}}),
            json!(42),
            json!("Pause"),
        ] {
            assert!(zed(json!({"key": "k", "message": odd}).as_object().unwrap()).is_none());
        }
        let parsed = crate::agents::message::parse("zed", br#"{"key":"k","message":{"Later":{}}}"#);
        assert_eq!(parsed.message.unwrap().role, Role::Unparsed);
    }
}
