//! The strings of one JSON text, found in place: where each lies, whether it is a member's
//! name, and the name of the member whose value it is.

use memchr::memchr2;
use std::borrow::Cow;
use std::ops::Range;

/// One string of a JSON text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Str {
    /// Its bytes between the quotes, as written (escapes and all).
    pub raw: Range<usize>,
    /// True when it is a member's name.
    pub is_name: bool,
    /// The name of the member whose value it is (as written), if it is one.
    pub member: Option<Range<usize>>,
    /// True when it holds a backslash escape.
    pub escaped: bool,
}

/// A container being read, and, in an object, the last member name seen.
enum Frame {
    Object(Option<Range<usize>>),
    Array,
}

/// The strings of `text`, in order. `None` when `text` is not one JSON object or array
/// (its strings could not be told from the rest, or text lies outside them), which callers
/// treat as plain text. Outside strings only the bytes of JSON's structure, numbers and
/// literals may appear, and nothing after the value but whitespace.
pub(crate) fn strings(text: &[u8]) -> Option<Vec<Str>> {
    let start = text.iter().position(|b| !b.is_ascii_whitespace())?;
    if !matches!(text[start], b'{' | b'[') {
        return None;
    }
    let mut out = Vec::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut i = start;
    while i < text.len() {
        match text[i] {
            b'{' => frames.push(Frame::Object(None)),
            b'[' => frames.push(Frame::Array),
            b'}' | b']' => {
                frames.pop()?;
                if frames.is_empty() {
                    let rest = &text[i + 1..];
                    return rest.iter().all(u8::is_ascii_whitespace).then_some(out);
                }
            }
            b'"' => {
                let (end, escaped) = string_end(text, i + 1)?;
                let raw = i + 1..end;
                let is_name = next_significant(text, end + 1) == Some(b':');
                let member = match frames.last_mut() {
                    Some(Frame::Object(name)) if is_name => {
                        *name = Some(raw.clone());
                        None
                    }
                    Some(Frame::Object(name)) => name.clone(),
                    _ => None,
                };
                out.push(Str {
                    raw,
                    is_name,
                    member,
                    escaped,
                });
                i = end;
            }
            b if outside_strings(b) => {}
            _ => return None,
        }
        i += 1;
    }
    None
}

/// Whether `b` may appear in JSON outside a string: structure, whitespace, and the bytes of
/// numbers and of `true`, `false` and `null`.
fn outside_strings(b: u8) -> bool {
    matches!(b, b',' | b':' | b'0'..=b'9' | b'-' | b'+' | b'.' | b'E')
        || b.is_ascii_whitespace()
        || b"truefalsn".contains(&b)
}

/// The index of the quote that closes the string whose contents start at `from`, and whether
/// it holds an escape.
fn string_end(text: &[u8], from: usize) -> Option<(usize, bool)> {
    let mut i = from;
    let mut escaped = false;
    loop {
        i += memchr2(b'"', b'\\', &text[i..])?;
        if text[i] == b'"' {
            return Some((i, escaped));
        }
        escaped = true;
        i += 2;
        if i > text.len() {
            return None;
        }
    }
}

fn next_significant(text: &[u8], from: usize) -> Option<u8> {
    text.get(from..)?
        .iter()
        .copied()
        .find(|b| !b.is_ascii_whitespace())
}

/// The text of a string's raw contents: borrowed when it holds no escape. `None` when the
/// contents are not valid JSON string text.
pub(crate) fn decode(raw: &[u8], escaped: bool) -> Option<Cow<'_, str>> {
    if !escaped {
        return std::str::from_utf8(raw).ok().map(Cow::Borrowed);
    }
    let mut quoted = Vec::with_capacity(raw.len() + 2);
    quoted.push(b'"');
    quoted.extend_from_slice(raw);
    quoted.push(b'"');
    // A lone surrogate escape (JavaScript's string cut inside an emoji) is allowed in the
    // archive, and refused by serde_json: read as U+FFFD.
    let decoded = serde_json::from_slice::<String>(&quoted).ok().or_else(|| {
        let replaced = crate::read::record::with_surrogates_replaced(&quoted);
        serde_json::from_slice::<String>(&replaced).ok()
    });
    decoded.map(Cow::Owned)
}

/// `text` as a JSON string, quotes included.
pub(crate) fn encode(text: &str) -> String {
    serde_json::to_string(text).expect("a str serializes to JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(json: &str) -> Vec<(String, bool, Option<String>)> {
        let b = json.as_bytes();
        strings(b)
            .expect("json")
            .into_iter()
            .map(|s| {
                (
                    decode(&b[s.raw.clone()], s.escaped).unwrap().into_owned(),
                    s.is_name,
                    s.member.map(|m| json[m].to_owned()),
                )
            })
            .collect()
    }

    #[test]
    fn strings_know_their_member_names_through_nesting() {
        let found = texts(r#"{"a":"x","b":{"c":["y",{"d":"z"}],"e" : "w\"q"},"f":1}"#);
        let want: Vec<(String, bool, Option<String>)> = vec![
            ("a".into(), true, None),
            ("x".into(), false, Some("a".into())),
            ("b".into(), true, None),
            ("c".into(), true, None),
            ("y".into(), false, None),
            ("d".into(), true, None),
            ("z".into(), false, Some("d".into())),
            ("e".into(), true, None),
            ("w\"q".into(), false, Some("e".into())),
            ("f".into(), true, None),
        ];
        assert_eq!(found, want);
    }

    #[test]
    fn escapes_are_decoded_and_text_that_is_not_an_object_or_array_is_refused() {
        assert_eq!(
            texts(r#"["\u0041KIA\n\\", "\/"]"#),
            vec![("AKIA\n\\".into(), false, None), ("/".into(), false, None)]
        );
        assert_eq!(strings(b"password=x"), None);
        assert_eq!(strings(b"[2024-01-01] export TOKEN=x"), None);
        assert_eq!(strings(b"{ token: x }"), None);
        assert_eq!(strings(br#"{"a":1} trailing"#), None);
        assert_eq!(strings(br#"[1.5e-3, true, false, null] "#), Some(vec![]));
        assert_eq!(
            decode(br"cut \ud83d", true).as_deref(),
            Some("cut \u{fffd}"),
            "a lone surrogate"
        );
        assert_eq!(strings(br#""a string""#), None);
        assert_eq!(strings(br#"{"unterminated"#), None);
        assert_eq!(strings(br#"{"a":"b"}}"#), None);
        assert_eq!(strings(br#"{"a":"b""#), None);
    }

    #[test]
    fn encode_writes_a_json_string() {
        assert_eq!(encode("a\"b\n\u{1}é"), r#""a\"b\n\u0001é""#);
    }
}
