//! The synthetic transcript trees: generated once from a fixed seed into a cache directory
//! under `target/bench/corpus/`, and reused by every later run with the same shape.

use crate::records::{Harness, Rng, Session, Size, TextPool};
use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Bump when the generator changes, so stale caches are not reused.
const GENERATOR_VERSION: u32 = 2;
const SEED: u64 = 0x7452_414e_5343_5249;

/// What a tree holds.
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: &'static str,
    pub files: usize,
    pub shape: Shape,
}

impl Spec {
    /// The transcripts corpus: `bytes` over `files`.
    pub fn transcripts(files: usize, bytes: u64) -> Spec {
        Spec {
            name: "transcripts",
            files,
            shape: Shape::Transcripts { bytes },
        }
    }

    /// The transcripts corpus the benchmarks beside compare read: 1 GiB over 1,000 files, or
    /// 64 MB over 100 for a `quick` run.
    pub fn transcripts_for(quick: bool) -> Spec {
        match quick {
            true => Spec::transcripts(100, 64 << 20),
            false => Spec::transcripts(1000, 1 << 30),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// About `bytes` in all, spread over the files by a log-normal law (a few long sessions,
    /// many short ones), records of every size class.
    Transcripts { bytes: u64 },
    /// `records` small records in every file (restart and idle: many files, little data).
    Small { records: usize },
}

/// A generated tree.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Corpus {
    #[serde(skip)]
    pub dir: PathBuf,
    pub version: u32,
    /// Paths relative to `dir`.
    pub files: Vec<PathBuf>,
    pub records: u64,
    /// Bytes of all files, newlines included.
    pub bytes: u64,
    pub largest_record: u64,
    /// Records of 0.5–5 KB, 5–50 KB, 50–500 KB and 1–4 MB (images).
    pub by_class: [u64; 4],
}

/// Wildcards that name every file of a tree, for peers that take globs without `**`:
/// `claude/<project>/<session>.jsonl` and `codex/<yyyy>/<mm>/<dd>/rollout-….jsonl`, as the
/// agents lay them out.
pub const PATTERNS: [&str; 2] = ["claude/*/*.jsonl", "codex/*/*/*/*.jsonl"];

/// What a report says of a tree.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub dir: PathBuf,
    pub files: usize,
    pub records: u64,
    pub bytes: u64,
    pub largest_record: u64,
    pub by_class: [u64; 4],
}

impl Corpus {
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.iter().map(|f| self.dir.join(f)).collect()
    }

    pub fn summary(&self) -> Summary {
        Summary {
            dir: self.dir.clone(),
            files: self.files.len(),
            records: self.records,
            bytes: self.bytes,
            largest_record: self.largest_record,
            by_class: self.by_class,
        }
    }
}

/// The tree for `spec` under `cache`, generated first if it is not there yet.
pub fn ensure(cache: &Path, spec: &Spec) -> Corpus {
    let key = match spec.shape {
        Shape::Transcripts { bytes } => format!("{}-{}f-{}b", spec.name, spec.files, bytes),
        Shape::Small { records } => format!("{}-{}f-{}r", spec.name, spec.files, records),
    };
    let dir = cache.join(key);
    let manifest = dir.join("manifest.json");
    if let Ok(text) = fs::read_to_string(&manifest)
        && let Ok(mut corpus) = serde_json::from_str::<Corpus>(&text)
        && corpus.version == GENERATOR_VERSION
    {
        corpus.dir = dir;
        return corpus;
    }
    let partial = dir.with_extension("partial");
    let _ = fs::remove_dir_all(&partial);
    let _ = fs::remove_dir_all(&dir);
    eprintln!("generating corpus {} (once; cached)", dir.display());
    let mut corpus = generate(&partial, spec);
    fs::write(
        partial.join("manifest.json"),
        serde_json::to_vec_pretty(&corpus).expect("a manifest serializes"),
    )
    .expect("writing the corpus manifest");
    fs::rename(&partial, &dir).expect("moving the corpus into place");
    corpus.dir = dir;
    corpus
}

