//! Aider's chat history (`.aider.chat.history.md`, at the root of each project's git
//! repository), read as a snapshot document: Aider only appends to it, in Markdown, and each
//! block becomes one record (`{"type": …, "at": …, "text": …}`), keyed by `at`, the byte
//! offset where the block starts, so that a block still growing at the end of the file is
//! archived again under its key and the blocks before it never change.
//!
//! As Aider 0.86 writes it (`aider/io.py`: `append_chat_history`, `user_input`, `ai_output`,
//! `tool_output`):
//! - `# aider chat started at YYYY-MM-DD HH:MM:SS` (local time) opens each run: `chat`, with
//!   the time as given (`started`) and as UTC (`timestamp`), read in this machine's zone;
//! - `#### ` before each line of what the user typed: `user`;
//! - `> ` before Aider's own output (its command line, settings, token counts, errors), whose
//!   lines without the mark follow it directly when a message held line breaks: `output`;
//! - the model's reply, after a blank line and without a mark: `assistant`.
//!
//! Lines end in two spaces (Markdown's line break), which the text leaves out.
//!
//! Its records, as the reader below makes them: `{type, at, text}` with `type`
//! `chat` (a run's start, with its `timestamp`), `user`, `assistant` or `output` (Aider's own).

use super::message::*;
use super::restore::{Restore, Resume};
use super::session::Identified;
use super::{Agent, Unwatched};
use crate::capture::harness::Formats;
use crate::domain::TextFormat;
use crate::read::snapshot::Entry;
use serde_json::json;
use serde_json::{Map, Value};
use std::path::Path;

/// Aider (its chat history in each project).
pub(crate) static AGENT: Agent = Agent {
    name: "aider",
    watcher: include_str!("../../watchers/aider.toml"),
    formats: Formats {
        databases: &[],
        documents: &[HISTORY],
    },
    parse: aider,
    unread: &[],
    identify,
    restore: Restore::keeping_layout(resume),
    doctor: Some(Unwatched {
        ran: ".aider",
        message: "Aider has run here, but no [[watch]] table names its projects: their \
                  .aider.chat.history.md are not archived",
        fix: "add to config.toml: [[watch]] path = \"~/src\" harness = \"aider\" (a project, \
              or a folder of projects)",
    }),
};

/// The history's Markdown, as a snapshot document's format (Aider CE's too).
pub(super) const HISTORY: TextFormat = TextFormat {
    name: "aider",
    derive: history,
};

/// `<project>/.aider.chat.history.md`: every chat of a project, as Aider's
/// `--restore-chat-history` reads them back; named by the project's folder and a hash of its
/// path, which tells projects of the same name apart.
fn identify(path: &Path, _first: &Parsed) -> Identified {
    let project = path.parent().unwrap_or(path);
    Identified {
        session: named_by_project(project),
        parent: None,
        project: Some(project.to_string_lossy().into_owned()),
    }
}

/// `<folder>-<hash>`: the project's folder name and a hash of its path.
pub(super) fn named_by_project(project: &Path) -> String {
    let hash = xxhash_rust::xxh3::xxh3_64(project.as_os_str().as_encoded_bytes());
    let name = (project.file_name()).map_or_else(String::new, |n| n.to_string_lossy().into());
    format!("{name}-{:08x}", hash as u32)
}

/// A project's history is all its chats: Aider reads it all back.
fn resume(r: &Resume) -> Option<String> {
    r.in_place(format!("{}aider --restore-chat-history", r.cd))
}

/// A block of the history. Each is keyed by where it starts in the file, and the last one
/// may still grow: a later copy of the same block replaces the earlier.
pub(super) fn aider(obj: &Map<String, Value>) -> Option<Parsed> {
    let key = obj.get("at").and_then(Value::as_u64)?.to_string();
    let mut parsed = Parsed::default();
    let (role, text) = match obj.get("type").and_then(Value::as_str)? {
        "chat" => {
            parsed.at_ms = timestamp_ms(obj);
            let started = string(obj, "started").unwrap_or_default();
            (Role::System, format!("Aider chat started at {started}"))
        }
        "user" => (Role::User, string(obj, "text")?),
        "assistant" => (Role::Assistant, string(obj, "text")?),
        "output" => (Role::System, string(obj, "text")?),
        _ => return None,
    };
    if role == Role::User {
        parsed.prompt = Some(text.clone());
    }
    let mut message = Message::new(Some(key), role, vec![Part::Text(text)]);
    message.upsert = true;
    parsed.message = Some(message);
    Some(parsed)
}

