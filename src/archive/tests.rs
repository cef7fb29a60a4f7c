//! Unit tests of the archive: migrations, the schema, and writes read back.

use super::open::MIGRATIONS;
use super::*;
use crate::domain::fingerprint::Identity;
use crate::domain::{Cursor, Record, Reject};

/// Two processes may open a new archive at once (a daemon creating it, a command run
/// beside it): one that read the schema version before the other migrated must not apply
/// a migration again.
#[test]
fn a_migration_applied_meanwhile_by_another_process_is_not_applied_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("archive.db");
    let mut stale = Archive::open(&path).unwrap();
    // As if this connection had read the version before the schema was made.
    stale.apply_migrations(0).unwrap();
    stale.apply_migrations(MIGRATIONS.len() as i64 - 1).unwrap();
    assert_eq!(stale.schema_version().unwrap(), MIGRATIONS.len() as i64);
}

/// The archive's schema as every migration leaves it, one statement per table, index,
/// view and trigger, ordered by kind and name.
fn current_schema(archive: &Archive) -> String {
    let mut stmt = (archive.conn)
        .prepare(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'
             ORDER BY type DESC, name",
        )
        .unwrap();
    let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
    let statements: Vec<String> = rows.map(|r| format!("{};\n", r.unwrap())).collect();
    statements.join("\n")
}

/// `schema_current.sql` is the one place to read the archive's schema: it must be what the
/// migrations make. After a new migration, write it again with
/// `TRANSCRIPT_SYNC_WRITE_SCHEMA=1 cargo test --lib schema_current`.
#[test]
fn schema_current_is_what_every_migration_makes() {
    let (_dir, archive) = archive();
    let made = format!(
        "-- The archive's schema after every migration (schema_v1.sql to schema_v{}.sql).\n\
         -- Written by the test schema_current_is_what_every_migration_makes; do not edit.\n\n{}",
        MIGRATIONS.len(),
        current_schema(&archive)
    );
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/archive/schema_current.sql");
    if std::env::var_os("TRANSCRIPT_SYNC_WRITE_SCHEMA").is_some() {
        std::fs::write(&file, &made).unwrap();
    }
    let committed = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        committed == made,
        "{} differs from the schema the migrations make; write it again with \
         TRANSCRIPT_SYNC_WRITE_SCHEMA=1 cargo test --lib schema_current",
        file.display()
    );
}

fn archive() -> (tempfile::TempDir, Archive) {
    let dir = tempfile::tempdir().unwrap();
    let archive = Archive::open(&dir.path().join("a.db")).unwrap();
    (dir, archive)
}

fn add_source(archive: &mut Archive, id: SourceId, path: &str) {
    let mut tx = Commit::default();
    tx.push(Op::InsertSource {
        id,
        identity: Identity {
            dev: 1,
            ino: id as u64,
        },
        path: path.into(),
        harness: "generic".into(),
        cursor: Cursor::default(),
    });
    archive.apply(&tx).unwrap();
}

fn apply(archive: &mut Archive, op: Op) {
    let mut tx = Commit::default();
    tx.push(op);
    archive.apply(&tx).unwrap();
}

fn pieces(archive: &Archive) -> Vec<(i64, Vec<u8>)> {
    let mut stmt = (archive.conn)
        .prepare("SELECT start, bytes FROM held_back ORDER BY source_id, start")
        .unwrap();
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    rows.map(Result::unwrap).collect()
}

fn raw(archive: &Archive, id: i64) -> Vec<u8> {
    let mut out = Vec::new();
    archive
        .write_reject_raw(id, &mut out)
        .unwrap()
        .unwrap()
        .unwrap();
    out
}

#[test]
fn held_back_bytes_that_grow_are_stored_as_pieces_and_rejected_whole() {
    let (_dir, mut archive) = archive();
    add_source(&mut archive, 1, "/t/a.jsonl");
    let put = |archive: &mut Archive, bytes: &[u8], grown| {
        let bytes = bytes.to_vec();
        apply(
            archive,
            Op::PutHeldBack {
                id: 1,
                offset: 8,
                bytes,
                grown,
            },
        );
    };
    put(&mut archive, b"{\"a\"", false);
    put(&mut archive, b"{\"a\":[1", true);
    put(&mut archive, b"{\"a\":[1", true);
    assert_eq!(
        pieces(&archive),
        [(0, b"{\"a\"".to_vec()), (4, b":[1".to_vec())],
        "a grown line adds a piece; an unchanged one adds nothing"
    );
    put(&mut archive, b"{\"a\"", true);
    assert_eq!(
        pieces(&archive),
        [(0, b"{\"a\"".to_vec())],
        "shorter: rewritten"
    );
    put(&mut archive, b"[[[", false);
    assert_eq!(
        pieces(&archive),
        [(0, b"[[[".to_vec())],
        "another line: rewritten"
    );
    put(&mut archive, b"[[[[[", true);
    let reject = |archive: &mut Archive| {
        let reason = "unfinished".to_owned();
        let op = Op::RejectHeldBack {
            id: 1,
            generation: 0,
            length: 9,
            reason,
        };
        apply(archive, op);
    };
    reject(&mut archive);
    assert!(pieces(&archive).is_empty(), "forgotten once rejected");
    let mut listed = Vec::new();
    (archive.rejects(None, |r| {
        listed.push(r);
        Ok(())
    }))
    .unwrap()
    .unwrap();
    assert_eq!(
        (listed[0].offset, listed[0].length, listed[0].kept),
        (8, 9, 5)
    );
    assert_eq!(raw(&archive, listed[0].id), b"[[[[[");
    assert_eq!(archive.sources().unwrap()[0].rejects, 1);
    reject(&mut archive);
    assert_eq!(
        archive.sources().unwrap()[0].rejects,
        1,
        "none kept: nothing recorded"
    );
}

