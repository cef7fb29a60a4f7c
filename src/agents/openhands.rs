//! OpenHands' conversations (its CLI, on its Software Agent SDK): a conversation's folder holds
//! `base_state.json` (its id, the agent and its model, the workspace's `working_dir`, and
//! `stats`, running totals of tokens), rewritten whole, and `events/event-<n>-<id>.json`, one event a file, written once. A
//! subagent keeps the same files in `subagents/<id>/`.
//!
//! An event is `{id, timestamp, source, kind}` and its kind's fields: `MessageEvent` a prompt
//! or a reply (`llm_message: {role, content}`), `ActionEvent` a tool call with the thought
//! before it (`thought`, `tool_call: {name, arguments}`), `ObservationEvent`,
//! `AgentErrorEvent` and `UserRejectObservation` what came back, `Condensation` a compaction
//! (`summary`, the ids it forgot), `CondensationRequest` a request for one. The others (the
//! system prompt, state updates, pauses, hooks) are the agent's bookkeeping.

use super::Agent;
use super::message::*;
use super::restore::{self, Restore, Resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};
use std::path::Path;

/// OpenHands (its conversations' files).
pub(crate) static AGENT: Agent = Agent {
    name: "openhands",
    watcher: include_str!("../../watchers/openhands.toml"),
    formats: Formats::NONE,
    parse: openhands,
    unread: &[],
    identify,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// A conversation is its folder under `conversations/`; a subagent its folder under
/// `subagents/`, with the conversation as parent.
fn identify(path: &Path, first: &Parsed) -> Identified {
    let folders: Vec<String> = (path.ancestors().skip(1))
        .take_while(|a| a.file_name() != Some("conversations".as_ref()))
        .filter_map(|a| Some(a.file_name()?.to_string_lossy().into_owned()))
        .filter(|name| name != "events")
        .collect();
    match folders.as_slice() {
        [sub, below, conversation] if below == "subagents" => Identified {
            session: sub.clone(),
            parent: Some(conversation.clone()),
            project: None,
        },
        [conversation] => Identified {
            session: conversation.clone(),
            parent: None,
            project: None,
        },
        _ => Identified::by_folder(path, first),
    }
}

/// `openhands --resume ID`, from the project's directory.
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!(
        "{}openhands --resume {}",
        r.cd,
        restore::shell_quote(r.id)
    ))
}

/// `base_state.json` whole, one of its calls' tokens, or an event.
pub(super) fn openhands(obj: &Map<String, Value>) -> Option<Parsed> {
    if obj.contains_key("agent") && obj.contains_key("workspace") {
        return Some(state(obj));
    }
    let mut parsed = Parsed {
        at_ms: timestamp_ms(obj),
        ..Parsed::default()
    };
    let key = string(obj, "id");
    let (role, parts) = match string(obj, "kind")?.as_str() {
        "MessageEvent" => message(obj)?,
        "ActionEvent" => (Role::Assistant, action(obj)),
        "ObservationEvent" | "AgentErrorEvent" | "UserRejectObservation" => {
            (Role::Tool, vec![Part::ToolResult(observation(obj))])
        }
        "Condensation" => {
            let summary = string(obj, "summary").unwrap_or_default();
            (Role::Compact, vec![Part::Text(summary)])
        }
        "CondensationRequest" => (
            Role::System,
            vec![Part::Text("condensation requested".into())],
        ),
        // The system prompt, state updates, pauses, hooks: the agent's bookkeeping.
        _ => return Some(parsed),
    };
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    parsed.message = Some(Message::new(key, role_of(role, &parts), parts));
    Some(parsed)
}

/// The conversation's id, project and model.
fn state(obj: &Map<String, Value>) -> Parsed {
    let working_dir = obj.get("workspace").and_then(|w| w.get("working_dir"));
    let model = obj.get("agent").and_then(|a| a.pointer("/llm/model"));
    Parsed {
        session_id: string(obj, "id"),
        project: working_dir.and_then(Value::as_str).map(str::to_owned),
        model: model.and_then(Value::as_str).map(str::to_owned),
        ..Parsed::default()
    }
}

/// A prompt (`source: user`) or a reply, with its reasoning where the model gave one.
fn message(obj: &Map<String, Value>) -> Option<(Role, Vec<Part>)> {
    let llm = obj.get("llm_message")?.as_object()?;
    let mut parts = reasoning(llm);
    parts.extend(content_parts(llm.get("content")?)?);
    let role = match string(llm, "role")?.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => Role::System,
    };
    Some((role, parts))
}

