//! The sync pass: discovered files → sources → verified, exact reads → committed batches.
//!
//! A pass plans every file first (by identity, then by path), so a file moved within the roots
//! keeps its source even when a new file takes its old name in the same pass. Work then runs
//! in turns: each turn reads at most one batch from one file and commits it, and a file with
//! more to read goes to the back of the queue.

pub(crate) mod database;
pub(crate) mod evidence;
pub(crate) mod lifecycle;
mod open;
pub(crate) mod plan;
pub(crate) mod progress;
pub(crate) mod sample;
pub(crate) mod seed;
pub(crate) mod snapshot;
pub(crate) mod sources;
mod transcript;

use crate::archive::{Archive, Commit, Committer, Op};
use crate::capture::discover::{Candidate, discover, file_kind};
use crate::capture::harness::Root;
use crate::domain::fingerprint::{Fingerprint, Identity};
use crate::domain::{ReadLimits, SourceId, SourceRow, StartAt};
use crate::engine::lifecycle::{Change, MarkUse};
use crate::engine::plan::Plan;
use crate::engine::progress::Progress;
use crate::engine::seed::SeedOrigin;
use crate::engine::sources::Sources;
use crate::error::Result;
use crate::read::open::Kept;
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

    /// Applies `change` to source `id`, in memory and in one commit, and counts the rejects
    /// it records. The one way the engine changes a source.
    fn change(&mut self, id: SourceId, change: Change) -> Result<()> {
        let mut tx = Commit::default();
        self.report.rejects += lifecycle::apply(&mut self.sources, &mut tx, id, change);
        self.committer.submit(tx)
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
mod tests;
