//! The short forms every face shows: a text on one line cut to a length, how long ago, a path
//! with `~`, the shortest prefix that names a session, a message's part as JSON.

use crate::agents::message::Part;
use crate::platform::time::format_time;
use serde_json::{Value, json};
use std::path::Path;

/// `text` cut to `max` characters, with `…` when cut, on one line.
/// `text` with each control character shown as `?`: an agent's text (a project, a model, a
/// title) never moves the terminal.
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return text.into();
    }
    (text.chars())
        .map(|c| if c.is_control() { '?' } else { c })
        .collect::<String>()
        .into()
}

pub(crate) fn shorten(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// How long ago `ms` was, for people: `3 min ago`, `5 h ago`, `2 d ago`, else the date.
pub(crate) fn ago(ms: Option<i64>, now_ms: i64) -> String {
    let Some(ms) = ms else {
        return "-".into();
    };
    let secs = (now_ms - ms).max(0) / 1000;
    match secs {
        0..60 => "just now".into(),
        60..3600 => format!("{} min ago", secs / 60),
        3600..86_400 => format!("{} h ago", secs / 3600),
        86_400..2_592_000 => format!("{} d ago", secs / 86_400),
        _ => format_time(ms)[..10].to_owned(),
    }
}

/// A path with the home directory written `~`.
pub(crate) fn tilde(path: &str, home: Option<&Path>) -> String {
    match home.and_then(|h| Path::new(path).strip_prefix(h).ok()) {
        Some(rest) if rest.as_os_str().is_empty() => "~".into(),
        Some(rest) => format!("~/{}", rest.display()),
        None => path.to_owned(),
    }
}

/// How many characters of an id the sessions table shows at least: a UUID's first group.
pub(crate) const SHORT_ID: usize = 8;

/// The shortest prefix of `id`, of [`SHORT_ID`] characters or more (or the whole id), that
/// names it among `known` (every id in the index, sorted) as `show` reads a prefix: every other
/// id it starts is one that extends `id` (a session's folder's files extend its id).
pub(crate) fn short_id(id: &str, known: &[String]) -> String {
    let chars: Vec<(usize, char)> = id.char_indices().collect();
    for n in SHORT_ID..chars.len() {
        let prefix = &id[..chars[n].0];
        let from = known.partition_point(|k| k.as_str() < prefix);
        let others = known[from..].iter().take_while(|k| k.starts_with(prefix));
        if others.clone().all(|k| k.starts_with(id)) {
            return prefix.to_owned();
        }
    }
    id.to_owned()
}

/// A message's part as JSON, as `show --format json` and the MCP server give it.
pub(crate) fn part_json(part: &Part) -> Value {
    match part {
        Part::Text(t) => json!({"type": "text", "text": t}),
        Part::Thinking(t) => json!({"type": "thinking", "text": t}),
        Part::ToolCall { name, input } => {
            json!({"type": "tool_call", "name": name, "input": input})
        }
        Part::ToolResult(t) => json!({"type": "tool_result", "text": t}),
        Part::Raw(t) => json!({"type": "raw", "text": t}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_how_long_ago() {
        let now = 1_796_032_800_000;
        assert_eq!(ago(Some(now - 30_000), now), "just now");
        assert_eq!(ago(Some(now - 5 * 60_000), now), "5 min ago");
        assert_eq!(ago(Some(now - 3 * 3_600_000), now), "3 h ago");
        assert_eq!(ago(Some(now - 40 * 86_400_000), now), "2026-10-21");
    }

    #[test]
    fn long_text_is_cut_with_an_ellipsis_on_one_line() {
        assert_eq!(shorten("a\nb  c", 10), "a b c");
        assert_eq!(shorten("abcdef", 4), "abc…");
        assert_eq!(tilde("/home/u/app", Some(Path::new("/home/u"))), "~/app");
    }

    #[test]
    fn an_id_is_shown_by_its_shortest_unique_prefix_of_eight_characters_or_more() {
        let mut known: Vec<String> = [
            "7c9e6679-7425-40de-944b-e07fc1f90ae7",
            "7c9e6679-7425-40de-944b-e07fc1f90ae7/subagents/workflows/wf-1/journal",
            "scratch-session-alpha",
            "scratch-session-beta",
            "notes",
        ]
        .map(String::from)
        .into();
        known.sort();
        let short = |id: &str| short_id(id, &known);
        assert_eq!(short(&known[0]), "7c9e6679", "its folder's files extend it");
        assert_eq!(short("scratch-session-alpha"), "scratch-session-a");
        assert_eq!(short("scratch-session-beta"), "scratch-session-b");
        assert_eq!(short("notes"), "notes");
    }
}
