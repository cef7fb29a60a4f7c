//! Records of any other watcher: a role where there is one, every string as text.

use super::Agent;
use super::message::*;
use super::restore::{self, Restore};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};

/// Any other transcript: directories given with `--watch` or `[[watch]]`.
pub(crate) static AGENT: Agent = Agent {
    name: "generic",
    watcher: include_str!("../../watchers/generic.toml"),
    formats: Formats::NONE,
    parse: generic,
    unread: &[],
    identify: Identified::by_stem,
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};

/// Any other watcher's records: a role from `role` or `type` where there is one, and every
/// string in the record as its text.
pub(super) fn generic(obj: &Map<String, Value>) -> Option<Parsed> {
    let role = match obj
        .get("role")
        .or_else(|| obj.get("type"))
        .and_then(Value::as_str)
    {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        _ => Role::System,
    };
    let mut texts = Vec::new();
    collect_strings(&Value::Object(obj.clone()), &mut texts);
    Some(Parsed {
        at_ms: timestamp_ms(obj),
        message: Some(Message::new(None, role, vec![Part::Text(texts.join(" "))])),
        ..Parsed::default()
    })
}

/// A string this long without a space is data (base64, a hash, a signature), not text.
const DATA_RUN: usize = 1024;

fn collect_strings(value: &Value, into: &mut Vec<String>) {
    match value {
        Value::String(s) if s.len() > DATA_RUN && !s.contains(char::is_whitespace) => {}
        Value::String(s) => into.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, into)),
        Value::Object(map) => map.values().for_each(|v| collect_strings(v, into)),
        _ => {}
    }
}
