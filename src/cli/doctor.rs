//! `doctor`: checks what breaks a watcher in practice — inotify limits, missing or unreadable
//! roots, the archive's permissions and free space, network filesystems, the service — and
//! names the command that fixes each problem.

mod filesystem;
#[cfg(target_os = "linux")]
mod inotify;

use crate::capture::harness::Root;
use crate::daemon::service::{self, ManagerState, Target};
use crate::error::Result;
use serde::Serialize;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Level {
    /// Nothing to do.
    Ok,
    /// The daemon works, but worse than it could, or not for long.
    Warn,
    /// The daemon cannot do its job until this is fixed.
    Fail,
}

/// One line of the report.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Finding {
    /// How bad it is.
    pub level: Level,
    /// What was checked: `roots`, `inotify`, `archive`, `disk`, `filesystem` or `service`.
    pub check: &'static str,
    /// What was found.
    pub message: String,
    /// The path it is about, if any.
    pub path: Option<PathBuf>,
    /// The command that fixes it, for a problem that a command fixes.
    pub fix: Option<String>,
}

impl Finding {
    fn new(level: Level, check: &'static str, message: String) -> Finding {
        Finding {
            level,
            check,
            message,
            path: None,
            fix: None,
        }
    }

    fn at(mut self, path: &Path) -> Finding {
        self.path = Some(path.to_owned());
        self
    }

    fn fix(mut self, command: String) -> Finding {
        self.fix = Some(command);
        self
    }
}

/// Every finding, in the order the checks ran.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    /// The findings.
    pub findings: Vec<Finding>,
    /// How many failed.
    pub failures: usize,
}

/// Runs every check on `roots`, the archive at `archive` and the service `target` (or the
/// reason it could not be worked out). Never fails: what cannot be checked is a finding.
pub(crate) fn diagnose(roots: &[Root], archive: &Path, target: &Result<Target>) -> Report {
    let scans: Vec<RootScan> = roots.iter().map(scan_root).collect();
    let mut findings: Vec<Finding> = scans.iter().map(root_finding).collect();
    let home = crate::platform::home::home(&super::env).ok();
    findings.extend(home.map_or(Vec::new(), |home| unwatched_findings(roots, &home)));
    findings.extend(roots.iter().flat_map(network_findings));
    findings.extend(inotify_findings(&scans, archive));
    findings.extend(archive_findings(archive));
    findings.extend(unread_finding(archive));
    findings.push(disk_finding(archive));
    findings.push(service_finding(target));
    let failures = findings.iter().filter(|f| f.level == Level::Fail).count();
    Report { findings, failures }
}

/// What a root is on disk.
enum RootState {
    Missing,
    NotDirectory,
    Unreadable(io::Error),
    Directory { dirs: u64, unreadable: u64 },
}

struct RootScan<'a> {
    root: &'a Root,
    state: RootState,
}

/// Counts the directories under a root the way the daemon watches them: every directory its
/// globs reach, symlinks not followed.
fn scan_root(root: &Root) -> RootScan<'_> {
    let state = match std::fs::metadata(&root.path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => RootState::Missing,
        Err(e) => RootState::Unreadable(e),
        Ok(m) if !m.is_dir() => RootState::NotDirectory,
        Ok(_) => match std::fs::read_dir(&root.path) {
            Err(e) => RootState::Unreadable(e),
            Ok(_) => count_dirs(root),
        },
    };
    RootScan { root, state }
}

impl RootState {
    /// Watches the daemon needs for this root: one per directory, or one on the nearest
    /// existing ancestor while the root is missing.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    fn watches(&self) -> u64 {
        match self {
            RootState::Directory { dirs, .. } => *dirs,
            RootState::Missing => 1,
            _ => 0,
        }
    }
}

