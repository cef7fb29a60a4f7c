//! The sessions at a glance, counted over the session index: figures of a window, the
//! sessions active each day (in the local time of this machine), when they start (hour by
//! weekday), the top sessions and the shares of each agent, project and model. A session is
//! in a window when it was active in it: its last activity at or after the window's start,
//! its first before its end, as [`super::sessions`] lists them with the same [`Filter`].
//! The sessions are read once ([`listed`]) and counted here; what is in other tables (the
//! models, the tokens, the files) is counted in SQL.
use super::{Filter, LISTED, MachineNames};
use crate::archive::{Archive, path_from_blob};
use crate::error::Result;
use rusqlite::ToSql;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// The window of a [`Filter`] over the index's own times of a session (`sessions se`).
const IN_WINDOW: &str = "
      AND (:since IS NULL OR se.last_ms >= :since)
      AND (:until IS NULL OR se.started_ms < :until)";

/// The values of the parameters of [`LISTED`] and [`IN_WINDOW`].
fn scoped(filter: &Filter) -> Vec<(&'static str, &dyn ToSql)> {
    let mut args = filter.listed().to_vec();
    args.extend([
        (":since", &filter.since_ms as &dyn ToSql),
        (":until", &filter.until_ms),
    ]);
    args
}

/// The figures of a window.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Figures {
    /// Sessions active in it.
    pub sessions: i64,
    /// Their user and assistant messages.
    pub messages: i64,
    /// Their projects, each once.
    pub projects: i64,
    /// Their agents, each once.
    pub agents: i64,
    /// The days of the window on which any was active.
    pub active_days: i64,
}

/// The sessions a [`Filter`] lists, each read once for what the home counts of its own
/// fields: one scan of the index's sessions, where a query for each count scanned them as
/// many times (and sorted them for each `GROUP BY`).
pub(crate) struct Listed {
    sessions: Vec<ListedSession>,
}

struct ListedSession {
    /// The index's id.
    id: i64,
    /// The agent's id for it.
    session: String,
    machine: i64,
    harness: String,
    project: Option<String>,
    /// User and assistant messages.
    messages: i64,
    started_ms: Option<i64>,
    last_ms: Option<i64>,
}

/// The sessions `filter` lists, in the index's order.
pub(crate) fn listed(archive: &mut Archive, filter: &Filter) -> Result<Listed> {
    let sql = format!(
        "SELECT se.id, se.session, se.machine, se.harness, se.project,
            se.user_messages + se.assistant_messages, se.started_ms, se.last_ms
         FROM sessions se {LISTED} {IN_WINDOW}"
    );
    let result = (|| {
        let mut stmt = archive.connection().prepare(&sql)?;
        let rows = stmt.query_map(scoped(filter).as_slice(), |r| {
            Ok(ListedSession {
                id: r.get(0)?,
                session: r.get(1)?,
                machine: r.get(2)?,
                harness: r.get(3)?,
                project: r.get(4)?,
                messages: r.get(5)?,
                started_ms: r.get(6)?,
                last_ms: r.get(7)?,
            })
        })?;
        rows.collect()
    })();
    Ok(Listed {
        sessions: archive.db(result)?,
    })
}

/// The figures of the sessions `listed` holds, those of `filter`'s window.
pub(crate) fn figures(listed: &Listed, filter: &Filter) -> Figures {
    let all = &listed.sessions;
    let distinct = |of: &dyn Fn(&ListedSession) -> Option<&str>| {
        all.iter()
            .filter_map(of)
            .collect::<std::collections::HashSet<_>>()
            .len() as i64
    };
    let spans = (all.iter()).filter_map(|s| Some((s.started_ms?, s.last_ms?)));
    Figures {
        sessions: all.len() as i64,
        messages: all.iter().map(|s| s.messages).sum(),
        projects: distinct(&|s| s.project.as_deref()),
        agents: distinct(&|s| Some(&s.harness)),
        active_days: active_days(spans, filter).len() as i64,
    }
}

