//! The bare FTS5 baseline of `benches/index` (`bare_fts`), built the same way, then queried.

use crate::report::Measured;
use crate::{Probe, Result, Search};
use rusqlite::{Connection, params};
use std::path::Path;
use std::time::Instant;

/// Rows per transaction, as in `benches/index`.
const TRANSACTION: usize = 20_000;

/// The database file in an index directory.
fn db(dir: &Path) -> std::path::PathBuf {
    dir.join("fts5.db")
}

/// Builds a contentless FTS5 table of the session index's tokenizer in `dir` from `texts`,
/// rowid = message number, in transactions of [`TRANSACTION`] rows on one connection. The
/// time is insert + the last commit; the size is the database and its WAL after a checkpoint.
pub fn build(dir: &Path, texts: &[String]) -> Result<Measured> {
    let mut conn = Connection::open(db(dir))?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
         CREATE VIRTUAL TABLE t USING fts5 (body, content = '',
             tokenize = 'unicode61 remove_diacritics 2');",
    )?;
    let start = Instant::now();
    for (n, chunk) in texts.chunks(TRANSACTION).enumerate() {
        let tx = conn.transaction()?;
        {
            let mut insert = tx.prepare_cached("INSERT INTO t (rowid, body) VALUES (?1, ?2)")?;
            for (i, text) in chunk.iter().enumerate() {
                let rowid = (n * TRANSACTION + i + 1) as i64;
                insert.execute(params![rowid, text])?;
            }
        }
        tx.commit()?;
    }
    let secs = start.elapsed().as_secs_f64();
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    let size = |suffix: &str| {
        let path = format!("{}{suffix}", db(dir).display());
        std::fs::metadata(path).map_or(0, |m| m.len())
    };
    Ok(Measured {
        secs,
        bytes: size("") + size("-wal"),
        segments: None,
    })
}

/// A built FTS5 table, open for queries.
pub struct Fts5 {
    conn: Connection,
}

impl Fts5 {
    pub fn open(dir: &Path) -> Result<Fts5> {
        Ok(Fts5 {
            conn: Connection::open(db(dir))?,
        })
    }
}

impl Search for Fts5 {
    fn count(&self, probe: &Probe) -> Result<u64> {
        let sql = "SELECT count(*) FROM t WHERE t MATCH ?1";
        let mut count = self.conn.prepare_cached(sql)?;
        Ok(count.query_row([probe.fts5], |r| r.get::<_, i64>(0))? as u64)
    }

    fn top(&self, probe: &Probe) -> Result<Vec<u64>> {
        let sql = "SELECT rowid FROM t WHERE t MATCH ?1 ORDER BY rank LIMIT 20";
        let mut top = self.conn.prepare_cached(sql)?;
        let ids = top.query_map([probe.fts5], |r| Ok(r.get::<_, i64>(0)? as u64))?;
        Ok(ids.collect::<rusqlite::Result<_>>()?)
    }
}
