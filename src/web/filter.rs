//! The sessions list's filters as a request gives them (agent, project, machine, model, a
//! time or a local day), which the list and the home both read.

use super::layout::bad_request;
use super::{Answer, Asked};
use crate::archive::Archive;
use crate::consumers::sessions::query::{self, Filter, Session};
use crate::error::{Error, Result};

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
