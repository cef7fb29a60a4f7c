//! The daemon as a user service: a systemd user unit or a launchd agent, rendered from the
//! embedded templates, written to where the service manager looks, and handed to it.
//!
//! Each action is a list of [`Step`]s worked out first, so `--dry-run` prints exactly what a
//! real run would do.

mod command;
mod launchd;
mod systemd;

use crate::archive;
use crate::error::{Error, IoContext, Result, SystemContext, error_chain};
use command::Cmd;
use serde::Serialize;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

pub(crate) use launchd::render_plist;
pub(crate) use systemd::render_unit;

/// Which service manager runs the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Manager {
    /// A systemd user unit, driven with `systemctl --user`.
    Systemd,
    /// A launchd agent in the user's GUI domain, driven with `launchctl`.
    Launchd,
}

impl Manager {
    /// This platform's: launchd on macOS, systemd elsewhere.
    pub(crate) fn native() -> Manager {
        if cfg!(target_os = "macos") {
            Manager::Launchd
        } else {
            Manager::Systemd
        }
    }
}

/// What a service definition is made of, given explicitly so it renders the same anywhere.
#[derive(Clone, Debug)]
pub(crate) struct Definition {
    /// The absolute path of the binary the service runs.
    pub binary: PathBuf,
    /// The absolute path of the archive; its directory is the only one the service writes.
    pub archive: PathBuf,
    /// Whether `run` gets `--db ARCHIVE`: true when the archive was chosen with `--db` or
    /// `TRANSCRIPT_SYNC_DB`, which the service manager's environment does not carry.
    pub pass_archive: bool,
    /// The configuration file `run` gets with `--config`, when one was given explicitly.
    pub config: Option<PathBuf>,
    /// The user's home directory.
    pub home: PathBuf,
    /// Directories the service writes besides the archive's: the mirror sinks' when it was
    /// installed.
    pub mirrors: Vec<PathBuf>,
}

impl Definition {
    /// The archive's directory.
    pub(crate) fn archive_dir(&self) -> PathBuf {
        archive_dir_of(&self.archive)
    }
}

/// A service definition together with where it is installed.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// The service manager.
    pub manager: Manager,
    /// What the service runs.
    pub definition: Definition,
    /// `$XDG_CONFIG_HOME`, when set to an absolute path.
    pub config_home: Option<PathBuf>,
    /// The user's id, which names launchd's GUI domain.
    pub uid: u32,
}

