//! Nanocoder's sessions (`sessions/<id>.json`, rewritten whole, taken apart by the snapshot
//! reader): the document around its messages (`id`, `title`, `workingDirectory`, `createdAt`
//! and `lastAccessedAt`, `model`) and its messages, the chat APIs' own
//! (`{role, content, tool_calls, tool_call_id}`, a call's `arguments` an object), keyed by
//! their place (they have neither ids nor times, nor token counts). A subagent's messages are
//! not kept: the session holds its `agent` call and what it answered. As
//! @nanocollective/nanocoder 1.30.0 writes them (`scripts/agents/record`).

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Nanocoder (its sessions, rewritten whole): `sessions/<session id>.json`.
pub(crate) static AGENT: Agent = Agent {
    name: "nanocoder",
    watcher: include_str!("../../watchers/nanocoder.toml"),
    formats: Formats::NONE,
    parse,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `nanocoder --resume ID` from the project's directory (its terminal interface: `run`
/// resumes nothing).
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!("{}nanocoder --resume {}", r.cd, r.id))
}

/// The document around the messages, or one message.
fn parse(obj: &Map<String, Value>) -> Option<Parsed> {
    if obj.contains_key("messages") {
        return Some(session(obj));
    }
    let mut parts = match obj.get("content") {
        Some(Value::String(text)) if !text.is_empty() => vec![Part::Text(text.clone())],
        _ => Vec::new(),
    };
    let calls = obj.get("tool_calls").and_then(Value::as_array);
    parts.extend(calls.into_iter().flatten().filter_map(tool_call));
    let role = match string(obj, "role")?.as_str() {
        // A tool's output is the whole of its message's content.
        "tool" => {
            parts = vec![Part::ToolResult(result_text(obj.get("content")))];
            Role::Tool
        }
        name => role_named(name, &parts),
    };
    let mut parsed = Parsed::default();
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    parsed.message = Some(Message::new(None, role, parts));
    Some(parsed)
}

/// The session's document: its id, project, title and model; its time is its last change
/// (every save moves `lastAccessedAt`), and it started at `createdAt`.
fn session(obj: &Map<String, Value>) -> Parsed {
    let time = |key: &str| string(obj, key).as_deref().and_then(time_ms);
    Parsed {
        session_id: string(obj, "id"),
        project: string(obj, "workingDirectory"),
        title: string(obj, "title").map(|t| (title_of(&t), 2)),
        model: string(obj, "model"),
        at_ms: time("lastAccessedAt"),
        started_ms: time("createdAt"),
        ..Parsed::default()
    }
}

/// A tool call of OpenAI's shape, its `arguments` an object (or a string).
fn tool_call(call: &Value) -> Option<Part> {
    let function = call.get("function")?.as_object()?;
    Some(Part::ToolCall {
        name: string(function, "name")?,
        input: input_text(function.get("arguments")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(value: Value) -> Parsed {
        parse(value.as_object().unwrap()).unwrap()
    }

    #[test]
    fn a_reply_reads_its_text_and_its_tool_calls() {
        let reply = parsed(serde_json::json!({"role": "assistant", "content": "On it.",
            "tool_calls": [{"id": "c1", "function": {"name": "execute_bash",
            "arguments": {"command": "ls"}}}]}));
        let message = reply.message.unwrap();
        assert_eq!(message.role, Role::Assistant);
        assert_eq!(message.parts[0], Part::Text("On it.".into()));
        assert_eq!(
            message.parts[1],
            Part::ToolCall {
                name: "execute_bash".into(),
                input: r#"{"command":"ls"}"#.into()
            }
        );
    }

    #[test]
    fn a_tool_message_is_the_result_of_its_call_and_a_prompt_is_typed() {
        let result = parsed(
            serde_json::json!({"role": "tool", "content": "EXIT_CODE: 0\nok\n",
            "tool_call_id": "c1", "name": "execute_bash"}),
        );
        let message = result.message.unwrap();
        assert_eq!(message.role, Role::Tool);
        assert_eq!(
            message.parts,
            [Part::ToolResult("EXIT_CODE: 0\nok\n".into())]
        );
        let prompt = parsed(serde_json::json!({"role": "user", "content": "Fix it."}));
        assert_eq!(prompt.prompt.as_deref(), Some("Fix it."));
    }

    #[test]
    fn the_document_names_its_session_project_title_and_both_its_times() {
        let doc = parsed(serde_json::json!({"id": "s1", "title": "Fix it.",
            "createdAt": "2026-12-05T03:16:26.445Z", "lastAccessedAt": "2026-12-05T03:16:27.463Z",
            "model": "m1", "workingDirectory": "/w", "messages": []}));
        assert_eq!(doc.session_id.as_deref(), Some("s1"));
        assert_eq!(doc.project.as_deref(), Some("/w"));
        assert_eq!(doc.title, Some(("Fix it.".into(), 2)));
        assert_eq!(doc.model.as_deref(), Some("m1"));
        assert_eq!(doc.at_ms, time_ms("2026-12-05T03:16:27.463Z"));
        assert_eq!(doc.started_ms, time_ms("2026-12-05T03:16:26.445Z"));
    }
}
