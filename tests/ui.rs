//! `ui`: the archive as web pages, read in a real browser (headless Chromium through
//! chromedriver) as a person reads them, and the server's guards (the token, `Host`,
//! `Origin`, the CSRF token) checked with plain HTTP requests as another site would make them.

use crate::util::{
    Env, cli, copy_agent_fixture, home_daemon_cmd, stderr, stdout_of, wait_until_else,
};
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use testkit::browser::{Browser, WebView};
use testkit::daemon::{Daemon, TapReader};

/// The crafted session's id.
pub(crate) const ID: &str = "5f0c8a52-6d1e-4a8b-9c3f-2e7d4b1a9c60";

/// `ui --no-open` on the env's archive, once it has printed its link.
pub(crate) fn serve(env: &Env) -> WebView {
    let mut cmd = env.cmd();
    cmd.args(["ui", "--no-open", "--db"]).arg(&env.db);
    WebView::start(cmd)
}

/// The `Cookie` header's value the token of `ui` is exchanged for.
pub(crate) fn cookie(ui: &WebView) -> String {
    let (_, headers, _) = get(ui, &format!("/?token={}", ui.token()), &[]);
    let set = header(&headers, "set-cookie");
    set.split(';').next().unwrap().to_owned()
}

/// Leaves the page as it is now in two screenshots, `NAME-light.png` and `NAME-dark.png`
/// (the system's scheme emulated each way, then given back), in the tests' folder
/// `ui-screenshots`; `scripts/ui-screenshots` copies them to `docs/ui/`. A page whose theme
/// the toggle chose is that theme in both.
pub(crate) fn screenshot(browser: &Browser, name: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ui-screenshots");
    for scheme in ["light", "dark"] {
        browser.cdp(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        );
        browser.screenshot(&dir.join(format!("{name}-{scheme}.png")));
    }
    browser.cdp("Emulation.setEmulatedMedia", json!({"features": []}));
}

/// A Claude Code line of the crafted session.
pub(crate) fn line(kind: &str, uuid: &str, minute: u32, message: Value) -> String {
    json!({"type": kind, "uuid": uuid, "sessionId": ID, "cwd": "/w/app",
        "timestamp": format!("2026-12-01T10:{minute:02}:00.000Z"), "message": message})
    .to_string()
}

/// The crafted Claude Code session: a prompt in Markdown, an answer with thinking, a tool
/// call and its result, and `extra` lines; returns its path.
pub(crate) fn crafted(env: &Env, prompt: &str, extra: &[String]) -> PathBuf {
    let dir = env.dir.path().join("home/.claude/projects/-w-app");
    fs::create_dir_all(&dir).unwrap();
    let old: Vec<String> = (0..30).map(|i| format!("archive/old-{i:02}.pdf")).collect();
    let listing = format!(
        "invoice-2026-11.pdf\ninvoice-2026-12.pdf\n{}",
        old.join("\n")
    );
    let mut lines = vec![
        line("user", "u1", 0, json!({"role": "user", "content": prompt})),
        line(
            "assistant",
            "a1",
            1,
            json!({"id": "msg_1", "role": "assistant",
            "model": "claude-opus-4-5",
            "content": [
                {"type": "thinking", "thinking": "The user wants the invoices listed; a hidden thought."},
                {"type": "text", "text": "Listing them with **ls**:\n\n```sh\nls invoices/\n```"},
                {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls invoices/"}},
            ],
            "usage": {"input_tokens": 120, "output_tokens": 30, "cache_read_input_tokens": 40}}),
        ),
        line(
            "user",
            "u2",
            2,
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": listing}
            ]}),
        ),
    ];
    lines.extend_from_slice(extra);
    let path = dir.join(format!("{ID}.jsonl"));
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// The crafted session of `prompt`, archived, then deleted by its agent: its path and bytes.
fn archived_then_deleted(env: &Env, prompt: &str) -> (PathBuf, Vec<u8>) {
    let path = crafted(env, prompt, &[]);
    let bytes = fs::read(&path).unwrap();
    env.run_once_home();
    fs::remove_file(&path).unwrap();
    (path, bytes)
}

