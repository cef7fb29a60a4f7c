//! Configuration: `config.toml`, the platform's default paths, and how command-line flags
//! override the file. The resolved [`Settings`] are what every command runs with.

use crate::capture::harness::{self, Root, absolute};
use crate::consumers::redact::{RedactSettings, Redactor};
use crate::consumers::sessions::usage::Price;
use crate::consumers::ship::{self, SinkSpec, SinkTable};
use crate::consumers::socket;
use crate::domain::{ReadLimits, StartAt};
use crate::error::{Error, IoContext, Result};
use crate::platform::home;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// The archive's file name inside the data directory.
const ARCHIVE_FILE: &str = "archive.db";
/// The configuration's file name inside the configuration directory.
const CONFIG_FILE: &str = "config.toml";
/// The directory name under the platform's data and configuration directories.
const APP_DIR: &str = "transcript-sync";

pub(crate) use crate::platform::home::Env;

/// The default archive path: `$XDG_DATA_HOME/transcript-sync/archive.db`
/// (`~/.local/share/...` when unset), or `~/Library/Application Support/transcript-sync/`
/// on macOS. The configuration's `archive`, `--db` and `TRANSCRIPT_SYNC_DB` override it.
pub(crate) fn default_archive(env: Env) -> Result<PathBuf> {
    Ok(platform_dir(env, "XDG_DATA_HOME", ".local/share")?.join(ARCHIVE_FILE))
}

/// The default configuration path: `$XDG_CONFIG_HOME/transcript-sync/config.toml`
/// (`~/.config/...` when unset), or `~/Library/Application Support/transcript-sync/` on macOS.
pub(crate) fn default_config(env: Env) -> Result<PathBuf> {
    Ok(platform_dir(env, "XDG_CONFIG_HOME", ".config")?.join(CONFIG_FILE))
}

fn platform_dir(env: Env, xdg: &str, fallback: &str) -> Result<PathBuf> {
    let base = if cfg!(target_os = "macos") {
        home::home(env)?.join("Library/Application Support")
    } else {
        home::xdg_dir(env, xdg, fallback)?
    };
    Ok(base.join(APP_DIR))
}

/// The configuration file as written. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    /// The archive's path.
    #[serde(default, deserialize_with = "some_path")]
    archive: Option<PathBuf>,
    /// Lines longer than this are rejected.
    #[serde(default, deserialize_with = "some_record_limit")]
    record_limit: Option<u64>,
    /// Bytes of one file per commit before the next file's turn.
    #[serde(default, deserialize_with = "some_size")]
    batch_bytes: Option<u64>,
    /// `error`, `warn`, `info`, `debug` or `trace`; `RUST_LOG` wins.
    #[serde(default, deserialize_with = "some_level")]
    log_level: Option<log::LevelFilter>,
    /// How often every root is rescanned, stat only.
    #[serde(default, deserialize_with = "some_interval")]
    rescan_interval: Option<Duration>,
    /// How often a root that cannot be watched is polled, stat only.
    #[serde(default, deserialize_with = "some_interval")]
    poll_interval: Option<Duration>,
    /// Whether records are compressed in the archive.
    #[serde(default)]
    compress: Option<bool>,
    /// Subscribers the socket serves at once.
    #[serde(default)]
    max_subscribers: Option<usize>,
    /// Bytes of records waiting for one subscriber before it is told `lagged`.
    #[serde(default, deserialize_with = "some_size")]
    subscriber_buffer: Option<u64>,
    /// Built-in watchers switched on or off by name.
    #[serde(default)]
    watchers: BTreeMap<toml::Spanned<String>, bool>,
    /// Extra watched directories.
    #[serde(default)]
    watch: Vec<WatchDir>,
    /// Where records are shipped: `[[sink]]` tables.
    #[serde(default)]
    sink: Vec<toml::Spanned<SinkTable>>,
    /// The user's redaction rules and allowlist.
    #[serde(default)]
    redact: Option<toml::Spanned<RedactSettings>>,
    /// Prices of models for `usage` (US dollars per million tokens), over `data/prices.toml`.
    #[serde(default)]
    prices: BTreeMap<String, Price>,
    /// `[ui]`: where the web view is served.
    #[serde(default)]
    ui: UiTable,
    /// The text it was parsed from, to place errors found after parsing.
    #[serde(skip)]
    text: String,
}

