//! A person's marks on a session (a star, tags, a note): checked, changed together, and read
//! back, for every face.

use crate::archive::marks::{MarkChange, Marks, SessionKey};
use crate::archive::{Archive, Commit, Op};
use crate::consumers::sessions::query::Session;
use crate::error::{Error, Result};

/// The longest tag, in characters.
const TAG_LIMIT: usize = 64;

/// `tag` if it is one word of letters, digits and `- _ . / :`, at most [`TAG_LIMIT`] long.
pub(crate) fn checked_tag(tag: &str) -> Result<String> {
    let allowed = |c: char| c.is_alphanumeric() || "-_./:".contains(c);
    let count = tag.chars().count();
    if count == 0 || count > TAG_LIMIT || !tag.chars().all(allowed) {
        return Err(Error::BadTag {
            tag: tag.to_owned(),
        });
    }
    Ok(tag.to_owned())
}

/// The key of `session` in the archive's marks.
pub(crate) fn session_key(session: &Session) -> SessionKey {
    SessionKey {
        machine: session.machine_id,
        harness: session.harness.clone(),
        session: session.id.clone(),
    }
}

/// Makes `session`'s marks `marks`, in one commit: the changes from its marks now.
pub(crate) fn replace(archive: &mut Archive, session: &Session, marks: Marks) -> Result<Marks> {
    let now = archive.marks(&session_key(session))?;
    let mut changes = vec![MarkChange::Star(marks.starred)];
    let gone = now.tags.iter().filter(|t| !marks.tags.contains(t));
    changes.extend(gone.cloned().map(MarkChange::Untag));
    changes.extend(marks.tags.into_iter().map(MarkChange::Tag));
    changes.push(MarkChange::Note(marks.note));
    change(archive, session, changes)
}

/// Applies `changes` to `session`'s marks in one commit (tags checked first: a bad one
/// changes nothing), and returns its marks after them.
pub(crate) fn change(
    archive: &mut Archive,
    session: &Session,
    changes: Vec<MarkChange>,
) -> Result<Marks> {
    for change in &changes {
        if let MarkChange::Tag(tag) | MarkChange::Untag(tag) = change {
            checked_tag(tag)?;
        }
    }
    let key = session_key(session);
    if !changes.is_empty() {
        let mut tx = Commit::default();
        for change in changes {
            let session = key.clone();
            tx.push(Op::Mark { session, change });
        }
        archive.apply(&tx)?;
    }
    archive.marks(&key)
}
