//! Windsurf's Cascade: each conversation an encrypted file, `cascade/<id>.pb` under
//! `~/.codeium/windsurf/`, archived as it is (`SnapshotFormat::Opaque`: each settled state's
//! bytes, restored byte for byte) with nothing read from it; and the plans Cascade writes,
//! `brain/<id>/plan.md`, readable Markdown, each a message. Windsurf is closed source and was
//! not run here: where it keeps these is what its users' tools catalogue (agentgrep's Windsurf
//! page: the `.pb` files are high-entropy, neither compressed nor readable).

use super::Agent;
use super::message::*;
use super::restore::{self, Restore};
use super::session::{Identified, folder, stem};
use crate::capture::harness::Formats;
use crate::domain::{SnapshotEntry, TextFormat};
use serde_json::{Map, Value};
use std::path::Path;

/// Windsurf (its Cascade conversations, encrypted, and plans).
pub(crate) static AGENT: Agent = Agent {
    name: "windsurf",
    watcher: include_str!("../../watchers/windsurf.toml"),
    formats: Formats {
        databases: &[],
        documents: &[TextFormat {
            name: "windsurf-plan",
            derive: plan,
        }],
    },
    parse: windsurf,
    unread: &[],
    identify: conversation,
    // Windsurf reopens a conversation from its history; it has no command to name.
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};

/// A plan's one entry: its text.
fn plan(text: &str) -> Result<Vec<SnapshotEntry>, String> {
    let record = serde_json::json!({ "plan": text });
    Ok(vec![SnapshotEntry {
        key: None,
        record: record.to_string().into_bytes(),
    }])
}

/// The conversation a file is of: a `.pb` file's name, a plan's folder.
fn conversation(path: &Path, _first: &Parsed) -> Identified {
    let plan = path.extension().is_some_and(|e| e == "md");
    let session = match plan.then(|| folder(path)).flatten() {
        Some(id) => id,
        None => stem(path),
    };
    Identified {
        session,
        parent: None,
        project: None,
    }
}

/// A state of an encrypted conversation (no message: said in its title), or a plan.
fn windsurf(obj: &Map<String, Value>) -> Option<Parsed> {
    if let Some(text) = string(obj, "plan") {
        let heading = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        let parts = vec![Part::Text(text.clone())];
        return Some(Parsed {
            title: Some((title_of(heading.trim_start_matches('#')), 2)),
            message: Some(Message {
                upsert: true,
                ..Message::new(Some("plan".to_owned()), Role::Assistant, parts)
            }),
            ..Parsed::default()
        });
    }
    let length = obj.get("opaque")?.get("length")?.as_u64()?;
    let title = format!("Cascade conversation, encrypted by Windsurf ({length} bytes)");
    Some(Parsed {
        title: Some((title, 1)),
        ..Parsed::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{SnapshotFormat, SnapshotSpec};

    #[test]
    fn an_encrypted_conversation_is_one_record_that_changes_with_its_bytes() {
        let spec = SnapshotSpec {
            messages: None,
            key: String::new(),
            format: SnapshotFormat::Opaque,
        };
        let derive = |bytes: &[u8]| crate::read::snapshot::derive(bytes, &spec).unwrap();
        let (first, second) = (derive(b"\x00\xff\x10"), derive(b"\x00\xff\x11"));
        assert_eq!((first.len(), second.len()), (1, 1));
        assert_ne!(first[0].record, second[0].record);
        let record: Value = serde_json::from_slice(&first[0].record).unwrap();
        let parsed = windsurf(record.as_object().unwrap()).unwrap();
        assert!(parsed.message.is_none());
        assert!(parsed.title.unwrap().0.contains("3 bytes"));
    }

    #[test]
    fn a_plan_is_a_message_titled_by_its_heading_in_its_folders_conversation() {
        let entries = plan("# Move the cache\n\n1. Read it.\n").unwrap();
        let record: Value = serde_json::from_slice(&entries[0].record).unwrap();
        let parsed = windsurf(record.as_object().unwrap()).unwrap();
        assert_eq!(parsed.title.unwrap().0, "Move the cache");
        assert!(parsed.message.is_some());
        let path = Path::new("/h/.codeium/windsurf/brain/c0ffee/plan.md");
        assert_eq!(conversation(path, &Parsed::default()).session, "c0ffee");
        let file = Path::new("/h/.codeium/windsurf/cascade/c0ffee.pb");
        assert_eq!(conversation(file, &Parsed::default()).session, "c0ffee");
    }
}
