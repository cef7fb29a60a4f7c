//! GitHub Copilot Chat, as VS Code's chat keeps its sessions (the editor's own chat, which
//! Copilot's extension answers): a file per session, named by its id, in the workspace's
//! storage (`User/workspaceStorage/<workspace>/chatSessions/`, with `workspace.json` naming the
//! workspace's folder beside that folder) or, for a window without a folder,
//! `User/globalStorage/emptyWindowChatSessions/`. The file is in one of two shapes
//! (microsoft/vscode at commit 047238f, `src/vs/workbench/contrib/chat/common/model/`:
//! `chatSessionStore.ts`, `chatModel.ts`, `chatSessionOperationLog.ts`,
//! `objectMutationLog.ts`):
//! - `<id>.json`, before VS Code 1.109: the session as one JSON document rewritten whole
//!   (`ISerializableChatData`, `version` 3: `sessionId`, `creationDate`, `customTitle`,
//!   `requests`);
//! - `<id>.jsonl`, from 1.109 on: a log of the session's changes, appended to. Its
//!   first line is the whole session, `{"kind": 0, "v": …}`; each next one a change at a path
//!   of keys and places, `{"kind": 1, "k": path, "v"}` (set), `{"kind": 2, "k": path, "v"?:
//!   items, "i"?: place}` (cut the list at `i`, then add the items), `{"kind": 3, "k": path}`
//!   (delete). Past 1,024 lines VS Code writes it again as one first line.
//!
//! A request holds both the prompt (`message.text`) and its answer (`response`: markdown
//! `{value}`, `{kind: "thinking"}`, `{kind: "toolInvocationSerialized"}`, …, with `result` and
//! `modelState`). Each request is made into two entries, the prompt keyed by its `requestId`
//! and the answer by `<requestId>/response`, so that each is a message and an answer that
//! grows is archived again under its key; the session around them is one entry more. VS Code
//! keeps no token counts in these files.

use super::Agent;
use super::message::*;
use super::restore::{self, Restore};
use super::session::{Identified, stem};
use crate::capture::harness::Formats;
use crate::domain::{SnapshotEntry, TextFormat};
use serde_json::{Map, Value};
use std::path::Path;

/// GitHub Copilot Chat (VS Code's chat sessions, in every editor of the family).
pub(crate) static AGENT: Agent = Agent {
    name: "copilot-chat",
    watcher: include_str!("../../watchers/copilot-chat.toml"),
    formats: Formats {
        databases: &[],
        documents: &[
            TextFormat {
                name: "vscode-chat",
                derive: document,
            },
            TextFormat {
                name: "vscode-chat-log",
                derive: log,
            },
        ],
    },
    parse: copilot_chat,
    unread: &[],
    identify: in_workspace,
    // VS Code reopens a session from its chat history; it has no command to name.
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};

/// The versions of the session document this reader knows.
const VERSIONS: std::ops::RangeInclusive<u64> = 1..=3;

/// The fields of a request that are its prompt's; the others are its answer's.
const PROMPT_FIELDS: &[&str] = &["message", "variableData", "modeInfo", "editedFileEvents"];

/// `<id>.json`'s entries.
fn document(text: &str) -> Result<Vec<SnapshotEntry>, String> {
    let session: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    entries(session)
}

/// `<id>.jsonl`'s entries: those of the session its log of changes makes.
fn log(text: &str) -> Result<Vec<SnapshotEntry>, String> {
    entries(replay(text)?)
}

/// The session a log of changes makes, from its complete lines (a line still being written
/// is read in the next state).
fn replay(text: &str) -> Result<Value, String> {
    let complete = &text[..text.rfind('\n').map_or(0, |at| at + 1)];
    let mut state = None;
    for (n, line) in complete.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |why: String| format!("line {}: {why}", n + 1);
        let change: Value = serde_json::from_str(line).map_err(|e| at(e.to_string()))?;
        apply(&mut state, &change).map_err(at)?;
    }
    state.ok_or_else(|| "no complete line".to_owned())
}

/// One line of the log applied to the session.
fn apply(state: &mut Option<Value>, change: &Value) -> Result<(), String> {
    let kind = change.get("kind").and_then(Value::as_u64);
    if kind == Some(0) {
        *state = Some(change.get("v").cloned().unwrap_or(Value::Null));
        return Ok(());
    }
    let state = state.as_mut().ok_or("a change before the whole session")?;
    let path = (change.get("k").and_then(Value::as_array)).ok_or("a change without its path")?;
    let Some((last, above)) = path.split_last() else {
        return Err("a change of the whole session".to_owned());
    };
    let mut parent = state;
    for step in above {
        parent = child(parent, step).ok_or_else(|| format!("no value at {path:?}"))?;
    }
    let value = change.get("v");
    match kind {
        Some(1) => set(parent, last, value.cloned().unwrap_or(Value::Null)),
        Some(2) => push(parent, last, value, change.get("i").and_then(Value::as_u64)),
        Some(3) => {
            delete(parent, last);
            Ok(())
        }
        _ => Err(match kind {
            Some(kind) => format!("a change of kind {kind}, which this release does not know"),
            None => "a change without its kind".to_owned(),
        }),
    }
}

