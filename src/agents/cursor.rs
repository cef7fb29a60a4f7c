//! Cursor's agent transcript records: a role and a message.
//!
//! `{role, message: {content}}` with `text` and `tool_use` blocks; no ids, no times.

use super::Agent;
use super::message::*;
use super::restore::{Restore, Resume};
use super::session::{self, Identified};
use crate::capture::harness::Formats;
use serde_json::{Map, Value};
use std::path::Path;

/// Cursor's agent CLI (appended transcripts).
pub(crate) static AGENT: Agent = Agent {
    name: "cursor",
    watcher: include_str!("../../watchers/cursor.toml"),
    formats: Formats::NONE,
    parse: cursor,
    unread: &[],
    identify,
    restore: Restore::keeping_layout(resume),
    doctor: None,
};

/// `projects/<project>/agent-transcripts/[<id>/]<id>.jsonl`.
fn identify(path: &Path, first: &Parsed) -> Identified {
    Identified {
        project: session::dir_before(path, "agent-transcripts"),
        ..Identified::by_stem(path, first)
    }
}

/// `cursor-agent --resume ID`, from the project's directory.
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!(
        "cursor-agent --resume {}   (from the project's directory)",
        r.id
    ))
}

pub(super) fn cursor(obj: &Map<String, Value>) -> Option<Parsed> {
    let role = match obj.get("role").and_then(Value::as_str)? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        _ => Role::System,
    };
    let message = obj.get("message")?;
    let content = message.get("content").unwrap_or(message);
    let parts = content_parts(content)?;
    let role = role_of(role, &parts);
    let prompt = (role == Role::User).then(|| typed_prompt(&parts)).flatten();
    Some(Parsed {
        prompt,
        message: Some(Message::new(None, role, parts)),
        ..Parsed::default()
    })
}
