//! The live tap: envelopes of committed records on stdout, never holding up the archive. It is
//! a subscriber of the archive's [`Hub`](crate::archive::follow::Hub) that starts "now" and, rather
//! than catch up, is dropped when stdout is not read fast enough.

use crate::archive::envelope::Envelope;
use crate::archive::follow::{Offer, Published, RecordAt, Subscriber};
use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded};
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

/// How many commits' worth of envelopes may wait for a slow reader before the tap is dropped.
const TAP_BACKLOG: usize = 256;

/// How long a stop waits for the tap to write what it holds to a reader that does not read.
const TAP_DRAIN: Duration = Duration::from_secs(1);

/// The envelopes of one commit, in pieces, and the seq of its last record.
type Chunk = (Vec<Piece>, i64);

/// A handle on the tap thread. Sending never blocks: a full backlog drops the tap with a
/// warning, and archiving goes on; what the tap missed is in the archive.
///
/// When stdout is a pipe that its reader has emptied and nothing waits for the thread, the
/// envelopes are written at once by the sender instead, saving a thread hand-off: a write
/// that fits an empty pipe cannot block.
pub struct Tap {
    tx: Option<Sender<Chunk>>,
    /// Disconnected when the tap thread ends.
    finished: Receiver<()>,
    /// The last seq written out (0 before the first).
    written: Arc<AtomicI64>,
    /// Chunks handed to the thread and not yet flushed by it. Only this handle sends, so
    /// when it reads 0 nothing it sent before is still buffered, and a direct write keeps
    /// the order.
    queued: Arc<AtomicUsize>,
    /// stdout's pipe, when it is one.
    pipe: Option<StdoutPipe>,
}

impl Tap {
    /// Starts a thread that writes envelopes to stdout.
    pub fn stdout() -> io::Result<Tap> {
        let (tx, rx) = bounded::<Chunk>(TAP_BACKLOG);
        let (finishing, finished) = bounded::<()>(0);
        let written = Arc::new(AtomicI64::new(0));
        let queued = Arc::new(AtomicUsize::new(0));
        let (progress, in_flight) = (Arc::clone(&written), Arc::clone(&queued));
        std::thread::Builder::new()
            .name("tap".into())
            .spawn(move || {
                let _finishing = finishing;
                // Unbuffered: this writer and direct writes share the file descriptor.
                let mut out = io::BufWriter::with_capacity(64 * 1024, RawStdout);
                if let Err(e) = copy_out(&rx, &mut out, &progress, &in_flight) {
                    warn_stopped(&e);
                }
            })?;
        Ok(Tap {
            tx: Some(tx),
            finished,
            written,
            queued,
            pipe: StdoutPipe::detect(),
        })
    }

    /// Writes the envelopes of one commit (ending at `last_seq`) at once if that cannot
    /// block, else hands them to the tap thread.
    fn send(&mut self, envelopes: Vec<Piece>, last_seq: i64) {
        if self.tx.is_none() {
            return;
        }
        let len = envelopes.iter().map(|p| p.bytes().len()).sum();
        let direct = self.queued.load(Ordering::Acquire) == 0
            && self.pipe.is_some_and(|p| p.takes_at_once(len));
        if direct {
            match write_pieces(&mut RawStdout, &envelopes) {
                Ok(()) => self.written.store(last_seq, Ordering::Relaxed),
                Err(e) => {
                    warn_stopped(&e);
                    self.tx = None;
                }
            }
            return;
        }
        self.queue(envelopes, last_seq);
    }

    fn queue(&mut self, envelopes: Vec<Piece>, last_seq: i64) {
        let Some(tx) = &self.tx else {
            return;
        };
        self.queued.fetch_add(1, Ordering::AcqRel);
        match tx.try_send((envelopes, last_seq)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                let n = self.written.load(Ordering::Relaxed);
                log::warn!(
                    "tap dropped: stdout is not read fast enough; archiving continues. The tap \
                     wrote out records up to seq {n}; the rest are in the archive \
                     (transcript-sync export --since-seq {n})"
                );
                self.tx = None;
            }
            // The tap thread has already said why it stopped.
            Err(TrySendError::Disconnected(_)) => self.tx = None,
        }
    }
}

/// Writes chunks until the channel closes, flushing whenever nothing is waiting, so a reader
/// sees each record at once without a write per record under load. Chunks count as done
/// (`queued`) only once flushed.
fn copy_out(
    rx: &Receiver<Chunk>,
    out: &mut impl Write,
    written: &AtomicI64,
    queued: &AtomicUsize,
) -> io::Result<()> {
    let (mut last_seq, mut unflushed) = (0, 0);
    let flush = |out: &mut dyn Write, last_seq: i64, unflushed: &mut usize| {
        out.flush()?;
        // With nothing written since the last flush, a direct write may have moved `written`
        // past this thread's last seq.
        if *unflushed > 0 {
            written.store(last_seq, Ordering::Relaxed);
            queued.fetch_sub(std::mem::take(unflushed), Ordering::AcqRel);
        }
        io::Result::Ok(())
    };
    loop {
        let (chunk, last) = match rx.try_recv() {
            Ok(c) => c,
            Err(TryRecvError::Empty) => {
                flush(out, last_seq, &mut unflushed)?;
                match rx.recv() {
                    Ok(c) => c,
                    Err(_) => return Ok(()),
                }
            }
            Err(TryRecvError::Disconnected) => return flush(out, last_seq, &mut unflushed),
        };
        write_pieces(out, &chunk)?;
        (last_seq, unflushed) = (last, unflushed + 1);
    }
}

