//! Gemini CLI's chat records (`$set`, `$rewindTo`, messages), and its content parts, which
//! Qwen Code shares.
//!
//! A metadata line (`sessionId`, `projectHash`, `startTime`, `summary`), then messages `{id,
//! timestamp, type: user|gemini|info|error|warning, content, toolCalls, thoughts, model}`;
//! `{"$set": {…}}` merges metadata and `{"$rewindTo": id}` drops the messages from `id` on. A
//! message whose `id` comes again replaces the earlier one.

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::{self, Identified};
use crate::capture::harness::Formats;
use serde_json::{Map, Value};
use std::path::Path;

/// Gemini CLI (appended chats).
pub(crate) static AGENT: Agent = Agent {
    name: "gemini-cli",
    watcher: include_str!("../../watchers/gemini-cli.toml"),
    formats: Formats::NONE,
    parse: gemini,
    unread: &[],
    identify,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `tmp/<project>/chats/<file>.jsonl`, a subagent's under `chats/<parent>/`.
fn identify(path: &Path, first: &Parsed) -> Identified {
    let dir = session::folder(path);
    Identified {
        parent: dir.filter(|d| d != "chats"),
        project: session::dir_before(path, "chats").map(|name| project(path, name)),
        ..Identified::by_record(path, first)
    }
}

/// The directory a project `name` (its folder under `.gemini/tmp/`) stands for, as
/// `.gemini/projects.json` maps them (`{"projects": {"/path": "name"}}`, as Gemini CLI 0.61.0
/// keeps it); `name` itself when the file does not say (a hash, in older releases; another
/// machine's session).
fn project(path: &Path, name: String) -> String {
    let Some(gemini) = path
        .ancestors()
        .find(|a| a.file_name() == Some(".gemini".as_ref()))
    else {
        return name;
    };
    let projects = std::fs::read(gemini.join("projects.json")).ok();
    let map = projects.and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
    let found = (map.as_ref())
        .and_then(|m| m.get("projects")?.as_object())
        .and_then(|p| p.iter().find(|(_, n)| n.as_str() == Some(name.as_str())))
        .map(|(dir, _)| dir.clone());
    found.unwrap_or(name)
}

/// `gemini --resume ID`, from the project's directory.
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!(
        "gemini --resume {}   (from the project's directory)",
        r.id
    ))
}

pub(super) fn gemini(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed::default();
    if let Some(id) = obj.get("$rewindTo") {
        parsed.rewind_to = Some(id.as_str()?.to_owned());
        return Some(parsed);
    }
    let meta = match obj.get("$set") {
        Some(set) => Some(set.as_object()?),
        None if obj.contains_key("sessionId") && !obj.contains_key("type") => Some(obj),
        None => None,
    };
    if let Some(meta) = meta {
        parsed.session_id = string(meta, "sessionId");
        parsed.title = string(meta, "summary").map(|s| (title_of(&s), 1));
        let time = string(meta, "lastUpdated").or_else(|| string(meta, "startTime"));
        parsed.at_ms = time.as_deref().and_then(time_ms);
        return Some(parsed);
    }
    parsed.at_ms = timestamp_ms(obj);
    let mut parts = gemini_content(obj.get("content")?)?;
    for thought in obj
        .get("thoughts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let text = thought.as_object().and_then(|t| string(t, "description"));
        parts.extend(text.map(Part::Thinking));
    }
    for call in obj
        .get("toolCalls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let call = call.as_object()?;
        parts.push(Part::ToolCall {
            name: string(call, "name").unwrap_or_default(),
            input: input_text(call.get("args")),
        });
        if let Some(result) = call.get("result") {
            parts.push(Part::ToolResult(gemini_result(result)));
        }
    }
    let role = match obj.get("type").and_then(Value::as_str)? {
        "user" => role_of(Role::User, &parts),
        "gemini" => Role::Assistant,
        _ => Role::System,
    };
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    parsed.model = string(obj, "model");
    if let Some(tokens) = obj.get("tokens").and_then(Value::as_object) {
        let fields = ["input", "output", "cached", ""];
        let thoughts = tokens.get("thoughts").and_then(Value::as_i64).unwrap_or(0);
        parsed.usage = Usage::of(tokens, fields, true).map(|mut u| {
            u.output += thoughts;
            u.keyed(string(obj, "id"), parsed.model.clone())
        });
    }
    parsed.message = Some(Message {
        key: Some(string(obj, "id")?),
        role,
        parts,
        upsert: true,
        copy: None,
    });
    Some(parsed)
}

/// Gemini's content: a string, a part (`{text}`, `{functionCall}`, `{functionResponse}`: a
/// user message of function responses carries the tools' results back), or a list of them.
pub(super) fn gemini_content(content: &Value) -> Option<Vec<Part>> {
    let part_of = |v: &Value| match v {
        Value::String(s) => Some(Part::Text(s.clone())),
        Value::Object(o) if o.contains_key("functionResponse") => {
            Some(Part::ToolResult(gemini_result(v)))
        }
        Value::Object(o) => match o.get("functionCall").and_then(Value::as_object) {
            Some(call) => Some(Part::ToolCall {
                name: string(call, "name").unwrap_or_default(),
                input: input_text(call.get("args")),
            }),
            None => string(o, "text").map(Part::Text),
        },
        _ => None,
    };
    Some(match content {
        Value::Array(items) => items.iter().filter_map(part_of).collect(),
        other => vec![part_of(other)?],
    })
}

/// A Gemini tool result: function responses' `output` (or their whole response).
fn gemini_result(result: &Value) -> String {
    let items = result
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(std::slice::from_ref(result));
    let texts = items.iter().map(|item| {
        let response = item.pointer("/functionResponse/response").unwrap_or(item);
        match response.get("output") {
            Some(Value::String(s)) => s.clone(),
            _ => result_text(Some(response)),
        }
    });
    texts.collect::<Vec<_>>().join("\n")
}
