//! Kimi CLI's session files: the events of its turns (`wire.jsonl`), which are the messages,
//! and the conversation as the model is sent it (`context.jsonl`), its state (`state.json`)
//! and a subagent's record (`meta.json`), archived for `restore`.
//!
//! A `wire.jsonl` line is `{timestamp (Unix seconds), message: {type, payload}}`, after a
//! `{type: "metadata", protocol_version}` header: `TurnBegin` and `SteerInput` hold a prompt
//! (`user_input`, a string or content parts), `ContentPart` a text or a thought of a reply
//! (merged as it streamed), `ToolCall` a call (`function: {name, arguments}`), `ToolResult`
//! its `return_value` (`output`, `message`), `StatusUpdate` a step's `token_usage` under the
//! reply's `message_id`, `CompactionBegin` a compaction, `BtwBegin` and `BtwEnd` a side
//! question and its answer, `Notification` a notice. The others (steps, approvals, hooks, and a
//! subagent's events, which its own files hold) are the agent's bookkeeping. A `context.jsonl`
//! line is a chat message (`{role, content, tool_calls}`) or the agent's own (`_system_prompt`,
//! `_checkpoint`, `_usage`): no message here, the wire holds each one as it was shown.

use super::Agent;
use super::message::*;
use super::restore::{self, Restore, Resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Kimi CLI (appended events, its state rewritten whole).
pub(crate) static AGENT: Agent = Agent {
    name: "kimi-cli",
    watcher: include_str!("../../watchers/kimi-cli.toml"),
    formats: Formats::NONE,
    parse: kimi,
    unread: &[],
    identify,
    restore: Restore {
        relocate,
        ..Restore::keeping_layout(resume)
    },
    doctor: None,
};

/// Where a file is in the store: `<work dir folder>/<session>/…`, a subagent's
/// `<work dir folder>/<session>/subagents/<agent>/…`, below the root `sessions/`.
struct Place<'a> {
    /// The `sessions/` directory.
    sessions: &'a Path,
    /// The work directory's folder (the MD5 of its path).
    work_dir: String,
    /// The session's folder (its id).
    session: String,
    /// The subagent's folder (its id), for a subagent's file.
    subagent: Option<String>,
}

fn place(path: &Path) -> Option<Place<'_>> {
    let sessions =
        (path.ancestors().skip(1)).find(|a| a.file_name() == Some("sessions".as_ref()))?;
    let below: Vec<String> = (path.strip_prefix(sessions).ok()?.iter())
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let (subagent, folders) = match below.as_slice() {
        [w, s, sub, a, _] if sub == "subagents" => (Some(a.clone()), [w, s]),
        [w, s, _] => (None, [w, s]),
        _ => return None,
    };
    Some(Place {
        sessions,
        work_dir: folders[0].clone(),
        session: folders[1].clone(),
        subagent,
    })
}

/// A session is its folder, a subagent `<session>/<agent>` (its id is short and only unique
/// within its session) with that session as parent; the project is the work directory that
/// `kimi.json` names after the folder above.
fn identify(path: &Path, first: &Parsed) -> Identified {
    let Some(place) = place(path) else {
        return Identified::by_folder(path, first);
    };
    let project = work_dir_of(place.sessions, &place.work_dir);
    match place.subagent {
        Some(agent) => Identified {
            session: format!("{}/{agent}", place.session),
            parent: Some(place.session),
            project,
        },
        None => Identified {
            session: place.session,
            parent: None,
            project,
        },
    }
}

/// The work directory whose folder under `sessions` is `folder`, as `kimi.json` beside it
/// lists them (`{"work_dirs": [{"path", "kaos"}]}`); `None` when it does not say.
fn work_dir_of(sessions: &Path, folder: &str) -> Option<String> {
    let listed = std::fs::read(sessions.parent()?.join("kimi.json")).ok()?;
    let listed: Value = serde_json::from_slice(&listed).ok()?;
    let dirs = listed.get("work_dirs")?.as_array()?.iter();
    let named = |d: &&Value| {
        let kaos = d.get("kaos").and_then(Value::as_str).unwrap_or("local");
        (d.get("path").and_then(Value::as_str)).is_some_and(|p| work_dir_folder(p, kaos) == folder)
    };
    let found = dirs.filter(named).find_map(|d| d.get("path")?.as_str());
    found.map(str::to_owned)
}

