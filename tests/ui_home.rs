//! `ui`'s home, read in a real browser: its calendar, figures and charts over sessions of
//! known times, in a time zone that is not UTC, and where each figure leads.

use crate::ui::screenshot;
use crate::util::Env;
use serde_json::{Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use testkit::browser::{Browser, WebView};

const DAY: u64 = 86_400;
/// The server's time zone in these tests, two hours ahead of UTC (POSIX's sign is the other
/// way round): a day of the calendar is not a day of UTC.
const TZ: &str = "XST-2";
const OFFSET: u64 = 2 * 3600;

/// The sessions written: days before today, the project, and how many sessions that day.
const DAYS: [(u64, &str, usize); 3] = [(3, "alpha", 2), (9, "beta", 1), (40, "alpha", 3)];

/// The local date (`YYYY-MM-DD`) `days_ago` days before today, and that day's local noon
/// as Unix seconds.
fn local_day(days_ago: u64) -> (String, u64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let midnight = ((now + OFFSET) / DAY - days_ago) * DAY;
    let date = humantime::format_rfc3339(UNIX_EPOCH + Duration::from_secs(midnight)).to_string();
    (date[..10].to_owned(), midnight + 12 * 3600 - OFFSET)
}

fn at(secs: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
}

/// A Claude Code session of `pairs` prompts and answers from `start` (Unix s), a minute
/// apart, in project `/w/<project>`, titled by its first prompt; returns its path.
fn session(home: &Path, id: &str, project: &str, title: &str, start: u64, pairs: usize) -> PathBuf {
    let dir = home.join(format!(".claude/projects/-w-{project}"));
    fs::create_dir_all(&dir).unwrap();
    let mut lines = Vec::new();
    for i in 0..pairs {
        let t = start + 120 * i as u64;
        let prompt = if i == 0 {
            title.to_owned()
        } else {
            format!("and then {i}")
        };
        lines.push(
            json!({"type": "user", "uuid": format!("{id}-u{i}"), "sessionId": id,
            "cwd": format!("/w/{project}"), "timestamp": at(t),
            "message": {"role": "user", "content": prompt}}),
        );
        lines.push(json!({"type": "assistant", "uuid": format!("{id}-a{i}"), "sessionId": id,
            "cwd": format!("/w/{project}"), "timestamp": at(t + 60),
            "message": {"id": format!("msg-{id}-{i}"), "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": "done"}],
                "usage": {"input_tokens": 10_000, "output_tokens": 2_000}}}));
    }
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    let path = dir.join(format!("{id}.jsonl"));
    fs::write(&path, text.join("\n") + "\n").unwrap();
    path
}

/// The sessions of [`DAYS`], archived; the first of the most recent day then deleted by its
/// agent. The last of the oldest day has three prompts and answers, the rest one.
fn archive_of_known_days(env: &Env) {
    let home = env.dir.path().join("home");
    let mut first = None;
    for (ago, project, n) in DAYS {
        let (_, noon) = local_day(ago);
        for i in 0..n {
            let id = format!("00000000-0000-4000-8000-{ago:06}{i:06}");
            let pairs = if ago == 40 && i == n - 1 { 3 } else { 1 };
            let title = format!("day {ago} session {i}");
            let path = session(&home, &id, project, &title, noon + 600 * i as u64, pairs);
            first.get_or_insert(path);
        }
    }
    env.run_once_home();
    fs::remove_file(first.unwrap()).unwrap();
}

/// `ui` in the tests' time zone.
fn serve_in_zone(env: &Env) -> WebView {
    let mut cmd = env.cmd();
    cmd.env("TZ", TZ)
        .args(["ui", "--no-open", "--db"])
        .arg(&env.db);
    WebView::start(cmd)
}

/// A figure's value.
fn figure(browser: &Browser, id: &str) -> String {
    browser.text(&format!("#{id} .value"))
}

/// The titles the sessions list shows.
fn listed(browser: &Browser) -> Vec<String> {
    let titles = browser.script(
        "return [...document.querySelectorAll('table.sessions td.title a')].map(a => a.textContent)",
        json!([]),
    );
    let mut titles: Vec<String> = serde_json::from_value(titles).unwrap();
    titles.sort();
    titles
}