/// Each local day (`YYYY-MM-DD`) of the window on which a session `filter` lists was
/// active, with how many were, in order. A session is active on each day from its first
/// activity's to its last's.
pub(crate) fn days(archive: &mut Archive, filter: &Filter) -> Result<Vec<(String, i64)>> {
    let sql = format!(
        "SELECT se.started_ms, se.last_ms FROM sessions se {LISTED} {IN_WINDOW}
           AND se.started_ms IS NOT NULL AND se.last_ms IS NOT NULL"
    );
    let result = (|| {
        let mut stmt = archive.connection().prepare(&sql)?;
        let rows = stmt.query_map(scoped(filter).as_slice(), |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect::<rusqlite::Result<Vec<(i64, i64)>>>()
    })();
    let active = active_days(archive.db(result)?.into_iter(), filter);
    Ok((active.into_iter())
        .map(|(day, n)| (date(day), n))
        .collect())
}

/// The local days (since 1970-01-01) on which sessions of these first and last activities
/// (Unix ms) were active, each cut to `filter`'s window, with how many were. Each quarter
/// hour is taken to local time once ([`LocalDays`]), not each end of every session.
fn active_days(spans: impl Iterator<Item = (i64, i64)>, filter: &Filter) -> BTreeMap<i64, i64> {
    let mut local = LocalDays::default();
    let mut active: BTreeMap<i64, i64> = BTreeMap::new();
    for (started, last) in spans {
        let first = started.max(filter.since_ms.unwrap_or(started));
        let last = last.min(filter.until_ms.map_or(last, |until| until - 1));
        let (first, last) = (local.day(first), local.day(last));
        // A session whose times are out of order is active on its first day.
        for day in first..=last.max(first) {
            *active.entry(day).or_default() += 1;
        }
    }
    active
}

/// The local days of Unix times in this machine's time zone (`TZ`, else the system's), its
/// offset from UTC asked once for each quarter hour: every zone's offset is a whole number
/// of quarter hours, and its changes come at quarter hours of UTC (but for a few zones'
/// rules of past years, which changed a minute past midnight).
#[derive(Default)]
struct LocalDays(HashMap<i64, i64>);

impl LocalDays {
    /// The local day of Unix ms `ms`, in days since 1970-01-01.
    fn day(&mut self, ms: i64) -> i64 {
        self.seconds(ms).div_euclid(86_400)
    }

    /// The local wall-clock time of Unix ms `ms`, in seconds since 1970-01-01 00:00 of it.
    fn seconds(&mut self, ms: i64) -> i64 {
        let secs = ms.div_euclid(1000);
        let quarter = secs.div_euclid(900);
        let offset = *(self.0.entry(quarter)).or_insert_with(|| {
            crate::platform::sys::local_offset_at(quarter * 900).unwrap_or_else(|| {
                log::debug!(
                    "no local time for Unix time {}; taken as UTC",
                    quarter * 900
                );
                0
            })
        });
        secs + offset
    }
}

/// Day `day` since 1970-01-01 as `YYYY-MM-DD`.
fn date(day: i64) -> String {
    // humantime writes the years 1970 to 9999.
    let secs = u64::try_from(day.clamp(0, 2_932_896) * 86_400).unwrap_or(0);
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    humantime::format_rfc3339_seconds(at).to_string()[..10].to_owned()
}

/// The rows of `sql`, a text and a count each.
fn pairs(
    archive: &mut Archive,
    sql: &str,
    args: &[(&str, &dyn ToSql)],
) -> Result<Vec<(String, i64)>> {
    let result = (|| {
        let mut stmt = archive.connection().prepare(sql)?;
        let rows = stmt.query_map(args, |r| Ok((r.get(0)?, r.get(1)?)))?;
        rows.collect()
    })();
    archive.db(result)
}

/// A year of days to the local today, from a Monday, with the sessions active on each.
pub(crate) struct Calendar {
    /// Each day from the first (a Monday) to today, and its sessions.
    pub days: Vec<(String, i64)>,
}

/// The calendar of the sessions `filter` lists (its window is not read): 53 weeks, the
/// last this one.
pub(crate) fn calendar(archive: &mut Archive, filter: &Filter) -> Result<Calendar> {
    let result = archive.connection().query_row(
        "SELECT d, CAST(strftime('%s', d, 'utc') AS INTEGER) * 1000
         FROM (SELECT date('now', 'localtime', '-6 days', 'weekday 1', '-364 days') AS d)",
        [],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
    );
    let (first, first_ms) = archive.db(result)?;
    let year = Filter {
        since_ms: Some(first_ms),
        until_ms: None,
        harness: filter.harness.clone(),
        project: filter.project.clone(),
        machine: filter.machine,
        model: filter.model.clone(),
        starred: filter.starred,
        tag: filter.tag.clone(),
        text: filter.text.clone(),
        ..Filter::default()
    };
    let active: HashMap<String, i64> = days(archive, &year)?.into_iter().collect();
    let all = pairs(
        archive,
        "WITH RECURSIVE cal(d) AS (
            SELECT :first UNION ALL
            SELECT date(d, '+1 day') FROM cal WHERE d < date('now', 'localtime'))
         SELECT d, 0 FROM cal",
        &[(":first", &first)],
    )?;
    let days = (all.into_iter())
        .map(|(d, _)| {
            let n = active.get(&d).copied().unwrap_or(0);
            (d, n)
        })
        .collect();
    Ok(Calendar { days })
}

