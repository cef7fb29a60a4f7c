//! The live tap: envelopes of committed records on stdout, never holding up the archive.

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded};
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// How many commits' worth of envelopes may wait for a slow reader before the tap is dropped.
const TAP_BACKLOG: usize = 256;

/// How long a stop waits for the tap to write what it holds to a reader that does not read.
const TAP_DRAIN: Duration = Duration::from_secs(1);

/// The envelopes of one commit, and the seq of its last record.
type Chunk = (Vec<u8>, i64);

/// A handle on the tap thread. Sending never blocks: a full backlog drops the tap with a
/// warning, and archiving goes on; what the tap missed is in the archive.
pub struct Tap {
    tx: Option<Sender<Chunk>>,
    /// Disconnected when the tap thread ends.
    finished: Receiver<()>,
    /// The last seq the tap thread has written out (0 before the first).
    written: Arc<AtomicI64>,
}

impl Tap {
    /// Starts a thread that writes envelopes to stdout.
    pub fn stdout() -> io::Result<Tap> {
        let (tx, rx) = bounded::<Chunk>(TAP_BACKLOG);
        let (finishing, finished) = bounded::<()>(0);
        let written = Arc::new(AtomicI64::new(0));
        let progress = Arc::clone(&written);
        std::thread::Builder::new()
            .name("tap".into())
            .spawn(move || {
                let _finishing = finishing;
                let mut out = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
                if let Err(e) = copy_out(&rx, &mut out, &progress) {
                    log::warn!("tap stopped: cannot write to stdout ({e}); archiving continues");
                }
            })?;
        Ok(Tap {
            tx: Some(tx),
            finished,
            written,
        })
    }

    /// Hands the envelopes of one commit (ending at `last_seq`) to the tap thread.
    pub fn send(&mut self, envelopes: Vec<u8>, last_seq: i64) {
        let Some(tx) = &self.tx else {
            return;
        };
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
/// sees each record at once without a write per record under load.
fn copy_out(rx: &Receiver<Chunk>, out: &mut impl Write, written: &AtomicI64) -> io::Result<()> {
    let mut pending = 0;
    loop {
        let (chunk, last) = match rx.try_recv() {
            Ok(c) => c,
            Err(TryRecvError::Empty) => {
                out.flush()?;
                written.store(pending, Ordering::Relaxed);
                match rx.recv() {
                    Ok(c) => c,
                    Err(_) => return Ok(()),
                }
            }
            Err(TryRecvError::Disconnected) => {
                out.flush()?;
                written.store(pending, Ordering::Relaxed);
                return Ok(());
            }
        };
        out.write_all(&chunk)?;
        pending = last;
    }
}

impl Drop for Tap {
    /// Lets the tap thread write what it holds, and waits for it a little: a reader that does
    /// not read must not keep the daemon from stopping (the thread ends with the process).
    fn drop(&mut self) {
        self.tx = None;
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
