//! The results: targets with ratios against the baselines, then one table per measurement,
//! as Markdown (to paste into BENCHMARKS.md) and JSON.

use crate::Results;
use serde::Serialize;
use std::fmt::Write;

/// One figure beside its baseline and target.
#[derive(Clone, Debug, Serialize)]
pub struct Verdict {
    pub measure: String,
    pub value: String,
    pub baseline: String,
    pub ratio: String,
    pub target: String,
    pub met: Option<bool>,
}

fn verdict(
    measure: &str,
    value: String,
    baseline: String,
    ratio: String,
    target: &str,
    met: Option<bool>,
) -> Verdict {
    Verdict {
        measure: measure.to_owned(),
        value,
        baseline,
        ratio,
        target: target.to_owned(),
        met,
    }
}

pub fn verdicts(r: &Results) -> Vec<Verdict> {
    let mut out = Vec::new();
    let row = |name: &str| r.backfill.iter().find(|b| b.subject == name);
    if let Some(ts) = row("transcript-sync run --once") {
        let peer = r
            .backfill
            .iter()
            .filter(|b| b.subject.starts_with("rsyslog") || b.subject.starts_with("syslog-ng"))
            .filter(|b| b.complete)
            .max_by(|a, b| a.mb_per_s.total_cmp(&b.mb_per_s));
        let (baseline, ratio, met) = match peer {
            Some(p) => {
                let ratio = ts.mb_per_s / p.mb_per_s;
                (
                    format!("{} {:.1} MB/s", p.subject, p.mb_per_s),
                    format!("{ratio:.2}×"),
                    Some(ratio >= 2.0),
                )
            }
            None => ("no durable peer completed".into(), "–".into(), None),
        };
        out.push(verdict(
            "backfill into the archive",
            format!("{:.1} MB/s, {:.0} records/s", ts.mb_per_s, ts.records_per_s),
            baseline,
            ratio,
            "≥ 2× the faster durable peer",
            met,
        ));
    }
    let indexed = row("transcript-sync run --once, indexed");
    if let Some(share) = indexed.and_then(|b| b.stored_share) {
        out.push(verdict(
            "archive size (records, the index apart)",
            format!("{:.1} % of the corpus", 100.0 * share),
            "–".into(),
            "–".into(),
            "≤ 25 % of the transcripts' bytes",
            Some(share <= 0.25),
        ));
    }
    if let Some(reader) = row("transcript-sync reader only") {
        let cat = row("cat > /dev/null").map_or(f64::NAN, |c| c.mb_per_s);
        out.push(verdict(
            &format!(
                "reader only (read + validate), fastest of {} passes",
                crate::backfill::READER_PASSES
            ),
            format!("{:.2} GB/s", reader.mb_per_s / 1e3),
            format!("cat {:.2} GB/s", cat / 1e3),
            format!("{:.2}× cat", reader.mb_per_s / cat),
            "≥ 1.5 GB/s",
            Some(reader.mb_per_s >= 1500.0),
        ));
    }
    for ts in r.latency.iter().filter(|l| l.subject == "transcript-sync") {
        let rsyslog = r
            .latency
            .iter()
            .find(|l| l.subject.starts_with("rsyslog") && l.rate == ts.rate);
        let (baseline, ratio, met) = match rsyslog {
            Some(p) => (
                format!("rsyslog p99 {:.3} ms", p.p99_ms),
                format!("{:.2}×", ts.p99_ms / p.p99_ms),
                Some(ts.p99_ms <= p.p99_ms && ts.lost == 0),
            ),
            None => ("rsyslog not run".into(), "–".into(), None),
        };
        out.push(verdict(
            &format!("live latency p99 at {}/s", ts.rate),
            format!("{:.3} ms", ts.p99_ms),
            baseline,
            ratio,
            "≤ rsyslog imfile's p99",
            met,
        ));
    }
    if let Some(restart) = &r.restart {
        let bytes = restart
            .runs
            .iter()
            .map(|x| x.content_bytes_read)
            .max()
            .unwrap_or(0);
        out.push(verdict(
            &format!("restart, {} archived files", restart.files),
            format!("{:.3} s, {bytes} content bytes read", restart.median_secs),
            "–".into(),
            "–".into(),
            "≤ 0.3 s, 0 bytes",
            Some(restart.median_secs <= 0.3 && bytes == 0),
        ));
    }
    if let Some(ts) = r.idle.iter().find(|i| i.subject == "transcript-sync") {
        let peer = r.idle.iter().find(|i| i.subject.starts_with("rsyslog"));
        out.push(verdict(
            &format!("idle, {} files, {:.0} s", ts.files, ts.secs),
            format!("{:.4} % of a core", ts.core_percent),
            peer.map_or("–".into(), |p| format!("rsyslog {:.4} %", p.core_percent)),
            peer.filter(|p| p.core_percent > 0.0)
                .map_or("–".into(), |p| {
                    format!("{:.2}×", ts.core_percent / p.core_percent)
                }),
            "< 0.1 % of a core",
            Some(ts.core_percent < 0.1),
        ));
    }
    let backfill_peak = row("transcript-sync run --once, indexed").and_then(|b| b.peak_rss_mib);
    let record_peak = r
        .memory
        .iter()
        .find(|m| m.subject == "transcript-sync")
        .and_then(|m| m.peak_rss_mib);
    if backfill_peak.is_some() || record_peak.is_some() {
        let worst = backfill_peak.unwrap_or(0.0).max(record_peak.unwrap_or(0.0));
        out.push(verdict(
            "peak RSS (backfill; one big record)",
            format!("{}; {}", mib(backfill_peak), mib(record_peak)),
            "–".into(),
            "–".into(),
            "≤ 64 MiB + record limit (128 MiB)",
            Some(worst <= 128.0),
        ));
    }
    out
}

