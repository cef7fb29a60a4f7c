//! GitHub Copilot CLI's session events: `{type, data, id, timestamp, parentId}`.

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::{self, Identified};
use crate::capture::harness::Formats;
use serde_json::{Map, Value};
use std::path::Path;

/// GitHub Copilot CLI (appended session events).
pub(crate) static AGENT: Agent = Agent {
    name: "copilot-cli",
    watcher: include_str!("../../watchers/copilot-cli.toml"),
    formats: Formats::NONE,
    parse: copilot,
    unread: &[],
    identify,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `session-state/<session id>/events.jsonl`.
fn identify(path: &Path, first: &Parsed) -> Identified {
    let session = (first.session_id.clone())
        .or_else(|| session::folder(path))
        .unwrap_or_else(|| session::stem(path));
    Identified {
        session,
        ..Identified::by_stem(path, first)
    }
}

/// `copilot --resume=ID` from the project's directory, pointed at `--to` through
/// `$COPILOT_HOME`.
fn resume(r: &Resume) -> Option<String> {
    let home = r.home("COPILOT_HOME");
    Some(format!("{}{home}copilot --resume={}", r.cd, r.id))
}

/// `session.start` names the session, its directory and model; `user.message`,
/// `assistant.message` (with its tool requests) and `tool.execution_complete` are messages,
/// keyed by the event's `id`; the other events (turns, usage, the system prompt, shutdown)
/// are the agent's bookkeeping.
pub(super) fn copilot(obj: &Map<String, Value>) -> Option<Parsed> {
    let kind = obj.get("type").and_then(Value::as_str)?;
    let data = obj.get("data").and_then(Value::as_object)?;
    let mut parsed = Parsed {
        at_ms: timestamp_ms(obj),
        ..Parsed::default()
    };
    let (role, parts) = match kind {
        "session.start" => {
            parsed.session_id = string(data, "sessionId");
            parsed.project =
                (data.get("context").and_then(Value::as_object)).and_then(|c| string(c, "cwd"));
            parsed.model = string(data, "selectedModel");
            return Some(parsed);
        }
        "user.message" => (Role::User, vec![Part::Text(string(data, "content")?)]),
        "assistant.message" => {
            let mut parts = vec![Part::Text(string(data, "content").unwrap_or_default())];
            let requests = data.get("toolRequests").and_then(Value::as_array);
            for request in requests.into_iter().flatten().filter_map(Value::as_object) {
                parts.push(Part::ToolCall {
                    name: string(request, "name").unwrap_or_default(),
                    input: input_text(request.get("arguments")),
                });
            }
            parsed.model = string(data, "model");
            (Role::Assistant, parts)
        }
        // A model call's tokens (input counts the cached input), keyed by the event's id.
        "session.usage_record" => {
            let usage = data.get("usage").and_then(Value::as_object);
            let fields = [
                "inputTokens",
                "outputTokens",
                "cacheReadTokens",
                "cacheWriteTokens",
            ];
            parsed.usage = (usage.and_then(|u| Usage::of(u, fields, true)))
                .map(|u| u.keyed(string(obj, "id"), usage.and_then(|u| string(u, "model"))));
            return Some(parsed);
        }
        "tool.execution_complete" => {
            let result = data.get("result").and_then(|r| r.get("content"));
            (Role::Tool, vec![Part::ToolResult(result_text(result))])
        }
        _ => return Some(parsed),
    };
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    parsed.message = Some(Message::new(string(obj, "id"), role, parts));
    Some(parsed)
}
