//! Running `systemctl` and `launchctl`: capture their output, and turn a failure into an error
//! that names the command, its exit status, its stderr and the fix.

use crate::error::{Error, Result};
use std::fmt;
use std::process::{Command, Stdio};

/// A command line of a service manager's client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cmd {
    /// The program, looked up on `PATH`.
    pub program: &'static str,
    /// Its arguments.
    pub args: Vec<String>,
}

/// What a command printed, once it exited 0.
#[derive(Debug)]
pub(crate) struct Ran {
    /// Its stdout, lossily decoded.
    pub stdout: String,
}

impl Cmd {
    /// `program` with `args`.
    pub(crate) fn new(program: &'static str, args: &[&str]) -> Cmd {
        Cmd {
            program,
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// Runs the command to its end. `Ok` when it exits 0; otherwise `Error::ServiceCommand`
    /// with its status, stderr and a fix, or `Error::ServiceCommandSpawn` when it cannot start.
    pub(crate) fn run(&self) -> Result<Ran> {
        let out = Command::new(self.program)
            .args(&self.args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| Error::ServiceCommandSpawn {
                command: self.to_string(),
                fix: spawn_fix(self.program),
                source,
            })?;
        if out.status.success() {
            return Ok(Ran {
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            });
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        Err(Error::ServiceCommand {
            command: self.to_string(),
            status: out.status.to_string(),
            fix: failure_fix(self.program, &stderr),
            stderr,
        })
    }
}

impl fmt::Display for Cmd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.program)?;
        for a in &self.args {
            if a.contains(|c: char| c.is_whitespace() || c == '\'') {
                write!(f, " '{}'", a.replace('\'', r"'\''"))?;
            } else {
                write!(f, " {a}")?;
            }
        }
        Ok(())
    }
}

/// True when `stderr` says the user's service manager could not be reached at all (no user
/// bus: a container, `su`, or ssh without a login session).
pub(super) fn manager_unreachable(stderr: &str) -> bool {
    [
        "Failed to connect to bus",
        "Failed to connect to user scope bus",
    ]
    .iter()
    .any(|m| stderr.contains(m))
}

/// The fix for an unreachable user service manager.
pub(super) const UNREACHABLE_FIX: &str = "no user service manager is reachable from here (no user bus: \
    a container, `su`, or a session without systemd-logind); log in to a graphical or ssh \
    session of this user, or run `loginctl enable-linger $USER` once and log in again, or set \
    XDG_RUNTIME_DIR=/run/user/$(id -u) if it is unset";

fn failure_fix(program: &str, stderr: &str) -> String {
    if manager_unreachable(stderr) {
        return UNREACHABLE_FIX.to_owned();
    }
    match program {
        "systemctl" => "see `systemctl --user status transcript-sync` and \
            `journalctl --user -u transcript-sync`"
            .to_owned(),
        _ => "see `launchctl print gui/$(id -u)/dev.transcript-sync` and \
            ~/Library/Logs/transcript-sync/"
            .to_owned(),
    }
}

fn spawn_fix(program: &str) -> String {
    match program {
        "systemctl" => "systemctl comes with systemd; without systemd, keep \
            `transcript-sync run` going with the supervisor this system has"
            .to_owned(),
        _ => "launchctl is macOS's service manager client; elsewhere use \
            --manager systemd, or keep `transcript-sync run` going another way"
            .to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_quotes_arguments_with_spaces() {
        let cmd = Cmd::new("launchctl", &["bootstrap", "gui/501", "/Users/a b/x.plist"]);
        assert_eq!(
            cmd.to_string(),
            "launchctl bootstrap gui/501 '/Users/a b/x.plist'"
        );
    }

    #[test]
    fn a_missing_user_bus_gets_the_linger_fix() {
        let fix = failure_fix(
            "systemctl",
            "Failed to connect to bus: $DBUS_SESSION_BUS_ADDRESS and $XDG_RUNTIME_DIR not defined",
        );
        assert!(fix.contains("loginctl enable-linger"), "{fix}");
        assert!(failure_fix("systemctl", "Unit not found").contains("journalctl"));
    }
}
