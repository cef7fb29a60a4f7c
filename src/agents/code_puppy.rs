//! Code Puppy's sessions, JSON envelopes rewritten whole and taken apart by the snapshot
//! reader: `autosaves/<name>.json`, whose `messages` are pydantic-ai's (a `request` of
//! `user-prompt`, `tool-return` and `system-prompt` parts, a `response` of `text`,
//! `tool-call` and `thinking` parts and its `usage`), keyed by their place, each with its
//! time; `autosaves/<name>_meta.json` beside it, which names its project (`scope_key`); and a
//! subagent's, `subagent_sessions/<id>.json` beside `<id>.txt` (its agent and first prompt).
//! As code-puppy 0.0.946 writes them (`scripts/agents/record`).

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::{Identified, stem};
use crate::capture::harness::Formats;
use serde_json::{Map, Value};
use std::path::Path;

/// Code Puppy (its autosaves and its subagents' sessions, rewritten whole):
/// `autosaves/<name>.json` and `subagent_sessions/<id>.json` under `~/.code_puppy`.
pub(crate) static AGENT: Agent = Agent {
    name: "code-puppy",
    watcher: include_str!("../../watchers/code-puppy.toml"),
    formats: Formats::NONE,
    parse,
    unread: &[],
    identify,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `code-puppy -r NAME` from the project's directory (with `-p PROMPT` it goes on headless).
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!("{}code-puppy -r {}", r.cd, r.id))
}

/// A session is named by its envelope's stem: its metadata, `<name>_meta.json`, is the same
/// session's.
fn identify(path: &Path, _first: &Parsed) -> Identified {
    let stem = stem(path);
    let name = stem.strip_suffix("_meta").unwrap_or(&stem);
    Identified {
        session: name.to_owned(),
        parent: None,
        project: None,
    }
}

/// One message, or a document around none: an envelope (its list emptied), a session's
/// metadata, a subagent's.
fn parse(obj: &Map<String, Value>) -> Option<Parsed> {
    match string(obj, "kind").as_deref() {
        Some("request") => Some(request(obj)),
        Some("response") => Some(response(obj)),
        Some(_) => None,
        None => Some(document(obj)),
    }
}

/// What a document says of its session: the metadata's name and project (its time is local,
/// without a zone: the messages' own times are kept instead); a subagent's id.
fn document(obj: &Map<String, Value>) -> Parsed {
    Parsed {
        session_id: string(obj, "session_name").or_else(|| string(obj, "session_id")),
        project: string(obj, "scope_key"),
        ..Parsed::default()
    }
}

/// What is sent to the model: a prompt (with what else the request holds), else tools'
/// results, else the system prompt.
fn request(obj: &Map<String, Value>) -> Parsed {
    let parts: Vec<(&str, Part)> = (obj.get("parts").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|p| request_part(p.as_object()?))
        .collect();
    let has = |kind: &str| parts.iter().any(|(k, _)| *k == kind);
    let role = if has("user-prompt") {
        Role::User
    } else if has("tool-return") || has("retry-prompt") {
        Role::Tool
    } else {
        Role::System
    };
    let parts: Vec<Part> = parts.into_iter().map(|(_, p)| p).collect();
    let mut parsed = Parsed {
        at_ms: timestamp_ms(obj),
        ..Parsed::default()
    };
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    parsed.message = Some(Message::new(None, role, parts));
    parsed
}

/// One part of a request, with its kind.
fn request_part(part: &Map<String, Value>) -> Option<(&str, Part)> {
    let kind = part.get("part_kind")?.as_str()?;
    let content = part.get("content");
    let read = match kind {
        "user-prompt" | "system-prompt" => Part::Text(prompt_text(content?)),
        "tool-return" | "retry-prompt" if part.contains_key("tool_name") => {
            Part::ToolResult(result_text(content))
        }
        "retry-prompt" => Part::Text(result_text(content)),
        _ => return None,
    };
    Some((kind, read))
}

