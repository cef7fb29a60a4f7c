//! Where a sink with `marks = true` is in the archive's order of mark changes
//! (`mark_changes`): the seq of the last change it shipped, kept in its state (`marks_seq`)
//! and committed with its cursor, only after its destination has the marks (or has refused,
//! for good, those of a session sent alone: see `Shipper::settle_marks`).

use crate::archive::Archive;
use crate::archive::marks::MarksNow;
use crate::error::Result;

/// The sink state key of the last mark change shipped.
const MARKS_SEQ: &str = "marks_seq";

/// A sink's place in the order of mark changes.
pub(super) struct MarksCursor {
    seq: i64,
    moved: bool,
}

impl MarksCursor {
    /// Sink `name`'s place, as last committed: before every change when it has none.
    pub(super) fn load(archive: &Archive, name: &str) -> Result<MarksCursor> {
        let mut seq = 0;
        archive.sink_state(name, |key, value| {
            if key == MARKS_SEQ {
                seq = value.parse().unwrap_or(0);
            }
        })?;
        Ok(MarksCursor { seq, moved: false })
    }

    /// The changes to ship next, `limit` at most, in order: those after the cursor up to the
    /// first one made when the archive held records past `shipped` (the sink's records
    /// cursor), which waits until those records are shipped.
    pub(super) fn next(
        &self,
        archive: &Archive,
        shipped: i64,
        limit: usize,
    ) -> Result<Vec<MarksNow>> {
        let mut changed = archive.marks_changed_after(self.seq, limit)?;
        let ready = (changed.iter())
            .position(|c| c.records_seq > shipped)
            .unwrap_or(changed.len());
        changed.truncate(ready);
        Ok(changed)
    }

    /// Every change up to `seq` is delivered.
    pub(super) fn shipped(&mut self, seq: i64) {
        self.seq = seq;
        self.moved = true;
    }

    /// The state to commit with the sink's cursor, when the cursor moved since.
    pub(super) fn take_state(&mut self) -> Option<(String, String)> {
        std::mem::take(&mut self.moved).then(|| (MARKS_SEQ.to_owned(), self.seq.to_string()))
    }
}
