//! What the pipeline talks about, below every module that uses it: sources and their
//! cursors, the records and rejects a read yields, where a new source starts, and the limits
//! of a read. `read`, `archive`, `seed`, `harness` and `config` all import these from here.

pub(crate) mod fingerprint;

use crate::domain::fingerprint::{Fingerprint, Identity, Markers};
use std::collections::HashSet;
use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};

/// How many of the held-back bytes a cursor keeps at hand, to tell at the next read whether
/// they were overwritten (all of them, up to the record limit, are in the archive).
pub(crate) const HELD_BACK_PREFIX: usize = 64 * 1024;

/// The largest snapshot file (or session of a database) captured; a larger one is reported
/// and not read.
pub(crate) const MAX_SNAPSHOT: u64 = 256 << 20;

/// Where reading resumes: the offset just past the last archived record, and the markers of
/// the bytes before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Position {
    /// The offset just past the last consumed line.
    pub offset: u64,
    /// The marker windows at `offset`.
    pub markers: Markers,
}

/// Bounds on one read.
#[derive(Clone, Copy, Debug)]
pub struct ReadLimits {
    /// A line longer than this is rejected; only its first `record_limit` bytes are held in
    /// memory and kept.
    pub record_limit: u64,
    /// A batch stops after the line that takes it past this many bytes, so one large file
    /// cannot starve the others or grow memory.
    pub batch_bytes: u64,
}

/// One complete, valid record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Where the line starts.
    pub offset: u64,
    /// The line without `\n` (and without a `\r` before it).
    pub bytes: Vec<u8>,
}

/// One complete line that is not a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reject {
    /// Where the line starts.
    pub offset: u64,
    /// The line's length without its `\n` (a `\r` before it counts).
    pub length: u64,
    /// Why it was rejected.
    pub reason: String,
    /// The line's bytes as they were on disk, without the `\n`: all `length` of them, or the
    /// first record-limit bytes of a line longer than the record limit.
    pub raw: Vec<u8>,
}

/// A source's row id.
pub(crate) type SourceId = i64;

/// Where a source's reading stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cursor {
    /// The offset past the last archived line, and its markers.
    pub position: Position,
    /// The file as it was when it was last read; `None` before the first read.
    pub fingerprint: Option<Fingerprint>,
    /// Bytes after the cursor that formed no complete line at the last read.
    pub held_back: u64,
    /// Their first bytes (at most 64 KiB), to tell at the next read whether they were
    /// overwritten. All of them (up to the record limit) are in the archive, recorded as a
    /// reject if the generation ends before their line does.
    pub held_back_prefix: Vec<u8>,
}

/// One source as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceRow {
    /// Row id.
    pub id: SourceId,
    /// The identity it owns.
    pub identity: Identity,
    /// Its current path.
    pub path: PathBuf,
    /// The watcher that found it.
    pub harness: String,
    /// Current generation.
    pub generation: i64,
    /// True once its file has disappeared or been replaced by another identity.
    pub gone: bool,
    /// Its cursor.
    pub cursor: Cursor,
    /// Records archived, all generations.
    pub records: u64,
    /// Lines rejected, all generations.
    pub rejects: u64,
    /// When a record was last archived (Unix ms).
    pub last_archived_ms: Option<i64>,
    /// Why its cursor row cannot be used, when the archive holds one that is corrupted: such a
    /// source is never read, and nothing else takes its file.
    pub invalid: Option<String>,
}

impl SourceRow {
    /// A new source: generation 0, live, nothing archived yet, its cursor at offset 0.
    pub fn new(id: SourceId, identity: Identity, path: PathBuf, harness: String) -> SourceRow {
        SourceRow {
            id,
            identity,
            path,
            harness,
            generation: 0,
            gone: false,
            cursor: Cursor::default(),
            records: 0,
            rejects: 0,
            last_archived_ms: None,
            invalid: None,
        }
    }
}

/// A `seed` mark: the first `position.offset` bytes of this identity are history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixMark {
    /// The file's identity when it was seeded.
    pub identity: Identity,
    /// The path it was seeded at.
    pub path: PathBuf,
    /// The resolved offset and the markers of the bytes before it.
    pub position: Position,
    /// How many records the prefix holds.
    pub skipped_records: u64,
}