/// The bounds of the local day `day` (`YYYY-MM-DD`), Unix ms: its first and the next day's
/// first. `None` when `day` is no date.
pub(crate) fn local_day(archive: &mut Archive, day: &str) -> Result<Option<(i64, i64)>> {
    let result = archive.connection().query_row(
        "SELECT CAST(strftime('%s', ?1, 'utc') AS INTEGER) * 1000,
            CAST(strftime('%s', ?1, '+1 day', 'utc') AS INTEGER) * 1000
         WHERE date(?1) IS ?1",
        [day],
        |r| Ok((r.get(0)?, r.get(1)?)),
    );
    use rusqlite::OptionalExtension;
    archive.db(result.optional())
}

/// How far this machine's local time is ahead of UTC, in minutes.
pub(crate) fn local_offset_minutes(archive: &mut Archive) -> Result<i64> {
    let result = archive.connection().query_row(
        "SELECT (unixepoch('now', 'localtime') - unixepoch('now')) / 60",
        [],
        |r| r.get(0),
    );
    archive.db(result)
}

/// Sessions `listed` holds that started in `filter`'s window, by the weekday (0 Monday) and
/// the hour of their start, in local time.
pub(crate) fn starts(listed: &Listed, filter: &Filter) -> [[i64; 24]; 7] {
    let mut local = LocalDays::default();
    let mut grid = [[0; 24]; 7];
    let started = (listed.sessions.iter()).filter_map(|s| s.started_ms);
    for ms in started.filter(|ms| filter.since_ms.is_none_or(|since| *ms >= since)) {
        let secs = local.seconds(ms);
        // 1970-01-01 was a Thursday, the fourth day of a week from Monday.
        let weekday = (secs.div_euclid(86_400) + 3).rem_euclid(7);
        let hour = secs.rem_euclid(86_400) / 3600;
        grid[weekday as usize][hour as usize] += 1;
    }
    grid
}

/// What the top sessions are ranked by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rank {
    /// User and assistant messages.
    Messages,
    /// From the first activity to the last, in ms.
    Duration,
    /// Tokens of every kind of its model calls.
    Tokens,
}

impl Rank {
    /// What a session of `listed` has of it; `None` for tokens, which `listed` does not hold.
    fn of(self, s: &ListedSession) -> Option<i64> {
        match self {
            Rank::Messages => Some(s.messages),
            Rank::Duration => Some(s.last_ms? - s.started_ms?),
            Rank::Tokens => None,
        }
    }
}

/// A session of a top list.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Ranked {
    /// The agent's id for it.
    pub id: String,
    /// Its machine (0: this one) and that machine's name.
    pub machine_id: i64,
    pub machine: String,
    pub harness: String,
    pub title: Option<String>,
    pub project: Option<String>,
    /// What it is ranked by.
    pub value: i64,
}

/// The `n` sessions of `listed` (those `filter` lists) with the most of `rank`, most first;
/// of two with as much, the one the index has held longer.
pub(crate) fn top(
    archive: &mut Archive,
    listed: &Listed,
    filter: &Filter,
    rank: Rank,
    n: usize,
) -> Result<Vec<Ranked>> {
    if rank == Rank::Tokens {
        return top_by_tokens(archive, filter, n);
    }
    let mut ranked: Vec<(i64, &ListedSession)> = (listed.sessions.iter())
        .filter_map(|s| Some((rank.of(s)?, s)))
        .filter(|(value, _)| *value > 0)
        .collect();
    ranked.sort_unstable_by_key(|(value, s)| (std::cmp::Reverse(*value), s.id));
    ranked.truncate(n);
    let names = MachineNames::of(archive)?;
    let result = (|| {
        let mut title = (archive.connection()).prepare_cached(
            "SELECT coalesce(agent_title, first_prompt) FROM sessions WHERE id = ?1",
        )?;
        (ranked.into_iter())
            .map(|(value, s)| {
                Ok(Ranked {
                    id: s.session.clone(),
                    machine_id: s.machine,
                    machine: names.name(s.machine),
                    harness: s.harness.clone(),
                    title: title.query_row([s.id], |r| r.get(0))?,
                    project: s.project.clone(),
                    value,
                })
            })
            .collect()
    })();
    archive.db(result)
}

