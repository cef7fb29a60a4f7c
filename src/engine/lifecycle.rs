//! What happens to a source over its life, as one value of one enum, applied in one place to
//! both the engine's in-memory sources and the commit that records it: the two cannot drift
//! apart, since neither is ever updated by hand.

use crate::archive::{Commit, Op, RecordBatch};
use crate::domain::fingerprint::Identity;
use crate::domain::{Cursor, HELD_BACK_PREFIX, Position, Record, Reject, SourceId, SourceRow};
use crate::engine::sources::Sources;
use crate::platform::time::now_ms;
use std::path::PathBuf;

/// One thing that happens to a source.
#[derive(Debug)]
pub(crate) enum Change {
    /// A new source, found at `row.path`, starting at `row.cursor`.
    Seeded {
        /// The new source, with its id.
        row: SourceRow,
        /// Where it starts and why, for its `seeded` event.
        detail: String,
        /// What became of a prefix mark on its identity.
        mark: MarkUse,
    },
    /// A batch was read: its records and rejects, the cursor past them and the bytes held
    /// back after it. `path` is where the file was read: a new path records a move, and a
    /// source that was gone is live again.
    BatchRead {
        /// Where the file was read.
        path: PathBuf,
        /// Its records, in file order.
        records: Vec<Record>,
        /// Its rejected lines.
        rejects: Vec<Reject>,
        /// The cursor past them (its held-back prefix is filled in here).
        cursor: Cursor,
        /// The bytes held back past the cursor, up to the record limit.
        held_back: Vec<u8>,
    },
    /// A state of a snapshot source (a file rewritten whole) was captured: the records of its
    /// new and changed entries, or the reject of a state that is not a document of messages,
    /// the cursor past them, and the state's bytes to keep unless it is the latest kept.
    Captured {
        /// Where the file was read.
        path: PathBuf,
        /// The records, in document order.
        records: Vec<Record>,
        /// The state, when it is not a document of messages.
        rejects: Vec<Reject>,
        /// The cursor past the records, with the state's fingerprint.
        cursor: Cursor,
        /// The state's bytes, when they are to be kept.
        snapshot: Option<Vec<u8>>,
        /// How many messages of the state before are no longer in the file.
        dropped: usize,
    },
    /// The same bytes under a new identity: an atomic save that only appended, or a device
    /// number that changed across a reboot.
    Continued {
        /// The new identity.
        identity: Identity,
        /// Where it was found.
        path: PathBuf,
        /// The identities and the offset where the markers matched.
        detail: String,
    },
    /// Truncated below its cursor or rewritten in place: a new generation starts at 0.
    NewGeneration {
        /// Where it was found.
        path: PathBuf,
        /// What changed, for the `generation_reset` event.
        detail: String,
        /// Why the old generation ended, for the reject of its held-back bytes.
        why: String,
    },
    /// Its file is gone, or another file took its path or inode; its records stay.
    Gone {
        /// `source_gone` or `replaced`.
        kind: &'static str,
        /// Why.
        why: String,
    },
    /// Found unchanged at a new path.
    Moved {
        /// The new path.
        path: PathBuf,
    },
    /// Its held-back bytes were overwritten or cut before their line ended.
    HeldBackDropped {
        /// Where it was found.
        path: PathBuf,
        /// What happened to them.
        reason: String,
    },
}

/// What a new source did with a prefix mark on its identity.
#[derive(Debug)]
pub(crate) enum MarkUse {
    /// There was none.
    None,
    /// It starts at the mark, which is used up.
    Used,
    /// The mark did not match the file (the reason), and is dropped.
    Rejected(String),
}

