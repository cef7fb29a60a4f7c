//! The live tap: envelopes of committed records on stdout, never holding up the archive.

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError, bounded};
use std::io::{self, Write};
use std::time::Duration;

/// How many commits' worth of envelopes may wait for a slow reader before the tap is dropped.
const TAP_BACKLOG: usize = 256;

/// How long a stop waits for the tap to write what it holds to a reader that does not read.
const TAP_DRAIN: Duration = Duration::from_secs(1);

/// A handle on the tap thread. Sending never blocks: a full backlog drops the tap with a
/// warning, and archiving goes on; what the tap missed is in the archive.
pub struct Tap {
    tx: Option<Sender<Vec<u8>>>,
    /// Disconnected when the tap thread ends.
    finished: Receiver<()>,
    /// The last seq handed to the tap thread.
    last_seq: i64,
}

impl Tap {
    /// Starts a thread that writes envelopes to stdout.
    pub fn stdout() -> Tap {
        let (tx, rx) = bounded::<Vec<u8>>(TAP_BACKLOG);
        let (finishing, finished) = bounded::<()>(0);
        std::thread::Builder::new()
            .name("tap".into())
            .spawn(move || {
                let _finishing = finishing;
                let mut out = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
                loop {
                    let chunk = match rx.try_recv() {
                        Ok(chunk) => chunk,
                        Err(TryRecvError::Empty) => {
                            // Nothing waiting: hand what was written to the reader now.
                            if let Err(e) = out.flush() {
                                return closed(&e);
                            }
                            match rx.recv() {
                                Ok(chunk) => chunk,
                                Err(_) => return,
                            }
                        }
                        Err(TryRecvError::Disconnected) => {
                            let _ = out.flush();
                            return;
                        }
                    };
                    if let Err(e) = out.write_all(&chunk) {
                        return closed(&e);
                    }
                }
            })
            .expect("spawning the tap thread");
        Tap {
            tx: Some(tx),
            finished,
            last_seq: 0,
        }
    }

    /// Hands the envelopes of one commit (ending at `last_seq`) to the tap thread.
    pub fn send(&mut self, envelopes: Vec<u8>, last_seq: i64) {
        let Some(tx) = &self.tx else {
            return;
        };
        match tx.try_send(envelopes) {
            Ok(()) => self.last_seq = last_seq,
            Err(TrySendError::Full(_)) => {
                log::warn!(
                    "tap dropped: stdout is not read fast enough; archiving continues, and records \
                     after seq {0} are in the archive (transcript-sync export --since-seq {0})",
                    self.last_seq
                );
                self.tx = None;
            }
            // The tap thread has already said why it stopped.
            Err(TrySendError::Disconnected(_)) => self.tx = None,
        }
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
            log::warn!("tap: stdout is not being read; stopping without writing the rest");
        }
    }
}

fn closed(e: &io::Error) {
    log::warn!("tap stopped: cannot write to stdout ({e}); archiving continues");
}