fn count_dirs(root: &Root) -> RootState {
    let (mut dirs, mut unreadable) = (0, 0);
    let reached = |e: &walkdir::DirEntry| {
        let relative = e.path().strip_prefix(&root.path).unwrap_or(e.path());
        !e.file_type().is_dir() || root.reach.holds(relative)
    };
    let walk = walkdir::WalkDir::new(&root.path).follow_links(false);
    for entry in walk.into_iter().filter_entry(reached) {
        match entry {
            Ok(e) if e.file_type().is_dir() => dirs += 1,
            Ok(_) => {}
            Err(_) => unreadable += 1,
        }
    }
    RootState::Directory { dirs, unreadable }
}

/// What `doctor` says of each agent that keeps its sessions where no built-in root looks
/// (Aider's, in each project): when it has run here (its folder under the home) and no
/// `[[watch]]` table names a place of its, nothing of it is archived.
fn unwatched_findings(roots: &[Root], home: &Path) -> Vec<Finding> {
    let agents = crate::agents::AGENTS.iter();
    let hinted = agents.filter_map(|a| Some((a.name, a.doctor?)));
    hinted
        .filter(|(name, hint)| {
            home.join(hint.ran).is_dir() && !roots.iter().any(|r| r.harness == *name)
        })
        .map(|(_, hint)| {
            Finding::new(Level::Warn, "roots", hint.message.to_owned())
                .at(&home.join(hint.ran))
                .fix(hint.fix.to_owned())
        })
        .collect()
}

fn root_finding(scan: &RootScan) -> Finding {
    let p = &scan.root.path;
    let name = format!("root {} ({})", p.display(), scan.root.harness);
    let finding = match &scan.state {
        // A built-in watcher's directory is missing where that agent is not used: nothing to
        // fix, and the daemon starts watching it once the agent makes it.
        RootState::Missing if scan.root.harness != crate::capture::harness::GENERIC => {
            Finding::new(
                Level::Ok,
                "roots",
                format!(
                    "{name}: no {} sessions here (no such directory); watched once it appears",
                    scan.root.harness
                ),
            )
        }
        RootState::Missing => Finding::new(
            Level::Warn,
            "roots",
            format!("{name} does not exist yet; the daemon waits for it, nothing to do unless you expected transcripts there"),
        )
        .fix(format!("mkdir -p {}", quote(p))),
        RootState::NotDirectory => Finding::new(Level::Fail, "roots", format!("{name} is not a directory"))
            .fix(format!("mv {0} {0}.not-a-directory && mkdir {0}", quote(p))),
        RootState::Unreadable(e) => Finding::new(Level::Fail, "roots", format!("{name} cannot be read: {e}"))
            .fix(format!("chmod u+rx {}", quote(p))),
        RootState::Directory { dirs, unreadable: 0 } => {
            Finding::new(Level::Ok, "roots", format!("{name}: {}", directories(*dirs)))
        }
        RootState::Directory { dirs, unreadable } => Finding::new(
            Level::Warn,
            "roots",
            format!(
                "{name}: {}, {unreadable} entries cannot be read",
                directories(*dirs)
            ),
        )
        .fix(format!("chmod -R u+rX {}", quote(p))),
    };
    finding.at(p)
}

fn directories(n: u64) -> String {
    if n == 1 {
        "1 directory".to_owned()
    } else {
        format!("{n} directories")
    }
}

/// A root on a network filesystem, or a network mount below a root.
fn network_findings(root: &Root) -> Vec<Finding> {
    if !root.path.is_dir() {
        return Vec::new();
    }
    let mut paths = vec![root.path.clone()];
    paths.extend(filesystem::mounts_below(&root.path));
    paths
        .iter()
        .filter_map(|p| Some((p, crate::platform::sys::network_filesystem(p).ok()??)))
        .map(|(p, kind)| {
            Finding::new(
                Level::Warn,
                "filesystem",
                format!(
                    "{} is on {kind}: inotify sees no change made on another machine there; \
                     the daemon polls such roots instead",
                    p.display()
                ),
            )
            .at(p)
        })
        .collect()
}

