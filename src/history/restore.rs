//! `restore`: a session's transcripts written back where the agent keeps them, byte for byte
//! as archived, so that the agent can resume them.
//!
//! Each file is written beside its target under a temporary name, seeded (its records are
//! marked as history, so that a running daemon does not archive them again), then renamed into
//! place: the daemon sees the file only once it is whole and marked.

use crate::agents::restore::{Resume, shell_quote};
use crate::archive::lock::ArchiveLock;
use crate::archive::{Archive, Commit};
use crate::capture::harness::Root;
use crate::consumers::sessions::git;
use crate::consumers::sessions::query::{self, Session};
use crate::engine::lifecycle::{self, Change};
use crate::engine::seed;
use crate::engine::sources::Sources;
use crate::error::{Error, IoContext, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What `restore` is asked to do.
pub(crate) struct Request<'a> {
    /// Where the agent's directories are: a file goes where it was found, or under `to`.
    pub roots: &'a [Root],
    /// Write under this directory instead, in the same layout below each watcher's root.
    pub to: Option<&'a Path>,
    /// Overwrite a file that differs.
    pub force: bool,
    /// Say what would be written; write nothing.
    pub dry_run: bool,
    /// For another machine's session: its project's directory on this machine.
    pub project_dir: Option<&'a Path>,
    /// For another machine's session: change its records' `cwd` to the project's directory
    /// here.
    pub rewrite_cwd: bool,
}

/// Where another machine's session goes on this one: its project's directory there and here.
struct Move {
    /// The project's directory on the session's machine.
    from: Option<String>,
    /// The project's directory here.
    to: PathBuf,
    /// How `to` was found, for the report.
    how: &'static str,
}

/// One transcript to write.
struct Planned {
    target: PathBuf,
    bytes: Vec<u8>,
    /// What is at the target now.
    state: Target,
    /// A snapshot source's state (a file the agent rewrites whole): the daemon compares it
    /// with the state it captured last, so it needs no prefix mark.
    is_snapshot: bool,
}

#[derive(PartialEq)]
enum Target {
    Missing,
    Identical,
    Different,
}

/// One file of a restore, as each face reports it: where it goes, what it holds and what is
/// done to it.
pub(crate) struct FileReport<'a> {
    /// Where it goes.
    pub path: &'a Path,
    /// How many records (lines) it holds.
    pub records: usize,
    /// How many bytes it holds.
    pub bytes: usize,
    /// What is done: `wrote`, `overwrote`, `unchanged (identical)`, or with `would`.
    pub what: &'static str,
}

impl FileReport<'_> {
    /// The file's line in a report: `wrote PATH (N records, M bytes)`.
    pub(crate) fn line(&self) -> String {
        format!(
            "{} {} ({} records, {} bytes)",
            self.what,
            self.path.display(),
            self.records,
            self.bytes
        )
    }
}

/// What a restore did, or (with `dry_run`) would do, once every file is reported.
pub(crate) struct Restored {
    /// `restored`, or `would restore`.
    pub verb: &'static str,
    /// For another machine's session: where its project is here, and what became of its
    /// records' `cwd`, in words.
    pub moved: Option<String>,
    /// The command that resumes the session.
    pub resume: String,
}

