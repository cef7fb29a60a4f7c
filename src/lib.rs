//! transcript-sync
pub mod error;
pub mod fingerprint;
pub mod read;
pub mod record;
pub mod archive;
pub mod harness;
pub mod discover;
pub mod lock;
pub mod config;
pub mod seed;
pub mod open;
pub mod sources;
pub mod engine;
pub mod envelope;
pub mod status;
pub mod cli;
