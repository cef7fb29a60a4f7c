//! What the numbers were taken on: CPU, cores, memory, disk, kernel, tool versions, load.

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub disk: String,
    pub kernel: String,
    pub rustc: String,
    pub tail: String,
    pub rsyslog: String,
    pub syslog_ng: String,
    /// 1-, 5- and 15-minute load averages when the run started and when it ended.
    pub load_at_start: String,
    pub load_at_end: String,
}

impl Machine {
    pub fn describe(target: &Path, peers: (String, String)) -> Machine {
        let cpuinfo = read("/proc/cpuinfo");
        let meminfo = read("/proc/meminfo");
        let mem_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        Machine {
            cpu: cpuinfo
                .lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
                .unwrap_or_default(),
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_gib: (mem_kib / 1024.0 / 1024.0 * 10.0).round() / 10.0,
            disk: disk(target),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
            rustc: first_line("rustc", &["--version"]),
            tail: first_line("tail", &["--version"]),
            rsyslog: peers.0,
            syslog_ng: peers.1,
            load_at_start: load(),
            load_at_end: String::new(),
        }
    }

    /// This machine, the disk under `target/`, no peers: in one sentence for a report,
    /// `Machine: CPU, N cores, M GiB, disk, Linux K; rustc V. Load average at start L.`
    pub fn summary() -> String {
        let m = Machine::describe(&target_dir(), Default::default());
        format!(
            "Machine: {}, {} cores, {} GiB, {}, Linux {}; {}. Load average at start {}.",
            m.cpu, m.cores, m.memory_gib, m.disk, m.kernel, m.rustc, m.load_at_start
        )
    }
}

pub fn load() -> String {
    read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The device and filesystem under `dir`, and whether the device is rotational.
fn disk(dir: &Path) -> String {
    let out = Command::new("df")
        .args(["--output=source,fstype,size"])
        .arg(dir)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let Some(line) = out.lines().nth(1) else {
        return "unknown".into();
    };
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (source, fstype) = (
        fields.first().copied().unwrap_or("?"),
        fields.get(1).copied().unwrap_or("?"),
    );
    let dev = source.trim_start_matches("/dev/");
    let rotational = match read(&format!("/sys/block/{dev}/queue/rotational")).trim() {
        "0" => "non-rotational",
        "1" => "rotational",
        _ => "rotational: unknown",
    };
    let mut parts = Vec::new();
    let model = read(&format!("/sys/block/{dev}/device/model"));
    if !model.trim().is_empty() {
        parts.push(model.trim().to_owned());
    }
    if dev.starts_with("vd") {
        parts.push("virtio".to_owned());
    }
    parts.push(rotational.to_owned());
    format!("{source} ({}), {fstype}", parts.join(", "))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn first_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "not found".into())
}

/// `target/`, from the running benchmark's place in it (`target/release/deps/<bench>-…`),
/// else the workspace's beside this crate.
pub fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_owned()))
        .filter(|t| t.join("release").is_dir())
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
}
