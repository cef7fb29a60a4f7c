//! The frame of every page (the bar of tabs, the document around a page's body), the pages
//! that say a request failed or was refused, and the links between pages.

use super::Answer;
use maud::{DOCTYPE, Markup, html};
use tiny_http::StatusCode;

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Tab {
    Home,
    Sessions,
    Search,
    Live,
    Usage,
    Status,
    None,
}

/// A whole page: the bar of tabs, then `body`.
pub(super) fn layout(title: &str, tab: Tab, body: Markup) -> String {
    let link = |to: &str, name: &str, this: Tab| {
        html! { a href=(to) class=[(tab == this).then_some("on")] { (name) } }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · transcript-sync" }
                link rel="stylesheet" href="/assets/app.css";
                link rel="icon" href="/assets/icon.svg";
                script src="/assets/app.js" defer {}
            }
            body {
                header.top {
                    a.brand href="/" { "transcript-sync" }
                    nav {
                        (link("/", "Home", Tab::Home))
                        (link("/sessions", "Sessions", Tab::Sessions))
                        (link("/search", "Search", Tab::Search))
                        (link("/live", "Live", Tab::Live))
                        (link("/usage", "Usage", Tab::Usage))
                        (link("/status", "Status", Tab::Status))
                    }
                    form.quick action="/search" method="get" {
                        input #quick type="search" name="q" placeholder="Search  (Ctrl-K)"
                            aria-label="Search every session";
                    }
                    button.theme #theme type="button" title="Light or dark"
                        aria-label="Switch between light and dark" { "◐" }
                    button.keys #keys-button type="button" title="Keys (?)"
                        aria-label="Keys" aria-haspopup="dialog" { "?" }
                }
                main { (body) }
                (keys())
            }
        }
    }
    .into_string()
}

/// The keys every page answers, in the dialog `?` opens.
fn keys() -> Markup {
    let keys: [(&[&str], &str); 8] = [
        (
            &["j", "k"],
            "Next, previous: a session in the list, or a message in the conversation",
        ),
        (
            &["h", "l"],
            "To the list, to the conversation: where j and k move (the one the focus or the last click is in; else the conversation)",
        ),
        (
            &["Enter"],
            "Open the session chosen in the list (it has the focus)",
        ),
        (&["/"], "To the search box"),
        (
            &["f"],
            "To the box that finds sessions in the list by title, project or id",
        ),
        (&["g", "d"], "Home (the dashboard): g, then d"),
        (&["?"], "These keys (Escape closes them)"),
        (&["Ctrl-K"], "To the search box, from a field too"),
    ];
    html! {
        dialog #keys aria-labelledby="keys-title" {
            h2 #keys-title { "Keys" }
            p.hint { "Not while typing in a field, and not with Ctrl, Alt or ⌘." }
            dl.keys {
                @for (names, what) in keys {
                    dt { @for (i, k) in names.iter().enumerate() { @if i > 0 { " " } kbd { (k) } } }
                    dd { (what) }
                }
            }
            form method="dialog" { button type="submit" { "Close" } }
        }
    }
}

/// The page of a request refused, saying why.
pub(crate) fn refused(why: &str) -> String {
    layout(
        "Refused",
        Tab::None,
        html! { h1 { "Refused" } p.error { (why) } },
    )
}

/// The page of a request without the token.
pub(crate) fn no_token() -> String {
    refused(
        "this page needs the access token: open the link `transcript-sync ui` printed (it \
         holds the token; the browser then keeps it), or run it again for a new one",
    )
}

/// The page of a failure, saying what failed.
pub(crate) fn failed(why: &str) -> String {
    layout(
        "Error",
        Tab::None,
        html! { h1 { "Error" } p.error { (why) } },
    )
}

pub(crate) fn not_found(what: &str) -> String {
    layout(
        "Not found",
        Tab::None,
        html! { h1 { "Not found" } p.error { "nothing is at " code { (what) } } },
    )
}

/// A link's target: `path` (which may have a query already) with the `pairs` that have a
/// value added to its query, encoded.
pub(super) fn href(path: &str, pairs: &[(&str, &str)]) -> String {
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs.iter().filter(|(_, v)| !v.is_empty()))
        .finish();
    match (query.is_empty(), path.contains('?')) {
        (true, _) => path.to_owned(),
        (false, true) => format!("{path}&{query}"),
        (false, false) => format!("{path}?{query}"),
    }
}

/// What a path segment keeps as it is: RFC 3986's unreserved characters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A path segment, encoded.
pub(super) fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, SEGMENT).to_string()
}

/// The page of session `s` (another machine's names its machine).
pub(super) fn session_href(id: &str, machine_id: i64, machine: &str, rest: &str) -> String {
    let path = format!("/s/{}{rest}", segment(id));
    match machine_id {
        0 => path,
        _ => href(&path, &[("machine", machine)]),
    }
}

/// The page of session `s` opened from the sessions list, keeping the list's parameters
/// `keep` for the list shown beside it (its machine's name already given, when another's).
pub(super) fn listed_href(
    s: &crate::consumers::sessions::query::Session,
    keep: &[(&str, &str)],
) -> String {
    let keep: Vec<(&str, &str)> = (keep.iter())
        .filter(|(k, _)| s.machine_id == 0 || *k != "machine")
        .copied()
        .collect();
    href(&session_href(&s.id, s.machine_id, &s.machine, ""), &keep)
}

/// The home directory, as every command finds it, for paths written `~/…`.
pub(super) fn home() -> Option<std::path::PathBuf> {
    crate::platform::home::home(&crate::platform::home::process_env).ok()
}

pub(super) fn bad_request(why: &str) -> Answer {
    Answer::Html(StatusCode(400), failed(why))
}
