//! What the archive keeps of each sink: its row (`sinks`, for `status`), its cursor (a
//! consumer named `sink:NAME`), its dead letters, the state its destination commits with its
//! cursor, and the events of its outages. A sink's cursor, dead letters and state move in one
//! transaction ([`Archive::record_shipped`]).

use super::queries::EXPORT_ROW;
use super::tx::insert_event;
use super::{Archive, ExportRow, record_consumer_done};
use crate::error::Result;
use crate::platform::time::now_ms;
use rusqlite::{OptionalExtension, TransactionBehavior, params};

/// A sink as the archive knows it (`sinks`, its consumer row, its dead letters).
#[derive(Debug)]
pub struct SinkRow {
    /// Its name.
    pub name: String,
    /// `postgres`, `http` or `mirror`.
    pub kind: String,
    /// Where to (never with a password).
    pub target: String,
    /// The last `seq` it shipped.
    pub seq: i64,
    /// When a delivery last succeeded.
    pub last_ok_ms: Option<i64>,
    /// When it last had shipped everything committed before it.
    pub caught_up_ms: Option<i64>,
    /// The last failure's message.
    pub last_error: Option<String>,
    /// When that was.
    pub last_error_ms: Option<i64>,
    /// Since when deliveries fail, while they do.
    pub failing_since_ms: Option<i64>,
    /// Records in `dead_letters`.
    pub dead_letters: i64,
}

/// What a sink's consumer name starts with: the sink's name follows.
const SINK_CONSUMER: &str = "sink:";

/// The consumer name under which sink `name` keeps its cursor.
pub(crate) fn sink_consumer(name: &str) -> String {
    format!("{SINK_CONSUMER}{name}")
}

/// A record a sink's destination refused for good, kept with the destination's answer.
#[derive(Debug, Clone)]
pub struct DeadLetter {
    /// The record's source.
    pub source: i64,
    /// Its generation.
    pub generation: i64,
    /// Its offset.
    pub offset: u64,
    /// Its seq.
    pub seq: i64,
    /// What the destination said.
    pub answer: String,
}

/// What one commit of a sink records, together: its cursor, the batch's dead letters, the
/// destination's state, and the sink's row for `status`.
pub struct Shipped<'a> {
    /// The sink's name.
    pub name: &'a str,
    /// The last seq shipped.
    pub seq: i64,
    /// The batch's records refused for good.
    pub dead: &'a [DeadLetter],
    /// The destination's state, (key, value).
    pub state: &'a [(String, String)],
    /// Whether the sink has now shipped everything committed before it.
    pub caught_up: bool,
}

impl Archive {
    /// Every sink that ever ran on this archive, by name, with its cursor and dead letters.
    pub fn sink_rows(&self) -> Result<Vec<SinkRow>> {
        // An archive of an earlier schema, opened without upgrading it, has no sinks yet.
        if !self.has_table("sinks")? {
            return Ok(Vec::new());
        }
        let sql = "SELECT s.name, s.kind, s.target, coalesce(c.seq, 0), s.last_ok_ms,
                    s.caught_up_ms, s.last_error, s.last_error_ms, s.failing_since_ms,
                    (SELECT count(*) FROM dead_letters d WHERE d.sink = s.name)
             FROM sinks s LEFT JOIN consumers c ON c.name = ?1 || s.name
             ORDER BY s.name";
        self.rows(sql, [SINK_CONSUMER], |r| {
            Ok(SinkRow {
                name: r.get(0)?,
                kind: r.get(1)?,
                target: r.get(2)?,
                seq: r.get(3)?,
                last_ok_ms: r.get(4)?,
                caught_up_ms: r.get(5)?,
                last_error: r.get(6)?,
                last_error_ms: r.get(7)?,
                failing_since_ms: r.get(8)?,
                dead_letters: r.get(9)?,
            })
        })
    }

    /// The dead letters of sink `name`, oldest first, each with its id and its record.
    pub fn dead_letters(&self, name: &str) -> Result<Vec<(i64, ExportRow)>> {
        let sql = EXPORT_ROW.replacen("SELECT ", "SELECT d.id, ", 1);
        let mut stmt = self.db(self.conn.prepare(&format!(
            "{sql} JOIN dead_letters d ON d.source_id = r.source_id
             AND d.generation = r.generation AND d.offset = r.offset
             WHERE d.sink = ?1 ORDER BY r.seq"
        )))?;
        let records = self.records_reader();
        let rows = stmt.query_map([name], |r| {
            let id: i64 = r.get(0)?;
            Ok((id, records.export_row(r, 1)?))
        });
        self.db(rows.and_then(|r| r.collect()))
    }

