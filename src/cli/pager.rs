//! Paging a command's output on a terminal through `$PAGER`, as git does: `less` with
//! `LESS=FRX` unless the person chose otherwise (one screen or less is printed and left on
//! the screen; colours pass through).

use std::io::{self, Write};
use std::process::{Child, ChildStdin, Command, Stdio};

/// A pager that the output is written into, until [`Pager::finish`].
pub(crate) struct Pager {
    child: Child,
    input: ChildStdin,
}

impl Pager {
    /// Starts `$TRANSCRIPT_SYNC_PAGER`, else `$PAGER`, else `less` where it is installed,
    /// through `sh -c` (a pager's setting may hold arguments). `None` when the setting is empty or `cat` (no paging), or
    /// when the pager cannot be started (a warning says why; the output then goes to stdout).
    pub(crate) fn start() -> Option<Pager> {
        let chosen =
            match std::env::var("TRANSCRIPT_SYNC_PAGER").or_else(|_| std::env::var("PAGER")) {
                Ok(chosen) => chosen,
                // Without a choice and without less, the terminal is the pager.
                Err(_) if on_path("less") => "less".to_owned(),
                Err(_) => return None,
            };
        if chosen.trim().is_empty() || chosen.trim() == "cat" {
            return None;
        }
        let mut command = Command::new("sh");
        command.args(["-c", &chosen]).stdin(Stdio::piped());
        if std::env::var_os("LESS").is_none() {
            command.env("LESS", "FRX");
        }
        match command.spawn() {
            Ok(mut child) => {
                let input = child.stdin.take().expect("the pager's stdin was piped");
                Some(Pager { child, input })
            }
            Err(e) => {
                log::warn!("cannot start the pager {chosen:?}: {e}; writing to the terminal");
                None
            }
        }
    }

    /// Where the output goes.
    pub(crate) fn input(&mut self) -> &mut impl Write {
        &mut self.input
    }

    /// Closes the pager's input and waits for the person to leave it.
    pub(crate) fn finish(self) -> io::Result<()> {
        let Pager { mut child, input } = self;
        drop(input);
        child.wait().map(drop)
    }
}

/// Whether `program` is an executable file in a directory of `PATH`.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| {
        (dir.join(program).metadata())
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}
