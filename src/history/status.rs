//! `status`: where each source stands, from the archive and a fresh `lstat`.

use crate::archive::{Archive, StateKey};
use crate::domain::SourceRow;
use crate::domain::fingerprint::Identity;
use crate::error::Result;
use crate::platform::time::format_time;
use serde::Serialize;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// One source's line in the status.
#[derive(Debug, Serialize)]
pub(crate) struct SourceStatus {
    /// Source id.
    pub source: i64,
    /// Current path.
    pub path: String,
    /// Watcher.
    pub harness: String,
    /// Current generation.
    pub generation: i64,
    /// Cursor offset.
    pub cursor: u64,
    /// The file's size now, if the path still names this source's identity.
    pub size: Option<u64>,
    /// `size − cursor`: bytes not yet archived (held-back bytes included).
    pub lag: Option<u64>,
    /// Bytes after the cursor that formed no complete line at the last read.
    pub held_back: u64,
    /// Records archived, all generations together (`generation` and `cursor` are the current
    /// generation's).
    pub records: u64,
    /// Lines rejected, all generations together.
    pub rejects: u64,
    /// When a record was last archived, RFC 3339.
    pub last_archived: Option<String>,
    /// True when the file is gone or was replaced.
    pub gone: bool,
    /// Why the source's cursor row cannot be used (a damaged archive), when it cannot: such a
    /// source is not read.
    pub invalid: Option<String>,
}

/// The whole status.
#[derive(Debug, Serialize)]
pub(crate) struct Status {
    /// The archive file.
    pub archive: String,
    /// Pid of the `run` holding the archive's lock, if any.
    pub running_pid: Option<u32>,
    /// Where a running `run` listens for subscribers (`tail -f`, programs).
    pub socket: String,
    /// Whether the socket is there (a `run --once` has none).
    pub socket_present: bool,
    /// The running daemon's figures when its initial backfill ended (`sources`, `records`,
    /// `pid`, `at`: RFC 3339 as every time here); `null` while it is still backfilling or
    /// when none runs.
    pub caught_up: Option<serde_json::Value>,
    /// Where the session index stands.
    pub index: IndexStatus,
    /// What the records take in the archive (`null` for an archive of an earlier schema).
    pub storage: Option<crate::archive::Storage>,
    /// Every sink that ever ran on the archive.
    pub sinks: Vec<SinkStatus>,
    /// Every other machine whose records were pulled into the archive (see `pull`).
    pub pulled: Vec<PulledStatus>,
    /// Every source of this machine (pulled ones are counted in `pulled`).
    pub sources: Vec<SourceStatus>,
    /// Totals.
    pub totals: Totals,
}

/// Where the session index stands: the last `seq` it indexed, and how many records it has
/// still to index (the index catches up in `run`, or in `sessions` and the other session
/// commands when no `run` holds the archive).
#[derive(Debug, Serialize)]
pub(crate) struct IndexStatus {
    /// The last `seq` indexed (0: none yet).
    pub seq: i64,
    /// Records committed after it.
    pub behind: i64,
    /// The index's own file, beside the archive.
    pub path: String,
    /// What the file takes on disk, with its WAL (0 before it is made).
    pub bytes: u64,
}

/// Where a sink stands.
#[derive(Debug, Serialize)]
pub(crate) struct SinkStatus {
    /// Its name.
    pub name: String,
    /// `postgres`, `http` or `mirror`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Where to (never with a password).
    pub target: String,
    /// The last `seq` it shipped (its cursor).
    pub seq: i64,
    /// Records committed after its cursor.
    pub lag_records: i64,
    /// Bytes of those records; `null` past 100,000 of them (not counted).
    pub lag_bytes: Option<i64>,
    /// While it lags: the last time it had shipped everything (the oldest record waiting
    /// was committed after it), RFC 3339.
    pub waiting_since: Option<String>,
    /// Its age in seconds.
    pub waiting_seconds: Option<i64>,
    /// When a delivery last succeeded, RFC 3339.
    pub last_success: Option<String>,
    /// The last failure, and when it was.
    pub last_error: Option<String>,
    /// When that was, RFC 3339.
    pub last_error_at: Option<String>,
    /// Since when deliveries fail, while they do, RFC 3339.
    pub failing_since: Option<String>,
    /// Records the destination refused for good (`sink retry NAME` ships them again).
    pub dead_letters: i64,
}

/// What was pulled of another machine.
#[derive(Debug, Serialize)]
pub(crate) struct PulledStatus {
    /// Its host name, a label.
    pub machine: String,
    /// Its UUID.
    pub uuid: String,
    /// The sink pulled from.
    pub sink: Option<String>,
    /// Its transcripts here.
    pub sources: i64,
    /// Its records pulled.
    pub records: i64,
    /// When records of it were last pulled, RFC 3339.
    pub last_pulled: Option<String>,
    /// When the last record pulled was shipped by its machine, RFC 3339.
    pub last_shipped: Option<String>,
    /// How long after its machine shipped it the last record was pulled, in seconds.
    pub lag_seconds: Option<f64>,
}

/// Sums over all sources.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Totals {
    /// Sources, gone ones included.
    pub sources: u64,
    /// Sources whose files are gone.
    pub gone: u64,
    /// Records archived.
    pub records: u64,
    /// Lines rejected.
    pub rejects: u64,
    /// Held-back bytes.
    pub held_back: u64,
    /// Unarchived bytes of live sources.
    pub lag: u64,
    /// Lifecycle events recorded.
    pub events: u64,
}

