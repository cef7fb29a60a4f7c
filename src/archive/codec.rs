//! How a record is stored in `records.record`: as it is, or as one zstd frame of its own,
//! compressed with a dictionary trained from earlier records of its harness.
//!
//! A stored record is told apart by its first bytes: a zstd frame begins with the magic
//! number `28 b5 2f fd`, which no record can (a record is JSON, and `(` begins no JSON value).
//! The frame names its dictionary by id (a row of `dictionaries`) and holds its decompressed
//! size, so every record is readable alone, by `seq`, without its neighbours, and records
//! stored before compression existed, or with an earlier dictionary, stay readable as they are.
//!
//! Dictionaries are trained (zstd's `ZDICT_trainFromBuffer`) on a thread of their own from
//! samples of a harness's records, once its records seen by the process reach each of
//! [`TRAIN_AT`]: the first from its first records, later ones from a sample spread over
//! everything seen; or, before a large backfill, from lines sampled all over it (see
//! `sample` and [`Codec::prime`]), which its records wait for. Until a harness has one, its
//! records are compressed without, and kept compressed only when that saves an eighth of
//! them.

use rusqlite::{Connection, OptionalExtension, params};
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::thread::JoinHandle;
use zstd::zstd_safe::{self, CCtx, CDict, DCtx, DDict};

/// What begins every zstd frame (RFC 8878, 3.1.1).
pub(super) const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// zstd's level: with a dictionary, level 3 both compressed records smaller and faster than
/// levels -1 to 2 on the benchmark corpus (BENCHMARKS.md).
const LEVEL: i32 = 3;

/// Records shorter than this are stored as they are: a frame's header and the dictionary
/// reference would take most of what compression saves.
pub(crate) const MIN_COMPRESSED: usize = 64;

/// Records longer than this are stored as they are, so that a long line never needs a second
/// buffer of its size (the archive writes them into their row in place).
pub(super) const MAX_COMPRESSED: usize = 1 << 20;

/// Bytes of a harness's records seen by this process at which a dictionary is trained (the
/// first is skipped when the harness has one already). A dictionary trained from the first
/// MiB alone compressed the real-shaped corpus's records to 33–46 %, one trained from a
/// sample spread over all of them to 21–28 % (BENCHMARKS.md).
const TRAIN_AT: [u64; 3] = [1 << 20, 16 << 20, 128 << 20];

/// A batch with this many bytes of records to compress is compressed on two threads.
const PARALLEL_BYTES: usize = 1 << 20;

/// The most bytes of samples kept for one harness.
pub(crate) const MAX_SAMPLES: usize = 4 << 20;

/// The most bytes of samples `compact` trains a harness's dictionary from.
pub(super) const COMPACT_SAMPLES: usize = 8 << 20;

/// Training waits for at least this much of samples.
const MIN_SAMPLES: usize = 256 << 10;

/// A sample is at most this much of the start of a record.
const SAMPLE_PREFIX: usize = 16 << 10;

/// The largest dictionary trained (zstd's own default size).
const MAX_DICTIONARY: usize = 112 << 10;

/// The most dictionaries trained per harness, over every run.
const GENERATIONS: i64 = 8;

/// The dictionary a harness's records are compressed with.
struct Encoder {
    dict: CDict<'static>,
}

/// A harness's dictionaries: the one in use, and what is gathered to train the next.
#[derive(Default)]
struct Harness {
    encoder: Option<Encoder>,
    /// Dictionaries trained for it so far (rows of `dictionaries`).
    generations: i64,
    /// Record bytes seen by this process.
    seen: u64,
    /// The next of [`TRAIN_AT`].
    next: usize,
    samples: Samples,
    /// `samples` were taken from a backlog about to be stored (see `sample`): the next
    /// dictionary is trained from them at once, and none after it in this process.
    primed: bool,
    /// A training failed in this process: not tried again until the next.
    failed: bool,
}

impl Harness {
    /// Whether a dictionary is still to be trained for it in this process.
    fn trains(&self) -> bool {
        !self.failed && self.generations < GENERATIONS && self.next < TRAIN_AT.len()
    }

    /// Counts `record` as seen, and offers it as a sample when `sample` is set and a
    /// dictionary is still to be trained.
    fn note(&mut self, record: &[u8], sample: bool) {
        self.seen += record.len() as u64;
        if sample && self.trains() {
            self.samples.offer(record, MAX_SAMPLES);
        }
    }
}

