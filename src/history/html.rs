//! A conversation as HTML, written once for every page that shows one: the web view's session
//! page and the file `show --format html` writes (and the web view downloads) to share it.
//! Written with maud, which escapes every value put in them: a transcript's text reaches the
//! HTML only escaped, or as Markdown made safe by [`markdown`].

pub(crate) mod markdown;
pub(crate) mod share;

use crate::agents::message::{Part, Role, parse, prefix_of};
use crate::consumers::sessions::query::format_time;
use crate::history::display::shorten;
use indicatif::{HumanBytes, HumanCount};
use maud::{Markup, PreEscaped, html};

/// The most of one part shown: the raw transcript has all of it.
const MAX_SHOWN: usize = 200 * 1024;

/// One message of a conversation: its role and time, then its parts.
pub(crate) fn message(
    seq: i64,
    harness: &str,
    role: &str,
    at_ms: Option<i64>,
    record: &[u8],
) -> Markup {
    let parsed = parse(harness, record);
    // The agent's key: a live record of a message already shown replaces it (an upsert) or
    // is passed over (a copy), as the index keeps one.
    let key = parsed.message.as_ref().and_then(|m| m.key.clone());
    let upsert = parsed.message.as_ref().is_some_and(|m| m.upsert);
    let parts = parsed
        .message
        .map(|m| m.parts)
        .unwrap_or_else(|| vec![Part::Raw(String::from_utf8_lossy(record).into_owned())]);
    let at = at_ms.or(parsed.at_ms);
    if role == Role::Compact.as_str() {
        return html! {
            div.compact id=(format!("m-{seq}")) data-seq=(seq) tabindex="-1" {
                span { "Compacted: what came before was summarised" }
                @if !parts.is_empty() {
                    details { summary { "The summary" } (parts_html(&parts, false)) }
                }
            }
        };
    }
    let prose = role == "user" || role == "assistant";
    html! {
        // Focusable (not by Tab) for the keys that move between messages.
        article class=(format!("msg role-{role}")) id=(format!("m-{seq}")) data-seq=(seq)
            tabindex="-1" data-key=[key] data-upsert=[upsert.then_some("1")] {
            div.who {
                span.role { (role) }
                @if let Some(at) = at { time datetime=(format_time(at)) { (format_time(at).replace('T', " ").trim_end_matches('Z')) } }
                a.anchor href=(format!("#m-{seq}")) title="Link to this message" { "#" }
            }
            @if role == "system" {
                details.system { summary { "System text" } (parts_html(&parts, false)) }
            } @else {
                (parts_html(&parts, prose))
            }
            (images_html(record))
        }
    }
}

/// The largest image shown inline.
const MAX_IMAGE: usize = 8 << 20;

/// The images a record holds inline (base64), shown as `data:` URLs, which run nothing:
/// Anthropic's `{"type": "image", "source": {"type": "base64", "media_type", "data"}}`,
/// Gemini's `{"inlineData": {"mimeType", "data"}}` and OpenAI's `data:image/…` URLs.
fn images_html(record: &[u8]) -> Markup {
    if memchr::memmem::find(record, b"base64").is_none() {
        return html! {};
    }
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(record) else {
        return html! {};
    };
    let mut found = Vec::new();
    images_in(&value, &mut found);
    html! {
        @for (kind, data) in &found {
            // Base64 holds 3 bytes in 4 characters.
            @let size = data.len() / 4 * 3;
            @if size > MAX_IMAGE {
                p.cut { "An image (" (kind) ", " (HumanBytes(size as u64)) ") not shown: the raw transcript holds it" }
            } @else {
                img.attached src=(format!("data:{kind};base64,{data}")) alt="An image in the transcript" loading="lazy";
            }
        }
    }
}

/// Each inline image of `value` (its type and base64 data), for the types a browser shows
/// as pictures only.
fn images_in<'a>(value: &'a serde_json::Value, found: &mut Vec<(&'a str, &'a str)>) {
    use serde_json::Value;
    let shown = |kind: &str| ["image/png", "image/jpeg", "image/gif", "image/webp"].contains(&kind);
    let base64 = |data: &str| {
        !data.is_empty() && (data.bytes()).all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
    };
    match value {
        Value::Object(map) => {
            let source = map
                .get("source")
                .filter(|_| map.get("type").and_then(Value::as_str) == Some("image"));
            let pair = |o: &'a Value, kind: &str, data: &str| -> Option<(&'a str, &'a str)> {
                Some((o.get(kind)?.as_str()?, o.get(data)?.as_str()?))
            };
            let image = (source.and_then(|s| pair(s, "media_type", "data"))).or_else(|| {
                map.get("inlineData")
                    .and_then(|d| pair(d, "mimeType", "data"))
            });
            if let Some((kind, data)) = image.filter(|(k, d)| shown(k) && base64(d)) {
                found.push((kind, data));
                return;
            }
            map.values().for_each(|v| images_in(v, found));
        }
        Value::Array(items) => items.iter().for_each(|v| images_in(v, found)),
        Value::String(url) => {
            let image = (url.strip_prefix("data:"))
                .and_then(|rest| rest.split_once(";base64,"))
                .filter(|(k, d)| shown(k) && base64(d));
            if let Some(image) = image {
                found.push(image);
            }
        }
        _ => {}
    }
}

/// `text` cut to what a page shows, with a note of its whole size.
fn shown(text: &str) -> (&str, Option<String>) {
    let cut = prefix_of(text, MAX_SHOWN);
    if cut.len() == text.len() {
        return (text, None);
    }
    let note = format!(
        "cut at {} of {}: the raw transcript holds it all",
        HumanBytes(cut.len() as u64),
        HumanBytes(text.len() as u64)
    );
    (cut, Some(note))
}

fn parts_html(parts: &[Part], prose: bool) -> Markup {
    html! {
        @for part in parts {
            @match part {
                Part::Text(t) if prose => {
                    @let (t, cut) = shown(t);
                    div.text { (PreEscaped(markdown::to_html(t))) }
                    @if let Some(cut) = cut { p.cut { (cut) } }
                }
                Part::Text(t) => { (pre(t)) }
                Part::Thinking(t) => {
                    details.thinking {
                        summary { "Thinking · " (HumanCount(t.chars().count() as u64)) " characters" }
                        @let (t, cut) = shown(t);
                        div.text { (PreEscaped(markdown::to_html(t))) }
                        @if let Some(cut) = cut { p.cut { (cut) } }
                    }
                }
                Part::ToolCall { name, input } => {
                    details.tool-call {
                        summary { span.tool { (name) } " " span.input { (shorten(input, 120)) } }
                        (pre(&pretty(input)))
                    }
                }
                Part::ToolResult(t) => {
                    details.tool-result {
                        summary { "Result · " (HumanBytes(t.len() as u64)) " · " span.input { (shorten(t, 100)) } }
                        (pre(t))
                    }
                }
                Part::Raw(t) => {
                    details.raw { summary { "A record not read as a message" } (pre(t)) }
                }
            }
        }
    }
}

fn pre(text: &str) -> Markup {
    let (text, cut) = shown(text);
    html! {
        pre { (text) }
        @if let Some(cut) = cut { p.cut { (cut) } }
    }
}

/// A tool call's input as indented JSON when it is JSON.
fn pretty(input: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(input) {
        Ok(v @ (serde_json::Value::Object(_) | serde_json::Value::Array(_))) => {
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| input.to_owned())
        }
        _ => input.to_owned(),
    }
}
