//! The searchable text of a tree's messages, taken as the session index takes it
//! (`src/agents/message.rs`, Claude Code and Codex), for the bare FTS5 baseline.
//!
//! Kept apart from the daemon's own code on purpose: the baseline is what FTS5 costs for this
//! text, whatever the index does to get it. It follows the index's rules closely enough that
//! the two insert about the same bytes: each message's parts joined by newlines, a tool call
//! as its name and its input as compact JSON, a tool result as its text blocks.

use serde_json::Value;
use std::io::BufRead;
use std::path::Path;

/// The text of every message of every transcript under `corpus`, in path order.
pub fn of_tree(corpus: &Path) -> Vec<String> {
    let mut texts = Vec::new();
    for path in transcripts(corpus) {
        let codex = path.starts_with(corpus.join("codex"));
        let file = std::fs::File::open(&path).expect("opening a transcript");
        for line in std::io::BufReader::new(file).split(b'\n') {
            let line = line.expect("reading a transcript");
            let Ok(record) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let parts = if codex {
                codex_parts(&record)
            } else {
                claude_parts(&record)
            };
            texts.extend(parts.map(|p| p.join("\n")));
        }
    }
    texts
}

fn claude_parts(record: &Value) -> Option<Vec<String>> {
    match record.get("type")?.as_str()? {
        "user" | "assistant" => content_parts(record.pointer("/message/content")?),
        "system" => Some(vec![str_of(record.get("content")).to_owned()]),
        _ => None,
    }
}

fn codex_parts(record: &Value) -> Option<Vec<String>> {
    let item = match record.get("type")?.as_str()? {
        "response_item" => record.get("payload")?,
        "compacted" => return Some(vec![str_of(record.pointer("/payload/message")).into()]),
        _ => return None,
    };
    Some(match item.get("type")?.as_str()? {
        "message" => content_parts(item.get("content")?)?,
        "function_call" | "custom_tool_call" | "local_shell_call" => {
            let name = item.get("name").and_then(Value::as_str).unwrap_or("shell");
            let input = ["arguments", "input", "action"]
                .iter()
                .find_map(|k| item.get(*k));
            vec![format!("{name} {}", compact(input))]
        }
        "function_call_output" | "custom_tool_call_output" => {
            vec![result_text(item.get("output"))]
        }
        "reasoning" => vec![result_text(item.get("summary"))],
        _ => return None,
    })
}

fn content_parts(content: &Value) -> Option<Vec<String>> {
    if let Some(text) = content.as_str() {
        return Some(vec![text.to_owned()]);
    }
    let parts = content.as_array()?.iter().filter_map(|b| {
        Some(match b.get("type")?.as_str()? {
            "text" | "input_text" | "output_text" => b.get("text")?.as_str()?.to_owned(),
            "thinking" => b.get("thinking")?.as_str()?.to_owned(),
            "tool_use" => format!("{} {}", str_of(b.get("name")), compact(b.get("input"))),
            "tool_result" => result_text(b.get("content")),
            _ => return None,
        })
    });
    Some(parts.collect())
}

fn result_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::Array(items)) => {
            let texts = items
                .iter()
                .map(|i| match i.get("text").or(i.get("output")) {
                    Some(Value::String(s)) => s.clone(),
                    _ => format!("[{}]", str_of(i.get("type"))),
                });
            texts.collect::<Vec<_>>().join("\n")
        }
        other => compact(other),
    }
}

fn compact(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

fn str_of(value: Option<&Value>) -> &str {
    value.and_then(Value::as_str).unwrap_or_default()
}

/// The `.jsonl` files under `dir`, in path order.
pub fn transcripts(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut paths: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .map(|e| e.into_path())
        .collect();
    paths.sort();
    paths
}
