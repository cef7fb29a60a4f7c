//! The home page: the archive at a glance over a window (7 days, 30, a year, all) and for an
//! agent, project or machine: its figures, a year's calendar of activity, when sessions
//! start, the top sessions and the shares of each agent, project and model. Every figure
//! links to the sessions list that shows the sessions behind it.

use super::layout::{self, Tab, bad_request, href, layout, session_href};
use super::{Answer, Asked, Shared, charts};
use crate::archive::Archive;
use crate::consumers::sessions::query::Filter;
use crate::consumers::sessions::query::overview::{self, Listed, Part, Rank, Ranked, Share};
use crate::consumers::sessions::usage;
use crate::error::Result;
use crate::history::display::tilde;
use indicatif::HumanCount;
use maud::{Markup, html};
use tiny_http::StatusCode;

/// The windows offered, as `since` takes them, and their names.
const WINDOWS: [(&str, &str); 4] = [
    ("7d", "7 days"),
    ("30d", "30 days"),
    ("365d", "a year"),
    ("all", "all time"),
];
/// Sessions in each top list, and rows in each share.
const TOP: usize = 5;
/// The window of a home asked for none.
const DEFAULT_WINDOW: &str = "30d";
const SHARES: usize = 8;

/// What the page is of: the window and the filters, as asked and as the index reads them.
struct Scope<'a> {
    window: &'a str,
    filter: Filter,
    /// The filters' parameters, which every link keeps.
    kept: Vec<(&'static str, &'a str)>,
}

impl Scope<'_> {
    /// The sessions list of this scope, with `more` parameters.
    fn list(&self, more: &[(&str, &str)]) -> String {
        let mut pairs: Vec<(&str, &str)> = self.kept.clone();
        if self.window != "all" {
            pairs.push(("since", self.window));
        }
        pairs.extend_from_slice(more);
        href("/sessions", &pairs)
    }

    /// The home of this scope in another window.
    fn home_in(&self, window: &str) -> String {
        let mut pairs = self.kept.clone();
        pairs.push(("window", window));
        href("/", &pairs)
    }
}

pub(super) fn page(shared: &Shared, archive: &mut Archive, asked: &Asked) -> Result<Answer> {
    let window = asked.param("window").unwrap_or(DEFAULT_WINDOW);
    if !WINDOWS.iter().any(|(w, _)| *w == window) {
        let why = format!("window {window:?} is none of 7d, 30d, 365d, all");
        return Ok(bad_request(&why));
    }
    let mut filter = match super::filter::session_filter(archive, asked)? {
        Ok(filter) => filter,
        Err(answer) => return Ok(answer),
    };
    filter.since_ms = match window {
        "all" => None,
        w => crate::history::parse_since(w).ok(),
    };
    filter.until_ms = None;
    let kept = ["q", "agent", "project", "machine"]
        .into_iter()
        .filter_map(|k| asked.param(k).map(|v| (k, v)))
        .collect();
    let scope = Scope {
        window,
        filter,
        kept,
    };
    let listed = overview::listed(archive, &scope.filter)?;
    let body = html! {
        h1 { "Home" }
        (controls(archive, asked, &scope)?)
        (figures(shared, archive, &scope, &listed)?)
        (activity(archive, &scope, &listed)?)
        (tops(archive, &scope, &listed)?)
        (shares(archive, &scope, &listed)?)
    };
    Ok(Answer::Html(
        StatusCode(200),
        layout("Home", Tab::Home, body),
    ))
}

/// The windows as links, and the form of the window and filters (which works without
/// script).
fn controls(archive: &mut Archive, asked: &Asked, scope: &Scope) -> Result<Markup> {
    let agents = crate::consumers::sessions::query::harnesses(archive)?;
    let keep = |name: &str| asked.param(name).unwrap_or("").to_owned();
    Ok(html! {
        nav.by.windows aria-label="Window" {
            @for (w, name) in WINDOWS {
                a href=(scope.home_in(w)) class=[(w == scope.window).then_some("on")]
                    aria-current=[(w == scope.window).then_some("page")] { (name) }
            }
        }
        form.filters #home-filters method="get" action="/" {
            label { "Window " select name="window" {
                @for (w, name) in WINDOWS { option value=(w) selected[w == scope.window] { (name) } }
            } }
            label { "Agent " select name="agent" {
                option value="" { "any" }
                @for a in &agents { option value=(a) selected[*a == keep("agent")] { (a) } }
            } }
            label { "Project " input type="text" name="project" value=(keep("project")) placeholder="any"; }
            label { "Machine " input type="text" name="machine" value=(keep("machine")) placeholder="every" size="10"; }
            button type="submit" { "Show" }
        }
    })
}