fn mib(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.1} MiB"))
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

pub fn markdown(r: &Results) -> String {
    let mut md = String::new();
    let m = &r.machine;
    let _ = writeln!(
        md,
        "Taken {} ({} mode). Machine: {}, {} cores, {} GiB, {}, Linux {}; {}. Load average at start {}, at end {}.",
        r.started_at,
        r.mode,
        m.cpu,
        m.cores,
        m.memory_gib,
        m.disk,
        m.kernel,
        m.rustc,
        m.load_at_start,
        m.load_at_end
    );
    let _ = writeln!(
        md,
        "Peers: {}; {}; {}. Page cache: {}.\n",
        m.rsyslog, m.syslog_ng, m.tail, r.page_cache
    );
    if let Some(c) = &r.corpus {
        let _ = writeln!(
            md,
            "Corpus: {} files, {} records ({} of 0.5–5 KB, {} of 5–50 KB, {} of 50–500 KB, {} \
             images of 1–4 MB), {:.1} MB ({:.2} GiB), largest record {:.1} MB; seed fixed.\n",
            c.files,
            c.records,
            c.by_class[0],
            c.by_class[1],
            c.by_class[2],
            c.by_class[3],
            c.bytes as f64 / 1e6,
            c.bytes as f64 / (1u64 << 30) as f64,
            c.largest_record as f64 / 1e6
        );
    }
    let _ = writeln!(
        md,
        "| measure | transcript-sync | baseline | ratio | target | met |\n|---|---|---|---|---|---|"
    );
    for v in &r.verdicts {
        let met = match v.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {met} |",
            v.measure, v.value, v.baseline, v.ratio, v.target
        );
    }
    if !r.backfill.is_empty() {
        let _ = writeln!(
            md,
            "\nBackfill of the corpus (fresh state for each):\n\n| subject | wall s | MB/s | records/s | CPU s | peak RSS | complete | notes |\n|---|---:|---:|---:|---:|---:|---|---|"
        );
        for b in &r.backfill {
            let _ = writeln!(
                md,
                "| {} | {:.2} | {:.1} | {:.0} | {} | {} | {} | {} |",
                b.subject,
                b.secs,
                b.mb_per_s,
                b.records_per_s,
                opt(b.cpu_secs, 2),
                mib(b.peak_rss_mib),
                if b.complete { "yes" } else { "**no**" },
                b.note
            );
        }
    }
    if !r.latency.is_empty() {
        let _ = writeln!(
            md,
            "\nLive latency, milliseconds from `write()` to the line on the subject's output:\n\n| subject | rate | appends | files | p50 | p99 | max | lost |\n|---|---:|---:|---:|---:|---:|---:|---:|"
        );
        for l in &r.latency {
            let _ = writeln!(
                md,
                "| {} | {}/s | {} | {} | {:.3} | {:.3} | {:.3} | {} |",
                l.subject, l.rate, l.appends, l.files, l.p50_ms, l.p99_ms, l.max_ms, l.lost
            );
        }
    }
    if let Some(s) = &r.restart {
        let _ = writeln!(
            md,
            "\nRestart over {} archived, unchanged transcripts (first archived by `run --once` in {:.2} s):\n\n| run | to `caught up` | content bytes read | files opened | unchanged | rchar | read_bytes |\n|---:|---:|---:|---:|---:|---:|---:|",
            s.files, s.first_archive_secs
        );
        for (i, x) in s.runs.iter().enumerate() {
            let _ = writeln!(
                md,
                "| {} | {:.3} s | {} | {} | {} | {} | {} |",
                i + 1,
                x.secs,
                x.content_bytes_read,
                x.opened,
                x.unchanged,
                x.rchar,
                x.read_bytes
            );
        }
    }
    if !r.idle.is_empty() {
        let _ = writeln!(
            md,
            "\nIdle, side by side, over {} unchanging files after catching up:\n\n| subject | seconds | CPU ms (schedstat) | CPU ms (utime+stime) | % of a core |\n|---|---:|---:|---:|---:|",
            r.idle[0].files
        );
        for i in &r.idle {
            let _ = writeln!(
                md,
                "| {} | {:.0} | {:.1} | {:.0} | {:.4} |",
                i.subject, i.secs, i.cpu_ms_precise, i.cpu_ms, i.core_percent
            );
        }
    }
    if !r.memory.is_empty() {
        let _ = writeln!(
            md,
            "\nOne record of {:.1} MiB appended as a single line (peak RSS of the whole run of the subject):\n\n| subject | forwarded in | line out (bytes) | peak RSS | notes |\n|---|---:|---:|---:|---|",
            r.memory[0].record_bytes as f64 / (1u64 << 20) as f64
        );
        for x in &r.memory {
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} |",
                x.subject,
                x.secs
                    .map_or("not forwarded".into(), |s| format!("{s:.3} s")),
                x.line_bytes.map_or("–".into(), |b| b.to_string()),
                mib(x.peak_rss_mib),
                x.note.replace('\n', " ")
            );
        }
    }
    md
}
