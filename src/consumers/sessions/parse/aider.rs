//! Aider's chat history, as `read::aider` makes records of it: `{type, at, text}` with `type`
//! `chat` (a run's start, with its `timestamp`), `user`, `assistant` or `output` (Aider's own).

use super::*;

/// A block of the history. Each is keyed by where it starts in the file, and the last one
/// may still grow: a later copy of the same block replaces the earlier.
pub(super) fn aider(obj: &Map<String, Value>) -> Option<Parsed> {
    let key = obj.get("at").and_then(Value::as_u64)?.to_string();
    let mut parsed = Parsed::default();
    let (role, text) = match obj.get("type").and_then(Value::as_str)? {
        "chat" => {
            parsed.at_ms = timestamp_ms(obj);
            let started = string(obj, "started").unwrap_or_default();
            (Role::System, format!("Aider chat started at {started}"))
        }
        "user" => (Role::User, string(obj, "text")?),
        "assistant" => (Role::Assistant, string(obj, "text")?),
        "output" => (Role::System, string(obj, "text")?),
        _ => return None,
    };
    if role == Role::User {
        parsed.prompt = Some(text.clone());
    }
    let mut message = Message::new(Some(key), role, vec![Part::Text(text)]);
    message.upsert = true;
    parsed.message = Some(message);
    Some(parsed)
}
