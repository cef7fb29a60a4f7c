//! The sessions at a glance, counted in SQL over the session index: figures of a window, the
//! sessions active each day (in the local time of this machine), when they start (hour by
//! weekday), the top sessions and the shares of each agent, project and model. A session is
//! in a window when it was active in it: its last activity at or after the window's start,
//! its first before its end, as [`super::sessions`] lists them with the same [`Filter`].

use super::{Filter, LISTED, MachineNames, on_disk, paths};
use crate::archive::Archive;
use crate::error::Result;
use rusqlite::ToSql;
use std::collections::HashMap;
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

/// The figures of the sessions `filter` lists.
pub(crate) fn figures(archive: &mut Archive, filter: &Filter) -> Result<Figures> {
    let sql = format!(
        "SELECT count(*), coalesce(sum(se.user_messages + se.assistant_messages), 0),
            count(DISTINCT se.project), count(DISTINCT se.harness)
         FROM sessions se {LISTED} {IN_WINDOW}"
    );
    let result = archive
        .connection()
        .query_row(&sql, scoped(filter).as_slice(), |r| {
            Ok(Figures {
                sessions: r.get(0)?,
                messages: r.get(1)?,
                projects: r.get(2)?,
                agents: r.get(3)?,
                active_days: 0,
            })
        });
    let mut figures = archive.db(result)?;
    figures.active_days = days(archive, filter)?.len() as i64;
    Ok(figures)
}

/// Each local day (`YYYY-MM-DD`) of the window on which a session `filter` lists was
/// active, with how many were, in order. A session is active on each day from its first
/// activity's to its last's.
pub(crate) fn days(archive: &mut Archive, filter: &Filter) -> Result<Vec<(String, i64)>> {
    // Each session's span of days, cut to the window, one row a day.
    let sql = format!(
        "WITH RECURSIVE span(day, last) AS (
            SELECT date(max(se.started_ms, coalesce(:since, se.started_ms)) / 1000,
                        'unixepoch', 'localtime'),
                   date(min(se.last_ms, coalesce(:until - 1, se.last_ms)) / 1000,
                        'unixepoch', 'localtime')
            FROM sessions se {LISTED} {IN_WINDOW}
              AND se.started_ms IS NOT NULL AND se.last_ms IS NOT NULL
            UNION ALL
            SELECT date(day, '+1 day'), last FROM span WHERE day < last)
         SELECT day, count(*) FROM span GROUP BY day ORDER BY day"
    );
    pairs(archive, &sql, &scoped(filter))
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

/// Sessions `filter` lists that started in its window, by the weekday (0 Monday) and the
/// hour of their start, in local time.
pub(crate) fn starts(archive: &mut Archive, filter: &Filter) -> Result<[[i64; 24]; 7]> {
    // Counted by quarter of an hour first, each quarter then taken to local time once: the
    // conversion is most of the query's time, and every time zone's offset from UTC is a
    // whole number of quarters, so a quarter lies in one local hour.
    let sql = format!(
        "SELECT (CAST(strftime('%w', q * 900, 'unixepoch', 'localtime') AS INTEGER) + 6) % 7,
            CAST(strftime('%H', q * 900, 'unixepoch', 'localtime') AS INTEGER),
            n
         FROM (SELECT se.started_ms / 900000 AS q, count(*) AS n
               FROM sessions se {LISTED} {IN_WINDOW}
                 AND se.started_ms IS NOT NULL AND (:since IS NULL OR se.started_ms >= :since)
               GROUP BY 1)"
    );
    let result = (|| {
        let mut stmt = archive.connection().prepare(&sql)?;
        let rows = stmt.query_map(scoped(filter).as_slice(), |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get(2)?))
        })?;
        rows.collect::<rusqlite::Result<Vec<(i64, i64, i64)>>>()
    })();
    let mut grid = [[0; 24]; 7];
    for (day, hour, n) in archive.db(result)? {
        grid[day.rem_euclid(7) as usize][hour.rem_euclid(24) as usize] += n;
    }
    Ok(grid)
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
    fn sql(self) -> &'static str {
        match self {
            Rank::Messages => "se.user_messages + se.assistant_messages",
            Rank::Duration => "se.last_ms - se.started_ms",
            Rank::Tokens => "coalesce(u.tokens, 0)",
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

/// The `n` sessions `filter` lists with the most of `rank`, most first.
pub(crate) fn top(
    archive: &mut Archive,
    filter: &Filter,
    rank: Rank,
    n: usize,
) -> Result<Vec<Ranked>> {
    // The tokens of every session at once: `usage` has no index by session.
    let sql = format!(
        "SELECT se.session, se.machine, se.harness, coalesce(se.agent_title, se.first_prompt),
            se.project, {value} AS value
         FROM sessions se
         LEFT JOIN (SELECT session, sum(input + output + cache_read + cache_write) AS tokens
                    FROM usage GROUP BY session) u ON u.session = se.id
         {LISTED} {IN_WINDOW} AND {value} > 0
         ORDER BY value DESC, se.id LIMIT :n",
        value = rank.sql()
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

/// The `n` agents, projects or models with the most sessions `filter` lists, most first (a
/// session answered by two models counts in each).
pub(crate) fn shares(
    archive: &mut Archive,
    filter: &Filter,
    part: Part,
    n: usize,
) -> Result<Vec<Share>> {
    let (of, join) = match part {
        Part::Agent => ("se.harness", ""),
        Part::Project => ("coalesce(se.project, '')", ""),
        Part::Model => ("sm.model", "JOIN session_models sm ON sm.session = se.id"),
    };
    let sql = format!(
        "SELECT {of}, count(*), sum(se.user_messages + se.assistant_messages)
         FROM sessions se {join} {LISTED} {IN_WINDOW}
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
    let sql = format!(
        "SELECT group_concat(s.path, char(0)), coalesce(max(NOT s.gone), 0)
         FROM sessions se
         LEFT JOIN session_sources ss ON ss.session = se.id
         LEFT JOIN sources s ON s.id = ss.source_id
         {LISTED} {IN_WINDOW}
         GROUP BY se.id"
    );
    let result = (|| {
        let mut stmt = archive.connection().prepare(&sql)?;
        let rows = stmt.query_map(scoped(filter).as_slice(), |r| {
            let files: Vec<PathBuf> = paths(r.get_ref(0)?.as_bytes_or_null()?);
            Ok(!on_disk(&files, r.get(1)?))
        })?;
        rows.collect::<rusqlite::Result<Vec<bool>>>()
    })();
    Ok(archive.db(result)?.into_iter().filter(|gone| *gone).count() as i64)
}
