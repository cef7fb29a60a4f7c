//! The command line: runs each command, as `args` defines it; each command's own module (`status`,
//! `show`, `tail`, `restore`, `rejects`, `doctor`) where it is more than a few lines.

mod args;
pub(crate) mod doctor;
mod mark;
mod pager;
pub(crate) mod rejects;
pub(crate) mod show;
pub(crate) mod status;
pub(crate) mod tail;
mod usage;

use crate::archive::Archive;
use crate::archive::envelope::write_envelope;
use crate::archive::lock::ArchiveLock;
use crate::capture::harness::absolute;
use crate::cli::args::Format;
use crate::cli::rejects::{TextWriter, write_json};
use crate::config::{self, Overrides, Settings};
use crate::consumers::redact::{self, Redactor};
use crate::consumers::sessions::{
    self,
    query::{self},
};
use crate::consumers::socket;
use crate::consumers::tap::Tap;
use crate::daemon::service::{self, Manager, Target};
use crate::daemon::{run_live, run_once};
use crate::engine::progress::ProgressShow;
use crate::engine::seed;
use crate::error::{Error, IoContext, Result, SystemContext};
use crate::history::csv;
use crate::history::html::share;
use crate::history::restore::FileReport;
use crate::history::{catch_up_index, each_with_subagents, find_session, indexed_archive};
use crate::platform::home::process_env as env;
use crate::platform::logging;
use crate::{mcp, web};
pub use args::Cli;
use args::{
    Command, CompactArgs, ConfigCommand, DoctorArgs, ExportArgs, ManagerArg, McpArgs, RedactArgs,
    RejectsArgs, RestoreArgs, RunArgs, SearchArgs, SeedArgs, ServiceCommand, SessionsArgs,
    ShowArgs, Sink, SinkCommand, StatusArgs, TailArgs, TailFormat, UiArgs, UsageArgs,
};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Runs a parsed command line: loads the configuration, starts logging, runs the command.
/// `Err` is fatal and names the path involved. Called once, by the binary's `main`, before the
/// process has opened a database or started a thread (it sets SQLite up for the process).
pub fn execute(cli: Cli) -> Result<()> {
    let memory_statistics_off = crate::platform::fts5::without_memory_statistics();
    // Generated from the argument definitions alone: no configuration, no archive.
    match &cli.command {
        Command::Completions(args) => return completions(args.shell),
        Command::Man(args) => return man(args.dir.as_deref()),
        _ => {}
    }
    let source = config::Source::locate(cli.config.as_deref(), &env)?;
    let facts = cli.command.facts();
    let flags = facts.overrides();
    let needs_file = facts.needs_config_file();
    let settings = match &flags.db {
        Some(db) if !needs_file => Settings::for_archive(source.clone(), absolute(db), &env),
        _ => Settings::load(source.clone(), &flags, &env)?,
    };
    logging::init(settings.log_level);
    if !memory_statistics_off {
        log::debug!(
            "SQLite was in use before this command set it up: its memory statistics are on"
        );
    }
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
        Command::Usage(args) => usage(args, &settings),
        Command::Mcp(args) => mcp(args, &settings),
        Command::Ui(args) => ui_command(&args, &settings),
        Command::Restore(args) => restore(args, &settings),
        Command::Mark(args) => mark::mark(&args, &settings.archive),
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
    // `[ui] listen`: the web view, served beside the daemon for as long as it runs.
    // A web view that cannot be served stops nothing else.
    let _ui = match settings.ui_listen.filter(|_| !args.once) {
        Some(listen) => match web::start(&settings, listen, false) {
            Ok(served) => {
                log::info!("web view at {}", served.url);
                Some(served)
            }
            Err(e) => {
                let file = settings.source.path.display();
                log::warn!("the web view is not served ([ui] listen in {file}): {e}");
                None
            }
        },
        None => None,
    };
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
    let st = crate::history::status::status(&archive, &settings.socket)?;
    print_report(args.json, &st, |out, st| {
        status::write_text(out, st, args.sources)
    })
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

fn sessions(args: SessionsArgs, db: &Path) -> Result<()> {
    let mut archive = indexed_archive(db)?;
    let mut filter = args.filter.filter(&mut archive)?;
    filter.text = args.grep;
    let list = query::sessions(&mut archive, &filter)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let written = if args.json {
        each_with_subagents(&mut archive, &list, |s| write_json_line(&mut out, s))
    } else if args.csv {
        csv::write_sessions(&mut out, &mut archive, &list).map(drop)
    } else {
        let home = crate::platform::home::home(&env).ok();
        let width = crate::platform::sys::terminal_width();
        let known = query::session_ids(&mut archive)?;
        show::write_sessions(
            &mut out,
            &list,
            &known,
            width,
            home.as_deref(),
            crate::platform::time::now_ms(),
        )
    };
    stdout_result(written.and_then(|()| out.flush()))
}

pub(crate) fn write_json_line(
    out: &mut impl Write,
    value: &impl serde::Serialize,
) -> io::Result<()> {
    serde_json::to_writer(&mut *out, value)?;
    writeln!(out)
}

fn show(args: ShowArgs, settings: &Settings) -> Result<()> {
    use std::io::IsTerminal;
    let mut archive = indexed_archive(&settings.archive)?;
    let mut session = find_session(&mut archive, &args.session, &args.machine)?;
    let redactor = redactor_if(args.redacts(), settings)?;
    let redactor = redactor.as_deref();
    if let Some(r) = redactor {
        session.redact(r);
    }
    let stdout = io::stdout();
    let style = show::Style::new(args.color, stdout.is_terminal());
    let pager = match args.format {
        Format::Text | Format::Markdown
            if stdout.is_terminal() && !args.no_pager && !args.raw() =>
        {
            crate::cli::pager::Pager::start()
        }
        _ => None,
    };
    match pager {
        Some(mut pager) => {
            let written = write_show(
                &args,
                &mut archive,
                &session,
                redactor,
                style,
                pager.input(),
            );
            let finished = stdout_result(pager.finish());
            written.and(finished)
        }
        None => write_show(
            &args,
            &mut archive,
            &session,
            redactor,
            style,
            &mut BufWriter::new(stdout.lock()),
        ),
    }
}

/// Writes what `show` shows into `out`, and flushes it.
fn write_show(
    args: &ShowArgs,
    archive: &mut Archive,
    session: &query::Session,
    redactor: Option<&Redactor>,
    style: show::Style,
    out: &mut impl Write,
) -> Result<()> {
    if args.raw() {
        let files = query::files_transcript_first(archive, session)?;
        let written = match raw_file(args, session, &files)? {
            Some(file) => query::write_records(archive, file, redactor, out)?.map(drop),
            None => Ok(()),
        };
        return stdout_result(written.and_then(|()| out.flush()));
    }
    if args.format == Format::Html {
        let now = crate::platform::time::now_ms();
        let html = share::shared_file(archive, session, args.subagents, redactor, now)?;
        return stdout_result(out.write_all(html.as_bytes()).and_then(|()| out.flush()));
    }
    let read = crate::history::conversations(archive, session, args.subagents, redactor)?;
    for (i, (s, messages)) in read.iter().enumerate() {
        let written = match args.format {
            Format::Json => show::write_messages_json(out, s, messages),
            _ if i > 0 => writeln!(out)
                .and_then(|()| show::write_conversation(out, s, messages, args.format, style)),
            _ => show::write_conversation(out, s, messages, args.format, style),
        };
        stdout_result(written)?;
    }
    stdout_result(out.flush())
}

/// The file of `files` (the session's, its transcript first) that `show --format raw` prints:
/// the one `--file` names, else the transcript, named on stderr beside the others when there
/// are others.
fn raw_file<'a>(
    args: &ShowArgs,
    session: &query::Session,
    files: &'a [query::SessionFile],
) -> Result<Option<&'a query::SessionFile>> {
    let paths = |files: &[query::SessionFile]| -> Vec<String> {
        files.iter().map(|f| f.path.display().to_string()).collect()
    };
    if let Some(path) = &args.file {
        let wanted = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        return match files.iter().find(|f| f.path == wanted) {
            Some(file) => Ok(Some(file)),
            None => Err(Error::NotASessionFile {
                id: session.id.clone(),
                path: path.clone(),
                files: paths(files),
            }),
        };
    }
    if let [transcript, others @ ..] = files
        && !others.is_empty()
    {
        let others = paths(others);
        eprintln!(
            "raw: {} (the transcript); the session's other files, each printed with --file: {}",
            transcript.path.display(),
            others.join(", ")
        );
    }
    Ok(files.first())
}

