//! Goose (block/goose, now aaif-goose/goose): its sessions, kept in its data directory's
//! `sessions/` folder (`~/.local/share/goose/sessions`, `$XDG_DATA_HOME`, on Linux and macOS;
//! `%APPDATA%\Block\goose\data\sessions` on Windows), in either of two stores.
//!
//! Since its session manager (block/goose PR #4648, September 2025), in one SQLite database,
//! `sessions.db` ([`database`]), read as one JSON document per session: `{"session": <its
//! row>, "messages": [<each row>]}`. A session's row names its project (`working_dir`), its
//! name (`user_set_name` when the user gave it) and its model (`model_config_json`); a
//! message's row holds Goose's message as JSON (`content_json`, `metadata_json`), its time
//! (`created_timestamp`, in seconds) and its id (`message_id`, from schema 7).
//!
//! Before it, each session as JSONL rewritten whole at every save, `<id>.jsonl` ([`jsonl`]):
//! its first line the session's metadata (`working_dir`, `description`, token counts), then
//! one message a line (`{id, role, created, content, metadata}`). Goose imports these files
//! into its database when it first makes one, and leaves them.
//!
//! A message's content blocks, as both stores hold them (aaif-goose/goose,
//! `crates/goose-provider-types/src/conversation/message.rs` at 3a31f2fdd5cc; block/goose,
//! `crates/goose/src/conversation/message.rs` at 05132966065f): `text`, `thinking` (and the
//! older `reasoning`), `toolRequest` (`toolCall`: `{status, value: {name, arguments}}` or
//! `{status: "error", error}`), `toolResponse` (`toolResult`: its value rmcp's
//! `CallToolResult`, `{content, isError}`, or in older sessions the list of contents itself),
//! `systemNotification`, and others (images, confirmations) that are not read. A tool's
//! response is a user message; one the user is not shown (`metadata.userVisible` false: what
//! Goose gives the model alone, a summary after compaction) is the agent's own.

mod database;
mod jsonl;

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume, shell_quote};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Goose (its SQLite database, its JSONL before).
pub(crate) static AGENT: Agent = Agent {
    name: "goose",
    watcher: include_str!("../../watchers/goose.toml"),
    formats: Formats {
        databases: &[&database::DATABASE],
        documents: &[jsonl::FORMAT],
    },
    parse: goose,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `goose session --resume --name ID`: Goose resumes the session of that name or id (its
/// JSONL store named a session's file by it; `crates/goose-cli/src/cli.rs` at 4c39a776c031,
/// `get_or_create_session_id`).
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!(
        "{}goose session --resume --name {}",
        r.cd,
        shell_quote(r.id)
    ))
}

/// The name Goose's CLI gives a session until the model names it.
const UNNAMED: &str = "CLI Session";

/// Above it, a message's time is in milliseconds (Goose's `MILLISECOND_TIMESTAMP_THRESHOLD`).
const MILLISECONDS_FROM: i64 = 10_000_000_000;

/// A session's row, a message (a row of the database, a line of the JSONL), or the JSONL's
/// first line.
fn goose(obj: &Map<String, Value>) -> Option<Parsed> {
    if let Some(row) = obj.get("session").and_then(Value::as_object) {
        return Some(session_row(row));
    }
    if obj.contains_key("role") {
        return message(obj);
    }
    metadata_line(obj)
}

/// What a session's row says: its id, project, name, model and start.
fn session_row(row: &Map<String, Value>) -> Parsed {
    let by_user = matches!(row.get("user_set_name"), Some(Value::Bool(true)))
        || row.get("user_set_name").and_then(Value::as_i64) == Some(1);
    // An old row keeps its name in `description`, as Goose reads it.
    let name = string(row, "name").filter(|n| !n.is_empty());
    let name = (name.or_else(|| string(row, "description"))).filter(|n| !n.is_empty());
    let name = name.filter(|n| by_user || n != UNNAMED);
    let config = row.get("model_config_json").and_then(Value::as_object);
    Parsed {
        session_id: string(row, "id"),
        project: string(row, "working_dir"),
        title: name.map(|n| (title_of(&n), if by_user { 3 } else { 2 })),
        model: config.and_then(|c| string(c, "model_name")),
        at_ms: string(row, "created_at").and_then(|t| utc_ms(&t)),
        ..Parsed::default()
    }
}

/// The JSONL's first line: the session's project and the description Goose generated.
fn metadata_line(obj: &Map<String, Value>) -> Option<Parsed> {
    if !obj.contains_key("working_dir") && !obj.contains_key("description") {
        return None;
    }
    let description = string(obj, "description").filter(|d| !d.trim().is_empty());
    Some(Parsed {
        project: string(obj, "working_dir"),
        title: description.map(|d| (title_of(&d), 2)),
        ..Parsed::default()
    })
}

