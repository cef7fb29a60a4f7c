//! Reading the session index: sessions newest first, one session by id or prefix, its
//! messages with their records, and full-text search.

use crate::agents::message::parse;
use crate::archive::machines::MachineRow;
use crate::archive::{Archive, Records, path_from_blob};
use crate::consumers::redact::Redactor;
use crate::consumers::sessions::body;
use crate::consumers::sessions::indexed;
use crate::consumers::sessions::words;
use crate::error::{Error, Result};
pub(crate) use crate::platform::time::format_time;
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;
use std::path::PathBuf;

/// Which sessions (or search hits) to list.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    /// Only this watcher's.
    pub harness: Option<String>,
    /// Only those whose project contains this text (case-insensitive).
    pub project: Option<String>,
    /// Only those active since this time (Unix ms).
    pub since_ms: Option<i64>,
    /// Only this machine's: 0 for this one, else a pulled machine's id ([`machine_named`]).
    pub machine: Option<i64>,
    /// At most this many (0: all).
    pub limit: usize,
    /// Past this many first ones (a page of a list).
    pub offset: usize,
}

impl Filter {
    /// The limit as SQL's `LIMIT` takes it: -1 for all.
    fn sql_limit(&self) -> i64 {
        match self.limit {
            0 => -1,
            n => n as i64,
        }
    }
}

/// One session as listed.
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Session {
    /// The index's own key for it.
    #[serde(skip)]
    pub key: i64,
    /// The agent's id.
    pub id: String,
    /// The host name of the machine that wrote it (this one's, or a pulled machine's label).
    pub machine: String,
    /// Its machine in this archive: 0 for this one.
    #[serde(skip)]
    pub machine_id: i64,
    /// The project's git remote, where it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_remote: Option<String>,
    /// Its watcher.
    pub harness: String,
    /// The project directory (or the agent's name for it).
    pub project: Option<String>,
    /// The title the agent recorded, else the first prompt typed.
    pub title: Option<String>,
    /// The git branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The first activity (Unix ms): the records' own times, else its files' modification
    /// times (a pulled file's: when it was first archived), never when it was indexed.
    #[serde(serialize_with = "rfc3339")]
    pub started: Option<i64>,
    /// The last activity.
    #[serde(serialize_with = "rfc3339")]
    pub last_activity: Option<i64>,
    /// User and assistant messages, each copy once.
    pub messages: i64,
    /// Of which the user's.
    pub user_messages: i64,
    /// Of which the assistant's.
    pub assistant_messages: i64,
    /// Compactions.
    pub compactions: i64,
    /// Records that could not be read as messages.
    pub unparsed: i64,
    /// Archived records of its files.
    pub records: i64,
    /// The models that answered.
    pub models: Vec<String>,
    /// The parent session's id, for a subagent.
    pub parent: Option<String>,
    /// How many subagents it has.
    pub subagents: i64,
    /// Its files' current paths.
    pub files: Vec<PathBuf>,
    /// Whether any of them still exists where it was.
    pub on_disk: bool,
    /// Whether any of its sources is live (not recorded as gone).
    #[serde(skip)]
    live: bool,
}

impl Session {
    /// Replaces any secret in its text (a title is often the first prompt).
    pub(crate) fn redact(&mut self, redactor: &Redactor) {
        redact_each(
            redactor,
            [&mut self.title, &mut self.project, &mut self.branch],
        );
    }
}

/// Replaces any secret in each of `texts`.
fn redact_each(redactor: &Redactor, texts: [&mut Option<String>; 3]) {
    for text in texts.into_iter().flatten() {
        redactor.redact_text_in_place(text);
    }
}

fn rfc3339<S: serde::Serializer>(ms: &Option<i64>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => s.serialize_str(&format_time(*ms)),
        None => s.serialize_none(),
    }
}

/// The columns of a [`Session`], from `sessions se` with what its sources say aggregated once
/// for all sessions (`last` is the last activity), to be followed by its `WHERE`.
const SESSION: &str = "
    WITH files AS (
        SELECT session, min(created) AS created, max(modified) AS modified,
            sum(records) AS records, group_concat(path, char(0)) AS paths,
            max(NOT gone) AS live
        FROM (SELECT ss.session, s.records, s.path, s.gone,
                coalesce(c.mtime_ns / 1000000, s.created_ms) AS created,
                coalesce(c.mtime_ns / 1000000, s.last_archived_ms) AS modified
              FROM session_sources ss JOIN sources s ON s.id = ss.source_id
              LEFT JOIN cursors c ON c.source_id = s.id ORDER BY s.id)
        GROUP BY session),
    models AS (
        SELECT session, group_concat(model, char(10)) AS models FROM session_models
        GROUP BY session),
    children AS (
        SELECT machine, harness, parent, count(*) AS n FROM sessions WHERE parent IS NOT NULL
        GROUP BY machine, harness, parent)
    SELECT se.id, se.session, se.harness, se.project, coalesce(se.agent_title, se.first_prompt),
        se.branch, coalesce(se.started_ms, f.created) AS started,
        coalesce(se.last_ms, f.modified) AS last,
        se.user_messages, se.assistant_messages, se.compactions, se.unparsed,
        coalesce(f.records, 0), m.models, se.parent, coalesce(c.n, 0), f.paths,
        se.machine, coalesce(se.git_remote, ps.git_remote), coalesce(f.live, 0)
    FROM sessions se
    LEFT JOIN files f ON f.session = se.id
    LEFT JOIN models m ON m.session = se.id
    LEFT JOIN children c
        ON c.machine = se.machine AND c.harness = se.harness AND c.parent = se.session
    LEFT JOIN pulled_sessions ps
        ON ps.machine = se.machine AND ps.harness = se.harness AND ps.session = se.session";

fn session_row(r: &rusqlite::Row) -> rusqlite::Result<Session> {
    let (user, assistant): (i64, i64) = (r.get(8)?, r.get(9)?);
    let models: Option<String> = r.get(13)?;
    let machine_id: i64 = r.get(17)?;
    Ok(Session {
        key: r.get(0)?,
        id: r.get(1)?,
        // Named by `collect`, from the archive's machines.
        machine: String::new(),
        machine_id,
        git_remote: r.get(18)?,
        harness: r.get(2)?,
        project: r.get(3)?,
        title: r.get(4)?,
        branch: r.get(5)?,
        started: r.get(6)?,
        last_activity: r.get(7)?,
        messages: user + assistant,
        user_messages: user,
        assistant_messages: assistant,
        compactions: r.get(10)?,
        unparsed: r.get(11)?,
        records: r.get(12)?,
        models: models.map_or_else(Vec::new, |m| m.lines().map(str::to_owned).collect()),
        parent: r.get(14)?,
        subagents: r.get(15)?,
        files: paths(r.get_ref(16)?.as_bytes_or_null()?),
        on_disk: false,
        live: r.get(19)?,
    })
}