#[cfg(target_os = "linux")]
fn inotify_findings(scans: &[RootScan], archive: &Path) -> Vec<Finding> {
    let daemon = crate::archive::lock::running_pid(archive);
    let others = inotify::in_use(daemon);
    let watches: u64 = scans.iter().map(|s| s.state.watches()).sum();
    let threads = scans
        .iter()
        .map(|s| &s.root.harness)
        .collect::<std::collections::BTreeSet<_>>()
        .len() as u64;
    vec![
        limit_finding(
            inotify::WATCHES,
            watches,
            others.watches,
            "directories under the roots (one watch each)",
            524_288,
        ),
        limit_finding(
            inotify::INSTANCES,
            threads,
            others.instances,
            "watcher threads (one inotify instance each)",
            1024,
        ),
    ]
}

#[cfg(not(target_os = "linux"))]
fn inotify_findings(_scans: &[RootScan], _archive: &Path) -> Vec<Finding> {
    vec![Finding::new(
        Level::Ok,
        "inotify",
        "skipped: inotify is Linux's; this platform's file events have no per-user watch limit"
            .to_owned(),
    )]
}

/// Compares what the daemon needs plus what the user's other processes hold with a limit:
/// over it fails, over three quarters of it warns.
#[cfg(target_os = "linux")]
fn limit_finding(
    kind: inotify::LimitKind,
    needed: u64,
    others: u64,
    what: &str,
    floor: u64,
) -> Finding {
    let Some(limit) = inotify::limit(kind) else {
        return Finding::new(
            Level::Warn,
            "inotify",
            format!(
                "cannot read {} to compare {needed} {what} with",
                kind.sysctl
            ),
        );
    };
    let total = needed + others;
    let message = format!(
        "{needed} {what} + {others} held by your other processes = {total}, limit {} ({})",
        limit.value, limit.sysctl
    );
    let level = if total > limit.value {
        Level::Fail
    } else if total > limit.value / 4 * 3 {
        Level::Warn
    } else {
        return Finding::new(Level::Ok, "inotify", message);
    };
    let raised = floor.max(total.saturating_mul(2));
    Finding::new(level, "inotify", message).fix(sysctl_fix(limit.sysctl, raised))
}

/// `sysctl` now, plus a `/etc/sysctl.d/` file so it survives a reboot. A user namespace's own
/// limit is set by the namespace's owner and does not persist.
#[cfg(target_os = "linux")]
fn sysctl_fix(sysctl: &str, value: u64) -> String {
    if sysctl.starts_with("user.") {
        return format!("sysctl -w {sysctl}={value} (as the owner of this user namespace)");
    }
    format!(
        "sudo sysctl -w {sysctl}={value} && echo '{sysctl}={value}' | sudo tee /etc/sysctl.d/60-{sysctl}.conf"
    )
}

fn archive_findings(archive: &Path) -> Vec<Finding> {
    let dir = archive.parent().unwrap_or(Path::new("/"));
    let meta = match std::fs::metadata(archive) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let msg = format!(
                "archive {} does not exist yet; `run` creates it (0600, in a 0700 directory)",
                archive.display()
            );
            let mut findings = vec![Finding::new(Level::Ok, "archive", msg).at(archive)];
            findings.extend(writable_dir_finding(dir));
            return findings;
        }
        Err(e) => {
            let msg = format!(
                "archive {} cannot be reached by this user ({e})",
                archive.display()
            );
            let finding = Finding::new(Level::Fail, "archive", msg).at(archive);
            return vec![finding.fix(format!("sudo chown -R \"$(id -un)\" {}", quote(dir)))];
        }
    };
    let mut findings = Vec::new();
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        findings.push(archive_mode_finding(archive, mode));
    }
    let dir_mode = std::fs::metadata(dir).map_or(0, |m| m.permissions().mode() & 0o777);
    if dir_mode & 0o077 != 0 {
        let msg = format!(
            "the archive's directory {} is open to group or others (mode {dir_mode:04o})",
            dir.display()
        );
        findings.push(
            Finding::new(Level::Warn, "archive", msg)
                .at(dir)
                .fix(format!("chmod 700 {}", quote(dir))),
        );
    }
    findings.extend(writable_finding(archive));
    findings.extend(writable_dir_finding(dir));
    findings.extend(network_archive_finding(dir));
    if findings.is_empty() {
        let msg = format!(
            "archive {}: mode 0600 in a 0700 directory",
            archive.display()
        );
        findings.push(Finding::new(Level::Ok, "archive", msg).at(archive));
    }
    findings
}

