//! `mcp`: the archive as a Model Context Protocol server on stdin and stdout, so that an agent
//! can search its own history: JSON-RPC 2.0, one message per line (MCP's stdio transport),
//! with tools to search the sessions, list them, read a window of one's messages and sum
//! their usage. Read-only; what it returns is redacted by default (it goes into a model's
//! context) and bounded in size. Logs go to stderr: stdout carries only the protocol.

use crate::agents::message::{parse, prefix_of};
use crate::archive::Archive;
use crate::consumers::redact::Redactor;
use crate::consumers::sessions::query::{self, Filter};
use crate::consumers::sessions::usage::{self, By, Prices, Request};
use crate::history::{display, find_session};
use serde_json::{Value, json};
use std::io::{self, BufRead, Write};

/// The protocol versions it speaks, newest first: a client's is answered in kind when it is
/// one of them, else with the newest.
const VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// The most text one tool call returns; more is cut, with a note saying how to ask for less.
const MAX_RESULT: usize = 64 * 1024;
/// The most of one message part `read_session` returns.
const MAX_PART: usize = 4000;
/// The most messages `read_session` returns at once, and sessions or hits the others do.
const MAX_MESSAGES: u64 = 100;
const MAX_LISTED: u64 = 100;

/// What the tools read from: the archive with its index, the redactor (none: not redacted),
/// the prices.
pub(crate) struct Server {
    pub(crate) archive: Archive,
    pub(crate) redactor: Option<std::sync::Arc<Redactor>>,
    pub(crate) prices: Prices,
}

