//! What a request asks for: the sessions list's filters (agent, project, machine, model, a
//! time or a local day), which the list, its CSV and the home read, its sort and its page,
//! which the list page and the list beside a conversation read; the session a path names;
//! the usage page's window and grouping, which the page and its CSV read.

use super::layout::{bad_request, failed};
use super::{Answer, Asked};
use crate::archive::Archive;
use crate::consumers::sessions::query::{self, Filter, Session};
use crate::consumers::sessions::usage::By;
use crate::error::{Error, Result};
use maud::{Markup, html};
use tiny_http::StatusCode;

/// The filters of the sessions page, or the answer to filters it cannot read: the text its
/// title, project or id holds (`q`), agent, project, machine and model; active since a time (`since`), started before one (`until`),
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
        text: asked
            .param("q")
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(str::to_owned),
    }))
}

/// The sessions page's parameters, which its links keep.
pub(super) const LIST_KEYS: [&str; 12] = [
    "q", "agent", "project", "machine", "model", "since", "until", "day", "deleted", "sort",
    "starred", "tag",
];

/// The sessions a page of the list shows.
pub(super) const SESSIONS_PAGE: usize = 200;

/// One page of the sessions list.
pub(super) struct Listed {
    /// Its sessions, in the list's order.
    pub(super) shown: Vec<Session>,
    /// The sessions the filters keep, on every page.
    pub(super) total: usize,
    /// This page, from 1.
    pub(super) page: usize,
    /// The pages there are (1 when none is kept).
    pub(super) pages: usize,
    /// Whether the filters name a machine.
    pub(super) machine: bool,
}

/// The page of the sessions list `asked` names (`page`, from 1; past the last, the last),
/// filtered and sorted as it asks, or the answer to filters it cannot read.
pub(super) fn listed(
    archive: &mut Archive,
    asked: &Asked,
) -> Result<std::result::Result<Listed, Answer>> {
    let mut filter = match session_filter(archive, asked)? {
        Ok(filter) => filter,
        Err(answer) => return Ok(Err(answer)),
    };
    let asked_page: usize = asked
        .param("page")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1);
    // The index's own order and no filter that needs every session's files: one page is
    // read, and the sessions counted. Else every session is read, filtered and sorted here.
    let paged = sort(asked) == "active"
        && asked.param("deleted").is_none()
        && filter.since_ms.is_none()
        && filter.until_ms.is_none();
    let (total, page, shown) = if paged {
        let total = query::sessions_count(archive, &filter)?;
        let page = asked_page.clamp(1, total.div_ceil(SESSIONS_PAGE).max(1));
        filter.limit = SESSIONS_PAGE;
        filter.offset = (page - 1) * SESSIONS_PAGE;
        (total, page, query::sessions(archive, &filter)?)
    } else {
        let mut list = all_matching(archive, asked, &filter)?;
        let total = list.len();
        let page = asked_page.clamp(1, total.div_ceil(SESSIONS_PAGE).max(1));
        let end = (page * SESSIONS_PAGE).min(total);
        let shown = list.drain((page - 1) * SESSIONS_PAGE..end).collect();
        (total, page, shown)
    };
    Ok(Ok(Listed {
        shown,
        total,
        page,
        pages: total.div_ceil(SESSIONS_PAGE).max(1),
        machine: filter.machine.is_some(),
    }))
}

/// Every session `filter` and the request's `deleted` keep, in the list's sort: the whole
/// list a page of the sessions list is cut from.
pub(super) fn all_matching(
    archive: &mut Archive,
    asked: &Asked,
    filter: &Filter,
) -> Result<Vec<Session>> {
    let mut list = query::sessions(archive, filter)?;
    match asked.param("deleted") {
        Some("only") => list.retain(|s| !s.on_disk),
        Some("hide") => list.retain(|s| s.on_disk),
        _ => {}
    }
    match sort(asked) {
        "started" => list.sort_by_key(|s| std::cmp::Reverse(s.started)),
        "messages" => list.sort_by_key(|s| std::cmp::Reverse(s.messages)),
        "title" => list.sort_by_cached_key(|s| s.title.clone().unwrap_or_default().to_lowercase()),
        _ => {}
    }
    Ok(list)
}

