//! `ui`: the archive as web pages, served by a small synchronous HTTP server (tiny_http). A
//! few worker threads answer the pages, each with its own read of the archive and its index;
//! a live feed (server-sent events, read from the daemon's subscriber socket) gets a thread
//! of its own for as long as the page is open.
//!
//! Every request must carry the token: in the URL `ui` prints (`?token=`, then kept by the
//! browser as a cookie: `HttpOnly`, `SameSite=Strict`) or as that cookie. `Host` must name
//! the address served (a name of another site that resolves here, DNS rebinding, is refused)
//! and an `Origin`, when sent, this server. An action (restore) also carries the page's CSRF
//! token. Pages are sent with a Content-Security-Policy that allows this server's own script
//! and style only, and every asset is in the binary.

mod charts;
mod downloads;
mod filter;
mod home;
mod layout;
mod list_pane;
mod live;
mod pages;
mod status;
mod tokens;

use crate::archive::Archive;
use crate::capture::harness::Root;
use crate::config::Settings;
use crate::consumers::sessions::usage::Prices;
use crate::error::{Error, Result};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use tiny_http::{Header, Method, Request, Response, StatusCode};

/// Worker threads answering pages (a live feed has a thread of its own).
const WORKERS: usize = 4;

/// The policy every page is sent with: this server's own script, style and images only; no
/// frames, no plugins, forms posted here only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The largest request body read (a restore form).
const MAX_BODY: u64 = 64 * 1024;

/// What every worker shares: where the archive and the daemon are, and the secrets.
pub(crate) struct Shared {
    pub(crate) db: PathBuf,
    pub(crate) socket: PathBuf,
    pub(crate) roots: Vec<Root>,
    pub(crate) prices: Prices,
    /// The `[redact]` rules a shared conversation is redacted with.
    pub(crate) redactor: crate::config::RedactorSource,
    /// The token in the URL, then in the cookie.
    token: String,
    /// The token every form that acts carries.
    pub(crate) csrf: String,
    /// The cookie's name: a browser keeps cookies per host, not per port, so two servers
    /// on one host would otherwise overwrite each other's.
    cookie: String,
    /// The `Host` values accepted.
    hosts: Vec<String>,
}

/// A running server.
pub(crate) struct Served {
    /// The URL to open, token included.
    pub(crate) url: String,
    workers: Vec<std::thread::JoinHandle<()>>,
}

impl Served {
    /// Waits for the workers (they end when the process does).
    pub(crate) fn join(self) {
        for w in self.workers {
            let _ = w.join();
        }
    }
}

/// Starts serving the archive of `settings` on `listen`: binds, then answers in threads of
/// its own. `Err` when the address cannot be bound, or (`check`) the archive cannot be read.
pub(crate) fn start(settings: &Settings, listen: SocketAddr, check: bool) -> Result<Served> {
    // The archive is read once here so that a missing one is said at once, not on a page
    // (not by `run`, which makes it).
    if check {
        drop(crate::history::indexed_archive(&settings.archive)?);
    }
    let server = tiny_http::Server::http(listen).map_err(|e| Error::Ui {
        reason: format!(
            "cannot listen on {listen}: {e} (another `ui`, or `run` with [ui] listen, may \
             serve there: open its link, or give another address with --listen, port 0 for \
             a free one)"
        ),
    })?;
    let addr = match server.server_addr().to_ip() {
        Some(addr) => addr,
        None => listen,
    };
    let token = random_hex(32)?;
    let shared = Arc::new(Shared {
        db: settings.archive.clone(),
        socket: settings.socket.clone(),
        roots: settings.roots.clone(),
        prices: Prices::with(&settings.prices),
        redactor: settings.redactor.clone(),
        csrf: random_hex(32)?,
        cookie: format!("transcript_sync_{}", addr.port()),
        hosts: hosts(addr),
        token,
    });
    let host = match addr.ip() {
        ip if ip.is_unspecified() => format!("127.0.0.1:{}", addr.port()),
        _ => addr.to_string(),
    };
    let url = format!("http://{host}/?token={}", shared.token);
    let server = Arc::new(server);
    let workers = (0..WORKERS)
        .map(|i| {
            let server = Arc::clone(&server);
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("ui-{i}"))
                .spawn(move || work(&server, &shared))
                .expect("a thread starts")
        })
        .collect();
    Ok(Served { url, workers })
}