/// The folder Kimi CLI names after a work directory: the MD5 of its path in hex, after
/// `<kaos>_` for one that is not on this machine's file system (`local`).
fn work_dir_folder(path: &str, kaos: &str) -> String {
    use md5::Digest;
    let hex: String = (md5::Md5::digest(path.as_bytes()).iter())
        .map(|b| format!("{b:02x}"))
        .collect();
    match kaos {
        "local" => hex,
        other => format!("{other}_{hex}"),
    }
}

/// `sessions/<work dir folder>/<rest>`: the rest goes under the folder named after the
/// project's directory here.
fn relocate(below: &[&OsStr], project: &str) -> PathBuf {
    match below {
        [_, rest @ ..] if !rest.is_empty() && !project.is_empty() => {
            Path::new(&work_dir_folder(project, "local")).join(rest.iter().collect::<PathBuf>())
        }
        _ => below.iter().collect(),
    }
}

/// `kimi -r ID`, from the project's directory. It finds the session only through the work
/// directory `kimi.json` lists: pointed elsewhere (`$KIMI_SHARE_DIR`), it would start the
/// session afresh and empty its `context.jsonl`, so no command is given for `--to`.
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!("{}kimi -r {}", r.cd, restore::shell_quote(r.id)))
}

/// A line of `wire.jsonl` (an event), of `context.jsonl`, or `state.json` or `meta.json` whole.
pub(super) fn kimi(obj: &Map<String, Value>) -> Option<Parsed> {
    let Some(message) = obj.get("message").and_then(Value::as_object) else {
        return Some(state(obj));
    };
    let kind = message.get("type").and_then(Value::as_str)?;
    let payload = message.get("payload").and_then(Value::as_object)?;
    let mut parsed = Parsed {
        at_ms: (obj.get("timestamp").and_then(Value::as_f64)).map(|s| (s * 1000.0) as i64),
        ..Parsed::default()
    };
    if kind == "StatusUpdate" {
        parsed.usage = usage(payload);
        return Some(parsed);
    }
    let Some((role, parts)) = said(kind, payload)? else {
        return Some(parsed);
    };
    if kind == "TurnBegin" {
        parsed.prompt = typed_prompt(&parts);
    }
    parsed.message = Some(Message::new(None, role, parts));
    Some(parsed)
}

/// The message an event is: `Some(None)` for the agent's bookkeeping, `None` for an event
/// without the fields of its kind.
fn said(kind: &str, payload: &Map<String, Value>) -> Option<Option<(Role, Vec<Part>)>> {
    Some(Some(match kind {
        "TurnBegin" | "SteerInput" => (Role::User, content_parts(payload.get("user_input")?)?),
        "ContentPart" => return Some(content_part(payload)),
        "ToolCall" => {
            let function = payload.get("function").and_then(Value::as_object)?;
            let name = string(function, "name").unwrap_or_default();
            let input = input_text(function.get("arguments"));
            (Role::Tool, vec![Part::ToolCall { name, input }])
        }
        "ToolResult" => (Role::Tool, vec![Part::ToolResult(tool_output(payload))]),
        "CompactionBegin" => (Role::Compact, text("conversation compacted".into())),
        "BtwBegin" => (Role::User, text(string(payload, "question")?)),
        "BtwEnd" => {
            let answer = string(payload, "response").or_else(|| string(payload, "error"));
            (Role::Assistant, text(answer.unwrap_or_default()))
        }
        "Notification" => {
            let notice = [string(payload, "title"), string(payload, "body")];
            let notice: Vec<String> = notice.into_iter().flatten().collect();
            (Role::System, text(notice.join("\n")))
        }
        _ => return Some(None),
    }))
}

/// A step's tokens (`input_other` is the input not read from the cache), keyed by the reply's
/// id; the model is not named.
fn usage(payload: &Map<String, Value>) -> Option<Usage> {
    let usage = payload.get("token_usage").and_then(Value::as_object)?;
    let fields = [
        "input_other",
        "output",
        "input_cache_read",
        "input_cache_creation",
    ];
    let usage = Usage::of(usage, fields, false)?;
    Some(usage.keyed(string(payload, "message_id"), None))
}

fn text(text: String) -> Vec<Part> {
    vec![Part::Text(text)]
}

/// A part of a reply: its text, or its thought; `None` for media.
fn content_part(payload: &Map<String, Value>) -> Option<(Role, Vec<Part>)> {
    match payload.get("type").and_then(Value::as_str)? {
        "text" => Some((Role::Assistant, text(string(payload, "text")?))),
        "think" => Some((
            Role::Reasoning,
            vec![Part::Thinking(string(payload, "think")?)],
        )),
        _ => None,
    }
}

