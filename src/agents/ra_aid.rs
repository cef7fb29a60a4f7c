//! RA.Aid (PyPI `ra-aid`): each project's sessions in one SQLite database in WAL mode,
//! `<project>/.ra-aid/pk.db`, read as one JSON document per session (`read::database`):
//! `{"session": <its row>, "messages": [<each of its trajectory rows>]}`, in the order written
//! (`id`, which only grows).
//!
//! The tables (ra-aid 0.30.2's `ra_aid/database/models.py`): `session` (`id`, a number from 1
//! in each database, `start_time`, `command_line`, `program_version`, `status`) and
//! `trajectory`, what RA.Aid showed of the session, a row each (`record_type`: `user_query`,
//! `tool_execution`, `task_completion`, `plan_completion`, `stage_transition`, `model_usage`,
//! `error`, …; `tool_name`, `tool_parameters` and `tool_result` as JSON, `step_data` as JSON,
//! `input_tokens`, `output_tokens`, `session_id`, `created_at` in local time). RA.Aid keeps
//! neither the model's replies nor, from its shell tool, the output: a session is its prompts,
//! its tool calls and what ended each task. Its `human_input`, `key_fact`, `key_snippet` and
//! `research_note` tables are not read.
//!
//! A session's id is the database's number for it after a hash of the project's path: the
//! numbers start again in each project. What changed since the last read is the sessions of
//! the trajectory rows added since (the mark is the last row's id) and every session RA.Aid
//! has not marked ended (`status` other than `completed`, `error` or `halted`).

use super::Agent;
use super::message::*;
use super::restore::{self, Restore};
use super::session::Identified;
use crate::capture::harness::Formats;
use crate::domain::{SnapshotFormat, SnapshotSpec};
use crate::read::database::{
    Changed, SqliteFormat, column, in_read_transaction, row_object, session_document,
};
use rusqlite::{Connection, OptionalExtension};
use serde_json::{Map, Value};
use std::path::Path;

/// RA.Aid (its SQLite database in each project).
pub(crate) static AGENT: Agent = Agent {
    name: "ra-aid",
    watcher: include_str!("../../watchers/ra-aid.toml"),
    formats: Formats {
        databases: &[&DATABASE],
        documents: &[],
    },
    parse: ra_aid,
    unread: &[],
    identify,
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};

/// `<project>/.ra-aid/pk.db/<number>`: session `<number>` of the project's database, named
/// after a hash of the project's path; the project is the folder of its `.ra-aid`.
fn identify(path: &Path, _first: &Parsed) -> Identified {
    let db = path.parent().unwrap_or(path);
    let data = db.parent().unwrap_or(db);
    let project = data.parent().filter(|_| data.ends_with(".ra-aid"));
    let project = project.unwrap_or(data).to_string_lossy().into_owned();
    let hash = xxhash_rust::xxh3::xxh3_64(project.as_bytes());
    let number = path.file_name().unwrap_or_default().to_string_lossy();
    Identified {
        session: format!("{:08x}-{number}", hash >> 32),
        parent: None,
        project: Some(project),
    }
}

/// A session's row, or one of its trajectory's rows.
fn ra_aid(obj: &Map<String, Value>) -> Option<Parsed> {
    if let Some(session) = obj.get("session").and_then(Value::as_object) {
        return Some(Parsed {
            at_ms: local_ms(session.get("start_time")),
            ..Parsed::default()
        });
    }
    let kind = obj.get("record_type").and_then(Value::as_str)?;
    let mut parsed = Parsed {
        at_ms: local_ms(obj.get("created_at")),
        ..Parsed::default()
    };
    if kind == "model_usage" {
        parsed.usage = usage(obj);
        return Some(parsed);
    }
    let (role, parts) = message(kind, obj);
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
    }
    let key = obj
        .get("id")
        .and_then(Value::as_i64)
        .map(|id| id.to_string());
    parsed.message = Some(Message {
        upsert: true,
        ..Message::new(key, role, parts)
    });
    Some(parsed)
}

