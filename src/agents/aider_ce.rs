//! Aider CE (cecli, PyPI `aider-ce`), the community fork of Aider: it keeps its files in each
//! project's `.cecli/` folder.
//!
//! - Its sessions, saved as it goes (`--auto-save`) or by `/save-session NAME`: a payload
//!   rewritten whole, `{session_name, agent_name, model, chat_history: {done_messages,
//!   cur_messages}, files, usage, …}`, whose messages are OpenAI's chat messages (`role`,
//!   `content`, `tool_calls`, a tool's `tool_call_id`), without ids or times. An auto-saved
//!   one is `agents/<date>/<agent id>/<name>.json`, pointed at by a reference,
//!   `sessions/<name>.json` (`{type: "session-reference", path}`); a named one is
//!   `sessions/<name>.json`, or `sessions/<name>/primary.json` when it has subagents. A
//!   subagent's payload is in `s/<agent id>/` beside its session's.
//! - Its chat log, `chat.history`: Aider's Markdown history (read by Aider's reader), which
//!   holds no tool's output.
//!
//! A payload is read as its document around the messages, then `done_messages` and
//! `cur_messages` as one list keyed by place: a turn that ends moves its messages from the
//! second list to the first, in order, and keeps their places. As aider-ce 1.10.0 writes them
//! (`cecli/helpers/sessions/`, `scripts/agents/record`).

use super::aider;
use super::message::*;
use super::restore::{Restore, Resume, shell_quote};
use super::session::Identified;
use super::{Agent, Unwatched};
use crate::capture::harness::Formats;
use crate::domain::TextFormat;
use crate::read::snapshot::Entry;
use serde_json::{Map, Value};
use std::path::{Component, Path};

/// Aider CE (its sessions and chat log in each project).
pub(crate) static AGENT: Agent = Agent {
    name: "aider-ce",
    watcher: include_str!("../../watchers/aider-ce.toml"),
    formats: Formats {
        databases: &[],
        documents: &[
            aider::HISTORY,
            TextFormat {
                name: "aider-ce",
                derive: payload,
            },
        ],
    },
    parse,
    unread: &[],
    identify,
    restore: Restore::keeping_layout(resume),
    doctor: Some(Unwatched {
        ran: ".cecli",
        message: "Aider CE has run here, but no [[watch]] table names its projects: their \
                  .cecli/ sessions are not archived",
        fix: "add to config.toml: [[watch]] path = \"~/src\" harness = \"aider-ce\" (a project, \
              or a folder of projects)",
    }),
};

/// What the place of a file below `.cecli/` names.
enum Place<'a> {
    /// `chat.history`.
    Log,
    /// An auto-saved payload: its agent's id, and its session's when it is a subagent's.
    Agent(&'a str, Option<&'a str>),
    /// `sessions/<name>.json`: a reference, or a named session's payload.
    Named(&'a str),
    /// `sessions/<name>/primary.json`, or a subagent's payload in `s/<id>/` beside it.
    Bundle(&'a str, Option<&'a str>),
}

/// The project (the folder `.cecli/` is in) and what the path below it names.
fn place(path: &Path) -> Option<(&Path, Place<'_>)> {
    let parts: Vec<&str> = (path.components())
        .filter_map(|c| match c {
            Component::Normal(n) => n.to_str(),
            _ => None,
        })
        .collect();
    let at = parts.iter().rposition(|p| *p == ".cecli")?;
    let project = path.ancestors().nth(parts.len() - at)?;
    let place = match parts[at + 1..] {
        ["chat.history"] => Place::Log,
        ["agents", _, id, _] => Place::Agent(id, None),
        ["agents", _, parent, "s", id, _] => Place::Agent(id, Some(parent)),
        ["sessions", file] => Place::Named(file.strip_suffix(".json").unwrap_or(file)),
        ["sessions", name, "primary.json"] => Place::Bundle(name, None),
        ["sessions", name, "s", id, _] => Place::Bundle(id, Some(name)),
        _ => return None,
    };
    Some((project, place))
}

