//! The sessions each judged query is planted among: the wanted one, where the person asked
//! and the answer solved it, and three that share its words without being what anyone looks
//! for: a tool printing them over and over, a long session whose tools come across them, and
//! a newer session that mentions them in passing.

use crate::claude::Transcript;
use crate::set::{Case, Set};
use fastrand::Rng;
use serde_json::json;
use std::io;
use std::path::Path;

/// A planted session's part in its case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The session a person wants first.
    Wanted = 1,
    /// A session whose tool output (a log read with `cat`, test runs) repeats the words.
    Dump = 2,
    /// A long session whose tools come across the words a few times.
    Long = 3,
    /// A newer session that mentions the words in passing.
    Aside = 4,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Wanted, Kind::Dump, Kind::Long, Kind::Aside];

    pub fn label(self) -> &'static str {
        match self {
            Kind::Wanted => "the wanted session",
            Kind::Dump => "its tool-dump session",
            Kind::Long => "its long session",
            Kind::Aside => "its newer passing mention",
        }
    }
}

/// The id of case `case`'s session of `kind`: a UUID whose first two groups say which.
pub fn session_id(case: usize, kind: Kind) -> String {
    format!("{case:08x}-{:04x}-4000-8000-000000000000", kind as u16)
}

/// The case and kind of a planted session's id; `None` for another session.
pub fn planted(id: &str) -> Option<(usize, Kind)> {
    let rest = id.strip_suffix("-4000-8000-000000000000")?;
    let (case, kind) = rest.split_once('-')?;
    let kind = match u16::from_str_radix(kind, 16).ok()? {
        1 => Kind::Wanted,
        2 => Kind::Dump,
        3 => Kind::Long,
        4 => Kind::Aside,
        _ => return None,
    };
    Some((usize::from_str_radix(case, 16).ok()?, kind))
}

/// 2025-10-01T00:00:00Z: the first wanted session starts then, each next case 9 hours later.
const START_MS: u64 = 1_759_276_800_000;
const HOUR_MS: u64 = 3_600_000;

/// Writes every case's four sessions as Claude Code transcripts under `projects` (Claude
/// Code's `projects/` directory). Returns the bytes written.
pub fn plant_all(projects: &Path, set: &Set) -> io::Result<u64> {
    let mut bytes = 0;
    for (i, case) in set.cases.iter().enumerate() {
        let mut rng = Rng::with_seed(i as u64);
        let project = PROJECTS[i % PROJECTS.len()];
        let dir = projects.join(format!("-home-dev-src-{project}"));
        let cwd = format!("/home/dev/src/{project}");
        let start = START_MS + i as u64 * 9 * HOUR_MS;
        let filler = set.filler(&case.lang);
        for kind in Kind::ALL {
            let id = session_id(i, kind);
            let mut t = Transcript::new(&id, &cwd, start + offset(kind));
            let mut talk = Talk {
                rng: &mut rng,
                filler,
            };
            match kind {
                Kind::Wanted => wanted(&mut t, &mut talk, case, i),
                Kind::Dump => dump(&mut t, &mut talk, case, i),
                Kind::Long => long(&mut t, &mut talk, case),
                Kind::Aside => aside(&mut t, &mut talk, case, i),
            }
            bytes += t.write(&dir.join(format!("{id}.jsonl")))?;
        }
    }
    Ok(bytes)
}

/// How long after the wanted session each distractor starts: all are newer, the passing
/// mention newest.
fn offset(kind: Kind) -> u64 {
    match kind {
        Kind::Wanted => 0,
        Kind::Dump => 48 * HOUR_MS,
        Kind::Long => 120 * HOUR_MS,
        Kind::Aside => 480 * HOUR_MS,
    }
}

const PROJECTS: &[&str] = &["ledger", "gateway", "webshop", "infra", "mobile-app"];

/// The wanted session: the prompt, the model looking around (in a third of the cases its
/// search of the code comes across the words once), the answer.
fn wanted(t: &mut Transcript, talk: &mut Talk, case: &Case, i: usize) {
    t.prompt(&case.prompt);
    t.thinking(talk.pick(PLANS));
    read(t, talk);
    if i.is_multiple_of(3) {
        let word = case.query.split_whitespace().next().unwrap_or_default();
        let command = format!("rg -n '{}' src", word.trim_matches('"'));
        let (file, line) = (talk.ident(), talk.n(400));
        let hit = format!("src/{file}.rs:{line}:    // {}", case.log);
        t.tool("Bash", json!({ "command": command }), &hit);
    }
    build(t, talk);
    t.text(&case.answer);
}