/// One figure: its value, what it counts, and where its sessions are.
fn figure(id: &str, value: String, label: &str, to: &str) -> Markup {
    html! {
        a.figure id=(id) href=(to) {
            span.value { (value) }
            span.label { (label) }
        }
    }
}

fn figures(
    shared: &Shared,
    archive: &mut Archive,
    scope: &Scope,
    listed: &Listed,
) -> Result<Markup> {
    let f = overview::figures(listed, &scope.filter);
    let deleted = overview::deleted(archive, &scope.filter)?;
    let request = usage::Request {
        since_ms: scope.filter.since_ms,
        until_ms: None,
        harness: scope.filter.harness.clone(),
        project: scope.filter.project.clone(),
        machine: scope.filter.machine,
    };
    let (_, tokens) = usage::usage(archive, usage::By::Day, &request, &shared.prices)?;
    let per_session = match f.sessions {
        0 => "0".to_owned(),
        n => format!("{:.1}", f.messages as f64 / n as f64),
    };
    let all = scope.list(&[]);
    let since = match scope.window {
        "all" => "1970-01-01",
        w => w,
    };
    let usage_page = href("/usage", &[("by", "day"), ("since", since)]);
    let count = |n: i64| HumanCount(n.max(0) as u64).to_string();
    Ok(html! {
        section.figures aria-label="Figures" {
            (figure("fig-sessions", count(f.sessions), "sessions", &all))
            (figure("fig-messages", count(f.messages), "messages", &scope.list(&[("sort", "messages")])))
            (figure("fig-per-session", per_session, "messages a session", &scope.list(&[("sort", "messages")])))
            (figure("fig-projects", count(f.projects), "projects", &all))
            (figure("fig-agents", count(f.agents), "agents", &all))
            (figure("fig-days", count(f.active_days), "active days", &all))
            (figure("fig-tokens", count(super::tokens::all_tokens(&tokens)), "tokens", &usage_page))
            (figure("fig-cost", super::tokens::cost(&tokens), "estimated cost", &usage_page))
            (figure("fig-deleted", count(deleted), "deleted by their agent, kept", &scope.list(&[("deleted", "only")])))
        }
    })
}

/// The calendar of the year and the hours of the window.
fn activity(archive: &mut Archive, scope: &Scope, listed: &Listed) -> Result<Markup> {
    let calendar = overview::calendar(archive, &scope.filter)?;
    let total: i64 = calendar.days.iter().map(|(_, n)| n).sum();
    let grid = overview::starts(listed, &scope.filter);
    let zone = zone(overview::local_offset_minutes(archive)?);
    let day_link = |day: &str| {
        let mut pairs = scope.kept.clone();
        pairs.push(("day", day));
        href("/sessions", &pairs)
    };
    Ok(html! {
        section.panel #activity {
            h2 { "Activity over the year" }
            p.hint { "Sessions active each day, " (HumanCount(total.max(0) as u64)) " session-days in all; a day opens its sessions. Days in the server's local time (" (zone) ")." }
            (charts::calendar(&calendar.days, day_link))
        }
        section.panel #hours {
            h2 { "When sessions start" }
            p.hint { "Sessions started in the window, by weekday and hour, in the server's local time (" (zone) ")." }
            (charts::heatmap(&grid, &zone))
        }
    })
}

/// `UTC`, `UTC+01:00`, `UTC-05:30`.
fn zone(minutes: i64) -> String {
    match minutes {
        0 => "UTC".to_owned(),
        m => {
            let sign = if m < 0 { '-' } else { '+' };
            format!("UTC{sign}{:02}:{:02}", m.abs() / 60, m.abs() % 60)
        }
    }
}

/// A length of time as a person says it: `45 s`, `12 min`, `3 h 05 min`, `2 d 4 h`.
fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min", s / 60)
    } else if s < 86400 {
        format!("{} h {:02} min", s / 3600, s % 3600 / 60)
    } else {
        format!("{} d {} h", s / 86400, s % 86400 / 3600)
    }
}

