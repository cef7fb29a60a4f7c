//! Reading the session index: sessions newest first, one session by id or prefix, its
//! messages with their records, full-text search (`search`), and the sessions a sink ships
//! (`export`).

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

/// The SQL that keeps a session `se` only when it is starred, if `$starred` is true, and only
/// when it has tag `$tag`, unless that is NULL: `$starred` and `$tag` are the parameters'
/// names in the statement it goes into ([`LISTED`], search's `MATCHES`).
macro_rules! marked_sql {
    ($starred:literal, $tag:literal) => {
        concat!(
            "
      AND (NOT ", $starred, " OR EXISTS (SELECT 1 FROM marks mk WHERE mk.starred
            AND mk.machine = se.machine AND mk.harness = se.harness AND mk.session = se.session))
      AND (", $tag, " IS NULL OR EXISTS (SELECT 1 FROM tags t WHERE t.tag = ", $tag, "
            AND t.machine = se.machine AND t.harness = se.harness AND t.session = se.session))"
        )
    };
}

mod export;
mod on_disk;
pub(crate) mod overview;
mod rank;
mod search;

pub(crate) use export::{SessionExport, touched_sessions};
pub(crate) use search::{Hit, search};

/// Which sessions (or search hits) to list.
#[derive(Debug, Default)]
pub(crate) struct Filter {
    /// Only this watcher's.
    pub harness: Option<String>,
    /// Only those whose project contains this text (case-insensitive).
    pub project: Option<String>,
    /// Only those active since this time (Unix ms).
    pub since_ms: Option<i64>,
    /// Only those started before this time (Unix ms): with `since_ms`, those active at some
    /// time between the two.
    pub until_ms: Option<i64>,
    /// Only those a model of this name answered in.
    pub model: Option<String>,
    /// Only this machine's: 0 for this one, else a pulled machine's id ([`machine_named`]).
    pub machine: Option<i64>,
    /// At most this many (0: all).
    pub limit: usize,
    /// Past this many first ones (a page of a list).
    pub offset: usize,
    /// Only the starred.
    pub starred: bool,
    /// Only those with this tag.
    pub tag: Option<String>,
    /// Only those whose title (the agent's, else the first prompt), project or id contains
    /// this text: ASCII letters in any case, every other character as it is (SQLite's
    /// `lower` folds ASCII only; a CJK text has no case to fold).
    pub text: Option<String>,
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
    /// Whether a person starred it.
    pub starred: bool,
    /// The tags a person gave it, sorted.
    pub tags: Vec<String>,
    /// A person's note on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Whether any of its sources is live (not recorded as gone).
    #[serde(skip)]
    live: bool,
}

impl Session {
    /// Replaces any secret in its text (a title is often the first prompt).
    pub(crate) fn redact(&mut self, redactor: &Redactor) {
        redact_each(
            redactor,
            [
                &mut self.title,
                &mut self.project,
                &mut self.branch,
                &mut self.note,
            ],
        );
    }
}

