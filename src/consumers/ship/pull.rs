//! Pulling: a PostgreSQL sink with `pull = true` also brings the other machines' records
//! (with their sources, and what their indexes say of their sessions) from the store into this
//! archive, so that `sessions`, `show`, `search`, `tail` and `restore` see every machine.
//!
//! - **Where from.** The store numbers records as they arrive (`pull_id`), and a machine's
//!   record transactions commit one at a time (each takes an advisory lock of its machine's):
//!   a machine's records become visible in `pull_id` order. The puller keeps, per machine,
//!   the last `pull_id` it took.
//! - **Exactly once.** A page of records, the sources they need and the new place commit in
//!   one archive transaction, through the archive writer, so they take the next `seq` like
//!   any record and every consumer (the session index, `tail`, subscribers) follows them. A
//!   crash before the commit pulls the page again; after it, never.
//! - **Never back.** A pulled source has a negative id and a machine: sinks skip its records,
//!   no watcher reads it, `status` counts it apart.
//! - **When.** At once when the store announces a commit (`NOTIFY`, sent by every shipping
//!   machine), else every `pull_interval`; `run --once` pulls once, to the end. A failure
//!   that may pass is retried with backoff, as shipping is.

use super::postgres::{Postgres, notify_channel};
use super::{FIRST_DELAY, Failure, MAX_DELAY, Machine, SinkSpec};
use crate::archive::writer::SharedWriter;
use crate::archive::{Archive, Commit, Op, RecordBatch};
use crate::domain::{Record, SourceId};
use crate::error::{Error, Result};
use crate::platform::time::now_ms;
use postgres::Client;
use postgres::fallible_iterator::FallibleIterator;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// At most this many records, and this many bytes of them (past the first), per page.
const PAGE: i64 = 1000;
const PAGE_BYTES: i64 = 8 << 20;

/// Session rows are read again this far back from the newest taken: a row updated by a
/// transaction that committed after a later one's is still seen.
const SESSIONS_OVERLAP: &str = "1 minute";

/// The running puller.
pub(crate) struct Pulling {
    handle: JoinHandle<Result<()>>,
}

impl Pulling {
    /// Waits for the puller to end (a daemon's once `stop` is set; `run --once`'s once it has
    /// pulled everything); its error, if it ended with one.
    pub(crate) fn join(self) -> Result<()> {
        self.handle.join().unwrap_or_else(|_| {
            Err(Error::ShipFailed {
                name: "pull".into(),
                message: "its thread panicked".into(),
            })
        })
    }
}

/// Starts pulling from the sink `spec` into the archive at `db` through `writer`. With
/// `once`, one pull to the end; otherwise until `stop`.
pub(crate) fn spawn(
    spec: &SinkSpec,
    db: &Path,
    writer: SharedWriter,
    once: bool,
    stop: Option<Arc<AtomicBool>>,
) -> Result<Pulling> {
    let archive = Archive::open(db)?;
    let this = Machine::of(&archive)?;
    let interval = spec.pull.unwrap_or(super::spec::DEFAULT_PULL_INTERVAL);
    let store = Postgres::new(spec, &this, db)?;
    let mut puller = Puller::new(spec.name.clone(), archive, this, store, writer)?;
    puller.stop = stop.unwrap_or_default();
    let handle = std::thread::Builder::new()
        .name(format!("pull {}", spec.name))
        .spawn(move || match once {
            true => puller.once(),
            false => {
                let stop = Arc::clone(&puller.stop);
                puller.run(interval, &stop);
                Ok(())
            }
        })
        .map_err(|source| Error::Thread {
            name: "pull",
            source,
        })?;
    Ok(Pulling { handle })
}

/// What is known of a pulled source here.
struct Known {
    id: SourceId,
    generation: i64,
    path: PathBuf,
}

/// One machine's place.
#[derive(Default, Clone)]
struct Place {
    pulled_id: i64,
    sessions_at: String,
}

struct Puller {
    name: String,
    this: Machine,
    store: Postgres,
    writer: SharedWriter,
    client: Option<Client>,
    /// Other machines: UUID to (id here, host name).
    machines: HashMap<String, (i64, String)>,
    next_machine: i64,
    /// Pulled sources by (machine here, id there).
    sources: HashMap<(i64, i64), Known>,
    next_source: SourceId,
    places: HashMap<i64, Place>,
    /// The git remote last stored for each (machine, harness, session).
    remotes: HashMap<(i64, String, String), Option<String>>,
    /// Set when the daemon stops: a pull ends after the page in hand.
    stop: Arc<AtomicBool>,
}

