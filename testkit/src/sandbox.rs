//! A sandbox: a temp directory with an archive, a watched root and a HOME, driven through the
//! real binary; and reading back what the binary wrote (exports, logs, the archive itself).

use crate::daemon::{Daemon, PATIENCE, TapReader};
use serde_json::Value;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tempfile::TempDir;

/// What a [`Sandbox`] needs to know of the package whose binary it drives. Cargo expands
/// these `env!` variables only in that package's own tests and benches, so they implement
/// this trait for a type of theirs.
pub trait Package {
    /// The binary: `env!("CARGO_BIN_EXE_<name>")`.
    const BIN: &'static str;
    /// The package's root, `env!("CARGO_MANIFEST_DIR")`: `tests/fixtures/` is below it.
    const MANIFEST_DIR: &'static str;
    /// Scratch space under `target/`, `env!("CARGO_TARGET_TMPDIR")`.
    const TARGET_TMPDIR: &'static str;
}

/// A temp directory for `P`'s binary: `dir/watch` is the watched root, `dir/state/archive.db`
/// the archive, `dir/home` the HOME the binary sees. Removed when dropped.
pub struct Sandbox<P> {
    /// The temp directory, whole.
    pub dir: TempDir,
    /// The archive, `dir/state/archive.db`; the binary creates it.
    pub db: PathBuf,
    /// The watched root, `dir/watch`.
    pub root: PathBuf,
    package: PhantomData<P>,
}

impl<P: Package> Default for Sandbox<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Package> Sandbox<P> {
    /// A sandbox under the system's temp directory.
    pub fn new() -> Self {
        Self::in_dir(tempfile::tempdir().unwrap())
    }

    /// A sandbox outside /tmp, for what a service with a private /tmp must reach.
    pub fn outside_tmp() -> Self {
        Self::in_dir(tempfile::tempdir_in(P::TARGET_TMPDIR).unwrap())
    }

    fn in_dir(dir: TempDir) -> Self {
        let root = dir.path().join("watch");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(dir.path().join("home")).unwrap();
        let db = dir.path().join("state").join("archive.db");
        Sandbox {
            dir,
            db,
            root,
            package: PhantomData,
        }
    }

    /// The default configuration file under the sandbox's HOME.
    pub fn config_path(&self) -> PathBuf {
        self.dir
            .path()
            .join("home/.config/transcript-sync/config.toml")
    }

    /// Writes the default configuration file; returns its path.
    pub fn write_config(&self, text: &str) -> PathBuf {
        let path = self.config_path();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    /// `rel` below the watched root.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The binary with a clean environment of its own.
    pub fn cmd(&self) -> Command {
        self.command(P::BIN)
    }

    /// The binary as a user without root's power to read any file: this process's user, or
    /// nobody (given the sandbox's tree) when that is root, so that a mode of 000 holds.
    pub fn cmd_unprivileged(&self) -> Command {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return self.cmd();
        }
        let status = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(self.dir.path())
            .status()
            .expect("run chown");
        assert!(status.success(), "chown -R nobody {:?}", self.dir.path());
        let mut cmd = self.command("setpriv");
        cmd.args([
            "--reuid",
            "65534",
            "--regid",
            "65534",
            "--clear-groups",
            "--",
            P::BIN,
        ]);
        cmd
    }

