//! Watcher definitions: one `watchers/NAME.toml` per agent harness, embedded at build time,
//! resolved into the roots a pass scans.

use crate::domain::{DatabaseReader, SnapshotFormat, SnapshotSpec as Spec, StartAt};
use crate::error::{Error, Result};
use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The embedded definitions, sorted by name.
const DEFINITIONS: &[(&str, &str)] = &[
    ("aider", include_str!("../../watchers/aider.toml")),
    ("amp", include_str!("../../watchers/amp.toml")),
    (
        "claude-code",
        include_str!("../../watchers/claude-code.toml"),
    ),
    ("cline", include_str!("../../watchers/cline.toml")),
    ("codex", include_str!("../../watchers/codex.toml")),
    (
        "copilot-cli",
        include_str!("../../watchers/copilot-cli.toml"),
    ),
    ("crush", include_str!("../../watchers/crush.toml")),
    ("cursor", include_str!("../../watchers/cursor.toml")),
    ("droid", include_str!("../../watchers/droid.toml")),
    ("gemini-cli", include_str!("../../watchers/gemini-cli.toml")),
    ("generic", include_str!("../../watchers/generic.toml")),
    ("gptme", include_str!("../../watchers/gptme.toml")),
    ("kilo-code", include_str!("../../watchers/kilo-code.toml")),
    (
        "mistral-vibe",
        include_str!("../../watchers/mistral-vibe.toml"),
    ),
    ("opencode", include_str!("../../watchers/opencode.toml")),
    ("pi", include_str!("../../watchers/pi.toml")),
    ("qwen-code", include_str!("../../watchers/qwen-code.toml")),
];

/// The harness name of directories given with `--watch`.
pub(crate) const GENERIC: &str = "generic";

/// The glob of `--watch` and `[[watch]]` directories unless one is given.
pub(crate) const DEFAULT_GLOB: &str = "**/*.jsonl";

/// One watcher definition.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Watcher {
    /// Unique name, equal to the file stem; recorded as each source's harness.
    pub name: String,
    /// What it watches, for people.
    pub description: String,
    /// Environment variable naming the harness's home directory, if it has one.
    #[serde(default)]
    pub home_env: Option<String>,
    /// The home directory when `home_env` is unset; `~` is the user's home.
    #[serde(default)]
    pub home_default: Option<String>,
    /// Directories under the home that hold transcripts.
    pub roots: Vec<String>,
    /// Which files under a root are transcripts appended to, relative to the root; none when
    /// the agent keeps only snapshot files.
    #[serde(default)]
    pub glob: Option<String>,
    /// Whether `run` without `--watch` uses it.
    #[serde(default = "yes")]
    pub builtin: bool,
    /// Files under the roots that the agent rewrites whole, and where they keep messages:
    /// the first table whose glob matches a file says how it is read.
    #[serde(default)]
    pub snapshot: Vec<SnapshotDef>,
    /// SQLite databases under the roots that the agent keeps its sessions in, and how to read
    /// them.
    #[serde(default)]
    pub database: Vec<DatabaseDef>,
    /// A file in which the agent lists its projects, each a root too.
    #[serde(default)]
    pub projects: Option<ProjectsDef>,
}

/// A watcher's `[projects]` table: a JSON file under the home in which the agent lists the
/// directories it keeps each project's sessions in (Crush's `projects.json`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProjectsDef {
    /// The file, relative to the home.
    pub file: String,
    /// JSON pointer to the list of projects.
    pub list: String,
    /// JSON pointer, inside a project, to its directory: a root.
    pub dir: String,
}

/// A watcher's `[[database]]` table: which files are the agent's SQLite databases, and which
/// reader knows their tables.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DatabaseDef {
    /// Which files under a root are such databases, relative to the root.
    pub glob: String,
    /// The reader that knows its tables (`opencode`, `crush`).
    pub reader: DatabaseReader,
}

/// A watcher's `[[snapshot]]` table: which files are JSON documents rewritten whole (not
/// appended), and where each keeps its list of messages.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SnapshotDef {
    /// Which files under a root are such documents, relative to the root.
    pub glob: String,
    /// JSON pointer to the list of messages (empty for a document that is the list); none
    /// for a document that is one record as a whole (a session's manifest).
    #[serde(default)]
    pub messages: Option<String>,
    /// JSON pointer, inside a message, to its id; empty to key messages by their place.
    #[serde(default)]
    pub key: String,
    /// `json` (the default) or `aider` (Aider's Markdown chat history).
    #[serde(default)]
    pub format: SnapshotFormat,
}

