//! The pages, written with maud, which escapes every value put in them: a transcript's text
//! reaches a page only escaped, or as Markdown made safe (a conversation is written by
//! [`crate::history::html`], as a shared file is).

use super::filter::{Listed, find, list_form, list_pairs, listed, sort, usage_window};
use super::layout::{
    Tab, failed, home, href, layout, listed_href, not_found, refused, segment, session_href,
};
use super::tokens::{all_tokens, cost};
use super::{Answer, Asked, Shared};
use crate::agents::message::{Part, parse};
use crate::archive::Archive;
use crate::archive::marks::Marks;
use crate::consumers::sessions::query::{self, Filter, MessageRecord, Session, format_time};
use crate::consumers::sessions::usage::{self, By};
use crate::error::{Error, Result};
use crate::history::display::{ago, short_id, tilde};
use crate::history::html::message;
use crate::history::restore::{FileReport, Restored};
use crate::platform::time::now_ms;
use indicatif::HumanCount;
use maud::{Markup, PreEscaped, html};
use tiny_http::{Method, StatusCode};

/// Messages a session page (or each part of it loaded as one scrolls) shows.
const MESSAGES_PAGE: usize = 50;
/// Search hits shown.
const HITS: usize = 100;
/// The marks search puts around a match, before the snippet is escaped (characters of
/// Unicode's private use area, which a transcript's text does not use for this).
const MARKS: (&str, &str) = ("\u{E000}", "\u{E001}");

/// The page `asked` names.
pub(crate) fn page(
    shared: &Shared,
    archive: &mut Archive,
    asked: &Asked,
    path: &[&str],
) -> Result<Answer> {
    if asked.method == Method::Post {
        let token = asked.form.get("csrf").map(String::as_str).unwrap_or("");
        if !super::same(token, &shared.csrf) {
            let text = "this action did not come from a page of this server (its form token is \
                        missing or wrong): open the page again and use its button";
            return Ok(Answer::Html(StatusCode(403), refused(text)));
        }
    }
    match (&asked.method, path) {
        (Method::Get, []) => super::home::page(shared, archive, asked),
        (Method::Get, ["sessions"]) => sessions(archive, asked),
        (Method::Get, ["sessions.csv"]) => super::downloads::sessions_csv(archive, asked),
        (Method::Get, ["usage.csv"]) => super::downloads::usage_csv(shared, archive, asked),
        (Method::Get, ["s", id, "share.html"]) => {
            super::downloads::share(shared, archive, asked, id)
        }
        (Method::Get, ["search"]) => search(archive, asked),
        (Method::Get, ["s", id]) => session(shared, archive, asked, id),
        (Method::Post, ["s", id, "marks"]) => save_marks(archive, asked, id),
        (Method::Get, ["s", id, "messages"]) => more_messages(archive, asked, id),
        (Method::Get, ["s", id, "raw"]) => raw(archive, asked, id),
        (Method::Get, ["s", id, "restore"]) => restore(shared, archive, asked, id, false),
        (Method::Post, ["s", id, "restore"]) => restore(shared, archive, asked, id, true),
        (Method::Get, ["live"]) => live_page(archive),
        (Method::Get, ["status"]) => status(shared, archive),
        (Method::Get, ["usage"]) => usage_page(shared, archive, asked),
        _ => Ok(Answer::Html(
            StatusCode(404),
            not_found(&format!("/{}", path.join("/"))),
        )),
    }
}

fn sessions(archive: &mut Archive, asked: &Asked) -> Result<Answer> {
    let listed = match listed(archive, asked)? {
        Ok(listed) => listed,
        Err(answer) => return Ok(answer),
    };
    let open = asked.param("open").unwrap_or("");
    let fragment = match asked.param("fragment") {
        Some("pane") => Some(super::list_pane::rows(&listed, asked, open)),
        Some("pane-list") => Some(super::list_pane::found(&listed, asked, open)),
        Some("list") => Some(found(archive, asked, &listed)?),
        _ => None,
    };
    if let Some(fragment) = fragment {
        return Ok(Answer::Html(StatusCode(200), fragment.into_string()));
    }
    let agents = query::harnesses(archive)?;
    let body = html! {
        h1 { "Sessions" }
        (list_form(asked, &agents, sort(asked), None, "/sessions?fragment=list"))
        (found(archive, asked, &listed)?)
    };
    Ok(Answer::Html(
        StatusCode(200),
        layout("Sessions", Tab::Sessions, body),
    ))
}

