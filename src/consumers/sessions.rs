//! The session index: a durable consumer of the archive that turns records into sessions and
//! their messages (each agent's parser, `agents::message::parse`), with full-text search over
//! what was said.
//!
//! It follows the archive like any consumer: from the last `seq` it recorded as done (0 in an
//! index that is new, which is how an upgraded archive gets its index), catching up from the
//! archive, then taking each commit once it is durable. Records are indexed in transactions of
//! their own, each together with the last `seq` it holds, so a crash loses and repeats
//! nothing. The index lives in a file of its own beside the archive (`store`), so the archive
//! writer never waits for it. Everything here is derived from the records: `reindex` removes
//! the file and builds it again.

use crate::archive::follow::{Follower, Hub, Start};
use crate::archive::{Archive, ExportRow};
use crate::domain::SourceId;
use crate::error::{Result, SystemContext, error_chain};
use rusqlite::TransactionBehavior::Immediate;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub(crate) mod git;
pub(crate) mod query;
mod share;
pub(crate) mod store;
pub(crate) mod usage;
pub(crate) mod words;

use crate::agents::message::{
    INDEXED_STRING, Parsed, Part, Role, parse, prefix_of, with_long_strings_cut,
};

/// At most this many records, or bytes of records, are taken from the archive at a time.
const BATCH: usize = 2000;
const BATCH_BYTES: usize = 8 << 20;
/// A catch-up reads pages of up to this many records ([`BATCH_BYTES`] at most), each indexed
/// in one transaction: a page of [`BATCH`] records (4 MB of real transcripts) wrote twice as
/// many segments for a build to merge.
const CATCH_UP_PAGE: usize = 20_000;
/// How long records are gathered after the first, so that a steady stream of small commits
/// (a thousand a second over many files) is indexed in a few transactions a second rather
/// than one each: each index transaction writes many pages (sessions, messages, the full-text
/// index). The index lags by this much at most.
const GATHER: Duration = Duration::from_millis(200);

/// An index transaction ends after this long, or once it has indexed records of
/// [`TRANSACTION_BYTES`]: each transaction flushes a new segment of the full-text index, which
/// later merges write again, so fewer and larger ones index a backlog faster (a gigabyte of
/// records in 41 s rather than 58 s, docs/benchmarks-log.md). Merging is FTS5's own
/// (`automerge`): inside each transaction, work in proportion to the pages it wrote; none
/// while the index is built from nothing ([`store::Merging`]). A stopping daemon waits for
/// the transaction in hand, so at most this long.
const TRANSACTION_TIME: Duration = Duration::from_secs(2);
const TRANSACTION_BYTES: usize = BATCH_BYTES;

/// Once this many bytes of records have been indexed since the full-text index's segments were
/// last merged (by this process), and twice the index's size (its pages in use,
/// [`live_bytes`]), they are merged into one when the index next has nothing to do: at the end
/// of a catch-up or a `run --once`, or when the daemon's index waits for records. A backfill
/// into an index already built leaves FTS5's own merging (`automerge`) with a dozen segments
/// or more, and a query reads each of its terms in every segment: a prefix that stands for 256
/// terms (`re*`) took a fifth less time over one (BENCHMARKS.md).
/// Merging rewrites the whole index, in about a tenth of the time it took to build (half a
/// second for 54 MB): so after a backfill, and then each time the index has grown by about
/// half, which keeps the bytes merging writes in proportion to those indexed.
const MERGE_AFTER: usize = 32 << 20;

/// Whether the segments are to be merged after `unmerged` bytes of records were indexed since
/// they last were, the index being of `index_bytes` ([`live_bytes`], [`MERGE_AFTER`]).
fn merge_due(unmerged: usize, index_bytes: i64) -> bool {
    unmerged >= MERGE_AFTER && unmerged as i64 >= 2 * index_bytes
}

/// Bytes of the index file's pages in use: FTS5's own merges leave the pages of the segments
/// they merged free in the file, for the index to fill again, and they are no index to merge.
fn live_bytes(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT (page_count - freelist_count) * page_size
         FROM main.pragma_page_count, main.pragma_freelist_count, main.pragma_page_size",
        [],
        |r| r.get(0),
    )
}

/// The searchable text of one message is cut at this many bytes.
const BODY_LIMIT: usize = 1 << 20;

/// How often a catch-up says how far it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// On a machine of fewer cores than this, the index starts no transaction while the archive
/// writer commits a backfill (commits of [`crate::archive::follow::BULK_BYTES`] or more), until they have
/// paused for [`BACKFILL_PAUSE`]: its reader, its writer and the writer's second compression
/// thread keep three cores busy, and beside them on two cores an index even in the idle class
/// made a 1 GiB backfill's commits take 6.3–6.6 s rather than 4.8–5.0 (BENCHMARKS.md). On more
/// cores the index runs beside a backfill.
const CORES_BESIDE_A_BACKFILL: usize = 4;
const BACKFILL_PAUSE: Duration = Duration::from_millis(500);
/// The index waits this long at most before it indexes a batch: a backfill or a pull that
/// commits large batches for minutes still has its records indexed, a batch each time.
const LONGEST_BACKFILL_WAIT: Duration = Duration::from_secs(30);

/// Writes the session index of an archive.
pub(crate) struct Indexer {
    /// The index's file as `main`, the archive attached read-only (`store`).
    conn: Connection,
    /// The archive, read-only: where a catch-up reads records.
    archive: Archive,
    /// The session each source's records belong to, as decided.
    sessions: HashMap<SourceId, i64>,
    /// Bytes of records indexed since the segments were merged ([`MERGE_AFTER`]).
    unmerged: usize,
    /// Whether the index is being built from nothing ([`store::Merging::Build`]): its segments
    /// are merged into one when it first has nothing to do.
    building: bool,
}

impl Indexer {
    /// An indexer of the archive at `db` (connections of its own), its index file made ready
    /// (`store::open_to_write`).
    ///
    /// An index that holds no record yet, or whose build from nothing was stopped before it
    /// ended, is built with [`store::Merging::Build`].
    pub(crate) fn open(db: &Path) -> Result<Indexer> {
        let mut indexer = Indexer {
            conn: store::open_to_write(db)?,
            archive: Archive::open_existing(db)?,
            sessions: HashMap::new(),
            unmerged: 0,
            building: false,
        };
        let empty = indexer.done()? == 0;
        if empty {
            // An index file emptied to be built again keeps the pages its tables had, free,
            // and may have been made without the setting that gives them back.
            indexer.give_back_logged();
        }
        let building = indexer.db(store::building(&indexer.conn))?;
        if empty && !building {
            let set = store::set_merging(&mut indexer.conn, store::Merging::Build);
            indexer.db(set)?;
        }
        indexer.building = building || empty;
        Ok(indexer)
    }

    /// Maps a SQLite error to [`crate::error::Error::Index`] naming the index file.
    fn db<T>(&self, result: rusqlite::Result<T>) -> Result<T> {
        result.map_err(store::index_error(self.archive.path()))
    }

    /// The last `seq` the index is done with.
    pub(crate) fn done(&self) -> Result<i64> {
        self.db(store::progress(&self.conn))
    }

    /// Indexes `rows` (in `seq` order, past [`Indexer::done`]), recording how far it is with
    /// each transaction: `Err` leaves the index as its last transaction left it.
    pub(crate) fn index(&mut self, rows: &[Ready]) -> Result<()> {
        let mut rest = rows;
        while !rest.is_empty() {
            let n = self.index_some(rest)?;
            rest = &rest[n..];
        }
        Ok(())
    }

