//! What counts as a record: one complete line holding one JSON value.

use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

mod single_pass;
pub(crate) mod strings;
pub use single_pass::certainly_valid;

/// Checks that `record` is one JSON value by RFC 8259's grammar: valid UTF-8 (inside strings
/// too), `\u` escapes of any four hex digits (a lone or reversed UTF-16 surrogate half
/// included, as JavaScript writes a string cut inside an emoji), numbers within an `f64`'s
/// range, nesting of at most 127 levels, and nothing after the value but white space.
///
/// A single-pass check settles the common case; anything it is not sure of goes to
/// [`validate_slowly`]. `Err` carries the reason, for the rejects table.
pub fn validate(record: &[u8]) -> Result<(), String> {
    if certainly_valid(record) {
        return Ok(());
    }
    validate_slowly(record)
}

/// The verdict, and its reason, for a line the single pass is not sure of: serde_json's, on the
/// line with its surrogate escapes made acceptable to it (see `with_surrogates_replaced`).
pub fn validate_slowly(record: &[u8]) -> Result<(), String> {
    let text = with_surrogates_replaced(record);
    serde_json::from_slice::<Valid>(&text)
        .map(|_| ())
        .map_err(|e| format!("invalid JSON: {e}"))
}

/// `record` as a JSON value, for readers of its fields (the session index, `show`), without its
/// `unread` members: they are read past, not built. A lone surrogate escape, which serde_json
/// refuses, reads as U+FFFD (and so does every surrogate escape of a record that has one).
/// `None` for bytes that are not a record.
///
/// The record's UTF-8 is checked once, as a whole, so that serde_json need not check each
/// string again.
pub(crate) fn parse_value(record: &[u8], unread: &[Unread]) -> Option<Value> {
    let parse = |bytes: &[u8]| {
        let text = simdutf8::basic::from_utf8(bytes).ok()?;
        let mut json = serde_json::Deserializer::from_str(text);
        let value = Without(unread).deserialize(&mut json).ok()?;
        json.end().ok().map(|()| value)
    };
    parse(record).or_else(|| parse(&with_surrogates_replaced(record)))
}

/// A member of a record's objects that its agent never reads, left out when the record is
/// parsed ([`parse_value`]): a tool's full result beside the one the message holds, or
/// an encrypted blob, can be most of a record.
#[derive(Debug)]
pub(crate) enum Unread {
    /// The member with this key.
    Member(&'static str),
    /// These members of the object that is the value of the member with this key.
    Within(&'static str, &'static [Unread]),
}

impl Unread {
    /// The key of the member it names.
    pub(crate) fn key(&self) -> &'static str {
        match self {
            Unread::Member(key) | Unread::Within(key, _) => key,
        }
    }
}

/// A JSON value without the `.0` members of its object.
struct Without<'a>(&'a [Unread]);

impl<'de> DeserializeSeed<'de> for Without<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match self.0 {
            [] => Value::deserialize(deserializer),
            _ => deserializer.deserialize_any(self),
        }
    }
}

impl<'de> Visitor<'de> for Without<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = match self.0.iter().find(|u| u.key() == key) {
                Some(Unread::Member(_)) => {
                    map.next_value::<IgnoredAny>()?;
                    continue;
                }
                Some(Unread::Within(_, inner)) => map.next_value_seed(Without(inner))?,
                None => map.next_value()?,
            };
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// `bytes` with the four hex digits of every `\u` escape of a UTF-16 surrogate half (D800 to
/// DFFF) replaced by `fffd`. serde_json pairs surrogate escapes and refuses a lone one, which
/// RFC 8259's grammar allows; with the same length, the positions in its other reasons stay
/// true. Borrowed when there is nothing to replace.
///
/// Escapes are found by reading backslash pairs from the start, without telling strings apart:
/// outside a string a backslash is an error whatever follows it, so the verdict is the same.
pub(crate) fn with_surrogates_replaced(bytes: &[u8]) -> Cow<'_, [u8]> {
    let mut text = Cow::Borrowed(bytes);
    let mut at = 0;
    while let Some(k) = memchr::memchr(b'\\', &bytes[at..]) {
        let escape = at + k;
        if is_surrogate_escape(&bytes[escape..]) {
            text.to_mut()[escape + 2..escape + 6].copy_from_slice(b"fffd");
        }
        at = escape + 2;
        if at >= bytes.len() {
            break;
        }
    }
    text
}

