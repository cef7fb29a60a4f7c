//! The command line: argument definitions and what each command does.

pub(crate) mod doctor;
pub(crate) mod rejects;
pub(crate) mod restore;
pub(crate) mod show;
pub(crate) mod status;
pub(crate) mod tail;

use crate::archive::Archive;
use crate::archive::envelope::write_envelope;
use crate::archive::lock::ArchiveLock;
use crate::capture::harness::absolute;
use crate::cli::rejects::{TextWriter, write_json};
use crate::cli::show::Format;
use crate::config::{self, Overrides, Settings};
use crate::consumers::redact::{self, Redactor};
use crate::consumers::sessions::{
    self,
    query::{self, Filter, Found},
};
use crate::consumers::socket;
use crate::consumers::tap::Tap;
use crate::daemon::service::{self, Manager, Target};
use crate::daemon::{run_live, run_once};
use crate::domain::StartAt;
use crate::engine::progress::ProgressShow;
use crate::engine::seed;
use crate::error::{Error, IoContext, Result, SystemContext};
use crate::platform::logging;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Archive AI coding agents' JSONL session transcripts: every complete record, exactly once,
/// in order, into a local SQLite archive.
#[derive(Debug, Parser)]
#[command(name = "transcript-sync", version, propagate_version = true)]
#[command(
    after_help = "Logs go to stderr; set RUST_LOG (error, warn, info, debug) or the \
    configuration's log_level to change how much.\n\
    Configuration: $XDG_CONFIG_HOME/transcript-sync/config.toml (~/.config/...; on macOS \
    ~/Library/Application Support/transcript-sync/config.toml); command-line flags win over it."
)]
pub struct Cli {
    /// The configuration file [default: $XDG_CONFIG_HOME/transcript-sync/config.toml]
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "TRANSCRIPT_SYNC_CONFIG"
    )]
    pub config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Archive every transcript, then keep watching and archive each new record as it is written.
    #[command(
        long_about = "Archive every transcript, then keep watching and archive each new record as \
        it is written, until SIGINT or SIGTERM (or, with --once, exit after one pass). SIGHUP \
        reloads the configuration file.\n\n\
        Without --watch, the watchers of the configuration file, by default the built-in ones: \
        Claude Code ($CLAUDE_CONFIG_DIR or ~/.claude, projects/**/*.jsonl), Codex CLI \
        ($CODEX_HOME or ~/.codex, sessions/ and archived_sessions/), Cursor \
        (~/.cursor/projects/*/agent-transcripts/) and Gemini CLI \
        ($GEMINI_CLI_HOME or ~, .gemini/tmp/*/chats/). Directories that do not exist yet are \
        waited for.\n\n\
        With sinks (config.toml's [[sink]] tables, or --ship), every record is also shipped to \
        PostgreSQL, an HTTP collector or a mirror directory, exactly once in effect, with the \
        archive as the buffer through outages; `status` shows where each sink stands. With \
        --once, it exits once every sink has caught up, or with 1 at a sink's first failure."
    )]
    Run(RunArgs),
    /// Mark the records now in a file as history that is not to be archived.
    #[command(
        long_about = "Mark the records now in a file as history that is not to be archived.\n\n\
        Safe protocol: write the prefix, seed it, then start the writer (or rename the file into \
        the watched tree). Records appended after `seed` are archived, even if they arrive \
        before the daemon first looks at the file. The mark is resolved once, now, against the \
        bytes on disk; it is used once, when the file first becomes a source."
    )]
    Seed(SeedArgs),
    /// Print archived records as JSON lines, in seq order.
    Export(ExportArgs),
    /// Print the last archived records, and with -f follow each new one as it commits.
    #[command(
        long_about = "Print the archived records that match (by default the last 10), as \
        export envelopes or, with --format text, one readable line each (time, harness, \
        session, role, the first line of text). Works with no daemon running.\n\n\
        With -f, then follow each new record as it commits, through the socket of the daemon \
        (`run`) that holds the archive: when the daemon restarts, or says this reader fell \
        behind, tail connects again from the last seq it printed, so nothing is skipped or \
        printed twice. With no daemon running, -f says so and exits 1."
    )]
    Tail(TailArgs),
    /// Show where each source stands: generation, cursor, lag, held-back bytes, counts.
    Status(StatusArgs),
    /// List the lines that are not records, or write one out exactly as it was on disk.
    #[command(
        long_about = "List the lines that are not records, or write one out exactly as it was on \
        disk.\n\n\
        A line is a record when it holds one JSON value; any other complete line (and the \
        unfinished last line of a file that was truncated, rewritten, replaced, deleted or \
        overwritten before its newline came) is rejected: counted, logged, and kept here with \
        its reason, all its bytes up to the record limit. One line per reject: id, time, \
        source, generation, offset, length, bytes kept, path, reason."
    )]
    Rejects(RejectsArgs),
    /// List sessions, newest activity first.
    #[command(
        long_about = "List the archived sessions of every agent, newest activity first: id, \
        harness, project, title (the one the agent recorded, else the first prompt typed), \
        start and last activity, messages (user and assistant, each copy once), records, \
        subagents, files and whether any is still on disk. Subagents are counted under their \
        parent; with --json each session is one object per line, its subagents after it.\n\n\
        The index is kept by `run` as records commit; on an archive that is behind (upgraded, or \
        archived by an older version), the command brings it up to date first when no `run` \
        holds the archive."
    )]
    Sessions(SessionsArgs),
    /// Read one session: the conversation as text, Markdown, JSON, or its raw lines.
    #[command(
        long_about = "Read one session, given its id or a unique prefix of it (at least 4 \
        characters; an ambiguous prefix exits 2 listing the candidates, an unknown one exits 1).\n\n\
        text: the conversation as a person reads it (who, when, the text; a tool call as one line \
        with its name and a short input; a tool result shortened, with its size). markdown: the \
        same as Markdown. json: one object per message, whole, after de-duplication and upserts. \
        raw: the archived lines of the session's main transcript, latest generation, each with \
        its newline, byte for byte."
    )]
    Show(ShowArgs),
    /// Search everything said in every session: prompts, answers, tool inputs and outputs.
    #[command(
        long_about = "Search everything said in every session: user and assistant text, tool \
        inputs and tool outputs. Words match whole words (any case, accents ignored); \
        \"a phrase\" matches words in a row; pre* matches a prefix; AND (the default between \
        words), OR, NOT and parentheses combine them. Other punctuation is taken literally: \
        exit-code searches the phrase \"exit code\".\n\n\
        Hits are ranked by relevance, the newest first among equals (when more than 2,000 \
        messages match, the 2,000 newest are ranked); a prefix stands for at most the 256 \
        commonest terms it starts. Each hit: session, harness, project, time, role and a \
        snippet with the match marked (bold on a terminal, **so** otherwise)."
    )]
    Search(SearchArgs),
    /// Write a session's transcripts back where the agent keeps them, so that it can resume.
    #[command(
        long_about = "Write a session's transcript and its subagents' back where the agent keeps \
        them (or under --to DIR, in the same layout below each watcher's root), byte for byte as \
        archived, with the current time as their modification time, so that the agent's cleanup \
        by age does not delete them again at its next start. Then print the command that \
        resumes the session.\n\n\
        A file that is there and identical is left alone; one that differs is not overwritten \
        without --force. The restored records are marked as already archived (as `seed` does), \
        so a running daemon does not archive them again; what the agent appends is archived.\n\n\
        Another machine's session (pulled from a PostgreSQL sink with pull = true) goes into \
        this machine's layout, under the project's directory here: --project-dir, else the \
        directory of a session here with the same git remote, else the same path if it exists \
        here. Its records are written as pulled; --rewrite-cwd moves their cwd to the new \
        directory."
    )]
    Restore(RestoreArgs),
    /// Rebuild the session index from the archived records.
    #[command(
        long_about = "Empty the session index and build it again from the archived records, with \
        progress. The index is derived from the records alone; rebuilding it loses nothing. \
        Takes the archive's lock: stop a running `run` (or the service) first."
    )]
    Reindex(ReindexArgs),
    /// Store every record again with the best dictionary the archive's records make.
    #[command(
        long_about = "Train a compression dictionary per harness from a sample spread over all \
        of its archived records, store every record again with it when that takes less room, \
        drop the dictionaries no record names any more, and rewrite the file (VACUUM) so that \
        the room freed goes back to the filesystem. Records stay byte for byte what they were.\n\n\
        The daemon compresses records as it archives them, with dictionaries trained from what \
        it has seen so far; an archive written before compression existed, or whose first \
        records were archived before a good dictionary, gets smaller this way. Takes the \
        archive's lock: stop a running `run` (or the service) first. The rewrite needs free \
        room for a copy of the compacted archive."
    )]
    Compact(CompactArgs),
    /// Find secrets in files (--check), or write the files with every secret redacted.
    #[command(
        long_about = "Read transcript lines from each FILE (or stdin, given `-` or nothing) and \
        write them to stdout with every secret replaced by [REDACTED:<rule>]: a JSON line stays \
        one JSON value of the same shape, its strings searched as decoded text; another line \
        is searched as text. The rules are the built-in ones (API keys and tokens of the \
        common services, private keys, URLs with a password, Authorization headers, and \
        password/secret/token assignments with a random value) and config.toml's [redact] \
        table.\n\n\
        With --check, write nothing redacted: report each secret on stdout as \
        FILE:LINE:OFFSET: RULE PREVIEW (the offset in bytes into the line, the preview masked, \
        never the value), and exit 1 when there is any, so that it serves as a pre-commit or \
        CI check."
    )]
    Redact(RedactArgs),
    /// Work with the sinks records are shipped to.
    #[command(subcommand)]
    Sink(SinkCommand),
    /// Work with the configuration file.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Install, remove or inspect `run` as a user service (systemd on Linux, launchd on macOS).
    #[command(subcommand)]
    Service(ServiceCommand),
    /// Check what breaks a watcher in practice, and name the command that fixes each problem.
    #[command(
        long_about = "Check what breaks a watcher in practice, and name the command that fixes \
        each problem: inotify watch and instance limits against the directories under the \
        roots, roots that are missing or unreadable, the archive's permissions and free space, \
        network filesystems (where inotify misses changes made elsewhere), and the service.\n\n\
        One line per finding: ok, warn or FAIL. Exits 1 when a check fails, 0 otherwise."
    )]
    Doctor(DoctorArgs),
    /// Print a completion script for a shell on stdout.
    #[command(
        long_about = "Print a completion script for SHELL on stdout, generated from this \
        binary's own arguments. For example: `transcript-sync completions bash > \
        ~/.local/share/bash-completion/completions/transcript-sync`; zsh: a file named \
        `_transcript-sync` in a directory of $fpath; fish: \
        ~/.config/fish/completions/transcript-sync.fish."
    )]
    Completions(CompletionsArgs),
    /// Print the man page (roff) on stdout, or write every page into a directory.
    #[command(
        long_about = "Print the man page, in roff, on stdout, generated from this binary's own \
        arguments; with --dir, write it and one page per command (transcript-sync-run.1, …) \
        into that directory instead: `transcript-sync man --dir ~/.local/share/man/man1`, \
        then `man transcript-sync` or `man transcript-sync-rejects`."
    )]
    Man(ManArgs),
}

