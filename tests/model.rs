//! A model-based property test of the engine: random appends (cut anywhere), truncations,
//! rewrites in place, atomic replacements and restarts on a real file and a real archive,
//! checked after every pass against an in-memory model: nothing lost, nothing duplicated.

use proptest::prelude::*;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use transcript_sync::Archive;
use transcript_sync::{ArchiveWriter, Engine, EngineOptions, ReadLimits, Root, watch_roots};

#[derive(Clone, Debug)]
enum Action {
    /// Append the next `n` bytes of the record stream (often ending mid-record).
    Append(usize),
    /// Truncate to `fraction` of the current size (per mille).
    Truncate(u16),
    /// Rewrite every record in place, same length, other content.
    Rewrite,
    /// Atomically replace the file with the same bytes plus `n` more of the stream.
    ReplaceAppended(usize),
    /// Atomically replace the file with unrelated records.
    ReplaceUnrelated(usize),
    /// Drop the engine and open the archive again.
    Restart,
    /// Run a pass.
    Sync,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        6 => (1usize..120).prop_map(Action::Append),
        1 => (0u16..1000).prop_map(Action::Truncate),
        1 => Just(Action::Rewrite),
        1 => (0usize..120).prop_map(Action::ReplaceAppended),
        1 => (1usize..4).prop_map(Action::ReplaceUnrelated),
        1 => Just(Action::Restart),
        4 => Just(Action::Sync),
    ]
}

/// What was written, and what the archive must hold.
struct Model {
    content: Vec<u8>,
    /// The bytes the current group archived up to, as they were at the last pass.
    archived_prefix: Vec<u8>,
    letter: u8,
    stream: Vec<u8>,
    stream_pos: usize,
    next_n: u64,
    /// Records of finished groups (source, generation), in order.
    finished: Vec<Vec<String>>,
    /// Records of the current group (a group left empty is not in the archive).
    current: Vec<String>,
}

impl Model {
    fn new() -> Model {
        Model {
            content: Vec::new(),
            archived_prefix: Vec::new(),
            letter: b'a',
            stream: Vec::new(),
            stream_pos: 0,
            next_n: 0,
            finished: Vec::new(),
            current: Vec::new(),
        }
    }

    fn take_stream(&mut self, n: usize) -> Vec<u8> {
        while self.stream.len() < self.stream_pos + n {
            let rec = format!(
                "{{\"g\":\"{}\",\"n\":{}}}\n",
                self.letter as char, self.next_n
            );
            self.next_n += 1;
            self.stream.extend_from_slice(rec.as_bytes());
        }
        let out = self.stream[self.stream_pos..self.stream_pos + n].to_vec();
        self.stream_pos += n;
        out
    }

    /// After a pass: if the bytes already archived are no longer the file's first bytes
    /// (truncated, rewritten, replaced), that group is final and a new one starts; either
    /// way every complete, valid line of the file is now archived in the current group.
    fn synced(&mut self) {
        if !self.content.starts_with(&self.archived_prefix) {
            let done = std::mem::take(&mut self.current);
            if !done.is_empty() {
                self.finished.push(done);
            }
        }
        self.current = complete_records(&self.content);
        self.archived_prefix = self.content[..complete_len(&self.content)].to_vec();
    }

    fn expected(&self) -> Vec<Vec<String>> {
        let mut all = self.finished.clone();
        if !self.current.is_empty() {
            all.push(self.current.clone());
        }
        all
    }
}

fn complete_records(bytes: &[u8]) -> Vec<String> {
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes[..end]
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .filter(|l| serde_json::from_slice::<serde_json::Value>(l).is_ok())
        .map(|l| String::from_utf8(l.to_vec()).unwrap())
        .collect()
}

struct World {
    _dir: tempfile::TempDir,
    file: PathBuf,
    db: PathBuf,
    roots: Vec<Root>,
    options: EngineOptions,
    engine: Option<Engine>,
    clock: u64,
}

impl World {
    fn new(batch_bytes: u64) -> World {
        let dir = tempfile::tempdir().unwrap();
        let watch = dir.path().join("watch");
        fs::create_dir_all(&watch).unwrap();
        let db = dir.path().join("archive.db");
        let options = EngineOptions {
            limits: ReadLimits {
                record_limit: 1 << 20,
                batch_bytes,
            },
        };
        World {
            file: watch.join("t.jsonl"),
            roots: watch_roots(&[watch], "**/*.jsonl").unwrap(),
            engine: Some(engine(&db, options)),
            db,
            options,
            _dir: dir,
            clock: 0,
        }
    }

    /// Gives every change a distinct mtime, so the fingerprint changes even when a rewrite
    /// keeps the size within one tick of the filesystem's coarse clock.
    fn stamp(&mut self, path: &Path) {
        self.clock += 1;
        let f = File::options().write(true).open(path).unwrap();
        let t = SystemTime::now() + Duration::from_secs(self.clock);
        f.set_modified(t).unwrap();
    }