    /// Calls `each` with every (key, value) that sink `name` committed with its cursor.
    pub fn sink_state(&self, name: &str, mut each: impl FnMut(&str, &str)) -> Result<()> {
        let mut stmt = self
            .db((self.conn).prepare_cached("SELECT key, value FROM sink_state WHERE sink = ?1"))?;
        let mut rows = self.db(stmt.query([name]))?;
        while let Some(r) = self.db(rows.next())? {
            let (key, value): (String, String) =
                self.db(r.get(0).and_then(|k| Ok((k, r.get(1)?))))?;
            each(&key, &value);
        }
        Ok(())
    }

    /// Makes or updates sink `name`'s row; `Ok` holds the target it had before, if it had a
    /// row.
    pub fn register_sink(
        &mut self,
        name: &str,
        kind: &str,
        target: &str,
    ) -> Result<Option<String>> {
        let before = (self.conn)
            .query_row("SELECT target FROM sinks WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional();
        let before = self.db(before)?;
        let registered = self.conn.execute(
            "INSERT INTO sinks (name, kind, target) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO UPDATE SET kind = ?2, target = ?3",
            params![name, kind, target],
        );
        self.db(registered).map(|_| before)
    }

    /// Records an event about sink `name` in the archive's events (`sink-failing`,
    /// `sink-recovered`, `sink-retargeted`).
    pub fn sink_event(&mut self, name: &str, kind: &str, detail: &str) -> Result<()> {
        let path = sink_consumer(name).into_bytes();
        let noted = insert_event(&self.conn, None, kind, &path, detail);
        self.db(noted)
    }

    /// Keeps a failure of sink `name` for `status`; the first of an outage is an event too.
    pub fn note_sink_failure(&mut self, name: &str, message: &str, first: bool) -> Result<()> {
        let noted = self.conn.execute(
            "UPDATE sinks SET last_error = ?2, last_error_ms = ?3,
             failing_since_ms = coalesce(failing_since_ms, ?3) WHERE name = ?1",
            params![name, message, now_ms()],
        );
        self.db(noted)?;
        match first {
            true => self.sink_event(name, "sink-failing", message),
            false => Ok(()),
        }
    }

    /// Moves sink `s.name`'s cursor to `s.seq` together with the batch's dead letters, the
    /// destination's state and the sink's row, in one transaction: `Ok` once it is committed.
    pub fn record_shipped(&mut self, s: &Shipped) -> Result<()> {
        let done = (self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate))
        .and_then(|tx| write_shipped(&tx, s).and_then(|()| tx.commit()));
        self.db(done)
    }

    /// Sets one key of sink `name`'s state, outside a commit of its cursor.
    pub fn set_sink_state(&mut self, name: &str, key: &str, value: &str) -> Result<()> {
        let set = put_sink_state(&self.conn, name, key, value);
        self.db(set)
    }

    /// Removes dead letter `id`, delivered at last.
    pub fn remove_dead_letter(&mut self, id: i64) -> Result<()> {
        let removed = (self.conn).execute("DELETE FROM dead_letters WHERE id = ?1", [id]);
        self.db(removed).map(drop)
    }

    /// Keeps dead letter `id` with the destination's new `answer`.
    pub fn refused_again(&mut self, id: i64, answer: &str) -> Result<()> {
        let noted = self.conn.execute(
            "UPDATE dead_letters SET answer = ?2, at_ms = ?3 WHERE id = ?1",
            params![id, answer, now_ms()],
        );
        self.db(noted).map(drop)
    }
}

fn write_shipped(tx: &rusqlite::Transaction, s: &Shipped) -> rusqlite::Result<()> {
    record_consumer_done(tx, &sink_consumer(s.name), s.seq)?;
    let now = now_ms();
    for d in s.dead {
        tx.execute(
            "INSERT OR REPLACE INTO dead_letters
             (sink, source_id, generation, offset, seq, answer, at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                s.name,
                d.source,
                d.generation,
                d.offset as i64,
                d.seq,
                d.answer,
                now
            ],
        )?;
    }
    for (key, value) in s.state {
        put_sink_state(tx, s.name, key, value)?;
    }
    tx.execute(
        "UPDATE sinks SET last_ok_ms = ?2, failing_since_ms = NULL,
         caught_up_ms = CASE WHEN ?3 THEN ?2 ELSE caught_up_ms END WHERE name = ?1",
        params![s.name, now, s.caught_up],
    )
    .map(drop)
}

fn put_sink_state(
    conn: &rusqlite::Connection,
    name: &str,
    key: &str,
    value: &str,
) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT OR REPLACE INTO sink_state (sink, key, value) VALUES (?1, ?2, ?3)",
        params![name, key, value],
    )
    .map(drop)
}
