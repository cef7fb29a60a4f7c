//! Roo Code, a fork of Cline that runs as a VS Code extension: a task folder as Cline's
//! extension keeps one, whose conversation (`api_conversation_history.json`) is in one of two
//! shapes (RooCodeInc/Roo-Code, `src/core/task-persistence/apiMessages.ts` and
//! `rooMessage.ts`):
//! - Cline's: a list of Anthropic messages `{role, content, ts}`, read as Cline's are;
//! - its RooMessage format: `{"version": 2, "messages": [...]}`, AI SDK messages with Roo's
//!   `ts`: `{role: "user"|"assistant", content}` whose parts are `text`, `reasoning`,
//!   `tool-call` (`toolName`, `input`), `image`, or Anthropic's `tool_result` kept from before;
//!   `{role: "tool", content: [{type: "tool-result", toolName, output}]}`; and reasoning kept
//!   apart, `{type: "reasoning", encrypted_content, summary}`.
//!
//! Each message is keyed by its `ts`. What the extension showed (`ui_messages.json`) and the
//! task's metadata are Cline's. The extension was not run here: the shapes are its source's.

use super::Agent;
use super::cline::{cline, cline_text};
use super::message::*;
use super::restore::{self, Restore};
use super::session::Identified;
use crate::capture::harness::Formats;
use crate::domain::{SnapshotEntry, SnapshotFormat, SnapshotSpec, TextFormat};
use serde_json::{Map, Value};

/// Roo Code (its VS Code extension's task folders, rewritten whole):
/// `globalStorage/rooveterinaryinc.roo-cline/tasks/<id>/`, a session named by its folder.
pub(crate) static AGENT: Agent =
    reading_roos_tasks("roo-code", include_str!("../../watchers/roo-code.toml"));

/// An agent named `name` whose task folders (where `watcher` says) are Roo Code's, read as
/// Roo Code's are: Roo Code, and the extensions forked from it.
pub(super) const fn reading_roos_tasks(name: &'static str, watcher: &'static str) -> Agent {
    Agent {
        name,
        watcher,
        formats: Formats {
            databases: &[],
            documents: &[TextFormat {
                name: "roo-history",
                derive: history,
            }],
        },
        parse: roo,
        unread: &[],
        identify: Identified::by_folder,
        // The extension reopens a task from its history; it has no command to name.
        restore: Restore::keeping_layout(restore::no_resume),
        doctor: None,
    }
}

/// `api_conversation_history.json`'s entries, in either shape: a list of messages, or the
/// versioned document around one.
fn history(text: &str) -> Result<Vec<SnapshotEntry>, String> {
    let versioned = text.trim_start().starts_with('{');
    let spec = SnapshotSpec {
        messages: Some(if versioned { "/messages" } else { "" }.to_owned()),
        key: "/ts".to_owned(),
        format: SnapshotFormat::Json,
    };
    crate::read::snapshot::derive(text.as_bytes(), &spec)
}

/// One record of a task folder.
fn roo(obj: &Map<String, Value>) -> Option<Parsed> {
    // The versioned document around its messages says nothing of its own.
    if obj.contains_key("version") && obj.contains_key("messages") {
        return Some(Parsed::default());
    }
    if obj.get("type").and_then(Value::as_str) == Some("reasoning") && !obj.contains_key("role") {
        return reasoning_item(obj);
    }
    let content = obj.get("content");
    let versioned = obj.get("role").and_then(Value::as_str) == Some("tool")
        || content.and_then(Value::as_array).is_some_and(|parts| {
            parts.iter().any(|p| {
                let kind = p.get("type").and_then(Value::as_str);
                matches!(kind, Some("tool-call" | "tool-result" | "reasoning"))
            })
        });
    match versioned {
        true => versioned_message(obj),
        false => cline(obj),
    }
}

/// A message of the RooMessage format.
fn versioned_message(obj: &Map<String, Value>) -> Option<Parsed> {
    let ts = obj.get("ts").and_then(Value::as_i64);
    let mut parsed = Parsed {
        at_ms: ts,
        ..Parsed::default()
    };
    let mut parts = Vec::new();
    match obj.get("content")? {
        Value::String(text) => parts.extend(cline_text(text.clone(), &mut parsed)),
        Value::Array(items) => {
            for item in items.iter().filter_map(Value::as_object) {
                parts.extend(part(item, &mut parsed));
            }
        }
        _ => return None,
    }
    let role = role_named(obj.get("role").and_then(Value::as_str)?, &parts);
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    parsed.message = Some(Message {
        upsert: true,
        ..Message::new(ts.map(|t| t.to_string()), role, parts)
    });
    Some(parsed)
}

