//! Sessions: who works where and when, and what their tools print.

use super::random::{Clock, hex, log_uniform, pick, weighted};
use super::shelf::{Project, Shelf};
use super::workspace::{Workspace, window};
use fastrand::Rng;
use std::fs;
use std::io;
use transcript_sync::prefix_of;

/// What lasts from one session to the next: the user, the projects they work on, the time.
pub(super) struct Desk<'a> {
    user: &'static str,
    favourites: Vec<&'a Project>,
    pub(super) clock: Clock,
}

/// What one session's writer works with.
pub(super) struct Session<'a> {
    pub(super) rng: &'a mut Rng,
    pub(super) shelf: &'a Shelf,
    pub(super) ws: Workspace<'a>,
    pub(super) clock: Clock,
    pub(super) user: &'static str,
}

impl<'a> Desk<'a> {
    pub(super) fn new(rng: &mut Rng, shelf: &'a Shelf) -> Desk<'a> {
        let user = pick(rng, &["dev", "dana", "sam", "alex", "kim", "lee"]);
        let mut favourites: Vec<&Project> = shelf.projects.iter().collect();
        rng.shuffle(&mut favourites);
        favourites.truncate(12);
        // 2025-09-01 and up to a month after.
        let clock = Clock(1_756_684_800_000 + rng.u64(0..30 * 86_400_000));
        Desk {
            user,
            favourites,
            clock,
        }
    }

    /// The next session, some time after the last one; `Err` when no project has files
    /// that can be read.
    pub(super) fn next_session<'r>(
        &mut self,
        rng: &'r mut Rng,
        shelf: &'a Shelf,
    ) -> io::Result<Session<'r>>
    where
        'a: 'r,
    {
        self.clock.0 += log_uniform(rng, 300e3, 20.0 * 3600e3) as u64;
        for _ in 0..100 {
            let project = self.project(rng, shelf);
            let cwd = format!("/home/{}/src/{}", self.user, project.name);
            if let Some(ws) = Workspace::open(rng, project, cwd, shelf) {
                return Ok(Session {
                    rng,
                    shelf,
                    ws,
                    clock: self.clock,
                    user: self.user,
                });
            }
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "no project with source files that read as UTF-8",
        ))
    }

    /// A few projects get most sessions, as a person's work does; now and then another.
    fn project(&self, rng: &mut Rng, shelf: &'a Shelf) -> &'a Project {
        if rng.f64() < 0.1 {
            return &shelf.projects[rng.usize(0..shelf.projects.len())];
        }
        let weights: Vec<u32> = (1..=self.favourites.len() as u32)
            .map(|rank| 1200 / rank)
            .collect();
        self.favourites[weighted(rng, &weights)]
    }
}

/// What a shell command printed.
pub(super) struct Shell {
    pub(super) command: String,
    pub(super) description: &'static str,
    pub(super) output: String,
    pub(super) exit_code: u64,
}

