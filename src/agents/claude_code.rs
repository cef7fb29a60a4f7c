//! Claude Code's records: `user`, `assistant` (a record per content block), `system`, titles.

use super::message::*;
use serde_json::{Map, Value};

pub(super) fn claude(obj: &Map<String, Value>) -> Option<Parsed> {
    let kind = obj.get("type").and_then(Value::as_str)?;
    let mut parsed = Parsed {
        project: string(obj, "cwd"),
        branch: string(obj, "gitBranch").filter(|b| !b.is_empty()),
        at_ms: timestamp_ms(obj),
        session_id: string(obj, "sessionId"),
        ..Parsed::default()
    };
    let key = string(obj, "uuid");
    match kind {
        "summary" => parsed.title = Some((title_of(&string(obj, "summary")?), 1)),
        "ai-title" => parsed.title = Some((title_of(&string(obj, "aiTitle")?), 2)),
        "custom-title" => parsed.title = Some((title_of(&string(obj, "customTitle")?), 3)),
        "user" | "assistant" => {
            let message = obj.get("message")?.as_object()?;
            let parts = content_parts(message.get("content")?)?;
            let meta = obj.get("isMeta").and_then(Value::as_bool) == Some(true)
                || obj.get("isCompactSummary").and_then(Value::as_bool) == Some(true);
            let role = match (kind, meta) {
                ("assistant", _) => role_of(Role::Assistant, &parts),
                (_, true) => Role::System,
                _ => role_of(Role::User, &parts),
            };
            if role == Role::User {
                parsed.prompt = typed_prompt(&parts);
            }
            if kind == "assistant" {
                parsed.model = string(message, "model").filter(|m| !m.starts_with('<'));
                // Each record of a reply (one per content block) repeats its usage; a resumed
                // or forked session copies the records: one call, by the reply's id.
                let fields = [
                    "input_tokens",
                    "output_tokens",
                    "cache_read_input_tokens",
                    "cache_creation_input_tokens",
                ];
                let usage = message.get("usage").and_then(Value::as_object);
                parsed.usage = (usage.and_then(|u| Usage::of(u, fields, false)))
                    .filter(|_| parsed.model.is_some())
                    .map(|u| u.keyed(string(message, "id"), parsed.model.clone()));
            }
            parsed.message = Some(Message::new(key, role, parts));
        }
        "system" => {
            let compact = obj.get("subtype").and_then(Value::as_str) == Some("compact_boundary");
            let text = string(obj, "content").unwrap_or_else(|| "conversation compacted".into());
            parsed.message = Some(Message::new(
                key,
                if compact { Role::Compact } else { Role::System },
                vec![Part::Text(text)],
            ));
        }
        _ => {}
    }
    Some(parsed)
}
