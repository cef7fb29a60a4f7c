//! The command line: argument definitions and what each command does.

use crate::archive::Archive;
use crate::doctor;
use crate::engine::{Engine, EngineOptions};
use crate::envelope::write_envelope;
use crate::error::{Error, IoContext, Result};
use crate::harness::{self, Root, absolute};
use crate::lock::ArchiveLock;
use crate::pipeline::{LiveOptions, run_live};
use crate::read::ReadLimits;
use crate::seed::{self, StartAt};
use crate::service::{self, Manager, Target};
use crate::status;
use crate::tap::Tap;
use crate::writer::ArchiveWriter;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Archive AI coding agents' JSONL session transcripts: every complete record, exactly once,
/// in order, into a local SQLite archive.
#[derive(Debug, Parser)]
#[command(name = "transcript-sync", version, propagate_version = true)]
#[command(
    after_help = "Logs go to stderr; set RUST_LOG (error, warn, info, debug) to change how much."
)]
pub struct Cli {
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
        it is written, until SIGINT or SIGTERM (or, with --once, exit after one pass).\n\n\
        Without --watch, the built-in watchers: Claude Code ($CLAUDE_CONFIG_DIR or ~/.claude, \
        projects/**/*.jsonl) and Codex CLI ($CODEX_HOME or ~/.codex, sessions/ and \
        archived_sessions/). Directories that do not exist yet are waited for."
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
    /// Show where each source stands: generation, cursor, lag, held-back bytes, counts.
    Status(StatusArgs),
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
}

/// Arguments of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// Check this directory instead of the built-in watchers' (repeatable).
    #[arg(long, value_name = "DIR")]
    watch: Vec<PathBuf>,
    /// Which files under each --watch directory are transcripts.
    #[arg(
        long,
        value_name = "GLOB",
        default_value = "**/*.jsonl",
        requires = "watch"
    )]
    glob: String,
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

/// Where the archive is.
#[derive(Debug, Args)]
pub struct ArchiveArg {
    /// The archive database [default: $XDG_DATA_HOME/transcript-sync/archive.db]
    #[arg(long, value_name = "PATH", env = "TRANSCRIPT_SYNC_DB")]
    pub db: Option<PathBuf>,
}

/// Arguments of `run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    archive: ArchiveArg,
    /// Watch this directory instead of the built-in watchers (repeatable).
    #[arg(long, value_name = "DIR")]
    watch: Vec<PathBuf>,
    /// Which files under each --watch directory are transcripts.
    #[arg(
        long,
        value_name = "GLOB",
        default_value = "**/*.jsonl",
        requires = "watch"
    )]
    glob: String,
    /// Where files present at a directory's first scan start; later files always start at 0.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = StartPolicy::Beginning)]
    start_at: StartPolicy,
    /// Read every file once, up to the size it has when it is read, then exit.
    #[arg(long)]
    once: bool,
    /// Also print each record, once committed, as an envelope line on stdout.
    #[arg(long, value_enum, value_name = "SINK")]
    sink: Option<Sink>,
    /// How often every directory is rescanned (stat only) to catch what events miss.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    rescan_interval: u64,
    /// Lines longer than this are rejected (bytes; K, M, G suffixes allowed).
    #[arg(long, value_name = "SIZE", default_value = "64M", value_parser = parse_record_limit)]
    record_limit: u64,
    /// Commit after about this many bytes of one file, then move to the next file.
    #[arg(long, value_name = "SIZE", default_value = "8M", value_parser = parse_size)]
    batch_bytes: u64,
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

/// Runs a parsed command line. `Err` is fatal and names the path involved.
pub fn execute(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Run(args) => run(args),
        Command::Seed(args) => seed(args),
        Command::Export(args) => export(args),
        Command::Status(args) => status(args),
        Command::Service(cmd) => service(cmd),
        Command::Doctor(args) => doctor(args),
    }
}

fn env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

