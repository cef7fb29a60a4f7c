//! Fuzzes the record check: whatever the single-pass checker calls certainly valid, serde_json
//! must accept, and the verdict of `validate` must be serde_json's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use transcript_sync::fuzzing::{certainly_valid, validate_with_serde};

fuzz_target!(|bytes: &[u8]| {
    let serde = serde_json::from_slice::<serde_json::Value>(bytes).is_ok();
    if certainly_valid(bytes) {
        assert!(serde, "the checker accepted what serde_json rejects");
    }
    assert_eq!(validate_with_serde(bytes).is_ok(), serde, "serde_json's verdict");
});
