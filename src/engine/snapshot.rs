//! Snapshot sources in the engine: a file that its agent rewrites whole is captured once it
//! has settled (not modified for the settle time, or changing for longer than [`MAX_WAIT`]),
//! read whole from an owned handle and checked unchanged across the read, split into records
//! (only what is new or changed since the state before, `read::snapshot`), and kept whole by
//! difference (`archive::snapshots`), in one commit with its cursor. A snapshot source's
//! cursor counts the records derived from it: their offsets are their places in that count.

use super::*;
use crate::domain::{Record, Reject};
use crate::read::snapshot::{self, Spec, State};
use std::time::{Duration, Instant, SystemTime};

/// The longest a snapshot file that keeps changing waits for a capture: a file rewritten
/// more often than it settles is still captured this often.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(10);

pub(crate) use crate::domain::MAX_SNAPSHOT;

/// A snapshot file seen changing and not captured yet.
pub(crate) struct Unsettled {
    /// When it was first seen so.
    first: Instant,
    /// When to look at it again.
    due: Instant,
}

impl Engine {
    /// Captures a snapshot file only once it has not been modified for `settle` (an agent
    /// that rewrites its file at every token is captured once it pauses, or every
    /// [`MAX_WAIT`]); without it, at once. Files that wait are given back by
    /// [`Engine::take_settled`].
    pub fn settle_snapshots(&mut self, settle: Duration) {
        self.settle = Some(settle);
    }

    /// When the next snapshot file waiting to settle is due to be looked at.
    pub fn next_settled(&self) -> Option<Instant> {
        self.unsettled.values().map(|u| u.due).min()
    }

    /// The snapshot files due to be looked at again (to give to [`Engine::sync_paths`]).
    pub fn take_settled(&mut self) -> Vec<PathBuf> {
        let now = Instant::now();
        let mut due = Vec::new();
        // Only those due are looked at (this runs at every wake-up of the daemon); one that
        // is gone is not waited for (a pass finds whatever took its place).
        self.unsettled.retain(|p, u| {
            if u.due > now {
                return true;
            }
            if p.symlink_metadata().is_err() {
                return false;
            }
            // Looked at again after another wait unless it settles or is captured.
            u.due = now + MAX_WAIT;
            due.push(p.clone());
            true
        });
        due
    }

