//! The command line's definition: every command, its arguments and their help, and what
//! `execute` must know of each command before it runs it.

use crate::archive::Archive;
use crate::config::{self, Overrides};
use crate::consumers::sessions::query::{self, Filter};
use crate::domain::StartAt;
use crate::error::{Error, Result};
use crate::history::parse_since;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

/// What `--version` says: the version, the commit it was built from and the day (`build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("TRANSCRIPT_SYNC_COMMIT"),
    ", built ",
    env!("TRANSCRIPT_SYNC_BUILT"),
    ")"
);

/// Archive AI coding agents' sessions (transcripts appended to, documents rewritten whole,
/// their databases): every record, exactly once, in order, into a local SQLite archive.
#[derive(Debug, Parser)]
#[command(name = "transcript-sync", version = VERSION, propagate_version = true)]
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
    /// Read one session: the conversation as text, Markdown, JSON, HTML, or its raw lines.
    #[command(
        long_about = "Read one session, given its id or a unique prefix of it (at least 4 \
        characters; an ambiguous prefix exits 2 listing the candidates, an unknown one exits 1).\n\n\
        text: the conversation as a person reads it (who, when, the text; a tool call as one line \
        with its name and a short input; a tool result shortened, with its size). markdown: the \
        same as Markdown. json: one object per message, whole, after de-duplication and upserts. \
        html: one file to share, read in any browser: the conversation as the web view shows it \
        (tool output folded), its styles inline, no script and nothing fetched, every secret \
        replaced as --redact does unless --no-redact. \
        raw: the session's transcript as archived: the lines of its latest generation, each with \
        its newline, byte for byte, or a file its agent rewrites whole as last kept. For an agent \
        that keeps a session in several files (a manifest beside the conversation), the \
        transcript is the file that holds the most of its messages; stderr names it and the \
        others, and --file prints another."
    )]
    Show(ShowArgs),
    /// Search everything said in every session: prompts, answers, tool inputs and outputs.
    #[command(
        long_about = "Search everything said in every session: user and assistant text, tool \
        inputs and tool outputs. Words match whole words (any case, accents ignored), in every \
        script: a word of Chinese, Japanese, Thai, Lao, Khmer or Myanmar is found inside \
        running text, and a Korean word with its particles attached; \
        \"a phrase\" matches words in a row; pre* matches a prefix; AND (the default between \
        words), OR, NOT and parentheses combine them. Other punctuation is taken literally: \
        exit-code searches the phrase \"exit code\".\n\n\
        Hits are ranked by relevance, a match in a prompt or an answer counting twice one in \
        a tool's call or output or the model's reasoning, the newest first among equals (when \
        more than 2,000 messages match, the 2,000 newest are ranked); a prefix stands for at \
        most the 256 commonest terms it starts. Each hit: session, harness, project, time, role and a \
        snippet with the match marked (bold red on a terminal, **so** otherwise; --color)."
    )]
    Search(SearchArgs),
    /// What the sessions cost: tokens and estimated cost by day, model, project, agent, …
    #[command(
        long_about = "What the sessions cost: the tokens of every model call the agents \
        recorded (input not read from the cache, output with thinking, input read from the \
        cache and written to it) and their estimated cost, by day (the default), week, month, \
        model, project, agent, machine or session, with a total. A call that a resume or a \
        compaction copied into another session counts once (docs/usage.md says, per agent, \
        how calls are told apart).\n\n\
        Prices are those of data/prices.toml (per model, with the day they were taken and their \
        source), under config.toml's [prices.\"MODEL\"] tables (input, output, cache_read, \
        cache_write: US dollars per million tokens). A model with no price has its tokens \
        counted and no cost: its rows' cost is marked, and the models are named.\n\n\
        Usage is read from Claude Code, Codex CLI, Gemini CLI, Qwen Code, Pi, GitHub Copilot \
        CLI, OpenCode and Kilo Code, Amp, gptme and Cline, which record it per call."
    )]
    Usage(UsageArgs),
    /// Serve the archive to an agent over MCP (stdio): search, list, read, usage.
    #[command(
        long_about = "Serve the archive as a Model Context Protocol server on stdin and stdout, \
        so that an agent can search its own history: tools search (everything said), \
        list_sessions, read_session (a window of a session's messages) and usage (tokens and \
        cost). Read-only; results are redacted (the redaction rules, with config.toml's) unless \
        --no-redact, and bounded (64 KiB a call, 4,000 characters a message part, 100 messages \
        or sessions at once).\n\n\
        For Claude Code: claude mcp add transcript-sync -- transcript-sync mcp"
    )]
    Mcp(McpArgs),
    /// Browse the archive in a web browser: sessions, search, conversations, live, usage.
    #[command(
        long_about = "Serve the archive as web pages on loopback and open them in the browser: \
        the sessions (filtered and sorted), search as you type, each conversation (Markdown, \
        thinking and tool output folded, loaded as you scroll, followed live while the daemon \
        archives it), restore with a confirmation, the raw transcript, status and usage.\n\n\
        The URL it prints holds a token, which the browser keeps as a cookie: a page from \
        elsewhere cannot read the archive or act on it. It serves on 127.0.0.1 on a free port \
        unless --listen (or config.toml's [ui] listen) names an address; a non-loopback address \
        is served only because it was named, and still only with the token. Every asset is \
        in the binary: it works offline.",
        after_help = "Examples:\n  transcript-sync ui\n  transcript-sync ui --listen 127.0.0.1:8787 --no-open"
    )]
    Ui(UiArgs),
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
    /// Star a session, tag it, or write a note on it: your marks, kept in the archive.
    #[command(
        long_about = "Star a session, tag it, or write a note on it; with none of those, print its \
        marks. Marks are kept in the archive, not in the session index: `reindex` keeps them. \
        `sessions --starred` and `sessions --tag TAG` (and `search`) list the sessions marked, \
        and the web view and the MCP server show them. Works while `run` is running."
    )]
    Mark(MarkArgs),
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