/// Arguments of `redact`.
#[derive(Debug, Args)]
pub struct RedactArgs {
    /// Report the secrets found (never their values) instead of writing redacted lines; exit
    /// 1 when there is any.
    #[arg(long)]
    check: bool,
    /// Files to read; `-` or none: stdin.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// Arguments of `man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page (the command and each subcommand) into this directory.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Arguments of `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Arguments of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    #[command(flatten)]
    dirs: WatchArgs,
    /// Print JSON instead of lines.
    #[arg(long)]
    json: bool,
}

/// The `service` subcommands.
#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write the service file, then have the service manager enable and start it.
    #[command(
        long_about = "Write the service file, then have the service manager enable and start \
        it.\n\n\
        systemd: ~/.config/systemd/user/transcript-sync.service (or under $XDG_CONFIG_HOME), \
        then `systemctl --user daemon-reload` and `systemctl --user enable --now \
        transcript-sync.service`. launchd: ~/Library/LaunchAgents/dev.transcript-sync.plist, \
        then `launchctl bootout` (if loaded) and `launchctl bootstrap gui/UID`. The service runs \
        this binary, by its absolute path, with `run` (and `--db PATH` when --db or \
        TRANSCRIPT_SYNC_DB chose the archive); it may write only the archive's directory. \
        Installing again is harmless."
    )]
    Install(ServiceArgs),
    /// Stop and disable the service and remove its file; the archive is left as it is.
    Uninstall(ServiceArgs),
    /// Whether the service file is installed, whether it runs this binary, and what the
    /// service manager says.
    Status(ServiceArgs),
}