impl Target {
    /// The target for this binary (as [`service_binary`] names it) and `archive`, with the
    /// home directory and `$XDG_CONFIG_HOME` from `env`. `Err` without HOME, or when this
    /// binary's path cannot be found.
    pub(crate) fn for_this_binary(
        manager: Manager,
        archive: PathBuf,
        pass_archive: bool,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Target> {
        let home = crate::platform::home::home(env)?;
        let exe = std::env::current_exe().map_err(|source| Error::CurrentExe { source })?;
        let binary = service_binary(exe, std::env::args_os().next().as_deref(), env);
        let config_home = crate::platform::home::xdg_var(env, "XDG_CONFIG_HOME");
        Ok(Target {
            manager,
            definition: Definition {
                binary,
                archive,
                pass_archive,
                config: None,
                home,
                mirrors: Vec::new(),
            },
            config_home,
            uid: crate::platform::sys::uid(),
        })
    }

    /// Where the service file goes.
    pub(crate) fn file(&self) -> PathBuf {
        let home = &self.definition.home;
        match self.manager {
            Manager::Systemd => systemd::unit_path(home, self.config_home.as_deref()),
            Manager::Launchd => launchd::plist_path(home),
        }
    }

    /// The service file's text.
    pub(crate) fn contents(&self) -> Result<String> {
        match self.manager {
            Manager::Systemd => render_unit(&self.definition),
            Manager::Launchd => render_plist(&self.definition),
        }
    }
}

/// The path a service should run this binary by: the path it was run by (`argv0`, looked up in
/// `env`'s PATH when it names no directory) when that leads to this very file `exe` through
/// links, otherwise `exe`. A package manager's link outlives an upgrade that replaces the
/// versioned file it leads to: Homebrew's `bin/transcript-sync` leads into
/// `Cellar/transcript-sync/VERSION/`, which the next release removes. Where there is no link
/// (a virtual environment's `bin/`, `/usr/bin/`), or the path run was a launcher rather than
/// the binary (npm's `bin/transcript-sync` runs Node.js), it is `exe`, the binary itself.
fn service_binary(
    exe: PathBuf,
    argv0: Option<&std::ffi::OsStr>,
    env: &dyn Fn(&str) -> Option<String>,
) -> PathBuf {
    let Some(ran) = argv0.map(Path::new) else {
        return exe;
    };
    let found = if ran.components().count() > 1 {
        std::path::absolute(ran).ok()
    } else {
        let path = env("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join(ran))
            .find(|candidate| executable(candidate))
    };
    match found {
        Some(link) if link.is_absolute() && same_file(&link, &exe) => link,
        _ => exe,
    }
}

/// Whether `path` is a file its owner may run, as a shell's lookup in PATH takes one.
fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether `a` and `b` lead to one file, links followed.
fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// How the service file on disk compares with the one to install.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileState {
    /// There is none.
    Missing,
    /// It holds exactly the text to install.
    Same,
    /// It holds something else, which installing replaces.
    Different,
}

/// One thing `install` or `uninstall` does.
#[derive(Debug)]
pub(crate) enum Step {
    /// Create a directory and its parents, unless it exists.
    CreateDir(PathBuf),
    /// Create the archive's directory (0700) as `run` would, unless it exists; the path is
    /// the archive's.
    CreateArchiveDir(PathBuf),
    /// Write the service file.
    Write(PathBuf, String),
    /// The service file already holds what would be written.
    Unchanged(PathBuf),
    /// Remove the service file.
    Remove(PathBuf),
    /// Run a command that must succeed.
    Run(Cmd),
    /// Run a command whose failure is expected and ignored, for the reason given.
    TryRun(Cmd, &'static str),
    /// Tell the user something.
    Say(String),
}

/// Writes the service file and has the service manager enable and start the service; with
/// `dry_run`, prints the steps instead. Installing again is harmless: an unchanged file is
/// left as it is and the service is still made sure to be enabled and running.
pub(crate) fn install(target: &Target, dry_run: bool, out: &mut dyn Write) -> Result<()> {
    let steps = install_steps(target)?;
    perform(&steps, dry_run, out)
}

fn install_steps(target: &Target) -> Result<Vec<Step>> {
    let file = target.file();
    let contents = target.contents()?;
    let state = file_state(&file, &contents)?;
    // ReadWritePaths= needs the archive's directory to exist before the service starts.
    let mut steps = vec![Step::CreateArchiveDir(target.definition.archive.clone())];
    if target.manager == Manager::Launchd {
        steps.push(Step::CreateDir(launchd::log_dir(&target.definition.home)));
    }
    let parent = file.parent().map_or_else(PathBuf::new, Path::to_owned);
    steps.push(Step::CreateDir(parent));
    steps.push(match state {
        FileState::Same => Step::Unchanged(file.clone()),
        _ => Step::Write(file.clone(), contents),
    });
    steps.extend(match target.manager {
        Manager::Systemd => systemd::install_steps(state),
        Manager::Launchd => launchd::install_steps(target.uid, &file),
    });
    steps.push(Step::Say(logs_hint(target)));
    if target.manager == Manager::Systemd {
        steps.extend(private_tmp_warnings(&target.definition));
    }
    Ok(steps)
}

/// The unit's `PrivateTmp=yes` gives the service a /tmp and /var/tmp of its own: a binary or
/// archive there is out of its reach, and the service fails to start (status 203/EXEC) or to
/// open its archive. Said loudly rather than refused, since a build tree may sit there.
fn private_tmp_warnings(def: &Definition) -> Vec<Step> {
    [(&def.binary, "binary"), (&def.archive, "archive")]
        .into_iter()
        .filter(|(path, _)| path.starts_with("/tmp") || path.starts_with("/var/tmp"))
        .map(|(path, what)| {
            Step::Say(format!(
                "warning: the {what} {} is under /tmp or /var/tmp, which the service cannot \
                 see (PrivateTmp=yes): it will not start; install from a binary and an archive \
                 elsewhere (cargo install --path ., then ~/.cargo/bin/transcript-sync service \
                 install)",
                path.display()
            ))
        })
        .collect()
}

fn logs_hint(target: &Target) -> String {
    match target.manager {
        Manager::Systemd => {
            "logs: journalctl --user -u transcript-sync -f; reload the configuration: \
             systemctl --user reload transcript-sync"
                .to_owned()
        }
        Manager::Launchd => format!(
            "logs: {}/",
            launchd::log_dir(&target.definition.home).display()
        ),
    }
}

/// Stops and disables the service and removes its file; with `dry_run`, prints the steps
/// instead. The archive is never touched, and the output says so.
pub(crate) fn uninstall(target: &Target, dry_run: bool, out: &mut dyn Write) -> Result<()> {
    let file = target.file();
    let mut steps = if file.exists() {
        match target.manager {
            Manager::Systemd => systemd::uninstall_steps(&file),
            Manager::Launchd => launchd::uninstall_steps(target.uid, &file),
        }
    } else {
        vec![Step::Say(format!(
            "not installed: there is no {}",
            file.display()
        ))]
    };
    steps.push(Step::Say(format!(
        "the archive {} is left as it is; delete it yourself if you no longer want it",
        target.definition.archive.display()
    )));
    perform(&steps, dry_run, out)
}

fn file_state(file: &Path, contents: &str) -> Result<FileState> {
    match fs::read(file) {
        Ok(old) if old == contents.as_bytes() => Ok(FileState::Same),
        Ok(_) => Ok(FileState::Different),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FileState::Missing),
        Err(source) => Err(Error::Io {
            path: file.to_owned(),
            source,
        }),
    }
}

fn perform(steps: &[Step], dry_run: bool, out: &mut dyn Write) -> Result<()> {
    for step in steps {
        if dry_run {
            describe(step, out).on_stdout()?;
        } else {
            execute(step, out)?;
        }
    }
    Ok(())
}

fn describe(step: &Step, out: &mut dyn Write) -> std::io::Result<()> {
    match step {
        Step::CreateDir(dir) if !dir.exists() => writeln!(out, "would create {}", dir.display()),
        Step::CreateArchiveDir(db) if !archive_dir_of(db).exists() => writeln!(
            out,
            "would create {} (mode 700)",
            archive_dir_of(db).display()
        ),
        Step::CreateDir(_) | Step::CreateArchiveDir(_) => Ok(()),
        Step::Write(path, text) => {
            writeln!(out, "would write {}:", path.display())?;
            write!(out, "{text}")?;
            writeln!(out, "--- end of {} ---", path.display())
        }
        Step::Unchanged(path) => writeln!(out, "{} is unchanged", path.display()),
        Step::Remove(path) => writeln!(out, "would remove {}", path.display()),
        Step::Run(cmd) => writeln!(out, "would run: {cmd}"),
        Step::TryRun(cmd, why) => writeln!(out, "would run: {cmd} (failure ignored: {why})"),
        Step::Say(text) => writeln!(out, "{text}"),
    }
}

fn execute(step: &Step, out: &mut dyn Write) -> Result<()> {
    let line = match step {
        Step::CreateDir(dir) if dir.exists() => return Ok(()),
        Step::CreateDir(dir) => fs::create_dir_all(dir)
            .at_path(dir)
            .map(|()| format!("created {}", dir.display()))?,
        Step::CreateArchiveDir(db) if archive_dir_of(db).exists() => return Ok(()),
        Step::CreateArchiveDir(db) => {
            archive::ensure_dir(db).map(|()| format!("created {}", archive_dir_of(db).display()))?
        }
        Step::Write(path, text) => fs::write(path, text)
            .at_path(path)
            .map(|()| format!("wrote {}", path.display()))?,
        Step::Unchanged(path) => format!("{} is unchanged", path.display()),
        Step::Remove(path) => fs::remove_file(path)
            .at_path(path)
            .map(|()| format!("removed {}", path.display()))?,
        Step::Run(cmd) => cmd.run().map(|_| format!("ran: {cmd}"))?,
        Step::TryRun(cmd, why) => match cmd.run() {
            Ok(_) => format!("ran: {cmd}"),
            Err(e) => format!("ran: {cmd} (failed, ignored: {why}): {e}"),
        },
        Step::Say(text) => text.clone(),
    };
    writeln!(out, "{line}").on_stdout()
}

fn archive_dir_of(archive: &Path) -> PathBuf {
    archive
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_owned)
}