/// A named session: `<name>@<project>-<hash>`, since every project has its own names.
fn named(name: &str, project: &Path) -> String {
    format!("{name}@{}", aider::named_by_project(project))
}

/// An auto-saved session by its agent's id (a reference, by the id of the agent whose payload
/// it points at); a named one by its name in its project; the chat log as Aider's history.
fn identify(path: &Path, first: &Parsed) -> Identified {
    let Some((project, place)) = place(path) else {
        return Identified::by_stem(path, first);
    };
    let (session, parent) = match place {
        Place::Log => (aider::named_by_project(project), None),
        Place::Agent(id, parent) => (id.to_owned(), parent.map(str::to_owned)),
        Place::Named(name) => {
            let named = || named(name, project);
            (first.session_id.clone().unwrap_or_else(named), None)
        }
        Place::Bundle(name, None) => (named(name, project), None),
        Place::Bundle(id, Some(name)) => (id.to_owned(), Some(named(name, project))),
    };
    Identified {
        session,
        parent,
        project: Some(project.to_string_lossy().into_owned()),
    }
}

/// `cecli --auto-load` in the project, which asks, then loads the session its auto-save
/// reference points at; with `--auto-save-session-name NAME`, a named one. Its chat log is no
/// session it loads.
fn resume(r: &Resume) -> Option<String> {
    let name = match r.id.split_once('@') {
        Some((name, _)) => format!(" --auto-save-session-name {}", shell_quote(name)),
        None if is_log(r.id) => return None,
        None => String::new(),
    };
    r.in_place(format!("{}cecli --auto-load{name}", r.cd))
}

