//! Snapshot sources: a JSON document that its agent rewrites whole (a chat file holding the
//! session's messages), turned into records. Each message becomes one record, keyed by the
//! agent's id for it (or its place in the list when it has none), and what surrounds the
//! messages becomes one more (the document with its list emptied). A state is compared with
//! the one captured before it, and only what is new or changed becomes a record: a message
//! that grows is archived again under its key, one that the agent drops keeps its records.
//!
//! Records are the document's own bytes for each value, with the white space between tokens
//! taken out (a record is one line): key order, numbers and escapes are as the agent wrote
//! them.

use crate::domain::SnapshotFormat;
pub(crate) use crate::domain::SnapshotSpec as Spec;
use serde_json::value::RawValue;
use std::collections::HashMap;
use xxhash_rust::xxh3::xxh3_64;

pub(crate) use crate::domain::SnapshotEntry as Entry;

/// The one entry of a file that cannot be read: its length and hash, which change with it
/// (its bytes are kept as each state's are).
fn opaque(doc: &[u8]) -> Entry {
    let record = format!(
        r#"{{"opaque":{{"length":{},"xxh3":"{:016x}"}}}}"#,
        doc.len(),
        xxh3_64(doc)
    );
    Entry {
        key: None,
        record: record.into_bytes(),
    }
}

/// Splits a document into its entries: the document around the list first (when the list
/// is not the document), then the messages in list order; a document without a list (the
/// spec names none) is one entry. A key that repeats in a document is told apart by its
/// occurrence (`key#2`). `Err` says why the bytes are not such a document.
pub(crate) fn derive(doc: &[u8], spec: &Spec) -> Result<Vec<Entry>, String> {
    if spec.format == SnapshotFormat::Opaque {
        return Ok(vec![opaque(doc)]);
    }
    let text = std::str::from_utf8(doc).map_err(|e| format!("not UTF-8: {e}"))?;
    if let SnapshotFormat::Text(format) = spec.format {
        return (format.derive)(text);
    }
    let root: &RawValue = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let Some(pointer) = &spec.messages else {
        let record = minify(root.get());
        return Ok(vec![Entry { key: None, record }]);
    };
    let mut at = root;
    let mut path = String::new();
    for token in pointer_tokens(pointer) {
        path.push('/');
        path.push_str(&token);
        at = child(at, &token).ok_or_else(|| format!("no value at {path:?}"))?;
    }
    let messages: Vec<&RawValue> = serde_json::from_str(at.get())
        .map_err(|_| format!("the value at {pointer:?} is not a list"))?;
    let mut entries = Vec::with_capacity(messages.len() + 1);
    if !pointer.is_empty() {
        // The document with its list emptied: its place is where its bytes are in `text`.
        let start = at.get().as_ptr() as usize - text.as_ptr() as usize;
        let end = start + at.get().len();
        let mut around = minify(&text[..start]);
        around.extend_from_slice(b"[]");
        around.extend(minify(&text[end..]));
        entries.push(Entry {
            key: None,
            record: around,
        });
    }
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (place, message) in messages.into_iter().enumerate() {
        let mut key = message_key(message, &spec.key).unwrap_or_else(|| format!("#{place}"));
        let n = seen.entry(key.clone()).or_default();
        *n += 1;
        if *n > 1 {
            key = format!("{key}#{n}");
        }
        entries.push(Entry {
            key: Some(key),
            record: minify(message.get()),
        });
    }
    Ok(entries)
}

/// The tokens of a JSON pointer, unescaped (`~1` is `/`, `~0` is `~`).
fn pointer_tokens(pointer: &str) -> impl Iterator<Item = String> + '_ {
    (pointer.split('/').skip(1)).map(|t| t.replace("~1", "/").replace("~0", "~"))
}

/// The member `token` of an object, or the element at that place of a list.
fn child<'a>(value: &'a RawValue, token: &str) -> Option<&'a RawValue> {
    let text = value.get();
    if text.starts_with('{') {
        let members: HashMap<String, &RawValue> = serde_json::from_str(text).ok()?;
        members.get(token).copied()
    } else {
        let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
        items.get(token.parse::<usize>().ok()?).copied()
    }
}

