//! `mark`: star a session, tag it, write a note on it, or print its marks.

use super::args::MarkArgs;
use super::{stdout_result, write_json_line};
use crate::archive::marks::{MarkChange, Marks};
use crate::consumers::sessions::query::Session;
use crate::error::Result;
use crate::history::display::printable;
use crate::history::{find_session, indexed_archive, marks};
use std::io::{self, Write};
use std::path::Path;

/// Applies the changes `args` asks for to the session it names, then prints its marks.
pub(super) fn mark(args: &MarkArgs, db: &Path) -> Result<()> {
    let mut archive = indexed_archive(db)?;
    let session = find_session(&mut archive, &args.session, &args.machine)?;
    let now = marks::change(&mut archive, &session, changes(args))?;
    let mut out = io::stdout().lock();
    let written = if args.json {
        write_json_line(&mut out, &now)
    } else {
        write_marks(&mut out, &session, &now)
    };
    stdout_result(written.and_then(|()| out.flush()))
}

/// The changes, in the order the options are listed in `--help`.
fn changes(args: &MarkArgs) -> Vec<MarkChange> {
    let mut changes = Vec::new();
    if args.star || args.unstar {
        changes.push(MarkChange::Star(args.star));
    }
    changes.extend(args.tag.iter().cloned().map(MarkChange::Tag));
    changes.extend(args.untag.iter().cloned().map(MarkChange::Untag));
    if args.note.is_some() || args.clear_note {
        changes.push(MarkChange::Note(args.note.clone()));
    }
    changes
}

/// The marks as text; what an agent wrote (the id, the project) and the note are printed
/// with no control character.
fn write_marks(out: &mut impl Write, session: &Session, marks: &Marks) -> io::Result<()> {
    let project = printable(session.project.as_deref().unwrap_or("-"));
    let id = printable(&session.id);
    writeln!(out, "{id} ({}, {project})", session.harness)?;
    writeln!(out, "starred: {}", if marks.starred { "yes" } else { "no" })?;
    let tags = marks.tags.join(" ");
    writeln!(out, "tags: {}", if tags.is_empty() { "-" } else { &tags })?;
    let note = printable(marks.note.as_deref().unwrap_or("-"));
    writeln!(out, "note: {note}")
}