    /// Indexes a first part of `rows` in one transaction (at least one row; no longer than
    /// [`TRANSACTION_TIME`] or [`TRANSACTION_BYTES`]), and records the last one done. Returns
    /// how many.
    fn index_some(&mut self, rows: &[Ready]) -> Result<usize> {
        let started = Instant::now();
        let mut decided = Vec::new();
        let known = &self.sessions;
        let conn = &mut self.conn;
        let result = (|| {
            // Takes the index file's write lock only: the archive is attached read-only.
            let tx = conn.transaction_with_behavior(Immediate)?;
            let mut text = PendingText::default();
            let mut changes = SessionChanges::default();
            let (mut n, mut bytes) = (0, 0);
            for ready in rows {
                let row = &ready.row;
                let session = match known.get(&row.source) {
                    Some(s) => *s,
                    None => {
                        let s = session_of(&tx, row, &ready.parsed)?;
                        decided.push((row.source, s));
                        s
                    }
                };
                apply(&tx, &mut text, &mut changes, session, ready)?;
                n += 1;
                bytes += row.record.len();
                if bytes >= TRANSACTION_BYTES || started.elapsed() >= TRANSACTION_TIME {
                    break;
                }
            }
            changes.write(&tx)?;
            store::set_progress(&tx, rows[n - 1].row.seq)?;
            text.write(&tx)?;
            tx.commit().map(|()| n)
        })();
        let n = self.db(result)?;
        self.sessions.extend(decided);
        self.unmerged += rows[..n].iter().map(|r| r.row.record.len()).sum::<usize>();
        Ok(n)
    }

    /// Merges the full-text index's segments into one if enough records have been indexed
    /// since they last were ([`MERGE_AFTER`]): FTS5's `optimize`, one transaction, then the
    /// pages it freed given back and the write-ahead log it filled emptied when no reader
    /// holds it ([`Indexer::merge`]). Readers read the index as it was meanwhile; a record to
    /// index waits for it. A merge that fails is logged and left for the next time: the index
    /// is whole without it.
    ///
    /// An index being built from nothing ends its build here instead: FTS5's merging is set
    /// back as it is for following the archive, and the segments are merged into one.
    pub(crate) fn merge_when_grown(&mut self) {
        self.merge_when_grown_telling(|| {});
    }

    /// [`Indexer::merge_when_grown`], calling `starting` just before a merge starts.
    fn merge_when_grown_telling(&mut self, starting: impl FnOnce()) {
        if self.building {
            return self.end_build(starting);
        }
        // Before the index's size is read: this is asked each time the index waits.
        if !merge_due(self.unmerged, 0) {
            return;
        }
        match live_bytes(&self.conn) {
            Ok(bytes) if !merge_due(self.unmerged, bytes) => return,
            Ok(_) => {}
            Err(e) => log::warn!("session index: cannot read its size ({e}); merging"),
        }
        starting();
        self.merge_logged("search segments");
    }

    /// Ends a build from nothing ([`Indexer::merge_when_grown`]). Merging as it follows the
    /// archive is set first, in a transaction of its own: a merge that fails leaves the
    /// segments to it.
    fn end_build(&mut self, starting: impl FnOnce()) {
        if let Err(e) = store::set_merging(&mut self.conn, store::Merging::Follow) {
            log::warn!("session index: cannot end its build ({e}); it is ended at the next pause");
            return;
        }
        self.building = false;
        starting();
        self.merge_logged("built; its search segments");
    }

    /// [`Indexer::merge`], logged as `what` merged and how long it took, or why it failed
    /// (the segments are then left as they are, and searched as they are).
    fn merge_logged(&mut self, what: &str) {
        self.unmerged = 0;
        let started = Instant::now();
        match self.merge() {
            Ok(given) => log::info!(
                "session index: {what} merged into one in {} ms; {:.1} MB of free pages given back",
                started.elapsed().as_millis(),
                given as f64 / 1e6
            ),
            Err(e) => log::warn!(
                "session index: cannot merge its search segments ({e}); searches read them all"
            ),
        }
    }

    /// Merges the full-text index's segments into one, gives the pages the merge freed back to
    /// the filesystem (returns how many bytes, [`Indexer::give_back_logged`]), and empties
    /// the index's write-ahead log when no reader holds it (the file is cut short then). The
    /// checkpoint names the index (`main`): unnamed, it would checkpoint the archive too,
    /// through its read-only attachment, and fail on any page the archive's log held.
    fn merge(&mut self) -> rusqlite::Result<u64> {
        (self.conn).execute_batch("INSERT INTO message_text (message_text) VALUES ('optimize')")?;
        let given = self.give_back_logged();
        (self.conn).execute_batch("PRAGMA main.wal_checkpoint(TRUNCATE)")?;
        Ok(given)
    }

    /// Gives the index file's free pages back ([`store::give_back_free_pages`]) and returns
    /// how many bytes, or logs why it could not (0): the index is whole either way, its file
    /// only larger until the next merge tries again. Rewriting a file made by an earlier build
    /// needs room for a copy of it.
    fn give_back_logged(&self) -> u64 {
        store::give_back_free_pages(&self.conn).unwrap_or_else(|e| {
            log::warn!(
                "session index {}: cannot give its free pages back ({e}); they stay in the file until its next merge",
                store::path_of(self.archive.path()).display()
            );
            0
        })
    }

    /// Indexes every record past [`Indexer::done`] up to the archive's last, reading them in
    /// pages; `progress` hears of each page, and of the merge. Returns how many were indexed.
    /// The segments are merged at the end when it indexed enough ([`MERGE_AFTER`]), or when
    /// the index was being built from nothing.
    ///
    /// The pages are read, cut, parsed and their text cut into terms on a thread of their own,
    /// a page ahead: on a machine with a core to spare, the index's thread only writes.
    pub(crate) fn catch_up(&mut self, mut progress: impl FnMut(CatchUp)) -> Result<u64> {
        let last = self.archive.last_seq()?;
        let done = self.done()?;
        if done >= last {
            // Nothing to index: a build from nothing that was stopped after its last
            // transaction ends here.
            self.merge_when_grown_telling(|| progress(CatchUp::Merging));
            return Ok(0);
        }
        let archive = Archive::open_existing(self.archive.path())?;
        // One page waits while another is indexed: the reader blocks on a full channel, so a
        // catch-up holds two pages of records at most.
        let (pages, read) = crossbeam_channel::bounded(1);
        std::thread::scope(|scope| {
            // Joined when the scope ends.
            std::thread::Builder::new()
                .name("index reader".into())
                .spawn_scoped(scope, move || read_pages(&archive, done, last, &pages))
                .starting("index reader")?;
            let mut count = 0;
            for page in read {
                let page = page?;
                let Some(end) = page.last().map(|r| r.row.seq) else {
                    break;
                };
                self.index(&page)?;
                count += page.len() as u64;
                progress(CatchUp::Indexed { at: end, last });
            }
            Ok(count)
        })
        .inspect(|_| self.merge_when_grown_telling(|| progress(CatchUp::Merging)))
    }
}

/// How far [`Indexer::catch_up`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CatchUp {
    /// Records up to seq `at` are indexed, of those up to `last`.
    Indexed { at: i64, last: i64 },
    /// Every record is indexed, and the search segments are being merged into one: a second
    /// or more on a large archive, with no record to count.
    Merging,
}

