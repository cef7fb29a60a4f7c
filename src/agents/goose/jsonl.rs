//! Goose's sessions before its database: `sessions/<id>.jsonl`, the session's metadata on
//! its first line, then one message a line, the whole file written again at every save (in
//! place, then as a temporary `<id>.tmp` renamed over it; block/goose,
//! `crates/goose/src/session/storage.rs` at 01a262b229f1 and e3e6f126f727). Goose reads a
//! first line that is not metadata as a message.
//!
//! Read as a snapshot document: the metadata is the document around the messages, and each
//! message is one record, keyed by its `id` where it has one, else by its place among the
//! messages, so that a save that writes the same messages again archives nothing.

use crate::domain::TextFormat;
use crate::read::snapshot::{Entry, minify};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The format a watcher's `[[snapshot]]` `format = "goose"` names.
pub(super) const FORMAT: TextFormat = TextFormat {
    name: "goose",
    derive,
};

/// A session file's entries, in file order: its metadata (a first line without a `role`),
/// then its messages. `Err` names the first line that is not a JSON object.
fn derive(text: &str) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    for (n, line) in lines {
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        let obj = (value.as_object()).ok_or_else(|| format!("line {}: not an object", n + 1))?;
        let key = match entries.is_empty() && !obj.contains_key("role") {
            true => None,
            false => Some(unique(message_key(obj, seen.values().sum()), &mut seen)),
        };
        entries.push(Entry {
            key,
            record: minify(line),
        });
    }
    Ok(entries)
}

/// A message's id, else its place among the messages.
fn message_key(obj: &Map<String, Value>, place: usize) -> String {
    match obj.get("id") {
        Some(Value::String(id)) => id.clone(),
        _ => format!("#{place}"),
    }
}

/// `key`, told apart from an earlier one by its occurrence (`key#2`), as JSON documents'
/// keys are.
fn unique(key: String, seen: &mut HashMap<String, usize>) -> String {
    let n = seen.entry(key.clone()).or_default();
    *n += 1;
    match *n {
        1 => key,
        n => format!("{key}#{n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> Vec<Option<String>> {
        derive(text).unwrap().into_iter().map(|e| e.key).collect()
    }

    #[test]
    fn the_metadata_is_the_document_and_each_message_is_keyed_by_id_or_place() {
        let text = "{\"working_dir\":\"/p\",\"description\":\"\"}\n\
                    {\"id\":null,\"role\":\"user\",\"content\":[]}\n\
                    {\"id\":\"m2\",\"role\":\"assistant\",\"content\":[]}\n\
                    {\"id\":\"m2\",\"role\":\"assistant\",\"content\":[]}\n";
        assert_eq!(
            keys(text),
            [
                None,
                Some("#0".into()),
                Some("m2".into()),
                Some("m2#2".into())
            ]
        );
        let entries = derive(text).unwrap();
        assert_eq!(
            entries[1].record,
            br#"{"id":null,"role":"user","content":[]}"#
        );
    }

    #[test]
    fn a_file_without_metadata_is_all_messages() {
        let text = "{\"role\":\"user\",\"created\":1,\"content\":[]}\n";
        assert_eq!(keys(text), [Some("#0".into())]);
        assert_eq!(keys(""), Vec::<Option<String>>::new());
    }

    #[test]
    fn a_line_that_is_not_json_fails_the_state_naming_it() {
        // A save caught half written: the state is not kept, and read again once settled.
        let text = "{\"working_dir\":\"/p\"}\n{\"role\":\"user\",\"cont";
        assert!(derive(text).unwrap_err().starts_with("line 2: "));
        assert_eq!(derive("[1]").unwrap_err(), "line 1: not an object");
    }
}
