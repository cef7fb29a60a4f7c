//! The archive writer: applies the engine's commits in order, then shows their records to the
//! tap, so nothing is printed before it is durable.

use crate::archive::{Archive, Commit};
use crate::engine::Committer;
use crate::envelope::Envelope;
use crate::error::{Error, Result};
use crate::tap::Tap;
use crossbeam_channel::{Receiver, Sender, bounded};
use std::thread::JoinHandle;

/// How many commits may wait for the writer. The engine blocks when they are all taken, so a
/// slow disk slows reading instead of growing memory (each commit holds at most one batch).
const WRITER_BACKLOG: usize = 4;

/// Owns the archive's write connection.
pub struct ArchiveWriter {
    archive: Archive,
    tap: Option<Tap>,
}

impl ArchiveWriter {
    /// A writer on `archive`, showing committed records to `tap` if given.
    pub fn new(archive: Archive, tap: Option<Tap>) -> ArchiveWriter {
        ArchiveWriter { archive, tap }
    }

    /// Commits `commit`, then hands its records to the tap in `seq` order.
    pub fn write(&mut self, commit: &Commit) -> Result<()> {
        let seqs = self.archive.apply(commit)?;
        let Some(tap) = &mut self.tap else {
            return Ok(());
        };
        let mut out = Vec::new();
        let mut seqs = seqs.into_iter();
        let mut last = 0;
        for batch in commit.records() {
            for (r, seq) in batch.records.iter().zip(&mut seqs) {
                let envelope = Envelope {
                    seq,
                    harness: &batch.harness,
                    path: &batch.path,
                    generation: batch.generation,
                    offset: r.offset,
                    record: &r.bytes,
                };
                envelope
                    .write_to(&mut out)
                    .expect("writing to a Vec cannot fail");
                last = seq;
            }
        }
        if !out.is_empty() {
            tap.send(out, last);
        }
        Ok(())
    }

    /// Moves the writer to a thread of its own; commits sent to the returned committer are
    /// applied there in order. The thread ends when the committer is dropped (after applying
    /// everything sent) or on the first archive error, which it returns; `gone` disconnects
    /// when it ends, so a loop that is not committing notices too.
    pub fn spawn(mut self) -> std::io::Result<WriterThread> {
        let (tx, rx) = bounded::<ToWriter>(WRITER_BACKLOG);
        let (alive, gone) = bounded::<()>(0);
        let handle = std::thread::Builder::new()
            .name("archive-writer".into())
            .spawn(move || {
                let _alive = alive;
                for msg in rx {
                    match msg {
                        ToWriter::Commit(commit) => self.write(&commit)?,
                        ToWriter::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
                Ok(())
            })?;
        Ok(WriterThread {
            committer: ChannelCommitter(tx),
            handle,
            gone,
        })
    }
}

/// The archive writer on its own thread.
pub struct WriterThread {
    /// Where the engine sends its commits.
    pub committer: ChannelCommitter,
    /// The thread; joins to its result.
    pub handle: JoinHandle<Result<()>>,
    /// Disconnects when the thread ends.
    pub gone: Receiver<()>,
}

impl Committer for ArchiveWriter {
    fn submit(&mut self, commit: Commit) -> Result<()> {
        self.write(&commit)
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}

/// What the writer thread receives.
enum ToWriter {
    Commit(Commit),
    /// Answered once every earlier commit is applied.
    Flush(Sender<()>),
}

/// Sends commits to a writer thread.
pub struct ChannelCommitter(Sender<ToWriter>);

impl Committer for ChannelCommitter {
    fn submit(&mut self, commit: Commit) -> Result<()> {
        self.0
            .send(ToWriter::Commit(commit))
            .map_err(|_| Error::WriterStopped)
    }

    fn flush(&mut self) -> Result<()> {
        let (done, applied) = bounded(1);
        self.0
            .send(ToWriter::Flush(done))
            .map_err(|_| Error::WriterStopped)?;
        applied.recv().map_err(|_| Error::WriterStopped)
    }
}
