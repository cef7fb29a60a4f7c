//! What was measured, where, and the Markdown that reports it.

use std::fmt::Write as _;
use std::path::Path;

/// One build of one engine.
pub struct Measured {
    pub secs: f64,
    /// Bytes of the index's files.
    pub bytes: u64,
    /// Segments left after the build, where the engine says.
    pub segments: Option<usize>,
}

/// One engine's builds over the rounds.
pub struct Build {
    pub label: String,
    secs: Vec<f64>,
    /// CPU seconds of the whole process (every thread) during each build.
    cpu_secs: Vec<f64>,
    last: Option<Measured>,
    /// The process's peak resident MB after this engine's first build.
    peak_mb: Option<f64>,
}

impl Build {
    pub fn new(label: &str) -> Build {
        Build {
            label: label.into(),
            secs: Vec::new(),
            cpu_secs: Vec::new(),
            last: None,
            peak_mb: None,
        }
    }

    pub fn add(&mut self, measured: Measured, cpu_secs: f64, peak_mb: Option<f64>) {
        self.secs.push(measured.secs);
        self.cpu_secs.push(cpu_secs);
        self.peak_mb = self.peak_mb.or(peak_mb);
        self.last = Some(measured);
    }
}

/// One query: match counts and median milliseconds to the top 20, one per engine.
pub struct QueryRow {
    pub label: String,
    pub counts: Vec<u64>,
    pub ms: Vec<f64>,
    /// How many of FTS5's top 20 are in tantivy's (default index).
    pub shared: usize,
}

pub struct Report<'a> {
    pub corpus: &'a Path,
    pub corpus_bytes: u64,
    pub texts: &'a [String],
    pub runs: usize,
    pub rss_texts: Option<f64>,
    pub builds: &'a [Build],
    pub rows: &'a [QueryRow],
    pub load_at_start: String,
}

impl Report<'_> {
    pub fn render(&self) -> String {
        let text_mb = self.texts.iter().map(String::len).sum::<usize>() as f64 / 1e6;
        let mut md = format!(
            "{}; load average at start {}, at end {}. {}, SQLite {} (bundled).\n\n\
             Corpus `{}`: {:.1} MB of transcripts, {} messages, {text_mb:.1} MB of text. \
             Rounds: {}, engines in turn.\n\n",
            machine(),
            self.load_at_start,
            load(),
            tantivy::version(),
            rusqlite::version(),
            self.corpus.display(),
            self.corpus_bytes as f64 / 1e6,
            self.texts.len(),
            self.runs,
        );
        self.builds_table(&mut md, text_mb);
        self.queries_table(&mut md);
        md
    }

    fn builds_table(&self, md: &mut String, text_mb: f64) {
        md.push_str(
            "| engine | median s | MB of text/s | × FTS5 | CPU s | index MB | segments \
             | peak RSS MB |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        let fts5_secs = median(&mut self.builds[0].secs.clone());
        for b in self.builds {
            let secs = median(&mut b.secs.clone());
            let last = b.last.as_ref();
            let segments = last.and_then(|m| m.segments);
            let _ = writeln!(
                md,
                "| {} | {secs:.2} | {:.1} | {:.2} | {:.2} | {:.1} | {} | {} |",
                b.label,
                text_mb / secs,
                fts5_secs / secs,
                median(&mut b.cpu_secs.clone()),
                last.map_or(0.0, |m| m.bytes as f64 / 1e6),
                segments.map_or("–".into(), |n| n.to_string()),
                b.peak_mb.map_or("–".into(), |mb| format!("{mb:.0}")),
            );
        }
        let _ = writeln!(
            md,
            "\nSeconds and CPU seconds are medians of the rounds; × FTS5 is FTS5's seconds over \
             the engine's. Peak RSS is the process's VmHWM after each engine's first build, in \
             that order, so it only grows; {} MB were resident with the texts loaded.\n",
            self.rss_texts.map_or("?".into(), |mb| format!("{mb:.0}"))
        );
    }

    fn queries_table(&self, md: &mut String) {
        let _ = write!(
            md,
            "Queries on the last round's indexes: matches, and the median ms of {} runs (after \
             one untimed) of the top 20 ids by BM25 (FTS5 `ORDER BY rank LIMIT 20`, tantivy \
             `TopDocs` by score, ids from the fast field). tantivy's one-term prefix is \
             unscored. Top 20 shared: how many of FTS5's are in tantivy's (default index).\n\n\
             | query | FTS5 matches | tantivy matches | FTS5 ms | tantivy ms (1-thread index) \
             | tantivy ms (default index) | top 20 shared |\n|---|---:|---:|---:|---:|---:|---:|\n",
            crate::QUERY_RUNS
        );
        for r in self.rows {
            let tantivy = if r.counts[1] == r.counts[2] {
                r.counts[1].to_string()
            } else {
                format!("{} / {}", r.counts[1], r.counts[2])
            };
            let _ = writeln!(
                md,
                "| {} | {} | {tantivy} | {:.3} | {:.3} | {:.3} | {} |",
                r.label, r.counts[0], r.ms[0], r.ms[1], r.ms[2], r.shared
            );
        }
    }
}

/// The middle value of `values` (the mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// `Machine: CPU model, N cores, M GiB`, from `/proc`.
fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo.lines().find_map(|l| l.strip_prefix("model name"));
    let model = model.map_or("unknown CPU", |m| m.trim_start_matches([' ', '\t', ':']));
    let cores = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let gib = proc_kib("/proc/meminfo", "MemTotal:").map_or(0.0, |k| k / 1024.0 / 1024.0);
    format!("Machine: {model}, {cores} cores, {gib:.1} GiB")
}

/// CPU seconds, user and system, of every thread of this process so far (`/proc/self/stat`,
/// in ticks of 1/100 s: Linux's `USER_HZ`).
pub fn cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which may hold spaces: utime and stime are the 12th and
    // 13th.
    let after_comm = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks = after_comm.split_whitespace().skip(11).take(2);
    ticks.filter_map(|t| t.parse::<f64>().ok()).sum::<f64>() / 100.0
}

/// The 1-, 5- and 15-minute load averages.
pub fn load() -> String {
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    loadavg
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// This process's `VmRSS` or `VmHWM` in MB.
pub fn memory_mb(key: &str) -> Option<f64> {
    proc_kib("/proc/self/status", &format!("{key}:")).map(|k| k * 1024.0 / 1e6)
}

/// The value in kB of the line starting with `key` in a `/proc` file.
fn proc_kib(path: &str, key: &str) -> Option<f64> {
    let text = std::fs::read_to_string(path).ok()?;
    let value = text.lines().find_map(|l| l.strip_prefix(key))?;
    value.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Bytes of every transcript in the tree.
pub fn tree_bytes(corpus: &Path) -> u64 {
    let paths = crate::text::transcripts(corpus);
    paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}