/// A trajectory row as a message: a prompt, what ended a task (its message, and the tool
/// call that said it), a tool's call and result, an error, or RA.Aid's own notice.
fn message(kind: &str, obj: &Map<String, Value>) -> (Role, Vec<Part>) {
    let step = |key: &str| obj.get("step_data").and_then(|s| s.get(key)?.as_str());
    let call = || {
        let name = string(obj, "tool_name").filter(|n| !n.is_empty())?;
        let input = input_text(obj.get("tool_parameters"));
        Some(Part::ToolCall { name, input })
    };
    match kind {
        "user_query" => (Role::User, text_of(step("query"))),
        "task_completion" | "plan_completion" => {
            let mut parts = text_of(step("completion_message"));
            parts.extend(call());
            (Role::Assistant, parts)
        }
        "error" => (
            Role::System,
            text_of(obj.get("error_message").and_then(Value::as_str)),
        ),
        _ => match call() {
            Some(call) => {
                let result = obj.get("tool_result").filter(|r| !r.is_null());
                let result = result.map(|r| Part::ToolResult(result_text(Some(r))));
                (Role::Tool, std::iter::once(call).chain(result).collect())
            }
            None => (Role::System, text_of(step("display_title"))),
        },
    }
}

fn text_of(text: Option<&str>) -> Vec<Part> {
    text.map(|t| Part::Text(t.to_owned())).into_iter().collect()
}

/// A `model_usage` row's tokens, keyed by the row (its input counts no cache).
fn usage(obj: &Map<String, Value>) -> Option<Usage> {
    let counts = Usage::of(obj, ["input_tokens", "output_tokens", "", ""], false)?;
    let model = (obj.get("step_data"))
        .and_then(|s| s.get("model")?.as_str())
        .map(str::to_owned);
    let key = obj
        .get("id")
        .and_then(Value::as_i64)
        .map(|id| id.to_string());
    Some(counts.keyed_in_session(key, model))
}

/// Milliseconds since the epoch of RA.Aid's times, `2026-12-05 04:02:08.671480`, written in
/// the machine's local time (Python's naive `datetime.now()`): read as UTC, which it is where
/// the machine's zone is.
fn local_ms(value: Option<&Value>) -> Option<i64> {
    time_ms(&value?.as_str()?.replacen(' ', "T", 1))
}

/// RA.Aid's database, as its watcher's `[[database]]` `reader = "ra-aid"` names it.
pub(crate) static DATABASE: SqliteFormat = SqliteFormat {
    name: "ra-aid",
    spec,
    changed,
    document,
};

/// How a session's document keeps its rows.
fn spec() -> SnapshotSpec {
    SnapshotSpec {
        messages: Some("/messages".into()),
        key: "/id".into(),
        format: SnapshotFormat::Json,
    }
}

/// The sessions changed since mark `since` (the last trajectory row's id then), read in one
/// read transaction.
fn changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    in_read_transaction(conn, || {
        let mark = conn.query_row("SELECT coalesce(max(id), 0) FROM trajectory", [], |r| {
            r.get(0)
        })?;
        // A mark past the last row (the table made anew) says nothing of this one.
        let since = if since > mark { 0 } else { since };
        let mut sessions = column(
            conn,
            "SELECT CAST(session_id AS TEXT) FROM trajectory
                 WHERE id > ?1 AND session_id IS NOT NULL
             UNION SELECT CAST(id AS TEXT) FROM session
                 WHERE ?1 = 0 OR status NOT IN ('completed', 'error', 'halted')",
            [since],
        )?;
        sessions.sort();
        let all = column(conn, "SELECT CAST(id AS TEXT) FROM session", [])?;
        Ok(Changed {
            sessions,
            all: all.into_iter().collect(),
            mark,
        })
    })
}

