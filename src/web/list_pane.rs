//! The sessions list beside a conversation: on a wide screen the session page shows the list
//! it was opened from (its filters, sort and page carried in the URL) on the left, the open
//! session marked, and loads the list's next pages as it scrolls; a narrow screen shows the
//! conversation alone, with a link back to the list.

use super::Asked;
use super::filter::{Listed, list_pairs, listed, sort};
use super::layout::{home, href, listed_href};
use crate::archive::Archive;
use crate::consumers::sessions::query::{self, Session};
use crate::error::Result;
use crate::history::display::{ago, tilde};
use crate::platform::time::now_ms;
use maud::{Markup, html};

/// The session page's `body` (`open`'s) with the list beside it.
pub(super) fn beside(
    archive: &mut Archive,
    asked: &Asked,
    open: &Session,
    body: Markup,
) -> Result<Markup> {
    let keep = list_pairs(asked);
    let back = href("/sessions", &keep);
    Ok(html! {
        div.panes {
            (pane(archive, asked, open)?)
            div.conversation-pane {
                p.back { a href=(back) { "← Sessions" } }
                (body)
            }
        }
    })
}

/// The list pane: a link to the list page, the list's form, then its page of sessions.
fn pane(archive: &mut Archive, asked: &Asked, open: &Session) -> Result<Markup> {
    let listed = match listed(archive, asked)? {
        Ok(listed) => listed,
        // The page says what is wrong with them; here the list is left out.
        Err(_) => {
            return Ok(html! {
                nav.list-pane aria-label="Sessions" {
                    p.error { "The list's filters cannot be read: " a href="/sessions" { "open every session" } }
                }
            });
        }
    };
    let agents = query::harnesses(archive)?;
    let keep = list_pairs(asked);
    // The folded filters start open when one is set; the text has its box above them.
    let filters_set = keep.iter().any(|(k, _)| !matches!(*k, "sort" | "q"));
    let found = href(
        "/sessions",
        &[("fragment", "pane-list"), ("open", &open.id)],
    );
    Ok(html! {
        nav.list-pane #list-pane aria-label="Sessions" {
            div.pane-head {
                h2 { a href=(href("/sessions", &keep)) { "Sessions" } }
                (count(&listed, asked))
            }
            (super::filter::list_form(asked, &agents, sort(asked), Some(filters_set), &found))
            (rows_list(&listed, asked, &open.id))
        }
    })
}

/// What the list beside session `open` found (`listed`): how many (`#list-count`) and its rows
/// (`#session-rows`); the parts of the pane its search box replaces.
pub(super) fn found(listed: &Listed, asked: &Asked, open: &str) -> Markup {
    html! { (count(listed, asked)) (rows_list(listed, asked, open)) }
}

/// How many sessions the list beside a conversation holds (`listed`'s).
fn count(listed: &Listed, asked: &Asked) -> Markup {
    let filtered = list_pairs(asked).iter().any(|(k, _)| *k != "sort");
    html! {
        span.count #list-count role="status" {
            (listed.total) " " @if filtered { "kept by the filters" } @else { "in all" }
        }
    }
}

/// The list of `listed`'s rows beside session `open`, with a link to the page before when it
/// is not the first (the pages loaded as it scrolls come after it, without one).
fn rows_list(listed: &Listed, asked: &Asked, open: &str) -> Markup {
    let before = (listed.page - 1).to_string();
    let newer = href(
        "/sessions",
        &[&list_pairs(asked)[..], &[("page", &before)]].concat(),
    );
    html! {
        ol.session-list #session-rows {
            @if listed.page > 1 { li.newer { a href=(newer) { "← newer sessions" } } }
            (rows(listed, asked, open))
        }
    }
}

/// The pane's rows of `listed`, the open session (`open`) marked, and past the last what
/// loads the next page.
pub(super) fn rows(listed: &Listed, asked: &Asked, open: &str) -> Markup {
    let keep = list_pairs(asked);
    let (this, after) = (listed.page.to_string(), (listed.page + 1).to_string());
    let more = [
        ("page", after.as_str()),
        ("fragment", "pane"),
        ("open", open),
    ];
    let next = href("/sessions", &[&keep[..], &more].concat());
    // A session's link names its page of the list, which the list beside it then shows.
    let keep = match listed.page {
        1 => keep,
        _ => [&keep[..], &[("page", &this)]].concat(),
    };
    let now = now_ms();
    let home = home();
    html! {
        @for s in &listed.shown {
            @let home = home.as_deref().filter(|_| s.machine_id == 0);
            li {
                a.session href=(listed_href(s, &keep)) aria-current=[(s.id == open).then_some("page")] {
                    span.title { (s.title.as_deref().unwrap_or("(untitled)")) }
                    span.sub {
                        (s.harness) " · " (ago(s.last_activity, now)) " · " (s.messages) @if s.messages == 1 { " message · " } @else { " messages · " }
                        (tilde(s.project.as_deref().unwrap_or("-"), home))
                        @if !s.on_disk { " · deleted" }
                        @if s.starred { " · ★" }
                    }
                }
            }
        }
        @if listed.page < listed.pages {
            li.more-rows data-src=(next) { "Loading more sessions…" }
        }
    }
}
