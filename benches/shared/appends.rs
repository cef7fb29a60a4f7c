//! What the live-latency benchmarks share: the records they append (each carrying its index),
//! finding that index again in whatever line a subject prints, and quantiles of the times.

/// One JSON record of about `pad + 20` bytes, newline included, carrying its index `i`.
pub fn record(i: u64, pad: usize) -> String {
    format!("{{\"i\":{i},\"pad\":\"{}\"}}\n", "x".repeat(pad))
}

/// The index of the record a line holds: a raw record (`{"i":…`) or an envelope embedding it
/// (`…"record":{"i":…`); `None` for any other line.
pub fn index_of(line: &str) -> Option<u64> {
    let rest = &line[line.find("{\"i\":")? + 5..];
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

/// The `q` quantile of `sorted` (ascending, not empty), as the latency tables have it: the
/// value at rank `len × q`, the last one at most.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

/// The number in the environment variable `key`, else `default`.
pub fn env_or(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
