//! Chaos: the real daemon SIGKILLed at random moments while writers append, truncate and
//! replace files; event floods past the kernel's inotify queue; hostile files in a live tree.
//! Each scenario keeps a model of what was written and compares the archive with it.
//!
//! `TRANSCRIPT_SYNC_SOAK=1` runs each scenario longer and larger; the crash loop prints its
//! seed, and `TRANSCRIPT_SYNC_CHAOS_SEED=N` replays the same random choices (the kill moments
//! still race the writers, so a replay is likely, not certain, to hit the same interleaving).

use crate::util::*;
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

const CAUGHT_UP: &str = "INFO  caught up sources=";

/// How large a scenario is: small enough by default for `cargo test`, larger in a soak.
struct Scale {
    /// Files the crash loop writes to.
    files: usize,
    /// Writer threads in the crash loop; each owns every `writers`-th file.
    writers: usize,
    /// SIGKILLs in the crash loop.
    kills: usize,
    /// The longest a daemon of the crash loop lives before its kill.
    max_life_ms: u64,
    /// How many times the default event flood.
    flood: usize,
}

impl Scale {
    fn get() -> Scale {
        if std::env::var_os("TRANSCRIPT_SYNC_SOAK").is_some_and(|v| v == "1") {
            Scale {
                files: 60,
                writers: 6,
                kills: 400,
                max_life_ms: 600,
                flood: 4,
            }
        } else {
            Scale {
                files: 20,
                writers: 4,
                kills: 50,
                max_life_ms: 250,
                flood: 1,
            }
        }
    }
}

/// The seed of a scenario's random choices: `TRANSCRIPT_SYNC_CHAOS_SEED`, or the clock.
fn chaos_seed(scenario: &str) -> u64 {
    let seed = match std::env::var("TRANSCRIPT_SYNC_CHAOS_SEED") {
        Ok(s) => s.parse().expect("TRANSCRIPT_SYNC_CHAOS_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("the clock is past 1970")
            .as_nanos() as u64,
    };
    eprintln!("{scenario} seed {seed}; replay with TRANSCRIPT_SYNC_CHAOS_SEED={seed}");
    seed
}

/// A small deterministic generator, so a failing scenario can be replayed from its seed.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[test]
fn sigkill_at_random_moments_while_writers_append_truncate_and_replace_loses_and_duplicates_nothing()
 {
    // Writers append whole records and records split across several writes to many files, now
    // and then truncate one or replace it atomically, while the daemon (small batches, so a
    // kill often lands between commits) is SIGKILLed at random moments and restarted.
    // Afterwards the archive holds every record of every generation once, in order, and no
    // partial record. The kill moments are the scenario, not a synchronisation.
    let scale = Scale::get();
    let seed = chaos_seed("crash loop");
    let env = Env::new();
    let stop = Arc::new(AtomicBool::new(false));
    let writers = spawn_writers(&env, &scale, seed, &stop);
    let mut rng = Lcg(seed);
    for _ in 0..scale.kills {
        let mut d = Daemon::start(&env, &[], &["--batch-bytes", "2K"], TapReader::Read);
        std::thread::sleep(Duration::from_millis(rng.below(scale.max_life_ms)));
        d.child.kill().expect("SIGKILL the daemon");
        d.child.wait().expect("reap the daemon");
    }
    let during_kills = archived(&env);
    stop.store(true, Ordering::Relaxed);
    // This daemon lives: a writer waiting to truncate or replace needs the archive to catch up.
    let mut d = Daemon::start(&env, &[], &["--batch-bytes", "2K"], TapReader::Read);
    let written: Vec<Written> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("a writer thread panicked"))
        .collect();
    let mut probe = ArchiveProbe::new(&env.db);
    for w in &written {
        probe.wait_for(&w.path, w.records() as u64);
    }
    d.signal(libc::SIGTERM);
    let (status, _) = d.wait_exit();
    assert!(status.success(), "the last daemon failed:\n{}", d.log());
    let total: usize = written.iter().map(Written::records).sum();
    let generations: usize = written.iter().map(|w| w.generations.len()).sum();
    eprintln!(
        "crash loop: {} kills, {total} records in {generations} generations of {} files, \
         {during_kills} archived while killing",
        scale.kills,
        written.len()
    );
    assert!(during_kills > 0, "no daemon lived to archive (seed {seed})");
    assert_archive_matches(&env, &written, seed);
}

