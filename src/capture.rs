//! Capture: which transcripts there are and when they change. `harness` turns the watcher
//! definitions into roots, `discover` lists the transcript files under them, and `watch`
//! turns filesystem events into dirty paths for the engine.

pub(crate) mod discover;
pub(crate) mod harness;
pub(crate) mod watch;