/// What `execute` must know of a command before it runs it, written beside the command's
/// arguments.
pub(crate) trait Facts {
    /// The command line's flags that override the configuration file.
    fn overrides(&self) -> Overrides;

    /// Whether the command takes more from the configuration file than where the archive
    /// is (watchers, sinks, redaction rules, …): the file is then loaded and must be valid
    /// even when `--db` names the archive. The others work with `--db` while the file is
    /// broken, to look at the archive while fixing it.
    fn needs_config_file(&self) -> bool {
        false
    }
}

impl Command {
    /// The facts of this command, from its arguments.
    pub(crate) fn facts(&self) -> &dyn Facts {
        match self {
            Command::Run(a) => a,
            Command::Seed(a) => a,
            Command::Export(a) => a,
            Command::Tail(a) => a,
            Command::Status(a) => a,
            Command::Rejects(a) => a,
            Command::Sessions(a) => a,
            Command::Show(a) => a,
            Command::Search(a) => a,
            Command::Usage(a) => a,
            Command::Mcp(a) => a,
            Command::Ui(a) => a,
            Command::Restore(a) => a,
            Command::Mark(a) => a,
            Command::Reindex(a) => a,
            Command::Compact(a) => a,
            Command::Sink(a) => a,
            Command::Config(a) => a,
            Command::Service(a) => a,
            Command::Doctor(a) => a,
            Command::Redact(a) => a,
            Command::Completions(a) => a,
            Command::Man(a) => a,
        }
    }
}

impl ArchiveArg {
    /// `--db` as an override.
    fn overrides(&self) -> Overrides {
        Overrides {
            db: self.db.clone(),
            ..Overrides::default()
        }
    }
}

/// Arguments of `redact`.
#[derive(Debug, Args)]
pub struct RedactArgs {
    /// Report the secrets found (never their values) instead of writing redacted lines; exit
    /// 1 when there is any.
    #[arg(long)]
    pub(crate) check: bool,
    /// Files to read; `-` or none: stdin.
    #[arg(value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
}

impl Facts for RedactArgs {
    fn overrides(&self) -> Overrides {
        Overrides::default()
    }

    /// The redaction rules are the configuration's.
    fn needs_config_file(&self) -> bool {
        true
    }
}

/// Arguments of `man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page (the command and each subcommand) into this directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
}

impl Facts for ManArgs {
    /// Generated from the argument definitions alone, before any configuration is read.
    fn overrides(&self) -> Overrides {
        Overrides::default()
    }
}

/// Arguments of `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

impl Facts for CompletionsArgs {
    /// Generated from the argument definitions alone, before any configuration is read.
    fn overrides(&self) -> Overrides {
        Overrides::default()
    }
}