impl Puller {
    fn new(
        name: String,
        archive: Archive,
        this: Machine,
        store: Postgres,
        writer: SharedWriter,
    ) -> Result<Puller> {
        let machines: HashMap<String, (i64, String)> = (archive.machines()?.into_iter())
            .map(|m| (m.uuid, (m.id, m.host)))
            .collect();
        let sources = (archive.pulled_sources()?.into_iter())
            .map(|s| {
                let known = Known {
                    id: s.id,
                    generation: s.generation,
                    path: s.path,
                };
                ((s.machine, s.remote_id), known)
            })
            .collect();
        let places = (archive.pull_places(&name)?.into_iter())
            .map(|p| {
                let place = Place {
                    pulled_id: p.pulled_id,
                    sessions_at: p.sessions_at,
                };
                (p.machine, place)
            })
            .collect();
        let lowest = archive.lowest_source_id()?;
        let next_machine = machines.values().map(|(id, _)| *id).max().unwrap_or(0) + 1;
        Ok(Puller {
            name,
            this,
            store,
            writer,
            client: None,
            machines,
            next_machine,
            sources,
            next_source: lowest.min(0) - 1,
            places,
            remotes: HashMap::new(),
            stop: Arc::default(),
        })
    }

    /// `run --once`: everything the store holds now, then the end. A failure that may pass
    /// is the error.
    fn once(&mut self) -> Result<()> {
        match self.pull() {
            Ok(n) => {
                log::info!("pull {}: {n} records pulled", self.name);
                Ok(())
            }
            Err(PullError::Archive(e)) => Err(e),
            Err(PullError::Store(f)) => Err(Error::ShipFailed {
                name: self.name.clone(),
                message: format!("pulling: {}", failure_text(&f)),
            }),
        }
    }

    /// The daemon's loop: pull, wait for a notification or `interval`, again, until `stop`.
    fn run(&mut self, interval: Duration, stop: &AtomicBool) {
        let mut outage: Option<(Instant, u32)> = None;
        log::info!(
            "pull {}: pulling the other machines' records, every {} at the latest",
            self.name,
            humantime::format_duration(interval)
        );
        while !stop.load(Ordering::Relaxed) {
            match self.pull() {
                Ok(n) => {
                    if let Some((since, attempts)) = outage.take() {
                        log::info!(
                            "pull {}: the store answers again after {}s and {attempts} attempts",
                            self.name,
                            since.elapsed().as_secs()
                        );
                    }
                    if n > 0 {
                        log::debug!("pull {}: {n} records pulled", self.name);
                    }
                    self.wait(interval, stop);
                }
                Err(e) => {
                    self.client = None;
                    let (since, attempts) = outage.get_or_insert((Instant::now(), 0));
                    *attempts += 1;
                    let message = match &e {
                        PullError::Archive(e) => crate::error::error_chain(e),
                        PullError::Store(f) => failure_text(f),
                    };
                    if *attempts == 1 {
                        log::warn!(
                            "pull {}: {message}; nothing is lost: pulling starts again from the last record taken",
                            self.name
                        );
                    }
                    let delay = FIRST_DELAY * 2u32.saturating_pow((*attempts - 1).min(7));
                    if attempts.is_power_of_two() && *attempts > 1 {
                        log::warn!(
                            "pull {}: still failing after {}s and {attempts} attempts: {message}",
                            self.name,
                            since.elapsed().as_secs()
                        );
                    }
                    sleep_unless(delay.min(MAX_DELAY), stop);
                }
            }
        }
    }

    /// Waits for a notification of another machine's commit, `interval`, or `stop`.
    fn wait(&mut self, interval: Duration, stop: &AtomicBool) {
        let until = Instant::now() + interval;
        let Some(client) = self.client.as_mut() else {
            sleep_unless(interval, stop);
            return;
        };
        while !stop.load(Ordering::Relaxed) {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let slice = left.min(Duration::from_millis(250));
            let heard = {
                let mut notes = client.notifications();
                let mut iter = notes.timeout_iter(slice);
                iter.next().map(|n| n.map(|n| n.payload() != self.this.id))
            };
            match heard {
                // Another machine's commit.
                Ok(Some(true)) => return,
                Ok(_) => {}
                Err(e) => {
                    log::debug!("pull {}: waiting for notifications: {e}", self.name);
                    self.client = None;
                    return;
                }
            }
        }
    }

    /// One pull: every other machine's new records, then their session rows. Returns how
    /// many records it pulled.
    fn pull(&mut self) -> std::result::Result<u64, PullError> {
        let mut client = match self.client.take() {
            Some(c) if !c.is_closed() => c,
            _ => {
                let mut c = self.store.connect().map_err(PullError::Store)?;
                let listen = format!("LISTEN \"{}\"", notify_channel(&self.schema()));
                c.batch_execute(&listen)
                    .map_err(|e| PullError::Store(self.store.failure(&e)))?;
                c
            }
        };
        let result = self.pull_with(&mut client);
        if !matches!(result, Err(PullError::Store(_))) {
            self.client = Some(client);
        }
        result
    }