/// Applies `change` to source `id`: its row in `sources` and what records it in `tx`.
/// Returns how many rejects it recorded (the batch's, or the held-back bytes of an ended
/// generation).
pub(crate) fn apply(sources: &mut Sources, tx: &mut Commit, id: SourceId, change: Change) -> u64 {
    if let Change::Seeded { row, detail, mark } = change {
        seeded(sources, tx, row, &detail, mark);
        return 0;
    }
    let src = (sources.get(id).cloned()).expect("a source that changes is in the source table");
    let (row, rejects) = match change {
        Change::Seeded { .. } => unreachable!("a new source is seeded above"),
        Change::BatchRead {
            path,
            records,
            rejects,
            cursor,
            held_back,
        } => batch_read(tx, src, path, records, rejects, cursor, held_back),
        Change::Captured {
            path,
            records,
            rejects,
            cursor,
            snapshot,
            dropped,
        } => {
            if dropped > 0 {
                let detail =
                    format!("{dropped} messages no longer in the file; their records stay");
                tx.push(Op::event(Some(id), "snapshot_dropped", &path, &detail));
            }
            if let Some(bytes) = snapshot {
                tx.push(Op::Snapshot { id, bytes });
            }
            batch_read(tx, src, path, records, rejects, cursor, Vec::new())
        }
        Change::Continued {
            identity,
            path,
            detail,
        } => {
            tx.push(Op::event(Some(id), "continued", &path, &detail));
            (SourceRow { identity, ..src }, 0)
        }
        Change::NewGeneration { path, detail, why } => {
            let ended = reject_held_back(tx, &src, &format!("generation ended: {why}"));
            tx.push(Op::event(Some(id), "generation_reset", &path, &detail));
            let row = SourceRow {
                generation: src.generation + 1,
                path,
                gone: false,
                rejects: src.rejects + ended,
                cursor: Cursor::default(),
                ..src
            };
            (row, ended)
        }
        Change::Gone { kind, why } => {
            let ended = reject_held_back(tx, &src, &format!("generation ended: {why}"));
            tx.push(Op::event(Some(id), kind, &src.path, &why));
            let mut cursor = src.cursor.clone();
            if ended > 0 {
                // Recorded: a file that comes back is read again from its cursor, and what it
                // holds back then is held back anew.
                cursor = without_held_back(cursor);
            }
            let row = SourceRow {
                gone: true,
                rejects: src.rejects + ended,
                cursor,
                ..src
            };
            (row, ended)
        }
        Change::Moved { path } => {
            tx.push(Op::event(
                Some(id),
                "moved",
                &path,
                &format!("from {:?}", src.path),
            ));
            (SourceRow { path, ..src }, 0)
        }
        Change::HeldBackDropped { path, reason } => {
            let ended = reject_held_back(tx, &src, &reason);
            tx.push(Op::event(Some(id), "held_back_dropped", &path, &reason));
            let row = SourceRow {
                rejects: src.rejects + ended,
                cursor: without_held_back(src.cursor.clone()),
                ..src
            };
            (row, ended)
        }
    };
    let old = sources
        .get(id)
        .expect("the source read above is still in the table");
    record_row(tx, old, &row);
    sources.put(row);
    rejects
}

/// A new source: its row, its first cursor, and what became of a prefix mark.
fn seeded(sources: &mut Sources, tx: &mut Commit, row: SourceRow, detail: &str, mark: MarkUse) {
    tx.push(Op::InsertSource {
        id: row.id,
        identity: row.identity,
        path: row.path.clone(),
        harness: row.harness.clone(),
        cursor: row.cursor.clone(),
    });
    if let MarkUse::Rejected(why) = &mark {
        tx.push(Op::event(Some(row.id), "prefix_mismatch", &row.path, why));
    }
    if !matches!(mark, MarkUse::None) {
        tx.push(Op::RemovePrefixMark(row.identity));
    }
    tx.push(Op::event(Some(row.id), "seeded", &row.path, detail));
    sources.put(row);
}