/// The `n` sessions `filter` lists with the most tokens, most first.
fn top_by_tokens(archive: &mut Archive, filter: &Filter, n: usize) -> Result<Vec<Ranked>> {
    // The tokens of every session at once: `usage` has no index by session.
    let sql = format!(
        "SELECT se.session, se.machine, se.harness, coalesce(se.agent_title, se.first_prompt),
            se.project, u.tokens
         FROM sessions se
         JOIN (SELECT session, sum(input + output + cache_read + cache_write) AS tokens
               FROM usage GROUP BY session) u ON u.session = se.id
         {LISTED} {IN_WINDOW} AND u.tokens > 0
         ORDER BY u.tokens DESC, se.id LIMIT :n"
    );
    let n = n as i64;
    let mut args = scoped(filter);
    args.push((":n", &n));
    let names = MachineNames::of(archive)?;
    let result = (|| {
        let mut stmt = archive.connection().prepare(&sql)?;
        let rows = stmt.query_map(args.as_slice(), |r| {
            let machine_id = r.get(1)?;
            Ok(Ranked {
                id: r.get(0)?,
                machine_id,
                machine: names.name(machine_id),
                harness: r.get(2)?,
                title: r.get(3)?,
                project: r.get(4)?,
                value: r.get(5)?,
            })
        })?;
        rows.collect()
    })();
    archive.db(result)
}

/// What a share is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    Agent,
    Project,
    Model,
}

/// One agent's, project's or model's part of the sessions.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Share {
    /// The agent, project or model (empty: none recorded).
    pub of: String,
    pub sessions: i64,
    pub messages: i64,
}

/// The `n` agents, projects or models with the most sessions of `listed` (those `filter`
/// lists), most first, then by messages and by name (a session answered by two models
/// counts in each).
pub(crate) fn shares(
    archive: &mut Archive,
    listed: &Listed,
    filter: &Filter,
    part: Part,
    n: usize,
) -> Result<Vec<Share>> {
    let of: fn(&ListedSession) -> String = match part {
        Part::Agent => |s| s.harness.clone(),
        Part::Project => |s| s.project.clone().unwrap_or_default(),
        Part::Model => return model_shares(archive, filter, n),
    };
    let mut counted: HashMap<String, (i64, i64)> = HashMap::new();
    for s in &listed.sessions {
        let (sessions, messages) = counted.entry(of(s)).or_default();
        *sessions += 1;
        *messages += s.messages;
    }
    let mut shares: Vec<Share> = (counted.into_iter())
        .map(|(of, (sessions, messages))| Share {
            of,
            sessions,
            messages,
        })
        .collect();
    shares.sort_unstable_by(|a, b| {
        (b.sessions, b.messages, &a.of).cmp(&(a.sessions, a.messages, &b.of))
    });
    shares.truncate(n);
    Ok(shares)
}

/// The `n` models that answered the most sessions `filter` lists, as [`shares`] orders them.
fn model_shares(archive: &mut Archive, filter: &Filter, n: usize) -> Result<Vec<Share>> {
    let sql = format!(
        "SELECT sm.model, count(*), sum(se.user_messages + se.assistant_messages)
         FROM sessions se JOIN session_models sm ON sm.session = se.id {LISTED} {IN_WINDOW}
         GROUP BY 1 ORDER BY 2 DESC, 3 DESC, 1 LIMIT :n"
    );
    let n = n as i64;
    let mut args = scoped(filter);
    args.push((":n", &n));
    let result = (|| {
        let mut stmt = archive.connection().prepare(&sql)?;
        let rows = stmt.query_map(args.as_slice(), |r| {
            Ok(Share {
                of: r.get(0)?,
                sessions: r.get(1)?,
                messages: r.get(2)?,
            })
        })?;
        rows.collect()
    })();
    archive.db(result)
}