/// Arguments of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    #[command(flatten)]
    pub(crate) dirs: WatchArgs,
    /// Print JSON instead of lines.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Facts for DoctorArgs {
    fn overrides(&self) -> Overrides {
        Overrides {
            watch: self.dirs.watch.clone(),
            glob: self.dirs.glob.clone(),
            ..self.archive.overrides()
        }
    }

    /// It checks the configured watchers and the service.
    fn needs_config_file(&self) -> bool {
        true
    }
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

impl Facts for ServiceCommand {
    fn overrides(&self) -> Overrides {
        let (ServiceCommand::Install(args)
        | ServiceCommand::Uninstall(args)
        | ServiceCommand::Status(args)) = self;
        args.archive.overrides()
    }

    /// The service runs with the configuration's archive and sinks.
    fn needs_config_file(&self) -> bool {
        true
    }
}

/// Arguments of the `service` subcommands.
#[derive(Debug, Args)]
pub struct ServiceArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// Print the files it would write and the commands it would run; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// The service manager [default: launchd on macOS, systemd elsewhere]
    #[arg(long, value_enum, value_name = "MANAGER")]
    pub(crate) manager: Option<ManagerArg>,
}

/// A service manager, as typed.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum ManagerArg {
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

impl Facts for ConfigCommand {
    fn overrides(&self) -> Overrides {
        let ConfigCommand::Check(args) = self;
        args.archive.overrides()
    }

    /// The file is what it checks.
    fn needs_config_file(&self) -> bool {
        true
    }
}

/// Arguments of `config check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
}

/// Where the archive is.
#[derive(Debug, Args)]
pub(crate) struct ArchiveArg {
    /// The archive database [default: the configuration's archive, else
    /// $XDG_DATA_HOME/transcript-sync/archive.db]
    #[arg(long, value_name = "PATH", env = "TRANSCRIPT_SYNC_DB")]
    pub db: Option<PathBuf>,
}

/// Directories given on the command line, in place of the configured watchers.
#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// Watch this directory instead of the configured watchers (repeatable).
    #[arg(long, value_name = "DIR")]
    pub(crate) watch: Vec<PathBuf>,
    /// Which files under each --watch directory are transcripts [default: **/*.jsonl]
    #[arg(long, value_name = "GLOB", requires = "watch")]
    pub(crate) glob: Option<String>,
}

/// Arguments of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    #[command(flatten)]
    pub(crate) dirs: WatchArgs,
    /// Where files present at a directory's first scan start; later files always start at 0
    /// [default: beginning, or each [[watch]] table's start_at]
    #[arg(long, value_enum, value_name = "POLICY")]
    pub(crate) start_at: Option<StartPolicy>,
    /// Read every file once, up to the size it has when it is read, then exit.
    #[arg(long)]
    pub(crate) once: bool,
    /// Also print each record, once committed, as an envelope line on stdout.
    #[arg(long, value_enum, value_name = "SINK")]
    pub(crate) sink: Option<Sink>,
    /// Also ship every record to DEST, exactly once, with the archive as the buffer:
    /// postgres://USER@HOST/DB (password from $PGPASSWORD), http(s)://… (token from
    /// $TRANSCRIPT_SYNC_TOKEN) or mirror:DIR. Repeatable; added to config.toml's [[sink]]s.
    #[arg(long, value_name = "DEST")]
    pub(crate) ship: Vec<String>,
    /// How often every directory is rescanned (stat only) to catch what events miss
    /// (seconds, or with a unit: 90s, 5m) [default: 60]
    #[arg(long, value_name = "INTERVAL", value_parser = config::parse_interval)]
    pub(crate) rescan_interval: Option<Duration>,
    /// How often a directory that cannot be watched is polled instead (stat only)
    /// [default: 2s]
    #[arg(long, value_name = "INTERVAL", value_parser = config::parse_interval)]
    pub(crate) poll_interval: Option<Duration>,
    /// Lines longer than this are rejected (bytes; K, M, G suffixes allowed) [default: 64M]
    #[arg(long, value_name = "SIZE", value_parser = config::parse_record_limit)]
    pub(crate) record_limit: Option<u64>,
    /// Commit after about this many bytes of one file, then move to the next file
    /// [default: 8M]
    #[arg(long, value_name = "SIZE", value_parser = config::parse_size)]
    pub(crate) batch_bytes: Option<u64>,
    /// How often a backfill that is not shown in a terminal logs its progress (0: after every
    /// file and batch).
    #[arg(long, value_name = "INTERVAL", default_value = "5s", value_parser = parse_progress_every)]
    pub(crate) progress_every: Duration,
}

