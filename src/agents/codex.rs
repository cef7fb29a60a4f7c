//! Codex CLI's rollout records: `session_meta`, `turn_context`, `response_item`, `event_msg`.
//!
//! `{timestamp, type, payload}` with `type` `session_meta` (`payload.id`, `cwd`, `git.branch`),
//! `turn_context` (`model`), `response_item` (`message` with `input_text` / `output_text`
//! blocks, `function_call`, `function_call_output`, `reasoning`, …), `compacted` and
//! `event_msg`. Rollouts written before that envelope hold the bare items.
//!
//! Its TypeScript releases (until 0.1.2505191453, May 2025) kept each session as one JSON
//! document, `sessions/rollout-YYYY-MM-DD-<uuid>.json`, rewritten whole at every item:
//! `{"session": {timestamp, id, instructions}, "items": [...]}`, the items bare response
//! items without times. Read as a snapshot source: the document around its items, then each
//! item.

use super::Agent;
use super::message::*;
use super::restore::{self, Restore, Resume};
use super::session::{self};
use crate::capture::harness::Formats;
use crate::read::record::Unread;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Codex CLI (appended rollouts): `sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl`, a session
/// named by its `session_meta`'s id (the uuid); its TypeScript releases' documents,
/// `sessions/rollout-<date>-<uuid>.json`, by their `session`'s.
pub(crate) static AGENT: Agent = Agent {
    name: "codex",
    watcher: include_str!("../../watchers/codex.toml"),
    formats: Formats::NONE,
    parse: codex,
    // The base prompt every rollout opens with, a reasoning item's encrypted content, and the
    // rate limits a token count reports.
    unread: &[Unread::Within(
        "payload",
        &[
            Unread::Member("base_instructions"),
            Unread::Member("instructions"),
            Unread::Member("encrypted_content"),
            Unread::Member("rate_limits"),
        ],
    )],
    identify: session::by_record_or_uuid,
    restore: Restore {
        prefer_root: Some("sessions"),
        layout_below: None,
        relocate: restore::keep_layout,
        unplaced: rollout_day,
        records_name_cwd: false,
        resume,
    },
    doctor: None,
};

/// `codex resume ID`, pointed at `--to` through `$CODEX_HOME`; none for a TypeScript
/// release's document, which no release resumes (`codex --view FILE` only shows it).
fn resume(r: &Resume) -> Option<String> {
    let typescript = |f: &PathBuf| f.extension().is_some_and(|e| e == "json");
    if !r.files.is_empty() && r.files.iter().all(typescript) {
        return None;
    }
    Some(format!("{}codex resume {}", r.home("CODEX_HOME"), r.id))
}

/// `YYYY/MM/DD` of a rollout named `rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl`: where an
/// archived session goes back (Codex resumes from `sessions/`, not `archived_sessions/`). A
/// TypeScript release's document has no day's directory: it lists `sessions/` itself.
fn rollout_day(path: &Path) -> Option<PathBuf> {
    if path.extension()? != "jsonl" {
        return None;
    }
    let name = path.file_name()?.to_str()?;
    let date = name.strip_prefix("rollout-")?.get(..10)?;
    let parts: Vec<&str> = date.split('-').collect();
    let digits = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_digit());
    let day: PathBuf = match parts.as_slice() {
        [y, m, d] if digits(y, 4) && digits(m, 2) && digits(d, 2) => [*y, *m, *d].iter().collect(),
        _ => return None,
    };
    Some(day.join(path.file_name()?))
}

pub(super) fn codex(obj: &Map<String, Value>) -> Option<Parsed> {
    let at_ms = timestamp_ms(obj);
    let (kind, payload) = match obj.get("payload") {
        Some(payload) => (
            obj.get("type").and_then(Value::as_str)?,
            payload.as_object()?,
        ),
        // A rollout from before the envelope: its first line is the session, then bare items.
        None if obj.contains_key("id") && !obj.contains_key("type") => ("session_meta", obj),
        // A TypeScript release's document around its items: the session is its `session`.
        None if obj.contains_key("items") => ("session_meta", obj.get("session")?.as_object()?),
        None => ("response_item", obj),
    };
    let mut parsed = Parsed {
        at_ms,
        ..Parsed::default()
    };
    match kind {
        "session_meta" => {
            let meta = payload
                .get("meta")
                .and_then(Value::as_object)
                .unwrap_or(payload);
            parsed.session_id = string(meta, "id");
            parsed.project = string(meta, "cwd");
            let git = meta.get("git").and_then(Value::as_object);
            parsed.branch = git.and_then(|g| string(g, "branch"));
            parsed.at_ms = at_ms.or_else(|| string(meta, "timestamp").as_deref().and_then(time_ms));
        }
        "turn_context" => {
            parsed.model = string(payload, "model");
            parsed.project = string(payload, "cwd");
        }
        "response_item" => parsed.message = codex_item(payload, &mut parsed.prompt)?,
        // The prompt as the person typed it (`EventMsg::UserMessage`); the other events
        // (`agent_message`, `agent_reasoning`, `token_count`, …) repeat response items or
        // are not messages.
        "event_msg" if payload.get("type").and_then(Value::as_str) == Some("user_message") => {
            let parts = vec![Part::Text(string(payload, "message")?)];
            parsed.prompt = typed_prompt(&parts);
            parsed.message = Some(Message {
                key: None,
                role: if parsed.prompt.is_some() {
                    Role::User
                } else {
                    Role::System
                },
                copy: Some(PromptCopy::of(true, &parts)),
                parts,
                upsert: false,
            });
        }
        // Each model call's tokens, and the session's running total, which a repeated event
        // repeats: the total keys the call (input counts the cached input).
        "event_msg" if payload.get("type").and_then(Value::as_str) == Some("token_count") => {
            // `info` is null in an event that only reports rate limits.
            let info = payload.get("info").and_then(Value::as_object);
            let last = info.and_then(|i| i.get("last_token_usage")?.as_object());
            let total = info.and_then(|i| i.get("total_token_usage")?.get("total_tokens"));
            let fields = [
                "input_tokens",
                "output_tokens",
                "cached_input_tokens",
                "cache_write_input_tokens",
            ];
            parsed.usage = (last.and_then(|l| Usage::of(l, fields, true)))
                .map(|u| u.keyed_in_session(total.map(|t| format!("total:{t}")), None));
        }
        "compacted" => {
            parsed.message = Some(Message::new(
                None,
                Role::Compact,
                vec![Part::Text(string(payload, "message").unwrap_or_default())],
            ))
        }
        _ => {}
    }
    Some(parsed)
}