/// The value at one step of a path: a key of an object, a place in a list.
fn child<'a>(at: &'a mut Value, step: &Value) -> Option<&'a mut Value> {
    match (at, step) {
        (Value::Object(o), Value::String(key)) => o.get_mut(key),
        (Value::Array(list), Value::Number(n)) => list.get_mut(n.as_u64()? as usize),
        _ => None,
    }
}

/// `parent[step] = value`; a list takes a value at its end too.
fn set(parent: &mut Value, step: &Value, value: Value) -> Result<(), String> {
    match (parent, step) {
        (Value::Object(o), Value::String(key)) => {
            o.insert(key.clone(), value);
            Ok(())
        }
        (Value::Array(list), Value::Number(n)) => match n.as_u64().map(|n| n as usize) {
            Some(at) if at < list.len() => {
                list[at] = value;
                Ok(())
            }
            Some(at) if at == list.len() => {
                list.push(value);
                Ok(())
            }
            _ => Err(format!("no place {n} in a list of {}", list.len())),
        },
        _ => Err(format!("no {step} to set")),
    }
}

/// The list at `parent[step]` (a new one if there is none) cut at `from`, then `items` added.
fn push(
    parent: &mut Value,
    step: &Value,
    items: Option<&Value>,
    from: Option<u64>,
) -> Result<(), String> {
    let list = match (parent, step) {
        (Value::Object(o), Value::String(key)) => o.entry(key.clone()).or_insert(Value::Null),
        (at, step) => child(at, step).ok_or_else(|| format!("no list at {step}"))?,
    };
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    let Value::Array(list) = list else {
        unreachable!("made a list above")
    };
    if let Some(from) = from {
        list.truncate(from as usize);
    }
    if let Some(Value::Array(items)) = items {
        list.extend(items.iter().cloned());
    }
    Ok(())
}

/// `parent[step]` taken away (a place in a list becomes `null`, as in JavaScript).
fn delete(parent: &mut Value, step: &Value) {
    match (parent, step) {
        (Value::Object(o), Value::String(key)) => {
            o.remove(key);
        }
        (at, step) => {
            if let Some(value) = child(at, step) {
                *value = Value::Null;
            }
        }
    }
}

/// A session's entries: the session with its requests taken out, then each request's prompt
/// and answer.
fn entries(mut session: Value) -> Result<Vec<SnapshotEntry>, String> {
    let obj = session
        .as_object_mut()
        .ok_or("the session is not a JSON object")?;
    let requests = match obj.get_mut("requests") {
        Some(Value::Array(list)) => std::mem::take(list),
        Some(_) => return Err("its `requests` is not a list".to_owned()),
        None => Vec::new(),
    };
    let mut entries = vec![entry(None, &session)];
    for (place, request) in requests.into_iter().enumerate() {
        let Value::Object(request) = request else {
            return Err(format!("request {place} is not a JSON object"));
        };
        let key = string(&request, "requestId").unwrap_or_else(|| format!("#{place}"));
        let (prompt, answer) = split(request);
        entries.push(entry(Some(key.clone()), &Value::Object(prompt)));
        entries.push(entry(
            Some(format!("{key}/response")),
            &Value::Object(answer),
        ));
    }
    Ok(entries)
}

/// A request's prompt and its answer, each with the request's id and time.
fn split(request: Map<String, Value>) -> (Map<String, Value>, Map<String, Value>) {
    let mut prompt = Map::new();
    let mut answer = Map::new();
    for (field, value) in request {
        match field.as_str() {
            "requestId" | "timestamp" => {
                prompt.insert(field.clone(), value.clone());
                answer.insert(field, value);
            }
            _ if PROMPT_FIELDS.contains(&field.as_str()) => {
                prompt.insert(field, value);
            }
            _ => {
                answer.insert(field, value);
            }
        }
    }
    (prompt, answer)
}

fn entry(key: Option<String>, value: &Value) -> SnapshotEntry {
    SnapshotEntry {
        key,
        record: serde_json::to_vec(value).expect("a JSON value serializes"),
    }
}

