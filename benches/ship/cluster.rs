//! A PostgreSQL cluster of the benchmark's own: `initdb` in a temporary directory, run as
//! `nobody` when the benchmark runs as root (PostgreSQL refuses root), password
//! authentication on 127.0.0.1, `fsync` and `synchronous_commit` off.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The cluster's user and password.
pub const USER: &str = "tsync";
pub const PASSWORD: &str = "bench";

/// Settings beyond the defaults, the same for every subject: commits and checkpoints do not
/// wait for the disk.
const SETTINGS: &str = "-c fsync=off -c synchronous_commit=off";

/// The server's settings beyond the defaults: [`SETTINGS`], then `SHIP_PG_OPTIONS` (for
/// example `-c default_toast_compression=lz4`).
pub fn settings() -> String {
    match std::env::var("SHIP_PG_OPTIONS") {
        Ok(more) if !more.trim().is_empty() => format!("{SETTINGS} {}", more.trim()),
        _ => SETTINGS.to_owned(),
    }
}

/// A running cluster, stopped when dropped.
pub struct Cluster {
    dir: TempDir,
    bin: PathBuf,
    pub port: u16,
}

impl Cluster {
    /// Creates and starts a cluster, waiting until it takes connections.
    pub fn start() -> Cluster {
        let dir = tempfile::Builder::new()
            .prefix("ship-bench-pg")
            .tempdir()
            .expect("creating the cluster's directory");
        let cluster = Cluster {
            dir,
            bin: pg_bin(),
            port: free_port(),
        };
        let pw = cluster.dir.path().join("pw");
        fs::write(&pw, PASSWORD).expect("writing the password file");
        fs::create_dir(cluster.data()).expect("creating the data directory");
        cluster.give_away();
        let initdb = cluster
            .pg_command("initdb")
            .arg("-D")
            .arg(cluster.data())
            .args(["-U", USER, "-E", "UTF8", "--no-instructions"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", pw.display()))
            .output()
            .expect("starting initdb");
        assert!(initdb.status.success(), "initdb: {}", stderr(&initdb));
        cluster.pg_ctl_start();
        cluster
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn pg_ctl_start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 {}",
            self.port,
            self.dir.path().display(),
            settings()
        );
        let out = self
            .pg_command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(["-o", &options, "-w", "start"])
            .output()
            .expect("starting pg_ctl");
        assert!(
            out.status.success(),
            "pg_ctl start: {}\n{}",
            stderr(&out),
            fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
        );
    }

    /// The URL of database `postgres`, without the password (`PGPASSWORD` gives it).
    pub fn url(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// `psql` on database `postgres` over TCP, stopping at the first error.
    pub fn psql_command(&self) -> Command {
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
            .args(["-d", "postgres", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"])
            .env("PGPASSWORD", PASSWORD);
        cmd
    }

    /// Runs `sql`; its rows, one line each, columns separated by `|`.
    pub fn psql(&self, sql: &str) -> Vec<String> {
        let out = self
            .psql_command()
            .args(["-c", sql])
            .output()
            .expect("starting psql");
        assert!(out.status.success(), "psql {sql}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Runs the psql script `script`; how long it took from spawn to exit.
    pub fn time_script(&self, script: &Path) -> Duration {
        let start = Instant::now();
        let out = self
            .psql_command()
            .arg("-f")
            .arg(script)
            .output()
            .expect("starting psql");
        let took = start.elapsed();
        assert!(out.status.success(), "psql -f {script:?}: {}", stderr(&out));
        took
    }

    /// `postgres (PostgreSQL) 15.x`.
    pub fn version(&self) -> String {
        let out = Command::new(self.bin.join("postgres"))
            .arg("--version")
            .output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    }

    /// CPU time of every server process so far: the postmaster's own, its live children's
    /// (backends, checkpointer, WAL writer, autovacuum) and the children it has reaped.
    pub fn server_cpu(&self) -> Duration {
        let pid_file = fs::read_to_string(self.data().join("postmaster.pid")).unwrap_or_default();
        let Some(postmaster) = pid_file.lines().next().and_then(|l| l.trim().parse().ok()) else {
            return Duration::ZERO;
        };
        let mut ticks = stat_fields(postmaster).map_or(0, |f| f[11] + f[12] + f[13] + f[14]);
        let children = fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(stat_fields)
            .filter(|f| f[1] == u64::from(postmaster));
        ticks += children.map(|f| f[11] + f[12]).sum::<u64>();
        // SAFETY: sysconf reads a constant of the system and touches no memory of ours.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Duration::from_nanos(ticks * 1_000_000_000 / hz)
    }

    /// A PostgreSQL program, as nobody when the benchmark runs as root.
    fn pg_command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if !is_root() {
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

    /// Hands the cluster's directory to nobody, when running as root.
    fn give_away(&self) {
        if !is_root() {
            return;
        }
        let status = Command::new("chown")
            .args(["-R", "nobody:nogroup"])
            .arg(self.dir.path())
            .status()
            .expect("starting chown");
        assert!(status.success(), "chown {:?}", self.dir.path());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .pg_command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "fast", "-w", "stop"])
            .output();
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The newest `/usr/lib/postgresql/<version>/bin`.
fn pg_bin() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed: `apt-get install postgresql`")
        .filter_map(|e| {
            let e = e.ok()?;
            let version = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin")))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .expect("a PostgreSQL version under /usr/lib/postgresql")
        .1
}

/// A TCP port of 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binding a free port");
    listener.local_addr().expect("a bound address").port()
}

/// The numeric fields of `/proc/PID/stat` after the command name, from the state on (the
/// state itself as 0): index 1 is the parent, 11–14 utime, stime, cutime, cstime in ticks.
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .take(15)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    (fields.len() == 15).then_some(fields)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