#[test]
fn rejects_longer_than_a_value_are_written_in_place_and_read_back_whole() {
    let (_dir, mut archive) = archive();
    add_source(&mut archive, 1, "/t/a/s.jsonl");
    add_source(&mut archive, 2, "/t/b.jsonl");
    let long: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let reject = |raw: Vec<u8>| Reject {
        offset: 0,
        length: raw.len() as u64,
        reason: "invalid".into(),
        raw,
    };
    let rejects = vec![reject(long.clone())];
    apply(
        &mut archive,
        Op::Rejects {
            id: 1,
            generation: 0,
            rejects,
        },
    );
    let rejects = vec![reject(b"short".to_vec())];
    apply(
        &mut archive,
        Op::Rejects {
            id: 2,
            generation: 0,
            rejects,
        },
    );
    let mut under_a = Vec::new();
    let dir = Path::new("/t/a");
    (archive.rejects(Some(dir), |r| {
        under_a.push(r.id);
        Ok(())
    }))
    .unwrap()
    .unwrap();
    assert_eq!(under_a.len(), 1);
    assert!(raw(&archive, under_a[0]) == long);
    assert!(
        archive
            .write_reject_raw(99, &mut Vec::new())
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_catch_up_page_stops_at_its_row_limit_its_byte_budget_or_its_last_seq() {
    let (_dir, mut archive) = archive();
    add_source(&mut archive, 1, "/t/a.jsonl");
    let records = (0..5u64)
        .map(|i| Record {
            offset: i * 10,
            bytes: b"[1,2,3]".to_vec(),
        })
        .collect();
    let batch = RecordBatch {
        source: 1,
        harness: "generic".into(),
        path: "/t/a.jsonl".into(),
        generation: 0,
        read_ms: 0,
        records,
    };
    apply(&mut archive, Op::Records(batch));
    let seqs = |page: Vec<ExportRow>| page.iter().map(|r| r.seq).collect::<Vec<_>>();
    assert_eq!(
        seqs(archive.records_page(0, 5, 3, 1 << 20).unwrap()),
        [1, 2, 3]
    );
    assert_eq!(seqs(archive.records_page(1, 5, 10, 8).unwrap()), [2, 3]);
    assert_eq!(
        seqs(archive.records_page(1, 5, 10, 1).unwrap()),
        [2],
        "at least one"
    );
    assert_eq!(
        seqs(archive.records_page(2, 4, 10, 1 << 20).unwrap()),
        [3, 4]
    );
    assert_eq!(archive.last_seq().unwrap(), 5);
}

#[test]
fn a_cursor_row_that_cannot_be_a_cursor_makes_its_source_invalid_not_the_archive() {
    let (_dir, mut archive) = archive();
    add_source(&mut archive, 1, "/t/a.jsonl");
    add_source(&mut archive, 2, "/t/b.jsonl");
    (archive.conn)
        .execute("UPDATE cursors SET held_back = -1 WHERE source_id = 1", [])
        .unwrap();
    let rows = archive.sources().unwrap();
    let why = rows[0].invalid.as_deref().unwrap();
    assert_eq!(why, "held-back length is negative (-1)");
    assert_eq!(rows[0].path, Path::new("/t/a.jsonl"));
    assert!(rows[1].invalid.is_none());
}

/// A read command opens the archive to write (to migrate it) and checks its tables on that
/// connection: a database of another program, with a version of its own or none, is refused
/// before anything is written to it.
#[test]
fn opening_to_write_refuses_another_programs_database_and_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    for version in [0, 7] {
        let other = dir.path().join(format!("other-{version}.db"));
        let conn = rusqlite::Connection::open(&other).unwrap();
        conn.execute_batch(&format!(
            "CREATE TABLE mine (x); INSERT INTO mine VALUES (1); PRAGMA user_version = {version};"
        ))
        .unwrap();
        drop(conn);
        let before = std::fs::read(&other).unwrap();
        let refused = Archive::open_existing_to_write(&other).err();
        assert!(
            matches!(refused, Some(crate::error::Error::NotAnArchive { .. })),
            "version {version}: {refused:?}"
        );
        let after = std::fs::read(&other).unwrap();
        assert!(after == before, "version {version}: the file was changed");
        let wal = dir.path().join(format!("other-{version}.db-wal"));
        assert!(!wal.exists(), "version {version}: made WAL");
    }
}
