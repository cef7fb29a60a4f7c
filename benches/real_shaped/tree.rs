//! A tree of agent transcripts shaped like real ones, for measuring how well the archive
//! compresses them.
//!
//! The compare corpus (`testkit/src/records.rs`) fills records with random words, which
//! says little about compression. Real transcripts repeat themselves: every Claude Code record
//! carries the same envelope and usage block, a session reads the same source file several
//! times and edits it (the Edit result holds the whole original file), command output is
//! `cargo build`, `git status` and `rg -n` over that project, and every Codex rollout opens
//! with the same long base prompt. Here the records have the shapes of
//! `tests/fixtures/sessions/` and their content is real text from this machine: each session
//! works on one project taken from `~/.cargo/registry/src` (or a directory of
//! `/usr/include`), and prose comes from the Markdown and text files there and under
//! `/usr/share/doc`. Only what is random in real transcripts is random here: ids, timestamps,
//! thinking signatures, Codex's `encrypted_content`, the rare pasted image.
//!
//! With `REAL_SHAPED_PROSE=cjk`, the prose (prompts, answers, plans) is Chinese, Japanese and
//! Korean instead: paragraphs of the translated man pages under `/usr/share/man/{ja,ko,zh_CN,
//! zh_TW}`, for a corpus whose people write in those languages (code and tool output stay as
//! they are).
//!
//! Files are listed in sorted order and chosen with `fastrand::Rng::with_seed`, so the same
//! seed on a machine with the same files gives the same tree; the tree depends on the files
//! present (another set of crates in the registry gives another tree).

mod claude;
mod codex;
mod json;
mod random;
mod session;
mod shelf;
mod workspace;

use claude::write_claude;
use codex::write_codex;
use fastrand::Rng;
use random::normal;
use session::Desk;
use shelf::Shelf;
use std::io;
use std::ops::AddAssign;
use std::path::Path;

/// What a tree holds, per harness.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Claude Code sessions and their subagents, under `claude/`.
    pub claude: Count,
    /// Codex rollouts, under `codex/`.
    pub codex: Count,
}

impl Stats {
    /// Bytes of every file, newlines included.
    pub fn bytes(&self) -> u64 {
        self.claude.bytes + self.codex.bytes
    }
}

/// Files, records and bytes (newlines included) of one harness's transcripts.
#[derive(Clone, Copy, Debug, Default)]
pub struct Count {
    /// Transcript files.
    pub files: u64,
    /// Lines, one record each.
    pub records: u64,
    /// Bytes, newlines included.
    pub bytes: u64,
}

impl AddAssign for Count {
    fn add_assign(&mut self, other: Count) {
        self.files += other.files;
        self.records += other.records;
        self.bytes += other.bytes;
    }
}

/// Writes sessions under `root` until they hold about `target_bytes`: Claude Code sessions as
/// `claude/<encoded-project>/<session>.jsonl`, some with subagents in
/// `claude/<encoded-project>/<session>/subagents/agent-<id>.jsonl`, and Codex rollouts as
/// `codex/YYYY/MM/DD/rollout-<time>-<id>.jsonl`, about 3:2 by bytes. Every line is one JSON
/// record ending in `\n`. The last session is cut to what is left, so the tree ends within a
/// record or two of the target.
///
/// `Err` when a file cannot be written, or when this machine has no source files to take
/// content from; what was written so far stays on disk.
pub fn write_tree(root: &Path, target_bytes: u64, seed: u64) -> io::Result<Stats> {
    let mut rng = Rng::with_seed(seed);
    let shelf = Shelf::gather(&mut rng)?;
    let mut desk = Desk::new(&mut rng, &shelf);
    let mut stats = Stats::default();
    while stats.bytes() < target_bytes {
        let left = target_bytes - stats.bytes();
        let target = session_bytes(&mut rng).min(left);
        let claude_is_behind = stats.claude.bytes * 2 <= stats.codex.bytes * 3;
        let mut session = desk.next_session(&mut rng, &shelf)?;
        if claude_is_behind {
            stats.claude += write_claude(root, &mut session, target)?;
        } else {
            stats.codex += write_codex(root, &mut session, target)?;
        }
        desk.clock = session.clock;
    }
    Ok(stats)
}

/// A session's size: log-normal around 300 KB, from 20 KB to 6 MB. Most sessions are short;
/// a few long ones hold much of the bytes.
fn session_bytes(rng: &mut Rng) -> u64 {
    (300e3 * (1.3 * normal(rng)).exp()).clamp(20e3, 6e6) as u64
}

/// True when `REAL_SHAPED_PROSE=cjk` asks for Chinese, Japanese and Korean prose.
pub fn cjk_prose() -> bool {
    std::env::var("REAL_SHAPED_PROSE").is_ok_and(|v| v == "cjk")
}