/// Reads the records after `done` through `last` in pages, ready to index, into `pages`,
/// until every one is read, an error is sent, or nobody receives any more.
fn read_pages(
    archive: &Archive,
    mut done: i64,
    last: i64,
    pages: &crossbeam_channel::Sender<Result<Vec<Ready>>>,
) {
    while done < last {
        let page = archive.records_page(done, last, CATCH_UP_PAGE, BATCH_BYTES as u64);
        let page = page.and_then(|rows| {
            let rows = rows.into_iter().map(|mut row| {
                if let std::borrow::Cow::Owned(cut) = indexed(&row.record) {
                    row.record = cut;
                }
                row
            });
            ready(rows).map_err(store::index_error(archive.path()))
        });
        let next = match &page {
            Ok(rows) => rows.last().map(|r| r.row.seq),
            Err(_) => None,
        };
        if pages.send(page).is_err() {
            return;
        }
        match next {
            Some(end) => done = end,
            None => return,
        }
    }
}

/// A record ready to index: cut (see [`indexed`]) and parsed, and its message's text cut into
/// the terms the index takes (`words::terms_of`).
pub(crate) struct Ready {
    row: ExportRow,
    parsed: Parsed,
    /// The terms, and how many places they take (`words::terms_of`).
    terms: Option<(String, i64)>,
}

/// Parses `rows`, given cut (see [`indexed`]), and cuts their messages' text into terms.
pub(crate) fn ready(rows: impl IntoIterator<Item = ExportRow>) -> rusqlite::Result<Vec<Ready>> {
    let parse = |row: ExportRow| {
        let parsed = parse(&row.harness, &row.record);
        let terms = match &parsed.message {
            Some(m) => Some(words::terms_of(&body(&m.parts))?),
            None => None,
        };
        Ok(Ready { row, parsed, terms })
    };
    rows.into_iter().map(parse).collect()
}

/// The session of `row`'s source: the one its source was given, else the one of an earlier
/// source at the same path (a file restored or replaced stays in its session), else a session
/// identified from the path and the first record, created if new.
fn session_of(tx: &Connection, row: &ExportRow, parsed: &Parsed) -> rusqlite::Result<i64> {
    let known: Option<i64> = tx
        .prepare_cached("SELECT session FROM session_sources WHERE source_id = ?1")?
        .query_row([row.source], |r| r.get(0))
        .optional()?;
    if let Some(session) = known {
        return Ok(session);
    }
    // A pulled source (a negative id) is another machine's, and so are its sessions.
    let machine: i64 = match crate::archive::is_pulled(row.source) {
        true => tx.query_row(
            "SELECT machine FROM sources WHERE id = ?1",
            [row.source],
            |r| r.get(0),
        )?,
        false => 0,
    };
    let path = row.path.as_os_str().as_bytes();
    let same_path: Option<i64> = tx
        .prepare_cached(
            "SELECT ss.session FROM session_sources ss JOIN sources s ON s.id = ss.source_id
             WHERE s.path = ?1 AND s.machine = ?2 ORDER BY ss.source_id DESC LIMIT 1",
        )?
        .query_row(params![path, machine], |r| r.get(0))
        .optional()?;
    let session = match same_path {
        Some(session) => session,
        None => {
            let id = crate::agents::identify(&row.harness, &row.path, parsed);
            tx.prepare_cached(
                "INSERT INTO sessions (machine, harness, session, parent, project)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (machine, harness, session) DO NOTHING",
            )?
            .execute(params![
                machine,
                row.harness,
                id.session,
                id.parent,
                id.project
            ])?;
            tx.prepare_cached(
                "SELECT id FROM sessions WHERE machine = ?1 AND harness = ?2 AND session = ?3",
            )?
            .query_row(params![machine, row.harness, id.session], |r| r.get(0))?
        }
    };
    tx.prepare_cached("INSERT INTO session_sources (source_id, session) VALUES (?1, ?2)")?
        .execute(params![row.source, session])?;
    Ok(session)
}

/// Changes to the full-text index that wait for the end of their transaction, in order.
///
/// FTS5 writes the terms it holds in memory to disk, as a new segment, at every statement
/// savepoint of the transaction, and SQLite opens one for every statement that may write
/// several rows or abort halfway (inserting a message: its unique key). Text
/// inserted between such statements would make a segment per message, to be sorted, written
/// and merged again; written after them, a transaction's text makes a few large ones.
/// Invariant: every statement that reads or deletes `message_text` rows runs after
/// [`PendingText::write`].
#[derive(Default)]
struct PendingText<'a> {
    /// The message's row, and the terms of its text to insert (`None`: its text to delete).
    changes: Vec<(i64, Option<&'a str>)>,
}

impl<'a> PendingText<'a> {
    fn insert(&mut self, id: i64, terms: &'a str) {
        self.changes.push((id, Some(terms)));
    }

    fn delete(&mut self, id: i64) {
        self.changes.push((id, None));
    }

    /// Makes the changes held, in the order they were made, and forgets them.
    fn write(&mut self, tx: &Connection) -> rusqlite::Result<()> {
        let mut insert =
            tx.prepare_cached("INSERT INTO message_text (rowid, body) VALUES (?1, ?2)")?;
        let mut delete = tx.prepare_cached("DELETE FROM message_text WHERE rowid = ?1")?;
        for (id, body) in self.changes.drain(..) {
            match body {
                Some(body) => insert.execute(params![id, body])?,
                None => delete.execute([id])?,
            };
        }
        Ok(())
    }
}

/// What a transaction's records say about their sessions (project, branch, title, first
/// prompt, times, models), gathered record by record and written once per session at the
/// end of the transaction ([`SessionChanges::write`]): a session's row is updated once per
/// transaction rather than once per record. Folded as the records would have been applied
/// one by one: the first project and prompt, the last branch, the last title of a rank at
/// least that of every one before it, the earliest and latest times.
#[derive(Default)]
struct SessionChanges<'a> {
    changes: HashMap<i64, Change<'a>>,
}

#[derive(Default)]
struct Change<'a> {
    project: Option<&'a str>,
    branch: Option<&'a str>,
    title: Option<(&'a str, i64)>,
    prompt: Option<&'a str>,
    first_ms: Option<i64>,
    last_ms: Option<i64>,
    models: Vec<&'a str>,
    /// Messages added, by role: user, assistant, compact, unparsed.
    added: [i64; 4],
}

impl<'a> SessionChanges<'a> {
    fn add(&mut self, session: i64, parsed: &'a Parsed) {
        let c = self.changes.entry(session).or_default();
        c.project = c.project.or(parsed.project.as_deref());
        c.branch = parsed.branch.as_deref().or(c.branch);
        if let Some((title, rank)) = &parsed.title
            && c.title.is_none_or(|(_, before)| *rank >= before)
        {
            c.title = Some((title, *rank));
        }
        c.prompt = c.prompt.or(parsed.prompt.as_deref());
        if let Some(at) = parsed.at_ms {
            c.first_ms = Some(c.first_ms.map_or(at, |t| t.min(at)));
            c.last_ms = Some(c.last_ms.map_or(at, |t| t.max(at)));
        }
        if let Some(at) = parsed.started_ms {
            c.first_ms = Some(c.first_ms.map_or(at, |t| t.min(at)));
        }
        if let Some(model) = parsed.model.as_deref()
            && !c.models.contains(&model)
        {
            c.models.push(model);
        }
    }

    /// Counts a message of `role` added to `session`.
    fn added(&mut self, session: i64, role: Role) {
        let c = self.changes.entry(session).or_default();
        match role {
            Role::User => c.added[0] += 1,
            Role::Assistant => c.added[1] += 1,
            Role::Compact => c.added[2] += 1,
            Role::Unparsed => c.added[3] += 1,
            _ => {}
        }
    }