/// A prompt's content: a string, or a list of strings and media (named by their kind).
fn prompt_text(content: &Value) -> String {
    match content {
        Value::Array(items) => (items.iter())
            .map(|i| match i {
                Value::String(text) => text.clone(),
                other => format!("[{}]", other["kind"].as_str().unwrap_or("attachment")),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => result_text(Some(other)),
    }
}

/// The model's reply: its text, tool calls and thinking, its model and its tokens.
fn response(obj: &Map<String, Value>) -> Parsed {
    let parts: Vec<Part> = (obj.get("parts").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(|p| response_part(p.as_object()?))
        .collect();
    let model = string(obj, "model_name");
    let counts = obj.get("usage").and_then(Value::as_object);
    let fields = [
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
    ];
    // pydantic-ai's input tokens count the cached ones too.
    let usage = counts.and_then(|c| Usage::of(c, fields, true));
    Parsed {
        usage: usage.map(|u| u.keyed(string(obj, "provider_response_id"), model.clone())),
        model,
        at_ms: timestamp_ms(obj),
        message: Some(Message::new(None, role_of(Role::Assistant, &parts), parts)),
        ..Parsed::default()
    }
}

/// One part of a reply.
fn response_part(part: &Map<String, Value>) -> Option<Part> {
    Some(match part.get("part_kind")?.as_str()? {
        "text" => Part::Text(string(part, "content")?),
        "thinking" => Part::Thinking(string(part, "content")?),
        "tool-call" | "builtin-tool-call" => Part::ToolCall {
            name: string(part, "tool_name")?,
            input: input_text(part.get("args")),
        },
        "builtin-tool-return" => Part::ToolResult(result_text(part.get("content"))),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(value: Value) -> Parsed {
        parse(value.as_object().unwrap()).unwrap()
    }

    #[test]
    fn a_prompt_is_the_user_s_and_a_tool_return_is_the_result_of_its_call() {
        let prompt = parsed(
            json!({"kind": "request", "timestamp": "2026-12-05T04:01:15.977Z",
            "instructions": "You are Puppy.", "parts": [{"part_kind": "user-prompt",
            "content": "Fix it."}]}),
        );
        assert_eq!(prompt.prompt.as_deref(), Some("Fix it."));
        assert_eq!(prompt.at_ms, time_ms("2026-12-05T04:01:15.977Z"));
        let message = prompt.message.unwrap();
        assert_eq!(
            (message.role, message.parts),
            (Role::User, vec![Part::Text("Fix it.".into())])
        );
        let result = parsed(
            json!({"kind": "request", "parts": [{"part_kind": "tool-return",
            "tool_name": "shell", "content": {"stdout": "ok", "exit_code": 0}}]}),
        );
        let message = result.message.unwrap();
        assert_eq!(message.role, Role::Tool);
        assert!(matches!(&message.parts[..], [Part::ToolResult(t)] if t.contains("\"ok\"")));
    }

    #[test]
    fn a_response_reads_its_text_its_tool_calls_its_model_and_its_tokens() {
        let reply = parsed(json!({"kind": "response", "model_name": "m1",
            "provider_response_id": "r1", "timestamp": "2026-12-05T04:01:16Z",
            "usage": {"input_tokens": 160, "output_tokens": 30, "cache_read_tokens": 40,
            "cache_write_tokens": 0}, "parts": [{"part_kind": "text", "content": "On it."},
            {"part_kind": "tool-call", "tool_name": "shell", "args": "{\"command\": \"ls\"}"}]}));
        let message = reply.message.unwrap();
        assert_eq!(message.role, Role::Assistant);
        assert_eq!(
            message.parts[1],
            Part::ToolCall {
                name: "shell".into(),
                input: r#"{"command": "ls"}"#.into()
            }
        );
        let usage = reply.usage.unwrap();
        assert_eq!((usage.input, usage.output, usage.cache_read), (120, 30, 40));
        assert_eq!(
            (usage.key.as_deref(), usage.model.as_deref()),
            (Some("r1"), Some("m1"))
        );
    }

    #[test]
    fn the_metadata_names_the_project_and_is_the_session_of_its_envelope() {
        let meta = parsed(json!({"session_name": "auto_session_1", "scope_key": "/w",
            "timestamp": "2026-12-05T04:01:16.001", "message_count": 4}));
        assert_eq!(meta.project.as_deref(), Some("/w"));
        assert_eq!(meta.at_ms, None);
        let of = |path: &str| identify(Path::new(path), &meta).session;
        assert_eq!(
            of("/h/.code_puppy/autosaves/auto_session_1_meta.json"),
            "auto_session_1"
        );
        assert_eq!(
            of("/h/.code_puppy/autosaves/auto_session_1.json"),
            "auto_session_1"
        );
        assert_eq!(of("/h/.code_puppy/subagent_sessions/s-1.txt"), "s-1");
    }
}