/// The `Host` values a request may carry: the address served, and for loopback the names of
/// loopback; for an unspecified address (`0.0.0.0`), this machine's loopback and host name.
fn hosts(addr: SocketAddr) -> Vec<String> {
    let port = addr.port();
    let mut names = vec![match addr {
        SocketAddr::V4(a) => a.ip().to_string(),
        SocketAddr::V6(a) => format!("[{}]", a.ip()),
    }];
    if addr.ip().is_loopback() || addr.ip().is_unspecified() {
        names.extend(["127.0.0.1", "localhost", "[::1]"].map(String::from));
    }
    if addr.ip().is_unspecified()
        && let Ok(name) = rustix::system::uname().nodename().to_str()
    {
        names.push(name.to_owned());
    }
    let mut hosts: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
    // A browser leaves the default port out.
    if port == 80 {
        hosts.extend(names);
    }
    hosts
}

/// `bytes` random bytes from the system, as hex.
fn random_hex(bytes: usize) -> Result<String> {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut buf)
        .map_err(|_| Error::Ui {
            reason: "the system gave no random bytes for the token".into(),
        })?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// One worker: answers requests until the server stops. Its archive is opened at its first
/// request, and opened again after an error, or once the index file is another and has
/// caught up (`reindex` made it again: the one attached is gone from its path; until the new
/// one is ready, pages come from the old).
fn work(server: &tiny_http::Server, shared: &Arc<Shared>) {
    let mut archive: Option<Archive> = None;
    let mut opened_on = None;
    for request in server.incoming_requests() {
        if let Some(open) = &archive
            && index_identity(&shared.db) != opened_on
            && index_ready(&shared.db, open)
        {
            log::info!("the session index is another file; opening it again");
            archive = None;
        }
        let was_open = archive.is_some();
        let page = !request.url().starts_with("/assets/");
        // A request that panics (a page's panic is answered 500 in `answer`) is dropped, and
        // the worker goes on.
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            handle(shared, &mut archive, request);
        }));
        if handled.is_err() {
            log::warn!("a request of the web view failed (a bug); its worker goes on");
            archive = None;
        }
        if !was_open && archive.is_some() {
            opened_on = index_identity(&shared.db);
        }
        // What a page took (a list of every session is tens of MB) goes back to the system:
        // glibc keeps the freed memory of each thread's arena otherwise, and four workers
        // would each hold on to their largest page's.
        if page {
            crate::platform::sys::return_free_memory();
        }
    }
}