/// How many sessions `filter` lists are deleted from disk (kept in the archive alone), by
/// the rule the list marks them with: their files are read from the index in one query,
/// and looked for on disk.
pub(crate) fn deleted(archive: &mut Archive, filter: &Filter) -> Result<i64> {
    // A row a file, in the order of the sessions' ids (the table's own), so that a session's
    // files come together without a `GROUP BY` sorting them first.
    let sql = format!(
        "SELECT se.id, s.path, coalesce(NOT s.gone, 0)
         FROM sessions se
         LEFT JOIN session_sources ss ON ss.session = se.id
         LEFT JOIN sources s ON s.id = ss.source_id
         {LISTED} {IN_WINDOW}
         ORDER BY se.id"
    );
    let result = (|| {
        let mut stmt = archive.connection().prepare(&sql)?;
        let mut rows = stmt.query(scoped(filter).as_slice())?;
        // Each session's id, files and whether a source of it is live.
        let mut sessions: Vec<(i64, Vec<PathBuf>, bool)> = Vec::new();
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            if sessions.last().is_none_or(|(last, _, _)| *last != id) {
                sessions.push((id, Vec::new(), false));
            }
            let (_, files, live) = sessions.last_mut().expect("a session was just pushed");
            if let Some(path) = r.get_ref(1)?.as_bytes_or_null()? {
                files.push(path_from_blob(path.to_vec()));
            }
            *live |= r.get::<_, bool>(2)?;
        }
        Ok(sessions)
    })();
    let sessions = archive.db(result)?;
    let on_disk =
        super::on_disk::on_disk_each(sessions.iter().map(|(_, f, live)| (f.as_slice(), *live)));
    Ok(on_disk.into_iter().filter(|on| !on).count() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Set in the child processes of [`local_days_are_sqlites_in_zones_of_half_hours_and_summer_time`]
    /// to the zone it runs in (`TZ` is read once per process).
    const CHILD: &str = "TRANSCRIPT_SYNC_TEST_ZONE";

    // The home's calendar and active days were counted by SQLite's `'localtime'`; counted
    // here, each day must be the one SQLite gives, in zones whose offset is not a whole hour
    // and changes for summer time (at 2:00 local in St John's, 2:00 in Lord Howe by half an
    // hour, 1:00 UTC in Berlin).
    #[test]
    fn local_days_are_sqlites_in_zones_of_half_hours_and_summer_time() {
        if let Some(zone) = std::env::var_os(CHILD) {
            return days_as_sqlite_gives_them(&zone.to_string_lossy());
        }
        let name = "consumers::sessions::query::overview::tests::\
                    local_days_are_sqlites_in_zones_of_half_hours_and_summer_time";
        for zone in ["America/St_Johns", "Australia/Lord_Howe", "Europe/Berlin"] {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", name, "--nocapture", "--test-threads", "1"])
                .env("TZ", zone)
                .env(CHILD, zone)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{zone}:\n{said}");
            assert!(said.contains("1 passed"), "{zone}:\n{said}");
        }
    }

    /// Every 7 minutes and 13 seconds over two years, the day [`LocalDays`] gives is SQLite's.
    fn days_as_sqlite_gives_them(zone: &str) {
        let file = std::path::Path::new("/usr/share/zoneinfo").join(zone);
        assert!(
            file.exists(),
            "{file:?} is missing: scripts/test installs tzdata"
        );
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        let mut sqlite = conn
            .prepare("SELECT date(?1 / 1000, 'unixepoch', 'localtime')")
            .unwrap();
        let mut local = LocalDays::default();
        let (from, to) = (1_735_689_600_000_i64, 1_798_761_600_000_i64); // 2025 and 2026
        let mut offsets = HashSet::new();
        for ms in (from..to).step_by(433_000) {
            let expected: String = sqlite.query_row([ms], |r| r.get(0)).unwrap();
            assert_eq!(date(local.day(ms)), expected, "{zone}, Unix ms {ms}");
            offsets.insert(local.0[&(ms.div_euclid(1000).div_euclid(900))]);
        }
        // Two offsets a year: the zone was read, and its summer time.
        assert_eq!(offsets.len(), 2, "{zone}: {offsets:?}");
    }
}