/// A Codex response item as a message (`Ok(None)` for items that are not one); `prompt` gets
/// the text of a user message a person typed.
fn codex_item(item: &Map<String, Value>, prompt: &mut Option<String>) -> Option<Option<Message>> {
    let message = |role, parts| Some(Some(Message::new(None, role, parts)));
    match item.get("type").and_then(Value::as_str)? {
        "message" => {
            let parts = content_parts(item.get("content")?)?;
            let role = match item.get("role").and_then(Value::as_str)? {
                "user" => match typed_prompt(&parts) {
                    Some(text) => {
                        *prompt = Some(text);
                        Role::User
                    }
                    None => Role::System,
                },
                "assistant" => Role::Assistant,
                _ => Role::System,
            };
            let copy = (item.get("role").and_then(Value::as_str) == Some("user"))
                .then(|| PromptCopy::of(false, &parts));
            Some(Some(Message {
                key: None,
                role,
                parts,
                upsert: false,
                copy,
            }))
        }
        "function_call" | "custom_tool_call" | "local_shell_call" => {
            let name = string(item, "name").unwrap_or_else(|| "shell".into());
            let input = ["arguments", "input", "action"]
                .iter()
                .find_map(|k| item.get(*k));
            let input = input_text(input);
            message(Role::Tool, vec![Part::ToolCall { name, input }])
        }
        "function_call_output" | "custom_tool_call_output" => {
            let output = result_text(item.get("output"));
            message(Role::Tool, vec![Part::ToolResult(output)])
        }
        // Its summary, else its raw text; most items hold neither (only `encrypted_content`)
        // and are no message.
        "reasoning" => {
            let text = [item.get("summary"), item.get("content")]
                .into_iter()
                .map(|v| result_text(v.filter(|v| !v.is_null())))
                .find(|t| !t.trim().is_empty());
            match text {
                Some(text) => message(Role::Reasoning, vec![Part::Thinking(text)]),
                None => Some(None),
            }
        }
        _ => Some(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::builtin_roots;
    use crate::agents::message::parse;

    const DOCUMENT: &str =
        "/h/.codex/sessions/rollout-2025-05-20-5f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b.json";

    #[test]
    fn a_typescript_releases_session_is_resumed_by_no_command() {
        let asked = |file: &str| {
            let files = [PathBuf::from(file)];
            resume(&Resume {
                id: "s",
                cd: "",
                to: None,
                files: &files,
            })
        };
        assert_eq!(asked(DOCUMENT), None);
        let rollout = "/h/.codex/sessions/2026/01/02/rollout-2026-01-02T10-00-00-s.jsonl";
        assert_eq!(asked(rollout).as_deref(), Some("codex resume s"));
    }

    #[test]
    fn a_typescript_releases_document_is_a_snapshot_of_its_items_at_the_sessions_top() {
        let roots = builtin_roots(&|k| (k == "HOME").then(|| "/h".to_owned())).unwrap();
        let sessions = (roots.iter())
            .find(|r| r.harness == "codex" && r.path.ends_with("sessions"))
            .unwrap();
        let spec = sessions.snapshot_of(Path::new(DOCUMENT)).unwrap();
        assert_eq!(spec.messages.as_deref(), Some("/items"));
        let dated = "/h/.codex/sessions/2026/12/05/rollout-2026-12-05T10-00-00-01a2.jsonl";
        assert!(sessions.snapshot_of(Path::new(dated)).is_none());
    }

    #[test]
    fn the_document_around_the_items_names_the_session_and_its_start() {
        let around = br#"{"session":{"timestamp":"2025-05-20T10:00:00.000Z","id":"5f1e","instructions":""},"items":[]}"#;
        let parsed = parse("codex", around);
        assert_eq!(parsed.session_id.as_deref(), Some("5f1e"));
        assert_eq!(parsed.at_ms, time_ms("2025-05-20T10:00:00.000Z"));
        assert!(parsed.message.is_none());
    }

    #[test]
    fn a_typescript_releases_document_is_restored_to_the_sessions_top_not_a_day() {
        assert_eq!(rollout_day(Path::new(DOCUMENT)), None);
        let archived = "/h/.codex/archived_sessions/rollout-2026-12-05T10-00-00-01a2.jsonl";
        assert_eq!(
            rollout_day(Path::new(archived)),
            Some(PathBuf::from(
                "2026/12/05/rollout-2026-12-05T10-00-00-01a2.jsonl"
            ))
        );
    }
}
