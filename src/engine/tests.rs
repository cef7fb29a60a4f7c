//! Unit tests of the sync pass, on real files in a temp directory and a temp archive.

use super::*;
use crate::agents::{builtin_roots, watch_roots};
use crate::archive::writer::ArchiveWriter;
use std::fs;

/// An engine over a temp directory, committing straight into a temp archive.
struct Setup {
    dir: tempfile::TempDir,
    roots: Vec<Root>,
    engine: Engine,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("watch");
        fs::create_dir(&root).unwrap();
        let engine = Setup::engine(dir.path());
        let roots = watch_roots(&[root], "**/*.jsonl").unwrap();
        Setup { dir, roots, engine }
    }

    fn engine(dir: &Path) -> Engine {
        let db = dir.join("a.db");
        let writer = ArchiveWriter::new(Archive::open(&db).unwrap(), None);
        let limits = ReadLimits {
            record_limit: 1 << 20,
            batch_bytes: 1 << 20,
        };
        Engine::new(
            Archive::open(&db).unwrap(),
            Box::new(writer),
            EngineOptions { limits },
        )
        .unwrap()
    }

    fn path(&self, name: &str) -> PathBuf {
        self.roots[0].path.join(name)
    }

    fn pass(&mut self) -> PassReport {
        self.engine.run_pass(&self.roots).unwrap()
    }

    fn only_source(&self) -> &SourceRow {
        let mut all = self.engine.sources.iter();
        let row = all.next().unwrap();
        assert!(all.next().is_none());
        row
    }
}

#[test]
fn a_pass_archives_complete_lines_holds_back_the_rest_and_skips_what_did_not_change() {
    let mut s = Setup::new();
    fs::write(s.path("a.jsonl"), b"{\"a\":1}\nnot json\n{\"b\"").unwrap();
    let report = s.pass();
    assert_eq!((report.opened, report.records, report.rejects), (1, 1, 1));
    assert_eq!(report.held_back.values().sum::<u64>(), 4);
    let src = s.only_source().clone();
    assert_eq!((src.cursor.position.offset, src.cursor.held_back), (17, 4));
    assert_eq!(src.cursor.held_back_prefix, b"{\"b\"");
    let report = s.pass();
    assert_eq!((report.opened, report.unchanged), (0, 1));
    // What the engine holds is what a new engine loads from the archive.
    let reloaded = Setup::engine(s.dir.path());
    assert_eq!(reloaded.sources.get(src.id), Some(&src));
}

#[test]
fn a_truncated_file_starts_a_new_generation_and_its_unfinished_line_is_a_reject() {
    let mut s = Setup::new();
    fs::write(s.path("a.jsonl"), b"{\"a\":1}\n{\"b\":2}\n{\"c\"").unwrap();
    s.pass();
    fs::write(s.path("a.jsonl"), b"{\"d\":4}\n").unwrap();
    let report = s.pass();
    assert_eq!(report.new_generations, 1);
    assert_eq!((report.records, report.rejects), (1, 1));
    let src = s.only_source();
    assert_eq!((src.generation, src.records, src.rejects), (1, 3, 1));
    assert_eq!(src.cursor.position.offset, 8);
}

/// `dir/home`, and the built-in watchers' roots with it as HOME.
fn home_roots(dir: &Path) -> (PathBuf, Vec<Root>) {
    let home = dir.join("home");
    let text = home.to_string_lossy().into_owned();
    let roots = builtin_roots(&|k| (k == "HOME").then(|| text.clone())).unwrap();
    (home, roots)
}

