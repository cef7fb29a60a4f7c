//! `restore`: a session's transcripts written back where the agent keeps them, byte for byte
//! as archived, so that the agent can resume them.
//!
//! Each file is written beside its target under a temporary name, seeded (its records are
//! marked as history, so that a running daemon does not archive them again), then renamed into
//! place: the daemon sees the file only once it is whole and marked.

use crate::archive::{Archive, Commit};
use crate::error::{Error, IoContext, Result};
use crate::harness::Root;
use crate::lifecycle::{self, Change};
use crate::lock::ArchiveLock;
use crate::seed;
use crate::sessions::query::{self, Session};
use crate::sources::Sources;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// What `restore` is asked to do.
pub struct Request<'a> {
    /// Where the agent's directories are: a file goes where it was found, or under `to`.
    pub roots: &'a [Root],
    /// Write under this directory instead, in the same layout below each watcher's root.
    pub to: Option<&'a Path>,
    /// Overwrite a file that differs.
    pub force: bool,
    /// Say what would be written; write nothing.
    pub dry_run: bool,
}

/// One transcript to write.
struct Planned {
    target: PathBuf,
    bytes: Vec<u8>,
    /// What is at the target now.
    state: Target,
}

#[derive(PartialEq)]
enum Target {
    Missing,
    Identical,
    Different,
}

/// Restores `session` and its subagents, printing each path and the command that resumes it.
/// Nothing is written when a target differs and `force` is not given.
pub fn restore(
    archive: &mut Archive,
    session: &Session,
    request: &Request,
    out: &mut impl Write,
) -> Result<()> {
    let mut sessions = vec![session.clone()];
    sessions.extend(query::subagents(archive, session)?);
    let mut plan = Vec::new();
    for s in &sessions {
        for file in query::session_files(archive, s)? {
            let target = target_of(&file.path, request, &s.harness);
            let mut bytes = Vec::new();
            query::write_records(archive, &file, None, &mut bytes)?.at_path(&target)?;
            let state = compare(&target, &bytes)?;
            plan.push(Planned {
                target,
                bytes,
                state,
            });
        }
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
        report(out, p, request.dry_run).at_path(&p.target)?;
    }
    let verb = if request.dry_run {
        "would restore"
    } else {
        "restored"
    };
    let resume = resume_command(session);
    writeln!(
        out,
        "{verb} session {}; resume it with:\n  {resume}",
        session.id
    )
    .at_path(&plan[0].target)
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

fn report(out: &mut impl Write, p: &Planned, dry_run: bool) -> io::Result<()> {
    let records = p.bytes.iter().filter(|b| **b == b'\n').count();
    let what = match (&p.state, dry_run) {
        (Target::Identical, _) => "unchanged (identical)",
        (Target::Missing, false) => "wrote",
        (Target::Different, false) => "overwrote",
        (Target::Missing, true) => "would write",
        (Target::Different, true) => "would overwrite",
    };
    writeln!(
        out,
        "{what} {} ({records} records, {} bytes)",
        p.target.display(),
        p.bytes.len(),
    )
}

/// Sets the modification time of `path` to now.
fn touch(path: &Path) -> Result<()> {
    let file = OpenOptions::new().write(true).open(path).at_path(path)?;
    file.set_modified(std::time::SystemTime::now())
        .at_path(path)
}

/// Writes the file under a temporary name beside its target, marks its records as history
/// when a watcher would see it, and renames it into place, never over a file that appeared
/// meanwhile.
fn write_marked(archive: &mut Archive, p: &Planned, request: &Request) -> Result<()> {
    let roots = request.roots;
    let dir = p.target.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).at_path(dir)?;
    let name = p.target.file_name().unwrap_or_default().to_string_lossy();
    let temp = dir.join(format!(".{name}.restoring-{}", std::process::id()));
    let written = (|| {
        let mut file: File = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(&p.bytes)?;
        file.sync_all()
    })();
    written.at_path(&temp)?;
    // The temporary name matches no watcher's glob; the mark follows the file's identity
    // through the rename.
    if roots.iter().any(|r| r.matches(&p.target))
        && let Err(e) = mark_as_history(archive, &temp, &p.target)
    {
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    // A target that was missing is not replaced if it appeared meanwhile; one that differed
    // is here only with --force.
    let placed = match p.state {
        Target::Missing => crate::sys::rename_no_replace(&temp, &p.target),
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

/// Marks the records of `temp` (about to become `target`) as history, so that a daemon does
/// not archive them again. A new file may take the inode of one that was deleted while no
/// daemon ran, whose source the archive still tracks: that source is recorded as gone first
/// (its file is: its inode is this one's), which only a process holding the archive's lock
/// may do; with a daemon running, the daemon sees the deletion itself.
fn mark_as_history(archive: &mut Archive, temp: &Path, target: &Path) -> Result<()> {
    let source_id = match seed::seed_prefix(archive, temp, None) {
        Ok(_) => return Ok(()),
        Err(Error::AlreadyTracked { source_id, .. }) => source_id,
        Err(e) => return Err(e),
    };
    let _lock = ArchiveLock::acquire(archive.path())?;
    let mut sources = Sources::new(archive.sources()?);
    let mut tx = Commit::default();
    let why = format!("its inode was taken by {}, restored", target.display());
    log::info!("source {source_id} recorded as gone: {why}");
    let kind = "replaced";
    lifecycle::apply(&mut sources, &mut tx, source_id, Change::Gone { kind, why });
    archive.apply(&tx)?;
    seed::seed_prefix(archive, temp, None).map(drop)
}

/// The command that resumes `session` in its agent.
fn resume_command(session: &Session) -> String {
    let dir = session.project.as_deref().filter(|p| p.starts_with('/'));
    let cd = dir
        .map(|d| format!("cd {} && ", shell_quote(d)))
        .unwrap_or_default();
    match session.harness.as_str() {
        "claude-code" => format!("{cd}claude --resume {}", session.id),
        "codex" => format!("codex resume {}", session.id),
        "gemini-cli" => format!(
            "gemini --resume {}   (from the project's directory)",
            session.id
        ),
        "cursor" => format!(
            "cursor-agent --resume {}   (from the project's directory)",
            session.id
        ),
        other => format!("(no resume command known for {other})"),
    }
}

fn shell_quote(text: &str) -> String {
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::Op;
    use crate::domain::Cursor;
    use crate::fingerprint::Identity;
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
