//! A session's project: the files it reads and edits, and the edits themselves.

use super::json::{Json, obj};
use super::random::pick;
use super::shelf::{Project, Shelf};
use fastrand::Rng;
use std::fs;
use std::path::Path;
use transcript_sync::prefix_of;

/// The project as one session sees it: the files it works on (edits applied), which of them
/// it has read, what it changed.
pub(super) struct Workspace<'a> {
    pub(super) project: &'a Project,
    pub(super) cwd: String,
    pub(super) files: Vec<WorkFile>,
    /// `Compiling … v…` lines of the first build.
    pub(super) dependencies: Vec<String>,
    pub(super) built: bool,
    /// Unified diff hunks of every edit so far, for `git diff`.
    pub(super) diffs: Vec<String>,
}

pub(super) struct WorkFile {
    pub(super) rel: String,
    pub(super) text: String,
    pub(super) read: bool,
    pub(super) edited: bool,
    /// The next line `sed -n` shows.
    pub(super) next_line: usize,
}

/// One change to a file: the strings an Edit tool call replaces, and where.
pub(super) struct Edit {
    pub(super) file: usize,
    pub(super) old: String,
    pub(super) new: String,
    /// 1-based line of `old`'s first line.
    pub(super) line: usize,
    pub(super) original: String,
}

impl<'a> Workspace<'a> {
    /// Loads 6–30 of `project`'s files, big ones less often (a session works on a few
    /// modules, not on every generated table); source files come first, since a session
    /// mostly works on them. `None` when none of them could be read as UTF-8.
    pub(super) fn open(
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
    pub(super) fn pick(&self, rng: &mut Rng) -> usize {
        match rng.f64() < 0.6 {
            true => rng.usize(0..self.files.len().min(3)),
            false => rng.usize(0..self.files.len()),
        }
    }

    pub(super) fn path(&self, i: usize) -> String {
        format!("{}/{}", self.cwd, self.files[i].rel)
    }

    /// A name from file `i`, for a search or a question about it.
    pub(super) fn identifier(&self, rng: &mut Rng, i: usize) -> String {
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
    pub(super) fn grep(&self, pattern: &str, limit: usize) -> Vec<String> {
        let mut hits = Vec::new();
        for file in &self.files {
            for (n, line) in file.text.lines().enumerate() {
                if line.contains(pattern) {
                    hits.push(format!("{}:{}:{}", file.rel, n + 1, prefix_of(line, 300)));
                    if hits.len() == limit {
                        return hits;
                    }
                }
            }
        }
        hits
    }

    /// Functions defined in the Rust files, as `cargo test` would name tests.
    pub(super) fn test_names(&self, limit: usize) -> Vec<String> {
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
    pub(super) fn edit(&mut self, rng: &mut Rng, shelf: &Shelf, i: usize) -> Option<Edit> {
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
    pub(super) fn load(project: &Project, rel: &str) -> Option<WorkFile> {
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
pub(super) fn numbered(text: &str, from: usize, to: usize) -> String {
    let mut out = String::with_capacity(text.len() + (to - from + 1) * 8);
    let lines = text.lines().enumerate().skip(from - 1).take(to + 1 - from);
    for (n, line) in lines {
        out.push_str(&format!("{:>6}→{line}\n", n + 1));
    }
    out
}

pub(super) fn window(text: &str, from: usize, to: usize) -> String {
    let lines = text.lines().skip(from - 1).take(to + 1 - from);
    lines.map(|l| format!("{l}\n")).collect()
}

impl Edit {
    /// The change as a hunk: three lines of context each side, then the removed and added
    /// lines.
    pub(super) fn hunk_lines(&self) -> (usize, Vec<String>) {
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
    pub(super) fn structured_patch(&self) -> Json {
        let (start, hunk) = self.hunk_lines();
        let old = hunk.iter().filter(|l| !l.starts_with('+')).count();
        let new = hunk.iter().filter(|l| !l.starts_with('-')).count();
        let hunk = obj!("oldStart": start, "oldLines": old, "newStart": start,
            "newLines": new, "lines": hunk);
        Json::Arr(vec![hunk])
    }
}
