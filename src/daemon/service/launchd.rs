//! The launchd agent: rendered from `launchd/dev.transcript-sync.plist`, installed under
//! `~/Library/LaunchAgents/`, driven with `launchctl` in the user's GUI domain.

use super::command::Cmd;
use super::{Definition, ManagerState, Step};
use crate::error::Result;
use std::path::{Path, PathBuf};

/// The template; `@PROGRAM_ARGUMENTS@` and `@LOG_DIR@` are filled in by [`render_plist`].
const TEMPLATE: &str = include_str!("../../../launchd/dev.transcript-sync.plist");

/// The agent's label, which is also the plist's file stem.
pub(super) const LABEL: &str = "dev.transcript-sync";

/// The plist for `def`: `ProgramArguments` runs `def.binary` (with `--db` when
/// `def.pass_archive`), the logs go to [`log_dir`]. `Err` when a path is not UTF-8 or holds a
/// control character.
pub(crate) fn render_plist(def: &Definition) -> Result<String> {
    let mut args = vec![xml_text(&def.binary)?, "run".to_owned()];
    if def.pass_archive {
        args.push("--db".to_owned());
        args.push(xml_text(&def.archive)?);
    }
    if let Some(config) = &def.config {
        args.push("--config".to_owned());
        args.push(xml_text(config)?);
    }
    let program_arguments: Vec<String> = args
        .iter()
        .map(|a| format!("\t\t<string>{a}</string>"))
        .collect();
    Ok(TEMPLATE
        .replace("@PROGRAM_ARGUMENTS@", &program_arguments.join("\n"))
        .replace("@LOG_DIR@", &xml_text(&log_dir(&def.home))?))
}

/// Where the agent's stdout and stderr go: `~/Library/Logs/transcript-sync/`.
pub(super) fn log_dir(home: &Path) -> PathBuf {
    home.join("Library/Logs/transcript-sync")
}

/// Where the plist goes: `~/Library/LaunchAgents/dev.transcript-sync.plist`.
pub(super) fn plist_path(home: &Path) -> PathBuf {
    home.join("Library/LaunchAgents")
        .join(format!("{LABEL}.plist"))
}

fn xml_text(path: &Path) -> Result<String> {
    let text = super::plain_text(path)?;
    Ok(text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;"))
}

/// The first `ProgramArguments` string of a plist that [`render_plist`] wrote.
pub(super) fn installed_binary(plist: &str) -> Option<PathBuf> {
    let after = plist.split("<key>ProgramArguments</key>").nth(1)?;
    let start = after.find("<string>")? + "<string>".len();
    let end = start + after[start..].find("</string>")?;
    let text = after[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    Some(PathBuf::from(text))
}

fn launchctl(args: &[&str]) -> Cmd {
    Cmd::new("launchctl", args)
}

fn service_target(uid: u32) -> String {
    format!("gui/{uid}/{LABEL}")
}

/// What `install` runs once the plist is in place: unload a loaded agent, so that installing
/// again is harmless, clear a `launchctl disable`, then load and start it.
pub(super) fn install_steps(uid: u32, plist: &Path) -> Vec<Step> {
    let domain = format!("gui/{uid}");
    vec![
        Step::TryRun(
            launchctl(&["bootout", &service_target(uid)]),
            "it fails when the agent is not loaded",
        ),
        Step::Run(launchctl(&["enable", &service_target(uid)])),
        Step::Run(launchctl(&["bootstrap", &domain, &plist.to_string_lossy()])),
    ]
}

/// What `uninstall` runs around removing the plist at `plist`.
pub(super) fn uninstall_steps(uid: u32, plist: &Path) -> Vec<Step> {
    vec![
        Step::TryRun(
            launchctl(&["bootout", &service_target(uid)]),
            "it fails when the agent is not loaded",
        ),
        Step::Remove(plist.to_owned()),
    ]
}

/// The command `status` asks launchd with.
pub(super) fn status_command(uid: u32) -> Cmd {
    launchctl(&["print", &service_target(uid)])
}

/// Reads the output of a successful [`status_command`].
pub(super) fn parse_status(stdout: &str) -> ManagerState {
    let field = |key: &str| {
        stdout.lines().find_map(|l| {
            let (k, v) = l.trim().split_once(" = ")?;
            (k == key).then(|| v.trim().to_owned())
        })
    };
    let state = field("state").unwrap_or_else(|| "unknown".to_owned());
    ManagerState::Reported {
        running: state == "running",
        summary: format!("loaded, state {state}"),
        pid: field("pid").and_then(|p| p.parse().ok()),
    }
}

/// What `status` reports when `launchctl print` fails: the agent is not loaded.
pub(super) fn not_loaded() -> ManagerState {
    ManagerState::Reported {
        running: false,
        summary: "not loaded".to_owned(),
        pid: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plist_runs_the_binary_and_logs_under_library_logs() {
        let def = Definition {
            binary: "/Users/u/b&b/transcript-sync".into(),
            archive: "/Users/u/a.db".into(),
            pass_archive: true,
            config: Some("/Users/u/c.toml".into()),
            home: "/Users/u".into(),
            mirrors: Vec::new(),
        };
        let plist = render_plist(&def).unwrap();
        assert!(plist.contains("<string>/Users/u/b&amp;b/transcript-sync</string>"));
        assert!(plist.contains("<string>run</string>\n\t\t<string>--db</string>"));
        assert!(plist.contains("<string>--config</string>\n\t\t<string>/Users/u/c.toml</string>"));
        assert!(plist.contains("/Users/u/Library/Logs/transcript-sync/transcript-sync.err.log"));
        assert!(!plist.contains("@PROGRAM_ARGUMENTS@") && !plist.contains("@LOG_DIR@"));
        assert_eq!(installed_binary(&plist), Some(def.binary));
    }

    #[test]
    fn print_output_gives_state_and_pid() {
        let out = "gui/501/dev.transcript-sync = {\n\tactive count = 1\n\tstate = running\n\
                   \tpid = 812\n}\n";
        let ManagerState::Reported { running, pid, .. } = parse_status(out) else {
            panic!("not reported");
        };
        assert!(running);
        assert_eq!(pid, Some(812));
    }
}