    /// `program` with the clean environment the binary gets.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("HOME", self.dir.path().join("home"))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RUST_LOG", "info")
            // One time zone everywhere, for what is kept in local time (Aider's history).
            .env("TZ", "UTC")
            // What a command writes on a terminal goes to the test, not through `less`, which
            // would wait for a key; the pager's own test sets PAGER itself.
            .env("PAGER", "cat");
        cmd
    }

    /// `run --once` with the built-in watchers under the sandbox's HOME (no `--watch`); must
    /// succeed. Returns stderr.
    pub fn run_once_home(&self) -> String {
        let out = (self.cmd().args(["run", "--once", "--db"]).arg(&self.db))
            .output()
            .unwrap();
        assert!(out.status.success(), "run --once failed:\n{}", stderr(&out));
        stderr(&out)
    }

    /// `run --once` over the watched root; must succeed. Returns stderr.
    pub fn run_once(&self, extra: &[&str]) -> String {
        let out = self.run_once_output(extra);
        assert!(out.status.success(), "run --once failed:\n{}", stderr(&out));
        stderr(&out)
    }

    /// `run --once` over the watched root with `extra` arguments, as it ended.
    pub fn run_once_output(&self, extra: &[&str]) -> Output {
        self.cmd()
            .args(["run", "--once", "--db"])
            .arg(&self.db)
            .arg("--watch")
            .arg(&self.root)
            .args(extra)
            .output()
            .unwrap()
    }

    /// `seed PATH` with `extra` arguments.
    pub fn seed(&self, path: &Path, extra: &[&str]) -> Output {
        let mut cmd = self.cmd();
        cmd.arg("seed")
            .arg(path)
            .arg("--db")
            .arg(&self.db)
            .args(extra);
        cmd.output().unwrap()
    }

    /// `seed PATH`, which must succeed; returns (stdout, stderr).
    pub fn seed_ok(&self, path: &Path, extra: &[&str]) -> (String, String) {
        let out = self.seed(path, extra);
        assert!(out.status.success(), "seed failed:\n{}", stderr(&out));
        let err = stderr(&out);
        (String::from_utf8(out.stdout).unwrap(), err)
    }

    /// `export` lines.
    pub fn export(&self, extra: &[&str]) -> Vec<String> {
        let out = self
            .cmd()
            .arg("export")
            .arg("--db")
            .arg(&self.db)
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "export failed:\n{}", stderr(&out));
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// `rejects --json`, one value per reject.
    pub fn rejects(&self, extra: &[&str]) -> Vec<Value> {
        let out = self.rejects_output(&["--json"], extra);
        assert!(out.status.success(), "rejects failed:\n{}", stderr(&out));
        (String::from_utf8(out.stdout).unwrap().lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// `rejects --raw ID`: the bytes it writes.
    pub fn reject_raw(&self, id: &Value) -> Vec<u8> {
        let out = self.rejects_output(&["--raw", &id.to_string()], &[]);
        assert!(
            out.status.success(),
            "rejects --raw failed:\n{}",
            stderr(&out)
        );
        out.stdout
    }

    /// `rejects` with `args` and `extra` arguments, as it ended.
    pub fn rejects_output(&self, args: &[&str], extra: &[&str]) -> Output {
        let mut cmd = self.cmd();
        cmd.arg("rejects")
            .arg("--db")
            .arg(&self.db)
            .args(args)
            .args(extra);
        cmd.output().unwrap()
    }

    /// The raw records `export` prints, in seq order.
    pub fn records(&self) -> Vec<String> {
        self.export(&[])
            .iter()
            .map(|l| raw_record(l).to_owned())
            .collect()
    }

    /// The raw records of one file (by current path), in seq order.
    pub fn records_of(&self, rel: &str) -> Vec<String> {
        self.export_records_of(&self.path(rel))
    }

    /// The raw records of the file at `path` (anywhere), in seq order.
    pub fn export_records_of(&self, path: &Path) -> Vec<String> {
        self.export(&["--path", path.to_str().unwrap()])
            .iter()
            .map(|l| raw_record(l).to_owned())
            .collect()
    }

    /// `status --json`, which must succeed.
    pub fn status(&self) -> Value {
        let out = self
            .cmd()
            .args(["status", "--json", "--db"])
            .arg(&self.db)
            .output()
            .unwrap();
        assert!(out.status.success(), "status failed:\n{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The session index's file, beside the archive.
    pub fn index_file(&self) -> PathBuf {
        PathBuf::from(format!("{}-index", self.db.display()))
    }

    /// Runs one SQL query on the archive and returns the first column of every row as text.
    pub fn sql(&self, query: &str) -> Vec<String> {
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        let mut stmt = conn.prepare(query).unwrap();
        stmt.query_map([], |r| {
            let v: rusqlite::types::Value = r.get(0)?;
            Ok(match v {
                rusqlite::types::Value::Null => "NULL".into(),
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Real(f) => f.to_string(),
                rusqlite::types::Value::Text(t) => t,
                rusqlite::types::Value::Blob(b) => String::from_utf8_lossy(&b).into_owned(),
            })
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    }

    /// Writes `bytes` as the file `rel` below the watched root, creating its directories.
    pub fn write(&self, rel: &str, bytes: &[u8]) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

    /// Appends `bytes` to the existing file `rel` below the watched root.
    pub fn append(&self, rel: &str, bytes: &[u8]) {
        let mut f = OpenOptions::new()
            .append(true)
            .open(self.path(rel))
            .unwrap();
        f.write_all(bytes).unwrap();
    }

    /// Writes `bytes` to a temporary name beside `rel` and renames it over `rel`.
    pub fn replace_atomically(&self, rel: &str, bytes: &[u8]) {
        let tmp = self.dir.path().join("replacement.tmp");
        fs::write(&tmp, bytes).unwrap();
        fs::rename(&tmp, self.path(rel)).unwrap();
    }
}

/// Runs the shell command line `command` on a pseudo-terminal, under `script`, as a person
/// would see it; it must succeed. Returns what it drew, with `\r\n` as `\n`.
pub fn on_a_terminal<P: Package>(env: &Sandbox<P>, command: &str) -> String {
    let out = env
        .command("script")
        .env("TERM", "xterm")
        .args(["-qec", command, "/dev/null"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{command}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n")
}

/// Copies `P`'s recorded agent fixture `agent` (`tests/fixtures/agents/<agent>/`, laid out as
/// the agent's home) into `home`, but its `RECORDED` note; returns the files, as paths below
/// `home`.
pub fn copy_agent_fixture<P: Package>(agent: &str, home: &Path) -> Vec<PathBuf> {
    let from = Path::new(P::MANIFEST_DIR)
        .join("tests/fixtures/agents")
        .join(agent);
    copy_tree(&from, home)
}

fn copy_tree(from: &Path, to: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dst = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            fs::create_dir_all(&dst).unwrap();
            files.extend(copy_tree(&entry.path(), &dst));
        } else if entry.file_name() != "RECORDED" {
            fs::copy(entry.path(), &dst).unwrap();
            files.push(dst);
        }
    }
    files
}

/// The binary, with the clean environment of `env`, run with `args` on its archive (`--db`).
pub fn cli<P: Package>(env: &Sandbox<P>, args: &[&str]) -> Output {
    (env.cmd().args(args).arg("--db").arg(&env.db))
        .output()
        .unwrap()
}

/// What [`cli`] prints on stdout; it must succeed.
pub fn stdout_of<P: Package>(env: &Sandbox<P>, args: &[&str]) -> String {
    let out = cli(env, args);
    assert!(out.status.success(), "{args:?} failed:\n{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// What a finished command wrote on stderr, as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The verbatim record inside an envelope line.
pub fn raw_record(line: &str) -> &str {
    let start = line.find(",\"record\":").expect("envelope has a record") + ",\"record\":".len();
    &line[start..line.len() - 1]
}

/// `n` JSON records, each on its own line, with a tag so tests can tell sets apart.
pub fn records(tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!(r#"{{"tag":"{tag}","n":{i}}}"#))
        .collect()
}

/// `records`, each ended by a newline, as the bytes of a file.
pub fn lines(records: &[String]) -> Vec<u8> {
    records
        .iter()
        .flat_map(|r| format!("{r}\n").into_bytes())
        .collect()
}

/// A counter from the `pass complete` line, e.g. `counter(&log, "opened")`.
pub fn counter(log: &str, name: &str) -> u64 {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("pass complete"))
        .expect("pass complete line");
    let key = format!(" {name}=");
    let at = line
        .find(&key)
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        + key.len();
    line[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Fails, showing the log, unless `log` contains `needle`.
pub fn assert_log_has(log: &str, needle: &str) {
    assert!(log.contains(needle), "log lacks {needle:?}:\n{log}");
}

/// Starting a [`Daemon`] in a [`Sandbox`]: its archive, its watched root, its clean
/// environment.
pub trait SandboxDaemon {
    /// Starts the daemon watching `watch` (the sandbox's root when empty).
    fn start<P: Package>(
        env: &Sandbox<P>,
        watch: &[&Path],
        extra: &[&str],
        tap: TapReader,
    ) -> Daemon;

    /// The command line [`SandboxDaemon::start`] runs, for a test to add to.
    fn command<P: Package>(env: &Sandbox<P>, watch: &[&Path], extra: &[&str]) -> Command;

    /// Starts the daemon on the sandbox's root without a tap (no `--sink`), rescanning hourly.
    fn start_without_tap<P: Package>(env: &Sandbox<P>) -> Daemon;
}

impl SandboxDaemon for Daemon {
    fn start<P: Package>(
        env: &Sandbox<P>,
        watch: &[&Path],
        extra: &[&str],
        tap: TapReader,
    ) -> Daemon {
        Daemon::spawn(<Daemon as SandboxDaemon>::command(env, watch, extra), tap)
    }

    fn command<P: Package>(env: &Sandbox<P>, watch: &[&Path], extra: &[&str]) -> Command {
        let mut cmd = env.cmd();
        cmd.args(["run", "--sink", "stdout", "--db"]).arg(&env.db);
        let roots: Vec<&Path> = if watch.is_empty() {
            vec![env.root.as_path()]
        } else {
            watch.to_vec()
        };
        for w in roots {
            cmd.arg("--watch").arg(w);
        }
        // Only events can deliver a record in time unless a test asks for the rescan.
        if !extra.contains(&"--rescan-interval") {
            cmd.args(["--rescan-interval", "3600"]);
        }
        cmd.args(extra);
        cmd
    }

    fn start_without_tap<P: Package>(env: &Sandbox<P>) -> Daemon {
        let mut cmd = env.cmd();
        cmd.args(["run", "--rescan-interval", "3600", "--db"])
            .arg(&env.db)
            .arg("--watch")
            .arg(&env.root);
        Daemon::spawn(cmd, TapReader::Read)
    }
}

/// `run` with the built-in watchers under the sandbox's HOME (no `--watch`), its tap on stdout,
/// rescanning hourly (only events deliver in time).
pub fn home_daemon_cmd<P: Package>(env: &Sandbox<P>) -> Command {
    let mut cmd = env.cmd();
    cmd.args([
        "run",
        "--sink",
        "stdout",
        "--rescan-interval",
        "3600",
        "--db",
    ])
    .arg(&env.db);
    cmd
}

/// Waits until `cond` holds, checking every few milliseconds.
pub fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    wait_until_else(what, cond, String::new);
}

/// [`wait_until`], with what `context` says (logs, a command's errors) in the message of a
/// time-out.
pub fn wait_until_else(what: &str, mut cond: impl FnMut() -> bool, context: impl Fn() -> String) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !cond() {
        if std::time::Instant::now() >= deadline {
            panic!("timed out waiting for {what}\n{}", context());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Records in the archive, counted directly (works while a daemon writes).
pub fn archived<P: Package>(env: &Sandbox<P>) -> u64 {
    if !env.db.exists() {
        return 0;
    }
    let Ok(conn) = rusqlite::Connection::open(&env.db) else {
        return 0;
    };
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    conn.query_row("SELECT count(*) FROM records", [], |r| r.get::<_, i64>(0))
        .map_or(0, |n| n as u64)
}

/// Four files of 5,000 records each: a backfill long enough to interrupt.
pub struct LargeBackfill(Vec<Vec<String>>);

impl LargeBackfill {
    /// The records of all four files.
    pub const RECORDS: u64 = 20_000;

    /// Writes the four files below the sandbox's watched root.
    pub fn write<P: Package>(env: &Sandbox<P>) -> LargeBackfill {
        let files = (0..4)
            .map(|f| {
                let recs = records(&format!("f{f}"), 5000);
                env.write(&format!("f{f}.jsonl"), &lines(&recs));
                recs
            })
            .collect();
        LargeBackfill(files)
    }

    /// After an interrupted run: finishes the backfill with `run --once` and checks that every
    /// file's records are archived exactly once, in order.
    pub fn finish_and_check<P: Package>(&self, env: &Sandbox<P>) {
        let partial = archived(env);
        assert!(
            partial < Self::RECORDS,
            "the interruption landed after the backfill ({partial})"
        );
        env.run_once(&[]);
        for (f, recs) in self.0.iter().enumerate() {
            assert_eq!(&env.records_of(&format!("f{f}.jsonl")), recs, "file {f}");
        }
    }
}