/// Arguments of the `service` subcommands.
#[derive(Debug, Args)]
pub struct ServiceArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// Print the files it would write and the commands it would run; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// The service manager [default: launchd on macOS, systemd elsewhere]
    #[arg(long, value_enum, value_name = "MANAGER")]
    manager: Option<ManagerArg>,
}

/// A service manager, as typed.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ManagerArg {
    /// A systemd user unit (`systemctl --user`).
    Systemd,
    /// A launchd agent (`launchctl`, macOS).
    Launchd,
}

/// `config` subcommands.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration file and print the configuration `run` would use.
    Check(CheckArgs),
}

/// Arguments of `config check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    archive: ArchiveArg,
}

/// Where the archive is.
#[derive(Debug, Args)]
pub struct ArchiveArg {
    /// The archive database [default: the configuration's archive, else
    /// $XDG_DATA_HOME/transcript-sync/archive.db]
    #[arg(long, value_name = "PATH", env = "TRANSCRIPT_SYNC_DB")]
    pub db: Option<PathBuf>,
}

/// Directories given on the command line, in place of the configured watchers.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Watch this directory instead of the configured watchers (repeatable).
    #[arg(long, value_name = "DIR")]
    watch: Vec<PathBuf>,
    /// Which files under each --watch directory are transcripts [default: **/*.jsonl]
    #[arg(long, value_name = "GLOB", requires = "watch")]
    glob: Option<String>,
}

/// Arguments of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    #[command(flatten)]
    dirs: WatchArgs,
    /// Where files present at a directory's first scan start; later files always start at 0
    /// [default: beginning, or each [[watch]] table's start_at]
    #[arg(long, value_enum, value_name = "POLICY")]
    start_at: Option<StartPolicy>,
    /// Read every file once, up to the size it has when it is read, then exit.
    #[arg(long)]
    once: bool,
    /// Also print each record, once committed, as an envelope line on stdout.
    #[arg(long, value_enum, value_name = "SINK")]
    sink: Option<Sink>,
    /// Also ship every record to DEST, exactly once, with the archive as the buffer:
    /// postgres://USER@HOST/DB (password from $PGPASSWORD), http(s)://… (token from
    /// $TRANSCRIPT_SYNC_TOKEN) or mirror:DIR. Repeatable; added to config.toml's [[sink]]s.
    #[arg(long, value_name = "DEST")]
    ship: Vec<String>,
    /// How often every directory is rescanned (stat only) to catch what events miss
    /// (seconds, or with a unit: 90s, 5m) [default: 60]
    #[arg(long, value_name = "INTERVAL", value_parser = config::parse_interval)]
    rescan_interval: Option<Duration>,
    /// How often a directory that cannot be watched is polled instead (stat only)
    /// [default: 2s]
    #[arg(long, value_name = "INTERVAL", value_parser = config::parse_interval)]
    poll_interval: Option<Duration>,
    /// Lines longer than this are rejected (bytes; K, M, G suffixes allowed) [default: 64M]
    #[arg(long, value_name = "SIZE", value_parser = config::parse_record_limit)]
    record_limit: Option<u64>,
    /// Commit after about this many bytes of one file, then move to the next file
    /// [default: 8M]
    #[arg(long, value_name = "SIZE", value_parser = config::parse_size)]
    batch_bytes: Option<u64>,
    /// How often a backfill that is not shown in a terminal logs its progress (0: after every
    /// file and batch).
    #[arg(long, value_name = "INTERVAL", default_value = "5s", value_parser = parse_progress_every)]
    progress_every: Duration,
}

impl RunArgs {
    fn overrides(&self) -> Overrides {
        Overrides {
            db: self.archive.db.clone(),
            watch: self.dirs.watch.clone(),
            glob: self.dirs.glob.clone(),
            start_at: self.start_at.map(|p| match p {
                StartPolicy::Beginning => StartAt::Beginning,
                StartPolicy::End => StartAt::End,
            }),
            record_limit: self.record_limit,
            batch_bytes: self.batch_bytes,
            rescan_interval: self.rescan_interval,
            poll_interval: self.poll_interval,
            ship: self.ship.clone(),
        }
    }
}

/// Where records go besides the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Sink {
    /// Envelope lines on stdout, in seq order, each after its commit.
    Stdout,
}

/// The start policy, as typed.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StartPolicy {
    /// Archive everything already in the files.
    Beginning,
    /// Skip what the files hold at the first scan; archive what is appended.
    End,
}

/// Arguments of `seed`.
#[derive(Debug, Args)]
pub struct SeedArgs {
    /// The transcript whose current records are history.
    path: PathBuf,
    /// Mark only the first N bytes (rounded to the end of the record holding byte N).
    #[arg(long, value_name = "N")]
    prefix_bytes: Option<u64>,
    #[command(flatten)]
    archive: ArchiveArg,
}

/// Arguments of `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// Only sources whose current path is this file or lies under this directory.
    #[arg(long, value_name = "P")]
    path: Option<PathBuf>,
    /// Only records with a seq greater than N.
    #[arg(long, value_name = "N", default_value_t = 0)]
    since_seq: i64,
    /// Replace every secret in the records with [REDACTED:<rule>], as sinks do.
    #[arg(long)]
    redact: bool,
}

/// How `tail` prints a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TailFormat {
    /// The export envelope, one JSON line.
    Envelope,
    /// Time, harness, session, role and the first line of text.
    Text,
}