/// The name of each machine by its id here: a pulled machine's host name, else (id 0)
/// this one's.
pub(crate) struct MachineNames(HashMap<i64, String>);

impl MachineNames {
    pub(crate) fn of(archive: &Archive) -> Result<MachineNames> {
        let machines = archive.machines()?.into_iter();
        Ok(MachineNames(machines.map(|m| (m.id, m.host)).collect()))
    }

    pub(crate) fn name(&self, id: i64) -> String {
        (self.0.get(&id).cloned()).unwrap_or_else(crate::platform::sys::host_name)
    }
}

/// The paths of `group_concat(path, char(0))`, each once, in their order.
fn paths(joined: Option<&[u8]>) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for p in joined.unwrap_or_default().split(|b| *b == 0) {
        let path = path_from_blob(p.to_vec());
        if !p.is_empty() && !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

/// The `WHERE` of the sessions listed: top-level sessions (and subagents whose parent is not
/// in the archive) of watcher `?1`, project `?2` and machine `?5`.
const LISTED: &str = "
    WHERE (se.parent IS NULL OR NOT EXISTS (SELECT 1 FROM sessions p
            WHERE p.machine = se.machine AND p.harness = se.harness
              AND p.session = se.parent))
      AND (?1 IS NULL OR se.harness = ?1)
      AND (?2 IS NULL OR instr(lower(se.project), lower(?2)) > 0)
      AND (?5 IS NULL OR se.machine = ?5)";

/// Top-level sessions (and subagents whose parent is not in the archive), newest activity
/// first.
pub(crate) fn sessions(archive: &mut Archive, filter: &Filter) -> Result<Vec<Session>> {
    let sql = format!(
        "SELECT * FROM ({SESSION} {LISTED})
         WHERE (?3 IS NULL OR last >= ?3)
         ORDER BY last IS NULL, last DESC, 1 DESC
         LIMIT ?4 OFFSET ?6"
    );
    let limit = filter.sql_limit();
    let args = params![
        filter.harness,
        filter.project,
        filter.since_ms,
        limit,
        filter.machine,
        filter.offset as i64
    ];
    collect(archive, &sql, args)
}

/// How many sessions [`sessions`] lists with `filter` when it has no time (`since_ms` and
/// the limit are not read): counted from the sessions alone.
pub(crate) fn sessions_count(archive: &mut Archive, filter: &Filter) -> Result<usize> {
    let sql = format!("SELECT count(*) FROM sessions se {LISTED}");
    // `?3` and `?4` are not in the SQL; SQLite counts them all the same.
    let none = None::<i64>;
    let args = params![filter.harness, filter.project, none, none, filter.machine];
    let result = (archive.connection()).query_row(&sql, args, |r| r.get::<_, i64>(0));
    archive.db(result).map(|n| n as usize)
}

/// The subagents of `parent`, oldest first.
pub(crate) fn subagents(archive: &mut Archive, parent: &Session) -> Result<Vec<Session>> {
    let sql = format!(
        "{SESSION} WHERE se.machine = ?3 AND se.harness = ?1 AND se.parent = ?2
         ORDER BY started, 1"
    );
    let args = params![parent.harness, parent.id, parent.machine_id];
    collect(archive, &sql, args)
}

fn collect(
    archive: &mut Archive,
    sql: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<Vec<Session>> {
    let names = MachineNames::of(archive)?;
    let result = (|| {
        let conn = archive.connection();
        let mut stmt = conn.prepare_cached(sql)?;
        let mut list = stmt
            .query_map(args, session_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        for s in &mut list {
            // A session in an agent's database (`<database>/<session id>`) is there while its
            // database is and the daemon has not found it gone from it.
            let in_database = |f: &PathBuf| f.parent().is_some_and(std::path::Path::is_file);
            s.on_disk = (s.files.iter()).any(|f| f.exists() || (s.live && in_database(f)));
            s.machine = names.name(s.machine_id);
        }
        Ok(list)
    })();
    archive.db(result)
}

/// The harness names of the index's sessions (of every machine), sorted, each once.
pub(crate) fn harnesses(archive: &mut Archive) -> Result<Vec<String>> {
    strings(archive, "SELECT DISTINCT harness FROM sessions ORDER BY 1")
}

/// Every session id in the index (of every machine), sorted, each once.
pub(crate) fn session_ids(archive: &mut Archive) -> Result<Vec<String>> {
    strings(archive, "SELECT DISTINCT session FROM sessions ORDER BY 1")
}

/// The text values `sql` selects, in its order.
fn strings(archive: &mut Archive, sql: &str) -> Result<Vec<String>> {
    let result = (|| {
        let mut stmt = archive.connection().prepare_cached(sql)?;
        stmt.query_map([], |r| r.get(0))?.collect()
    })();
    archive.db(result)
}

/// What an id or prefix names.
pub(crate) enum Found {
    /// One session.
    One(Box<Session>),
    /// Several: the candidates.
    Many(Vec<Session>),
    /// None.
    None,
}

/// The session whose id is `text`, or starts with it (subagents included), of `machine`'s
/// sessions (0 for this machine's, `None` for every machine's). An id that two machines share
/// (a session restored on one and carried on there) names both.
pub(crate) fn find(archive: &mut Archive, text: &str, machine: Option<i64>) -> Result<Found> {
    let sql = format!(
        "{SESSION} WHERE (se.session = ?1
            OR (length(?1) >= 4 AND substr(se.session, 1, length(?1)) = ?1))
            AND (?2 IS NULL OR se.machine = ?2)
         ORDER BY se.session = ?1 DESC, 1"
    );
    let mut found = collect(archive, &sql, params![text, machine])?;
    // A prefix of a session's id starts the ids of the files in its folder too (Claude Code's
    // `<session>/subagents/workflows/…`), which extend it: it names the session.
    let shortest = found.iter().map(|s| s.id.clone()).min_by_key(String::len);
    if let Some(shortest) = shortest
        && found.iter().all(|s| s.id.starts_with(&shortest))
    {
        found.retain(|s| s.id == shortest);
    }
    let exact = found.iter().filter(|s| s.id == text).count();
    Ok(match found.len() {
        0 => Found::None,
        _ if exact == 1 => Found::One(Box::new(found.swap_remove(0))),
        1 => Found::One(Box::new(found.swap_remove(0))),
        _ if exact > 1 => Found::Many(found.into_iter().filter(|s| s.id == text).collect()),
        _ => Found::Many(found),
    })
}

/// The machine `name` names, for [`Filter::machine`]: `None` for `all`, 0 for `this` (or
/// this machine's host name), else the pulled machine whose host name is `name` or whose UUID
/// starts with it.
pub(crate) fn machine_named(archive: &Archive, name: &str) -> Result<Option<i64>> {
    if name == "all" {
        return Ok(None);
    }
    if name == "this" || name == crate::platform::sys::host_name() {
        return Ok(Some(0));
    }
    let machines = archive.machines()?;
    let named = |m: &&MachineRow| m.host == name || (name.len() >= 4 && m.uuid.starts_with(name));
    let found: Vec<i64> = machines.iter().filter(named).map(|m| m.id).collect();
    let known = || -> Result<Vec<String>> {
        Ok(machines
            .iter()
            .map(|m| format!("{} ({})", m.host, m.uuid))
            .collect())
    };
    match found.as_slice() {
        [id] => Ok(Some(*id)),
        [] => Err(Error::NoSuchMachine {
            name: name.to_owned(),
            known: known()?,
        }),
        _ => Err(Error::NoSuchMachine {
            name: format!("{name} (it names several; give more of a UUID)"),
            known: known()?,
        }),
    }
}

/// The title of the session `session` of watcher `harness` on machine `machine` (the agent's,
/// else its first prompt), as listed.
pub(crate) fn title(
    archive: &mut Archive,
    machine: i64,
    harness: &str,
    session: &str,
) -> Result<Option<String>> {
    let result = (|| {
        let mut stmt = archive.connection().prepare_cached(
            "SELECT coalesce(agent_title, first_prompt) FROM sessions
             WHERE machine = ?1 AND harness = ?2 AND session = ?3",
        )?;
        let title = stmt.query_row(params![machine, harness, session], |r| r.get(0));
        title.optional().map(Option::flatten)
    })();
    archive.db(result)
}

/// A message of a session with its record.
pub(crate) struct MessageRecord {
    /// The record's seq.
    pub seq: i64,
    /// Who speaks.
    pub role: String,
    /// When (Unix ms), if the record says.
    pub at_ms: Option<i64>,
    /// The record's watcher.
    pub harness: String,
    /// The record.
    pub record: Vec<u8>,
}

impl MessageRecord {
    /// Replaces any secret in its record.
    pub(crate) fn redact(&mut self, redactor: &Redactor) {
        redactor.redact_record_in_place(&mut self.record);
    }
}

/// A session's messages in order, after de-duplication and upserts.
pub(crate) fn messages(archive: &mut Archive, session: &Session) -> Result<Vec<MessageRecord>> {
    messages_window(archive, session, 0, None)
}

/// `limit` of a session's messages (all: `None`) from the `offset`th on, in order.
pub(crate) fn messages_window(
    archive: &mut Archive,
    session: &Session,
    offset: usize,
    limit: Option<usize>,
) -> Result<Vec<MessageRecord>> {
    let records = archive.records_reader();
    let limit = limit.map_or(-1, |n| n as i64);
    let result = (|| {
        let mut stmt = records.connection().prepare_cached(
            "SELECT m.seq, m.role, m.at_ms, s.harness, r.record FROM messages m
             JOIN records r ON r.seq = m.seq JOIN sources s ON s.id = r.source_id
             WHERE m.session = ?1 ORDER BY m.ord LIMIT ?2 OFFSET ?3",
        )?;
        let rows = stmt.query_map(params![session.key, limit, offset as i64], |r| {
            let seq = r.get(0)?;
            Ok(MessageRecord {
                seq,
                role: r.get(1)?,
                at_ms: r.get(2)?,
                harness: r.get(3)?,
                record: records.record(r, 4, seq)?,
            })
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
    })();
    archive.db(result)
}

/// How many of a session's messages come before the one of record `seq` (`None`: no
/// message of the session is that record).
pub(crate) fn message_position(
    archive: &mut Archive,
    session: &Session,
    seq: i64,
) -> Result<Option<usize>> {
    let result = (|| {
        let conn = archive.connection();
        let ord: Option<i64> = conn
            .query_row(
                "SELECT ord FROM messages WHERE session = ?1 AND seq = ?2",
                params![session.key, seq],
                |r| r.get(0),
            )
            .optional()?;
        let Some(ord) = ord else { return Ok(None) };
        let before: i64 = conn.query_row(
            "SELECT count(*) FROM messages WHERE session = ?1 AND ord < ?2",
            params![session.key, ord],
            |r| r.get(0),
        )?;
        Ok(Some(before as usize))
    })();
    archive.db(result)
}

/// A session's file as archived: where it is, and the sources whose latest generations make
/// it up, in file order.
pub(crate) struct SessionFile {
    /// Its current path.
    pub path: PathBuf,
    /// (source, generation) pieces: the first holds the file from its start; each later one
    /// continues it (a file restored, marked as history, then appended to, is a new source
    /// whose records start past the restored ones).
    pub pieces: Vec<(i64, i64)>,
}

/// The files of a session, each with the sources that make it up.
pub(crate) fn session_files(archive: &mut Archive, session: &Session) -> Result<Vec<SessionFile>> {
    let result = (|| {
        let conn = archive.connection();
        let mut stmt = conn.prepare(
            "SELECT s.id, s.path, s.generation,
                (SELECT min(r.offset) FROM records r
                 WHERE r.source_id = s.id AND r.generation = s.generation)
             FROM session_sources ss JOIN sources s ON s.id = ss.source_id
             WHERE ss.session = ?1 ORDER BY s.id",
        )?;
        let rows = stmt.query_map([session.key], |r| {
            let path = path_from_blob(r.get(1)?);
            Ok((path, (r.get(0)?, r.get(2)?), r.get::<_, Option<i64>>(3)?))
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
    })();
    Ok(assemble(archive.db(result)?))
}

/// The files of a session (as [`session_files`]) with its transcript first: the file that
/// holds the most of its messages, so that an agent that keeps a manifest or what it showed
/// beside the conversation (Cline's `<id>.json`, its `ui_messages.json`) is read by its
/// conversation. The others keep their order.
pub(crate) fn files_transcript_first(
    archive: &mut Archive,
    session: &Session,
) -> Result<Vec<SessionFile>> {
    let mut files = session_files(archive, session)?;
    if files.len() < 2 {
        return Ok(files);
    }
    let result = (|| {
        let conn = archive.connection();
        let mut stmt = conn.prepare(
            "SELECT r.source_id, count(*) FROM messages m JOIN records r ON r.seq = m.seq
             WHERE m.session = ?1 GROUP BY r.source_id",
        )?;
        let rows = stmt.query_map([session.key], |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<HashMap<i64, i64>>>()
    })();
    let per_source = archive.db(result)?;
    let messages = |f: &SessionFile| -> i64 {
        (f.pieces.iter())
            .filter_map(|(source, _)| per_source.get(source))
            .sum()
    };
    // The first of those with the most, as `max_by_key` would give the last.
    let most = (files.iter().map(messages)).max().unwrap_or(0);
    if let Some(at) = files.iter().position(|f| messages(f) == most) {
        let transcript = files.remove(at);
        files.insert(0, transcript);
    }
    Ok(files)
}

/// The empty files of this machine that `harness`'s watcher archived in the directories
/// `dirs`: paths whose latest source holds no record, no reject and no state. An empty file
/// beside a session's files (a log segment not yet written to, which the agent expects to
/// find) holds nothing to link it to its session but where it is.
pub(crate) fn empty_files_in(
    archive: &mut Archive,
    harness: &str,
    dirs: &[PathBuf],
) -> Result<Vec<PathBuf>> {
    let result = (|| {
        let conn = archive.connection();
        let mut stmt = conn.prepare(
            "SELECT DISTINCT path FROM sources s WHERE harness = ?1 AND machine = 0
             AND records = 0 AND rejects = 0
             AND id = (SELECT max(id) FROM sources t WHERE t.path = s.path AND t.machine = 0)
             AND NOT EXISTS (SELECT 1 FROM snapshots WHERE source_id = s.id)
             ORDER BY path",
        )?;
        let rows = stmt.query_map([harness], |r| Ok(path_from_blob(r.get(0)?)))?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
    })();
    let mut paths = archive.db(result)?;
    paths.retain(|p| p.parent().is_some_and(|d| dirs.iter().any(|w| w == d)));
    Ok(paths)
}

/// Files from their sources in id order: a source whose records start at offset 0 is the
/// file from its start (a later one replaces what came before at its path); one that starts
/// past 0 continues it; one without records adds nothing.
fn assemble(sources: Vec<(PathBuf, (i64, i64), Option<i64>)>) -> Vec<SessionFile> {
    let mut files: Vec<SessionFile> = Vec::new();
    for (path, piece, first) in sources {
        let Some(first) = first else { continue };
        match files.iter_mut().find(|f| f.path == path) {
            Some(file) if first > 0 => file.pieces.push(piece),
            Some(file) => file.pieces = vec![piece],
            None => files.push(SessionFile {
                path,
                pieces: vec![piece],
            }),
        }
    }
    files
}

/// The latest captured state of `file`, when it is a snapshot source (a file its agent
/// rewrites whole).
pub(crate) fn snapshot_of(archive: &Archive, file: &SessionFile) -> Result<Option<Vec<u8>>> {
    match file.pieces.last() {
        Some(&(source, _)) => archive.latest_snapshot(source),
        None => Ok(None),
    }
}

/// Writes the records of `file` to `out`, piece by piece, each piece's latest generation in
/// file order, each record with its `\n`: the transcript as archived. A snapshot source (a
/// file its agent rewrites whole) is written as its latest captured state instead: the file
/// as the agent last kept it. Returns the bytes written; the inner `Err` is `out`'s.
pub(crate) fn write_records(
    archive: &mut Archive,
    file: &SessionFile,
    redactor: Option<&Redactor>,
    out: &mut impl std::io::Write,
) -> Result<std::io::Result<u64>> {
    if let Some(state) = snapshot_of(archive, file)? {
        let state = match redactor {
            Some(redactor) => redactor.redact_record(&state),
            None => std::borrow::Cow::Borrowed(&state[..]),
        };
        return Ok(out.write_all(&state).map(|()| state.len() as u64));
    }
    let records = archive.records_reader();
    let result = (|| {
        let mut stmt = records.connection().prepare_cached(
            "SELECT seq, record FROM records WHERE source_id = ?1 AND generation = ?2
             ORDER BY offset",
        )?;
        let mut written = 0;
        for (source, generation) in &file.pieces {
            let mut rows = stmt.query(params![source, generation])?;
            while let Some(r) = rows.next()? {
                let record = records.record(r, 1, r.get(0)?)?;
                let record = match redactor {
                    Some(redactor) => redactor.redact_record(&record),
                    None => std::borrow::Cow::Borrowed(&record[..]),
                };
                if let Err(e) = out.write_all(&record).and_then(|()| out.write_all(b"\n")) {
                    return Ok(Err(e));
                }
                written += record.len() as u64 + 1;
            }
        }
        Ok(Ok(written))
    })();
    archive.db(result)
}

/// One search hit.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Hit {
    /// The session's id.
    pub session: String,
    /// The host name of the machine that wrote it.
    pub machine: String,
    /// Its machine in this archive: 0 for this one.
    #[serde(skip)]
    pub machine_id: i64,
    /// Its watcher.
    pub harness: String,
    /// Its project.
    pub project: Option<String>,
    /// When the message was written (or its session last active, for agents without times).
    #[serde(serialize_with = "rfc3339")]
    pub timestamp: Option<i64>,
    /// Who speaks.
    pub role: String,
    /// The record's seq.
    pub seq: i64,
    /// The text around the match, the matched terms between `mark`s.
    pub snippet: String,
}

/// How many of the newest matching messages a search ranks: ranking scores every message it
/// is given, and a word in most messages would make it score them all.
const RANKED: i64 = 2_000;

/// The `FROM` and `WHERE` of a search: matches of `?1`, filtered by harness (`?2`), project
/// (`?3`) and time (`?4`), from message `?5` on.
const MATCHES: &str = "
    FROM message_text
    JOIN messages m ON m.id = message_text.rowid
    JOIN sessions se ON se.id = m.session
    WHERE message_text MATCH ?1
      AND (?2 IS NULL OR se.harness = ?2)
      AND (?3 IS NULL OR instr(lower(se.project), lower(?3)) > 0)
      AND (?4 IS NULL OR coalesce(m.at_ms, se.last_ms) >= ?4)
      AND message_text.rowid >= ?5
      AND (?7 IS NULL OR se.machine = ?7)";

/// The messages matching `query` (FTS5 syntax: words, "phrases", prefix*, AND, OR, NOT,
/// parentheses; other punctuation is taken literally), best first, newest first among equals;
/// when more than [`RANKED`] match, the newest of them. Matches are marked with `open` and
/// `close` in the snippet, which is made from the message redacted by `redactor`, if given
/// (a secret cut by the snippet's edge would no longer be found).
///
/// With `stem`, a word stands for the indexed words of its stem as well (see [`stem_terms`]).
pub(crate) fn search(
    archive: &mut Archive,
    query: &str,
    stem: bool,
    filter: &Filter,
    marks: (&str, &str),
    redactor: Option<&Redactor>,
) -> Result<Vec<Hit>> {
    let path = archive.path().to_owned();
    let records = archive.records_reader();
    let conn = records.connection();
    let mut expand = |word: Word| match word {
        Word::Prefix(prefix) => prefix_terms(conn, prefix).unwrap_or_else(|e| {
            log::warn!(
                "cannot list the terms {prefix}* stands for ({e}); searching it as a prefix"
            );
            None
        }),
        Word::Whole(word) if stem => stem_terms(conn, word).unwrap_or_else(|e| {
            log::warn!("cannot list the words of {word}'s stem ({e}); searching the word only");
            None
        }),
        Word::Whole(_) => None,
    };
    if let Some(reason) = query_problem(query) {
        return Err(Error::SearchQuery {
            query: query.to_owned(),
            reason,
        });
    }
    let fts = fts_query(query, &mut expand);
    log::debug!("search {query:?} as the FTS5 query {fts:?}");
    let names = MachineNames::of(archive)?;
    let result = ranked_hits(&records, &fts, filter, marks, redactor, RANKED).map(|mut hits| {
        for hit in &mut hits {
            hit.machine = names.name(hit.machine_id);
        }
        hits
    });
    result.map_err(|e| match e {
        // What `query_problem` does not foresee, in words of the query rather than SQLite's.
        rusqlite::Error::SqliteFailure(_, Some(msg)) if msg.contains("fts5") => {
            log::debug!("search query {query:?}: {msg}");
            Error::SearchQuery {
                query: query.to_owned(),
                reason: "it is not a combination of words, phrases and operators".into(),
            }
        }
        source => Error::Archive { path, source },
    })
}

fn ranked_hits(
    records: &Records,
    fts: &str,
    filter: &Filter,
    (open, close): (&str, &str),
    redactor: Option<&Redactor>,
    newest: i64,
) -> rusqlite::Result<Vec<Hit>> {
    let conn = records.connection();
    let filters = (&filter.harness, &filter.project, filter.since_ms);
    // The oldest of the `newest` matches: FTS5 walks its rowids backwards and stops.
    let floor: i64 = conn
        .prepare_cached(&format!(
            "SELECT message_text.rowid {MATCHES} ORDER BY message_text.rowid DESC
             LIMIT 1 OFFSET ?6"
        ))?
        .query_row(
            params![
                fts,
                filters.0,
                filters.1,
                filters.2,
                0,
                newest - 1,
                filter.machine
            ],
            |r| r.get(0),
        )
        .optional()?
        .unwrap_or(0);
    let limit = filter.sql_limit();
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT message_text.rowid, se.session, se.harness, se.project,
                coalesce(m.at_ms, se.last_ms), m.role, m.seq, se.machine
         {MATCHES}
         ORDER BY bm25(message_text), coalesce(m.at_ms, se.last_ms) DESC
         LIMIT ?6"
    ))?;
    let args = params![
        fts,
        filters.0,
        filters.1,
        filters.2,
        floor,
        limit,
        filter.machine
    ];
    let ranked = stmt.query_map(args, |r| {
        let hit = Hit {
            session: r.get(1)?,
            harness: r.get(2)?,
            project: r.get(3)?,
            timestamp: r.get(4)?,
            role: r.get(5)?,
            seq: r.get(6)?,
            // Named by `search`, from the archive's machines.
            machine: String::new(),
            machine_id: r.get(7)?,
            snippet: String::new(),
        };
        Ok((r.get::<_, i64>(0)?, hit))
    })?;
    let ranked = ranked.collect::<rusqlite::Result<Vec<_>>>()?;
    // Snippets only for the hits kept: the index keeps no text, so each is made from its
    // record, the text indexed again on its own in a table of this connection's.
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.snippet_text
             USING fts5 (body, tokenize = {});",
        words::tokenize_option(words::TOKENIZER)
    ))?;
    let mut record = conn.prepare_cached(
        "SELECT s.harness, r.record FROM records r JOIN sources s ON s.id = r.source_id
         WHERE r.seq = ?1",
    )?;
    let mut snippet = conn.prepare_cached(
        "SELECT snippet(snippet_text, 0, ?2, ?3, '…', 24) FROM temp.snippet_text
         WHERE snippet_text MATCH ?1",
    )?;
    let mut hits = Vec::with_capacity(ranked.len());
    for (_, mut hit) in ranked {
        let found = record.query_row([hit.seq], |r| {
            let record = records.record(r, 1, hit.seq)?;
            Ok(parse(&r.get::<_, String>(0)?, &indexed(&record)).message)
        });
        let body = found.optional()?.flatten().map(|m| body(&m.parts));
        let body = match (body, redactor) {
            (Some(body), Some(r)) => Some(r.redact_text(&body).into_owned()),
            (body, _) => body,
        };
        conn.execute("DELETE FROM temp.snippet_text", [])?;
        conn.execute(
            "INSERT INTO temp.snippet_text (body) VALUES (?1)",
            [body.unwrap_or_default()],
        )?;
        let text: Option<String> =
            (snippet.query_row(params![fts, open, close], |r| r.get(0))).optional()?;
        hit.snippet = text.unwrap_or_default().replace(['\n', '\r', '\t'], " ");
        hits.push(hit);
    }
    Ok(hits)
}

/// One piece of a query as [`fts_query`] reads it, with the place (in characters, from 1)
/// where it starts.
#[derive(Clone, Copy, PartialEq)]
enum Piece<'q> {
    Open(usize),
    Close(usize),
    Operator(&'q str, usize),
    Term,
}

/// What makes `query` unreadable, said in its own terms (a quote or parenthesis left open, an
/// operator without a word on each side), or `None` when FTS5 can read it as [`fts_query`]
/// writes it.
fn query_problem(query: &str) -> Option<String> {
    let mut pieces = Vec::new();
    let mut depth = Vec::new();
    let mut chars = query.char_indices().enumerate().peekable();
    while let Some((n, (at, c))) = chars.next() {
        let place = n + 1;
        match c {
            c if c.is_whitespace() => {}
            '(' => {
                depth.push(place);
                pieces.push(Piece::Open(place));
            }
            ')' if depth.pop().is_none() => {
                return Some(format!("the `)` at character {place} closes no `(`"));
            }
            ')' => pieces.push(Piece::Close(place)),
            '"' => {
                if !chars.by_ref().any(|(_, (_, c))| c == '"') {
                    return Some(format!("the `\"` at character {place} is never closed"));
                }
                pieces.push(Piece::Term);
            }
            _ => {
                let mut end = at + c.len_utf8();
                while let Some((_, (i, c))) =
                    chars.next_if(|(_, (_, c))| !c.is_whitespace() && !"()\"".contains(*c))
                {
                    end = i + c.len_utf8();
                }
                pieces.push(match &query[at..end] {
                    op @ ("AND" | "OR" | "NOT") => Piece::Operator(op, place),
                    _ => Piece::Term,
                });
            }
        }
    }
    if let Some(open) = depth.pop() {
        return Some(format!("the `(` at character {open} is never closed"));
    }
    if pieces.is_empty() {
        return Some("it holds no word".into());
    }
    for (i, piece) in pieces.iter().enumerate() {
        let before = i.checked_sub(1).map(|b| pieces[b]);
        let after = pieces.get(i + 1).copied();
        match *piece {
            Piece::Operator(op, place) => {
                let left = matches!(before, Some(Piece::Term | Piece::Close(_)));
                let right = matches!(after, Some(Piece::Term | Piece::Open(_)));
                if !(left && right) {
                    return Some(format!(
                        "{op} at character {place} needs a word or a group on each side, as in \"a {op} b\""
                    ));
                }
            }
            Piece::Open(place) if matches!(after, Some(Piece::Close(_))) => {
                return Some(format!("the `()` at character {place} holds nothing"));
            }
            _ => {}
        }
    }
    None
}

/// How many terms a prefix (`pre*`) stands for at most: its commonest.
const PREFIX_TERMS: usize = 256;

/// A word of a query, as [`fts_query`] asks what it stands for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Word<'a> {
    /// `pre*`, without its `*`.
    Prefix(&'a str),
    /// A word of letters and digits only.
    Whole(&'a str),
}

/// `query` in FTS5's syntax: operators, parentheses and "phrases" pass as they are; a word
/// holding punctuation (`exit-code`, `foo.rs`), which FTS5 would refuse, becomes a phrase of
/// its own; a prefix `pre*` or a word becomes what `expand` makes of it (the terms it stands
/// for), or stays as it is.
fn fts_query(query: &str, expand: &mut dyn FnMut(Word) -> Option<String>) -> String {
    let mut out = Vec::new();
    let mut chars = query.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '(' || c == ')' {
            out.push(c.to_string());
            chars.next();
        } else if c == '"' {
            chars.next();
            let phrase: String = chars.by_ref().take_while(|c| *c != '"').collect();
            let star = chars.next_if_eq(&'*').map_or("", |_| "*");
            out.push(format!("\"{}\"{star}", phrase.replace('"', "")));
        } else {
            let mut word = String::new();
            while let Some(c) = chars.next_if(|c| !c.is_whitespace() && !"()\"".contains(*c)) {
                word.push(c);
            }
            out.push(fts_word(&word, expand));
        }
    }
    out.join(" ")
}

fn fts_word(word: &str, expand: &mut dyn FnMut(Word) -> Option<String>) -> String {
    if matches!(word, "AND" | "OR" | "NOT") {
        return word.to_owned();
    }
    let (stem, star) = match word.strip_suffix('*') {
        Some(stem) if !stem.is_empty() => (stem, "*"),
        _ => (word, ""),
    };
    // One character of a script cut in pairs stands for every pair it starts (and is a term
    // of its own where a run ends): FTS5's own prefix query, since the terms may be many.
    if words::one_unspaced_character(stem) {
        return format!("{stem}*");
    }
    let bare = (stem.chars()).all(|c| c.is_alphanumeric() || c == '_' || !c.is_ascii());
    match (bare, star) {
        (true, "*") => expand(Word::Prefix(stem)).unwrap_or_else(|| format!("{stem}*")),
        (true, _) => expand(Word::Whole(stem)).unwrap_or_else(|| stem.to_owned()),
        (false, _) => format!("\"{}\"{star}", stem.replace('"', "")),
    }
}

/// The indexed terms that start with `stem` (folded as the index folds text), as an OR of
/// them, the [`PREFIX_TERMS`] commonest when there are more. FTS5 answers a prefix by merging
/// the postings of all its terms before it returns a row; an OR of the same terms is merged
/// as it is read, so that a search that keeps the newest matches stops early. `None` when
/// `stem` is not one term, or no term starts with it.
fn prefix_terms(conn: &Connection, stem: &str) -> rusqlite::Result<Option<String>> {
    let Some(folded) = fold(conn, stem)? else {
        return Ok(None);
    };
    let mut stmt = conn.prepare_cached(
        "SELECT term FROM message_vocab WHERE term >= ?1 AND term < ?2 ORDER BY doc DESC, term LIMIT ?3",
    )?;
    let end = format!("{folded}\u{10FFFF}");
    let rows = stmt.query_map(params![folded, end, PREFIX_TERMS as i64 + 1], |r| r.get(0))?;
    let mut terms: Vec<String> = rows.collect::<rusqlite::Result<_>>()?;
    if terms.len() > PREFIX_TERMS {
        log::warn!(
            "{stem}* stands for more than {PREFIX_TERMS} terms; searching the {PREFIX_TERMS} commonest"
        );
        terms.truncate(PREFIX_TERMS);
    }
    if terms.is_empty() {
        return Ok(None);
    }
    Ok(Some(or_of(terms.iter().map(String::as_str))))
}

/// The indexed words that share `word`'s stem (`running`: run, runs, running), as an OR of
/// them, the [`PREFIX_TERMS`] commonest when there are more; `None` when `word` is not one
/// term or no other indexed word shares its stem. The stem is Porter's English one, taken
/// from SQLite's own `porter` tokenizer; the index itself keeps words unstemmed, so a search
/// without `--stem` finds exactly the word.
fn stem_terms(conn: &Connection, word: &str) -> rusqlite::Result<Option<String>> {
    let Some(folded) = fold(conn, word)? else {
        return Ok(None);
    };
    let Some(stem) = stems(conn, std::slice::from_ref(&folded))?.pop() else {
        return Ok(None);
    };
    // Porter's stems are the word's start, bar a last letter changed (happy: happi): the
    // words of a stem are among those that start as both do.
    let common: String = (folded.chars().zip(stem.chars()))
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    if common.chars().count() < 2 {
        return Ok(None);
    }
    let mut stmt = conn.prepare_cached(
        "SELECT term FROM message_vocab WHERE term >= ?1 AND term < ?2 ORDER BY doc DESC, term",
    )?;
    let end = format!("{common}\u{10FFFF}");
    let rows = stmt.query_map(params![common, end], |r| r.get(0))?;
    let candidates: Vec<String> = rows.collect::<rusqlite::Result<_>>()?;
    let mut terms: Vec<&String> = (candidates.iter().zip(stems(conn, &candidates)?))
        .filter(|(_, s)| *s == stem)
        .map(|(t, _)| t)
        .collect();
    if terms.len() > PREFIX_TERMS {
        log::warn!(
            "the stem of {word} stands for more than {PREFIX_TERMS} words; searching the {PREFIX_TERMS} commonest"
        );
        terms.truncate(PREFIX_TERMS);
    }
    if !terms.iter().any(|t| **t != folded) {
        return Ok(None);
    }
    Ok(Some(or_of(terms.into_iter().map(String::as_str))))
}

/// The Porter stem of each of `terms` (each one term, as the index folds them), in order.
fn stems(conn: &Connection, terms: &[String]) -> rusqlite::Result<Vec<String>> {
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.stem
             USING fts5 (t, tokenize = {});
         CREATE VIRTUAL TABLE IF NOT EXISTS temp.stem_terms
             USING fts5vocab (temp, stem, instance);
         DELETE FROM temp.stem;",
        words::tokenize_option("porter unicode61")
    ))?;
    let mut insert = conn.prepare_cached("INSERT INTO temp.stem (rowid, t) VALUES (?1, ?2)")?;
    for (i, term) in terms.iter().enumerate() {
        insert.execute(params![i as i64, term])?;
    }
    let mut out = vec![String::new(); terms.len()];
    let mut stmt = conn.prepare_cached("SELECT doc, term FROM temp.stem_terms")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let doc: i64 = row.get(0)?;
        if let Some(slot) = usize::try_from(doc).ok().and_then(|d| out.get_mut(d)) {
            *slot = row.get(1)?;
        }
    }
    Ok(out)
}