/// Restores `session` and its subagents, giving each file to `report` as it is written (or,
/// dry, planned). Nothing is written when a target differs and `force` is not given. `Err`
/// from `report` stops the restore, named by the file's path.
pub(crate) fn restore(
    archive: &mut Archive,
    session: &Session,
    request: &Request,
    report: &mut dyn FnMut(&FileReport) -> io::Result<()>,
) -> Result<Restored> {
    let files = query::session_files(archive, session)?;
    let in_database =
        |f: &&query::SessionFile| crate::agents::in_database(&session.harness, &f.path);
    // A session kept only in a database is refused; one archived from files too (an agent's
    // files imported into its database) is restored from its files, its database left alone.
    let only_database = !files.is_empty() && files.iter().all(|f| in_database(&f));
    if let Some(source) = files.first().filter(|_| only_database) {
        // The database the session's source is in (`<database>/<session id>`); a store of
        // files is named by a file in its folder (OpenCode's `storage/migration`): the folder.
        let kept = source.path.parent().unwrap_or(Path::new(""));
        let kept = match kept.ends_with("storage/migration") {
            true => kept.parent().unwrap_or(kept),
            false => kept,
        };
        let kept = kept.display();
        return Err(Error::RestoreRefused(format!(
            "session {} is kept in {}'s database ({kept}), which transcript-sync never writes \
             into (the agent may have it open); `transcript-sync show {} --format raw` gives \
             the session as archived, as JSON",
            session.id, session.harness, session.id
        )));
    }
    let moved = match session.machine_id {
        0 if request.project_dir.is_some() || request.rewrite_cwd => {
            return Err(Error::RestoreRefused(format!(
                "--project-dir and --rewrite-cwd are for another machine's session; session {} is this machine's, and goes back where it was (or under --to)",
                session.id
            )));
        }
        0 => None,
        _ => Some(place(archive, session, request)?),
    };
    let mut sessions = vec![session.clone()];
    sessions.extend(query::subagents(archive, session)?);
    let mut plan = Vec::new();
    for s in &sessions {
        for file in query::session_files(archive, s)? {
            if crate::agents::in_database(&s.harness, &file.path) {
                log::info!(
                    "restore: not written: {:?} is in {}'s database, which transcript-sync never writes into",
                    file.path,
                    s.harness
                );
                continue;
            }
            let target = match &moved {
                Some(m) => pulled_target(&file.path, request, &s.harness, m)?,
                None => target_of(&file.path, request, &s.harness),
            };
            let snapshot = query::snapshot_of(archive, &file)?;
            let is_snapshot = snapshot.is_some();
            let mut bytes = snapshot.unwrap_or_default();
            if !is_snapshot {
                query::write_records(archive, &file, None, &mut bytes)?.at_path(&target)?;
            }
            if let Some(Move {
                from: Some(from),
                to,
                ..
            }) = &moved
                && request.rewrite_cwd
                && crate::agents::of(&s.harness).restore.records_name_cwd
            {
                bytes = rewrite_cwd(&bytes, from, &to.to_string_lossy());
            }
            let state = compare(&target, &bytes)?;
            plan.push(Planned {
                target,
                bytes,
                state,
                is_snapshot,
            });
        }
    }
    // Where the archive saw them: not under --to, nor on another machine.
    if moved.is_none() && request.to.is_none() {
        plan.extend(empty_files_beside(archive, &session.harness, &plan)?);
    }
    if plan.is_empty() {
        return Err(Error::NothingToRestore {
            id: session.id.clone(),
        });
    }
    if !request.force
        && let Some(p) = plan.iter().find(|p| p.state == Target::Different)
    {
        return Err(Error::RestoreConflict {
            path: p.target.clone(),
        });
    }
    for p in &plan {
        match (request.dry_run, &p.state) {
            (true, _) => {}
            // Its age, too, must not make the agent delete it again.
            (false, Target::Identical) => touch(&p.target)?,
            (false, _) => write_marked(archive, p, request)?,
        }
        report(&file_report(p, request.dry_run)).at_path(&p.target)?;
    }
    let verb = if request.dry_run {
        "would restore"
    } else {
        "restored"
    };
    let said = moved
        .as_ref()
        .map(|m| moved_words(session, m, request.rewrite_cwd));
    let mut here = session.clone();
    if let Some(m) = &moved {
        here.project = Some(m.to.to_string_lossy().into_owned());
    }
    Ok(Restored {
        verb,
        moved: said,
        resume: resume_command(&here, request.to),
    })
}

/// Where another machine's session's project is here, and what became of its records' `cwd`.
fn moved_words(session: &Session, m: &Move, rewrite_cwd: bool) -> String {
    let from = m.from.as_deref().unwrap_or("an unknown directory");
    let names_cwd = crate::agents::of(&session.harness).restore.records_name_cwd;
    let cwd = match (rewrite_cwd, names_cwd) {
        (true, true) => "; its records' cwd changed to it",
        (false, true) if m.from.as_deref() != Some(&*m.to.to_string_lossy()) => {
            "; its records still name the old cwd (--rewrite-cwd changes them)"
        }
        _ => "",
    };
    format!(
        "session {} of {}: project {from} there is {} here ({}){cwd}",
        session.id,
        session.machine,
        m.to.display(),
        m.how
    )
}

