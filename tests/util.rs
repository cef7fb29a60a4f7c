//! This package's binary bound into testkit's [`Sandbox`](testkit::sandbox::Sandbox), so that a
//! test says `Env::new()`, and the testkit items the tests use, under the names they use.

use std::path::{Path, PathBuf};
use testkit::sandbox::{Package, Sandbox};

pub use testkit::collector::{Answer, Collector};
pub use testkit::daemon::{Daemon, PATIENCE, TapReader};
pub use testkit::ports::free_port;
pub use testkit::postgres::{Cluster as PgCluster, PASSWORD as PG_PASSWORD};
pub use testkit::procfs::watched_inodes;
pub use testkit::sandbox::{
    LargeBackfill, SandboxDaemon, archived, assert_log_has, cli, counter, home_daemon_cmd, lines,
    on_a_terminal, raw_record, records, stderr, stdout_of, wait_until, wait_until_else,
};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");

/// transcript-sync, the package the tests drive.
pub struct TranscriptSync;

impl Package for TranscriptSync {
    const BIN: &'static str = BIN;
    const MANIFEST_DIR: &'static str = env!("CARGO_MANIFEST_DIR");
    const TARGET_TMPDIR: &'static str = env!("CARGO_TARGET_TMPDIR");
}

/// A sandbox for the binary under test.
pub type Env = Sandbox<TranscriptSync>;

/// Copies this package's recorded agent fixture `agent` into `home`; see
/// [`testkit::sandbox::copy_agent_fixture`].
pub fn copy_agent_fixture(agent: &str, home: &Path) -> Vec<PathBuf> {
    testkit::sandbox::copy_agent_fixture::<TranscriptSync>(agent, home)
}

/// The watchers' names, sorted, as `watchers/*.toml` defines them: every one's, or with
/// `builtin` only those `run` uses without a `[[watch]]` table (not `builtin = false`).
pub fn watcher_names(builtin: bool) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("watchers");
    let mut names: Vec<String> = (std::fs::read_dir(dir).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter(|p| {
            let definition: toml::Value =
                toml::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            !builtin || definition.get("builtin").and_then(toml::Value::as_bool) != Some(false)
        })
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// `config.toml`'s `[watchers]` table with every built-in watcher off but `kept`.
pub fn watchers_off_but(kept: &[&str]) -> String {
    let off = watcher_names(true)
        .into_iter()
        .filter(|n| !kept.contains(&n.as_str()));
    let lines: Vec<String> = off.map(|n| format!("{n} = false\n")).collect();
    format!("[watchers]\n{}", lines.concat())
}
