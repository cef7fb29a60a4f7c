//! The machine's text a tree is made of: source projects, and paragraphs of prose.

use super::cjk_prose;
use fastrand::Rng;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use transcript_sync::prefix_of;

/// Extensions of the files a session reads and edits.
const SOURCE_EXTENSIONS: &[&str] = &[
    "rs", "c", "h", "cc", "cpp", "hpp", "py", "sh", "toml", "md", "yml", "yaml", "txt",
];

/// Claude Code's Read refuses bigger files; Codex reads them in windows.
const LARGEST_SOURCE: u64 = 256_000;

/// Where the text comes from: projects (a crate's or a header directory's source files),
/// prose paragraphs, the registry's crate names for build output, and Codex's base prompt.
pub(super) struct Shelf {
    pub(super) projects: Vec<Project>,
    prose: Vec<String>,
    pub(super) crates: Vec<String>,
    pub(super) base_prompt: String,
}

/// A directory of source files a session works in.
pub(super) struct Project {
    pub(super) name: String,
    pub(super) dir: PathBuf,
    /// Paths relative to `dir`, sorted.
    pub(super) files: Vec<String>,
    pub(super) rust: bool,
}

impl Shelf {
    pub(super) fn gather(rng: &mut Rng) -> io::Result<Shelf> {
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

    pub(super) fn paragraph(&self, rng: &mut Rng) -> &str {
        &self.prose[rng.usize(0..self.prose.len())]
    }

    /// `n` consecutive paragraphs of one document, as a longer answer or plan would read.
    pub(super) fn passage(&self, rng: &mut Rng, n: usize) -> String {
        let start = rng.usize(0..self.prose.len());
        let end = (start + n).min(self.prose.len());
        self.prose[start..end].join("\n\n")
    }

    /// The first sentence of a paragraph, at most 160 bytes.
    pub(super) fn sentence(&self, rng: &mut Rng) -> String {
        let paragraph = self.paragraph(rng).trim_start_matches(['#', '-', '*', ' ']);
        let end = paragraph.find(". ").map_or(paragraph.len(), |i| i + 1);
        let words: Vec<&str> = prefix_of(&paragraph[..end], 160)
            .split_whitespace()
            .collect();
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