impl Session<'_> {
    /// What the user asks at the start of a turn.
    pub(super) fn prompt(&mut self) -> String {
        let i = self.ws.pick(self.rng);
        let rel = self.ws.files[i].rel.clone();
        let name = self.ws.identifier(self.rng, i);
        let sentence = self.shelf.sentence(self.rng);
        match weighted(self.rng, &[30, 15, 15, 10, 20, 10]) {
            0 => {
                let ask = pick(self.rng, ASKS);
                format!("{ask} `{name}` in {rel}")
            }
            1 => format!("{sentence}."),
            2 => format!("{sentence}. The code is in {rel}, around `{name}`."),
            3 => {
                let failure = self.test().output;
                let failure = prefix_of(&failure, 3000);
                format!("This fails, can you fix it?\n\n```\n{failure}\n```")
            }
            4 => pick(self.rng, SHORT_PROMPTS).to_owned(),
            _ => {
                let paragraphs = 1 + self.rng.usize(0..4);
                let passage = self.shelf.passage(self.rng, paragraphs);
                format!("{passage}\n\nStart with {rel}.")
            }
        }
    }

    /// A line before a tool call, saying what it is for.
    pub(super) fn lead_in(&mut self) -> String {
        let i = self.ws.pick(self.rng);
        let rel = self.ws.files[i].rel.clone();
        let name = self.ws.identifier(self.rng, i);
        let lead = pick(self.rng, LEADS)
            .replace("{rel}", &rel)
            .replace("{name}", &name);
        match self.rng.f64() < 0.3 {
            true => format!("{lead} {}.", self.shelf.sentence(self.rng)),
            false => lead,
        }
    }

    /// What a model thinks before it acts: a plan in prose.
    pub(super) fn thought(&mut self) -> String {
        let lead = self.lead_in();
        let paragraphs = log_uniform(self.rng, 1.0, 4.0);
        format!("{lead}\n\n{}", self.shelf.passage(self.rng, paragraphs))
    }

    /// The answer that ends a turn: prose, the files changed, sometimes a snippet.
    pub(super) fn summary(&mut self) -> String {
        let mut out = self.shelf.paragraph(self.rng).to_owned();
        let changed: Vec<String> = (self.ws.files.iter().filter(|f| f.edited))
            .map(|f| f.rel.clone())
            .collect();
        if !changed.is_empty() {
            out.push_str("\n\n## Changes\n\n");
            for rel in changed.iter().take(6) {
                out.push_str(&format!("- `{rel}`: {}\n", self.shelf.sentence(self.rng)));
            }
        }
        if self.rng.f64() < 0.3 {
            let i = self.ws.pick(self.rng);
            let file = &self.ws.files[i];
            let lines = file.text.lines().count().max(1);
            let from = self.rng.usize(1..=lines);
            let snippet = window(&file.text, from, from + self.rng.usize(3..25));
            let lang = file.rel.rsplit('.').next().unwrap_or("");
            out.push_str(&format!("\n```{lang}\n{snippet}```\n"));
        }
        if self.rng.bool() {
            out.push_str("\n\n");
            out.push_str(self.shelf.paragraph(self.rng));
        }
        out
    }

    /// A command an agent runs, chosen with `weights` over build, test, git status, git
    /// diff, git log, ls, find, grep, show a file and wc.
    pub(super) fn shell(&mut self, weights: &[u32; 10]) -> Shell {
        match weighted(self.rng, weights) {
            0 => self.build(),
            1 => self.test(),
            2 => self.git_status(),
            3 => self.git_diff(),
            4 => self.git_log(),
            5 => self.ls(),
            6 => self.find(),
            7 => self.grep(),
            8 => self.show(),
            _ => self.wc(),
        }
    }

    fn build(&mut self) -> Shell {
        if !self.ws.project.rust {
            return self.make();
        }
        let mut out = self.compiling();
        for _ in 0..self.rng.usize(0..4) {
            out.push_str(&self.diagnostic("warning: unused variable", "help: prefix it with `_`"));
        }
        let failed = self.rng.f64() < 0.25;
        if failed {
            out.push_str(&self.diagnostic("error[E0308]: mismatched types", "expected `usize`"));
            out.push_str(&format!(
                "For more information about this error, try `rustc --explain E0308`.\n\
                 error: could not compile `{}` (lib) due to 1 previous error\n",
                self.ws.project.name
            ));
        } else {
            let secs = self.rng.u32(1..9000) as f64 / 100.0;
            out.push_str(&format!(
                "    Finished `dev` profile [unoptimized + debuginfo] target(s) in {secs:.2}s\n"
            ));
        }
        let commands = ["cargo build", "cargo check", "cargo clippy --all-targets"];
        Shell {
            command: pick(self.rng, &commands).to_owned(),
            description: "Build the project",
            output: out,
            exit_code: if failed { 101 } else { 0 },
        }
    }

    /// `Compiling` lines: every dependency the first time, then only the project.
    fn compiling(&mut self) -> String {
        let mut out = String::new();
        if !self.ws.built {
            for dep in &self.ws.dependencies {
                out.push_str(&format!("   Compiling {dep}\n"));
            }
            self.ws.built = true;
        }
        let name = &self.ws.project.name;
        out.push_str(&format!("   Compiling {name} v0.1.0 ({})\n", self.ws.cwd));
        out
    }

    /// A compiler message pointing at a real line of a file.
    fn diagnostic(&mut self, headline: &str, note: &str) -> String {
        let i = self.ws.pick(self.rng);
        let file = &self.ws.files[i];
        let lines: Vec<&str> = file.text.lines().collect();
        let n = self.rng.usize(0..lines.len().max(1));
        let line = prefix_of(lines.get(n).copied().unwrap_or(""), 200);
        let col = line.len() - line.trim_start().len() + 1;
        let gutter = " ".repeat((n + 1).to_string().len());
        format!(
            "{headline}\n{gutter}--> {}:{}:{col}\n{gutter} |\n{} | {line}\n\
             {gutter} | {}^^^^ {note}\n\n",
            file.rel,
            n + 1,
            n + 1,
            " ".repeat(col - 1)
        )
    }

    fn make(&mut self) -> Shell {
        let mut out = String::new();
        for file in self.ws.files.iter().filter(|f| f.rel.ends_with(".c")) {
            let object = file.rel.trim_end_matches(".c");
            out.push_str(&format!(
                "cc -O2 -Wall -Wextra -c -o {object}.o {}\n",
                file.rel
            ));
        }
        for _ in 0..self.rng.usize(0..3) {
            let i = self.ws.pick(self.rng);
            let name = self.ws.identifier(self.rng, i);
            let rel = &self.ws.files[i].rel;
            let line = self.rng.usize(1..400);
            out.push_str(&format!(
                "{rel}:{line}:9: warning: unused variable '{name}' [-Wunused-variable]\n"
            ));
        }
        out.push_str(&format!("cc -o {} *.o\n", self.ws.project.name));
        Shell {
            command: "make".to_owned(),
            description: "Build the project",
            output: out,
            exit_code: 0,
        }
    }

    fn test(&mut self) -> Shell {
        if !self.ws.project.rust {
            return self.make();
        }
        let tests = self.ws.test_names(self.rng.usize(5..150));
        let failing = (self.rng.f64() < 0.3 && !tests.is_empty())
            .then(|| tests[self.rng.usize(0..tests.len())].clone());
        let mut out = self.compiling();
        out.push_str(&format!(
            "    Finished `test` profile [unoptimized + debuginfo] target(s) in {:.2}s\n     \
             Running unittests src/lib.rs (target/debug/deps/{}-{})\n\nrunning {} tests\n",
            self.rng.u32(1..3000) as f64 / 100.0,
            self.ws.project.name,
            hex(self.rng, 16),
            tests.len()
        ));
        for test in &tests {
            let failed = Some(test) == failing.as_ref();
            out.push_str(&format!(
                "test {test} ... {}\n",
                if failed { "FAILED" } else { "ok" }
            ));
        }
        if let Some(test) = &failing {
            out.push_str(&self.panic(test));
        }
        let (passed, failed) = (tests.len() - failing.is_some() as usize, failing.is_some());
        out.push_str(&format!(
            "\ntest result: {}. {passed} passed; {} failed; 0 ignored; 0 measured; 0 filtered \
             out; finished in 0.{:02}s\n",
            if failed { "FAILED" } else { "ok" },
            failed as usize,
            self.rng.u32(0..100)
        ));
        let commands = [
            "cargo test",
            "cargo test --lib",
            "cargo test 2>&1 | tail -80",
        ];
        Shell {
            command: pick(self.rng, &commands).to_owned(),
            description: "Run the tests",
            output: out,
            exit_code: if failed { 101 } else { 0 },
        }
    }

    /// How a failing test reports itself, at a real line of a file.
    fn panic(&mut self, test: &str) -> String {
        let i = self.ws.pick(self.rng);
        let rel = &self.ws.files[i].rel;
        let line = self
            .rng
            .usize(1..self.ws.files[i].text.lines().count().max(2));
        let (left, right) = (self.rng.u32(0..100), self.rng.u32(0..100));
        format!(
            "\nfailures:\n\n---- {test} stdout ----\n\n\
             thread '{test}' panicked at {rel}:{line}:9:\n\
             assertion `left == right` failed\n  left: {left}\n right: {right}\nnote: run with \
             `RUST_BACKTRACE=1` environment variable to display a backtrace\n\n\nfailures:\n    \
             {test}\n"
        )
    }

    fn git_status(&mut self) -> Shell {
        let branch = pick(self.rng, &["main", "master"]);
        let mut out =
            format!("On branch {branch}\nYour branch is up to date with 'origin/{branch}'.\n\n");
        let edited: Vec<&str> = (self.ws.files.iter().filter(|f| f.edited))
            .map(|f| f.rel.as_str())
            .collect();
        if edited.is_empty() {
            out.push_str("nothing to commit, working tree clean\n");
        } else {
            out.push_str(
                "Changes not staged for commit:\n  (use \"git add <file>...\" to update what \
                 will be committed)\n  (use \"git restore <file>...\" to discard changes in \
                 working directory)\n",
            );
            for rel in edited {
                out.push_str(&format!("\tmodified:   {rel}\n"));
            }
            out.push_str(
                "\nno changes added to commit (use \"git add\" and/or \"git commit -a\")\n",
            );
        }
        Shell {
            command: "git status".to_owned(),
            description: "Show working tree status",
            output: out,
            exit_code: 0,
        }
    }

    fn git_diff(&mut self) -> Shell {
        Shell {
            command: "git diff".to_owned(),
            description: "Show the changes so far",
            output: self.ws.diffs.concat(),
            exit_code: 0,
        }
    }

    fn git_log(&mut self) -> Shell {
        let mut out = String::new();
        for _ in 0..self.rng.usize(5..25) {
            let subject = self.shelf.sentence(self.rng);
            out.push_str(&format!(
                "{} {}\n",
                hex(self.rng, 7),
                prefix_of(&subject, 72)
            ));
        }
        Shell {
            command: "git log --oneline -20".to_owned(),
            description: "Show recent commits",
            output: out,
            exit_code: 0,
        }
    }

    fn ls(&mut self) -> Shell {
        let project = self.ws.project;
        let mut top: Vec<&str> = project
            .files
            .iter()
            .map(|f| f.split('/').next().unwrap_or(f))
            .collect();
        top.dedup();
        let mut out = format!("total {}\n", top.len() * 4);
        for entry in top {
            let (mode, size) = match fs::metadata(project.dir.join(entry)) {
                Ok(m) if m.is_dir() => ("drwxr-xr-x", 4096),
                Ok(m) => ("-rw-r--r--", m.len()),
                Err(_) => ("-rw-r--r--", 0),
            };
            let user = self.user;
            out.push_str(&format!(
                "{mode}  1 {user} {user} {size:>6} Sep  3 10:12 {entry}\n"
            ));
        }
        Shell {
            command: "ls -la".to_owned(),
            description: "List the project's files",
            output: out,
            exit_code: 0,
        }
    }

    fn find(&mut self) -> Shell {
        let ext = self.ws.files[0]
            .rel
            .rsplit('.')
            .next()
            .unwrap_or("rs")
            .to_owned();
        let files: Vec<&str> = (self.ws.project.files.iter())
            .filter(|f| f.ends_with(&format!(".{ext}")))
            .map(|f| f.as_str())
            .take(200)
            .collect();
        Shell {
            command: format!("find . -name '*.{ext}' | sort | head -200"),
            description: "Find source files",
            output: files.iter().map(|f| format!("./{f}\n")).collect(),
            exit_code: 0,
        }
    }

    fn grep(&mut self) -> Shell {
        let i = self.ws.pick(self.rng);
        let name = self.ws.identifier(self.rng, i);
        let hits = self.ws.grep(&name, 100);
        Shell {
            command: format!("rg -n '{name}'"),
            description: "Search the code",
            output: hits.iter().map(|h| format!("{h}\n")).collect(),
            exit_code: if hits.is_empty() { 1 } else { 0 },
        }
    }

    /// A stretch of a file through `sed -n`, continuing where the last one stopped.
    fn show(&mut self) -> Shell {
        let i = self.ws.pick(self.rng);
        let file = &mut self.ws.files[i];
        let lines = file.text.lines().count().max(1);
        if file.next_line > lines {
            file.next_line = 1;
        }
        let from = file.next_line;
        let to = from + [79, 119, 199, 249][self.rng.usize(0..4)];
        file.next_line = to + 1;
        file.read = true;
        Shell {
            command: format!("sed -n '{from},{to}p' {}", file.rel),
            description: "Show part of a file",
            output: window(&file.text, from, to.min(lines)),
            exit_code: 0,
        }
    }

    fn wc(&mut self) -> Shell {
        let mut out = String::new();
        let mut total = 0;
        for file in &self.ws.files {
            let n = file.text.lines().count();
            total += n;
            out.push_str(&format!("{n:>6} {}\n", file.rel));
        }
        out.push_str(&format!("{total:>6} total\n"));
        Shell {
            command: "wc -l $(git ls-files | head -40)".to_owned(),
            description: "Count lines",
            output: out,
            exit_code: 0,
        }
    }
}

pub(super) const ASKS: &[&str] = &[
    "Why does this fail:",
    "Refactor",
    "Add tests for",
    "Explain what happens in",
    "Fix the bug in",
    "Document",
    "Speed up",
    "Remove the unwraps from",
    "Rename and simplify",
    "Review the error handling of",
];

const SHORT_PROMPTS: &[&str] = &[
    "continue",
    "yes, go ahead",
    "commit this",
    "run the tests again",
    "looks good, now update the docs",
    "no, keep the old behaviour and add a flag instead",
    "why?",
    "can you make it shorter?",
];

const LEADS: &[&str] = &[
    "Let me look at `{rel}`.",
    "I'll check how `{name}` is used.",
    "Now let me run the tests.",
    "Let me read the rest of `{rel}`.",
    "I need to see where `{name}` is defined.",
    "The build passes. Let me check the tests.",
    "I'll update `{name}` in `{rel}`.",
    "Let me search for other uses of `{name}`.",
];
