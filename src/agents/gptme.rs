//! gptme's conversation log: one message per line, `{role, content, timestamp}`.

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// gptme (appended conversation logs): `logs/<conversation name>/conversation.jsonl`, a
/// session named by its folder.
pub(crate) static AGENT: Agent = Agent {
    name: "gptme",
    watcher: include_str!("../../watchers/gptme.toml"),
    formats: Formats::NONE,
    parse: gptme,
    unread: &[],
    identify: Identified::by_folder,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `gptme --name ID`, pointed at `--to` through `$XDG_DATA_HOME`.
fn resume(r: &Resume) -> Option<String> {
    let home = r.home("XDG_DATA_HOME");
    Some(format!("{}{home}gptme --name {}", r.cd, r.id))
}

/// A message of gptme's log. Tool calls are written inside the assistant's text, one per line,
/// as `@tool(call id): {json}`; a tool's result is a `system` message with that `call_id`. The
/// bootstrap prompts (`hide`) are no messages, but the one that says the working directory
/// names the project.
pub(super) fn gptme(obj: &Map<String, Value>) -> Option<Parsed> {
    let content = string(obj, "content")?;
    let mut parsed = Parsed {
        at_ms: timestamp_ms(obj),
        ..Parsed::default()
    };
    let hidden = obj.get("hide").and_then(Value::as_bool) == Some(true);
    let (role, parts) = match obj.get("role").and_then(Value::as_str)? {
        "user" => (Role::User, vec![Part::Text(content)]),
        "assistant" => (Role::Assistant, assistant_parts(&content)),
        "system" if obj.contains_key("call_id") => (Role::Tool, vec![Part::ToolResult(content)]),
        "system" if hidden => {
            parsed.project = (content.lines())
                .find_map(|l| l.strip_prefix("**Working Directory:** "))
                .map(|d| d.trim().to_owned());
            return Some(parsed);
        }
        _ => (Role::System, vec![Part::Text(content)]),
    };
    match role {
        Role::User => parsed.prompt = typed_prompt(&parts),
        Role::Assistant => {
            let meta = obj.get("metadata").and_then(Value::as_object);
            parsed.model = meta.and_then(|m| string(m, "model"));
            let usage = meta.and_then(|m| m.get("usage")?.as_object());
            let fields = [
                "input_tokens",
                "output_tokens",
                "cache_read_tokens",
                "cache_write_tokens",
            ];
            // No id: a message's time, within its conversation.
            parsed.usage = (usage.and_then(|u| Usage::of(u, fields, false)))
                .map(|u| u.keyed_in_session(string(obj, "timestamp"), parsed.model.clone()));
        }
        _ => {}
    }
    parsed.message = Some(Message::new(None, role, parts));
    Some(parsed)
}

/// The assistant's text, its `@tool(call id): input` lines as tool calls.
fn assistant_parts(content: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut text = Vec::new();
    for line in content.lines() {
        let call = (line.strip_prefix('@'))
            .and_then(|rest| rest.split_once("): "))
            .and_then(|(head, input)| Some((head.split_once('(')?.0, input)));
        match call {
            Some((name, input)) if !name.is_empty() => parts.push(Part::ToolCall {
                name: name.to_owned(),
                input: input.to_owned(),
            }),
            _ => text.push(line),
        }
    }
    let text = text.join("\n").trim().to_owned();
    if !text.is_empty() {
        parts.insert(0, Part::Text(text));
    }
    parts
}