/// The sessions, search, a conversation, usage, status and live pages, read in Chromium:
/// the list holds every session with its title and filters by agent; search finds as one
/// types and leads to the message; the conversation is Markdown with thinking and tool
/// output folded until opened.
#[test]
fn the_pages_read_in_a_browser_as_a_person_reads_them() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    for agent in ["codex", "gemini-cli"] {
        copy_agent_fixture(agent, &home);
    }
    // A screenshot the user pasted (a PNG of 1×1).
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    let pasted = line(
        "user",
        "u5",
        5,
        json!({"role": "user", "content": [
        {"type": "text", "text": "and this screenshot"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]}),
    );
    crafted(
        &env,
        "Please list the **invoices** folder.\n\n- one\n- two",
        &[pasted],
    );
    env.run_once_home();
    let ui = serve(&env);
    let browser = Browser::start();

    browser.goto(&ui.url);
    browser.wait_for("section.figures");
    // The token went from the URL to a cookie.
    assert!(!browser.url().contains("token"), "{}", browser.url());
    browser.click("header.top nav a[href='/sessions']");
    browser.wait_for("table.sessions");
    assert_eq!(browser.count("table.sessions tbody tr"), 3);
    let list = browser.text("table.sessions");
    assert!(
        list.contains("Please list the **invoices** folder."),
        "{list}"
    );
    assert!(list.contains("Run the scripted command, please."), "{list}");
    screenshot(&browser, "sessions");
    browser.goto(&format!("{}/sessions?agent=codex", ui.base));
    assert_eq!(browser.count("table.sessions tbody tr"), 1);
    assert!(browser.text("table.sessions").contains("codex"));

    // Search as one types: the hits come without a page load.
    browser.goto(&format!("{}/search", ui.base));
    browser.script("window.sameDocument = true", json!([]));
    browser.type_into("#search", "invoice-2026-12");
    browser.wait_for("#results a.hit mark");
    assert_eq!(
        browser.script("return window.sameDocument", json!([])),
        true
    );
    let hit = browser.text("#results a.hit");
    assert!(hit.contains("invoice-2026-12.pdf"), "{hit}");
    // Under its session's title.
    assert_eq!(
        browser.text("#results a.hit .title"),
        "Please list the **invoices** folder. - one - two"
    );
    assert!(
        browser.url().ends_with("/search?q=invoice-2026-12"),
        "{}",
        browser.url()
    );
    screenshot(&browser, "search");
    browser.click("#results a.hit");
    browser.wait_for("#conversation article.msg");
    assert!(
        browser.url().contains(&format!("/s/{ID}")),
        "{}",
        browser.url()
    );
    let target = browser.url().rsplit_once('#').unwrap().1.to_owned();
    assert!(browser.text(&format!("#{target}")).contains("Result"));

    // The conversation: Markdown rendered; thinking and tool output folded.
    browser.goto(&format!("{}/s/{ID}", ui.base));
    screenshot(&browser, "session");
    assert_eq!(browser.text("article.role-user .text strong"), "invoices");
    assert_eq!(browser.count("article.role-user .text li"), 2);
    assert_eq!(
        browser.text("article.role-assistant .text pre code"),
        "ls invoices/"
    );
    let page = browser.text("#conversation");
    assert!(!page.contains("a hidden thought"), "{page}");
    // A result shows its start in its summary, the rest once opened.
    assert!(!page.contains("archive/old-29.pdf"), "{page}");
    assert!(page.contains("Thinking"), "{page}");
    browser.click("details.thinking summary");
    assert!(
        browser
            .text("details.thinking")
            .contains("a hidden thought")
    );
    browser.click("details.tool-result summary");
    assert!(
        browser
            .text("details.tool-result")
            .contains("archive/old-29.pdf")
    );
    assert!(browser.text("details.tool-call summary").contains("Bash"));
    let loaded = browser.script(
        "const i = document.querySelector('article.role-user img.attached');
         return i && i.complete && i.naturalWidth;",
        json!([]),
    );
    assert_eq!(loaded, 1, "the pasted image is shown");
    screenshot(&browser, "session-open");

    browser.goto(&format!("{}/usage?by=model&since=3650d", ui.base));
    browser.wait_for("#usage-chart rect");
    let usage = browser.text("table.usage");
    assert!(usage.contains("claude-opus-4-5"), "{usage}");
    screenshot(&browser, "usage");
    // A window that holds no call says where the calls are, and offers them.
    browser.goto(&format!("{}/usage?by=model&since=1d", ui.base));
    let older = browser.text("p.older");
    assert!(older.contains("from 2026-12-01"), "{older}");
    browser.click("p.older a");
    browser.wait_for("#usage-chart rect");
    assert!(browser.text("table.usage").contains("claude-opus-4-5"));
    browser.goto(&format!("{}/status", ui.base));
    let status = browser.text("#status");
    assert!(status.contains(&env.db.display().to_string()), "{status}");
    // The page is the web view's own: a table of the sources, not a terminal's text.
    let sources = browser.text("table.sources");
    assert!(
        sources.contains("claude-code") && sources.contains("live"),
        "{sources}"
    );
    screenshot(&browser, "status");
}