/// `record` compressed with `encoder`'s dictionary (or none), when that makes it smaller:
/// with a dictionary, any saving; without, at least an eighth (a frame without one is not
/// worth its decompression for less).
fn compress_one<'a>(
    cctx: &mut CCtx<'static>,
    encoder: Option<&Encoder>,
    record: &'a [u8],
) -> Cow<'a, [u8]> {
    let mut out = Vec::with_capacity(zstd_safe::compress_bound(record.len()));
    let written = match encoder {
        Some(e) => cctx.compress_using_cdict(&mut out, record, &e.dict),
        None => cctx.compress(&mut out, record, LEVEL),
    };
    let worth = match (encoder, written) {
        (_, Err(_)) => false,
        (Some(_), Ok(n)) => n < record.len(),
        (None, Ok(n)) => n <= record.len() - record.len() / 8,
    };
    if worth {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(record)
    }
}

/// Whether a record of this length is compressed when compression is on.
fn compressible(record: &[u8]) -> bool {
    (MIN_COMPRESSED..=MAX_COMPRESSED).contains(&record.len())
}

/// How many of `records` come first so that they hold about half of the `total` bytes to be
/// compressed (those for which `compresses` is true: a long record stored as it is costs
/// nothing to either thread).
fn split_at_half<R: AsRef<[u8]>>(
    records: &[R],
    total: usize,
    compresses: impl Fn(&[u8]) -> bool,
) -> usize {
    let mut sum = 0;
    for (i, r) in records.iter().map(AsRef::as_ref).enumerate() {
        if sum >= total / 2 {
            return i;
        }
        if compresses(r) {
            sum += r.len();
        }
    }
    records.len()
}

/// Every `step`th record (its first [`SAMPLE_PREFIX`] bytes); when they pass their bound,
/// every other one is dropped and the step doubles, so they stay spread over all records seen.
pub(super) struct Samples {
    kept: Vec<Vec<u8>>,
    bytes: usize,
    step: u64,
    seen: u64,
}

impl Default for Samples {
    fn default() -> Samples {
        Samples {
            kept: Vec::new(),
            bytes: 0,
            step: 1,
            seen: 0,
        }
    }
}

impl Samples {
    /// Offers `record` to samples kept within `bound` bytes.
    pub(super) fn offer(&mut self, record: &[u8], bound: usize) {
        self.seen += 1;
        if !self.seen.is_multiple_of(self.step) {
            return;
        }
        let sample = record[..record.len().min(SAMPLE_PREFIX)].to_vec();
        self.bytes += sample.len();
        self.kept.push(sample);
        while self.bytes > bound && self.kept.len() > 1 {
            let mut i = 0;
            self.kept.retain(|_| {
                i += 1;
                i % 2 == 0
            });
            self.bytes = self.kept.iter().map(Vec::len).sum();
            self.step *= 2;
        }
    }
}

/// A dictionary being trained on its own thread.
struct Training {
    harness: String,
    /// From samples of a backlog: records of the harness wait for it (see [`Codec::prime`]).
    primed: bool,
    samples: usize,
    sample_bytes: usize,
    thread: JoinHandle<std::io::Result<Vec<u8>>>,
}

/// A dictionary trained and ready to be stored.
pub(super) struct Trained {
    /// The harness it is for.
    pub harness: String,
    /// Its id, as the frames compressed with it name it.
    pub id: u32,
    /// How many records it was trained from, and their bytes (each cut at [`SAMPLE_PREFIX`]).
    pub samples: usize,
    pub sample_bytes: usize,
    /// The dictionary.
    pub bytes: Vec<u8>,
}

/// Compression for the writing connection, decompression for every connection.
pub(super) struct Codec {
    compress: bool,
    cctx: Option<CCtx<'static>>,
    /// The helper thread's context, kept from one large batch to the next.
    helper_cctx: Option<CCtx<'static>>,
    harnesses: HashMap<String, Harness>,
    /// At most one trained from records seen, beside any number from backlogs' samples.
    training: Vec<Training>,
    /// Trained, and not yet stored (storing them failed for a passing reason).
    trained: Vec<Trained>,
    dctx: RefCell<Option<DCtx<'static>>>,
    ddicts: RefCell<HashMap<u32, DDict<'static>>>,
}

/// What [`Codec::take_trained`] waits for.
#[derive(Clone, Copy)]
pub(super) enum Wait<'a> {
    /// Nothing: only a dictionary already trained is taken.
    No,
    /// The dictionary being trained for this harness.
    For(&'a str),
    /// Any dictionary being trained.
    Any,
}