/// The records and rejects of a batch, the cursor past them and the bytes held back.
fn batch_read(
    tx: &mut Commit,
    src: SourceRow,
    path: PathBuf,
    records: Vec<Record>,
    rejects: Vec<Reject>,
    mut cursor: Cursor,
    held_back: Vec<u8>,
) -> (SourceRow, u64) {
    let id = src.id;
    for r in &rejects {
        let detail = format!("offset={} length={} {}", r.offset, r.length, r.reason);
        tx.push(Op::event(Some(id), "reject", &path, &detail));
    }
    if src.gone {
        let detail = "found again, marker windows match";
        tx.push(Op::event(Some(id), "source_returned", &path, detail));
    }
    if path != src.path {
        tx.push(Op::event(
            Some(id),
            "moved",
            &path,
            &format!("from {:?}", src.path),
        ));
    }
    cursor.held_back_prefix = held_back[..held_back.len().min(HELD_BACK_PREFIX)].to_vec();
    let counts = (records.len() as u64, rejects.len() as u64);
    let read_ms = now_ms();
    tx.push(Op::Records(RecordBatch {
        source: id,
        harness: src.harness.clone(),
        path: path.clone(),
        generation: src.generation,
        read_ms,
        records,
    }));
    tx.push(Op::Rejects {
        id,
        generation: src.generation,
        rejects,
    });
    // Written whenever there are some, or were (to forget them): the archive adds only what
    // a line that grew has added, and a file whose last line is never finished is read again
    // only when it changes.
    if cursor.held_back > 0 || src.cursor.held_back > 0 {
        tx.push(Op::PutHeldBack {
            id,
            offset: cursor.position.offset,
            grown: held_back_grown(&src.cursor, &cursor.position, &held_back),
            bytes: held_back,
        });
    }
    let row = SourceRow {
        path,
        gone: false,
        last_archived_ms: if counts.0 > 0 {
            Some(read_ms)
        } else {
            src.last_archived_ms
        },
        records: src.records + counts.0,
        rejects: src.rejects + counts.1,
        cursor,
        ..src
    };
    (row, counts.1)
}

/// Adds what differs between a source's stored row and its new one: its identity, path,
/// generation or gone flag, and its cursor. The one place that turns a row into writes.
fn record_row(tx: &mut Commit, old: &SourceRow, new: &SourceRow) {
    let source_changed = (old.identity, &old.path, old.generation, old.gone)
        != (new.identity, &new.path, new.generation, new.gone);
    if source_changed {
        tx.push(Op::UpdateSource {
            id: new.id,
            identity: new.identity,
            path: new.path.clone(),
            generation: new.generation,
            gone: new.gone,
        });
    }
    if old.cursor != new.cursor {
        tx.push(Op::PutCursor {
            id: new.id,
            cursor: new.cursor.clone(),
        });
    }
}

/// True when held-back bytes that begin with `bytes`, at `at`, are `old`'s grown longer: the
/// same unfinished line, with more of it written since. Only the first 64 KiB are compared
/// (all the cursor keeps at hand), as the overwrite check does.
fn held_back_grown(old: &Cursor, at: &Position, bytes: &[u8]) -> bool {
    old.held_back > 0
        && old.position.offset == at.offset
        && bytes.starts_with(&old.held_back_prefix)
}

/// Records the held-back bytes of a generation that ends as a reject, all of them that the
/// archive keeps; returns how many rejects that is (0 or 1).
fn reject_held_back(tx: &mut Commit, src: &SourceRow, reason: &str) -> u64 {
    if src.cursor.held_back == 0 {
        return 0;
    }
    tx.push(Op::RejectHeldBack {
        id: src.id,
        generation: src.generation,
        length: src.cursor.held_back,
        reason: format!("incomplete record never completed; {reason}"),
    });
    1
}

