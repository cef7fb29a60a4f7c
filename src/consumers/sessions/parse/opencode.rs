//! OpenCode's records: the documents its database is read as (`read::opencode`), a session's
//! row (`{"session": {...}, "messages": []}`) and each message with its parts
//! (`{"info": {...}, "parts": [...]}`: text, reasoning, tool calls with their state).

use super::*;

pub(super) fn opencode(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed::default();
    if let Some(session) = obj.get("session").and_then(Value::as_object) {
        parsed.session_id = string(session, "id");
        parsed.project = string(session, "directory");
        // Until its title is made, a session is "New session - <time>".
        let title = string(session, "title").filter(|t| !t.starts_with("New session - "));
        parsed.title = title.map(|t| (title_of(&t), 2));
        return Some(parsed);
    }
    let info = obj.get("info")?.as_object()?;
    parsed.session_id = string(info, "sessionID");
    parsed.at_ms = info.get("time").and_then(|t| t.get("created")?.as_i64());
    let mut parts = Vec::new();
    for part in obj.get("parts")?.as_array()? {
        let part = part.as_object()?;
        match part.get("type").and_then(Value::as_str)? {
            "text" => parts.extend(string(part, "text").map(Part::Text)),
            "reasoning" => parts.extend(string(part, "text").map(Part::Thinking)),
            "tool" => {
                let state = part.get("state").and_then(Value::as_object);
                parts.push(Part::ToolCall {
                    name: string(part, "tool").unwrap_or_default(),
                    input: input_text(state.and_then(|s| s.get("input"))),
                });
                let output = state.and_then(|s| s.get("output").or_else(|| s.get("error")));
                if output.is_some() {
                    parts.push(Part::ToolResult(result_text(output)));
                }
            }
            "file" => {
                let name = string(part, "filename").or_else(|| string(part, "url"));
                parts.push(Part::Text(format!("[file {}]", name.unwrap_or_default())));
            }
            // Steps, snapshots and patches are the agent's bookkeeping.
            _ => {}
        }
    }
    let role = match info.get("role").and_then(Value::as_str)? {
        "user" => role_of(Role::User, &parts),
        "assistant" => Role::Assistant,
        _ => Role::System,
    };
    match role {
        Role::User => parsed.prompt = typed_prompt(&parts),
        Role::Assistant => parsed.model = string(info, "modelID"),
        _ => {}
    }
    // A reply's tokens (its input without the cached), written again as it streams.
    if let Some(tokens) = info.get("tokens").and_then(Value::as_object) {
        let cache = tokens.get("cache").and_then(Value::as_object);
        let n = |o: Option<&Map<String, Value>>, k: &str| {
            o.and_then(|o| o.get(k)?.as_i64()).unwrap_or(0)
        };
        parsed.usage = Some(
            Usage {
                input: n(Some(tokens), "input"),
                output: n(Some(tokens), "output") + n(Some(tokens), "reasoning"),
                cache_read: n(cache, "read"),
                cache_write: n(cache, "write"),
                ..Usage::default()
            }
            .keyed(string(info, "id"), parsed.model.clone()),
        );
    }
    parsed.message = Some(Message {
        upsert: true,
        ..Message::new(string(info, "id"), role, parts)
    });
    Some(parsed)
}