/// The empty files the archive saw in the directories of `plan`'s files and that are not
/// there any more, to create again (empty): an agent may expect them (Mistral Vibe refuses a
/// session whose empty journal segment is missing). One that is there is left as it is.
fn empty_files_beside(
    archive: &mut Archive,
    harness: &str,
    plan: &[Planned],
) -> Result<Vec<Planned>> {
    let mut dirs: Vec<PathBuf> = plan
        .iter()
        .filter_map(|p| p.target.parent())
        .map(Into::into)
        .collect();
    dirs.sort();
    dirs.dedup();
    let empty = query::empty_files_in(archive, harness, &dirs)?;
    let missing = empty
        .into_iter()
        .filter(|p| fs::symlink_metadata(p).is_err());
    let planned = missing.filter(|p| !plan.iter().any(|q| q.target == *p));
    Ok(planned
        .map(|target| Planned {
            target,
            bytes: Vec::new(),
            state: Target::Missing,
            is_snapshot: false,
        })
        .collect())
}

/// The project directory here of another machine's session: `--project-dir`; else the
/// directory of a session of this machine with the same git remote; else the original path,
/// if it is a directory here. Refuses otherwise, naming the flag.
fn place(archive: &mut Archive, session: &Session, request: &Request) -> Result<Move> {
    let from = session.project.clone();
    if let Some(dir) = request.project_dir {
        // As the agent's `getcwd` gives it: no trailing `/`, no symbolic link (Claude Code
        // names the project's directory after that path).
        let to = match fs::canonicalize(dir) {
            Ok(to) if to.is_dir() => to,
            Ok(_) => {
                return Err(Error::RestoreRefused(format!(
                    "--project-dir {} is not a directory",
                    dir.display()
                )));
            }
            Err(e) => {
                return Err(Error::RestoreRefused(format!(
                    "--project-dir {}: {e}",
                    dir.display()
                )));
            }
        };
        let how = "--project-dir";
        return Ok(Move { from, to, how });
    }
    if let Some(remote) = &session.git_remote {
        let key = git::repository_key(remote);
        let filter = query::Filter {
            machine: Some(0),
            ..query::Filter::default()
        };
        let local = query::sessions(archive, &filter)?;
        let checkout = (local.iter())
            .filter(|s| s.git_remote.as_deref().map(git::repository_key) == Some(key.clone()))
            .filter_map(|s| s.project.as_deref().map(PathBuf::from))
            .find(|p| p.is_dir());
        if let Some(to) = checkout {
            let how = "a session here has its git remote";
            return Ok(Move { from, to, how });
        }
    }
    if let Some(p) = from
        .as_deref()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
    {
        return Ok(Move {
            from,
            to: p,
            how: "the same path exists here",
        });
    }
    Err(Error::ProjectDirNeeded {
        id: session.id.clone(),
        machine: session.machine.clone(),
        project: from.unwrap_or_else(|| "an unknown directory".into()),
        remote: match &session.git_remote {
            Some(r) => format!(", and no session of this machine has its git remote {r}"),
            None => String::new(),
        },
    })
}