fn search(args: SearchArgs, db: &Path) -> Result<()> {
    use std::io::IsTerminal;
    let mut archive = indexed_archive(db)?;
    let stdout = io::stdout();
    let style = show::Style::new(args.color, stdout.is_terminal() && !args.json);
    let filter = args.filter.filter(&mut archive)?;
    let marks = style.marks();
    let hits = query::search(&mut archive, &args.query, args.stem, &filter, marks, None)?;
    if hits.is_empty() {
        return Err(Error::NoMatch { query: args.query });
    }
    let mut out = BufWriter::new(stdout.lock());
    let written = if args.json {
        hits.iter().try_for_each(|h| write_json_line(&mut out, h))
    } else {
        let home = crate::platform::home::home(&env).ok();
        show::write_hits(&mut out, &hits, home.as_deref(), style)
    };
    stdout_result(written.and_then(|()| out.flush()))
}

fn usage(args: UsageArgs, settings: &Settings) -> Result<()> {
    use crate::consumers::sessions::usage::{self, Prices, Request};
    let mut archive = indexed_archive(&settings.archive)?;
    // The harness and machine are checked, and named, as `sessions` does.
    let filter = args::SessionFilter {
        harness: args.harness.clone(),
        project: args.project.clone(),
        since: None,
        machine: args.machine.clone(),
        limit: 0,
        starred: false,
        tag: None,
    }
    .filter(&mut archive)?;
    let request = Request {
        since_ms: args.since,
        until_ms: args.until,
        harness: filter.harness,
        project: filter.project,
        machine: filter.machine,
    };
    let prices = Prices::with(&settings.prices);
    let (rows, total) = usage::usage(&mut archive, args.by, &request, &prices)?;
    let mut out = BufWriter::new(io::stdout().lock());
    let written = if args.json {
        (|| {
            rows.iter().try_for_each(|r| write_json_line(&mut out, r))?;
            write_json_line(&mut out, &total.as_total())
        })()
    } else if args.csv {
        csv::write_usage(&mut out, &rows, &total).map(drop)
    } else {
        crate::cli::usage::write_table(&mut out, args.by, &rows, &total)
    };
    stdout_result(written.and_then(|()| out.flush()))
}