/// What a transcript holds is text in every page: markup, scripts and `javascript:` links
/// in a title, a prompt, Markdown, a tool call and its output make no element and no link.
#[test]
fn markup_in_a_transcript_is_shown_as_text_in_every_page() {
    let env = Env::new();
    let attack = r#"Look: <img src=x id=injected onerror="window.pwned=1"> <script id=injected>window.pwned=2</script>"#;
    let tool = json!({"role": "assistant", "id": "msg_2", "model": "m", "content": [
        {"type": "tool_use", "id": "toolu_2", "name": "<b id=injected>Bash</b>",
         "input": {"command": "</pre><img src=x id=injected>"}}]});
    let result = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "</pre><svg id=injected onload=alert(1)>"}]});
    let markdown = json!({"role": "assistant", "id": "msg_3", "model": "m", "content": [
        {"type": "text", "text": "[run me](javascript:window.pwned=3) and <a href=\"javascript:window.pwned=4\" id=injected>this</a>\n\n![x](javascript:window.pwned=5)"}]});
    // Images a browser must not be given: an SVG (a document that may hold script) and data
    // that would end the attribute.
    let images = json!({"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/svg+xml",
            "data": "PHN2ZyBvbmxvYWQ9ImFsZXJ0KDEpIi8+"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
            "data": "iVBORw0K\" id=injected onerror=\"window.pwned=6"}}]});
    crafted(
        &env,
        attack,
        &[
            line("assistant", "a2", 3, tool),
            line("user", "u3", 4, result),
            line("assistant", "a3", 5, markdown),
            line("user", "u4", 6, images),
        ],
    );
    // A project, a title and a model with markup, for the home's figures, tables and charts.
    let dir = env.dir.path().join("home/.claude/projects/-w-markup");
    fs::create_dir_all(&dir).unwrap();
    let other = "6a1d9b63-7e2f-4b9c-8d40-3f8e5c2b1d71";
    let lines = [
        json!({"type": "user", "uuid": "x1", "sessionId": other,
            "cwd": "/w/<b id=injected>proj</b>", "timestamp": "2026-12-01T11:00:00.000Z",
            "message": {"role": "user", "content": "Title <svg id=injected onload=window.pwned=7> \"><img src=x id=injected onerror=window.pwned=9>"}}),
        json!({"type": "assistant", "uuid": "x2", "sessionId": other,
            "cwd": "/w/<b id=injected>proj</b>", "timestamp": "2026-12-01T11:01:00.000Z",
            "message": {"id": "msg_x", "role": "assistant", "model": "m-<img src=x id=injected onerror=window.pwned=8>",
                "content": [{"type": "text", "text": "ok"}],
                "usage": {"input_tokens": 1, "output_tokens": 1}}}),
    ];
    let lines: Vec<String> = lines.iter().map(Value::to_string).collect();
    fs::write(dir.join(format!("{other}.jsonl")), lines.join("\n") + "\n").unwrap();
    env.run_once_home();
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    let pages = [
        "/?window=all".to_owned(),
        "/sessions".to_owned(),
        format!("/s/{ID}"),
        format!("/s/{ID}?project=w&sort=title&page=1"),
        "/search?q=injected".to_owned(),
        "/search?q=pwned".to_owned(),
        format!("/s/{ID}/restore"),
        "/usage?by=session&since=3650d".to_owned(),
        format!("/sessions?q={}", urlencoding(FIND)),
        format!("/s/{ID}?q={}", urlencoding(FIND)),
    ];
    for page in &pages {
        browser.goto(&format!("{}{page}", ui.base));
        browser.wait_for("main");
        browser.script(
            "document.querySelectorAll('details').forEach(d => d.open = true)",
            json!([]),
        );
        assert_eq!(
            browser.count("#injected"),
            0,
            "{page}: an element was injected"
        );
        assert_eq!(
            browser.count("main img, main svg:not(#usage-chart):not(.chart) *"),
            0,
            "{page}"
        );
        assert_eq!(
            browser.count("script"),
            1,
            "{page}: a script besides app.js"
        );
        assert_eq!(
            browser.count("a[href^='javascript' i]"),
            0,
            "{page}: a javascript: link"
        );
        assert_eq!(
            browser.script("return window.pwned === undefined", json!([])),
            true
        );
    }
    // The list's text comes back as the value of its box, in the page and beside a
    // conversation, and typed in the box it is text too.
    for page in [&pages[8], &pages[9]] {
        browser.goto(&format!("{}{page}", ui.base));
        let value = browser.script("return document.getElementById('list-q').value", json!([]));
        assert_eq!(value, FIND, "{page}");
    }
    browser.goto(&format!("{}/sessions", ui.base));
    browser.type_into("#list-q", &format!("w {FIND}"));
    browser.wait_until("the list found nothing", |b| {
        b.text("#list-count") == "0 sessions"
    });
    assert_eq!(browser.count("#injected, main img"), 0);
    assert_eq!(
        browser.script("return window.pwned === undefined", json!([])),
        true
    );
    // As text, it reads as written.
    browser.goto(&format!("{}/s/{ID}", ui.base));
    browser.script(
        "document.querySelectorAll('details').forEach(d => d.open = true)",
        json!([]),
    );
    let text = browser.text("main");
    assert!(
        text.contains("<script id=injected>window.pwned=2</script>"),
        "{text}"
    );
    assert!(
        text.contains("</pre><svg id=injected onload=alert(1)>"),
        "{text}"
    );
    assert!(text.contains("run me"), "{text}");
    browser.goto(&format!("{}/sessions", ui.base));
    let list = browser.text("table.sessions");
    assert!(list.contains("<img src=x id=injected"), "{list}");
    // And in the list beside a conversation.
    browser.goto(&format!("{}/s/{ID}?project=w", ui.base));
    let pane = browser.text(".list-pane");
    assert!(
        pane.contains(r#"Title <svg id=injected onload=window.pwned=7> "><img src=x id=injected onerror=window.pwned=9>"#),
        "{pane}"
    );
    // The home says them as text in its figures' tables and in its charts' titles.
    browser.goto(&format!("{}/?window=all", ui.base));
    let shares = browser.text("#shares");
    assert!(shares.contains("<b id=injected>proj</b>"), "{shares}");
    assert!(shares.contains("<img src=x id=injected"), "{shares}");
    let tops = browser.text("#tops");
    assert!(
        tops.contains("<svg id=injected onload=window.pwned=7>"),
        "{tops}"
    );
    // The file that shares the conversation, opened from disk: the same, and no script at
    // all; its title (the prompt) is text in its <title> and heading.
    let shared = env.dir.path().join("shared.html");
    fs::write(&shared, stdout_of(&env, &["show", ID, "--format", "html"])).unwrap();
    browser.goto(&format!("file://{}", shared.display()));
    browser.wait_for("main");
    browser.script(
        "document.querySelectorAll('details').forEach(d => d.open = true)",
        json!([]),
    );
    assert_eq!(browser.count("#injected, script, img, svg"), 0);
    assert_eq!(browser.count("a[href^='javascript' i]"), 0);
    assert_eq!(
        browser.script("return window.pwned === undefined", json!([])),
        true
    );
    assert!(
        browser.text("h1").contains(attack),
        "{}",
        browser.text("h1")
    );
    let title = browser.script("return document.title", json!([]));
    assert_eq!(title.as_str(), Some(attack));
    let text = browser.text("main");
    assert!(
        text.contains("</pre><svg id=injected onload=alert(1)>"),
        "{text}"
    );
    // The lists as CSV are downloads of text, never a page a browser renders.
    let cookie = cookie(&ui);
    for (csv, written) in [
        ("/sessions.csv", "/w/<b id=injected>proj</b>"),
        (
            "/usage.csv?by=model&since=3650d",
            "m-<img src=x id=injected",
        ),
    ] {
        let (status, headers, body) = get(&ui, csv, &[("Cookie", &cookie)]);
        assert_eq!(status, 200, "{csv}");
        assert!(
            header(&headers, "content-type").starts_with("text/csv"),
            "{csv}"
        );
        assert!(
            header(&headers, "content-disposition").starts_with("attachment"),
            "{csv}"
        );
        assert_eq!(
            header(&headers, "x-content-type-options"),
            "nosniff",
            "{csv}"
        );
        assert!(body.contains(written), "{csv}: {body}");
    }
}