/// Gathers the status of `archive`, whose daemon listens at `socket`.
pub(crate) fn status(archive: &Archive, socket: &std::path::Path) -> Result<Status> {
    // Sources read whole (snapshot files, databases and their sessions) have no byte cursor
    // to lag behind.
    let snapshots = archive.snapshot_sources()?;
    let whole = |s: &SourceRow| {
        snapshots.contains(&s.id) || crate::agents::in_database(&s.harness, &s.path)
    };
    let sources: Vec<SourceStatus> = (archive.sources()?.iter())
        .map(|s| source_status(s, whole(s)))
        .collect();
    let events = archive.event_count()?;
    let mut totals = Totals {
        sources: sources.len() as u64,
        events,
        ..Totals::default()
    };
    for s in &sources {
        totals.gone += u64::from(s.gone);
        totals.records += s.records;
        totals.rejects += s.rejects;
        totals.held_back += s.held_back;
        totals.lag += s.lag.unwrap_or(0);
    }
    let running_pid = crate::archive::lock::running_pid(archive.path());
    let caught_up = match running_pid {
        Some(_) => archive.state(StateKey::CaughtUp)?,
        None => None,
    };
    let indexed = crate::consumers::sessions::store::done(archive.path())?;
    let index_path = crate::consumers::sessions::store::path_of(archive.path());
    let index = IndexStatus {
        seq: indexed,
        behind: (archive.last_seq()? - indexed).max(0),
        path: index_path.display().to_string(),
        bytes: on_disk(&index_path),
    };
    let sinks = sink_statuses(archive)?;
    let pulled = pulled_statuses(archive)?;
    Ok(Status {
        archive: archive.path().display().to_string(),
        running_pid,
        socket: socket.display().to_string(),
        socket_present: std::fs::symlink_metadata(socket)
            .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())),
        index,
        storage: archive.storage()?,
        sinks,
        pulled,
        caught_up: caught_up.as_deref().and_then(caught_up_figures),
        sources,
        totals,
    })
}

/// The daemon's figures as it recorded them (JSON with `at_ms`), with the time written as
/// every time of the status is (`at`, RFC 3339); `None` when they cannot be read.
fn caught_up_figures(recorded: &str) -> Option<serde_json::Value> {
    let mut figures: serde_json::Value = serde_json::from_str(recorded).ok()?;
    let object = figures.as_object_mut()?;
    if let Some(ms) = object.remove("at_ms").and_then(|v| v.as_i64()) {
        object.insert("at".into(), format_time(ms).into());
    }
    Some(figures)
}

fn pulled_statuses(archive: &Archive) -> Result<Vec<PulledStatus>> {
    let machines = archive.pulled_machines()?.into_iter();
    Ok(machines
        .map(|m| PulledStatus {
            machine: m.host,
            uuid: m.uuid,
            sink: m.sink,
            records: m.records,
            sources: m.sources,
            last_pulled: m.last_pulled_ms.map(format_time),
            last_shipped: m.last_shipped_ms.map(format_time),
            lag_seconds: (m.last_pulled_ms.zip(m.last_shipped_ms))
                .map(|(p, s)| (p - s).max(0) as f64 / 1000.0),
        })
        .collect())
}

fn sink_statuses(archive: &Archive) -> Result<Vec<SinkStatus>> {
    let now = crate::platform::time::now_ms();
    let last = archive.last_seq()?;
    let mut sinks = Vec::new();
    for row in archive.sink_rows()? {
        // Records are never deleted, so seqs leave no gaps.
        let lag_records = (last - row.seq).max(0);
        // Counting bytes reads the records: past this many, they are not counted.
        let lag_bytes = match lag_records {
            0..=100_000 => Some(archive.bytes_after(row.seq)?),
            _ => None,
        };
        let waiting = row.caught_up_ms.filter(|_| lag_records > 0);
        sinks.push(SinkStatus {
            lag_records,
            lag_bytes,
            waiting_since: waiting.map(format_time),
            waiting_seconds: waiting.map(|ms| (now - ms).max(0) / 1000),
            last_success: row.last_ok_ms.map(format_time),
            last_error_at: row.last_error_ms.map(format_time),
            failing_since: row.failing_since_ms.map(format_time),
            name: row.name,
            kind: row.kind,
            target: row.target,
            seq: row.seq,
            last_error: row.last_error,
            dead_letters: row.dead_letters,
        });
    }
    Ok(sinks)
}

fn source_status(s: &SourceRow, whole: bool) -> SourceStatus {
    let size = std::fs::symlink_metadata(&s.path)
        .ok()
        .filter(|m| Identity::of(m) == s.identity && !s.gone)
        .map(|m| m.size());
    let cursor = s.cursor.position.offset;
    SourceStatus {
        source: s.id,
        path: s.path.to_string_lossy().into_owned(),
        harness: s.harness.clone(),
        generation: s.generation,
        cursor,
        size,
        lag: size
            .filter(|_| !whole)
            .map(|size| size.saturating_sub(cursor)),
        held_back: s.cursor.held_back,
        records: s.records,
        rejects: s.rejects,
        last_archived: s.last_archived_ms.map(format_time),
        gone: s.gone,
        invalid: s.invalid.clone(),
    }
}

/// Bytes in megabytes, for people: `1075.2 MB`.
pub(crate) fn megabytes(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

/// What storing records takes, as a share of their bytes: ` (25.4 %)`, or nothing when there
/// are no records.
pub(crate) fn share_of(stored: u64, record_bytes: u64) -> String {
    match record_bytes {
        0 => String::new(),
        n => format!(" ({:.1} %)", 100.0 * stored as f64 / n as f64),
    }
}

/// How much room the records take, for people.
/// The bytes the file at `path` and its `-wal` take (0 for a file that is not there).
fn on_disk(path: &Path) -> u64 {
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    size(path) + size(Path::new(&wal))
}
