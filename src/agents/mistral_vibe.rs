//! Mistral Vibe's records. Its 3.x store: a session's `meta.json` (`session_id`,
//! `start_time`, `environment.working_directory`, `title`), and the entries of its chunks:
//! the conversation as shown (`{type: "message", id, role, content, createdAt}` and
//! `{type: "effect", id, detail: {toolName, input}, state: {output}, createdAt}` for a tool's
//! run), which are the messages; the conversation as sent to the model (`{message,
//! turn_index}`), the generations' states and the recovery journal are archived for `restore`
//! and are no messages. Its 2.x sessions: `messages.jsonl` lines (`{role, content,
//! message_id, tool_calls}`, a tool's result a `tool` line) and the same `meta.json`.

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::{self, Identified};
use crate::capture::harness::Formats;
use serde_json::{Map, Value};
use std::path::Path;

/// Mistral Vibe (its sessions' files).
pub(crate) static AGENT: Agent = Agent {
    name: "mistral-vibe",
    watcher: include_str!("../../watchers/mistral-vibe.toml"),
    formats: Formats::NONE,
    parse: vibe,
    unread: &[],
    identify,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `unified/<session id>/…`, `session_<time>_<id>/…`: everything in a session's folder.
fn identify(path: &Path, first: &Parsed) -> Identified {
    let folder = path.ancestors().find(|a| {
        let parent = a.parent().and_then(Path::file_name);
        let name = a.file_name().map(|n| n.to_string_lossy());
        parent == Some("unified".as_ref()) || name.is_some_and(|n| n.starts_with("session_"))
    });
    let name = folder.and_then(Path::file_name);
    Identified {
        session: name.map_or_else(|| session::stem(path), |n| n.to_string_lossy().into_owned()),
        ..Identified::by_stem(path, first)
    }
}

/// `vibe --resume ID`, from the project's directory.
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!("{}vibe --resume {}", r.cd, r.id))
}

pub(super) fn vibe(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed::default();
    if obj.contains_key("session_id") && obj.contains_key("start_time") {
        parsed.session_id = string(obj, "session_id");
        parsed.at_ms = string(obj, "start_time").and_then(|t| time_ms(&t));
        let env = obj.get("environment").and_then(Value::as_object);
        parsed.project = env.and_then(|e| string(e, "working_directory"));
        parsed.title = string(obj, "title").map(|t| (title_of(&t), 2));
        return Some(parsed);
    }
    let (key, role, parts) = match string(obj, "type").as_deref() {
        Some("message") => {
            parsed.at_ms = obj.get("createdAt").and_then(Value::as_i64);
            let role = match string(obj, "role")?.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                _ => Role::System,
            };
            (string(obj, "id"), role, content_parts(obj.get("content")?)?)
        }
        Some("effect") => {
            parsed.at_ms = obj.get("createdAt").and_then(Value::as_i64);
            (string(obj, "id"), Role::Tool, effect_parts(obj))
        }
        // A 2.x line.
        None if obj.contains_key("role") => {
            let role = match string(obj, "role")?.as_str() {
                "user" => Role::User,
                "assistant" => Role::Assistant,
                "tool" => Role::Tool,
                _ => Role::System,
            };
            (string(obj, "message_id"), role, line_parts(obj, role))
        }
        // The store's own state: kept for `restore`.
        _ => return Some(parsed),
    };
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    // An entry is written again, in a new chunk, as its turn goes on: the latest wins.
    parsed.message = Some(Message {
        upsert: true,
        ..Message::new(key, role, parts)
    });
    Some(parsed)
}

/// A tool's run as shown: its call, and its output (the structured `stdout`, else the text).
fn effect_parts(obj: &Map<String, Value>) -> Vec<Part> {
    let detail = obj.get("detail").and_then(Value::as_object);
    let name = detail
        .and_then(|d| string(d, "toolName"))
        .unwrap_or_default();
    let input = input_text(detail.and_then(|d| d.get("input")));
    let mut parts = vec![Part::ToolCall { name, input }];
    let state = obj.get("state");
    let output = state.and_then(|s| s.pointer("/output/structured_content/stdout"));
    let text = output.or_else(|| state?.get("outputText"));
    if let Some(text) = text.and_then(Value::as_str).filter(|t| !t.is_empty()) {
        parts.push(Part::ToolResult(text.to_owned()));
    }
    parts
}

/// A 2.x line's text and tool calls (`tool_calls[].function`).
fn line_parts(obj: &Map<String, Value>, role: Role) -> Vec<Part> {
    let text = string(obj, "content").unwrap_or_default();
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(match role {
            Role::Tool => Part::ToolResult(text),
            _ => Part::Text(text),
        });
    }
    let calls = obj.get("tool_calls").and_then(Value::as_array);
    for call in calls.into_iter().flatten() {
        let function = call.get("function").and_then(Value::as_object);
        parts.extend(function.map(|f| Part::ToolCall {
            name: string(f, "name").unwrap_or_default(),
            input: input_text(f.get("arguments")),
        }));
    }
    parts
}