/// Session `id`'s document, read in one read transaction; `None` when there is no such
/// session (any more).
fn document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    in_read_transaction(conn, || {
        let mut stmt = conn.prepare_cached("SELECT * FROM session WHERE id = ?1")?;
        let names: Vec<String> = stmt.column_names().map(String::from).collect();
        let Some(session) = stmt.query_row([id], |r| row_object(r, &names)).optional()? else {
            return Ok(None);
        };
        let rows = "SELECT * FROM trajectory WHERE session_id = ?1 ORDER BY id";
        let mut stmt = conn.prepare_cached(rows)?;
        let names: Vec<String> = stmt.column_names().map(String::from).collect();
        let rows = stmt.query_map([id], |r| row_object(r, &names).map(Value::Object))?;
        Ok(Some(session_document(
            session,
            rows.collect::<rusqlite::Result<_>>()?,
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::database::open;

    /// RA.Aid's two tables read, reduced to the columns read, in WAL mode as it keeps them.
    fn database(path: &Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE session (id INTEGER PRIMARY KEY, start_time TEXT, status TEXT);
             CREATE TABLE trajectory (id INTEGER PRIMARY KEY, session_id INTEGER,
                 record_type TEXT, tool_name TEXT, tool_parameters TEXT, tool_result TEXT,
                 step_data TEXT, created_at TEXT);",
        )
        .unwrap();
        conn
    }

    fn step(conn: &Connection, session: i64, kind: &str) {
        let sql = "INSERT INTO trajectory (session_id, record_type, created_at)
                   VALUES (?1, ?2, '2026-12-05 04:02:08.671480')";
        conn.execute(sql, (session, kind)).unwrap();
    }

    #[test]
    fn the_sessions_of_new_steps_and_those_not_ended_are_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pk.db");
        let conn = database(&path);
        conn.execute_batch(
            "INSERT INTO session VALUES (1, '2026-12-05 04:02:08', 'pending');
             INSERT INTO session VALUES (2, '2026-12-05 04:02:08', 'completed');",
        )
        .unwrap();
        step(&conn, 2, "user_query");
        let reader = open(&path).unwrap();
        let first = changed(&reader, 0).unwrap();
        assert_eq!((first.sessions.len(), first.mark), (2, 1));
        let quiet = changed(&reader, first.mark).unwrap();
        assert_eq!(
            quiet.sessions,
            ["1"],
            "a session not ended may still change"
        );
        step(&conn, 2, "tool_execution");
        let next = changed(&reader, quiet.mark).unwrap();
        assert_eq!(
            (next.sessions.as_slice(), next.mark),
            (&["1".to_owned(), "2".into()][..], 2)
        );
        assert_eq!(next.all.len(), 2);
        let doc = document(&reader, "2").unwrap().unwrap();
        let doc: Value = serde_json::from_slice(&doc).unwrap();
        assert_eq!(doc["messages"].as_array().unwrap().len(), 2);
        assert!(document(&reader, "3").unwrap().is_none());
    }

    #[test]
    fn a_session_is_named_after_its_project_and_its_number() {
        let at = |project: &str| {
            identify(
                Path::new(&format!("{project}/.ra-aid/pk.db/1")),
                &Parsed::default(),
            )
        };
        let one = at("/home/u/src/app");
        assert_eq!(one.project.as_deref(), Some("/home/u/src/app"));
        assert!(one.session.ends_with("-1"), "{}", one.session);
        assert_ne!(one.session, at("/home/u/src/other").session);
    }

    #[test]
    fn a_prompt_a_tool_call_and_what_ended_the_task_are_read_as_such() {
        let read = |row: Value| ra_aid(row.as_object().unwrap()).unwrap();
        let query = read(serde_json::json!({"id": 1, "record_type": "user_query",
            "step_data": {"query": "Fix it."}, "created_at": "2026-12-05 04:02:08.671480"}));
        assert_eq!(query.prompt.as_deref(), Some("Fix it."));
        assert_eq!(query.at_ms, Some(1_796_443_328_671));
        let shell = read(serde_json::json!({"id": 2, "record_type": "tool_execution",
            "tool_name": "run_shell_command", "tool_parameters": {"command": "ls"},
            "tool_result": {"output": "a.txt"}}));
        let message = shell.message.unwrap();
        assert_eq!(message.role, Role::Tool);
        assert!(matches!(&message.parts[1], Part::ToolResult(t) if t == "a.txt"));
        let done = read(
            serde_json::json!({"id": 3, "record_type": "task_completion",
            "tool_name": "mark_research_complete_no_implementation_required",
            "tool_parameters": {"message": "Done."}, "step_data": {"completion_message": "Done."}}),
        );
        let message = done.message.unwrap();
        assert_eq!(message.role, Role::Assistant);
        assert_eq!(message.parts[0], Part::Text("Done.".into()));
        let usage = read(serde_json::json!({"id": 4, "record_type": "model_usage",
            "input_tokens": 160, "output_tokens": 30, "step_data": {"model": "gpt-4o"}}));
        assert!(usage.message.is_none());
        assert_eq!(usage.usage.map(|u| (u.input, u.output)), Some((160, 30)));
    }
}
