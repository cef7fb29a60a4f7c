//! Factory Droid's session lines: `session_start`, then `message`s of Anthropic-style blocks.

use super::*;

/// `session_start` names the session, its title and directory; a `message` is one message,
/// keyed by its `id`. A user message of the agent's own markup only (the `<system-reminder>`
/// listing its tools) is the agent's, not the person's. Other lines (turn outcomes) are the
/// agent's bookkeeping.
pub(super) fn droid(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed {
        at_ms: (obj.get("timestamp").and_then(Value::as_str)).and_then(time_ms),
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
            let role = match role {
                Role::User if typed_prompt(&parts).is_none() => Role::System,
                other => other,
            };
            match role {
                Role::User => parsed.prompt = typed_prompt(&parts),
                Role::Assistant => parsed.model = string(message, "model"),
                _ => {}
            }
            parsed.message = Some(Message {
                key: string(obj, "id"),
                role,
                parts,
                upsert: false,
                copy: None,
            });
        }
        _ => {}
    }
    Some(parsed)
}
