//! Where the editors of the VS Code family keep their user folders on each OS: the one table
//! of those editors, their user data folders and their remote servers, under which a
//! watcher's `extension` names an extension's global storage, its `editor_roots` the folders
//! every editor keeps sessions in (its chat's), and its `editor` one editor whose own user
//! folder is a root.
//!
//! An editor's user folder is `<user data>/User`; an extension's global storage is
//! `User/globalStorage/<publisher.name>` in it (VS Code's `ExtensionContext.globalStorageUri`).
//! The user data folder is `<app data>/<editor>`, where the app data folder is Electron's
//! `appData`: `$XDG_CONFIG_HOME` or `~/.config` on Linux, `~/Library/Application Support` on
//! macOS, `%APPDATA%` on Windows. On a machine that an editor works on over SSH, its remote
//! server keeps the same folder under `~/<server>/data/`.

use crate::error::Result;
use crate::platform::home;
use std::path::PathBuf;

/// The editors' user data folders under the app data folder: VS Code and its Insiders build,
/// VSCodium, and the forks with agents of their own that install the same extensions.
pub(crate) const EDITORS: &[&str] = &[
    "Code",
    "Code - Insiders",
    "VSCodium",
    "Cursor",
    "Windsurf",
    "Kiro",
];

/// The editors' remote servers' folders under the home of the machine worked on over SSH.
pub(crate) const REMOTE_SERVERS: &[&str] = &[
    ".vscode-server",
    ".vscode-server-insiders",
    ".vscodium-server",
    ".cursor-server",
    ".windsurf-server",
];

/// An operating system, for where its editors keep their folders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Os {
    Linux,
    Mac,
    Windows,
}

impl Os {
    /// The one this runs on (Linux for every other Unix).
    pub(crate) fn current() -> Os {
        if cfg!(target_os = "macos") {
            Os::Mac
        } else if cfg!(windows) {
            Os::Windows
        } else {
            Os::Linux
        }
    }
}

/// Every folder where an editor of the table keeps `extension`'s global storage on `os`, in
/// the order of [`user_folders`].
pub(crate) fn global_storage(os: Os, env: home::Env, extension: &str) -> Result<Vec<PathBuf>> {
    let users = user_folders(os, env)?;
    Ok(users
        .into_iter()
        .map(|u| u.join("globalStorage").join(extension))
        .collect())
}

/// Every editor's user folder (`<user data>/User`) on `os`: its desktop editors' first, then
/// (on Linux and macOS) its remote servers'. `Err` when the home (or, on Windows, `%APPDATA%`)
/// is not known.
pub(crate) fn user_folders(os: Os, env: home::Env) -> Result<Vec<PathBuf>> {
    let user = |user_data: PathBuf| user_data.join("User");
    let app_data = app_data(os, env)?;
    let mut dirs: Vec<PathBuf> = EDITORS.iter().map(|e| user(app_data.join(e))).collect();
    if os != Os::Windows {
        let home = home::home(env)?;
        dirs.extend(
            REMOTE_SERVERS
                .iter()
                .map(|s| user(home.join(s).join("data"))),
        );
    }
    Ok(dirs)
}

/// The user folder of `editor`, a desktop editor of the table, on `os`: `<user data>/User` (its
/// `globalStorage/state.vscdb`, the state database of the editor itself, and
/// `workspaceStorage/<id>/`, each workspace's). `Ok(None)` for a name the table does not hold;
/// `Err` when the home (or, on Windows, `%APPDATA%`) is not known.
pub(crate) fn user_folder(os: Os, env: home::Env, editor: &str) -> Result<Option<PathBuf>> {
    if !EDITORS.contains(&editor) {
        return Ok(None);
    }
    Ok(Some(app_data(os, env)?.join(editor).join("User")))
}

/// Electron's `appData` folder on `os`, where each editor has its user data folder.
fn app_data(os: Os, env: home::Env) -> Result<PathBuf> {
    Ok(match os {
        Os::Linux => home::xdg_dir(env, "XDG_CONFIG_HOME", ".config")?,
        Os::Mac => home::home(env)?.join("Library/Application Support"),
        Os::Windows => match env("APPDATA").filter(|d| !d.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => home::home(env)?.join("AppData/Roaming"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXT: &str = "saoudrizwan.claude-dev";

    fn dirs(os: Os, env: home::Env) -> Vec<String> {
        let found = global_storage(os, env, EXT).unwrap();
        found.iter().map(|d| d.display().to_string()).collect()
    }

    #[test]
    fn linux_reads_every_editor_under_its_config_folder_and_every_remote_server() {
        let env = |k: &str| (k == "HOME").then(|| "/home/u".to_owned());
        let found = dirs(Os::Linux, &env);
        assert_eq!(found.len(), EDITORS.len() + REMOTE_SERVERS.len());
        assert_eq!(
            found[0],
            format!("/home/u/.config/Code/User/globalStorage/{EXT}")
        );
        assert!(found.contains(&format!("/home/u/.config/Cursor/User/globalStorage/{EXT}")));
        assert!(found.contains(&format!(
            "/home/u/.vscode-server/data/User/globalStorage/{EXT}"
        )));
        assert!(found.contains(&format!(
            "/home/u/.cursor-server/data/User/globalStorage/{EXT}"
        )));
        let xdg = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "XDG_CONFIG_HOME" => Some("/xdg".to_owned()),
            _ => None,
        };
        assert_eq!(
            dirs(Os::Linux, &xdg)[1],
            format!("/xdg/Code - Insiders/User/globalStorage/{EXT}")
        );
    }

    #[test]
    fn macos_and_windows_read_their_own_app_data_folders() {
        let env = |k: &str| match k {
            "HOME" => Some("/Users/u".to_owned()),
            "APPDATA" => Some("C:/Users/u/AppData/Roaming".to_owned()),
            _ => None,
        };
        let mac = dirs(Os::Mac, &env);
        assert_eq!(
            mac[3],
            format!("/Users/u/Library/Application Support/Cursor/User/globalStorage/{EXT}")
        );
        let windows = dirs(Os::Windows, &env);
        assert_eq!(
            windows.len(),
            EDITORS.len(),
            "no remote server folders on Windows"
        );
        assert_eq!(
            windows[4],
            format!("C:/Users/u/AppData/Roaming/Windsurf/User/globalStorage/{EXT}")
        );
    }

    #[test]
    fn an_editors_user_folder_is_under_its_app_data_folder_on_each_os() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "APPDATA" => Some("C:/Users/u/AppData/Roaming".to_owned()),
            _ => None,
        };
        let folder = |os| user_folder(os, &env, "Cursor").unwrap().unwrap();
        assert_eq!(
            folder(Os::Linux),
            PathBuf::from("/home/u/.config/Cursor/User")
        );
        assert_eq!(
            folder(Os::Mac),
            PathBuf::from("/home/u/Library/Application Support/Cursor/User")
        );
        assert_eq!(
            folder(Os::Windows),
            PathBuf::from("C:/Users/u/AppData/Roaming/Cursor/User")
        );
        let xdg = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "XDG_CONFIG_HOME" => Some("/xdg".to_owned()),
            _ => None,
        };
        let linux = user_folder(Os::Linux, &xdg, "Code").unwrap();
        assert_eq!(linux, Some(PathBuf::from("/xdg/Code/User")));
        assert_eq!(user_folder(Os::Linux, &env, "Notepad").unwrap(), None);
        let homeless = |_: &str| None;
        assert!(user_folder(Os::Linux, &homeless, "Cursor").is_err());
    }
}