/// Arguments of `tail`.
#[derive(Debug, Args)]
pub struct TailArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// Start after this seq instead of with the last records.
    #[arg(long, value_name = "N", conflicts_with = "last")]
    since_seq: Option<i64>,
    /// Start with the last N matching records.
    #[arg(long, value_name = "N", default_value_t = 10)]
    last: u64,
    /// Then follow new records through the daemon, until interrupted.
    #[arg(short = 'f', long)]
    follow: bool,
    /// Only records of this watcher (claude-code, codex, cursor, gemini-cli, generic).
    #[arg(long, value_name = "H")]
    harness: Option<String>,
    /// Only records of this session (its id, or a unique prefix of at least 4 characters).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// Only records of the file P, or of the files under the directory P.
    #[arg(long, value_name = "P")]
    path: Option<PathBuf>,
    /// Only records of machine NAME: `this`, `all`, or a machine pulled from a PostgreSQL
    /// sink (its host name, or the start of its UUID). A pulled record's line names its
    /// machine.
    #[arg(long, value_name = "NAME", default_value = "all")]
    machine: String,
    /// How to print each record.
    #[arg(long, value_enum, default_value = "envelope")]
    format: TailFormat,
    /// Replace every secret with [REDACTED:<rule>], as sinks do.
    #[arg(long)]
    redact: bool,
}

/// Arguments of `rejects`.
#[derive(Debug, Args)]
pub struct RejectsArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// Only rejects of sources whose current path is this file or lies under this directory.
    #[arg(long, value_name = "P")]
    path: Option<PathBuf>,
    /// Print JSON lines (the same fields) instead of a table.
    #[arg(long)]
    json: bool,
    /// Write the kept bytes of reject ID to stdout exactly as they were on disk (without the
    /// line's newline; of a line over the record limit, its first record-limit bytes), and
    /// nothing else.
    #[arg(long, value_name = "ID", conflicts_with_all = ["json", "path"])]
    raw: Option<i64>,
}

/// Which sessions to list or search.
#[derive(Debug, Args)]
pub struct SessionFilter {
    /// Only this watcher's sessions (claude-code, codex, gemini-cli, cursor, …).
    #[arg(long, value_name = "H")]
    harness: Option<String>,
    /// Only sessions whose project contains this text (any case).
    #[arg(long, value_name = "TEXT")]
    project: Option<String>,
    /// Only activity since WHEN: a duration back from now (90m, 12h, 2d, 1w) or a date or
    /// time (2026-11-01, 2026-11-01T09:00:00Z).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    since: Option<i64>,
    /// Only the sessions of machine NAME: `this`, `all`, or a machine pulled from a
    /// PostgreSQL sink (its host name, or the start of its UUID).
    #[arg(long, value_name = "NAME", default_value = "all")]
    machine: String,
    /// At most N (0: all).
    #[arg(long, value_name = "N", default_value_t = 50)]
    limit: usize,
}

impl SessionFilter {
    fn filter(&self, archive: &Archive) -> Result<Filter> {
        Ok(Filter {
            harness: self.harness.clone(),
            project: self.project.clone(),
            since_ms: self.since,
            machine: query::machine_named(archive, &self.machine)?,
            limit: self.limit,
        })
    }
}

/// Arguments of `sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    #[command(flatten)]
    filter: SessionFilter,
    /// Print one JSON object per session instead of a table.
    #[arg(long)]
    json: bool,
}

/// Arguments of `show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// The session's id, or a unique prefix of it (at least 4 characters).
    session: String,
    /// The machine whose session it is, when two have one of that id: `this`, or a pulled
    /// machine's host name or UUID prefix.
    #[arg(long, value_name = "NAME", default_value = "all")]
    machine: String,
    /// How to write it.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Also show each subagent's conversation, after the session's.
    #[arg(long)]
    subagents: bool,
    /// Replace every secret with [REDACTED:<rule>], for sharing.
    #[arg(long)]
    redact: bool,
}

/// Arguments of `search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// What to look for: words, "phrases", prefix*, AND, OR, NOT, parentheses.
    query: String,
    #[command(flatten)]
    filter: SessionFilter,
    /// Print one JSON object per hit.
    #[arg(long)]
    json: bool,
}

/// Arguments of `restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// The session's id, or a unique prefix of it (at least 4 characters).
    session: String,
    /// The machine whose session it is, when two have one of that id: `this`, or a pulled
    /// machine's host name or UUID prefix.
    #[arg(long, value_name = "NAME", default_value = "all")]
    machine: String,
    /// Write under this directory instead of where the agent keeps them.
    #[arg(long, value_name = "DIR")]
    to: Option<PathBuf>,
    /// For another machine's session: the project's directory on this machine (by default,
    /// the directory of a session here with the same git remote, else the original path if
    /// it exists here).
    #[arg(long, value_name = "PATH")]
    project_dir: Option<PathBuf>,
    /// For another machine's session restored into another directory: change the `cwd` of
    /// its records from the original project path to the new one (this changes bytes; without
    /// it the records are written as archived).
    #[arg(long)]
    rewrite_cwd: bool,
    /// Overwrite files that differ from the archived transcript.
    #[arg(long)]
    force: bool,
    /// Print what would be written; write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// `sink` subcommands.
#[derive(Debug, Subcommand)]
pub enum SinkCommand {
    /// Ship a sink's dead letters (records its destination refused for good) again.
    #[command(
        long_about = "Ship a sink's dead letters again: each record its destination refused \
        for good, one at a time. A record delivered leaves `dead_letters`; one refused again \
        stays, with the new answer. Stops at the first failure that may pass (the destination \
        is unreachable), with exit 1. The sink is one of config.toml's [[sink]] tables, or one \
        given here with --ship as it was given to `run`."
    )]
    Retry(SinkRetryArgs),
}

/// Arguments of `sink retry`.
#[derive(Debug, Args)]
pub struct SinkRetryArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// The sink's name, as `status` shows it.
    name: String,
    /// A sink given to `run` with --ship: the same --ship again (its name is its type and a
    /// hash of its destination, as `status` shows).
    #[arg(long, value_name = "DEST")]
    ship: Vec<String>,
}

/// Arguments of `reindex`.
#[derive(Debug, Args)]
pub struct ReindexArgs {
    #[command(flatten)]
    archive: ArchiveArg,
}

/// Arguments of `compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// Leave the freed room inside the file (reused by later records) instead of rewriting it.
    #[arg(long)]
    no_vacuum: bool,
    /// Print what was done as JSON.
    #[arg(long)]
    json: bool,
}

