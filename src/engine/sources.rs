//! The engine's in-memory view of the archive's sources, indexed by identity and by path.

use crate::domain::fingerprint::Identity;
use crate::domain::{SourceId, SourceRow};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// All sources, with indexes kept in step with every change.
#[derive(Default)]
pub(crate) struct Sources {
    rows: HashMap<SourceId, SourceRow>,
    by_identity: HashMap<Identity, Vec<SourceId>>,
    by_path: HashMap<PathBuf, SourceId>,
}

impl Sources {
    /// Builds the table from the archive's rows.
    pub(crate) fn new(rows: Vec<SourceRow>) -> Sources {
        let mut sources = Sources::default();
        for row in rows {
            sources.put(row);
        }
        sources
    }

    /// The source with this id.
    pub(crate) fn get(&self, id: SourceId) -> Option<&SourceRow> {
        self.rows.get(&id)
    }

    /// Every source.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &SourceRow> {
        self.rows.values()
    }

    /// The live sources that may own `identity`, found at `path`: the one recorded at `path`
    /// first, then those that may have moved there (whose claim the caller must check, see
    /// `plan::owner`). A source whose cursor is at offset 0 is not taken to have moved: with
    /// nothing captured, nothing could show a moved file from another file that reused its
    /// inode, and following it would put the records it archived under a path they were
    /// never written at. Such a file is matched by its path instead. A source whose cursor
    /// row is invalid keeps its identity wherever the file is, so that no new source reads
    /// the file again from its start.
    pub(crate) fn live_by_identity(&self, identity: Identity, path: &Path) -> Vec<SourceId> {
        let Some(ids) = self.by_identity.get(&identity) else {
            return Vec::new();
        };
        let live = || ids.iter().copied().filter(|id| !self.rows[id].gone);
        let followed = |id: &SourceId| {
            let row = &self.rows[id];
            row.path != path && (row.cursor.position.offset > 0 || row.invalid.is_some())
        };
        let at_path = live().filter(|id| self.rows[id].path == path);
        at_path.chain(live().filter(followed)).collect()
    }

    /// The newest gone source that owned `identity` (its file may have come back, or the
    /// inode may have been reused by another file).
    pub(crate) fn gone_by_identity(&self, identity: Identity) -> Option<SourceId> {
        let ids = self.by_identity.get(&identity)?;
        ids.iter().copied().filter(|id| self.rows[id].gone).max()
    }

    /// The live source whose current path is `path`.
    pub(crate) fn live_by_path(&self, path: &Path) -> Option<SourceId> {
        let id = *self.by_path.get(path)?;
        let row = &self.rows[&id];
        (!row.gone && row.path == path).then_some(id)
    }

    /// Inserts or replaces a source, updating the indexes.
    pub(crate) fn put(&mut self, row: SourceRow) {
        if let Some(old) = self.rows.remove(&row.id) {
            if let Some(ids) = self.by_identity.get_mut(&old.identity) {
                ids.retain(|&id| id != old.id);
            }
            if self.by_path.get(&old.path) == Some(&old.id) {
                self.by_path.remove(&old.path);
            }
        }
        self.by_identity
            .entry(row.identity)
            .or_default()
            .push(row.id);
        if !row.gone {
            self.by_path.insert(row.path.clone(), row.id);
        }
        self.rows.insert(row.id, row);
    }
}