/// The `[ui]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UiTable {
    /// The address `ui` serves on; with it, `run` serves the web view as well.
    #[serde(default)]
    listen: Option<std::net::SocketAddr>,
}

/// One `[[watch]]` table: a directory of the generic harness, or one that a watcher reads as
/// its own (`harness`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WatchDir {
    #[serde(deserialize_with = "path")]
    path: PathBuf,
    #[serde(default, deserialize_with = "some_glob")]
    glob: Option<String>,
    #[serde(default)]
    harness: Option<toml::Spanned<String>>,
    #[serde(default)]
    start_at: Option<StartAt>,
}

/// Values given on the command line; each one that is set wins over the file.
#[derive(Clone, Debug, Default)]
pub(crate) struct Overrides {
    /// `--db` or `TRANSCRIPT_SYNC_DB`.
    pub db: Option<PathBuf>,
    /// `--watch` directories: they replace the file's watchers and `[[watch]]` tables.
    pub watch: Vec<PathBuf>,
    /// `--glob` for the `--watch` directories.
    pub glob: Option<String>,
    /// `--start-at`, for every root.
    pub start_at: Option<StartAt>,
    /// `--record-limit`.
    pub record_limit: Option<u64>,
    /// `--batch-bytes`.
    pub batch_bytes: Option<u64>,
    /// `--rescan-interval`.
    pub rescan_interval: Option<Duration>,
    /// `--poll-interval`.
    pub poll_interval: Option<Duration>,
    /// `--ship` destinations, added to the file's sinks.
    pub ship: Vec<String>,
}

/// Where the configuration comes from: `--config` (must exist) or the default path (may not).
#[derive(Clone, Debug)]
pub(crate) struct Source {
    /// The file's path.
    pub path: PathBuf,
    /// True when the path was given (`--config`, `TRANSCRIPT_SYNC_CONFIG`): it must exist.
    pub explicit: bool,
}

impl Source {
    /// `--config` when given, else the platform's default path.
    pub(crate) fn locate(given: Option<&Path>, env: Env) -> Result<Source> {
        Ok(match given {
            Some(p) => Source {
                path: absolute(p),
                explicit: true,
            },
            None => Source {
                // Without a home there is no default file; what it would hold comes from
                // the flags, or the command says what is missing.
                path: match default_config(env) {
                    Err(Error::NoHome) => PathBuf::new(),
                    other => other?,
                },
                explicit: false,
            },
        })
    }

    /// Reads and parses the file. A missing default file is an empty configuration.
    pub(crate) fn load(&self) -> Result<Option<FileConfig>> {
        if self.path.as_os_str().is_empty() {
            return Ok(None);
        }
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !self.explicit => {
                return Ok(None);
            }
            Err(e) => return Err(e).at_path(&self.path),
        };
        parse(&self.path, &text).map(Some)
    }
}

/// Parses configuration text; errors carry the file, line and column.
pub(crate) fn parse(path: &Path, text: &str) -> Result<FileConfig> {
    let parsed: Result<FileConfig> = toml::from_str(text).map_err(|e| {
        let (line, column) = e
            .span()
            .map_or((0, 0), |span| line_and_column(text, span.start));
        Error::Config {
            path: path.to_owned(),
            line,
            column,
            message: e.message().trim_end().to_owned(),
        }
    });
    parsed.map(|file| FileConfig {
        text: text.to_owned(),
        ..file
    })
}

