//! transcript-sync: archive AI coding agents' JSONL session transcripts, every complete record
//! exactly once and in order, into a local SQLite archive.
//!
//! # Architecture
//!
//! The types every stage shares (sources, cursors, records, rejects) live in `domain`, below
//! their users. A pass runs the pipeline once, in the order of the modules:
//!
//! 1. [`harness`] turns the embedded watcher definitions (`watchers/*.toml`) or `--watch`
//!    directories into [`Root`]s.
//! 2. `discover` walks each root without following symlinks and lists the transcript files,
//!    reporting whatever it passes over.
//! 3. `plan` matches each file to a source — by identity (device, inode), then by path — and
//!    the engine skips any file whose [`Fingerprint`] (identity, size, mtime, ctime) equals
//!    its cursor's.
//! 4. `open` and `read` open a changed file as an owned handle, verify the cursor's marker
//!    windows against it, and read exactly the complete lines of `[cursor, size on the handle)`
//!    in bounded batches; `record` decides which lines are records.
//! 5. `seed` decides where a new source starts: persisted cursor, prefix mark, start policy.
//! 6. `lifecycle` turns what happened to a source (a batch read, a new generation, a move, …)
//!    into its new in-memory row and the [`Commit`] that records it, in one function.
//! 7. [`Archive`] commits each batch together with the cursor past it in one SQLite
//!    transaction, so a crash at any instant loses and duplicates nothing. Records are stored
//!    compressed with a dictionary per harness; before a large backlog is read, `sample`
//!    takes lines from all over it, from which that dictionary is trained first.
//! 8. The archive is a log that consumers follow (`follow`): the [`ArchiveWriter`] publishes
//!    each commit to a [`Hub`] once it is durable; a [`Follower`] catches up from the archive,
//!    then takes what is published, with no gap and no duplicate at the switch. The [`Tap`]
//!    (`--sink stdout`) is a subscriber that starts "now"; `socket` serves subscribers of
//!    the daemon's Unix socket the same way (catch-up, `caught_up`, then live; a slow one is
//!    told `lagged`), and `tail` is its client. The sinks (`ship`) and the session index
//!    (`sessions`, in a SQLite file of its own beside the archive, so that the writer never
//!    waits for it) are durable followers; `redact` replaces secrets in what leaves.
//!
//! `pipeline` wires these threads once for `run --once` (one pass) and for the daemon, which
//! keeps passes going: `watch` keeps one watch instance per watcher (inotify on Linux, whose
//! events the engine thread reads itself; `notify` elsewhere) and turns events into dirty
//! paths (events are wake-ups, never data), the engine waits on them and on its `doorbell`,
//! reads those paths (or rescans), the writer thread commits, and the `checkpointer` thread
//! copies the WAL into the database beside it.
//!
//! Around the pipeline: `config` resolves `config.toml` under the command line's flags into the
//! settings every command runs with (and again on SIGHUP), with `home` for HOME and the XDG
//! directories; `readiness` speaks sd_notify (ready, status, watchdog, stopping); `logging`
//! shapes log lines for the journal or a terminal; `progress` shows a backfill as a bar or as
//! periodic log lines; when a root cannot be watched (limits, network filesystems), `watch`
//! hands it to the daemon, which polls it instead.
//!
//! `export`, `status`, `rejects` and `seed` read and write the same archive while a `run`
//! holds its lock. `service` installs `run` as a systemd user unit or a launchd agent, written
//! from the templates in `systemd/` and `launchd/`; `doctor` checks what breaks a watcher in
//! practice (inotify limits, roots, the archive, network filesystems, the service). System
//! calls beyond std's go through `sys`, as safe calls on rustix; `unsafe` is left only in the
//! SIMD code of `record`, and in `sys` for `getpeereid` on macOS and `sched_setscheduler` on
//! Linux.
#![warn(missing_docs)]
#![deny(unsafe_code)]
#![warn(unreachable_pub)]

// The modules in the order of the layers, each using only those above it in this list.
mod platform;

mod error;

mod domain;

mod capture;

mod read;

mod engine;

mod archive;

mod consumers;

mod config;

mod daemon;

pub mod cli;

pub use archive::follow::{Follower, Hub, Offer, Published, Start, Subscriber};
pub use archive::writer::{ArchiveWriter, ChannelCommitter};
pub use archive::{Archive, Commit, Committer, Op, PAGE_SIZE};
pub use capture::harness::{Root, builtin_roots, watch_roots};
pub use consumers::redact::{Finding, RedactSettings, Redactor, RuleDef};
pub use consumers::tap::Tap;
pub use daemon::RECORDS_COMMITTED;
pub use domain::fingerprint::{Fingerprint, Identity, Markers};
pub use domain::{ReadLimits, StartAt};
pub use engine::{Engine, EngineOptions, PassReport, Totals};
pub use error::{Error, Result, error_chain};

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