/// What the sessions page found (`listed`): how many (`#list-count`), then (`#list-found`) the
/// link to them as CSV, the table of its page and the links to the pages beside it; the parts
/// of the page its search box replaces.
fn found(archive: &mut Archive, asked: &Asked, listed: &Listed) -> Result<Markup> {
    let Listed {
        shown,
        total,
        page,
        pages,
        ..
    } = listed;
    let (total, page, pages) = (*total, *page, *pages);
    let known = query::session_ids(archive)?;
    let machines = shown.iter().any(|s| s.machine_id != 0) || listed.machine;
    let keep = list_pairs(asked);
    let page_link = |n: usize| {
        let n = n.to_string();
        let mut pairs = keep.clone();
        pairs.push(("page", &n));
        href("/sessions", &pairs)
    };
    // A session's link names its page of the list, which the list beside it then shows.
    let this = page.to_string();
    let mut row_keep = keep.clone();
    if page > 1 {
        row_keep.push(("page", &this));
    }
    Ok(html! {
        p.count #list-count role="status" { (HumanCount(total as u64)) @if total == 1 { " session" } @else { " sessions" } @if pages > 1 { ", page " (page) " of " (pages) } }
        div #list-found {
            p.hint.download { a #sessions-csv href=(href("/sessions.csv", &keep)) download { "Download CSV" } " of every session these filters keep" }
            (sessions_table(shown, &known, machines, &row_keep))
            @if pages > 1 {
                nav.pages {
                    @if page > 1 { a href=(page_link(page - 1)) { "← newer" } }
                    @if page < pages { a href=(page_link(page + 1)) { "older →" } }
                }
            }
        }
    })
}

/// The table of `shown` sessions (with a machine column when `machines`); `known` is every
/// session id, sorted, for their short ids. A session's link keeps the list's parameters
/// `keep`, for the list beside it.
fn sessions_table(
    shown: &[Session],
    known: &[String],
    machines: bool,
    keep: &[(&str, &str)],
) -> Markup {
    let now = now_ms();
    let home = home();
    html! {
        table.sessions {
            thead { tr {
                th { "Last active" } th { "Agent" }
                @if machines { th { "Machine" } }
                th.num { "Msgs" } th { "Project" } th { "Title" }
            } }
            tbody {
                @for s in shown {
                    @let home = home.as_deref().filter(|_| s.machine_id == 0);
                    tr.deleted[!s.on_disk] {
                        td title=(s.last_activity.map(format_time).unwrap_or_default()) { (ago(s.last_activity, now)) }
                        td { (s.harness) }
                        @if machines { td { (s.machine) } }
                        td.num { (s.messages) }
                        td.project { (tilde(s.project.as_deref().unwrap_or("-"), home)) }
                        td.title {
                            a.session href=(listed_href(s, keep)) {
                                (s.title.as_deref().unwrap_or("(untitled)"))
                            }
                            " " span.id { (short_id(&s.id, known)) }
                            @if s.subagents > 0 { " " span.badge { "+" (s.subagents) " subagents" } }
                            @if !s.on_disk { " " span.badge.gone { "deleted" } }
                            (marks_html(s))
                        }
                    }
                }
            }
        }
    }
}

/// A session's star and tags, each tag a link to the sessions that have it.
fn marks_html(s: &Session) -> Markup {
    html! {
        @if s.starred { " " span.star title="Starred" { "★" } }
        @for tag in &s.tags { " " a.tag href=(href("/sessions", &[("tag", tag)])) { "#" (tag) } }
    }
}

