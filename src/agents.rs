//! What is particular to each agent, one module per agent, and the registry every other layer
//! asks: where the agent keeps sessions (its `watchers/NAME.toml`, embedded), the readers of
//! its databases and text documents, how its records become messages, which session a file
//! of it is, where `restore` puts its files back and the command that resumes one, and what
//! `doctor` says about it.
//!
//! [`Agent`] has no default: an agent that leaves out one of its parts does not compile. The
//! registry, [`AGENTS`], is sorted by name and lists every watcher file (both checked by a
//! test); a name it does not hold is no agent, and each caller says so.

pub(crate) mod aider;
pub(crate) mod aider_ce;
pub(crate) mod amp;
pub(crate) mod claude_code;
pub(crate) mod cline;
pub(crate) mod code_puppy;
pub(crate) mod codex;
pub(crate) mod r#continue;
pub(crate) mod copilot_chat;
pub(crate) mod copilot_cli;
pub(crate) mod crush;
pub(crate) mod cursor;
pub(crate) mod cursor_editor;
pub(crate) mod droid;
pub(crate) mod gemini_cli;
pub(crate) mod generic;
pub(crate) mod goose;
pub(crate) mod gptme;
pub(crate) mod hermes;
pub(crate) mod kilo_code;
pub(crate) mod kilo_code_vscode;
pub(crate) mod kimi_cli;
pub(crate) mod llm;
pub(crate) mod message;
pub(crate) mod mini_swe_agent;
pub(crate) mod mistral_vibe;
pub(crate) mod nanocoder;
pub(crate) mod open_interpreter;
pub(crate) mod openclaw;
pub(crate) mod opencode;
pub(crate) mod openhands;
pub(crate) mod pi;
pub(crate) mod qwen_code;
pub(crate) mod ra_aid;
pub(crate) mod restore;
pub(crate) mod roo_code;
pub(crate) mod session;
pub(crate) mod windsurf;
pub(crate) mod zed;

use crate::capture::editors::{Os, global_storage, user_folder, user_folders};
use crate::capture::harness::{
    self, Formats, GENERIC, Root, Watcher, listed_projects, root, watcher_home,
};
use crate::error::{Error, Result};
use crate::read::record::Unread;
use message::Parsed;
use restore::Restore;
use serde_json::{Map, Value};
use session::Identified;
use std::path::{Path, PathBuf};

/// One agent: everything that is particular to it.
pub(crate) struct Agent {
    /// Its name: its watcher file's stem, recorded as each of its sources' harness.
    pub name: &'static str,
    /// Where it keeps sessions: its `watchers/NAME.toml`.
    pub watcher: &'static str,
    /// The readers its watcher's `[[database]]` and `[[snapshot]]` tables name.
    pub formats: Formats,
    /// What one of its records (a JSON object) says; `None` for a record that is not what
    /// its format promises.
    pub parse: fn(&Map<String, Value>) -> Option<Parsed>,
    /// Members of its records that `parse` never reads, left out when a record is parsed for
    /// it: only large ones are worth naming. A test reads each of its fixtures' records with
    /// and without them (`an_agents_unread_members_change_nothing_it_reads`).
    pub unread: &'static [Unread],
    /// Which session a new source of it (a file, or a session in its database) starts, given
    /// its first record.
    pub identify: fn(&Path, &Parsed) -> Identified,
    /// Where `restore` puts its files, and the command that resumes a session.
    pub restore: Restore,
    /// What `doctor` says about it when none of its sessions can be found.
    pub doctor: Option<Unwatched>,
}

/// What `doctor` says about an agent whose sessions are kept where no built-in root looks
/// (Aider's, in each project): when `ran`, a directory under the home, shows it has run here
/// and no root of it is configured.
#[derive(Clone, Copy)]
pub(crate) struct Unwatched {
    /// The directory under the home that the agent makes when it runs.
    pub ran: &'static str,
    /// What is not archived.
    pub message: &'static str,
    /// What to add to `config.toml`.
    pub fix: &'static str,
}