/// Why a stored record could not be read back.
#[derive(Debug, thiserror::Error)]
pub(super) enum DecodeError {
    #[error("it is compressed with dictionary {0}, which the archive does not hold")]
    MissingDictionary(u32),
    #[error("its zstd frame does not give its size")]
    UnknownSize,
    #[error("its zstd frame is damaged: {0}")]
    Frame(&'static str),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// A stored record that could not be read back: its frame is damaged, or names a dictionary
/// the archive does not hold.
#[derive(Debug, thiserror::Error)]
#[error("record {seq} cannot be read: {why}")]
struct Unreadable {
    seq: i64,
    why: DecodeError,
}

impl Default for Codec {
    fn default() -> Codec {
        Codec {
            compress: true,
            cctx: None,
            helper_cctx: None,
            harnesses: HashMap::new(),
            training: Vec::new(),
            trained: Vec::new(),
            dctx: RefCell::new(None),
            ddicts: RefCell::new(HashMap::new()),
        }
    }
}

impl Codec {
    /// Whether records written from now on are compressed.
    pub(super) fn set_compress(&mut self, compress: bool) {
        self.compress = compress;
    }

    /// `record` as it is to be stored for `harness`.
    #[cfg(test)]
    pub(super) fn encode<'a>(
        &mut self,
        conn: &Connection,
        harness: &str,
        record: &'a [u8],
    ) -> rusqlite::Result<Cow<'a, [u8]>> {
        self.encode_sampling(conn, harness, record, true)
    }

    /// Takes `lines`, spread over a backlog of `harness`'s transcripts about to be stored, as
    /// the samples of its next dictionary, trained once the commit that brought them ends.
    /// The dictionaries this process would have trained later from the records it stores are
    /// not trained: they would come from fewer parts of the backlog. Nothing changes when
    /// records are stored as they are, when the harness has had all its dictionaries, or when
    /// the lines are too few to train from.
    pub(super) fn prime(
        &mut self,
        conn: &Connection,
        harness: &str,
        lines: &[Vec<u8>],
    ) -> rusqlite::Result<()> {
        if !self.compress {
            return Ok(());
        }
        // A dictionary being trained, or waiting to be stored, is a generation too.
        let coming = (self.training.iter().map(|t| &t.harness))
            .chain(self.trained.iter().map(|t| &t.harness))
            .filter(|h| *h == harness)
            .count() as i64;
        let h = harness_in(&mut self.harnesses, conn, harness)?;
        if h.failed || h.generations + coming >= GENERATIONS {
            return Ok(());
        }
        let mut samples = Samples::default();
        for line in lines {
            samples.offer(line, MAX_SAMPLES);
        }
        if samples.bytes < MIN_SAMPLES {
            return Ok(());
        }
        h.samples = samples;
        h.primed = true;
        h.next = TRAIN_AT.len();
        Ok(())
    }