/// The device and inode of the session index file of the archive at `db`.
fn index_identity(db: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let index = crate::consumers::sessions::store::path_of(db);
    std::fs::metadata(index).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether the index file at its path holds every record `archive` does.
fn index_ready(db: &std::path::Path, archive: &Archive) -> bool {
    let done = crate::consumers::sessions::store::done(db);
    archive
        .last_seq()
        .is_ok_and(|last| done.is_ok_and(|done| done >= last))
}

/// A request as the pages read it.
pub(crate) struct Asked {
    pub(crate) method: Method,
    /// The path, decoded, split at `/`, without empty segments.
    pub(crate) path: Vec<String>,
    /// The query's parameters (the last of a name wins).
    pub(crate) query: HashMap<String, String>,
    /// A form's fields (POST).
    pub(crate) form: HashMap<String, String>,
    /// The request's `Last-Event-ID`.
    pub(crate) last_event: Option<String>,
}

impl Asked {
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// What a page answers.
pub(crate) enum Answer {
    /// A page or fragment of HTML.
    Html(StatusCode, String),
    /// Bytes of a type, maybe as a download named so.
    Bytes {
        kind: &'static str,
        body: Vec<u8>,
        download: Option<String>,
    },
    /// A live feed: the request is answered by a thread of its own.
    Live(live::Feed),
    /// Go to this path of the server (303, after a form is posted: a reload does not post
    /// it again).
    SeeOther(String),
}

fn handle(shared: &Arc<Shared>, archive: &mut Option<Archive>, mut request: Request) {
    let header = |name: &'static str| {
        (request.headers().iter())
            .find(|h| h.field.equiv(name))
            .map(|h| h.value.as_str().to_owned())
    };
    let (host, origin, cookie) = (header("Host"), header("Origin"), header("Cookie"));
    let fetch_site = header("Sec-Fetch-Site");
    let last_event = header("Last-Event-ID");
    let (path, query) = match request.url().split_once('?') {
        Some((p, q)) => (p.to_owned(), q.to_owned()),
        None => (request.url().to_owned(), String::new()),
    };
    // One `/` first: `//elsewhere` would be another host to a browser sent there.
    let path = format!("/{}", path.trim_start_matches(['/', '\\']));
    let query: HashMap<String, String> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let refused = refusal(
        shared,
        host.as_deref(),
        origin.as_deref(),
        fetch_site.as_deref(),
    );
    let answer = if let Some(refused) = refused {
        refused
    } else if query.get("token").is_some_and(|t| same(t, &shared.token)) {
        return token_to_cookie(shared, request, path, query);
    } else if !cookie.is_some_and(|c| has_token(&c, &shared.cookie, &shared.token)) {
        Answer::Html(StatusCode(403), layout::no_token())
    } else {
        let asked = Asked {
            method: request.method().clone(),
            path: (path.split('/'))
                .filter(|s| !s.is_empty())
                .map(|s| {
                    percent_encoding::percent_decode_str(s)
                        .decode_utf8_lossy()
                        .into_owned()
                })
                .collect(),
            query,
            form: read_form(&mut request),
            last_event,
        };
        answer(shared, archive, &asked)
    };
    respond(shared, request, answer);
}

/// Answers a request that carries the token in its URL: the token goes to a cookie, and the
/// browser to the same page without it, so that it is in no history or link.
fn token_to_cookie(
    shared: &Shared,
    request: Request,
    path: String,
    query: HashMap<String, String>,
) {
    let mut rest: Vec<(String, String)> =
        (query.into_iter()).filter(|(k, _)| k != "token").collect();
    rest.sort();
    let rest = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(rest)
        .finish();
    let to = match rest.is_empty() {
        true => path,
        false => format!("{path}?{rest}"),
    };
    // A header holds ASCII only (a browser sends a path percent-encoded).
    let to = if to.is_ascii() { to } else { "/".to_owned() };
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict",
        shared.cookie, shared.token
    );
    let mut response = Response::empty(303)
        .with_header(header_of("Location", &to))
        .with_header(header_of("Set-Cookie", &cookie));
    add_common(&mut response);
    let _ = request.respond(response);
}

/// A POST's form fields (none for another method, or a body that is not text).
fn read_form(request: &mut Request) -> HashMap<String, String> {
    if *request.method() != Method::Post {
        return HashMap::new();
    }
    let mut body = String::new();
    match (request.as_reader().take(MAX_BODY)).read_to_string(&mut body) {
        Ok(_) => form_urlencoded::parse(body.as_bytes())
            .into_owned()
            .collect(),
        Err(_) => HashMap::new(),
    }
}