fn mcp(args: McpArgs, settings: &Settings) -> Result<()> {
    let archive = indexed_archive(&settings.archive)?;
    let redactor = redactor_if(!args.no_redact, settings)?;
    let prices = crate::consumers::sessions::usage::Prices::with(&settings.prices);
    let mut server = mcp::Server {
        archive,
        redactor,
        prices,
    };
    stdout_result(mcp::run(&mut server))
}

/// Where `ui` serves when neither `--listen` nor `[ui] listen` says: loopback, a free port.
const UI_LISTEN: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);

fn ui_command(args: &UiArgs, settings: &Settings) -> Result<()> {
    let listen = (args.listen).or(settings.ui_listen).unwrap_or(UI_LISTEN);
    web::serve(settings, listen, args.no_open)
}

fn restore(args: RestoreArgs, settings: &Settings) -> Result<()> {
    let mut archive = indexed_archive(&settings.archive)?;
    let session = find_session(&mut archive, &args.session, &args.machine)?;
    let to = args.to.as_deref().map(absolute);
    let project_dir = args.project_dir.as_deref().map(absolute);
    let request = crate::history::restore::Request {
        roots: &settings.roots,
        to: to.as_deref(),
        force: args.force,
        dry_run: args.dry_run,
        project_dir: project_dir.as_deref(),
        rewrite_cwd: args.rewrite_cwd,
    };
    let mut out = io::stdout().lock();
    let mut report = |f: &FileReport| writeln!(out, "{}", f.line());
    let restored = crate::history::restore::restore(&mut archive, &session, &request, &mut report)?;
    let moved = restored.moved.map(|m| writeln!(out, "{m}")).transpose();
    let done = writeln!(
        out,
        "{} session {}; resume it with:\n  {}",
        restored.verb, session.id, restored.resume
    );
    stdout_result(moved.and(done))
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
    use crate::history::status::{megabytes as mb, share_of};
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
pub(crate) fn stdout_result(written: io::Result<()>) -> Result<()> {
    match written {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(source) => Err(Error::Stdout { source }),
        Ok(()) => Ok(()),
    }
}