fn archive_path(arg: &ArchiveArg) -> Result<PathBuf> {
    let path = match &arg.db {
        Some(db) => absolute(db),
        None => crate::config::default_archive(&env)?,
    };
    if path.is_dir() {
        return Err(Error::ArchiveIsDirectory { path });
    }
    Ok(path)
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

/// The built-in watchers' roots, or the `--watch` directories.
fn roots(watch: &[PathBuf], glob: &str) -> Result<Vec<Root>> {
    if watch.is_empty() {
        harness::builtin_roots(&env)
    } else {
        harness::watch_roots(watch, glob)
    }
}

fn run(args: RunArgs) -> Result<()> {
    let db = archive_path(&args.archive)?;
    check_watch_dirs(&args.watch, args.once)?;
    let roots = roots(&args.watch, &args.glob)?;
    crate::archive::ensure_dir(&db)?;
    let _lock = ArchiveLock::acquire(&db)?;
    let tap = match args.sink {
        Some(Sink::Stdout) => Some(Tap::stdout().at_path("<tap thread>")?),
        None => None,
    };
    log::info!("archive path={db:?}");
    for r in &roots {
        log::info!(
            "watching path={:?} harness={} ({})",
            r.path,
            r.harness,
            r.description
        );
    }
    let options = EngineOptions {
        limits: ReadLimits {
            record_limit: args.record_limit,
            batch_bytes: args.batch_bytes.max(1),
        },
        start_at: match args.start_at {
            StartPolicy::Beginning => StartAt::Beginning,
            StartPolicy::End => StartAt::End,
        },
    };
    if !args.once {
        let live = LiveOptions {
            rescan_interval: Duration::from_secs(args.rescan_interval.max(1)),
        };
        return run_live(&db, tap, roots, options, live);
    }
    let reads = Archive::open(&db)?;
    let writer = ArchiveWriter::new(Archive::open(&db)?, tap);
    let mut engine = Engine::new(reads, Box::new(writer), options)?;
    let report = engine.run_pass(&roots)?;
    for (path, bytes) in &report.held_back {
        log::info!(
            "held back path={path:?} bytes={bytes} (an incomplete last line, archived once it ends with a newline)"
        );
    }
    log::info!("pass complete {report}");
    Ok(())
}

fn seed(args: SeedArgs) -> Result<()> {
    let db = archive_path(&args.archive)?;
    let path = absolute(&args.path);
    // Checked before the archive is opened, so that a typo creates no archive.
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_file() => {}
        Ok(_) => return Err(Error::NotRegular { path }),
        Err(source) => return Err(Error::Io { path, source }),
    }
    crate::archive::ensure_dir(&db)?;
    let mut archive = Archive::open(&db)?;
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

fn export(args: ExportArgs) -> Result<()> {
    let db = archive_path(&args.archive)?;
    let archive = Archive::open_existing(&db)?;
    let filter = args.path.as_deref().map(absolute);
    let stdout = io::stdout().lock();
    let mut out = BufWriter::with_capacity(256 * 1024, stdout);
    let written = archive
        .export(args.since_seq, filter.as_deref(), |row| {
            write_envelope(&mut out, &row)
        })?
        .and_then(|()| out.flush());
    stdout_result(written)
}

fn status(args: StatusArgs) -> Result<()> {
    let db = archive_path(&args.archive)?;
    let archive = Archive::open_existing(&db)?;
    let st = status::status(&archive)?;
    let mut out = io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &st)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        status::write_text(&mut out, &st)
    };
    stdout_result(written)
}

fn service(cmd: ServiceCommand) -> Result<()> {
    let (ServiceCommand::Install(args)
    | ServiceCommand::Uninstall(args)
    | ServiceCommand::Status(args)) = &cmd;
    let manager = match args.manager {
        Some(ManagerArg::Systemd) => Manager::Systemd,
        Some(ManagerArg::Launchd) => Manager::Launchd,
        None => Manager::native(),
    };
    let db = archive_path(&args.archive)?;
    let target = Target::for_this_binary(manager, db, args.archive.db.is_some(), &env)?;
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

fn doctor(args: DoctorArgs) -> Result<()> {
    let db = archive_path(&args.archive)?;
    let roots = roots(&args.watch, &args.glob)?;
    let target = Target::for_this_binary(
        Manager::native(),
        db.clone(),
        args.archive.db.is_some(),
        &env,
    );
    let report = doctor::diagnose(&roots, &db, &target);
    let mut out = io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &report)
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        doctor::write_text(&mut out, &report)
    };
    stdout_result(written)?;
    match report.failures {
        0 => Ok(()),
        failures => Err(Error::DoctorFailed { failures }),
    }
}

/// A reader that closed the pipe early is not an error (`export | head`).
fn stdout_result(written: io::Result<()>) -> Result<()> {
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(source) => Err(Error::Io {
            path: Path::new("<stdout>").to_owned(),
            source,
        }),
        Ok(()) => Ok(()),
    }
}

/// A record limit: a size SQLite can store in one value (at most 1,000,000,000 bytes).
fn parse_record_limit(text: &str) -> std::result::Result<u64, String> {
    let n = parse_size(text)?;
    if n > 1_000_000_000 {
        return Err(format!(
            "{text:?} is more than SQLite stores in one value (1000000000 bytes)"
        ));
    }
    Ok(n)
}

/// Parses `123`, `64K`, `64KiB`, `8M`, `1G` (powers of 1024).
fn parse_size(text: &str) -> std::result::Result<u64, String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("100"), Ok(100));
        assert_eq!(parse_size("2KiB"), Ok(2048));
        assert!(parse_size("0").is_err());
        assert!(parse_size("5X").is_err());
        assert!(parse_record_limit("18446744073709551615").is_err());
        assert_eq!(parse_record_limit("64M"), Ok(64 << 20));
    }
}
