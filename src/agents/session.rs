//! Which session a new source starts, and the path rules the agents' modules share to say
//! it: a file's stem, its folder's name, a UUID at the end of a name.

use super::message::Parsed;
use std::path::Path;

/// Which session a new source starts: its id, its parent's and (where the path says it) its
/// project.
#[derive(Debug, PartialEq)]
pub(crate) struct Identified {
    /// The session's id, unique within its agent on its machine.
    pub session: String,
    /// The session it is a subagent of.
    pub parent: Option<String>,
    /// The project directory, where the path says it.
    pub project: Option<String>,
}

impl Identified {
    /// A session named by the file's stem, with neither parent nor project.
    pub(crate) fn by_stem(path: &Path, _first: &Parsed) -> Identified {
        Identified {
            session: stem(path),
            parent: None,
            project: None,
        }
    }

    /// A session named by the id its first record gives, else by the file's stem.
    pub(crate) fn by_record(path: &Path, first: &Parsed) -> Identified {
        let session = first.session_id.clone().unwrap_or_else(|| stem(path));
        Identified {
            session,
            ..Identified::by_stem(path, first)
        }
    }

    /// A session named by the folder the file is in, else by the file's stem.
    pub(crate) fn by_folder(path: &Path, first: &Parsed) -> Identified {
        let session = folder(path).unwrap_or_else(|| stem(path));
        Identified {
            session,
            ..Identified::by_stem(path, first)
        }
    }
}

/// The file's stem (its name without its last extension).
pub(crate) fn stem(path: &Path) -> String {
    (path.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The name of the folder the file is in.
pub(crate) fn folder(path: &Path) -> Option<String> {
    (path.parent().and_then(Path::file_name)).map(|n| n.to_string_lossy().into_owned())
}

/// Whether `name` is a UUID (hex digits in groups of 8-4-4-4-12).
pub(crate) fn is_uuid(name: &str) -> bool {
    name.len() == 36 && uuid_suffix(name).is_some()
}

/// The name of the directory that holds `marker`, on the way up from `path`.
pub(crate) fn dir_before(path: &Path, marker: &str) -> Option<String> {
    let dirs: Vec<_> = path.ancestors().filter_map(Path::file_name).collect();
    let at = dirs.iter().position(|d| *d == marker)?;
    dirs.get(at + 1).map(|d| d.to_string_lossy().into_owned())
}

/// The UUID that ends a file stem, if one does.
pub(crate) fn uuid_suffix(stem: &str) -> Option<String> {
    let tail = stem.get(stem.len().checked_sub(36)?..)?;
    let dashes = [8, 13, 18, 23];
    let ok = tail.char_indices().all(|(i, c)| {
        if dashes.contains(&i) {
            c == '-'
        } else {
            c.is_ascii_hexdigit()
        }
    });
    ok.then(|| tail.to_owned())
}

/// A session named by the UUID its first record gives, else the one that ends the file's
/// stem, else the stem (Codex's `rollout-<time>-<uuid>`, Pi's `<time>_<uuid>`).
pub(crate) fn by_record_or_uuid(path: &Path, first: &Parsed) -> Identified {
    let stem = stem(path);
    let session = (first.session_id.clone())
        .or_else(|| uuid_suffix(&stem))
        .unwrap_or(stem);
    Identified {
        session,
        ..Identified::by_stem(path, first)
    }
}