fn generate(dir: &Path, spec: &Spec) -> Corpus {
    let mut rng = Rng::new(SEED ^ spec.files as u64);
    let pool = TextPool::new(SEED);
    let targets = file_targets(&mut rng, spec);
    let mut corpus = Corpus {
        dir: dir.to_owned(),
        version: GENERATOR_VERSION,
        files: Vec::with_capacity(spec.files),
        records: 0,
        bytes: 0,
        largest_record: 0,
        by_class: [0; 4],
    };
    for (i, target) in targets.into_iter().enumerate() {
        // Three in five sessions are Claude Code's, the rest Codex's.
        let harness = if i % 5 < 3 {
            Harness::ClaudeCode
        } else {
            Harness::Codex
        };
        let mut session = Session::new(harness, &mut rng, i % (spec.files / 100).max(10));
        let rel = file_path(&mut rng, harness, i, spec.files);
        let path = dir.join(&rel);
        fs::create_dir_all(path.parent().expect("a corpus file has a directory"))
            .expect("creating a corpus directory");
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&path).expect("a file"));
        let mut written = 0u64;
        let mut n = 0usize;
        while !target.done(written, n) {
            let size = match target {
                // A long tool result or an image goes only where the session has room for it:
                // otherwise short files would overshoot their size by megabytes.
                Target::Bytes(b) => match Size::pick(&mut rng) {
                    big if big.bytes() as u64 > b - written => Size::small(&mut rng),
                    size => size,
                },
                Target::Records(_) => Size::small(&mut rng),
            };
            corpus.by_class[size.class()] += 1;
            let mut line = session.next_line(&mut rng, &pool, size);
            line.push(b'\n');
            out.write_all(&line).expect("writing the corpus");
            written += line.len() as u64;
            corpus.largest_record = corpus.largest_record.max(line.len() as u64 - 1);
            n += 1;
        }
        out.flush().expect("writing the corpus");
        corpus.records += n as u64;
        corpus.bytes += written;
        corpus.files.push(rel);
    }
    corpus
}

#[derive(Clone, Copy)]
enum Target {
    Bytes(u64),
    Records(usize),
}

impl Target {
    fn done(self, written: u64, records: usize) -> bool {
        match self {
            Target::Bytes(b) => written >= b,
            Target::Records(r) => records >= r,
        }
    }
}

/// Each file's size: log-normal weights (σ = 1.2) scaled to the total, at least 2 KB.
fn file_targets(rng: &mut Rng, spec: &Spec) -> Vec<Target> {
    match spec.shape {
        Shape::Small { records } => vec![Target::Records(records); spec.files],
        Shape::Transcripts { bytes } => {
            let weights: Vec<f64> = (0..spec.files)
                .map(|_| (1.2 * rng.normal()).exp())
                .collect();
            let sum: f64 = weights.iter().sum();
            weights
                .into_iter()
                .map(|w| Target::Bytes(((w / sum * bytes as f64) as u64).max(2048)))
                .collect()
        }
    }
}

/// Where the agents put session `i` of `files`: Claude Code by project, Codex by date, about a
/// hundred files per directory.
fn file_path(rng: &mut Rng, harness: Harness, i: usize, files: usize) -> PathBuf {
    let dirs = (files / 100).max(1);
    let d = i % dirs;
    match harness {
        Harness::ClaudeCode => PathBuf::from(format!(
            "claude/-home-dev-src-project-{d}/{}.jsonl",
            rng.uuid()
        )),
        Harness::Codex => PathBuf::from(format!(
            "codex/2025/{:02}/{:02}/rollout-2025-{:02}-{:02}T10-00-00-{}.jsonl",
            1 + d / 28 % 12,
            1 + d % 28,
            1 + d / 28 % 12,
            1 + d % 28,
            rng.uuid()
        )),
    }
}

/// A flat directory of `files` transcripts holding `records` small records each, for the live
/// measurements: made fresh for every subject.
pub fn live_dir(dir: &Path, files: usize, records: usize) -> Vec<PathBuf> {
    let pool = TextPool::new(SEED);
    let mut rng = Rng::new(SEED ^ 0x11fe);
    fs::create_dir_all(dir).expect("creating the live directory");
    (0..files)
        .map(|i| {
            let harness = if i % 5 < 3 {
                Harness::ClaudeCode
            } else {
                Harness::Codex
            };
            let mut session = Session::new(harness, &mut rng, i);
            let path = dir.join(format!("s-{i:03}.jsonl"));
            let mut text = Vec::new();
            for _ in 0..records {
                let size = Size::small(&mut rng);
                text.extend(session.next_line(&mut rng, &pool, size));
                text.push(b'\n');
            }
            fs::write(&path, text).expect("writing a live file");
            path
        })
        .collect()
}