/// Arguments of `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs a parsed command line: loads the configuration, starts logging, runs the command.
/// `Err` is fatal and names the path involved.
pub fn execute(cli: Cli) -> Result<()> {
    // Generated from the argument definitions alone: no configuration, no archive.
    match &cli.command {
        Command::Completions(args) => return completions(args.shell),
        Command::Man(args) => return man(args.dir.as_deref()),
        _ => {}
    }
    let source = config::Source::locate(cli.config.as_deref(), &env)?;
    let flags = match &cli.command {
        Command::Run(args) => args.overrides(),
        Command::Seed(SeedArgs { archive, .. })
        | Command::Export(ExportArgs { archive, .. })
        | Command::Tail(TailArgs { archive, .. })
        | Command::Status(StatusArgs { archive, .. })
        | Command::Rejects(RejectsArgs { archive, .. })
        | Command::Sessions(SessionsArgs { archive, .. })
        | Command::Show(ShowArgs { archive, .. })
        | Command::Search(SearchArgs { archive, .. })
        | Command::Reindex(ReindexArgs { archive })
        | Command::Compact(CompactArgs { archive, .. })
        | Command::Config(ConfigCommand::Check(CheckArgs { archive }))
        | Command::Service(
            ServiceCommand::Install(ServiceArgs { archive, .. })
            | ServiceCommand::Uninstall(ServiceArgs { archive, .. })
            | ServiceCommand::Status(ServiceArgs { archive, .. }),
        ) => Overrides {
            db: archive.db.clone(),
            ..Overrides::default()
        },
        Command::Restore(args) => Overrides {
            db: args.archive.db.clone(),
            ..Overrides::default()
        },
        Command::Sink(SinkCommand::Retry(args)) => Overrides {
            db: args.archive.db.clone(),
            ship: args.ship.clone(),
            ..Overrides::default()
        },
        Command::Completions(_) | Command::Man(_) | Command::Redact(_) => Overrides::default(),
        Command::Doctor(args) => Overrides {
            db: args.archive.db.clone(),
            watch: args.dirs.watch.clone(),
            glob: args.dirs.glob.clone(),
            ..Overrides::default()
        },
    };
    let needs_file = matches!(
        cli.command,
        Command::Run(_)
            | Command::Config(_)
            | Command::Service(_)
            | Command::Doctor(_)
            | Command::Restore(_)
            | Command::Sink(_)
            | Command::Redact(_)
            | Command::Export(ExportArgs { redact: true, .. })
            | Command::Show(ShowArgs { redact: true, .. })
            | Command::Tail(TailArgs { redact: true, .. })
    );
    let settings = match &flags.db {
        // The archive is all these commands take from the file; with --db they work even
        // when the file is broken (to look at the archive while fixing it).
        Some(db) if !needs_file => Settings::for_archive(source.clone(), absolute(db), &env),
        _ => Settings::load(source.clone(), &flags, &env)?,
    };
    logging::init(settings.log_level);
    if settings.archive.is_dir() {
        return Err(Error::ArchiveIsDirectory {
            path: settings.archive,
        });
    }
    match cli.command {
        Command::Run(args) => run(args, settings, flags, source),
        Command::Seed(args) => seed(args, &settings.archive),
        Command::Export(args) => export(args, &settings),
        Command::Tail(args) => tail(args, &settings),
        Command::Status(args) => status(args, &settings),
        Command::Rejects(args) => rejects(args, &settings.archive),
        Command::Sessions(args) => sessions(args, &settings.archive),
        Command::Show(args) => show(args, &settings),
        Command::Search(args) => search(args, &settings.archive),
        Command::Restore(args) => restore(args, &settings),
        Command::Reindex(_) => reindex(&settings.archive),
        Command::Compact(args) => compact(&args, &settings.archive),
        Command::Sink(SinkCommand::Retry(args)) => sink_retry(&args.name, &settings),
        Command::Config(ConfigCommand::Check(_)) => config_check(&settings),
        Command::Service(cmd) => service(cmd, &settings),
        Command::Doctor(args) => doctor(args, &settings),
        Command::Redact(args) => redact(args, &settings),
        Command::Completions(_) | Command::Man(_) => Ok(()),
    }
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

/// `--watch` directories: each must be a directory, or not exist yet (it is then waited for).
fn check_watch_dirs(dirs: &[PathBuf], once: bool) -> Result<()> {
    for dir in dirs {
        let path = absolute(dir);
        if path.exists() && !path.is_dir() {
            return Err(Error::WatchNotDirectory { path });
        }
        if !path.exists() {
            let then = if once {
                "nothing to read there"
            } else {
                "it is waited for"
            };
            log::warn!("--watch {path:?} does not exist yet; {then}");
        }
    }
    Ok(())
}

fn log_settings(settings: &Settings) {
    let file = &settings.source.path;
    if settings.found {
        log::info!("configuration path={file:?}");
    } else {
        log::debug!("no configuration file at {file:?}; defaults apply");
    }
    log::info!("archive path={:?}", settings.archive);
    for r in &settings.roots {
        log::info!(
            "watching path={:?} harness={} ({})",
            r.path,
            r.harness,
            r.description
        );
    }
}

fn run(args: RunArgs, settings: Settings, flags: Overrides, source: config::Source) -> Result<()> {
    check_watch_dirs(&args.dirs.watch, args.once)?;
    // A `[redact]` table at fault stops `run` at its start (and a reload), sinks or not.
    settings.redactor.get()?;
    let db = settings.archive.clone();
    crate::archive::ensure_dir(&db)?;
    let _lock = ArchiveLock::acquire(&db)?;
    let tap = match args.sink {
        Some(Sink::Stdout) => Some(Tap::stdout().starting("tap")?),
        None => None,
    };
    log_settings(&settings);
    let show = ProgressShow::for_stderr(args.progress_every);
    if !args.once {
        let reload = Box::new(move || {
            let settings = Settings::load(source.clone(), &flags, &env)?;
            settings.redactor.get()?;
            Ok(settings)
        });
        return run_live(&db, tap, settings, show, reload);
    }
    let report = run_once(&db, tap, &settings, show)?;
    for (path, bytes) in &report.held_back {
        log::info!(
            "held back path={path:?} bytes={bytes} (an incomplete last line, archived once it ends with a newline)"
        );
    }
    log::info!("pass complete {report}");
    Ok(())
}

fn seed(args: SeedArgs, db: &Path) -> Result<()> {
    let path = absolute(&args.path);
    // Checked before the archive is opened, so that a typo creates no archive.
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_file() => {}
        Ok(_) => return Err(Error::NotRegular { path }),
        Err(source) => return Err(Error::Io { path, source }),
    }
    crate::archive::ensure_dir(db)?;
    let mut archive = Archive::open(db)?;
    let seeded = seed::seed_prefix(&mut archive, &path, args.prefix_bytes)?;
    for w in &seeded.warnings {
        log::warn!("{w} path={path:?}");
    }
    if let Some(old) = seeded.replaced.filter(|old| *old != seeded.offset) {
        log::warn!("replaced an earlier prefix mark at offset {old} path={path:?}");
    }
    println!(
        "seeded {}: history ends at offset {} ({} records); archive {}",
        path.display(),
        seeded.offset,
        seeded.records,
        db.display()
    );
    Ok(())
}