impl Server {
    /// Answers each request read from `input` on `out`, until `input` ends. `Err` only when
    /// `out` cannot be written.
    pub(crate) fn serve(&mut self, input: impl BufRead, out: &mut impl Write) -> io::Result<()> {
        for line in input.lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            if let Some(reply) = self.reply(&line) {
                serde_json::to_writer(&mut *out, &reply)?;
                writeln!(out)?;
                out.flush()?;
            }
        }
        Ok(())
    }

    /// The reply to one message; `None` for a notification (no `id`).
    fn reply(&mut self, line: &str) -> Option<Value> {
        let message: Value = match serde_json::from_str(line) {
            Ok(message) => message,
            Err(e) => return Some(error(Value::Null, -32700, &format!("not JSON: {e}"))),
        };
        let id = message.get("id").cloned()?;
        let params = message.get("params").cloned().unwrap_or(json!({}));
        let result = match message.get("method").and_then(Value::as_str) {
            Some("initialize") => Ok(initialize(&params)),
            Some("ping") => Ok(json!({})),
            Some("tools/list") => Ok(json!({"tools": tools()})),
            Some("tools/call") => self.call(&params),
            Some(other) => Err((-32601, format!("no method {other:?}"))),
            None => Err((-32600, "a request names its method".into())),
        };
        Some(match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => error(id, code, &message),
        })
    }

    /// A tool's result: its text, or (for a call the tool refuses or fails) the reason, as a
    /// result the model reads (`isError`).
    fn call(&mut self, params: &Value) -> std::result::Result<Value, (i64, String)> {
        let name = params.get("name").and_then(Value::as_str);
        let args = params.get("arguments").cloned().unwrap_or(json!({}));
        let text = match name {
            Some("search") => self.search(&args),
            Some("list_sessions") => self.list_sessions(&args),
            Some("read_session") => self.read_session(&args),
            Some("usage") => self.usage(&args),
            _ => return Err((-32602, format!("no tool {:?}", name.unwrap_or("")))),
        };
        Ok(match text {
            Ok(text) => json!({"content": [{"type": "text", "text": bounded(text)}]}),
            Err(e) => json!({"content": [{"type": "text", "text": e}], "isError": true}),
        })
    }

    fn filter(&mut self, args: &Value, limit: u64) -> std::result::Result<Filter, String> {
        let text = |k: &str| args.get(k).and_then(Value::as_str).map(String::from);
        let since_ms = match text("since") {
            Some(since) => Some(since_ms(&since)?),
            None => None,
        };
        Ok(Filter {
            harness: text("harness"),
            project: text("project"),
            since_ms,
            until_ms: None,
            model: None,
            machine: None,
            // 0 would be no limit at all.
            limit: number(args, "limit", 20).clamp(1, limit) as usize,
            offset: 0,
            starred: args.get("starred").and_then(Value::as_bool) == Some(true),
            tag: text("tag"),
            text: None,
        })
    }

    fn search(&mut self, args: &Value) -> std::result::Result<String, String> {
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .ok_or("query is required")?;
        let filter = self.filter(args, MAX_LISTED)?;
        let redactor = self.redactor.as_deref();
        let marks = ("**", "**");
        let hits = query::search(&mut self.archive, query, false, &filter, marks, redactor)
            .map_err(|e| e.to_string())?;
        let mut lines = Vec::new();
        for mut hit in hits {
            if let Some(r) = redactor {
                hit.project = hit.project.map(|p| r.redact_text(&p).into_owned());
            }
            lines.push(serde_json::to_string(&hit).map_err(|e| e.to_string())?);
        }
        Ok(match lines.is_empty() {
            true => format!("no message matches {}", crate::error::quoted(query)),
            false => lines.join("\n"),
        })
    }

    fn list_sessions(&mut self, args: &Value) -> std::result::Result<String, String> {
        let filter = self.filter(args, MAX_LISTED)?;
        let sessions = query::sessions(&mut self.archive, &filter).map_err(|e| e.to_string())?;
        let mut lines = Vec::new();
        for mut s in sessions {
            if let Some(r) = &self.redactor {
                s.redact(r);
            }
            let mut line = json!({
                "id": s.id, "harness": s.harness, "project": s.project, "title": s.title,
                "started": s.started.map(query::format_time),
                "last_activity": s.last_activity.map(query::format_time),
                "user_messages": s.user_messages, "assistant_messages": s.assistant_messages,
                "machine": s.machine,
            });
            // The user's marks, where there are any: most sessions have none.
            let marks = [
                ("starred", s.starred.then_some(json!(true))),
                ("tags", (!s.tags.is_empty()).then(|| json!(s.tags))),
                ("note", s.note.map(Value::from)),
            ];
            for (key, value) in marks {
                if let Some(value) = value {
                    line[key] = value;
                }
            }
            lines.push(line.to_string());
        }
        Ok(match lines.is_empty() {
            true => "no session matches".into(),
            false => lines.join("\n"),
        })
    }

    fn read_session(&mut self, args: &Value) -> std::result::Result<String, String> {
        let id = args
            .get("session")
            .and_then(Value::as_str)
            .ok_or("session is required")?;
        let mut session = find_session(&mut self.archive, id, "all").map_err(|e| e.to_string())?;
        let mut messages =
            query::messages(&mut self.archive, &session).map_err(|e| e.to_string())?;
        let offset = number(args, "offset", 0) as usize;
        let limit = number(args, "limit", 20).clamp(1, MAX_MESSAGES) as usize;
        let total = messages.len();
        let window: Vec<_> = messages.drain(..).skip(offset).take(limit).collect();
        if let Some(r) = &self.redactor {
            session.redact(r);
        }
        let mut lines =
            vec![json!({
            "session": session.id, "harness": session.harness, "project": session.project,
            "title": session.title, "messages": total, "offset": offset, "shown": window.len(),
        })
        .to_string()];
        for mut m in window {
            if let Some(r) = &self.redactor {
                m.redact(r);
            }
            let parts = parse(&m.harness, &m.record).message.map(|m| m.parts);
            let parts: Vec<Value> = (parts.unwrap_or_default().iter())
                .map(|p| cut_part(display::part_json(p)))
                .collect();
            let line = json!({
                "role": m.role, "timestamp": m.at_ms.map(query::format_time), "parts": parts,
            });
            lines.push(line.to_string());
        }
        Ok(lines.join("\n"))
    }

    fn usage(&mut self, args: &Value) -> std::result::Result<String, String> {
        let by = args.get("by").and_then(Value::as_str).unwrap_or("model");
        let by = <By as clap::ValueEnum>::from_str(by, false).map_err(|_| {
            format!(
                "by {by:?} is none of day, week, month, model, project, agent, machine, session"
            )
        })?;
        let text = |k: &str| args.get(k).and_then(Value::as_str).map(String::from);
        let request = Request {
            since_ms: text("since").map(|s| since_ms(&s)).transpose()?,
            until_ms: text("until").map(|s| since_ms(&s)).transpose()?,
            harness: text("harness"),
            project: text("project"),
            machine: None,
        };
        let (rows, total) = usage::usage(&mut self.archive, by, &request, &self.prices)
            .map_err(|e| e.to_string())?;
        let redact = |text: &str| match &self.redactor {
            Some(r) => r.redact_text(text).into_owned(),
            None => text.to_owned(),
        };
        let line = |row: Result<String, serde_json::Error>| row.map_err(|e| e.to_string());
        let mut lines: Vec<String> = (rows.into_iter())
            .map(|r| {
                line(serde_json::to_string(&usage::Row {
                    of: redact(&r.of),
                    ..r
                }))
            })
            .collect::<Result<_, _>>()?;
        lines.push(line(serde_json::to_string(&total.as_total()))?);
        Ok(lines.join("\n"))
    }
}

/// `initialize`'s result: the version spoken, what it serves, who it is.
fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| VERSIONS.contains(v))
        .unwrap_or(VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "transcript-sync", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "The archive of this user's sessions with AI coding agents (every \
            agent transcript-sync reads): search what was said, list sessions, read one, sum \
            their token usage. Secrets are redacted.",
    })
}