/// A message: a JSONL line (`id`, `created`, `content`, `metadata`) or a database row
/// (`message_id`, `created_timestamp`, `content_json`, `metadata_json`).
fn message(obj: &Map<String, Value>) -> Option<Parsed> {
    let field = |line: &str, row: &str| obj.get(line).or_else(|| obj.get(row));
    let blocks = field("content", "content_json")?.as_array()?;
    let parts: Vec<Part> = (blocks.iter().filter_map(Value::as_object))
        .filter_map(part)
        .collect();
    let visible = (field("metadata", "metadata_json").and_then(Value::as_object))
        .and_then(|m| m.get("userVisible"))
        .and_then(Value::as_bool)
        != Some(false);
    let role = match obj.get("role").and_then(Value::as_str)? {
        _ if !visible || is_notice(blocks) => Role::System,
        name => role_named(name, &parts),
    };
    let prompt = (role == Role::User).then(|| typed_prompt(&parts)).flatten();
    // Goose writes a message's row again (its metadata, a tool's title): the latest wins.
    let key = string(obj, "message_id").or_else(|| string(obj, "id"));
    Some(Parsed {
        prompt,
        at_ms: field("created", "created_timestamp").and_then(created_ms),
        message: Some(Message {
            upsert: true,
            ..Message::new(key, role, parts)
        }),
        ..Parsed::default()
    })
}

/// Whether a message is only Goose's notices to the user (that it is thinking, that it
/// compacted the conversation).
fn is_notice(blocks: &[Value]) -> bool {
    let notice = |b: &Value| b.get("type").and_then(Value::as_str) == Some("systemNotification");
    !blocks.is_empty() && blocks.iter().all(notice)
}

/// A content block as a part; `None` for one that holds nothing to read (an image, a
/// confirmation asked for).
fn part(block: &Map<String, Value>) -> Option<Part> {
    Some(match block.get("type").and_then(Value::as_str)? {
        "text" => Part::Text(string(block, "text")?),
        "thinking" => Part::Thinking(string(block, "thinking")?),
        "reasoning" => Part::Thinking(string(block, "text")?),
        "toolRequest" | "frontendToolRequest" => tool_call(block.get("toolCall")?)?,
        "toolResponse" => Part::ToolResult(tool_result(block.get("toolResult")?)?),
        "systemNotification" => Part::Text(string(block, "msg")?),
        "error" => Part::Text(string(block, "message")?),
        _ => return None,
    })
}

/// A tool call as Goose keeps it: `{status: "success", value: {name, arguments}}`, or the
/// error a call the model wrote wrong gave (`{status: "error", error}`, its tool unnamed).
fn tool_call(call: &Value) -> Option<Part> {
    let call = call.as_object()?;
    if let Some(value) = call.get("value").and_then(Value::as_object) {
        return Some(Part::ToolCall {
            name: string(value, "name")?,
            input: input_text(value.get("arguments")),
        });
    }
    Some(Part::ToolCall {
        name: String::new(),
        input: string(call, "error")?,
    })
}

/// A tool's result: the text of its contents (`{content, isError}`, or the list of contents
/// itself in older sessions), or its error.
fn tool_result(result: &Value) -> Option<String> {
    let result = result.as_object()?;
    match result.get("value") {
        Some(Value::Object(value)) => Some(result_text(value.get("content"))),
        Some(contents) => Some(result_text(Some(contents))),
        None => string(result, "error"),
    }
}

/// Milliseconds since the epoch of a message's time (seconds, or milliseconds past Goose's
/// threshold).
fn created_ms(created: &Value) -> Option<i64> {
    let n = created.as_i64()?;
    if n > MILLISECONDS_FROM {
        return Some(n);
    }
    n.checked_mul(1000)
}