/// Every file's archived generations equal the written ones, and nothing was rejected: a
/// partial record would be a reject (or a record the model lacks).
fn assert_archive_matches(env: &Env, written: &[Written], seed: u64) {
    let conn = Connection::open(&env.db).expect("open the archive");
    for w in written {
        let (archived, expected) = (
            archived_generations(&conn, &w.path),
            w.nonempty_generations(),
        );
        if let Some(diff) = first_difference(&archived, &expected) {
            panic!(
                "{:?} is not archived as written (seed {seed}): {diff}",
                w.path
            );
        }
    }
    let rejects: Vec<String> = conn
        .prepare("SELECT reason FROM rejects")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .expect("read the rejects");
    assert!(rejects.is_empty(), "rejects (seed {seed}): {rejects:?}");
}

/// Where archived generations first differ from written ones, said briefly.
fn first_difference(archived: &[Vec<String>], written: &[Vec<String>]) -> Option<String> {
    if archived.len() != written.len() {
        let counts = |g: &[Vec<String>]| g.iter().take(12).map(Vec::len).collect::<Vec<_>>();
        return Some(format!(
            "{} generations archived, {} written; records in the first ones {:?} vs {:?}",
            archived.len(),
            written.len(),
            counts(archived),
            counts(written)
        ));
    }
    let mut pairs = archived.iter().zip(written).enumerate();
    let (g, (a, w)) = pairs.find(|(_, (a, w))| a != w)?;
    let at = a.iter().zip(w).position(|(a, w)| a != w);
    let at = at.unwrap_or(a.len().min(w.len()));
    Some(format!(
        "generation {g}: {} records archived, {} written; first difference at record {at}: \
         archived {:?}, written {:?}",
        a.len(),
        w.len(),
        a.get(at),
        w.get(at)
    ))
}

/// The records archived under `path`, grouped by (source, generation) in archive order.
/// Panics if a group's offsets do not grow with `seq`, or a group resumes after another began.
fn archived_generations(conn: &Connection, path: &Path) -> Vec<Vec<String>> {
    let mut stmt = conn
        .prepare(
            "SELECT r.source_id, r.generation, r.offset, r.record FROM records r \
             JOIN sources s ON s.id = r.source_id WHERE s.path = ?1 ORDER BY r.seq",
        )
        .expect("prepare the records query");
    let rows = stmt
        .query_map([path.as_os_str().as_bytes()], |r| {
            let key: (i64, i64) = (r.get(0)?, r.get(1)?);
            Ok((key, r.get::<_, i64>(2)?, r.get::<_, Vec<u8>>(3)?))
        })
        .expect("query the records");
    let mut groups: Vec<((i64, i64), Vec<String>)> = Vec::new();
    let mut last_offset = -1;
    for row in rows {
        let (key, offset, bytes) = row.expect("read a record");
        if groups.last().map(|g| g.0) != Some(key) {
            assert!(
                groups.iter().all(|g| g.0 != key),
                "{path:?}: (source, generation) {key:?} resumed after another began"
            );
            groups.push((key, Vec::new()));
            last_offset = -1;
        }
        assert!(offset > last_offset, "{path:?}: {key:?} out of order");
        last_offset = offset;
        let record = String::from_utf8(bytes).expect("an archived record is UTF-8");
        groups
            .last_mut()
            .expect("a group was pushed")
            .1
            .push(record);
    }
    groups.into_iter().map(|(_, records)| records).collect()
}

/// What was written to one path: its generations, oldest first, each the records written to
/// it in order. A truncation or a replacement starts the next one.
struct Written {
    path: PathBuf,
    generations: Vec<Vec<String>>,
}

impl Written {
    fn records(&self) -> usize {
        self.generations.iter().map(Vec::len).sum()
    }