/// A session about other work whose tool output repeats the words: the same log read and
/// tests run several times while debugging, the model's thinking quoting the line now and
/// then. In one case of four the person pastes that log into the prompt, asking about
/// something else.
fn dump(t: &mut Transcript, talk: &mut Talk, case: &Case, i: usize) {
    let ask = talk.sentences(2);
    if i % 4 == 1 {
        let lines = 30 + talk.n(40);
        t.prompt(&format!("{ask}\n\n```\n{}```", talk.log(&case.log, lines)));
    } else {
        t.prompt(&ask);
    }
    t.text(talk.pick(LEADS));
    let rounds = 3 + talk.n(6);
    for round in 0..rounds {
        if round % 2 == 0 {
            let lines = 40 + talk.n(80);
            let log = talk.log(&case.log, lines);
            t.tool("Bash", json!({"command": "cat logs/app.log"}), &log);
            let quote = talk.pick(QUOTES);
            t.thinking(&format!("{quote} {} {}", case.log, talk.pick(PLANS)));
        } else {
            let run = talk.test_run(&case.log);
            let command = json!({"command": "cargo test 2>&1 | tail -200"});
            t.tool("Bash", command, &run);
            t.thinking(talk.pick(PLANS));
        }
    }
    t.text(&talk.sentences(3));
}

/// A long session about other work, over three prompts, whose tools come across the words in
/// a few of their outputs.
fn long(t: &mut Transcript, talk: &mut Talk, case: &Case) {
    let steps = 45 + talk.n(30);
    let mentioned = 4 + talk.n(3);
    let mentions: Vec<usize> = (0..mentioned).map(|_| talk.n(steps)).collect();
    for step in 0..steps {
        if step % 20 == 0 {
            t.prompt(&talk.sentences(2));
        }
        if mentions.contains(&step) {
            let n = 30 + talk.n(60);
            let lines = talk.code(n);
            let at = lines.find('\n').map_or(0, |n| n + 1);
            let text = format!("{}// {}\n{}", &lines[..at], case.log, &lines[at..]);
            t.tool("Read", json!({"file_path": "src/lib.rs"}), &text);
        } else {
            talk.noise_step(t);
        }
    }
    t.text(&talk.sentences(4));
}

/// A newer session about other work that mentions the words once, in a long prompt (even
/// cases) or a long answer (odd ones).
fn aside(t: &mut Transcript, talk: &mut Talk, case: &Case, i: usize) {
    let with_aside = |talk: &mut Talk| {
        let n = 5 + talk.n(5);
        let mut text = talk.sentences(n);
        text.push(' ');
        text.push_str(&case.aside);
        text.push(' ');
        text.push_str(&talk.sentences(3));
        text
    };
    let prompt = match i % 2 {
        0 => with_aside(talk),
        _ => talk.sentences(3),
    };
    t.prompt(&prompt);
    for _ in 0..3 {
        talk.noise_step(t);
    }
    let answer = match i % 2 {
        0 => talk.sentences(4),
        _ => with_aside(talk),
    };
    t.text(&answer);
}

fn read(t: &mut Transcript, talk: &mut Talk) {
    let path = format!("src/{}.rs", talk.ident());
    let n = 40 + talk.n(120);
    let code = talk.code(n);
    t.tool("Read", json!({"file_path": path}), &code);
}

fn build(t: &mut Transcript, talk: &mut Talk) {
    let mut out = String::new();
    let crates = 3 + talk.n(8);
    for _ in 0..crates {
        let name = talk.ident();
        out.push_str(&format!(
            "   Compiling {name} v0.{}.{}\n",
            talk.n(9),
            talk.n(30)
        ));
    }
    out.push_str(&format!(
        "    Finished `dev` profile in {}.{}s\n",
        talk.n(40),
        talk.n(99)
    ));
    t.tool("Bash", json!({"command": "cargo build"}), &out);
}

/// What a planted session says besides the case's own words, drawn from `rng`.
struct Talk<'a> {
    rng: &'a mut Rng,
    /// The case's language's sentences of ordinary talk.
    filler: &'a [String],
}

