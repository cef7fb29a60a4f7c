//! Where `restore` puts an agent's files and how a session is resumed: the part of each
//! agent's definition that `restore` asks, with the rules most agents share.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Where `restore` puts an agent's files, and the command that resumes a session.
#[derive(Clone, Copy)]
pub(crate) struct Restore {
    /// Of its roots, the one named so, where the agent resumes sessions from (Codex's
    /// `sessions/`, not `archived_sessions/`); `None` for its first.
    pub prefer_root: Option<&'static str>,
    /// The directory below which its files keep their layout from machine to machine; `None`
    /// for the name of the root's own directory.
    pub layout_below: Option<&'static str>,
    /// Where a file of another machine's session goes below that directory here, given its
    /// path's components below it there and the project's directory here.
    pub relocate: fn(&[&OsStr], &str) -> PathBuf,
    /// Where a file that is in no layout of its goes below the root, when the agent's naming
    /// says (Codex's archived rollouts: their day's directory).
    pub unplaced: fn(&Path) -> Option<PathBuf>,
    /// Whether its records name the project's directory (`--rewrite-cwd` changes them).
    pub records_name_cwd: bool,
    /// The command that resumes a session; `None` when there is none for where its files
    /// were put.
    pub resume: fn(&Resume) -> Option<String>,
}

impl Restore {
    /// An agent whose files go back where they were, below its first root's directory,
    /// unchanged, and whose sessions `resume` resumes.
    pub(crate) const fn keeping_layout(resume: fn(&Resume) -> Option<String>) -> Restore {
        Restore {
            prefer_root: None,
            layout_below: None,
            relocate: keep_layout,
            unplaced: nowhere,
            records_name_cwd: false,
            resume,
        }
    }
}

/// What the command that resumes a session is made from.
pub(crate) struct Resume<'a> {
    /// The session's id.
    pub id: &'a str,
    /// `cd <project> && `, or nothing when the project's directory is not known.
    pub cd: &'a str,
    /// Where the files were put instead of the agent's own directory (`--to`).
    pub to: Option<&'a Path>,
    /// The session's files, where the agent keeps them.
    pub files: &'a [PathBuf],
}

impl Resume<'_> {
    /// `VAR=<to> `, pointing the agent at `--to` through its variable; nothing without it.
    pub(crate) fn home(&self, var: &str) -> String {
        match self.to {
            Some(to) => format!("{var}={} ", shell_quote(&to.to_string_lossy())),
            None => String::new(),
        }
    }

    /// `command` when the files are where the agent keeps them, which it has no variable to
    /// point elsewhere.
    pub(crate) fn in_place(&self, command: String) -> Option<String> {
        self.to.is_none().then_some(command)
    }
}

/// A file keeps its path below the layout's directory.
pub(crate) fn keep_layout(below: &[&OsStr], _project: &str) -> PathBuf {
    below.iter().collect()
}

/// No naming of the agent's places a file found outside its layout.
pub(crate) fn nowhere(_path: &Path) -> Option<PathBuf> {
    None
}

/// No command resumes a session of the agent.
pub(crate) fn no_resume(_resume: &Resume) -> Option<String> {
    None
}

/// `text` as one word of a shell command.
pub(crate) fn shell_quote(text: &str) -> String {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}