/// Replaces any secret in each of `texts`.
fn redact_each<const N: usize>(redactor: &Redactor, texts: [&mut Option<String>; N]) {
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

/// The `FROM` and `WHERE` of the sources of session `se` (`s`), each with its cursor (`c`).
macro_rules! sources_of_se {
    () => {
        "session_sources ss JOIN sources s ON s.id = ss.source_id
            LEFT JOIN cursors c ON c.source_id = s.id WHERE ss.session = se.id"
    };
}

/// Session `se`'s first and last activity (Unix ms) as listed, the columns `started` and
/// `last`: its records' own times, else its files' modification times (a pulled file's: when
/// it was first and last archived). A session whose records have times reads no source.
macro_rules! activity_sql {
    () => {
        concat!(
            "coalesce(se.started_ms,
            (SELECT min(coalesce(c.mtime_ns / 1000000, s.created_ms)) FROM ",
            sources_of_se!(),
            ")) AS started,
        coalesce(se.last_ms,
            (SELECT max(coalesce(c.mtime_ns / 1000000, s.last_archived_ms)) FROM ",
            sources_of_se!(),
            ")) AS last"
        )
    };
}

/// The columns of a [`Session`], from `sessions se` (`started` and `last` as `activity_sql!`
/// gives them), with what its sources, models, subagents and tags say read for it alone: to
/// be followed by its `WHERE`, which decides how many sessions are read.
const SESSION: &str = concat!(
    "
    SELECT se.id, se.session, se.harness, se.project, coalesce(se.agent_title, se.first_prompt),
        se.branch, ",
    activity_sql!(),
    ",
        se.user_messages, se.assistant_messages, se.compactions, se.unparsed,
        coalesce((SELECT sum(s.records) FROM ",
    sources_of_se!(),
    "), 0),
        (SELECT group_concat(model, char(10)) FROM session_models m WHERE m.session = se.id),
        se.parent,
        (SELECT count(*) FROM sessions k
            WHERE k.machine = se.machine AND k.harness = se.harness AND k.parent = se.session),
        (SELECT group_concat(path, char(0))
            FROM (SELECT s.path FROM ",
    sources_of_se!(),
    " ORDER BY s.id)),
        se.machine, coalesce(se.git_remote, ps.git_remote),
        coalesce((SELECT max(NOT s.gone) FROM ",
    sources_of_se!(),
    "), 0),
        coalesce(mk.starred, 0),
        (SELECT group_concat(tag, char(10)) FROM tags t
            WHERE t.machine = se.machine AND t.harness = se.harness AND t.session = se.session),
        mk.note
    FROM sessions se
    LEFT JOIN pulled_sessions ps
        ON ps.machine = se.machine AND ps.harness = se.harness AND ps.session = se.session
    LEFT JOIN marks mk
        ON mk.machine = se.machine AND mk.harness = se.harness AND mk.session = se.session"
);

/// The order of the sessions list, over rows whose first column is the session's `id` and
/// whose `last` is its last activity: the newest first, those without a time last, the
/// later indexed first among those of one time.
const NEWEST_FIRST: &str = "ORDER BY last IS NULL, last DESC, 1 DESC";

fn session_row(r: &rusqlite::Row) -> rusqlite::Result<Session> {
    let (user, assistant): (i64, i64) = (r.get(8)?, r.get(9)?);
    let models: Option<String> = r.get(13)?;
    let tags: Option<String> = r.get(21)?;
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
        starred: r.get(20)?,
        tags: sorted_lines(tags),
        note: r.get(22)?,
    })
}

/// The lines of `group_concat(…, char(10))`, sorted (SQLite does not promise to keep a
/// subquery's order through `group_concat`).
fn sorted_lines(joined: Option<String>) -> Vec<String> {
    let mut lines: Vec<String> = joined
        .iter()
        .flat_map(|j| j.lines())
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
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
/// in the archive) of watcher `:harness`, project `:project`, machine `:machine` and model
/// `:model` (each unless NULL), starred if `:starred`, tagged `:tag` unless NULL, and whose
/// title, project or id contains `:text` unless NULL.
const LISTED: &str = concat!(
    "
    WHERE (se.parent IS NULL OR NOT EXISTS (SELECT 1 FROM sessions p
            WHERE p.machine = se.machine AND p.harness = se.harness
              AND p.session = se.parent))
      AND (:harness IS NULL OR se.harness = :harness)
      AND (:project IS NULL OR instr(lower(se.project), lower(:project)) > 0)
      AND (:machine IS NULL OR se.machine = :machine)
      AND (:model IS NULL OR EXISTS (SELECT 1 FROM session_models m
            WHERE m.session = se.id AND m.model = :model))
      AND (:text IS NULL
            OR instr(lower(coalesce(se.agent_title, se.first_prompt)), lower(:text)) > 0
            OR instr(lower(se.project), lower(:text)) > 0
            OR instr(lower(se.session), lower(:text)) > 0)",
    marked_sql!(":starred", ":tag")
);

impl Filter {
    /// The values of [`LISTED`]'s parameters.
    fn listed(&self) -> [(&'static str, &dyn rusqlite::ToSql); 7] {
        [
            (":harness", &self.harness),
            (":project", &self.project),
            (":machine", &self.machine),
            (":model", &self.model),
            (":starred", &self.starred),
            (":tag", &self.tag),
            (":text", &self.text),
        ]
    }
}

/// Top-level sessions (and subagents whose parent is not in the archive), newest activity
/// first: of those active since `since_ms` and started before `until_ms`. The page is chosen
/// from the sessions' times alone; only its sessions are then read whole.
pub(crate) fn sessions(archive: &mut Archive, filter: &Filter) -> Result<Vec<Session>> {
    let sql = format!(
        "WITH page AS (
             SELECT id FROM (SELECT se.id, {activity} FROM sessions se {LISTED})
             WHERE (:since IS NULL OR last >= :since) AND (:until IS NULL OR started < :until)
             {NEWEST_FIRST} LIMIT :limit OFFSET :offset)
         {SESSION} WHERE se.id IN page {NEWEST_FIRST}",
        activity = activity_sql!()
    );
    let (limit, offset) = (filter.sql_limit(), filter.offset as i64);
    let mut args = filter.listed().to_vec();
    args.extend([
        (":since", &filter.since_ms as &dyn rusqlite::ToSql),
        (":until", &filter.until_ms),
        (":limit", &limit),
        (":offset", &offset),
    ]);
    collect(archive, &sql, args.as_slice())
}

/// How many sessions [`sessions`] lists with `filter` when it has no time (`since_ms`,
/// `until_ms` and the limit are not read): counted from the sessions alone.
pub(crate) fn sessions_count(archive: &mut Archive, filter: &Filter) -> Result<usize> {
    let sql = format!("SELECT count(*) FROM sessions se {LISTED}");
    let result =
        (archive.connection()).query_row(&sql, filter.listed().as_slice(), |r| r.get::<_, i64>(0));
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

fn collect(archive: &mut Archive, sql: &str, args: impl rusqlite::Params) -> Result<Vec<Session>> {
    let names = MachineNames::of(archive)?;
    let result = (|| {
        let conn = archive.connection();
        let mut stmt = conn.prepare_cached(sql)?;
        let mut list = stmt
            .query_map(args, session_row)?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let on_disk = on_disk::on_disk_each(list.iter().map(|s| (s.files.as_slice(), s.live)));
        for (s, on_disk) in list.iter_mut().zip(on_disk) {
            s.on_disk = on_disk;
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// An archive whose index holds Codex sessions `a` to `i`, listed in the order `d` (its
    /// sources' last time 900), `h` (800), `c` and `b` (700: the later indexed first), `i`
    /// (650), `a` (500), `g` (350: a subagent whose parent is not in the archive) and `e` (no
    /// time). `b`, `d`, `e`, `g` and `i` lack times of their own, as a session whose records
    /// carry none does: theirs are their sources' (a file's modification time, else when the
    /// source was first and last archived). `f`, a subagent of `a`, is not listed.
    fn archive_of_sessions() -> (tempfile::TempDir, Archive) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        let mut archive = Archive::open(&db).unwrap();
        let index = crate::consumers::sessions::store::open_to_write(&db).unwrap();
        index
            .execute_batch(
                "INSERT INTO sessions (id, harness, session, parent, started_ms, last_ms) VALUES
                     (1, 'codex', 'a', NULL, 100, 500), (2, 'codex', 'b', NULL, NULL, NULL),
                     (3, 'codex', 'c', NULL, 300, 700), (4, 'codex', 'd', NULL, NULL, NULL),
                     (5, 'codex', 'e', NULL, NULL, NULL), (6, 'codex', 'f', 'a', 150, 450),
                     (7, 'codex', 'g', 'z', NULL, NULL), (8, 'codex', 'h', NULL, 600, 800),
                     (9, 'codex', 'i', NULL, NULL, 650);
                 INSERT INTO session_sources (source_id, session) VALUES
                     (1, 2), (2, 4), (3, 4), (4, 7), (5, 9);",
            )
            .unwrap();
        archive
            .connection()
            .execute_batch(
                "INSERT INTO sources (id, dev, ino, path, harness, generation, gone, created_ms,
                     last_archived_ms) VALUES
                     (1, 1, 1, x'2f62', 'codex', 0, 0, 200, 700),
                     (2, 1, 2, x'2f64', 'codex', 0, 0, 50, 60),
                     (3, 1, 3, x'2f6432', 'codex', 0, 0, 10, 900),
                     (4, 1, 4, x'2f67', 'codex', 0, 0, 250, 350),
                     (5, 1, 5, x'2f69', 'codex', 0, 0, 20, 30);
                 INSERT INTO cursors (source_id, offset, head_len, head_hash, tail_len, tail_hash,
                     mtime_ns, held_back, held_back_prefix, updated_ms) VALUES
                     (2, 0, 0, 0, 0, 0, 400000000, 0, x'', 0),
                     (3, 0, 0, 0, 0, 0, NULL, 0, x'', 0);",
            )
            .unwrap();
        crate::consumers::sessions::store::attach(&archive).unwrap();
        (dir, archive)
    }

    /// The ids of `list`, in its order.
    fn ids(list: &[Session]) -> Vec<&str> {
        list.iter().map(|s| s.id.as_str()).collect()
    }

    // `sessions` chooses a page from the sessions' times alone, then reads its rows whole: a
    // page must be a cut of the whole rows in their order and window, for sessions whose times
    // are their sources' as for those with their own.
    #[test]
    fn pages_are_cut_from_the_whole_rows_in_their_order_and_window() {
        let (_dir, mut archive) = archive_of_sessions();
        let all = sessions(&mut archive, &Filter::default()).unwrap();
        assert_eq!(ids(&all), ["d", "h", "c", "b", "i", "a", "g", "e"]);
        let times: Vec<_> = all.iter().map(|s| (s.started, s.last_activity)).collect();
        let both = |started, last| (Some(started), Some(last));
        assert_eq!(
            times,
            [
                both(10, 900),
                both(600, 800),
                both(300, 700),
                both(200, 700),
                both(20, 650),
                both(100, 500),
                both(250, 350),
                (None, None)
            ]
        );
        let windows = [
            (None, None),
            (Some(640), None),
            (None, Some(150)),
            (Some(640), Some(150)),
        ];
        for (since_ms, until_ms) in windows {
            let in_window = |s: &&Session| {
                since_ms.is_none_or(|t| s.last_activity.is_some_and(|l| l >= t))
                    && until_ms.is_none_or(|t| s.started.is_some_and(|s| s < t))
            };
            let window: Vec<&str> = all.iter().filter(in_window).map(|s| &*s.id).collect();
            for limit in 0..=3 {
                // A limit of 0 lists all: one page.
                let step = if limit == 0 { all.len() + 1 } else { limit };
                let mut pages = Vec::new();
                for offset in (0..=all.len()).step_by(step) {
                    let filter = Filter {
                        since_ms,
                        until_ms,
                        limit,
                        offset,
                        ..Filter::default()
                    };
                    let page = sessions(&mut archive, &filter).unwrap();
                    pages.extend(page.into_iter().map(|s| s.id));
                }
                assert_eq!(
                    pages, window,
                    "{since_ms:?} to {until_ms:?}, {limit} a page"
                );
            }
        }
    }
}