    /// One turn for a snapshot file: captured whole, or left to settle.
    pub(super) fn step_snapshot(
        &mut self,
        mut work: Work,
        spec: &Spec,
        roots: &[Root],
    ) -> Result<Step> {
        if let Plan::Known(id) = work.plan
            && self.unchanged(&work, id)?
        {
            self.unsettled.remove(&work.path);
            return Ok(Step::Done);
        }
        let (file, meta) = match self.open_owned(&mut work)? {
            Opened::File(file, meta) => (file, meta),
            Opened::Skip => return Ok(Step::Done),
            Opened::Replanned => return Ok(Step::Again(Box::new(work))),
        };
        if self.wait_to_settle(&work.path, &meta) {
            return Ok(Step::Done);
        }
        let bytes = match read_whole(&file, &meta) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(self.changed_while_read(work)),
            Err(e) => return self.read_failed(&work, &e),
        };
        let identity = Identity::of(&meta);
        let Some(id) = self.whole_source(&mut work, identity, "snapshot file", roots)? else {
            return Ok(Step::Again(Box::new(work)));
        };
        self.unsettled.remove(&work.path);
        // Read under a second name of its file, it stays where it is.
        let src = self.source(id);
        let path = match plan::moved(src, &work.path) {
            true => {
                log::info!("moved path={:?} from={:?} source={id}", work.path, src.path);
                work.path.clone()
            }
            false => src.path.clone(),
        };
        self.capture(&path, id, Some(Fingerprint::of(&meta)), bytes, spec)?;
        Ok(Step::Done)
    }

    /// True when the file was modified less than the settle time ago (and has not waited
    /// [`MAX_WAIT`] already): it is looked at again once it may have settled.
    pub(super) fn wait_to_settle(&mut self, path: &Path, meta: &Metadata) -> bool {
        let Some(settle) = self.settle else {
            return false;
        };
        let now = Instant::now();
        // A modification time ahead of the clock counts as now.
        let age = (meta.modified().ok())
            .and_then(|m| SystemTime::now().duration_since(m).ok())
            .unwrap_or_default();
        let waiting = self.waiting(path, now);
        if age >= settle || now.duration_since(waiting.first) >= MAX_WAIT {
            return false;
        }
        waiting.due = now + (settle - age);
        log::debug!(
            "snapshot not settled path={path:?}: modified {age:?} ago; looked at again in {:?}",
            settle - age
        );
        true
    }

    /// `path`'s entry among the files waiting to settle, made (first seen `now`) if missing.
    fn waiting(&mut self, path: &Path, now: Instant) -> &mut Unsettled {
        (self.unsettled.entry(path.to_owned())).or_insert(Unsettled {
            first: now,
            due: now,
        })
    }

    /// The file changed while it was read: looked at again once it settles, or (capturing at
    /// once) in another turn, a few times.
    fn changed_while_read(&mut self, mut work: Work) -> Step {
        let path = work.path.clone();
        if self.settle.is_some() {
            let now = Instant::now();
            self.waiting(&path, now).due = now;
            log::debug!("snapshot changed while it was read path={path:?}; read again");
            return Step::Done;
        }
        work.attempts += 1;
        if work.attempts >= MAX_ATTEMPTS {
            log::warn!("kept changing while being read path={path:?}; retried next pass");
            self.report.errors += 1;
            return Step::Done;
        }
        Step::Again(Box::new(work))
    }

    /// The source of `work`'s file, read whole (a snapshot file, a database: `what`): the one
    /// planned, the one whose path it took by an atomic save, or the one gone from its path
    /// (a file written again by `restore` or the agent, whose state is then compared with the
    /// one captured last); else a new one. `None` when its identity is another live source's:
    /// the work is planned again.
    pub(super) fn whole_source(
        &mut self,
        work: &mut Work,
        identity: Identity,
        what: &str,
        roots: &[Root],
    ) -> Result<Option<SourceId>> {
        let harness = &roots[work.root].harness;
        let path = work.path.clone();
        let id = match work.plan {
            Plan::Known(id) => id,
            Plan::PathMatch(old) => {
                // Another source's file renamed over this path (between the scan and the
                // open) is that source's, moved: not this one's next state.
                if let Some(id) = self.owner(work, identity, roots)?.filter(|id| *id != old) {
                    work.plan = Plan::Known(id);
                    return Ok(None);
                }
                let detail = format!("{what} saved anew, {}", show(identity));
                self.continue_source(old, identity, &path, detail)?
            }
            Plan::New | Plan::Marked(_) => {
                if let Some(id) = self.owner(work, identity, roots)? {
                    work.plan = Plan::Known(id);
                    return Ok(None);
                }
                match self.gone_at(&path, harness) {
                    Some(old) => {
                        let detail = format!("{what} found again at its path, {}", show(identity));
                        self.continue_source(old, identity, &path, detail)?
                    }
                    None => {
                        let detail = format!("{what}: each settled state is captured");
                        self.create_snapshot_source(&path, identity, harness, &detail)?
                    }
                }
            }
        };
        Ok(Some(id))
    }

    /// Source `id` goes on as the file `identity` at `path`; returns `id`.
    pub(super) fn continue_source(
        &mut self,
        id: SourceId,
        identity: Identity,
        path: &Path,
        detail: String,
    ) -> Result<SourceId> {
        log::debug!("continued path={path:?} source={id} {detail}");
        let path = path.to_owned();
        self.change(
            id,
            Change::Continued {
                identity,
                path,
                detail,
            },
        )?;
        Ok(id)
    }

    /// The latest gone source of `harness` whose file was at `path`.
    pub(super) fn gone_at(&self, path: &Path, harness: &str) -> Option<SourceId> {
        (self.sources.iter())
            .filter(|s| s.gone && s.path == path && s.harness == harness)
            .map(|s| s.id)
            .max()
    }

    /// Adds a source that is not read from a byte offset (a snapshot file, a database, a
    /// session in one); `detail` says which, for its `seeded` event.
    pub(super) fn create_snapshot_source(
        &mut self,
        path: &Path,
        identity: Identity,
        harness: &str,
        detail: &str,
    ) -> Result<SourceId> {
        let id = self.next_id;
        self.next_id += 1;
        let row = SourceRow::new(id, identity, path.to_owned(), harness.to_owned());
        let change = Change::Seeded {
            row,
            detail: detail.to_owned(),
            mark: MarkUse::None,
        };
        self.change(id, change)?;
        // Read whole from its first state, as a transcript read from its first byte is.
        log::debug!("seeded path={path:?} {detail}");
        self.report.new_sources += 1;
        Ok(id)
    }

    /// Commits what state `bytes` of source `id` adds: the records of its new and changed
    /// entries, the state itself (unless it is the latest already), and the cursor with the
    /// file's `fingerprint`.
    pub(super) fn capture(
        &mut self,
        path: &Path,
        id: SourceId,
        fingerprint: Option<Fingerprint>,
        bytes: Vec<u8>,
        spec: &Spec,
    ) -> Result<()> {
        let src = self.source(id).clone();
        let before = self.snapshot_state(id, spec)?;
        let mut cursor = src.cursor.clone();
        cursor.fingerprint = fingerprint;
        // A file's bytes (a session of a database is no file's).
        if fingerprint.is_some() {
            self.report.bytes_read += bytes.len() as u64;
        }
        let at = cursor.position.offset;
        let document_before = before.document;
        let (records, rejects, dropped, state) = match snapshot::derive(&bytes, spec) {
            Ok(entries) => {
                let changes = before.changes(&bytes, entries);
                let records: Vec<Record> = (changes.records.into_iter().enumerate())
                    .map(|(i, bytes)| Record {
                        offset: at + i as u64,
                        bytes,
                    })
                    .collect();
                (records, Vec::new(), changes.dropped, changes.state)
            }
            Err(why) => {
                let reason = format!("not a document of messages: {why}");
                log::warn!(
                    "rejected path={path:?} length={} reason={reason}; captured again when it \
                     changes",
                    bytes.len()
                );
                let keep = bytes.len().min(self.options.limits.record_limit as usize);
                let reject = Reject {
                    offset: at,
                    length: bytes.len() as u64,
                    reason,
                    raw: bytes[..keep].to_vec(),
                };
                (Vec::new(), vec![reject], 0, before)
            }
        };
        cursor.position.offset += records.len() as u64;
        let stored = rejects.is_empty() && state.document != document_before;
        let snapshot = stored.then_some(bytes);
        if dropped > 0 {
            log::info!(
                "snapshot path={path:?}: {dropped} messages are no longer in the file; their \
                 records stay"
            );
        }
        log::debug!(
            "captured path={path:?} records={} stored={}",
            records.len(),
            snapshot.is_some()
        );
        self.report.records += records.len() as u64;
        self.snapshot_states.insert(id, state);
        let change = Change::Captured {
            path: path.to_owned(),
            records,
            rejects,
            cursor,
            snapshot,
            dropped,
        };
        self.change(id, change)
    }

    /// What source `id`'s last captured state held, taken out of those kept since their last
    /// capture (the capture puts the next one back), or read from the archive's latest state
    /// of it.
    fn snapshot_state(&mut self, id: SourceId, spec: &Spec) -> Result<State> {
        match self.snapshot_states.remove(&id) {
            Some(state) => Ok(state),
            None => archived_state(&self.reads, id, spec),
        }
    }
}

