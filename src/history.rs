//! The session service: what every face (the command line, the web view, the MCP server)
//! asks of the archive's sessions, written once beneath them: the archive opened with its
//! session index up to date, a session found by id, a time given as "since", restoring a
//! session (`restore`), the archive's status (`status`), the short forms they all show
//! (`display`), a conversation as HTML (`html`: the web view's and a shared file's) and a list
//! as CSV (`csv`). A face renders what these return in its own form, and calls no other face.

pub(crate) mod csv;
pub(crate) mod display;
pub(crate) mod html;
pub(crate) mod marks;
pub(crate) mod restore;
pub(crate) mod status;

use crate::archive::Archive;
use crate::archive::lock::ArchiveLock;
use crate::consumers::sessions::{
    self, CatchUp,
    query::{self, Found},
};
use crate::error::{Error, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// The archive at `db` with its session index attached and up to date: caught up here when
/// no `run` holds the archive (an upgraded archive gets its index this way, with progress);
/// when one does, it is catching up itself, and a warning says how far it is.
pub(crate) fn indexed_archive(db: &Path) -> Result<Archive> {
    let archive = Archive::open_existing_to_write(db)?;
    sessions::store::attach(&archive)?;
    let done = sessions::store::attached_done(&archive)?;
    let last = archive.last_seq()?;
    if done >= last {
        return Ok(archive);
    }
    let _lock = match ArchiveLock::acquire(db) {
        Ok(lock) => lock,
        Err(Error::Locked { .. }) => {
            wait_for_running_index(db, last)?;
            return Ok(archive);
        }
        Err(e) => return Err(e),
    };
    catch_up_index(db)?;
    Ok(archive)
}

/// A bar of `len` records labelled `what`, drawn on stderr when it is a terminal.
fn records_bar(what: &str, len: u64) -> indicatif::ProgressBar {
    let template = format!("{what} {{bar:30}} {{pos}}/{{len}} records");
    indicatif::ProgressBar::new(len).with_style(
        indicatif::ProgressStyle::with_template(&template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    )
}

/// How long a command waits for a running daemon's session index to reach the records
/// archived when the command started, before it answers from what is indexed.
const INDEX_WAIT: Duration = Duration::from_secs(60);

/// Waits until the session index of the archive at `db`, which a running `run` keeps, holds
/// every record up to seq `last` (the archive's last when the command started), for
/// [`INDEX_WAIT`] at most, with a progress bar on a terminal. `Ok` once it does, or with a
/// warning that the answer may be incomplete once the wait is over.
fn wait_for_running_index(db: &Path, last: i64) -> Result<()> {
    let started = Instant::now();
    let first = sessions::store::done(db)?;
    log::info!(
        "waiting for the running daemon's session index to reach seq {last} (it is at {first})"
    );
    let bar = records_bar(
        "waiting for the session index",
        (last - first).max(0) as u64,
    );
    loop {
        let done = sessions::store::done(db)?;
        bar.set_position((done - first).max(0) as u64);
        if done >= last {
            bar.finish_and_clear();
            log::info!("session index at seq {done}");
            return Ok(());
        }
        if started.elapsed() >= INDEX_WAIT {
            bar.finish_and_clear();
            log::warn!(
                "the running daemon's session index is still at seq {done} of {last} after {}; \
                 answering from what it holds, which may be incomplete",
                humantime::format_duration(INDEX_WAIT)
            );
            return Ok(());
        }
        // The index is another process's file: there is nothing to wait on but its progress.
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Brings the index of the archive at `db` up to date, with a progress bar on a terminal and
/// log lines.
pub(crate) fn catch_up_index(db: &Path) -> Result<()> {
    let mut indexer = sessions::Indexer::open(db)?;
    let done = indexer.done()?;
    log::info!("indexing sessions from seq {done}");
    let bar = records_bar("indexing sessions", 0);
    let indexed = indexer.catch_up(|step| match step {
        CatchUp::Indexed { at, last } => {
            bar.set_length((last - done).max(0) as u64);
            bar.set_position((at - done).max(0) as u64);
        }
        CatchUp::Merging => {
            // No count to show: the bar makes way for a line that says what it waits for.
            bar.set_style(
                indicatif::ProgressStyle::with_template("{msg}").expect("the template is valid"),
            );
            bar.set_message("indexing sessions: merging the search segments into one");
            // A bar is drawn at most every 50 ms, so a change right after the last page's
            // would not show: it is drawn again every 100 ms until it is cleared.
            bar.enable_steady_tick(Duration::from_millis(100));
        }
    })?;
    bar.finish_and_clear();
    log::info!("session index up to date: {indexed} records indexed");
    Ok(())
}

/// The session `id` names in the archive: exit 1 when none, 2 when several.
pub(crate) fn find_session(
    archive: &mut Archive,
    id: &str,
    machine: &str,
) -> Result<query::Session> {
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

/// `--since`: a duration back from now, or a date or time.
pub(crate) fn parse_since(text: &str) -> std::result::Result<i64, String> {
    let now = crate::platform::time::now_ms();
    if let Ok(d) = humantime::parse_duration(text) {
        return Ok(now - d.as_millis() as i64);
    }
    let time = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_owned()
    };
    crate::agents::message::time_ms(&time).ok_or_else(|| {
        format!("{text:?} is neither a duration (90m, 12h, 2d, 1w) nor a date (2026-11-01) or time (2026-11-01T09:00:00Z)")
    })
}

/// Calls `write` on each session of `list`, each followed by its subagents (as `sessions
/// --json` and both faces' CSV list them). An error reading the subagents is `write`'s kind:
/// an I/O error, the index's error inside it.
pub(crate) fn each_with_subagents(
    archive: &mut Archive,
    list: &[crate::consumers::sessions::query::Session],
    mut write: impl FnMut(&crate::consumers::sessions::query::Session) -> std::io::Result<()>,
) -> std::io::Result<()> {
    for s in list {
        write(s)?;
        if s.subagents == 0 {
            continue;
        }
        let subagents = crate::consumers::sessions::query::subagents(archive, s);
        for sub in subagents.map_err(std::io::Error::other)? {
            write(&sub)?;
        }
    }
    Ok(())
}

/// Session `s`'s messages (then, with `subagents`, each subagent's after it), read from
/// `archive`, every secret replaced in them and in the sessions' fields when a `redactor` is
/// given: what `show` prints and a shared file holds. `Err` when the archive cannot be read.
pub(crate) fn conversations(
    archive: &mut Archive,
    s: &crate::consumers::sessions::query::Session,
    subagents: bool,
    redactor: Option<&crate::consumers::redact::Redactor>,
) -> Result<
    Vec<(
        crate::consumers::sessions::query::Session,
        Vec<crate::consumers::sessions::query::MessageRecord>,
    )>,
> {
    use crate::consumers::sessions::query;
    let mut sessions = vec![s.clone()];
    if subagents {
        sessions.extend(query::subagents(archive, s)?);
    }
    let mut read = Vec::with_capacity(sessions.len());
    for mut session in sessions {
        let mut messages = query::messages(archive, &session)?;
        if let Some(r) = redactor {
            session.redact(r);
            messages.iter_mut().for_each(|m| m.redact(r));
        }
        read.push((session, messages));
    }
    Ok(read)
}
