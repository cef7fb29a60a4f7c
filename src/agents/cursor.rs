//! Cursor's agent transcript records: a role and a message.

use super::message::*;
use serde_json::{Map, Value};

pub(super) fn cursor(obj: &Map<String, Value>) -> Option<Parsed> {
    let role = match obj.get("role").and_then(Value::as_str)? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        _ => Role::System,
    };
    let message = obj.get("message")?;
    let content = message.get("content").unwrap_or(message);
    let parts = content_parts(content)?;
    let role = role_of(role, &parts);
    let prompt = (role == Role::User).then(|| typed_prompt(&parts)).flatten();
    Some(Parsed {
        prompt,
        message: Some(Message::new(None, role, parts)),
        ..Parsed::default()
    })
}
