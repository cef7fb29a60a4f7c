//! A tree of agent transcripts shaped like real ones, for measuring how well the archive
//! compresses them.
//!
//! The compare corpus (`testkit/src/records.rs`) fills records with random words, which
//! says little about compression. Real transcripts repeat themselves: every Claude Code record
//! carries the same envelope and usage block, a session reads the same source file several
//! times and edits it (the Edit result holds the whole original file), command output is
//! `cargo build`, `git status` and `rg -n` over that project, and every Codex rollout opens
//! with the same long base prompt. Here the records have the shapes of
//! `tests/fixtures/sessions/` and their content is real text from this machine: each session
//! works on one project taken from `~/.cargo/registry/src` (or a directory of
//! `/usr/include`), and prose comes from the Markdown and text files there and under
//! `/usr/share/doc`. Only what is random in real transcripts is random here: ids, timestamps,
//! thinking signatures, Codex's `encrypted_content`, the rare pasted image.
//!
//! With `REAL_SHAPED_PROSE=cjk`, the prose (prompts, answers, plans) is Chinese, Japanese and
//! Korean instead: paragraphs of the translated man pages under `/usr/share/man/{ja,ko,zh_CN,
//! zh_TW}`, for a corpus whose people write in those languages (code and tool output stay as
//! they are).
//!
//! Files are listed in sorted order and chosen with `fastrand::Rng::with_seed`, so the same
//! seed on a machine with the same files gives the same tree; the tree depends on the files
//! present (another set of crates in the registry gives another tree).

use fastrand::Rng;
use serde::{Serialize, Serializer};
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::ops::AddAssign;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

/// What a tree holds, per harness.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Claude Code sessions and their subagents, under `claude/`.
    pub claude: Count,
    /// Codex rollouts, under `codex/`.
    pub codex: Count,
}

impl Stats {
    /// Bytes of every file, newlines included.
    pub fn bytes(&self) -> u64 {
        self.claude.bytes + self.codex.bytes
    }
}

/// Files, records and bytes (newlines included) of one harness's transcripts.
#[derive(Clone, Copy, Debug, Default)]
pub struct Count {
    /// Transcript files.
    pub files: u64,
    /// Lines, one record each.
    pub records: u64,
    /// Bytes, newlines included.
    pub bytes: u64,
}

impl AddAssign for Count {
    fn add_assign(&mut self, other: Count) {
        self.files += other.files;
        self.records += other.records;
        self.bytes += other.bytes;
    }
}

/// Writes sessions under `root` until they hold about `target_bytes`: Claude Code sessions as
/// `claude/<encoded-project>/<session>.jsonl`, some with subagents in
/// `claude/<encoded-project>/<session>/subagents/agent-<id>.jsonl`, and Codex rollouts as
/// `codex/YYYY/MM/DD/rollout-<time>-<id>.jsonl`, about 3:2 by bytes. Every line is one JSON
/// record ending in `\n`. The last session is cut to what is left, so the tree ends within a
/// record or two of the target.
///
/// `Err` when a file cannot be written, or when this machine has no source files to take
/// content from; what was written so far stays on disk.
pub fn write_tree(root: &Path, target_bytes: u64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::with_seed(seed);
    let shelf = Shelf::gather(&mut rng)?;
    let mut desk = Desk::new(&mut rng, &shelf);
    let mut stats = Stats::default();
    while stats.bytes() < target_bytes {
        let left = target_bytes - stats.bytes();
        let target = session_bytes(&mut rng).min(left);
        let claude_is_behind = stats.claude.bytes * 2 <= stats.codex.bytes * 3;
        let mut session = desk.next_session(&mut rng, &shelf)?;
        if claude_is_behind {
            stats.claude += write_claude(root, &mut session, target)?;
        } else {
            stats.codex += write_codex(root, &mut session, target)?;
        }
        desk.clock = session.clock;
    }
    Ok(stats)
}

/// A session's size: log-normal around 300 KB, from 20 KB to 6 MB. Most sessions are short;
/// a few long ones hold much of the bytes.
fn session_bytes(rng: &mut Rng) -> u64 {
    (300e3 * (1.3 * normal(rng)).exp()).clamp(20e3, 6e6) as u64
}

// ---------------------------------------------------------------------------------------------
// JSON with fields in the agents' order

/// A JSON value whose objects keep their fields in the order written (serde_json's `Value`
/// sorts them, and the agents do not).
#[derive(Clone, Debug)]
enum Json {
    Null,
    Bool(bool),
    Int(u64),
    Float(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
    /// An object whose keys are data (file paths).
    Map(Vec<(String, Json)>),
}

type Fields = Vec<(&'static str, Json)>;

macro_rules! obj {
    ($($key:literal: $value:expr),* $(,)?) => {
        Json::Obj(vec![$(($key, Json::from($value))),*])
    };
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Int(n) => s.serialize_u64(*n),
            Json::Float(x) => s.serialize_f64(*x),
            Json::Str(text) => s.serialize_str(text),
            Json::Arr(items) => s.collect_seq(items),
            Json::Obj(fields) => s.collect_map(fields.iter().map(|(k, v)| (k, v))),
            Json::Map(fields) => s.collect_map(fields.iter().map(|(k, v)| (k, v))),
        }
    }
}

impl Json {
    /// Compact JSON text, as Codex stores tool arguments and output: a string inside a record.
    fn text(&self) -> String {
        serde_json::to_string(self).expect("a Json value serializes")
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::Str(s.to_owned())
    }
}

impl From<String> for Json {
    fn from(s: String) -> Json {
        Json::Str(s)
    }
}

impl From<&String> for Json {
    fn from(s: &String) -> Json {
        Json::Str(s.clone())
    }
}

impl From<Option<String>> for Json {
    fn from(s: Option<String>) -> Json {
        s.map_or(Json::Null, Json::Str)
    }
}

impl From<u64> for Json {
    fn from(n: u64) -> Json {
        Json::Int(n)
    }
}

impl From<usize> for Json {
    fn from(n: usize) -> Json {
        Json::Int(n as u64)
    }
}

impl From<f64> for Json {
    fn from(x: f64) -> Json {
        Json::Float(x)
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Json {
        Json::Bool(b)
    }
}

impl From<Vec<Json>> for Json {
    fn from(items: Vec<Json>) -> Json {
        Json::Arr(items)
    }
}

impl From<Vec<String>> for Json {
    fn from(items: Vec<String>) -> Json {
        Json::Arr(items.into_iter().map(Json::Str).collect())
    }
}

/// One transcript file being written, and what went into it.
struct Transcript {
    out: BufWriter<File>,
    count: Count,
}

impl Transcript {
    fn create(path: &Path) -> io::Result<Transcript> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let out = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let count = Count {
            files: 1,
            ..Count::default()
        };
        Ok(Transcript { out, count })
    }

    fn write(&mut self, record: &Json) -> io::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.out.write_all(&line)?;
        self.count.records += 1;
        self.count.bytes += line.len() as u64;
        Ok(())
    }

    fn finish(mut self) -> io::Result<Count> {
        self.out.flush()?;
        Ok(self.count)
    }
}

// ---------------------------------------------------------------------------------------------
// Randomness

fn normal(rng: &mut Rng) -> f64 {
    let u = rng.f64().max(f64::MIN_POSITIVE);
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * rng.f64()).cos()
}

/// Log-uniform in [lo, hi): as many values in 1–2 K as in 10–20 K.
fn log_uniform(rng: &mut Rng, lo: f64, hi: f64) -> usize {
    (lo * (hi / lo).powf(rng.f64())) as usize
}

/// An index into `weights`, each chosen in proportion to its weight.
fn weighted(rng: &mut Rng, weights: &[u32]) -> usize {
    let mut pick = rng.u32(0..weights.iter().sum::<u32>());
    for (i, w) in weights.iter().enumerate() {
        if pick < *w {
            return i;
        }
        pick -= w;
    }
    unreachable!("pick is below the sum of the weights")
}

