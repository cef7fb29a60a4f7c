//! Knobs a benchmark reads from its environment (`COMPARE_QUICK=1`, `TEAM_RECORDS=300`).

/// The number in the environment variable `key`, else `default` (also when it is not a
/// number).
pub fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Whether the environment variable `key` is set to something other than empty or `0`.
pub fn env_flag(key: &str) -> bool {
    std::env::var_os(key).is_some_and(|v| v != "0" && !v.is_empty())
}