fn export(args: ExportArgs, settings: &Settings) -> Result<()> {
    let archive = Archive::open_existing(&settings.archive)?;
    let filter = args.path.as_deref().map(absolute);
    let stdout = io::stdout().lock();
    let mut out = BufWriter::with_capacity(256 * 1024, stdout);
    let redactor = redactor_if(args.redact, settings)?;
    let redactor = redactor.as_deref();
    let written = archive
        .export(args.since_seq, filter.as_deref(), |mut row| {
            if let Some(r) = redactor {
                r.redact_record_in_place(&mut row.record);
            }
            write_envelope(&mut out, &row)
        })?
        .and_then(|()| out.flush());
    stdout_result(written)
}

fn tail(args: TailArgs, settings: &Settings) -> Result<()> {
    if let Some(path) = args.path.as_ref().filter(|p| p.to_str().is_none()) {
        return Err(Error::Tail {
            reason: format!(
                "--path {} is not UTF-8, which the socket's requests are",
                path.display()
            ),
        });
    }
    let request = socket::Request {
        since_seq: args.since_seq,
        harness: args.harness,
        session: args.session,
        path: args.path.as_deref().map(absolute),
    };
    let redactor = redactor_if(args.redact, settings)?;
    let machine = match args.machine.as_str() {
        "all" => None,
        name => query::machine_named(&Archive::open_existing(&settings.archive)?, name)?,
    };
    let tail = tail::Tail {
        db: &settings.archive,
        socket: &settings.socket,
        request,
        machine,
        last: args.last,
        follow: args.follow,
        style: match args.format {
            TailFormat::Envelope => tail::Style::Envelope,
            TailFormat::Text => tail::Style::Text,
        },
        redactor: redactor.as_deref(),
    };
    let mut out = BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let written = tail.run(&mut out)?;
    stdout_result(written.and_then(|()| out.flush()))
}

fn status(args: StatusArgs, settings: &Settings) -> Result<()> {
    let archive = Archive::open_existing(&settings.archive)?;
    let st = status::status(&archive, &settings.socket)?;
    print_report(args.json, &st, status::write_text)
}

fn rejects(args: RejectsArgs, db: &Path) -> Result<()> {
    let archive = Archive::open_existing(db)?;
    let mut out = BufWriter::with_capacity(256 * 1024, io::stdout().lock());
    if let Some(id) = args.raw {
        let Some(written) = archive.write_reject_raw(id, &mut out)? else {
            let path = db.to_owned();
            return Err(Error::NoSuchReject { path, id });
        };
        return stdout_result(written.and_then(|_| out.flush()));
    }
    let filter = args.path.as_deref().map(absolute);
    let written = if args.json {
        archive
            .rejects(filter.as_deref(), |r| write_json(&mut out, &r.into()))?
            .and_then(|()| out.flush())
    } else {
        let mut table = match TextWriter::new(out) {
            Ok(table) => table,
            Err(e) => return stdout_result(Err(e)),
        };
        archive
            .rejects(filter.as_deref(), |r| table.write(&r.into()))?
            .and_then(|()| table.finish())
    };
    stdout_result(written)
}

/// The archive at `db` with its session index attached and up to date: caught up here when
/// no `run` holds the archive (an upgraded archive gets its index this way, with progress);
/// when one does, it is catching up itself, and a warning says how far it is.
fn indexed_archive(db: &Path) -> Result<Archive> {
    let archive = Archive::open_existing_to_write(db)?;
    sessions::store::attach(&archive)?;
    let done = sessions::store::done(db)?;
    let last = archive.last_seq()?;
    if done >= last {
        return Ok(archive);
    }
    let _lock = match ArchiveLock::acquire(db) {
        Ok(lock) => lock,
        Err(Error::Locked { .. }) => {
            log::warn!(
                "the session index is at seq {done} of {last}, and a running `run` holds the \
                 archive (it brings the index up to date); results may be incomplete"
            );
            return Ok(archive);
        }
        Err(e) => return Err(e),
    };
    catch_up_index(db)?;
    Ok(archive)
}

/// Brings the index of the archive at `db` up to date, with a progress bar on a terminal and
/// log lines.
fn catch_up_index(db: &Path) -> Result<()> {
    let mut indexer = sessions::Indexer::open(db)?;
    let done = indexer.done()?;
    log::info!("indexing sessions from seq {done}");
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template("indexing sessions {bar:30} {pos}/{len} records")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let indexed = indexer.catch_up(|at, last| {
        bar.set_length((last - done).max(0) as u64);
        bar.set_position((at - done).max(0) as u64);
    })?;
    bar.finish_and_clear();
    log::info!("session index up to date: {indexed} records indexed");
    Ok(())
}

fn sessions(args: SessionsArgs, db: &Path) -> Result<()> {
    let mut archive = indexed_archive(db)?;
    let filter = args.filter.filter(&archive)?;
    let list = query::sessions(&mut archive, &filter)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let written = if args.json {
        (|| {
            for s in &list {
                write_json_line(&mut out, s)?;
                if s.subagents == 0 {
                    continue;
                }
                for sub in query::subagents(&mut archive, s).map_err(io::Error::other)? {
                    write_json_line(&mut out, &sub)?;
                }
            }
            Ok(())
        })()
    } else {
        let home = crate::platform::home::home(&env).ok();
        let width = crate::platform::sys::terminal_width();
        show::write_sessions(
            &mut out,
            &list,
            width,
            home.as_deref(),
            crate::platform::time::now_ms(),
        )
    };
    stdout_result(written.and_then(|()| out.flush()))
}