impl Facts for RunArgs {
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

    fn needs_config_file(&self) -> bool {
        true
    }
}

/// Where records go besides the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Sink {
    /// Envelope lines on stdout, in seq order, each after its commit.
    Stdout,
}

/// The start policy, as typed.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum StartPolicy {
    /// Archive everything already in the files.
    Beginning,
    /// Skip what the files hold at the first scan; archive what is appended.
    End,
}

/// Arguments of `seed`.
#[derive(Debug, Args)]
pub struct SeedArgs {
    /// The transcript whose current records are history.
    pub(crate) path: PathBuf,
    /// Mark only the first N bytes (rounded to the end of the record holding byte N).
    #[arg(long, value_name = "N")]
    pub(crate) prefix_bytes: Option<u64>,
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
}

impl Facts for SeedArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }
}

/// Arguments of `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// Only sources whose current path is this file or lies under this directory.
    #[arg(long, value_name = "P")]
    pub(crate) path: Option<PathBuf>,
    /// Only records with a seq greater than N.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub(crate) since_seq: i64,
    /// Replace every secret in the records with [REDACTED:<rule>], as sinks do.
    #[arg(long)]
    pub(crate) redact: bool,
}

impl Facts for ExportArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }

    /// The redaction rules are the configuration's.
    fn needs_config_file(&self) -> bool {
        self.redact
    }
}

/// How `tail` prints a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum TailFormat {
    /// The export envelope, one JSON line.
    Envelope,
    /// Time, harness, session, role and the first line of text.
    Text,
}

/// Arguments of `tail`.
#[derive(Debug, Args)]
pub struct TailArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// Start after this seq instead of with the last records.
    #[arg(long, value_name = "N", conflicts_with = "last")]
    pub(crate) since_seq: Option<i64>,
    /// Start with the last N matching records.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub(crate) last: u64,
    /// Then follow new records through the daemon, until interrupted.
    #[arg(short = 'f', long)]
    pub(crate) follow: bool,
    /// Only records of this agent (its watcher's name, as `sessions --json` gives it:
    /// claude-code, codex, …).
    #[arg(long, value_name = "H")]
    pub(crate) harness: Option<String>,
    /// Only records of this session (its id, or a unique prefix of at least 4 characters).
    #[arg(long, value_name = "ID")]
    pub(crate) session: Option<String>,
    /// Only records of the file P, or of the files under the directory P.
    #[arg(long, value_name = "P")]
    pub(crate) path: Option<PathBuf>,
    /// Only records of machine NAME: `this`, `all`, or a machine pulled from a PostgreSQL
    /// sink (its host name, or the start of its UUID). A pulled record's line names its
    /// machine.
    #[arg(long, value_name = "NAME", default_value = "all")]
    pub(crate) machine: String,
    /// How to print each record.
    #[arg(long, value_enum, default_value = "envelope")]
    pub(crate) format: TailFormat,
    /// Replace every secret with [REDACTED:<rule>], as sinks do.
    #[arg(long)]
    pub(crate) redact: bool,
}

impl Facts for TailArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }

    /// The redaction rules are the configuration's.
    fn needs_config_file(&self) -> bool {
        self.redact
    }
}

/// Arguments of `rejects`.
#[derive(Debug, Args)]
pub struct RejectsArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// Only rejects of sources whose current path is this file or lies under this directory.
    #[arg(long, value_name = "P")]
    pub(crate) path: Option<PathBuf>,
    /// Print JSON lines (the same fields) instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Write the kept bytes of reject ID to stdout exactly as they were on disk (without the
    /// line's newline; of a line over the record limit, its first record-limit bytes), and
    /// nothing else.
    #[arg(long, value_name = "ID", conflicts_with_all = ["json", "path"])]
    pub(crate) raw: Option<i64>,
}

impl Facts for RejectsArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }
}

