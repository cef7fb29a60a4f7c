//! `ui`'s box that finds sessions in the list by their title, project or id, read in headless
//! Chromium: on the sessions page and in the list beside a conversation it narrows the list
//! as one types, without loading the page, the address keeping the text; without script it is
//! a field of the list's form.

use crate::ui::{cookie, get, many_sessions, serve};
use crate::ui_home::{audit, axe_core};
use crate::util::Env;
use serde_json::json;
use testkit::browser::Browser;

/// WebDriver's codes for Control, Backspace and Enter.
const CONTROL: &str = "\u{E009}";
const BACKSPACE: &str = "\u{E003}";
const ENTER: &str = "\u{E007}";

/// The titles of the sessions the element `css` holds, in its order.
fn titles(b: &Browser, css: &str) -> Vec<String> {
    let list = b.script(
        "return [...document.querySelectorAll(arguments[0] + ' a.session')].map(a => (a.querySelector('.title') || a).textContent)",
        json!([css]),
    );
    serde_json::from_value(list).unwrap()
}

/// Whether the page is still the one loaded first: the marker put on its window is there and
/// the browser made one navigation.
fn not_reloaded(b: &Browser) -> bool {
    b.script(
        "return window.listMarker === 1 && performance.getEntriesByType('navigation').length === 1",
        json!([]),
    ) == true
}

/// What the address asks for: its path and query.
fn asked(b: &Browser) -> String {
    let url = b.url();
    let at = url.find("/sessions").or_else(|| url.find("/s/")).unwrap();
    url[at..].to_owned()
}

/// The sessions of "session 20" among 205: 20 and 200 to 204, newest first.
fn session_20s() -> Vec<String> {
    [204, 203, 202, 201, 200, 20]
        .iter()
        .map(|i| format!("prompt of session {i}"))
        .collect()
}

/// Typing in the sessions page's box narrows the list to the sessions whose title holds the
/// text (in any case), its count and CSV following, without a page load, the other filters
/// kept and the address carrying the text; cleared, the list is whole again. The address
/// with the text (a reload, a link, the form sent without script) shows the same list, and
/// axe-core finds no serious violation on it. Enter finds without sending the form; `f` goes
/// to the box, `/` still to the search.
#[test]
fn the_sessions_page_narrows_as_one_types_in_its_box() {
    let env = Env::new();
    many_sessions(&env, 205);
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.goto(&format!("{}/sessions?project=many", ui.base));
    browser.wait_for("table.sessions");
    browser.script("window.listMarker = 1", json!([]));
    assert_eq!(browser.text("#list-count"), "205 sessions, page 1 of 2");

    browser.press("f");
    let focused = "return document.activeElement.id";
    assert_eq!(browser.script(focused, json!([])), "list-q");
    browser.type_into("#list-q", "SESSION 20");
    browser.wait_until("the list narrowed", |b| {
        b.count("table.sessions a.session") == 6
    });
    assert_eq!(titles(&browser, "table.sessions"), session_20s());
    assert_eq!(browser.text("#list-count"), "6 sessions");
    assert!(not_reloaded(&browser));
    assert_eq!(asked(&browser), "/sessions?project=many&q=SESSION+20");
    assert_eq!(browser.count("nav.pages"), 0);
    let csv = browser.script(
        "return document.getElementById('sessions-csv').getAttribute('href')",
        json!([]),
    );
    assert_eq!(csv, "/sessions.csv?q=SESSION+20&project=many&sort=active");
    let cookie = cookie(&ui);
    let body = get(&ui, csv.as_str().unwrap(), &[("Cookie", &cookie)]).2;
    assert_eq!(
        csv::Reader::from_reader(body.as_bytes()).records().count(),
        6
    );
    // A session's link keeps the text (and the form's sort), for the list beside it.
    let first = "return document.querySelector('table.sessions a.session').getAttribute('href')";
    assert_eq!(
        browser.script(first, json!([])),
        "/s/00000000-0000-4000-8000-000000000204?q=SESSION+20&project=many&sort=active"
    );
    // Cleared, every session again.
    browser.press(&format!("{CONTROL}a"));
    browser.press(BACKSPACE);
    browser.wait_until("the whole list again", |b| {
        b.count("table.sessions a.session") == 200
    });
    assert_eq!(browser.text("#list-count"), "205 sessions, page 1 of 2");
    assert!(not_reloaded(&browser));
    assert_eq!(asked(&browser), "/sessions?project=many");
    // Enter finds at once where it is, without sending the form (the text put in the box
    // without an input event, so that only Enter finds).
    browser.script(
        "document.getElementById('list-q').value = 'session 20'",
        json!([]),
    );
    browser.press(ENTER);
    browser.wait_until("the list narrowed by Enter", |b| {
        b.count("table.sessions a.session") == 6
    });
    assert!(not_reloaded(&browser));

    // The address with the text, as a reload, a link or the form without script ask it.
    let form = browser.script(
        "const q = document.getElementById('list-q');
         return [q.name, q.form.method, q.form.getAttribute('action'), q.labels[0].textContent]",
        json!([]),
    );
    assert_eq!(
        form,
        json!([
            "q",
            "get",
            "/sessions",
            "Find sessions by title, project or id"
        ])
    );
    browser.goto(&format!("{}/sessions?q=session+20&project=many", ui.base));
    browser.wait_for("table.sessions");
    assert_eq!(titles(&browser, "table.sessions"), session_20s());
    let value = "return document.getElementById('list-q').value";
    assert_eq!(browser.script(value, json!([])), "session 20");
    let violations = audit(&browser, &axe_core());
    assert!(violations.is_empty(), "{violations:#?}");
    browser.press("/");
    assert_eq!(browser.script(focused, json!([])), "quick");
}

/// In the list beside a conversation, the box narrows the list as one types, without a page
/// load, the open session still marked and the address keeping the text; the sessions'
/// links keep it too, so the list beside the next one is the same.
#[test]
fn the_list_beside_a_conversation_narrows_and_keeps_the_open_session_marked() {
    let env = Env::new();
    many_sessions(&env, 205);
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    let open = "/s/00000000-0000-4000-8000-000000000203";
    browser.goto(&format!("{}{open}?project=many", ui.base));
    browser.wait_for(".list-pane a.session[aria-current='page']");
    browser.script("window.listMarker = 1", json!([]));
    assert_eq!(browser.count(".list-pane a.session"), 200);

    browser.type_into(".list-pane #list-q", "session 20");
    browser.wait_until("the list narrowed", |b| {
        b.count(".list-pane a.session") == 6
    });
    assert_eq!(titles(&browser, ".list-pane"), session_20s());
    assert_eq!(
        browser.text(".list-pane a[aria-current='page'] .title"),
        "prompt of session 203"
    );
    assert_eq!(browser.text("#list-count"), "6 kept by the filters");
    assert!(not_reloaded(&browser));
    assert_eq!(asked(&browser), format!("{open}?project=many&q=session+20"));

    // The next session opens with the same list beside it.
    browser.click(".list-pane li:last-child a.session");
    browser.wait_until("the session of the list opened", |b| {
        b.url().contains("000000000020?")
    });
    browser.wait_for(".list-pane a.session[aria-current='page']");
    assert_eq!(titles(&browser, ".list-pane"), session_20s());
    let value = "return document.getElementById('list-q').value";
    assert_eq!(browser.script(value, json!([])), "session 20");
}