/// `n` Claude Code sessions of four records each (prompt, answer, prompt, answer) under
/// `home/.claude/projects/`, in 100 projects.
pub fn claude_sessions(home: &Path, n: usize) {
    let pool = TextPool::new(7);
    let mut rng = Rng::new(0x5e55_1045);
    for i in 0..n {
        let project = format!("/home/dev/src/project-{}", i % 100);
        let dir = home
            .join(".claude/projects")
            .join(project.replace('/', "-"));
        fs::create_dir_all(&dir).expect("creating a project directory");
        let session = rng.uuid();
        let mut text = String::new();
        let mut clock = 1_750_000_000_000 + i as u64 * 60_000;
        for turn in 0..4 {
            clock += rng.below(20_000);
            let size = rng.log_uniform(100.0, 1500.0);
            let user = turn % 2 == 0;
            let line = claude_record(&mut rng, &pool, &session, &project, clock, user, size);
            text.push_str(&line);
            text.push('\n');
        }
        fs::write(dir.join(format!("{session}.jsonl")), text).expect("writing a session");
    }
}

fn claude_record(
    rng: &mut Rng,
    pool: &TextPool,
    session: &str,
    project: &str,
    clock_ms: u64,
    user: bool,
    size: usize,
) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(clock_ms);
    let message = if user {
        serde_json::json!({"role": "user", "content": pool.text(rng, size)})
    } else {
        serde_json::json!({"role": "assistant", "model": "claude-sonnet-4-20250514",
            "content": [{"type": "text", "text": pool.text(rng, size)}]})
    };
    serde_json::json!({"type": if user { "user" } else { "assistant" }, "uuid": rng.uuid(),
        "sessionId": session, "cwd": project, "gitBranch": "main",
        "timestamp": humantime::format_rfc3339_millis(at).to_string(), "message": message})
    .to_string()
}

/// One Claude Code session of about `bytes` under `home/.claude/projects/`: prompts and
/// answers of 0.2–8 KB of text in turn. Returns its id.
pub fn claude_long_session(home: &Path, bytes: usize) -> String {
    let pool = TextPool::new(11);
    let mut rng = Rng::new(0x10_6e55);
    let project = "/home/dev/src/long";
    let dir = home
        .join(".claude/projects")
        .join(project.replace('/', "-"));
    fs::create_dir_all(&dir).expect("creating a project directory");
    let session = rng.uuid();
    let mut out = BufWriter::new(File::create(dir.join(format!("{session}.jsonl"))).unwrap());
    let (mut written, mut turn, mut clock) = (0, 0, 1_750_000_000_000u64);
    while written < bytes {
        clock += rng.below(20_000);
        let size = rng.log_uniform(200.0, 8000.0);
        let mut line = claude_record(
            &mut rng,
            &pool,
            &session,
            project,
            clock,
            turn % 2 == 0,
            size,
        );
        line.push('\n');
        out.write_all(line.as_bytes()).unwrap();
        written += line.len();
        turn += 1;
    }
    out.flush().unwrap();
    session
}

/// Makes `home` hold the transcripts corpus at `corpus` where the agents keep theirs, as hard
/// links: `.claude/projects/<project>/…` and `.codex/sessions/yyyy/mm/dd/…`.
pub fn link_home(corpus: &Path, home: &Path) {
    link_tree(&corpus.join("claude"), &home.join(".claude/projects"));
    link_tree(&corpus.join("codex"), &home.join(".codex/sessions"));
}

fn link_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("creating the fake home");
    for entry in fs::read_dir(from).expect("reading the corpus") {
        let entry = entry.expect("reading the corpus");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            link_tree(&entry.path(), &target);
        } else {
            fs::hard_link(entry.path(), &target).expect("linking a corpus file");
        }
    }
}
