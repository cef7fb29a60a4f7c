//! A person's marks on their sessions: a star, tags, a note (`marks` and `tags`, schema 11),
//! and the order in which they changed (`mark_changes`, schema 12), which sinks follow. Kept
//! in the archive because the session index is built again from records; a session is named
//! as the index names it, by machine, watcher and the agent's id.

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

/// A session's marks as they are now, with their place in the order of changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarksNow {
    /// The seq of the session's last change of marks (`mark_changes`).
    pub seq: i64,
    /// The archive's last record seq when they changed.
    pub records_seq: i64,
    /// The session.
    pub key: SessionKey,
    /// Its marks.
    pub marks: Marks,
    /// When they last changed, in ms since the epoch.
    pub changed_ms: i64,
}

/// Empty stand-ins for the two tables, for an archive of an earlier schema read without being
/// upgraded: the session queries read them, and such an archive has no marks. They live in
/// an in-memory database of the connection's own (`mode=memory` makes it writable on a
/// read-only connection), attached: SQLite looks for a table named without its schema in
/// `temp`, then `main`, then the attached ones, so the archive's own tables, once another
/// process's migration has made them and the connection has read the archive since, are found
/// in their place. Stand-ins in `temp` would hide them for as long as the connection lives.
const STAND_INS: &str = "
    ATTACH 'file:no_marks?mode=memory' AS no_marks;
    CREATE TABLE no_marks.marks (machine INTEGER, harness TEXT, session TEXT,
        starred INTEGER, note TEXT, changed_ms INTEGER);
    CREATE TABLE no_marks.tags (machine INTEGER, harness TEXT, session TEXT, tag TEXT);";

impl Archive {
    /// Makes the marks readable on this connection, however old the archive's schema: called
    /// once, where the session index is attached.
    pub(crate) fn marks_readable(&self) -> Result<()> {
        if self.has_table("marks")? {
            return Ok(());
        }
        self.db(self.conn.execute_batch(STAND_INS))
    }

    /// The marks of `session`: on an archive of an earlier schema, once they are readable
    /// ([`Archive::marks_readable`]).
    pub fn marks(&self, session: &SessionKey) -> Result<Marks> {
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

    /// The marks of the sessions whose last change comes after seq `after`, in the order of
    /// their changes, `limit` at most: each session's marks as they are now.
    pub fn marks_changed_after(&self, after: i64, limit: usize) -> Result<Vec<MarksNow>> {
        // Tags are words without a space (`checked_tag`): a space joins them.
        let sql = "SELECT c.seq, c.records_seq, c.machine, c.harness, c.session,
                coalesce(m.starred, 0), m.note, coalesce(m.changed_ms, 0),
                (SELECT group_concat(t.tag, ' ') FROM tags t WHERE t.machine = c.machine
                 AND t.harness = c.harness AND t.session = c.session)
            FROM mark_changes c LEFT JOIN marks m ON m.machine = c.machine
                AND m.harness = c.harness AND m.session = c.session
            WHERE c.seq > ?1 ORDER BY c.seq LIMIT ?2";
        self.rows(sql, params![after, limit as i64], |r| {
            let tags: Option<String> = r.get(8)?;
            let mut tags: Vec<String> = tags
                .iter()
                .flat_map(|t| t.split(' '))
                .map(String::from)
                .collect();
            tags.sort();
            Ok(MarksNow {
                seq: r.get(0)?,
                records_seq: r.get(1)?,
                key: SessionKey {
                    machine: r.get(2)?,
                    harness: r.get(3)?,
                    session: r.get(4)?,
                },
                marks: Marks {
                    starred: r.get(5)?,
                    tags,
                    note: r.get(6)?,
                },
                changed_ms: r.get(7)?,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::{Commit, Op};

    fn key(session: &str) -> SessionKey {
        SessionKey {
            machine: 0,
            harness: "codex".into(),
            session: session.into(),
        }
    }

    fn mark(archive: &mut Archive, session: &str, changes: Vec<MarkChange>) {
        let mut tx = Commit::default();
        for change in changes {
            let session = key(session);
            tx.push(Op::Mark { session, change });
        }
        archive.apply(&tx).unwrap();
    }

    /// Sinks follow `mark_changes`: a session is there once, at its last change, with its
    /// marks as they are now (a removed star and tag, a cleared note included).
    #[test]
    fn changed_marks_come_in_the_order_of_each_sessions_last_change() {
        let dir = tempfile::tempdir().unwrap();
        let mut archive = Archive::open(&dir.path().join("a.db")).unwrap();
        let note = MarkChange::Note(Some("pool".into()));
        mark(&mut archive, "a", vec![MarkChange::Star(true), note]);
        mark(&mut archive, "b", vec![MarkChange::Tag("x".into())]);
        let first = archive.marks_changed_after(0, 10).unwrap();
        assert_eq!(first.len(), 2);
        assert_eq!((&first[0].key, first[0].marks.starred), (&key("a"), true));
        assert_eq!(first[1].marks.tags, ["x"]);
        // Changed in the other order now: b first, then a, then b again.
        mark(&mut archive, "b", vec![MarkChange::Tag("y".into())]);
        let unmarked = vec![MarkChange::Star(false), MarkChange::Note(None)];
        mark(&mut archive, "a", unmarked);
        mark(&mut archive, "b", vec![MarkChange::Untag("x".into())]);
        let after = archive.marks_changed_after(first[1].seq, 10).unwrap();
        let sessions: Vec<&str> = after.iter().map(|c| c.key.session.as_str()).collect();
        assert_eq!(
            sessions,
            ["a", "b"],
            "each session once, at its last change"
        );
        assert_eq!(after[0].marks, Marks::default());
        assert_eq!(after[1].marks.tags, ["y"]);
        assert_eq!(archive.marks_changed_after(0, 1).unwrap(), after[..1]);
    }

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
        archive.marks_readable().unwrap();
        assert_eq!(archive.marks(&key("s")).unwrap(), Marks::default());
    }

    /// A connection opened on an archive of an earlier schema (a web view, an MCP server)
    /// reads the marks once a daemon's migration has made their tables: the stand-ins do not
    /// hide them.
    #[test]
    fn marks_made_after_another_process_migrated_the_archive_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        drop(Archive::open(&path).unwrap());
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TABLE mark_changes; DROP TABLE tags; DROP TABLE marks;
             PRAGMA user_version = 10;",
        )
        .unwrap();
        drop(conn);
        let reader = Archive::open_existing(&path).unwrap();
        reader.marks_readable().unwrap();
        assert_eq!(reader.marks(&key("s")).unwrap(), Marks::default());
        let mut writer = Archive::open(&path).unwrap();
        mark(&mut writer, "s", vec![MarkChange::Star(true)]);
        // SQLite reads a database's schema again at the first statement that reads it after
        // the change: any read of the archive does (a session's records).
        reader.last_seq().unwrap();
        assert!(reader.marks(&key("s")).unwrap().starred);
    }
}
