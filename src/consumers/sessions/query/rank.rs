//! The order of search hits: FTS5's BM25 score of each message, weighed by who speaks in it,
//! the newest first among equals.

use crate::agents::message::Role;

/// What a match counts for in what neither the person nor the assistant said to the other (a
/// tool's call or output, the model's reasoning, text the agent injected, a record read as
/// raw JSON), against the same match in a prompt or an answer. A person looks for the
/// session where they asked or were answered, while a log or a test run repeats the words of
/// a problem many times over and the model's reasoning restates the prompt: BM25 (FTS5's,
/// k1 = 1.2) lets 40 repeats in a long log outscore one mention in a short prompt, and a
/// reasoning as short as the prompt ties with it and wins as the newer. The judged set
/// (`benches/judged`, BENCHMARKS.md) put the same sessions first with any weight tried from
/// 0.1 to 0.75.
const ASIDE: f64 = 0.5;

/// What a match in a message of `role` counts for.
fn weight(role: Role) -> f64 {
    match role {
        // A compaction's summary is the conversation, retold.
        Role::User | Role::Assistant | Role::Compact => 1.0,
        Role::Tool | Role::Reasoning | Role::System | Role::Unparsed => ASIDE,
    }
}

/// The score of a match of a search over `message_text` and its messages `m`, the lower the
/// better: FTS5's `bm25()` (negative, the lower the better; told the rows of the terms in the
/// statement's parameter `known`, and the message's size, `store::BM25`) weighed by who
/// speaks, so that a weight below 1 moves a message down.
pub(super) fn score(known: &str) -> String {
    // Each ranked message's role is compared with these in turn: only the roles that do not
    // count whole, the tools' first (most messages are a tool's). Any other counts whole, a
    // role the index holds and `Role` does not name included (a NULL weight would sort its
    // messages first).
    let whens: String = (Role::ALL.iter())
        .filter(|r| weight(**r) != 1.0)
        .map(|r| format!(" WHEN '{}' THEN {:?}", r.as_str(), weight(*r)))
        .collect();
    let bm25 = crate::consumers::sessions::store::BM25;
    format!("{bm25}(message_text, {known}, m.places) * CASE m.role{whens} ELSE 1.0 END")
}

/// The `ORDER BY` of ranked matches whose [`score`] is the column `score` and whose time is
/// the column `at`: the best match first, then the newest.
pub(super) const ORDER_BY: &str = "score, at DESC";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_score_weighs_each_role_that_does_not_count_whole_and_tools_first() {
        let order = score("?1");
        for role in Role::ALL {
            let when = format!("WHEN '{}' THEN", role.as_str());
            assert_eq!(
                order.contains(&when),
                weight(role) != 1.0,
                "{role:?} in {order}"
            );
        }
        assert!(
            order.contains("CASE m.role WHEN 'tool' THEN 0.5"),
            "{order}"
        );
        assert!(order.contains("ELSE 1.0 END"), "{order}");
    }
}