fn pick<'a, T: ?Sized>(rng: &mut Rng, items: &[&'a T]) -> &'a T {
    items[rng.usize(0..items.len())]
}

fn from_alphabet(rng: &mut Rng, alphabet: &[u8], len: usize) -> String {
    (0..len)
        .map(|_| char::from(alphabet[rng.usize(0..alphabet.len())]))
        .collect()
}

fn hex(rng: &mut Rng, len: usize) -> String {
    from_alphabet(rng, b"0123456789abcdef", len)
}

fn alnum(rng: &mut Rng, len: usize) -> String {
    from_alphabet(
        rng,
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        len,
    )
}

/// What a signature, `encrypted_content` or image looks like: random bytes, base64-encoded.
fn base64(rng: &mut Rng, len: usize) -> String {
    from_alphabet(
        rng,
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        len,
    )
}

fn uuid(rng: &mut Rng) -> String {
    let variant = char::from(b"89ab"[rng.usize(0..4)]);
    let (a, b, c) = (hex(rng, 8), hex(rng, 4), hex(rng, 3));
    format!("{a}-{b}-4{c}-{variant}{}-{}", hex(rng, 3), hex(rng, 12))
}

/// A time-ordered UUID (version 7), as Codex names its sessions.
fn uuid_v7(rng: &mut Rng, ms: u64) -> String {
    let t = format!("{:012x}", ms & 0xffff_ffff_ffff);
    let (c, d) = (hex(rng, 3), hex(rng, 3));
    format!("{}-{}-7{c}-a{d}-{}", &t[..8], &t[8..], hex(rng, 12))
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A session's clock, in milliseconds since the epoch.
#[derive(Clone, Copy)]
struct Clock(u64);

impl Clock {
    fn tick(&mut self, rng: &mut Rng, lo_ms: u64, hi_ms: u64) {
        self.0 += rng.u64(lo_ms..hi_ms);
    }

    /// `2025-09-03T10:12:01.123Z`.
    fn stamp(self) -> String {
        humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(self.0)).to_string()
    }

    /// `2025-09-03T10-12-01`, as in a Codex rollout's name.
    fn file_stamp(self) -> String {
        let at = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(self.0));
        at.to_string()[..19].replace(':', "-")
    }
}

// ---------------------------------------------------------------------------------------------
// The machine's text

/// Extensions of the files a session reads and edits.
const SOURCE_EXTENSIONS: &[&str] = &[
    "rs", "c", "h", "cc", "cpp", "hpp", "py", "sh", "toml", "md", "yml", "yaml", "txt",
];

/// Claude Code's Read refuses bigger files; Codex reads them in windows.
const LARGEST_SOURCE: u64 = 256_000;

/// Where the text comes from: projects (a crate's or a header directory's source files),
/// prose paragraphs, the registry's crate names for build output, and Codex's base prompt.
struct Shelf {
    projects: Vec<Project>,
    prose: Vec<String>,
    crates: Vec<String>,
    base_prompt: String,
}

/// A directory of source files a session works in.
struct Project {
    name: String,
    dir: PathBuf,
    /// Paths relative to `dir`, sorted.
    files: Vec<String>,
    rust: bool,
}

impl Shelf {
    fn gather(rng: &mut Rng) -> io::Result<Shelf> {
        let (mut projects, crates) = scan_registries();
        for dir in subdirs(Path::new("/usr/include")) {
            projects.extend(Project::scan(&dir, dir_name(&dir)));
        }
        if projects.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no source files to take transcript content from: the generator reads \
                 ~/.cargo/registry/src (run a cargo build first) and /usr/include",
            ));
        }
        let (prose, long_docs) = match cjk_prose() {
            true => (gather_cjk_prose(), Vec::new()),
            false => gather_prose(&projects),
        };
        let base_prompt = match long_docs.is_empty() {
            true => prose[..prose.len().min(40)].join("\n\n"),
            false => fs::read_to_string(&long_docs[rng.usize(0..long_docs.len())])?,
        };
        Ok(Shelf {
            projects,
            prose,
            crates,
            base_prompt,
        })
    }

    fn paragraph(&self, rng: &mut Rng) -> &str {
        &self.prose[rng.usize(0..self.prose.len())]
    }

    /// `n` consecutive paragraphs of one document, as a longer answer or plan would read.
    fn passage(&self, rng: &mut Rng, n: usize) -> String {
        let start = rng.usize(0..self.prose.len());
        let end = (start + n).min(self.prose.len());
        self.prose[start..end].join("\n\n")
    }

    /// The first sentence of a paragraph, at most 160 bytes.
    fn sentence(&self, rng: &mut Rng) -> String {
        let paragraph = self.paragraph(rng).trim_start_matches(['#', '-', '*', ' ']);
        let end = paragraph.find(". ").map_or(paragraph.len(), |i| i + 1);
        let words: Vec<&str> = clip(&paragraph[..end], 160).split_whitespace().collect();
        words.join(" ").trim_end_matches(['.', ':', ',']).to_owned()
    }
}

/// The crates of the cargo registries on this machine: as projects, and as `name vX.Y.Z` for
/// build output.
fn scan_registries() -> (Vec<Project>, Vec<String>) {
    let mut projects = Vec::new();
    let mut crates = Vec::new();
    for registry in registries() {
        for dir in subdirs(&registry) {
            let label = dir_name(&dir);
            let name = crate_name(&label).to_owned();
            let version = label[name.len()..].trim_start_matches('-');
            crates.push(format!("{name} v{version}"));
            projects.extend(Project::scan(&dir, name));
        }
    }
    (projects, crates)
}

fn registries() -> Vec<PathBuf> {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cargo")));
    cargo_home.map_or_else(Vec::new, |home| subdirs(&home.join("registry/src")))
}

/// The directories in `dir`, sorted; none when it cannot be read.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `serde_json` of `serde_json-1.0.154`: up to the first `-` before a digit.
fn crate_name(label: &str) -> &str {
    let version = label
        .match_indices('-')
        .find(|(i, _)| label[i + 1..].starts_with(|c: char| c.is_ascii_digit()));
    version.map_or(label, |(i, _)| &label[..i])
}

impl Project {
    /// The project in `dir`, if it has enough source files to work on.
    fn scan(dir: &Path, name: String) -> Option<Project> {
        let files: Vec<String> = walkdir::WalkDir::new(dir)
            .max_depth(6)
            .sort_by_file_name()
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file() && is_source(e.path()))
            .filter(|e| {
                let len = e.metadata().map_or(0, |m| m.len());
                (100..=LARGEST_SOURCE).contains(&len)
            })
            .filter_map(|e| {
                let rel = e.path().strip_prefix(dir).ok()?.to_str()?.to_owned();
                let hidden = rel.starts_with('.') || rel.contains("/.");
                (!hidden && !rel.starts_with("target/")).then_some(rel)
            })
            .collect();
        let rust = files.iter().any(|f| f == "Cargo.toml");
        let dir = dir.to_owned();
        (files.len() >= 8).then_some(Project {
            name,
            dir,
            files,
            rust,
        })
    }
}

fn is_source(path: &Path) -> bool {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    SOURCE_EXTENSIONS.contains(&ext)
}

/// Paragraphs of prose from the projects' Markdown and `/usr/share/doc`'s text files, and the
/// projects' Markdown documents long enough to stand for Codex's base prompt (12–40 KB).
fn gather_prose(projects: &[Project]) -> (Vec<String>, Vec<PathBuf>) {
    let markdown: Vec<PathBuf> = projects
        .iter()
        .flat_map(|p| {
            let markdown = p.files.iter().filter(|f| f.ends_with(".md"));
            markdown.map(|f| p.dir.join(f))
        })
        .collect();
    let mut prose = Vec::new();
    let mut long_docs = Vec::new();
    for doc in markdown.into_iter().chain(shared_docs()) {
        let Ok(text) = fs::read_to_string(&doc) else {
            continue;
        };
        let from_a_project = !doc.starts_with("/usr/share/doc");
        if from_a_project && (12_000..40_000).contains(&text.len()) {
            long_docs.push(doc);
        }
        let paragraphs = text.split("\n\n").filter(|p| is_prose(p));
        prose.extend(paragraphs.map(unwrap_lines));
    }
    if prose.is_empty() {
        prose.push("The project builds and its tests pass.".to_owned());
    }
    (prose, long_docs)
}