/// A path as text that can go into a service file: UTF-8, no control characters.
fn plain_text(path: &Path) -> Result<&str> {
    let text = path.to_str().ok_or_else(|| Error::ServicePath {
        path: path.to_owned(),
        reason: "it is not UTF-8",
    })?;
    if text.contains(char::is_control) {
        return Err(Error::ServicePath {
            path: path.to_owned(),
            reason: "it holds a control character",
        });
    }
    Ok(text)
}

/// What the service manager says about the service.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum ManagerState {
    /// `--dry-run`: the command that would ask.
    NotAsked {
        /// The command line.
        command: String,
    },
    /// The manager answered.
    Reported {
        /// Whether the service is running.
        running: bool,
        /// The manager's states, in a few words.
        summary: String,
        /// The daemon's pid, when it runs.
        pid: Option<u32>,
    },
    /// The manager could not be reached (no user bus).
    Unreachable {
        /// The command that tried.
        command: String,
        /// What it printed.
        detail: String,
        /// How to make it reachable.
        fix: String,
    },
    /// The command failed otherwise.
    Failed {
        /// The error, with the command and its fix.
        error: String,
    },
}

/// Whether the service is installed, what it runs, and what its manager says.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Status {
    /// The service manager.
    pub manager: Manager,
    /// Where the service file is, or would be.
    pub file: PathBuf,
    /// Whether the file exists.
    pub installed: bool,
    /// The binary the installed file runs, when it can be read.
    pub runs: Option<PathBuf>,
    /// This binary.
    pub this_binary: PathBuf,
    /// The service manager's answer.
    pub state: ManagerState,
}