/// The list's sort as asked: `active` (the default), `started`, `messages` or `title`.
pub(super) fn sort(asked: &Asked) -> &str {
    asked.param("sort").unwrap_or("active")
}

/// The list's parameters `asked` gives ([`LIST_KEYS`] with a value), for the links that keep
/// them.
pub(super) fn list_pairs(asked: &Asked) -> Vec<(&'static str, &str)> {
    (LIST_KEYS.iter())
        .filter_map(|k| asked.param(k).map(|v| (*k, v)))
        .collect()
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

/// The sessions list's form, as asked: a box that finds sessions by their title, project or
/// id (`q`), then the filters and the sort, folded when `folded` says whether they start open
/// (the list beside a conversation). `found` is the address of what the box's script puts in
/// place of the list's part with the same ids as the box changes (`fragment=list` or
/// `fragment=pane-list`, see [`super::pages`]); without script the box is a field of the form.
pub(super) fn list_form(
    asked: &Asked,
    agents: &[String],
    sort: &str,
    folded: Option<bool>,
    found: &str,
) -> Markup {
    html! {
        form.list-form method="get" action="/sessions" data-found=(found) {
            div.list-find {
                label.visually-hidden for="list-q" { "Find sessions by title, project or id" }
                input #list-q type="search" name="q" value=(asked.param("q").unwrap_or(""))
                    placeholder="Find: title, project, id  (f)" autocomplete="off";
            }
            @match folded {
                Some(open) => details.pane-filters open[open] {
                    summary { "Filters and sort" }
                    (filters(asked, agents, sort))
                },
                None => (filters(asked, agents, sort)),
            }
        }
    }
}

/// The fields of the sessions list's filters and sort as asked, and the button that applies
/// them.
fn filters(asked: &Asked, agents: &[String], sort: &str) -> Markup {
    let keep = |name: &str| asked.param(name).unwrap_or("").to_owned();
    let option = |value: &str, name: &str, current: &str| {
        html! { option value=(value) selected[value == current] { (name) } }
    };
    html! {
        div.filters {
            // What a link from the home set and the form does not show is kept as it is.
            @for name in ["model", "until", "day"] {
                @if let Some(value) = asked.param(name) { input type="hidden" name=(name) value=(value); }
            }
            label { "Agent " select name="agent" {
                (option("", "any", &keep("agent")))
                @for a in agents { (option(a, a, &keep("agent"))) }
            } }
            label { "Project " input type="text" name="project" value=(keep("project")) placeholder="any"; }
            label { "Machine " input type="text" name="machine" value=(keep("machine")) placeholder="every" size="10"; }
            label { "Active since " input type="text" name="since" value=(keep("since")) placeholder="7d, 2026-11-01" size="12"; }
            label { input type="checkbox" name="starred" value="1" checked[keep("starred") == "1"]; " Starred" }
            label { "Tag " input type="text" name="tag" value=(keep("tag")) placeholder="any" size="10"; }
            @if let Some(day) = asked.param("day") { span.count { "Active on " (day) } }
            @if let Some(model) = asked.param("model") { span.count { "Answered by " (model) } }
            label { "Deleted " select name="deleted" {
                (option("", "shown", &keep("deleted")))
                (option("only", "only", &keep("deleted")))
                (option("hide", "hidden", &keep("deleted")))
            } }
            label { "Sort " select name="sort" {
                (option("active", "last active", sort))
                (option("started", "started", sort))
                (option("messages", "messages", sort))
                (option("title", "title", sort))
            } }
            button type="submit" { "Filter" }
        }
    }
}