    /// A generation without records leaves no trace among the archive's records.
    fn nonempty_generations(&self) -> Vec<Vec<String>> {
        let nonempty = self.generations.iter().filter(|g| !g.is_empty());
        nonempty.cloned().collect()
    }
}

fn spawn_writers(
    env: &Env,
    scale: &Scale,
    seed: u64,
    stop: &Arc<AtomicBool>,
) -> Vec<JoinHandle<Vec<Written>>> {
    (0..scale.writers)
        .map(|w| {
            let files: Vec<FileWriter> = (w..scale.files)
                .step_by(scale.writers)
                .map(|f| FileWriter::create(&env.root, f))
                .collect();
            let rng = Lcg(seed ^ (w as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let (probe, stop) = (ArchiveProbe::new(&env.db), Arc::clone(stop));
            std::thread::spawn(move || write_until(files, rng, probe, &stop))
        })
        .collect()
}

fn write_until(
    mut files: Vec<FileWriter>,
    mut rng: Lcg,
    mut probe: ArchiveProbe,
    stop: &AtomicBool,
) -> Vec<Written> {
    while !stop.load(Ordering::Relaxed) {
        let f = rng.below(files.len() as u64) as usize;
        files[f].step(&mut rng, &mut probe);
        // Pacing, not synchronisation: many kill moments matter, not a large archive.
        std::thread::sleep(Duration::from_micros(500));
    }
    files.into_iter().map(FileWriter::finish).collect()
}

/// One file of the crash loop, with the model of what was written to it.
struct FileWriter {
    index: usize,
    path: PathBuf,
    /// Where a replacement is written before it is renamed over `path`.
    staging: PathBuf,
    file: File,
    generations: Vec<Vec<String>>,
    /// A record being written in pieces, and the pieces still to write (last one first).
    split: Option<(String, Vec<Vec<u8>>)>,
    next: u64,
}

impl FileWriter {
    fn create(root: &Path, index: usize) -> FileWriter {
        let path = root.join(format!("w{index:03}.jsonl"));
        File::create(&path).expect("create a crash-loop file");
        FileWriter {
            index,
            staging: root.join(format!(".w{index:03}.jsonl.tmp")),
            file: open_append(&path),
            path,
            generations: vec![Vec::new()],
            split: None,
            next: 0,
        }
    }

    /// One random action; a record written in pieces is finished before anything else.
    fn step(&mut self, rng: &mut Lcg, probe: &mut ArchiveProbe) {
        if self.split.is_some() {
            return self.write_next_piece();
        }
        match rng.below(1000) {
            0..4 => self.truncate(probe),
            4..8 => self.replace(rng, probe),
            8..400 => self.start_split(rng),
            _ => self.append_whole(rng),
        }
    }

    fn record(&mut self, rng: &mut Lcg) -> String {
        // Multi-byte characters, so a piece often ends inside one.
        let pad = "é".repeat(rng.below(8) as usize) + &"p".repeat(rng.below(200) as usize);
        let gen_ = self.generations.len() - 1;
        self.next += 1;
        format!(
            r#"{{"file":{},"generation":{gen_},"i":{},"pad":"{pad}"}}"#,
            self.index, self.next
        )
    }

    fn current(&mut self) -> &mut Vec<String> {
        self.generations
            .last_mut()
            .expect("a file always has a generation")
    }

    fn append_whole(&mut self, rng: &mut Lcg) {
        let n = 1 + rng.below(3);
        let recs: Vec<String> = (0..n).map(|_| self.record(rng)).collect();
        self.file.write_all(&lines(&recs)).expect("append records");
        self.current().extend(recs);
    }

    fn start_split(&mut self, rng: &mut Lcg) {
        let record = self.record(rng);
        let bytes = format!("{record}\n").into_bytes();
        let mut cuts: Vec<usize> = (0..1 + rng.below(3))
            .map(|_| 1 + rng.below(bytes.len() as u64 - 1) as usize)
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut pieces = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([bytes.len()]) {
            pieces.push(bytes[from..cut].to_vec());
            from = cut;
        }
        pieces.reverse();
        self.split = Some((record, pieces));
        self.write_next_piece();
    }

    fn write_next_piece(&mut self) {
        let (_, pieces) = self.split.as_mut().expect("a record is being split");
        let piece = pieces.pop().expect("a split record has pieces left");
        self.file.write_all(&piece).expect("append a piece");
        if pieces.is_empty() {
            let (record, _) = self.split.take().expect("a record is being split");
            self.current().push(record);
        }
    }

    fn written(&self) -> u64 {
        self.generations.iter().map(Vec::len).sum::<usize>() as u64
    }

    /// Truncation destroys bytes, so it waits until the archive holds them all: otherwise
    /// the model would demand records nobody could read.
    fn truncate(&mut self, probe: &mut ArchiveProbe) {
        probe.wait_for(&self.path, self.written());
        self.file.set_len(0).expect("truncate");
        self.generations.push(Vec::new());
    }

    /// Writes a new file beside the old one and renames it over it (an atomic save), once the
    /// archive holds everything the old one had.
    fn replace(&mut self, rng: &mut Lcg, probe: &mut ArchiveProbe) {
        probe.wait_for(&self.path, self.written());
        self.generations.push(Vec::new());
        let recs: Vec<String> = (0..rng.below(3)).map(|_| self.record(rng)).collect();
        fs::write(&self.staging, lines(&recs)).expect("write a replacement");
        fs::rename(&self.staging, &self.path).expect("rename the replacement");
        self.file = open_append(&self.path);
        self.current().extend(recs);
    }

    /// Completes a record left in pieces and hands over the model.
    fn finish(mut self) -> Written {
        while self.split.is_some() {
            self.write_next_piece();
        }
        Written {
            path: self.path,
            generations: self.generations,
        }
    }
}

fn open_append(path: &Path) -> File {
    OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open for appending")
}

/// A writer's read connection to the archive, opened once the archive exists.
struct ArchiveProbe {
    db: PathBuf,
    conn: Option<Connection>,
}

impl ArchiveProbe {
    fn new(db: &Path) -> ArchiveProbe {
        ArchiveProbe {
            db: db.to_owned(),
            conn: None,
        }
    }

    /// Records archived under `path`, over all its sources and generations; 0 while the
    /// archive is not there yet.
    fn count(&mut self, path: &Path) -> u64 {
        if self.conn.is_none() && self.db.exists() {
            self.conn = Connection::open(&self.db).ok();
            if let Some(conn) = &self.conn {
                conn.busy_timeout(Duration::from_secs(5))
                    .expect("set a busy timeout");
            }
        }
        let Some(conn) = &self.conn else { return 0 };
        conn.query_row(
            "SELECT count(*) FROM records r JOIN sources s ON s.id = r.source_id \
             WHERE s.path = ?1",
            [path.as_os_str().as_bytes()],
            |r| r.get::<_, i64>(0),
        )
        .map_or(0, |n| n as u64)
    }

    /// The offset of the live source's cursor at `path`; 0 while there is none.
    fn cursor(&mut self, path: &Path) -> u64 {
        let Some(conn) = &self.conn else { return 0 };
        conn.query_row(
            "SELECT c.offset FROM cursors c JOIN sources s ON s.id = c.source_id \
             WHERE s.path = ?1 AND s.gone = 0",
            [path.as_os_str().as_bytes()],
            |r| r.get::<_, i64>(0),
        )
        .map_or(0, |n| n as u64)
    }

    /// Waits until the archive holds `records` records of `path`, or its cursor has passed
    /// every byte of the file (then records are missing, and the final comparison says which,
    /// rather than this wait timing out).
    fn wait_for(&mut self, path: &Path, records: u64) {
        let size = fs::metadata(path).expect("stat a crash-loop file").len();
        let what = format!("{records} records of {path:?} archived");
        wait_until(&what, || {
            self.count(path) >= records || self.cursor(path) == size
        });
    }
}

#[test]
fn an_event_flood_past_the_kernel_queue_while_the_daemon_is_stopped_loses_nothing() {
    // Stopped, the daemon cannot drain its inotify queue, so appends to known files, new files
    // and new directories with files inside pile up past the kernel's limit
    // (fs.inotify.max_queued_events, 16,384 by default). Once it runs again, the overflow must
    // turn into a rescan that archives every record once, in order.
    let flood = Flood::new(Scale::get().flood);
    let env = Env::new();
    flood.write_known(&env);
    let d = Daemon::start(&env, &[], &[], TapReader::Read);
    d.wait_log(CAUGHT_UP);
    d.signal(libc::SIGSTOP);
    let events = flood.write_burst(&env);
    let queue = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(16_384);
    assert!(
        events > 20_000 && events > queue,
        "{events} events cannot overflow {queue}"
    );
    d.signal(libc::SIGCONT);
    d.wait_log("watch queue overflowed; rescanning every root");
    let expected = flood.expected();
    let total: usize = expected.values().map(Vec::len).sum();
    wait_until("every flooded record archived", || {
        archived(&env) >= total as u64
    });
    assert_eq!(archived_by_file(&env), expected);
    let sources = env.sql("SELECT count(*) FROM sources");
    assert_eq!(sources, vec![expected.len().to_string()]);
}

/// The event flood's plan: `known` files there from the start, each appended to `rounds`
/// times in turn (so no two queued events are alike and none coalesce), `new_files` new
/// files, and `dirs` new directories of `per_dir` files (no event is queued for those until
/// their directory is watched: only a scan finds them).
struct Flood {
    known: usize,
    rounds: usize,
    new_files: usize,
    dirs: usize,
    per_dir: usize,
}

impl Flood {
    fn new(times: usize) -> Flood {
        Flood {
            known: 100,
            rounds: 30 * times,
            new_files: 3_000 * times,
            dirs: 100 * times,
            per_dir: 10,
        }
    }

    fn record(file: &str, n: usize) -> String {
        format!(r#"{{"file":"{file}","n":{n}}}"#)
    }

    fn write_known(&self, env: &Env) {
        for k in 0..self.known {
            let name = format!("k{k:03}");
            env.write(&format!("{name}.jsonl"), &lines(&[Flood::record(&name, 0)]));
        }
    }

    /// Writes the burst; returns how many inotify events it queues (an append opens, modifies
    /// and closes a file; a new file is also created; a new directory is one event).
    fn write_burst(&self, env: &Env) -> usize {
        for round in 1..=self.rounds {
            for k in 0..self.known {
                let name = format!("k{k:03}");
                let rec = Flood::record(&name, round);
                env.append(&format!("{name}.jsonl"), &lines(&[rec]));
            }
        }
        for f in 0..self.new_files {
            let name = format!("n{f:05}");
            env.write(&format!("{name}.jsonl"), &lines(&[Flood::record(&name, 0)]));
        }
        for d in 0..self.dirs {
            for f in 0..self.per_dir {
                let name = format!("d{d:03}-{f}");
                let rel = format!("d{d:03}/{name}.jsonl");
                env.write(&rel, &lines(&[Flood::record(&name, 0)]));
            }
        }
        self.known * self.rounds * 3 + self.new_files * 4 + self.dirs
    }

    /// Every file's record numbers, in order.
    fn expected(&self) -> BTreeMap<String, Vec<u64>> {
        let mut files = BTreeMap::new();
        for k in 0..self.known {
            files.insert(format!("k{k:03}"), (0..=self.rounds as u64).collect());
        }
        let new = (0..self.new_files).map(|f| format!("n{f:05}"));
        let nested =
            (0..self.dirs).flat_map(|d| (0..self.per_dir).map(move |f| format!("d{d:03}-{f}")));
        for name in new.chain(nested) {
            files.insert(name, vec![0]);
        }
        files
    }
}

/// The archive's records grouped by their `file` field, each file's `n` in `seq` order.
fn archived_by_file(env: &Env) -> BTreeMap<String, Vec<u64>> {
    let mut files: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for raw in env.sql("SELECT record FROM records ORDER BY seq") {
        let v: serde_json::Value = serde_json::from_str(&raw).expect("a record is JSON");
        let file = v["file"].as_str().expect("a flood record names its file");
        let n = v["n"].as_u64().expect("a flood record has a number");
        files.entry(file.to_owned()).or_default().push(n);
    }
    files
}
