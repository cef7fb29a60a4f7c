//! The real-shaped tree the index benches measure, generated once and kept, and the fake
//! HOME and archive paths around it: shared by `index` and `plain_fts`.

use crate::real_shaped::tree;
use std::fs;
use std::path::{Path, PathBuf};

/// The tree of `mb` MB, written once into `cache` and kept for later runs (a file `done`
/// marks a whole one).
pub fn ensure_corpus(cache: &Path, mb: u64) -> PathBuf {
    let prose = if tree::cjk_prose() { "-cjk" } else { "" };
    let dir = cache.join(format!("{mb}mb-seed1{prose}"));
    if !dir.join("done").exists() {
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("creating the corpus directory");
        let stats = tree::write_tree(&dir, mb * 1_000_000, 1).expect("writing the corpus");
        println!(
            "corpus: {} files, {} records, {:.1} MB",
            stats.claude.files + stats.codex.files,
            stats.claude.records + stats.codex.records,
            stats.bytes() as f64 / 1e6
        );
        fs::write(dir.join("done"), b"").expect("marking the corpus done");
    }
    dir
}

/// A HOME whose Claude Code and Codex directories are the tree's.
pub fn fake_home(scratch: &Path, corpus: &Path) -> PathBuf {
    let home = scratch.join("home");
    fs::create_dir_all(home.join(".claude")).expect("creating the fake home");
    fs::create_dir_all(home.join(".codex")).expect("creating the fake home");
    let link = |from: &str, to: &str| {
        std::os::unix::fs::symlink(corpus.join(from), home.join(to)).expect("linking the tree")
    };
    link("claude", ".claude/projects");
    link("codex", ".codex/sessions");
    home
}

/// Removes the archive at `db` and its index, with their `-wal`, `-shm` and lock files.
pub fn remove_archive(db: &Path) {
    for suffix in [
        "",
        "-wal",
        "-shm",
        ".lock",
        "-index",
        "-index-wal",
        "-index-shm",
    ] {
        let _ = fs::remove_file(format!("{}{suffix}", db.display()));
    }
}

/// Bytes of every transcript in the tree.
pub fn tree_bytes(corpus: &Path) -> u64 {
    let files = walkdir::WalkDir::new(corpus).into_iter().flatten();
    let jsonl = files.filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"));
    jsonl
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}
