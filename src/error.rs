//! Library errors: what stops a command, each carrying the path a user needs to act on.

use std::io;
use std::path::{Path, PathBuf};

/// Errors that end a command (the archive cannot be used, the arguments are wrong, a watcher
/// definition is broken). Problems with a single transcript are not errors of this kind: the
/// engine logs them with the path, counts them and records them in the archive's events.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file or directory failed.
    #[error("{path}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// SQLite reported an error on the archive.
    #[error("archive {path}")]
    Archive {
        /// The archive database.
        path: PathBuf,
        /// The underlying error.
        source: rusqlite::Error,
    },
    /// SQLite reported an error on the session index's file.
    #[error(
        "session index {path} (it is derived from the archive: `transcript-sync reindex` makes it again)"
    )]
    Index {
        /// The index file.
        path: PathBuf,
        /// The underlying error.
        source: rusqlite::Error,
    },
    /// Another `transcript-sync run` holds the archive's lock.
    #[error(
        "archive {path} is in use by another `transcript-sync run`{}; stop it first or pass another --db",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Locked {
        /// The archive database.
        path: PathBuf,
        /// The holder's pid, as it wrote it into the lock file.
        pid: Option<u32>,
    },
    /// The archive was written by a newer release.
    #[error(
        "archive {path} has schema version {found}, newer than this build understands ({known}); upgrade transcript-sync"
    )]
    NewerSchema {
        /// The archive database.
        path: PathBuf,
        /// The version found in `PRAGMA user_version`.
        found: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// A read-only command was pointed at an archive that does not exist.
    #[error(
        "no archive at {path}; run `transcript-sync run` first, or check --db and TRANSCRIPT_SYNC_DB"
    )]
    NoArchive {
        /// The archive database that was looked for.
        path: PathBuf,
    },
    /// The archive (or a directory above it) exists but this user may not read it.
    #[error(
        "the archive {path} cannot be read by this user; run as the user who owns it, or give this one read access to it (and search access to each directory above it)"
    )]
    ArchiveUnreadable {
        /// The archive database.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// `rejects --raw` was given an id that names no reject.
    #[error("archive {path} has no reject with id {id}; `transcript-sync rejects` lists them")]
    NoSuchReject {
        /// The archive database.
        path: PathBuf,
        /// The id given.
        id: i64,
    },
    /// `show` or `restore` was given an id that names no session.
    #[error(
        "archive {path} has no session {id:?}; `transcript-sync sessions` lists them (an id or a unique prefix of at least 4 characters)"
    )]
    NoSuchSession {
        /// The archive database.
        path: PathBuf,
        /// The id or prefix given.
        id: String,
    },
    /// `--machine` names no machine this archive knows.
    #[error("no machine {name:?} in this archive; give `this`, `all`, or one of: {}", if known.is_empty() { "(none pulled yet)".to_owned() } else { known.join(", ") })]
    NoSuchMachine {
        /// The name given.
        name: String,
        /// The pulled machines: host name and UUID.
        known: Vec<String>,
    },
    /// `--harness` names no watcher this program has, nor one the archive holds sessions of.
    #[error("no harness {name:?}; give one of: {}", known.join(", "))]
    UnknownHarness {
        /// The name given.
        name: String,
        /// The built-in watchers' names and those of the archive's sessions, sorted.
        known: Vec<String>,
    },
    /// `show` or `restore` was given a prefix that several sessions' ids start with.
    #[error("{id:?} names {} sessions: {}; give more of the id", candidates.len(), candidates.join(", "))]
    AmbiguousSession {
        /// The prefix given.
        id: String,
        /// The ids it starts, each with its harness and project.
        candidates: Vec<String>,
    },
    /// `search` was given a query FTS5 cannot read.
    #[error(
        "search query {} cannot be read: {reason}; put a phrase in double quotes, and use AND, OR, NOT between words",
        quoted(query)
    )]
    SearchQuery {
        /// The query.
        query: String,
        /// What is wrong with it, in the query's terms.
        reason: String,
    },
    /// A tag that is not one word.
    #[error(
        "tag {} cannot be used: a tag is one word of at most 64 letters, digits or - _ . / : (as in bug, release-2.1, team/infra)",
        quoted(tag)
    )]
    BadTag {
        /// The tag as given.
        tag: String,
    },
    /// `search` found no message (exit status 1, as grep's and rg's).
    #[error("no message matches {}", quoted(query))]
    NoMatch {
        /// The query.
        query: String,
    },
    /// `restore` found a different file where a transcript goes.
    #[error(
        "{path} exists and differs from the archived transcript; nothing was written for it: move it away, or give --force to overwrite it"
    )]
    RestoreConflict {
        /// The file in the way.
        path: PathBuf,
    },
    /// `restore` kept being given inodes of deleted transcripts that a running daemon has not
    /// yet recorded as gone.
    #[error(
        "{path} was not restored: the file system kept giving it the inode of a deleted transcript (source {source_id}) that the process holding the archive{} (a running `transcript-sync run`, normally) has not yet recorded as gone; run the restore again in a moment",
        pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    RestoreInodeTracked {
        /// The file that was to be restored.
        path: PathBuf,
        /// The last tracked source whose inode it was given.
        source_id: i64,
        /// The daemon's pid, as it wrote it into the lock file.
        pid: Option<u32>,
    },
    /// `restore` of another machine's session found no directory here for its project.
    #[error(
        "session {id} is {machine}'s, in {project}, which is not a directory here{remote}; give --project-dir PATH (this machine's checkout of the project), and --rewrite-cwd to change the records' cwd to it"
    )]
    ProjectDirNeeded {
        /// The session.
        id: String,
        /// Its machine's name.
        machine: String,
        /// Its project directory there.
        project: String,
        /// What was looked for here: ", and no session of this machine has its git remote …".
        remote: String,
    },
    /// `restore` was given what only another machine's session takes, or cannot place a file.
    #[error("restore: {0}")]
    RestoreRefused(String),
    /// `show --file` named a file that is not one of the session's.
    #[error("session {id} has no file {path}; its files: {}", files.join(", "))]
    NotASessionFile {
        /// The session.
        id: String,
        /// The file asked for.
        path: PathBuf,
        /// The session's files.
        files: Vec<String>,
    },
    /// `restore` has no archived records for a session.
    #[error("session {id} has no archived records to restore")]
    NothingToRestore {
        /// The session.
        id: String,
    },
    /// A file that exists but holds no transcript-sync archive.
    #[error("{path} is not a transcript-sync archive; check --db and TRANSCRIPT_SYNC_DB")]
    NotAnArchive {
        /// The file.
        path: PathBuf,
    },
    /// `--db` names a directory.
    #[error("{path} is a directory; --db takes the archive's file path, such as {path}/archive.db")]
    ArchiveIsDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// A `--watch` path that exists but is not a directory.
    #[error("--watch {path} is not a directory; give the directory that holds the transcripts")]
    WatchNotDirectory {
        /// The path given.
        path: PathBuf,
    },
    /// `seed` was asked to mark a file whose identity the archive already tracks.
    #[error(
        "{path} is already tracked (source {source_id}, generation {generation}, cursor at offset {offset}); a prefix mark only applies to a file the archive has not seen"
    )]
    AlreadyTracked {
        /// The file given to `seed`.
        path: PathBuf,
        /// The source that owns this identity.
        source_id: i64,
        /// Its current generation.
        generation: i64,
        /// Its cursor offset.
        offset: u64,
    },
    /// A path that must be a regular file is something else.
    #[error("{path} is not a regular file")]
    NotRegular {
        /// The path.
        path: PathBuf,
    },
    /// A built-in watcher definition names a reader its agent's module does not define.
    #[error(
        "watcher definition watchers/{watcher}.toml names {kind} {name:?}, which its agent's module does not define (it defines: {known})"
    )]
    UnknownReader {
        /// The watcher's name.
        watcher: String,
        /// What kind of reader it names.
        kind: &'static str,
        /// The name it gives.
        name: String,
        /// The names the agent's module defines.
        known: String,
    },
    /// A built-in watcher definition names an editor that the table of editors does not hold.
    #[error(
        "watcher definition watchers/{watcher}.toml names editor {editor:?}, which is not one of the VS Code family's editors (src/capture/editors.rs)"
    )]
    UnknownEditor {
        /// The watcher's name.
        watcher: String,
        /// The editor it names.
        editor: String,
    },
    /// A built-in watcher definition does not parse.
    #[error("watcher definition watchers/{name}.toml is invalid")]
    Watcher {
        /// The watcher's file stem.
        name: String,
        /// The parse error.
        source: toml::de::Error,
    },
    /// A glob pattern does not compile.
    #[error("invalid glob {glob:?}")]
    Glob {
        /// The pattern.
        glob: String,
        /// The parse error.
        source: globset::Error,
    },
    /// The configuration file is invalid.
    #[error("invalid configuration {path}:{line}:{column}: {message}")]
    Config {
        /// The configuration file.
        path: PathBuf,
        /// One-based line of the error (0 when unknown).
        line: usize,
        /// One-based column of the error (0 when unknown).
        column: usize,
        /// What is wrong, and what is expected.
        message: String,
    },
    /// `tail --follow` found no daemon at the archive's socket.
    #[error(
        "no daemon is running for the archive {archive} (its socket {socket}: {reason}); start one with `transcript-sync run`, or `systemctl --user start transcript-sync` where it is a service"
    )]
    NoDaemon {
        /// The archive.
        archive: PathBuf,
        /// Where its socket would be.
        socket: PathBuf,
        /// What connecting said.
        reason: String,
    },
    /// The daemon refused `tail`'s request, or it names no session.
    #[error("tail: {reason}")]
    Tail {
        /// Why.
        reason: String,
    },
    /// The web view could not be served.
    #[error("ui: {reason}")]
    Ui {
        /// Why.
        reason: String,
    },
    /// The subscribers' socket could not be made.
    #[error(
        "cannot listen at {path} for subscribers (a path too long for a Unix socket, over about 100 bytes, is one reason: set XDG_RUNTIME_DIR)"
    )]
    Socket {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A thread of the daemon could not be started (the process is out of threads or memory).
    #[error("cannot start the {name} thread")]
    Thread {
        /// The thread's name.
        name: &'static str,
        /// Why it did not start.
        source: io::Error,
    },
    /// The daemon cannot wait for its wake-ups (an eventfd or pipe, and `poll`).
    #[error("cannot wait for changes (the daemon's eventfd and poll)")]
    Wait {
        /// Why.
        source: io::Error,
    },
    /// The handlers for SIGINT, SIGTERM and SIGHUP could not be installed.
    #[error("cannot install the signal handlers")]
    Signals {
        /// Why.
        source: io::Error,
    },
    /// Writing a command's output failed (other than a reader that closed the pipe).
    #[error("cannot write to stdout")]
    Stdout {
        /// Why.
        source: io::Error,
    },
    /// The archive writer thread ended (its error was reported where it happened).
    #[error("the archive writer stopped")]
    WriterStopped,
    /// A service manager command (`systemctl`, `launchctl`) exited with a failure.
    #[error("`{command}` failed ({status}){}; {fix}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })]
    ServiceCommand {
        /// The command line.
        command: String,
        /// How it exited.
        status: String,
        /// What it printed on stderr, trimmed.
        stderr: String,
        /// What to do about it.
        fix: String,
    },
    /// A service manager command could not be started.
    #[error("cannot run `{command}`; {fix}")]
    ServiceCommandSpawn {
        /// The command line.
        command: String,
        /// What to do about it.
        fix: String,
        /// Why it did not start.
        source: io::Error,
    },
    /// A path that cannot be written into a service file.
    #[error(
        "{path} cannot go into a service file because {reason}; move it to a plainer path or pass another --db"
    )]
    ServicePath {
        /// The binary or archive path.
        path: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// This binary's own path is unknown, so no service can point at it.
    #[error("cannot tell where this binary is; run it by its full path")]
    CurrentExe {
        /// Why `current_exe` failed.
        source: io::Error,
    },
    /// `doctor` found problems that stop the daemon from doing its job.
    #[error("{failures} check(s) failed; each FAIL line above names its fix")]
    DoctorFailed {
        /// How many checks failed.
        failures: usize,
    },
    /// `redact --check` found secrets.
    #[error(
        "{secrets} secret(s) found in {files} input(s); `transcript-sync redact FILE` writes them redacted"
    )]
    SecretsFound {
        /// How many.
        secrets: u64,
        /// In how many inputs.
        files: u64,
    },
    /// A sink (`[[sink]]` or `--ship`) is not usable as written.
    #[error("sink {name}: {message}")]
    Sink {
        /// The sink's name (or the `--ship` argument).
        name: String,
        /// What is wrong, and what to do.
        message: String,
    },
    /// `run --once` could not deliver to a sink; what was archived stays archived, and is
    /// shipped by the next run.
    #[error(
        "sink {name}: {message}; the records stay in the archive and are shipped by the next run"
    )]
    ShipFailed {
        /// The sink's name.
        name: String,
        /// The destination's answer.
        message: String,
    },
    /// The home directory is needed to find the built-in roots or the archive, and is unknown.
    #[error("HOME is not set; set it, or pass --db (and, for run, --watch)")]
    NoHome,
}

