//! The archive: one SQLite database holding sources, cursors, records, rejects, prefix marks,
//! scanned roots and the engine's own events.
//!
//! Every change the engine makes goes through one [`Tx`](tx::Tx): the records of a batch and
//! the cursor past them commit together, so a crash at any instant loses nothing and
//! duplicates nothing.
//!
//! One concern per file:
//! - `open`: creating and opening the file, a connection's pragmas, the schema migrations;
//! - `queries`: the read queries, and the rows they return;
//! - `op`: [`Op`], the changes a commit is made of;
//! - `commit`: [`Commit`], the changes of one transaction, and [`Archive::apply`] applying it;
//! - `tx`: the write transaction, where each op is written;
//! - `codec`: how a record is stored, as it is or compressed;
//! - `compact`: every record stored again, and the file rewritten (`compact`);
//! - `snapshots`: the states of snapshot sources;
//! - `machines`, `sinks`: what is kept of other machines, and of each sink;
//! - `writer`, `write_turn`, `wal_checkpoint`, `lock`: the one writer, turns at writing, the
//!   WAL checkpointer, and the lock that keeps the writer one;
//! - `follow`, `envelope`: consumers following the log, and the export format;
//! - `tests`: unit tests of the archive's opening, reads and writes.

pub(crate) mod envelope;
pub(crate) mod follow;
pub(crate) mod lock;
pub(crate) mod machines;
pub(crate) mod marks;
pub(crate) mod sinks;
pub(crate) mod snapshots;
pub(crate) mod wal_checkpoint;
pub(crate) mod write_turn;
pub(crate) mod writer;

mod codec;
mod commit;
mod compact;
mod op;
mod open;
mod queries;
mod tx;

#[cfg(test)]
mod tests;

use crate::domain::SourceId;
use crate::error::{ArchiveContext, Result};
use codec::Codec;
pub(crate) use codec::{MAX_SAMPLES as SAMPLE_BYTES, MIN_COMPRESSED};
pub(crate) use commit::RecordBatch;
pub use commit::{Commit, Committer};
pub use op::Op;
pub(crate) use open::{create_private, ensure_dir, read_only_uri};
pub(crate) use queries::{ExportRow, Records, RejectRow, Storage};
use rusqlite::Connection;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
pub(crate) use tx::record_consumer_done;

/// The keys of the archive's `state` table: the one list of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKey {
    /// The archive's machine id, a UUID made with the archive (schema 5): what its records
    /// are keyed by wherever they are shipped.
    MachineId,
    /// The running daemon's caught-up figures, for `status` (JSON).
    CaughtUp,
}

impl StateKey {
    /// The key as the table holds it.
    pub fn name(self) -> &'static str {
        match self {
            StateKey::MachineId => "machine_id",
            StateKey::CaughtUp => "caught_up",
        }
    }
}

/// True for a source pulled from another machine (their ids are negative, this machine's
/// positive): its records are in the archive, but not this machine's to ship.
pub(crate) fn is_pulled(source: SourceId) -> bool {
    source < 0
}

/// An open archive.
pub struct Archive {
    conn: Connection,
    path: PathBuf,
    codec: Codec,
}

impl Archive {
    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection, for a consumer that keeps its own tables in the archive (the session
    /// index) and writes them in transactions of its own.
    pub(crate) fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// Maps a SQLite error to [`Error::Archive`](crate::error::Error::Archive) naming this
    /// archive.
    pub(crate) fn db<T>(&self, result: rusqlite::Result<T>) -> Result<T> {
        result.at_archive(&self.path)
    }

    /// The rows of `sql` with `params`, each made by `row`.
    fn rows<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        row: impl FnMut(&rusqlite::Row) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>> {
        let rows = (|| {
            let mut stmt = self.conn.prepare(sql)?;
            let rows = stmt.query_map(params, row)?;
            rows.collect::<rusqlite::Result<Vec<T>>>()
        })();
        self.db(rows)
    }
}

fn blob(path: &Path) -> Vec<u8> {
    path.as_os_str().as_bytes().to_vec()
}

/// A path stored as its bytes.
pub(crate) fn path_from_blob(bytes: Vec<u8>) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(&bytes))
}
