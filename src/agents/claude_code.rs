//! Claude Code's records: `user`, `assistant` (a record per content block), `system`, titles.
//!
//! One object per line with `type` (`user`, `assistant`, `system`, `summary`, `custom-title`,
//! `ai-title`, …), `uuid`, `timestamp`, `cwd`, `gitBranch` and `message: {role, content,
//! model}`; `content` is a string or blocks (`text`, `tool_use`, `tool_result`, `thinking`).
//! `isMeta` marks injected lines; `system` with `subtype: compact_boundary` marks a compaction.

use super::Agent;
use super::message::*;
use super::restore::{self, Restore, Resume};
use super::session::{self, Identified};
use crate::capture::harness::Formats;
use crate::read::record::Unread;
use serde_json::{Map, Value};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Claude Code (appended transcripts).
pub(crate) static AGENT: Agent = Agent {
    name: "claude-code",
    watcher: include_str!("../../watchers/claude-code.toml"),
    formats: Formats::NONE,
    parse: claude,
    // A tool's result as the tool gave it (a whole file, its edits), beside the one its message
    // holds; a file-history snapshot's files.
    unread: &[Unread::Member("toolUseResult"), Unread::Member("snapshot")],
    identify,
    restore: Restore {
        prefer_root: None,
        layout_below: Some("projects"),
        relocate,
        unplaced: restore::nowhere,
        records_name_cwd: true,
        resume,
    },
    doctor: None,
};

/// Anything in a session's folder is that session's: `<project>/<session>/subagents/
/// agent-*.jsonl`, and deeper files (`subagents/workflows/*/journal.jsonl`, tool results),
/// whose names repeat from session to session and so are named by their path inside the
/// folder. `agent-*.jsonl` beside sessions carry their parent's `sessionId`.
fn identify(path: &Path, first: &Parsed) -> Identified {
    let stem = session::stem(path);
    let mut id = Identified::by_stem(path, first);
    match session_folder(path) {
        Some((folder, inside)) => {
            let subagent = session::folder(path).as_deref() == Some("subagents");
            if !(stem.starts_with("agent-") && subagent) {
                id.session = format!("{folder}/{}", inside.with_extension("").display());
            }
            id.parent = Some(folder);
        }
        None if stem.starts_with("agent-") => {
            id.parent = first.session_id.clone().filter(|s| *s != stem);
        }
        None => {}
    }
    id
}

/// The session folder a Claude Code file is in, if any (`<project>/<session>/`: a folder
/// named by a UUID, or one holding `subagents/`): the session's id and the file's path
/// inside the folder.
fn session_folder(path: &Path) -> Option<(String, PathBuf)> {
    let dirs: Vec<&Path> = path.ancestors().skip(1).collect();
    let named =
        |d: &Path, f: &dyn Fn(&str) -> bool| d.file_name().and_then(|n| n.to_str()).is_some_and(f);
    // Only a folder in a project (`projects/<project>/<session>/`): the directories above
    // `projects` may have any names.
    let at = (0..dirs.len().saturating_sub(2)).find(|&i| {
        let folder = named(dirs[i], &session::is_uuid)
            || (i > 0 && named(dirs[i - 1], &|n| n == "subagents"));
        folder && named(dirs[i + 2], &|n| n == "projects")
    })?;
    let folder = dirs[at];
    let inside = path.strip_prefix(folder).ok()?.to_path_buf();
    let name = folder.file_name()?.to_string_lossy().into_owned();
    Some((name, inside))
}

/// `projects/<encoded project>/<rest>`: the rest goes under the directory the agent names
/// after the project's directory here.
fn relocate(below: &[&OsStr], project: &str) -> PathBuf {
    let rest: PathBuf = match below {
        [_, rest @ ..] if !rest.is_empty() => rest.iter().collect(),
        _ => below.iter().collect(),
    };
    Path::new(&project_dir(project)).join(rest)
}