/// One-based line and column (in characters) of byte `at` in `text`.
fn line_and_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// What a command runs with: the file's values under the command line's.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// Where the configuration was looked for, and whether it was found.
    pub source: Source,
    /// True when the file exists and was read.
    pub found: bool,
    /// The archive database.
    pub archive: PathBuf,
    /// The directories to watch.
    pub roots: Vec<Root>,
    /// Record limit and batch size.
    pub limits: ReadLimits,
    /// The log level when `RUST_LOG` is unset.
    pub log_level: log::LevelFilter,
    /// How often every root is rescanned.
    pub rescan_interval: Duration,
    /// How often a root that cannot be watched is polled.
    pub poll_interval: Duration,
    /// Where records are shipped: the file's `[[sink]]` tables, then `--ship`.
    pub sinks: Vec<SinkSpec>,
    /// The built-in redaction rules, with the file's `[redact]` table.
    pub redactor: RedactorSource,
    /// Where `run` listens for subscribers.
    pub socket: PathBuf,
    /// How many subscribers, and how much buffer each.
    pub subscribers: socket::Limits,
    /// Whether records are compressed as they are archived.
    pub compress: bool,
    /// `[prices]`: models' prices for `usage`, over the built-in ones.
    pub prices: BTreeMap<String, Price>,
    /// `[ui] listen`: where the web view is served (by `run` too, when set).
    pub ui_listen: Option<std::net::SocketAddr>,
}

/// Default record limit: 64 MiB.
pub(crate) const DEFAULT_RECORD_LIMIT: u64 = 64 << 20;
/// Default batch: 8 MiB.
pub(crate) const DEFAULT_BATCH_BYTES: u64 = 8 << 20;
/// Default rescan interval.
pub(crate) const DEFAULT_RESCAN: Duration = Duration::from_secs(60);
/// Default poll interval for roots that cannot be watched.
pub(crate) const DEFAULT_POLL: Duration = Duration::from_secs(2);

impl Settings {
    /// Loads `source` and resolves it under `flags`.
    pub(crate) fn load(source: Source, flags: &Overrides, env: Env) -> Result<Settings> {
        let file = source.load()?;
        Settings::resolve(source, file, flags, env)
    }

    /// Defaults, with `archive`, for commands that need nothing else and were given it.
    pub(crate) fn for_archive(source: Source, archive: PathBuf, env: Env) -> Settings {
        Settings {
            socket: socket::socket_path(&archive, env),
            subscribers: socket::Limits::default(),
            source,
            found: false,
            archive,
            roots: Vec::new(),
            limits: ReadLimits {
                record_limit: DEFAULT_RECORD_LIMIT,
                batch_bytes: DEFAULT_BATCH_BYTES,
            },
            log_level: log::LevelFilter::Info,
            rescan_interval: DEFAULT_RESCAN,
            poll_interval: DEFAULT_POLL,
            sinks: Vec::new(),
            redactor: RedactorSource::default(),
            compress: true,
            prices: BTreeMap::new(),
            ui_listen: None,
        }
    }

    /// The file's values (or defaults) under the command line's.
    pub(crate) fn resolve(
        source: Source,
        file: Option<FileConfig>,
        flags: &Overrides,
        env: Env,
    ) -> Result<Settings> {
        let found = file.is_some();
        let file = file.unwrap_or_default();
        let archive = match (&flags.db, &file.archive) {
            (Some(db), _) => absolute(db),
            (None, Some(a)) => home::expand_tilde(a, env)?,
            (None, None) => default_archive(env)?,
        };
        let socket = socket::socket_path(&archive, env);
        let mut roots = roots(&source, &file, flags, env)?;
        if let Some(start_at) = flags.start_at {
            roots.iter_mut().for_each(|r| r.start_at = start_at);
        }
        let redactor = RedactorSource::of(&source, &file);
        let sinks = sinks(&source, &file, flags, &roots, env, &redactor)?;
        let limits = ReadLimits {
            record_limit: flags
                .record_limit
                .or(file.record_limit)
                .unwrap_or(DEFAULT_RECORD_LIMIT),
            batch_bytes: flags
                .batch_bytes
                .or(file.batch_bytes)
                .unwrap_or(DEFAULT_BATCH_BYTES),
        };
        Ok(Settings {
            source,
            found,
            archive,
            roots,
            limits,
            log_level: file.log_level.unwrap_or(log::LevelFilter::Info),
            rescan_interval: flags
                .rescan_interval
                .or(file.rescan_interval)
                .unwrap_or(DEFAULT_RESCAN),
            poll_interval: flags
                .poll_interval
                .or(file.poll_interval)
                .unwrap_or(DEFAULT_POLL),
            sinks,
            redactor,
            socket,
            subscribers: socket::Limits {
                max_subscribers: (file.max_subscribers)
                    .unwrap_or(socket::DEFAULT_MAX_SUBSCRIBERS)
                    .max(1),
                buffer: file.subscriber_buffer.unwrap_or(socket::DEFAULT_BUFFER),
            },
            compress: file.compress.unwrap_or(true),
            prices: file.prices,
            ui_listen: file.ui.listen,
        })
    }

