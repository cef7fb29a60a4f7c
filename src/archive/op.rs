//! [`Op`]: the changes a commit is made of, each variant's contract what it writes.

use super::marks::{MarkChange, SessionKey};
use super::{RecordBatch, StateKey};
use crate::domain::fingerprint::Identity;
use crate::domain::{Cursor, PrefixMark, Reject, SourceId};
use std::path::{Path, PathBuf};

/// One change inside a [`Commit`](super::Commit): what each variant writes is its contract, and
/// `Tx::apply` is the one place that writes it.
#[derive(Debug)]
pub enum Op {
    /// Adds source `id` at generation 0 with its first cursor.
    InsertSource {
        /// The new source's id (the engine allocates ids: only one `run` writes).
        id: SourceId,
        /// The identity it owns.
        identity: Identity,
        /// Where its file is.
        path: PathBuf,
        /// The watcher that found it.
        harness: String,
        /// Where reading starts.
        cursor: Cursor,
    },
    /// Records a source's identity, path, generation and gone flag.
    UpdateSource {
        /// The source.
        id: SourceId,
        /// Its identity now.
        identity: Identity,
        /// Its path now.
        path: PathBuf,
        /// Its generation now.
        generation: i64,
        /// Whether its file is gone.
        gone: bool,
    },
    /// Stores a source's cursor.
    PutCursor {
        /// The source.
        id: SourceId,
        /// Its cursor now.
        cursor: Cursor,
    },
    /// Appends records; they take the next `seq` numbers, returned by
    /// [`Archive::apply`](super::Archive::apply) in the order of
    /// [`Commit::records`](super::Commit::records).
    Records(RecordBatch),
    /// Keeps `bytes` as the latest state of snapshot source `id` (a file rewritten whole),
    /// unless it is that already (`snapshots`).
    Snapshot {
        /// The source.
        id: SourceId,
        /// The file's bytes as captured.
        bytes: Vec<u8>,
    },
    /// Records rejected lines, whole (up to the record limit), and counts them on the source.
    Rejects {
        /// The source.
        id: SourceId,
        /// The generation they belong to.
        generation: i64,
        /// The lines.
        rejects: Vec<Reject>,
    },
    /// Keeps the bytes held back past a source's cursor, all of them (up to the record limit),
    /// for the reject they become if the generation ends first; empty `bytes` forget them.
    PutHeldBack {
        /// The source.
        id: SourceId,
        /// Where the unfinished line starts (the cursor's offset).
        offset: u64,
        /// Its bytes so far.
        bytes: Vec<u8>,
        /// They begin with the bytes kept at the last read (the same line, longer now): only
        /// what they add is written.
        grown: bool,
    },
    /// Records the held-back bytes kept for a source as a reject, counts it, and forgets
    /// them; nothing when none are kept.
    RejectHeldBack {
        /// The source.
        id: SourceId,
        /// The generation they belong to.
        generation: i64,
        /// The unfinished line's length so far (more than is kept, past the record limit).
        length: u64,
        /// Why it is rejected.
        reason: String,
    },
    /// Appends to the lifecycle log.
    Event {
        /// The source concerned, if any.
        source: Option<SourceId>,
        /// What happened (`seeded`, `moved`, `reject`, …).
        kind: &'static str,
        /// The path concerned.
        path: PathBuf,
        /// The details.
        detail: String,
    },
    /// Stores a prefix mark, replacing any earlier one for the same identity.
    PutPrefixMark(PrefixMark),
    /// Changes a person's marks on a session (`marks`).
    Mark {
        /// The session.
        session: SessionKey,
        /// What changes.
        change: MarkChange,
    },
    /// Deletes the prefix mark of an identity (a mark is used once).
    RemovePrefixMark(Identity),
    /// Remembers that a root has had its first scan.
    RootScanned(PathBuf),
    /// Records that the durable consumer `name` is done with every record up to `seq`,
    /// committed together with the consumer's own work (see `follow`).
    ConsumerDone {
        /// The consumer.
        name: String,
        /// The last `seq` it is done with.
        seq: i64,
    },
    /// Lines spread over a backlog of `harness`'s transcripts about to be archived (see
    /// `sample`): a dictionary for it is trained from them at once, in place of those it
    /// would train from the records first committed.
    Samples {
        /// The harness.
        harness: String,
        /// The lines, each cut as the archive cuts its samples.
        lines: Vec<Vec<u8>>,
    },
    /// Keeps a value in `state`.
    SetState {
        /// Its name.
        key: StateKey,
        /// Its value.
        value: String,
    },
    /// Adds another machine, whose records are pulled.
    Machine {
        /// Its id in this archive (1 and up).
        id: i64,
        /// Its UUID, the `machine_id` of its archive.
        uuid: String,
        /// Its host name, a label.
        host: String,
    },
    /// Adds or updates a source pulled from another machine: a negative id, no cursor.
    PulledSource {
        /// Its id here (negative).
        id: SourceId,
        /// Its machine's id here.
        machine: i64,
        /// Its id on that machine.
        remote_id: i64,
        /// Its watcher there.
        harness: String,
        /// Its path there.
        path: PathBuf,
        /// Its generation there.
        generation: i64,
    },
    /// Moves sink `sink`'s place in what it pulls of `machine`, with the records pulled.
    Pulled {
        /// The sink.
        sink: String,
        /// The machine's id here.
        machine: i64,
        /// The store's last `pull_id` taken.
        pulled_id: i64,
        /// How many records this pull added.
        records: i64,
        /// When the last of them was shipped by its machine (Unix ms).
        shipped_ms: Option<i64>,
        /// The time of the last session row taken, as the store writes it.
        sessions_at: Option<String>,
    },
    /// What another machine's index says of one of its sessions.
    PulledSession {
        /// The machine's id here.
        machine: i64,
        /// The watcher.
        harness: String,
        /// The agent's id of the session.
        session: String,
        /// The project's git remote.
        git_remote: Option<String>,
    },
}

impl Op {
    /// An [`Op::Event`].
    pub fn event(source: Option<SourceId>, kind: &'static str, path: &Path, detail: &str) -> Op {
        Op::Event {
            source,
            kind,
            path: path.to_owned(),
            detail: detail.to_owned(),
        }
    }
}
