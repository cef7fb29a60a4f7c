//! Shared helpers: a temp directory with an archive and a watched root, driven through the
//! real binary.

use serde_json::Value;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tempfile::TempDir;

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");

/// A test environment: `dir/watch` is the watched root, `dir/state/archive.db` the archive,
/// `dir/home` the HOME the binary sees.
pub(crate) struct Env {
    pub dir: TempDir,
    pub db: PathBuf,
    pub root: PathBuf,
}

impl Env {
    pub(crate) fn new() -> Env {
        Env::in_dir(tempfile::tempdir().unwrap())
    }

    /// An environment outside /tmp, for what a service with a private /tmp must reach.
    pub(crate) fn outside_tmp() -> Env {
        Env::in_dir(tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap())
    }

    fn in_dir(dir: TempDir) -> Env {
        let root = dir.path().join("watch");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(dir.path().join("home")).unwrap();
        let db = dir.path().join("state").join("archive.db");
        Env { dir, db, root }
    }

    /// The default configuration file under the test's HOME.
    pub(crate) fn config_path(&self) -> PathBuf {
        self.dir
            .path()
            .join("home/.config/transcript-sync/config.toml")
    }

    /// Writes the default configuration file; returns its path.
    pub(crate) fn write_config(&self, text: &str) -> PathBuf {
        let path = self.config_path();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The binary with a clean environment of its own.
    pub(crate) fn cmd(&self) -> Command {
        self.command(BIN)
    }

    /// `program` with the clean environment the binary gets.
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("HOME", self.dir.path().join("home"))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RUST_LOG", "info");
        cmd
    }

    /// `run --once` with the built-in watchers under the env's HOME (no `--watch`); must
    /// succeed. Returns stderr.
    pub(crate) fn run_once_home(&self) -> String {
        let out = (self.cmd().args(["run", "--once", "--db"]).arg(&self.db))
            .output()
            .unwrap();
        assert!(out.status.success(), "run --once failed:\n{}", stderr(&out));
        stderr(&out)
    }

    /// `run --once` over the watched root; must succeed. Returns stderr.
    pub(crate) fn run_once(&self, extra: &[&str]) -> String {
        let out = self.run_once_output(extra);
        assert!(out.status.success(), "run --once failed:\n{}", stderr(&out));
        stderr(&out)
    }