fn yes() -> bool {
    true
}

/// One directory to scan, with the watcher it belongs to.
#[derive(Clone, Debug)]
pub struct Root {
    /// Absolute path of the directory.
    pub path: PathBuf,
    /// The watcher's name.
    pub harness: String,
    /// What the watcher watches, for people.
    pub description: String,
    /// Matches transcript paths relative to `path`.
    pub glob: GlobMatcher,
    /// Where files present at this root's first scan start.
    pub start_at: StartAt,
    /// Files under it that are rewritten whole (not appended), and how to read them.
    pub snapshot: Arc<Vec<SnapshotRoot>>,
    /// The agent's SQLite databases under it (matched by these globs), and their readers.
    pub(crate) database: Arc<Vec<(GlobMatcher, DatabaseReader)>>,
    /// Which directories under it can hold a file of its globs: the others are neither
    /// scanned nor watched.
    pub(crate) reach: Arc<Reach>,
}

/// The directories under a root that its globs reach: each glob as its path's components
/// (`None` for `**`, which reaches any depth), or `None` for one it cannot be split into
/// components (a brace holding `/`), which reaches every directory.
#[derive(Debug)]
pub(crate) struct Reach(Vec<Option<Vec<Option<GlobMatcher>>>>);

impl Reach {
    /// The reach of `globs`, for a test's roots.
    #[cfg(test)]
    pub(crate) fn of_globs<'a>(globs: impl Iterator<Item = &'a str>) -> Result<Reach> {
        Reach::of(globs)
    }

    fn of<'a>(globs: impl Iterator<Item = &'a str>) -> Result<Reach> {
        let split = |glob: &str| -> Result<Option<Vec<Option<GlobMatcher>>>> {
            let mut braces = 0;
            for c in glob.chars() {
                match c {
                    '{' => braces += 1,
                    '}' => braces -= 1,
                    '/' if braces > 0 => return Ok(None),
                    _ => {}
                }
            }
            let parts = glob.split('/').map(|c| match c {
                "**" => Ok(None),
                c => matcher(c, true).map(Some),
            });
            parts.collect::<Result<Vec<_>>>().map(Some)
        };
        globs.map(split).collect::<Result<Vec<_>>>().map(Reach)
    }

    /// Whether `dir`, a directory under the root (relative to it; empty for the root), can
    /// hold a file of one of the globs, or a directory that can.
    pub(crate) fn holds(&self, dir: &Path) -> bool {
        let names: Vec<&std::ffi::OsStr> = dir.iter().collect();
        self.0.iter().any(|glob| match glob {
            None => true,
            Some(parts) => reaches(parts, &names),
        })
    }
}

/// Whether a glob of components `parts` reaches the directory of components `names`: each
/// name matches the component at its place, and a file's component is left after them.
fn reaches(parts: &[Option<GlobMatcher>], names: &[&std::ffi::OsStr]) -> bool {
    for (i, name) in names.iter().enumerate() {
        match parts.get(i) {
            None => return false,
            Some(None) => return true,
            Some(Some(part)) if !part.is_match(name) => return false,
            Some(Some(_)) => {}
        }
    }
    parts.len() > names.len()
}

/// The snapshot files of a root: which, and where their messages are.
#[derive(Debug)]
pub struct SnapshotRoot {
    /// Matches their paths relative to the root.
    pub(crate) glob: GlobMatcher,
    /// Where a document keeps its messages.
    pub(crate) spec: Spec,
}

impl Root {
    /// True when `path` lies under this root and matches one of its globs.
    pub fn matches(&self, path: &Path) -> bool {
        (path.strip_prefix(&self.path)).is_ok_and(|relative| self.matches_relative(relative))
    }

    /// True when `relative`, a path under this root, is a transcript, a snapshot file or a
    /// database.
    pub(crate) fn matches_relative(&self, relative: &Path) -> bool {
        self.glob.is_match(relative)
            || self.snapshot.iter().any(|s| s.glob.is_match(relative))
            || self.database.iter().any(|(g, _)| g.is_match(relative))
    }

