//! A PostgreSQL cluster of the caller's own: Debian's `postgresql` binaries, `initdb` in a
//! temporary directory, listening on a free port of 127.0.0.1 with password authentication,
//! run as `nobody` when the caller runs as root (PostgreSQL refuses root).

use crate::cpu;
use crate::ports::free_port;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The cluster's user and its password.
pub const USER: &str = "tsync";
pub const PASSWORD: &str = "secret";

/// Settings of a test cluster beyond the defaults: nothing waits for the disk.
const TEST_SETTINGS: &str = "-c fsync=off";

/// Settings of a benchmark's cluster beyond the defaults, the same for every subject:
/// commits and checkpoints do not wait for the disk.
const BENCH_SETTINGS: &str = "-c fsync=off -c synchronous_commit=off";

/// A benchmark's server settings beyond the defaults: [`BENCH_SETTINGS`], then
/// `SHIP_PG_OPTIONS` (for example `-c default_toast_compression=lz4`).
pub fn benchmark_settings() -> String {
    match std::env::var("SHIP_PG_OPTIONS") {
        Ok(more) if !more.trim().is_empty() => format!("{BENCH_SETTINGS} {}", more.trim()),
        _ => BENCH_SETTINGS.to_owned(),
    }
}

/// A running cluster, stopped (immediately) when dropped.
pub struct Cluster {
    dir: TempDir,
    bin: PathBuf,
    pub port: u16,
    /// Server settings beyond the defaults, as `postgres` options (`-c name=value …`).
    settings: String,
    /// TLS only (`hostssl`), with a self-signed certificate for 127.0.0.1 and localhost.
    tls: bool,
}

impl Cluster {
    /// A cluster for a test, started and taking connections.
    pub fn start() -> Cluster {
        Cluster::start_with(TEST_SETTINGS.to_owned(), false)
    }

    /// A cluster that takes TLS connections only, with a self-signed certificate
    /// ([`Cluster::certificate`]) for 127.0.0.1 and localhost.
    pub fn start_tls() -> Cluster {
        Cluster::start_with(TEST_SETTINGS.to_owned(), true)
    }

    /// A cluster for a benchmark, with [`benchmark_settings`].
    pub fn start_for_benchmark() -> Cluster {
        Cluster::start_with(benchmark_settings(), false)
    }

    fn start_with(settings: String, tls: bool) -> Cluster {
        let dir = tempfile::tempdir().expect("creating the cluster's directory");
        fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755))
            .expect("opening the cluster's directory to nobody");
        let cluster = Cluster {
            dir,
            bin: pg_bin(),
            port: free_port(),
            settings,
            tls,
        };
        fs::write(cluster.password_file(), PASSWORD).expect("writing the password file");
        fs::create_dir(cluster.data()).expect("creating the data directory");
        if tls {
            cluster.make_certificate();
        }
        cluster.give_away();
        cluster.initdb();
        cluster.start_again();
        cluster
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn initdb(&self) {
        let initdb = self
            .pg_command("initdb")
            .arg("-D")
            .arg(self.data())
            .args(["-U", USER, "-E", "UTF8", "--no-sync", "--no-instructions"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", self.password_file().display()))
            .output()
            .expect("starting initdb");
        assert!(initdb.status.success(), "initdb: {}", stderr(&initdb));
        if self.tls {
            let hba = self.data().join("pg_hba.conf");
            let text = fs::read_to_string(&hba)
                .expect("reading pg_hba.conf")
                .replace("\nhost ", "\nhostssl ");
            fs::write(&hba, text).expect("writing pg_hba.conf");
        }
    }

    /// The certificate (PEM) of the CA that signed the server's.
    pub fn certificate(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// A CA, and a server certificate it signs for 127.0.0.1 and localhost.
    fn make_certificate(&self) {
        let d = self.dir.path();
        fs::write(
            d.join("san.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .expect("writing san.ext");
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
        fs::set_permissions(&key, PermissionsExt::from_mode(0o600)).expect("chmod server.key");
    }

    /// `pg_ctl start`, waiting until it accepts connections.
    pub fn start_again(&self) {
        let dir = self.dir.path().display();
        let mut options = format!(
            "-p {} -k {dir} -c listen_addresses=127.0.0.1 {}",
            self.port, self.settings
        );
        if self.tls {
            options.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={dir}/server.crt -c ssl_key_file={dir}/server.key"
            ));
        }
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
            self.log()
        );
    }

    /// `pg_ctl stop -m fast`.
    pub fn stop(&self) {
        let out = self.pg_ctl_stop("fast");
        assert!(out.status.success(), "pg_ctl stop: {}", stderr(&out));
    }

    fn pg_ctl_stop(&self, mode: &str) -> Output {
        self.pg_command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", mode, "-w", "stop"])
            .output()
            .expect("starting pg_ctl")
    }

    /// The server's log.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// The URL of database `postgres`, without the password.
    pub fn url(&self) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// A file holding the password, for `password_file`.
    pub fn password_file(&self) -> PathBuf {
        self.dir.path().join("pw")
    }

    /// `postgres (PostgreSQL) 15.x`.
    pub fn version(&self) -> String {
        let out = Command::new(self.bin.join("postgres"))
            .arg("--version")
            .output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    }

    /// Runs `sql` with psql; its rows, one line each, columns separated by `|`.
    pub fn psql(&self, sql: &str) -> Vec<String> {
        let out = self.try_psql(sql);
        assert!(out.status.success(), "psql {sql}: {}", stderr(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// A psql session reading statements from its stdin, its results on its stdout.
    pub fn psql_session(&self) -> Child {
        let mut cmd = self.psql_command();
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        cmd.spawn().expect("starting psql")
    }

    /// Runs `sql` with psql, whether or not it fails.
    pub fn try_psql(&self, sql: &str) -> Output {
        (self.psql_command().args(["-c", sql]).output()).expect("starting psql")
    }

    /// Runs the psql script `script`; how long it took from spawn to exit.
    pub fn time_script(&self, script: &Path) -> Duration {
        let start = Instant::now();
        let out = (self.psql_command().arg("-f").arg(script).output()).expect("starting psql");
        let took = start.elapsed();
        assert!(out.status.success(), "psql -f {script:?}: {}", stderr(&out));
        took
    }

    /// psql on database `postgres` over TCP as [`USER`], without a psqlrc: quiet, unaligned
    /// rows, stopping at the first error.
    fn psql_command(&self) -> Command {
        let mut cmd = Command::new(self.bin.join("psql"));
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", USER])
            .args(["-d", "postgres", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"])
            .env("PGPASSWORD", PASSWORD);
        cmd
    }

    /// CPU time of every server process so far: the postmaster's own, its live children's
    /// (backends, checkpointer, WAL writer, autovacuum) and the children it has reaped.
    pub fn server_cpu(&self) -> Duration {
        let pid_file = fs::read_to_string(self.data().join("postmaster.pid")).unwrap_or_default();
        match pid_file.lines().next().and_then(|l| l.trim().parse().ok()) {
            Some(postmaster) => cpu::cpu_time_with_children(postmaster),
            None => Duration::ZERO,
        }
    }

    /// A PostgreSQL program, as nobody when the caller runs as root.
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
        let _ = self.pg_ctl_stop("immediate");
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The newest `/usr/lib/postgresql/<version>/bin`.
fn pg_bin() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed: `apt-get install postgresql` (.ci/run does)")
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

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