    /// Writes what was gathered, and forgets it.
    fn write(&mut self, tx: &Connection) -> rusqlite::Result<()> {
        for (session, c) in self.changes.drain() {
            let (title, rank) = c.title.unzip();
            tx.prepare_cached(
                "UPDATE sessions SET
                    project = coalesce(project, ?2),
                    branch = coalesce(?3, branch),
                    agent_title = CASE WHEN ?4 IS NOT NULL AND ?5 >= title_rank THEN ?4 ELSE agent_title END,
                    title_rank = CASE WHEN ?4 IS NOT NULL AND ?5 >= title_rank THEN ?5 ELSE title_rank END,
                    first_prompt = coalesce(first_prompt, ?6),
                    started_ms = min(coalesce(started_ms, ?7), coalesce(?7, started_ms)),
                    last_ms = max(coalesce(last_ms, ?8), coalesce(?8, last_ms)),
                    user_messages = user_messages + ?9,
                    assistant_messages = assistant_messages + ?10,
                    compactions = compactions + ?11,
                    unparsed = unparsed + ?12
                 WHERE id = ?1",
            )?
            .execute(params![
                session,
                c.project,
                c.branch,
                title,
                rank.unwrap_or(0),
                c.prompt,
                c.first_ms,
                c.last_ms,
                c.added[0],
                c.added[1],
                c.added[2],
                c.added[3]
            ])?;
            if c.project.is_some() {
                read_git_remote(tx, session)?;
            }
            for model in c.models {
                tx.prepare_cached(
                    "INSERT OR IGNORE INTO session_models (session, model) VALUES (?1, ?2)",
                )?
                .execute(params![session, model])?;
            }
        }
        Ok(())
    }
}

/// Applies what one record says to its session's messages (their text goes to `text`), and
/// gathers what it says of the session in `changes`.
fn apply<'a>(
    tx: &Connection,
    text: &mut PendingText<'a>,
    changes: &mut SessionChanges<'a>,
    session: i64,
    ready: &'a Ready,
) -> rusqlite::Result<()> {
    let Ready { row, parsed, terms } = ready;
    changes.add(session, parsed);
    if let (Some(message), Some(terms)) = (&parsed.message, terms.as_ref())
        && add_message(tx, text, session, row, parsed.at_ms, message, terms)?
    {
        changes.added(session, message.role);
    }
    if let Some(usage) = &parsed.usage {
        add_usage(tx, session, row, parsed.at_ms, usage)?;
    }
    if let Some(id) = &parsed.rewind_to {
        // Its trigger deletes the messages' text: any still held must be there first.
        text.write(tx)?;
        tx.prepare_cached(
            "DELETE FROM messages WHERE session = ?1
             AND ord >= (SELECT ord FROM messages WHERE session = ?1 AND key = ?2)",
        )?
        .execute(params![session, id])?;
    }
    Ok(())
}

/// The first time one of this machine's sessions has a project, reads the git remote of the
/// project's repository (the directory is this machine's: a pulled session's remote comes
/// from its own machine's index).
fn read_git_remote(tx: &Connection, session: i64) -> rusqlite::Result<()> {
    let project: Option<String> = tx
        .prepare_cached(
            "UPDATE sessions SET remote_read = 1
             WHERE id = ?1 AND remote_read = 0 AND machine = 0 AND project IS NOT NULL
             RETURNING project",
        )?
        .query_row([session], |r| r.get(0))
        .optional()?;
    // A project named otherwise than by its absolute path (Gemini CLI's, Cursor's) has no
    // directory to read.
    let dir = project.map(PathBuf::from).filter(|p| p.is_absolute());
    let Some(remote) = dir.and_then(|d| git::remote_of(&d)) else {
        return Ok(());
    };
    tx.prepare_cached("UPDATE sessions SET git_remote = ?2 WHERE id = ?1")?
        .execute(params![session, remote])
        .map(drop)
}

/// Adds a message, or (for an upsert whose key is there) replaces it; a copy of a message
/// already there is left out. The terms of its text go to `text`. True when it was added (not
/// replaced, nor left out).
fn add_message<'a>(
    tx: &Connection,
    text: &mut PendingText<'a>,
    session: i64,
    row: &ExportRow,
    at_ms: Option<i64>,
    message: &crate::agents::message::Message,
    (terms, places): &'a (String, i64),
) -> rusqlite::Result<bool> {
    let place = place_key(row);
    let key = match (&message.key, message.copy) {
        (Some(k), _) => k.clone(),
        (None, Some(copy)) => format!("{}{place}", copy.tag()),
        (None, None) => place,
    };
    if let Some(copy) = message.copy
        && is_twin(tx, session, copy)?
    {
        return Ok(false);
    }
    let role = message.role.as_str();
    // A message added has its `ord` and `seq` from this record. Its id is the row's, read from
    // the connection rather than returned: `RETURNING` gathers its rows in a table of its own
    // opened and closed at each insert, a tenth of an index build's writing (BENCHMARKS.md).
    let added = tx
        .prepare_cached(
            "INSERT INTO messages (session, key, ord, seq, role, at_ms, places)
             VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6)
             ON CONFLICT (session, key) DO NOTHING",
        )?
        .execute(params![session, key, row.seq, role, at_ms, places])?;
    if added == 1 {
        text.insert(tx.last_insert_rowid(), terms);
        return Ok(true);
    }
    if !message.upsert {
        return Ok(false);
    }
    // One replaced keeps the `ord` of its first copy, an earlier record's.
    let id: i64 = tx
        .prepare_cached("SELECT id FROM messages WHERE session = ?1 AND key = ?2")?
        .query_row(params![session, key], |r| r.get(0))?;
    tx.prepare_cached(
        "UPDATE messages SET seq = ?2, role = ?3, at_ms = coalesce(?4, at_ms), places = ?5
         WHERE id = ?1",
    )?
    .execute(params![id, row.seq, role, at_ms, places])?;
    text.delete(id);
    text.insert(id, terms);
    Ok(false)
}

/// The key of what a record holds when the agent gives it no id: the record's place.
fn place_key(row: &ExportRow) -> String {
    format!("@{}:{}:{}", row.source, row.generation, row.offset)
}

/// Adds a model call's tokens, or (for a call already there: the same reply written again, or
/// copied into another session) updates them.
fn add_usage(
    tx: &Connection,
    session: i64,
    row: &ExportRow,
    at_ms: Option<i64>,
    usage: &crate::agents::message::Usage,
) -> rusqlite::Result<()> {
    let key = match (&usage.key, usage.in_session) {
        (Some(key), false) => key.clone(),
        (Some(key), true) => format!("{session}:{key}"),
        (None, _) => place_key(row),
    };
    tx.prepare_cached(
        "INSERT INTO usage (machine, harness, key, session, at_ms, model, input, output,
             cache_read, cache_write)
         SELECT machine, harness, ?2, id, ?3, ?4, ?5, ?6, ?7, ?8 FROM sessions WHERE id = ?1
         ON CONFLICT (machine, harness, key) DO UPDATE SET
             at_ms = coalesce(excluded.at_ms, at_ms), model = coalesce(excluded.model, model),
             input = excluded.input, output = excluded.output,
             cache_read = excluded.cache_read, cache_write = excluded.cache_write",
    )?
    .execute(params![
        session,
        key,
        at_ms,
        usage.model,
        usage.input,
        usage.output,
        usage.cache_read,
        usage.cache_write
    ])
    .map(drop)
}