/// Whether `id` is a chat log's: `<folder>-<hash>`, eight hex digits after the last `-`.
fn is_log(id: &str) -> bool {
    let hash = id.rsplit_once('-').map_or("", |(_, hash)| hash);
    hash.len() == 8 && hash.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A payload's entries: the document around its messages (its lists emptied), then
/// `done_messages` and `cur_messages` as one list keyed by place; any other document (a
/// reference) is one entry. `Err` for text that is not JSON.
fn payload(text: &str) -> Result<Vec<Entry>, String> {
    let mut doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut messages = Vec::new();
    if let Some(history) = doc.get_mut("chat_history").and_then(Value::as_object_mut) {
        for list in ["done_messages", "cur_messages"] {
            if let Some(Value::Array(items)) = history.get_mut(list) {
                messages.append(items);
            }
        }
    }
    let around = Entry {
        key: None,
        record: doc.to_string().into_bytes(),
    };
    let keyed = messages.iter().enumerate().map(|(place, m)| Entry {
        key: Some(format!("#{place}")),
        record: m.to_string().into_bytes(),
    });
    Ok(std::iter::once(around).chain(keyed).collect())
}

/// A block of the chat log; a reference; the payload around its messages; or one message.
fn parse(obj: &Map<String, Value>) -> Option<Parsed> {
    if obj.contains_key("at") {
        return aider::aider(obj);
    }
    if obj.get("type").and_then(Value::as_str) == Some("session-reference") {
        let target = Path::new(obj.get("path")?.as_str()?);
        let id = target.parent().and_then(Path::file_name)?;
        return Some(Parsed {
            session_id: Some(id.to_string_lossy().into_owned()),
            ..Parsed::default()
        });
    }
    if obj.contains_key("chat_history") {
        return Some(Parsed {
            model: string(obj, "model"),
            ..Parsed::default()
        });
    }
    message(obj)
}

/// What Aider CE wraps the person's words in.
const USER_INPUT: &str = "<context name=\"user_input\" from=\"agent\">";

/// A chat message: its text, its tool calls, or (a tool's) the output of its call.
fn message(obj: &Map<String, Value>) -> Option<Parsed> {
    let name = obj.get("role")?.as_str()?;
    let mut parts = match obj.get("content") {
        Some(Value::String(text)) if name == "tool" => vec![Part::ToolResult(tool_output(text))],
        Some(content) => content_parts(content).unwrap_or_default(),
        None => Vec::new(),
    };
    parts.retain(|p| !matches!(p, Part::Text(t) if t.is_empty()));
    let calls = obj.get("tool_calls").and_then(Value::as_array);
    parts.extend(calls.into_iter().flatten().filter_map(tool_call));
    let role = match name {
        "user" => user_role(&mut parts),
        "assistant"
            if parts
                .first()
                .is_some_and(|p| p.text().starts_with(SUBAGENT_THANKS)) =>
        {
            Role::System
        }
        _ => role_named(name, &parts),
    };
    let mut parsed = Parsed::default();
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    parsed.message = Some(Message::new(None, role, parts));
    Some(parsed)
}

/// What Aider CE says itself, as the person and as the model, when a subagent ends
/// (`cecli/helpers/agents/service.py`).
const SUBAGENT_REPORT: &str = "The **";
const SUBAGENT_THANKS: &str = "Thank you for sharing the summary for ";

/// The person's words, taken out of their context block; a user message of Aider CE's own
/// (another context block, a subagent's report) is the agent's.
fn user_role(parts: &mut [Part]) -> Role {
    if let Some(Part::Text(text)) = parts.first_mut()
        && let Some(words) = typed_words(text)
    {
        *text = words;
        return Role::User;
    }
    let text = parts.first().map(Part::text).unwrap_or_default();
    let report = text.starts_with(SUBAGENT_REPORT) && text.contains(" agent (`");
    match report || text.starts_with("<context") {
        true => Role::System,
        false => role_of(Role::User, parts),
    }
}

/// What the person typed, when `text` is the context block Aider CE puts it in.
fn typed_words(text: &str) -> Option<String> {
    let inside = text.trim().strip_prefix(USER_INPUT)?;
    Some(
        inside
            .trim_end()
            .trim_end_matches("</context>")
            .trim()
            .to_owned(),
    )
}

/// A tool call of OpenAI's shape: `{id, type: "function", function: {name, arguments}}`.
fn tool_call(call: &Value) -> Option<Part> {
    let function = call.get("function")?.as_object()?;
    Some(Part::ToolCall {
        name: string(function, "name")?,
        input: input_text(function.get("arguments")),
    })
}

/// A tool's output as Aider CE gives it to the model, `{"result": [{"content"}], "errors"}`:
/// the text of its results and errors; the text as it is when it is not such a document.
fn tool_output(text: &str) -> String {
    let Ok(Value::Object(response)) = serde_json::from_str::<Value>(text) else {
        return text.to_owned();
    };
    let texts = ["result", "errors"].into_iter().flat_map(|list| {
        let items = response.get(list).and_then(Value::as_array);
        items.into_iter().flatten().map(|item| match item {
            Value::String(s) => s.clone(),
            other => other
                .get("content")
                .map_or_else(|| other.to_string(), |c| input_text(Some(c))),
        })
    });
    texts.collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(record: Value) -> Parsed {
        parse(record.as_object().unwrap()).unwrap()
    }

    #[test]
    fn the_persons_words_are_taken_out_of_their_context_block() {
        let asked = parsed(serde_json::json!({"role": "user",
            "content": "<context name=\"user_input\" from=\"agent\">\nFix it\n</context>"}));
        assert_eq!(asked.prompt.as_deref(), Some("Fix it"));
        let message = asked.message.unwrap();
        assert_eq!(message.role, Role::User);
        assert_eq!(message.parts, [Part::Text("Fix it".into())]);
    }

    #[test]
    fn a_subagents_report_and_its_thanks_are_the_agents_own() {
        let report = parsed(serde_json::json!({"role": "user", "content":
            "The **worker** agent (`2e9c1fa8`) completed with the following summary:\nDone"}));
        assert_eq!(report.prompt, None);
        assert_eq!(report.message.unwrap().role, Role::System);
        let thanks = parsed(serde_json::json!({"role": "assistant", "content":
            "Thank you for sharing the summary for worker agent `2e9c1fa8`."}));
        assert_eq!(thanks.message.unwrap().role, Role::System);
    }

    #[test]
    fn a_tools_output_is_the_text_of_its_results_and_errors() {
        let output = r#"{"result": [{"content": "Output:\nhi\r\n", "_": {}}], "errors": ["late"]}"#;
        let message = parsed(serde_json::json!({"role": "tool", "tool_call_id": "c1",
            "content": output}))
        .message
        .unwrap();
        assert_eq!(message.role, Role::Tool);
        assert_eq!(
            message.parts,
            [Part::ToolResult("Output:\nhi\r\n\nlate".into())]
        );
        let call = parsed(serde_json::json!({"role": "assistant", "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function":
            {"name": "local--Command", "arguments": "{\"command\": \"ls\"}"}}]}));
        let parts = call.message.unwrap().parts;
        assert!(matches!(&parts[..], [Part::ToolCall { name, .. }] if name == "local--Command"));
    }

    #[test]
    fn a_payloads_two_lists_are_one_keyed_by_place_so_a_finished_turn_keeps_its_keys() {
        let turn = r#"{"role": "user", "content": "a"}"#;
        let during = format!(
            r#"{{"model": "m", "chat_history": {{"done_messages": [], "cur_messages": [{turn}]}}}}"#
        );
        let after = format!(
            r#"{{"model": "m", "chat_history": {{"done_messages": [{turn}], "cur_messages": []}}}}"#
        );
        let (during, after) = (payload(&during).unwrap(), payload(&after).unwrap());
        assert_eq!(during, after);
        assert_eq!(during[1].key.as_deref(), Some("#0"));
        let around: Value = serde_json::from_slice(&during[0].record).unwrap();
        assert_eq!(
            around["chat_history"]["cur_messages"],
            serde_json::json!([])
        );
    }

    #[test]
    fn a_reference_names_the_agent_whose_payload_it_points_at() {
        let reference = serde_json::json!({"version": 1, "type": "session-reference",
            "session_name": "auto-save", "path": ".cecli/agents/2026-12-05/5c5598d5/auto-save.json"});
        let first = parsed(reference);
        let at = Path::new("/p/app/.cecli/sessions/auto-save.json");
        let id = identify(at, &first);
        assert_eq!(id.session, "5c5598d5");
        assert_eq!(id.project.as_deref(), Some("/p/app"));
        let payload = Path::new("/p/app/.cecli/agents/2026-12-05/5c5598d5/auto-save.json");
        assert_eq!(identify(payload, &Parsed::default()).session, "5c5598d5");
    }

    #[test]
    fn a_subagent_is_named_by_its_folder_under_its_sessions() {
        let sub = Path::new("/p/app/.cecli/agents/2026-12-05/8f1e04c6/s/2e9c1fa8/auto-save.json");
        let id = identify(sub, &Parsed::default());
        assert_eq!(
            (id.session.as_str(), id.parent.as_deref()),
            ("2e9c1fa8", Some("8f1e04c6"))
        );
        let bundled = Path::new("/p/app/.cecli/sessions/fix/s/2e9c1fa8/agent.json");
        let id = identify(bundled, &Parsed::default());
        let parent = id.parent.unwrap();
        assert!(parent.starts_with("fix@app-"), "{parent}");
        let resumed = resume(&Resume {
            id: &parent,
            cd: "",
            to: None,
            files: &[],
        });
        assert_eq!(
            resumed.as_deref(),
            Some("cecli --auto-load --auto-save-session-name fix")
        );
    }

    #[test]
    fn an_auto_saved_session_resumes_with_auto_load_and_the_chat_log_with_nothing() {
        let log = identify(Path::new("/p/app/.cecli/chat.history"), &Parsed::default());
        assert!(log.session.starts_with("app-"), "{}", log.session);
        let command = |id: &str| {
            resume(&Resume {
                id,
                cd: "cd /p/app && ",
                to: None,
                files: &[],
            })
        };
        assert_eq!(command(&log.session), None);
        let auto = command("5c5598d5");
        assert_eq!(auto.as_deref(), Some("cd /p/app && cecli --auto-load"));
    }
}
