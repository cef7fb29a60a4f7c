//! OpenCode's storage before 1.2 (`storage/`, beside where its database is now): one JSON
//! file per session (`session/<project>/<session>.json`), per message
//! (`message/<session>/<message>.json`) and per part of a message
//! (`part/<message>/<part>.json`), each rewritten in place as it changes (a text part at each
//! streamed token; opencode-ai 1.1.65, run by `scripts/agents/record`). The folder is read as a
//! database is (`read::database`): each session as one document in the shape of OpenCode's
//! database (`{"session": {...}, "messages": [{"info": {...}, "parts": [...]}]}`), so that its
//! sessions are read as those of its database are. What changed since the last read is found
//! through the files' modification times (ms); ids sort by time, and so do the messages and
//! parts of a session.
//!
//! OpenCode writes the files in place, without a temporary file: a file read while it is
//! written may not be JSON yet, and then the read fails and is made again once they settle.

use crate::domain::{DatabaseFormat, SessionsDatabase, SnapshotSpec};
use crate::read::database::{Changed, session_document};
use serde_json::Value;
use std::collections::HashMap;
use std::fs::{self, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

/// OpenCode's storage before 1.2, named by a file in its folder (`storage/migration`), as its
/// watcher's `[[database]]` `reader = "opencode-storage"` names it.
#[derive(Debug)]
pub(crate) struct Storage;

/// A store, open: its folder.
struct Store(PathBuf);

impl DatabaseFormat for Storage {
    fn name(&self) -> &'static str {
        "opencode-storage"
    }

    fn is_store(&self) -> bool {
        true
    }

    fn spec(&self) -> SnapshotSpec {
        super::spec()
    }

    fn open(&self, path: &Path) -> io::Result<Box<dyn SessionsDatabase>> {
        Ok(Box::new(Store(store_of(path))))
    }

    fn state(&self, path: &Path, meta: Metadata) -> io::Result<(u64, Metadata)> {
        let (hash, newest) = state(&store_of(path))?;
        Ok((hash, newest.unwrap_or(meta)))
    }
}

impl SessionsDatabase for Store {
    fn changed(&self, since: i64) -> io::Result<Changed> {
        changed(&self.0, since)
    }

    fn document(&self, id: &str) -> io::Result<Option<Vec<u8>>> {
        document(&self.0, id)
    }
}

/// The folder of a store that `path` (a file in it) names.
fn store_of(path: &Path) -> PathBuf {
    path.parent().unwrap_or(path).to_owned()
}