/// Whether `copy` is the twin of the session's latest prompt copy (see
/// [`crate::agents::message::PromptCopy`]).
fn is_twin(
    tx: &Connection,
    session: i64,
    copy: crate::agents::message::PromptCopy,
) -> rusqlite::Result<bool> {
    let latest: Option<String> = tx
        .prepare_cached(
            "SELECT key FROM messages WHERE session = ?1 AND key GLOB 'prompt:*'
             ORDER BY ord DESC LIMIT 1",
        )?
        .query_row([session], |r| r.get(0))
        .optional()?;
    Ok(latest.is_some_and(|k| k.starts_with(&copy.twin_tag())))
}

/// A record as the index reads it: its long strings cut (see [`INDEXED_STRING`]).
pub(crate) fn indexed(record: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    with_long_strings_cut(record, INDEXED_STRING)
}

/// The searchable text of a message's parts, cut at [`BODY_LIMIT`].
pub(crate) fn body(parts: &[Part]) -> String {
    let mut text = Part::joined(parts);
    let cut = prefix_of(&text, BODY_LIMIT).len();
    text.truncate(cut);
    text
}

/// Starts the index's thread: it follows the archive at `db` through `hub` from where the
/// index left off, until the writer ends and every record is indexed. An error is logged and
/// the thread follows again from the index's last commit after a pause (at once when the
/// writer has ended, and only once more then); the archive never waits for it. `exit`
/// disconnects when the thread ends.
pub(crate) fn spawn(
    db: PathBuf,
    hub: Arc<Hub>,
    stop: Option<Arc<AtomicBool>>,
    exit: crossbeam_channel::Sender<()>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("session index".into())
        .spawn(move || {
            // Dropped when the thread ends, however it ends: tells who waits for the index.
            let _exit = exit;
            // Its wake-ups do not preempt a thread with a record on its way, and it keeps a
            // fair share of the cores: the index works here while other threads keep the
            // cores busy, and on an idle-class helper otherwise (`share`). On fewer than
            // four cores, a backfill of this daemon's own goes first (`wait_out_backfill`).
            if let Err(e) = crate::platform::sys::batch_thread_policy() {
                log::debug!("session index: cannot enter the batch scheduling class: {e}");
            }
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let yields = cores < CORES_BESIDE_A_BACKFILL;
            loop {
                let closed_before = hub.is_closed();
                let follower = IndexFollower {
                    hub: &hub,
                    stop: stop.as_deref(),
                    yields,
                };
                let Err(e) = follower.follow(&db) else {
                    return;
                };
                let e = error_chain(&e);
                if closed_before {
                    log::error!("session index: {e}; it catches up at the next start");
                    return;
                }
                log::warn!("session index: {e}; following again in 5s");
                let mut paused = Duration::ZERO;
                while paused < Duration::from_secs(5) && !hub.is_closed() {
                    std::thread::sleep(Duration::from_millis(100));
                    paused += Duration::from_millis(100);
                }
            }
        })
}

/// What the index's thread follows the archive with.
struct IndexFollower<'a> {
    hub: &'a Arc<Hub>,
    /// Set when the daemon stops: the index stops after its batch in hand, and catches
    /// up at the next start, rather than hold the daemon's exit (a service manager's stop
    /// timeout) until it has caught up. Unset for `run --once`, which exits indexed.
    stop: Option<&'a AtomicBool>,
    /// Whether the index waits out a backfill's commits (a machine of fewer than
    /// [`CORES_BESIDE_A_BACKFILL`] cores).
    yields: bool,
}

impl IndexFollower<'_> {
    /// Follows the archive until the hub closes and every record is indexed, or the daemon
    /// stops.
    fn follow(&self, db: &Path) -> Result<()> {
        let mut indexer = Indexer::open(db)?;
        let after = indexer.done()?;
        let hub = Arc::clone(self.hub);
        let follower = Follower::start(hub, Archive::open(db)?, Start::After(after))?;
        let Some(mut follower) = follower.map(|f| f.shrinking(indexed)) else {
            // Closed already (the writer ended first): read what is left directly.
            indexer.catch_up(|_| {})?;
            return Ok(());
        };
        let mut share = share::Share::new(indexer);
        let mut progress = Progress::new(after, self.hub.published());
        // Before reading a batch, and again before indexing it (a backfill may have begun
        // while it was gathered).
        let wait = |f: &Self| !f.yields || f.wait_out_backfill(LONGEST_BACKFILL_WAIT);
        while !self.stopping() && wait(self) {
            let Some(batch) = next_batch(&mut follower)? else {
                if !self.stopping() {
                    share.merge_when_grown();
                }
                if follower.ended() {
                    return Ok(());
                }
                continue;
            };
            if !wait(self) {
                break;
            }
            share.index(ready(batch).map_err(store::index_error(db))?)?;
            progress.update(follower.done(), self.hub.published());
        }
        let (done, published) = (follower.done(), self.hub.published());
        if done < published {
            log::info!(
                "session index: stopping at seq {done} of {published}; it catches up at the next start"
            );
        }
        Ok(())
    }

    fn stopping(&self) -> bool {
        self.stop.is_some_and(|s| s.load(Ordering::Relaxed))
    }

    /// Waits while the archive writer commits a backfill: until no commit of
    /// [`crate::archive::follow::BULK_BYTES`] or more was published for [`BACKFILL_PAUSE`], the writer
    /// has ended, or it has waited `longest`. False if the daemon stops meanwhile.
    fn wait_out_backfill(&self, longest: Duration) -> bool {
        let started = Instant::now();
        let mut waited = false;
        loop {
            if self.stopping() {
                return false;
            }
            let left = (self.hub.since_bulk())
                .map_or(Duration::ZERO, |since| BACKFILL_PAUSE.saturating_sub(since))
                .min(longest.saturating_sub(started.elapsed()));
            if left.is_zero() || self.hub.is_closed() {
                break;
            }
            waited = true;
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
        if waited {
            log::debug!(
                "session index: waited {} ms for a backfill's commits",
                started.elapsed().as_millis()
            );
        }
        true
    }
}

/// The next records to index: waits up to a second for one, then takes what is there, sleeps
/// out the rest of [`GATHER`] and takes what came meanwhile, up to [`BATCH`] records or
/// [`BATCH_BYTES`]. `None` when none came.
///
/// The thread sleeps rather than wait on the live queue: a thread waiting there is woken by
/// every commit, which costs the writer a system call and the other core a wake-up per commit,
/// on the way from an append to the tap (at 200 appends a second, the index thread woke about
/// 200 times a second before, 10 now). What commits meanwhile waits in the queue; past its
/// bound (1,024 commits or 8 MiB), the follower reads it back from the archive instead.
fn next_batch(follower: &mut Follower) -> Result<Option<Vec<ExportRow>>> {
    let Some(first) = follower.next(Duration::from_secs(1))? else {
        return Ok(None);
    };
    let deadline = Instant::now() + GATHER;
    let (mut batch, mut bytes) = (Vec::new(), first.record.len());
    batch.push(first);
    let mut slept = false;
    while batch.len() < BATCH && bytes < BATCH_BYTES {
        match follower.next(Duration::ZERO)? {
            Some(row) => {
                bytes += row.record.len();
                batch.push(row);
            }
            None if slept || follower.ended() => break,
            None => {
                std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                slept = true;
            }
        }
    }
    Ok(Some(batch))
}

/// Log lines while the index is behind by more than a batch: how far it is.
struct Progress {
    behind_at_start: bool,
    last: Instant,
}

impl Progress {
    fn new(done: i64, published: i64) -> Progress {
        let behind_at_start = published - done > BATCH as i64;
        if behind_at_start {
            log::info!("session index: catching up from seq {done} to {published}");
        }
        Progress {
            behind_at_start,
            last: Instant::now(),
        }
    }