impl Error {
    /// True for archive errors that pass by themselves: a full disk, a lock another process
    /// holds, an I/O error. Writing is retried after them; anything else (a corrupt or
    /// read-only archive, a schema from a newer version) stops the daemon.
    pub fn is_transient(&self) -> bool {
        use rusqlite::ErrorCode::*;
        match self {
            Error::Archive {
                source: rusqlite::Error::SqliteFailure(e, _),
                ..
            } => matches!(
                e.code,
                DiskFull | DatabaseBusy | DatabaseLocked | SystemIoFailure
            ),
            _ => false,
        }
    }
}

/// An error followed by its sources, `: `-separated: the one rendering of an error chain, for
/// log lines and for what `main` prints (messages do not repeat their source). A source that only puts a code before what
/// was just said (SQLite's `Error code 5: database is locked`) is left out.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut last = text.clone();
    let mut source = e.source();
    while let Some(s) = source {
        let said = s.to_string();
        if !said.ends_with(&last) {
            text.push_str(": ");
            text.push_str(&said);
        }
        last = said;
        source = s.source();
    }
    text
}

/// Shorthand for results of this library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches a path to an `io::Error`.
pub(crate) trait IoContext<T> {
    fn at_path(self, path: impl Into<PathBuf>) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at_path(self, path: impl Into<PathBuf>) -> Result<T> {
        self.map_err(|source| Error::Io {
            path: path.into(),
            source,
        })
    }
}

