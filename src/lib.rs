//! transcript-sync
pub mod archive;
pub mod cli;
pub mod config;
pub mod discover;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod fingerprint;
pub mod harness;
pub mod lock;
pub mod open;
pub mod read;
pub mod record;
pub mod seed;
pub mod sources;
pub mod status;