/// One part of a RooMessage's content.
fn part(item: &Map<String, Value>, parsed: &mut Parsed) -> Option<Part> {
    match item.get("type").and_then(Value::as_str)? {
        "text" => cline_text(string(item, "text")?, parsed),
        "reasoning" => Some(Part::Thinking(string(item, "text")?)),
        "tool-call" => Some(Part::ToolCall {
            name: string(item, "toolName")?,
            input: input_text(item.get("input")),
        }),
        "tool-result" => Some(Part::ToolResult(output_text(item.get("output")))),
        // Anthropic's, kept in a user message from before the format.
        "tool_result" => Some(Part::ToolResult(result_text(item.get("content")))),
        "image" => Some(Part::Text("[image]".to_owned())),
        _ => None,
    }
}

/// A tool result's output as text: a string, an AI SDK output (`{type, value}`), or a list
/// of them.
fn output_text(output: Option<&Value>) -> String {
    match output {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(items)) => {
            let texts = items.iter().map(|i| output_text(Some(i)));
            texts.collect::<Vec<_>>().join("\n")
        }
        Some(Value::Object(o)) => match o.get("value") {
            Some(Value::String(text)) => text.clone(),
            Some(value) => output_text(Some(value)),
            None => string(o, "text").unwrap_or_default(),
        },
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Reasoning kept apart from the messages: its summary, when the model gave one.
fn reasoning_item(obj: &Map<String, Value>) -> Option<Parsed> {
    let summary = obj.get("summary").and_then(Value::as_array);
    let texts: Vec<String> = (summary.into_iter().flatten())
        .filter_map(|s| string(s.as_object()?, "text"))
        .collect();
    let ts = obj.get("ts").and_then(Value::as_i64);
    let parts = vec![Part::Thinking(texts.join("\n"))];
    Some(Parsed {
        at_ms: ts,
        message: Some(Message::new(
            ts.map(|t| t.to_string()),
            Role::Reasoning,
            parts,
        )),
        ..Parsed::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_is_read_in_either_shape() {
        let list = r#"[{"role":"user","content":[{"type":"text","text":"hi"}],"ts":1}]"#;
        let entries = history(list).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].key.as_deref(), Some("1"));
        let versioned = r#"{"version":2,"messages":[{"role":"user","content":"hi","ts":1},
            {"role":"assistant","content":"yes","ts":2}]}"#;
        let entries = history(versioned).unwrap();
        assert_eq!(
            entries.len(),
            3,
            "the document around, then its two messages"
        );
        assert_eq!(entries[0].key, None);
        assert_eq!(entries[2].key.as_deref(), Some("2"));
        assert!(history("{not json").is_err());
    }

    #[test]
    fn a_roo_message_reads_its_tool_calls_results_and_reasoning() {
        let reply = serde_json::json!({"role": "assistant", "ts": 2, "content": [
            {"type": "reasoning", "text": "Thinking."},
            {"type": "text", "text": "Running it."},
            {"type": "tool-call", "toolCallId": "c1", "toolName": "execute_command",
             "input": {"command": "ls"}}]});
        let message = roo(reply.as_object().unwrap()).unwrap().message.unwrap();
        assert_eq!(message.role, Role::Assistant);
        assert_eq!(message.parts[0], Part::Thinking("Thinking.".into()));
        assert!(
            matches!(&message.parts[2], Part::ToolCall { name, .. } if name == "execute_command")
        );
        let result = serde_json::json!({"role": "tool", "ts": 3, "content": [
            {"type": "tool-result", "toolCallId": "c1", "toolName": "execute_command",
             "output": {"type": "text", "value": "a.txt"}}]});
        let message = roo(result.as_object().unwrap()).unwrap().message.unwrap();
        assert_eq!(
            (message.role, &message.parts[0]),
            (Role::Tool, &Part::ToolResult("a.txt".into()))
        );
    }

    #[test]
    fn the_workspace_directory_roo_reports_is_the_project() {
        let first = serde_json::json!({"role": "user", "ts": 1, "content": [
            {"type": "text", "text": "<task>\nFix it\n</task>"},
            {"type": "text", "text": "<environment_details>\n# Current Workspace Directory (/w/app) Files\nx\n</environment_details>"}]});
        let parsed = roo(first.as_object().unwrap()).unwrap();
        assert_eq!(parsed.project.as_deref(), Some("/w/app"));
        assert_eq!(parsed.prompt.as_deref(), Some("Fix it"));
    }
}