/// A message's id at `pointer`, as text; `None` when the pointer is empty or names no string
/// or number.
fn message_key(message: &RawValue, pointer: &str) -> Option<String> {
    if pointer.is_empty() {
        return None;
    }
    let mut at = message;
    for token in pointer_tokens(pointer) {
        at = child(at, &token)?;
    }
    match serde_json::from_str::<serde_json::Value>(at.get()).ok()? {
        serde_json::Value::String(s) => Some(s),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// `json` without the white space between its tokens (inside strings it is kept: a line
/// break in a string is always escaped, so none is left).
pub(crate) fn minify(json: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for &b in json.as_bytes() {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = b == b'"';
            out.push(b);
        }
    }
    out
}

/// What the last captured state of a source held: a hash of each entry by key, and of the
/// whole document.
#[derive(Debug, Default, Clone)]
pub(crate) struct State {
    entries: HashMap<Option<String>, u64>,
    /// xxh3-64 of the whole document; `None` before any state.
    pub(crate) document: Option<u64>,
}

/// What a new state adds to the one before it.
#[derive(Debug)]
pub(crate) struct Changes {
    /// The records to archive: the entries that are new or differ, in document order.
    pub(crate) records: Vec<Vec<u8>>,
    /// How many messages of the state before are no longer in the document.
    pub(crate) dropped: usize,
    /// The state to compare the next one with.
    pub(crate) state: State,
}

impl State {
    /// The state of `doc`, split into `entries`.
    pub(crate) fn of(doc: &[u8], entries: &[Entry]) -> State {
        State {
            entries: (entries.iter())
                .map(|e| (e.key.clone(), xxh3_64(&e.record)))
                .collect(),
            document: Some(xxh3_64(doc)),
        }
    }

    /// True when `doc`, split into `entries`, is a later (or the same) state of the document
    /// this state was taken of: the same bytes, or a message under the same id, which an
    /// agent gives one message of one session. A key that is a number is no such evidence,
    /// nor one made from a message's place (`#3`): Amp numbers its messages 0, 1, 2…, Aider's
    /// blocks are keyed by their offsets, and any two documents have a first message.
    pub(crate) fn same_document(&self, doc: &[u8], entries: &[Entry]) -> bool {
        if self.document == Some(xxh3_64(doc)) {
            return true;
        }
        let an_id = |key: &&String| {
            let id = key.split('#').next().unwrap_or_default();
            !id.is_empty() && !id.bytes().all(|b| b.is_ascii_digit())
        };
        (entries.iter())
            .filter_map(|e| e.key.as_ref())
            .filter(an_id)
            .any(|key| self.entries.contains_key(&Some(key.clone())))
    }

    /// What `entries` (of `doc`) add to this state.
    pub(crate) fn changes(&self, doc: &[u8], entries: Vec<Entry>) -> Changes {
        let state = State::of(doc, &entries);
        let dropped = (self.entries.keys())
            .filter(|k| k.is_some() && !state.entries.contains_key(*k))
            .count();
        let records = (entries.into_iter())
            .filter(|e| self.entries.get(&e.key) != state.entries.get(&e.key))
            .map(|e| e.record)
            .collect();
        Changes {
            records,
            dropped,
            state,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::SnapshotFormat;

    fn gemini() -> Spec {
        Spec {
            messages: Some("/messages".into()),
            key: "/id".into(),
            format: SnapshotFormat::Json,
        }
    }

    fn records(entries: &[Entry]) -> Vec<String> {
        (entries.iter())
            .map(|e| String::from_utf8(e.record.clone()).unwrap())
            .collect()
    }

    #[test]
    fn a_document_is_its_surroundings_and_one_record_per_message_as_written() {
        let doc = br#"{
  "sessionId": "s1",
  "messages": [
    {"id": "m1", "type": "user", "content": "a \"quoted\" line\nand  spaces", "n": 1.50},
    { "id": 7, "type": "gemini", "content": [ ] }
  ],
  "lastUpdated": "2026-12-03T10:00:00Z"
}"#;
        let entries = derive(doc, &gemini()).unwrap();
        let keys: Vec<_> = entries.iter().map(|e| e.key.clone()).collect();
        assert_eq!(keys, vec![None, Some("m1".into()), Some("7".into())]);
        assert_eq!(
            records(&entries),
            vec![
                r#"{"sessionId":"s1","messages":[],"lastUpdated":"2026-12-03T10:00:00Z"}"#,
                r#"{"id":"m1","type":"user","content":"a \"quoted\" line\nand  spaces","n":1.50}"#,
                r#"{"id":7,"type":"gemini","content":[]}"#,
            ]
        );
    }

    #[test]
    fn a_list_document_is_keyed_by_place_without_surroundings() {
        let doc = br#"[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]"#;
        let spec = Spec {
            messages: Some(String::new()),
            key: String::new(),
            format: SnapshotFormat::Json,
        };
        let entries = derive(doc, &spec).unwrap();
        let keys: Vec<_> = entries.iter().map(|e| e.key.clone()).collect();
        assert_eq!(keys, vec![Some("#0".into()), Some("#1".into())]);
    }

    #[test]
    fn a_repeated_key_is_told_apart_and_a_document_without_a_list_is_one_record() {
        let doc = br#"[{"ts":5,"c":"a"},{"ts":5,"c":"b"},{"c":"c"}]"#;
        let spec = Spec {
            messages: Some(String::new()),
            key: "/ts".into(),
            format: SnapshotFormat::Json,
        };
        let keys: Vec<_> = (derive(doc, &spec).unwrap().into_iter())
            .map(|e| e.key.unwrap())
            .collect();
        assert_eq!(keys, ["5", "5#2", "#2"]);
        let manifest = Spec {
            messages: None,
            key: String::new(),
            format: SnapshotFormat::Json,
        };
        let entries = derive(b"{ \"cwd\": \"/p\" }", &manifest).unwrap();
        assert_eq!(records(&entries), [r#"{"cwd":"/p"}"#]);
        assert_eq!(entries[0].key, None);
    }

    #[test]
    fn what_is_not_such_a_document_says_why() {
        let spec = gemini();
        assert!(derive(b"{\"messages\": [", &spec).is_err());
        let no_list = derive(b"{\"sessionId\": 1}", &spec).unwrap_err();
        assert!(no_list.contains("/messages"), "{no_list}");
        let not_list = derive(b"{\"messages\": {}}", &spec).unwrap_err();
        assert!(not_list.contains("not a list"), "{not_list}");
        assert!(derive(b"{\"messages\": []}\xff", &spec).is_err());
    }

    #[test]
    fn only_new_and_changed_entries_are_records_and_dropped_messages_are_counted() {
        let spec = gemini();
        let first = br#"{"t":1,"messages":[{"id":"a","c":"x"},{"id":"b","c":"y"}]}"#;
        let entries = derive(first, &spec).unwrap();
        let all = State::default().changes(first, entries);
        assert_eq!(all.records.len(), 3);
        // Same document with other white space: nothing new.
        let spaced = br#"{"t": 1, "messages": [{"id": "a", "c": "x"}, {"id": "b", "c": "y"}]}"#;
        let same = all.state.changes(spaced, derive(spaced, &spec).unwrap());
        assert!(same.records.is_empty());
        let next = br#"{"t":2,"messages":[{"id":"b","c":"y+"},{"id":"c","c":"z"}]}"#;
        let changes = same.state.changes(next, derive(next, &spec).unwrap());
        let got: Vec<_> = (changes.records.iter())
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect();
        assert_eq!(
            got,
            vec![
                r#"{"t":2,"messages":[]}"#,
                r#"{"id":"b","c":"y+"}"#,
                r#"{"id":"c","c":"z"}"#
            ]
        );
        assert_eq!(changes.dropped, 1);
    }

    #[test]
    fn a_later_state_shares_an_id_or_the_bytes_and_another_document_shares_neither() {
        let spec = gemini();
        let state_of = |doc: &[u8]| State::of(doc, &derive(doc, &spec).unwrap());
        let same =
            |state: &State, doc: &[u8]| state.same_document(doc, &derive(doc, &spec).unwrap());
        let captured = state_of(br#"{"messages":[{"id":"a","c":"x"}]}"#);
        assert!(same(&captured, br#"{"messages":[{"id":"a","c":"x"}]}"#));
        assert!(same(
            &captured,
            br#"{"t":2,"messages":[{"id":"a","c":"x+"},{"id":"b"}]}"#
        ));
        assert!(!same(&captured, br#"{"messages":[{"id":"z","c":"x"}]}"#));
        // Messages keyed by their place: the first message of every document is `#0`.
        let by_place = Spec {
            messages: Some(String::new()),
            key: String::new(),
            format: SnapshotFormat::Json,
        };
        let doc = br#"[{"c":"x"}]"#;
        let captured = State::of(doc, &derive(doc, &by_place).unwrap());
        let other = br#"[{"c":"y"}]"#;
        assert!(!captured.same_document(other, &derive(other, &by_place).unwrap()));
        assert!(captured.same_document(doc, &derive(doc, &by_place).unwrap()));
        // Messages numbered 0, 1, 2… (Amp's): every thread has a message 0.
        let by_number = Spec {
            messages: Some("/messages".into()),
            key: "/messageId".into(),
            format: SnapshotFormat::Json,
        };
        let thread = |text: &str| format!(r#"{{"messages":[{{"messageId":0,"c":"{text}"}}]}}"#);
        let (a, b) = (thread("a"), thread("b"));
        let captured = State::of(a.as_bytes(), &derive(a.as_bytes(), &by_number).unwrap());
        let entries = derive(b.as_bytes(), &by_number).unwrap();
        assert!(!captured.same_document(b.as_bytes(), &entries));
    }

    #[test]
    fn minify_keeps_strings_whole() {
        let text = "{ \"a\\\\\" : \"b \\\" c\" ,\n\t\"d\":[1, 2] }";
        assert_eq!(minify(text), br#"{"a\\":"b \" c","d":[1,2]}"#);
    }
}
