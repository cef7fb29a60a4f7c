//! Continue: its CLI (`cn`) and its editor extensions keep each session as a JSON document
//! rewritten whole, taken apart by the snapshot reader: the document around the history
//! (`sessionId`, `title`, `workspaceDirectory`), and each item of the history,
//! `{message: {role, content, toolCalls, usage}, contextItems, toolCallStates}`, keyed by its
//! place (items have no ids), a tool call's result in its item's `toolCallStates[].output`.
//! Nothing in it says when: its times are when its records were archived. As @continuedev/cli
//! 1.5.47 writes them (`scripts/agents/record`).

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Continue (its CLI's and editor extensions' sessions, rewritten whole):
/// `sessions/<session id>.json`.
pub(crate) static AGENT: Agent = Agent {
    name: "continue",
    watcher: include_str!("../../watchers/continue.toml"),
    formats: Formats::NONE,
    parse,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `cn --fork ID` from the project's directory: the CLI goes on from a copy of the session
/// (the extensions open it from their history).
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!("{}cn --fork {}", r.cd, r.id))
}

/// The document around the history, or one item of it.
fn parse(obj: &Map<String, Value>) -> Option<Parsed> {
    if obj.contains_key("history") {
        // Until it is named, a session is "Untitled Session".
        let title = string(obj, "title").filter(|t| t != "Untitled Session");
        return Some(Parsed {
            session_id: string(obj, "sessionId"),
            project: string(obj, "workspaceDirectory"),
            title: title.map(|t| (title_of(&t), 2)),
            ..Parsed::default()
        });
    }
    let message = obj.get("message")?.as_object()?;
    let mut parts = content(message.get("content"));
    let calls = message.get("toolCalls").and_then(Value::as_array);
    parts.extend(calls.into_iter().flatten().filter_map(tool_call));
    let states = obj.get("toolCallStates").and_then(Value::as_array);
    parts.extend(states.into_iter().flatten().filter_map(tool_result));
    let role = match message.get("role").and_then(Value::as_str)? {
        "thinking" => Role::Reasoning,
        name => role_named(name, &parts),
    };
    let counts = message.get("usage");
    let mut parsed = Parsed {
        usage: counts.and_then(usage),
        model: counts
            .and_then(|u| u.get("model")?.as_str())
            .map(str::to_owned),
        ..Parsed::default()
    };
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    parsed.message = Some(Message::new(None, role, parts));
    Some(parsed)
}

/// A message's content: a string, or parts of which the text ones are read.
fn content(value: Option<&Value>) -> Vec<Part> {
    match value {
        Some(Value::String(text)) if !text.is_empty() => vec![Part::Text(text.clone())],
        Some(Value::Array(items)) => (items.iter())
            .filter_map(|i| Some(Part::Text(string(i.as_object()?, "text")?)))
            .collect(),
        _ => Vec::new(),
    }
}

/// A tool call of OpenAI's shape: `{id, type: "function", function: {name, arguments}}`.
fn tool_call(call: &Value) -> Option<Part> {
    let function = call.get("function")?.as_object()?;
    Some(Part::ToolCall {
        name: string(function, "name")?,
        input: input_text(function.get("arguments")),
    })
}

/// A tool call's state, with the result it gave: the text of its `output` items.
fn tool_result(state: &Value) -> Option<Part> {
    let output = state.get("output")?.as_array()?;
    let texts: Vec<String> = (output.iter())
        .filter_map(|o| string(o.as_object()?, "content"))
        .collect();
    Some(Part::ToolResult(texts.join("\n")))
}

/// The tokens of the reply's model call (OpenAI's counts: the prompt's include the cached).
fn usage(counts: &Value) -> Option<Usage> {
    let n = |pointer: &str| counts.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
    let cache_read = n("/prompt_tokens_details/cached_tokens");
    Some(Usage {
        model: counts.get("model")?.as_str().map(str::to_owned),
        input: (counts.get("prompt_tokens")?.as_i64()? - cache_read).max(0),
        output: n("/completion_tokens"),
        cache_read,
        ..Usage::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_reads_its_text_its_tool_calls_their_results_and_its_tokens() {
        let item = serde_json::json!({"message": {"role": "assistant", "content": "On it.",
            "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "Bash",
            "arguments": "{\"command\":\"ls\"}"}}], "usage": {"prompt_tokens": 160,
            "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 40},
            "model": "m1"}}, "contextItems": [], "toolCallStates": [{"toolCallId": "c1",
            "status": "done", "output": [{"content": "a.txt\n", "name": "Tool Result"}]}]});
        let parsed = parse(item.as_object().unwrap()).unwrap();
        let message = parsed.message.unwrap();
        assert_eq!(message.role, Role::Assistant);
        assert!(matches!(&message.parts[1], Part::ToolCall { name, .. } if name == "Bash"));
        assert_eq!(message.parts[2], Part::ToolResult("a.txt\n".into()));
        let usage = parsed.usage.unwrap();
        assert_eq!((usage.input, usage.output, usage.cache_read), (120, 30, 40));
        assert_eq!(parsed.model.as_deref(), Some("m1"));
    }

    #[test]
    fn the_document_names_its_session_and_project_and_untitled_is_no_title() {
        let doc = serde_json::json!({"sessionId": "s1", "title": "Untitled Session",
            "workspaceDirectory": "/w", "history": []});
        let parsed = parse(doc.as_object().unwrap()).unwrap();
        assert_eq!(parsed.session_id.as_deref(), Some("s1"));
        assert_eq!(parsed.project.as_deref(), Some("/w"));
        assert_eq!(parsed.title, None);
    }
}
