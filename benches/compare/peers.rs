//! The subjects' command lines: transcript-sync, GNU `tail -F`, and the two log shippers,
//! each of these with a configuration, state, pid file and control files of its own in a
//! fresh directory, in the foreground, never as the system logger (no `/dev/log`, no
//! default configuration).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The record limit transcript-sync uses by default (`record_limit = "64M"`); the peers are
/// given the same maximum message size, so a multi-MB line is one message for all of them.
pub const RECORD_LIMIT: u64 = 64 << 20;
/// transcript-sync's default batch size (`batch_bytes = "8M"`).
pub const BATCH_BYTES: u64 = 8 << 20;

pub fn transcript_sync() -> &'static str {
    env!("CARGO_BIN_EXE_transcript-sync")
}

/// The subject name of an earlier build of transcript-sync measured beside this one.
pub const BASELINE: &str = "transcript-sync (baseline)";

/// `COMPARE_BASELINE`: an earlier build's binary, measured beside this one in the backfill and
/// latency runs, so that a change is judged against its baseline on the same machine at the
/// same time.
pub fn baseline() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var_os("COMPARE_BASELINE")?);
    assert!(
        path.is_file(),
        "COMPARE_BASELINE={} is not a file",
        path.display()
    );
    Some(path)
}

/// The binary that subject `name` runs: this build, or the baseline's.
pub fn ts_binary(name: &str) -> PathBuf {
    match name {
        BASELINE => baseline().expect("a baseline subject comes from COMPARE_BASELINE"),
        _ => PathBuf::from(transcript_sync()),
    }
}

/// `transcript-sync run --once --db DB --watch DIR`.
pub fn ts_once(db: &Path, dir: &Path) -> Command {
    ts_once_of(Path::new(transcript_sync()), db, dir)
}

/// `run --once` of the binary at `bin`.
pub fn ts_once_of(bin: &Path, db: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(["run", "--once", "--db"])
        .arg(db)
        .arg("--watch")
        .arg(dir)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1");
    cmd
}

/// `transcript-sync run --sink stdout --db DB --watch DIR`: each record committed, then
/// printed as an envelope line.
pub fn ts_daemon(db: &Path, dir: &Path) -> Command {
    ts_daemon_of(Path::new(transcript_sync()), db, dir)
}

/// `run --sink stdout` of the binary at `bin`.
pub fn ts_daemon_of(bin: &Path, db: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args(["run", "--sink", "stdout", "--db"])
        .arg(db)
        .arg("--watch")
        .arg(dir)
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("JOURNAL_STREAM");
    cmd
}

/// `tail -F -n 0 -q FILES…`: follows every file by name (inotify), from its end.
pub fn tail_follow(files: &[PathBuf]) -> Command {
    let mut cmd = Command::new("tail");
    cmd.args(["-F", "-n", "0", "-q"]).args(files);
    cmd
}

/// Which files a log shipper reads: wildcards under a root (rsyslog takes one wildcard per
/// directory level; syslog-ng walks the root recursively for `*.jsonl`).
pub struct Inputs<'a> {
    pub root: &'a Path,
    pub patterns: &'a [&'a str],
    pub files: usize,
}