/// Every agent, sorted by name.
pub(crate) static AGENTS: &[&Agent] = &[
    &aider::AGENT,
    &aider_ce::AGENT,
    &amp::AGENT,
    &claude_code::AGENT,
    &cline::AGENT,
    &code_puppy::AGENT,
    &codex::AGENT,
    &r#continue::AGENT,
    &copilot_chat::AGENT,
    &copilot_cli::AGENT,
    &crush::AGENT,
    &cursor::AGENT,
    &cursor_editor::AGENT,
    &droid::AGENT,
    &gemini_cli::AGENT,
    &generic::AGENT,
    &goose::AGENT,
    &gptme::AGENT,
    &hermes::AGENT,
    &kilo_code::AGENT,
    &kilo_code_vscode::AGENT,
    &kimi_cli::AGENT,
    &llm::AGENT,
    &mini_swe_agent::AGENT,
    &mistral_vibe::AGENT,
    &nanocoder::AGENT,
    &open_interpreter::AGENT,
    &openclaw::AGENT,
    &opencode::AGENT,
    &openhands::AGENT,
    &pi::AGENT,
    &qwen_code::AGENT,
    &ra_aid::AGENT,
    &roo_code::AGENT,
    &windsurf::AGENT,
    &zed::AGENT,
];

/// The agent named `name`, if there is one.
pub(crate) fn get(name: &str) -> Option<&'static Agent> {
    let at = AGENTS.binary_search_by(|a| a.name.cmp(name)).ok()?;
    Some(AGENTS[at])
}

/// The names of the agents (the built-in watchers and `generic`), sorted.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    AGENTS.iter().map(|a| a.name)
}

impl Agent {
    /// Its watcher definition.
    pub(crate) fn watcher(&self) -> Result<Watcher> {
        toml::from_str(self.watcher).map_err(|source| Error::Watcher {
            name: self.name.to_owned(),
            source,
        })
    }

    /// Roots of its watcher at `dirs` (`[[watch]]` tables with `harness`, `--watch`), made
    /// absolute against the working directory, read by its globs and its snapshot and database
    /// tables; `glob` instead of its own for `generic`.
    pub(crate) fn roots_at(&self, dirs: &[PathBuf], glob: Option<&str>) -> Result<Vec<Root>> {
        let dirs = dirs.iter().map(|d| harness::absolute(d));
        self.roots(&self.watcher()?, dirs, glob)
    }

    /// Roots of `watcher` (its own, read) at `dirs`, as they are.
    fn roots(
        &self,
        watcher: &Watcher,
        dirs: impl Iterator<Item = PathBuf>,
        glob: Option<&str>,
    ) -> Result<Vec<Root>> {
        let glob = glob.or(watcher.glob.as_deref()).unwrap_or("");
        dirs.map(|d| root(d, watcher, glob, &self.formats))
            .collect()
    }
}

/// Every agent's watcher definition.
pub(crate) fn watchers() -> Result<Vec<Watcher>> {
    AGENTS.iter().map(|a| a.watcher()).collect()
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
    for agent in AGENTS.iter().filter(|a| a.name != GENERIC) {
        let w = agent.watcher()?.on(Os::current());
        if !enabled(&w.name, w.builtin) {
            continue;
        }
        let home = watcher_home(&w, env)?;
        let listed = (w.projects.as_ref()).map_or(Vec::new(), |p| listed_projects(&home, p));
        // `""` is the home itself (`home.join("")` would end it with a `/`).
        let under = |dir: &String| match dir.is_empty() {
            true => home.clone(),
            false => home.join(dir),
        };
        let extension = match &w.extension {
            Some(id) => global_storage(Os::current(), env, id)?,
            None => Vec::new(),
        };
        let in_editors = match w.editor_roots.is_empty() {
            true => Vec::new(),
            false => in_editors(&w.editor_roots, env)?,
        };
        let editor = editor_folder(&w, env)?;
        let dirs = (w.roots.iter().map(under))
            .chain(extension)
            .chain(in_editors)
            .chain(editor)
            .chain(listed);
        roots.extend(agent.roots(&w, dirs, None)?);
    }
    Ok(roots)
}