/// Names what an `io::Error` that is about no file was about.
pub(crate) trait SystemContext<T> {
    /// For a thread that could not be started.
    fn starting(self, name: &'static str) -> Result<T>;
    /// For a failed write to stdout.
    fn on_stdout(self) -> Result<T>;
}

impl<T> SystemContext<T> for io::Result<T> {
    fn starting(self, name: &'static str) -> Result<T> {
        self.map_err(|source| Error::Thread { name, source })
    }

    fn on_stdout(self) -> Result<T> {
        self.map_err(|source| Error::Stdout { source })
    }
}

impl Error {
    /// The process's exit status for this error: 2 for a session prefix that names several
    /// (the candidates are listed), a search query that cannot be read and an unknown
    /// `--harness` (so that 1, for a search, means only that nothing matched, as for grep),
    /// 1 otherwise (a tag that is not one word is 2 too).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::AmbiguousSession { .. }
            | Error::SearchQuery { .. }
            | Error::NotASessionFile { .. }
            | Error::BadTag { .. }
            | Error::UnknownHarness { .. } => 2,
            _ => 1,
        }
    }
}

/// `text` in double quotes as it was typed, but for what would make it ambiguous or move the
/// terminal: `"` and `\` escaped, control characters as `\n`, `\t` or `\u{1b}`. Unlike `{:?}`,
/// a combining mark (Thai's, Devanagari's) stays the character it is.
pub(crate) fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Attaches the archive's path to a SQLite error.
pub(crate) trait ArchiveContext<T> {
    fn at_archive(self, path: &Path) -> Result<T>;
}

