//! A person's marks on their sessions: a star, tags, a note (`marks` and `tags`, schema 11).
//! Kept in the archive because the session index is built again from records; a session is
//! named as the index names it, by machine, watcher and the agent's id.

use super::Archive;
use crate::error::Result;
use rusqlite::params;

/// A session's key in the marks: its machine, its watcher and the agent's id, as the
/// session index names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionKey {
    /// Its machine in this archive: 0 for this one.
    pub machine: i64,
    /// Its watcher.
    pub harness: String,
    /// The agent's id for it.
    pub session: String,
}

/// One change to a session's marks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MarkChange {
    /// Starred, or not.
    Star(bool),
    /// A tag added (once: adding it again changes nothing).
    Tag(String),
    /// A tag removed.
    Untag(String),
    /// The note written, or removed (`None`).
    Note(Option<String>),
}

/// The marks of one session.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Marks {
    /// Whether it is starred.
    pub starred: bool,
    /// Its tags, sorted.
    pub tags: Vec<String>,
    /// Its note.
    pub note: Option<String>,
}

/// Empty stand-ins for the two tables, for an archive of an earlier schema read without being
/// upgraded: the session queries read them, and such an archive has no marks.
const STAND_INS: &str = "
    CREATE TEMP TABLE IF NOT EXISTS marks (machine INTEGER, harness TEXT, session TEXT,
        starred INTEGER, note TEXT, changed_ms INTEGER);
    CREATE TEMP TABLE IF NOT EXISTS tags (machine INTEGER, harness TEXT, session TEXT,
        tag TEXT);";

impl Archive {
    /// Makes the marks readable on this connection, however old the archive's schema.
    pub(crate) fn marks_readable(&self) -> Result<()> {
        if self.has_table("marks")? {
            return Ok(());
        }
        self.db(self.conn.execute_batch(STAND_INS))
    }

    /// The marks of `session`.
    pub fn marks(&self, session: &SessionKey) -> Result<Marks> {
        self.marks_readable()?;
        let key = params![session.machine, session.harness, session.session];
        let found = self.rows(
            "SELECT starred, note FROM marks WHERE machine = ?1 AND harness = ?2 AND session = ?3",
            key,
            |r| Ok((r.get::<_, bool>(0)?, r.get::<_, Option<String>>(1)?)),
        )?;
        let (starred, note) = found.into_iter().next().unwrap_or_default();
        let tags = self.rows(
            "SELECT tag FROM tags WHERE machine = ?1 AND harness = ?2 AND session = ?3
             ORDER BY tag",
            key,
            |r| r.get(0),
        )?;
        Ok(Marks {
            starred,
            tags,
            note,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_of_an_earlier_schema_read_without_upgrading_has_no_marks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        drop(Archive::open(&path).unwrap());
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("DROP TABLE tags; DROP TABLE marks; PRAGMA user_version = 10;")
            .unwrap();
        drop(conn);
        let archive = Archive::open_existing(&path).unwrap();
        let session = SessionKey {
            machine: 0,
            harness: "codex".into(),
            session: "s".into(),
        };
        assert_eq!(archive.marks(&session).unwrap(), Marks::default());
    }
}