/// Milliseconds since the epoch of a session's time: SQLite's `datetime('now')`
/// (`YYYY-MM-DD HH:MM:SS`, UTC) or, where Goose bound a time itself, RFC 3339.
fn utc_ms(text: &str) -> Option<i64> {
    time_ms(text.strip_suffix("+00:00").unwrap_or(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(value: Value) -> Parsed {
        goose(value.as_object().unwrap()).unwrap()
    }

    #[test]
    fn a_sessions_row_gives_its_project_model_start_and_the_name_it_was_given() {
        let row = json!({"session": {"id": "20260923_1", "working_dir": "/p",
            "name": "Fix the build", "description": "", "user_set_name": 0,
            "created_at": "2026-09-23 08:00:00",
            "model_config_json": {"model_name": "m"}}, "messages": []});
        let session = parsed(row.clone());
        assert_eq!(session.session_id.as_deref(), Some("20260923_1"));
        assert_eq!(session.project.as_deref(), Some("/p"));
        assert_eq!(session.title, Some(("Fix the build".into(), 2)));
        assert_eq!(session.model.as_deref(), Some("m"));
        assert_eq!(session.at_ms, Some(1_790_150_400_000));
        // Named by the user; a time Goose bound itself (RFC 3339).
        let mut row = row;
        row["session"]["user_set_name"] = json!(1);
        row["session"]["created_at"] = json!("2026-09-23T08:00:00.5+00:00");
        let session = parsed(row.clone());
        assert_eq!(session.title.map(|t| t.1), Some(3));
        assert_eq!(session.at_ms, Some(1_790_150_400_500));
        // The CLI's name for a session the model has not named yet is no title.
        row["session"]["user_set_name"] = json!(0);
        row["session"]["name"] = json!(UNNAMED);
        assert_eq!(parsed(row).title, None);
    }

    #[test]
    fn a_tool_call_and_its_response_are_read_in_either_shape_goose_wrote() {
        let call = json!({"id": null, "role": "assistant", "created": 1_757_931_301_i64,
            "content": [{"type": "text", "text": "Running it."},
                {"type": "toolRequest", "id": "c1", "toolCall": {"status": "success",
                 "value": {"name": "developer__shell", "arguments": {"command": "ls"}}}}],
            "metadata": {"userVisible": true, "agentVisible": true}});
        let call = parsed(call);
        assert_eq!(call.at_ms, Some(1_757_931_301_000));
        let message = call.message.unwrap();
        assert_eq!((message.key, message.role), (None, Role::Assistant));
        assert!(matches!(&message.parts[1],
            Part::ToolCall { name, input } if name == "developer__shell" && input.contains("ls")));
        // A database row: its id, and a result as CallToolResult.
        let row = json!({"id": 3, "message_id": "msg_1", "role": "user",
            "created_timestamp": 1_790_150_401_000_i64, "metadata_json": {"userVisible": true},
            "content_json": [{"type": "toolResponse", "id": "c1", "toolResult": {
                "status": "success", "value": {"content": [{"type": "text", "text": "out"}],
                "isError": false}}}]});
        let row = parsed(row);
        assert_eq!(row.at_ms, Some(1_790_150_401_000), "a time in milliseconds");
        let message = row.message.unwrap();
        assert_eq!(
            (message.key.as_deref(), message.role),
            (Some("msg_1"), Role::Tool)
        );
        assert_eq!(message.parts, [Part::ToolResult("out".into())]);
        // The list of contents itself, as older sessions kept it, and an error.
        let legacy = json!({"status": "success", "value": [{"type": "text", "text": "out"}]});
        assert_eq!(tool_result(&legacy).as_deref(), Some("out"));
        let failed = json!({"status": "error", "error": "-32603: no such tool"});
        assert_eq!(
            tool_result(&failed).as_deref(),
            Some("-32603: no such tool")
        );
    }

    #[test]
    fn what_the_user_is_not_shown_and_goose_notices_are_the_agents_own() {
        let summary = json!({"id": "m", "role": "user", "created": 1,
            "content": [{"type": "text", "text": "Summary of the conversation so far"}],
            "metadata": {"userVisible": false, "agentVisible": true}});
        let summary = parsed(summary);
        assert_eq!(summary.message.unwrap().role, Role::System);
        assert_eq!(summary.prompt, None, "no prompt the user typed");
        let notice = json!({"id": "n", "role": "assistant", "created": 1, "content": [
            {"type": "systemNotification", "notificationType": "inlineMessage",
             "msg": "Conversation compacted"}],
            "metadata": {"userVisible": true, "agentVisible": false}});
        let notice = parsed(notice).message.unwrap();
        assert_eq!(notice.role, Role::System);
        assert_eq!(notice.parts, [Part::Text("Conversation compacted".into())]);
        let prompt = json!({"id": null, "role": "user", "created": 1,
            "content": [{"type": "text", "text": "Fix it"}]});
        assert_eq!(parsed(prompt).prompt.as_deref(), Some("Fix it"));
    }

    #[test]
    fn the_jsonl_first_line_gives_the_project_and_description() {
        let first = json!({"working_dir": "/p", "description": "Scripted title",
            "schedule_id": null, "message_count": 4, "extension_data": {}});
        let first = parsed(first);
        assert_eq!(first.project.as_deref(), Some("/p"));
        assert_eq!(first.title, Some(("Scripted title".into(), 2)));
        assert_eq!(first.message, None);
        assert!(goose(json!({"other": 1}).as_object().unwrap()).is_none());
    }

    #[test]
    fn a_session_resumes_by_its_name_in_its_project() {
        let command = resume(&Resume {
            id: "my session",
            cd: "cd /p && ",
            to: None,
            files: &[],
        });
        assert_eq!(
            command.as_deref(),
            Some("cd /p && goose session --resume --name 'my session'")
        );
    }
}
