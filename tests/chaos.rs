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
    /// SIGKILLs while two agents save their files atomically.
    save_kills: usize,
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
                save_kills: 100,
            }
        } else {
            Scale {
                files: 20,
                writers: 4,
                kills: 50,
                max_life_ms: 250,
                flood: 1,
                save_kills: 12,
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
    for i in 0..scale.kills {
        let mut d = Daemon::start(&env, &[], &["--batch-bytes", "2K"], TapReader::Read);
        if i == 0 {
            // One daemon at least lives to archive, however slow starting is on a loaded
            // machine: the kills then land on an archive that has records.
            wait_until("the first daemon archiving", || archived(&env) > 0);
        }
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
        probe.wait_for(&w.path, &w.generations);
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
    let archive = transcript_sync::Archive::open_existing(&env.db).expect("open the archive");
    for w in written {
        let (archived, expected) = (
            archived_generations(&archive, &w.path),
            nonempty(&w.generations),
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

/// The records archived under `path`, grouped by (source, generation) in archive order, read
/// as `export` reads them (compressed records decompressed).
/// Panics if a group's offsets do not grow with `seq`, or a group resumes after another began.
fn archived_generations(archive: &transcript_sync::Archive, path: &Path) -> Vec<Vec<String>> {
    let mut groups: Vec<((i64, i64), Vec<String>)> = Vec::new();
    let mut last_offset = -1;
    let exported = archive.export(0, Some(path), |row| {
        if row.path != path {
            return Ok(());
        }
        let (key, offset) = ((row.source, row.generation), row.offset as i64);
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
        let record = String::from_utf8(row.record).expect("an archived record is UTF-8");
        groups
            .last_mut()
            .expect("a group was pushed")
            .1
            .push(record);
        Ok(())
    });
    exported
        .expect("read the records")
        .expect("nothing to write");
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
}

/// A generation without records leaves no trace among the archive's records.
fn nonempty(generations: &[Vec<String>]) -> Vec<Vec<String>> {
    let nonempty = generations.iter().filter(|g| !g.is_empty());
    nonempty.cloned().collect()
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

    /// Truncation destroys bytes, so it waits until the archive holds them all: otherwise
    /// the model would demand records nobody could read.
    fn truncate(&mut self, probe: &mut ArchiveProbe) {
        probe.wait_for(&self.path, &self.generations);
        self.file.set_len(0).expect("truncate");
        self.generations.push(Vec::new());
    }

    /// Writes a new file beside the old one and renames it over it (an atomic save), once the
    /// archive holds everything the old one had.
    fn replace(&mut self, rng: &mut Lcg, probe: &mut ArchiveProbe) {
        probe.wait_for(&self.path, &self.generations);
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

    /// Waits until the archive holds every record written to `path` so far (`generations`);
    /// on timeout, says where the archive differs from what was written.
    fn wait_for(&mut self, path: &Path, generations: &[Vec<String>]) {
        let records: usize = generations.iter().map(Vec::len).sum();
        let deadline = std::time::Instant::now() + PATIENCE;
        while self.count(path) < records as u64 {
            if std::time::Instant::now() > deadline {
                let archive = transcript_sync::Archive::open_existing(&self.db).ok();
                let archived =
                    (archive.as_ref()).map_or_else(Vec::new, |a| archived_generations(a, path));
                let diff = first_difference(&archived, &nonempty(generations));
                panic!("{path:?}: the archive never held the {records} written: {diff:?}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
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
            rounds: 150 * times,
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

    /// Writes the burst; returns how many inotify events it queues (the daemon's watches ask
    /// for modifications, not opens and closes: an append is one event, a new file two, a new
    /// directory one).
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
        self.known * self.rounds + self.new_files * 2 + self.dirs
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

/// The unprivileged user the hostile-files daemon runs as when the tests run as root, so that
/// a file can be unreadable to it.
const NOBODY: &str = "65534";

#[test]
fn hostile_files_are_each_logged_and_recorded_while_a_good_file_keeps_flowing() {
    // One daemon, unprivileged, meets one hostile file after another in its tree.
    // Each must leave a log line naming its path and a trace in the archive (an event or a
    // reject), and the daemon keeps running: after every step the next record of a
    // well-behaved file in a second root reaches the tap.
    let env = Env::new();
    let good_root = env.dir.path().join("good");
    fs::create_dir(&good_root).expect("create the good root");
    let mut good = GoodFile::create(&good_root);
    let d = start_unprivileged(&env, &good_root);
    d.wait_log(CAUGHT_UP);
    good.flows(&d);
    for case in hostile_cases() {
        let path = place(&env, case.name, case.make);
        if let Some(log) = case.log {
            wait_log_line(&d, &path, log);
        }
        wait_event(&env, &path, case.event, case.detail);
        good.flows(&d);
    }
    an_incomplete_line_is_recorded_when_its_file_goes(&env, &d);
    good.flows(&d);
    a_file_deleted_while_being_read_keeps_what_was_read(&env, &d);
    good.flows(&d);
    a_root_deleted_and_recreated_is_read_again(&env, &d);
    good.flows(&d);
    let (status, _) = d.terminate();
    assert!(status.success());
}

#[test]
fn a_file_left_unreadable_is_reported_once_until_it_has_been_read() {
    // Every change and every rescan retries an unreadable file. Each retry used to log a
    // warning and add an `unreadable` event: one a minute, for as long as the file stayed so.
    // The good file shares the root, so its events come after the secret file's.
    let env = Env::new();
    let other_root = env.dir.path().join("other");
    fs::create_dir(&other_root).expect("create a second root");
    let mut good = GoodFile::create(&env.root);
    let d = start_unprivileged(&env, &other_root);
    d.wait_log(CAUGHT_UP);
    let secret = place(&env, "secret.jsonl", make_unreadable);
    let named = format!("path={secret:?}");
    let warned = || {
        (d.log().lines())
            .filter(|l| l.contains(&named) && l.contains("WARN"))
            .count()
    };
    let events = || {
        env.sql(&format!(
            "SELECT detail FROM events WHERE kind = 'unreadable' AND path = CAST('{}' AS BLOB)",
            secret.display()
        ))
        .len()
    };
    wait_until("the first report", || warned() == 1 && events() == 1);
    for n in 2..5 {
        // As root (or its owner), the test can append to a file of mode 000.
        append_line(&secret, &format!(r#"{{"secret":{n}}}"#));
        good.flows(&d);
    }
    assert_eq!(warned(), 1, "{}", d.log());
    assert_eq!(events(), 1);
    set_mode(&secret, 0o644);
    append_line(&secret, r#"{"secret":5}"#);
    wait_until("the secret file archived", || {
        env.records_of("secret.jsonl").len() == 5
    });
    // Read once, a new failure is news again.
    set_mode(&secret, 0o000);
    append_line(&secret, r#"{"secret":6}"#);
    wait_until("a second report", || warned() == 2 && events() == 2);
    // Also when the file was read under another name in between.
    let moved = env.path("moved.jsonl");
    fs::rename(&secret, &moved).expect("rename the secret file");
    set_mode(&moved, 0o644);
    append_line(&moved, r#"{"secret":7}"#);
    wait_until("the file read under its new name", || {
        env.records_of("moved.jsonl").len() == 7
    });
    set_mode(&moved, 0o000);
    fs::rename(&moved, &secret).expect("rename it back");
    append_line(&secret, r#"{"secret":8}"#);
    wait_until("a third report", || warned() == 3 && events() == 3);
    let (status, _) = d.terminate();
    assert!(status.success());
}

fn append_line(path: &Path, line: &str) {
    let mut f = open_append(path);
    f.write_all(format!("{line}\n").as_bytes())
        .expect("append a line");
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Something hostile to put in the tree, and the log line and archive event it must leave.
struct Case {
    name: &'static str,
    /// Makes it at the given path (outside the tree; it is then renamed in whole).
    make: fn(&Path),
    /// Logged on a line that names its path (none for a file read from its first byte, whose
    /// `seeded` line is at debug).
    log: Option<&'static str>,
    /// The kind of its archive event, and a part of the event's detail.
    event: &'static str,
    detail: &'static str,
}

fn hostile_cases() -> Vec<Case> {
    let case = |name, make, log, event, detail| Case {
        name,
        make,
        log,
        event,
        detail,
    };
    let rejected = Some("WARN  rejected");
    let passed = Some("WARN  passed over");
    vec![
        case(
            "utf8.jsonl",
            make_invalid_utf8,
            rejected,
            "reject",
            "invalid unicode",
        ),
        case("nul.jsonl", make_nul, rejected, "reject", "invalid JSON"),
        case(
            "long.jsonl",
            make_too_long,
            rejected,
            "reject",
            "record limit",
        ),
        case(
            "deep.jsonl",
            make_too_deep,
            rejected,
            "reject",
            "recursion limit",
        ),
        case("empty.jsonl", make_empty, None, "seeded", "offset=0"),
        case(
            "loop.jsonl",
            make_symlink_loop,
            passed,
            "passed_over",
            "symlink",
        ),
        case(
            "cycle.jsonl",
            make_directory_cycle,
            passed,
            "passed_over",
            "symlink",
        ),
        case("pipe.jsonl", make_fifo, passed, "passed_over", "a FIFO"),
        case("sock.jsonl", make_socket, passed, "passed_over", "a socket"),
        case(
            "secret.jsonl",
            make_unreadable,
            Some("Permission denied"),
            "unreadable",
            "denied",
        ),
    ]
}

fn make_invalid_utf8(p: &Path) {
    write_file(p, b"{\"ok\":1}\n{\"bad\":\"\xff\xfe\"}\n{\"ok\":2}\n");
}

fn make_nul(p: &Path) {
    write_file(p, b"{\"nul\":1}\0\n");
}

/// Longer than the daemon's `--record-limit` of 256 KiB.
fn make_too_long(p: &Path) {
    write_file(
        p,
        format!("{{\"big\":\"{}\"}}\n", "x".repeat(300_000)).as_bytes(),
    );
}

/// Nested 100,000 deep, within the record limit.
fn make_too_deep(p: &Path) {
    write_file(
        p,
        ("[".repeat(100_000) + &"]".repeat(100_000) + "\n").as_bytes(),
    );
}

fn make_empty(p: &Path) {
    write_file(p, b"");
}

fn make_symlink_loop(p: &Path) {
    let name = p.file_name().expect("a file name");
    std::os::unix::fs::symlink(name, p).expect("make a symlink loop");
}

fn make_directory_cycle(p: &Path) {
    std::os::unix::fs::symlink(".", p).expect("make a directory symlink cycle");
}

fn make_fifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).expect("no NUL in a temp path");
    assert_eq!(
        unsafe { libc::mkfifo(c.as_ptr(), 0o644) },
        0,
        "mkfifo {p:?}"
    );
}

fn make_socket(p: &Path) {
    // The socket file stays when the listener is closed.
    std::os::unix::net::UnixListener::bind(p).expect("bind a socket");
}

/// Mode 000 (and owned by root when the daemon runs as nobody): unreadable to the daemon.
fn make_unreadable(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    write_file(p, b"{\"secret\":1}\n");
    fs::set_permissions(p, fs::Permissions::from_mode(0o000)).expect("chmod 000");
}

fn write_file(p: &Path, bytes: &[u8]) {
    fs::write(p, bytes).expect("write a hostile file");
}

/// A line without its newline is held back in the cursor; when its file is deleted, the
/// bytes become a reject rather than vanish.
fn an_incomplete_line_is_recorded_when_its_file_goes(env: &Env, d: &Daemon) {
    let bytes = b"{\"never\":\"ends\"";
    let path = place(env, "no-newline.jsonl", |p| {
        write_file(p, b"{\"never\":\"ends\"")
    });
    let held = format!(
        "SELECT c.held_back FROM cursors c JOIN sources s ON s.id = c.source_id \
         WHERE s.path = CAST('{}' AS BLOB)",
        path.display()
    );
    wait_until("the incomplete line held back", || {
        env.sql(&held) == vec![bytes.len().to_string()]
    });
    fs::remove_file(&path).expect("delete the file");
    wait_log_line(d, &path, "held-back bytes recorded as a reject");
    wait_event(env, &path, "source_gone", "no longer found");
    let reasons = format!(
        "SELECT r.reason FROM rejects r JOIN sources s ON s.id = r.source_id \
         WHERE s.path = CAST('{}' AS BLOB)",
        path.display()
    );
    let reasons = env.sql(&reasons);
    assert!(
        reasons.len() == 1 && reasons[0].contains("incomplete record never completed"),
        "{reasons:?}"
    );
}

/// A file deleted in the middle of a long read: what was read stays archived, in order, and
/// the source is recorded as gone.
fn a_file_deleted_while_being_read_keeps_what_was_read(env: &Env, d: &Daemon) {
    let recs = records("big", 100_000);
    let path = place(env, "big.jsonl", |p| {
        write_file(p, &lines(&records("big", 100_000)))
    });
    let of_big = format!(
        "SELECT r.record FROM records r JOIN sources s ON s.id = r.source_id \
         WHERE s.path = CAST('{}' AS BLOB) ORDER BY r.seq",
        path.display()
    );
    let count = of_big.replace("r.record", "count(*)");
    wait_until("the big file's reading to start", || {
        env.sql(&count) != vec!["0"]
    });
    // Stopped, the daemon cannot finish the file before it is gone.
    d.signal(libc::SIGSTOP);
    fs::remove_file(&path).expect("delete the big file");
    d.signal(libc::SIGCONT);
    wait_log_line(d, &path, "source_gone");
    wait_event(env, &path, "source_gone", "no longer found");
    let archived = env.sql(&of_big);
    assert!(
        archived.len() < recs.len(),
        "the read ended before the deletion"
    );
    assert_eq!(archived, recs[..archived.len()], "a prefix, in order, once");
}

fn a_root_deleted_and_recreated_is_read_again(env: &Env, d: &Daemon) {
    let survivor = env.path("utf8.jsonl");
    fs::remove_dir_all(&env.root).expect("delete the root");
    wait_log_line(d, &env.root, "root removed");
    wait_event(env, &survivor, "source_gone", "no longer found");
    fs::create_dir(&env.root).expect("recreate the root");
    place(env, "after.jsonl", |p| write_file(p, b"{\"after\":1}\n"));
    wait_for_tap(d, r#"{"after":1}"#);
}

/// A file in its own root that is appended to between the hostile steps.
struct GoodFile {
    path: PathBuf,
    next: usize,
}

impl GoodFile {
    fn create(root: &Path) -> GoodFile {
        let path = root.join("good.jsonl");
        File::create(&path).expect("create the good file");
        GoodFile { path, next: 0 }
    }

    /// Appends the next record and waits for it on the tap.
    fn flows(&mut self, d: &Daemon) {
        let record = format!(r#"{{"good":{}}}"#, self.next);
        self.next += 1;
        let mut f = open_append(&self.path);
        f.write_all(format!("{record}\n").as_bytes())
            .expect("append to the good file");
        wait_for_tap(d, &record);
    }
}

/// Reads the tap until `record` comes, passing over other files' records.
fn wait_for_tap(d: &Daemon, record: &str) {
    let deadline = std::time::Instant::now() + PATIENCE;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Ok(line) = d.tap.recv_timeout(left).map(|l| l.text) else {
            panic!("{record} never reached the tap; log:\n{}", d.log());
        };
        if raw_record(&line) == record {
            return;
        }
    }
}

/// Makes a thing with `make` outside the tree and renames it in, so the daemon never sees it
/// half made; returns its path in the tree.
fn place(env: &Env, name: &str, make: fn(&Path)) -> PathBuf {
    let staging = env.dir.path().join("staging");
    fs::create_dir_all(&staging).expect("create the staging directory");
    let made = staging.join(name);
    make(&made);
    let path = env.path(name);
    fs::rename(&made, &path).expect("rename into the tree");
    path
}

fn give_to_nobody(dir: &Path) {
    let owner = format!("{NOBODY}:{NOBODY}");
    let status = std::process::Command::new("chown")
        .args(["-R", &owner])
        .arg(dir)
        .status()
        .expect("run chown");
    assert!(status.success(), "chown -R {owner} {dir:?}");
}

/// Starts the daemon as the test's user, or as nobody (owning the test's tree) when that is
/// root: root reads a file of mode 000 anyway.
fn start_unprivileged(env: &Env, good_root: &Path) -> Daemon {
    let mut cmd = if unsafe { libc::geteuid() } == 0 {
        give_to_nobody(env.dir.path());
        let mut cmd = env.command("setpriv");
        cmd.args([
            "--reuid",
            NOBODY,
            "--regid",
            NOBODY,
            "--clear-groups",
            "--",
            BIN,
        ]);
        cmd
    } else {
        env.cmd()
    };
    cmd.args(["run", "--sink", "stdout", "--rescan-interval", "3600"])
        .args(["--record-limit", "256K", "--batch-bytes", "1K", "--db"])
        .arg(&env.db)
        .arg("--watch")
        .arg(&env.root)
        .arg("--watch")
        .arg(good_root);
    Daemon::spawn(cmd, TapReader::Read)
}

/// Waits until one log line names `path` and contains `needle`.
fn wait_log_line(d: &Daemon, path: &Path, needle: &str) {
    let named = format!("path={path:?}");
    let found = || (d.log().lines()).any(|l| l.contains(&named) && l.contains(needle));
    wait_until(&format!("a log line with {named} and {needle:?}"), found);
}

/// Waits until the archive has an event of `kind` at `path` whose detail contains `detail`.
fn wait_event(env: &Env, path: &Path, kind: &str, detail: &str) {
    let query = format!(
        "SELECT detail FROM events WHERE kind = '{kind}' AND path = CAST('{}' AS BLOB)",
        path.display()
    );
    wait_until(&format!("a {kind} event at {path:?}"), || {
        env.sql(&query).iter().any(|d| d.contains(detail))
    });
}

#[test]
fn sigkill_while_two_agents_save_atomically_keeps_each_message_once_in_its_own_session() {
    // Cline's messages file and a Gemini CLI chat, each saved whole at every message through
    // a temporary file renamed over it, on one filesystem: the inode one save frees is often
    // the other writer's next temporary file, so the daemon (SIGKILLed at random moments and
    // restarted) keeps meeting one agent's old inode at the other's path. Afterwards every
    // message of each final state is in its own session once, and `restore` gives each file
    // back byte for byte.
    let scale = Scale::get();
    let seed = chaos_seed("two agents saving");
    let env = Env::new();
    let home = env.dir.path().join("home");
    copy_agent_fixture("cline", &home);
    copy_agent_fixture("gemini-cli-json", &home);
    let stop = Arc::new(AtomicBool::new(false));
    let savers = [Saver::cline(&home), Saver::gemini(&home)].map(|saver| {
        let (stop, rng) = (Arc::clone(&stop), Lcg(seed ^ saver.id.len() as u64));
        std::thread::spawn(move || saver.save_until(rng, &stop))
    });
    let mut rng = Lcg(seed);
    for _ in 0..scale.save_kills {
        let mut d = Daemon::spawn(home_daemon_cmd(&env), TapReader::Read);
        // Long enough, now and then, for a state to settle and be captured.
        std::thread::sleep(Duration::from_millis(rng.below(1500)));
        d.child.kill().expect("SIGKILL the daemon");
        d.child.wait().expect("reap the daemon");
    }
    stop.store(true, Ordering::Relaxed);
    let saved: Vec<Saved> = (savers.into_iter())
        .map(|s| s.join().expect("a saving thread panicked"))
        .collect();
    env.run_once_home();

    // Nothing crossed from one agent to the other, and no session file was taken for moved.
    let crossed = env.sql(
        "SELECT harness || ' ' || path FROM sources WHERE harness = 'cline' AND path LIKE '%/.gemini/%'
         OR harness = 'gemini-cli' AND path NOT LIKE '%/.gemini/%'",
    );
    assert!(crossed.is_empty(), "seed {seed}: {crossed:?}");
    assert_eq!(
        env.sql("SELECT count(*) FROM events WHERE kind IN ('moved', 'source_gone', 'replaced')"),
        ["0"],
        "seed {seed}"
    );
    let listed = stdout_of(&env, &["sessions", "--json"]);
    assert_eq!(listed.lines().count(), 2, "seed {seed}: {listed}");
    for (s, other) in [(&saved[0], &saved[1]), (&saved[1], &saved[0])] {
        let shown = stdout_of(&env, &["show", &s.id, "--format", "json"]);
        let messages: Vec<serde_json::Value> = (shown.lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let final_state: serde_json::Value = serde_json::from_slice(&s.bytes).unwrap();
        let in_final = final_state["messages"].as_array().unwrap().len();
        assert_eq!(
            messages.len(),
            in_final,
            "seed {seed}: {} shows {shown}",
            s.id
        );
        for said in &s.said {
            let times = shown.matches(said.as_str()).count();
            assert_eq!(times, 1, "seed {seed}: {said:?} in {}:\n{shown}", s.id);
        }
        let strays: Vec<&String> = (other.said.iter()).filter(|w| shown.contains(*w)).collect();
        assert!(strays.is_empty(), "seed {seed}: {strays:?} in {}", s.id);
    }
    for s in &saved {
        fs::remove_file(&s.path).unwrap();
        let out = cli(&env, &["restore", &s.id]);
        assert!(out.status.success(), "seed {seed}: {}", stderr(&out));
        assert!(
            fs::read(&s.path).unwrap() == s.bytes,
            "seed {seed}: {:?}",
            s.path
        );
    }
    eprintln!(
        "two agents saving: {} kills, {} and {} messages saved",
        scale.save_kills,
        saved[0].said.len(),
        saved[1].said.len()
    );
}

/// One agent's session file, saved whole at every message as its agent saves it.
struct Saver {
    /// The session's id.
    id: String,
    path: PathBuf,
    /// The message the agent adds, of its number and text.
    message: fn(u64, &str) -> serde_json::Value,
}

/// What a [`Saver`] saved: its last state, and the text of each message it added.
struct Saved {
    id: String,
    path: PathBuf,
    bytes: Vec<u8>,
    said: Vec<String>,
}

impl Saver {
    fn cline(home: &Path) -> Saver {
        let id = "1796311346532_t87ya";
        Saver {
            id: id.into(),
            path: home.join(format!(".cline/data/sessions/{id}/{id}.messages.json")),
            message: |n, text| {
                serde_json::json!({"id": format!("cline-{n}"), "role": "user",
                    "content": [{"type": "text", "text": text}], "ts": 1796311349000u64 + n})
            },
        }
    }

    fn gemini(home: &Path) -> Saver {
        Saver {
            id: "d8bc5fca-b273-44e2-a18a-799374e3995c".into(),
            path: home.join(".gemini/tmp/project/chats/session-2026-12-03T15-14-d8bc5fca.json"),
            message: |n, text| {
                serde_json::json!({"id": format!("gemini-{n}"), "type": "user",
                    "timestamp": format!("2026-12-03T16:{:02}:{:02}.000Z", n / 60 % 60, n % 60),
                    "content": [{"text": text}]})
            },
        }
    }

    /// Adds a message and saves atomically (a new temporary file, renamed over the session's),
    /// pausing a random while between saves, until `stop` is set.
    fn save_until(self, mut rng: Lcg, stop: &AtomicBool) -> Saved {
        let mut doc: serde_json::Value =
            serde_json::from_slice(&fs::read(&self.path).unwrap()).expect("the fixture is JSON");
        let temp = self.path.with_extension("json.tmp");
        let (mut said, mut bytes) = (Vec::new(), Vec::new());
        while !stop.load(Ordering::Relaxed) {
            let n = said.len() as u64;
            let text = format!("{}-note-{n:04}-end", &self.id[..5]);
            doc["messages"]
                .as_array_mut()
                .unwrap()
                .push((self.message)(n, &text));
            said.push(text);
            bytes = serde_json::to_vec_pretty(&doc).unwrap();
            fs::write(&temp, &bytes).expect("write the temporary file");
            fs::rename(&temp, &self.path).expect("rename it over the session's file");
            // Pacing, not synchronisation: some states settle before the next save.
            std::thread::sleep(Duration::from_millis(rng.below(800)));
        }
        Saved {
            id: self.id,
            path: self.path,
            bytes,
            said,
        }
    }
}
