//! Turns at writing the archive between the threads of one `run`: the archive writer, which
//! commits records, goes first; a consumer that writes rows of its own in the archive (a
//! sink's cursor and state) takes the turns the writer leaves. (The session index writes a
//! file of its own, and takes no turn.)
//!
//! SQLite lets one connection write at a time and makes the others poll with growing sleeps
//! (up to 100 ms each, until the busy timeout): a consumer that commits back to back can keep
//! the writer polling until its timeout ends the archive. Taking turns here, before SQLite's
//! lock, makes the wait a wake-up, and gives records priority.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// The turn-taking of one process's archive writers.
#[derive(Debug, Default)]
pub struct WriteTurn {
    busy: Mutex<bool>,
    freed: Condvar,
    /// Record commits waiting for the turn.
    records_waiting: AtomicUsize,
}

/// A turn at writing; the next writer goes when it is dropped.
pub struct Turn<'a> {
    turn: &'a WriteTurn,
}

impl WriteTurn {
    /// The turn for a commit of records: waits only for a transaction in progress.
    pub fn for_records(&self) -> Turn<'_> {
        self.records_waiting.fetch_add(1, Ordering::AcqRel);
        let mut busy = self.lock();
        while *busy {
            busy = self.freed.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        *busy = true;
        self.records_waiting.fetch_sub(1, Ordering::AcqRel);
        Turn { turn: self }
    }

    /// The turn for a consumer's transaction: waits while records are being committed or wait
    /// to be.
    pub fn for_consumer(&self) -> Turn<'_> {
        let mut busy = self.lock();
        while *busy || self.records_wanted() {
            busy = self.freed.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        *busy = true;
        Turn { turn: self }
    }

    /// True while a commit of records waits for the turn: a consumer holding it should end
    /// its transaction.
    pub fn records_wanted(&self) -> bool {
        self.records_waiting.load(Ordering::Acquire) > 0
    }

    fn lock(&self) -> MutexGuard<'_, bool> {
        // The flag stays meaningful if a holder panicked.
        self.busy.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self.turn.lock() = false;
        self.turn.freed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::mpsc::channel;

    #[test]
    fn a_waiting_record_commit_goes_before_a_waiting_consumer() {
        let turns = Arc::new(WriteTurn::default());
        let held = turns.for_records();
        let (order_tx, order) = channel();
        let consumer = {
            let (turns, order_tx) = (Arc::clone(&turns), order_tx.clone());
            std::thread::spawn(move || {
                let _turn = turns.for_consumer();
                order_tx.send("consumer").unwrap();
            })
        };
        let records = {
            let turns = Arc::clone(&turns);
            std::thread::spawn(move || {
                let _turn = turns.for_records();
                order_tx.send("records").unwrap();
            })
        };
        // The record commit is waiting once the counter says so; the consumer may or may not
        // be waiting yet, and must go second either way.
        while !turns.records_wanted() {
            std::thread::yield_now();
        }
        drop(held);
        records.join().unwrap();
        consumer.join().unwrap();
        let order: Vec<_> = order.try_iter().collect();
        assert_eq!(order, ["records", "consumer"]);
    }
}