#[test]
fn another_snapshot_renamed_over_a_path_between_scan_and_open_is_that_source_moved() {
    // The scan saw chat s at its path; before the open, chat t was renamed over it. The
    // replanned work says "s's path, another inode", which must not make s go on with
    // t's file (t's messages under s): t's file is t, moved.
    let dir = tempfile::tempdir().unwrap();
    let (home, roots) = home_roots(dir.path());
    let chats = home.join(".gemini/tmp/p/chats");
    fs::create_dir_all(&chats).unwrap();
    let mut engine = Setup::engine(dir.path());
    let chat = |id: &str| format!(r#"{{"sessionId":"{id}","messages":[{{"id":"{id}-1"}}]}}"#);
    let (s, t) = (chats.join("session-s.json"), chats.join("session-t.json"));
    fs::write(&s, chat("s")).unwrap();
    fs::write(&t, chat("t")).unwrap();
    engine.run_pass(&roots).unwrap();
    let id_at = |engine: &Engine, p: &Path| {
        (engine.sources.iter())
            .find(|r| r.path == p && !r.gone)
            .unwrap()
            .id
    };
    let (s_id, t_id) = (id_at(&engine, &s), id_at(&engine, &t));
    fs::rename(&t, &s).unwrap();
    let root = roots.iter().position(|r| r.matches(&s)).unwrap();
    let meta = fs::symlink_metadata(&s).unwrap();
    let c = Candidate {
        path: s.clone(),
        meta,
        root,
    };
    let mut step = Step::Again(Box::new(work(c, Plan::PathMatch(s_id))));
    let first_scan = vec![false; roots.len()];
    while let Step::Again(w) = step {
        step = engine.step(*w, &first_scan, &roots).unwrap();
    }
    // s is still recorded at its path until a full pass finds it gone: t's row says it.
    assert_eq!(
        engine.sources.get(t_id).unwrap().path,
        s,
        "t moved to s's path"
    );
    let s_row = engine.sources.get(s_id).unwrap();
    assert_ne!(
        s_row.identity,
        Identity::of(&fs::symlink_metadata(&s).unwrap())
    );
    assert_eq!(
        s_row.records, 2,
        "s holds its own document and message only"
    );
}

#[test]
fn a_file_read_under_a_second_name_stays_at_the_path_its_source_records() {
    // A change seen only under a hard link (an event on that name alone): a snapshot
    // file, and a database with its sessions, stay where they are recorded.
    let dir = tempfile::tempdir().unwrap();
    let (home, roots) = home_roots(dir.path());
    let chats = home.join(".gemini/tmp/p/chats");
    let data = home.join(".local/share/opencode");
    fs::create_dir_all(&chats).unwrap();
    fs::create_dir_all(&data).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents/opencode/.local/share/opencode/opencode.db");
    fs::copy(fixture, data.join("opencode.db")).unwrap();
    let chat = chats.join("session-s.json");
    fs::write(&chat, r#"{"sessionId":"s","messages":[{"id":"s-1"}]}"#).unwrap();
    let mut engine = Setup::engine(dir.path());
    engine.run_pass(&roots).unwrap();
    let paths = |engine: &Engine| {
        let mut paths: Vec<PathBuf> = engine.sources.iter().map(|s| s.path.clone()).collect();
        paths.sort();
        paths
    };
    let before = paths(&engine);
    let (chat_link, db_link) = (chats.join("session-s2.json"), data.join("opencode-2.db"));
    fs::hard_link(&chat, &chat_link).unwrap();
    fs::hard_link(data.join("opencode.db"), &db_link).unwrap();
    fs::write(
        &chat_link,
        r#"{"sessionId":"s","messages":[{"id":"s-1"},{"id":"s-2"}]}"#,
    )
    .unwrap();
    let report = engine.sync_paths(&roots, vec![chat_link, db_link]).unwrap();
    assert_eq!(report.records, 1, "the chat's new message");
    assert_eq!(paths(&engine), before);
}

#[test]
fn a_source_whose_cursor_row_is_invalid_is_not_read_and_counted_as_an_error() {
    let mut s = Setup::new();
    fs::write(s.path("a.jsonl"), b"{\"a\":1}\n").unwrap();
    s.pass();
    let db = s.dir.path().join("a.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute("UPDATE cursors SET tail_len = 4096", [])
        .unwrap();
    drop(conn);
    s.engine = Setup::engine(s.dir.path());
    fs::write(s.path("a.jsonl"), b"{\"a\":1}\n{\"b\":2}\n").unwrap();
    let report = s.pass();
    assert_eq!(
        (report.records, report.errors, report.new_sources),
        (0, 1, 0)
    );
    assert!(s.only_source().invalid.is_some());
}
