//! The systemd user unit: rendered from `systemd/transcript-sync.service`, installed under
//! `$XDG_CONFIG_HOME/systemd/user/`, driven with `systemctl --user`.

use super::command::Cmd;
use super::{Definition, FileState, ManagerState, Step};
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The template; `@EXEC_START@` and `@ARCHIVE_DIR@` (with the mirror sinks' directories) are
/// filled in by [`render_unit`].
const TEMPLATE: &str = include_str!("../../../systemd/transcript-sync.service");

/// The unit's name.
pub(super) const UNIT: &str = "transcript-sync.service";

/// The unit text for `def`: `ExecStart=` runs `def.binary` (with `--db` when
/// `def.pass_archive`), `ReadWritePaths=` is the archive's directory. `Err` when a path cannot
/// be written into a unit file (not UTF-8, or holding a quote, a backslash or a control
/// character).
pub(crate) fn render_unit(def: &Definition) -> Result<String> {
    let mut exec = quote(&def.binary, true)?;
    exec.push_str(" run");
    if def.pass_archive {
        exec.push_str(" --db ");
        exec.push_str(&quote(&def.archive, true)?);
    }
    if let Some(config) = &def.config {
        exec.push_str(" --config ");
        exec.push_str(&quote(config, true)?);
    }
    let mut dirs = quote(&def.archive_dir(), false)?;
    for mirror in &def.mirrors {
        dirs.push_str(" -");
        dirs.push_str(&quote(mirror, false)?);
    }
    Ok(TEMPLATE
        .replace("@EXEC_START@", &exec)
        .replace("@ARCHIVE_DIR@", &dirs))
}

/// Where the unit goes: `$XDG_CONFIG_HOME/systemd/user/` (`~/.config/...` when unset).
pub(super) fn unit_path(home: &Path, config_home: Option<&Path>) -> PathBuf {
    config_home
        .map(Path::to_owned)
        .unwrap_or_else(|| home.join(".config"))
        .join("systemd/user")
        .join(UNIT)
}

/// A path in double quotes, with `%` (specifiers) and, in a command line, `$` (variables)
/// doubled so systemd takes them literally.
fn quote(path: &Path, command_line: bool) -> Result<String> {
    let text = super::plain_text(path)?;
    if text.contains(['"', '\\']) {
        return Err(Error::ServicePath {
            path: path.to_owned(),
            reason: "it holds a quote or a backslash",
        });
    }
    let mut escaped = text.replace('%', "%%");
    if command_line {
        escaped = escaped.replace('$', "$$");
    }
    Ok(format!("\"{escaped}\""))
}

/// The binary an installed unit's `ExecStart=` runs, if the line is there and quoted as
/// [`render_unit`] writes it.
pub(super) fn installed_binary(unit: &str) -> Option<PathBuf> {
    let line = unit.lines().find_map(|l| l.strip_prefix("ExecStart="))?;
    let quoted = line.strip_prefix('"')?;
    let end = quoted.find('"')?;
    let text = quoted[..end].replace("%%", "%").replace("$$", "$");
    Some(PathBuf::from(text))
}

fn systemctl(args: &[&str]) -> Cmd {
    let mut all = vec!["--user"];
    all.extend_from_slice(args);
    Cmd::new("systemctl", &all)
}

/// What `install` runs once the unit file is in place. A replaced unit is restarted, since
/// `enable --now` leaves a running service on its old definition.
pub(super) fn install_steps(state: FileState) -> Vec<Step> {
    let mut steps = vec![Step::Run(systemctl(&["daemon-reload"]))];
    if state == FileState::Different {
        steps.push(Step::Run(systemctl(&["enable", UNIT])));
        steps.push(Step::Run(systemctl(&["restart", UNIT])));
    } else {
        steps.push(Step::Run(systemctl(&["enable", "--now", UNIT])));
    }
    steps
}

/// What `uninstall` runs around removing the unit file at `file`.
pub(super) fn uninstall_steps(file: &Path) -> Vec<Step> {
    vec![
        Step::Run(systemctl(&["disable", "--now", UNIT])),
        Step::Remove(file.to_owned()),
        Step::Run(systemctl(&["daemon-reload"])),
    ]
}

/// The command `status` asks the service manager with.
pub(super) fn status_command() -> Cmd {
    systemctl(&[
        "show",
        "-p",
        "LoadState,ActiveState,SubState,MainPID,UnitFileState",
        UNIT,
    ])
}

/// Reads the output of [`status_command`].
pub(super) fn parse_status(stdout: &str) -> ManagerState {
    let field = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or("")
            .to_owned()
    };
    let active = field("ActiveState");
    let pid = field("MainPID").parse().ok().filter(|&p: &u32| p > 0);
    let summary = format!(
        "{} ({}), unit file {}, load state {}",
        or_unknown(&active),
        or_unknown(&field("SubState")),
        or_unknown(&field("UnitFileState")),
        or_unknown(&field("LoadState")),
    );
    ManagerState::Reported {
        running: active == "active" || active == "reloading",
        summary,
        pid,
    }
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() { "unknown" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(binary: &str, archive: &str, pass_archive: bool) -> Definition {
        Definition {
            binary: binary.into(),
            archive: archive.into(),
            pass_archive,
            config: None,
            home: "/home/u".into(),
            mirrors: Vec::new(),
        }
    }

    #[test]
    fn a_given_configuration_file_is_passed_to_run() {
        let mut d = def("/b", "/x/a.db", false);
        d.config = Some("/etc/ts.toml".into());
        let unit = render_unit(&d).unwrap();
        assert!(
            unit.contains("\nExecStart=\"/b\" run --config \"/etc/ts.toml\"\n"),
            "{unit}"
        );
    }

    #[test]
    fn the_unit_runs_the_binary_and_may_write_only_the_archive_directory() {
        let unit = render_unit(&def("/opt/ts/bin", "/home/u/data/a.db", false)).unwrap();
        assert!(unit.contains("\nExecStart=\"/opt/ts/bin\" run\n"), "{unit}");
        assert!(
            unit.contains("\nReadWritePaths=-\"/home/u/data\"\n"),
            "{unit}"
        );
        assert!(!unit.contains("@EXEC_START@") && !unit.contains("@ARCHIVE_DIR@"));
        assert_eq!(installed_binary(&unit), Some(PathBuf::from("/opt/ts/bin")));
    }

    #[test]
    fn the_unit_may_write_the_mirror_directories_and_reach_the_network_sinks() {
        let mut d = def("/b", "/home/u/data/a.db", false);
        d.mirrors = vec!["/mnt/nas/transcripts".into()];
        let unit = render_unit(&d).unwrap();
        assert!(
            unit.contains("\nReadWritePaths=-\"/home/u/data\" -\"/mnt/nas/transcripts\"\n"),
            "{unit}"
        );
        assert!(
            unit.contains("\nRestrictAddressFamilies=AF_UNIX AF_INET AF_INET6\n"),
            "{unit}"
        );
    }

    /// The socket's directory under `$XDG_RUNTIME_DIR` is the one the unit has systemd make
    /// writable: the rest of /run is read-only to the service.
    #[test]
    fn the_unit_makes_the_directory_of_the_subscribers_socket() {
        let unit = render_unit(&def("/b", "/home/u/data/a.db", false)).unwrap();
        assert!(
            unit.contains("\nRuntimeDirectory=transcript-sync\n"),
            "{unit}"
        );
        let env = |k: &str| (k == "XDG_RUNTIME_DIR").then(|| "/run/user/1000".to_owned());
        let socket = crate::consumers::socket::socket_path(Path::new("/home/u/data/a.db"), &env);
        assert_eq!(
            socket.parent(),
            Some(Path::new("/run/user/1000/transcript-sync"))
        );
    }

    #[test]
    fn an_archive_chosen_on_the_command_line_is_passed_to_run() {
        let unit = render_unit(&def("/b", "/x/a.db", true)).unwrap();
        assert!(
            unit.contains("\nExecStart=\"/b\" run --db \"/x/a.db\"\n"),
            "{unit}"
        );
    }

    #[test]
    fn percent_and_dollar_signs_are_escaped_and_quotes_refused() {
        let unit = render_unit(&def("/a b/$x%y", "/d%/a.db", false)).unwrap();
        assert!(unit.contains("ExecStart=\"/a b/$$x%%y\" run"), "{unit}");
        assert!(unit.contains("ReadWritePaths=-\"/d%%\""), "{unit}");
        assert_eq!(installed_binary(&unit), Some(PathBuf::from("/a b/$x%y")));
        let quoted = render_unit(&def("/a\"b", "/d/a.db", false));
        assert!(matches!(quoted, Err(Error::ServicePath { .. })));
    }

    #[test]
    fn the_unit_goes_under_xdg_config_home() {
        assert_eq!(
            unit_path(Path::new("/home/u"), None),
            PathBuf::from("/home/u/.config/systemd/user/transcript-sync.service")
        );
        assert_eq!(
            unit_path(Path::new("/home/u"), Some(Path::new("/cfg"))),
            PathBuf::from("/cfg/systemd/user/transcript-sync.service")
        );
    }

    #[test]
    fn show_output_becomes_a_summary() {
        let out = "LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=42\n\
                   UnitFileState=enabled\n";
        let ManagerState::Reported {
            running,
            summary,
            pid,
        } = parse_status(out)
        else {
            panic!("not reported");
        };
        assert!(running);
        assert_eq!(pid, Some(42));
        assert_eq!(
            summary,
            "active (running), unit file enabled, load state loaded"
        );
    }
}
