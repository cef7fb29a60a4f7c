//! Kilo Code's VS Code extension, in its releases forked from Roo Code: its task folders are
//! Roo Code's, and read by Roo Code's reader and parser (`agents::roo_code`).

use super::Agent;
use super::roo_code::reading_roos_tasks;

/// Kilo Code's VS Code extension (its task folders, rewritten whole):
/// `globalStorage/kilocode.kilo-code/tasks/<id>/`, a session named by its folder.
pub(crate) static AGENT: Agent = reading_roos_tasks(
    "kilo-code-vscode",
    include_str!("../../watchers/kilo-code-vscode.toml"),
);
