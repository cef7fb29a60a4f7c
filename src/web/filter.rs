//! What a request asks for, as the pages and downloads read it: the sessions list's filters
//! (agent, project, machine, model, a time or a local day), which the list, its CSV and the
//! home read; the session a path names; the usage page's window and grouping.

use super::layout::{bad_request, failed};
use super::{Answer, Asked};
use crate::archive::Archive;
use crate::consumers::sessions::query::{self, Filter, Session};
use crate::consumers::sessions::usage::By;
use crate::error::{Error, Result};
use tiny_http::StatusCode;

/// The filters of the sessions page, or the answer to filters it cannot read: agent,
/// project, machine and model; active since a time (`since`), started before one (`until`),
/// or active on a local day (`day`, which sets both).
pub(super) fn session_filter(
    archive: &mut Archive,
    asked: &Asked,
) -> Result<std::result::Result<Filter, Answer>> {
    let time = |name: &str| {
        asked
            .param(name)
            .map(crate::history::parse_since)
            .transpose()
    };
    let (mut since_ms, mut until_ms) = match (time("since"), time("until")) {
        (Ok(since), Ok(until)) => (since, until),
        (Err(e), _) | (_, Err(e)) => return Ok(Err(bad_request(&e))),
    };
    if let Some(day) = asked.param("day") {
        match query::overview::local_day(archive, day)? {
            Some((first, next)) => (since_ms, until_ms) = (Some(first), Some(next)),
            None => {
                return Ok(Err(bad_request(&format!(
                    "day {day:?} is no date (2026-11-01)"
                ))));
            }
        }
    }
    let machine = match asked.param("machine").filter(|m| *m != "all") {
        Some(name) => match query::machine_named(archive, name) {
            Ok(m) => m,
            Err(e @ Error::NoSuchMachine { .. }) => return Ok(Err(bad_request(&e.to_string()))),
            Err(e) => return Err(e),
        },
        None => None,
    };
    Ok(Ok(Filter {
        harness: asked.param("agent").map(str::to_owned),
        project: asked.param("project").map(str::to_owned),
        since_ms,
        until_ms,
        model: asked.param("model").map(str::to_owned),
        machine,
        limit: 0,
        offset: 0,
        starred: asked.param("starred").is_some_and(|v| v == "1"),
        tag: asked.param("tag").map(str::to_owned),
    }))
}

/// The sessions page's parameters, which its links keep.
pub(super) const LIST_KEYS: [&str; 11] = [
    "agent", "project", "machine", "model", "since", "until", "day", "deleted", "sort", "starred",
    "tag",
];

/// Every session `filter` and the request's `deleted` keep, in the order of `sort` (the last
/// active first, started, messages or title): the whole list a page of the sessions page
/// is cut from.
pub(super) fn all_matching(
    archive: &mut Archive,
    asked: &Asked,
    filter: &Filter,
    sort: &str,
) -> Result<Vec<Session>> {
    let mut list = query::sessions(archive, filter)?;
    match asked.param("deleted") {
        Some("only") => list.retain(|s| !s.on_disk),
        Some("hide") => list.retain(|s| s.on_disk),
        _ => {}
    }
    match sort {
        "started" => list.sort_by_key(|s| std::cmp::Reverse(s.started)),
        "messages" => list.sort_by_key(|s| std::cmp::Reverse(s.messages)),
        "title" => list.sort_by_cached_key(|s| s.title.clone().unwrap_or_default().to_lowercase()),
        _ => {}
    }
    Ok(list)
}

/// The session `id` names (of `?machine=`, else of any machine).
pub(super) fn find(
    archive: &mut Archive,
    asked: &Asked,
    id: &str,
) -> Result<std::result::Result<Session, Answer>> {
    let machine = asked.param("machine").unwrap_or("all");
    match crate::history::find_session(archive, id, machine) {
        Ok(s) => Ok(Ok(s)),
        Err(
            e @ (Error::NoSuchSession { .. }
            | Error::AmbiguousSession { .. }
            | Error::NoSuchMachine { .. }),
        ) => Ok(Err(Answer::Html(StatusCode(404), failed(&e.to_string())))),
        Err(e) => Err(e),
    }
}

/// The usage page's grouping (`by`, a day by default) and window (`since`, 30 days by
/// default) as asked, with the time it starts; else the answer to what it cannot read.
pub(super) fn usage_window(asked: &Asked) -> std::result::Result<(By, &str, &str, i64), Answer> {
    let by_name = asked.param("by").unwrap_or("day");
    let Ok(by) = <By as clap::ValueEnum>::from_str(by_name, false) else {
        return Err(bad_request(&format!(
            "by {by_name:?} is none of day, week, month, model, project, agent, machine, session"
        )));
    };
    let since = asked.param("since").unwrap_or("30d");
    match crate::history::parse_since(since) {
        Ok(since_ms) => Ok((by, by_name, since, since_ms)),
        Err(e) => Err(bad_request(&e)),
    }
}
