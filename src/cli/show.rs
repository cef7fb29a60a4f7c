//! What people read: `sessions` as a table, a session's conversation (`show`) as text,
//! Markdown or JSON, and `search` hits.

use crate::agents::message::{Part, parse};
use crate::cli::args::{ColorChoice, Format};
use crate::consumers::sessions::query::{Hit, MessageRecord, Session, format_time};
use crate::history::display::{SHORT_ID, ago, part_json, short_id, shorten, tilde};
use indicatif::HumanBytes;
use serde_json::{Value, json};
use std::io::{self, Write};
use std::path::Path;

/// How much of a tool call's input or a tool result a line shows.
const SHORT: usize = 100;

/// Terminal styling: bold, dim and a colour for matches, or nothing.
#[derive(Clone, Copy)]
pub(crate) struct Style {
    on: bool,
}

impl Style {
    /// Styled as `color` says: with `auto`, when `terminal` and `NO_COLOR` is unset.
    pub(crate) fn new(color: ColorChoice, terminal: bool) -> Style {
        let on = match color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        };
        Style { on }
    }

    /// The marks around a search match: bold red when styled, as grep marks its matches.
    pub(crate) fn marks(self) -> (&'static str, &'static str) {
        if self.on {
            ("\x1b[1;31m", "\x1b[39;22m")
        } else {
            ("**", "**")
        }
    }

    fn bold(self, text: &str) -> String {
        self.wrap(text, "\x1b[1m", "\x1b[22m")
    }

    fn dim(self, text: &str) -> String {
        self.wrap(text, "\x1b[2m", "\x1b[22m")
    }

    fn wrap(self, text: &str, open: &str, close: &str) -> String {
        if self.on {
            format!("{open}{text}{close}")
        } else {
            text.to_owned()
        }
    }
}

/// `text` cut from the left to `max` characters (`…` first), for paths.
fn shorten_left(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_owned();
    }
    let tail: String = text.chars().skip(n - max + 1).collect();
    format!("…{tail}")
}

/// The sessions table: one line each, its title cut to fit `width` columns (none: whole);
/// `known` is every session id in the index, sorted (see [`short_id`]).
pub(crate) fn write_sessions(
    out: &mut impl Write,
    sessions: &[Session],
    known: &[String],
    width: Option<usize>,
    home: Option<&Path>,
    now_ms: i64,
) -> io::Result<()> {
    let ids: Vec<String> = sessions.iter().map(|s| short_id(&s.id, known)).collect();
    let id_width = (ids.iter().map(|i| i.chars().count()))
        .max()
        .unwrap_or(0)
        .max(SHORT_ID);
    // A machine column once another machine's sessions are among them.
    let machines = sessions.iter().any(|s| s.machine_id != 0);
    let machine = |name: &str| match machines {
        true => format!("{:<12} ", shorten(name, 12)),
        false => String::new(),
    };
    writeln!(
        out,
        "{:<12} {}{:<11} {:>5}  {:<24} {:<id_width$}  TITLE",
        "LAST ACTIVE",
        machine("MACHINE"),
        "HARNESS",
        "MSGS",
        "PROJECT",
        "ID"
    )?;
    for (s, id) in sessions.iter().zip(&ids) {
        // Another machine's home is not this one's `~`.
        let home = home.filter(|_| s.machine_id == 0);
        let project = tilde(s.project.as_deref().unwrap_or("-"), home);
        let title = s.title.clone().unwrap_or_else(|| "(untitled)".into());
        let mut marks = String::new();
        if s.subagents > 0 {
            let noun = subagents_noun(s.subagents);
            marks.push_str(&format!(" [+{} {noun}]", s.subagents));
        }
        if !s.on_disk {
            marks.push_str(" [deleted]");
        }
        for tag in &s.tags {
            marks.push_str(&format!(" #{tag}"));
        }
        if s.starred {
            marks.push_str(" ★");
        }
        let line = format!(
            "{:<12} {}{:<11} {:>5}  {:<24} {id:<id_width$}  ",
            ago(s.last_activity, now_ms),
            machine(&s.machine),
            shorten(&s.harness, 11),
            s.messages,
            shorten_left(&project, 24),
        );
        // The marks are never cut: the title gives way to them.
        let room = width.map_or(usize::MAX, |w| {
            (w.saturating_sub(line.chars().count() + marks.chars().count())).max(10)
        });
        writeln!(out, "{line}{}{marks}", shorten(&title, room))?;
    }
    Ok(())
}

