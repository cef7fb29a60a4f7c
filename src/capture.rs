//! Capture: which transcripts there are and when they change. `harness` turns the watcher
//! definitions into roots (`editors`: where the VS Code family keeps an extension's storage), `discover` lists the transcript files under them, and `watch`
//! turns filesystem events into dirty paths for the engine.

pub(crate) mod discover;
pub(crate) mod editors;
pub(crate) mod harness;
pub(crate) mod watch;
