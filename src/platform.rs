//! The platform under every stage: system calls beyond std's (`sys`), a tokenizer and a
//! ranking for SQLite's full-text index and one process-wide setting of SQLite's, through its
//! C API (`fts5`; these two are the only modules with `unsafe` outside the SIMD code), the home
//! and XDG directories, log formatting, and the doorbell the daemon's threads wait on.

pub(crate) mod doorbell;
pub(crate) mod fts5;
pub(crate) mod home;
pub(crate) mod logging;
pub(crate) mod sys;
pub(crate) mod time;
