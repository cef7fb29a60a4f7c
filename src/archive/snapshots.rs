//! The states of snapshot sources (table `snapshots`, schema_v10.sql): each distinct state of
//! a file its agent rewrites whole, kept once. The latest state of a source is one zstd frame
//! of its bytes; when a new one comes, the one before is stored again as a frame made with
//! the new one as its prefix (zstd's "patch from"), which holds only what differs. Reading
//! the latest state is one decompression; an earlier one is read back from the latest, one
//! state at a time.

use crate::domain::SourceId;
use crate::platform::time::now_ms;
use rusqlite::{Connection, OptionalExtension, params};
use xxhash_rust::xxh3::xxh3_128;
use zstd::zstd_safe::{CCtx, CParameter, DCtx, DParameter};

/// zstd's level for states: as for records (codec.rs).
const LEVEL: i32 = 3;

/// One stored state of a source.
#[cfg(test)]
#[derive(Clone, Debug, PartialEq, Eq)]
struct SnapshotRow {
    /// Its id (ascending in the order captured).
    pub id: i64,
    /// When it was captured (Unix ms).
    pub taken_ms: i64,
    /// Its length in bytes.
    pub size: u64,
    /// What storing it takes.
    pub stored: u64,
}

/// Stores `bytes` as source `source`'s latest state, unless they are its latest state
/// already; true when stored. The state before it is stored again as a difference from it.
pub(crate) fn store(conn: &Connection, source: SourceId, bytes: &[u8]) -> rusqlite::Result<bool> {
    let hash = xxh3_128(bytes).to_be_bytes();
    let latest: Option<(i64, i64, Vec<u8>, Vec<u8>)> = conn
        .query_row(
            "SELECT id, size, hash, bytes FROM snapshots
             WHERE source_id = ?1 AND base IS NULL ORDER BY id DESC LIMIT 1",
            [source],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    if latest.as_ref().is_some_and(|l| l.2 == hash) {
        return Ok(false);
    }
    let whole = compress(bytes, &[])?;
    conn.execute(
        "INSERT INTO snapshots (source_id, taken_ms, size, hash, bytes)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![source, now_ms(), bytes.len() as i64, &hash[..], whole],
    )?;
    let id = conn.last_insert_rowid();
    if let Some((before, size, _, frame)) = latest {
        let old = decompress(&frame, size as usize, &[])?;
        let delta = compress(&old, bytes)?;
        conn.execute(
            "UPDATE snapshots SET base = ?2, bytes = ?3 WHERE id = ?1",
            params![before, id, delta],
        )?;
    }
    Ok(true)
}

/// The states of source `source`, oldest first.
#[cfg(test)]
fn list(conn: &Connection, source: SourceId) -> rusqlite::Result<Vec<SnapshotRow>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, taken_ms, size, length(bytes) FROM snapshots WHERE source_id = ?1 ORDER BY id",
    )?;
    let rows = stmt.query_map([source], |r| {
        Ok(SnapshotRow {
            id: r.get(0)?,
            taken_ms: r.get(1)?,
            size: r.get::<_, i64>(2)? as u64,
            stored: r.get::<_, i64>(3)? as u64,
        })
    })?;
    rows.collect()
}

