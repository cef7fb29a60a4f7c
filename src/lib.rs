//! transcript-sync
pub mod error;
pub mod fingerprint;
pub mod read;
pub mod record;
pub mod archive;