    /// The resolved configuration as TOML, for `config check`.
    pub(crate) fn to_toml(&self) -> String {
        let view = SettingsView {
            archive: self.archive.display().to_string(),
            record_limit: self.limits.record_limit,
            batch_bytes: self.limits.batch_bytes,
            log_level: self.log_level.to_string().to_lowercase(),
            rescan_interval: humantime::format_duration(self.rescan_interval).to_string(),
            poll_interval: humantime::format_duration(self.poll_interval).to_string(),
            compress: self.compress,
            ui_listen: self.ui_listen.map(|a| a.to_string()),
            root: self.roots.iter().map(RootView::of).collect(),
            sink: (self.sinks.iter())
                .map(|s| SinkView {
                    name: s.name.clone(),
                    kind: s.target.kind(),
                    target: s.target.display(),
                    flush_interval: humantime::format_duration(s.flush_interval).to_string(),
                    batch_records: s.batch_records,
                    batch_bytes: s.batch_bytes,
                    redact: s.redact,
                    marks: s.marks,
                    pull_interval: s.pull.map(|p| humantime::format_duration(p).to_string()),
                })
                .collect(),
        };
        toml::to_string(&view).expect("a struct of strings and numbers serializes to TOML")
    }
}

/// The `[[sink]]` tables, then the `--ship` arguments (named by type, with a number when a
/// name is taken); names are unique.
fn sinks(
    source: &Source,
    file: &FileConfig,
    flags: &Overrides,
    roots: &[Root],
    env: Env,
    redactor: &RedactorSource,
) -> Result<Vec<SinkSpec>> {
    if file.sink.is_empty() && flags.ship.is_empty() {
        return Ok(Vec::new());
    }
    let redactor = &redactor.get()?;
    let roots: Vec<(PathBuf, String)> = (roots.iter())
        .map(|r| (r.path.clone(), r.harness.clone()))
        .collect();
    let mut sinks: Vec<SinkSpec> = Vec::new();
    for table in &file.sink {
        let at = |message: String| {
            let (line, column) = line_and_column(&file.text, table.span().start);
            Error::Config {
                path: source.path.clone(),
                line,
                column,
                message,
            }
        };
        let table_paths = expand_sink_paths(table.get_ref(), env)?;
        let spec = ship::spec_from_table(&table_paths, &roots, redactor)
            .map_err(|m| at(format!("sink {:?}: {m}", table.get_ref().name)))?;
        if sinks.iter().any(|s| s.name == spec.name) {
            return Err(at(format!("two sinks are named {:?}", spec.name)));
        }
        if let (Some(_), Some(first)) = (spec.pull, sinks.iter().find(|s| s.pull.is_some())) {
            return Err(at(format!(
                "sink {:?}: pull = true, and sink {:?} pulls already; one store is pulled from",
                spec.name, first.name
            )));
        }
        sinks.push(spec);
    }
    for arg in &flags.ship {
        let arg = match arg.strip_prefix("mirror:~") {
            Some(rest) => format!(
                "mirror:{}",
                home::expand_tilde(Path::new(&format!("~{rest}")), env)?.display()
            ),
            None => arg.clone(),
        };
        let spec = ship::parse_ship(&arg, &roots, redactor)?;
        if !sinks.iter().any(|s| s.name == spec.name) {
            sinks.push(spec);
        }
    }
    check_mirrors(&sinks, &roots)?;
    Ok(sinks)
}

/// The built-in redaction rules with the file's `[redact]` table, compiled when first asked
/// for: most commands never redact, and compiling the rules takes tens of milliseconds and
/// megabytes. The daemon with sinks, `config check` and the redacting commands ask at once.
#[derive(Clone, Debug, Default)]
pub(crate) struct RedactorSource {
    /// The table, and where it is (file, line, column) to report a rule at fault.
    table: Option<(RedactSettings, PathBuf, usize, usize)>,
    built: OnceLock<Arc<Redactor>>,
}