    /// `record` as it is to be stored for `harness`, offered as a sample for its next
    /// dictionary when `sample` is set.
    pub(super) fn encode_sampling<'a>(
        &mut self,
        conn: &Connection,
        harness: &str,
        record: &'a [u8],
        sample: bool,
    ) -> rusqlite::Result<Cow<'a, [u8]>> {
        if !(self.compress && compressible(record)) {
            return Ok(Cow::Borrowed(record));
        }
        let h = harness_in(&mut self.harnesses, conn, harness)?;
        h.note(record, sample);
        let cctx = self.cctx.get_or_insert_with(CCtx::create);
        Ok(compress_one(cctx, h.encoder.as_ref(), record))
    }

    /// Each of `records` as it is to be stored for `harness`, in order, each offered as a
    /// sample as by [`Codec::encode`]. When [`PARALLEL_BYTES`] or more of them are to be
    /// compressed, the first part of them is compressed on a helper thread that lives as long
    /// as the call, beside the rest on this one: in a backfill, compression is most of what the
    /// archive's writer does (BENCHMARKS.md), and the records' order in the archive is kept.
    pub(super) fn encode_batch<'a, R: AsRef<[u8]> + Sync>(
        &mut self,
        conn: &Connection,
        harness: &str,
        records: &'a [R],
    ) -> rusqlite::Result<Vec<Cow<'a, [u8]>>> {
        let on = self.compress;
        let compresses = move |r: &[u8]| on && compressible(r);
        let mut to_compress = 0;
        if records.iter().any(|r| compresses(r.as_ref())) {
            let h = harness_in(&mut self.harnesses, conn, harness)?;
            for r in (records.iter().map(AsRef::as_ref)).filter(|r| compresses(r)) {
                h.note(r, true);
                to_compress += r.len();
            }
        }
        let Some(h) = self.harnesses.get(harness).filter(|_| to_compress > 0) else {
            return Ok(records.iter().map(|r| Cow::Borrowed(r.as_ref())).collect());
        };
        let encoder = h.encoder.as_ref();
        let cctx = self.cctx.get_or_insert_with(CCtx::create);
        let each = |cctx: &mut CCtx<'static>, part: &'a [R]| -> Vec<Cow<'a, [u8]>> {
            (part.iter().map(AsRef::as_ref))
                .map(|r| match compresses(r) {
                    true => compress_one(cctx, encoder, r),
                    false => Cow::Borrowed(r),
                })
                .collect()
        };
        if to_compress < PARALLEL_BYTES {
            return Ok(each(cctx, records));
        }
        let half = split_at_half(records, to_compress, compresses);
        let helper_cctx = self.helper_cctx.get_or_insert_with(CCtx::create);
        let (first, rest) = records.split_at(half);
        let stored = std::thread::scope(|scope| {
            let helper = std::thread::Builder::new()
                .name("compressor".into())
                .spawn_scoped(scope, || each(helper_cctx, first));
            let later = each(cctx, rest);
            let earlier = match helper.map(|h| h.join()) {
                Ok(Ok(earlier)) => earlier,
                // No thread could be started (or it panicked): this one does its part too.
                Ok(Err(_)) | Err(_) => each(cctx, first),
            };
            earlier.into_iter().chain(later).collect()
        });
        Ok(stored)
    }

    /// Starts training a dictionary for each harness given a backlog's samples, each on a
    /// thread of its own, and for one harness that has gathered enough samples from the
    /// records it stored, when no such dictionary is being trained or waits to be stored.
    pub(super) fn start_training(&mut self) {
        // A harness's dictionaries are trained one after the other, so the primed one, stored
        // last, is the one its records are compressed with.
        let primed: Vec<String> = (self.harnesses.iter())
            .filter(|(name, h)| {
                h.primed && h.samples.bytes >= MIN_SAMPLES && !self.trains_now(name)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in primed {
            self.start_training_for(&name);
        }
        if self.training.iter().any(|t| !t.primed) || !self.trained.is_empty() {
            return;
        }
        let ready = self.harnesses.iter().find(|(name, h)| {
            h.trains()
                && h.seen >= TRAIN_AT[h.next]
                && h.samples.bytes >= MIN_SAMPLES
                && !self.trains_now(name)
        });
        if let Some((name, _)) = ready {
            self.start_training_for(&name.clone());
        }
    }

    /// Whether a dictionary for `harness` is being trained.
    fn trains_now(&self, harness: &str) -> bool {
        self.training.iter().any(|t| t.harness == harness)
    }

    /// Starts training `name`'s next dictionary from its samples.
    fn start_training_for(&mut self, name: &str) {
        let h = self
            .harnesses
            .get_mut(name)
            .expect("a harness with samples");
        let primed = std::mem::take(&mut h.primed);
        if !primed {
            h.next += 1;
        }
        // The samples stay: the next dictionary is trained from them and what comes after.
        let samples = match h.trains() {
            true => h.samples.kept.clone(),
            false => std::mem::take(&mut h.samples).kept,
        };
        let (count, bytes) = (samples.len(), samples.iter().map(Vec::len).sum::<usize>());
        let size = dictionary_size(bytes);
        let thread = std::thread::Builder::new()
            .name("dictionary".into())
            .spawn(move || zstd::dict::from_samples(&samples, size));
        match thread {
            Ok(thread) => self.training.push(Training {
                harness: name.to_owned(),
                primed,
                samples: count,
                sample_bytes: bytes,
                thread,
            }),
            Err(e) => {
                log::warn!("cannot start a thread to train {name}'s compression dictionary: {e}");
                h.failed = true;
            }
        }
    }

    /// Whether records of `harness` are to wait for the dictionary being trained for it from
    /// a backlog's samples (see [`Codec::prime`]).
    pub(super) fn awaits(&self, harness: &str) -> bool {
        self.compress && (self.training.iter()).any(|t| t.primed && t.harness == harness)
    }

    /// How many dictionaries are being trained or wait to be stored.
    pub(super) fn pending(&self) -> usize {
        self.training.len() + self.trained.len()
    }

    /// A dictionary kept to be stored, or one trained on its thread once it is done, or the
    /// one `wait` names, however long it takes. With [`Wait::For`], those kept wait.
    pub(super) fn take_trained(&mut self, wait: Wait) -> Option<Trained> {
        if !matches!(wait, Wait::For(_))
            && let Some(trained) = self.trained.pop()
        {
            return Some(trained);
        }
        let i = self.training.iter().position(|t| match wait {
            Wait::For(harness) => t.harness == harness,
            Wait::Any => true,
            Wait::No => t.thread.is_finished(),
        });
        let t = self.training.remove(i?);
        let result = t
            .thread
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the training thread panicked")));
        let failed = |why: String| {
            log::warn!(
                "no compression dictionary for {}: training on {} records ({} bytes) failed: {why}; \
                 its records are compressed without one",
                t.harness,
                t.samples,
                t.sample_bytes
            );
        };
        match result.map(|bytes| (zstd_safe::get_dict_id(&bytes), bytes)) {
            Ok((Some(id), bytes)) => Some(Trained {
                harness: t.harness,
                id: id.get(),
                samples: t.samples,
                sample_bytes: t.sample_bytes,
                bytes,
            }),
            Ok((None, _)) => {
                failed("it has no id".into());
                self.fail(&t.harness);
                None
            }
            Err(e) => {
                failed(e.to_string());
                self.fail(&t.harness);
                None
            }
        }
    }

    fn fail(&mut self, harness: &str) {
        if let Some(h) = self.harnesses.get_mut(harness) {
            h.failed = true;
        }
    }

    /// Puts a dictionary that is now stored in `dictionaries` in use for its harness.
    pub(super) fn install(&mut self, trained: &Trained) {
        let h = self.harnesses.entry(trained.harness.clone()).or_default();
        h.encoder = Some(Encoder {
            dict: CDict::create(&trained.bytes, LEVEL),
        });
        h.generations += 1;
    }

    /// Keeps a trained dictionary that could not be stored yet, for the next
    /// [`Codec::take_trained`].
    pub(super) fn keep_trained(&mut self, trained: Trained) {
        self.trained.push(trained);
    }

    /// Marks a trained dictionary that could not be stored as failed for its harness.
    pub(super) fn discard(&mut self, trained: &Trained) {
        self.fail(&trained.harness);
    }

    /// The record `stored`, the record numbered `seq`, holds; a record that cannot be read
    /// back is an error naming it, as SQLite's conversion errors are.
    pub(super) fn decode_record(
        &self,
        conn: &Connection,
        stored: &[u8],
        seq: i64,
    ) -> rusqlite::Result<Vec<u8>> {
        match self.decode(conn, stored) {
            Ok(record) => Ok(record.into_owned()),
            Err(why) => Err(rusqlite::Error::FromSqlConversionFailure(
                0,
                rusqlite::types::Type::Blob,
                Box::new(Unreadable { seq, why }),
            )),
        }
    }

    /// The record `stored` holds.
    pub(super) fn decode<'a>(
        &self,
        conn: &Connection,
        stored: &'a [u8],
    ) -> Result<Cow<'a, [u8]>, DecodeError> {
        if !stored.starts_with(&MAGIC) {
            return Ok(Cow::Borrowed(stored));
        }
        let size = match zstd_safe::get_frame_content_size(stored) {
            Ok(Some(size)) => size,
            _ => return Err(DecodeError::UnknownSize),
        };
        // Nothing longer than MAX_COMPRESSED is ever compressed: a larger size is damage (a
        // build that raised it would need a schema version, so that this one refuses it).
        if size > MAX_COMPRESSED as u64 {
            return Err(DecodeError::Frame(
                "its size is larger than any record compressed",
            ));
        }
        let mut out = Vec::with_capacity(size as usize);
        let mut dctx = self.dctx.borrow_mut();
        let dctx = dctx.get_or_insert_with(DCtx::create);
        let done = match zstd_safe::get_dict_id_from_frame(stored) {
            None => dctx.decompress(&mut out, stored),
            Some(id) => {
                let id = id.get();
                let mut ddicts = self.ddicts.borrow_mut();
                let ddict = match ddicts.entry(id) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => {
                        let bytes: Option<Vec<u8>> = conn
                            .query_row("SELECT bytes FROM dictionaries WHERE id = ?1", [id], |r| {
                                r.get(0)
                            })
                            .optional()?;
                        let bytes = bytes.ok_or(DecodeError::MissingDictionary(id))?;
                        e.insert(DDict::create(&bytes))
                    }
                };
                dctx.decompress_using_ddict(&mut out, stored, ddict)
            }
        };
        match done {
            Ok(n) if n as u64 == size => Ok(Cow::Owned(out)),
            Ok(_) => Err(DecodeError::Frame("it holds fewer bytes than it says")),
            Err(code) => Err(DecodeError::Frame(zstd_safe::get_error_name(code))),
        }
    }
}

