//! Opening a planned file in the engine: on an owned handle, checked to be the regular file
//! that was planned (planned again when the path names another inode), and a file that cannot
//! be read, counted and reported once.

use super::*;
use crate::read::open::open_regular;

impl Engine {
    /// Opens the work's path and checks that the handle is the regular file that was planned.
    pub(super) fn open_owned(&mut self, work: &mut Work) -> Result<Opened> {
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
    pub(super) fn read_failed(&mut self, work: &Work, e: &io::Error) -> Result<Step> {
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
}