impl RedactorSource {
    fn of(source: &Source, file: &FileConfig) -> RedactorSource {
        let table = file.redact.as_ref().map(|t| {
            let (line, column) = line_and_column(&file.text, t.span().start);
            (t.get_ref().clone(), source.path.clone(), line, column)
        });
        RedactorSource {
            table,
            built: OnceLock::new(),
        }
    }

    /// The redactor; `Err` names the rule or allowlist entry at fault, at its table.
    pub(crate) fn get(&self) -> Result<Arc<Redactor>> {
        if let Some(built) = self.built.get() {
            return Ok(Arc::clone(built));
        }
        let redactor = match &self.table {
            None => Redactor::builtin(),
            Some((table, path, line, column)) => {
                Redactor::new(table).map_err(|fault| Error::Config {
                    path: path.clone(),
                    line: *line,
                    column: *column,
                    message: format!("[redact]: {fault}"),
                })?
            }
        };
        Ok(Arc::clone(self.built.get_or_init(|| Arc::new(redactor))))
    }
}

/// A mirror directory inside a watched directory would have its own copies archived and
/// mirrored again, without end; one around a watched directory, or two mirrors nested, mix
/// their files.
fn check_mirrors(sinks: &[SinkSpec], roots: &[(PathBuf, String)]) -> Result<()> {
    let nested = |a: &Path, b: &Path| a.starts_with(b) || b.starts_with(a);
    let mirrors = sinks.iter().filter_map(|s| match &s.target {
        ship::Target::Mirror { dir, .. } => Some((s, dir)),
        _ => None,
    });
    for (i, (sink, dir)) in mirrors.clone().enumerate() {
        let clash = (roots
            .iter()
            .map(|(root, _)| ("the watched directory", root)))
        .chain(
            mirrors
                .clone()
                .skip(i + 1)
                .map(|(_, d)| ("another mirror's directory", d)),
        )
        .find(|(_, other)| nested(dir, other));
        if let Some((what, other)) = clash {
            return Err(Error::Sink {
                name: sink.name.clone(),
                message: format!(
                    "its directory {} and {what} {} lie one inside the other; give the mirror a directory of its own",
                    dir.display(),
                    other.display()
                ),
            });
        }
    }
    Ok(())
}

/// `t` with `~/` expanded in its paths.
fn expand_sink_paths(t: &SinkTable, env: Env) -> Result<SinkTable> {
    let expand = |p: &Option<PathBuf>| -> Result<Option<PathBuf>> {
        p.as_ref().map(|p| home::expand_tilde(p, env)).transpose()
    };
    Ok(SinkTable {
        dir: expand(&t.dir)?,
        password_file: expand(&t.password_file)?,
        token_file: expand(&t.token_file)?,
        ca_file: expand(&t.ca_file)?,
        ..t.clone()
    })
}