fn write_json_line(out: &mut impl Write, value: &impl serde::Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)
}

/// The session `id` names in the archive: exit 1 when none, 2 when several.
fn find_session(archive: &mut Archive, id: &str, machine: &str) -> Result<query::Session> {
    let machine = query::machine_named(archive, machine)?;
    match query::find(archive, id, machine)? {
        Found::One(s) => Ok(*s),
        Found::None => Err(Error::NoSuchSession {
            path: archive.path().to_owned(),
            id: id.to_owned(),
        }),
        Found::Many(list) => Err(Error::AmbiguousSession {
            id: id.to_owned(),
            candidates: (list.iter())
                .map(|s| {
                    let project = s.project.as_deref().unwrap_or("-");
                    format!("{} ({}, {project}, on {})", s.id, s.harness, s.machine)
                })
                .collect(),
        }),
    }
}

fn show(args: ShowArgs, settings: &Settings) -> Result<()> {
    use std::io::IsTerminal;
    let mut archive = indexed_archive(&settings.archive)?;
    let mut session = find_session(&mut archive, &args.session, &args.machine)?;
    let redactor = redactor_if(args.redact, settings)?;
    let redactor = redactor.as_deref();
    if let Some(r) = redactor {
        session.redact(r);
    }
    let stdout = io::stdout();
    let style = show::Style::new(stdout.is_terminal());
    let mut out = BufWriter::new(stdout.lock());
    if args.format == Format::Raw {
        let files = query::session_files(&mut archive, &session)?;
        let written = match files.first() {
            Some(main) => query::write_records(&mut archive, main, redactor, &mut out)?.map(drop),
            None => Ok(()),
        };
        return stdout_result(written.and_then(|()| out.flush()));
    }
    let mut sessions = vec![session.clone()];
    if args.subagents {
        sessions.extend(query::subagents(&mut archive, &session)?);
    }
    for (i, s) in sessions.iter_mut().enumerate() {
        let mut messages = query::messages(&mut archive, s)?;
        if let Some(r) = redactor {
            s.redact(r);
            messages.iter_mut().for_each(|m| m.redact(r));
        }
        let written = match args.format {
            Format::Json => show::write_messages_json(&mut out, s, &messages),
            _ if i > 0 => writeln!(out).and_then(|()| {
                show::write_conversation(&mut out, s, &messages, args.format, style)
            }),
            _ => show::write_conversation(&mut out, s, &messages, args.format, style),
        };
        stdout_result(written)?;
    }
    stdout_result(out.flush())
}

fn search(args: SearchArgs, db: &Path) -> Result<()> {
    use std::io::IsTerminal;
    let mut archive = indexed_archive(db)?;
    let stdout = io::stdout();
    let style = show::Style::new(stdout.is_terminal() && !args.json);
    let filter = args.filter.filter(&archive)?;
    let hits = query::search(&mut archive, &args.query, &filter, style.marks())?;
    let mut out = BufWriter::new(stdout.lock());
    let written = if args.json {
        hits.iter().try_for_each(|h| write_json_line(&mut out, h))
    } else {
        let home = crate::platform::home::home(&env).ok();
        show::write_hits(&mut out, &hits, home.as_deref(), style)
    };
    stdout_result(written.and_then(|()| out.flush()))
}

fn restore(args: RestoreArgs, settings: &Settings) -> Result<()> {
    let mut archive = indexed_archive(&settings.archive)?;
    let session = find_session(&mut archive, &args.session, &args.machine)?;
    let to = args.to.as_deref().map(absolute);
    let project_dir = args.project_dir.as_deref().map(absolute);
    let request = crate::cli::restore::Request {
        roots: &settings.roots,
        to: to.as_deref(),
        force: args.force,
        dry_run: args.dry_run,
        project_dir: project_dir.as_deref(),
        rewrite_cwd: args.rewrite_cwd,
    };
    let mut out = io::stdout().lock();
    crate::cli::restore::restore(&mut archive, &session, &request, &mut out)
}

/// The configuration's redactor when `redact` (`--redact` was given), else none.
fn redactor_if(redact: bool, settings: &Settings) -> Result<Option<Arc<Redactor>>> {
    redact.then(|| settings.redactor.get()).transpose()
}

fn redact(args: RedactArgs, settings: &Settings) -> Result<()> {
    let redactor = settings.redactor.get()?;
    let mut out = BufWriter::with_capacity(256 * 1024, io::stdout().lock());
    if !args.check {
        let written = redact::redact_files(&redactor, &args.files, &mut out)?;
        return stdout_result(written.and_then(|()| out.flush()));
    }
    let checked = redact::check_files(&redactor, &args.files, &mut out)?;
    let checked = match checked.and_then(|c| out.flush().map(|()| c)) {
        Ok(checked) => checked,
        Err(e) => return stdout_result(Err(e)),
    };
    match checked {
        redact::Checked { secrets: 0, .. } => Ok(()),
        redact::Checked { secrets, files } => Err(Error::SecretsFound { secrets, files }),
    }
}

fn reindex(db: &Path) -> Result<()> {
    let _lock = ArchiveLock::acquire(db)?;
    // Migrated first: an archive of schema 8 or older still holds an index of its own.
    drop(Archive::open_existing_to_write(db)?);
    sessions::store::remove(db)?;
    catch_up_index(db)?;
    println!(
        "session index rebuilt: {}",
        sessions::store::path_of(db).display()
    );
    Ok(())
}

