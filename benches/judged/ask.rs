//! Every query asked of every build, the builds taking turns at each run so that a busier
//! moment of the machine weighs on each alike, and how long they took.

use crate::build::Build;
use crate::measure::DEPTH;
use std::fmt::Write as _;
use std::path::Path;
use testkit::stats::{median, quantile_of};

/// Queries timed but not judged: each matches thousands of the home's messages, so that the
/// search orders the most it ever does (the newest 2,000 matches).
pub const BROAD: &[&str] = &["the", "error", "src OR test", "build*"];

/// What the builds answered, and how long they took.
pub struct Asked {
    /// Per build, per query: the sessions of its first [`DEPTH`] hits.
    pub sessions: Vec<Vec<Vec<String>>>,
    /// Per build, per query: the median of the timed runs, in ms.
    pub medians: Vec<Vec<f64>>,
    /// Per build, per query: the fastest of the timed runs, in ms (the least disturbed by
    /// the machine's other work).
    pub fastest: Vec<Vec<f64>>,
}

/// `queries` asked of every build once untimed (the answer kept), then `runs` times timed.
pub fn ask(builds: &[Build], home: &Path, queries: &[&str], runs: usize) -> Asked {
    let mut asked = Asked {
        sessions: vec![Vec::new(); builds.len()],
        medians: vec![Vec::new(); builds.len()],
        fastest: vec![Vec::new(); builds.len()],
    };
    for query in queries {
        let mut times = vec![Vec::new(); builds.len()];
        for run in 0..=runs {
            for (b, build) in builds.iter().enumerate() {
                let (sessions, ms) = build.search(home, query, DEPTH);
                match run {
                    0 => asked.sessions[b].push(sessions),
                    _ => times[b].push(ms),
                }
            }
        }
        for (b, t) in times.iter().enumerate() {
            asked.medians[b].push(median(t));
            asked.fastest[b].push(quantile_of(t, 0.0));
        }
    }
    asked
}

/// What each build's work cost.
pub struct Costs {
    pub judged: Asked,
    pub broad: Asked,
    /// Per build, the instructions of each judged query then of each [`BROAD`] one (empty
    /// without valgrind).
    pub instructions: Vec<Vec<u64>>,
    /// Per build, the median time of `sessions --limit 1`.
    pub floors: Vec<f64>,
}

impl Costs {
    /// Build `b`'s instructions over queries `range` of [`Costs::instructions`], in millions
    /// (0 without valgrind).
    fn millions(&self, b: usize, range: std::ops::Range<usize>) -> f64 {
        let counts = self.instructions[b].get(range).unwrap_or_default();
        counts.iter().sum::<u64>() as f64 / 1e6
    }
}

/// The instructions each build runs to answer each of `queries` (`Build::instructions`):
/// per build, per query; empty where valgrind is not installed.
pub fn instructions(builds: &[Build], home: &Path, queries: &[&str]) -> Vec<Vec<u64>> {
    let count = |b: &Build| -> Option<Vec<u64>> {
        (queries.iter())
            .map(|q| b.instructions(home, q, DEPTH))
            .collect()
    };
    builds
        .iter()
        .map(|b| count(b).unwrap_or_default())
        .collect()
}

/// The costs, a row per measure and a column per build: `run --once`; the judged queries'
/// medians (p50, p95, max), fastest runs (p50) and instructions (summed); each [`BROAD`]
/// query's median, fastest run and instructions; the floor (`sessions --limit 1`).
pub fn cost_table(builds: &[Build], costs: &Costs) -> String {
    let mut md = String::from("| ms, or as the row says |");
    for build in builds {
        let _ = write!(md, " {} |", build.name);
    }
    md.push_str("\n|---|");
    md.push_str(&"---:|".repeat(builds.len()));
    md.push('\n');
    let mut row = |label: &str, value: &dyn Fn(usize) -> f64| {
        let _ = write!(md, "| {label} |");
        for b in 0..builds.len() {
            let _ = write!(md, " {:.1} |", value(b));
        }
        md.push('\n');
    };
    let (judged, broad) = (&costs.judged, &costs.broad);
    let n = judged.medians.first().map_or(0, Vec::len);
    row("`run --once`, s", &|b| builds[b].archived_secs);
    row("judged, p50 of medians", &|b| median(&judged.medians[b]));
    row("judged, p95 of medians", &|b| {
        quantile_of(&judged.medians[b], 0.95)
    });
    row("judged, max of medians", &|b| {
        quantile_of(&judged.medians[b], 1.0)
    });
    row("judged, p50 of fastest runs", &|b| {
        median(&judged.fastest[b])
    });
    row("judged, instructions, millions summed", &|b| {
        costs.millions(b, 0..n)
    });
    for (q, query) in BROAD.iter().enumerate() {
        row(&format!("`{query}`, median"), &|b| broad.medians[b][q]);
        row(&format!("`{query}`, fastest"), &|b| broad.fastest[b][q]);
        let at = n + q;
        let instructions = format!("`{query}`, instructions, millions");
        row(&instructions, &|b| costs.millions(b, at..at + 1));
    }
    row("floor, `sessions --limit 1`, median", &|b| costs.floors[b]);
    md
}