/// The files archived whose content could not be read when it was captured (any release's;
/// a file read well later is still named) (a line that is no record, a
/// document in a shape its reader does not know: kept as they were, in `rejects`), by path,
/// the first with its reason; none when every file was read or there is no archive to ask.
fn unread_finding(archive: &Path) -> Option<Finding> {
    let archive_db = crate::archive::Archive::open_existing(archive).ok()?;
    let mut paths: Vec<(std::path::PathBuf, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let listed = archive_db.rejects(None, |r| {
        if seen.insert(r.path.clone()) {
            paths.push((r.path, r.reason));
        }
        Ok(())
    });
    listed.ok()?.ok()?;
    let ((first, reason), more) = (paths.first()?, paths.len() - 1);
    let more = match more {
        0 => String::new(),
        n => format!(", and {n} more"),
    };
    let msg = format!(
        "{} archived {} content that could not be read, kept as it was: {}: {reason}{more}",
        paths.len(),
        if paths.len() == 1 {
            "file holds"
        } else {
            "files hold"
        },
        first.display()
    );
    let finding = Finding::new(Level::Warn, "unread", msg).at(first);
    Some(finding.fix("transcript-sync rejects".to_owned()))
}

/// The archive (and its WAL and shared-memory files, which SQLite gives the same mode) open
/// to group or others: transcripts hold whatever was typed into a session.
fn archive_mode_finding(archive: &Path, mode: u32) -> Finding {
    let mut files = vec![quote(archive)];
    for suffix in ["-wal", "-shm"] {
        let mut companion = archive.as_os_str().to_owned();
        companion.push(suffix);
        if Path::new(&companion).exists() {
            files.push(quote(Path::new(&companion)));
        }
    }
    let msg = format!(
        "archive {} is open to group or others (mode {mode:04o}); transcripts hold whatever was typed into a session",
        archive.display()
    );
    Finding::new(Level::Warn, "archive", msg)
        .at(archive)
        .fix(format!("chmod 600 {}", files.join(" ")))
}

fn writable_finding(archive: &Path) -> Option<Finding> {
    if crate::platform::sys::can_read_and_write(archive) {
        return None;
    }
    let msg = format!(
        "archive {} cannot be read and written by this user",
        archive.display()
    );
    Some(
        Finding::new(Level::Fail, "archive", msg)
            .at(archive)
            .fix(format!("sudo chown \"$(id -un)\" {}", quote(archive))),
    )
}

/// The archive's directory, where it exists, not writable by this user: SQLite creates the
/// archive's WAL and shared-memory files (and `run` the archive itself) there, so the daemon
/// cannot open the archive to write.
fn writable_dir_finding(dir: &Path) -> Option<Finding> {
    if !dir.is_dir() || crate::platform::sys::can_write_into(dir) {
        return None;
    }
    let msg = format!(
        "the archive's directory {} cannot be written by this user; SQLite keeps the archive's -wal and -shm files there",
        dir.display()
    );
    Some(
        Finding::new(Level::Fail, "archive", msg)
            .at(dir)
            .fix(format!(
                "sudo chown \"$(id -un)\" {} && chmod 700 {}",
                quote(dir),
                quote(dir)
            )),
    )
}

/// SQLite's WAL needs shared memory that a network filesystem does not give.
fn network_archive_finding(dir: &Path) -> Option<Finding> {
    let kind = crate::platform::sys::network_filesystem(dir).ok()??;
    let msg = format!(
        "the archive's directory {} is on {kind}; SQLite's WAL needs a local filesystem",
        dir.display()
    );
    Some(
        Finding::new(Level::Warn, "archive", msg)
            .at(dir)
            .fix("transcript-sync run --db <a path on a local disk>".to_owned()),
    )
}

/// Below 1 GiB or 5 % free on the archive's filesystem, warns.
fn disk_finding(archive: &Path) -> Finding {
    const GIB: u64 = 1 << 30;
    let Some(dir) = filesystem::nearest_existing(archive.parent().unwrap_or(archive)) else {
        return Finding::new(
            Level::Warn,
            "disk",
            "no existing directory above the archive".into(),
        );
    };
    let space = match crate::platform::sys::space(dir) {
        Ok(space) => space,
        Err(e) => {
            let msg = format!("cannot tell the free space of {}: {e}", dir.display());
            return Finding::new(Level::Warn, "disk", msg).at(dir);
        }
    };
    let message = format!(
        "{:.1} GiB free of {:.1} GiB on the archive's filesystem ({})",
        space.available as f64 / GIB as f64,
        space.total as f64 / GIB as f64,
        dir.display()
    );
    if space.available >= GIB && space.available.saturating_mul(20) >= space.total {
        return Finding::new(Level::Ok, "disk", message).at(dir);
    }
    Finding::new(Level::Warn, "disk", message)
        .at(dir)
        .fix(format!(
            "du -xsh {}/* | sort -h   # then free space, or move the archive with --db",
            quote(dir)
        ))
}

fn service_finding(target: &Result<Target>) -> Finding {
    let target = match target {
        Ok(t) => t,
        Err(e) => return Finding::new(Level::Warn, "service", format!("cannot check: {e}")),
    };
    let status = match service::status(target, false) {
        Ok(st) => st,
        Err(e) => return Finding::new(Level::Warn, "service", format!("cannot check: {e}")),
    };
    let install = format!("{} service install", quote(&status.this_binary));
    let file = status.file.display();
    if !status.installed {
        let msg = format!("not installed ({file}): nothing archives unless `run` is kept going");
        return Finding::new(Level::Warn, "service", msg).fix(install);
    }
    if status.runs.as_ref() != Some(&status.this_binary) {
        let msg = format!(
            "{file} does not run this binary ({})",
            status.this_binary.display()
        );
        return Finding::new(Level::Warn, "service", msg).fix(install);
    }
    state_finding(&status.state, install)
}

/// What the service manager says about an installed service that runs this binary.
fn state_finding(state: &ManagerState, install: String) -> Finding {
    match state {
        ManagerState::Reported {
            running: true,
            summary,
            pid,
        } => {
            let pid = pid.map(|p| format!(", pid {p}")).unwrap_or_default();
            Finding::new(
                Level::Ok,
                "service",
                format!("installed and {summary}{pid}"),
            )
        }
        ManagerState::Reported { summary, .. } => Finding::new(
            Level::Warn,
            "service",
            format!("installed but not running: {summary}"),
        )
        .fix(install),
        ManagerState::Unreachable { detail, .. } => Finding::new(
            Level::Warn,
            "service",
            format!("installed, but the user service manager cannot be reached: {detail}"),
        )
        .fix("loginctl enable-linger \"$USER\"   # then log in again".to_owned()),
        ManagerState::Failed { error } => {
            Finding::new(Level::Warn, "service", format!("cannot tell: {error}"))
        }
        ManagerState::NotAsked { .. } => Finding::new(Level::Ok, "service", "not asked".into()),
    }
}

/// A path as a shell word: as it is when it is plain, else in single quotes.
fn quote(path: &Path) -> String {
    let text = path.to_string_lossy();
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:,@%".contains(c));
    if plain && !text.is_empty() {
        text.into_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Prints the report for people: one line per finding, its level first, then its fix.
pub(crate) fn write_text(out: &mut dyn Write, report: &Report) -> io::Result<()> {
    for f in &report.findings {
        let level = match f.level {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "FAIL",
        };
        match &f.fix {
            Some(fix) => writeln!(out, "{level:<4}  {}: {}; fix: {fix}", f.check, f.message)?,
            None => writeln!(out, "{level:<4}  {}: {}", f.check, f.message)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_only_when_a_shell_needs_it() {
        assert_eq!(quote(Path::new("/a/b-c_d.db")), "/a/b-c_d.db");
        assert_eq!(quote(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }
}