impl Talk<'_> {
    fn pick<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[self.rng.usize(0..items.len())]
    }

    fn n(&mut self, below: usize) -> usize {
        self.rng.usize(0..below)
    }

    fn ident(&mut self) -> &'static str {
        self.pick(IDENTS)
    }

    /// `n` sentences of the filler, joined as a paragraph.
    fn sentences(&mut self, n: usize) -> String {
        let picked: Vec<&str> = (0..n)
            .map(|_| self.filler[self.rng.usize(0..self.filler.len())].as_str())
            .collect();
        picked.join(" ")
    }

    /// `lines` lines of made-up code.
    fn code(&mut self, lines: usize) -> String {
        let mut out = String::new();
        for n in 1..=lines {
            let (a, b, c) = (self.ident(), self.ident(), self.ident());
            let k = self.n(64);
            out.push_str(&format!(
                "{n:>6}\t    let {a}_{b} = {c}::{b}(&{a}, {k})?;\n"
            ));
        }
        out
    }

    /// A log of `lines` lines, about one in four of them `line` (with its own time and
    /// worker), the rest requests served.
    fn log(&mut self, line: &str, lines: usize) -> String {
        let mut out = String::new();
        for n in 0..lines {
            let stamp = format!(
                "2025-10-03T11:{:02}:{:02}.{:03}Z",
                n / 60 % 60,
                n % 60,
                self.n(1000)
            );
            let worker = self.n(8);
            if self.rng.usize(0..4) == 0 {
                out.push_str(&format!("{stamp} ERROR [worker-{worker}] {line}\n"));
            } else {
                let (path, ms) = (self.ident(), self.n(300));
                out.push_str(&format!(
                    "{stamp} INFO  [worker-{worker}] GET /api/v1/{path} 200 in {ms} ms\n"
                ));
            }
        }
        out
    }

    /// A test run in which several tests fail, each with `line` as its panic message.
    fn test_run(&mut self, line: &str) -> String {
        let (passed, failed) = (20 + self.n(60), 2 + self.n(8));
        let mut out = format!("running {} tests\n", passed + failed);
        let mut failures = Vec::new();
        for n in 0..passed + failed {
            let name = format!("{}::tests::{}_{}", self.ident(), self.ident(), n);
            let verdict = if n % ((passed + failed) / failed) == 0 && failures.len() < failed {
                failures.push(name.clone());
                "FAILED"
            } else {
                "ok"
            };
            out.push_str(&format!("test {name} ... {verdict}\n"));
        }
        out.push_str("\nfailures:\n\n");
        for name in &failures {
            let at = self.n(500);
            out.push_str(&format!("---- {name} stdout ----\nthread '{name}' panicked at src/lib.rs:{at}:9:\n{line}\n\n"));
        }
        let summary = format!(
            "test result: FAILED. {} passed; {} failed\n",
            passed + failed - failures.len(),
            failures.len()
        );
        out.push_str(&summary);
        out
    }

    /// A step of other work: a file read, a build, or a thought and a search of the code.
    fn noise_step(&mut self, t: &mut Transcript) {
        match self.n(3) {
            0 => read(t, self),
            1 => build(t, self),
            _ => {
                t.thinking(self.pick(PLANS));
                let n = 3 + self.n(12);
                let found = self.code(n);
                t.tool("Grep", json!({"pattern": self.ident()}), &found);
            }
        }
    }
}

/// Words the made-up code is made of.
const IDENTS: &[&str] = &[
    "buffer", "entry", "config", "reader", "writer", "state", "handle", "value", "index", "offset",
    "record", "span", "token", "frame", "batch", "path", "name", "item", "node", "slot", "chunk",
    "field", "scope", "list", "cell", "parser", "router", "store",
];

/// What the model thinks before it acts.
const PLANS: &[&str] = &[
    "Let me read the code around this first.",
    "I should check where this is called from before changing it.",
    "The simplest thing is to look at the tests for this module.",
    "Let me build it and see what the compiler says.",
    "I need to see how the configuration is loaded.",
    "This looks like it depends on the order things run in; let me check.",
];

/// How the model's thinking quotes a line of output.
const QUOTES: &[&str] = &[
    "The same line again:",
    "Still seeing this in the output:",
    "The log keeps saying",
];

/// What the model says before a round of tools.
const LEADS: &[&str] = &[
    "I'll run it and look at the output.",
    "Let me look at the logs and the tests.",
    "Running the tests first.",
];
