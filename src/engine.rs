//! The sync pass: discovered files → sources → verified, exact reads → committed batches.
//!
//! A pass plans every file first (by identity, then by path), so a file moved within the roots
//! keeps its source even when a new file takes its old name in the same pass. Work then runs
//! in turns: each turn reads at most one batch from one file and commits it, and a file with
//! more to read goes to the back of the queue.

pub(crate) mod database;
pub(crate) mod evidence;
pub(crate) mod lifecycle;
pub(crate) mod plan;
pub(crate) mod progress;
pub(crate) mod sample;
pub(crate) mod seed;
pub(crate) mod snapshot;
pub(crate) mod sources;

use crate::archive::{Archive, Commit, Committer, Op};
use crate::capture::discover::{Candidate, discover, file_kind};
use crate::capture::harness::Root;
use crate::domain::fingerprint::{Fingerprint, Identity};
use crate::domain::{Cursor, Position, ReadLimits, SourceId, SourceRow, StartAt};
use crate::engine::lifecycle::{Change, MarkUse};
use crate::engine::plan::Plan;
use crate::engine::progress::Progress;
use crate::engine::seed::{Seed, SeedOrigin, seed_new_source};
use crate::engine::sources::Sources;
use crate::error::Result;
use crate::read::open::{Kept, open_regular};
use crate::read::{Batch, Mismatch, read_complete_records};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How often a file may be found to name another inode between `lstat` and `open` before the
/// pass gives up on it (the next pass tries again).
const MAX_ATTEMPTS: u8 = 3;

/// Engine settings.
#[derive(Clone, Copy, Debug)]
pub struct EngineOptions {
    /// Record limit and batch size.
    pub limits: ReadLimits,
}

/// What one pass did; every skip, reset and drop is counted here and logged.
#[derive(Clone, Debug, Default)]
pub struct PassReport {
    /// Transcript files found.
    pub files: u64,
    /// Files not opened because their fingerprint equals their cursor's.
    pub unchanged: u64,
    /// Files opened and read.
    pub opened: u64,
    /// Records archived.
    pub records: u64,
    /// Lines rejected (held-back bytes of ended generations included).
    pub rejects: u64,
    /// White-space-only lines skipped.
    pub blank_lines: u64,
    /// Bytes read from transcripts.
    pub bytes_read: u64,
    /// Sources created.
    pub new_sources: u64,
    /// Generations started on truncation or rewrite.
    pub new_generations: u64,
    /// Sources marked gone.
    pub gone: u64,
    /// Paths matching a glob that were not read (not regular files, unlistable).
    pub passed_over: u64,
    /// Files that could not be opened or read.
    pub errors: u64,
    /// Held-back bytes per file after the pass.
    pub held_back: BTreeMap<PathBuf, u64>,
}

impl fmt::Display for PassReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "files={} opened={} unchanged={} records={} rejects={} blank_lines={} bytes_read={} \
             new_sources={} new_generations={} gone={} passed_over={} errors={} \
             held_back_files={} held_back_bytes={}",
            self.files,
            self.opened,
            self.unchanged,
            self.records,
            self.rejects,
            self.blank_lines,
            self.bytes_read,
            self.new_sources,
            self.new_generations,
            self.gone,
            self.passed_over,
            self.errors,
            self.held_back.len(),
            self.held_back.values().sum::<u64>()
        )
    }
}

/// One file's place in the pass queue.
struct Work {
    path: PathBuf,
    meta: Metadata,
    root: usize,
    plan: Plan,
    /// The size the file had at its first read in this pass; later turns stop there.
    target: Option<u64>,
    attempts: u8,
}

/// What a path that could not be read had: the file, the error's kind and its errno.
type Unreadable = (Identity, io::ErrorKind, Option<i32>);

enum Step {
    Done,
    Again(Box<Work>),
}

/// The result of opening a planned file.
enum Opened {
    /// The planned file, as a regular file on an owned handle.
    File(File, Metadata),
    /// Nothing to read now (logged and counted).
    Skip,
    /// The path names another inode than planned; the work was planned again.
    Replanned,
}

/// What the engine's sources add up to.
#[derive(Clone, Copy, Debug, Default)]
pub struct Totals {
    /// Sources, gone ones included.
    pub sources: u64,
    /// Records archived, all sources and generations.
    pub records: u64,
    /// Bytes past the cursors of live sources that no record holds yet, as of each source's
    /// last read: their unfinished last lines.
    pub lag: u64,
}

/// The engine: the in-memory source table, a read connection to the archive (for prefix
/// marks), and a [`Committer`] for every change.
pub struct Engine {
    reads: Archive,
    committer: Box<dyn Committer + Send>,
    sources: Sources,
    scanned_roots: HashSet<PathBuf>,
    /// Paths already reported as passed over (reported again only at debug).
    warned: HashSet<PathBuf>,
    /// Paths that could not be read, with the file and the error they had: reported once
    /// (WARN and an `unreadable` event), then at debug until that file is read, the path names
    /// another file, or the read fails otherwise. Paths gone from the disk are dropped at each
    /// full pass.
    unreadable: HashMap<PathBuf, Unreadable>,
    /// Transcripts kept open between reads.
    kept: Kept,
    next_id: SourceId,
    options: EngineOptions,
    report: PassReport,
    stop: Arc<AtomicBool>,
    progress: Progress,
    observer: Option<Observer>,
    /// How long a snapshot file must go unmodified to be captured; `None`: at once.
    settle: Option<std::time::Duration>,
    /// Snapshot files waiting to settle.
    unsettled: HashMap<PathBuf, snapshot::Unsettled>,
    /// What each snapshot source's last captured state held, once read or captured.
    snapshot_states: HashMap<SourceId, crate::read::snapshot::State>,
    /// Each database's state (`DatabaseFormat::state`) when it was last read.
    databases_seen: HashMap<PathBuf, u64>,
}

