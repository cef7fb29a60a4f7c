//! Factory Droid's session lines: `session_start`, then `message`s of Anthropic-style blocks.

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Factory Droid (appended sessions): `sessions/<cwd>/<session id>.jsonl`.
pub(crate) static AGENT: Agent = Agent {
    name: "droid",
    watcher: include_str!("../../watchers/droid.toml"),
    formats: Formats::NONE,
    parse: droid,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `droid --resume ID`, from the project's directory.
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!("{}droid --resume {}", r.cd, r.id))
}

/// `session_start` names the session, its title and directory; a `message` is one message,
/// keyed by its `id`. A user message of the agent's own markup only (the `<system-reminder>`
/// listing its tools) is the agent's, not the person's. Other lines (turn outcomes) are the
/// agent's bookkeeping.
pub(super) fn droid(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed {
        at_ms: timestamp_ms(obj),
        ..Parsed::default()
    };
    match obj.get("type").and_then(Value::as_str)? {
        "session_start" => {
            parsed.session_id = string(obj, "id");
            parsed.project = string(obj, "cwd");
            let given = obj
                .get("isSessionTitleManuallySet")
                .and_then(Value::as_bool);
            let rank = if given == Some(true) { 3 } else { 2 };
            parsed.title = string(obj, "title").map(|t| (title_of(&t), rank));
        }
        "message" => {
            let message = obj.get("message")?.as_object()?;
            let parts = content_parts(message.get("content")?)?;
            let role = match message.get("role").and_then(Value::as_str)? {
                "user" => role_of(Role::User, &parts),
                "assistant" => role_of(Role::Assistant, &parts),
                _ => Role::System,
            };
            let prompt = (role == Role::User).then(|| typed_prompt(&parts)).flatten();
            let role = match role {
                Role::User if prompt.is_none() => Role::System,
                Role::Assistant => {
                    parsed.model = string(message, "model");
                    role
                }
                other => other,
            };
            parsed.prompt = prompt;
            parsed.message = Some(Message::new(string(obj, "id"), role, parts));
        }
        _ => {}
    }
    Some(parsed)
}