/// The directory name Claude Code gives a project under `~/.claude/projects`: every UTF-16
/// code unit of its path that is not an ASCII letter or digit becomes `-`; a name longer than
/// 200 is cut to 200 and given `-` and a hash of the path in base 36. (As the agent's
/// `cli.js` does, 2.1.x; tools that find its sessions report the same rule.)
pub(crate) fn project_dir(project: &str) -> String {
    let units: Vec<u16> = project.encode_utf16().collect();
    let name: String = (units.iter())
        .map(|&u| match u {
            0x30..=0x39 | 0x41..=0x5a | 0x61..=0x7a => u as u8 as char,
            _ => '-',
        })
        .collect();
    if name.len() <= 200 {
        return name;
    }
    let hash = (units.iter()).fold(0i32, |h, &u| h.wrapping_mul(31).wrapping_add(u as i32));
    format!("{}-{}", &name[..200], base36((hash as i64).unsigned_abs()))
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// `claude --resume ID` from the project's directory, pointed at `--to` through
/// `$CLAUDE_CONFIG_DIR`.
fn resume(r: &Resume) -> Option<String> {
    let home = r.home("CLAUDE_CONFIG_DIR");
    Some(format!("{}{home}claude --resume {}", r.cd, r.id))
}

pub(super) fn claude(obj: &Map<String, Value>) -> Option<Parsed> {
    let kind = obj.get("type").and_then(Value::as_str)?;
    let mut parsed = Parsed {
        project: string(obj, "cwd"),
        branch: string(obj, "gitBranch").filter(|b| !b.is_empty()),
        at_ms: timestamp_ms(obj),
        session_id: string(obj, "sessionId"),
        ..Parsed::default()
    };
    let key = string(obj, "uuid");
    match kind {
        "summary" => parsed.title = Some((title_of(&string(obj, "summary")?), 1)),
        "ai-title" => parsed.title = Some((title_of(&string(obj, "aiTitle")?), 2)),
        "custom-title" => parsed.title = Some((title_of(&string(obj, "customTitle")?), 3)),
        "user" | "assistant" => {
            let message = obj.get("message")?.as_object()?;
            let parts = content_parts(message.get("content")?)?;
            let meta = obj.get("isMeta").and_then(Value::as_bool) == Some(true)
                || obj.get("isCompactSummary").and_then(Value::as_bool) == Some(true);
            let role = match (kind, meta) {
                ("assistant", _) => role_of(Role::Assistant, &parts),
                (_, true) => Role::System,
                _ => role_of(Role::User, &parts),
            };
            if role == Role::User {
                parsed.prompt = typed_prompt(&parts);
            }
            if kind == "assistant" {
                parsed.model = string(message, "model").filter(|m| !m.starts_with('<'));
                // Each record of a reply (one per content block) repeats its usage; a resumed
                // or forked session copies the records: one call, by the reply's id.
                let fields = [
                    "input_tokens",
                    "output_tokens",
                    "cache_read_input_tokens",
                    "cache_creation_input_tokens",
                ];
                let usage = message.get("usage").and_then(Value::as_object);
                parsed.usage = (usage.and_then(|u| Usage::of(u, fields, false)))
                    .filter(|_| parsed.model.is_some())
                    .map(|u| u.keyed(string(message, "id"), parsed.model.clone()));
            }
            parsed.message = Some(Message::new(key, role, parts));
        }
        "system" => {
            let compact = obj.get("subtype").and_then(Value::as_str) == Some("compact_boundary");
            let text = string(obj, "content").unwrap_or_else(|| "conversation compacted".into());
            parsed.message = Some(Message::new(
                key,
                if compact { Role::Compact } else { Role::System },
                vec![Part::Text(text)],
            ));
        }
        _ => {}
    }
    Some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_names_project_directories_as_the_agent_does() {
        assert_eq!(
            project_dir("/home/user/my_project.v2"),
            "-home-user-my-project-v2"
        );
        // One dash per UTF-16 unit: é is one, 😀 two.
        assert_eq!(project_dir("/tmp/é😀 x"), "-tmp-----x");
        let long = format!("/home/user/{}", "a".repeat(300));
        let name = project_dir(&long);
        let (cut, hash) = name.split_at(200);
        assert_eq!(cut, format!("-home-user-{}", "a".repeat(189)));
        let units: Vec<u16> = long.encode_utf16().collect();
        let mut h: i32 = 0;
        for u in units {
            h = (h << 5).wrapping_sub(h).wrapping_add(u as i32);
        }
        assert_eq!(hash, format!("-{}", base36(u64::from(h.unsigned_abs()))));
        assert_eq!(base36(0), "0");
        assert_eq!(base36(35), "z");
        assert_eq!(base36(36), "10");
    }
}