/// Called with the pass's progress after every step of its queue.
pub(crate) type Observer = Box<dyn FnMut(&Progress) + Send>;

impl Engine {
    /// Loads every source and cursor through `reads`; every change goes to `committer`.
    pub fn new(
        reads: Archive,
        committer: Box<dyn Committer + Send>,
        options: EngineOptions,
    ) -> Result<Engine> {
        let sources = Sources::new(reads.sources()?);
        // One line per source at debug, and their count at info: a restart over thousands of
        // transcripts should not print thousands of lines.
        let mut persisted = 0;
        for s in sources.iter().filter(|s| !s.gone) {
            persisted += 1;
            log::debug!(
                "seeded path={:?} offset={} source={} skipped_records=0",
                s.path,
                s.cursor.position.offset,
                SeedOrigin::Persisted
            );
        }
        if persisted > 0 {
            log::info!("seeded sources={persisted} source=persisted (each at debug)");
        }
        let mut committer = committer;
        report_invalid_cursors(&sources, committer.as_mut())?;
        Ok(Engine {
            scanned_roots: reads.scanned_roots()?.into_iter().collect(),
            next_id: reads.next_source_id()?,
            warned: HashSet::new(),
            unreadable: HashMap::new(),
            kept: Kept::default(),
            reads,
            committer,
            sources,
            options,
            report: PassReport::default(),
            stop: Arc::new(AtomicBool::new(false)),
            progress: Progress::default(),
            observer: None,
            settle: None,
            unsettled: HashMap::new(),
            snapshot_states: HashMap::new(),
            databases_seen: HashMap::new(),
        })
    }

    /// Uses `stop` as its stop flag (shared with other threads that must stop with it).
    pub fn with_stop(mut self, stop: Arc<AtomicBool>) -> Engine {
        self.stop = stop;
        self
    }

    /// A flag that, once set, ends the current pass after the batch in hand is committed.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Uses `limits` from the next read on.
    pub fn set_limits(&mut self, limits: ReadLimits) {
        self.options.limits = limits;
    }

    /// Calls `observer` with each pass's progress from now on, in place of any earlier one.
    pub fn observe(&mut self, observer: Observer) {
        self.observer = Some(observer);
    }

    /// Sources, records archived and lag so far, over all sources, in one pass.
    pub fn totals(&self) -> Totals {
        let mut totals = Totals::default();
        for s in self.sources.iter() {
            totals.sources += 1;
            totals.records += s.records;
            if !s.gone {
                totals.lag += s.cursor.held_back;
            }
        }
        totals
    }

    /// Hands a commit that is not part of a batch to the committer (such as daemon state).
    pub fn submit(&mut self, commit: Commit) -> Result<()> {
        self.committer.submit(commit)
    }

    /// Returns once everything read so far is committed to the archive.
    pub fn flush(&mut self) -> Result<()> {
        self.committer.flush()
    }

    /// Scans `roots` and reads every changed file up to the size it has when it is first read
    /// in this pass. `Err` only for archive failures; problems with single files are logged,
    /// counted in the report and recorded as events.
    pub fn run_pass(&mut self, roots: &[Root]) -> Result<PassReport> {
        self.report = PassReport::default();
        self.kept.close_stale();
        (self.unreadable).retain(|p, _| p.symlink_metadata().is_ok());
        let found = discover(roots);
        for p in &found.passed {
            self.passed_over(&p.path, &p.why)?;
        }
        for r in &found.missing_roots {
            log::debug!("root does not exist yet path={r:?}");
        }
        for p in &found.vanished {
            log::debug!("gone during the scan path={p:?}; taken as absent");
        }
        self.report.files = found.candidates.len() as u64;
        let (queue, claimed) = self.plan(found.candidates, roots)?;
        let unlisted: Vec<&Path> = found.unlisted.iter().map(PathBuf::as_path).collect();
        self.mark_missing_gone(roots, &claimed, &unlisted)?;
        if self.run_queue(queue, roots)? {
            self.finish_pass(roots)?;
        }
        Ok(std::mem::take(&mut self.report))
    }

    /// Reads the given paths, as a pass does but without scanning: the files that had events.
    /// A path that no longer exists (deleted, or moved away) makes it a full pass, since only
    /// a scan can tell a move from a deletion.
    pub fn sync_paths(&mut self, roots: &[Root], paths: Vec<PathBuf>) -> Result<PassReport> {
        self.report = PassReport::default();
        self.kept.close_idle();
        let mut candidates = Vec::new();
        for path in paths {
            // A database's `-wal` changed: the database did.
            let path = (roots.iter().find_map(|r| r.database_of(&path))).unwrap_or(path);
            let Some(root) = roots.iter().position(|r| r.matches(&path)) else {
                continue;
            };
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.file_type().is_file() => {
                    candidates.push(Candidate { path, meta, root })
                }
                Ok(meta) if meta.file_type().is_dir() => {}
                Ok(meta) => {
                    let why = format!("not a regular file ({})", file_kind(&meta));
                    self.passed_over(&path, &why)?
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => return self.run_pass(roots),
                Err(e) => self.passed_over(&path, &format!("cannot be examined: {e}"))?,
            }
        }
        self.report.files = candidates.len() as u64;
        let (queue, _) = self.plan(candidates, roots)?;
        self.run_queue(queue, roots)?;
        Ok(std::mem::take(&mut self.report))
    }

    /// Logs a path that is not read: at WARN, with a `passed_over` event in the archive, the
    /// first time; at debug after that, so a FIFO rescanned every minute is not an event a
    /// minute. `Err` is an archive failure.
    fn passed_over(&mut self, path: &Path, why: &str) -> Result<()> {
        self.report.passed_over += 1;
        if !self.warned.insert(path.to_owned()) {
            log::debug!("passed over path={path:?} reason={why}");
            return Ok(());
        }
        log::warn!("passed over path={path:?} reason={why}");
        let mut tx = Commit::default();
        tx.push(Op::event(None, "passed_over", path, why));
        self.committer.submit(tx)
    }