/// Which sessions to list or search.
#[derive(Debug, Args)]
pub(crate) struct SessionFilter {
    /// Only this watcher's sessions (claude-code, codex, gemini-cli, cursor, …).
    #[arg(long, value_name = "H")]
    pub(crate) harness: Option<String>,
    /// Only sessions whose project contains this text (any case).
    #[arg(long, value_name = "TEXT")]
    pub(crate) project: Option<String>,
    /// Only activity since WHEN: a duration back from now (90m, 12h, 2d, 1w) or a date or
    /// time (2026-11-01, 2026-11-01T09:00:00Z).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    pub(crate) since: Option<i64>,
    /// Only the sessions of machine NAME: `this`, `all`, or a machine pulled from a
    /// PostgreSQL sink (its host name, or the start of its UUID).
    #[arg(long, value_name = "NAME", default_value = "all")]
    pub(crate) machine: String,
    /// At most N (0: all).
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub(crate) limit: usize,
    /// Only the sessions you starred (`mark ID --star`).
    #[arg(long)]
    pub(crate) starred: bool,
    /// Only the sessions you gave this tag (`mark ID --tag TAG`).
    #[arg(long, value_name = "TAG")]
    pub(crate) tag: Option<String>,
}

impl SessionFilter {
    /// The filter, its harness checked against the built-in watchers' names and those of the
    /// index's sessions (a configured `[[watch]]` directory's is `generic`, a pulled machine's
    /// may be one this version lacks): an unknown one is [`Error::UnknownHarness`].
    pub(crate) fn filter(&self, archive: &mut Archive) -> Result<Filter> {
        if let Some(name) = &self.harness {
            let mut known = query::harnesses(archive)?;
            known.extend(crate::agents::names().map(String::from));
            known.sort();
            known.dedup();
            if !known.contains(name) {
                let name = name.clone();
                return Err(Error::UnknownHarness { name, known });
            }
        }
        Ok(Filter {
            harness: self.harness.clone(),
            project: self.project.clone(),
            since_ms: self.since,
            until_ms: None,
            model: None,
            machine: query::machine_named(archive, &self.machine)?,
            limit: self.limit,
            offset: 0,
            starred: self.starred,
            tag: self.tag.clone(),
            // `sessions --grep` sets it: `search` reads the text of the messages.
            text: None,
        })
    }
}

/// How a conversation is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// As a person reads it in a terminal.
    Text,
    /// As Markdown.
    Markdown,
    /// One JSON object per message.
    Json,
    /// The archived lines of the main transcript, byte for byte.
    Raw,
    /// One HTML file to share: styles inline, no script, nothing fetched; redacted unless
    /// --no-redact.
    Html,
}

/// When output is styled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorChoice {
    /// On a terminal, unless `NO_COLOR` is set.
    Auto,
    /// Always, even into a pipe or a file.
    Always,
    /// Never.
    Never,
}

/// Arguments of `sessions`.
#[derive(Debug, Args)]
pub struct SessionsArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    #[command(flatten)]
    pub(crate) filter: SessionFilter,
    /// Only sessions whose title (the agent's, else the first prompt), project or id contains
    /// TEXT: plain text, not a pattern; ASCII letters match in any case, other characters as
    /// they are.
    #[arg(long, value_name = "TEXT")]
    pub(crate) grep: Option<String>,
    /// Print one JSON object per session instead of a table.
    #[arg(long, conflicts_with = "csv")]
    pub(crate) json: bool,
    /// Print CSV instead of a table: a header row, then a row per session in the columns of
    /// --json (a list a line per item); text that begins as a formula gets a ' first.
    #[arg(long)]
    pub(crate) csv: bool,
}

impl Facts for SessionsArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }
}

