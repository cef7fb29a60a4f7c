//! Wall-clock time as the archive stores it (Unix milliseconds) and as people read it
//! (RFC 3339, UTC).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A time given in Unix ms as RFC 3339 UTC, to the second.
pub(crate) fn format_time(ms: i64) -> String {
    // humantime writes years up to 9999 only.
    const LAST: i64 = 253_402_300_799_999;
    let t = UNIX_EPOCH + Duration::from_millis(ms.clamp(0, LAST) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