    fn schema(&self) -> String {
        self.store.sql("{schema}")
    }

    fn pull_with(&mut self, client: &mut Client) -> std::result::Result<u64, PullError> {
        let store = |e: postgres::Error| PullError::Store(self.store.failure(&e));
        let query = self.store.sql(
            "SELECT machine::text, host FROM {schema}.machines
             WHERE machine <> $1::text::uuid ORDER BY machine",
        );
        let rows = client.query(&query, &[&self.this.id]).map_err(store)?;
        let others: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
        let mut pulled = 0;
        for (uuid, host) in others {
            if self.stop.load(Ordering::Relaxed) {
                break;
            }
            pulled += self.pull_machine(client, &uuid, &host)?;
            self.pull_sessions(client, &uuid)?;
        }
        Ok(pulled)
    }

    /// The id here of machine `uuid`, and the op that adds it (or renames it) when needed.
    fn machine(&mut self, uuid: &str, host: &str) -> (i64, Option<Op>) {
        match self.machines.get(uuid) {
            Some((id, known)) if known == host => (*id, None),
            found => {
                let id = found.map_or(self.next_machine, |(id, _)| *id);
                self.next_machine = self.next_machine.max(id + 1);
                let op = Op::Machine {
                    id,
                    uuid: uuid.to_owned(),
                    host: host.to_owned(),
                };
                (id, Some(op))
            }
        }
    }