/// The session a chat file is: its id is its name; its project the folder the workspace's
/// `workspace.json`, beside `chatSessions/`, names (none for a window without a folder).
fn in_workspace(path: &Path, _first: &Parsed) -> Identified {
    let workspace = path.parent().and_then(Path::parent);
    Identified {
        session: stem(path),
        parent: None,
        project: workspace.and_then(workspace_folder),
    }
}

/// The folder `<workspace>/workspace.json` names: its `folder` URI's path (a remote one's
/// too), or its `workspace` file's for a multi-root workspace.
fn workspace_folder(workspace: &Path) -> Option<String> {
    let text = std::fs::read_to_string(workspace.join("workspace.json")).ok()?;
    let names: Value = serde_json::from_str(&text).ok()?;
    let uri = names.get("folder").or_else(|| names.get("workspace"))?;
    let uri = uri.as_str()?;
    let path = match uri.split_once("://") {
        Some((_, rest)) => &rest[rest.find('/').unwrap_or(rest.len())..],
        None => uri,
    };
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()?;
    (!decoded.is_empty()).then(|| decoded.into_owned())
}

/// One entry of a chat file: the session, a prompt, or an answer.
fn copilot_chat(obj: &Map<String, Value>) -> Option<Parsed> {
    if obj.contains_key("requests") {
        return session(obj);
    }
    match obj.contains_key("message") {
        true => prompt(obj),
        false => answer(obj),
    }
}

/// The session around its requests: its id, title and time; `None` for a version this reader
/// does not know (counted as not read; its requests are read as far as they can be).
fn session(obj: &Map<String, Value>) -> Option<Parsed> {
    let version = obj.get("version").and_then(Value::as_u64);
    if version.is_some_and(|v| !VERSIONS.contains(&v)) {
        return None;
    }
    Some(Parsed {
        session_id: string(obj, "sessionId"),
        title: string(obj, "customTitle").map(|t| (title_of(&t), 2)),
        at_ms: obj.get("creationDate").and_then(Value::as_i64),
        ..Parsed::default()
    })
}

/// A request's prompt, as typed.
fn prompt(obj: &Map<String, Value>) -> Option<Parsed> {
    let message = obj.get("message")?;
    let text = match message {
        Value::String(text) => text.clone(),
        other => other.get("text")?.as_str()?.to_owned(),
    };
    let parts = vec![Part::Text(text)];
    Some(Parsed {
        at_ms: obj.get("timestamp").and_then(Value::as_i64),
        prompt: typed_prompt(&parts),
        message: Some(Message {
            upsert: true,
            ..Message::new(string(obj, "requestId"), Role::User, parts)
        }),
        ..Parsed::default()
    })
}

/// A request's answer: its parts, the model that gave it, when it ended.
fn answer(obj: &Map<String, Value>) -> Option<Parsed> {
    let id = string(obj, "requestId")?;
    let mut parts = match obj.get("response") {
        Some(Value::Array(items)) => response_parts(items),
        Some(Value::String(text)) => vec![Part::Text(text.clone())],
        _ => Vec::new(),
    };
    let error = at(obj, "/result/errorDetails/message");
    if let Some(error) = error.and_then(Value::as_str) {
        parts.push(Part::Text(format!("[error] {error}")));
    }
    Some(Parsed {
        at_ms: answered_ms(obj),
        model: string(obj, "modelId"),
        message: Some(Message {
            upsert: true,
            ..Message::new(Some(format!("{id}/response")), Role::Assistant, parts)
        }),
        ..Parsed::default()
    })
}

/// When an answer ended: its state's `completedAt`, else the request's time and the answer's
/// length, else the request's time.
fn answered_ms(obj: &Map<String, Value>) -> Option<i64> {
    let completed = at(obj, "/modelState/completedAt").and_then(Value::as_i64);
    let asked = obj.get("timestamp").and_then(Value::as_i64);
    let took = at(obj, "/result/timings/totalElapsed").and_then(Value::as_i64);
    completed.or(asked.zip(took).map(|(a, t)| a + t)).or(asked)
}

/// An answer's parts: its markdown (streamed in pieces, joined), thinking, tool calls with
/// their results, and edits; progress and other marks are no part.
fn response_parts(items: &[Value]) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut text = String::new();
    for item in items {
        let Value::Object(item) = item else {
            text.push_str(item.as_str().unwrap_or_default());
            continue;
        };
        match item.get("kind").and_then(Value::as_str) {
            None => text.push_str(&string(item, "value").unwrap_or_default()),
            Some("markdownContent") => text.push_str(&markdown(item.get("content"))),
            Some("inlineReference") => text.push_str(&reference(item)),
            Some(kind) => {
                let part = other_part(kind, item);
                if part.is_some() && !text.is_empty() {
                    parts.push(Part::Text(std::mem::take(&mut text)));
                }
                parts.extend(part.into_iter().flatten());
            }
        }
    }
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    parts
}