    /// Runs work in turns until the queue is empty (`Ok(true)`) or the stop flag is set
    /// (`Ok(false)`).
    fn run_queue(&mut self, mut queue: VecDeque<Work>, roots: &[Root]) -> Result<bool> {
        let first_scan: Vec<bool> = roots
            .iter()
            .map(|r| !self.scanned_roots.contains(&r.path))
            .collect();
        self.start_progress(&queue, roots);
        self.sample_backlogs(&queue, roots, &first_scan)?;
        while let Some(work) = queue.pop_front() {
            if self.stop.load(Ordering::Relaxed) {
                log::info!(
                    "pass interrupted; {} files left for the next start",
                    queue.len() + 1
                );
                self.end_progress();
                return Ok(false);
            }
            match self.step(work, &first_scan, roots)? {
                Step::Done => self.progress.files_done += 1,
                Step::Again(work) => queue.push_back(*work),
            }
            self.progress.bytes_done = self.report.bytes_read;
            self.progress.records = self.report.records;
            self.show_progress();
        }
        self.end_progress();
        Ok(true)
    }

    /// Totals of a queue: its files, and the bytes past their cursors.
    fn start_progress(&mut self, queue: &VecDeque<Work>, roots: &[Root]) {
        let bytes_total = queue
            .iter()
            // A database's bytes are not what is read of it.
            .filter(|w| !roots[w.root].is_database(&w.path))
            .map(|w| match w.plan {
                Plan::Known(id) => {
                    let src = self.source(id);
                    if up_to_date(src, &w.meta) {
                        0
                    } else {
                        w.meta.size().saturating_sub(src.cursor.position.offset)
                    }
                }
                Plan::PathMatch(_) | Plan::New | Plan::Marked(_) => w.meta.size(),
            })
            .sum();
        self.progress = Progress {
            files_total: queue.len() as u64,
            bytes_total,
            ..Progress::default()
        };
        self.show_progress();
    }

    /// Sends the archive lines spread over each harness's part of `queue`, when that part is
    /// large (a backfill), so that its records are compressed with a dictionary trained from
    /// all of it rather than from the first files read (see `sample`).
    fn sample_backlogs(
        &mut self,
        queue: &VecDeque<Work>,
        roots: &[Root],
        first_scan: &[bool],
    ) -> Result<()> {
        // Sizes alone first: a live read of one append looks no further.
        let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
        for w in queue {
            *sizes.entry(&roots[w.root].harness).or_default() += w.meta.size();
        }
        if sizes.values().all(|&bytes| bytes < sample::MIN_BACKLOG) {
            return Ok(());
        }
        let mut backlogs: BTreeMap<String, Vec<sample::Span>> = BTreeMap::new();
        for w in queue {
            let Some((harness, from)) = self.unread_from(w, &roots[w.root], first_scan[w.root])?
            else {
                continue;
            };
            let span = sample::Span {
                path: w.path.clone(),
                from,
                to: w.meta.size(),
            };
            backlogs.entry(harness).or_default().push(span);
        }
        let mut commit = Commit::default();
        for (harness, spans) in backlogs {
            let bytes: u64 = spans.iter().map(sample::Span::len).sum();
            if bytes < sample::MIN_BACKLOG || self.stop.load(Ordering::Relaxed) {
                continue;
            }
            let lines = sample::spread(&spans);
            log::debug!(
                "sampled {} lines of {harness}'s backlog ({bytes} bytes in {} files) for its compression dictionary",
                lines.len(),
                spans.len()
            );
            commit.push(Op::Samples { harness, lines });
        }
        match commit.is_empty() {
            true => Ok(()),
            false => self.committer.submit(commit),
        }
    }

    /// The harness of planned `work` and where reading it will start, as its cursor, prefix
    /// mark or start policy says; `None` when none of it will be read.
    fn unread_from(
        &self,
        work: &Work,
        root: &Root,
        first_scan: bool,
    ) -> Result<Option<(String, u64)>> {
        if root.snapshot_of(&work.path).is_some() || root.is_database(&work.path) {
            // Read whole, not from a cursor in bytes; not lines to sample.
            return Ok(None);
        }
        let (harness, from) = match work.plan {
            Plan::Known(id) | Plan::PathMatch(id) => {
                let src = self.source(id);
                (src.harness.clone(), src.cursor.position.offset)
            }
            Plan::New | Plan::Marked(_) => {
                let identity = Identity::of(&work.meta);
                let from = match self.reads.prefix_mark(identity)? {
                    Some(mark) => mark.position.offset,
                    None if root.start_at == StartAt::End && first_scan => return Ok(None),
                    None => 0,
                };
                (root.harness.clone(), from)
            }
        };
        Ok((work.meta.size() > from).then_some((harness, from)))
    }

    fn end_progress(&mut self) {
        self.progress.finished = true;
        self.show_progress();
    }

    fn show_progress(&mut self) {
        if let Some(observe) = &mut self.observer {
            observe(&self.progress);
        }
    }

    fn finish_pass(&mut self, roots: &[Root]) -> Result<()> {
        let mut tx = Commit::default();
        // A root missing now has had its first scan too: whatever appears in it later
        // starts at 0.
        for r in roots {
            if self.scanned_roots.insert(r.path.clone()) {
                tx.push(Op::RootScanned(r.path.clone()));
            }
        }
        if !tx.is_empty() {
            self.committer.submit(tx)?;
        }
        let under_roots = |s: &&SourceRow| roots.iter().any(|r| s.path.starts_with(&r.path));
        for s in self.sources.iter().filter(under_roots) {
            if !s.gone && s.cursor.held_back > 0 {
                self.report
                    .held_back
                    .insert(s.path.clone(), s.cursor.held_back);
            }
        }
        Ok(())
    }