/// True when `escape` starts with `\u` and four hex digits naming a surrogate half.
fn is_surrogate_escape(escape: &[u8]) -> bool {
    let Some([b'\\', b'u', hex @ ..]) = escape.get(..6) else {
        return false;
    };
    let unit = hex
        .iter()
        .try_fold(0u32, |unit, &h| Some(unit << 4 | (h as char).to_digit(16)?));
    unit.is_some_and(|u| (0xD800..0xE000).contains(&u))
}

/// The reference verdict the single pass and [`validate`] are tested against, written for
/// plainness rather than speed: a byte-by-byte walk that tracks strings and escapes rewrites
/// every surrogate escape inside a string as `\u0041`, then serde_json judges the text.
#[doc(hidden)]
pub fn reference_accepts(bytes: &[u8]) -> bool {
    let mut text = bytes.to_vec();
    let (mut in_string, mut i) = (false, 0);
    while i < text.len() {
        match (in_string, text[i]) {
            (_, b'"') => in_string = !in_string,
            (true, b'\\') => {
                let hex = text
                    .get(i + 2..i + 6)
                    .and_then(|h| std::str::from_utf8(h).ok());
                let unit = hex.and_then(|h| u16::from_str_radix(h, 16).ok());
                let all_hex = hex.is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
                if text.get(i + 1) == Some(&b'u')
                    && all_hex
                    && unit.is_some_and(|u| (0xD800..=0xDFFF).contains(&u))
                {
                    text[i + 2..i + 6].copy_from_slice(b"0041");
                }
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    serde_json::from_slice::<serde_json::Value>(&text).is_ok()
}

/// True for a line with nothing but white space: not a record, skipped and counted.
pub(crate) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// A value that has been checked and thrown away. `IgnoredAny` would be faster, but it neither
/// validates UTF-8 in strings nor applies the recursion limit; `deserialize_any` does both.
struct Valid;

impl<'de> Deserialize<'de> for Valid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Valid, D::Error> {
        deserializer.deserialize_any(ValidVisitor)
    }
}

struct ValidVisitor;

impl<'de> Visitor<'de> for ValidVisitor {
    type Value = Valid;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_str<E>(self, _: &str) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_unit<E>(self) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Valid, A::Error> {
        while seq.next_element::<Valid>()?.is_some() {}
        Ok(Valid)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Valid, A::Error> {
        while map.next_entry::<Valid, Valid>()?.is_some() {}
        Ok(Valid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The named members are left out where they are named, and nowhere else; the rest of the
    /// record is read as serde_json reads it.
    #[test]
    fn unread_members_are_left_out_where_named() {
        use serde_json::json;
        const UNREAD: &[Unread] = &[
            Unread::Member("big"),
            Unread::Within("payload", &[Unread::Member("blob")]),
        ];
        let record = br#"{"big":{"deep":[1,2]},"keep":[{"big":1}],"payload":{"blob":"x","text":"\u00e9","n":-1.5,"u":18446744073709551615},"other":{"blob":null}}"#;
        let read = json!({"keep":[{"big":1}],"payload":{"text":"é","n":-1.5,"u":u64::MAX},"other":{"blob":null}});
        assert_eq!(parse_value(record, UNREAD), Some(read));
        assert_eq!(
            parse_value(record, &[]),
            serde_json::from_slice(record).ok()
        );
        // A member named to be looked within that is no object is kept whole.
        let text = br#"{"payload":"text","list":[true,false,null]}"#;
        assert_eq!(parse_value(text, UNREAD), serde_json::from_slice(text).ok());
        // A lone surrogate escape in a member left out is not read: the pairs in the rest stay
        // whole, where reading it would have made every surrogate escape U+FFFD.
        let cut_emoji = br#"{"big":"a\ud83d","payload":{"text":"\ud83d\ude00"}}"#;
        assert_eq!(
            parse_value(cut_emoji, UNREAD),
            Some(json!({"payload":{"text":"😀"}}))
        );
        // One read still reads as U+FFFD; what is not a record is none.
        let lone = br#"{"payload":{"text":"a\ud83d","blob":1}}"#;
        assert_eq!(
            parse_value(lone, UNREAD),
            Some(json!({"payload":{"text":"a\u{fffd}"}}))
        );
        for not_one in [&b"{\"a\":1} x"[..], b"{\"a\":\"\xff\"}", b"{\"big\":[1,}"] {
            assert_eq!(parse_value(not_one, UNREAD), None, "{not_one:?}");
        }
    }

    #[test]
    fn accepts_every_kind_of_json_value() {
        for ok in [
            &br#"{"type":"user","message":{"content":[1,2.5,-3,null,true,"\u00e9"]}}"#[..],
            b"42",
            b"\"text\"",
            b"  {\"padded\": true}  ",
        ] {
            assert_eq!(validate(ok), Ok(()), "{}", String::from_utf8_lossy(ok));
        }
    }

    #[test]
    fn rejects_invalid_utf8_inside_strings_and_keys() {
        assert!(validate(b"{\"a\":\"\xff\xfe\"}").is_err());
        assert!(validate(b"{\"\xff\":1}").is_err());
    }

    #[test]
    fn rejects_nesting_past_127_levels() {
        let nested = |n: usize| "[".repeat(n) + &"]".repeat(n);
        assert_eq!(validate(nested(127).as_bytes()), Ok(()));
        let err = validate(nested(128).as_bytes()).unwrap_err();
        assert!(err.contains("recursion limit"), "{err}");
        let err = validate(nested(100_000).as_bytes()).unwrap_err();
        assert!(err.contains("recursion limit"), "{err}");
    }

    /// A string cut between the two halves of an emoji, as Node's `JSON.stringify` writes it,
    /// is JSON by RFC 8259's grammar: such a line is a record, on either path of the check.
    #[test]
    fn lone_and_reversed_surrogate_escapes_are_records() {
        for line in [
            &br#"{"type":"user","message":{"content":"tool output \ud83d"}}"#[..],
            br#"{"lone_high":"abc\ud83d","lone_low":"\udc00x","reversed":"\ude00\ud83d"}"#,
            br#"["\uD800", "\uDFFF", "\ud83d\ude00"]"#,
        ] {
            assert_eq!(validate(line), Ok(()), "{}", String::from_utf8_lossy(line));
            assert_eq!(
                validate_slowly(line),
                Ok(()),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // A number the single pass leaves to the slow path, beside a lone surrogate.
        assert_eq!(validate(br#"{"n":1e300,"s":"\ud83d"}"#), Ok(()));
        let deep = "[".repeat(100) + r#""\udc00""# + &"]".repeat(100);
        assert_eq!(validate(deep.as_bytes()), Ok(()));
    }

    #[test]
    fn what_stays_rejected_is_named() {
        let reason = |line: &[u8]| validate(line).unwrap_err();
        assert!(reason(br#"{"a":"\u12"}"#).contains("escape"));
        assert!(reason(br#"{"a":"\uzzzz"}"#).contains("escape"));
        assert!(reason(br#"{"n":1e400,"s":"\ud83d"}"#).contains("out of range"));
        assert!(reason(b"{\"s\":\"\\ud83d\xff\"}").contains("invalid"));
        let late = reason(br#"{"s":"\ud83d", "t": x}"#);
        assert!(
            late.contains("expected value at line 1 column 21"),
            "{late}"
        );
    }

    #[test]
    fn surrogate_escapes_are_replaced_in_place_and_nothing_else() {
        let replaced = |s: &[u8]| with_surrogates_replaced(s).into_owned();
        assert_eq!(replaced(br#""\ud83d\ude00""#), br#""\ufffd\ufffd""#);
        assert_eq!(
            replaced(br#""\\ud83d""#),
            br#""\\ud83d""#,
            "an escaped backslash"
        );
        assert_eq!(replaced(br#""\\\ud83d""#), br#""\\\ufffd""#);
        assert_eq!(
            replaced(br#""\u00e9\uD7FF\uE000""#),
            br#""\u00e9\uD7FF\uE000""#
        );
        assert_eq!(replaced(br#""\ud8"#), br#""\ud8"#, "a cut escape");
        assert_eq!(replaced(b"\\"), b"\\");
        assert!(matches!(with_surrogates_replaced(b"{}"), Cow::Borrowed(_)));
    }

    #[test]
    fn rejects_trailing_garbage_and_nul_bytes() {
        assert!(validate(b"{} x").is_err());
        assert!(validate(b"\0").is_err());
        assert!(validate(b"{\"a\":1}\0").is_err());
    }

    #[test]
    fn blank_means_only_white_space() {
        assert!(is_blank(b""));
        assert!(is_blank(b" \t\r"));
        assert!(!is_blank(b" 1"));
    }
}
