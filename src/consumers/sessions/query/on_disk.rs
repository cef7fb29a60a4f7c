//! Whether sessions are still on disk, asked of many sessions at once. A session is on disk
//! while any of its files exists, or (while a source of it is not recorded as gone) while the
//! agent's database it is a session of (`<database>/<session id>`) is there.
//!
//! A folder that holds many of the files asked about is read once and its names looked up,
//! rather than each file's path walked by a `stat` of its own; a file alone in its folder is
//! asked for by itself, since reading a large folder for one name costs more than its `stat`.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Files asked about in one folder from which the folder is read once rather than each file
/// asked for.
const READ_FOLDER_FROM: usize = 8;

/// For each session, its files and whether it is `live` (a source of it is not recorded as
/// gone): whether it is on disk, in the same order.
pub(super) fn on_disk_each<'a>(
    sessions: impl IntoIterator<Item = (&'a [PathBuf], bool)>,
) -> Vec<bool> {
    let sessions: Vec<(&[PathBuf], bool)> = sessions.into_iter().collect();
    let mut folders = Folders::of(sessions.iter().flat_map(|(files, _)| files.iter()));
    (sessions.iter())
        .map(|(files, live)| {
            (files.iter()).any(|f| folders.exists(f) || (*live && folders.in_database(f)))
        })
        .collect()
}

/// What is known of the folders of the files asked about.
struct Folders {
    /// The names in each folder read whole; `None` for one that could not be read (each of
    /// its files is then asked for by itself).
    read: HashMap<PathBuf, Option<Names>>,
    /// Whether each file's parent is a file (an agent's database), once per parent.
    is_file: HashMap<PathBuf, bool>,
}

/// A folder's names: those that can be taken as they are, and those of symbolic links,
/// which exist only when what they point to does.
struct Names {
    plain: HashSet<OsString>,
    links: HashSet<OsString>,
}

impl Folders {
    /// Reads each folder that holds at least [`READ_FOLDER_FROM`] of `files`.
    fn of<'a>(files: impl Iterator<Item = &'a PathBuf>) -> Folders {
        let mut asked: HashMap<&Path, HashSet<&std::ffi::OsStr>> = HashMap::new();
        for file in files {
            if let (Some(parent), Some(name)) = (file.parent(), file.file_name()) {
                asked.entry(parent).or_default().insert(name);
            }
        }
        let read = (asked.into_iter())
            .filter(|(_, names)| names.len() >= READ_FOLDER_FROM)
            .map(|(folder, _)| (folder.to_owned(), names_in(folder)))
            .collect();
        Folders {
            read,
            is_file: HashMap::new(),
        }
    }

    /// Whether `file` exists (following a symbolic link), as `Path::exists` says.
    fn exists(&self, file: &Path) -> bool {
        let listed = file
            .parent()
            .zip(file.file_name())
            .and_then(|(parent, name)| {
                let names = self.read.get(parent)?.as_ref()?;
                Some(names.plain.contains(name) || (names.links.contains(name) && file.exists()))
            });
        listed.unwrap_or_else(|| file.exists())
    }

    /// Whether `file`'s parent is a file: `file` names a session in an agent's database.
    fn in_database(&mut self, file: &Path) -> bool {
        let Some(parent) = file.parent() else {
            return false;
        };
        if self.read.get(parent).is_some_and(Option::is_some) {
            return false;
        }
        *(self.is_file)
            .entry(parent.to_owned())
            .or_insert_with(|| parent.is_file())
    }
}

/// The names in `folder`, or `None` when it cannot be read whole (not a folder, not readable,
/// an error part way).
fn names_in(folder: &Path) -> Option<Names> {
    let mut names = Names {
        plain: HashSet::new(),
        links: HashSet::new(),
    };
    for entry in std::fs::read_dir(folder).ok()? {
        let entry = entry.ok()?;
        match entry.file_type().ok()?.is_symlink() {
            true => names.links.insert(entry.file_name()),
            false => names.plain.insert(entry.file_name()),
        };
    }
    Some(names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// The answer for each of `sessions`, and `Path::exists`'s rule file by file.
    fn both(sessions: &[(Vec<PathBuf>, bool)]) -> (Vec<bool>, Vec<bool>) {
        let each = on_disk_each(sessions.iter().map(|(f, live)| (f.as_slice(), *live)));
        let one_by_one = (sessions.iter())
            .map(|(files, live)| {
                let in_db = |f: &PathBuf| f.parent().is_some_and(Path::is_file);
                files.iter().any(|f| f.exists() || (*live && in_db(f)))
            })
            .collect();
        (each, one_by_one)
    }

    #[test]
    fn a_folder_read_whole_answers_as_each_file_asked_for_would() {
        let dir = tempfile::tempdir().unwrap();
        let many = dir.path().join("many");
        fs::create_dir(&many).unwrap();
        let mut sessions = Vec::new();
        for i in 0..20 {
            let file = many.join(format!("{i}.jsonl"));
            if i % 3 != 0 {
                fs::write(&file, "{}\n").unwrap();
            }
            sessions.push((vec![file], false));
        }
        // A link to a file that is there, and one whose file is gone.
        fs::write(dir.path().join("target"), "").unwrap();
        std::os::unix::fs::symlink(dir.path().join("target"), many.join("link.jsonl")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("nowhere"), many.join("dangling.jsonl"))
            .unwrap();
        sessions.push((vec![many.join("link.jsonl")], false));
        sessions.push((vec![many.join("dangling.jsonl")], false));
        // A session of a database, live and not, and a file alone in its folder.
        let db = dir.path().join("store.db");
        fs::write(&db, "").unwrap();
        sessions.push((vec![db.join("s1")], true));
        sessions.push((vec![db.join("s2")], false));
        sessions.push((vec![dir.path().join("alone.json")], false));
        let (each, one_by_one) = both(&sessions);
        assert_eq!(each, one_by_one);
        assert_eq!(each.iter().filter(|on| **on).count(), 13 + 1 + 1);
    }

    #[test]
    fn a_folder_that_cannot_be_read_leaves_each_file_to_be_asked_for() {
        // Sessions of an agent's database: their "folder" is a file, which cannot be read
        // as one, so each is asked for by itself (and is there while the database is).
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("store.db");
        fs::write(&db, "").unwrap();
        let sessions: Vec<(Vec<PathBuf>, bool)> = (0..10)
            .map(|i| (vec![db.join(format!("s{i}"))], true))
            .collect();
        let (each, one_by_one) = both(&sessions);
        assert_eq!(each, one_by_one);
        assert!(each.iter().all(|on| *on));
    }
}