/// How big a dictionary trained from `sample_bytes` of samples is made.
fn dictionary_size(sample_bytes: usize) -> usize {
    (sample_bytes / 10).clamp(4 << 10, MAX_DICTIONARY)
}

/// A dictionary for `harness` trained from `samples` on this thread; `None` when they are
/// too few to train from.
pub(super) fn train(harness: &str, samples: &Samples) -> std::io::Result<Option<Trained>> {
    if samples.bytes < MIN_SAMPLES {
        return Ok(None);
    }
    let bytes = zstd::dict::from_samples(&samples.kept, dictionary_size(samples.bytes))?;
    let id = zstd_safe::get_dict_id(&bytes)
        .ok_or_else(|| std::io::Error::other("the trained dictionary has no id"))?;
    Ok(Some(Trained {
        harness: harness.to_owned(),
        id: id.get(),
        samples: samples.kept.len(),
        sample_bytes: samples.bytes,
        bytes,
    }))
}

/// What `harnesses` keeps for `harness`, loaded from the archive the first time.
fn harness_in<'h>(
    harnesses: &'h mut HashMap<String, Harness>,
    conn: &Connection,
    harness: &str,
) -> rusqlite::Result<&'h mut Harness> {
    if !harnesses.contains_key(harness) {
        let loaded = load_harness(conn, harness)?;
        harnesses.insert(harness.to_owned(), loaded);
    }
    Ok(harnesses.get_mut(harness).expect("just inserted"))
}