/// The refusal of a request whose `Host` is not this server (DNS rebinding), whose
/// `Origin` is another's, or that a page of another origin made (`Sec-Fetch-Site`: a
/// server on another port of this host is the same site, and is sent its cookies); `None`
/// when it may go on.
fn refusal(
    shared: &Shared,
    host: Option<&str>,
    origin: Option<&str>,
    fetch_site: Option<&str>,
) -> Option<Answer> {
    let known = |h: &str| shared.hosts.iter().any(|k| k.eq_ignore_ascii_case(h));
    if !host.is_some_and(known) {
        let text = format!(
            "this server answers to {} only, not to Host {:?}",
            shared.hosts.join(", "),
            host.unwrap_or("")
        );
        return Some(Answer::Html(StatusCode(421), layout::refused(&text)));
    }
    let ours = |o: &str| o.strip_prefix("http://").is_some_and(known);
    if let Some(origin) = origin.filter(|o| !ours(o)) {
        let text = format!("a request from {origin:?} is not served");
        return Some(Answer::Html(StatusCode(403), layout::refused(&text)));
    }
    if let Some(site) = fetch_site.filter(|s| matches!(*s, "cross-site" | "same-site")) {
        let text = format!(
            "a request a page of another origin made ({site}) is not served: open this \
             server's pages directly"
        );
        return Some(Answer::Html(StatusCode(403), layout::refused(&text)));
    }
    None
}

/// Whether `cookies` (a `Cookie` header) gives `name` the value `token`.
fn has_token(cookies: &str, name: &str, token: &str) -> bool {
    (cookies.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .any(|(n, v)| n == name && same(v, token))
}

/// Whether `a` equals `b`, in a time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && (a.bytes().zip(b.bytes())).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The page asked, from this worker's archive (opened again when it failed).
fn answer(shared: &Arc<Shared>, archive: &mut Option<Archive>, asked: &Asked) -> Answer {
    let path: Vec<&str> = asked.path.iter().map(String::as_str).collect();
    match (&asked.method, path.as_slice()) {
        (Method::Get, ["assets", name]) => return asset(name),
        (Method::Get, ["live", "feed"]) => return live::global(asked),
        (Method::Get, ["s", id, "live"]) => return live::session(asked, id),
        _ => {}
    }
    let opened = match archive.take() {
        Some(a) => Ok(a),
        None => crate::history::indexed_archive(&shared.db),
    };
    let mut open = match opened {
        Ok(a) => a,
        Err(e) => return Answer::Html(StatusCode(500), layout::failed(&e.to_string())),
    };
    // A page that panics answers 500 and leaves its worker serving (its archive is opened
    // again).
    let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pages::page(shared, &mut open, asked, &path)
    }));
    match answered {
        Ok(Ok(answer)) => {
            *archive = Some(open);
            answer
        }
        Ok(Err(e)) => Answer::Html(StatusCode(500), layout::failed(&e.to_string())),
        Err(_) => {
            let what = format!(
                "the page {} failed (a bug: see the log)",
                asked.path.join("/")
            );
            Answer::Html(StatusCode(500), layout::failed(&what))
        }
    }
}

/// An embedded asset.
fn asset(name: &str) -> Answer {
    let (kind, body): (&str, &[u8]) = match name {
        "app.css" => ("text/css; charset=utf-8", include_bytes!("web/app.css")),
        "app.js" => (
            "text/javascript; charset=utf-8",
            include_bytes!("web/app.js"),
        ),
        "icon.svg" => ("image/svg+xml", include_bytes!("web/icon.svg")),
        _ => return Answer::Html(StatusCode(404), layout::not_found(name)),
    };
    Answer::Bytes {
        kind,
        body: body.to_vec(),
        download: None,
    }
}

fn header_of(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a header of ASCII")
}

/// The headers every answer carries.
fn add_common<R: Read>(response: &mut Response<R>) {
    for (name, value) in common_headers() {
        response.add_header(header_of(name, value));
    }
}

pub(crate) fn common_headers() -> [(&'static str, &'static str); 5] {
    [
        ("Content-Security-Policy", CSP),
        ("X-Content-Type-Options", "nosniff"),
        ("Referrer-Policy", "same-origin"),
        ("X-Frame-Options", "DENY"),
        ("Cache-Control", "no-store"),
    ]
}

