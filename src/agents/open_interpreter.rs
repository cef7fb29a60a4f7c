//! Open Interpreter's conversations: each one a JSON list of its messages, rewritten whole
//! after every exchange, taken apart by the snapshot reader and keyed by place (they have no
//! ids). A message is `{role, type, format, content}` (its "LMC" messages): the person's
//! `user` `message`, the model's `assistant` `message` and `code` (what it runs, `format`
//! naming the language), and the `computer`'s `console` output of that code; `image` and
//! `file` messages carry a path or base64, shown as their kind.
//!
//! Nothing in it says when, where or with which model: its times are when its records were
//! archived, and its sessions have no project. As open-interpreter 0.4.3 writes them
//! (`interpreter/core/core.py`, `scripts/agents/record`).

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Open Interpreter (its conversations, rewritten whole):
/// `conversations/<first words>__<local time>.json`, a session named by the file's stem.
pub(crate) static AGENT: Agent = Agent {
    name: "open-interpreter",
    watcher: include_str!("../../watchers/open-interpreter.toml"),
    formats: Formats::NONE,
    parse,
    unread: &[],
    identify: Identified::by_stem,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `interpreter --conversations` lists the conversations to go on with, the latest first:
/// the session is picked there (it takes no id). Pointed at `--to` through
/// `$XDG_CONFIG_HOME`, where it keeps them on Linux.
fn resume(r: &Resume) -> Option<String> {
    let home = r.home("XDG_CONFIG_HOME");
    Some(format!("{}{home}interpreter --conversations", r.cd))
}

/// One message of the conversation.
fn parse(obj: &Map<String, Value>) -> Option<Parsed> {
    let kind = obj.get("type").and_then(Value::as_str)?;
    let content = obj.get("content");
    let text = || content.and_then(Value::as_str).map(str::to_owned);
    let part = match kind {
        "message" => Part::Text(text()?),
        "code" => Part::ToolCall {
            name: string(obj, "format").unwrap_or_else(|| "code".to_owned()),
            input: text()?,
        },
        "console" => Part::ToolResult(text()?),
        // A path, a URL or base64: its kind and format say what it was.
        "image" | "file" => Part::Text(match string(obj, "format") {
            Some(format) => format!("[{kind}: {format}]"),
            None => format!("[{kind}]"),
        }),
        _ => return None,
    };
    let role = match obj.get("role").and_then(Value::as_str)? {
        "user" => Role::User,
        "assistant" => role_of(Role::Assistant, std::slice::from_ref(&part)),
        "computer" => Role::Tool,
        _ => Role::System,
    };
    let mut parsed = Parsed::default();
    let parts = vec![part];
    if role == Role::User && kind == "message" {
        parsed.prompt = typed_prompt(&parts);
    }
    parsed.message = Some(Message::new(None, role, parts));
    Some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(record: Value) -> Message {
        parse(record.as_object().unwrap()).unwrap().message.unwrap()
    }

    #[test]
    fn code_the_model_runs_is_a_tool_call_named_by_its_language_and_its_output_the_result() {
        let code = message(serde_json::json!({"role": "assistant", "type": "code",
            "format": "shell", "content": "echo hi"}));
        assert_eq!(code.role, Role::Tool);
        let call = Part::ToolCall {
            name: "shell".into(),
            input: "echo hi".into(),
        };
        assert_eq!(code.parts, [call]);
        let output = message(serde_json::json!({"role": "computer", "type": "console",
            "format": "output", "content": "\nhi\n"}));
        assert_eq!(output.role, Role::Tool);
        assert_eq!(output.parts, [Part::ToolResult("\nhi\n".into())]);
    }

    #[test]
    fn the_persons_message_is_the_prompt_and_an_image_is_shown_as_its_kind() {
        let asked = serde_json::json!({"role": "user", "type": "message", "content": "Fix it"});
        let parsed = parse(asked.as_object().unwrap()).unwrap();
        assert_eq!(parsed.prompt.as_deref(), Some("Fix it"));
        assert_eq!(parsed.message.unwrap().role, Role::User);
        let image = message(serde_json::json!({"role": "user", "type": "image",
            "format": "base64.png", "content": "iVBORw0KGgo="}));
        assert_eq!(image.parts, [Part::Text("[image: base64.png]".into())]);
    }

    #[test]
    fn a_message_of_a_type_it_does_not_know_is_not_read() {
        let record = serde_json::json!({"role": "assistant", "type": "review", "content": "x"});
        assert_eq!(parse(record.as_object().unwrap()), None);
    }
}
