//! Amp's threads (`threads/T-<id>.json`, rewritten whole, taken apart by the snapshot reader):
//! the thread around its messages (`id`, `created` in ms, `title`, `env.initial.trees` with
//! the working directory as a `file://` URI) and its messages (`{role, messageId, content}`),
//! whose blocks are Anthropic's but for a tool's result, which Amp keeps as
//! `{type: "tool_result", toolUseID, run: {status, result: {output, exitCode}}}` in a user
//! message. As Amp 0.0.1767830505 writes them (`scripts/agents/record`).

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Amp (its threads, rewritten whole): `threads/T-<id>.json`.
pub(crate) static AGENT: Agent = Agent {
    name: "amp",
    watcher: include_str!("../../watchers/amp.toml"),
    formats: Formats::NONE,
    parse: amp,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `amp threads continue ID`.
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!("{}amp threads continue {}", r.cd, r.id))
}

pub(super) fn amp(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed::default();
    if obj.contains_key("messages") {
        parsed.session_id = string(obj, "id");
        parsed.at_ms = obj.get("created").and_then(Value::as_i64);
        parsed.title = string(obj, "title").map(|t| (title_of(&t), 2));
        let env = obj.get("env");
        let tree = env.and_then(|e| e.pointer("/initial/trees/0/uri")?.as_str());
        parsed.project = tree
            .and_then(|uri| uri.strip_prefix("file://"))
            .map(percent_decoded);
        return Some(parsed);
    }
    let key = obj.get("messageId").map(Value::to_string);
    parsed.at_ms = obj.get("meta").and_then(|m| m.get("sentAt")?.as_i64());
    let parts: Vec<Part> = (obj.get("content")?.as_array()?.iter())
        .filter_map(|b| amp_part(b.as_object()?))
        .collect();
    let role = match obj.get("role").and_then(Value::as_str)? {
        "user" => role_of(Role::User, &parts),
        "assistant" => {
            let usage = obj.get("usage").and_then(Value::as_object);
            parsed.model = usage.and_then(|u| string(u, "model"));
            let fields = [
                "inputTokens",
                "outputTokens",
                "cacheReadInputTokens",
                "cacheCreationInputTokens",
            ];
            // A message's number is the thread's own.
            parsed.usage = (usage.and_then(|u| Usage::of(u, fields, false)))
                .map(|u| u.keyed_in_session(key.clone(), parsed.model.clone()));
            role_of(Role::Assistant, &parts)
        }
        _ => Role::System,
    };
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    // A message is written again as it streams and as its tools run: the latest wins.
    let mut message = Message::new(key, role, parts);
    message.upsert = true;
    parsed.message = Some(message);
    Some(parsed)
}

fn amp_part(block: &Map<String, Value>) -> Option<Part> {
    Some(match block.get("type").and_then(Value::as_str)? {
        "text" => Part::Text(string(block, "text")?),
        "thinking" => Part::Thinking(string(block, "thinking")?),
        "tool_use" => Part::ToolCall {
            name: string(block, "name")?,
            input: input_text(block.get("input")),
        },
        "tool_result" => {
            let run = block.get("run")?;
            let output = run.pointer("/result/output").cloned();
            let status = run.get("status").and_then(Value::as_str).unwrap_or("");
            match output {
                Some(Value::String(text)) => Part::ToolResult(text),
                Some(other) => Part::ToolResult(other.to_string()),
                None => Part::ToolResult(format!("[{status}]")),
            }
        }
        _ => return None,
    })
}

/// `text` with its `%XX` escapes decoded (a URI's path); as it is where they do not decode to
/// UTF-8.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_names_its_project_and_a_tool_result_is_its_runs_output() {
        let thread = br#"{"v":3,"id":"T-1","created":1796319281942,"messages":[],"title":"Fix it","env":{"initial":{"trees":[{"uri":"file:///home/me/my%20app"}]}}}"#;
        let p = parse("amp", thread);
        assert_eq!(p.session_id.as_deref(), Some("T-1"));
        assert_eq!(p.project.as_deref(), Some("/home/me/my app"));
        assert_eq!(p.title, Some(("Fix it".into(), 2)));
        assert_eq!(p.at_ms, Some(1796319281942));
        let result = br#"{"role":"user","messageId":2,"content":[{"type":"tool_result","toolUseID":"t","run":{"status":"done","result":{"output":"hi\n","exitCode":0}}}]}"#;
        let message = parse("amp", result).message.unwrap();
        assert_eq!(message.role, Role::Tool);
        assert_eq!(message.parts, [Part::ToolResult("hi\n".into())]);
        assert_eq!(message.key.as_deref(), Some("2"));
        let cancelled = br#"{"role":"user","messageId":4,"content":[{"type":"tool_result","toolUseID":"t","run":{"status":"cancelled"}}]}"#;
        let parts = parse("amp", cancelled).message.unwrap().parts;
        assert_eq!(parts, [Part::ToolResult("[cancelled]".into())]);
    }
}
