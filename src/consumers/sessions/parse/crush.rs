//! Crush's records: the documents its database is read as (`read::crush`), a session's row
//! (`{"session": {...}, "messages": []}`) and each message's row (`{id, role, parts, model,
//! created_at, is_summary_message, …}`, times in seconds), whose `parts` are `{type, data}`:
//! `text`, `reasoning`, `tool_call` (its `input` a JSON text), `tool_result`, `image_url`,
//! `binary`, `finish` (as crush v0.92.0's `internal/message/content.go` writes them).

use super::*;

pub(super) fn crush(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed::default();
    let seconds = |o: &Map<String, Value>| o.get("created_at")?.as_i64()?.checked_mul(1000);
    if let Some(session) = obj.get("session").and_then(Value::as_object) {
        parsed.session_id = string(session, "id");
        parsed.at_ms = seconds(session);
        // Until the small model names it, a session is "Untitled Session".
        let title = string(session, "title").filter(|t| t != "Untitled Session");
        parsed.title = title.map(|t| (title_of(&t), 2));
        return Some(parsed);
    }
    parsed.session_id = string(obj, "session_id");
    parsed.at_ms = seconds(obj);
    let parts: Vec<Part> = (obj.get("parts")?.as_array()?.iter())
        .filter_map(|p| crush_part(p.as_object()?))
        .collect();
    let summary = obj.get("is_summary_message").and_then(Value::as_i64) == Some(1);
    let role = match obj.get("role").and_then(Value::as_str)? {
        _ if summary => Role::Compact,
        "user" => role_of(Role::User, &parts),
        "assistant" => role_of(Role::Assistant, &parts),
        "tool" => Role::Tool,
        _ => Role::System,
    };
    match role {
        Role::User => parsed.prompt = typed_prompt(&parts),
        Role::Assistant => parsed.model = string(obj, "model").filter(|m| !m.is_empty()),
        _ => {}
    }
    // A row is written again as its reply streams: the latest wins.
    parsed.message = Some(Message {
        upsert: true,
        ..Message::new(string(obj, "id"), role, parts)
    });
    Some(parsed)
}

fn crush_part(part: &Map<String, Value>) -> Option<Part> {
    let data = part.get("data")?.as_object()?;
    Some(match part.get("type").and_then(Value::as_str)? {
        "text" => Part::Text(string(data, "text")?),
        "reasoning" => Part::Thinking(string(data, "thinking")?),
        "tool_call" => Part::ToolCall {
            name: string(data, "name")?,
            input: string(data, "input").unwrap_or_default(),
        },
        "tool_result" => Part::ToolResult(string(data, "content").unwrap_or_default()),
        "image_url" => Part::Text(format!("[image {}]", string(data, "url")?)),
        "binary" => Part::Text(format!(
            "[file {}]",
            string(data, "Path").unwrap_or_default()
        )),
        // The reason a reply ended is the agent's bookkeeping.
        _ => return None,
    })
}