    fn pull_machine(
        &mut self,
        client: &mut Client,
        uuid: &str,
        host: &str,
    ) -> std::result::Result<u64, PullError> {
        // The page is cut from the machine's records by `pull_id` first (the index), then
        // bounded by bytes, then given its sources' paths.
        let query = self.store.sql(
            "WITH page AS (
                 SELECT pull_id, source, generation, \"offset\", harness, record, shipped_at,
                        octet_length(record) AS len
                 FROM {schema}.records
                 WHERE machine = $1::text::uuid AND pull_id > $2
                 ORDER BY pull_id LIMIT $3),
             bounded AS (
                 SELECT *, sum(len) OVER (ORDER BY pull_id) AS running FROM page)
             SELECT b.pull_id, b.source, b.generation, b.\"offset\", b.harness, s.path, b.record,
                    (extract(epoch FROM b.shipped_at) * 1000)::bigint
             FROM bounded b
             JOIN {schema}.sources s ON s.machine = $1::text::uuid AND s.source = b.source
             WHERE b.running - b.len < $4
             ORDER BY b.pull_id",
        );
        let mut pulled = 0;
        loop {
            let (machine, added) = self.machine(uuid, host);
            let after = self.places.get(&machine).cloned().unwrap_or_default();
            let rows = client
                .query(&query, &[&uuid, &after.pulled_id, &PAGE, &PAGE_BYTES])
                .map_err(|e| PullError::Store(self.store.failure(&e)))?;
            if rows.is_empty() {
                if let Some(op) = added {
                    // A machine that has shipped nothing yet is still known by name.
                    let mut commit = Commit::default();
                    commit.push(op);
                    self.writer.write(commit).map_err(PullError::Archive)?;
                    self.machines
                        .insert(uuid.to_owned(), (machine, host.to_owned()));
                }
                return Ok(pulled);
            }
            let mut commit = Commit::default();
            if let Some(op) = added {
                commit.push(op);
            }
            let mut batch: Option<RecordBatch> = None;
            let mut new_sources = Vec::new();
            let (mut last_id, mut shipped_ms) = (after.pulled_id, None);
            for row in &rows {
                let remote: i64 = row.get(1);
                let generation: i64 = row.get(2);
                let harness: String = row.get(4);
                let path = PathBuf::from(row.get::<_, String>(5));
                let id = self.source(machine, remote, &harness, &path, generation, &mut commit);
                new_sources.push((remote, id, generation, path.clone()));
                let record = Record {
                    offset: row.get::<_, i64>(3) as u64,
                    bytes: row.get::<_, String>(6).into_bytes(),
                };
                last_id = row.get(0);
                shipped_ms = Some(row.get::<_, i64>(7));
                match &mut batch {
                    Some(b) if b.source == id && b.generation == generation => {
                        b.records.push(record)
                    }
                    _ => {
                        if let Some(done) = batch.take() {
                            commit.push(Op::Records(done));
                        }
                        batch = Some(RecordBatch {
                            source: id,
                            harness,
                            path,
                            generation,
                            read_ms: shipped_ms.unwrap_or_else(now_ms),
                            records: vec![record],
                        });
                    }
                }
            }
            if let Some(done) = batch.take() {
                commit.push(Op::Records(done));
            }
            commit.push(Op::Pulled {
                sink: self.name.clone(),
                machine,
                pulled_id: last_id,
                records: rows.len() as i64,
                shipped_ms,
                sessions_at: None,
            });
            self.writer.write(commit).map_err(PullError::Archive)?;
            // Only once committed: a failed commit leaves the maps as the archive has them.
            self.machines
                .insert(uuid.to_owned(), (machine, host.to_owned()));
            for (remote, id, generation, path) in new_sources {
                self.sources.insert(
                    (machine, remote),
                    Known {
                        id,
                        generation,
                        path,
                    },
                );
                self.next_source = self.next_source.min(id - 1);
            }
            self.places.entry(machine).or_default().pulled_id = last_id;
            pulled += rows.len() as u64;
            // A stopping daemon ends after the page in hand; the next start goes on from it.
            if self.stop.load(Ordering::Relaxed) {
                return Ok(pulled);
            }
        }
    }

    /// The id here of machine `machine`'s source `remote`, adding it to `commit` when it is
    /// new or has moved or changed generation.
    fn source(
        &mut self,
        machine: i64,
        remote: i64,
        harness: &str,
        path: &Path,
        generation: i64,
        commit: &mut Commit,
    ) -> SourceId {
        let staged = commit_source(commit, machine, remote);
        let (id, changed) = match (staged, self.sources.get(&(machine, remote))) {
            (Some((id, g, p)), _) => (id, g != generation || p != path),
            (None, Some(k)) => (k.id, k.generation != generation || k.path != path),
            (None, None) => {
                let id = self.next_source;
                self.next_source -= 1;
                (id, true)
            }
        };
        if changed {
            commit.push(Op::PulledSource {
                id,
                machine,
                remote_id: remote,
                harness: harness.to_owned(),
                path: path.to_owned(),
                generation,
            });
        }
        id
    }

    /// The session rows of machine `uuid` updated since the last taken: their git remotes.
    fn pull_sessions(
        &mut self,
        client: &mut Client,
        uuid: &str,
    ) -> std::result::Result<(), PullError> {
        let Some((machine, _)) = self.machines.get(uuid).cloned() else {
            return Ok(());
        };
        let place = self.places.get(&machine).cloned().unwrap_or_default();
        let since = match place.sessions_at.as_str() {
            "" => "-infinity".to_owned(),
            at => at.to_owned(),
        };
        let query = self.store.sql(&format!(
            "SELECT harness, session, git_remote, updated_at::text FROM {{schema}}.sessions
             WHERE machine = $1::text::uuid
               AND updated_at >= $2::text::timestamptz - interval '{SESSIONS_OVERLAP}'
             ORDER BY updated_at"
        ));
        let rows = client
            .query(&query, &[&uuid, &since])
            .map_err(|e| PullError::Store(self.store.failure(&e)))?;
        let mut commit = Commit::default();
        let mut changed = Vec::new();
        let mut newest = None;
        for row in &rows {
            let key = (machine, row.get::<_, String>(0), row.get::<_, String>(1));
            let remote: Option<String> = row.get(2);
            newest = Some(row.get::<_, String>(3));
            if self.remotes.get(&key) == Some(&remote) {
                continue;
            }
            commit.push(Op::PulledSession {
                machine,
                harness: key.1.clone(),
                session: key.2.clone(),
                git_remote: remote.clone(),
            });
            changed.push((key, remote));
        }
        let Some(newest) = newest else {
            return Ok(());
        };
        if changed.is_empty() && newest == place.sessions_at {
            return Ok(());
        }
        commit.push(Op::Pulled {
            sink: self.name.clone(),
            machine,
            pulled_id: place.pulled_id,
            records: 0,
            shipped_ms: None,
            sessions_at: Some(newest.clone()),
        });
        self.writer.write(commit).map_err(PullError::Archive)?;
        self.remotes.extend(changed);
        self.places.entry(machine).or_default().sessions_at = newest;
        Ok(())
    }
}

/// A source added to `commit` already: its id, generation and path there.
fn commit_source(commit: &Commit, machine: i64, remote: i64) -> Option<(SourceId, i64, &Path)> {
    commit.ops().iter().rev().find_map(|op| match op {
        Op::PulledSource {
            id,
            machine: m,
            remote_id,
            generation,
            path,
            ..
        } if *m == machine && *remote_id == remote => Some((*id, *generation, path.as_path())),
        _ => None,
    })
}

/// Why a pull failed.
enum PullError {
    /// The store (unreachable, refusing).
    Store(Failure),
    /// The archive.
    Archive(Error),
}

fn failure_text(f: &Failure) -> String {
    match f {
        Failure::Transient { message, .. } | Failure::Refused { message } => message.clone(),
    }
}

/// Sleeps `wait`, ending early once `stop` is set.
fn sleep_unless(wait: Duration, stop: &AtomicBool) {
    let until = Instant::now() + wait;
    while !stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}