/// The marks of a chat's first line: Aider's, and Aider CE's (cecli), of the same length.
const CHAT_STARTED: [&str; 2] = ["# aider chat started at ", "# cecli chat started at "];

/// What a line of the history is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Chat,
    User,
    Output,
    Assistant,
    Blank,
}

impl Kind {
    fn of(line: &str) -> Kind {
        if CHAT_STARTED.iter().any(|mark| line.starts_with(mark)) {
            Kind::Chat
        } else if line.starts_with("####") {
            Kind::User
        } else if line.starts_with('>') {
            Kind::Output
        } else if line.trim().is_empty() {
            Kind::Blank
        } else {
            Kind::Assistant
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Chat => "chat",
            Kind::User => "user",
            Kind::Output => "output",
            Kind::Assistant | Kind::Blank => "assistant",
        }
    }
}

/// One block being gathered: its kind, where it starts and its lines, marks taken off.
struct Block<'a> {
    kind: Kind,
    at: usize,
    lines: Vec<&'a str>,
}

/// The history as a text format's entries: any text is such a history.
fn history(text: &str) -> Result<Vec<Entry>, String> {
    Ok(derive(text))
}

/// The history's blocks as entries, in file order. Any text is such a history: a line that
/// is no block's is the reply's.
pub(crate) fn derive(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    let mut block: Option<Block> = None;
    let mut previous = Kind::Blank;
    let mut at = 0;
    for raw in text.split_inclusive('\n') {
        let line = raw.trim_end_matches(['\n', '\r']);
        let kind = Kind::of(line);
        let current = block.as_ref().map(|b| b.kind);
        // An unmarked line right after Aider's output is more of it (a message with line
        // breaks); after a blank line, it is the model's reply.
        let kind = match (kind, previous) {
            (Kind::Assistant, Kind::Output) => Kind::Output,
            _ => kind,
        };
        // A reply's paragraphs and Aider's output are one block across blank lines; each
        // prompt is a block of its own (Aider writes a blank line before it).
        let continues = match kind {
            Kind::Blank => true,
            Kind::Chat => false,
            Kind::User => previous == Kind::User,
            Kind::Output | Kind::Assistant => current == Some(kind),
        };
        if !continues {
            entries.extend(block.take().map(entry));
            block = Some(Block {
                kind,
                at,
                lines: Vec::new(),
            });
        }
        if let Some(b) = block.as_mut() {
            b.lines.push(unmarked(line, kind));
        }
        previous = kind;
        at += raw.len();
    }
    entries.extend(block.map(entry));
    entries
}

/// `line` without its block's mark and its Markdown line break.
fn unmarked(line: &str, kind: Kind) -> &str {
    let text = match kind {
        Kind::User => line.strip_prefix("#### ").unwrap_or(&line[4..]),
        Kind::Output => line
            .strip_prefix("> ")
            .unwrap_or(line.trim_start_matches('>')),
        _ => line,
    };
    text.strip_suffix("  ").unwrap_or(text)
}

fn entry(block: Block) -> Entry {
    let text = block.lines.join("\n");
    let text = text.trim_matches('\n');
    let record = match block.kind {
        Kind::Chat => {
            // A header cut short (no time after it) is a chat of no known time.
            let started = text.get(CHAT_STARTED[0].len()..).unwrap_or("").trim();
            let mut chat = json!({"type": "chat", "at": block.at, "started": started});
            if let Some(utc) = utc_of(started) {
                chat["timestamp"] = utc.into();
            }
            chat
        }
        kind => json!({"type": kind.name(), "at": block.at, "text": text}),
    };
    Entry {
        key: Some(block.at.to_string()),
        record: record.to_string().into_bytes(),
    }
}