fn respond(shared: &Arc<Shared>, request: Request, answer: Answer) {
    let mut response = match answer {
        Answer::Html(status, html) => Response::from_data(html.into_bytes())
            .with_status_code(status)
            .with_header(header_of("Content-Type", "text/html; charset=utf-8")),
        Answer::Bytes {
            kind,
            body,
            download,
        } => {
            let mut r = Response::from_data(body).with_header(header_of("Content-Type", kind));
            if let Some(name) = download {
                let name: String = (name.chars())
                    .map(|c| match c.is_ascii_alphanumeric() || "-_.".contains(c) {
                        true => c,
                        false => '_',
                    })
                    .collect();
                let value = format!("attachment; filename=\"{name}\"");
                r.add_header(header_of("Content-Disposition", &value));
            }
            r
        }
        Answer::SeeOther(path) => Response::from_data(Vec::new())
            .with_status_code(StatusCode(303))
            .with_header(header_of("Location", &path)),
        Answer::Live(feed) => {
            let shared = Arc::clone(shared);
            let spawned = std::thread::Builder::new()
                .name("ui-live".into())
                .spawn(move || feed.run(&shared, request.into_writer()));
            if let Err(e) = spawned {
                log::warn!("a live feed could not start: {e}");
            }
            return;
        }
    };
    add_common(&mut response);
    if let Err(e) = request.respond(response) {
        log::debug!("an answer was not sent whole: {e}");
    }
}

/// Serves until interrupted, as `ui` does: prints the URL and opens it unless `no_open`.
pub(crate) fn serve(settings: &Settings, listen: SocketAddr, no_open: bool) -> Result<()> {
    if !listen.ip().is_loopback() {
        log::warn!(
            "serving on {listen}, which is not loopback: anyone who can reach it and has the \
             token can read the archive, over plain HTTP"
        );
    }
    let served = start(settings, listen, true)?;
    let page = settings.socket.with_extension("ui.html");
    // Printed for a person or a script; one that stops reading does not stop the server.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "transcript-sync ui: serving {}", served.url);
    let _ = writeln!(out, "(the link holds the access token; Ctrl-C stops it)");
    drop(out);
    if !no_open {
        open_browser(&served.url, &page);
    }
    served.join();
    Ok(())
}

/// Opens `url` in the desktop's browser; says so when none opens. The browser is given
/// `page`, a file only this user can read that sends it on to `url`: a command line (which
/// every user can read in /proc for as long as the browser runs) never holds the token.
fn open_browser(url: &str, page: &std::path::Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let html = format!(
        "<!DOCTYPE html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" \
         content=\"0;url={url}\"><title>transcript-sync</title><a href=\"{url}\">transcript-sync</a>\n"
    );
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(page)
        .and_then(|mut f| f.write_all(html.as_bytes()));
    if let Err(e) = written {
        log::warn!("no browser was opened (writing {page:?}: {e}); open the URL above in one");
        return;
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(page)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        log::warn!("no browser was opened ({opener}: {e}); open the URL above in one");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_read_from_its_own_cookie_only_and_compared_whole() {
        let header = "a=1; transcript_sync_8080=abc; transcript_sync_9090=zzz";
        assert!(has_token(header, "transcript_sync_8080", "abc"));
        assert!(!has_token(header, "transcript_sync_9090", "abc"));
        assert!(!has_token(
            "transcript_sync_8080=ab",
            "transcript_sync_8080",
            "abc"
        ));
        assert!(!same("abd", "abc"));
    }

    #[test]
    fn loopback_is_known_by_its_names_and_another_address_by_itself_only() {
        let local = hosts("127.0.0.1:8080".parse().unwrap());
        assert!(local.contains(&"localhost:8080".to_owned()));
        assert!(!local.iter().any(|h| h.ends_with(":80")));
        let lan = hosts("192.168.1.5:8080".parse().unwrap());
        assert_eq!(lan, vec!["192.168.1.5:8080".to_owned()]);
    }
}