    /// Plans `candidates`, found under `roots` (see [`plan::plan`]), into a queue of work.
    fn plan(
        &self,
        candidates: Vec<Candidate>,
        roots: &[Root],
    ) -> Result<(VecDeque<Work>, HashSet<SourceId>)> {
        let (planned, claimed) = plan::plan(&self.sources, candidates, &self.witness(roots))?;
        let queue = (planned.into_iter())
            .map(|p| work(p.candidate, p.plan))
            .collect();
        Ok((queue, claimed))
    }

    /// What the engine knows to answer planning's questions about files under `roots`.
    fn witness<'a>(&'a self, roots: &'a [Root]) -> evidence::Witness<'a> {
        evidence::Witness {
            roots,
            reads: &self.reads,
            states: &self.snapshot_states,
        }
    }

    /// The live source that `work`'s file, opened as `identity`, is (see [`plan::owner`]).
    fn owner(&self, work: &Work, identity: Identity, roots: &[Root]) -> Result<Option<SourceId>> {
        let witness = self.witness(roots);
        plan::owner(&self.sources, identity, &work.path, work.root, &witness)
    }

    fn mark_missing_gone(
        &mut self,
        roots: &[Root],
        claimed: &HashSet<SourceId>,
        unlisted: &[&Path],
    ) -> Result<()> {
        let missing: Vec<SourceId> = self
            .sources
            .iter()
            .filter(|s| !s.gone && s.invalid.is_none() && !claimed.contains(&s.id))
            // A database's sessions are gone when it no longer holds them, or is gone.
            .filter(|s| {
                s.identity.dev != database::SESSION_DEVICE || !self.database_claimed(s, claimed)
            })
            .filter(|s| roots.iter().any(|r| s.path.starts_with(&r.path)))
            .filter(|s| !unlisted.iter().any(|u| s.path.starts_with(u)))
            .map(|s| s.id)
            .collect();
        for id in missing {
            self.end_source(id, "source_gone", "no longer found under its root")?;
        }
        Ok(())
    }

    /// True when the database that session source `s` is in was found by the scan.
    fn database_claimed(&self, s: &SourceRow, claimed: &HashSet<SourceId>) -> bool {
        let db = s.path.parent().and_then(|db| self.sources.live_by_path(db));
        db.is_some_and(|id| claimed.contains(&id))
    }

    fn step(&mut self, work: Work, first_scan: &[bool], roots: &[Root]) -> Result<Step> {
        if let Plan::Known(id) | Plan::PathMatch(id) = work.plan
            && let Some(why) = &self.source(id).invalid
        {
            log::debug!(
                "not read path={:?} source={id}: its cursor row is invalid ({why})",
                work.path
            );
            self.report.errors += 1;
            return Ok(Step::Done);
        }
        let root = &roots[work.root];
        if let Some(reader) = root.database_reader(&work.path) {
            let harness = root.harness.clone();
            return self.step_database(work, &harness, reader, roots);
        }
        if let Some(spec) = root.snapshot_of(&work.path) {
            let spec = spec.clone();
            return self.step_snapshot(work, &spec, roots);
        }
        match work.plan {
            Plan::Known(id) => self.step_known(work, id),
            Plan::PathMatch(id) => self.step_path_match(work, id),
            Plan::New | Plan::Marked(_) => {
                let replaces = match work.plan {
                    Plan::Marked(old) => old,
                    _ => None,
                };
                let first = first_scan[work.root];
                self.step_new(work, first, roots, replaces)
            }
        }
    }

    fn step_known(&mut self, mut work: Work, id: SourceId) -> Result<Step> {
        if self.unchanged(&work, id)? {
            return Ok(Step::Done);
        }
        match self.open_owned(&mut work)? {
            Opened::File(file, meta) => {
                let path = work.path.clone();
                let step = self.read_source(work, id, &file, &meta)?;
                // Kept open for the next append, unless it could not be read.
                if !self.unreadable.contains_key(&path) {
                    self.kept.keep(&path, file, &meta);
                }
                Ok(step)
            }
            Opened::Skip => Ok(Step::Done),
            Opened::Replanned => Ok(Step::Again(Box::new(work))),
        }
    }

    /// True when source `id`'s file is as its cursor last saw it (not opened, counted, and
    /// followed if it moved).
    fn unchanged(&mut self, work: &Work, id: SourceId) -> Result<bool> {
        let src = self.source(id);
        if src.gone || !up_to_date(src, &work.meta) {
            return Ok(false);
        }
        let src = src.clone();
        self.report.unchanged += 1;
        self.follow_move(&src, &work.path)?;
        Ok(true)
    }

    /// Verifies source `id`'s cursor against the handle and reads the next batch.
    fn read_source(
        &mut self,
        mut work: Work,
        id: SourceId,
        file: &File,
        meta: &Metadata,
    ) -> Result<Step> {
        work.plan = Plan::Known(id);
        let size = work.target.map_or(meta.size(), |t| t.min(meta.size()));
        work.target = Some(size);
        if let Err(e) = self.check_held_back(id, &work.path, file, size)? {
            return self.read_failed(&work, &e);
        }
        let src = self.source(id).clone();
        match read_complete_records(file, &src.cursor.position, size, &self.options.limits) {
            Err(e) => self.read_failed(&work, &e),
            Ok(Ok(batch)) => self.commit_batch(work, &src, meta, batch),
            Ok(Err(mismatch)) if src.gone || plan::moved(&src, &work.path) => {
                // The inode now holds another file: a reused inode, not this source.
                if !src.gone {
                    let why = format!("its inode now holds another file at {:?}", work.path);
                    self.end_source(id, "source_gone", &why)?;
                }
                log::info!(
                    "reused inode path={:?} old_source={id} ({mismatch})",
                    work.path
                );
                work.plan = Plan::New;
                work.target = None;
                Ok(Step::Again(Box::new(work)))
            }
            Ok(Err(mismatch)) => {
                self.new_generation(&src, &work.path, mismatch)?;
                work.target = None;
                self.read_source(work, id, file, meta)
            }
        }
    }