/// `--watch` directories; else the enabled built-in watchers and the `[[watch]]` tables.
fn roots(source: &Source, file: &FileConfig, flags: &Overrides, env: Env) -> Result<Vec<Root>> {
    if !flags.watch.is_empty() {
        let glob = flags.glob.as_deref().unwrap_or(harness::DEFAULT_GLOB);
        return crate::agents::watch_roots(&flags.watch, glob);
    }
    let known = crate::agents::watchers()?;
    for name in file.watchers.keys() {
        if !known.iter().any(|w| w.builtin && w.name == *name.get_ref()) {
            return Err(unknown_watcher(source, &file.text, name, &known));
        }
    }
    let enabled = |name: &str, builtin: bool| {
        file.watchers
            .iter()
            .find(|(n, _)| n.get_ref() == name)
            .map_or(builtin, |(_, on)| *on)
    };
    let mut roots = crate::agents::builtin_roots_where(env, &enabled)?;
    for w in &file.watch {
        let dirs = [home::expand_tilde(&w.path, env)?];
        let mut dir = match &w.harness {
            Some(name) => {
                let watcher = known.iter().find(|k| k.name == *name.get_ref());
                let at = line_and_column(&file.text, name.span().start);
                let refuse = |message: String| Error::Config {
                    path: source.path.clone(),
                    line: at.0,
                    column: at.1,
                    message,
                };
                let Some(watcher) = watcher else {
                    let names: Vec<&str> = known.iter().map(|w| w.name.as_str()).collect();
                    let names = names.join(", ");
                    return Err(refuse(format!(
                        "unknown harness {:?}; the watchers are {names}",
                        name.get_ref()
                    )));
                };
                if w.glob.is_some() {
                    return Err(refuse(format!(
                        "a [[watch]] table with harness = {:?} takes that watcher's own globs; \
                         leave out glob",
                        name.get_ref()
                    )));
                }
                crate::agents::of(&watcher.name).roots_at(&dirs, None)?
            }
            None => {
                let glob = w.glob.as_deref().unwrap_or(harness::DEFAULT_GLOB);
                crate::agents::watch_roots(&dirs, glob)?
            }
        };
        dir.iter_mut()
            .for_each(|r| r.start_at = w.start_at.unwrap_or_default());
        roots.append(&mut dir);
    }
    Ok(roots)
}

fn unknown_watcher(
    source: &Source,
    text: &str,
    name: &toml::Spanned<String>,
    known: &[harness::Watcher],
) -> Error {
    let (line, column) = line_and_column(text, name.span().start);
    let names: Vec<&str> = known
        .iter()
        .filter(|w| w.builtin)
        .map(|w| w.name.as_str())
        .collect();
    let name = name.get_ref();
    let message = if known.iter().any(|w| w.name == *name && w.roots.is_empty()) {
        format!(
            "watcher {name:?} has no directory of its own: name the directories it reads in \
             [[watch]] tables with harness = {name:?}"
        )
    } else {
        format!(
            "unknown watcher {name:?}; the built-in watchers are {}",
            names.join(", ")
        )
    };
    Error::Config {
        path: source.path.clone(),
        line,
        column,
        message,
    }
}

#[derive(Serialize)]
struct SettingsView {
    archive: String,
    record_limit: u64,
    batch_bytes: u64,
    log_level: String,
    rescan_interval: String,
    poll_interval: String,
    compress: bool,
    /// `[ui] listen`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    ui_listen: Option<String>,
    root: Vec<RootView>,
    sink: Vec<SinkView>,
}

/// A sink in `config check`'s output: never a secret.
#[derive(Serialize)]
struct SinkView {
    name: String,
    #[serde(rename = "type")]
    kind: &'static str,
    target: String,
    flush_interval: String,
    batch_records: usize,
    batch_bytes: u64,
    redact: bool,
    /// Whether it ships the sessions' marks.
    marks: bool,
    /// Set when the sink pulls the other machines' records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pull_interval: Option<String>,
}

#[derive(Serialize)]
struct RootView {
    path: String,
    harness: String,
    /// Transcripts appended to; none for a watcher of snapshot files only.
    #[serde(skip_serializing_if = "String::is_empty")]
    glob: String,
    /// Files rewritten whole (snapshot sources).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    snapshots: Vec<String>,
    /// The agent's SQLite databases.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    databases: Vec<String>,
    start_at: StartAt,
}

impl RootView {
    fn of(r: &Root) -> RootView {
        RootView {
            path: r.path.display().to_string(),
            harness: r.harness.clone(),
            glob: r.glob.glob().to_string(),
            snapshots: r
                .snapshot
                .iter()
                .map(|s| s.glob.glob().to_string())
                .collect(),
            databases: r
                .database
                .iter()
                .map(|(g, _)| g.glob().to_string())
                .collect(),
            start_at: r.start_at,
        }
    }
}

fn path<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<PathBuf, D::Error> {
    let text = String::deserialize(d)?;
    if text == "~" || text.starts_with("~/") || text.starts_with('/') {
        return Ok(PathBuf::from(text));
    }
    Err(serde::de::Error::custom(format!(
        "{text:?} must be an absolute path or start with ~/"
    )))
}

fn some_path<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<PathBuf>, D::Error> {
    path(d).map(Some)
}

