//! Qwen Code's records: Claude Code's envelope around Gemini's parts.

use super::Agent;
use super::gemini_cli::gemini_content;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Qwen Code (appended chats): `projects/<cwd>/chats/<session id>.jsonl`.
pub(crate) static AGENT: Agent = Agent {
    name: "qwen-code",
    watcher: include_str!("../../watchers/qwen-code.toml"),
    formats: Formats::NONE,
    parse: qwen,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `qwen --resume ID`, from the project's directory.
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!("{}qwen --resume {}", r.cd, r.id))
}

/// Qwen Code's records: Claude Code's envelope (`uuid`, `sessionId`, `cwd`, `timestamp`,
/// `type`) around a message of Gemini's parts. `system` records are the agent's bookkeeping
/// (telemetry, snapshots), no messages, but for a `chat_compression`.
pub(super) fn qwen(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed {
        session_id: string(obj, "sessionId"),
        project: string(obj, "cwd"),
        at_ms: timestamp_ms(obj),
        ..Parsed::default()
    };
    let kind = obj.get("type").and_then(Value::as_str)?;
    let subtype = obj.get("subtype").and_then(Value::as_str);
    let role = match (kind, subtype) {
        ("user", _) => Role::User,
        ("assistant", _) => Role::Assistant,
        ("tool_result", _) => Role::Tool,
        ("system", Some("chat_compression")) => Role::Compact,
        _ => return Some(parsed),
    };
    let parts = match obj.get("message").and_then(|m| m.get("parts")) {
        Some(parts) => gemini_content(parts)?,
        None => vec![Part::Text(subtype.unwrap_or_default().replace('_', " "))],
    };
    let role = role_of(role, &parts);
    match role {
        Role::User => parsed.prompt = typed_prompt(&parts),
        Role::Assistant => parsed.model = string(obj, "model"),
        _ => {}
    }
    if let Some(meta) = obj.get("usageMetadata").and_then(Value::as_object) {
        let fields = [
            "promptTokenCount",
            "candidatesTokenCount",
            "cachedContentTokenCount",
            "",
        ];
        let thoughts = meta
            .get("thoughtsTokenCount")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        parsed.usage = Usage::of(meta, fields, true).map(|mut u| {
            u.output += thoughts;
            u.keyed(string(obj, "uuid"), parsed.model.clone())
        });
    }
    parsed.message = Some(Message::new(string(obj, "uuid"), role, parts));
    Some(parsed)
}
