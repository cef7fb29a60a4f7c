//! Evidence that a file found by identity away from its source's path is that source's
//! document (`plan::Evidence`): the same agent's, and its content agreeing with what was last
//! captured of the source. An identity alone is no such evidence: the inode an atomic save
//! frees is given to the next file made on that filesystem, often another writer's temporary
//! file.
//!
//! What counts as agreeing depends on how the source is read:
//! - an appended transcript: the cursor's marker windows verify against the file (its bytes
//!   up to the cursor are the ones archived);
//! - a file rewritten whole: its own path no longer holds a file (a save puts the next state
//!   there, so a path that holds one keeps its source), and the file is the state last
//!   captured, or shares a message id with it;
//! - a database: only a second name of the file at its path; a database found elsewhere is
//!   read as a new source from its beginning, since its mark says what was read of the file
//!   at that path, not of another.

use super::snapshot::{archived_state, read_whole};
use crate::archive::Archive;
use crate::capture::harness::Root;
use crate::domain::fingerprint::Identity;
use crate::domain::{SourceId, SourceRow};
use crate::engine::plan::Evidence;
use crate::error::Result;
use crate::read::cursor_applies;
use crate::read::open::open_regular;
use crate::read::snapshot::{self, Spec, State};
use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The engine's answers to planning's questions, for one set of roots.
pub(crate) struct Witness<'a> {
    /// The roots the files were found under (a candidate names one by its place).
    pub(crate) roots: &'a [Root],
    /// The archive, for prefix marks and the states captured last.
    pub(crate) reads: &'a Archive,
    /// The states captured last that the engine holds in memory.
    pub(crate) states: &'a HashMap<SourceId, State>,
}

impl Evidence for Witness<'_> {
    fn marked(&self, identity: Identity) -> Result<bool> {
        Ok(self.reads.prefix_mark(identity)?.is_some())
    }

    fn same_document(&self, path: &Path, root: usize, src: &SourceRow) -> Result<bool> {
        let Some(root) = self.roots.get(root) else {
            return Ok(false);
        };
        // Nothing crosses from one agent to another.
        if root.harness != src.harness {
            return Ok(false);
        }
        // Its cursor cannot be checked, and no other source may read its file again.
        if src.invalid.is_some() {
            return Ok(true);
        }
        if root.is_database(path) {
            return Ok(recorded_path_holds(src) == Holds::Itself);
        }
        if let Some(spec) = root.snapshot_of(path) {
            return self.same_snapshot(path, src, spec);
        }
        Ok(same_transcript(path, src))
    }
}

impl Witness<'_> {
    /// A file rewritten whole at `path` is `src`'s document: its recorded path holds no file
    /// (or the same file: a second name), and the file agrees with the state last captured.
    fn same_snapshot(&self, path: &Path, src: &SourceRow, spec: &Spec) -> Result<bool> {
        match recorded_path_holds(src) {
            Holds::Itself => return Ok(true),
            Holds::Another => return Ok(false),
            Holds::Nothing => {}
        }
        // `read_whole` refuses a file larger than a snapshot may be.
        let whole = |file: &File, meta: &Metadata| read_whole(file, meta).ok().flatten();
        let Some(bytes) = read_owned(path, src.identity, whole) else {
            return Ok(false);
        };
        let Ok(entries) = snapshot::derive(&bytes, spec) else {
            return Ok(false);
        };
        let same = match self.states.get(&src.id) {
            Some(state) => state.same_document(&bytes, &entries),
            None => archived_state(self.reads, src.id, spec)?.same_document(&bytes, &entries),
        };
        Ok(same)
    }
}

/// What a source's recorded path holds now.
#[derive(Debug, PartialEq, Eq)]
enum Holds {
    /// The source's own file (the path is a second name of the file found elsewhere).
    Itself,
    /// Another file: the source's next state, or a file that took its name.
    Another,
    /// Nothing (or nothing that can be looked at).
    Nothing,
}

fn recorded_path_holds(src: &SourceRow) -> Holds {
    match std::fs::symlink_metadata(&src.path) {
        Ok(meta) if Identity::of(&meta) == src.identity => Holds::Itself,
        Ok(_) => Holds::Another,
        Err(_) => Holds::Nothing,
    }
}

/// An appended transcript at `path` is `src`'s when `src`'s marker windows verify against it.
fn same_transcript(path: &Path, src: &SourceRow) -> bool {
    let verified =
        |file: &File, meta: &Metadata| cursor_applies(file, &src.cursor.position, meta.size()).ok();
    matches!(read_owned(path, src.identity, verified), Some(Ok(())))
}

/// `read` of the regular file at `path`, when it is the file `identity` (it may have changed
/// since the scan); `None` when it is not, cannot be opened, or `read` gives nothing.
fn read_owned<T>(
    path: &Path,
    identity: Identity,
    read: impl FnOnce(&File, &Metadata) -> Option<T>,
) -> Option<T> {
    let file = open_regular(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.file_type().is_file() || Identity::of(&meta) != identity {
        return None;
    }
    read(&file, &meta)
}