/// A text for the list's box that would end its attribute and add an element.
const FIND: &str = r#""><img src=x id=injected onerror="window.pwned=10">"#;

/// `text` as a URL's query writes it.
fn urlencoding(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A plain HTTP client, which sends what it is given and follows no redirect.
fn http() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into()
}

/// Status, headers of interest and body of a GET of `path` with `headers`.
pub(crate) fn get(
    ui: &WebView,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, Vec<(String, String)>, String) {
    let mut request = http().get(format!("{}{path}", ui.base));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    answer(request.call().unwrap())
}

fn answer(mut r: ureq::http::Response<ureq::Body>) -> (u16, Vec<(String, String)>, String) {
    let headers = (r.headers().iter())
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let body = r.body_mut().read_to_string().unwrap_or_default();
    (r.status().as_u16(), headers, body)
}

pub(crate) fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    (headers.iter())
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map_or("", |(_, v)| v.as_str())
}

/// Nothing is served without the token; a name of another site resolving here (DNS
/// rebinding) or a request from another origin is refused even with it; restoring needs
/// the page's CSRF token, and without it writes nothing.
#[test]
fn the_token_host_origin_and_csrf_checks_refuse_what_another_site_sends() {
    let env = Env::new();
    let (path, original) = archived_then_deleted(&env, "restore me later");
    let ui = serve(&env);
    let port = ui.base.rsplit_once(':').unwrap().1.to_owned();
    let host = format!("127.0.0.1:{port}");

    let (status, _, body) = get(&ui, "/", &[]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("access token"), "{body}");
    let (status, _, _) = get(&ui, "/?token=0123", &[]);
    assert_eq!(status, 403);
    let (status, headers, _) = get(&ui, &format!("/s/{ID}?token={}", ui.token()), &[]);
    assert_eq!(status, 303);
    assert_eq!(header(&headers, "location"), format!("/s/{ID}"));
    let set = header(&headers, "set-cookie").to_owned();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let cookie = set.split(';').next().unwrap().to_owned();

    let (status, headers, body) = get(&ui, "/", &[("Cookie", &cookie)]);
    assert_eq!(status, 200, "{body}");
    assert!(header(&headers, "content-security-policy").contains("script-src 'self'"));
    assert_eq!(header(&headers, "x-frame-options"), "DENY");
    // DNS rebinding: the browser sends the attacker's name as Host.
    let rebound = format!("attacker.example:{port}");
    let (status, _, _) = get(&ui, "/", &[("Cookie", &cookie), ("Host", &rebound)]);
    assert_eq!(status, 421);
    let (status, _, _) = get(
        &ui,
        "/",
        &[("Cookie", &cookie), ("Origin", "http://attacker.example")],
    );
    assert_eq!(status, 403);
    let ours = format!("http://{host}");
    let (status, _, _) = get(&ui, "/", &[("Cookie", &cookie), ("Origin", &ours)]);
    assert_eq!(status, 200);
    // A page of a server on another port of this host is of the same site, and its browser
    // sends it this server's cookie.
    for site in ["same-site", "cross-site"] {
        let (status, _, _) = get(&ui, "/", &[("Cookie", &cookie), ("Sec-Fetch-Site", site)]);
        assert_eq!(status, 403, "{site}");
    }
    let (status, _, _) = get(&ui, "/", &[("Cookie", &cookie), ("Sec-Fetch-Site", "none")]);
    assert_eq!(status, 200);
    // The token's redirect stays on this server.
    let (status, headers, _) = get(
        &ui,
        &format!("//attacker.example?token={}", ui.token()),
        &[],
    );
    assert_eq!(status, 303);
    assert_eq!(header(&headers, "location"), "/attacker.example");

    // Restore: a form without the CSRF token, or with a wrong one, is refused.
    let post = |form: &[(&str, &str)]| {
        let body = form_body(form);
        answer(
            http()
                .post(format!("{}/s/{ID}/restore", ui.base))
                .header("Cookie", &cookie)
                .header("Origin", &ours)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .send(body.as_bytes())
                .unwrap(),
        )
    };
    for form in [vec![], vec![("csrf", "0".repeat(64))]] {
        let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (status, _, body) = post(&form);
        assert_eq!(status, 403, "{body}");
        assert!(!path.exists(), "restored without the CSRF token");
    }
    let (_, _, page) = get(&ui, &format!("/s/{ID}/restore"), &[("Cookie", &cookie)]);
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    let (status, _, body) = post(&[("csrf", &csrf)]);
    assert_eq!(status, 200, "{body}");
    assert_eq!(fs::read(&path).unwrap(), original);
}