/// `terms` quoted, as an OR in parentheses.
fn or_of<'a>(terms: impl Iterator<Item = &'a str>) -> String {
    let quoted: Vec<String> = terms
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect();
    format!("({})", quoted.join(" OR "))
}

/// `text` as the index's tokenizer makes it a term (lower case, diacritics removed), by having
/// that tokenizer read it; `None` unless it is exactly one term (a word of a script cut in
/// pairs is not: FTS5 reads its prefix itself).
fn fold(conn: &Connection, text: &str) -> rusqlite::Result<Option<String>> {
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.fold
             USING fts5 (t, tokenize = {});
         CREATE VIRTUAL TABLE IF NOT EXISTS temp.fold_terms USING fts5vocab (temp, fold, row);
         DELETE FROM temp.fold;",
        words::tokenize_option(words::TOKENIZER)
    ))?;
    conn.execute("INSERT INTO temp.fold (t) VALUES (?1)", [text])?;
    let mut stmt = conn.prepare_cached("SELECT term FROM temp.fold_terms")?;
    let mut terms: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(if terms.len() == 1 { terms.pop() } else { None })
}

/// A session as shipped elsewhere: the index's row, its models and its sources.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SessionExport {
    /// The watcher.
    pub harness: String,
    /// The agent's id for it.
    pub session: String,
    /// The parent session's id, for a subagent.
    pub parent: Option<String>,
    /// Its working directory.
    pub project: Option<String>,
    /// Its git branch.
    pub branch: Option<String>,
    /// The agent's title, else the first prompt.
    pub title: Option<String>,
    /// Its first and last record's times (Unix ms).
    pub started_ms: Option<i64>,
    /// See `started_ms`.
    pub last_ms: Option<i64>,
    /// Messages, each copy once.
    pub user_messages: i64,
    /// See `user_messages`.
    pub assistant_messages: i64,
    /// Compactions recorded.
    pub compactions: i64,
    /// Models that answered.
    pub models: Vec<String>,
    /// The archive's sources holding its records.
    pub sources: Vec<i64>,
    /// The project's git remote.
    pub git_remote: Option<String>,
}