/// `YYYY-MM-DD HH:MM:SS` of this machine's zone as RFC 3339 UTC, when it is such a time.
fn utc_of(local: &str) -> Option<String> {
    let (date, time) = local.split_once(' ')?;
    let mut d = date.splitn(3, '-').map(str::parse::<u32>);
    let mut t = time.splitn(3, ':').map(str::parse::<u32>);
    let next = |i: &mut dyn Iterator<Item = Result<u32, _>>| i.next()?.ok();
    let ymd = (next(&mut d)? as i32, next(&mut d)?, next(&mut d)?);
    let hms = (next(&mut t)?, next(&mut t)?, next(&mut t)?);
    let secs = crate::platform::sys::local_time_to_unix(ymd, hms)?;
    let at =
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::from_secs(secs.try_into().ok()?))?;
    Some(humantime::format_rfc3339_seconds(at).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two runs as Aider 0.86.2 wrote them (`scripts/agents/record`), the second with a prompt
    /// of two lines and a command line that held a line break.
    const HISTORY: &str = "\n# aider chat started at 2026-12-03 17:32:42\n\n\
        > aider --model openai/scripted-model  \n> Aider v0.86.2  \n\n\
        #### Run the scripted command, please.  \n\n\
        Scripted answer: done.\n\nIn two paragraphs.\n\n\
        > Tokens: 770 sent, 3 received.  \n\n\
        # aider chat started at 2026-12-03 17:32:52\n\n\
        > aider --message And now, on two lines:\nis this line two?  \n\n\
        #### And now, on two lines:  \n#### is this line two?  \n";

    fn kinds_and_texts(entries: &[Entry]) -> Vec<(String, String)> {
        (entries.iter())
            .map(|e| {
                let v: serde_json::Value = serde_json::from_slice(&e.record).unwrap();
                let text = (v["text"].as_str()).or(v["started"].as_str()).unwrap();
                (v["type"].as_str().unwrap().to_owned(), text.to_owned())
            })
            .collect()
    }

    #[test]
    fn each_block_is_one_record_without_its_marks() {
        let entries = derive(HISTORY);
        let got = kinds_and_texts(&entries);
        let want = [
            ("chat", "2026-12-03 17:32:42"),
            (
                "output",
                "aider --model openai/scripted-model\nAider v0.86.2",
            ),
            ("user", "Run the scripted command, please."),
            ("assistant", "Scripted answer: done.\n\nIn two paragraphs."),
            ("output", "Tokens: 770 sent, 3 received."),
            ("chat", "2026-12-03 17:32:52"),
            (
                "output",
                "aider --message And now, on two lines:\nis this line two?",
            ),
            ("user", "And now, on two lines:\nis this line two?"),
        ];
        let want: Vec<_> = (want.iter())
            .map(|(k, t)| (k.to_string(), t.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn blocks_are_keyed_by_where_they_start_so_an_append_keeps_the_keys_before_it() {
        let first = derive(&HISTORY[..HISTORY.find("#### And").unwrap()]);
        let whole = derive(HISTORY);
        let key_of = |e: &Entry| e.key.clone().unwrap();
        let at: usize = key_of(&whole[2]).parse().unwrap();
        assert!(HISTORY[at..].starts_with("#### Run"));
        // Every block but the last one before the append is the same, key and record.
        assert_eq!(first[..first.len() - 1], whole[..first.len() - 1]);
        assert_eq!(
            key_of(&first[first.len() - 1]),
            key_of(&whole[first.len() - 1])
        );
    }

    #[test]
    fn aider_ces_chat_start_opens_a_chat_as_aiders_does() {
        let entries = derive("\n# cecli chat started at 2026-12-05 03:30:25\n\n#### Hi  \n");
        let got = kinds_and_texts(&entries);
        assert_eq!(got[0], ("chat".into(), "2026-12-05 03:30:25".into()));
        assert_eq!(got[1], ("user".into(), "Hi".into()));
    }

    #[test]
    fn a_chat_start_is_given_in_utc_as_read_in_this_machines_zone() {
        let entries = derive("# aider chat started at 2026-12-03 17:32:42\n");
        let v: serde_json::Value = serde_json::from_slice(&entries[0].record).unwrap();
        let utc = v["timestamp"].as_str().unwrap();
        let secs = crate::platform::sys::local_time_to_unix((2026, 12, 3), (17, 32, 42)).unwrap();
        let want = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64);
        assert_eq!(utc, humantime::format_rfc3339_seconds(want).to_string());
        let odd = derive("# aider chat started at yesterday\n");
        assert!(!String::from_utf8_lossy(&odd[0].record).contains("timestamp"));
        // Its Markdown line break taken off, a header with nothing after it is shorter than
        // its mark.
        let bare = derive("# aider chat started at  \n");
        assert!(String::from_utf8_lossy(&bare[0].record).contains("\"started\":\"\""));
    }
}
