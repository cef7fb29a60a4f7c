//! Whether `search` puts first the session a person wants, on a judged set of queries
//! (`set.toml`) in six languages: each query's wanted session (the prompt that asked it, the
//! answer that solved it) is planted among sessions that share its words (a tool printing
//! them over and over, a long session whose tools come across them, a newer session that
//! mentions them in passing), in a home of real-shaped Claude Code and Codex transcripts
//! (`benches/real_shaped/tree.rs`), archived by the real binary (`run --once`) and asked with
//! `search QUERY --json --limit 10`.
//!
//! `cargo bench --bench judged`. `JUDGED_MB` sets the background's size (default 256 MB of
//! transcripts), `JUDGED_RUNS` the timed runs of each query per build (default 5, after one
//! untimed). `JUDGED_BASELINE_BIN=<binary>` archives the same home with another build as well
//! and asks it every query too, its runs alternating with this build's, so both are measured
//! in one run on one machine. A few broad queries (`ask::BROAD`) are timed beside the judged
//! ones: they match thousands of messages, where ordering them costs the most. Where valgrind
//! is installed, the instructions of every query are counted too (callgrind), a cost that a
//! busy machine does not blur as it blurs times. Results: tables on stdout and
//! `target/bench/judged.md`.

mod ask;
mod build;
mod claude;
mod measure;
mod plant;
mod set;
/// The real-shaped tree, shared with `benches/real_shaped`.
#[path = "../real_shaped"]
mod real_shaped {
    pub mod tree;
}

use ask::{BROAD, Costs};
use build::Build;
use measure::Answers;
use plant::Kind;
use real_shaped::tree;
use set::Set;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use testkit::env::env_or;
use testkit::machine::{self, Machine};

const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");

/// What the home holds.
struct Home {
    dir: PathBuf,
    background: tree::Stats,
    planted_bytes: u64,
}

/// A home of `mb` MB of real-shaped transcripts with the set's sessions planted among the
/// Claude Code ones.
fn write_home(scratch: &Path, set: &Set, mb: u64) -> Home {
    let tree_dir = scratch.join("tree");
    let background = tree::write_tree(&tree_dir, mb * 1_000_000, 1).expect("writing the tree");
    let planted_bytes = plant::plant_all(&tree_dir.join("claude"), set).expect("planting");
    let dir = scratch.join("home");
    for (agent, link, target) in [
        (".claude", "projects", "claude"),
        (".codex", "sessions", "codex"),
    ] {
        fs::create_dir_all(dir.join(agent)).expect("making the home");
        std::os::unix::fs::symlink(tree_dir.join(target), dir.join(agent).join(link))
            .expect("linking the tree into the home");
    }
    Home {
        dir,
        background,
        planted_bytes,
    }
}

/// Panics unless every case's wanted session and its tool dump match its query: a case whose
/// words are not all in its wanted session measures nothing.
fn check_set(build: &Build, home: &Path, set: &Set) {
    for (i, case) in set.cases.iter().enumerate() {
        let (sessions, _) = build.search(home, &case.query, 0);
        for kind in [Kind::Wanted, Kind::Dump] {
            let id = plant::session_id(i, kind);
            assert!(
                sessions.contains(&id),
                "set.toml: {:?} does not find {}",
                case.query,
                kind.label()
            );
        }
    }
}

/// The home archived by each build: the baseline's first, when `JUDGED_BASELINE_BIN` names
/// one, then this one's.
fn archive_with_each(home: &Path, scratch: &Path) -> Vec<Build> {
    let mut builds = Vec::new();
    if let Some(bin) = std::env::var_os("JUDGED_BASELINE_BIN") {
        builds.push(Build::archive("baseline", Path::new(&bin), home, scratch));
    }
    builds.push(Build::archive("this build", Path::new(BIN), home, scratch));
    builds
}

/// The report: the home, the measure per build, whose session came first, the times, and
/// each query's rank.
fn report(run: &Run, home: &Home, builds: &[Build], costs: &Costs) -> String {
    let set = &run.set;
    let mut md = format!(
        "Taken {} ({} timed runs of each query per build). {}\n\n",
        run.started, run.runs, run.machine
    );
    let bg = &home.background;
    let _ = writeln!(
        md,
        "Home: {} Claude Code and {} Codex transcripts ({:.1} MB, real-shaped), and the set's \
         {} queries' {} planted sessions ({:.1} MB).\n",
        bg.claude.files,
        bg.codex.files,
        bg.bytes() as f64 / 1e6,
        set.cases.len(),
        set.cases.len() * Kind::ALL.len(),
        home.planted_bytes as f64 / 1e6
    );
    let answers: Vec<Answers> = (builds.iter().zip(&costs.judged.sessions))
        .map(|(b, sessions)| Answers {
            name: b.name.clone(),
            sessions: sessions.clone(),
        })
        .collect();
    md.push_str(&measure::quality_table(&set.cases, &answers));
    md.push('\n');
    md.push_str(&measure::first_hits_table(&answers));
    md.push('\n');
    md.push_str(&ask::cost_table(builds, costs));
    md.push('\n');
    md.push_str(&measure::ranks_table(&set.cases, &answers));
    let _ = writeln!(md, "\nLoad average at end {}.", machine::load());
    md
}

/// What a run of the benchmark measures, and when and where it started.
struct Run {
    set: Set,
    /// Timed runs of each query per build.
    runs: usize,
    started: String,
    /// The machine, and its load average at the start.
    machine: String,
}

fn main() {
    let run = Run {
        set: Set::load(),
        runs: env_or("JUDGED_RUNS", 5) as usize,
        started: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        machine: Machine::summary(),
    };
    let bench = machine::target_dir().join("bench");
    let scratch = bench.join("judged-scratch");
    let _ = fs::remove_dir_all(&scratch);
    fs::create_dir_all(&scratch).expect("creating target/bench/judged-scratch");
    let home = write_home(&scratch, &run.set, env_or("JUDGED_MB", 256));
    let builds = archive_with_each(&home.dir, &scratch);
    check_set(builds.last().expect("this build"), &home.dir, &run.set);
    let queries: Vec<&str> = run.set.cases.iter().map(|c| c.query.as_str()).collect();
    let costs = Costs {
        judged: ask::ask(&builds, &home.dir, &queries, run.runs),
        broad: ask::ask(&builds, &home.dir, BROAD, run.runs),
        instructions: ask::instructions(&builds, &home.dir, &[&queries[..], BROAD].concat()),
        floors: (builds.iter())
            .map(|b| build::floor(b, &home.dir, run.runs))
            .collect(),
    };
    let md = report(&run, &home, &builds, &costs);
    println!("\n{md}");
    fs::write(bench.join("judged.md"), &md).expect("writing judged.md");
    println!("wrote {}", bench.join("judged.md").display());
    let _ = fs::remove_dir_all(&scratch);
}