/// The calendar's cell of `date`: its count and its title.
fn cell(browser: &Browser, date: &str) -> (String, String) {
    let found = browser.script(
        "const r = document.querySelector(`#calendar rect[data-day='${arguments[0]}']`);
         return r ? [r.dataset.count, r.querySelector('title').textContent] : null;",
        json!([date]),
    );
    assert!(!found.is_null(), "no cell for {date}");
    (
        found[0].as_str().unwrap().to_owned(),
        found[1].as_str().unwrap().to_owned(),
    )
}

#[test]
fn the_homes_calendar_holds_each_days_sessions_in_the_servers_local_time() {
    let env = Env::new();
    archive_of_known_days(&env);
    let ui = serve_in_zone(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.wait_for("#calendar");
    // A year of days, to today, whatever the window.
    assert!(browser.count("#calendar rect.day") >= 365);
    for (ago, _, n) in DAYS {
        let (date, _) = local_day(ago);
        let (count, title) = cell(&browser, &date);
        assert_eq!(count, n.to_string(), "{date}");
        let noun = if n == 1 { "session" } else { "sessions" };
        assert_eq!(title, format!("{date}: {n} {noun}"));
    }
    let (yesterday, _) = local_day(1);
    assert_eq!(cell(&browser, &yesterday).0, "0");
    // The heatmap: every session of the window started at local noon or just after.
    let noon = browser.script(
        "return [...document.querySelectorAll('#heatmap rect.hour')]
            .filter(r => r.dataset.count !== '0')
            .map(r => r.querySelector('title').textContent)",
        json!([]),
    );
    let noon: Vec<String> = serde_json::from_value(noon).unwrap();
    assert_eq!(noon.len(), 2, "{noon:?}");
    assert!(
        noon.iter().all(|t| t.contains(" 12:00–13:00: ")),
        "{noon:?}"
    );
    assert!(browser.text("#hours").contains("UTC+02:00"));

    // A day leads to its sessions, and to those only.
    let (oldest, _) = local_day(40);
    browser.click(&format!("#calendar a:has(rect[data-day='{oldest}'])"));
    browser.wait_for("table.sessions");
    assert_eq!(
        listed(&browser),
        ["day 40 session 0", "day 40 session 1", "day 40 session 2"]
    );
    assert!(browser.url().contains(&format!("day={oldest}")));

    // The calendar follows a filter by marks, as every part of the home does.
    let first = "00000000-0000-4000-8000-000040000000";
    crate::util::stdout_of(&env, &["mark", first, "--star"]);
    browser.goto(&format!("{}/?starred=1", ui.base));
    browser.wait_for("#calendar");
    assert_eq!(cell(&browser, &oldest).0, "1");
}

#[test]
fn the_homes_window_and_filters_change_its_figures_and_each_leads_to_its_sessions() {
    let env = Env::new();
    archive_of_known_days(&env);
    let ui = serve_in_zone(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.wait_for("section.figures");
    // 30 days by default: the two recent days' three sessions.
    assert_eq!(figure(&browser, "fig-sessions"), "3");
    assert_eq!(figure(&browser, "fig-messages"), "6");
    assert_eq!(figure(&browser, "fig-projects"), "2");
    assert_eq!(figure(&browser, "fig-agents"), "1");
    assert_eq!(figure(&browser, "fig-days"), "2");
    assert_eq!(figure(&browser, "fig-deleted"), "1");
    // 3 calls of 10,000 tokens in and 2,000 out at Sonnet 4.5's price ($3 and $15 a
    // million).
    assert_eq!(figure(&browser, "fig-tokens"), "36,000");
    assert_eq!(figure(&browser, "fig-cost"), "$0.18");

    // The form, as a person uses it: a year.
    browser.script(
        "document.querySelector('#home-filters select[name=window]').value = '365d'",
        json!([]),
    );
    browser.click("#home-filters button[type=submit]");
    browser.wait_until("the year's figures", |b| {
        b.url().contains("window=365d") && figure(b, "fig-sessions") == "6"
    });
    assert_eq!(figure(&browser, "fig-days"), "3");
    assert_eq!(figure(&browser, "fig-messages"), "16");
    let top = browser.text("#top-messages tbody tr:first-child td.title a");
    assert_eq!(top, "day 40 session 2");
    let agents = browser.text("#share-agent");
    assert!(agents.contains("claude-code"), "{agents}");
    let models = browser.text("#share-model");
    assert!(models.contains("claude-sonnet-4-5"), "{models}");
    // The longest: three prompts and answers over five minutes; every other took one.
    let longest = browser.text("#top-duration tbody tr:first-child td.title a");
    assert_eq!(longest, "day 40 session 2");
    assert_eq!(
        browser.count("#top-duration tbody tr"),
        5,
        "the five longest of six"
    );
    // alpha's five sessions, then beta's one.
    let projects = browser.text("#share-project tbody");
    let alpha = projects.find("/w/alpha").expect("alpha's share");
    assert!(
        projects.find("/w/beta").is_some_and(|beta| beta > alpha),
        "{projects}"
    );
    browser.click("#fig-sessions");
    browser.wait_for("table.sessions");
    assert_eq!(listed(&browser).len(), 6);

    // A project: the year's one session of beta.
    browser.goto(&format!("{}/?window=365d&project=beta", ui.base));
    assert_eq!(figure(&browser, "fig-sessions"), "1");
    assert_eq!(figure(&browser, "fig-projects"), "1");
    browser.click("#fig-sessions");
    browser.wait_for("table.sessions");
    assert_eq!(listed(&browser), ["day 9 session 0"]);

    // The deleted figure leads to the one session its agent deleted.
    browser.goto(&format!("{}/?window=30d", ui.base));
    browser.click("#fig-deleted");
    browser.wait_for("table.sessions");
    assert_eq!(listed(&browser), ["day 3 session 0"]);
    assert_eq!(browser.count("tr.deleted"), 1);
    // A model's share leads to the sessions it answered in.
    browser.goto(&format!("{}/?window=30d", ui.base));
    browser.click("#share-model td.of a");
    browser.wait_for("table.sessions");
    assert_eq!(listed(&browser).len(), 3);
}

/// The home in light and dark, for `docs/ui/`, and axe-core's audit of it: no serious or
/// critical violation in either.
#[test]
fn the_home_reads_in_light_and_dark_and_passes_axe() {
    let env = Env::new();
    archive_of_known_days(&env);
    let ui = serve_in_zone(&env);
    let browser = Browser::start();
    browser.goto(&ui.url);
    browser.goto(&format!("{}/?window=365d", ui.base));
    browser.wait_for("#calendar");
    let axe = axe_core();
    for scheme in ["light", "dark"] {
        browser.cdp(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        );
        browser.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": 1280, "height": 1720, "deviceScaleFactor": 1, "mobile": false}),
        );
        let violations = audit(&browser, &axe);
        assert!(violations.is_empty(), "{scheme}: {violations:#?}");
    }
    screenshot(&browser, "home");
}

/// axe-core's script, installed from npm into the tests' own folder on first use.
pub(crate) fn axe_core() -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("axe");
    let script = dir.join("node_modules/axe-core/axe.min.js");
    if !script.exists() {
        fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg("axe-core@4")
            .status()
            .expect("npm runs");
        assert!(status.success(), "npm install axe-core");
    }
    fs::read_to_string(script).unwrap()
}

/// The serious and critical violations axe-core finds in the page: its id, impact and the
/// elements.
pub(crate) fn audit(browser: &Browser, axe: &str) -> Vec<Value> {
    // Run as the script's own body: the page's policy allows no `eval`.
    browser.script(
        &format!(
            "{axe}\nwindow.axeDone = null;
             axe.run(document).then(r => window.axeDone = r.violations
                .filter(v => v.impact === 'serious' || v.impact === 'critical')
                .map(v => ({{id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.html)}})));
             return true;"
        ),
        json!([]),
    );
    let mut found = Value::Null;
    browser.wait_until("axe-core's audit", |b| {
        found = b.script("return window.axeDone", json!([]));
        !found.is_null()
    });
    found.as_array().cloned().unwrap_or_default()
}