impl SessionExport {
    /// Removes NUL characters from its text (which some stores refuse).
    pub(crate) fn strip_nul(&mut self) {
        let strip = |t: &mut String| t.retain(|c| c != '\0');
        for text in [
            &mut self.parent,
            &mut self.project,
            &mut self.branch,
            &mut self.title,
        ]
        .into_iter()
        .flatten()
        {
            strip(text);
        }
        strip(&mut self.session);
        self.models.iter_mut().for_each(strip);
    }

    /// Replaces any secret in its title (often the first prompt), project and branch; ids
    /// and model names are keys, left as they are.
    pub(crate) fn redact(&mut self, redactor: &Redactor) {
        redact_each(
            redactor,
            [&mut self.title, &mut self.project, &mut self.branch],
        );
    }
}

/// The sessions holding a record with `after < seq <= through`, as the index has them now.
pub(crate) fn touched_sessions(
    archive: &mut Archive,
    after: i64,
    through: i64,
) -> Result<Vec<SessionExport>> {
    let conn = archive.connection();
    let rows = touched(conn, after, through);
    archive.db(rows)
}

fn touched(conn: &Connection, after: i64, through: i64) -> rusqlite::Result<Vec<SessionExport>> {
    let mut stmt = conn.prepare(
        "WITH touched AS (
             SELECT DISTINCT ss.session FROM records r
             JOIN session_sources ss ON ss.source_id = r.source_id
             WHERE r.seq > ?1 AND r.seq <= ?2
         )
         SELECT se.harness, se.session, se.parent, se.project, se.branch,
                coalesce(se.agent_title, se.first_prompt), se.started_ms, se.last_ms,
                se.user_messages, se.assistant_messages, se.compactions,
                (SELECT group_concat(model, char(31)) FROM session_models m WHERE m.session = se.id),
                (SELECT group_concat(source_id) FROM session_sources s2 WHERE s2.session = se.id),
                se.git_remote
         FROM sessions se JOIN touched t ON t.session = se.id
         WHERE se.machine = 0
         ORDER BY se.id",
    )?;
    let list = |text: Option<String>, sep: char| -> Vec<String> {
        text.map(|t| t.split(sep).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let rows = stmt.query_map(params![after, through], |r| {
        Ok(SessionExport {
            harness: r.get(0)?,
            session: r.get(1)?,
            parent: r.get(2)?,
            project: r.get(3)?,
            branch: r.get(4)?,
            title: r.get(5)?,
            started_ms: r.get(6)?,
            last_ms: r.get(7)?,
            user_messages: r.get(8)?,
            assistant_messages: r.get(9)?,
            compactions: r.get(10)?,
            models: list(r.get(11)?, '\u{1f}'),
            sources: (list(r.get(12)?, ',').iter())
                .filter_map(|s| s.parse().ok())
                .collect(),
            git_remote: r.get(13)?,
        })
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newest_matches_are_ranked_and_filters_apply_before_the_cut() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        let mut archive = Archive::open(&db).unwrap();
        let index = crate::consumers::sessions::store::open_to_write(&db).unwrap();
        index
            .execute_batch("INSERT INTO sessions (id, harness, session) VALUES (1, 'codex', 'a'), (2, 'cursor', 'b');")
            .unwrap();
        let conn = archive.connection();
        conn.execute_batch(
            "INSERT INTO sources (id, dev, ino, path, harness, generation, gone, created_ms)
                 VALUES (1, 1, 1, x'2f61', 'codex', 0, 0, 0);",
        )
        .unwrap();
        // Message 1 says the word most often (the best match by relevance), and is the oldest.
        let bodies = ["lock lock lock lock", "lock", "lock", "lock", "lock"];
        for (i, body) in bodies.iter().enumerate() {
            let (id, session) = (i as i64 + 1, if i == 0 { 2 } else { 1 });
            index
                .execute(
                    "INSERT INTO messages (id, session, key, ord, seq, role) VALUES (?1, ?2, ?1, ?1, ?1, 'user')",
                    params![id, session],
                )
                .unwrap();
            index
                .execute(
                    "INSERT INTO message_text (rowid, body) VALUES (?1, ?2)",
                    params![id, body],
                )
                .unwrap();
            // The record the message's snippet is made from.
            let record = serde_json::json!({"type": "response_item", "payload": {
                "type": "message", "role": "user", "content": [{"type": "input_text", "text": body}]}});
            conn.execute(
                "INSERT INTO records (seq, source_id, generation, offset, record) VALUES (?1, 1, 0, ?1, ?2)",
                params![id, record.to_string().into_bytes()],
            )
            .unwrap();
        }
        crate::consumers::sessions::store::attach(&archive).unwrap();
        let records = archive.records_reader();
        let seqs = |filter: &Filter, newest| -> Vec<i64> {
            let hits = ranked_hits(&records, "lock", filter, ("[", "]"), None, newest).unwrap();
            hits.iter().map(|h| h.seq).collect()
        };
        let all = Filter::default();
        assert_eq!(seqs(&all, 10)[0], 1, "ranked by relevance");
        assert!(!seqs(&all, 3).contains(&1), "past the 3 newest matches");
        assert_eq!(seqs(&all, 3).len(), 3);
        let cursor = Filter {
            harness: Some("cursor".into()),
            ..Filter::default()
        };
        assert_eq!(
            seqs(&cursor, 3),
            [1],
            "the cut counts only what the filter keeps"
        );
        let hits = ranked_hits(&records, "lock", &cursor, ("[", "]"), None, 3).unwrap();
        assert_eq!(hits[0].snippet, "[lock] [lock] [lock] [lock]");
    }

    fn fts(query: &str) -> String {
        fts_query(query, &mut |_| None)
    }

    /// An index (of a new archive) whose full-text table holds `bodies`, by rowid.
    fn index_of(bodies: &[(i64, &str)]) -> (tempfile::TempDir, rusqlite::Connection) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        drop(Archive::open(&db).unwrap());
        let index = crate::consumers::sessions::store::open_to_write(&db).unwrap();
        for (id, body) in bodies {
            index
                .execute(
                    "INSERT INTO message_text (rowid, body) VALUES (?1, ?2)",
                    params![id, body],
                )
                .unwrap();
        }
        (dir, index)
    }

    #[test]
    fn a_prefix_stands_for_the_terms_it_starts_folded_as_the_index_folds() {
        let (_dir, index) = index_of(&[(1, "Résumé resume"), (2, "result"), (3, "other")]);
        let conn = &index;
        let expanded = prefix_terms(conn, "RÉS").unwrap().unwrap();
        assert_eq!(expanded, r#"("result" OR "resume")"#);
        assert_eq!(prefix_terms(conn, "zz").unwrap(), None);
        assert_eq!(
            prefix_terms(conn, "a-b").unwrap(),
            None,
            "two terms are no prefix"
        );
        let query = fts_query("rés* AND other", &mut |w| match w {
            Word::Prefix(p) => prefix_terms(conn, p).unwrap(),
            Word::Whole(_) => None,
        });
        assert_eq!(query, r#"("result" OR "resume") AND other"#);
    }

    #[test]
    fn with_stems_a_word_stands_for_the_indexed_words_of_its_stem() {
        let (_dir, index) = index_of(&[
            (1, "the build failed"),
            (2, "Failing tests, failed again"),
            (3, "a failure"),
            (4, "it fails"),
            (5, "happy path"),
            (6, "happiness"),
            (7, "fail"),
        ]);
        let conn = &index;
        assert_eq!(
            stem_terms(conn, "Fails").unwrap().unwrap(),
            r#"("failed" OR "fail" OR "failing" OR "fails")"#,
            "commonest first; `failure` is another stem"
        );
        assert_eq!(
            stem_terms(conn, "happy").unwrap().unwrap(),
            r#"("happiness" OR "happy")"#,
            "a stem that is not the word's start (happi)"
        );
        assert_eq!(stem_terms(conn, "failure").unwrap(), None, "alone");
        assert_eq!(stem_terms(conn, "a-b").unwrap(), None, "two terms");
        let query = fts_query(r#"fails AND "failed build" fail*"#, &mut |w| match w {
            Word::Whole(w) => stem_terms(conn, w).unwrap(),
            Word::Prefix(_) => None,
        });
        assert_eq!(
            query, r#"("failed" OR "fail" OR "failing" OR "fails") AND "failed build" fail*"#,
            "phrases and prefixes are searched as written"
        );
    }

    #[test]
    fn a_file_is_its_first_source_and_the_sources_that_continue_it() {
        let p = |s: &str| PathBuf::from(s);
        let files = assemble(vec![
            (p("/a"), (1, 0), Some(0)),
            (p("/b"), (2, 3), Some(0)),
            (p("/a"), (3, 0), Some(4944)),
            (p("/a"), (4, 0), None),
            (p("/b"), (5, 0), Some(0)),
        ]);
        let pieces: Vec<_> = files
            .iter()
            .map(|f| (f.path.clone(), f.pieces.clone()))
            .collect();
        assert_eq!(
            pieces,
            [(p("/a"), vec![(1, 0), (3, 0)]), (p("/b"), vec![(5, 0)])]
        );
    }

    #[test]
    fn an_unreadable_query_is_explained_in_its_own_terms() {
        let problem = |q: &str| query_problem(q).unwrap_or_default();
        assert_eq!(
            problem("\"lock file"),
            "the `\"` at character 1 is never closed"
        );
        assert_eq!(
            problem("(xz OR zstd"),
            "the `(` at character 1 is never closed"
        );
        assert_eq!(problem("xz) zstd"), "the `)` at character 3 closes no `(`");
        assert_eq!(problem("a ()"), "the `()` at character 3 holds nothing");
        assert_eq!(problem("  "), "it holds no word");
        for (query, op, at) in [
            ("NOT", "NOT", 1),
            ("xz OR", "OR", 4),
            ("a AND NOT b", "AND", 3),
        ] {
            assert_eq!(
                problem(query),
                format!(
                    "{op} at character {at} needs a word or a group on each side, as in \"a {op} b\""
                ),
                "{query}"
            );
        }
        for fine in [
            "xz",
            "\"a phrase\" OR (b NOT c)",
            "backup NOT xz",
            "and or not",
            "ré*",
            "x\"y\"",
        ] {
            assert_eq!(query_problem(fine), None, "{fine}");
        }
    }

    #[test]
    fn queries_keep_operators_phrases_and_prefixes_and_quote_punctuation() {
        assert_eq!(
            fts(r#"flaky AND "exit code" migr*"#),
            r#"flaky AND "exit code" migr*"#
        );
        assert_eq!(
            fts("exit-code OR src/main.rs"),
            r#""exit-code" OR "src/main.rs""#
        );
        assert_eq!(fts("(a OR b) NOT c"), "( a OR b ) NOT c");
        assert_eq!(fts("naïve café*"), "naïve café*");
    }
}