fn tops(archive: &mut Archive, scope: &Scope, listed: &Listed) -> Result<Markup> {
    let lists = [
        (Rank::Messages, "By messages", "top-messages"),
        (Rank::Duration, "By duration", "top-duration"),
        (Rank::Tokens, "By tokens", "top-tokens"),
    ];
    let home = layout::home();
    let mut tables = Vec::new();
    for (rank, name, id) in lists {
        let top = overview::top(archive, listed, &scope.filter, rank, TOP)?;
        tables.push(top_table(&top, rank, name, id, home.as_deref()));
    }
    Ok(html! {
        section.panel #tops {
            h2 { "Top sessions" }
            div.columns { @for t in &tables { (t) } }
        }
    })
}

fn top_table(
    top: &[Ranked],
    rank: Rank,
    name: &str,
    id: &str,
    home: Option<&std::path::Path>,
) -> Markup {
    let value = |v: i64| match rank {
        Rank::Duration => duration(v),
        _ => HumanCount(v.max(0) as u64).to_string(),
    };
    html! {
        table.top id=(id) {
            caption { (name) }
            thead { tr { th { "Session" } th.num { (name.trim_start_matches("By ")) } } }
            tbody {
                @for s in top {
                    @let home = home.filter(|_| s.machine_id == 0);
                    tr {
                        td.title {
                            a href=(session_href(&s.id, s.machine_id, &s.machine, "")) { (s.title.as_deref().unwrap_or("(untitled)")) }
                            div.sub { (s.harness) " · " (tilde(s.project.as_deref().unwrap_or("-"), home)) }
                        }
                        td.num { (value(s.value)) }
                    }
                }
                @if top.is_empty() { tr { td.hint colspan="2" { "None in this window." } } }
            }
        }
    }
}

fn shares(archive: &mut Archive, scope: &Scope, listed: &Listed) -> Result<Markup> {
    let parts = [
        (Part::Agent, "agent", "Agents"),
        (Part::Project, "project", "Projects"),
        (Part::Model, "model", "Models"),
    ];
    let home = layout::home();
    let mut tables = Vec::new();
    for (part, key, name) in parts {
        let rows = overview::shares(archive, listed, &scope.filter, part, SHARES)?;
        tables.push(share_table(scope, &rows, key, name, home.as_deref()));
    }
    Ok(html! {
        section.panel #shares {
            h2 { "By agent, project and model" }
            div.columns { @for t in &tables { (t) } }
        }
    })
}

fn share_table(
    scope: &Scope,
    rows: &[Share],
    key: &str,
    name: &str,
    home: Option<&std::path::Path>,
) -> Markup {
    let max = rows.iter().map(|r| r.sessions).max().unwrap_or(0);
    html! {
        table.share id=(format!("share-{key}")) {
            caption { (name) }
            thead { tr { th { (key) } th { span.visually-hidden { "Share" } } th.num { "Sessions" } th.num { "Msgs" } } }
            tbody {
                @for r in rows {
                    tr {
                        td.of {
                            @if r.of.is_empty() { span.hint { "(none)" } }
                            @else {
                                @let shown = if key == "project" { tilde(&r.of, home) } else { r.of.clone() };
                                a href=(scope.list(&[(key, &r.of)])) title=(r.of) { (shown) }
                            }
                        }
                        td.bar { (charts::bar(r.sessions, max)) }
                        td.num { (HumanCount(r.sessions.max(0) as u64)) }
                        td.num { (HumanCount(r.messages.max(0) as u64)) }
                    }
                }
                @if rows.is_empty() { tr { td.hint colspan="4" { "None in this window." } } }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_reads_in_the_largest_units_that_fit() {
        assert_eq!(duration(45_000), "45 s");
        assert_eq!(duration(12 * 60_000), "12 min");
        assert_eq!(duration(3 * 3_600_000 + 5 * 60_000), "3 h 05 min");
        assert_eq!(duration(2 * 86_400_000 + 4 * 3_600_000), "2 d 4 h");
    }

    #[test]
    fn a_zone_is_named_by_its_offset_from_utc() {
        assert_eq!(zone(0), "UTC");
        assert_eq!(zone(60), "UTC+01:00");
        assert_eq!(zone(-330), "UTC-05:30");
    }
}