    fn step_path_match(&mut self, mut work: Work, old: SourceId) -> Result<Step> {
        let (file, meta) = match self.open_owned(&mut work)? {
            Opened::File(file, meta) => (file, meta),
            Opened::Skip => return Ok(Step::Done),
            Opened::Replanned => return Ok(Step::Again(Box::new(work))),
        };
        let src = self.source(old).clone();
        let size = meta.size();
        match read_complete_records(&file, &src.cursor.position, size, &self.options.limits) {
            Err(e) => self.read_failed(&work, &e),
            Ok(Ok(batch)) => {
                // Same bytes up to the cursor under a new identity: an atomic save that only
                // appended, or a device number that changed across a reboot.
                let identity = Identity::of(&meta);
                let detail = format!(
                    "identity {} -> {}; marker windows match at offset {}",
                    show(src.identity),
                    show(identity),
                    src.cursor.position.offset
                );
                log::info!("continued path={:?} source={old} {detail}", work.path);
                let path = work.path.clone();
                let change = Change::Continued {
                    identity,
                    path,
                    detail,
                };
                self.change(old, change)?;
                let updated = self.source(old).clone();
                work.target = Some(size);
                work.plan = Plan::Known(old);
                self.commit_batch(work, &updated, &meta, batch)
            }
            Ok(Err(mismatch)) => {
                let why = format!("replaced by a new file ({mismatch} for the old cursor)");
                self.end_source(old, "replaced", &why)?;
                work.plan = Plan::New;
                Ok(Step::Again(Box::new(work)))
            }
        }
    }

    fn step_new(
        &mut self,
        mut work: Work,
        first_scan: bool,
        roots: &[Root],
        replaces: Option<SourceId>,
    ) -> Result<Step> {
        let (file, meta) = match self.open_owned(&mut work)? {
            Opened::File(file, meta) => (file, meta),
            Opened::Skip => return Ok(Step::Done),
            Opened::Replanned => return Ok(Step::Again(Box::new(work))),
        };
        let identity = Identity::of(&meta);
        if let Some(id) = self.owner(&work, identity, roots)? {
            work.plan = Plan::Known(id);
            return Ok(Step::Again(Box::new(work)));
        }
        let (harness, start_at) = (&roots[work.root].harness, roots[work.root].start_at);
        let size = meta.size();
        match seed_new_source(&self.reads, &file, size, identity, start_at, first_scan)? {
            Ok(seed) => {
                // A marked file wins over the live source recorded at its path (the mark is
                // where the user said it starts), which the scan found nowhere else.
                if seed.origin == SeedOrigin::Prefix
                    && let Some(old) = replaces.filter(|id| !self.source(*id).gone)
                {
                    let why = "replaced by a new file at its path, which carries a prefix mark";
                    self.end_source(old, "replaced", why)?;
                }
                let id = self.create_source(&work.path, identity, harness, &seed)?;
                self.read_source(work, id, &file, &meta)
            }
            Err(e) => self.read_failed(&work, &e),
        }
    }

    /// Adds a source whose cursor starts where `seed` says, consuming its prefix mark.
    fn create_source(
        &mut self,
        path: &Path,
        identity: Identity,
        harness: &str,
        seed: &Seed,
    ) -> Result<SourceId> {
        let detail = format!(
            "offset={} source={} skipped_records={}",
            seed.position.offset, seed.origin, seed.skipped_records
        );
        let mark = match &seed.rejected_mark {
            Some((mark, why)) => {
                let at = mark.position.offset;
                log::warn!("prefix mark not used path={path:?} mark_offset={at} reason={why}");
                MarkUse::Rejected(why.clone())
            }
            None if seed.origin == SeedOrigin::Prefix => MarkUse::Used,
            None => MarkUse::None,
        };
        let id = self.next_id;
        self.next_id += 1;
        let mut row = SourceRow::new(id, identity, path.to_owned(), harness.to_owned());
        row.cursor.position = seed.position;
        let change = Change::Seeded {
            row,
            detail: detail.clone(),
            mark,
        };
        self.change(id, change)?;
        log::info!("seeded path={path:?} {detail}");
        self.report.new_sources += 1;
        Ok(id)
    }

    /// Applies `change` to source `id`, in memory and in one commit, and counts the rejects
    /// it records. The one way the engine changes a source.
    fn change(&mut self, id: SourceId, change: Change) -> Result<()> {
        let mut tx = Commit::default();
        self.report.rejects += lifecycle::apply(&mut self.sources, &mut tx, id, change);
        self.committer.submit(tx)
    }

