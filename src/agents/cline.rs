//! Cline's records, taken from documents it rewrites whole (snapshot sources): its CLI 3's
//! messages (`{id, role, content, ts, modelInfo}`), the document around them (`sessionId`)
//! and the session's manifest (`session_id`, `cwd`, `metadata.title`); its CLI 2's and its VS
//! Code extension's task history (`{role, content, ts, modelInfo}`, no ids), whose first
//! prompt is wrapped in `<task>` and whose user messages carry `<environment_details>`.

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Cline (its CLI's and VS Code extension's documents, rewritten whole):
/// `sessions/<id>/<id>[.messages].json`, `tasks/<id>/api_conversation_history.json`, a
/// session named by its folder.
pub(crate) static AGENT: Agent = Agent {
    name: "cline",
    watcher: include_str!("../../watchers/cline.toml"),
    formats: Formats::NONE,
    parse: cline,
    unread: &[],
    identify: Identified::by_folder,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `cline -T ID` for a task of its CLI 2 or VS Code extension (its id a time in ms), `cline
/// --id ID` for a session of its CLI 3, from the project's directory.
fn resume(r: &Resume) -> Option<String> {
    let flag = match r.id.bytes().all(|b| b.is_ascii_digit()) {
        true => "-T",
        false => "--id",
    };
    r.in_place(format!("{}cline {flag} {}", r.cd, r.id))
}

pub(super) fn cline(obj: &Map<String, Value>) -> Option<Parsed> {
    let mut parsed = Parsed::default();
    // The manifest (`sessions/<id>/<id>.json`).
    if let Some(id) = string(obj, "session_id") {
        parsed.session_id = Some(id);
        parsed.project = string(obj, "cwd");
        parsed.model = string(obj, "model");
        let title = obj.get("metadata").and_then(|m| m.get("title"));
        parsed.title = (title.and_then(Value::as_str)).map(|t| (title_of(t), 2));
        return Some(parsed);
    }
    // The messages document around its list.
    if obj.contains_key("messages") {
        parsed.session_id = string(obj, "sessionId");
        return Some(parsed);
    }
    // What else a task folder keeps (`ui_messages.json`: what the extension showed, the
    // conversation again; `task_metadata.json`) is archived for `restore`, and no message;
    // what it showed of each model call (`api_req_started`) holds the call's tokens.
    if !obj.contains_key("role") {
        if obj.get("say").and_then(Value::as_str) == Some("api_req_started") {
            parsed.at_ms = obj.get("ts").and_then(Value::as_i64);
            parsed.usage = api_request_usage(obj);
        }
        return Some(parsed);
    }
    let ts = obj.get("ts").and_then(Value::as_i64);
    parsed.at_ms = ts;
    let mut parts = Vec::new();
    for part in content_parts(obj.get("content")?)? {
        match part {
            Part::Text(text) => parts.extend(cline_text(text, &mut parsed)),
            other => parts.push(other),
        }
    }
    let role = match obj.get("role").and_then(Value::as_str)? {
        "user" => role_of(Role::User, &parts),
        "assistant" => Role::Assistant,
        _ => Role::System,
    };
    match role {
        Role::User => parsed.prompt = typed_prompt(&parts),
        Role::Assistant => {
            let info = obj.get("modelInfo").and_then(Value::as_object);
            parsed.model = info.and_then(|i| string(i, "modelId").or_else(|| string(i, "id")));
        }
        _ => {}
    }
    let key = string(obj, "id").or_else(|| ts.map(|t| t.to_string()));
    // CLI 3 keeps a reply's tokens with it (its input counts the cached input but for
    // Anthropic's API, which reports them apart).
    let metrics = obj.get("metrics").and_then(Value::as_object);
    if let Some(metrics) = metrics.filter(|m| m.contains_key("inputTokens")) {
        let provider = (obj.get("modelInfo").and_then(Value::as_object))
            .and_then(|i| string(i, "provider"))
            .unwrap_or_default();
        let fields = [
            "inputTokens",
            "outputTokens",
            "cacheReadTokens",
            "cacheWriteTokens",
        ];
        let input_total = !provider.starts_with("anthropic");
        parsed.usage = Usage::of(metrics, fields, input_total)
            .map(|u| u.keyed(key.clone(), parsed.model.clone()));
    }
    parsed.message = Some(Message {
        upsert: true,
        ..Message::new(key, role, parts)
    });
    Some(parsed)
}

/// The tokens of the call an `api_req_started` entry of CLI 2 (or the extension) shows, in
/// its `text` (JSON: `tokensIn` without the cache, `tokensOut`, `cacheReads`, `cacheWrites`),
/// keyed by the entry's time within its task.
fn api_request_usage(obj: &Map<String, Value>) -> Option<Usage> {
    let text = string(obj, "text")?;
    let shown: Value = serde_json::from_str(&text).ok()?;
    let fields = ["tokensIn", "tokensOut", "cacheReads", "cacheWrites"];
    let usage = Usage::of(shown.as_object()?, fields, false)?;
    let key = obj.get("ts").map(|t| format!("api_req:{t}"));
    Some(usage.keyed_in_session(key, None))
}

/// A text block of Cline's as a part: the prompt out of its `<task>` or `<user_input>`
/// wrapper; a tool's result (`[execute_command for '…'] Result:`) as one; the environment
/// details it appends to each user message read for the working directory and not shown,
/// nor its task-progress reminder.
pub(super) fn cline_text(text: String, parsed: &mut Parsed) -> Option<Part> {
    let trimmed = text.trim();
    if let Some(details) = trimmed.strip_prefix("<environment_details>") {
        // Roo Code, a fork, says "Workspace" where Cline says "Working".
        let cwd = (details.split_once("# Current Working Directory ("))
            .or_else(|| details.split_once("# Current Workspace Directory ("));
        let cwd = cwd.and_then(|(_, rest)| rest.split_once(") Files"));
        parsed.project = parsed.project.take().or(cwd.map(|(dir, _)| dir.to_owned()));
        return None;
    }
    if trimmed.starts_with("# task_progress") {
        return None;
    }
    for (open, close) in [("<task>", "</task>"), ("<user_input", "</user_input>")] {
        if let Some(inner) = trimmed.strip_prefix(open) {
            let inner = inner.split_once('>').map_or(inner, |(_, i)| i);
            let inner = if open == "<task>" {
                trimmed[open.len()..].trim_end_matches(close)
            } else {
                inner.trim_end_matches(close)
            };
            return Some(Part::Text(inner.trim().to_owned()));
        }
    }
    if trimmed.starts_with('[') && trimmed.contains("] Result:") {
        return Some(Part::ToolResult(text));
    }
    Some(Part::Text(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(record: Value) -> Parsed {
        cline(record.as_object().unwrap()).unwrap()
    }

    #[test]
    fn a_task_prompt_is_unwrapped_and_its_environment_names_the_project() {
        let p = parsed(serde_json::json!({"role": "user", "ts": 7, "content": [
            {"type": "text", "text": "<task>\nFix the build\n</task>"},
            {"type": "text", "text": "\n# task_progress RECOMMENDED\n..."},
            {"type": "text", "text": "<environment_details>\n# Current Working Directory (/w/app) Files\n</environment_details>"},
        ]}));
        assert_eq!(p.prompt.as_deref(), Some("Fix the build"));
        assert_eq!(p.project.as_deref(), Some("/w/app"));
        let m = p.message.unwrap();
        assert_eq!((m.key.as_deref(), m.role), (Some("7"), Role::User));
        assert_eq!(m.parts, vec![Part::Text("Fix the build".into())]);
    }

    #[test]
    fn a_tool_result_in_text_is_a_tool_message_and_input_is_unwrapped() {
        let p = parsed(serde_json::json!({"role": "user", "ts": 8, "content": [
            {"type": "text", "text": "[execute_command for 'ls'] Result:\nCommand executed."},
        ]}));
        assert_eq!(p.message.unwrap().role, Role::Tool);
        let p = parsed(
            serde_json::json!({"id": "u1", "role": "user", "ts": 9, "content": [
                {"type": "text", "text": "<user_input mode=\"act\">Hello there</user_input>"},
            ]}),
        );
        assert_eq!(p.prompt.as_deref(), Some("Hello there"));
        assert_eq!(p.message.unwrap().key.as_deref(), Some("u1"));
    }
}