    /// The reader of `path` when it is one of this root's databases (not its `-wal` or
    /// `-shm`).
    pub(crate) fn database_reader(&self, path: &Path) -> Option<DatabaseReader> {
        let relative = path.strip_prefix(&self.path).ok()?;
        let mut dbs = self.database.iter();
        dbs.find(|(g, _)| g.is_match(relative)).map(|(_, r)| *r)
    }

    /// True when `path` is one of this root's databases (not its `-wal` or `-shm`).
    pub(crate) fn is_database(&self, path: &Path) -> bool {
        self.database_reader(path).is_some()
    }

    /// The database that `path`, a database's `-wal` file or a file in a store's folder,
    /// belongs to: a change to it is a change to the database (in WAL mode, writes reach the
    /// database file itself only at a checkpoint).
    pub(crate) fn database_of(&self, path: &Path) -> Option<PathBuf> {
        let stores = self.database.iter().filter(|(_, r)| r.is_store());
        for (glob, _) in stores {
            // A store is named by a file in its folder, whose glob is its literal path.
            let named = self.path.join(glob.glob().glob());
            let folder = named.parent()?;
            if path.starts_with(folder) && path != named {
                return Some(named);
            }
        }
        let name = path.file_name()?.to_str()?;
        let main = name.strip_suffix("-wal")?;
        let main = path.with_file_name(main);
        self.is_database(&main).then_some(main)
    }

    /// How to read `path` when it is a snapshot file of this root (a document rewritten
    /// whole); `None` for an appended transcript.
    pub(crate) fn snapshot_of(&self, path: &Path) -> Option<&Spec> {
        let relative = path.strip_prefix(&self.path).ok()?;
        let snapshot = self.snapshot.iter().find(|s| s.glob.is_match(relative))?;
        Some(&snapshot.spec)
    }
}

/// The names of the embedded watchers (the built-in ones and `generic`), sorted.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    DEFINITIONS.iter().map(|(name, _)| *name)
}

/// Every embedded watcher definition.
pub(crate) fn watchers() -> Result<Vec<Watcher>> {
    DEFINITIONS
        .iter()
        .map(|(name, text)| {
            toml::from_str(text).map_err(|source| Error::Watcher {
                name: name.to_string(),
                source,
            })
        })
        .collect()
}

/// The database `harness` keeps its sessions in, when it keeps them in one (by its watcher's
/// `[[database]]` glob), for a message that names it.
pub(crate) fn database_of_harness(harness: &str) -> Option<String> {
    static DATABASES: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    let databases = DATABASES.get_or_init(|| {
        let all = watchers().unwrap_or_default().into_iter();
        all.filter_map(|w| Some((w.name, w.database.first()?.glob.clone())))
            .collect()
    });
    (databases.iter()).find_map(|(name, glob)| (name == harness).then(|| glob.clone()))
}

/// The roots of the built-in watchers, resolved against the environment.
pub fn builtin_roots(env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Root>> {
    builtin_roots_where(env, &|_, builtin| builtin)
}

/// The roots of the watchers for which `enabled(name, builtin)` is true.
pub(crate) fn builtin_roots_where(
    env: &dyn Fn(&str) -> Option<String>,
    enabled: &dyn Fn(&str, bool) -> bool,
) -> Result<Vec<Root>> {
    let mut roots = Vec::new();
    let chosen = watchers()?.into_iter().filter(|w| w.name != GENERIC);
    for w in chosen.filter(|w| enabled(&w.name, w.builtin)) {
        let home = watcher_home(&w, env)?;
        // No appended transcripts: a glob that no file under the root matches.
        let glob = w.glob.as_deref().unwrap_or("");
        for dir in &w.roots {
            roots.push(root(home.join(dir), &w, glob)?);
        }
        for dir in w
            .projects
            .as_ref()
            .map_or(Vec::new(), |p| listed_projects(&home, p))
        {
            roots.push(root(dir, &w, glob)?);
        }
    }
    Ok(roots)
}

/// The project directories the agent lists in its `[projects]` file, as they are when this
/// is called: none when there is no such file; a file that cannot be read as the table says
/// is logged and lists none.
fn listed_projects(home: &Path, def: &ProjectsDef) -> Vec<PathBuf> {
    let path = home.join(&def.file);
    let text = match std::fs::read(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            log::warn!("cannot read the projects listed in {path:?}: {e}");
            return Vec::new();
        }
    };
    let value: serde_json::Value = match serde_json::from_slice(&text) {
        Ok(value) => value,
        Err(e) => {
            log::warn!("cannot read the projects listed in {path:?}: {e}");
            return Vec::new();
        }
    };
    let projects = value.pointer(&def.list).and_then(|l| l.as_array());
    let dirs = projects.into_iter().flatten();
    let dirs = dirs
        .filter_map(|p| p.pointer(&def.dir)?.as_str())
        .map(PathBuf::from);
    // Only absolute directories: a relative one would be relative to wherever this runs.
    dirs.filter(|d| d.is_absolute()).collect()
}