/// `cursor` with its held-back bytes forgotten, and not taken for up to date, so that the
/// next look reads past it again.
fn without_held_back(mut cursor: Cursor) -> Cursor {
    cursor.held_back = 0;
    cursor.held_back_prefix.clear();
    cursor.fingerprint = None;
    cursor
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(offset: u64, held_back: u64, prefix: &[u8]) -> Cursor {
        Cursor {
            position: Position {
                offset,
                ..Position::default()
            },
            held_back,
            held_back_prefix: prefix.to_vec(),
            ..Cursor::default()
        }
    }

    /// Every change, applied to the in-memory sources and committed to a real archive: after
    /// each, the archive's rows read back equal the in-memory ones.
    #[test]
    fn the_archive_and_the_in_memory_sources_agree_after_every_change() {
        use crate::archive::Archive;
        use crate::domain::fingerprint::Window;
        let dir = tempfile::tempdir().unwrap();
        let mut archive = Archive::open(&dir.path().join("a.db")).unwrap();
        let mut sources = Sources::default();
        let identity = Identity { dev: 1, ino: 2 };
        let row = SourceRow::new(1, identity, "/t/a.jsonl".into(), "generic".into());
        let at = |offset: u64, held_back| Cursor {
            position: Position {
                offset,
                markers: crate::domain::fingerprint::Markers {
                    head: Window { len: 3, hash: 7 },
                    tail: Window {
                        len: 3,
                        hash: offset,
                    },
                },
            },
            held_back,
            ..Cursor::default()
        };
        let record = |offset| Record {
            offset,
            bytes: b"{}".to_vec(),
        };
        let reject = Reject {
            offset: 3,
            length: 1,
            reason: "invalid".into(),
            raw: b"x".to_vec(),
        };
        let changes = vec![
            Change::Seeded {
                row,
                detail: "offset=0".into(),
                mark: MarkUse::Used,
            },
            Change::BatchRead {
                path: "/t/a.jsonl".into(),
                records: vec![record(0)],
                rejects: vec![reject],
                cursor: at(5, 4),
                held_back: b"{\"b\"".to_vec(),
            },
            Change::BatchRead {
                path: "/t/moved.jsonl".into(),
                records: vec![],
                rejects: vec![],
                cursor: at(5, 6),
                held_back: b"{\"b\":1".to_vec(),
            },
            Change::Moved {
                path: "/t/again.jsonl".into(),
            },
            Change::Continued {
                identity: Identity { dev: 1, ino: 3 },
                path: "/t/again.jsonl".into(),
                detail: "1:2 -> 1:3".into(),
            },
            Change::HeldBackDropped {
                path: "/t/again.jsonl".into(),
                reason: "overwritten".into(),
            },
            Change::BatchRead {
                path: "/t/again.jsonl".into(),
                records: vec![record(5)],
                rejects: vec![],
                cursor: at(9, 2),
                held_back: b"[1".to_vec(),
            },
            Change::NewGeneration {
                path: "/t/again.jsonl".into(),
                detail: "generation 0 -> 1".into(),
                why: "truncated".into(),
            },
            Change::BatchRead {
                path: "/t/again.jsonl".into(),
                records: vec![record(0)],
                rejects: vec![],
                cursor: at(3, 2),
                held_back: b"[2".to_vec(),
            },
            Change::Gone {
                kind: "source_gone",
                why: "deleted".into(),
            },
        ];
        let mut rejects = 0;
        for change in changes {
            let what = format!("{change:?}");
            let mut tx = Commit::default();
            rejects += apply(&mut sources, &mut tx, 1, change);
            archive.apply(&tx).unwrap();
            let stored = archive.sources().unwrap().remove(0);
            assert_eq!(Some(&stored), sources.get(1), "after {what}");
        }
        assert!(sources.get(1).unwrap().last_archived_ms.is_some());
        let row = sources.get(1).unwrap();
        assert_eq!(
            (row.generation, row.gone, row.records, row.rejects),
            (1, true, 3, 4)
        );
        assert_eq!(rejects, 4, "one line, and three unfinished ones");
    }

    #[test]
    fn held_back_bytes_have_grown_when_they_extend_the_same_line() {
        let old = held(8, 5, b"{\"a\":");
        let at = |offset| Position {
            offset,
            ..Position::default()
        };
        assert!(held_back_grown(&old, &at(8), b"{\"a\":[1,"));
        assert!(held_back_grown(&old, &at(8), b"{\"a\":"), "the same");
        assert!(!held_back_grown(&old, &at(8), b"{\"b\":[1,"), "overwritten");
        assert!(
            !held_back_grown(&old, &at(20), b"{\"a\":[1,"),
            "another line"
        );
        assert!(
            !held_back_grown(&held(8, 0, b""), &at(8), b"{}"),
            "none before"
        );
    }
}
