//! The measure: recall@10 (the wanted session among the sessions of the first 10 hits) and MRR
//! (1 / the rank of its first hit, 0 past 10), over all queries and per language; and what
//! came first when the wanted session did not.

use crate::plant::{Kind, planted};
use crate::set::{Case, LANGUAGES};
use std::fmt::Write as _;

/// How many hits a query's answer is judged on.
pub const DEPTH: usize = 10;

/// One build's answers to the set.
pub struct Answers {
    /// What the build is called in the tables.
    pub name: String,
    /// For each case, the sessions of its first [`DEPTH`] hits, in order.
    pub sessions: Vec<Vec<String>>,
}

impl Answers {
    /// The rank (from 1) of case `i`'s wanted session's first hit; `None` past [`DEPTH`].
    pub fn rank(&self, i: usize) -> Option<usize> {
        let wanted = crate::plant::session_id(i, Kind::Wanted);
        let mut first = self.sessions[i].iter().take(DEPTH);
        first.position(|s| *s == wanted).map(|r| r + 1)
    }

    /// Recall@10 and MRR over the cases `keep` keeps.
    fn score(&self, cases: &[Case], keep: impl Fn(&Case) -> bool) -> Score {
        let mut score = Score::default();
        for (i, _) in cases.iter().enumerate().filter(|(_, c)| keep(c)) {
            score.add(self.rank(i));
        }
        score
    }
}

/// Recall and reciprocal ranks summed over some queries.
#[derive(Default)]
struct Score {
    queries: usize,
    found: usize,
    reciprocal: f64,
}

impl Score {
    fn add(&mut self, rank: Option<usize>) {
        self.queries += 1;
        if let Some(rank) = rank {
            self.found += 1;
            self.reciprocal += 1.0 / rank as f64;
        }
    }

    fn recall(&self) -> f64 {
        self.found as f64 / self.queries.max(1) as f64
    }

    fn mrr(&self) -> f64 {
        self.reciprocal / self.queries.max(1) as f64
    }
}

/// What a hit's session is to case `case`: one of its planted sessions, another case's,
/// or one of the background's.
fn origin(case: usize, session: &str) -> &'static str {
    match planted(session) {
        Some((c, kind)) if c == case => kind.label(),
        Some(_) => "another query's session",
        None => "a background session",
    }
}

/// Recall@10 and MRR per build, over all queries and per language, as a Markdown table.
pub fn quality_table(cases: &[Case], builds: &[Answers]) -> String {
    let mut md = String::from("| queries | n |");
    for b in builds {
        let _ = write!(md, " recall@{DEPTH}, {} | MRR, {} |", b.name, b.name);
    }
    md.push_str("\n|---|---:|");
    md.push_str(&"---:|---:|".repeat(builds.len()));
    md.push('\n');
    let langs = LANGUAGES.iter().map(|l| Some(*l));
    for lang in std::iter::once(None).chain(langs) {
        let keep = |c: &Case| lang.is_none_or(|l| c.lang == l);
        let n = cases.iter().filter(|c| keep(c)).count();
        let _ = write!(md, "| {} | {n} |", lang.unwrap_or("all"));
        for b in builds {
            let s = b.score(cases, keep);
            let _ = write!(md, " {:.3} | {:.3} |", s.recall(), s.mrr());
        }
        md.push('\n');
    }
    md
}

/// Whose session the first hit was, counted over the queries, per build.
pub fn first_hits_table(builds: &[Answers]) -> String {
    let origins = Kind::ALL.map(Kind::label);
    let others = ["another query's session", "a background session", "no hit"];
    let mut md = String::from("| first hit | ");
    md.push_str(
        &builds
            .iter()
            .map(|b| b.name.as_str())
            .collect::<Vec<_>>()
            .join(" | "),
    );
    md.push_str(" |\n|---|");
    md.push_str(&"---:|".repeat(builds.len()));
    md.push('\n');
    for what in origins.iter().chain(&others) {
        let _ = write!(md, "| {what} |");
        for b in builds {
            let n = (b.sessions.iter().enumerate())
                .filter(|(i, s)| s.first().map_or("no hit", |s| origin(*i, s)) == *what)
                .count();
            let _ = write!(md, " {n} |");
        }
        md.push('\n');
    }
    md
}

/// Each query's rank of its wanted session, per build ("–": not in the first 10).
pub fn ranks_table(cases: &[Case], builds: &[Answers]) -> String {
    let mut md = String::from("| query | lang |");
    for b in builds {
        let _ = write!(md, " rank, {} |", b.name);
    }
    md.push_str("\n|---|---|");
    md.push_str(&"---:|".repeat(builds.len()));
    md.push('\n');
    for (i, case) in cases.iter().enumerate() {
        let _ = write!(
            md,
            "| `{}` | {} |",
            case.query.replace('|', "\\|"),
            case.lang
        );
        for b in builds {
            let rank = b.rank(i).map_or("–".to_owned(), |r| r.to_string());
            let _ = write!(md, " {rank} |");
        }
        md.push('\n');
    }
    md
}
