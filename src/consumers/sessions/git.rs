//! A project's git remote, read from its repository's configuration (no git needed), and what
//! makes two remote URLs the same repository on machines whose paths differ.

use std::path::{Path, PathBuf};

/// The URL of the remote `origin` (else of the first remote that has one) of the repository
/// holding `project` (an absolute path), without any user name or password in it; `None`
/// when `project` is in no repository, or its repository has no remote.
pub(crate) fn remote_of(project: &Path) -> Option<String> {
    if !project.is_absolute() {
        return None;
    }
    let git_dir = git_dir_of(project)?;
    let config = std::fs::read_to_string(common_dir(&git_dir).join("config")).ok()?;
    remote_in(&config).map(|url| without_credentials(&url))
}

/// The repository's git directory: `.git` in `project` or the nearest directory above it, or
/// where a `.git` file (a worktree, a submodule) points.
fn git_dir_of(project: &Path) -> Option<PathBuf> {
    for dir in project.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(meta) = std::fs::metadata(&dot_git) else {
            continue;
        };
        if meta.is_dir() {
            return Some(dot_git);
        }
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
        return Some(dir.join(target));
    }
    None
}

/// A worktree's git directory names the repository's own in its `commondir` file.
fn common_dir(git_dir: &Path) -> PathBuf {
    match std::fs::read_to_string(git_dir.join("commondir")) {
        Ok(text) => git_dir.join(text.trim()),
        Err(_) => git_dir.to_owned(),
    }
}

/// The `url` of `[remote "origin"]` in a git configuration's text, else the first remote's.
fn remote_in(config: &str) -> Option<String> {
    let mut section: Option<String> = None;
    let mut first: Option<String> = None;
    for line in config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            section = (line
                .strip_prefix("[remote \"")
                .and_then(|r| r.split_once("\"]")))
            .map(|(name, _)| name.to_owned());
            continue;
        }
        let Some(name) = &section else { continue };
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !key.trim().eq_ignore_ascii_case("url") {
            continue;
        }
        let value = value.trim().trim_matches('"').to_owned();
        if name == "origin" {
            return Some(value);
        }
        first.get_or_insert(value);
    }
    first
}

/// `url` without the `user:password@` of an HTTP(S) URL: a token there must not be shipped.
/// An SSH `git@host:path` keeps its user, which is no secret.
fn without_credentials(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let host_end = rest.find('/').unwrap_or(rest.len());
    match rest[..host_end].rfind('@') {
        Some(at) if scheme.starts_with("http") => format!("{scheme}://{}", &rest[at + 1..]),
        _ => url.to_owned(),
    }
}

/// What two URLs of the same repository share: host and path, lower-cased, without scheme,
/// user, port, `.git` or a trailing slash. `git@github.com:o/r.git`,
/// `ssh://git@github.com/o/r` and `https://github.com/o/r/` all give `github.com/o/r`.
pub(crate) fn repository_key(url: &str) -> String {
    let url = url.trim();
    let rest = match url.split_once("://") {
        Some((_, rest)) => rest.to_owned(),
        // scp-like: user@host:path
        None => match url.split_once(':') {
            Some((host, path)) if !host.contains('/') => format!("{host}/{path}"),
            _ => url.to_owned(),
        },
    };
    let (host, path) = rest.split_once('/').unwrap_or((&rest, ""));
    let host = host.rsplit('@').next().unwrap_or(host);
    let host = host.split(':').next().unwrap_or(host);
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    format!("{host}/{}", path.trim_start_matches('/')).to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_is_preferred_and_credentials_are_dropped() {
        let config = "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = https://example.org/u/r.git\n[remote \"origin\"]\n\turl = https://alice:ghp_secret@github.com/alice/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n";
        let url = remote_in(config).unwrap();
        assert_eq!(without_credentials(&url), "https://github.com/alice/r.git");
        let only = "[remote \"upstream\"]\n url = git@example.org:u/r.git\n";
        assert_eq!(remote_in(only).unwrap(), "git@example.org:u/r.git");
        assert_eq!(remote_in("[core]\n bare = true\n"), None);
    }

    #[test]
    fn one_repository_under_its_different_urls() {
        let key = "github.com/o/r";
        for url in [
            "git@github.com:o/r.git",
            "ssh://git@github.com/o/r",
            "ssh://git@github.com:22/o/r.git",
            "https://github.com/o/r/",
            "https://GitHub.com/O/r.git",
        ] {
            assert_eq!(repository_key(url), key, "{url}");
        }
        assert_ne!(repository_key("https://github.com/o/other"), key);
    }

    #[test]
    fn worktrees_and_subdirectories_find_their_repository() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        std::fs::create_dir_all(main.join(".git/worktrees/feature")).unwrap();
        std::fs::create_dir_all(main.join("src/deep")).unwrap();
        std::fs::write(
            main.join(".git/config"),
            "[remote \"origin\"]\n\turl = git@github.com:o/r.git\n",
        )
        .unwrap();
        std::fs::write(main.join(".git/worktrees/feature/commondir"), "../..\n").unwrap();
        let tree = dir.path().join("feature");
        std::fs::create_dir_all(&tree).unwrap();
        let gitdir = main.join(".git/worktrees/feature");
        std::fs::write(tree.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
        let want = Some("git@github.com:o/r.git".to_owned());
        assert_eq!(remote_of(&main.join("src/deep")), want);
        assert_eq!(remote_of(&tree), want);
        assert_eq!(remote_of(dir.path()), None);
    }
}