/// The directories `roots` name under every editor's user folder (`""`: the folder itself).
fn in_editors(roots: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<PathBuf>> {
    let users = user_folders(Os::current(), env)?;
    let under = |user: &PathBuf, root: &String| match root.is_empty() {
        true => user.clone(),
        false => user.join(root),
    };
    Ok((users.iter())
        .flat_map(|u| roots.iter().map(move |r| under(u, r)))
        .collect())
}

/// The user folder of the editor watcher `w` names (its `editor`), if it names one; `Err` for
/// an editor the table of editors does not hold.
fn editor_folder(w: &Watcher, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<PathBuf>> {
    let Some(editor) = &w.editor else {
        return Ok(None);
    };
    user_folder(Os::current(), env, editor)?.map_or_else(
        || {
            Err(Error::UnknownEditor {
                watcher: w.name.clone(),
                editor: editor.clone(),
            })
        },
        |folder| Ok(Some(folder)),
    )
}

/// Roots for directories given with `--watch`, all of the generic harness.
pub fn watch_roots(dirs: &[PathBuf], glob: &str) -> Result<Vec<Root>> {
    generic::AGENT.roots_at(dirs, Some(glob))
}

/// Whether `path` is a database of `harness` (by its watcher's `[[database]]` globs), or a
/// session in one (the source `<database>/<session id>`), rather than a file the agent writes
/// itself (OpenClaw's JSONL, which its older releases kept beside where its database is now).
pub(crate) fn in_database(harness: &str, path: &Path) -> bool {
    // Asked for each source `status` lists: the definitions are read once.
    static DATABASES: std::sync::OnceLock<Vec<(&str, usize, globset::GlobMatcher)>> =
        std::sync::OnceLock::new();
    let databases = DATABASES.get_or_init(|| {
        let defs = |a: &&Agent| Some((a.name, a.watcher().ok()?.database));
        (AGENTS.iter().filter_map(defs))
            .flat_map(|(name, defs)| defs.into_iter().map(move |d| (name, d.glob)))
            .filter_map(|(name, glob)| {
                let built = globset::GlobBuilder::new(&glob)
                    .literal_separator(true)
                    .build();
                Some((name, glob.split('/').count(), built.ok()?.compile_matcher()))
            })
            .collect()
    });
    let matches = |(_, n, glob): &(&str, usize, globset::GlobMatcher)| {
        let at = |p: &Path| glob.is_match(last_components(p, *n));
        at(path) || path.parent().is_some_and(at)
    };
    (databases.iter())
        .filter(|(name, ..)| *name == harness)
        .any(matches)
}

/// The last `n` components of `path`.
fn last_components(path: &Path, n: usize) -> PathBuf {
    let parts: Vec<_> = path.components().collect();
    parts[parts.len().saturating_sub(n)..].iter().collect()
}

/// Which session a new source of `harness` at `path` starts, given its first record.
pub(crate) fn identify(harness: &str, path: &Path, first: &Parsed) -> Identified {
    (of(harness).identify)(path, first)
}

/// The agent named `harness`; the generic agent, logged once per name, for a name no agent
/// has.
pub(crate) fn of(harness: &str) -> &'static Agent {
    if let Some(agent) = get(harness) {
        return agent;
    }
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if !warned.iter().any(|w| w == harness) {
        log::warn!(
            "harness {harness:?} is no agent this release knows: its records are read as the generic agent reads them"
        );
        warned.push(harness.to_owned());
    }
    &generic::AGENT
}

#[cfg(test)]
mod tests;