/// The parts of a response item that is not markdown, if it makes any.
fn other_part(kind: &str, item: &Map<String, Value>) -> Option<Vec<Part>> {
    match kind {
        "thinking" => {
            let text = match item.get("value") {
                Some(Value::Array(pieces)) => (pieces.iter().filter_map(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(""),
                value => markdown(value),
            };
            (!text.trim().is_empty()).then(|| vec![Part::Thinking(text)])
        }
        "toolInvocationSerialized" => Some(tool(item)),
        "textEditGroup" | "notebookEditGroup" => {
            let path = at(item, "/uri/path").and_then(Value::as_str)?;
            Some(vec![Part::ToolCall {
                name: "edit".to_owned(),
                input: path.to_owned(),
            }])
        }
        _ => None,
    }
}

/// The value at a JSON pointer below an object.
fn at<'a>(obj: &'a Map<String, Value>, pointer: &str) -> Option<&'a Value> {
    match pointer.trim_start_matches('/').split_once('/') {
        Some((first, rest)) => obj.get(first)?.pointer(&format!("/{rest}")),
        None => obj.get(pointer.trim_start_matches('/')),
    }
}

/// A markdown string's text: a string, or `{value}`.
fn markdown(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Object(o)) => string(o, "value").unwrap_or_default(),
        _ => String::new(),
    }
}

/// A reference to a file or symbol in the answer's text: its name, or its path's last part.
fn reference(item: &Map<String, Value>) -> String {
    let target = item.get("inlineReference");
    let path = (target.and_then(|t| t.pointer("/path").or_else(|| t.pointer("/uri/path"))))
        .and_then(Value::as_str);
    let last = path.and_then(|p| p.rsplit('/').next());
    match string(item, "name").as_deref().or(last) {
        Some(name) => format!("`{name}`"),
        None => String::new(),
    }
}