/// The dictionaries of `harness` in `dictionaries`: how many, and the latest.
fn load_harness(conn: &Connection, harness: &str) -> rusqlite::Result<Harness> {
    let generations = conn.query_row(
        "SELECT count(*) FROM dictionaries WHERE harness = ?1",
        [harness],
        |r| r.get(0),
    )?;
    let latest: Option<Vec<u8>> = conn
        .query_row(
            "SELECT bytes FROM dictionaries WHERE harness = ?1
             ORDER BY trained_ms DESC, rowid DESC LIMIT 1",
            [harness],
            |r| r.get(0),
        )
        .optional()?;
    Ok(Harness {
        next: usize::from(latest.is_some()),
        encoder: latest.map(|bytes| Encoder {
            dict: CDict::create(&bytes, LEVEL),
        }),
        generations,
        ..Harness::default()
    })
}

/// Stores `trained` in `dictionaries`; false when its id is taken (by another dictionary,
/// which a record may already name).
pub(super) fn store(conn: &Connection, trained: &Trained, now_ms: i64) -> rusqlite::Result<bool> {
    let n = conn.execute(
        "INSERT OR IGNORE INTO dictionaries (id, harness, trained_ms, samples, sample_bytes, bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            trained.id,
            trained.harness,
            now_ms,
            trained.samples as i64,
            trained.sample_bytes as i64,
            trained.bytes
        ],
    )?;
    Ok(n == 1)
}

/// The dictionary a stored record names, if it is compressed with one.
pub(super) fn dictionary_of(stored: &[u8]) -> Option<u32> {
    match stored.starts_with(&MAGIC) {
        true => zstd_safe::get_dict_id_from_frame(stored).map(|id| id.get()),
        false => None,
    }
}

