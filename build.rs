//! What `--version` says beside the version: the commit built (`git describe`, `-dirty` when
//! the tree had changes; `unknown` outside a git checkout, as from a published crate) and the
//! day it was built (UTC; `SOURCE_DATE_EPOCH` gives it for a reproducible build).

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

fn main() {
    // Read again when a source file changes (a tree made dirty), a commit moves the branch
    // HEAD names (or, packed, `packed-refs`), or the index does; git names where each is (in a
    // worktree, `.git` is a file).
    println!("cargo:rerun-if-changed=src");
    for file in ["HEAD", "index", "packed-refs"] {
        if let Some(path) = git(&["rev-parse", "--git-path", file]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &branch])
    {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    let commit = git(&[
        "describe",
        "--always",
        "--dirty",
        "--abbrev=12",
        "--exclude=*",
    ])
    .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=TRANSCRIPT_SYNC_COMMIT={commit}");
    println!("cargo:rustc-env=TRANSCRIPT_SYNC_BUILT={}", built_day());
}

/// `git ARGS`'s first line, when git runs and succeeds here.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().next()?.trim().to_owned();
    (out.status.success() && !line.is_empty()).then_some(line)
}

/// The day of the build (or of `SOURCE_DATE_EPOCH`), `YYYY-MM-DD` in UTC.
fn built_day() -> String {
    let given = std::env::var("SOURCE_DATE_EPOCH").ok();
    let seconds = given
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_else(|| {
            let now = SystemTime::now().duration_since(UNIX_EPOCH);
            now.map_or(0, |d| d.as_secs() as i64)
        });
    let (y, m, d) = civil_from_days(seconds.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, from his "chrono-Compatible Low-Level Date Algorithms").
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}