fn form_body(form: &[(&str, &str)]) -> String {
    form.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// A deleted session is restored from its page: the plan, then the button, then the files
/// back byte for byte and the command that resumes it, to copy.
#[test]
fn a_deleted_session_is_restored_from_its_page() {
    let env = Env::new();
    let (path, original) = archived_then_deleted(&env, "bring this one back");
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.goto(&format!("{}/sessions", ui.base));
    browser.wait_for("tr.deleted");
    assert_eq!(browser.text("p.count").trim(), "1 session");
    browser.click("tr.deleted td.title a");
    assert!(browser.text(".session-head").contains("deleted from disk"));
    browser.click("a[href$='/restore']");
    let plan = browser.text("#restore-plan");
    assert!(plan.contains(&path.display().to_string()), "{plan}");
    assert!(!path.exists(), "the plan wrote a file");
    screenshot(&browser, "restore");
    browser.click("#restore");
    browser.wait_for("#restored");
    let resume = browser.text("#resume-command");
    assert!(
        resume.contains(&format!("claude --resume {ID}")),
        "{resume}"
    );
    assert_eq!(fs::read(&path).unwrap(), original);
}

/// A session is starred, tagged and noted from its page; the list shows the star and the
/// tag, filters by them, and after `reindex` they are still there; a note's markup is text.
#[test]
fn a_session_is_starred_tagged_and_noted_from_its_page_and_keeps_them_through_reindex() {
    let env = Env::new();
    crafted(&env, "the session to mark", &[]);
    let other = json!({"type": "user", "uuid": "o1", "sessionId": "0a1b2c3d-0000-4000-8000-000000000002",
        "cwd": "/w/other", "timestamp": "2026-12-02T10:00:00.000Z",
        "message": {"role": "user", "content": "a session left unmarked"}});
    let dir = env.dir.path().join("home/.claude/projects/-w-other");
    fs::create_dir_all(&dir).unwrap();
    fs::write(
        dir.join("0a1b2c3d-0000-4000-8000-000000000002.jsonl"),
        format!("{other}\n"),
    )
    .unwrap();
    env.run_once_home();
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.goto(&format!("{}/s/{ID}", ui.base));
    browser.click("#starred");
    browser.type_into("#tags", "billing urgent");
    browser.type_into("#note", "<img src=x onerror=alert(1)> the retry loop");
    browser.click("#save-marks");
    browser.wait_for(".session-head .star");
    // Sent back to the page itself: a reload does not post the form again.
    assert!(
        browser.url().ends_with(&format!("/s/{ID}")),
        "{}",
        browser.url()
    );
    assert_eq!(
        browser.script("return document.querySelector('#tags').value", json!([])),
        "billing urgent"
    );
    assert!(
        browser
            .text("#note")
            .contains("<img src=x onerror=alert(1)>")
    );
    assert_eq!(
        browser.count(".session-head img"),
        0,
        "the note's markup is text"
    );
    screenshot(&browser, "marks");

    stdout_of(&env, &["reindex"]);
    browser.goto(&format!("{}/sessions?starred=1", ui.base));
    browser.wait_for("table.sessions");
    assert_eq!(browser.count("table.sessions tbody tr"), 1);
    assert!(
        browser
            .text("table.sessions")
            .contains("the session to mark")
    );
    browser.click("a.tag[href*='tag=urgent']");
    browser.wait_for("table.sessions");
    assert_eq!(browser.count("table.sessions tbody tr"), 1);
    browser.goto(&format!("{}/sessions", ui.base));
    browser.wait_for("table.sessions");
    assert_eq!(browser.count("table.sessions tbody tr"), 2);
    assert_eq!(browser.count("table.sessions .star"), 1);
}

/// The theme follows the system until the toggle chooses one, which a reload remembers.
#[test]
fn the_theme_toggle_switches_light_and_dark_and_is_remembered() {
    let env = Env::new();
    crafted(&env, "a session to read in the dark", &[]);
    env.run_once_home();
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.wait_for("#theme");
    let background = |b: &Browser| {
        b.script(
            "return getComputedStyle(document.body).backgroundColor",
            json!([]),
        )
    };
    // Headless Chromium's system scheme is light.
    assert_eq!(background(&browser), "rgb(251, 251, 252)");
    browser.click("#theme");
    assert_eq!(background(&browser), "rgb(20, 22, 26)");
    browser.goto(&format!("{}/sessions", ui.base));
    browser.wait_for("table.sessions");
    assert_eq!(background(&browser), "rgb(20, 22, 26)", "remembered");
    browser.click("#theme");
    assert_eq!(background(&browser), "rgb(251, 251, 252)");
}

/// An open conversation follows the records the daemon archives, with no reload.
#[test]
fn an_open_session_follows_new_records_live() {
    let env = Env::new();
    let path = crafted(&env, "watch this session", &[]);
    let daemon = Daemon::spawn(home_daemon_cmd(&env), TapReader::Read);
    daemon.wait_log("caught up");
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.goto(&format!("{}/s/{ID}", ui.base));
    browser.wait_until("the page following the daemon", |b| {
        b.text("#live-state").starts_with("Live")
    });
    browser.script("window.sameDocument = true", json!([]));
    let before = browser.count("article.msg");
    let prompt = line(
        "user",
        "u9",
        9,
        json!({"role": "user", "content": "a prompt typed while the page is open"}),
    );
    let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::io::Write::write_all(&mut f, format!("{prompt}\n").as_bytes()).unwrap();
    browser.wait_until("the new prompt shown", |b| {
        b.text("article.live-new")
            .contains("a prompt typed while the page is open")
    });
    assert_eq!(browser.count("article.msg"), before + 1);
    assert_eq!(
        browser.script("return window.sameDocument", json!([])),
        true
    );
    browser.goto(&format!("{}/live", ui.base));
    browser.wait_until("the live page following", |b| {
        b.text("#live-state").starts_with("Live")
    });
    let another = line(
        "user",
        "u10",
        10,
        json!({"role": "user", "content": "and one for the live page"}),
    );
    std::io::Write::write_all(&mut f, format!("{another}\n").as_bytes()).unwrap();
    browser.wait_until("the record on the live page", |b| {
        b.text("#live-feed").contains("and one for the live page")
    });
    screenshot(&browser, "live");
    daemon.terminate();
}

/// A Claude Code session with a subagent and a compaction: the compaction is marked where it
/// happened, and the subagent's conversation is read inside its parent's page when opened.
#[test]
fn a_subagent_is_read_inside_its_parent_and_a_compaction_is_marked() {
    let env = Env::new();
    let id = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
    let project = env
        .dir
        .path()
        .join("home/.claude/projects/-home-dana-src-ledger");
    let fixture = |name: &str| {
        fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/sessions")
                .join(name),
        )
        .unwrap()
    };
    let subagent = project.join(format!("{id}/subagents/agent-b41c2d.jsonl"));
    fs::create_dir_all(subagent.parent().unwrap()).unwrap();
    fs::write(
        project.join(format!("{id}.jsonl")),
        fixture("claude-code.jsonl"),
    )
    .unwrap();
    fs::write(&subagent, fixture("claude-code-subagent.jsonl")).unwrap();
    env.run_once_home();
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.goto(&format!("{}/s/{id}", ui.base));
    assert!(browser.text("#conversation .compact").contains("Compacted"));
    assert_eq!(browser.count("details.subagent"), 1);
    assert_eq!(browser.count("details.subagent article.msg"), 0);
    browser.click("details.subagent summary");
    browser.wait_for("details.subagent article.msg");
    let inside = browser.text("details.subagent");
    assert!(
        inside.contains("List every call site of Invoice::total"),
        "{inside}"
    );
    // Its own page too.
    browser.click("details.subagent summary a");
    browser.wait_for("#conversation article.msg");
    assert!(
        browser.url().contains("/s/agent-b41c2d"),
        "{}",
        browser.url()
    );
}