fn some_size<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    size_value(d, parse_size).map(Some)
}

fn some_record_limit<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<u64>, D::Error> {
    size_value(d, parse_record_limit).map(Some)
}

/// A size written as a number of bytes or as a string with a unit.
fn size_value<'de, D: Deserializer<'de>>(
    d: D,
    parse: fn(&str) -> std::result::Result<u64, String>,
) -> std::result::Result<u64, D::Error> {
    parse(&number_or_text(d)?).map_err(serde::de::Error::custom)
}

fn some_interval<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Duration>, D::Error> {
    parse_interval(&number_or_text(d)?)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// A value written as a bare number or as a string (`64M`, `250ms`), as text to parse.
fn number_or_text<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(u64),
        Text(String),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::Number(n) => n.to_string(),
        Raw::Text(t) => t,
    })
}

fn some_level<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<log::LevelFilter>, D::Error> {
    let text = String::deserialize(d)?;
    text.parse().map(Some).map_err(|_| {
        serde::de::Error::custom(format!(
            "{text:?} is not a log level (off, error, warn, info, debug, trace)"
        ))
    })
}

fn some_glob<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    let text = String::deserialize(d)?;
    globset::Glob::new(&text)
        .map_err(|e| serde::de::Error::custom(format!("invalid glob: {e}")))?;
    Ok(Some(text))
}

/// A record limit: a size SQLite can store in one value (at most 1,000,000,000 bytes).
pub(crate) fn parse_record_limit(text: &str) -> std::result::Result<u64, String> {
    let n = parse_size(text)?;
    if n > 1_000_000_000 {
        return Err(format!(
            "{text:?} is more than SQLite stores in one value (1000000000 bytes)"
        ));
    }
    Ok(n)
}

/// Parses `123`, `64K`, `64KiB`, `8M`, `1G` (powers of 1024).
pub(crate) fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (try 1048576, 64K or 8M)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return Err(format!("{text:?} has an unknown unit (use K, M or G)")),
    };
    n.checked_mul(1 << shift)
        .filter(|&v| v > 0)
        .ok_or_else(|| format!("{text:?} is out of range"))
}