/// True when `REAL_SHAPED_PROSE=cjk` asks for Chinese, Japanese and Korean prose.
pub fn cjk_prose() -> bool {
    std::env::var("REAL_SHAPED_PROSE").is_ok_and(|v| v == "cjk")
}

/// Paragraphs of the Chinese, Japanese and Korean man pages of this machine, their roff
/// markup taken out: the runs of lines that hold such characters, joined.
fn gather_cjk_prose() -> Vec<String> {
    let mut pages: Vec<PathBuf> = ["ja", "ko", "zh_CN", "zh_TW"]
        .iter()
        .flat_map(|lang| walkdir::WalkDir::new(Path::new("/usr/share/man").join(lang)))
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    pages.sort();
    let mut prose = Vec::new();
    for page in pages {
        let Ok(file) = File::open(&page) else {
            continue;
        };
        let mut text = String::new();
        if io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text).is_err() {
            continue;
        }
        let mut paragraph = String::new();
        for line in text.lines().map(roff_text) {
            if line.chars().any(|c| c as u32 >= 0x3000) {
                paragraph.push_str(line.trim());
            } else if paragraph.chars().count() >= 40 {
                prose.push(std::mem::take(&mut paragraph));
            } else {
                paragraph.clear();
            }
        }
    }
    assert!(
        !prose.is_empty(),
        "REAL_SHAPED_PROSE=cjk: no Chinese, Japanese or Korean man page under /usr/share/man"
    );
    prose
}

/// A line of a man page without its roff: a request's name, font changes and escapes.
fn roff_text(line: &str) -> String {
    let line = match line.strip_prefix(['.', '\'']) {
        Some(request) => request.split_once(' ').map_or("", |(_, rest)| rest),
        None => line,
    };
    let mut out = line.to_owned();
    for escape in ["\\fB", "\\fI", "\\fR", "\\fP", "\\&", "\\-", "\""] {
        out = out.replace(escape, if escape == "\\-" { "-" } else { "" });
    }
    out
}

/// The Markdown and text files of `/usr/share/doc`, at most 12 a package so that one with
/// hundreds (git's release notes) does not make up most of the prose.
fn shared_docs() -> Vec<PathBuf> {
    let mut docs = Vec::new();
    for package in subdirs(Path::new("/usr/share/doc")) {
        let files = walkdir::WalkDir::new(package)
            .sort_by_file_name()
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file())
            .map(|e| e.into_path())
            .filter(|p| p.extension().is_some_and(|e| e == "md" || e == "txt"));
        docs.extend(files.take(12));
    }
    docs
}

/// A paragraph without its hard line breaks, as a model writes it: one line per paragraph
/// or list item.
fn unwrap_lines(paragraph: &str) -> String {
    let mut out = String::with_capacity(paragraph.len());
    for line in paragraph.trim().lines().map(str::trim) {
        let item = line.starts_with(['-', '*', '+', '#'])
            || line
                .split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok());
        if !out.is_empty() {
            out.push(if item { '\n' } else { ' ' });
        }
        out.push_str(line);
    }
    out
}

/// A paragraph a person could have written: mostly letters, not a table, a code block or a
/// license's boilerplate.
fn is_prose(paragraph: &str) -> bool {
    let p = paragraph.trim();
    let letters = p.chars().filter(|c| c.is_alphabetic() || *c == ' ').count();
    (80..=1500).contains(&p.len())
        && p.starts_with(|c: char| c.is_alphabetic() || "-*#`".contains(c))
        && !p.contains("```")
        && !p.starts_with('|')
        && letters * 10 >= p.len() * 7
}

// ---------------------------------------------------------------------------------------------
// A session's project

/// The project as one session sees it: the files it works on (edits applied), which of them
/// it has read, what it changed.
struct Workspace<'a> {
    project: &'a Project,
    cwd: String,
    files: Vec<WorkFile>,
    /// `Compiling … v…` lines of the first build.
    dependencies: Vec<String>,
    built: bool,
    /// Unified diff hunks of every edit so far, for `git diff`.
    diffs: Vec<String>,
}

struct WorkFile {
    rel: String,
    text: String,
    read: bool,
    edited: bool,
    /// The next line `sed -n` shows.
    next_line: usize,
}

/// One change to a file: the strings an Edit tool call replaces, and where.
struct Edit {
    file: usize,
    old: String,
    new: String,
    /// 1-based line of `old`'s first line.
    line: usize,
    original: String,
}

impl<'a> Workspace<'a> {
    /// Loads 6–30 of `project`'s files, big ones less often (a session works on a few
    /// modules, not on every generated table); source files come first, since a session
    /// mostly works on them. `None` when none of them could be read as UTF-8.
    fn open(
        rng: &mut Rng,
        project: &'a Project,
        cwd: String,
        shelf: &Shelf,
    ) -> Option<Workspace<'a>> {
        let mut order: Vec<usize> = (0..project.files.len()).collect();
        rng.shuffle(&mut order);
        let wanted = 6 + rng.usize(0..25);
        let mut files: Vec<WorkFile> = order
            .into_iter()
            .filter_map(|i| WorkFile::load(project, &project.files[i]))
            .filter(|f| rng.f64() < 16_000.0 / f.text.len() as f64)
            .take(wanted)
            .collect();
        if files.is_empty() {
            return None;
        }
        files.sort_by_key(|f| !is_code(&f.rel));
        let deps = rng.usize(3..80).min(shelf.crates.len());
        let dependencies = (0..deps)
            .map(|_| shelf.crates[rng.usize(0..shelf.crates.len())].clone())
            .collect();
        Some(Workspace {
            project,
            cwd,
            files,
            dependencies,
            built: false,
            diffs: Vec::new(),
        })
    }

    /// A file to look at: one of the first three (the session's focus) more often than not,
    /// so that a session reads the same file several times.
    fn pick(&self, rng: &mut Rng) -> usize {
        match rng.f64() < 0.6 {
            true => rng.usize(0..self.files.len().min(3)),
            false => rng.usize(0..self.files.len()),
        }
    }

    fn path(&self, i: usize) -> String {
        format!("{}/{}", self.cwd, self.files[i].rel)
    }

    /// A name from file `i`, for a search or a question about it.
    fn identifier(&self, rng: &mut Rng, i: usize) -> String {
        let lines: Vec<&str> = self.files[i].text.lines().collect();
        for _ in 0..20 {
            let line = lines.get(rng.usize(0..lines.len().max(1))).unwrap_or(&"");
            let names: Vec<&str> = identifiers(line).collect();
            if !names.is_empty() {
                return names[rng.usize(0..names.len())].to_owned();
            }
        }
        let rel = &self.files[i].rel;
        let stem = Path::new(rel).file_stem().and_then(|s| s.to_str());
        stem.unwrap_or("main").to_owned()
    }

    /// `path:line:text` for each line holding `pattern`, at most `limit`.
    fn grep(&self, pattern: &str, limit: usize) -> Vec<String> {
        let mut hits = Vec::new();
        for file in &self.files {
            for (n, line) in file.text.lines().enumerate() {
                if line.contains(pattern) {
                    hits.push(format!("{}:{}:{}", file.rel, n + 1, clip(line, 300)));
                    if hits.len() == limit {
                        return hits;
                    }
                }
            }
        }
        hits
    }

    /// Functions defined in the Rust files, as `cargo test` would name tests.
    fn test_names(&self, limit: usize) -> Vec<String> {
        let mut names = Vec::new();
        for file in self.files.iter().filter(|f| f.rel.ends_with(".rs")) {
            let module = file.rel.trim_end_matches(".rs").replace('/', "::");
            let module = module.trim_start_matches("src::");
            for line in file.text.lines() {
                let Some(at) = line.find("fn ") else { continue };
                if let Some(name) = identifiers(&line[at + 3..]).next() {
                    names.push(format!("{module}::tests::{name}"));
                }
            }
        }
        names.truncate(limit);
        names
    }

    /// Changes a few lines of file `i` (adds a comment, copies a line, drops one, renames a
    /// name) and keeps the change; `None` when no stretch of the file is unique enough.
    fn edit(&mut self, rng: &mut Rng, shelf: &Shelf, i: usize) -> Option<Edit> {
        let (old, new, line) = {
            let text = &self.files[i].text;
            let lines: Vec<&str> = text.lines().collect();
            (0..8).find_map(|_| {
                let start = rng.usize(0..lines.len().max(1));
                let n = rng.usize(1..7).min(lines.len().saturating_sub(start));
                let old = lines.get(start..start + n)?.join("\n");
                let unique = old.trim().len() >= 12 && text.matches(&old).count() == 1;
                let new = rewrite(rng, shelf, &lines[start..start + n], &self.files[i].rel);
                (unique && new != old).then_some((old, new, start + 1))
            })?
        };
        let file = &mut self.files[i];
        let changed = file.text.replacen(&old, &new, 1);
        let original = std::mem::replace(&mut file.text, changed);
        file.edited = true;
        let edit = Edit {
            file: i,
            old,
            new,
            line,
            original,
        };
        self.diffs.push(edit.diff(&self.files[i].rel));
        Some(edit)
    }
}