    /// Opens the work's path and checks that the handle is the regular file that was planned.
    fn open_owned(&mut self, work: &mut Work) -> Result<Opened> {
        let opened = match self.kept.take(&work.path) {
            Some(file) => Ok(file),
            None => open_regular(&work.path),
        };
        let opened = opened.and_then(|f| f.metadata().map(|m| (f, m)));
        let (file, meta) = match opened {
            Ok(pair) => pair,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                log::info!("vanished before it was read path={:?}", work.path);
                return Ok(Opened::Skip);
            }
            Err(e) => return self.read_failed(work, &e).map(|_| Opened::Skip),
        };
        if !meta.file_type().is_file() {
            let path = work.path.clone();
            let why = format!("not a regular file when opened ({})", file_kind(&meta));
            self.passed_over(&path, &why)?;
            return Ok(Opened::Skip);
        }
        if Identity::of(&meta) != Identity::of(&work.meta) {
            return Ok(self.replan(work, meta));
        }
        // Files, not turns: a file read in several batches counts once.
        if work.target.is_none() {
            self.report.opened += 1;
        }
        Ok(Opened::File(file, meta))
    }

    /// The path names another inode than the one planned: plan again from the handle's view.
    fn replan(&mut self, work: &mut Work, meta: Metadata) -> Opened {
        work.attempts += 1;
        if work.attempts >= MAX_ATTEMPTS {
            log::warn!(
                "kept changing while being read path={:?}; retried next pass",
                work.path
            );
            self.report.errors += 1;
            return Opened::Skip;
        }
        log::debug!("path changed between scan and open path={:?}", work.path);
        work.plan = plan::replan(&self.sources, &work.path);
        work.meta = meta;
        work.target = None;
        Opened::Replanned
    }

    /// Counts a file that could not be read; reports it unless it was reported already, so
    /// that a file left unreadable is not a warning and an event at every rescan.
    fn read_failed(&mut self, work: &Work, e: &io::Error) -> Result<Step> {
        let path = &work.path;
        self.kept.forget(path);
        self.report.errors += 1;
        // The raw errno too: EIO, EMFILE and ENXIO share one `ErrorKind`.
        let failure = (Identity::of(&work.meta), e.kind(), e.raw_os_error());
        if self.unreadable.insert(path.clone(), failure) == Some(failure) {
            log::debug!("still cannot read path={path:?} error={e}; retried next pass");
            return Ok(Step::Done);
        }
        log::warn!(
            "cannot read path={path:?} error={e}; retried at every change and rescan, reported \
             again once it has been read"
        );
        let mut tx = Commit::default();
        tx.push(Op::event(None, "unreadable", path, &e.to_string()));
        self.committer.submit(tx)?;
        Ok(Step::Done)
    }

    /// Commits one batch with the cursor past it.
    fn commit_batch(
        &mut self,
        work: Work,
        src: &SourceRow,
        meta: &Metadata,
        mut batch: Batch,
    ) -> Result<Step> {
        let path_moved = plan::moved(src, &work.path);
        let fingerprint = Fingerprint::of(meta);
        let caught_up = batch.finished && work.target == Some(fingerprint.size);
        let cursor = Cursor {
            position: Position {
                offset: batch.end,
                markers: batch.markers,
            },
            // A cursor that has not reached the size it saw must not look up to date.
            fingerprint: caught_up.then_some(fingerprint),
            held_back: batch.held_back,
            held_back_prefix: Vec::new(),
        };
        let path = if path_moved { &work.path } else { &src.path };
        if !self.unreadable.is_empty() {
            // The file read, under whatever name it failed before, is news again when it fails.
            let identity = Identity::of(meta);
            (self.unreadable).retain(|p, (id, ..)| *p != work.path && *id != identity);
        }
        self.report_batch(src, path, &batch);
        let change = Change::BatchRead {
            path: path.to_owned(),
            records: std::mem::take(&mut batch.records),
            rejects: std::mem::take(&mut batch.rejects),
            cursor,
            held_back: std::mem::take(&mut batch.held_back_bytes),
        };
        self.change(src.id, change)?;
        if batch.finished {
            Ok(Step::Done)
        } else {
            Ok(Step::Again(Box::new(work)))
        }
    }

    /// Logs a batch's rejects and move, and counts what it read.
    fn report_batch(&mut self, src: &SourceRow, path: &Path, batch: &Batch) {
        for r in &batch.rejects {
            log::warn!(
                "rejected path={path:?} offset={} length={} reason={}",
                r.offset,
                r.length,
                r.reason
            );
        }
        if src.path != path {
            log::info!("moved path={path:?} from={:?} source={}", src.path, src.id);
        }
        log::debug!(
            "committing path={path:?} records={} offset={}..{}",
            batch.records.len(),
            src.cursor.position.offset,
            batch.end
        );
        let r = &mut self.report;
        r.records += batch.records.len() as u64;
        r.blank_lines += batch.blank_lines;
        r.bytes_read += batch.bytes_read;
    }

    /// The bytes held back past the cursor must still be there when reading resumes: if they
    /// were overwritten or cut (a writer that truncates to the cursor and writes again), the
    /// old ones are recorded as a reject before the new ones are read.
    /// `Err` is an archive failure; `Ok(Err)` an I/O error on the file.
    fn check_held_back(
        &mut self,
        id: SourceId,
        path: &Path,
        file: &File,
        size: u64,
    ) -> Result<io::Result<()>> {
        let src = self.source(id);
        let c = &src.cursor;
        if c.held_back == 0 || size < c.position.offset {
            return Ok(Ok(()));
        }
        let available = size - c.position.offset;
        let n = c.held_back_prefix.len().min(available as usize);
        let mut now = vec![0; n];
        if let Err(e) = file.read_exact_at(&mut now, c.position.offset) {
            return Ok(Err(e));
        }
        let replaced = now != c.held_back_prefix[..n];
        if !replaced && available >= c.held_back {
            return Ok(Ok(()));
        }
        let why = if replaced { "overwritten" } else { "cut short" };
        let src = src.clone();
        self.drop_held_back(&src, path, why).map(Ok)
    }

    fn drop_held_back(&mut self, src: &SourceRow, path: &Path, why: &str) -> Result<()> {
        let reason = format!("held-back bytes {why} before their line was completed");
        log::warn!(
            "{reason} path={path:?} offset={}",
            src.cursor.position.offset
        );
        let path = path.to_owned();
        self.change(src.id, Change::HeldBackDropped { path, reason })
    }

    /// Starts a new generation of the same identity (truncated or rewritten in place).
    fn new_generation(&mut self, src: &SourceRow, path: &Path, why: Mismatch) -> Result<()> {
        let detail = format!(
            "generation {} -> {}: {why}; cursor was at offset {}",
            src.generation,
            src.generation + 1,
            src.cursor.position.offset
        );
        log::warn!("new generation path={path:?} source={} {detail}", src.id);
        log::info!(
            "seeded path={path:?} offset=0 source={} skipped_records=0",
            SeedOrigin::Beginning
        );
        let path = path.to_owned();
        let why = why.to_string();
        self.change(src.id, Change::NewGeneration { path, detail, why })?;
        self.report.new_generations += 1;
        Ok(())
    }

    /// Marks a source gone (its archive stays), recording its held-back bytes.
    fn end_source(&mut self, id: SourceId, kind: &'static str, why: &str) -> Result<()> {
        let src = self.source(id);
        log::info!(
            "{kind} path={:?} source={id} reason={why}; its records stay archived",
            src.path
        );
        if src.cursor.held_back > 0 {
            log::warn!(
                "held-back bytes recorded as a reject path={:?} offset={} length={}",
                src.path,
                src.cursor.position.offset,
                src.cursor.held_back
            );
        }
        let why = why.to_owned();
        self.change(id, Change::Gone { kind, why })?;
        self.report.gone += 1;
        Ok(())
    }

    /// Records a new path for an unchanged source whose old path no longer names it.
    fn follow_move(&mut self, src: &SourceRow, path: &Path) -> Result<()> {
        if !plan::moved(src, path) {
            return Ok(());
        }
        log::info!("moved path={path:?} from={:?} source={}", src.path, src.id);
        let path = path.to_owned();
        self.change(src.id, Change::Moved { path })
    }

    fn source(&self, id: SourceId) -> &SourceRow {
        self.sources
            .get(id)
            .expect("a planned source id comes from the source table")
    }
}