/// The tools, with the JSON Schema of their arguments.
fn tools() -> Value {
    let filters = json!({
        "harness": {"type": "string", "description": "Only this agent's sessions (claude-code, codex, gemini-cli, opencode, …)."},
        "project": {"type": "string", "description": "Only sessions whose project directory contains this text (any case)."},
        "since": {"type": "string", "description": "Only activity since: a duration back from now (12h, 7d) or a date (2026-11-01)."},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LISTED, "description": "At most this many (default 20)."},
        "starred": {"type": "boolean", "description": "Only the sessions the user starred."},
        "tag": {"type": "string", "description": "Only the sessions the user gave this tag."},
    });
    let with = |extra: Value| {
        let mut props = filters.clone();
        props
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        props
    };
    json!([
        {
            "name": "search",
            "description": "Search everything said in past sessions (prompts, answers, tool \
                inputs and outputs): words match whole words, \"a phrase\" words in a row, pre* \
                a prefix; AND (default), OR, NOT. One JSON object per hit: session, harness, \
                project, timestamp, role, snippet with the match between **.",
            "inputSchema": {"type": "object", "properties": with(json!({
                "query": {"type": "string", "description": "What to find."}
            })), "required": ["query"]},
        },
        {
            "name": "list_sessions",
            "description": "List sessions, newest activity first: id, harness, project, \
                title, times, message counts, and the user's marks (starred, tags, note).",
            "inputSchema": {"type": "object", "properties": filters},
        },
        {
            "name": "read_session",
            "description": "Read a window of a session's messages, in order: a first line \
                about the session (its message count), then one JSON object per message \
                (role, timestamp, parts: text, thinking, tool_call, tool_result; long parts \
                cut). Page with offset.",
            "inputSchema": {"type": "object", "properties": {
                "session": {"type": "string", "description": "The session's id, or a unique prefix of at least 4 characters."},
                "offset": {"type": "integer", "minimum": 0, "description": "The first message (0-based; default 0)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_MESSAGES, "description": "At most this many messages (default 20)."},
            }, "required": ["session"]},
        },
        {
            "name": "usage",
            "description": "Tokens and estimated cost (US dollars) of the agents' model calls, \
                by day, week, month, model, project, agent, machine or session, then the total \
                (\"of\": null). A model with no known price has tokens and no cost.",
            "inputSchema": {"type": "object", "properties": {
                "by": {"type": "string", "enum": ["day", "week", "month", "model", "project", "agent", "machine", "session"]},
                "since": {"type": "string"}, "until": {"type": "string"},
                "harness": {"type": "string"}, "project": {"type": "string"},
            }},
        },
    ])
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn number(args: &Value, key: &str, default: u64) -> u64 {
    args.get(key).and_then(Value::as_u64).unwrap_or(default)
}

fn since_ms(text: &str) -> std::result::Result<i64, String> {
    crate::history::parse_since(text)
}

/// `text`, cut to [`MAX_RESULT`] bytes (at a character's start) with a note when longer.
fn bounded(text: String) -> String {
    if text.len() <= MAX_RESULT {
        return text;
    }
    format!(
        "{}\n[cut at {MAX_RESULT} of {} bytes: ask for fewer (limit) or a later window (offset)]",
        prefix_of(&text, MAX_RESULT),
        text.len()
    )
}

/// A message part with its text (or a tool call's input) cut to [`MAX_PART`] characters.
fn cut_part(mut part: Value) -> Value {
    for key in ["text", "input"] {
        let Some(text) = part.get(key).and_then(Value::as_str) else {
            continue;
        };
        let chars = text.chars().count();
        if chars > MAX_PART {
            let kept: String = text.chars().take(MAX_PART).collect();
            part[key] = json!(format!("{kept}… [{chars} characters in all]"));
        }
    }
    part
}

/// Runs the server on this process's stdin and stdout, until stdin ends.
pub(crate) fn run(server: &mut Server) -> io::Result<()> {
    let stdin = io::stdin();
    let mut stdout = io::stdout().lock();
    server.serve(stdin.lock(), &mut stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_result_is_cut_at_a_character_with_a_note_and_a_long_part_too() {
        let text = "é".repeat(MAX_RESULT);
        let cut = bounded(text);
        assert!(
            cut.contains("[cut at 65536 of 131072 bytes"),
            "{}",
            &cut[cut.len() - 120..]
        );
        let part = cut_part(json!({"type": "text", "text": "x".repeat(MAX_PART + 1)}));
        let text = part["text"].as_str().unwrap();
        assert!(text.ends_with(&format!("… [{} characters in all]", MAX_PART + 1)));
    }

    #[test]
    fn the_version_asked_is_spoken_when_known_else_the_newest() {
        let old = initialize(&json!({"protocolVersion": "2024-11-05"}));
        assert_eq!(old["protocolVersion"], "2024-11-05");
        let future = initialize(&json!({"protocolVersion": "2099-01-01"}));
        assert_eq!(future["protocolVersion"], VERSIONS[0]);
    }
}