fn subagents_noun(n: i64) -> &'static str {
    if n == 1 { "subagent" } else { "subagents" }
}

/// A session's heading, in text.
fn write_heading(out: &mut impl Write, s: &Session, style: Style) -> io::Result<()> {
    let title = s.title.as_deref().unwrap_or("(untitled)");
    writeln!(out, "{}", style.bold(title))?;
    let project = s.project.as_deref().unwrap_or("-");
    let branch = s
        .branch
        .as_deref()
        .map(|b| format!(" ({b})"))
        .unwrap_or_default();
    let on = match s.machine_id {
        0 => String::new(),
        _ => format!(" · on {}", s.machine),
    };
    writeln!(out, "{} · {} · {project}{branch}{on}", s.id, s.harness)?;
    let when = match (s.started, s.last_activity) {
        (Some(a), Some(b)) => format!("{} → {}", format_time(a), format_time(b)),
        _ => "no times recorded".into(),
    };
    let mut facts = format!("{when} · {} messages", s.messages);
    if !s.models.is_empty() {
        facts.push_str(&format!(" · {}", s.models.join(", ")));
    }
    if s.subagents > 0 {
        let noun = subagents_noun(s.subagents);
        facts.push_str(&format!(" · {} {noun}", s.subagents));
    }
    writeln!(out, "{}", style.dim(&facts))
}

/// A session's conversation as text or Markdown.
pub(crate) fn write_conversation(
    out: &mut impl Write,
    session: &Session,
    messages: &[MessageRecord],
    format: Format,
    style: Style,
) -> io::Result<()> {
    if format == Format::Markdown {
        return write_markdown(out, session, messages);
    }
    write_heading(out, session, style)?;
    for m in messages {
        let parsed = parse(&m.harness, &m.record);
        let parts = parsed.message.map(|m| m.parts).unwrap_or_default();
        writeln!(out)?;
        if m.role == "compact" {
            writeln!(out, "{}", style.dim("── conversation compacted ──"))?;
            continue;
        }
        let when = m
            .at_ms
            .map(|t| format!(" · {}", format_time(t)))
            .unwrap_or_default();
        writeln!(out, "{}", style.bold(&format!("{}{when}", m.role)))?;
        for part in &parts {
            write_text_part(out, part, style)?;
        }
    }
    Ok(())
}

fn write_text_part(out: &mut impl Write, part: &Part, style: Style) -> io::Result<()> {
    match part {
        Part::Text(t) | Part::Raw(t) => writeln!(out, "{}", t.trim_end()),
        Part::Thinking(t) => writeln!(
            out,
            "{}",
            style.dim(&format!("(thinking) {}", shorten(t, SHORT)))
        ),
        Part::ToolCall { name, input } => {
            writeln!(
                out,
                "→ {} {}",
                style.bold(name),
                shorten(&short_input(input), SHORT)
            )
        }
        Part::ToolResult(t) => {
            let size = HumanBytes(t.len() as u64);
            writeln!(
                out,
                "{}",
                style.dim(&format!("← result ({size}) {}", shorten(t, SHORT)))
            )
        }
    }
}

/// The telling field of a tool's input (a command, a path, a pattern), else the input.
fn short_input(input: &str) -> String {
    let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(input) else {
        return input.to_owned();
    };
    let keys = [
        "command",
        "cmd",
        "pattern",
        "query",
        "file_path",
        "path",
        "url",
        "description",
    ];
    let telling = keys.iter().find_map(|k| match obj.get(*k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(a)) => Some(
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    });
    telling.unwrap_or_else(|| input.to_owned())
}