/// Says, for each source whose cursor row is invalid, at WARN and in an `invalid_cursor`
/// event, that it is not read while the others carry on.
fn report_invalid_cursors(sources: &Sources, committer: &mut dyn Committer) -> Result<()> {
    let mut tx = Commit::default();
    for s in sources.iter() {
        if let Some(why) = &s.invalid {
            let detail = format!(
                "cursor row is invalid ({why}); this source is not read and its file is not \
                 archived again, its records stay archived; the archive may be damaged: check \
                 it with `sqlite3 ARCHIVE 'PRAGMA integrity_check'`"
            );
            log::warn!("source={} path={:?} {detail}", s.id, s.path);
            tx.push(Op::event(Some(s.id), "invalid_cursor", &s.path, &detail));
        }
    }
    if tx.is_empty() {
        return Ok(());
    }
    committer.submit(tx)
}

fn work(c: Candidate, plan: Plan) -> Work {
    Work {
        path: c.path,
        meta: c.meta,
        root: c.root,
        plan,
        target: None,
        attempts: 0,
    }
}

/// True when `src` is found at `path` and its recorded path no longer names its identity.
/// True when the file looks as it did when its cursor reached its end: nothing to read.
fn up_to_date(src: &SourceRow, meta: &Metadata) -> bool {
    src.cursor.fingerprint == Some(Fingerprint::of(meta))
}

