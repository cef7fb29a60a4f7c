//! What transcript-sync's integration tests (`tests/`) and benchmarks (`benches/`) share,
//! each written once.
//!
//! Driving the real binary: [`sandbox`] gives it a temp directory with an archive, a watched
//! root and a HOME, runs its commands there and reads back what they wrote; [`daemon`] starts
//! `transcript-sync run`, keeps its log where a caller can wait for a line, reads its tap onto
//! a channel, signals and stops it. The binary's path comes from the caller
//! (`env!("CARGO_BIN_EXE_transcript-sync")` is only defined in the main package's tests and
//! benches): inside the `Command` it hands to [`daemon`], as a [`sandbox::Package`] for
//! [`sandbox`].
//!
//! Real agents: [`agents`] installs a pinned coding agent from npm and runs the scripted
//! model it is pointed at.
//!
//! What the daemon talks to: [`postgres`] (a cluster of the caller's own), [`collector`]
//! (an HTTP server receiving sink batches), [`ports`] (free loopback ports for them).
//!
//! Measuring: [`cpu`] and [`procfs`] (what the kernel says about a process), [`stats`] (the
//! one quantile definition), [`machine`] (what the numbers were taken on), [`env`] (a
//! benchmark's knobs).
//!
//! Inputs: [`records`] (deterministic transcript-shaped records), [`corpus`] (synthetic
//! transcript trees built from them, cached under `target/bench/corpus/`), [`corpus_lines`]
//! (such a corpus read into memory), [`appends`] (the indexed records the live-latency
//! benchmarks append).

pub mod agents;
pub mod appends;
pub mod browser;
pub mod collector;
pub mod corpus;
pub mod corpus_lines;
pub mod cpu;
pub mod daemon;
pub mod env;
pub mod machine;
pub mod ports;
pub mod postgres;
pub mod procfs;
pub mod records;
pub mod sandbox;
pub mod stats;
pub mod words;