impl<T> ArchiveContext<T> for rusqlite::Result<T> {
    fn at_archive(self, path: &Path) -> Result<T> {
        self.map_err(|source| Error::Archive {
            path: path.to_owned(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_quoted_as_typed_with_only_what_is_ambiguous_escaped() {
        assert_eq!(quoted("ทดลอง"), "\"ทดลอง\"");
        assert_eq!(quoted("\"lock file"), format!("{:?}", "\"lock file"));
        assert_eq!(quoted("a\\b\n\u{1b}[2J"), "\"a\\\\b\\n\\u{1b}[2J\"");
    }

    #[test]
    fn an_archive_error_chain_names_sqlites_reason_once() {
        // The writer's "cannot write the archive" warning is this chain: without the source
        // it would name the archive but not why it refused the commit.
        // As rusqlite reports a commit refused for a held lock: SQLite's message, then the
        // code with the same words.
        let busy = rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY);
        let message = Some("database is locked".to_owned());
        let err = Error::Archive {
            path: PathBuf::from("/a/archive.db"),
            source: rusqlite::Error::SqliteFailure(busy, message),
        };
        assert_eq!(
            error_chain(&err),
            "archive /a/archive.db: database is locked"
        );
    }

    #[test]
    fn failures_that_concern_no_file_name_what_failed_not_a_made_up_path() {
        let spawn: io::Result<()> = Err(io::Error::from_raw_os_error(libc::EAGAIN));
        let err = spawn.starting("tap").unwrap_err();
        assert!(
            error_chain(&err).starts_with("cannot start the tap thread: "),
            "{err:#}"
        );
        let write: io::Result<()> = Err(io::Error::from_raw_os_error(libc::ENOSPC));
        let err = write.on_stdout().unwrap_err();
        assert!(error_chain(&err).starts_with("cannot write to stdout: "));
    }
}