fn show(id: Identity) -> String {
    format!("{}:{}", id.dev, id.ino)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agents::{builtin_roots, watch_roots};
    use crate::archive::writer::ArchiveWriter;
    use std::fs;

    /// An engine over a temp directory, committing straight into a temp archive.
    struct Setup {
        dir: tempfile::TempDir,
        roots: Vec<Root>,
        engine: Engine,
    }

    impl Setup {
        fn new() -> Setup {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("watch");
            fs::create_dir(&root).unwrap();
            let engine = Setup::engine(dir.path());
            let roots = watch_roots(&[root], "**/*.jsonl").unwrap();
            Setup { dir, roots, engine }
        }

        fn engine(dir: &Path) -> Engine {
            let db = dir.join("a.db");
            let writer = ArchiveWriter::new(Archive::open(&db).unwrap(), None);
            let limits = ReadLimits {
                record_limit: 1 << 20,
                batch_bytes: 1 << 20,
            };
            Engine::new(
                Archive::open(&db).unwrap(),
                Box::new(writer),
                EngineOptions { limits },
            )
            .unwrap()
        }

        fn path(&self, name: &str) -> PathBuf {
            self.roots[0].path.join(name)
        }

        fn pass(&mut self) -> PassReport {
            self.engine.run_pass(&self.roots).unwrap()
        }

        fn only_source(&self) -> &SourceRow {
            let mut all = self.engine.sources.iter();
            let row = all.next().unwrap();
            assert!(all.next().is_none());
            row
        }
    }

    #[test]
    fn a_pass_archives_complete_lines_holds_back_the_rest_and_skips_what_did_not_change() {
        let mut s = Setup::new();
        fs::write(s.path("a.jsonl"), b"{\"a\":1}\nnot json\n{\"b\"").unwrap();
        let report = s.pass();
        assert_eq!((report.opened, report.records, report.rejects), (1, 1, 1));
        assert_eq!(report.held_back.values().sum::<u64>(), 4);
        let src = s.only_source().clone();
        assert_eq!((src.cursor.position.offset, src.cursor.held_back), (17, 4));
        assert_eq!(src.cursor.held_back_prefix, b"{\"b\"");
        let report = s.pass();
        assert_eq!((report.opened, report.unchanged), (0, 1));
        // What the engine holds is what a new engine loads from the archive.
        let reloaded = Setup::engine(s.dir.path());
        assert_eq!(reloaded.sources.get(src.id), Some(&src));
    }

    #[test]
    fn a_truncated_file_starts_a_new_generation_and_its_unfinished_line_is_a_reject() {
        let mut s = Setup::new();
        fs::write(s.path("a.jsonl"), b"{\"a\":1}\n{\"b\":2}\n{\"c\"").unwrap();
        s.pass();
        fs::write(s.path("a.jsonl"), b"{\"d\":4}\n").unwrap();
        let report = s.pass();
        assert_eq!(report.new_generations, 1);
        assert_eq!((report.records, report.rejects), (1, 1));
        let src = s.only_source();
        assert_eq!((src.generation, src.records, src.rejects), (1, 3, 1));
        assert_eq!(src.cursor.position.offset, 8);
    }

    /// `dir/home`, and the built-in watchers' roots with it as HOME.
    fn home_roots(dir: &Path) -> (PathBuf, Vec<Root>) {
        let home = dir.join("home");
        let text = home.to_string_lossy().into_owned();
        let roots = builtin_roots(&|k| (k == "HOME").then(|| text.clone())).unwrap();
        (home, roots)
    }

    #[test]
    fn another_snapshot_renamed_over_a_path_between_scan_and_open_is_that_source_moved() {
        // The scan saw chat s at its path; before the open, chat t was renamed over it. The
        // replanned work says "s's path, another inode", which must not make s go on with
        // t's file (t's messages under s): t's file is t, moved.
        let dir = tempfile::tempdir().unwrap();
        let (home, roots) = home_roots(dir.path());
        let chats = home.join(".gemini/tmp/p/chats");
        fs::create_dir_all(&chats).unwrap();
        let mut engine = Setup::engine(dir.path());
        let chat = |id: &str| format!(r#"{{"sessionId":"{id}","messages":[{{"id":"{id}-1"}}]}}"#);
        let (s, t) = (chats.join("session-s.json"), chats.join("session-t.json"));
        fs::write(&s, chat("s")).unwrap();
        fs::write(&t, chat("t")).unwrap();
        engine.run_pass(&roots).unwrap();
        let id_at = |engine: &Engine, p: &Path| {
            (engine.sources.iter())
                .find(|r| r.path == p && !r.gone)
                .unwrap()
                .id
        };
        let (s_id, t_id) = (id_at(&engine, &s), id_at(&engine, &t));
        fs::rename(&t, &s).unwrap();
        let root = roots.iter().position(|r| r.matches(&s)).unwrap();
        let meta = fs::symlink_metadata(&s).unwrap();
        let c = Candidate {
            path: s.clone(),
            meta,
            root,
        };
        let mut step = Step::Again(Box::new(work(c, Plan::PathMatch(s_id))));
        let first_scan = vec![false; roots.len()];
        while let Step::Again(w) = step {
            step = engine.step(*w, &first_scan, &roots).unwrap();
        }
        // s is still recorded at its path until a full pass finds it gone: t's row says it.
        assert_eq!(
            engine.sources.get(t_id).unwrap().path,
            s,
            "t moved to s's path"
        );
        let s_row = engine.sources.get(s_id).unwrap();
        assert_ne!(
            s_row.identity,
            Identity::of(&fs::symlink_metadata(&s).unwrap())
        );
        assert_eq!(
            s_row.records, 2,
            "s holds its own document and message only"
        );
    }

    #[test]
    fn a_file_read_under_a_second_name_stays_at_the_path_its_source_records() {
        // A change seen only under a hard link (an event on that name alone): a snapshot
        // file, and a database with its sessions, stay where they are recorded.
        let dir = tempfile::tempdir().unwrap();
        let (home, roots) = home_roots(dir.path());
        let chats = home.join(".gemini/tmp/p/chats");
        let data = home.join(".local/share/opencode");
        fs::create_dir_all(&chats).unwrap();
        fs::create_dir_all(&data).unwrap();
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/agents/opencode/.local/share/opencode/opencode.db");
        fs::copy(fixture, data.join("opencode.db")).unwrap();
        let chat = chats.join("session-s.json");
        fs::write(&chat, r#"{"sessionId":"s","messages":[{"id":"s-1"}]}"#).unwrap();
        let mut engine = Setup::engine(dir.path());
        engine.run_pass(&roots).unwrap();
        let paths = |engine: &Engine| {
            let mut paths: Vec<PathBuf> = engine.sources.iter().map(|s| s.path.clone()).collect();
            paths.sort();
            paths
        };
        let before = paths(&engine);
        let (chat_link, db_link) = (chats.join("session-s2.json"), data.join("opencode-2.db"));
        fs::hard_link(&chat, &chat_link).unwrap();
        fs::hard_link(data.join("opencode.db"), &db_link).unwrap();
        fs::write(
            &chat_link,
            r#"{"sessionId":"s","messages":[{"id":"s-1"},{"id":"s-2"}]}"#,
        )
        .unwrap();
        let report = engine.sync_paths(&roots, vec![chat_link, db_link]).unwrap();
        assert_eq!(report.records, 1, "the chat's new message");
        assert_eq!(paths(&engine), before);
    }

    #[test]
    fn a_source_whose_cursor_row_is_invalid_is_not_read_and_counted_as_an_error() {
        let mut s = Setup::new();
        fs::write(s.path("a.jsonl"), b"{\"a\":1}\n").unwrap();
        s.pass();
        let db = s.dir.path().join("a.db");
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute("UPDATE cursors SET tail_len = 4096", [])
            .unwrap();
        drop(conn);
        s.engine = Setup::engine(s.dir.path());
        fs::write(s.path("a.jsonl"), b"{\"a\":1}\n{\"b\":2}\n").unwrap();
        let report = s.pass();
        assert_eq!(
            (report.records, report.errors, report.new_sources),
            (0, 1, 0)
        );
        assert!(s.only_source().invalid.is_some());
    }
}
