//! The report: tables in Markdown, on stdout and in `target/bench/database.md`.

use crate::backfill::Backfill;
use crate::generate::Made;
use crate::live::{Appended, Following, Idle};
use crate::read::{BareRead, DocumentsRead, Finding};
use crate::{EVERY, LONE, STEP_GAP, Shape};
use std::fmt::Write as _;
use std::time::Duration;
use testkit::stats::quantile_of;

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn size(bytes: f64) -> String {
    if bytes.abs() >= 1e9 {
        format!("{:.2} GB", bytes / 1e9)
    } else if bytes.abs() >= 1e6 {
        format!("{:.1} MB", bytes / 1e6)
    } else if bytes.abs() >= 1e3 {
        format!("{:.1} KB", bytes / 1e3)
    } else {
        format!("{bytes:.0} B")
    }
}

/// `n` with a comma between thousands.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(crate) fn report_database(md: &mut String, made: &Made) {
    let share = |b: u64| format!("{} ({:.0} %)", size(b as f64), pct(b, made.bytes));
    let _ = writeln!(
        md,
        "The database: {} in one file, {} sessions, {} messages, {} parts, {} events \
         (generated in {:.0} s, cached). `data` columns: messages {}, parts {}, events {} of \
         the file.\n",
        size(made.bytes as f64),
        count(made.sessions),
        count(made.messages),
        count(made.parts),
        count(made.events),
        made.generate_secs,
        share(made.message_data),
        share(made.part_data),
        share(made.event_data),
    );
}

fn pct(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

pub(crate) fn report_backfill(
    md: &mut String,
    made: &Made,
    bare: &BareRead,
    docs: &DocumentsRead,
    b: &Backfill,
) {
    let _ = writeln!(
        md,
        "### Backfill\n\n`run --once` into an empty archive, beside reading the same rows \
         here (warm page cache, the database just copied):\n"
    );
    let _ = writeln!(md, "| reading | wall | CPU | MB/s of the file | notes |");
    let _ = writeln!(md, "|---|---:|---:|---:|---|");
    let rate = |secs: f64| made.bytes as f64 / 1e6 / secs;
    let _ = writeln!(
        md,
        "| plain `SELECT` of every message and part | {:.1} s | – | {:.0} | {} rows, {} |",
        bare.secs,
        rate(bare.secs),
        count(bare.rows),
        size(bare.bytes as f64)
    );
    let _ = writeln!(
        md,
        "| each session's document, the reader's queries and JSON redone here | {:.1} s | – | \
         {:.0} | {} documents, {}; read {} (`rchar`) |",
        docs.secs,
        rate(docs.secs),
        count(docs.sessions),
        size(docs.bytes as f64),
        size(docs.read as f64)
    );
    let committed = b.committed.map_or("–".into(), |s| format!("{s:.1} s"));
    let _ = writeln!(
        md,
        "| `run --once`, until every record committed | {committed} | – | {} | |",
        b.committed
            .map_or("–".into(), |s| format!("{:.0}", rate(s)))
    );
    let _ = writeln!(
        md,
        "| `run --once`, to exit (session index built) | {:.1} s | {:.1} s | {:.0} | peak RSS \
         {:.0} MiB, read {} (`rchar`), {} database read(s) |",
        b.wall,
        b.cpu,
        rate(b.wall),
        b.peak_mib,
        size(b.read as f64),
        b.reads
    );
    let _ = writeln!(
        md,
        "\n| archived | value |\n|---|---:|\n\
         | sessions captured; records | {}; {} |\n\
         | records as read; as stored | {}; {} ({:.1} %) |\n\
         | latest states in `snapshots` ({}): whole; as stored | {}; {} ({:.1} %) |\n\
         | archive file with its WAL | {} ({:.1} % of the database) |\n\
         | session index (`archive.db-index`) | {} ({:.1} %) |\n",
        count(b.sessions),
        count(b.records),
        size(b.record_bytes as f64),
        size(b.record_stored as f64),
        pct(b.record_stored, b.record_bytes),
        count(b.states),
        size(b.state_bytes as f64),
        size(b.state_stored as f64),
        pct(b.state_stored, b.state_bytes),
        size(b.archive as f64),
        pct(b.archive, made.bytes),
        size(b.index as f64),
        pct(b.index, made.bytes),
    );
}

pub(crate) fn report_finding(md: &mut String, made: &Made, finding: &[Finding]) {
    let _ = writeln!(
        md,
        "### Finding what changed\n\nEach read of the database starts by asking `event` for \
         the sessions changed since the mark; here for the last 20 of its {} events, on a new \
         connection (best of 3):\n",
        count(made.events)
    );
    let _ = writeln!(md, "| query | plan | time | `rchar` |\n|---|---|---:|---:|");
    for f in finding {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} ms | {} |",
            f.label,
            f.plan,
            f.ms,
            size(f.read as f64)
        );
    }
    md.push('\n');
}