/// A chat the agent rewrites whole (Gemini CLI's JSON) followed live: a message it grows is
/// replaced where it is, a new one is added, and none is shown twice, as the index keeps them.
#[test]
fn a_message_the_agent_rewrites_is_replaced_where_it_is_live() {
    let env = Env::new();
    let id = "5b0c7e52-9d51-4a53-8f1c-0d8a3e6f2a11";
    let path = env
        .dir
        .path()
        .join("home/.gemini/tmp/proj/chats/session-2026-12-03T10-00-5b0c7e52.json");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let write = |messages: &[(&str, &str, &str)]| {
        let messages: Vec<Value> = (messages.iter().enumerate())
            .map(|(i, (id, kind, text))| {
                json!({"id": id, "timestamp": format!("2026-12-03T10:00:{i:02}.000Z"),
                    "type": kind, "content": text})
            })
            .collect();
        let doc = json!({"sessionId": id, "projectHash": "9f1e",
            "startTime": "2026-12-03T10:00:00.000Z",
            "lastUpdated": format!("2026-12-03T10:00:{:02}.000Z", messages.len()),
            "messages": messages});
        let temp = path.with_extension("tmp");
        fs::write(&temp, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
        fs::rename(&temp, &path).unwrap();
    };
    write(&[
        ("m1", "user", "first question alpha"),
        ("m2", "gemini", "first answer"),
    ]);
    let daemon = Daemon::spawn(home_daemon_cmd(&env), TapReader::Read);
    daemon.wait_log("caught up");
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.goto(&format!("{}/s/{id}", ui.base));
    browser.wait_until("the page following the daemon", |b| {
        b.text("#live-state").starts_with("Live")
    });
    assert_eq!(browser.count("article.msg"), 2);
    write(&[
        ("m1", "user", "first question alpha"),
        ("m2", "gemini", "first answer, longer now"),
        ("m3", "user", "second question charlie"),
    ]);
    browser.wait_until("the new question shown", |b| {
        b.text("#conversation").contains("second question charlie")
    });
    browser.wait_until("the answer replaced", |b| {
        b.text("#conversation").contains("first answer, longer now")
    });
    let texts = browser.script(
        "return [...document.querySelectorAll('article.msg .text')].map(e => e.textContent.trim())",
        json!([]),
    );
    assert_eq!(
        texts,
        json!([
            "first question alpha",
            "first answer, longer now",
            "second question charlie"
        ])
    );
    daemon.terminate();
}

/// The crafted session followed by 127 prompts, "follow-up number 0" to 126: past the
/// first part of the conversation a page shows.
pub(crate) fn long_session(env: &Env) {
    let extra: Vec<String> = (0..127)
        .map(|i| {
            let text = format!("follow-up number {i}");
            line(
                "user",
                &format!("f{i}"),
                10 + i % 40,
                json!({"role": "user", "content": text}),
            )
        })
        .collect();
    crafted(env, "a long one", &extra);
}

/// A long session opens with its first messages and loads the rest as it scrolls into
/// view; opened at a message further on, it loads the earlier ones on request.
#[test]
fn a_long_session_loads_as_it_scrolls() {
    let env = Env::new();
    long_session(&env);
    env.run_once_home();
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.goto(&format!("{}/s/{ID}", ui.base));
    assert_eq!(browser.count("article.msg"), 50);
    for shown in [100, 130] {
        browser.script(
            "document.querySelector('.more').scrollIntoView()",
            json!([]),
        );
        browser.wait_until("the next messages", |b| b.count("article.msg") == shown);
    }
    assert_eq!(browser.count(".more"), 0);
    assert_eq!(browser.count(".live-here"), 1);
    let texts = browser.script(
        "return [...document.querySelectorAll('article.role-user .text')].map(e => e.textContent.trim())",
        json!([]),
    );
    let expected: Vec<String> = std::iter::once("a long one".to_owned())
        .chain((0..127).map(|i| format!("follow-up number {i}")))
        .collect();
    assert_eq!(texts, json!(expected));

    let hits = stdout_of(&env, &["search", "\"follow-up number 120\"", "--json"]);
    let seq = serde_json::from_str::<Value>(hits.lines().next().unwrap()).unwrap()["seq"].clone();
    browser.goto(&format!("{}/s/{ID}?at={seq}#m-{seq}", ui.base));
    browser.wait_for(&format!("#m-{seq}"));
    let first = browser.count("article.msg");
    browser.click(".earlier button");
    browser.wait_until("the earlier messages", |b| {
        b.count("article.msg") == first + 50
    });
}

/// With `[ui] listen`, `run` serves the web view beside the daemon and logs its URL.
#[test]
fn run_serves_the_web_view_when_the_configuration_says_where() {
    let env = Env::new();
    crafted(&env, "served by the daemon", &[]);
    let port = testkit::ports::free_port();
    env.write_config(&format!("[ui]\nlisten = \"127.0.0.1:{port}\"\n"));
    let checked = stdout_of(&env, &["config", "check"]);
    assert!(
        checked.contains(&format!("ui_listen = \"127.0.0.1:{port}\"")),
        "{checked}"
    );
    let daemon = Daemon::spawn(home_daemon_cmd(&env), TapReader::Read);
    daemon.wait_log("caught up");
    daemon.wait_log("web view at http://");
    let log = daemon.log();
    let url = log
        .split("web view at ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    assert!(
        url.starts_with(&format!("http://127.0.0.1:{port}/?token=")),
        "{url}"
    );
    let (status, headers, _) = answer(http().get(&url).call().unwrap());
    assert_eq!(status, 303);
    let cookie = header(&headers, "set-cookie")
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = http()
        .get(format!("http://127.0.0.1:{port}/"))
        .header("Cookie", &cookie)
        .call()
        .unwrap();
    let (status, _, body) = answer(page);
    assert_eq!(status, 200);
    wait_until_else(
        "the session listed",
        || {
            let page = http()
                .get(format!("http://127.0.0.1:{port}/sessions"))
                .header("Cookie", &cookie)
                .call()
                .unwrap();
            answer(page).2.contains("served by the daemon")
        },
        || format!("{body}\n{}", daemon.log()),
    );
    daemon.terminate();
}

/// A `[ui] listen` address that is taken costs the web view only: `run` says so and goes on
/// archiving.
#[test]
fn run_goes_on_without_the_web_view_when_its_address_is_taken() {
    let env = Env::new();
    let path = crafted(&env, "archived all the same", &[]);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let config = env.write_config(&format!("[ui]\nlisten = \"127.0.0.1:{port}\"\n"));
    let daemon = Daemon::spawn(home_daemon_cmd(&env), TapReader::Read);
    let log = daemon.wait_log("the web view is not served");
    assert!(
        log.contains(&format!("[ui] listen in {}", config.display())),
        "{log}"
    );
    daemon.wait_log("caught up");
    let listed = stdout_of(&env, &["sessions", "--json"]);
    assert!(listed.contains("archived all the same"), "{listed}");
    assert!(path.exists());
    daemon.terminate();
}

/// `reindex` while `ui` serves makes a new index file: every worker reads the new one (a
/// session archived after it is listed by every page), not the one it had open.
#[test]
fn after_reindex_every_page_reads_the_new_index() {
    let env = Env::new();
    crafted(&env, "the first session", &[]);
    env.run_once_home();
    let ui = serve(&env);
    let cookie = cookie(&ui);
    let list = || get(&ui, "/sessions", &[("Cookie", &cookie)]).2;
    // Every worker has served (and opened the index) once, most likely several times.
    for _ in 0..16 {
        assert!(list().contains("the first session"));
    }
    stdout_of(&env, &["reindex"]);
    let dir = env.dir.path().join("home/.claude/projects/-w-other");
    fs::create_dir_all(&dir).unwrap();
    let other = json!({"type": "user", "uuid": "o1", "sessionId": "0a1b2c3d-0000-4000-8000-000000000001",
        "cwd": "/w/other", "timestamp": "2026-12-02T10:00:00.000Z",
        "message": {"role": "user", "content": "a session after the reindex"}});
    fs::write(
        dir.join("0a1b2c3d-0000-4000-8000-000000000001.jsonl"),
        format!("{other}\n"),
    )
    .unwrap();
    env.run_once_home();
    for _ in 0..16 {
        let page = list();
        assert!(page.contains("a session after the reindex"), "{page}");
    }
}

/// The sessions page shows 200 at a time, newest first, the next ones a link away: read a
/// page at a time in the index's order, or (a filter that needs every session) all read and
/// cut here; either way every session once.
#[test]
fn the_sessions_are_paged_each_once() {
    let env = Env::new();
    many_sessions(&env, 205);
    let ui = serve(&env);
    let cookie = cookie(&ui);
    let titles = |path: &str| -> (Vec<String>, String) {
        let page = get(&ui, path, &[("Cookie", &cookie)]).2;
        let titles = (page.split("prompt of session ").skip(1))
            .map(|t| t.split('<').next().unwrap().to_owned())
            .collect();
        (titles, page)
    };
    for (first, second) in [
        ("/sessions", "/sessions?page=2"),
        ("/sessions?deleted=hide", "/sessions?deleted=hide&page=2"),
    ] {
        let (one, page) = titles(first);
        assert_eq!(one.len(), 200, "{first}");
        assert!(page.contains("205 sessions, page 1 of 2"), "{first}");
        assert!(page.contains("older →"), "{first}");
        let (two, page) = titles(second);
        // A session's link names its page, for the list beside it.
        let query = second.split_once('?').unwrap().1.replace('&', "&amp;");
        let oldest = format!("href=\"/s/00000000-0000-4000-8000-000000000000?{query}\"");
        assert!(page.contains(&oldest), "{second}: {page}");
        let all: Vec<String> = one.into_iter().chain(two).collect();
        let newest_first: Vec<String> = (0..205).rev().map(|i: i32| i.to_string()).collect();
        assert_eq!(all, newest_first, "{first} then {second}");
    }
    // The list's CSV holds every session the filters keep, not a page of them.
    for csv in ["/sessions.csv", "/sessions.csv?deleted=hide&sort=title"] {
        let body = get(&ui, csv, &[("Cookie", &cookie)]).2;
        let rows = csv::Reader::from_reader(body.as_bytes()).records().count();
        assert_eq!(rows, 205, "{csv}");
    }
}

/// `n` Claude Code sessions of one prompt each (`prompt of session I`) in project
/// `/w/many`, a minute apart from 2026-11-01 (the last the newest), archived.
pub(crate) fn many_sessions(env: &Env, n: usize) {
    let dir = env.dir.path().join("home/.claude/projects/-w-many");
    fs::create_dir_all(&dir).unwrap();
    for i in 0..n {
        let id = format!("00000000-0000-4000-8000-{i:012}");
        let prompt = json!({"type": "user", "uuid": format!("p{i}"), "sessionId": id,
            "cwd": "/w/many", "timestamp": format!("2026-11-{:02}T10:{:02}:00.000Z", 1 + i / 60, i % 60),
            "message": {"role": "user", "content": format!("prompt of session {i}")}});
        fs::write(dir.join(format!("{id}.jsonl")), format!("{prompt}\n")).unwrap();
    }
    env.run_once_home();
}

/// `ui` on an archive that is not there says so, naming it, and serves nothing.
#[test]
fn ui_without_an_archive_names_the_missing_archive() {
    let env = Env::new();
    let out = cli(&env, &["ui", "--no-open"]);
    assert!(!out.status.success());
    let stderr = stderr(&out);
    assert!(stderr.contains(&env.db.display().to_string()), "{stderr}");
}

/// The pages the other browser tests do not audit (search, usage, status, live, restore, the
/// sessions table), each in light and dark: axe-core finds no serious or critical violation.
#[test]
fn every_other_page_passes_axe_in_light_and_dark() {
    let env = Env::new();
    crafted(&env, "Please list the **invoices** folder.", &[]);
    env.run_once_home();
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    let axe = crate::ui_home::axe_core();
    for path in [
        "/search?q=invoices".to_owned(),
        "/usage?since=3650d".to_owned(),
        "/status".to_owned(),
        "/live".to_owned(),
        format!("/s/{ID}/restore"),
        "/sessions".to_owned(),
    ] {
        browser.goto(&format!("{}{path}", ui.base));
        browser.wait_for("main");
        for scheme in ["light", "dark"] {
            browser.cdp(
                "Emulation.setEmulatedMedia",
                json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
            );
            let violations = crate::ui_home::audit(&browser, &axe);
            assert!(violations.is_empty(), "{path}, {scheme}: {violations:#?}");
        }
    }
}