/// Parses an interval: whole seconds (`60`) or a duration with units (`250ms`, `2s`, `5m`).
/// It must be at least 10 ms.
pub(crate) fn parse_interval(text: &str) -> std::result::Result<Duration, String> {
    let t = text.trim();
    let d = match t.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(t)
            .map_err(|e| format!("{text:?} is not an interval (try 60, 2s or 250ms): {e}"))?,
    };
    if d < Duration::from_millis(10) {
        return Err(format!("{text:?} is shorter than 10ms"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> Source {
        Source {
            path: PathBuf::from("/etc/t/config.toml"),
            explicit: true,
        }
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn xdg_data_home_wins_over_home_and_must_be_absolute() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "XDG_DATA_HOME" => Some("/xdg".to_owned()),
            _ => None,
        };
        assert_eq!(
            default_archive(&env).unwrap(),
            PathBuf::from("/xdg/transcript-sync/archive.db")
        );
        let relative = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "XDG_DATA_HOME" => Some("rel".to_owned()),
            _ => None,
        };
        assert_eq!(
            default_archive(&relative).unwrap(),
            PathBuf::from("/home/u/.local/share/transcript-sync/archive.db")
        );
        assert_eq!(
            default_config(&relative).unwrap(),
            PathBuf::from("/home/u/.config/transcript-sync/config.toml")
        );
        assert!(matches!(default_archive(&|_| None), Err(Error::NoHome)));
    }

    #[test]
    fn a_bad_value_is_reported_at_its_line_and_column() {
        let text = "archive = \"/a/b.db\"\n\nrecord_limit = \"5X\"\n";
        match parse(Path::new("/c.toml"), text) {
            Err(Error::Config {
                line,
                column,
                message,
                ..
            }) => {
                assert_eq!((line, column), (3, 16), "{message}");
                assert!(message.contains("unknown unit"), "{message}");
            }
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn flags_win_over_the_file_and_the_file_over_defaults() {
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_owned());
        // Every built-in watcher off but Claude Code's.
        let off: String = (crate::agents::watchers().unwrap().into_iter())
            .filter(|w| w.builtin && w.name != "claude-code")
            .map(|w| format!("{} = false\n", w.name))
            .collect();
        let text = format!(
            "archive = \"~/a.db\"\nrecord_limit = \"1M\"\nbatch_bytes = 4096\n\
             rescan_interval = \"5s\"\n[watchers]\n{off}[[watch]]\npath = \"/w\"\nstart_at = \"end\"\n"
        );
        let file = parse(Path::new("/c.toml"), &text).unwrap();
        let flags = Overrides {
            record_limit: Some(2048),
            ..Overrides::default()
        };
        let s = Settings::resolve(source(), Some(file), &flags, &env).unwrap();
        assert_eq!(s.archive, PathBuf::from("/home/u/a.db"));
        assert_eq!(s.limits.record_limit, 2048);
        assert_eq!(s.limits.batch_bytes, 4096);
        assert_eq!(s.rescan_interval, Duration::from_secs(5));
        assert_eq!(s.poll_interval, DEFAULT_POLL);
        let harnesses: Vec<&str> = s.roots.iter().map(|r| r.harness.as_str()).collect();
        assert_eq!(harnesses, ["claude-code", "generic"]);
        assert_eq!(s.roots[1].start_at, StartAt::End);
        assert_eq!(s.roots[0].start_at, StartAt::Beginning);
    }

    #[test]
    fn an_unknown_watcher_names_the_known_ones() {
        let file = parse(Path::new("/c.toml"), "[watchers]\nclaude = true\n").unwrap();
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_owned());
        let err = Settings::resolve(source(), Some(file), &Overrides::default(), &env)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown watcher \"claude\""), "{err}");
        assert!(err.contains("claude-code, cline, "), "{err}");
    }

    #[test]
    fn a_watch_table_takes_a_watchers_globs_by_name_and_no_glob_of_its_own() {
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_owned());
        let resolve = |text: &str| {
            let file = parse(Path::new("/c.toml"), text).unwrap();
            Settings::resolve(source(), Some(file), &Overrides::default(), &env)
        };
        let s = resolve("[[watch]]\npath = \"~/src\"\nharness = \"aider\"\n").unwrap();
        let aider = s.roots.last().unwrap();
        assert_eq!(aider.harness, "aider");
        assert!(!aider.reach.holds(Path::new("app/node_modules")));
        assert_eq!(aider.path, Path::new("/home/u/src"));
        assert!(aider.matches(Path::new("/home/u/src/app/.aider.chat.history.md")));
        let err = |text: &str| resolve(text).unwrap_err().to_string();
        let unknown = err("[[watch]]\npath = \"/w\"\nharness = \"aidr\"\n");
        assert!(
            unknown.contains(":3:11: unknown harness \"aidr\""),
            "{unknown}"
        );
        assert!(unknown.contains("aider, aider-ce, amp, "), "{unknown}");
        let glob = err("[[watch]]\npath = \"/w\"\nharness = \"aider\"\nglob = \"*.md\"\n");
        assert!(glob.contains("leave out glob"), "{glob}");
        // Aider's watcher has no directory of its own to switch on.
        let on = err("[watchers]\naider = true\n");
        assert!(on.contains("harness = \"aider\""), "{on}");
    }

    #[test]
    fn relative_paths_and_unknown_keys_are_refused() {
        assert!(parse(Path::new("/c"), "archive = \"rel.db\"").is_err());
        assert!(parse(Path::new("/c"), "achive = \"/a.db\"").is_err());
        assert!(parse(Path::new("/c"), "[[watch]]\npath = \"/w\"\nglob = \"a[\"").is_err());
    }

    #[test]
    fn sizes_and_intervals_take_units() {
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("2KiB"), Ok(2048));
        assert!(parse_size("0").is_err());
        assert!(parse_size("5X").is_err());
        assert!(parse_record_limit("18446744073709551615").is_err());
        assert_eq!(parse_record_limit("64M"), Ok(64 << 20));
        assert_eq!(parse_interval("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_interval("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_interval("1ms").is_err());
        assert!(parse_interval("soon").is_err());
    }
}