fn write_markdown(out: &mut impl Write, s: &Session, messages: &[MessageRecord]) -> io::Result<()> {
    writeln!(out, "# {}\n", s.title.as_deref().unwrap_or("(untitled)"))?;
    writeln!(out, "- **Session**: `{}` ({})", s.id, s.harness)?;
    if let Some(p) = &s.project {
        writeln!(out, "- **Project**: `{p}`")?;
    }
    if let (Some(a), Some(b)) = (s.started, s.last_activity) {
        writeln!(out, "- **Time**: {} → {}", format_time(a), format_time(b))?;
    }
    for m in messages {
        writeln!(out)?;
        if m.role == "compact" {
            writeln!(out, "---\n\n*Conversation compacted*")?;
            continue;
        }
        let when = m
            .at_ms
            .map(|t| format!(" · {}", format_time(t)))
            .unwrap_or_default();
        writeln!(out, "## {}{when}\n", capitalised(&m.role))?;
        let parts = parse(&m.harness, &m.record)
            .message
            .map(|m| m.parts)
            .unwrap_or_default();
        for part in &parts {
            match part {
                Part::Text(t) => writeln!(out, "{}\n", t.trim_end())?,
                Part::Raw(t) => writeln!(out, "```json\n{t}\n```\n")?,
                Part::Thinking(t) => writeln!(out, "> *Thinking:* {}\n", shorten(t, SHORT))?,
                Part::ToolCall { name, input } => {
                    let input = shorten(&short_input(input), SHORT).replace('`', "'");
                    writeln!(out, "- Tool call **{name}**: `{input}`\n")?
                }
                Part::ToolResult(t) => {
                    let text = shorten(t, SHORT).replace('`', "'");
                    writeln!(out, "- Result ({}): `{text}`\n", HumanBytes(t.len() as u64))?
                }
            }
        }
    }
    Ok(())
}

fn capitalised(role: &str) -> String {
    let mut c = role.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// One JSON object per message, whole: seq, session, role, timestamp, parts.
pub(crate) fn write_messages_json(
    out: &mut impl Write,
    session: &Session,
    messages: &[MessageRecord],
) -> io::Result<()> {
    for m in messages {
        let parts = parse(&m.harness, &m.record)
            .message
            .map(|m| m.parts)
            .unwrap_or_default();
        let parts: Vec<Value> = parts.iter().map(part_json).collect();
        let line = json!({
            "seq": m.seq,
            "session": session.id,
            "machine": session.machine,
            "role": m.role,
            "timestamp": m.at_ms.map(format_time),
            "parts": parts,
        });
        serde_json::to_writer(&mut *out, &line)?;
        writeln!(out)?;
    }
    Ok(())
}

/// Search hits, for people: where, when, who, then the snippet.
pub(crate) fn write_hits(
    out: &mut impl Write,
    hits: &[Hit],
    home: Option<&Path>,
    style: Style,
) -> io::Result<()> {
    for h in hits {
        let home = home.filter(|_| h.machine_id == 0);
        let project = tilde(h.project.as_deref().unwrap_or("-"), home);
        let when = h.timestamp.map(format_time).unwrap_or_else(|| "-".into());
        let id: String = h.session.chars().take(8).collect();
        let harness = match h.machine_id == 0 {
            true => h.harness.clone(),
            false => format!("{}@{}", h.harness, h.machine),
        };
        let head = format!("{id}  {harness}  {project}  {when}  {}", h.role);
        writeln!(out, "{}", style.dim(&head))?;
        writeln!(out, "    {}", h.snippet)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_cut_from_the_left_with_an_ellipsis() {
        assert_eq!(shorten_left("/home/u/src/app", 8), "…src/app");
    }

    #[test]
    fn a_tool_call_shows_its_telling_field() {
        assert_eq!(
            short_input(r#"{"command":"cargo test","timeout":5}"#),
            "cargo test"
        );
        assert_eq!(
            short_input(r#"{"command":["bash","-lc","ls"]}"#),
            "bash -lc ls"
        );
        assert_eq!(short_input("plain"), "plain");
    }
}
