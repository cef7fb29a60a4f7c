//! Where the user's directories are: `HOME`, paths written `~/...`, and the XDG base
//! directories. Every command finds them here, from an environment it is given (tests give
//! their own).

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Reads an environment variable.
pub(crate) type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// `HOME`; `Err(NoHome)` when it is unset or empty.
pub(crate) fn home(env: Env) -> Result<PathBuf> {
    env("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or(Error::NoHome)
}

/// `~` and `~/rest` under `HOME`; any other path as it is.
pub(crate) fn expand_tilde(path: &Path, env: Env) -> Result<PathBuf> {
    match path.strip_prefix("~") {
        Ok(rest) => Ok(home(env)?.join(rest)),
        Err(_) => Ok(path.to_owned()),
    }
}

/// An XDG base directory variable (`XDG_CONFIG_HOME`, `XDG_DATA_HOME`), when it is set to an
/// absolute path: the XDG spec says a relative value is invalid and to be ignored.
pub(crate) fn xdg_var(env: Env, var: &str) -> Option<PathBuf> {
    env(var).filter(|d| d.starts_with('/')).map(PathBuf::from)
}

/// An XDG base directory: `$var`, else `~/fallback` (such as `.config`).
pub(crate) fn xdg_dir(env: Env, var: &str, fallback: &str) -> Result<PathBuf> {
    match xdg_var(env, var) {
        Some(dir) => Ok(dir),
        None => Ok(home(env)?.join(fallback)),
    }
}

/// The value of the process's environment variable `key`, if it has one in Unicode.
pub(crate) fn process_env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "HOME" => Some("/home/u".to_owned()),
            "XDG_CONFIG_HOME" => Some("/xdg/config".to_owned()),
            "XDG_DATA_HOME" => Some("relative/data".to_owned()),
            _ => None,
        }
    }

    #[test]
    fn tilde_paths_and_xdg_directories_resolve_against_home() {
        let p = |s: &str| expand_tilde(Path::new(s), &env).unwrap();
        assert_eq!(p("~"), Path::new("/home/u"));
        assert_eq!(p("~/.codex"), Path::new("/home/u/.codex"));
        assert_eq!(p("/abs/~"), Path::new("/abs/~"));
        let config = xdg_dir(&env, "XDG_CONFIG_HOME", ".config").unwrap();
        assert_eq!(config, Path::new("/xdg/config"));
        let data = xdg_dir(&env, "XDG_DATA_HOME", ".local/share").unwrap();
        assert_eq!(
            data,
            Path::new("/home/u/.local/share"),
            "relative values are ignored"
        );
        let no_home = |_: &str| None;
        assert!(matches!(home(&no_home), Err(Error::NoHome)));
        assert!(matches!(
            expand_tilde(Path::new("~/x"), &no_home),
            Err(Error::NoHome)
        ));
    }
}