/// Where a log shipper writes the lines it read.
pub enum Out<'a> {
    File(&'a Path),
    Fifo(&'a Path),
}

/// The installed peers; `benches/setup.sh` puts them there.
pub struct Peers {
    rsyslogd: PathBuf,
    syslog_ng: PathBuf,
}

impl Peers {
    pub fn locate(target: &Path) -> Result<Peers, String> {
        let rsyslogd = PathBuf::from("/usr/sbin/rsyslogd");
        let imfile = Path::new("/usr/lib/x86_64-linux-gnu/rsyslog/imfile.so");
        let syslog_ng = target.join("bench/peers/syslog-ng");
        if !rsyslogd.exists() || !imfile.exists() {
            return Err("rsyslogd with imfile is not installed".into());
        }
        if !syslog_ng.join("usr/sbin/syslog-ng").exists() {
            return Err(format!(
                "syslog-ng is not unpacked in {}",
                syslog_ng.display()
            ));
        }
        Ok(Peers {
            rsyslogd,
            syslog_ng,
        })
    }

    pub fn versions(&self) -> (String, String) {
        let rs = first_line(Command::new(&self.rsyslogd).arg("-v"))
            .trim_end_matches("compiled with:")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let sng = first_line(self.syslog_ng_cmd().arg("--version"));
        (rs, sng)
    }

    /// The command for the durable peer called `name` ("rsyslog …" or "syslog-ng …").
    pub fn shipper(&self, name: &str, state: &Path, inputs: &Inputs, out: &Out) -> Command {
        if name.starts_with("rsyslog") {
            self.rsyslog(state, inputs, out)
        } else {
            self.syslog_ng(state, inputs, out)
        }
    }

    /// rsyslogd in the foreground (`-n`) with its own configuration, work directory (imfile's
    /// state files: persisted offsets) and pid file. imfile runs in inotify mode; the lines go
    /// out as they were read (`%msg%`), with omfile, to a file or a FIFO.
    pub fn rsyslog(&self, state: &Path, inputs: &Inputs, out: &Out) -> Command {
        let work = state.join("work");
        std::fs::create_dir_all(&work).expect("creating rsyslog's work directory");
        let mut conf = format!(
            "global(workDirectory=\"{}\" maxMessageSize=\"{RECORD_LIMIT}\")\n\
             module(load=\"imfile\" mode=\"inotify\")\n\
             template(name=\"line\" type=\"string\" string=\"%msg%\\n\")\n\
             ruleset(name=\"transcripts\") {{\n  {}\n}}\n",
            work.display(),
            match out {
                Out::File(p) => format!(
                    "action(type=\"omfile\" file=\"{}\" template=\"line\")",
                    p.display()
                ),
                // omfile, not ompipe: ompipe writes without blocking and drops what does not
                // fit in the pipe at once (a 60 MiB line came out as its first 64 KiB).
                Out::Fifo(p) => format!(
                    "action(type=\"omfile\" file=\"{}\" template=\"line\")",
                    p.display()
                ),
            }
        );
        for pattern in inputs.patterns {
            conf += &format!(
                "input(type=\"imfile\" file=\"{}/{pattern}\" tag=\"transcript\" \
                 ruleset=\"transcripts\" addMetadata=\"off\")\n",
                inputs.root.display()
            );
        }
        let path = state.join("rsyslog.conf");
        std::fs::write(&path, conf).expect("writing rsyslog.conf");
        let mut cmd = Command::new(&self.rsyslogd);
        cmd.arg("-n")
            .arg("-f")
            .arg(&path)
            .arg("-i")
            .arg(state.join("rsyslogd.pid"));
        cmd
    }

    /// syslog-ng in the foreground (`-F`) with its own configuration, persist file (offsets),
    /// pid file and control socket. `wildcard-file()` finds files with inotify; the lines are
    /// taken whole (`no-parse`) and written as they were read, under flow control (a full
    /// destination pauses reading instead of dropping).
    pub fn syslog_ng(&self, state: &Path, inputs: &Inputs, out: &Out) -> Command {
        let dest = match out {
            Out::File(p) => format!("file(\"{}\" template(\"${{MESSAGE}}\\n\"))", p.display()),
            Out::Fifo(p) => format!("pipe(\"{}\" template(\"${{MESSAGE}}\\n\"))", p.display()),
        };
        let conf = format!(
            "@version: 3.38\n\
             options {{ log-msg-size({RECORD_LIMIT}); stats-freq(0); }};\n\
             source s_transcripts {{ wildcard-file(base-dir(\"{}\") filename-pattern(\"*.jsonl\")\n\
             \x20 recursive(yes) max-files({}) monitor-method(\"inotify\") flags(no-parse)); }};\n\
             destination d_out {{ {dest}; }};\n\
             log {{ source(s_transcripts); destination(d_out); flags(flow-control); }};\n",
            inputs.root.display(),
            inputs.files + 100,
        );
        let path = state.join("syslog-ng.conf");
        std::fs::write(&path, conf).expect("writing syslog-ng.conf");
        let mut cmd = self.syslog_ng_cmd();
        cmd.arg("-F")
            .arg("--no-caps")
            .arg("-f")
            .arg(&path)
            .arg("-R")
            .arg(state.join("syslog-ng.persist"))
            .arg("-p")
            .arg(state.join("syslog-ng.pid"))
            .arg("-c")
            .arg(state.join("syslog-ng.ctl"));
        cmd
    }

    fn syslog_ng_cmd(&self) -> Command {
        let root = &self.syslog_ng;
        let libs = [
            "usr/lib/x86_64-linux-gnu",
            "usr/lib/syslog-ng",
            "lib/x86_64-linux-gnu",
        ]
        .map(|d| root.join(d).display().to_string())
        .join(":");
        let mut cmd = Command::new(root.join("usr/sbin/syslog-ng"));
        cmd.env("LD_LIBRARY_PATH", libs)
            .arg("--module-path")
            .arg(root.join("usr/lib/syslog-ng/3.38"));
        cmd
    }
}

fn first_line(cmd: &mut Command) -> String {
    cmd.output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim().to_owned())
        })
        .unwrap_or_default()
}

/// Panics when a system logger socket appeared: a peer must never become the system logger.
pub fn assert_no_system_logger(had_dev_log: bool) {
    if !had_dev_log {
        assert!(
            !Path::new("/dev/log").exists(),
            "/dev/log appeared while a peer ran: a peer acted as the system logger"
        );
    }
}