/// Where a file of another machine's session goes here: in the agent's layout under this
/// machine's root for its watcher (or under `--to`). A file keeps its path below the
/// directory its layout starts at (the root's own name, or the one its agent names: Claude
/// Code's `projects`), moved where its agent says (Claude Code's files go under the directory
/// the agent names after the project's directory here); one in no layout goes where the
/// agent's naming says (Codex's archived rollouts), or under `--to` by its name.
fn pulled_target(path: &Path, request: &Request, harness: &str, m: &Move) -> Result<PathBuf> {
    let restore = &crate::agents::of(harness).restore;
    let roots = || request.roots.iter().filter(|r| r.harness == harness);
    let preferred = restore.prefer_root.map(std::ffi::OsStr::new);
    let root = (roots().find(|r| preferred.is_some() && r.path.file_name() == preferred))
        .or_else(|| roots().next());
    let base = match (request.to, root) {
        (Some(to), Some(root)) => to.join(root.path.file_name().unwrap_or_default()),
        (Some(to), None) => to.to_owned(),
        (None, Some(root)) => root.path.clone(),
        (None, None) => {
            return Err(Error::RestoreRefused(format!(
                "no {harness} root is configured on this machine, so there is nowhere the agent would look for {}; give --to DIR",
                path.display()
            )));
        }
    };
    let names: Vec<&std::ffi::OsStr> = path.iter().collect();
    let root_name = (restore.layout_below.map(std::ffi::OsStr::new))
        .or_else(|| root.and_then(|r| r.path.file_name()));
    let below = root_name.and_then(|n| names.iter().rposition(|c| *c == n));
    let rest = match below.filter(|at| at + 1 < names.len()) {
        Some(at) => (restore.relocate)(&names[at + 1..], &m.to.to_string_lossy()),
        None => match (restore.unplaced)(path) {
            Some(placed) => placed,
            // No layout to keep: under --to, by its name.
            None if request.to.is_some() && path.file_name().is_some() => {
                PathBuf::from(path.file_name().unwrap_or_default())
            }
            None => {
                return Err(Error::RestoreRefused(format!(
                    "{} is not in a {harness} layout this machine knows; give --to DIR to write it elsewhere",
                    path.display()
                )));
            }
        },
    };
    // The path is another machine's word: it places a file under the root, never elsewhere.
    let plain = (rest.components()).all(|c| matches!(c, std::path::Component::Normal(_)));
    if !plain {
        return Err(Error::RestoreRefused(format!(
            "{} names a place outside the agent's directory; not restored",
            path.display()
        )));
    }
    Ok(base.join(rest))
}

/// `records` (lines of JSON) with each `cwd` member whose value is `from`, or a directory
/// below it, changed to the same place under `to`. Nothing else changes: every other byte,
/// escapes and spacing included, stays; a line that is not a JSON object stays whole.
pub(crate) fn rewrite_cwd(records: &[u8], from: &str, to: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(records.len());
    for line in records.split_inclusive(|b| *b == b'\n') {
        let Some(strings) = crate::read::record::strings::strings(line) else {
            out.extend_from_slice(line);
            continue;
        };
        let mut at = 0;
        for s in strings {
            let is_cwd = (s.member.as_ref()).is_some_and(|m| &line[m.clone()] == b"cwd");
            if s.is_name || !is_cwd {
                continue;
            }
            let quoted = &line[s.raw.start - 1..s.raw.end + 1];
            let Ok(value) = serde_json::from_slice::<String>(quoted) else {
                continue;
            };
            let moved = match value.strip_prefix(from) {
                Some("") => to.to_owned(),
                Some(rest) if rest.starts_with('/') => format!("{to}{rest}"),
                _ => continue,
            };
            let Ok(encoded) = serde_json::to_string(&moved) else {
                continue;
            };
            out.extend_from_slice(&line[at..s.raw.start - 1]);
            out.extend_from_slice(encoded.as_bytes());
            at = s.raw.end + 1;
        }
        out.extend_from_slice(&line[at..]);
    }
    out
}

/// Where an archived file goes: its own path, or under `to` in the same layout below the
/// watcher's root (`to/projects/<project>/<id>.jsonl` for Claude Code's `projects` root).
fn target_of(path: &Path, request: &Request, harness: &str) -> PathBuf {
    let Some(to) = request.to else {
        return path.to_owned();
    };
    let root = (request.roots.iter()).find(|r| r.harness == harness && path.starts_with(&r.path));
    match root {
        Some(root) => {
            let relative = path.strip_prefix(&root.path).unwrap_or(path);
            let name = root.path.file_name().map(PathBuf::from).unwrap_or_default();
            to.join(name).join(relative)
        }
        None => to.join(path.file_name().unwrap_or(path.as_os_str())),
    }
}

fn compare(target: &Path, bytes: &[u8]) -> Result<Target> {
    match fs::read(target) {
        Ok(now) if now == bytes => Ok(Target::Identical),
        Ok(_) => Ok(Target::Different),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Target::Missing),
        Err(source) => Err(Error::Io {
            path: target.to_owned(),
            source,
        }),
    }
}

