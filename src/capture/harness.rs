//! Watcher definitions: one `watchers/NAME.toml` per agent harness, embedded at build time,
//! resolved into the roots a pass scans.

use crate::capture::editors::Os;
use crate::domain::{DatabaseReader, SnapshotFormat, SnapshotSpec as Spec, StartAt, TextFormat};
use crate::error::{Error, Result};
use globset::{GlobBuilder, GlobMatcher};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// Directories under the home that hold transcripts; `""` for the home itself.
    pub roots: Vec<String>,
    /// The VS Code extension (`publisher.name`) whose global storage, in every editor of the
    /// VS Code family and its remote servers (`capture::editors`), is a root too.
    #[serde(default)]
    pub extension: Option<String>,
    /// Directories under every editor's user folder (`capture::editors`) that hold sessions
    /// the editor itself keeps (its chat's), as `roots` are under the home; `""` for the user
    /// folder itself.
    #[serde(default)]
    pub editor_roots: Vec<String>,
    /// An editor of the VS Code family (`capture::editors`) whose own user folder on this OS
    /// (`<user data>/User`, where it keeps its state databases) is a root too.
    #[serde(default)]
    pub editor: Option<String>,
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
    /// Where the agent keeps its sessions on macOS, when that is not where it does on Linux.
    #[serde(default)]
    pub mac: Option<Place>,
    /// Where the agent keeps its sessions on Windows, when that is not where it does on Linux.
    #[serde(default)]
    pub windows: Option<Place>,
}

/// A watcher's `[mac]` or `[windows]` table: its home and roots on that OS, in place of
/// `home_env`, `home_default` and `roots`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Place {
    /// Environment variable naming the home directory there, if it has one.
    #[serde(default)]
    pub home_env: Option<String>,
    /// The home directory when `home_env` is unset; `~` is the user's home.
    pub home_default: String,
    /// Directories under the home that hold its sessions.
    pub roots: Vec<String>,
}

impl Watcher {
    /// The watcher as it is on `os`: its home and roots there.
    pub(crate) fn on(mut self, os: Os) -> Watcher {
        let place = match os {
            Os::Linux => None,
            Os::Mac => self.mac.take(),
            Os::Windows => self.windows.take(),
        };
        if let Some(place) = place {
            self.home_env = place.home_env;
            self.home_default = Some(place.home_default);
            self.roots = place.roots;
        }
        self
    }
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
    /// The reader that knows its tables: one its agent's module defines (`opencode`, `crush`).
    pub reader: String,
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
    /// `json` (the default), or a text format its agent's module defines (`aider`, Aider's
    /// Markdown chat history).
    #[serde(default)]
    pub format: Option<String>,
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

/// The project directories the agent lists in its `[projects]` file, as they are when this
/// is called: none when there is no such file; a file that cannot be read as the table says
/// is logged and lists none.
pub(crate) fn listed_projects(home: &Path, def: &ProjectsDef) -> Vec<PathBuf> {
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

/// The home directory of watcher `w`: its variable's value, else its default.
pub(crate) fn watcher_home(w: &Watcher, env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf> {
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

/// The readers an agent's module defines for what its watcher's tables name: its databases'
/// (`[[database]]` `reader`) and its text documents' (`[[snapshot]]` `format`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Formats {
    /// The readers of its databases.
    pub databases: &'static [DatabaseReader],
    /// The text formats of its snapshot documents, beside JSON.
    pub documents: &'static [TextFormat],
}

impl Formats {
    /// No reader beside JSON's: an agent of appended transcripts and JSON documents.
    pub(crate) const NONE: Formats = Formats {
        databases: &[],
        documents: &[],
    };

    /// The reader `def` names.
    fn database(&self, watcher: &str, def: &DatabaseDef) -> Result<DatabaseReader> {
        let found = self.databases.iter().find(|r| r.name() == def.reader);
        let known = || self.databases.iter().map(|r| r.name()).collect();
        found
            .copied()
            .ok_or_else(|| unknown_reader(watcher, "database reader", &def.reader, known()))
    }

    /// The format `def` names.
    fn document(&self, watcher: &str, def: &SnapshotDef) -> Result<SnapshotFormat> {
        let Some(name) = def.format.as_deref().filter(|f| *f != "json") else {
            return Ok(SnapshotFormat::Json);
        };
        if name == "opaque" {
            return Ok(SnapshotFormat::Opaque);
        }
        let found = self.documents.iter().find(|f| f.name == name);
        let known = || self.documents.iter().map(|f| f.name).collect();
        let format =
            found.ok_or_else(|| unknown_reader(watcher, "snapshot format", name, known()))?;
        Ok(SnapshotFormat::Text(*format))
    }
}

fn unknown_reader(watcher: &str, kind: &'static str, name: &str, known: Vec<&str>) -> Error {
    Error::UnknownReader {
        watcher: watcher.to_owned(),
        kind,
        name: name.to_owned(),
        known: match known.is_empty() {
            true => "none".to_owned(),
            false => known.join(", "),
        },
    }
}

/// A root of `watcher` at `path`, read by `formats`. A built-in watcher's globs match a path
/// component by component (`*` stays within one), as its reach prunes the walk; the generic
/// watcher's (a `--glob` or a `[[watch]]` glob a person wrote) keep globset's default, where
/// `*` crosses `/`, and reach everywhere.
pub(crate) fn root(
    path: PathBuf,
    watcher: &Watcher,
    glob: &str,
    formats: &Formats,
) -> Result<Root> {
    let generic = watcher.name == GENERIC;
    let matcher = |glob: &str| matcher(glob, !generic);
    let snapshot = (watcher.snapshot.iter())
        .map(|def| {
            Ok(SnapshotRoot {
                glob: matcher(&def.glob)?,
                spec: Spec {
                    messages: def.messages.clone(),
                    key: def.key.clone(),
                    format: formats.document(&watcher.name, def)?,
                },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let database = (watcher.database.iter())
        .map(|def| Ok((matcher(&def.glob)?, formats.database(&watcher.name, def)?)))
        .collect::<Result<Vec<_>>>()?;
    // A store's folder is reached whole.
    let stores: Vec<String> = (watcher.database.iter().zip(database.iter()))
        .filter(|(_, (_, reader))| reader.is_store())
        .map(|(d, _)| {
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

/// A root at `dir` of the kind `--watch` makes (the generic watcher's: `glob` as given,
/// reaching everywhere), for the tests of the stages below the agents' definitions.
#[cfg(test)]
pub(crate) fn given_root(dir: &Path, glob: &str) -> Root {
    let watcher = Watcher {
        name: GENERIC.to_owned(),
        description: "a directory given with --watch".to_owned(),
        home_env: None,
        home_default: None,
        roots: Vec::new(),
        extension: None,
        editor_roots: Vec::new(),
        editor: None,
        glob: Some(glob.to_owned()),
        builtin: false,
        snapshot: Vec::new(),
        database: Vec::new(),
        projects: None,
        mac: None,
        windows: None,
    };
    let formats = Formats {
        databases: &[],
        documents: &[],
    };
    root(dir.to_owned(), &watcher, glob, &formats).expect("a test's glob compiles")
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
