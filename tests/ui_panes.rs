//! `ui`'s session page beside the sessions list, its keys and its links to a message, read in
//! headless Chromium: the list and the conversation side by side in a wide window and one at
//! a time in a narrow one; j, k, Enter, h, `/`, `g d` and `?`; a link to a message far into a
//! long conversation.

use crate::ui::{ID, long_session, many_sessions, screenshot, serve};
use crate::ui_home::{audit, axe_core};
use crate::util::{Env, stdout_of};
use serde_json::{Value, json};
use testkit::browser::Browser;

/// WebDriver's codes for Enter, Escape and Alt.
const ENTER: &str = "\u{E007}";
const ESCAPE: &str = "\u{E00C}";
const ALT: &str = "\u{E00A}";

/// The id of the `i`th session [`many_sessions`] writes.
fn many(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

/// What has the focus: its id, else its link, else its tag.
fn focused(b: &Browser) -> String {
    let what = b.script(
        "const e = document.activeElement; return e.id || e.getAttribute('href') || e.tagName",
        json!([]),
    );
    what.as_str().unwrap().to_owned()
}

/// Whether the element `css` selects is laid out (there, and not `display: none`).
fn displayed(b: &Browser, css: &str) -> bool {
    let script = "const e = document.querySelector(arguments[0]); return !!e && e.getClientRects().length > 0";
    b.script(script, json!([css])) == true
}

/// Makes the page `width` CSS pixels wide.
fn resize(b: &Browser, width: u32) {
    b.cdp(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    );
}

/// From the list page, the keys choose and open a session; the page then shows the list it
/// came from beside it (its filter kept, the session marked, axe-core finding no serious
/// violation), loads the list's next page as the pane scrolls, and moves on from there. A
/// narrow window shows the conversation alone, with the way back to the list.
#[test]
fn a_session_opened_from_the_list_keeps_the_list_beside_it_on_a_wide_screen() {
    let env = Env::new();
    many_sessions(&env, 205);
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.goto(&format!("{}/sessions?project=many", ui.base));
    browser.wait_for("table.sessions");
    let link = |i: usize| format!("/s/{}?project=many", many(i));
    // With a modifier, a key is the browser's; alone, j chooses the first session, then j
    // and k move; Enter opens the one chosen.
    browser.press(&format!("{ALT}j"));
    assert_eq!(focused(&browser), "BODY");
    assert_eq!(browser.count(".selected"), 0);
    browser.press("j");
    assert_eq!(focused(&browser), link(204));
    browser.press("jjk");
    assert_eq!(focused(&browser), link(203));
    assert_eq!(browser.count("a.session.selected"), 1);
    browser.press(ENTER);
    browser.wait_for(".list-pane a.session[aria-current='page']");
    assert!(browser.url().ends_with(&link(203)), "{}", browser.url());

    // Side by side: the list, its filter kept and the open session marked; the conversation.
    assert!(displayed(&browser, ".list-pane") && displayed(&browser, "#conversation"));
    let beside = "return document.querySelector('.list-pane').getBoundingClientRect().right
        <= document.querySelector('#conversation').getBoundingClientRect().left";
    assert_eq!(browser.script(beside, json!([])), true);
    assert!(!displayed(&browser, "p.back"));
    assert_eq!(
        browser.text(".list-pane a[aria-current] .title"),
        "prompt of session 203"
    );
    let project = "return document.querySelector('.list-pane input[name=project]').value";
    assert_eq!(browser.script(project, json!([])), "many");
    assert_eq!(browser.count(".list-pane a.session"), 200);
    screenshot(&browser, "panes");
    let violations = audit(&browser, &axe_core());
    assert!(violations.is_empty(), "{violations:#?}");

    // The rest of the list comes as the pane scrolls to its end, each session once.
    browser.script(
        "const p = document.querySelector('.list-pane'); p.scrollTop = p.scrollHeight",
        json!([]),
    );
    browser.wait_until("the list's next page", |b| {
        b.count(".list-pane a.session") == 205
    });
    assert_eq!(browser.count(".more-rows"), 0);
    // The first page has no page before it, and a page loaded after it brings no link back.
    assert_eq!(browser.count(".list-pane li.newer"), 0);
    let titles = browser.script(
        "return [...document.querySelectorAll('.list-pane a.session .title')].map(t => t.textContent)",
        json!([]),
    );
    let newest_first: Vec<String> = (0..205)
        .rev()
        .map(|i| format!("prompt of session {i}"))
        .collect();
    assert_eq!(titles, json!(newest_first));
    // A session of the list's second page names that page, which the list beside it shows.
    let second = format!("{}&page=2", link(0));
    let last =
        "return document.querySelector('.list-pane li:last-child a.session').getAttribute('href')";
    assert_eq!(browser.script(last, json!([])), second);
    browser.goto(&format!("{}{second}", ui.base));
    browser.wait_for(".list-pane li.newer a");
    assert_eq!(browser.count(".list-pane a.session"), 5);
    assert_eq!(
        browser.text(".list-pane a[aria-current] .title"),
        "prompt of session 0"
    );
    browser.goto(&format!("{}{}", ui.base, link(203)));
    browser.wait_for(".list-pane a[aria-current]");

    // h goes to the open session in the list, j to the next; Enter opens it.
    assert_eq!(focused(&browser), "BODY");
    browser.press("hj");
    assert_eq!(focused(&browser), link(202));
    browser.press(ENTER);
    browser.wait_until("the next session open", |b| b.url().ends_with(&link(202)));
    assert_eq!(
        browser.text(".list-pane a[aria-current] .title"),
        "prompt of session 202"
    );

    // `/` is the search box, where the keys are text; `?` shows the keys; g then d goes home.
    browser.press("/");
    assert_eq!(focused(&browser), "quick");
    browser.press("gd");
    assert_eq!(
        browser.script("return document.getElementById('quick').value", json!([])),
        "gd"
    );
    assert!(browser.url().ends_with(&link(202)), "{}", browser.url());
    browser.script("document.activeElement.blur()", json!([]));
    browser.press("?");
    assert_eq!(
        browser.script("return document.getElementById('keys').open", json!([])),
        true
    );
    assert!(browser.text("#keys").contains("Home (the dashboard)"));
    browser.press(ESCAPE);
    assert_eq!(
        browser.script("return document.getElementById('keys').open", json!([])),
        false
    );
    browser.press("gd");
    browser.wait_for("section.figures");
    assert_eq!(browser.url(), format!("{}/", ui.base));

    // A narrow window: the conversation alone, and a link back to the list.
    resize(&browser, 800);
    browser.goto(&format!("{}{}", ui.base, link(202)));
    browser.wait_for("#conversation");
    assert!(!displayed(&browser, ".list-pane"));
    assert!(displayed(&browser, "#conversation") && displayed(&browser, "p.back a"));
    screenshot(&browser, "panes-narrow");
    browser.click("p.back a");
    browser.wait_for("table.sessions");
    assert!(
        browser.url().ends_with("/sessions?project=many"),
        "{}",
        browser.url()
    );
}

/// A link to a message far past the conversation's first part (its `#m-SEQ` only) opens the
/// page at that message: in view, marked and chosen, the earlier messages a button away; j
/// and k move from it, and its `#` link puts an address that opens at it on the clipboard.
#[test]
fn a_link_to_a_message_far_into_a_conversation_opens_on_it() {
    let env = Env::new();
    long_session(&env);
    env.run_once_home();
    let hits = stdout_of(&env, &["search", "\"follow-up number 120\"", "--json"]);
    let seq = serde_json::from_str::<Value>(hits.lines().next().unwrap()).unwrap()["seq"].clone();
    let ui = serve(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.goto(&format!("{}/s/{ID}#m-{seq}", ui.base));
    browser.wait_until("the page asked again at the message", |b| {
        b.url().ends_with(&format!("/s/{ID}?at={seq}#m-{seq}"))
    });
    let target = format!("m-{seq}");
    browser.wait_for(&format!("#{target}"));
    let state = browser.script(
        "const m = document.getElementById(arguments[0]); const r = m.getBoundingClientRect();
         return [document.querySelector(':target') === m, r.top >= 0 && r.bottom <= innerHeight,
                 document.activeElement === m && m.classList.contains('selected'),
                 m.textContent.includes('follow-up number 120')]",
        json!([target]),
    );
    assert_eq!(state, json!([true, true, true, true]));
    assert_eq!(browser.count(".earlier button"), 1);
    screenshot(&browser, "message-link");

    // j and k move between the messages, from the one linked.
    let around = browser.script(
        "const m = document.getElementById(arguments[0]);
         return [m.previousElementSibling.id, m.nextElementSibling.id]",
        json!([target]),
    );
    browser.press("j");
    assert_eq!(focused(&browser), around[1]);
    browser.press("kk");
    assert_eq!(focused(&browser), around[0]);
    assert_eq!(browser.count("#conversation .selected"), 1);
    // h goes to the list beside it, l back to the message chosen.
    browser.press("h");
    assert_eq!(focused(&browser), format!("/s/{ID}"));
    browser.press("l");
    assert_eq!(focused(&browser), around[0]);

    // A message's link goes to it and copies the address that opens at it.
    browser.cdp(
        "Browser.grantPermissions",
        json!({"permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]}),
    );
    let next = around[1].as_str().unwrap();
    browser.click(&format!("#{next} a.anchor"));
    browser.wait_for(&format!("#{next} a.anchor[data-copied]"));
    assert_eq!(focused(&browser), next);
    let copied = browser.script("return navigator.clipboard.readText()", json!([]));
    let seq = next.strip_prefix("m-").unwrap();
    assert_eq!(
        copied,
        format!("{}/s/{ID}?at={seq}#m-{seq}", ui.base),
        "the address copied"
    );
}