/// How `p` is reported.
fn file_report(p: &Planned, dry_run: bool) -> FileReport<'_> {
    let what = match (&p.state, dry_run) {
        (Target::Identical, _) => "unchanged (identical)",
        (Target::Missing, false) => "wrote",
        (Target::Different, false) => "overwrote",
        (Target::Missing, true) => "would write",
        (Target::Different, true) => "would overwrite",
    };
    FileReport {
        path: &p.target,
        records: p.bytes.iter().filter(|b| **b == b'\n').count(),
        bytes: p.bytes.len(),
        what,
    }
}

/// Sets the modification time of `path` to now.
fn touch(path: &Path) -> Result<()> {
    let file = OpenOptions::new().write(true).open(path).at_path(path)?;
    file.set_modified(std::time::SystemTime::now())
        .at_path(path)
}

/// How many temporary files `write_marked` creates, at most, looking for an inode that no
/// tracked source holds.
const INODE_ATTEMPTS: usize = 16;

/// Writes the file under a temporary name beside its target, marks its records as history
/// when a watcher would see it, and renames it into place, never over a file that appeared
/// meanwhile.
fn write_marked(archive: &mut Archive, p: &Planned, request: &Request) -> Result<()> {
    let roots = request.roots;
    let dir = p.target.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).at_path(dir)?;
    let name = p.target.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.restoring-{}", std::process::id()));
    write_temp(&temp, &p.bytes)?;
    // The temporary name matches no watcher's glob; the mark follows the file's identity
    // through the rename.
    if !p.is_snapshot
        && roots.iter().any(|r| r.matches(&p.target))
        && let Err(e) = mark_on_an_untracked_inode(archive, &temp, p)
    {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    // A target that was missing is not replaced if it appeared meanwhile; one that differed
    // is here only with --force.
    let placed = match p.state {
        Target::Missing => crate::platform::sys::rename_no_replace(&temp, &p.target),
        _ => fs::rename(&temp, &p.target),
    };
    if let Err(e) = placed {
        let _ = fs::remove_file(&temp);
        return match e.kind() {
            io::ErrorKind::AlreadyExists => Err(Error::RestoreConflict {
                path: p.target.clone(),
            }),
            _ => Err(Error::Io {
                path: p.target.clone(),
                source: e,
            }),
        };
    }
    // The rename is durable once the directory is.
    File::open(dir).and_then(|d| d.sync_all()).at_path(dir)
}

/// Marks the records of `temp` as history (`mark_as_history`), writing them again on another
/// inode for as long as the file system gives `temp` the inode of a deleted transcript that a
/// running daemon still tracks. The files set aside keep their inodes from being handed out
/// again until the mark is made (or fails); then they go.
fn mark_on_an_untracked_inode(archive: &mut Archive, temp: &Path, p: &Planned) -> Result<()> {
    let mut aside = Vec::new();
    let marked = mark_setting_aside(archive, temp, p, &mut aside);
    for path in aside {
        let _ = fs::remove_file(path);
    }
    marked
}

fn mark_setting_aside(
    archive: &mut Archive,
    temp: &Path,
    p: &Planned,
    aside: &mut Vec<PathBuf>,
) -> Result<()> {
    loop {
        let (source_id, pid) = match mark_as_history(archive, temp, &p.target)? {
            Marked::Done => return Ok(()),
            Marked::InodeTaken { source_id, pid } => (source_id, pid),
        };
        if aside.len() + 1 >= INODE_ATTEMPTS {
            return Err(Error::RestoreInodeTracked {
                path: p.target.clone(),
                source_id,
                pid,
            });
        }
        let mut set_aside = temp.as_os_str().to_owned();
        set_aside.push(format!(".{}", aside.len()));
        let set_aside = PathBuf::from(set_aside);
        log::info!(
            "the file system gave {} the inode of source {source_id}, whose file was deleted \
             and which the running daemon has not yet recorded as gone; writing it again on \
             another inode",
            p.target.display()
        );
        fs::rename(temp, &set_aside).at_path(temp)?;
        aside.push(set_aside);
        write_temp(temp, &p.bytes)?;
    }
}