/// The entries of `dir`; none when there is no such folder (yet, or any more).
fn entries(dir: &Path) -> io::Result<Vec<fs::DirEntry>> {
    match fs::read_dir(dir) {
        Ok(entries) => entries.collect(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The JSON files in `dir`, by name (ids grow with time), each with its metadata.
fn files(dir: &Path) -> io::Result<Vec<(PathBuf, Metadata)>> {
    let mut files = Vec::new();
    for entry in entries(dir)? {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            match entry.metadata() {
                Ok(meta) if meta.is_file() => files.push((path, meta)),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// The folders in `dir`, by name.
fn folders(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in entries(dir)? {
        if entry.file_type()?.is_dir() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn stem(path: &Path) -> String {
    (path.file_stem()).map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

fn modified_ms(meta: &Metadata) -> i64 {
    meta.mtime() * 1000 + meta.mtime_nsec() / 1_000_000
}

/// Every file of the store that a session is read from: (session, path, metadata).
fn session_files(store: &Path) -> io::Result<Vec<(String, PathBuf, Metadata)>> {
    let mut all = Vec::new();
    for project in folders(&store.join("session"))? {
        for (path, meta) in files(&project)? {
            all.push((stem(&path), path, meta));
        }
    }
    let mut session_of: HashMap<String, String> = HashMap::new();
    for session in folders(&store.join("message"))? {
        let id = stem(&session);
        for (path, meta) in files(&session)? {
            session_of.insert(stem(&path), id.clone());
            all.push((id.clone(), path, meta));
        }
    }
    for message in folders(&store.join("part"))? {
        // A part of no message (yet) belongs to no session it can be read with.
        let Some(id) = session_of.get(&stem(&message)) else {
            continue;
        };
        for (path, meta) in files(&message)? {
            all.push((id.clone(), path, meta));
        }
    }
    Ok(all)
}

/// The store's state, to tell whether anything changed since it was last read: a hash of its
/// files' paths, sizes and modification times, and the metadata of the newest.
pub(crate) fn state(store: &Path) -> io::Result<(u64, Option<Metadata>)> {
    let mut hash = Xxh3::new();
    let mut newest: Option<Metadata> = None;
    for (_, path, meta) in session_files(store)? {
        hash.update(path.as_os_str().as_encoded_bytes());
        for n in [meta.size() as i64, meta.mtime(), meta.mtime_nsec()] {
            hash.update(&n.to_le_bytes());
        }
        if newest
            .as_ref()
            .is_none_or(|n| n.modified().ok() < meta.modified().ok())
        {
            newest = Some(meta);
        }
    }
    Ok((hash.digest(), newest))
}

/// The sessions with a file modified at or after `since` (ms; 0: every session).
pub(crate) fn changed(store: &Path, since: i64) -> io::Result<Changed> {
    let mut changed = Changed::default();
    for (session, path, meta) in session_files(store)? {
        let at = modified_ms(&meta);
        changed.mark = changed.mark.max(at);
        if at >= since {
            changed.sessions.push(session.clone());
        }
        if path.starts_with(store.join("session")) {
            changed.all.insert(session);
        }
    }
    changed.sessions.sort();
    changed.sessions.dedup();
    Ok(changed)
}

/// A file's JSON; an error saying which file when it is not JSON (yet).
fn json(path: &Path) -> io::Result<Value> {
    let bytes = fs::read(path)?;
    serde_json::from_slice(&bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

/// Session `id`'s document; `None` when the store holds no such session (any more).
pub(crate) fn document(store: &Path, id: &str) -> io::Result<Option<Vec<u8>>> {
    let name = format!("{id}.json");
    let found = (folders(&store.join("session"))?.into_iter())
        .map(|project| project.join(&name))
        .find(|path| path.is_file());
    let Some(path) = found else {
        return Ok(None);
    };
    let session = json(&path)?;
    let mut messages = Vec::new();
    for (path, _) in files(&store.join("message").join(id))? {
        let info = json(&path)?;
        let parts = (files(&store.join("part").join(stem(&path)))?.iter())
            .map(|(part, _)| json(part))
            .collect::<io::Result<Vec<_>>>()?;
        messages.push(serde_json::json!({"info": info, "parts": parts}));
    }
    Ok(Some(session_document(session, messages)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(store: &Path, rel: &str, value: Value) {
        let path = store.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).unwrap();
    }

    fn store() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let s = dir.path();
        write(
            s,
            "session/global/ses_a.json",
            serde_json::json!({"id": "ses_a", "title": "T"}),
        );
        let info = serde_json::json!({"id": "msg_1", "sessionID": "ses_a", "role": "user"});
        write(s, "message/ses_a/msg_1.json", info);
        let part =
            |id: &str, text: &str| serde_json::json!({"id": id, "type": "text", "text": text});
        write(s, "part/msg_1/prt_2.json", part("prt_2", "second"));
        write(s, "part/msg_1/prt_1.json", part("prt_1", "first"));
        // A part whose message is not written yet.
        write(s, "part/msg_9/prt_1.json", part("prt_1", "orphan"));
        dir
    }

    #[test]
    fn a_session_is_its_file_then_its_messages_each_with_its_parts_in_id_order() {
        let dir = store();
        let doc = document(dir.path(), "ses_a").unwrap().unwrap();
        let doc: Value = serde_json::from_slice(&doc).unwrap();
        assert_eq!(doc["session"]["title"], "T");
        assert_eq!(doc["messages"][0]["info"]["id"], "msg_1");
        let texts: Vec<&str> = (doc["messages"][0]["parts"].as_array().unwrap().iter())
            .map(|p| p["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["first", "second"]);
        assert!(document(dir.path(), "ses_b").unwrap().is_none());
    }

    #[test]
    fn a_part_changed_since_the_mark_changes_its_session_and_a_half_written_file_fails() {
        let dir = store();
        let first = changed(dir.path(), 0).unwrap();
        assert_eq!(first.sessions, ["ses_a"]);
        assert_eq!(first.all.len(), 1);
        assert!(
            changed(dir.path(), first.mark + 1)
                .unwrap()
                .sessions
                .is_empty()
        );
        let (before, _) = state(dir.path()).unwrap();
        let part = dir.path().join("part/msg_1/prt_2.json");
        fs::write(&part, b"{\"id\": \"prt_2\", \"type\": \"te").unwrap();
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
        fs::File::options()
            .write(true)
            .open(&part)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert_ne!(state(dir.path()).unwrap().0, before);
        assert_eq!(
            changed(dir.path(), first.mark + 1).unwrap().sessions,
            ["ses_a"]
        );
        let err = document(dir.path(), "ses_a").unwrap_err();
        assert!(err.to_string().contains("prt_2.json"), "{err}");
    }
}
