//! Pi's session entries: a header, then a tree of messages and events.
//!
//! A `session` header, then entries (`message`, `model_change`, `compaction`, …) of a tree
//! linked by `id`/`parentId`.

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::{self};
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Pi (appended session entries): `sessions/--<cwd>--/<time>_<uuid>.jsonl`, a session named by
/// its header's id (the uuid).
pub(crate) static AGENT: Agent = Agent {
    name: "pi",
    watcher: include_str!("../../watchers/pi.toml"),
    formats: Formats::NONE,
    parse: pi,
    unread: &[],
    identify: session::by_record_or_uuid,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `pi --session ID`, pointed at `--to` through `$PI_CODING_AGENT_DIR`.
fn resume(r: &Resume) -> Option<String> {
    let home = r.home("PI_CODING_AGENT_DIR");
    Some(format!("{}{home}pi --session {}", r.cd, r.id))
}

/// Pi's entries (pi's docs/session-format.md, version 3): a `session` header names the
/// session and its directory; a `message` holds one agent message (`user`, `assistant`,
/// `toolResult`, `bashExecution`, `custom`, `branchSummary`, `compactionSummary`), keyed by
/// the entry's `id`; `compaction` marks a compaction; `session_info` is the name the user gave
/// the session; `model_change` the model. Other entries (`thinking_level_change`, `label`,
/// `custom`) are no messages.
pub(super) fn pi(obj: &Map<String, Value>) -> Option<Parsed> {
    let kind = obj.get("type").and_then(Value::as_str)?;
    let mut parsed = Parsed {
        at_ms: timestamp_ms(obj),
        ..Parsed::default()
    };
    let said = |role, text: Option<String>| {
        Message::new(
            string(obj, "id"),
            role,
            vec![Part::Text(text.unwrap_or_default())],
        )
    };
    match kind {
        "session" => {
            parsed.session_id = string(obj, "id");
            parsed.project = string(obj, "cwd");
        }
        "model_change" => parsed.model = string(obj, "modelId"),
        "session_info" => parsed.title = string(obj, "name").map(|n| (title_of(&n), 3)),
        "compaction" => parsed.message = Some(said(Role::Compact, string(obj, "summary"))),
        "branch_summary" => parsed.message = Some(said(Role::System, string(obj, "summary"))),
        "message" => {
            let message = obj.get("message")?.as_object()?;
            parsed.message = Some(pi_message(message, string(obj, "id"), &mut parsed)?);
            let usage = message.get("usage").and_then(Value::as_object);
            let fields = ["input", "output", "cacheRead", "cacheWrite"];
            parsed.usage = (usage.and_then(|u| Usage::of(u, fields, false)))
                .map(|u| u.keyed(string(obj, "id"), parsed.model.clone()));
        }
        "custom_message" => {
            let parts = content_parts(obj.get("content")?)?;
            parsed.message = Some(Message::new(string(obj, "id"), Role::System, parts));
        }
        _ => {}
    }
    Some(parsed)
}

/// One of Pi's agent messages; `parsed` takes its prompt or its model.
fn pi_message(
    message: &Map<String, Value>,
    key: Option<String>,
    parsed: &mut Parsed,
) -> Option<Message> {
    let role = message.get("role").and_then(Value::as_str)?;
    let summary = || vec![Part::Text(string(message, "summary").unwrap_or_default())];
    let (role, parts) = match role {
        "user" => (Role::User, content_parts(message.get("content")?)?),
        "assistant" => (Role::Assistant, content_parts(message.get("content")?)?),
        "toolResult" => (
            Role::Tool,
            vec![Part::ToolResult(result_text(message.get("content")))],
        ),
        // A command the person ran with `!`.
        "bashExecution" => (
            Role::Tool,
            vec![
                Part::ToolCall {
                    name: "bash".into(),
                    input: string(message, "command").unwrap_or_default(),
                },
                Part::ToolResult(string(message, "output").unwrap_or_default()),
            ],
        ),
        "compactionSummary" => (Role::Compact, summary()),
        "branchSummary" => (Role::System, summary()),
        _ => (Role::System, content_parts(message.get("content")?)?),
    };
    match role {
        Role::User => parsed.prompt = typed_prompt(&parts),
        Role::Assistant => parsed.model = string(message, "model"),
        _ => {}
    }
    Some(Message::new(key, role, parts))
}