/// Creates `temp` (which must not exist) holding `bytes`, synced.
fn write_temp(temp: &Path, bytes: &[u8]) -> Result<()> {
    let written = (|| {
        let mut file: File = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    written.at_path(temp)
}

/// What `mark_as_history` did.
enum Marked {
    /// The records are marked.
    Done,
    /// Nothing: the file's inode is that of a source the archive still tracks, whose file was
    /// deleted, and a running daemon (which alone may record it as gone) has not yet done so.
    InodeTaken { source_id: i64, pid: Option<u32> },
}

/// Marks the records of `temp` (about to become `target`) as history, so that a daemon does
/// not archive them again. A new file may take the inode of one that was deleted, whose
/// source the archive still tracks: with no daemon running, that source is recorded as gone
/// first (its file is: its inode is this one's), which only a process holding the archive's
/// lock may do; with a daemon running, the daemon records the deletion itself, perhaps not
/// yet, and the caller is told to use another inode.
fn mark_as_history(archive: &mut Archive, temp: &Path, target: &Path) -> Result<Marked> {
    let source_id = match seed::seed_prefix(archive, temp, None) {
        Ok(_) => return Ok(Marked::Done),
        Err(Error::AlreadyTracked { source_id, .. }) => source_id,
        Err(e) => return Err(e),
    };
    let _lock = match ArchiveLock::acquire(archive.path()) {
        Ok(lock) => lock,
        Err(Error::Locked { pid, .. }) => return Ok(Marked::InodeTaken { source_id, pid }),
        Err(e) => return Err(e),
    };
    let mut sources = Sources::new(archive.sources()?);
    let mut tx = Commit::default();
    let why = format!("its inode was taken by {}, restored", target.display());
    log::info!("source {source_id} recorded as gone: {why}");
    let kind = "replaced";
    lifecycle::apply(&mut sources, &mut tx, source_id, Change::Gone { kind, why });
    archive.apply(&tx)?;
    seed::seed_prefix(archive, temp, None).map(|_| Marked::Done)
}

/// The command that resumes `session` in its agent, for files restored where the agent keeps
/// them, or under `to` (`--to`): then the agent is pointed there through its variable where it
/// has one. Says so when the session's project directory does not exist here.
fn resume_command(session: &Session, to: Option<&Path>) -> String {
    let dir = session.project.as_deref().filter(|p| p.starts_with('/'));
    let cd = dir
        .map(|d| format!("cd {} && ", shell_quote(d)))
        .unwrap_or_default();
    let agent = crate::agents::of(&session.harness);
    let asked = Resume {
        id: &session.id,
        cd: &cd,
        to,
        files: &session.files,
    };
    let command = match ((agent.restore.resume)(&asked), to) {
        (Some(command), _) => command,
        (None, Some(to)) => format!(
            "(no way known to point {} at {}: move the files into the agent's own \
             directory to resume the session)",
            session.harness,
            to.display()
        ),
        (None, None) => format!(
            "(no command resumes a {} session: open it from the agent's own history)",
            session.harness
        ),
    };
    match dir.filter(|d| !Path::new(d).is_dir()) {
        Some(d) => format!("{command}\n  (its project directory {d} does not exist here)"),
        None => command,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_cwd_members_under_the_old_path_change() {
        let records = concat!(
            "{\"cwd\":\"/home/a/app\",\"text\":\"cd /home/a/app\",\"x\":1.50}\n",
            "{\"message\":{\"cwd\":\"/home/a/app/sub\"}, \"cwd\" : \"/home/a/apple\"}\n",
            "{\"cwd\":\"\\/home\\/a\\/app\",\"note\":\"\\u00e9\"}\n",
            "not json /home/a/app\n",
        );
        let out = rewrite_cwd(records.as_bytes(), "/home/a/app", "/srv/b/app");
        let want = concat!(
            "{\"cwd\":\"/srv/b/app\",\"text\":\"cd /home/a/app\",\"x\":1.50}\n",
            "{\"message\":{\"cwd\":\"/srv/b/app/sub\"}, \"cwd\" : \"/home/a/apple\"}\n",
            "{\"cwd\":\"/srv/b/app\",\"note\":\"\\u00e9\"}\n",
            "not json /home/a/app\n",
        );
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }

    /// The built-in roots of machine B, whose home is `/home/b`.
    fn roots_of_b() -> Vec<Root> {
        let home = |k: &str| (k == "HOME").then(|| "/home/b".to_owned());
        crate::agents::builtin_roots(&home).unwrap()
    }

    /// Where `pulled_target` puts `path`, a `harness` file of machine A (home `/home/a`,
    /// project `/home/a/app`), on machine B (home `/home/b`, project `/home/b/app`) with the
    /// built-in roots.
    fn on_machine_b(harness: &str, path: &str) -> Result<PathBuf> {
        let roots = roots_of_b();
        let request = Request {
            roots: &roots,
            to: None,
            force: false,
            dry_run: true,
            project_dir: None,
            rewrite_cwd: false,
        };
        let m = Move {
            from: Some("/home/a/app".into()),
            to: PathBuf::from("/home/b/app"),
            how: "test",
        };
        pulled_target(Path::new(path), &request, harness, &m)
    }

    #[test]
    fn another_machines_path_never_leads_out_of_the_root() {
        let roots = roots_of_b();
        let claude = roots.iter().find(|r| r.harness == "claude-code").unwrap();
        assert_eq!(claude.path, Path::new("/home/b/.claude/projects"));
        let target = |p: &str| on_machine_b("claude-code", p);
        assert_eq!(
            target("/home/a/.claude/projects/-home-a-app/s.jsonl").unwrap(),
            Path::new("/home/b/.claude/projects/-home-b-app/s.jsonl")
        );
        assert_eq!(
            target("/home/a/.claude/projects/-home-a-app/s/subagents/agent-1.jsonl").unwrap(),
            Path::new("/home/b/.claude/projects/-home-b-app/s/subagents/agent-1.jsonl")
        );
        for evil in [
            "/home/a/.claude/projects/x/../../../.bashrc",
            "/home/a/.claude/projects/x/a/../../b.jsonl",
        ] {
            assert!(target(evil).is_err(), "{evil}");
        }
        assert!(target("/elsewhere/s.jsonl").is_err());
    }

    #[test]
    fn another_machines_codex_session_goes_under_its_day_in_sessions() {
        let roots = roots_of_b();
        let codex = roots.iter().filter(|r| r.harness == "codex").count();
        assert!(codex >= 2, "sessions and archived_sessions");
        let name = "rollout-2026-11-29T14-02-11-0199d3a2-5b7c-7e10-9a4f-3c2b1a0f9e8d.jsonl";
        let want = Path::new("/home/b/.codex/sessions/2026/11/29").join(name);
        for from in [
            format!("/home/a/.codex/sessions/2026/11/29/{name}"),
            format!("/home/a/.codex/archived_sessions/{name}"),
        ] {
            let got = on_machine_b("codex", &from).unwrap();
            assert_eq!(got, want, "{from}");
        }
        let odd = "/home/a/.codex/archived_sessions/notes.jsonl";
        assert!(on_machine_b("codex", odd).is_err());
    }

    use crate::archive::Op;
    use crate::domain::Cursor;
    use crate::domain::fingerprint::Identity;
    use std::os::unix::fs::MetadataExt;

    /// A file restored while no daemon runs may get the inode of the one deleted before it,
    /// whose source the archive still tracks as live: its records must still be marked as
    /// history (else a daemon reads them again as a rewrite of that source).
    #[test]
    fn a_restored_file_that_reuses_a_tracked_inode_is_marked_as_history() {
        let dir = tempfile::tempdir().unwrap();
        let mut archive = Archive::open(&dir.path().join("a.db")).unwrap();
        let temp = dir.path().join(".s.jsonl.restoring");
        fs::write(&temp, b"{\"a\":1}\n{\"b\":2}\n").unwrap();
        let meta = fs::metadata(&temp).unwrap();
        let mut tx = Commit::default();
        tx.push(Op::InsertSource {
            id: 7,
            identity: Identity::of(&meta),
            path: dir.path().join("old.jsonl"),
            harness: "generic".into(),
            cursor: Cursor::default(),
        });
        archive.apply(&tx).unwrap();

        mark_as_history(&mut archive, &temp, &dir.path().join("s.jsonl")).unwrap();
        let old = archive
            .sources()
            .unwrap()
            .into_iter()
            .find(|s| s.id == 7)
            .unwrap();
        assert!(old.gone, "the source whose inode was taken is gone");
        let identity = Identity {
            dev: meta.dev(),
            ino: meta.ino(),
        };
        let mark = archive
            .prefix_mark(identity)
            .unwrap()
            .expect("a prefix mark");
        assert_eq!(mark.position.offset, 16);
    }
}
