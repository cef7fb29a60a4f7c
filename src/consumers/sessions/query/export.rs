//! Sessions as shipped elsewhere: the rows a sink sends for the sessions a range of records
//! touched.

use super::*;

/// A session as shipped elsewhere: the index's row, its models and its sources.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SessionExport {
    /// The watcher.
    pub harness: String,
    /// The agent's id for it.
    pub session: String,
    /// The parent session's id, for a subagent.
    pub parent: Option<String>,
    /// Its working directory.
    pub project: Option<String>,
    /// Its git branch.
    pub branch: Option<String>,
    /// The agent's title, else the first prompt.
    pub title: Option<String>,
    /// Its first and last record's times (Unix ms).
    pub started_ms: Option<i64>,
    /// See `started_ms`.
    pub last_ms: Option<i64>,
    /// Messages, each copy once.
    pub user_messages: i64,
    /// See `user_messages`.
    pub assistant_messages: i64,
    /// Compactions recorded.
    pub compactions: i64,
    /// Models that answered.
    pub models: Vec<String>,
    /// The archive's sources holding its records.
    pub sources: Vec<i64>,
    /// The project's git remote.
    pub git_remote: Option<String>,
}

impl SessionExport {
    /// Removes NUL characters from its text (which some stores refuse).
    pub(crate) fn strip_nul(&mut self) {
        let strip = |t: &mut String| t.retain(|c| c != '\0');
        for text in [
            &mut self.parent,
            &mut self.project,
            &mut self.branch,
            &mut self.title,
        ]
        .into_iter()
        .flatten()
        {
            strip(text);
        }
        strip(&mut self.session);
        self.models.iter_mut().for_each(strip);
    }

    /// Replaces any secret in its title (often the first prompt), project and branch; ids
    /// and model names are keys, left as they are.
    pub(crate) fn redact(&mut self, redactor: &Redactor) {
        redact_each(
            redactor,
            [&mut self.title, &mut self.project, &mut self.branch],
        );
    }
}

/// The sessions holding a record with `after < seq <= through`, as the index has them now.
pub(crate) fn touched_sessions(
    archive: &mut Archive,
    after: i64,
    through: i64,
) -> Result<Vec<SessionExport>> {
    let conn = archive.connection();
    let rows = touched(conn, after, through);
    archive.db(rows)
}

fn touched(conn: &Connection, after: i64, through: i64) -> rusqlite::Result<Vec<SessionExport>> {
    let mut stmt = conn.prepare(
        "WITH touched AS (
             SELECT DISTINCT ss.session FROM records r
             JOIN session_sources ss ON ss.source_id = r.source_id
             WHERE r.seq > ?1 AND r.seq <= ?2
         )
         SELECT se.harness, se.session, se.parent, se.project, se.branch,
                coalesce(se.agent_title, se.first_prompt), se.started_ms, se.last_ms,
                se.user_messages, se.assistant_messages, se.compactions,
                (SELECT group_concat(model, char(31)) FROM session_models m WHERE m.session = se.id),
                (SELECT group_concat(source_id) FROM session_sources s2 WHERE s2.session = se.id),
                se.git_remote
         FROM sessions se JOIN touched t ON t.session = se.id
         WHERE se.machine = 0
         ORDER BY se.id",
    )?;
    let list = |text: Option<String>, sep: char| -> Vec<String> {
        text.map(|t| t.split(sep).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let rows = stmt.query_map(params![after, through], |r| {
        Ok(SessionExport {
            harness: r.get(0)?,
            session: r.get(1)?,
            parent: r.get(2)?,
            project: r.get(3)?,
            branch: r.get(4)?,
            title: r.get(5)?,
            started_ms: r.get(6)?,
            last_ms: r.get(7)?,
            user_messages: r.get(8)?,
            assistant_messages: r.get(9)?,
            compactions: r.get(10)?,
            models: list(r.get(11)?, '\u{1f}'),
            sources: (list(r.get(12)?, ',').iter())
                .filter_map(|s| s.parse().ok())
                .collect(),
            git_remote: r.get(13)?,
        })
    })?;
    rows.collect()
}
