//! Kilo Code's CLI: a fork of OpenCode that keeps its sessions in a database of OpenCode's
//! tables (`kilo/kilo.db`), read by OpenCode's reader and parser.

use super::Agent;
use super::opencode::{self, DATABASE};
use super::restore::{self, Restore};
use super::session::Identified;
use crate::capture::harness::Formats;

/// Kilo Code's CLI.
pub(crate) static AGENT: Agent = Agent {
    name: "kilo-code",
    watcher: include_str!("../../watchers/kilo-code.toml"),
    formats: Formats {
        databases: &[&DATABASE],
        documents: &[],
    },
    parse: opencode::opencode,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};
