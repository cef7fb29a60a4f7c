//! What the live-latency benchmarks share: the records they append (each carrying its index),
//! finding that index again in whatever line a subject prints.

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