/// Your marks on session `s`: a form that shows them and changes them.
fn marks_form(shared: &Shared, s: &Session) -> Markup {
    html! {
        form.marks method="post" action=(session_href(&s.id, s.machine_id, &s.machine, "/marks")) {
            input type="hidden" name="csrf" value=(shared.csrf);
            label { input #starred type="checkbox" name="starred" value="1" checked[s.starred]; " Starred" }
            label { "Tags " input #tags type="text" name="tags" value=(s.tags.join(" ")) placeholder="bug infra"; }
            label.note { "Note " textarea #note name="note" rows="2" { (s.note.as_deref().unwrap_or("")) } }
            button #save-marks type="submit" { "Save marks" }
        }
    }
}

/// Saves the marks the session page's form sends, then sends the browser back to the page.
fn save_marks(archive: &mut Archive, asked: &Asked, id: &str) -> Result<Answer> {
    let s = match find(archive, asked, id)? {
        Ok(s) => s,
        Err(answer) => return Ok(answer),
    };
    let field = |name: &str| asked.form.get(name).map(String::as_str).unwrap_or("");
    let marks = Marks {
        starred: field("starred") == "1",
        tags: field("tags")
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
        note: Some(field("note").trim().to_owned()).filter(|n| !n.is_empty()),
    };
    match crate::history::marks::replace(archive, &s, marks) {
        Ok(_) => Ok(Answer::SeeOther(session_href(
            &s.id,
            s.machine_id,
            &s.machine,
            "",
        ))),
        Err(e @ Error::BadTag { .. }) => Ok(Answer::Html(StatusCode(400), failed(&e.to_string()))),
        Err(e) => Err(e),
    }
}

fn session(shared: &Shared, archive: &mut Archive, asked: &Asked, id: &str) -> Result<Answer> {
    let s = match find(archive, asked, id)? {
        Ok(s) => s,
        Err(answer) => return Ok(answer),
    };
    // Opened at a search hit: from a little before it.
    let at = asked.param("at").and_then(|a| a.parse().ok());
    let from = match at {
        Some(seq) => query::message_position(archive, &s, seq)?.map_or(0, |p| p.saturating_sub(5)),
        None => asked
            .param("from")
            .and_then(|f| f.parse().ok())
            .unwrap_or(0),
    };
    let subagents = query::subagents(archive, &s)?;
    let done = crate::consumers::sessions::store::done(archive.path())?;
    let conversation = window(archive, &s, from, done)?;
    let home = home();
    let home = home.as_deref().filter(|_| s.machine_id == 0);
    let link = |rest: &str| session_href(&s.id, s.machine_id, &s.machine, rest);
    let title = s.title.clone().unwrap_or_else(|| "(untitled)".into());
    let body = html! {
        div.session-head {
            h1 { (title) }
            @if !s.on_disk { span.badge.gone { "deleted from disk — kept in the archive" } }
            dl.meta {
                dt { "Agent" } dd { (s.harness) }
                dt { "Project" } dd { (tilde(s.project.as_deref().unwrap_or("-"), home)) }
                @if let Some(b) = &s.branch { dt { "Branch" } dd { (b) } }
                dt { "Machine" } dd { (s.machine) }
                dt { "Started" } dd { (s.started.map(format_time).unwrap_or_else(|| "-".into())) }
                dt { "Last active" } dd { (s.last_activity.map(format_time).unwrap_or_else(|| "-".into())) }
                dt { "Messages" } dd { (s.user_messages) " from the user, " (s.assistant_messages) " from the assistant" @if s.compactions > 0 { ", " (s.compactions) " compactions" } }
                @if !s.models.is_empty() { dt { "Models" } dd { (s.models.join(", ")) } }
                dt { "Session" } dd { code #session-id { (s.id) } " " button.copy type="button" data-copy="session-id" { "Copy" } }
                dt { "Files" } dd { @for f in &s.files { div { code { (tilde(&f.display().to_string(), home)) } } } }
            }
            div.actions {
                a.button href=(link("/raw")) download { "Download raw" }
                a.button #share href=(link("/share.html")) download title="The conversation as one HTML file, secrets redacted" { "Download HTML" }
                a.button href=(link("/restore")) { "Restore…" }
                (marks_html(&s))
            }
            (marks_form(shared, &s))
            @if !subagents.is_empty() {
                section.subagents {
                    h2 { (subagents.len()) " subagents" }
                    // Each one's conversation, read here when opened (or on a page of its own).
                    @for sub in &subagents {
                        details.subagent data-src=(session_href(&sub.id, sub.machine_id, &sub.machine, "/messages")) {
                            summary {
                                (sub.title.as_deref().unwrap_or(&sub.id)) " · " (sub.messages) " messages · "
                                a href=(session_href(&sub.id, sub.machine_id, &sub.machine, "")) { "its page" }
                            }
                        }
                    }
                }
            }
        }
        (conversation)
    };
    let body = super::list_pane::beside(archive, asked, &s, body)?;
    Ok(Answer::Html(
        StatusCode(200),
        layout(&title, Tab::None, body),
    ))
}

/// A page of messages from the `from`th, with what loads the ones before and after: the
/// ones after as the page scrolls to them, and past the last a live feed of new ones (from
/// `done`, the last record the index held before the messages were read: one read since is
/// sent again, and the page keeps the copy it has).
fn window(archive: &mut Archive, s: &Session, from: usize, done: i64) -> Result<Markup> {
    Ok(html! {
        section #conversation {
            @if from > 0 { (earlier(s, from)) }
            (forward(archive, s, from, done)?)
        }
    })
}

/// The button that loads the messages before the `from`th.
fn earlier(s: &Session, from: usize) -> Markup {
    let start = from.saturating_sub(MESSAGES_PAGE);
    let base = session_href(&s.id, s.machine_id, &s.machine, "/messages");
    let pairs = [
        ("from", start.to_string()),
        ("count", (from - start).to_string()),
        ("earlier", "1".into()),
    ];
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let to = href(&base, &pairs);
    html! { div.earlier data-src=(to) { button type="button" { "Load earlier messages" } } }
}

/// Messages `from` on, a page of them, then what loads the next page as it comes into
/// view, or past the last the marker where live ones are added.
fn forward(archive: &mut Archive, s: &Session, from: usize, done: i64) -> Result<Markup> {
    let mut messages = query::messages_window(archive, s, from, Some(MESSAGES_PAGE + 1))?;
    let more = messages.len() > MESSAGES_PAGE;
    messages.truncate(MESSAGES_PAGE);
    let base = session_href(&s.id, s.machine_id, &s.machine, "/messages");
    let next = href(
        &base,
        &[("from", &from.saturating_add(MESSAGES_PAGE).to_string())],
    );
    let live = href(
        &format!("/s/{}/live", segment(&s.id)),
        &[("since", &done.to_string())],
    );
    Ok(html! {
        (messages_html(&messages))
        @if more {
            div.more data-src=(next) { "Loading more…" }
        } @else {
            div.live-here data-live=(live) {}
        }
    })
}

fn messages_html(messages: &[MessageRecord]) -> Markup {
    html! { @for m in messages { (message(m.seq, &m.harness, &m.role, m.at_ms, &m.record)) } }
}

/// A part of a conversation, loaded as the page scrolls: the next messages (`from`), or
/// (`earlier`) the `count` before a place, with the button for those before them.
fn more_messages(archive: &mut Archive, asked: &Asked, id: &str) -> Result<Answer> {
    let s = match find(archive, asked, id)? {
        Ok(s) => s,
        Err(answer) => return Ok(answer),
    };
    let from = asked
        .param("from")
        .and_then(|f| f.parse().ok())
        .unwrap_or(0);
    let html = match asked.param("earlier") {
        Some(_) => {
            let count: usize = asked
                .param("count")
                .and_then(|f| f.parse().ok())
                .unwrap_or(MESSAGES_PAGE);
            let messages =
                query::messages_window(archive, &s, from, Some(count.clamp(1, MESSAGES_PAGE)))?;
            html! {
                @if from > 0 { (earlier(&s, from)) }
                (messages_html(&messages))
            }
        }
        None => {
            let done = crate::consumers::sessions::store::done(archive.path())?;
            forward(archive, &s, from, done)?
        }
    };
    Ok(Answer::Html(StatusCode(200), html.into_string()))
}

/// A record the daemon sent (its export envelope) as a message of a conversation; `None`
/// when it is no message.
pub(crate) fn live_message(envelope: &[u8]) -> Option<String> {
    let (seq, harness, record) = envelope_parts(envelope)?;
    let parsed = parse(&harness, &record);
    let m = parsed.message?;
    Some(message(seq, &harness, m.role.as_str(), parsed.at_ms, &record).into_string())
}

/// A record the daemon sent as one line of the live page.
pub(crate) fn live_line(envelope: &[u8]) -> String {
    let Some((seq, harness, record)) = envelope_parts(envelope) else {
        return html! { div.line { (String::from_utf8_lossy(envelope)) } }.into_string();
    };
    let parsed = parse(&harness, &record);
    let role = parsed.message.as_ref().map_or("-", |m| m.role.as_str());
    let text = (parsed.message.as_ref())
        .and_then(|m| {
            m.parts
                .iter()
                .map(Part::text)
                .find(|t| !t.trim().is_empty())
        })
        .unwrap_or_default();
    let session = parsed.session_id.clone();
    html! {
        div.line data-seq=(seq) {
            span.when { (parsed.at_ms.map(|t| format_time(t)[11..19].to_owned()).unwrap_or_else(|| "-".into())) }
            span.agent { (harness) }
            @if let Some(id) = &session {
                a.sid href=(format!("/s/{}", segment(id))) { (id.chars().take(8).collect::<String>()) }
            } @else { span.sid { "-" } }
            span.role { (role) }
            span.text { (crate::history::display::shorten(&text, 200)) }
        }
    }
    .into_string()
}

fn envelope_parts(envelope: &[u8]) -> Option<(i64, String, Vec<u8>)> {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        seq: i64,
        harness: String,
        #[serde(borrow)]
        record: &'a serde_json::value::RawValue,
    }
    let e: Envelope = serde_json::from_slice(envelope).ok()?;
    Some((e.seq, e.harness, e.record.get().as_bytes().to_vec()))
}

/// Records the live page starts with: the last this many archived.
const LIVE_BACK: i64 = 50;

fn live_page(archive: &Archive) -> Result<Answer> {
    let since = (archive.last_seq()? - LIVE_BACK).max(0);
    let body = html! {
        h1 { "Live" }
        p.hint #live-state { "Connecting to the daemon…" }
        section #live-feed data-live=(href("/live/feed", &[("since", &since.to_string())])) {}
    };
    Ok(Answer::Html(
        StatusCode(200),
        layout("Live", Tab::Live, body),
    ))
}

fn search(archive: &mut Archive, asked: &Asked) -> Result<Answer> {
    let q = asked.param("q").unwrap_or("").trim().to_owned();
    let results = match q.is_empty() {
        true => {
            html! { p.hint { "Words match whole words; \"a phrase\" words in a row; pre* a prefix; AND (the default), OR, NOT." } }
        }
        false => hits(archive, &q)?,
    };
    if asked.param("fragment").is_some() {
        return Ok(Answer::Html(StatusCode(200), results.into_string()));
    }
    let body = html! {
        h1 { "Search" }
        form.search method="get" action="/search" {
            input #search type="search" name="q" value=(q) autofocus placeholder="What was said, typed or run" autocomplete="off";
        }
        div #results { (results) }
    };
    Ok(Answer::Html(
        StatusCode(200),
        layout("Search", Tab::Search, body),
    ))
}

fn hits(archive: &mut Archive, q: &str) -> Result<Markup> {
    let filter = Filter {
        limit: HITS,
        ..Filter::default()
    };
    let hits = match query::search(archive, q, false, &filter, MARKS, None) {
        Ok(hits) => hits,
        Err(e @ Error::SearchQuery { .. }) => return Ok(html! { p.error { (e.to_string()) } }),
        Err(e) => return Err(e),
    };
    let titles = (hits.iter())
        .map(|h| query::title(archive, h.machine_id, &h.harness, &h.session))
        .collect::<Result<Vec<_>>>()?;
    let home = home();
    Ok(html! {
        @if hits.is_empty() { p.hint { "No message matches." } }
        @for (h, title) in hits.iter().zip(&titles) {
            @let home = home.as_deref().filter(|_| h.machine_id == 0);
            @let to = format!("{}#m-{}", href(&session_href(&h.session, h.machine_id, &h.machine, ""), &[("at", &h.seq.to_string())]), h.seq);
            a.hit href=(to) {
                div.title { (title.as_deref().unwrap_or("(untitled)")) }
                div.where_ {
                    span.agent { (h.harness) }
                    span.project { (tilde(h.project.as_deref().unwrap_or("-"), home)) }
                    span.role { (h.role) }
                    span.when { (h.timestamp.map(format_time).unwrap_or_default()) }
                }
                div.snippet { (marked(&h.snippet)) }
            }
        }
    })
}

/// A snippet with its matches marked: escaped first, then the marks made `<mark>`.
fn marked(snippet: &str) -> Markup {
    let escaped = html! { (snippet) }.into_string();
    PreEscaped(
        escaped
            .replace(MARKS.0, "<mark>")
            .replace(MARKS.1, "</mark>"),
    )
}

fn raw(archive: &mut Archive, asked: &Asked, id: &str) -> Result<Answer> {
    let s = match find(archive, asked, id)? {
        Ok(s) => s,
        Err(answer) => return Ok(answer),
    };
    let files = query::files_transcript_first(archive, &s)?;
    let Some(main) = files.first() else {
        let why = format!("session {} has no transcript archived as a file", s.id);
        return Ok(Answer::Html(StatusCode(404), failed(&why)));
    };
    let mut body = Vec::new();
    query::write_records(archive, main, None, &mut body)?.map_err(|e| Error::Ui {
        reason: format!("the session's records could not be gathered: {e}"),
    })?;
    let name = (files.first())
        .and_then(|f| f.path.file_name())
        .map_or(format!("{}.jsonl", s.id), |n| {
            n.to_string_lossy().into_owned()
        });
    Ok(Answer::Bytes {
        kind: "application/octet-stream",
        body,
        download: Some(name),
    })
}

fn restore(
    shared: &Shared,
    archive: &mut Archive,
    asked: &Asked,
    id: &str,
    act: bool,
) -> Result<Answer> {
    let s = match find(archive, asked, id)? {
        Ok(s) => s,
        Err(answer) => return Ok(answer),
    };
    let request = crate::history::restore::Request {
        roots: &shared.roots,
        to: None,
        force: false,
        dry_run: !act,
        project_dir: None,
        rewrite_cwd: false,
    };
    let mut files = Vec::new();
    let mut report = |f: &FileReport| {
        files.push(f.line());
        Ok(())
    };
    let done = crate::history::restore::restore(archive, &s, &request, &mut report);
    let title = s.title.clone().unwrap_or_else(|| s.id.clone());
    let back = session_href(&s.id, s.machine_id, &s.machine, "");
    let body = html! {
        h1 { "Restore" }
        p { "Session " a href=(back) { (title) } " (" (s.harness) ")" }
        @match &done {
            Err(e) => { p.error #restore-error { (e.to_string()) } }
            Ok(_) if !act => {
                p { "Restoring writes these files back where the agent keeps them, byte for byte as archived. A file that is there and differs is not overwritten." }
                ul #restore-plan { @for f in &files { li { (f) } } }
                @if let Ok(Restored { moved: Some(moved), .. }) = &done { p #restore-moved { (moved) } }
                form method="post" action=(session_href(&s.id, s.machine_id, &s.machine, "/restore")) {
                    input type="hidden" name="csrf" value=(shared.csrf);
                    button.primary #restore type="submit" { "Restore these files" }
                    " " a href=(back) { "Cancel" }
                }
            }
            Ok(restored) => {
                p.ok #restored { "Restored." }
                ul { @for f in &files { li { (f) } } }
                @if let Some(moved) = &restored.moved { p { (moved) } }
                p { "Resume it with:" }
                div.resume { code #resume-command { (restored.resume) } " " button.copy type="button" data-copy="resume-command" { "Copy" } }
            }
        }
    };
    let status = match (&done, act) {
        (Err(_), _) => StatusCode(409),
        _ => StatusCode(200),
    };
    Ok(Answer::Html(status, layout("Restore", Tab::None, body)))
}

fn status(shared: &Shared, archive: &mut Archive) -> Result<Answer> {
    let st = crate::history::status::status(archive, &shared.socket)?;
    Ok(Answer::Html(
        StatusCode(200),
        layout("Status", Tab::Status, super::status::body(&st)),
    ))
}

/// When a window holds no call: how many calls the archive holds at all, and the day of the
/// first (`None` when it holds none).
fn older_calls(shared: &Shared, archive: &mut Archive) -> Result<Option<(i64, String)>> {
    let all = usage::Request::default();
    let (days, total) = usage::usage(archive, By::Day, &all, &shared.prices)?;
    Ok(days.first().map(|first| (total.calls, first.of.clone())))
}

fn usage_page(shared: &Shared, archive: &mut Archive, asked: &Asked) -> Result<Answer> {
    let (by, by_name, since, since_ms) = match usage_window(asked) {
        Ok(window) => window,
        Err(answer) => return Ok(answer),
    };
    let request = usage::Request {
        since_ms: Some(since_ms),
        ..usage::Request::default()
    };
    let (rows, total) = usage::usage(archive, by, &request, &shared.prices)?;
    let older = match total.calls {
        0 => older_calls(shared, archive)?,
        _ => None,
    };
    let tab = |name: &str| html! { a href=(href("/usage", &[("by", name), ("since", since)])) class=[(name == by_name).then_some("on")] { (name) } };
    let body = html! {
        h1 { "Usage" }
        nav.by { "By " @for n in ["day", "week", "month", "model", "project", "agent", "machine", "session"] { (tab(n)) " " } }
        form.filters method="get" action="/usage" {
            input type="hidden" name="by" value=(by_name);
            label { "Since " input type="text" name="since" value=(since) size="12"; }
            button type="submit" { "Show" }
            a #usage-csv href=(href("/usage.csv", &[("by", by_name), ("since", since)])) download { "Download CSV" }
        }
        p.count { "Since " (format_time(since_ms)[..10].to_owned()) ": " (HumanCount(total.calls as u64)) " model calls, " (HumanCount(all_tokens(&total) as u64)) " tokens, " (cost(&total)) }
        @if let Some((calls, first)) = &older {
            p.hint.older {
                "The archive holds " (HumanCount(*calls as u64)) " model calls before this window, from " (first) ": "
                a href=(href("/usage", &[("by", by_name), ("since", first)])) { "show them since " (first) }
                "."
            }
        }
        @if !rows.is_empty() { (usage_chart(&rows)) }
        table.usage {
            thead { tr { th { (by_name) } th.num { "Calls" } th.num { "Input" } th.num { "Output" } th.num { "Cache read" } th.num { "Cache write" } th.num { "Cost" } } }
            tbody {
                @for r in &rows {
                    tr {
                        td { (r.of) }
                        td.num { (HumanCount(r.tokens.calls as u64)) }
                        td.num { (HumanCount(r.tokens.input as u64)) }
                        td.num { (HumanCount(r.tokens.output as u64)) }
                        td.num { (HumanCount(r.tokens.cache_read as u64)) }
                        td.num { (HumanCount(r.tokens.cache_write as u64)) }
                        td.num { (cost(&r.tokens)) }
                    }
                }
            }
        }
        @if !total.unpriced.is_empty() {
            p.hint { "* Models with no known price (their tokens are counted, their cost is not): " (total.unpriced.join(", ")) ". Prices can be given in config.toml's [prices]." }
        }
    };
    Ok(Answer::Html(
        StatusCode(200),
        layout("Usage", Tab::Usage, body),
    ))
}

/// A bar a row, its tokens by kind end to end, the longest row the chart's width.
fn usage_chart(rows: &[usage::Row]) -> Markup {
    const ROW: f64 = 22.0;
    const LABEL: f64 = 230.0;
    let top = rows
        .iter()
        .map(|r| all_tokens(&r.tokens))
        .max()
        .unwrap_or(0)
        .max(1);
    let width = |n: i64| n as f64 * 600.0 / top as f64;
    html! {
        div.chart {
            svg #usage-chart viewBox=(format!("0 0 900 {}", rows.len() as f64 * ROW + 10.0)) role="img" aria-label="Tokens per row" {
                @for (i, r) in rows.iter().enumerate() {
                    @let y = i as f64 * ROW + 4.0;
                    @let t = &r.tokens;
                    text x="0" y=(y + 14.0) class="label" { (crate::history::display::shorten(&r.of, 30)) }
                    @let kinds = [(t.input, "input"), (t.output, "output"), (t.cache_read, "cache-read"), (t.cache_write, "cache-write")];
                    @for (k, (n, class)) in kinds.iter().enumerate() {
                        @let x = LABEL + kinds[..k].iter().map(|(m, _)| width(*m)).sum::<f64>();
                        rect x=(format!("{x:.1}")) y=(y) width=(format!("{:.1}", width(*n))) height="16" class=(class) { title { (class) ": " (HumanCount(*n as u64)) } }
                    }
                }
            }
            div.legend { span.input { "input" } span.output { "output" } span.cache-read { "cache read" } span.cache-write { "cache write" } }
        }
    }
}