    pub(crate) fn run_once_output(&self, extra: &[&str]) -> Output {
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
    pub(crate) fn seed(&self, path: &Path, extra: &[&str]) -> Output {
        let mut cmd = self.cmd();
        cmd.arg("seed")
            .arg(path)
            .arg("--db")
            .arg(&self.db)
            .args(extra);
        cmd.output().unwrap()
    }

    /// `seed PATH`, which must succeed; returns (stdout, stderr).
    pub(crate) fn seed_ok(&self, path: &Path, extra: &[&str]) -> (String, String) {
        let out = self.seed(path, extra);
        assert!(out.status.success(), "seed failed:\n{}", stderr(&out));
        let err = stderr(&out);
        (String::from_utf8(out.stdout).unwrap(), err)
    }

    /// `export` lines.
    pub(crate) fn export(&self, extra: &[&str]) -> Vec<String> {
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
    pub(crate) fn rejects(&self, extra: &[&str]) -> Vec<Value> {
        let out = self.rejects_output(&["--json"], extra);
        assert!(out.status.success(), "rejects failed:\n{}", stderr(&out));
        (String::from_utf8(out.stdout).unwrap().lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// `rejects --raw ID`: the bytes it writes.
    pub(crate) fn reject_raw(&self, id: &Value) -> Vec<u8> {
        let out = self.rejects_output(&["--raw", &id.to_string()], &[]);
        assert!(
            out.status.success(),
            "rejects --raw failed:\n{}",
            stderr(&out)
        );
        out.stdout
    }

    pub(crate) fn rejects_output(&self, args: &[&str], extra: &[&str]) -> Output {
        let mut cmd = self.cmd();
        cmd.arg("rejects")
            .arg("--db")
            .arg(&self.db)
            .args(args)
            .args(extra);
        cmd.output().unwrap()
    }

    /// The raw records `export` prints, in seq order.
    pub(crate) fn records(&self) -> Vec<String> {
        self.export(&[])
            .iter()
            .map(|l| raw_record(l).to_owned())
            .collect()
    }

    /// The raw records of one file (by current path), in seq order.
    pub(crate) fn records_of(&self, rel: &str) -> Vec<String> {
        self.export_records_of(&self.path(rel))
    }

    /// The raw records of the file at `path` (anywhere), in seq order.
    pub(crate) fn export_records_of(&self, path: &Path) -> Vec<String> {
        self.export(&["--path", path.to_str().unwrap()])
            .iter()
            .map(|l| raw_record(l).to_owned())
            .collect()
    }

    pub(crate) fn status(&self) -> Value {
        let out = self
            .cmd()
            .args(["status", "--json", "--db"])
            .arg(&self.db)
            .output()
            .unwrap();
        assert!(out.status.success(), "status failed:\n{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Runs one SQL query on the archive and returns the first column of every row as text.
    pub(crate) fn sql(&self, query: &str) -> Vec<String> {
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

    pub(crate) fn write(&self, rel: &str, bytes: &[u8]) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

    pub(crate) fn append(&self, rel: &str, bytes: &[u8]) {
        let mut f = OpenOptions::new()
            .append(true)
            .open(self.path(rel))
            .unwrap();
        f.write_all(bytes).unwrap();
    }

    /// Writes `bytes` to a temporary name beside `rel` and renames it over `rel`.
    pub(crate) fn replace_atomically(&self, rel: &str, bytes: &[u8]) {
        let tmp = self.dir.path().join("replacement.tmp");
        fs::write(&tmp, bytes).unwrap();
        fs::rename(&tmp, self.path(rel)).unwrap();
    }
}

/// Runs the shell command line `command` on a pseudo-terminal, under `script`, as a person
/// would see it; it must succeed. Returns what it drew, with `\r\n` as `\n`.
pub(crate) fn on_a_terminal(env: &Env, command: &str) -> String {
    let out = env
        .command("script")
        .env("TERM", "xterm")
        .args(["-qec", command, "/dev/null"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{command}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n")
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The verbatim record inside an envelope line.
pub(crate) fn raw_record(line: &str) -> &str {
    let start = line.find(",\"record\":").expect("envelope has a record") + ",\"record\":".len();
    &line[start..line.len() - 1]
}

/// `n` JSON records, each on its own line, with a tag so tests can tell sets apart.
pub(crate) fn records(tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!(r#"{{"tag":"{tag}","n":{i}}}"#))
        .collect()
}

pub(crate) fn lines(records: &[String]) -> Vec<u8> {
    records
        .iter()
        .flat_map(|r| format!("{r}\n").into_bytes())
        .collect()
}

/// A counter from the `pass complete` line, e.g. `counter(&log, "opened")`.
pub(crate) fn counter(log: &str, name: &str) -> u64 {
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

pub(crate) fn assert_log_has(log: &str, needle: &str) {
    assert!(log.contains(needle), "log lacks {needle:?}:\n{log}");
}

/// What a test does with a daemon's stdout (the tap).
#[derive(Clone)]
pub(crate) enum TapReader {
    /// Read every line.
    Read,
    /// Keep the pipe open and never read it.
    Stall,
    /// Close the read end at once.
    Close,
    /// Start reading every line once something arrives on (or closes) this channel.
    Gated(crossbeam_channel::Receiver<()>),
}

/// A `run --sink stdout` daemon on real files. Its stderr is collected so tests can wait for a
/// log line; its tap lines arrive on a channel.
pub(crate) struct Daemon {
    pub child: std::process::Child,
    log: std::sync::Arc<(std::sync::Mutex<String>, std::sync::Condvar)>,
    pub tap: crossbeam_channel::Receiver<String>,
    _stdout: Option<std::process::ChildStdout>,
}

/// How long a test waits for a condition before it fails.
pub(crate) const PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

impl Daemon {
    /// Starts the daemon watching `watch` (the env's root when empty).
    pub(crate) fn start(env: &Env, watch: &[&Path], extra: &[&str], tap: TapReader) -> Daemon {
        Daemon::spawn(Daemon::command(env, watch, extra), tap)
    }

    /// The command line [`Daemon::start`] runs, for a test to add to.
    pub(crate) fn command(env: &Env, watch: &[&Path], extra: &[&str]) -> Command {
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

    /// Starts the daemon on the env's root without a tap (no `--sink`), rescanning hourly.
    pub(crate) fn start_without_tap(env: &Env) -> Daemon {
        let mut cmd = env.cmd();
        cmd.args(["run", "--rescan-interval", "3600", "--db"])
            .arg(&env.db)
            .arg("--watch")
            .arg(&env.root);
        Daemon::spawn(cmd, TapReader::Read)
    }

    /// Starts `cmd` (a `run` command line) as a daemon with its stdout and stderr captured.
    pub(crate) fn spawn(mut cmd: Command, tap: TapReader) -> Daemon {
        use std::io::{BufRead, BufReader};
        use std::process::Stdio;
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let log = std::sync::Arc::new((
            std::sync::Mutex::new(String::new()),
            std::sync::Condvar::new(),
        ));
        let stderr = child.stderr.take().unwrap();
        let sink = std::sync::Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let (text, cond) = &*sink;
                let mut text = text.lock().unwrap();
                text.push_str(&line);
                text.push('\n');
                cond.notify_all();
            }
        });
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut stdout = child.stdout.take();
        match tap {
            TapReader::Read | TapReader::Gated(_) => {
                let out = stdout.take().unwrap();
                let gate = match tap {
                    TapReader::Gated(gate) => Some(gate),
                    _ => None,
                };
                std::thread::spawn(move || {
                    if let Some(gate) = gate {
                        let _ = gate.recv();
                    }
                    for line in BufReader::new(out).lines() {
                        let Ok(line) = line else { break };
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                });
            }
            TapReader::Stall => {}
            TapReader::Close => drop(stdout.take()),
        }
        Daemon {
            child,
            log,
            tap: rx,
            _stdout: stdout,
        }
    }

    pub(crate) fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Everything logged so far.
    pub(crate) fn log(&self) -> String {
        self.log.0.lock().unwrap().clone()
    }

    /// Waits until the log contains `needle`; returns the log.
    pub(crate) fn wait_log(&self, needle: &str) -> String {
        self.wait_log_times(needle, 1)
    }

    /// Waits until the log contains `needle` `n` times; returns the log.
    pub(crate) fn wait_log_times(&self, needle: &str, n: usize) -> String {
        let (text, cond) = &*self.log;
        let deadline = std::time::Instant::now() + PATIENCE;
        let mut guard = text.lock().unwrap();
        while guard.matches(needle).count() < n {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "log never showed {needle:?}:\n{guard}");
            guard = cond.wait_timeout(guard, left).unwrap().0;
        }
        guard.clone()
    }

    /// The next `n` tap lines.
    pub(crate) fn take_tap(&self, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| {
                self.tap.recv_timeout(PATIENCE).unwrap_or_else(|_| {
                    panic!("tap line {i} of {n} never came; log:\n{}", self.log())
                })
            })
            .collect()
    }

    pub(crate) fn signal(&self, sig: i32) {
        assert_eq!(unsafe { libc::kill(self.pid(), sig) }, 0);
    }

    /// Sends SIGTERM and waits for the exit; returns the status and how long it took.
    pub(crate) fn terminate(mut self) -> (std::process::ExitStatus, std::time::Duration) {
        self.signal(libc::SIGTERM);
        self.wait_exit()
    }

    /// Waits for the daemon to exit; returns the status and how long that took.
    pub(crate) fn wait_exit(&mut self) -> (std::process::ExitStatus, std::time::Duration) {
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status, start.elapsed());
            }
            assert!(
                start.elapsed() < PATIENCE,
                "daemon did not stop:\n{}",
                self.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `cond` holds, checking every few milliseconds.
pub(crate) fn wait_until(what: &str, cond: impl FnMut() -> bool) {
    wait_until_else(what, cond, String::new);
}

/// [`wait_until`], with what `context` says (logs, a command's errors) in the message of a
/// time-out.
pub(crate) fn wait_until_else(
    what: &str,
    mut cond: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !cond() {
        if std::time::Instant::now() >= deadline {
            panic!("timed out waiting for {what}\n{}", context());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Records in the archive, counted directly (works while a daemon writes).
pub(crate) fn archived(env: &Env) -> u64 {
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
pub(crate) struct LargeBackfill(Vec<Vec<String>>);

impl LargeBackfill {
    pub(crate) const RECORDS: u64 = 20_000;

    pub(crate) fn write(env: &Env) -> LargeBackfill {
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
    pub(crate) fn finish_and_check(&self, env: &Env) {
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

/// A PostgreSQL cluster of the test's own: Debian's `postgresql` binaries, `initdb` in a temp
/// directory, listening on a free port of 127.0.0.1 with password authentication (user
/// `tsync`, password `secret`), run as nobody when the test runs as root (PostgreSQL refuses
/// to run as root). Stopped when dropped.
pub(crate) struct PgCluster {
    dir: TempDir,
    bin: PathBuf,
    pub port: u16,
    /// TLS only (`hostssl`), with a self-signed certificate for 127.0.0.1 and localhost.
    tls: bool,
}

/// The PostgreSQL test user and its password.
pub(crate) const PG_USER: &str = "tsync";
pub(crate) const PG_PASSWORD: &str = "secret";

impl PgCluster {
    pub(crate) fn start() -> PgCluster {
        PgCluster::start_with(false)
    }

    /// A cluster that takes TLS connections only, with a self-signed certificate
    /// ([`PgCluster::certificate`]) for 127.0.0.1 and localhost.
    pub(crate) fn start_tls() -> PgCluster {
        PgCluster::start_with(true)
    }

    fn start_with(tls: bool) -> PgCluster {
        let bin = pg_bin();
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let pw = dir.path().join("pw");
        fs::write(&pw, PG_PASSWORD).unwrap();
        let data = dir.path().join("data");
        fs::create_dir(&data).unwrap();
        let cluster = PgCluster {
            dir,
            bin,
            port: free_port(),
            tls,
        };
        if tls {
            cluster.make_certificate();
        }
        cluster.give_away(&data);
        let initdb = cluster
            .pg_command("initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                PG_USER,
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pw.display()))
            .output()
            .unwrap();
        assert!(initdb.status.success(), "initdb: {}", stderr(&initdb));
        if tls {
            let hba = data.join("pg_hba.conf");
            let text = fs::read_to_string(&hba)
                .unwrap()
                .replace("\nhost ", "\nhostssl ");
            fs::write(&hba, text).unwrap();
        }
        cluster.start_again();
        cluster
    }

    /// The certificate (PEM) of the CA that signed the server's.
    pub(crate) fn certificate(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A CA, and a server certificate it signs for 127.0.0.1 and localhost.
    fn make_certificate(&self) {
        let d = self.dir.path();
        fs::write(
            d.join("san.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .unwrap();
        let openssl = |args: &[&str]| {
            let out = Command::new("openssl")
                .current_dir(d)
                .args(args)
                .output()
                .expect("openssl (.ci/run installs it)");
            assert!(out.status.success(), "openssl {args:?}: {}", stderr(&out));
        };
        let ca = "/CN=transcript-sync test CA";
        openssl(&[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", ca, "-keyout",
            "ca.key", "-out", "ca.crt",
        ]);
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ]);
        openssl(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "san.ext",
            "-out",
            "server.crt",
        ]);
        let key = d.join("server.key");
        fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    }

    /// `pg_ctl start`, waiting until it accepts connections.
    pub(crate) fn start_again(&self) {
        let data = self.dir.path().join("data");
        let mut options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        if self.tls {
            let dir = self.dir.path().display();
            options.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={dir}/server.crt -c ssl_key_file={dir}/server.key"
            ));
        }
        let out = self
            .pg_command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(["-o", &options, "-w", "start"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl start: {}\n{}",
            stderr(&out),
            self.log()
        );
    }

    /// `pg_ctl stop -m fast`.
    pub(crate) fn stop(&self) {
        let out = self
            .pg_command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "fast", "-w", "stop"])
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_ctl stop: {}", stderr(&out));
    }

    /// The server's log.
    pub(crate) fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// The URL of database `postgres`, without the password.
    pub(crate) fn url(&self) -> String {
        format!("postgres://{PG_USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// A file holding the password, for `password_file`.
    pub(crate) fn password_file(&self) -> PathBuf {
        self.dir.path().join("pw")
    }

    /// Runs `sql` with psql; its rows, one line each, columns separated by `|`.
    pub(crate) fn psql(&self, sql: &str) -> Vec<String> {
        let out = self.try_psql(sql);
        assert!(out.status.success(), "psql {sql}: {}", stderr(&out));
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// A psql session reading statements from its stdin, its results on its stdout.
    pub(crate) fn psql_session(&self) -> std::process::Child {
        use std::process::Stdio;
        let mut cmd = self.psql_command();
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        cmd.spawn().unwrap()
    }

    pub(crate) fn try_psql(&self, sql: &str) -> Output {
        self.psql_command().args(["-c", sql]).output().unwrap()
    }

    /// psql on database `postgres` as the test user: unaligned rows, stopping at an error.
    fn psql_command(&self) -> Command {
        let port = self.port.to_string();
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.args(["-h", "127.0.0.1", "-p", &port, "-U", PG_USER])
            .args(["-d", "postgres", "-At", "-v", "ON_ERROR_STOP=1"])
            .env("PGPASSWORD", PG_PASSWORD);
        cmd
    }

    /// A PostgreSQL program, as nobody when the test runs as root.
    fn pg_command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if unsafe { libc::geteuid() } != 0 {
            return Command::new(path);
        }
        let mut cmd = Command::new("setpriv");
        cmd.args([
            "--reuid",
            "nobody",
            "--regid",
            "nogroup",
            "--clear-groups",
            "--",
        ])
        .arg(path);
        cmd
    }

    fn give_away(&self, data: &Path) {
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let status = Command::new("chown")
            .args(["-R", "nobody:nogroup"])
            .arg(self.dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "chown {data:?}");
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let _ = self
            .pg_command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin`.
fn pg_bin() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed: `apt-get install postgresql` (.ci/run does)")
        .filter_map(|e| {
            let e = e.ok()?;
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .expect("a PostgreSQL version under /usr/lib/postgresql")
        .1
}

/// A TCP port of 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// What the test collector does with a request.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Answer {
    /// 200.
    Accept,
    /// 503 with `Retry-After: 0`.
    Unavailable,
    /// Waits this long, then 200 (after the client gave up).
    Slow(std::time::Duration),
    /// Closes the connection with a reset, without an answer.
    Reset,
}

/// A request the collector received: its headers (lowercase names), its body un-gzipped, and
/// the status it answered (0 for none).
#[derive(Clone, Debug)]
pub(crate) struct Received {
    pub headers: std::collections::HashMap<String, String>,
    pub body: Vec<u8>,
    pub status: u16,
}

/// An HTTP/1.1 server on loopback that answers from a script, then accepts; a request whose
/// body holds `refuse` gets a 400 that quotes the start of the body back, as many do.
pub(crate) struct Collector {
    pub port: u16,
    pub script: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<Answer>>>,
    pub refuse: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    pub received: std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
}

impl Collector {
    pub(crate) fn start(script: &[Answer], refuse: Option<&str>) -> Collector {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = Collector {
            port: listener.local_addr().unwrap().port(),
            script: std::sync::Arc::new(std::sync::Mutex::new(script.iter().copied().collect())),
            refuse: std::sync::Arc::new(std::sync::Mutex::new(refuse.map(str::to_owned))),
            received: Default::default(),
        };
        let (script, refuse, received) = (c.script.clone(), c.refuse.clone(), c.received.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (script, refuse, received) = (script.clone(), refuse.clone(), received.clone());
                std::thread::spawn(move || serve(stream, &script, &refuse, &received));
            }
        });
        c
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}/ingest", self.port)
    }

    /// The bodies of the requests it accepted, in order.
    pub(crate) fn bodies(&self) -> Vec<Vec<u8>> {
        (self.received.lock().unwrap().iter())
            .filter(|r| r.status == 200)
            .map(|r| r.body.clone())
            .collect()
    }

    /// The keys (source, generation, offset) of the records in accepted requests, and how
    /// many times each came.
    pub(crate) fn accepted(&self) -> std::collections::BTreeMap<(i64, i64, i64), usize> {
        let mut keys = std::collections::BTreeMap::new();
        for r in self
            .received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.status == 200)
        {
            for line in r.body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let v: serde_json::Value = serde_json::from_slice(line).unwrap();
                let key = (
                    v["source"].as_i64().unwrap(),
                    v["generation"].as_i64().unwrap(),
                    v["offset"].as_i64().unwrap(),
                );
                *keys.entry(key).or_insert(0) += 1;
            }
        }
        keys
    }
}

/// Serves one connection's requests.
fn serve(
    stream: std::net::TcpStream,
    script: &std::sync::Mutex<std::collections::VecDeque<Answer>>,
    refuse: &std::sync::Mutex<Option<String>>,
    received: &std::sync::Mutex<Vec<Received>>,
) {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut headers = std::collections::HashMap::new();
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap();
            headers.insert(name.to_ascii_lowercase(), value.trim().to_owned());
        }
        let len: usize = headers["content-length"].parse().unwrap();
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        if headers.get("content-encoding").map(String::as_str) == Some("gzip") {
            let mut plain = Vec::new();
            flate2::read::GzDecoder::new(&body[..])
                .read_to_end(&mut plain)
                .unwrap();
            body = plain;
        }
        let answer = script.lock().unwrap().pop_front().unwrap_or(Answer::Accept);
        let refused = (refuse.lock().unwrap().as_ref())
            .is_some_and(|m| body.windows(m.len()).any(|w| w == m.as_bytes()));
        let status = match answer {
            Answer::Reset => 0,
            Answer::Unavailable => 503,
            _ if refused => 400,
            Answer::Accept | Answer::Slow(_) => 200,
        };
        let start: String = String::from_utf8_lossy(&body).chars().take(588).collect();
        received.lock().unwrap().push(Received {
            headers,
            body,
            status,
        });
        let reply = match (answer, status) {
            (Answer::Reset, _) => {
                reset(&out);
                return;
            }
            (Answer::Slow(d), 200) => {
                std::thread::sleep(d);
                "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_owned()
            }
            (_, 400) => {
                let quoted = format!("bad record: {start}");
                format!(
                    "HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\n\r\n{quoted}",
                    quoted.len()
                )
            }
            (_, 503) => "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 4\r\n\r\nbusy".into(),
            _ => "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_owned(),
        };
        if out.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// Closes `stream` with a TCP reset (SO_LINGER 0) rather than an orderly close.
fn reset(stream: &std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor, and a pointer to a linger of the size given.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}