/// Where files seen at a root's first scan start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StartAt {
    /// Archive everything (the default).
    #[default]
    Beginning,
    /// Start after the last complete record of each file present at a root's first scan;
    /// files and generations that appear later still start at 0.
    End,
}

/// Where a snapshot file (a JSON document its agent rewrites whole) keeps its messages, from
/// the watcher definition's `[snapshot]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SnapshotSpec {
    /// JSON pointer (RFC 6901) to the list of messages (empty for a document that is the
    /// list); `None` for a document that is one record as a whole (a session's manifest).
    pub(crate) messages: Option<String>,
    /// JSON pointer, inside a message, to its id (a string or a number); empty to key each
    /// message by its place in the list.
    pub(crate) key: String,
    /// What kind of document it is.
    pub(crate) format: SnapshotFormat,
}

/// How an agent's sessions database is read: by the reader its agent's module defines
/// (`agents::opencode`, `agents::crush`), named by its watcher's `[[database]]` `reader`.
pub(crate) type DatabaseReader = &'static dyn DatabaseFormat;

/// An agent's database format: how a database of it (a SQLite file, or a folder of files
/// named by a file in it) is opened, read and watched.
pub(crate) trait DatabaseFormat: Sync + std::fmt::Debug {
    /// The name a watcher's `[[database]]` `reader` gives it.
    fn name(&self) -> &'static str;

    /// Whether it reads a folder of files (named by a file in it) rather than a SQLite file.
    fn is_store(&self) -> bool;

    /// Where a session's document keeps its messages.
    fn spec(&self) -> SnapshotSpec;

    /// The database at `path`, open for reading (read-only: the agent is never blocked).
    fn open(&self, path: &Path) -> io::Result<Box<dyn SessionsDatabase>>;

    /// What tells whether the database at `path` (whose metadata is `meta`) changed since it
    /// was last read, and the metadata of its part written last (for how long ago that was).
    fn state(&self, path: &Path, meta: Metadata) -> io::Result<(u64, Metadata)>;
}

/// An agent's database, open for reading.
pub(crate) trait SessionsDatabase {
    /// The sessions changed since mark `since` (0: everything), read at once (in one read
    /// transaction, for SQLite).
    fn changed(&self, since: i64) -> io::Result<Changed>;

    /// Session `id`'s document; `None` when there is no such session (any more).
    fn document(&self, id: &str) -> io::Result<Option<Vec<u8>>>;
}

/// What changed in an agent's database since a mark (0: everything).
#[derive(Debug, Default)]
pub(crate) struct Changed {
    /// The sessions whose rows, messages or parts changed, in id order: each is read with
    /// [`SessionsDatabase::document`], one at a time.
    pub sessions: Vec<String>,
    /// Every session the database holds.
    pub all: HashSet<String>,
    /// The mark to give the next read: taken before any document is read, so that what
    /// changes while they are read is read again (and found the same where it is).
    pub mark: i64,
}

/// The kind of document a snapshot file is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SnapshotFormat {
    /// A JSON document (`messages` and `key` say where its messages are).
    #[default]
    Json,
    /// A text document that its agent's module splits into messages (Aider's Markdown chat
    /// history, `agents::aider`), named by a watcher's `[[snapshot]]` `format`.
    Text(TextFormat),
    /// A file that cannot be read (encrypted by its agent): kept byte for byte, each state one
    /// record of its length and hash, no message (`format = "opaque"`).
    Opaque,
}

/// A text format of snapshot documents, and how its agent's module splits one into entries.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TextFormat {
    /// The name a watcher's `[[snapshot]]` `format` gives it.
    pub name: &'static str,
    /// The document's entries, in file order; `Err` says why the text is not such a
    /// document.
    pub derive: fn(&str) -> Result<Vec<SnapshotEntry>, String>,
}

impl PartialEq for TextFormat {
    fn eq(&self, other: &TextFormat) -> bool {
        self.name == other.name
    }
}

impl Eq for TextFormat {}

/// One value taken out of a snapshot document: the document around the list (`key` `None`),
/// or a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SnapshotEntry {
    /// The message's key; `None` for the document around the list.
    pub(crate) key: Option<String>,
    /// The record: the value's bytes on one line.
    pub(crate) record: Vec<u8>,
}