/// The bytes of state `id`: the latest state's frame, then each one before it back to `id`
/// made from the one after it.
pub(crate) fn bytes(conn: &Connection, id: i64) -> rusqlite::Result<Vec<u8>> {
    let mut chain = Vec::new();
    let mut at = Some(id);
    while let Some(this) = at {
        let (size, base, frame): (i64, Option<i64>, Vec<u8>) = conn.query_row(
            "SELECT size, base, bytes FROM snapshots WHERE id = ?1",
            [this],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        chain.push((size as usize, frame));
        at = base;
    }
    let mut state = Vec::new();
    for (size, frame) in chain.into_iter().rev() {
        state = decompress(&frame, size, &state)?;
    }
    Ok(state)
}

/// The latest state of source `source`, if it has one.
pub(crate) fn latest(conn: &Connection, source: SourceId) -> rusqlite::Result<Option<Vec<u8>>> {
    let id: Option<i64> = conn
        .query_row(
            "SELECT max(id) FROM snapshots WHERE source_id = ?1",
            [source],
            |r| r.get(0),
        )
        .optional()?
        .flatten();
    id.map(|id| bytes(conn, id)).transpose()
}

/// The window a frame of `len` bytes made with a prefix of `prefix` bytes needs: both, so
/// that every match in the prefix is in reach.
fn window_log(len: usize) -> u32 {
    (len.max(1 << 10).next_power_of_two().trailing_zeros()).clamp(10, 30)
}

fn compress(bytes: &[u8], prefix: &[u8]) -> rusqlite::Result<Vec<u8>> {
    let failed = |why: &'static str| {
        let e = std::io::Error::other(format!("cannot compress a snapshot: {why}"));
        rusqlite::Error::ToSqlConversionFailure(Box::new(e))
    };
    let mut cctx = CCtx::create();
    let log = window_log(bytes.len() + prefix.len());
    let set = |c: &mut CCtx, p| c.set_parameter(p).map(drop);
    set(&mut cctx, CParameter::CompressionLevel(LEVEL)).map_err(|_| failed("level"))?;
    set(&mut cctx, CParameter::WindowLog(log)).map_err(|_| failed("window"))?;
    if !prefix.is_empty() {
        set(&mut cctx, CParameter::EnableLongDistanceMatching(true)).map_err(|_| failed("ldm"))?;
        cctx.ref_prefix(prefix).map_err(|_| failed("prefix"))?;
    }
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(bytes.len()));
    cctx.compress2(&mut out, bytes)
        .map_err(|_| failed("frame"))?;
    Ok(out)
}

fn decompress(frame: &[u8], size: usize, prefix: &[u8]) -> rusqlite::Result<Vec<u8>> {
    let failed = |why: String| {
        let e = std::io::Error::other(format!("a stored snapshot cannot be read: {why}"));
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Blob, Box::new(e))
    };
    let mut dctx = DCtx::create();
    let log = window_log(size + prefix.len());
    (dctx.set_parameter(DParameter::WindowLogMax(log))).map_err(|_| failed("window".into()))?;
    if !prefix.is_empty() {
        dctx.ref_prefix(prefix)
            .map_err(|_| failed("prefix".into()))?;
    }
    let mut out = Vec::with_capacity(size);
    let n = (dctx.decompress(&mut out, frame))
        .map_err(|code| failed(zstd::zstd_safe::get_error_name(code).to_owned()))?;
    if n != size {
        return Err(failed(format!("{n} bytes where {size} were stored")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE sources (id INTEGER PRIMARY KEY);
             INSERT INTO sources VALUES (1), (2);",
        )
        .unwrap();
        conn.execute_batch(include_str!("schema_v10.sql")).unwrap();
        conn
    }

    fn chat(messages: usize) -> Vec<u8> {
        let mut doc = String::from("{\"messages\": [\n");
        for i in 0..messages {
            let text = format!("message {i} about {} things", i * 7919 % 1013);
            doc.push_str(&format!(
                "  {{\"id\": \"m{i}\", \"content\": \"{text}\"}},\n"
            ));
        }
        doc.push_str("  {}\n]}\n");
        doc.into_bytes()
    }

    #[test]
    fn every_state_reads_back_and_an_earlier_one_costs_what_differs() {
        let conn = db();
        let states: Vec<Vec<u8>> = [2000, 2001, 2002, 1500].map(chat).into();
        for s in &states {
            assert!(store(&conn, 1, s).unwrap());
        }
        // The same bytes again: nothing stored.
        assert!(!store(&conn, 1, &states[3]).unwrap());
        assert!(store(&conn, 2, &states[0]).unwrap());
        let rows = list(&conn, 1).unwrap();
        assert_eq!(rows.len(), 4);
        for (row, state) in rows.iter().zip(&states) {
            assert_eq!(&bytes(&conn, row.id).unwrap(), state);
        }
        assert_eq!(latest(&conn, 1).unwrap().as_ref(), states.last());
        assert_eq!(latest(&conn, 2).unwrap().as_ref(), Some(&states[0]));
        // A state one message away from the next is stored in a few dozen bytes, not again.
        assert!(rows[0].stored < 200, "{rows:?}");
        assert!(rows[1].stored < 200, "{rows:?}");
        assert!(rows[3].stored > 1000, "{rows:?}");
    }
}
