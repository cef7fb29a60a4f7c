//! What counts as a record: one complete line holding one JSON value.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;

mod single_pass;
pub use single_pass::certainly_valid;

/// Checks that `record` is one JSON value: valid UTF-8 (inside strings too), correct syntax,
/// nothing after the value, and nesting within serde_json's recursion limit (128).
///
/// A single-pass check settles the common case; anything it is not sure of goes to serde_json,
/// which gives the verdict. `Err` carries serde_json's reason, for the rejects table.
pub fn validate(record: &[u8]) -> Result<(), String> {
    if certainly_valid(record) {
        return Ok(());
    }
    validate_with_serde(record)
}

/// The verdict of serde_json alone.
pub fn validate_with_serde(record: &[u8]) -> Result<(), String> {
    serde_json::from_slice::<Valid>(record)
        .map(|_| ())
        .map_err(|e| format!("invalid JSON: {e}"))
}

/// True for a line with nothing but white space: not a record, skipped and counted.
pub fn is_blank(line: &[u8]) -> bool {
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
    fn rejects_nesting_past_the_recursion_limit() {
        let deep = "[".repeat(100_000) + &"]".repeat(100_000);
        let err = validate(deep.as_bytes()).unwrap_err();
        assert!(err.contains("recursion limit"), "{err}");
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