/// A tool's call and, once it ran, its result: what the terminal ran and printed, the input
/// and output VS Code kept, or the messages it showed.
fn tool(item: &Map<String, Value>) -> Vec<Part> {
    let name = string(item, "toolId").unwrap_or_else(|| "tool".to_owned());
    let data = item.get("toolSpecificData");
    let details = item.get("resultDetails");
    let input = (data.and_then(|d| d.pointer("/commandLine/original").or(d.get("command"))))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| {
            data.and_then(|d| d.get("rawInput"))
                .map(|i| input_text(Some(i)))
        })
        .or_else(|| {
            details
                .and_then(|d| d.get("input"))
                .map(|i| input_text(Some(i)))
        })
        .unwrap_or_else(|| markdown(item.get("invocationMessage")));
    let mut parts = vec![Part::ToolCall { name, input }];
    let printed = data.and_then(|d| d.pointer("/terminalCommandOutput/text"));
    let outputs = details
        .and_then(|d| d.get("output"))
        .and_then(Value::as_array);
    let output = match (printed.and_then(Value::as_str), outputs) {
        (Some(text), _) => text.to_owned(),
        (None, Some(outputs)) => (outputs.iter())
            .filter_map(|o| o.get("value").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        (None, None) => markdown(item.get("pastTenseMessage")),
    };
    let done = item.get("isComplete").and_then(Value::as_bool) == Some(true);
    if done || !output.is_empty() {
        parts.push(Part::ToolResult(output));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn replayed(lines: &[Value]) -> Value {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        replay(&text).unwrap()
    }

    #[test]
    fn a_log_is_replayed_as_vscode_replays_it() {
        let session = replayed(&[
            json!({"kind": 0, "v": {"version": 3, "sessionId": "s", "requests": []}}),
            json!({"kind": 2, "k": ["requests"], "v": [{"requestId": "r1", "response": []}]}),
            json!({"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": "Hel"}]}),
            json!({"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": "Hello"}], "i": 0}),
            json!({"kind": 1, "k": ["customTitle"], "v": "Greeting"}),
            json!({"kind": 1, "k": ["requests", 0, "vote"], "v": 1}),
            json!({"kind": 3, "k": ["requests", 0, "vote"]}),
        ]);
        assert_eq!(
            session,
            json!({"version": 3, "sessionId": "s", "customTitle": "Greeting",
                "requests": [{"requestId": "r1", "response": [{"value": "Hello"}]}]})
        );
    }

    #[test]
    fn a_line_still_being_written_waits_and_a_broken_log_says_where() {
        let first = json!({"kind": 0, "v": {"requests": []}}).to_string();
        let unfinished = format!("{first}\n{{\"kind\": 1, \"k\": [\"custom");
        assert_eq!(replay(&unfinished).unwrap(), json!({"requests": []}));
        let orphan = "{\"kind\": 1, \"k\": [\"a\"], \"v\": 1}\n";
        assert!(replay(orphan).unwrap_err().contains("line 1"));
        let unknown = format!("{first}\n{{\"kind\": 9, \"k\": [\"a\"]}}\n");
        assert!(replay(&unknown).unwrap_err().contains("line 2"));
    }

    #[test]
    fn a_request_is_a_prompt_and_an_answer_each_keyed() {
        let text = json!({"version": 3, "sessionId": "s", "requests": [{
            "requestId": "r1", "timestamp": 1000, "message": {"text": "Explain it", "parts": []},
            "response": [{"value": "It is "}, {"value": "fine."}], "modelId": "copilot/gpt-4.1",
            "modelState": {"value": 1, "completedAt": 2500}}]})
        .to_string();
        let entries = document(&text).unwrap();
        let keys: Vec<_> = entries.iter().map(|e| e.key.clone()).collect();
        assert_eq!(keys, [None, Some("r1".into()), Some("r1/response".into())]);
        let parsed = |i: usize| {
            let value: Value = serde_json::from_slice(&entries[i].record).unwrap();
            copilot_chat(value.as_object().unwrap()).unwrap()
        };
        assert_eq!(parsed(0).session_id.as_deref(), Some("s"));
        let asked = parsed(1);
        assert_eq!(asked.prompt.as_deref(), Some("Explain it"));
        let answered = parsed(2);
        let message = answered.message.unwrap();
        assert_eq!(message.role, Role::Assistant);
        assert_eq!(message.parts, [Part::Text("It is fine.".into())]);
        assert_eq!(
            (answered.model.as_deref(), answered.at_ms),
            (Some("copilot/gpt-4.1"), Some(2500))
        );
    }

    #[test]
    fn a_terminal_call_is_read_with_what_it_printed() {
        let call = json!({"kind": "toolInvocationSerialized", "toolId": "run_in_terminal",
            "toolCallId": "c1", "isComplete": true, "invocationMessage": "Running `ls`",
            "toolSpecificData": {"kind": "terminal", "commandLine": {"original": "ls"},
                "terminalCommandOutput": {"text": "a.txt"}}});
        let parts = response_parts(&[json!({"value": "Listing."}), call]);
        assert_eq!(
            parts,
            [
                Part::Text("Listing.".into()),
                Part::ToolCall {
                    name: "run_in_terminal".into(),
                    input: "ls".into()
                },
                Part::ToolResult("a.txt".into()),
            ]
        );
    }

    #[test]
    fn an_answer_kept_as_plain_strings_is_read() {
        let answer = json!({"requestId": "r1", "response": "Plain."});
        let message = copilot_chat(answer.as_object().unwrap()).unwrap().message;
        assert_eq!(message.unwrap().parts, [Part::Text("Plain.".into())]);
        let pieces = response_parts(&[json!("One, "), json!({"value": "two."})]);
        assert_eq!(pieces, [Part::Text("One, two.".into())]);
    }

    #[test]
    fn an_unknown_version_is_not_read_but_its_requests_are() {
        let future = json!({"version": 4, "sessionId": "s", "requests": []});
        assert!(copilot_chat(future.as_object().unwrap()).is_none());
        let known = json!({"version": 3, "sessionId": "s", "requests": []});
        assert!(copilot_chat(known.as_object().unwrap()).is_some());
    }

    #[test]
    fn the_workspace_folder_is_the_project_and_its_uri_is_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("abc123");
        std::fs::create_dir_all(workspace.join("chatSessions")).unwrap();
        let names = r#"{"folder": "file:///home/u/my%20app"}"#;
        std::fs::write(workspace.join("workspace.json"), names).unwrap();
        let file = workspace.join("chatSessions/s1.json");
        let found = in_workspace(&file, &Parsed::default());
        assert_eq!(found.session, "s1");
        assert_eq!(found.project.as_deref(), Some("/home/u/my app"));
        let remote = r#"{"folder": "vscode-remote://ssh-remote%2Bbox/srv/app"}"#;
        std::fs::write(workspace.join("workspace.json"), remote).unwrap();
        assert_eq!(workspace_folder(&workspace).as_deref(), Some("/srv/app"));
    }
}