/// Arguments of `show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// The session's id, or a unique prefix of it (at least 4 characters).
    pub(crate) session: String,
    /// The machine whose session it is, when two have one of that id: `this`, or a pulled
    /// machine's host name or UUID prefix.
    #[arg(long, value_name = "NAME", default_value = "all")]
    pub(crate) machine: String,
    /// How to write it.
    #[arg(long, value_enum, default_value = "text")]
    pub(crate) format: Format,
    /// Also show each subagent's conversation, after the session's.
    #[arg(long)]
    pub(crate) subagents: bool,
    /// Print this file of the session, raw (as --format raw prints the transcript): one of
    /// the `files` that `sessions --json` lists.
    #[arg(long, value_name = "PATH", conflicts_with = "subagents")]
    pub(crate) file: Option<PathBuf>,
    /// Replace every secret with [REDACTED:<rule>], for sharing.
    #[arg(long)]
    pub(crate) redact: bool,
    /// Keep the secrets in --format html, which replaces them by default.
    #[arg(long, conflicts_with = "redact")]
    pub(crate) no_redact: bool,
    /// Style the output (bold, dim, coloured matches): auto (on a terminal, unless NO_COLOR
    /// is set), always or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub(crate) color: ColorChoice,
    /// Write to stdout rather than through $PAGER (which `show` uses on a terminal).
    #[arg(long)]
    pub(crate) no_pager: bool,
}

impl ShowArgs {
    /// True when secrets are replaced: with --redact, or in HTML unless --no-redact.
    pub(crate) fn redacts(&self) -> bool {
        self.redact || (self.format == Format::Html && !self.no_redact)
    }

    /// True when a session's file is printed as archived (`--format raw`, or `--file`).
    pub(crate) fn raw(&self) -> bool {
        self.format == Format::Raw || self.file.is_some()
    }
}

impl Facts for ShowArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }

    /// The redaction rules are the configuration's.
    fn needs_config_file(&self) -> bool {
        self.redacts()
    }
}

/// Arguments of `usage`.
#[derive(Debug, Args)]
pub struct UsageArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// What each row is of.
    #[arg(long, value_enum, default_value = "day")]
    pub(crate) by: crate::consumers::sessions::usage::By,
    /// Only calls since WHEN: a duration back from now (12h, 7d, 4w) or a date or time
    /// (2026-11-01, 2026-11-01T09:00:00Z).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    pub(crate) since: Option<i64>,
    /// Only calls before WHEN (as --since takes it).
    #[arg(long, value_name = "WHEN", value_parser = parse_since)]
    pub(crate) until: Option<i64>,
    /// Only this watcher's calls (claude-code, codex, …).
    #[arg(long, value_name = "H")]
    pub(crate) harness: Option<String>,
    /// Only calls of sessions whose project contains this text (any case).
    #[arg(long, value_name = "TEXT")]
    pub(crate) project: Option<String>,
    /// Only the calls of machine NAME: `this`, `all`, or a machine pulled from a PostgreSQL
    /// sink (its host name, or the start of its UUID).
    #[arg(long, value_name = "NAME", default_value = "all")]
    pub(crate) machine: String,
    /// Print one JSON object per row, then the total (`"of": null`), instead of a table.
    #[arg(long, conflicts_with = "csv")]
    pub(crate) json: bool,
    /// Print CSV instead of a table: a header row, a row per row of --json, then the total
    /// (its `of` empty).
    #[arg(long)]
    pub(crate) csv: bool,
}

impl Facts for UsageArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }

    /// Its `[prices]` tables, with or without `--db`.
    fn needs_config_file(&self) -> bool {
        true
    }
}

/// Arguments of `mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// Give what the sessions hold as it is, secrets included.
    #[arg(long)]
    pub(crate) no_redact: bool,
}

impl Facts for McpArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }

    /// Its `[redact]` rules and `[prices]`, with or without `--db`.
    fn needs_config_file(&self) -> bool {
        true
    }
}

/// Arguments of `ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// Serve on this address (IP:PORT; port 0: a free one) [default: config.toml's [ui]
    /// listen, else 127.0.0.1:0].
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<std::net::SocketAddr>,
    /// Print the URL only; do not open a browser.
    #[arg(long)]
    pub(crate) no_open: bool,
}

impl Facts for UiArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }

    /// Its `[ui]`, `[prices]` and watchers (restore), with or without `--db`.
    fn needs_config_file(&self) -> bool {
        true
    }
}

/// Arguments of `search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// What to look for: words, "phrases", prefix*, AND, OR, NOT, parentheses.
    pub(crate) query: String,
    /// Let each word find the words of its English stem too (`fail`: fails, failed,
    /// failing); words in "phrases" and prefixes are searched as written.
    #[arg(long)]
    pub(crate) stem: bool,
    #[command(flatten)]
    pub(crate) filter: SessionFilter,
    /// Print one JSON object per hit.
    #[arg(long)]
    pub(crate) json: bool,
    /// Style the output (bold, dim, coloured matches): auto (on a terminal, unless NO_COLOR
    /// is set), always or never.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub(crate) color: ColorChoice,
}