pub(crate) fn report_following(
    md: &mut String,
    shape: &Shape,
    caught_up: Duration,
    short: &Following,
    long: &Following,
) {
    let _ = writeln!(
        md,
        "### Following\n\n`run` on the backfilled archive, caught up; the agent adds a message \
         every {} ms to one session for {} s (a prompt, a reply calling one or two tools, a \
         reply ending the turn, in turn; each write one transaction, {} ms apart), then {LONE} \
         lone messages, each left to settle. \"Commit → tap\": from the commit that completes \
         a message to its complete record out of the daemon's tap. The daemon, started on \
         the backfilled archive, said it had caught up after {:.2} s.\n",
        EVERY.as_millis(),
        shape.follow.as_secs(),
        STEP_GAP.as_millis(),
        caught_up.as_secs_f64(),
    );
    let _ = writeln!(md, "| measure | short session | long session |");
    let _ = writeln!(md, "|---|---:|---:|");
    let mut row = |what: &str, f: &dyn Fn(&Following) -> String| {
        let _ = writeln!(md, "| {what} | {} | {} |", f(short), f(long));
    };
    row("session when following began", &|f| {
        format!(
            "{} messages, a {} document",
            count(f.messages_before as u64),
            size(f.document as f64)
        )
    });
    row("messages added", &|f| {
        format!("{} in {:.1} s", f.appended.len(), f.secs)
    });
    row("database reads; that captured the session", &|f| {
        format!("{}; {}", f.reads, f.captures)
    });
    row("reads that captured, logged at", &|f| {
        let at: Vec<String> = f.captured_at.iter().map(|s| format!("{s:.1} s")).collect();
        at.join(", ")
    });
    row("records on the tap", &|f| f.records.to_string());
    row("commit → tap p50 / p90 / max", &|f| {
        let l: Vec<f64> = f.appended.iter().map(Appended::latency_ms).collect();
        format!(
            "{:.0} / {:.0} / {:.0} ms",
            quantile_of(&l, 0.5),
            quantile_of(&l, 0.9),
            quantile_of(&l, 1.0)
        )
    });
    row("daemon CPU, first write to idle again", &|f| {
        format!(
            "{:.2} s ({:.1} % of a core)",
            f.cpu.as_secs_f64(),
            100.0 * f.cpu.as_secs_f64() / f.secs
        )
    });
    row("daemon CPU per capture; per message added", &|f| {
        format!(
            "{:.0} ms; {:.1} ms",
            ms(f.cpu) / f.captures.max(1) as f64,
            ms(f.cpu) / f.appended.len().max(1) as f64
        )
    });
    row("daemon read (`rchar`); per capture", &|f| {
        format!(
            "{}; {}",
            size(f.read as f64),
            size(f.read as f64 / f.captures.max(1) as f64)
        )
    });
    row("that document built here: time, `rchar`", &|f| {
        format!(
            "{:.0} ms, {}",
            f.document_secs * 1e3,
            size(f.document_read as f64)
        )
    });
    row("daemon peak RSS while following", &|f| {
        format!("{:.0} MiB", f.peak_kib as f64 / 1024.0)
    });
    row("one lone message: daemon CPU, `rchar` (mean)", &|f| {
        format!("{:.0} ms, {}", ms(f.lone_cpu), size(f.lone_read as f64))
    });
    row("one lone message: commit → tap", &|f| {
        let l: Vec<String> = f
            .lone_latency_ms
            .iter()
            .map(|l| format!("{l:.0}"))
            .collect();
        format!("{} ms", l.join(", "))
    });
    md.push('\n');
}

pub(crate) fn report_idle(md: &mut String, idle: &Idle) {
    let _ = writeln!(
        md,
        "### Idle\n\nNothing written for {:.0} s: daemon CPU {:.0} ms ({:.3} % of a core), \
         read {} (`rchar`), {} database read(s) ({} log lines).\n",
        idle.secs,
        ms(idle.cpu),
        100.0 * idle.cpu.as_secs_f64() / idle.secs,
        size(idle.read as f64),
        idle.reads.len(),
        idle.log.lines().count()
    );
    if !idle.readers.is_empty() {
        let by: Vec<String> = (idle.readers.iter())
            .map(|(name, n)| format!("{name} {}", size(*n as f64)))
            .collect();
        let at: Vec<String> = (idle.read_at.iter())
            .map(|(s, n)| format!("{} in second {s}", size(*n as f64)))
            .collect();
        let _ = writeln!(
            md,
            "Read by thread: {}; {}.\n",
            by.join(", "),
            at.join(", ")
        );
    }
}
