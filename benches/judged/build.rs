//! The builds under measure: each archives the home with `run --once` into an archive of its
//! own, then answers `search` and `sessions` from it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;
use testkit::stats::median;

/// One build under measure, with the archive it made of the home.
pub struct Build {
    /// What the tables call it.
    pub name: String,
    bin: PathBuf,
    db: PathBuf,
    /// Seconds `run --once` took.
    pub archived_secs: f64,
}

impl Build {
    /// `bin`'s archive of `home`, made in `scratch`, and a copy of `bin` there that runs.
    ///
    /// Every build runs from a copy written in one go: the same binary started about 0.5 ms
    /// later from where the linker wrote it than from a copy, which would have been measured
    /// as a difference between builds.
    pub fn archive(name: &str, bin: &Path, home: &Path, scratch: &Path) -> Build {
        let stem = name.replace(' ', "-");
        let db = scratch.join(format!("{stem}.db"));
        let copy = scratch.join(format!("{stem}.bin"));
        std::fs::copy(bin, &copy).expect("copying the build into the scratch directory");
        let bin = copy;
        let start = Instant::now();
        let out = ts(&bin, home)
            .args(["run", "--once", "--db"])
            .arg(&db)
            .env("RUST_LOG", "warn")
            .output()
            .expect("starting transcript-sync run --once");
        assert!(
            out.status.success(),
            "{name}: run --once failed:\n{}",
            stderr(&out)
        );
        let archived_secs = start.elapsed().as_secs_f64();
        println!("{name}: archived in {archived_secs:.1} s");
        Build {
            name: name.to_owned(),
            bin,
            db,
            archived_secs,
        }
    }

    /// `search QUERY --json --limit N`: the sessions of its hits, in order, and how long it
    /// took from spawn to exit.
    pub fn search(&self, home: &Path, query: &str, limit: usize) -> (Vec<String>, f64) {
        let start = Instant::now();
        let out = ts(&self.bin, home)
            .args([
                "search",
                query,
                "--json",
                "--limit",
                &limit.to_string(),
                "--db",
            ])
            .arg(&self.db)
            .output()
            .expect("starting transcript-sync search");
        let ms = start.elapsed().as_secs_f64() * 1e3;
        // A search that finds nothing says so and exits 1: an answer like another.
        let nothing = out.status.code() == Some(1) && stderr(&out).contains("no message matches");
        assert!(
            out.status.success() || nothing,
            "search {query:?}: {}",
            stderr(&out)
        );
        let sessions = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let hit: serde_json::Value = serde_json::from_str(l).expect("a JSON hit");
                hit["session"].as_str().unwrap_or_default().to_owned()
            })
            .collect();
        (sessions, ms)
    }
}

impl Build {
    /// The instructions `search QUERY --json --limit N` runs (in user space), counted by
    /// valgrind's callgrind: unlike its time, the same on a busy machine as on an idle one.
    /// `None` where valgrind is not installed.
    pub fn instructions(&self, home: &Path, query: &str, limit: usize) -> Option<u64> {
        let out = ts("valgrind", home)
            .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
            .arg(&self.bin)
            .args([
                "search",
                query,
                "--json",
                "--limit",
                &limit.to_string(),
                "--db",
            ])
            .arg(&self.db)
            .output()
            .ok()?;
        let said = String::from_utf8_lossy(&out.stderr);
        let count = said
            .split("Collected : ")
            .nth(1)?
            .split_whitespace()
            .next()?;
        count.parse().ok()
    }
}

/// transcript-sync (or `program` running it) with nothing of this machine's environment:
/// `HOME` is `home`.
fn ts(program: impl AsRef<OsStr>, home: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("NO_COLOR", "1");
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_owned()
}

/// The median time of `sessions --limit 1` over `runs` runs: what any command costs.
pub fn floor(build: &Build, home: &Path, runs: usize) -> f64 {
    let times: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            let start = Instant::now();
            let out = ts(&build.bin, home)
                .args(["sessions", "--limit", "1", "--db"])
                .arg(&build.db)
                .output()
                .expect("starting transcript-sync sessions");
            assert!(out.status.success(), "sessions: {}", stderr(&out));
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    median(&times)
}