fn compact(args: &CompactArgs, db: &Path) -> Result<()> {
    let _lock = ArchiveLock::acquire(db)?;
    let mut archive = Archive::open_existing_to_write(db)?;
    let done = archive.compact(!args.no_vacuum, &mut |step| eprintln!("compact: {step}"))?;
    if args.json {
        let mut out = io::stdout().lock();
        let written = serde_json::to_writer(&mut out, &done)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out));
        return stdout_result(written);
    }
    use crate::cli::status::{megabytes as mb, share_of};
    let share = |stored| share_of(stored, done.record_bytes);
    println!(
        "compacted {}: {} records ({}) stored in {}{} instead of {}{}; {} stored again; \
         file {} -> {}",
        db.display(),
        done.records,
        mb(done.record_bytes),
        mb(done.stored_after),
        share(done.stored_after),
        mb(done.stored_before),
        share(done.stored_before),
        done.rewritten,
        mb(done.file_before),
        mb(done.file_after)
    );
    Ok(())
}

fn sink_retry(name: &str, settings: &Settings) -> Result<()> {
    let Some(spec) = settings.sinks.iter().find(|s| s.name == name) else {
        let names: Vec<&str> = settings.sinks.iter().map(|s| s.name.as_str()).collect();
        return Err(Error::Sink {
            name: name.to_owned(),
            message: format!(
                "no such sink in {} (sinks: {}); a sink given to `run` with --ship needs the same --ship here",
                settings.source.path.display(),
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join(", ")
                }
            ),
        });
    };
    let report = crate::consumers::ship::retry_dead_letters(spec, &settings.archive)?;
    println!(
        "sink {name}: {} dead letters shipped, {} refused again",
        report.shipped, report.refused
    );
    Ok(())
}

/// `--since`: a duration back from now, or a date or time.
fn parse_since(text: &str) -> std::result::Result<i64, String> {
    let now = crate::platform::time::now_ms();
    if let Ok(d) = humantime::parse_duration(text) {
        return Ok(now - d.as_millis() as i64);
    }
    let time = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_owned()
    };
    crate::consumers::sessions::parse::time_ms(&time).ok_or_else(|| {
        format!("{text:?} is neither a duration (90m, 12h, 2d, 1w) nor a date (2026-11-01) or time (2026-11-01T09:00:00Z)")
    })
}

/// Says whether the configuration file is valid, and prints what `run` would use.
fn config_check(settings: &Settings) -> Result<()> {
    // The rules are compiled when first needed; checking the file compiles them now.
    settings.redactor.get()?;
    let file = &settings.source.path;
    let origin = if settings.found {
        format!("# configuration file {} is valid", file.display())
    } else {
        format!(
            "# no configuration file at {}; defaults apply",
            file.display()
        )
    };
    let text = format!(
        "{origin}\n# resolved with the command line and environment:\n{}\n",
        settings.to_toml()
    );
    stdout_result(io::stdout().lock().write_all(text.as_bytes()))
}

/// An interval, or 0.
fn parse_progress_every(text: &str) -> std::result::Result<Duration, String> {
    match text.trim() {
        "0" => Ok(Duration::ZERO),
        t => config::parse_interval(t),
    }
}

fn service(cmd: ServiceCommand, settings: &Settings) -> Result<()> {
    let (ServiceCommand::Install(args)
    | ServiceCommand::Uninstall(args)
    | ServiceCommand::Status(args)) = &cmd;
    let manager = match args.manager {
        Some(ManagerArg::Systemd) => Manager::Systemd,
        Some(ManagerArg::Launchd) => Manager::Launchd,
        None => Manager::native(),
    };
    let target = service_target(manager, settings, args.archive.db.is_some())?;
    let mut out = io::stdout().lock();
    match cmd {
        ServiceCommand::Install(a) => service::install(&target, a.dry_run, &mut out),
        ServiceCommand::Uninstall(a) => service::uninstall(&target, a.dry_run, &mut out),
        ServiceCommand::Status(a) => {
            let st = service::status(&target, a.dry_run)?;
            stdout_result(service::write_status(&mut out, &st))
        }
    }
}

/// The service for this binary; `run` gets `--db` when the archive was given on the command
/// line or in the environment, and `--config` when the configuration file was.
fn service_target(manager: Manager, settings: &Settings, pass_archive: bool) -> Result<Target> {
    let mut target =
        Target::for_this_binary(manager, settings.archive.clone(), pass_archive, &env)?;
    let source = &settings.source;
    target.definition.config = source.explicit.then(|| source.path.clone());
    target.definition.mirrors = (settings.sinks.iter())
        .filter_map(|s| match &s.target {
            crate::consumers::ship::Target::Mirror { dir, .. } => Some(dir.clone()),
            _ => None,
        })
        .collect();
    Ok(target)
}

fn doctor(args: DoctorArgs, settings: &Settings) -> Result<()> {
    let target = service_target(Manager::native(), settings, args.archive.db.is_some());
    let report = doctor::diagnose(&settings.roots, &settings.archive, &target);
    print_report(args.json, &report, |out, r| doctor::write_text(out, r))?;
    match report.failures {
        0 => Ok(()),
        failures => Err(Error::DoctorFailed { failures }),
    }
}

/// `completions SHELL`: the script clap_complete writes for this command line.
fn completions(shell: clap_complete::Shell) -> Result<()> {
    use clap::CommandFactory;
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "transcript-sync", &mut out);
    stdout_result(io::stdout().lock().write_all(&out))
}

/// `man`: the pages clap_mangen renders from this command line, the main one on stdout or all
/// of them into `dir`.
fn man(dir: Option<&Path>) -> Result<()> {
    use clap::CommandFactory;
    if let Some(dir) = dir {
        clap_mangen::generate_to(Cli::command(), dir).at_path(dir)?;
        println!("wrote the man pages into {}", dir.display());
        return Ok(());
    }
    let mut out = Vec::new();
    let rendered = clap_mangen::Man::new(Cli::command()).render(&mut out);
    stdout_result(rendered.and_then(|()| io::stdout().lock().write_all(&out)))
}

/// Prints `report` on stdout: as pretty JSON, or as `text` writes it for people.
fn print_report<T: serde::Serialize>(
    json: bool,
    report: &T,
    text: impl FnOnce(&mut io::StdoutLock<'static>, &T) -> io::Result<()>,
) -> Result<()> {
    let mut out = io::stdout().lock();
    let written = if json {
        serde_json::to_writer_pretty(&mut out, report)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        text(&mut out, report)
    };
    stdout_result(written)
}

/// A reader that closed the pipe early is not an error (`export | head`).
fn stdout_result(written: io::Result<()>) -> Result<()> {
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(source) => Err(Error::Stdout { source }),
        Ok(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
