//! How the pages write tokens and what they cost.

use crate::consumers::sessions::usage;

/// Every token of `t`, of whatever kind.
pub(super) fn all_tokens(t: &usage::Tokens) -> i64 {
    t.input + t.output + t.cache_read + t.cache_write
}

/// What `t` cost, `*` when some of its calls have no price; a dash when none has.
pub(super) fn cost(t: &usage::Tokens) -> String {
    let mark = if t.unpriced.is_empty() { "" } else { "*" };
    match t.cost {
        Some(c) if c > 0.0 && c < 0.01 => format!("${c:.4}{mark}"),
        Some(c) => format!("${c:.2}{mark}"),
        None => "—".into(),
    }
}
