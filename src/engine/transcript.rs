//! Appended transcripts in the engine: read from their source's cursor in batches of complete
//! records, each committed with the cursor past it. A new file is seeded first (`engine::seed`);
//! a new inode at a source's path continues it when its bytes agree with the cursor, and
//! replaces it otherwise; a file no longer agreeing with its own cursor starts a new generation
//! (or, away from its source's path, is a reused inode); held-back bytes changed before their
//! line was completed are a reject.

use super::*;
use crate::domain::{Cursor, Position};
use crate::engine::seed::{Seed, seed_new_source};
use crate::read::{Batch, Mismatch, read_complete_records};

impl Engine {
    pub(super) fn step_known(&mut self, mut work: Work, id: SourceId) -> Result<Step> {
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

    pub(super) fn step_path_match(&mut self, mut work: Work, old: SourceId) -> Result<Step> {
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

    pub(super) fn step_new(
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
        log::log!(seed.log_level(), "seeded path={path:?} {detail}");
        self.report.new_sources += 1;
        Ok(id)
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
}