/// What a tool returned: its output (text, or content parts), else its message (an error's).
fn tool_output(payload: &Map<String, Value>) -> String {
    let value = payload.get("return_value").and_then(Value::as_object);
    let output = result_text(value.and_then(|v| v.get("output")));
    match output.is_empty() {
        true => value.and_then(|v| string(v, "message")).unwrap_or_default(),
        false => output,
    }
}

/// A line of `context.jsonl`, `state.json` or a subagent's `meta.json`: no message; the title
/// `state.json` keeps when one was given or generated (not the prompt it takes by itself).
fn state(obj: &Map<String, Value>) -> Parsed {
    let given = obj.get("title_generated").and_then(Value::as_bool) == Some(true);
    let title = string(obj, "custom_title").filter(|_| given);
    Parsed {
        title: title.map(|t| (title_of(&t), 2)),
        ..Parsed::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_directory_is_found_by_the_folder_kimi_names_after_it() {
        let share = tempfile::tempdir().unwrap();
        let listed = serde_json::json!({"work_dirs": [
            {"path": "/src/other", "kaos": "local"},
            {"path": "/src/app", "kaos": "local", "last_session_id": "s1"}]});
        std::fs::write(share.path().join("kimi.json"), listed.to_string()).unwrap();
        // hashlib.md5(b"/src/app").hexdigest(), as Kimi CLI names the folder.
        let folder = work_dir_folder("/src/app", "local");
        assert_eq!(folder, "c7344a2fb68e27bcfcb167d33a28ad5d");
        let sessions = share.path().join("sessions");
        let file = sessions.join(&folder).join("s1/wire.jsonl");
        let id = identify(&file, &Parsed::default());
        assert_eq!(id.session, "s1");
        assert_eq!(id.project.as_deref(), Some("/src/app"));
        let sub = identify(
            &sessions
                .join(&folder)
                .join("s1/subagents/a1b2c3d4/context.jsonl"),
            &Parsed::default(),
        );
        assert_eq!(
            (sub.session.as_str(), sub.parent.as_deref()),
            ("s1/a1b2c3d4", Some("s1"))
        );
        let unlisted = identify(&sessions.join("ff00/s2/wire.jsonl"), &Parsed::default());
        assert_eq!((unlisted.session.as_str(), unlisted.project), ("s2", None));
        // Another machine's session goes under the folder named after the project here.
        let below = ["ff00", "s2", "wire.jsonl"].map(OsStr::new);
        let here = Path::new(&folder).join("s2/wire.jsonl");
        assert_eq!(relocate(&below, "/src/app"), here);
    }

    fn parsed(record: serde_json::Value) -> Parsed {
        kimi(record.as_object().unwrap()).unwrap()
    }

    fn event(kind: &str, payload: serde_json::Value) -> Parsed {
        parsed(serde_json::json!({"timestamp": 1.5, "message": {"type": kind, "payload": payload}}))
    }

    #[test]
    fn thoughts_failed_tools_side_questions_and_given_titles_are_read() {
        let thought = event(
            "ContentPart",
            serde_json::json!({"type": "think", "think": "hm"}),
        );
        let message = thought.message.unwrap();
        assert_eq!((message.role, thought.at_ms), (Role::Reasoning, Some(1500)));
        // A tool whose output is empty (a failure, say): its message says why.
        let failed = event(
            "ToolResult",
            serde_json::json!({"return_value": {"is_error": true, "output": "",
                "message": "Command failed with exit code 1."}}),
        );
        let parts = failed.message.unwrap().parts;
        assert_eq!(
            parts,
            [Part::ToolResult("Command failed with exit code 1.".into())]
        );
        let asked = event(
            "BtwBegin",
            serde_json::json!({"id": "b1", "question": "why?"}),
        );
        assert_eq!(
            (asked.message.unwrap().role, asked.prompt),
            (Role::User, None)
        );
        // The subagent's events in its session's file: its own files hold them.
        let relayed = event(
            "SubagentEvent",
            serde_json::json!({"agent_id": "a1", "event": {}}),
        );
        assert_eq!(relayed.message, None);
        // state.json: a title set with /title (or generated), not the prompt it takes itself.
        let state = |generated| {
            parsed(
                serde_json::json!({"custom_title": "Fix the build", "title_generated": generated}),
            )
        };
        assert_eq!(state(true).title, Some(("Fix the build".into(), 2)));
        assert_eq!(state(false).title, None);
    }
}