/// Roots for directories given with `--watch`, all of the generic harness.
pub fn watch_roots(dirs: &[PathBuf], glob: &str) -> Result<Vec<Root>> {
    let generic = watchers()?
        .into_iter()
        .find(|w| w.name == GENERIC)
        .expect("watchers/generic.toml is embedded");
    dirs.iter()
        .map(|d| root(absolute(d), &generic, glob))
        .collect()
}

/// Roots for directories that `watcher` reads as it reads its own (`[[watch]]` tables with
/// `harness`): by its globs and its snapshot and database tables.
pub(crate) fn roots_of(watcher: &Watcher, dirs: &[PathBuf]) -> Result<Vec<Root>> {
    let glob = watcher.glob.as_deref().unwrap_or("");
    (dirs.iter())
        .map(|d| root(absolute(d), watcher, glob))
        .collect()
}

fn watcher_home(w: &Watcher, env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf> {
    if let Some(dir) = w
        .home_env
        .as_deref()
        .and_then(env)
        .filter(|d| !d.is_empty())
    {
        return Ok(absolute(Path::new(&dir)));
    }
    let default = w.home_default.as_deref().unwrap_or("~");
    crate::platform::home::expand_tilde(Path::new(default), env)
}

/// A root of `watcher` at `path`. A built-in watcher's globs match a path component by
/// component (`*` stays within one), as its reach prunes the walk; the generic watcher's (a
/// `--glob` or a `[[watch]]` glob a person wrote) keep globset's default, where `*` crosses
/// `/`, and reach everywhere.
fn root(path: PathBuf, watcher: &Watcher, glob: &str) -> Result<Root> {
    let generic = watcher.name == GENERIC;
    let matcher = |glob: &str| matcher(glob, !generic);
    let snapshot = (watcher.snapshot.iter())
        .map(|def| {
            Ok(SnapshotRoot {
                glob: matcher(&def.glob)?,
                spec: Spec {
                    messages: def.messages.clone(),
                    key: def.key.clone(),
                    format: def.format,
                },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let database = (watcher.database.iter())
        .map(|def| Ok((matcher(&def.glob)?, def.reader)))
        .collect::<Result<Vec<_>>>()?;
    // A store's folder is reached whole.
    let stores: Vec<String> = (watcher.database.iter())
        .filter(|d| d.reader.is_store())
        .map(|d| {
            format!(
                "{}/**",
                Path::new(&d.glob)
                    .parent()
                    .unwrap_or(Path::new(""))
                    .display()
            )
        })
        .collect();
    let globs = (std::iter::once(glob).filter(|g| !g.is_empty()))
        .chain(watcher.snapshot.iter().map(|d| d.glob.as_str()))
        .chain(watcher.database.iter().map(|d| d.glob.as_str()))
        .chain(stores.iter().map(String::as_str));
    let reach = match generic {
        true => Reach(vec![None]),
        false => Reach::of(globs)?,
    };
    Ok(Root {
        path,
        harness: watcher.name.clone(),
        description: watcher.description.clone(),
        glob: matcher(glob)?,
        start_at: StartAt::default(),
        snapshot: Arc::new(snapshot),
        database: Arc::new(database),
        reach: Arc::new(reach),
    })
}

/// `glob` compiled; with `by_component`, `*` and `?` match within one path component.
fn matcher(glob: &str, by_component: bool) -> Result<GlobMatcher> {
    let compiled = (GlobBuilder::new(glob))
        .literal_separator(by_component)
        .build()
        .map_err(|source| Error::Glob {
            glob: glob.to_owned(),
            source,
        })?;
    Ok(compiled.compile_matcher())
}

/// `path` made absolute against the working directory, without resolving symlinks.
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_watcher_parses_with_a_unique_name_equal_to_its_file() {
        let all = watchers().unwrap();
        let mut names = HashSet::new();
        for (w, (stem, _)) in all.iter().zip(DEFINITIONS) {
            assert_eq!(&w.name, stem);
            assert!(names.insert(w.name.clone()), "duplicate watcher {}", w.name);
            globset::Glob::new(w.glob.as_deref().unwrap_or("")).unwrap();
        }
        let stems: Vec<_> = DEFINITIONS.iter().map(|(s, _)| *s).collect();
        let mut sorted = stems.clone();
        sorted.sort();
        assert_eq!(stems, sorted, "keep DEFINITIONS sorted");
    }

    #[test]
    fn the_definitions_table_lists_every_file_in_watchers() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("watchers");
        let mut on_disk: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        let listed: Vec<_> = DEFINITIONS.iter().map(|(s, _)| s.to_string()).collect();
        assert_eq!(on_disk, listed);
    }

    #[test]
    fn builtin_roots_honour_the_harness_home_variables() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "CODEX_HOME" => Some("/data/codex".to_owned()),
            "GEMINI_CLI_HOME" => Some("/g".to_owned()),
            "COPILOT_HOME" => Some("/c".to_owned()),
            "XDG_DATA_HOME" => Some("/x".to_owned()),
            "PI_CODING_AGENT_DIR" => Some("/p/agent".to_owned()),
            "QWEN_HOME" => Some("/q".to_owned()),
            _ => None,
        };
        let roots: Vec<_> = builtin_roots(&env)
            .unwrap()
            .into_iter()
            .map(|r| (r.harness, r.path))
            .collect();
        assert_eq!(
            roots,
            vec![
                ("amp".into(), PathBuf::from("/x/amp/threads")),
                (
                    "claude-code".into(),
                    PathBuf::from("/home/u/.claude/projects")
                ),
                ("cline".into(), PathBuf::from("/home/u/.cline/data")),
                (
                    "cline".into(),
                    PathBuf::from("/home/u/.config/Code/User/globalStorage/saoudrizwan.claude-dev")
                ),
                ("codex".into(), PathBuf::from("/data/codex/sessions")),
                (
                    "codex".into(),
                    PathBuf::from("/data/codex/archived_sessions")
                ),
                ("copilot-cli".into(), PathBuf::from("/c/session-state")),
                ("cursor".into(), PathBuf::from("/home/u/.cursor/projects")),
                ("droid".into(), PathBuf::from("/home/u/.factory/sessions")),
                ("gemini-cli".into(), PathBuf::from("/g/.gemini/tmp")),
                ("gptme".into(), PathBuf::from("/x/gptme/logs")),
                ("kilo-code".into(), PathBuf::from("/x/kilo")),
                (
                    "mistral-vibe".into(),
                    PathBuf::from("/home/u/.vibe/logs/session")
                ),
                ("opencode".into(), PathBuf::from("/x/opencode")),
                ("pi".into(), PathBuf::from("/p/agent/sessions")),
                ("qwen-code".into(), PathBuf::from("/q/projects")),
            ]
        );
    }

    #[test]
    fn the_gemini_and_cursor_globs_take_chats_and_transcripts_flat_or_nested() {
        let roots = builtin_roots(&|k| (k == "HOME").then(|| "/h".to_owned())).unwrap();
        let glob = |harness: &str| &roots.iter().find(|r| r.harness == harness).unwrap().glob;
        let gemini = glob("gemini-cli");
        assert!(gemini.is_match("3f2a/chats/session-2026-11-30T10-00-ab12cd34.jsonl"));
        assert!(gemini.is_match("3f2a/chats/ab12cd34-parent/sub-1.jsonl"));
        assert!(!gemini.is_match("3f2a/chats/session-2026-11-30T10-00-ab12cd34.json"));
        assert!(!gemini.is_match("3f2a/logs.jsonl"));
        let cursor = glob("cursor");
        assert!(cursor.is_match("home-u-app/agent-transcripts/5e1c.jsonl"));
        assert!(cursor.is_match("home-u-app/agent-transcripts/5e1c/5e1c.jsonl"));
        assert!(!cursor.is_match("home-u-app/worker.jsonl"));
    }

    #[test]
    fn a_root_reaches_the_directories_its_globs_can_match_under() {
        let reach = |globs: &[&str], dir: &str| {
            Reach::of(globs.iter().copied())
                .unwrap()
                .holds(Path::new(dir))
        };
        let aider = [".aider.chat.history.md", "*/.aider.chat.history.md"];
        assert!(reach(&aider, ""));
        assert!(reach(&aider, "app"));
        assert!(!reach(&aider, "app/node_modules"));
        let cline = ["sessions/*/*.messages.json", "tasks/*/{a,b}.json"];
        assert!(reach(&cline, "tasks/17"));
        assert!(!reach(&cline, "cache"));
        assert!(!reach(&cline, "tasks/17/deeper"));
        assert!(reach(&["logs/**"], "logs/a/b/c"));
        assert!(!reach(&["logs/**"], "other"));
        // A brace holding a `/` is not split: every directory.
        assert!(reach(&["{a,b/c}.json"], "x/y"));
        let roots = builtin_roots(&|k| (k == "HOME").then(|| "/h".to_owned())).unwrap();
        let claude = roots.iter().find(|r| r.harness == "claude-code").unwrap();
        assert!(claude.reach.holds(Path::new("-h-proj/abc/subagents")));
        // A built-in glob's `*` stays within a component, as its reach does; a glob a person
        // gave keeps `*` crossing `/`, and reaches everywhere.
        let pi = roots.iter().find(|r| r.harness == "pi").unwrap();
        assert!(pi.matches(Path::new("/h/.pi/agent/sessions/--w--/1_a.jsonl")));
        assert!(!pi.matches(Path::new("/h/.pi/agent/sessions/--w--/x/1_a.jsonl")));
        let given = &watch_roots(&[PathBuf::from("/w")], "*.jsonl").unwrap()[0];
        assert!(given.matches(Path::new("/w/a/b/c.jsonl")));
        assert!(given.reach.holds(Path::new("a/b")));
    }

    #[test]
    fn each_project_crush_lists_is_a_root_and_an_unreadable_list_lists_none() {
        let home = tempfile::tempdir().unwrap();
        let listed = home.path().join(".local/share/crush/projects.json");
        std::fs::create_dir_all(listed.parent().unwrap()).unwrap();
        let home_of = home.path().to_string_lossy().into_owned();
        let env = move |k: &str| (k == "HOME").then(|| home_of.clone());
        let crush = |env: &dyn Fn(&str) -> Option<String>| -> Vec<PathBuf> {
            (builtin_roots(env).unwrap().into_iter())
                .filter(|r| r.harness == "crush")
                .map(|r| r.path)
                .collect()
        };
        assert!(crush(&env).is_empty(), "no projects.json, no roots");
        let projects = r#"{"projects": [
            {"path": "/src/app", "data_dir": "/src/app/.crush"},
            {"path": "rel", "data_dir": "rel/.crush"},
            {"path": "/src/lib"}]}"#;
        std::fs::write(&listed, projects).unwrap();
        assert_eq!(crush(&env), [PathBuf::from("/src/app/.crush")]);
        let roots = builtin_roots(&env).unwrap();
        let app = roots.iter().find(|r| r.harness == "crush").unwrap();
        assert!(app.is_database(Path::new("/src/app/.crush/crush.db")));
        std::fs::write(&listed, "{not json").unwrap();
        assert!(crush(&env).is_empty());
    }

    #[test]
    fn the_claude_glob_includes_subagent_transcripts() {
        let roots = builtin_roots(&|k| (k == "HOME").then(|| "/h".to_owned())).unwrap();
        let claude = &roots
            .iter()
            .find(|r| r.harness == "claude-code")
            .unwrap()
            .glob;
        assert!(claude.is_match("-home-u-proj/abc.jsonl"));
        assert!(claude.is_match("-home-u-proj/abc/subagents/agent-1.jsonl"));
        assert!(!claude.is_match("-home-u-proj/abc.json"));
    }
}
