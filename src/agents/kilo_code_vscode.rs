//! Kilo Code's VS Code extension, in its releases forked from Roo Code: its task folders are
//! Roo Code's, and read by Roo Code's reader and parser (`agents::roo_code`).

use super::Agent;
use super::restore::{self, Restore};
use super::roo_code::{history, roo};
use super::session::Identified;
use crate::capture::harness::Formats;
use crate::domain::TextFormat;

/// Kilo Code's VS Code extension (its task folders, rewritten whole):
/// `globalStorage/kilocode.kilo-code/tasks/<id>/`, a session named by its folder.
pub(crate) static AGENT: Agent = Agent {
    name: "kilo-code-vscode",
    watcher: include_str!("../../watchers/kilo-code-vscode.toml"),
    formats: Formats {
        databases: &[],
        documents: &[TextFormat {
            name: "roo-history",
            derive: history,
        }],
    },
    parse: roo,
    identify: Identified::by_folder,
    // The extension reopens a task from its history; it has no command to name.
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};
