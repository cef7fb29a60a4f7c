//! transcript-sync: archive AI coding agents' JSONL session transcripts, every complete record
//! exactly once and in order, into a local SQLite archive.
//!
//! # Architecture
//!
//! One folder per stage. The stages below are in the order records flow; in the list of
//! modules after this text they are in the order of their dependencies: each uses only those
//! declared before it (`error` and `domain` first, `cli` last), so `agents` comes after the
//! `read` it reads with, and `archive` before `engine`, which commits through it.
//!
//! - `capture`: which transcripts there are and when they change. [`Root`]s from the
//!   embedded watcher definitions (`watchers/*.toml`) or `--watch`; discovery walks them
//!   without following symlinks, reporting whatever it passes over; watching turns inotify
//!   events (read by the engine thread itself; `notify` elsewhere) into dirty paths. Events
//!   are wake-ups, never data.
//! - `read`: a changed file opened as an owned handle, its cursor's marker windows verified
//!   against it, and exactly the complete lines of `[cursor, size on the handle)` read in
//!   bounded batches; `record` decides which lines are records.
//! - `agents`: what is particular to each agent, one module each (its watcher definition,
//!   the readers of its databases, how its records become messages, which session a file
//!   is, where `restore` puts it back and how it resumes), and the registry that every other
//!   layer asks instead of naming an agent.
//! - `engine`: a pass. Each file found is matched to a source (by identity, then by path; an
//!   identity away from its source's path only with evidence that the file is the source's
//!   document, since a freed inode is given to the next file made) and skipped when its
//!   [`Fingerprint`] equals its cursor's; a new source's start is seeded
//!   (persisted cursor, prefix mark, start policy); what happens to a source becomes its new
//!   in-memory row and the [`Commit`] that records it, in one function (`lifecycle`).
//! - `archive`: each batch committed with the cursor past it in one SQLite transaction, so a
//!   crash at any instant loses and duplicates nothing; records compressed with a dictionary
//!   per harness. The [`ArchiveWriter`] thread commits and publishes each durable commit to a
//!   [`Hub`]; a [`Follower`] catches up from the archive, then takes what is published, with
//!   no gap and no duplicate at the switch. The WAL checkpointer copies the WAL into the
//!   database beside the writer. Every statement on the archive's tables is here.
//! - `consumers`: followers of that log. The [`Tap`] (`--sink stdout`) starts "now"; the
//!   socket's subscribers get catch-up, `caught_up`, then live (a slow one is told
//!   `lagged`); the sinks and the session index (a SQLite file of its own, so the writer
//!   never waits for it) are durable followers; redaction replaces secrets in what leaves.
//! - `config` resolves `config.toml` under the command line's flags; `daemon` wires the
//!   threads of `run` and `run --once` in one place, keeps passes going, speaks sd_notify and
//!   installs the user service.
//! - `history`: the session service every face asks (the archive opened with its index up to
//!   date, a session found, restored, the status, a "since"); the faces over it are `web`
//!   (the web view), `mcp` (the MCP server) and `cli`, which defines the commands and runs
//!   them, starting the other two. No face calls another's handlers.
//!
//! The types every stage shares (sources, cursors, records, rejects) live in `domain`, and
//! system calls beyond std's in `platform::sys`, as safe calls on rustix; `platform::fts5`
//! registers the session index's tokenizer and ranking through FTS5's C API. `unsafe` is denied
//! everywhere but in those two and in the SIMD code of `read::record`.
#![warn(missing_docs)]
#![deny(unsafe_code)]
#![warn(unreachable_pub)]

// The modules in the order of the layers, each using only those above it in this list.
mod error;

mod domain;

mod platform;

mod capture;

mod read;

mod agents;

mod archive;

mod engine;

mod consumers;

mod config;

mod daemon;

mod history;

mod web;

mod mcp;

pub mod cli;

pub use agents::message::prefix_of;
pub use agents::{builtin_roots, watch_roots};
pub use archive::follow::{Follower, Hub, Offer, Published, Start, Subscriber};
pub use archive::writer::{ArchiveWriter, ChannelCommitter};
pub use archive::{Archive, Commit, Committer, Op};
pub use capture::harness::Root;
pub use consumers::redact::{Finding, RedactSettings, Redactor, RuleDef};
pub use consumers::ship::copy_text;
pub use consumers::tap::Tap;
pub use daemon::RECORDS_COMMITTED;
pub use domain::fingerprint::{Fingerprint, Identity, Markers};
pub use domain::{ReadLimits, StartAt};
pub use engine::{Engine, EngineOptions, PassReport, Totals};
pub use error::{Error, Result, error_chain};

/// Registers the session index's tokenizers (`terms`, and `words` it cuts queries with) on
/// `conn`, for a program that opens the index's file (`<archive>-index`) with a connection of
/// its own and reads its text: a query of `message_text` fails with "no such tokenizer: terms"
/// without them. `Err` is SQLite's.
pub fn register_index_tokenizer(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    consumers::sessions::store::register_words(conn)
}

/// The record reader, for the fuzz targets in `fuzz/`; not a supported interface.
///
/// [`read_complete_records`](fuzzing::read_complete_records) is what the engine calls on
/// every file: it verifies a [`Position`](fuzzing::Position) against an open file and splits
/// `[position, size)` into records, rejects, blank lines and held-back bytes.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::domain::{Position, Record, Reject};
    pub use crate::read::record::{certainly_valid, reference_accepts, validate, validate_slowly};
    pub use crate::read::{Batch, Mismatch, read_complete_records};
}