/// What the latest state of source `id` that `reads` keeps holds; empty when it keeps none.
pub(super) fn archived_state(reads: &Archive, id: SourceId, spec: &Spec) -> Result<State> {
    let state = match reads.latest_snapshot(id)? {
        Some(doc) => match snapshot::derive(&doc, spec) {
            Ok(entries) => State::of(&doc, &entries),
            Err(_) => State::default(),
        },
        None => State::default(),
    };
    Ok(state)
}

/// The whole file, read from `file` whose metadata was `meta`; `None` when it changed while
/// it was read (another size or modification time after the read).
pub(super) fn read_whole(file: &File, meta: &Metadata) -> io::Result<Option<Vec<u8>>> {
    let size = meta.size();
    if size > MAX_SNAPSHOT {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("{size} bytes, more than the {MAX_SNAPSHOT} a snapshot file may have"),
        ));
    }
    let mut bytes = vec![0; size as usize];
    match file.read_exact_at(&mut bytes, 0) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let same = written(&file.metadata()?) == written(meta);
    Ok(same.then_some(bytes))
}

/// A file's identity, size and modification time: what a write changes (its change time
/// changes with its owner or mode too).
pub(crate) type Written = (Identity, u64, i64, i64);

pub(super) fn written(meta: &Metadata) -> Written {
    let identity = Identity::of(meta);
    (identity, meta.size(), meta.mtime(), meta.mtime_nsec())
}
