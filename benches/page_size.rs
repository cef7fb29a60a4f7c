//! Page size of the archive: bulk backfill throughput and space against the cost of one small
//! commit, on the archive's own schema, for each candidate page size in the same run.
//!
//! `cargo bench --bench page_size` (set `PAGE_SIZE_MB` to change the backfill volume).

use rusqlite::{Connection, params};
use std::time::Instant;

const SCHEMA: &str = include_str!("../src/archive/schema_v1.sql");

fn open(dir: &std::path::Path, page: u32) -> Connection {
    let path = dir.join(format!("p{page}.db"));
    let conn = Connection::open(&path).unwrap();
    conn.pragma_update(None, "page_size", page).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    conn.execute_batch(SCHEMA).unwrap();
    conn.execute(
        "INSERT INTO sources (id, dev, ino, path, harness, generation, gone, created_ms)
         VALUES (1, 1, 1, x'2f74', 'bench', 0, 0, 0)",
        [],
    )
    .unwrap();
    conn
}

/// A record shaped like a transcript line of `len` bytes.
fn record(n: u64, len: usize) -> Vec<u8> {
    let head = format!("{{\"n\":{n},\"text\":\"");
    let mut r = head.into_bytes();
    r.resize(len - 2, b'x');
    r.extend_from_slice(b"\"}");
    r
}

fn commit(conn: &mut Connection, offset: &mut u64, n: &mut u64, recs: &[Vec<u8>]) {
    let tx = conn.transaction().unwrap();
    {
        let mut ins = tx
            .prepare_cached(
                "INSERT INTO records (source_id, generation, offset, record) VALUES (1, 0, ?1, ?2)",
            )
            .unwrap();
        for r in recs {
            ins.execute(params![*offset as i64, r]).unwrap();
            *offset += r.len() as u64 + 1;
            *n += 1;
        }
        tx.execute(
            "INSERT OR REPLACE INTO cursors (source_id, offset, head_len, head_hash, tail_len,
                 tail_hash, size, mtime_ns, ctime_ns, held_back, held_back_prefix, updated_ms)
             VALUES (1, ?1, 1024, 1, 1024, 2, ?1, 0, 0, 0, x'', 0)",
            params![*offset as i64],
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

fn main() {
    let mb: u64 = std::env::var("PAGE_SIZE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let dir = tempfile::tempdir_in(".").unwrap();
    println!(
        "backfill {mb} MB of 1-15 KiB records in ~8 MB batches; then 2,000 one-record (2 KB) commits"
    );
    println!(
        "{:>6} {:>14} {:>12} {:>12}",
        "page", "backfill MB/s", "commit p50", "commit p99"
    );
    for page in [4096u32, 8192, 16384, 32768, 65536] {
        let mut conn = open(dir.path(), page);
        let (mut offset, mut n) = (0u64, 0u64);
        // Sizes spread over 1..15 KiB (mean ~8 KB), as transcript lines are.
        let batch: Vec<Vec<u8>> = (0..1000u64)
            .map(|i| record(i, 1024 + (i * 7919 % 14) as usize * 1024))
            .collect();
        let total = mb << 20;
        let start = Instant::now();
        let mut written = 0u64;
        while written < total {
            commit(&mut conn, &mut offset, &mut n, &batch);
            written += batch.iter().map(|r| r.len() as u64).sum::<u64>();
        }
        let secs = start.elapsed().as_secs_f64();
        let small = [record(0, 2048)];
        let mut lat: Vec<f64> = (0..2000)
            .map(|_| {
                let t = Instant::now();
                commit(&mut conn, &mut offset, &mut n, &small);
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        lat.sort_by(f64::total_cmp);
        conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
            .unwrap();
        let file = std::fs::metadata(dir.path().join(format!("p{page}.db")))
            .unwrap()
            .len();
        println!(
            "{:>6} {:>14.0} {:>10.0}µs {:>10.0}µs {:>14.2}",
            page,
            written as f64 / secs / 1e6,
            lat[lat.len() / 2],
            lat[lat.len() * 99 / 100],
            file as f64 / written as f64
        );
    }
}
