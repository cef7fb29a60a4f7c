//! Consumers: everything that follows the archive's log of committed records. The tap
//! (`--sink stdout`), the subscribers of the daemon's socket, the sinks that ship records off
//! the machine and the session index each read from a seq, then follow live commits;
//! `redact` replaces secrets in what leaves.

pub(crate) mod redact;
pub(crate) mod sessions;
pub(crate) mod ship;
pub(crate) mod socket;
pub(crate) mod tap;