/// The length of the record `stored` holds, from its frame's header when it is compressed.
pub(super) fn record_len(stored: &[u8]) -> u64 {
    if stored.starts_with(&MAGIC)
        && let Ok(Some(size)) = zstd_safe::get_frame_content_size(stored)
    {
        return size;
    }
    stored.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection with the archive's schema.
    fn archive_schema() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        for sql in super::super::open::MIGRATIONS {
            conn.execute_batch(sql).unwrap();
        }
        conn
    }

    /// A record shaped like an agent's, different in every `i`.
    fn record(i: usize) -> Vec<u8> {
        format!(
            r#"{{"type":"assistant","sessionId":"5f1c","cwd":"/home/me/project","uuid":"{i:08x}","message":{{"role":"assistant","content":[{{"type":"text","text":"step {i}: reading src/main.rs line {} of the parser"}}]}},"timestamp":"2026-12-01T03:{:02}:00Z"}}"#,
            i * 7,
            i % 60
        )
        .into_bytes()
    }

    /// Encodes records of `harness` until a dictionary has been trained and stored.
    fn train(codec: &mut Codec, conn: &Connection, harness: &str) -> Trained {
        let mut i = 0;
        while codec.training.is_empty() {
            codec.encode(conn, harness, &record(i)).unwrap();
            codec.start_training();
            i += 1;
        }
        let trained = codec.take_trained(Wait::Any).expect("a dictionary");
        assert!(store(conn, &trained, 1).unwrap());
        codec.install(&trained);
        trained
    }

    #[test]
    fn a_large_batch_compressed_on_two_threads_is_what_one_thread_makes_in_the_same_order() {
        // Two codecs with the same dictionary: one compresses record by record, the other a
        // whole batch, over the threshold, part of it on its helper thread. Short records and
        // one too long to compress are stored as they are, wherever they fall.
        let conn = archive_schema();
        let mut one = Codec::default();
        let trained = train(&mut one, &conn, "codex");
        let mut both = Codec::default();
        both.install(&trained);
        let mut records: Vec<Vec<u8>> = (0..6000).map(record).collect();
        records.insert(10, br#"{"a":1}"#.to_vec());
        records.insert(
            4000,
            format!(r#"{{"long":"{}"}}"#, "x".repeat(MAX_COMPRESSED)).into(),
        );
        let bytes: usize = records.iter().map(Vec::len).sum();
        assert!(
            bytes > 2 * PARALLEL_BYTES,
            "{bytes} bytes is not a large batch"
        );
        let seen = |c: &Codec| c.harnesses["codex"].seen;
        let seen_before = (seen(&one), seen(&both));
        let batch = both.encode_batch(&conn, "codex", &records).unwrap();
        assert!(
            both.helper_cctx.is_some(),
            "the batch was not split between two threads"
        );
        assert_eq!(batch.len(), records.len());
        for (i, (r, stored)) in records.iter().zip(&batch).enumerate() {
            let alone = one.encode(&conn, "codex", r).unwrap();
            assert_eq!(stored[..], alone[..], "record {i}");
            assert_eq!(both.decode(&conn, stored).unwrap(), &r[..], "record {i}");
        }
        assert!(matches!(batch[10], Cow::Borrowed(_)) && matches!(batch[4000], Cow::Borrowed(_)));
        assert_eq!(seen(&both) - seen_before.1, seen(&one) - seen_before.0);
    }

    #[test]
    fn a_batch_is_split_at_half_of_what_is_to_be_compressed() {
        // A record stored as it is (here one over the compression limit) costs neither thread
        // anything, so it does not count towards a half.
        let mut records = vec![vec![b'x'; MAX_COMPRESSED + 1]];
        records.extend((0..10).map(|_| vec![b'y'; 100_000]));
        let compresses = |r: &[u8]| compressible(r);
        assert_eq!(split_at_half(&records, 1_000_000, compresses), 6);
        assert_eq!(split_at_half(&records[1..], 1_000_000, compresses), 5);
    }

    #[test]
    fn a_record_is_stored_compressed_only_when_that_pays_and_reads_back_the_same() {
        let conn = archive_schema();
        let mut codec = Codec::default();
        let repetitive = format!(r#"{{"text":"{}"}}"#, "all work and no play ".repeat(20));
        let stored = codec
            .encode(&conn, "claude-code", repetitive.as_bytes())
            .unwrap();
        assert!(stored.starts_with(&MAGIC) && stored.len() < repetitive.len() / 4);
        assert_eq!(record_len(&stored), repetitive.len() as u64);
        assert_eq!(codec.decode(&conn, &stored).unwrap(), repetitive.as_bytes());
        // Too short to gain anything, or nothing to gain: stored as it is.
        let short = br#"{"a":1}"#;
        assert!(matches!(
            codec.encode(&conn, "claude-code", short).unwrap(),
            Cow::Borrowed(_)
        ));
        let mut rng = fastrand::Rng::with_seed(7);
        let noise: String = (0..400).map(|_| rng.alphanumeric()).collect();
        let noise = format!(r#"{{"data":"{noise}"}}"#);
        let stored = codec
            .encode(&conn, "claude-code", noise.as_bytes())
            .unwrap();
        assert_eq!(stored, noise.as_bytes());
        assert_eq!(codec.decode(&conn, &stored).unwrap(), noise.as_bytes());
        // Switched off: nothing is compressed.
        codec.set_compress(false);
        let stored = codec
            .encode(&conn, "claude-code", repetitive.as_bytes())
            .unwrap();
        assert_eq!(stored, repetitive.as_bytes());
    }

    #[test]
    fn a_harness_gets_a_dictionary_of_its_own_and_its_records_name_it() {
        let conn = archive_schema();
        let mut codec = Codec::default();
        let trained = train(&mut codec, &conn, "codex");
        assert!(
            trained.sample_bytes >= MIN_SAMPLES,
            "{}",
            trained.sample_bytes
        );
        let r = record(1_000_000);
        let with = codec.encode(&conn, "codex", &r).unwrap();
        let id = zstd_safe::get_dict_id_from_frame(&with).map(|id| id.get());
        assert_eq!(id, Some(trained.id));
        // Another harness has none yet: its records are compressed without one.
        let without = codec.encode(&conn, "gemini-cli", &r).unwrap();
        assert_eq!(zstd_safe::get_dict_id_from_frame(&without), None);
        assert!(
            with.len() < without.len(),
            "{} {}",
            with.len(),
            without.len()
        );
        // Read by a codec that has never seen the dictionary: it is loaded from the archive.
        let reader = Codec::default();
        assert_eq!(reader.decode(&conn, &with).unwrap(), r);
        assert_eq!(reader.decode(&conn, &without).unwrap(), r);
        // A codec opened later uses the stored dictionary from its first record.
        let mut later = Codec::default();
        let again = later.encode(&conn, "codex", &r).unwrap();
        assert_eq!(again, with);
    }

    #[test]
    fn a_record_whose_dictionary_is_missing_or_whose_frame_is_cut_short_is_an_error() {
        let conn = archive_schema();
        let mut codec = Codec::default();
        let trained = train(&mut codec, &conn, "codex");
        let stored = codec
            .encode(&conn, "codex", &record(5))
            .unwrap()
            .into_owned();
        let mut cut = stored.clone();
        cut.truncate(stored.len() - 3);
        assert!(matches!(
            Codec::default().decode(&conn, &cut),
            Err(DecodeError::Frame(_))
        ));
        conn.execute("DELETE FROM dictionaries", []).unwrap();
        let err = Codec::default().decode(&conn, &stored).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "it is compressed with dictionary {}, which the archive does not hold",
                trained.id
            )
        );
    }

    #[test]
    fn a_backlogs_samples_train_its_harness_dictionary_at_once_and_the_last_of_the_process() {
        let conn = archive_schema();
        let mut codec = Codec::default();
        // Samples from all over a backlog, before any of its records is stored.
        let lines: Vec<Vec<u8>> = (0..4000).map(|i| record(i * 97)).collect();
        codec.prime(&conn, "claude-code", &lines).unwrap();
        codec.prime(&conn, "codex", &lines).unwrap();
        assert!(!codec.awaits("claude-code"));
        codec.start_training();
        // Both at once, each on its own thread; their records wait for them.
        assert!(codec.awaits("claude-code") && codec.awaits("codex"));
        assert!(!codec.awaits("gemini-cli"));
        let trained = codec.take_trained(Wait::For("codex")).unwrap();
        assert_eq!((trained.harness.as_str(), trained.samples), ("codex", 4000));
        assert!(store(&conn, &trained, 1).unwrap());
        codec.install(&trained);
        assert!(!codec.awaits("codex") && codec.awaits("claude-code"));
        let stored = codec
            .encode(&conn, "codex", &record(3))
            .unwrap()
            .into_owned();
        let id = zstd_safe::get_dict_id_from_frame(&stored).map(|id| id.get());
        assert_eq!(id, Some(trained.id));
        // Records stored after it train no dictionary that knows fewer parts of the backlog.
        let claude = codec.take_trained(Wait::Any).unwrap();
        assert_eq!(claude.harness, "claude-code");
        for i in 0..40_000 {
            codec.encode(&conn, "codex", &record(i)).unwrap();
        }
        codec.start_training();
        assert_eq!(codec.pending(), 0);
    }

    #[test]
    fn a_backlogs_dictionary_is_trained_after_one_in_flight_for_its_harness() {
        let conn = archive_schema();
        let mut codec = Codec::default();
        // A dictionary from the first records seen is being trained ...
        let mut i = 0;
        while codec.training.is_empty() {
            codec.encode(&conn, "codex", &record(i)).unwrap();
            codec.start_training();
            i += 1;
        }
        // ... when a backlog's samples come: theirs is trained next, and so stored last.
        let lines: Vec<Vec<u8>> = (0..4000).map(|i| record(i * 97)).collect();
        codec.prime(&conn, "codex", &lines).unwrap();
        codec.start_training();
        assert_eq!(codec.training.len(), 1);
        assert!(!codec.awaits("codex"));
        let first = codec.take_trained(Wait::Any).unwrap();
        codec.install(&first);
        codec.start_training();
        assert!(codec.awaits("codex"));
        let primed = codec.take_trained(Wait::For("codex")).unwrap();
        assert_eq!(primed.samples, 4000);
    }

    #[test]
    fn samples_are_ignored_when_records_are_stored_as_they_are_or_too_few_to_train_from() {
        let conn = archive_schema();
        let mut codec = Codec::default();
        codec
            .prime(&conn, "codex", &[record(1), record(2)])
            .unwrap();
        codec.start_training();
        assert_eq!(codec.pending(), 0);
        codec.set_compress(false);
        let lines: Vec<Vec<u8>> = (0..4000).map(record).collect();
        codec.prime(&conn, "codex", &lines).unwrap();
        codec.start_training();
        assert!(codec.pending() == 0 && !codec.awaits("codex"));
    }

    #[test]
    fn samples_stay_within_their_bound_and_spread_over_every_record_seen() {
        let mut samples = Samples::default();
        for i in 0..10_000 {
            samples.offer(&record(i), 64 << 10);
        }
        assert!(samples.bytes <= 64 << 10, "{}", samples.bytes);
        assert!(samples.step > 1);
        let last = samples.kept.last().unwrap();
        let first = samples.kept.first().unwrap();
        // The last kept is from the end of the stream, the first from its start.
        assert!(String::from_utf8_lossy(last).contains(&format!(
            "{:08x}",
            samples.seen - samples.seen % samples.step - 1
        )));
        assert!(String::from_utf8_lossy(first).contains(&format!("{:08x}", samples.step - 1)));
    }
}
