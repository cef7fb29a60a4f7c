//! Fuzzes the record check: whatever the single-pass checker calls certainly valid, the
//! reference rule (serde_json, with surrogate escapes allowed) must accept, and the verdict of
//! the slow path must be the reference's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use transcript_sync::fuzzing::{certainly_valid, reference_accepts, validate_slowly};

fuzz_target!(|bytes: &[u8]| {
    let reference = reference_accepts(bytes);
    if certainly_valid(bytes) {
        assert!(reference, "the checker accepted what the reference rejects");
    }
    assert_eq!(validate_slowly(bytes).is_ok(), reference, "the reference's verdict");
});