    fn update(&mut self, done: i64, published: i64) {
        if !self.behind_at_start {
            return;
        }
        if done >= published {
            log::info!("session index: caught up at seq {done}");
            self.behind_at_start = false;
        } else if self.last.elapsed() >= PROGRESS_EVERY {
            log::info!("session index: at seq {done} of {published}");
            self.last = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Publishes one commit of `bytes` bytes of records, as `seq`.
    fn publish(hub: &Hub, seq: i64, bytes: usize) {
        let batch = crate::archive::RecordBatch {
            source: 1,
            harness: "generic".into(),
            path: "/t/a.jsonl".into(),
            generation: 0,
            read_ms: 0,
            records: vec![crate::domain::Record {
                offset: 0,
                bytes: vec![b' '; bytes],
            }],
        };
        hub.publish(crate::archive::follow::Published::new(
            vec![batch],
            vec![seq],
        ));
    }

    #[test]
    fn the_index_waits_out_a_backfills_commits_until_they_pause_or_the_daemon_stops() {
        let hub = Hub::new(0);
        let stop = AtomicBool::new(false);
        let follower = IndexFollower {
            hub: &hub,
            stop: Some(&stop),
            yields: true,
        };
        let longest = LONGEST_BACKFILL_WAIT;
        publish(&hub, 1, 100);
        assert!(follower.wait_out_backfill(longest), "no backfill: no wait");
        publish(&hub, 2, crate::archive::follow::BULK_BYTES as usize);
        assert!(follower.wait_out_backfill(longest));
        let since = hub.since_bulk().unwrap();
        assert!(since >= BACKFILL_PAUSE, "returned {since:?} after it");
        // A backfill that goes on: no longer than `longest`.
        publish(&hub, 3, crate::archive::follow::BULK_BYTES as usize);
        let started = Instant::now();
        assert!(follower.wait_out_backfill(BACKFILL_PAUSE / 10));
        assert!(started.elapsed() >= BACKFILL_PAUSE / 10);
        let since = hub.since_bulk().unwrap();
        assert!(
            since < BACKFILL_PAUSE,
            "waited {since:?}, not only the longest"
        );
        publish(&hub, 4, crate::archive::follow::BULK_BYTES as usize);
        stop.store(true, Ordering::Relaxed);
        assert!(!follower.wait_out_backfill(longest), "the daemon stops");
    }

    /// Record `seq` of a Claude Code transcript of session `5f1e`, as the archive exports it.
    fn claude_row(seq: i64, record: String) -> ExportRow {
        ExportRow {
            seq,
            source: 1,
            harness: "claude-code".into(),
            path: "/h/.claude/projects/-h-app/5f1e.jsonl".into(),
            generation: 0,
            offset: seq as u64 * 1000,
            record: record.into_bytes(),
        }
    }

    /// A session's counts are of the messages it holds: a copy left out and a message
    /// replaced are not counted again, and one rewound is counted no more; a message replaced
    /// is found by its new text only.
    #[test]
    fn a_sessions_counts_are_of_the_messages_it_holds() {
        let (_dir, mut indexer) = new_indexer();
        let gemini = |seq: i64, record: serde_json::Value| ExportRow {
            seq,
            source: 2,
            harness: "gemini-cli".into(),
            path: "/h/.gemini/tmp/ab12/chats/session-1.json".into(),
            generation: 0,
            offset: seq as u64 * 1000,
            record: record.to_string().into_bytes(),
        };
        let at = "2026-11-30T10:00:00.000Z";
        let rows = vec![
            prompt_row(1),
            prompt_row(2),
            // Prompt 1 again: a copy, left out.
            ExportRow {
                seq: 3,
                ..prompt_row(1)
            },
            gemini(4, serde_json::json!({"sessionId": "g1", "startTime": at})),
            gemini(
                5,
                serde_json::json!({"id": "m1", "type": "user", "content": "first ask", "timestamp": at}),
            ),
            gemini(
                6,
                serde_json::json!({"id": "m2", "type": "gemini", "content": "draft answer", "timestamp": at}),
            ),
            gemini(
                7,
                serde_json::json!({"id": "m3", "type": "user", "content": "second ask", "timestamp": at}),
            ),
        ];
        indexer.index(&ready(rows).unwrap()).unwrap();
        let rows = vec![
            gemini(
                8,
                serde_json::json!({"id": "m2", "type": "gemini", "content": "final answer", "timestamp": at}),
            ),
            gemini(9, serde_json::json!({"$rewindTo": "m3"})),
        ];
        indexer.index(&ready(rows).unwrap()).unwrap();
        let counts: Vec<(String, i64, i64)> = (indexer.conn)
            .prepare(
                "SELECT harness, user_messages, assistant_messages FROM sessions ORDER BY harness",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let want = [("claude-code", 2, 0), ("gemini-cli", 1, 1)];
        let want: Vec<_> = want
            .iter()
            .map(|(h, u, a)| (h.to_string(), *u, *a))
            .collect();
        assert_eq!(counts, want);
        let hits = |q: &str| -> i64 {
            let sql = "SELECT count(*) FROM message_text WHERE message_text MATCH ?1";
            indexer.conn.query_row(sql, [q], |r| r.get(0)).unwrap()
        };
        assert_eq!((hits("final"), hits("draft"), hits("answer")), (1, 0, 1));
        assert_eq!((hits("second"), hits("word1")), (0, 1));
        // Each message's size, replaced with its text, is FTS5's (a varint, one byte here).
        let sizes: Vec<(i64, Vec<u8>)> = (indexer.conn)
            .prepare(
                "SELECT m.places, d.sz FROM messages m JOIN message_text_docsize d ON d.id = m.id",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(sizes.len(), 4);
        for (places, size) in sizes {
            assert_eq!(size.len(), 1);
            assert_eq!(places, i64::from(size[0]));
        }
    }

    /// Stops FTS5 merging `indexer`'s segments, so that every segment written stays to be
    /// counted.
    fn no_merges(indexer: &Indexer) {
        (indexer.conn)
            .execute_batch(
                "INSERT INTO message_text (message_text, rank) VALUES ('automerge', 0);
                 INSERT INTO message_text (message_text, rank) VALUES ('crisismerge', 2000);",
            )
            .unwrap();
    }

    /// Pins why a transaction's text is inserted after its other statements: FTS5 writes
    /// what it holds as a new segment at every statement savepoint, and inserting a message
    /// opens one, so text inserted between messages made a segment (a leaf row at least) per
    /// message, each to be merged again, and indexing took 2–2.4 times as long.
    #[test]
    fn a_transaction_writes_its_messages_text_in_a_few_segments_not_one_each() {
        let (_dir, mut indexer) = new_indexer();
        let rows: Vec<ExportRow> = (1..=200)
            .map(|seq| {
                claude_row(seq, format!(
                    r#"{{"type":"assistant","uuid":"u{seq}","cwd":"/h/app","gitBranch":"main","sessionId":"5f1e","timestamp":"2026-11-30T10:00:00.000Z","message":{{"model":"m1","content":"word{seq} and more"}}}}"#
                ))
            })
            .collect();
        no_merges(&indexer);
        let rows = ready(rows).unwrap();
        assert_eq!(indexer.index_some(&rows).unwrap(), rows.len());
        let count = |sql: &str| -> i64 { indexer.conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(count("SELECT count(*) FROM messages"), 200);
        let hits = "SELECT count(*) FROM message_text WHERE message_text MATCH 'word17'";
        assert_eq!(count(hits), 1);
        let data_rows = count("SELECT count(*) FROM message_text_data");
        assert!(
            data_rows < 20,
            "{data_rows} rows of segments for 200 messages"
        );
    }

    /// An index of 400 prompts of 2.4 kB each, indexed 20 a transaction, so that its segments
    /// are many and a merge frees pages.
    fn index_of_segments() -> (tempfile::TempDir, Indexer) {
        let (dir, db) = archive_of_seqs(400);
        let mut indexer = Indexer::open(&db).unwrap();
        let row = |seq: i64| prompt_of(seq, &format!("word{seq} {}", "filler text ".repeat(200)));
        for first in (1..=400).step_by(20) {
            indexer
                .index(&ready((first..first + 20).map(row)).unwrap())
                .unwrap();
        }
        (dir, indexer)
    }

    fn pragma(indexer: &Indexer, name: &str) -> i64 {
        (indexer.conn.pragma_query_value(None, name, |r| r.get(0))).unwrap()
    }

    /// The pages FTS5's own merges leave free (those of the segments merged, until the index
    /// fills them again) are not counted as the index's size.
    #[test]
    fn the_size_a_merge_is_weighed_against_leaves_out_free_pages() {
        let (_dir, indexer) = index_of_segments();
        (indexer.conn)
            .execute_batch("INSERT INTO message_text (message_text) VALUES ('optimize')")
            .unwrap();
        let pages = pragma(&indexer, "page_count");
        let free = pragma(&indexer, "freelist_count");
        assert!(free > 0, "the merge left pages free");
        let live = (pages - free) * pragma(&indexer, "page_size");
        assert_eq!(live_bytes(&indexer.conn).unwrap(), live);
    }

    /// The index's merge gives the pages it freed back to the filesystem: the file is no
    /// larger than the pages it uses.
    #[test]
    fn a_merge_gives_the_pages_it_freed_back() {
        let (_dir, mut indexer) = index_of_segments();
        let before = pragma(&indexer, "page_count");
        let given = indexer.merge().unwrap();
        assert_eq!(pragma(&indexer, "freelist_count"), 0);
        let pages = pragma(&indexer, "page_count");
        assert!(
            pages < before,
            "{pages} pages after the merge, {before} before"
        );
        let size = pragma(&indexer, "page_size");
        // The merge's new segment took pages of its own before the file was cut.
        assert!(
            given > ((before - pages) * size) as u64,
            "{given} bytes given back"
        );
        let file = std::fs::metadata(store::path_of(indexer.archive.path())).unwrap();
        assert_eq!(file.len() as i64, pages * size, "the file cut short");
    }

    /// An index file made by a build that did not set it to give pages back is set to when
    /// it is emptied to be built again, and, when it is not, at its next merge.
    #[test]
    fn an_index_file_made_without_giving_pages_back_is_set_to() {
        let (_dir, db) = archive_of_seqs(400);
        let old = rusqlite::Connection::open(store::path_of(&db)).unwrap();
        old.execute_batch("PRAGMA auto_vacuum = NONE; CREATE TABLE earlier (x);")
            .unwrap();
        drop(old);
        let mut indexer = Indexer::open(&db).unwrap();
        assert_eq!(pragma(&indexer, "auto_vacuum"), 2, "set as it is emptied");
        assert_eq!(pragma(&indexer, "freelist_count"), 0);

        (indexer.conn)
            .execute_batch("PRAGMA auto_vacuum = NONE; VACUUM;")
            .unwrap();
        assert_eq!(pragma(&indexer, "auto_vacuum"), 0);
        for first in (1..=400).step_by(20) {
            let rows = (first..first + 20).map(|seq| prompt_of(seq, &"filler ".repeat(400)));
            indexer.index(&ready(rows).unwrap()).unwrap();
        }
        indexer.merge().unwrap();
        assert_eq!(pragma(&indexer, "auto_vacuum"), 2, "set at the merge");
        assert_eq!(pragma(&indexer, "freelist_count"), 0);
    }

    /// An indexer of a new, empty archive (in the directory returned).
    fn new_indexer() -> (tempfile::TempDir, Indexer) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("archive.db");
        drop(Archive::open(&db).unwrap());
        let indexer = Indexer::open(&db).unwrap();
        (dir, indexer)
    }

    /// A prompt of the Claude Code session of [`claude_row`], `content`, at `seq`.
    fn prompt_of(seq: i64, content: &str) -> ExportRow {
        let record = serde_json::json!({"type": "user", "uuid": format!("u{seq}"),
            "sessionId": "5f1e", "message": {"role": "user", "content": content}});
        claude_row(seq, record.to_string())
    }

    /// A prompt of the Claude Code session of [`claude_row`], `word{seq}`, at `seq`.
    fn prompt_row(seq: i64) -> ExportRow {
        prompt_of(seq, &format!("word{seq}"))
    }

    /// An archive whose records are seqs 1 to `last` (each `{}`): an index of records up to
    /// them is its own (`store::make_ready` builds again an index past the archive's end).
    fn archive_of_seqs(last: i64) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("archive.db");
        let mut archive = Archive::open(&db).unwrap();
        let conn = archive.connection();
        conn.execute(
            "INSERT INTO sources (id, dev, ino, path, harness, generation, gone, created_ms)
             VALUES (1, 1, 1, x'2f61', 'claude-code', 0, 0, 0)",
            [],
        )
        .unwrap();
        for seq in 1..=last {
            conn.execute(
                "INSERT INTO records (seq, source_id, generation, offset, record)
                 VALUES (?1, 1, 0, ?1, x'7b7d')",
                [seq],
            )
            .unwrap();
        }
        (dir, db)
    }

    /// A build stopped after its last transaction, before it had nothing to do, ends at the
    /// next catch-up, which finds nothing to index.
    #[test]
    fn a_build_stopped_after_its_last_record_ends_at_the_next_catch_up() {
        let (_dir, db) = archive_of_seqs(3);
        let mut indexer = Indexer::open(&db).unwrap();
        for seq in 1..=3 {
            indexer.index(&ready([prompt_row(seq)]).unwrap()).unwrap();
        }
        drop(indexer);
        let mut indexer = Indexer::open(&db).unwrap();
        assert!(indexer.building);
        let mut heard = Vec::new();
        assert_eq!(indexer.catch_up(|step| heard.push(step)).unwrap(), 0);
        assert_eq!(heard, [CatchUp::Merging], "the merge is told");
        assert!(!indexer.building);
        assert!(!store::building(&indexer.conn).unwrap());
        let segments = "SELECT count(DISTINCT segid) FROM message_text_idx";
        let n: i64 = indexer.conn.query_row(segments, [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1);
    }

    /// A catch-up tells how far it is after each page, and when it merges the segments: the
    /// merge that ends a build, with no record to count, is not left to look like a stall.
    #[test]
    fn a_catch_up_tells_of_its_pages_and_of_its_merge() {
        let (_dir, db) = archive_of_seqs(3);
        let mut indexer = Indexer::open(&db).unwrap();
        let mut heard = Vec::new();
        assert_eq!(indexer.catch_up(|step| heard.push(step)).unwrap(), 3);
        let indexed = CatchUp::Indexed { at: 3, last: 3 };
        assert_eq!(heard, [indexed, CatchUp::Merging]);
        heard.clear();
        assert_eq!(indexer.catch_up(|step| heard.push(step)).unwrap(), 0);
        assert!(heard.is_empty(), "no merge due: {heard:?}");
    }

    /// An index built from nothing writes a segment a transaction and merges none of them
    /// (FTS5 would merge a level of sixteen), until it first has nothing to do, and then all
    /// into one; a build stopped halfway goes on as one when the index is opened again; a
    /// built index merges as FTS5 does.
    #[test]
    fn an_index_built_from_nothing_merges_its_segments_once_at_the_end() {
        let (_dir, db) = archive_of_seqs(41);
        let count = |indexer: &Indexer, sql: &str| -> i64 {
            indexer.conn.query_row(sql, [], |r| r.get(0)).unwrap()
        };
        let segments = "SELECT count(DISTINCT segid) FROM message_text_idx";
        let mut indexer = Indexer::open(&db).unwrap();
        for seq in 1..=20 {
            indexer.index(&ready([prompt_row(seq)]).unwrap()).unwrap();
        }
        assert_eq!(count(&indexer, segments), 20, "none merged as it is built");
        drop(indexer);
        let mut indexer = Indexer::open(&db).unwrap();
        assert!(indexer.building, "a build stopped halfway goes on");
        indexer.index(&ready([prompt_row(21)]).unwrap()).unwrap();
        assert_eq!(count(&indexer, segments), 21);
        indexer.merge_when_grown();
        assert_eq!(count(&indexer, segments), 1, "merged at the end");
        let hits = "SELECT count(*) FROM message_text WHERE message_text MATCH 'word1 OR word21'";
        assert_eq!(count(&indexer, hits), 2);
        drop(indexer);
        let mut indexer = Indexer::open(&db).unwrap();
        assert!(!indexer.building, "built");
        for seq in 22..=41 {
            indexer.index(&ready([prompt_row(seq)]).unwrap()).unwrap();
        }
        let after = count(&indexer, segments);
        assert!(
            after < 20,
            "{after} segments: merged as FTS5 does once built"
        );
    }

    /// Segments are merged into one once enough was indexed since they last were, not before.
    #[test]
    fn the_search_segments_are_merged_into_one_once_enough_was_indexed() {
        let (_dir, mut indexer) = new_indexer();
        indexer.merge_when_grown();
        assert!(!indexer.building, "a build of nothing ended");
        no_merges(&indexer);
        let row = prompt_row;
        for seq in 1..=5 {
            indexer.index(&ready([row(seq)]).unwrap()).unwrap();
        }
        let count = |indexer: &Indexer, sql: &str| -> i64 {
            indexer.conn.query_row(sql, [], |r| r.get(0)).unwrap()
        };
        let segments = "SELECT count(DISTINCT segid) FROM message_text_idx";
        assert_eq!(count(&indexer, segments), 5, "a segment a transaction");
        indexer.merge_when_grown();
        assert_eq!(count(&indexer, segments), 5, "too little indexed to merge");
        indexer.unmerged = MERGE_AFTER - 1;
        indexer.index(&ready([row(6)]).unwrap()).unwrap();
        indexer.merge_when_grown();
        assert_eq!(count(&indexer, segments), 1);
        let hits = "SELECT count(*) FROM message_text WHERE message_text MATCH 'word3 OR word6'";
        assert_eq!(count(&indexer, hits), 2);
        indexer.index(&ready([row(7)]).unwrap()).unwrap();
        indexer.merge_when_grown();
        assert_eq!(count(&indexer, segments), 2, "counted again from the merge");
        let gib: i64 = 1 << 30;
        assert!(
            !merge_due(MERGE_AFTER, gib / 2 + 1),
            "less than twice the index's size"
        );
        assert!(merge_due(gib as usize, gib / 2));
    }

    /// The merge empties the index's log and leaves the archive's alone: a checkpoint of
    /// every attached file failed (a write through the archive's read-only handle) whenever
    /// the archive's log held pages, as after a `run --once`.
    #[test]
    fn a_merge_checkpoints_the_index_not_the_archive_it_reads() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("archive.db");
        let mut archive = Archive::open(&db).unwrap();
        archive
            .connection()
            .execute_batch(
                "INSERT INTO sources (id, dev, ino, path, harness, generation, gone, created_ms)
                     VALUES (1, 1, 1, x'2f61', 'codex', 0, 0, 0);",
            )
            .unwrap();
        let wal_bytes = |suffix: &str| {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            std::fs::metadata(PathBuf::from(name)).unwrap().len()
        };
        assert!(wal_bytes("-wal") > 0, "the archive's log holds its pages");
        let mut indexer = Indexer::open(&db).unwrap();
        indexer
            .index(&ready([prompt_of(1, "hello")]).unwrap())
            .unwrap();
        assert!(wal_bytes("-index-wal") > 0);
        indexer.merge().expect("merged and checkpointed");
        assert_eq!(wal_bytes("-index-wal"), 0, "the index's log emptied");
        assert!(wal_bytes("-wal") > 0, "the archive's left to its writer");
    }

    /// A session's row is written once per transaction, from what its records said folded
    /// in order: the same as had each record been applied on its own.
    #[test]
    fn a_session_folded_over_a_transaction_is_as_if_each_record_were_applied_alone() {
        let records = [
            r#"{"type":"summary","summary":"First summary"}"#,
            r#"{"type":"user","uuid":"u1","sessionId":"5f1e","cwd":"/h/app","gitBranch":"main","timestamp":"2026-11-30T10:05:00.000Z","message":{"role":"user","content":"fix the build"}}"#,
            r#"{"type":"custom-title","customTitle":"Given by the user"}"#,
            r#"{"type":"assistant","uuid":"a1","sessionId":"5f1e","cwd":"/h/other","gitBranch":"fix","timestamp":"2026-11-30T10:01:00.000Z","message":{"model":"m1","content":"on it"}}"#,
            r#"{"type":"ai-title","aiTitle":"Lower rank, later"}"#,
            r#"{"type":"user","uuid":"u2","sessionId":"5f1e","cwd":"/h/app","timestamp":"2026-11-30T10:09:00.000Z","message":{"role":"user","content":"and the tests"}}"#,
            r#"{"type":"custom-title","customTitle":"Renamed"}"#,
            r#"{"type":"assistant","uuid":"a2","sessionId":"5f1e","timestamp":"2026-11-30T10:08:00.000Z","message":{"model":"m2","content":"done"}}"#,
            r#"{"type":"assistant","uuid":"a3","sessionId":"5f1e","message":{"model":"m1","content":"again"}}"#,
        ];
        let rows = || {
            let rows = (records.iter().zip(1..)).map(|(r, seq)| claude_row(seq, r.to_string()));
            ready(rows).unwrap()
        };
        let sessions = |one_by_one: bool| {
            let (_dir, mut indexer) = new_indexer();
            let rows = rows();
            if one_by_one {
                for row in rows.chunks(1) {
                    assert_eq!(indexer.index_some(row).unwrap(), 1);
                }
            } else {
                assert_eq!(indexer.index_some(&rows).unwrap(), rows.len());
            }
            let row: Vec<String> = (indexer.conn)
                .query_row(
                    "SELECT project, branch, agent_title, title_rank, first_prompt, started_ms,
                        last_ms, user_messages, assistant_messages,
                        (SELECT group_concat(model) FROM session_models)
                     FROM sessions",
                    [],
                    |r| {
                        (0..10)
                            .map(|i| {
                                r.get::<_, rusqlite::types::Value>(i)
                                    .map(|v| format!("{v:?}"))
                            })
                            .collect()
                    },
                )
                .unwrap();
            row
        };
        let alone = sessions(true);
        assert_eq!(alone[2], r#"Text("Renamed")"#, "{alone:?}");
        assert_eq!(alone[1], r#"Text("fix")"#, "{alone:?}");
        assert_eq!(sessions(false), alone);
    }
}
