//! Shipping to an HTTP collector that drops what it gets: `run --once --ship http://…` over
//! the archived corpus with the default batches (redacting, as every HTTP sink does unless
//! told not to), and from `[[sink]]` tables with `redact = false`, with larger batches and
//! without gzip, in turns.

use crate::{Archived, Ctx, forget_sinks, list};
use std::fmt::Write as _;
use std::fs;
use std::path::PathBuf;
use testkit::collector::{Body, Collector};
use testkit::ports::free_port;
use testkit::stats::median;

/// One way of shipping: the sink's name and the arguments that configure it.
struct Subject {
    label: String,
    name: &'static str,
    /// A `[[sink]]` table, or none for `--ship URL`.
    table: Option<String>,
}

/// One timed run.
struct Sample {
    secs: f64,
    cpu_secs: f64,
    requests: u64,
    body_bytes: u64,
}

pub fn run(ctx: &Ctx, a: &Archived, md: &mut String) {
    let collector = Collector::listen(free_port(), Body::Discard);
    let url = format!("http://127.0.0.1:{}/in", collector.port);
    let subjects = subjects(&url);
    let mut samples: Vec<Vec<Sample>> = subjects.iter().map(|_| Vec::new()).collect();
    for round in 0..ctx.runs {
        for (i, subject) in subjects.iter().enumerate() {
            let sample = ship(ctx, a, &collector, &url, subject);
            println!(
                "  round {}: {:<60} {:>7.2} s, {} requests",
                round + 1,
                subject.label,
                sample.secs,
                sample.requests
            );
            samples[i].push(sample);
        }
    }
    report(md, a, &subjects, &samples);
}

fn subjects(url: &str) -> Vec<Subject> {
    let table = |name: &str, extra: &str| {
        format!("[[sink]]\nname = \"{name}\"\ntype = \"http\"\nurl = \"{url}\"\n{extra}")
    };
    vec![
        Subject {
            label: "`--ship http://…`: 5,000 records / 8 MiB, redacting (default)".into(),
            name: "http",
            table: None,
        },
        Subject {
            label: "default batches, `redact = false`".into(),
            name: "unredacted",
            table: Some(table("unredacted", "redact = false\n")),
        },
        Subject {
            label: "`batch_bytes = 33554432` (32 MiB)".into(),
            name: "big",
            table: Some(table("big", "batch_bytes = 33554432\n")),
        },
        Subject {
            label: "`batch_bytes` 32 MiB, `batch_records = 100000`".into(),
            name: "bigger",
            table: Some(table(
                "bigger",
                "batch_bytes = 33554432\nbatch_records = 100000\n",
            )),
        },
        Subject {
            label: "default batches, `gzip = false`".into(),
            name: "plain",
            table: Some(table("plain", "gzip = false\n")),
        },
    ]
}

fn ship(ctx: &Ctx, a: &Archived, collector: &Collector, url: &str, subject: &Subject) -> Sample {
    forget_sinks(&a.db);
    let _ = collector.take();
    let mut cmd = ctx.run_once(&a.db, &a.corpus);
    match &subject.table {
        None => cmd.args(["--ship", url]),
        Some(table) => cmd.arg("--config").arg(config(ctx, subject.name, table)),
    };
    let t = crate::time_run(&mut cmd, &format!("run --once, sink {}", subject.name));
    let tally = collector.take();
    assert!(tally.requests > 0, "sink {} shipped nothing", subject.name);
    Sample {
        secs: t.secs,
        cpu_secs: t.cpu_secs,
        requests: tally.requests,
        body_bytes: tally.body_bytes,
    }
}

fn config(ctx: &Ctx, name: &str, table: &str) -> PathBuf {
    let path = ctx.scratch.join(format!("{name}.toml"));
    fs::write(&path, table).expect("writing a config.toml");
    path
}

fn report(md: &mut String, a: &Archived, subjects: &[Subject], samples: &[Vec<Sample>]) {
    md.push_str(
        "### HTTP\n\n\
         | batches | runs, s | median s | MB/s of records | records/s | CPU s | requests | \
         MB sent |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for (subject, runs) in subjects.iter().zip(samples) {
        let secs: Vec<f64> = runs.iter().map(|s| s.secs).collect();
        let m = median(&secs);
        let (mbs, rps) = a.rates(m);
        let cpu = median(&runs.iter().map(|s| s.cpu_secs).collect::<Vec<_>>());
        let last = runs.last().expect("at least one run");
        let _ = writeln!(
            md,
            "| {} | {} | {m:.2} | {mbs:.1} | {rps:.0} | {cpu:.2} | {} | {:.1} |",
            subject.label,
            list(&secs),
            last.requests,
            last.body_bytes as f64 / 1e6
        );
    }
    md.push_str("\nTarget: ≥ 200 MB/s of records.\n\n");
}
