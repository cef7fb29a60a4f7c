//! The web view in a real browser (headless Chromium through chromedriver): time to first
//! paint of the sessions page and of the home over 10,000 sessions, of a 50 MB session, and of a search over
//! the compare corpus (1 GiB; 64 MB with `COMPARE_QUICK=1`), with the server's memory. Beside
//! each, in the same run, the CLI command that gives the same thing in a terminal, from
//! spawn to exit, as the baseline.
//!
//! `cargo bench --bench ui`; `UI_RUNS` sets the timed page loads (default 7, after one
//! untimed). Results: stdout and `target/bench/ui.md`.

use serde_json::{Value, json};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use testkit::browser::{Browser, WebView};
use testkit::corpus;
use testkit::env::{env_flag, env_or};
use testkit::machine::{self, Machine};
use testkit::procfs;
use testkit::stats::{median, quantile_of};

const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");

/// transcript-sync with `HOME` at `home` and nothing else of this machine's environment.
fn ts(home: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "warn");
    cmd
}

/// `run --once` of what the watchers find under `home` into `db`.
fn archive(home: &Path, db: &Path) -> f64 {
    let start = Instant::now();
    let out = (ts(home).args(["run", "--once", "--db"]).arg(db))
        .output()
        .expect("run --once");
    assert!(
        out.status.success(),
        "run --once failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    start.elapsed().as_secs_f64()
}

/// `ui --no-open` on `db`.
fn serve(home: &Path, db: &Path) -> WebView {
    let mut cmd = ts(home);
    cmd.args(["ui", "--no-open", "--db"]).arg(db);
    WebView::start(cmd)
}

/// The server's peak resident memory, then of what is resident now its anonymous memory
/// (heap and stacks) and its file pages (the archive and index SQLite maps), in MiB.
fn memory_of(ui: &WebView) -> (f64, f64, f64) {
    let mib = |field| procfs::status_kib(ui.pid(), field).unwrap_or(0) as f64 / 1024.0;
    (mib("VmHWM"), mib("RssAnon"), mib("RssFile"))
}

/// One page's times over the runs: first contentful paint, and the HTML's arrival
/// (response end), in ms from the navigation's start; and its bytes.
struct Paint {
    fcp: Vec<f64>,
    response: Vec<f64>,
    bytes: f64,
}

/// Loads `url` once untimed, then `runs` times, each in a fresh tab state (the navigation
/// starts from `about:blank`, so nothing of the page is reused).
fn paint(browser: &Browser, url: &str, runs: usize) -> Paint {
    let mut p = Paint {
        fcp: Vec::new(),
        response: Vec::new(),
        bytes: 0.0,
    };
    for run in 0..=runs {
        browser.goto("about:blank");
        browser.goto(url);
        let mut t = Value::Null;
        browser.wait_until("a first paint", |b| {
            t = b.script(
                "const p = performance.getEntriesByName('first-contentful-paint')[0];
                 const n = performance.getEntriesByType('navigation')[0];
                 return p ? [p.startTime, n.responseEnd, n.transferSize] : null;",
                json!([]),
            );
            !t.is_null()
        });
        if run > 0 {
            p.fcp.push(t[0].as_f64().unwrap());
            p.response.push(t[1].as_f64().unwrap());
            p.bytes = t[2].as_f64().unwrap_or(0.0);
        }
    }
    p
}

/// `args` from spawn to exit with the whole output read, once untimed then `runs` times.
fn cli(home: &Path, db: &Path, args: &[&str], runs: usize) -> Vec<f64> {
    let mut ms = Vec::new();
    for run in 0..=runs {
        let start = Instant::now();
        let out = (ts(home).args(args).arg("--db").arg(db))
            .output()
            .expect("transcript-sync");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if run > 0 {
            ms.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    ms
}

fn row(md: &mut String, what: &str, p: &Paint, baseline: &str, cli_ms: &[f64]) {
    println!(
        "  {what:<34} first paint {:>7.1} ms, HTML {:>7.1} ms; `{baseline}` {:>7.1} ms",
        median(&p.fcp),
        median(&p.response),
        median(cli_ms)
    );
    let _ = writeln!(
        md,
        "| {what} | {:.1} | {:.1} | {:.1} | {:.0} KB | `{baseline}` | {:.1} |",
        median(&p.fcp),
        quantile_of(&p.fcp, 1.0),
        median(&p.response),
        p.bytes / 1024.0,
        median(cli_ms),
    );
}

fn main() {
    let quick = env_flag("COMPARE_QUICK");
    let runs = env_or("UI_RUNS", 7) as usize;
    let bench = machine::target_dir().join("bench");
    let scratch = bench.join("ui-scratch");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).unwrap();
    let started = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    let mut md = format!(
        "Taken {started} ({runs} page loads each, after one untimed; medians). {}\n\n",
        Machine::summary()
    );
    md.push_str(
        "| page | first paint ms | max ms | HTML received ms | HTML size | the CLI's \
         equivalent | its ms |\n|---|---:|---:|---:|---:|---|---:|\n",
    );
    let browser = Browser::start();
    let mut memory = Vec::new();

    // 10,000 sessions.
    let home = scratch.join("sessions-home");
    corpus::claude_sessions(&home, 10_000);
    let db = scratch.join("sessions.db");
    let secs = archive(&home, &db);
    println!("10,000 sessions archived in {secs:.1} s");
    let ui = serve(&home, &db);
    browser.goto(&ui.url);
    // The floor: a page of a few lines (not found), and the command that does least.
    let p = paint(&browser, &format!("{}/nothing-here", ui.base), runs);
    let c = cli(&home, &db, &["sessions", "--limit", "1"], runs);
    row(
        &mut md,
        "floor: a page of a few lines",
        &p,
        "sessions --limit 1",
        &c,
    );
    let p = paint(&browser, &format!("{}/sessions", ui.base), runs);
    let c = cli(&home, &db, &["sessions", "--limit", "0"], runs);
    row(
        &mut md,
        "sessions, 10,000 (first 200 shown)",
        &p,
        "sessions --limit 0",
        &c,
    );
    // The home over the same archive, in the same run: its default window, and all time
    // (every session counted, each one's files looked for).
    for (window, what) in [("30d", "30 days"), ("all", "all time")] {
        let p = paint(&browser, &format!("{}/?window={window}", ui.base), runs);
        let c = cli(&home, &db, &["usage", "--since", "36500d"], runs);
        let label = format!("home, 10,000 sessions, {what}");
        row(&mut md, &label, &p, "usage --since 36500d", &c);
    }
    memory.push(("10,000 sessions", memory_of(&ui)));
    drop(ui);

    // One 50 MB session.
    let home = scratch.join("long-home");
    let id = corpus::claude_long_session(&home, 50 << 20);
    let db = scratch.join("long.db");
    let secs = archive(&home, &db);
    println!("a 50 MB session archived in {secs:.1} s");
    let ui = serve(&home, &db);
    browser.goto(&ui.url);
    let p = paint(&browser, &format!("{}/s/{id}", ui.base), runs);
    let c = cli(&home, &db, &["show", &id, "--format", "markdown"], runs);
    row(
        &mut md,
        "a 50 MB session (first 50 messages)",
        &p,
        "show ID --format markdown",
        &c,
    );
    memory.push(("a 50 MB session", memory_of(&ui)));
    drop(ui);

    // Search over the compare corpus.
    let spec = corpus::Spec::transcripts_for(quick);
    let c = corpus::ensure(&bench.join("corpus"), &spec);
    let home = scratch.join("corpus-home");
    corpus::link_home(&c.dir, &home);
    let db: PathBuf = scratch.join("corpus.db");
    let secs = archive(&home, &db);
    let size = if quick { "64 MB" } else { "1 GiB" };
    println!("the {size} corpus archived in {secs:.1} s");
    let ui = serve(&home, &db);
    browser.goto(&ui.url);
    for (word, what) in [
        ("exit_code", "word of Codex tool outputs"),
        ("cursor", "common word"),
    ] {
        let p = paint(&browser, &format!("{}/search?q={word}", ui.base), runs);
        let c = cli(&home, &db, &["search", word], runs);
        let label = format!("search over {size}, {what} ({word})");
        row(&mut md, &label, &p, &format!("search {word}"), &c);
    }
    memory.push(("search over the corpus", memory_of(&ui)));
    drop(ui);

    md.push_str(
        "\nThe server's memory after the loads: peak resident; resident now, anonymous (heap, \
         stacks) and file pages (the SQLite files it maps):\n\n",
    );
    for (what, (peak, anon, file)) in &memory {
        let _ = writeln!(
            md,
            "- {what}: peak {peak:.1} MiB; now {anon:.1} MiB anonymous, {file:.1} MiB of files"
        );
    }
    fs::write(bench.join("ui.md"), &md).unwrap();
    println!("\n{md}");
}
