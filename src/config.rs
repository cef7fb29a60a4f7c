//! Defaults that depend on the platform and the environment: where the archive lives.

use crate::error::{Error, Result};
use std::path::PathBuf;

/// The archive's file name inside the data directory.
const ARCHIVE_FILE: &str = "archive.db";

/// The default archive path: `$XDG_DATA_HOME/transcript-sync/archive.db`
/// (`~/.local/share/...` when unset), or `~/Library/Application Support/transcript-sync/`
/// on macOS. `--db` and `TRANSCRIPT_SYNC_DB` override it.
pub fn default_archive(env: &dyn Fn(&str) -> Option<String>) -> Result<PathBuf> {
    let home = || env("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    let base = if cfg!(target_os = "macos") {
        home()
            .ok_or(Error::NoHome)?
            .join("Library/Application Support")
    } else {
        match env("XDG_DATA_HOME").filter(|d| d.starts_with('/')) {
            Some(dir) => PathBuf::from(dir),
            None => home().ok_or(Error::NoHome)?.join(".local/share"),
        }
    };
    Ok(base.join("transcript-sync").join(ARCHIVE_FILE))
}

#[cfg(all(test, not(target_os = "macos")))]
mod tests {
    use super::*;

    #[test]
    fn xdg_data_home_wins_over_home_and_must_be_absolute() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "XDG_DATA_HOME" => Some("/xdg".to_owned()),
            _ => None,
        };
        assert_eq!(
            default_archive(&env).unwrap(),
            PathBuf::from("/xdg/transcript-sync/archive.db")
        );
        let relative = |k: &str| match k {
            "HOME" => Some("/home/u".to_owned()),
            "XDG_DATA_HOME" => Some("rel".to_owned()),
            _ => None,
        };
        assert_eq!(
            default_archive(&relative).unwrap(),
            PathBuf::from("/home/u/.local/share/transcript-sync/archive.db")
        );
        assert!(matches!(default_archive(&|_| None), Err(Error::NoHome)));
    }
}