impl WorkFile {
    fn load(project: &Project, rel: &str) -> Option<WorkFile> {
        let text = fs::read_to_string(project.dir.join(rel)).ok()?;
        Some(WorkFile {
            rel: rel.to_owned(),
            text,
            read: false,
            edited: false,
            next_line: 1,
        })
    }
}

fn is_code(rel: &str) -> bool {
    let ext = rel.rsplit('.').next().unwrap_or("");
    ["rs", "c", "h", "cc", "cpp", "hpp", "py"].contains(&ext)
}

const KEYWORDS: &[&str] = &[
    "self",
    "Self",
    "true",
    "false",
    "return",
    "struct",
    "impl",
    "const",
    "static",
    "where",
    "match",
    "else",
    "while",
    "loop",
    "define",
    "include",
    "ifdef",
    "ifndef",
    "endif",
    "unsigned",
    "char",
    "void",
    "enum",
    "type",
    "with",
    "that",
    "this",
    "from",
    "pub(crate)",
];

fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.len() >= 4 && w.starts_with(|c: char| c.is_ascii_alphabetic()))
        .filter(|w| !KEYWORDS.contains(w))
}

/// `lines` changed the way an agent changes code: a comment added, a line copied with a
/// name changed, a line dropped, a name changed throughout.
fn rewrite(rng: &mut Rng, shelf: &Shelf, lines: &[&str], rel: &str) -> String {
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let names: Vec<&str> = lines.iter().flat_map(|l| identifiers(l)).collect();
    let variant = rng.usize(0..4);
    if (variant == 1 || variant == 3) && !names.is_empty() {
        let name = names[rng.usize(0..names.len())];
        let suffix = pick(rng, &["_checked", "_inner", "_len", "_or_default"]);
        let renamed = format!("{name}{suffix}");
        match variant {
            1 => {
                let at = out.iter().position(|l| l.contains(name)).unwrap_or(0);
                let copy = out[at].replace(name, &renamed);
                out.insert(at + 1, copy);
            }
            _ => out = out.iter().map(|l| l.replace(name, &renamed)).collect(),
        }
    } else if variant == 2 && out.len() > 1 {
        out.remove(rng.usize(0..out.len()));
    } else {
        let indent: String = lines[0].chars().take_while(|c| c.is_whitespace()).collect();
        let comment = format!("{indent}{} {}", comment_prefix(rel), shelf.sentence(rng));
        out.insert(0, comment);
    }
    out.join("\n")
}

fn comment_prefix(rel: &str) -> &'static str {
    match rel.rsplit('.').next().unwrap_or("") {
        "toml" | "py" | "sh" | "yml" | "yaml" => "#",
        "md" | "txt" => "",
        _ => "//",
    }
}

/// Lines `from..=to` (1-based) of `text` as Claude Code shows a file: right-aligned numbers
/// and an arrow.
fn numbered(text: &str, from: usize, to: usize) -> String {
    let mut out = String::with_capacity(text.len() + (to - from + 1) * 8);
    let lines = text.lines().enumerate().skip(from - 1).take(to + 1 - from);
    for (n, line) in lines {
        out.push_str(&format!("{:>6}→{line}\n", n + 1));
    }
    out
}

fn window(text: &str, from: usize, to: usize) -> String {
    let lines = text.lines().skip(from - 1).take(to + 1 - from);
    lines.map(|l| format!("{l}\n")).collect()
}

impl Edit {
    /// The change as a hunk: three lines of context each side, then the removed and added
    /// lines.
    fn hunk_lines(&self) -> (usize, Vec<String>) {
        let lines: Vec<&str> = self.original.lines().collect();
        let old_len = self.old.lines().count();
        let from = self.line.saturating_sub(4);
        let to = (self.line - 1 + old_len + 3).min(lines.len());
        let mut hunk: Vec<String> = lines[from..self.line - 1]
            .iter()
            .map(|l| format!(" {l}"))
            .collect();
        hunk.extend(self.old.lines().map(|l| format!("-{l}")));
        hunk.extend(self.new.lines().map(|l| format!("+{l}")));
        let after = lines.get(self.line - 1 + old_len..to).unwrap_or(&[]);
        hunk.extend(after.iter().map(|l| format!(" {l}")));
        (from + 1, hunk)
    }

    /// The change as `git diff` prints it.
    fn diff(&self, rel: &str) -> String {
        let (start, hunk) = self.hunk_lines();
        let old = hunk.iter().filter(|l| !l.starts_with('+')).count();
        let new = hunk.iter().filter(|l| !l.starts_with('-')).count();
        let mut out = format!(
            "diff --git a/{rel} b/{rel}\nindex {:07x}..{:07x} 100644\n--- a/{rel}\n+++ b/{rel}\n\
             @@ -{start},{old} +{start},{new} @@\n",
            xxhash_rust::xxh3::xxh3_64(self.original.as_bytes()) >> 36,
            xxhash_rust::xxh3::xxh3_64(self.new.as_bytes()) >> 36,
        );
        for line in hunk {
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    /// Claude Code's `structuredPatch`.
    fn structured_patch(&self) -> Json {
        let (start, hunk) = self.hunk_lines();
        let old = hunk.iter().filter(|l| !l.starts_with('+')).count();
        let new = hunk.iter().filter(|l| !l.starts_with('-')).count();
        let hunk = obj!("oldStart": start, "oldLines": old, "newStart": start,
            "newLines": new, "lines": hunk);
        Json::Arr(vec![hunk])
    }
}

// ---------------------------------------------------------------------------------------------
// Sessions: who, where, when

/// What lasts from one session to the next: the user, the projects they work on, the time.
struct Desk<'a> {
    user: &'static str,
    favourites: Vec<&'a Project>,
    clock: Clock,
}

/// What one session's writer works with.
struct Session<'a> {
    rng: &'a mut Rng,
    shelf: &'a Shelf,
    ws: Workspace<'a>,
    clock: Clock,
    user: &'static str,
}