/// Said once, by whichever writer met the error first; the tap writes nothing after it.
fn warn_stopped(e: &io::Error) {
    log::warn!("tap stopped: cannot write to stdout ({e}); archiving continues");
}

fn write_pieces(out: &mut impl Write, pieces: &[Piece]) -> io::Result<()> {
    pieces.iter().try_for_each(|p| out.write_all(p.bytes()))
}

impl Subscriber for Tap {
    /// Until it writes something, what the tap missed if it is dropped starts after `after`.
    fn subscribed(&mut self, after: i64) {
        self.written.store(after, Ordering::Relaxed);
    }

    /// Renders a commit's envelopes and writes or queues them; a tap that has stopped (its
    /// reader is gone or too slow) is let go.
    fn offer(&mut self, published: &Arc<Published>) -> Offer {
        if self.tx.is_none() {
            return Offer::LetGo;
        }
        let mut pieces = Pieces::default();
        let mut last = 0;
        for (at, envelope) in published.entries() {
            pieces.push_envelope(published, at, &envelope);
            last = envelope.seq;
        }
        if !pieces.is_empty() {
            self.send(pieces.into_vec(), last);
        }
        match self.tx {
            Some(_) => Offer::Taken,
            None => Offer::LetGo,
        }
    }
}

/// Records longer than this are written from the published commit itself rather than copied
/// into the tap's buffer.
const OWN_PIECE: usize = 64 * 1024;

/// A piece of a commit's envelopes: bytes of the tap's own, or a long record's bytes where
/// the published commit holds them.
enum Piece {
    Bytes(Vec<u8>),
    Record(Arc<Published>, RecordAt),
}

impl Piece {
    fn bytes(&self) -> &[u8] {
        match self {
            Piece::Bytes(bytes) => bytes,
            Piece::Record(published, at) => published.record(*at),
        }
    }
}

/// The bytes of a commit's envelopes, as pieces: small envelopes share one buffer, a long
/// record is a piece of its own.
#[derive(Default)]
struct Pieces {
    done: Vec<Piece>,
    current: Vec<u8>,
}

impl Pieces {
    /// Appends `envelope`, the record at `at` of `published`.
    fn push_envelope(&mut self, published: &Arc<Published>, at: RecordAt, envelope: &Envelope) {
        let record = envelope.record;
        let mut head = Vec::new();
        (Envelope {
            record: &[],
            ..*envelope
        })
        .write_to(&mut head)
        .expect("writing to a Vec cannot fail");
        // `head` ends with the closing `}` and the newline; the record goes before them.
        let tail = head.split_off(head.len() - 2);
        self.current.extend_from_slice(&head);
        if record.len() > OWN_PIECE {
            self.done
                .push(Piece::Bytes(std::mem::take(&mut self.current)));
            self.done.push(Piece::Record(Arc::clone(published), at));
        } else {
            self.current.extend_from_slice(record);
        }
        self.current.extend_from_slice(&tail);
    }

    fn is_empty(&self) -> bool {
        self.done.is_empty() && self.current.is_empty()
    }

    fn into_vec(mut self) -> Vec<Piece> {
        if !self.current.is_empty() {
            self.done.push(Piece::Bytes(self.current));
        }
        self.done
    }
}

/// File descriptor 1, written without std's stdout buffer, so that the tap thread and direct
/// writes cannot reorder each other's bytes.
struct RawStdout;

impl Write for RawStdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        crate::platform::sys::write_stdout(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// stdout as a pipe: its capacity, to tell whether a write fits at once.
#[derive(Clone, Copy, Debug)]
struct StdoutPipe {
    capacity: usize,
}

impl StdoutPipe {
    /// `Some` when fd 1 is a pipe whose capacity can be read (Linux).
    fn detect() -> Option<StdoutPipe> {
        crate::platform::sys::stdout_pipe_capacity().map(|capacity| StdoutPipe { capacity })
    }

    /// True when the pipe is empty (its reader has taken everything) and `len` bytes fit in
    /// it with two pages to spare, so writing them cannot block.
    fn takes_at_once(self, len: usize) -> bool {
        crate::platform::sys::stdout_unread().is_ok_and(|unread| unread == 0)
            && len + 2 * 4096 <= self.capacity
    }
}

impl Drop for Tap {
    /// Lets the tap thread write what it holds, and waits for it a little: a reader that does
    /// not read must not keep the daemon from stopping (the thread ends with the process). A
    /// tap that stopped already (dropped, or its pipe closed) said so then, and is not waited
    /// for: its thread may be stuck writing to a reader that does not read.
    fn drop(&mut self) {
        if self.tx.take().is_none() {
            return;
        }
        if let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
            self.finished.recv_timeout(TAP_DRAIN)
        {
            let n = self.written.load(Ordering::Relaxed);
            log::warn!(
                "tap: stdout is not being read; stopping with records after seq {n} unwritten \
                 (they are in the archive)"
            );
        }
    }
}