/// Looks at the service file and, unless `dry_run`, asks the service manager. An unreachable
/// or failing service manager is part of the answer, not an `Err`; `Err` only when the file
/// exists but cannot be read.
pub(crate) fn status(target: &Target, dry_run: bool) -> Result<Status> {
    let file = target.file();
    let text = match fs::read_to_string(&file) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => return Err(Error::Io { path: file, source }),
    };
    let runs = text.as_deref().and_then(|t| match target.manager {
        Manager::Systemd => systemd::installed_binary(t),
        Manager::Launchd => launchd::installed_binary(t),
    });
    Ok(Status {
        manager: target.manager,
        installed: text.is_some(),
        file,
        runs,
        this_binary: target.definition.binary.clone(),
        state: ask_manager(target, dry_run),
    })
}

fn ask_manager(target: &Target, dry_run: bool) -> ManagerState {
    let cmd = match target.manager {
        Manager::Systemd => systemd::status_command(),
        Manager::Launchd => launchd::status_command(target.uid),
    };
    if dry_run {
        return ManagerState::NotAsked {
            command: cmd.to_string(),
        };
    }
    match (cmd.run(), target.manager) {
        (Ok(ran), Manager::Systemd) => systemd::parse_status(&ran.stdout),
        (Ok(ran), Manager::Launchd) => launchd::parse_status(&ran.stdout),
        (Err(Error::ServiceCommand { stderr, .. }), _) if command::manager_unreachable(&stderr) => {
            ManagerState::Unreachable {
                command: cmd.to_string(),
                detail: stderr,
                fix: command::UNREACHABLE_FIX.to_owned(),
            }
        }
        (Err(Error::ServiceCommand { .. }), Manager::Launchd) => launchd::not_loaded(),
        (Err(e), _) => ManagerState::Failed {
            error: error_chain(&e),
        },
    }
}

/// Prints a [`Status`] for people.
pub(crate) fn write_status(out: &mut dyn Write, st: &Status) -> std::io::Result<()> {
    if st.installed {
        writeln!(out, "installed: {}", st.file.display())?;
    } else {
        writeln!(
            out,
            "not installed: there is no {} (run `transcript-sync service install`)",
            st.file.display()
        )?;
    }
    if st.installed {
        writeln!(out, "runs: {}", runs_line(st))?;
    }
    writeln!(out, "service manager: {}", state_line(&st.state))
}

fn runs_line(st: &Status) -> String {
    match &st.runs {
        Some(bin) if *bin == st.this_binary => format!("{} (this binary)", bin.display()),
        Some(bin) => format!(
            "{} (not this binary, {}; run `{} service install` to point the service here)",
            bin.display(),
            st.this_binary.display(),
            st.this_binary.display()
        ),
        None => "cannot tell (the file was edited by hand)".to_owned(),
    }
}

fn state_line(state: &ManagerState) -> String {
    match state {
        ManagerState::NotAsked { command } => format!("not asked (would run: {command})"),
        ManagerState::Reported {
            summary,
            pid: Some(pid),
            ..
        } => format!("{summary}, pid {pid}"),
        ManagerState::Reported { summary, .. } => summary.clone(),
        ManagerState::Unreachable {
            command,
            detail,
            fix,
        } => format!("unreachable: `{command}` said: {detail}; {fix}"),
        ManagerState::Failed { error } => format!("cannot tell: {error}"),
    }
}