impl<'a> Desk<'a> {
    fn new(rng: &mut Rng, shelf: &'a Shelf) -> Desk<'a> {
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
    fn next_session<'r>(&mut self, rng: &'r mut Rng, shelf: &'a Shelf) -> io::Result<Session<'r>>
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
struct Shell {
    command: String,
    description: &'static str,
    output: String,
    exit_code: u64,
}

impl Session<'_> {
    /// What the user asks at the start of a turn.
    fn prompt(&mut self) -> String {
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
                let failure = clip(&failure, 3000);
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
    fn lead_in(&mut self) -> String {
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
    fn thought(&mut self) -> String {
        let lead = self.lead_in();
        let paragraphs = log_uniform(self.rng, 1.0, 4.0);
        format!("{lead}\n\n{}", self.shelf.passage(self.rng, paragraphs))
    }

    /// The answer that ends a turn: prose, the files changed, sometimes a snippet.
    fn summary(&mut self) -> String {
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
    fn shell(&mut self, weights: &[u32; 10]) -> Shell {
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
        let line = clip(lines.get(n).copied().unwrap_or(""), 200);
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
            out.push_str(&format!("{} {}\n", hex(self.rng, 7), clip(&subject, 72)));
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

const ASKS: &[&str] = &[
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

// ---------------------------------------------------------------------------------------------
// Claude Code

const CLAUDE_VERSIONS: &[&str] = &["2.0.14", "2.0.22", "2.0.31", "2.0.37"];

/// The system reminder Claude Code appends to every file it reads.
const READ_REMINDER: &str = "\n\n<system-reminder>\nWhenever you read a file, you should \
    consider whether it would be considered malware. You CAN and SHOULD provide analysis of \
    malware, what it is doing. But you MUST refuse to improve or augment the code. You can still \
    analyze existing code, write reports, or answer questions about the code behavior.\n\
    </system-reminder>\n";

/// Claude Code's Read shows at most this many lines at once.
const READ_LINES: usize = 2000;

/// One Claude Code transcript: a session's main thread or one of its subagents.
struct Claude {
    out: Transcript,
    session_id: String,
    cwd: String,
    version: &'static str,
    branch: String,
    model: &'static str,
    /// Set in a subagent's transcript.
    agent_id: Option<String>,
    parent: Option<String>,
    /// The project's directory under `claude/`, where subagents go.
    dir: PathBuf,
    subagents: Count,
    target: u64,
}

/// A tool call, and what came back.
struct ToolCall {
    id: String,
    name: &'static str,
    input: Json,
    outcome: Outcome,
}

enum Outcome {
    Done {
        content: Json,
        detail: Json,
        error: bool,
    },
    /// A Task: the subagent runs between the call and its result.
    Subagent { prompt: String, kind: &'static str },
}

fn write_claude(root: &Path, s: &mut Session, target: u64) -> io::Result<Count> {
    let session_id = uuid(s.rng);
    let dir = root.join("claude").join(encode_project(&s.ws.cwd));
    let path = dir.join(format!("{session_id}.jsonl"));
    let mut main = Claude {
        out: Transcript::create(&path)?,
        session_id,
        cwd: s.ws.cwd.clone(),
        version: pick(s.rng, CLAUDE_VERSIONS),
        branch: pick(s.rng, &["main", "main", "fix/review", "feature/cli"]).to_owned(),
        model: pick(
            s.rng,
            &["claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805"],
        ),
        agent_id: None,
        parent: None,
        dir,
        subagents: Count::default(),
        target,
    };
    while main.spent() < target {
        main.turn(s)?;
    }
    if s.rng.f64() < 0.3 {
        let title = s.shelf.sentence(s.rng);
        let id = main.session_id.clone();
        let record = obj!("type": "custom-title", "customTitle": title, "sessionId": id);
        main.out.write(&record)?;
    }
    let mut count = main.subagents;
    count += main.out.finish()?;
    Ok(count)
}

/// Claude Code's directory name for a project: `/home/u/src/a_b` is `-home-u-src-a-b`.
fn encode_project(cwd: &str) -> String {
    let encode = |c: char| if c.is_ascii_alphanumeric() { c } else { '-' };
    cwd.chars().map(encode).collect()
}

impl Claude {
    fn spent(&self) -> u64 {
        self.out.count.bytes + self.subagents.bytes
    }

    /// A prompt, tool calls until the work is done (or the session's bytes are), an answer.
    fn turn(&mut self, s: &mut Session) -> io::Result<()> {
        s.clock.tick(s.rng, 20_000, 900_000);
        self.snapshot(s)?;
        let prompt = s.prompt();
        self.prompt(s, prompt)?;
        let steps = log_uniform(s.rng, 1.0, 20.0);
        for _ in 0..steps {
            if self.spent() >= self.target {
                break;
            }
            self.step(s)?;
        }
        let answer = s.summary();
        self.assistant(s, vec![obj!("type": "text", "text": answer)], "end_turn")
    }

    /// The envelope every record carries, around `head` (type, message…) and before `tail`.
    fn emit(&mut self, s: &mut Session, head: Fields, tail: Fields) -> io::Result<()> {
        s.clock.tick(s.rng, 30, 3000);
        let uuid = uuid(s.rng);
        let mut fields: Fields = Vec::with_capacity(head.len() + tail.len() + 11);
        fields.push(("parentUuid", self.parent.replace(uuid.clone()).into()));
        fields.push(("isSidechain", self.agent_id.is_some().into()));
        fields.push(("userType", "external".into()));
        fields.push(("cwd", (&self.cwd).into()));
        fields.push(("sessionId", (&self.session_id).into()));
        fields.push(("version", self.version.into()));
        fields.push(("gitBranch", (&self.branch).into()));
        if let Some(agent) = &self.agent_id {
            fields.push(("agentId", agent.into()));
        }
        fields.extend(head);
        fields.push(("uuid", uuid.into()));
        fields.push(("timestamp", s.clock.stamp().into()));
        fields.extend(tail);
        self.out.write(&Json::Obj(fields))
    }

    /// Claude Code's backup list of the files changed so far, written before each prompt.
    fn snapshot(&mut self, s: &mut Session) -> io::Result<()> {
        if self.agent_id.is_some() {
            return Ok(());
        }
        let id = uuid(s.rng);
        let stamp = s.clock.stamp();
        let backups = (s.ws.files.iter().filter(|f| f.edited))
            .map(|f| {
                let name = format!("{:016x}@v2", xxhash_rust::xxh3::xxh3_64(f.rel.as_bytes()));
                let backup = obj!("backupFileName": name,
                    "version": 2u64, "backupTime": &stamp);
                (f.rel.clone(), backup)
            })
            .collect();
        let snapshot = obj!("messageId": &id, "trackedFileBackups": Json::Map(backups),
            "timestamp": &stamp);
        let record = obj!("type": "file-history-snapshot", "messageId": id,
            "snapshot": snapshot, "isSnapshotUpdate": false);
        self.out.write(&record)
    }

    fn prompt(&mut self, s: &mut Session, text: String) -> io::Result<()> {
        let content = match s.rng.f64() < 0.0025 {
            // A pasted screenshot: random bytes stand for the PNG.
            true => {
                let len = log_uniform(s.rng, 50e3, 500e3);
                let data = format!("iVBORw0KGgo{}", base64(s.rng, len));
                let source = obj!("type": "base64", "media_type": "image/png", "data": data);
                Json::Arr(vec![
                    obj!("type": "text", "text": text),
                    obj!("type": "image", "source": source),
                ])
            }
            false => text.into(),
        };
        let thinking = obj!("level": "high", "disabled": false, "triggers": Json::Arr(vec![]));
        let head = vec![
            ("type", "user".into()),
            ("message", obj!("role": "user", "content": content)),
        ];
        self.emit(s, head, vec![("thinkingMetadata", thinking)])
    }

    /// One response of the model: maybe thinking, maybe a line of text, one to three tool
    /// calls; then their results.
    fn step(&mut self, s: &mut Session) -> io::Result<()> {
        let calls = match s.rng.f64() < 0.06 {
            true => (0..s.rng.usize(2..4)).map(|_| self.read(s)).collect(),
            false => vec![self.tool_call(s)],
        };
        let mut blocks = Vec::new();
        if s.rng.f64() < 0.45 {
            let thinking = s.thought();
            let signature = format!("Eu{}", base64(s.rng, 200 + (thinking.len() / 3).min(2000)));
            blocks.push(obj!("type": "thinking", "thinking": thinking, "signature": signature));
        }
        if s.rng.f64() < 0.35 {
            blocks.push(obj!("type": "text", "text": s.lead_in()));
        }
        for call in &calls {
            blocks.push(obj!("type": "tool_use", "id": &call.id, "name": call.name,
                "input": call.input.clone()));
        }
        self.assistant(s, blocks, "tool_use")?;
        for call in calls {
            self.tool_result(s, call)?;
        }
        Ok(())
    }

    /// One record per content block, as Claude Code writes a streamed response: the same
    /// message id, request id and usage on each.
    fn assistant(&mut self, s: &mut Session, blocks: Vec<Json>, stop: &str) -> io::Result<()> {
        let id = format!("msg_01{}", alnum(s.rng, 22));
        let request = format!("req_011C{}", alnum(s.rng, 20));
        let usage = self.usage(s);
        let last = blocks.len().saturating_sub(1);
        for (i, block) in blocks.into_iter().enumerate() {
            let stop_reason = if i == last { stop.into() } else { Json::Null };
            let message = obj!("model": self.model, "id": &id, "type": "message",
                "role": "assistant", "content": vec![block], "stop_reason": stop_reason,
                "stop_sequence": Json::Null, "usage": usage.clone());
            let head = vec![
                ("message", message),
                ("requestId", (&request).into()),
                ("type", "assistant".into()),
            ];
            self.emit(s, head, Vec::new())?;
        }
        Ok(())
    }

    /// Tokens as the API counts them: the context (about a token per 4 bytes so far, and the
    /// system prompt) is mostly read from the cache.
    fn usage(&self, s: &mut Session) -> Json {
        let fresh = s.rng.u64(0..4000);
        let cached = 14_000 + self.out.count.bytes / 4;
        let cache = obj!("ephemeral_5m_input_tokens": fresh, "ephemeral_1h_input_tokens": 0u64);
        obj!("input_tokens": s.rng.u64(1..12), "cache_creation_input_tokens": fresh,
            "cache_read_input_tokens": cached, "cache_creation": cache,
            "output_tokens": s.rng.u64(1..1500), "service_tier": "standard")
    }

    fn tool_result(&mut self, s: &mut Session, call: ToolCall) -> io::Result<()> {
        let (content, detail, error) = match call.outcome {
            Outcome::Done {
                content,
                detail,
                error,
            } => (content, detail, error),
            Outcome::Subagent { prompt, kind } => {
                let (content, detail) = self.subagent(s, prompt, kind)?;
                (content, detail, false)
            }
        };
        let mut block = vec![
            ("tool_use_id", Json::from(call.id)),
            ("type", "tool_result".into()),
            ("content", content),
        ];
        if error {
            block.push(("is_error", true.into()));
        }
        let message = obj!("role": "user", "content": vec![Json::Obj(block)]);
        let head = vec![("type", "user".into()), ("message", message)];
        self.emit(s, head, vec![("toolUseResult", detail)])
    }

    /// The next tool call, in about the mix of a real session: commands, reads and searches
    /// most, edits often, a new file or a subagent now and then.
    fn tool_call(&mut self, s: &mut Session) -> ToolCall {
        // A subagent only looks: it neither edits nor starts subagents of its own.
        let main = self.agent_id.is_none() as u32;
        let weights = [20, 12, 4, 28, 18 * main, main, 5, main];
        match weighted(s.rng, &weights) {
            0 => self.read(s),
            1 => self.grep(s),
            2 => self.glob(s),
            3 => self.bash(s),
            4 => self.edit(s),
            5 => self.write(s),
            6 => self.todo(s),
            _ => self.task(s),
        }
    }

    fn call(
        s: &mut Session,
        name: &'static str,
        input: Json,
        content: Json,
        detail: Json,
    ) -> ToolCall {
        ToolCall {
            id: format!("toolu_01{}", alnum(s.rng, 22)),
            name,
            input,
            outcome: Outcome::Done {
                content,
                detail,
                error: false,
            },
        }
    }

    fn read(&mut self, s: &mut Session) -> ToolCall {
        let i = s.ws.pick(s.rng);
        self.read_file(s, i)
    }

    /// Reads file `i` whole, or a window of it when it is longer than Read shows at once.
    fn read_file(&mut self, s: &mut Session, i: usize) -> ToolCall {
        let path = s.ws.path(i);
        let file = &mut s.ws.files[i];
        file.read = true;
        let total = file.text.lines().count().max(1);
        let (from, input) = match total > READ_LINES {
            true => {
                let from = 1 + s.rng.usize(0..total - READ_LINES / 2);
                (
                    from,
                    obj!("file_path": &path, "offset": from, "limit": READ_LINES),
                )
            }
            false => (1, obj!("file_path": &path)),
        };
        let to = (from + READ_LINES - 1).min(total);
        let content = format!("{}{READ_REMINDER}", numbered(&file.text, from, to));
        let raw = match total > READ_LINES {
            true => window(&file.text, from, to),
            false => file.text.clone(),
        };
        let file_detail = obj!("filePath": path, "content": raw, "numLines": to + 1 - from,
            "startLine": from, "totalLines": total);
        let detail = obj!("type": "text", "file": file_detail);
        Claude::call(s, "Read", input, content.into(), detail)
    }

    fn grep(&mut self, s: &mut Session) -> ToolCall {
        let i = s.ws.pick(s.rng);
        let pattern = s.ws.identifier(s.rng, i);
        let hits = s.ws.grep(&pattern, 120);
        let path = format!("{}/src", s.ws.cwd);
        match s.rng.f64() < 0.6 {
            true => {
                let content = hits.join("\n");
                let input = obj!("pattern": &pattern, "path": path, "output_mode": "content",
                    "-n": true);
                let detail = obj!("mode": "content", "numFiles": 0u64,
                    "filenames": Json::Arr(vec![]), "content": &content, "numLines": hits.len());
                Claude::call(s, "Grep", input, content.into(), detail)
            }
            false => {
                let mut files: Vec<String> = (hits.iter())
                    .filter_map(|h| h.split(':').next())
                    .map(|rel| format!("{}/{rel}", s.ws.cwd))
                    .collect();
                files.dedup();
                let content = format!("Found {} files\n{}", files.len(), files.join("\n"));
                let input = obj!("pattern": pattern, "path": path);
                let detail = obj!("mode": "files_with_matches", "filenames": files.clone(),
                    "numFiles": files.len());
                Claude::call(s, "Grep", input, content.into(), detail)
            }
        }
    }

    fn glob(&mut self, s: &mut Session) -> ToolCall {
        let ext = s.ws.files[0]
            .rel
            .rsplit('.')
            .next()
            .unwrap_or("rs")
            .to_owned();
        let pattern = format!("**/*.{ext}");
        let files: Vec<String> = (s.ws.project.files.iter())
            .filter(|f| f.ends_with(&format!(".{ext}")))
            .take(100)
            .map(|f| format!("{}/{f}", s.ws.cwd))
            .collect();
        let duration = s.rng.u64(5..400);
        let detail = obj!("filenames": files.clone(), "durationMs": duration,
            "numFiles": files.len(), "truncated": files.len() == 100);
        let input = obj!("pattern": pattern);
        Claude::call(s, "Glob", input, files.join("\n").into(), detail)
    }

    fn bash(&mut self, s: &mut Session) -> ToolCall {
        let shell = s.shell(&[20, 25, 12, 8, 6, 8, 5, 6, 6, 4]);
        let input = obj!("command": &shell.command, "description": shell.description);
        let detail = obj!("stdout": &shell.output, "stderr": "", "interrupted": false,
            "isImage": false);
        let mut call = Claude::call(s, "Bash", input, Json::Null, detail);
        let failed = shell.exit_code != 0;
        if let Outcome::Done { content, error, .. } = &mut call.outcome {
            *content = match failed {
                true => format!("Exit code {}\n{}", shell.exit_code, shell.output).into(),
                false => shell.output.into(),
            };
            *error = failed;
        }
        call
    }

    /// An Edit of a file read before (Claude Code refuses to edit a file it has not read, so
    /// an unread file is read first).
    fn edit(&mut self, s: &mut Session) -> ToolCall {
        let i = s.ws.pick(s.rng);
        if !s.ws.files[i].read {
            return self.read_file(s, i);
        }
        let Some(edit) = s.ws.edit(s.rng, s.shelf, i) else {
            return self.read_file(s, i);
        };
        let path = s.ws.path(edit.file);
        let text = &s.ws.files[edit.file].text;
        let shown_from = edit.line.saturating_sub(4).max(1);
        let shown_to = edit.line + edit.new.lines().count() + 4;
        let content = format!(
            "The file {path} has been updated. Here's the result of running `cat -n` on a \
             snippet of the edited file:\n{}",
            numbered(text, shown_from, shown_to)
        );
        let input = obj!("file_path": &path, "old_string": &edit.old, "new_string": &edit.new);
        let detail = obj!("filePath": path, "oldString": &edit.old, "newString": &edit.new,
            "originalFile": &edit.original, "structuredPatch": edit.structured_patch(),
            "userModified": false, "replaceAll": false);
        Claude::call(s, "Edit", input, content.into(), detail)
    }

    /// A new file: another of the project's files, as a stand-in for what the model writes.
    fn write(&mut self, s: &mut Session) -> ToolCall {
        let project = s.ws.project;
        let rel = &project.files[s.rng.usize(0..project.files.len())];
        let Some(mut file) = WorkFile::load(project, rel) else {
            return self.read(s);
        };
        file.rel = match rel.rsplit_once('.') {
            Some((stem, ext)) => format!("{stem}_new.{ext}"),
            None => format!("{rel}_new"),
        };
        file.edited = true;
        file.read = true;
        let path = format!("{}/{}", s.ws.cwd, file.rel);
        let content = format!("File created successfully at: {path}");
        let input = obj!("file_path": &path, "content": &file.text);
        let detail = obj!("type": "create", "filePath": path, "content": &file.text,
            "structuredPatch": Json::Arr(vec![]));
        s.ws.files.push(file);
        Claude::call(s, "Write", input, content.into(), detail)
    }

    fn todo(&mut self, s: &mut Session) -> ToolCall {
        let n = s.rng.usize(2..7);
        let done = s.rng.usize(0..n);
        let todos: Vec<Json> = (0..n)
            .map(|k| {
                let i = s.ws.pick(s.rng);
                let task = format!(
                    "{} `{}` in {}",
                    pick(s.rng, ASKS),
                    s.ws.identifier(s.rng, i),
                    s.ws.files[i].rel
                );
                let status = match k.cmp(&done) {
                    std::cmp::Ordering::Less => "completed",
                    std::cmp::Ordering::Equal => "in_progress",
                    std::cmp::Ordering::Greater => "pending",
                };
                let active = format!("Working on: {task}");
                obj!("content": task, "status": status, "activeForm": active)
            })
            .collect();
        let content = "Todos have been modified successfully. Ensure that you continue to use the \
            todo list to track your progress. Please proceed with the current tasks if applicable";
        let input = obj!("todos": todos.clone());
        let detail = obj!("oldTodos": Json::Arr(vec![]), "newTodos": todos);
        Claude::call(s, "TodoWrite", input, content.into(), detail)
    }

    fn task(&mut self, s: &mut Session) -> ToolCall {
        let i = s.ws.pick(s.rng);
        let name = s.ws.identifier(s.rng, i);
        let description = format!("Find uses of {name}");
        let prompt = format!(
            "Find every place `{name}` is used in {} and what each caller expects. {}.",
            s.ws.cwd,
            s.shelf.sentence(s.rng)
        );
        let kind = pick(s.rng, &["Explore", "general-purpose"]);
        let input = obj!("description": description, "prompt": &prompt, "subagent_type": kind);
        ToolCall {
            id: format!("toolu_01{}", alnum(s.rng, 22)),
            name: "Task",
            input,
            outcome: Outcome::Subagent { prompt, kind },
        }
    }

    /// Runs a subagent in its own transcript beside the session's, and gives what the Task
    /// tool returns: its last answer, and the run's summary.
    fn subagent(
        &mut self,
        s: &mut Session,
        prompt: String,
        kind: &str,
    ) -> io::Result<(Json, Json)> {
        let agent = hex(s.rng, 8);
        let mut sub = self.sidechain(&agent)?;
        sub.prompt(s, prompt.clone())?;
        let tools = log_uniform(s.rng, 2.0, 25.0);
        for _ in 0..tools {
            sub.step(s)?;
        }
        let answer = s.summary();
        sub.assistant(s, vec![obj!("type": "text", "text": &answer)], "end_turn")?;
        self.subagents += sub.out.finish()?;
        let usage = obj!("input_tokens": s.rng.u64(1..50),
            "output_tokens": s.rng.u64(100..3000));
        let content = Json::Arr(vec![obj!("type": "text", "text": answer)]);
        let detail = obj!("status": "completed", "prompt": prompt, "agentId": agent,
            "agentType": kind, "content": content.clone(),
            "totalDurationMs": s.rng.u64(5000..300_000), "totalTokens": s.rng.u64(5000..90_000),
            "totalToolUseCount": tools, "usage": usage);
        Ok((content, detail))
    }

    /// A subagent's transcript: the session's envelope, marked as a sidechain of `agent`.
    fn sidechain(&self, agent: &str) -> io::Result<Claude> {
        let path = (self.dir.join(&self.session_id).join("subagents"))
            .join(format!("agent-{agent}.jsonl"));
        Ok(Claude {
            out: Transcript::create(&path)?,
            session_id: self.session_id.clone(),
            cwd: self.cwd.clone(),
            version: self.version,
            branch: self.branch.clone(),
            model: "claude-haiku-4-5-20251001",
            agent_id: Some(agent.to_owned()),
            parent: None,
            dir: self.dir.clone(),
            subagents: Count::default(),
            target: u64::MAX,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Codex

const CODEX_VERSION: &str = "0.46.0";

/// One Codex rollout.
struct Codex {
    out: Transcript,
    cwd: String,
    /// Input, cached input, output and reasoning tokens so far.
    tokens: [u64; 4],
}

fn write_codex(root: &Path, s: &mut Session, target: u64) -> io::Result<Count> {
    let id = uuid_v7(s.rng, s.clock.0);
    let stamp = s.clock.file_stamp();
    let (year, month, day) = (&stamp[..4], &stamp[5..7], &stamp[8..10]);
    let path = root.join(format!(
        "codex/{year}/{month}/{day}/rollout-{stamp}-{id}.jsonl"
    ));
    let mut rollout = Codex {
        out: Transcript::create(&path)?,
        cwd: s.ws.cwd.clone(),
        tokens: [0; 4],
    };
    rollout.meta(s, id)?;
    while rollout.out.count.bytes < target {
        rollout.turn(s, target)?;
    }
    rollout.out.finish()
}

impl Codex {
    fn item(&mut self, s: &mut Session, kind: &str, payload: Json) -> io::Result<()> {
        s.clock.tick(s.rng, 20, 2500);
        let record = obj!("timestamp": s.clock.stamp(), "type": kind, "payload": payload);
        self.out.write(&record)
    }

    /// The session's first records: its metadata with the base prompt, the project's
    /// instructions (its README standing for AGENTS.md) and the environment.
    fn meta(&mut self, s: &mut Session, id: String) -> io::Result<()> {
        let project = &s.ws.project.name;
        let git = obj!("commit_hash": hex(s.rng, 40), "branch": "main",
            "repository_url": format!("git@github.com:{}/{project}.git", s.user));
        let meta = obj!("id": id, "timestamp": s.clock.stamp(), "cwd": &self.cwd,
            "originator": "codex_cli_rs", "cli_version": CODEX_VERSION,
            "instructions": &s.shelf.base_prompt, "source": "cli", "model_provider": "openai",
            "git": git);
        self.item(s, "session_meta", meta)?;
        if let Some(readme) = s.ws.files.iter().find(|f| f.rel.ends_with(".md")) {
            let text = format!(
                "<user_instructions>\n\n{}\n\n</user_instructions>",
                clip(&readme.text, 8000)
            );
            self.item(s, "response_item", message("user", "input_text", text))?;
        }
        let environment = format!(
            "<environment_context>\n  <cwd>{}</cwd>\n  \
             <approval_policy>on-request</approval_policy>\n  \
             <sandbox_mode>workspace-write</sandbox_mode>\n  \
             <network_access>restricted</network_access>\n  \
             <shell>bash</shell>\n</environment_context>",
            self.cwd
        );
        self.item(
            s,
            "response_item",
            message("user", "input_text", environment),
        )
    }

    /// The turn's settings, a prompt, steps until the work is done (or the session's bytes
    /// are), an answer.
    fn turn(&mut self, s: &mut Session, target: u64) -> io::Result<()> {
        s.clock.tick(s.rng, 20_000, 900_000);
        self.item(s, "turn_context", self.turn_context())?;
        let prompt = s.prompt();
        let asked = message("user", "input_text", prompt.clone());
        self.item(s, "response_item", asked)?;
        let event = obj!("type": "user_message", "message": prompt, "images": Json::Arr(vec![]));
        self.item(s, "event_msg", event)?;
        for _ in 0..log_uniform(s.rng, 2.0, 30.0) {
            if self.out.count.bytes >= target {
                break;
            }
            self.step(s)?;
        }
        let answer = s.summary();
        let event = obj!("type": "agent_message", "message": &answer);
        self.item(s, "event_msg", event)?;
        let answered = message("assistant", "output_text", answer);
        self.item(s, "response_item", answered)?;
        self.token_count(s)
    }

    fn turn_context(&self) -> Json {
        let sandbox = obj!("mode": "workspace-write", "network_access": false,
            "exclude_tmpdir_env_var": false, "exclude_slash_tmp": false);
        obj!("cwd": &self.cwd, "approval_policy": "on-request", "sandbox_policy": sandbox,
            "model": "gpt-5-codex", "effort": "medium", "summary": "auto")
    }

    /// One response of the model: reasoning, a command or a patch, its output, the tokens.
    fn step(&mut self, s: &mut Session) -> io::Result<()> {
        if s.rng.f64() < 0.5 {
            self.reasoning(s)?;
        }
        let call_id = format!("call_{}", alnum(s.rng, 24));
        let edited = s.rng.f64() < 0.2 && self.apply_patch(s, &call_id)?;
        if !edited {
            self.shell(s, &call_id)?;
        }
        self.token_count(s)
    }

    fn reasoning(&mut self, s: &mut Session) -> io::Result<()> {
        let i = s.ws.pick(s.rng);
        let name = s.ws.identifier(s.rng, i);
        let title = pick(s.rng, REASONING_TITLES);
        let text = format!("**{title} `{name}`**\n\n{}", s.shelf.paragraph(s.rng));
        let len = log_uniform(s.rng, 300.0, 2400.0);
        let encrypted = format!("gAAAAAB{}", base64(s.rng, len));
        let summary = vec![obj!("type": "summary_text", "text": &text)];
        self.item(
            s,
            "event_msg",
            obj!("type": "agent_reasoning", "text": text),
        )?;
        let item = obj!("type": "reasoning", "summary": summary, "content": Json::Null,
            "encrypted_content": encrypted);
        self.item(s, "response_item", item)
    }

    fn shell(&mut self, s: &mut Session, call_id: &str) -> io::Result<()> {
        let shell = s.shell(&[8, 12, 6, 6, 3, 5, 5, 14, 35, 2]);
        let arguments = obj!("command": vec!["bash".to_owned(), "-lc".to_owned(), shell.command],
            "workdir": &self.cwd, "timeout_ms": 120_000u64);
        let call = obj!("type": "function_call", "name": "shell", "arguments": arguments.text(),
            "call_id": call_id);
        self.item(s, "response_item", call)?;
        let secs = s.rng.u32(1..300) as f64 / 10.0;
        let metadata = obj!("exit_code": shell.exit_code, "duration_seconds": secs);
        let output = obj!("output": shell.output, "metadata": metadata);
        let result = obj!("type": "function_call_output", "call_id": call_id,
            "output": output.text());
        self.item(s, "response_item", result)
    }

    /// Codex's edit: a patch through the apply_patch tool. False when there was nothing it
    /// had read to change.
    fn apply_patch(&mut self, s: &mut Session, call_id: &str) -> io::Result<bool> {
        let i = s.ws.pick(s.rng);
        if !s.ws.files[i].read {
            return Ok(false);
        }
        let Some(edit) = s.ws.edit(s.rng, s.shelf, i) else {
            return Ok(false);
        };
        let rel = s.ws.files[edit.file].rel.clone();
        let (_, hunk) = edit.hunk_lines();
        let input = format!(
            "*** Begin Patch\n*** Update File: {rel}\n@@\n{}\n*** End Patch",
            hunk.join("\n")
        );
        let call = obj!("type": "custom_tool_call", "status": "completed", "call_id": call_id,
            "name": "apply_patch", "input": input);
        self.item(s, "response_item", call)?;
        let metadata = obj!("exit_code": 0u64, "duration_seconds": 0.0);
        let output = obj!("output": format!("Success. Updated the following files:\nM {rel}\n"),
            "metadata": metadata);
        let result = obj!("type": "custom_tool_call_output", "call_id": call_id,
            "output": output.text());
        self.item(s, "response_item", result)?;
        Ok(true)
    }

    fn token_count(&mut self, s: &mut Session) -> io::Result<()> {
        let last = [
            8_000 + self.out.count.bytes / 4,
            self.out.count.bytes / 5,
            s.rng.u64(20..2000),
            s.rng.u64(0..1500),
        ];
        for (total, add) in self.tokens.iter_mut().zip(last) {
            *total += add;
        }
        let info = obj!("total_token_usage": token_usage(self.tokens),
            "last_token_usage": token_usage(last), "model_context_window": 272_000u64);
        let window = |minutes: u64, s: &mut Session| {
            obj!("used_percent": s.rng.u32(0..100) as f64, "window_minutes": minutes,
                "resets_in_seconds": s.rng.u64(0..minutes * 60))
        };
        let limits = obj!("primary": window(299, s), "secondary": window(10079, s));
        let payload = obj!("type": "token_count", "info": info, "rate_limits": limits);
        self.item(s, "event_msg", payload)
    }
}

const REASONING_TITLES: &[&str] = &[
    "Inspecting",
    "Reviewing",
    "Checking",
    "Planning changes to",
    "Updating",
    "Considering",
    "Verifying",
    "Searching for",
];

fn message(role: &str, kind: &str, text: String) -> Json {
    let content = vec![obj!("type": kind, "text": text)];
    obj!("type": "message", "role": role, "content": content)
}

fn token_usage([input, cached, output, reasoning]: [u64; 4]) -> Json {
    obj!("input_tokens": input, "cached_input_tokens": cached, "output_tokens": output,
        "reasoning_output_tokens": reasoning, "total_tokens": input + output)
}