impl Facts for SearchArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }
}

/// Arguments of `restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// The session's id, or a unique prefix of it (at least 4 characters).
    pub(crate) session: String,
    /// The machine whose session it is, when two have one of that id: `this`, or a pulled
    /// machine's host name or UUID prefix.
    #[arg(long, value_name = "NAME", default_value = "all")]
    pub(crate) machine: String,
    /// Write under this directory instead of where the agent keeps them.
    #[arg(long, value_name = "DIR")]
    pub(crate) to: Option<PathBuf>,
    /// For another machine's session: the project's directory on this machine (by default,
    /// the directory of a session here with the same git remote, else the original path if
    /// it exists here).
    #[arg(long, value_name = "PATH")]
    pub(crate) project_dir: Option<PathBuf>,
    /// For another machine's session restored into another directory: change the `cwd` of
    /// its records from the original project path to the new one (this changes bytes; without
    /// it the records are written as archived).
    #[arg(long)]
    pub(crate) rewrite_cwd: bool,
    /// Overwrite files that differ from the archived transcript.
    #[arg(long)]
    pub(crate) force: bool,
    /// Print what would be written; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
}

impl Facts for RestoreArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }

    /// Where each watcher keeps its transcripts is the configuration's.
    fn needs_config_file(&self) -> bool {
        true
    }
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

impl Facts for SinkCommand {
    fn overrides(&self) -> Overrides {
        let SinkCommand::Retry(args) = self;
        Overrides {
            ship: args.ship.clone(),
            ..args.archive.overrides()
        }
    }

    /// The sink's definition is the configuration's.
    fn needs_config_file(&self) -> bool {
        true
    }
}

/// Arguments of `sink retry`.
#[derive(Debug, Args)]
pub struct SinkRetryArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// The sink's name, as `status` shows it.
    pub(crate) name: String,
    /// A sink given to `run` with --ship: the same --ship again (its name is its type and a
    /// hash of its destination, as `status` shows).
    #[arg(long, value_name = "DEST")]
    pub(crate) ship: Vec<String>,
}

/// Arguments of `mark`.
#[derive(Debug, Args)]
pub struct MarkArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// The session's id, or a unique prefix of it (at least 4 characters).
    pub(crate) session: String,
    /// The machine whose session it is, when two have one of that id: `this`, or a pulled
    /// machine's host name or UUID prefix.
    #[arg(long, value_name = "NAME", default_value = "all")]
    pub(crate) machine: String,
    /// Star it.
    #[arg(long, conflicts_with = "unstar")]
    pub(crate) star: bool,
    /// Take its star away.
    #[arg(long)]
    pub(crate) unstar: bool,
    /// Give it a tag: one word (letters, digits, - _ . / :); again for more.
    #[arg(long, value_name = "TAG")]
    pub(crate) tag: Vec<String>,
    /// Take a tag away; again for more.
    #[arg(long, value_name = "TAG")]
    pub(crate) untag: Vec<String>,
    /// Write a note on it, in place of any note it has.
    #[arg(long, value_name = "TEXT", conflicts_with = "clear_note")]
    pub(crate) note: Option<String>,
    /// Remove its note.
    #[arg(long)]
    pub(crate) clear_note: bool,
    /// Print its marks as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Facts for MarkArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }
}

/// Arguments of `reindex`.
#[derive(Debug, Args)]
pub struct ReindexArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
}

impl Facts for ReindexArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }
}

/// Arguments of `compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// Leave the freed room inside the file (reused by later records) instead of rewriting it.
    #[arg(long)]
    pub(crate) no_vacuum: bool,
    /// Print what was done as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Facts for CompactArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }
}

/// Arguments of `status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub(crate) archive: ArchiveArg,
    /// Also list every source (transcript file), one row each; JSON always lists them.
    #[arg(long)]
    pub(crate) sources: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

impl Facts for StatusArgs {
    fn overrides(&self) -> Overrides {
        self.archive.overrides()
    }
}

/// An interval, or 0.
fn parse_progress_every(text: &str) -> std::result::Result<Duration, String> {
    match text.trim() {
        "0" => Ok(Duration::ZERO),
        t => config::parse_interval(t),
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