    fn write_file(&mut self, bytes: &[u8]) {
        fs::write(&self.file, bytes).unwrap();
        let path = self.file.clone();
        self.stamp(&path);
    }

    fn replace(&mut self, bytes: &[u8]) {
        let tmp = self.file.with_extension("tmp");
        fs::write(&tmp, bytes).unwrap();
        self.stamp(&tmp);
        fs::rename(&tmp, &self.file).unwrap();
    }

    fn sync(&mut self) {
        self.engine.as_mut().unwrap().run_pass(&self.roots).unwrap();
    }

    fn archived(&self) -> Vec<Vec<String>> {
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        let mut stmt = conn
            .prepare("SELECT source_id, generation, record FROM records ORDER BY seq")
            .unwrap();
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, Vec<u8>>(2)?,
                ))
            })
            .unwrap();
        let mut groups: Vec<((i64, i64), Vec<String>)> = Vec::new();
        for row in rows {
            let (s, g, rec) = row.unwrap();
            let rec = String::from_utf8(rec).unwrap();
            match groups.last_mut() {
                Some((key, recs)) if *key == (s, g) => recs.push(rec),
                _ => groups.push(((s, g), vec![rec])),
            }
        }
        groups.into_iter().map(|(_, recs)| recs).collect()
    }
}

/// An engine committing through a writer on its own connection, as `run --once` does.
fn engine(db: &Path, options: EngineOptions) -> Engine {
    let writer = ArchiveWriter::new(Archive::open(db).unwrap(), None);
    Engine::new(Archive::open(db).unwrap(), Box::new(writer), options).unwrap()
}

fn apply(world: &mut World, model: &mut Model, action: &Action) {
    match *action {
        Action::Append(n) => {
            let bytes = model.take_stream(n);
            let mut f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(&world.file)
                .unwrap();
            f.write_all(&bytes).unwrap();
            model.content.extend_from_slice(&bytes);
        }
        Action::Truncate(per_mille) => {
            let to = model.content.len() * per_mille as usize / 1000;
            if to == model.content.len() || !world.file.exists() {
                return;
            }
            model.content.truncate(to);
            let f = OpenOptions::new().write(true).open(&world.file).unwrap();
            f.set_len(to as u64).unwrap();
            drop(f);
            let path = world.file.clone();
            world.stamp(&path);
        }
        Action::Rewrite => {
            if complete_len(&model.content) == 0 {
                return;
            }
            let next = next_letter(model.letter);
            let pattern = format!("\"g\":\"{}\"", model.letter as char);
            let with = format!("\"g\":\"{}\"", next as char);
            let text = String::from_utf8(model.content.clone()).unwrap();
            let rewritten = text.replace(&pattern, &with).into_bytes();
            if rewritten == model.content {
                return;
            }
            restart_stream(model, next);
            model.content = rewritten;
            world.write_file(&model.content.clone());
        }
        Action::ReplaceAppended(n) => {
            let bytes = model.take_stream(n);
            model.content.extend_from_slice(&bytes);
            world.replace(&model.content.clone());
        }
        Action::ReplaceUnrelated(k) => {
            let next = next_letter(model.letter);
            restart_stream(model, next);
            let mut content = Vec::new();
            for _ in 0..k {
                let rec = format!("{{\"g\":\"{}\",\"n\":{}}}\n", next as char, model.next_n);
                model.next_n += 1;
                content.extend_from_slice(rec.as_bytes());
            }
            model.content = content.clone();
            world.replace(&content);
        }
        Action::Restart => {
            world.engine = None;
            world.engine = Some(engine(&world.db, world.options));
        }
        Action::Sync => {
            world.sync();
            model.synced();
        }
    }
}

/// Records appended after a rewrite or replacement carry the new letter, so a group's records
/// are never mistaken for another's.
fn restart_stream(model: &mut Model, letter: u8) {
    model.letter = letter;
    model.stream.clear();
    model.stream_pos = 0;
}

fn next_letter(l: u8) -> u8 {
    if l == b'z' { b'a' } else { l + 1 }
}

fn complete_len(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_reader_loses_nothing_and_duplicates_nothing(
        actions in proptest::collection::vec(action(), 1..40),
        batch_bytes in prop_oneof![Just(16u64), Just(100), Just(1 << 20)],
    ) {
        let mut world = World::new(batch_bytes);
        let mut model = Model::new();
        for a in &actions {
            apply(&mut world, &mut model, a);
            if matches!(a, Action::Sync) {
                prop_assert_eq!(world.archived(), model.expected(), "after {:?}", actions);
            }
        }
        apply(&mut world, &mut model, &Action::Sync);
        prop_assert_eq!(world.archived(), model.expected());
    }
}