/// A tool call and the thought the model wrote before it.
fn action(obj: &Map<String, Value>) -> Vec<Part> {
    let mut parts = reasoning(obj);
    let thought = obj.get("thought").and_then(content_parts);
    parts.extend(thought.into_iter().flatten());
    let call = obj.get("tool_call").and_then(Value::as_object);
    parts.extend(call.map(|c| Part::ToolCall {
        name: string(c, "name").unwrap_or_default(),
        input: input_text(c.get("arguments")),
    }));
    parts
}

/// The model's reasoning, as text (`reasoning_content`).
fn reasoning(obj: &Map<String, Value>) -> Vec<Part> {
    let text = string(obj, "reasoning_content").filter(|t| !t.is_empty());
    text.map(Part::Thinking).into_iter().collect()
}

/// What came back from a tool: the observation's text, an error, or why the person refused.
fn observation(obj: &Map<String, Value>) -> String {
    let content = obj.get("observation").and_then(|o| o.get("content"));
    content
        .map(|c| result_text(Some(c)))
        .or_else(|| string(obj, "error"))
        .or_else(|| string(obj, "rejection_reason"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(json: &str) -> Parsed {
        let value: Value = serde_json::from_str(json).unwrap();
        openhands(value.as_object().unwrap()).unwrap()
    }

    #[test]
    fn a_conversation_is_its_folder_and_a_subagent_names_it_as_parent() {
        let id = |path: &str| identify(Path::new(path), &Parsed::default());
        let root = "/h/.openhands/conversations/c0ffee";
        let session = id(&format!("{root}/events/event-00001-a.json"));
        assert_eq!((session.session.as_str(), session.parent), ("c0ffee", None));
        assert_eq!(id(&format!("{root}/base_state.json")).session, "c0ffee");
        let sub = id(&format!("{root}/subagents/5ub/events/event-00000-b.json"));
        assert_eq!(
            (sub.session.as_str(), sub.parent.as_deref()),
            ("5ub", Some("c0ffee"))
        );
    }

    #[test]
    fn an_action_is_the_thought_and_the_call_and_an_observation_its_result() {
        let action = parsed(
            r#"{"id": "a1", "timestamp": "2026-12-05T03:41:21.672303", "source": "agent",
                "thought": [{"type": "text", "text": "I will look."}],
                "tool_call": {"name": "terminal", "arguments": "{\"command\": \"ls\"}"},
                "kind": "ActionEvent"}"#,
        );
        let message = action.message.unwrap();
        assert_eq!(message.role, Role::Assistant);
        assert_eq!(message.key.as_deref(), Some("a1"));
        assert_eq!(message.parts[0], Part::Text("I will look.".into()));
        assert_eq!(action.at_ms, time_ms("2026-12-05T03:41:21.672303"));
        let seen = parsed(
            r#"{"id": "o1", "kind": "ObservationEvent", "observation":
                {"content": [{"type": "text", "text": "out"}]}}"#,
        );
        assert_eq!(
            seen.message.unwrap().parts,
            [Part::ToolResult("out".into())]
        );
        let error = parsed(r#"{"id": "e1", "kind": "AgentErrorEvent", "error": "bad call"}"#);
        assert_eq!(
            error.message.unwrap().parts,
            [Part::ToolResult("bad call".into())]
        );
    }

    #[test]
    fn a_condensation_is_a_compaction_and_the_system_prompt_no_message() {
        let condensed = parsed(
            r#"{"id": "k1", "kind": "Condensation", "summary": "What was done.",
                "forgotten_event_ids": ["a1"]}"#,
        );
        assert_eq!(condensed.message.unwrap().role, Role::Compact);
        let system = parsed(r#"{"id": "s1", "kind": "SystemPromptEvent", "tools": []}"#);
        assert_eq!(system.message, None);
    }

    #[test]
    fn the_state_names_the_conversation_its_project_and_its_model() {
        let state = parsed(
            r#"{"id": "c0", "agent": {"llm": {"model": "openai/m"}},
                "workspace": {"working_dir": "/p", "kind": "LocalWorkspace"}}"#,
        );
        let said = (state.session_id, state.project, state.model);
        let expected = (
            Some("c0".into()),
            Some("/p".into()),
            Some("openai/m".into()),
        );
        assert_eq!(said, expected);
    }
}
