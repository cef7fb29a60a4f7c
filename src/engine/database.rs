//! Database sources in the engine: an agent's SQLite database (OpenCode's `opencode.db`,
//! Crush's `crush.db`) is read once it has settled (its file and its `-wal` unmodified for the
//! settle time), through a read-only connection, from the mark its own source keeps, by the
//! reader its agent's module defines (a `DatabaseFormat`). Each session in it is a source of
//! its own, at `<database>/<session id>` (no file is there: its identity
//! is a device no file has), captured as a document rewritten whole (`engine::snapshot`). A
//! session no longer in the database is gone; its records stay.

use super::*;
use crate::domain::DatabaseReader;
use xxhash_rust::xxh3::xxh3_64;

/// The device of a session's source: no file has it.
pub(crate) const SESSION_DEVICE: u64 = u64::MAX;

impl Engine {
    /// One turn for a database: the sessions changed since its mark, each captured.
    pub(super) fn step_database(
        &mut self,
        mut work: Work,
        harness: &str,
        reader: DatabaseReader,
        roots: &[Root],
    ) -> Result<Step> {
        let (file, meta) = match self.open_owned(&mut work)? {
            Opened::File(file, meta) => (file, meta),
            Opened::Skip => return Ok(Step::Done),
            Opened::Replanned => return Ok(Step::Again(Box::new(work))),
        };
        drop(file);
        // Reading it changes nothing its state is taken from (SQLite may change the owner or
        // mode of the `-wal` and `-shm` it opens, which is an event and a new change time, but
        // not their size or modification time), so a read leads to no other.
        let (seen, newest) = match reader.state(&work.path, meta.clone()) {
            Ok(state) => state,
            Err(e) => return self.read_failed(&work, &e),
        };
        if self.databases_seen.get(&work.path) == Some(&seen) {
            self.report.unchanged += 1;
            self.unsettled.remove(&work.path);
            return Ok(Step::Done);
        }
        if self.wait_to_settle(&work.path, &newest) {
            return Ok(Step::Done);
        }
        let identity = Identity::of(&meta);
        // Its mark says what was read of this file. Another file at its path (a copy put back,
        // a database made anew), or one found again, is read from its beginning: what it
        // holds below the mark need not be what was read.
        let same_file = matches!(work.plan, Plan::Known(_));
        let Some(id) = self.whole_source(&mut work, identity, "database", roots)? else {
            return Ok(Step::Again(Box::new(work)));
        };
        self.unsettled.remove(&work.path);
        // Read under a second name of its file, its sessions stay under its recorded path.
        let db_path = match plan::moved(self.source(id), &work.path) {
            true => work.path.clone(),
            false => self.source(id).path.clone(),
        };
        let since = match same_file {
            true => self.source(id).cursor.position.offset as i64,
            false => 0,
        };
        let read = reader
            .open(&work.path)
            .and_then(|db| Ok((db.changed(since)?, db)));
        let (changed, db) = match read {
            Ok(read) => read,
            Err(e) => return self.read_failed(&work, &e),
        };
        log::debug!(
            "database read path={:?} from={since} to={} sessions_changed={}",
            work.path,
            changed.mark,
            changed.sessions.len()
        );
        let spec = reader.spec();
        // One session in memory at a time, however large the database.
        for session in &changed.sessions {
            if self.stop.load(Ordering::Relaxed) {
                // Its mark is not moved: the next start reads these sessions again.
                return Ok(Step::Done);
            }
            let doc = match db.document(session) {
                Ok(Some(doc)) => doc,
                Ok(None) => continue,
                // A file of a store that is not JSON (being written, or left cut short by a
                // crash) fails its session only: read again when it changes.
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    log::warn!("session {session} in {:?} not read: {e}", work.path);
                    self.report.errors += 1;
                    continue;
                }
                Err(e) => return self.read_failed(&work, &e),
            };
            if doc.len() as u64 > snapshot::MAX_SNAPSHOT {
                log::warn!(
                    "session {session} in {:?} is {} bytes, more than the {} a document may \
                     have; not captured",
                    work.path,
                    doc.len(),
                    snapshot::MAX_SNAPSHOT
                );
                self.report.errors += 1;
                continue;
            }
            let path = db_path.join(session);
            let sid = self.session_source(&path, harness)?;
            self.capture(&path, sid, None, doc, &spec)?;
        }
        drop(db);
        self.end_sessions_gone(&db_path, &changed.all)?;
        // As they were before the read: a change made during it is read again.
        self.databases_seen.insert(work.path.clone(), seen);
        let src = self.source(id).clone();
        let mut cursor = src.cursor.clone();
        cursor.position.offset = changed.mark.max(0) as u64;
        cursor.fingerprint = Some(Fingerprint::of(&meta));
        let change = Change::Captured {
            path: db_path,
            records: Vec::new(),
            rejects: Vec::new(),
            cursor,
            snapshot: None,
            dropped: 0,
        };
        self.change(id, change)?;
        Ok(Step::Done)
    }

    /// The source of the session at `path` (`<database>/<session id>`): its live one, the one
    /// it had before it went, or a new one.
    fn session_source(&mut self, path: &Path, harness: &str) -> Result<SourceId> {
        if let Some(id) = self.sources.live_by_path(path) {
            return Ok(id);
        }
        let identity = Identity {
            dev: SESSION_DEVICE,
            ino: xxh3_64(path.as_os_str().as_encoded_bytes()),
        };
        if let Some(old) = self.gone_at(path, harness) {
            let detail = "its session is in the database again".to_owned();
            return self.continue_source(old, identity, path, detail);
        }
        let detail = "a session in a database: captured as a document of its messages";
        self.create_snapshot_source(path, identity, harness, detail)
    }

    /// Ends the live sessions of the database at `db` that it no longer holds.
    fn end_sessions_gone(&mut self, db: &Path, sessions: &HashSet<String>) -> Result<()> {
        let gone: Vec<SourceId> = (self.sources.iter())
            .filter(|s| !s.gone && s.identity.dev == SESSION_DEVICE && s.path.parent() == Some(db))
            .filter(|s| {
                (s.path.file_name()).is_none_or(|n| !sessions.contains(&*n.to_string_lossy()))
            })
            .map(|s| s.id)
            .collect();
        for id in gone {
            self.end_source(
                id,
                "source_gone",
                "its session is no longer in the database",
            )?;
        }
        Ok(())
    }
}
