//! Real coding agents as test parts: each installed from npm (or PyPI) at the version
//! `scripts/agents/versions` pins (into `target/agents`, once for all tests and runs), and the
//! scripted model they are pointed at (`scripts/agents/model_server.py`, on loopback).

use serde_json::Value;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// One line of `scripts/agents/versions`.
struct Pinned {
    package: String,
    version: String,
    bin: String,
    /// The Node.js installed beside it (`node@VERSION`), which its install scripts and its
    /// runs use.
    node: Option<String>,
    /// An earlier line pins another version of the same package, or it has a Node.js of its
    /// own: it is installed into a directory of its own, `target/agents/<agent>`.
    apart: bool,
}

fn pinned(agent: &str) -> Pinned {
    let path = repo().join("scripts/agents/versions");
    let text = fs::read_to_string(&path).expect("reading scripts/agents/versions");
    let lines: Vec<Vec<&str>> = (text.lines())
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| (4..=5).contains(&f.len()))
        .collect();
    let at = (lines.iter().position(|f| f[0] == agent))
        .unwrap_or_else(|| panic!("{agent} is not in {}", path.display()));
    let line = &lines[at];
    Pinned {
        package: line[1].into(),
        version: line[2].into(),
        bin: line[3].into(),
        node: line.get(4).map(|n| n.to_string()),
        apart: line.len() == 5 || lines[..at].iter().any(|f| f[1] == line[1]),
    }
}

/// The agent's executable, installed first when `target/agents` does not hold its pinned
/// version (`npm install`, under a lock that tests running at once share). Panics, saying
/// why, when npm cannot install it.
pub fn install(agent: &str) -> PathBuf {
    let p = pinned(agent);
    let agents = crate::machine::target_dir().join("agents");
    fs::create_dir_all(&agents).expect("creating target/agents");
    let lock = File::create(agents.join(".lock")).expect("creating target/agents/.lock");
    lock.lock().expect("locking target/agents");
    let prefix = if p.apart {
        agents.join(agent)
    } else {
        agents.clone()
    };
    let manifest = prefix
        .join("node_modules")
        .join(&p.package)
        .join("package.json");
    if let Some(name) = p.package.strip_prefix("pypi:") {
        // Each in a virtual environment of its own: PyPI agents pin their dependencies, and
        // two of them rarely agree.
        return pip_install(&agents.join(agent), name, &p.version, &p.bin);
    }
    let installed = fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .is_some_and(|m| m["version"] == p.version.as_str());
    if !installed {
        // Its own Node.js first: npm puts the directory's `node` first for install scripts.
        let specs = p
            .node
            .iter()
            .cloned()
            .chain([format!("{}@{}", p.package, p.version)]);
        for spec in specs {
            npm_install(&prefix, &spec);
        }
    }
    prefix.join("node_modules/.bin").join(&p.bin)
}

/// `npm install` of `spec` into `prefix`. Panics, saying why, when npm cannot install it.
fn npm_install(prefix: &Path, spec: &str) {
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(prefix)
        .arg(spec)
        .output()
        .expect("running npm (Node.js's package manager) to install an agent");
    assert!(
        out.status.success(),
        "npm install {spec} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `name==version` from PyPI, into the virtual environment `prefix/venv` (made first when
/// missing); its executable `bin`.
fn pip_install(prefix: &Path, name: &str, version: &str, bin: &str) -> PathBuf {
    let venv = prefix.join("venv");
    let run = |program: &Path, args: &[&str]| {
        let out = Command::new(program).args(args).output();
        let out = out.unwrap_or_else(|e| panic!("running {}: {e}", program.display()));
        assert!(
            out.status.success(),
            "{} {args:?} failed:\n{}",
            program.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let pip = venv.join("bin/pip");
    if !pip.exists() {
        run(
            Path::new("python3"),
            &["-m", "venv", &venv.to_string_lossy()],
        );
    }
    let shown = Command::new(&pip).args(["show", name]).output();
    let installed = shown.is_ok_and(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| l == format!("Version: {version}"))
    });
    if !installed {
        run(&pip, &["install", "-q", &format!("{name}=={version}")]);
    }
    venv.join("bin").join(bin)
}

/// A `PATH` that finds the pinned Node.js first (installed as [`install`] installs an
/// agent): the agents run on it.
pub fn path_with_node() -> std::ffi::OsString {
    path_first(&install("node"))
}

/// The `PATH` `agent` runs with: the Node.js installed beside it first, when its line names
/// one (installing it as [`install`] does), else as [`path_with_node`].
pub fn path_for(agent: &str) -> std::ffi::OsString {
    match pinned(agent).node {
        Some(_) => path_first(&install(agent)),
        None => path_with_node(),
    }
}

/// The `PATH`, with the directory of `bin` first.
fn path_first(bin: &Path) -> std::ffi::OsString {
    let dir = bin.parent().expect("node_modules/.bin").to_owned();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&rest)))
        .expect("a PATH of paths without colons")
}

/// The scripted model, listening on a loopback port until dropped.
pub struct ModelServer {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl ModelServer {
    /// Starts it, keeping its port file and request log in `dir`.
    pub fn start(dir: &Path) -> ModelServer {
        let (port_file, log) = (dir.join("model-port"), dir.join("model-requests.jsonl"));
        let child = Command::new("python3")
            .arg(repo().join("scripts/agents/model_server.py"))
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .stdin(Stdio::null())
            .spawn()
            .expect("starting scripts/agents/model_server.py with python3");
        let deadline = Instant::now() + Duration::from_secs(20);
        let port = loop {
            if let Some(port) = fs::read_to_string(&port_file)
                .ok()
                .and_then(|p| p.parse().ok())
            {
                break port;
            }
            assert!(
                Instant::now() < deadline,
                "the scripted model did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        ModelServer { child, port, log }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The requests it received, in order: each `{"path": …, "body": …}`.
    pub fn requests(&self) -> Vec<Value> {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        (text.lines())
            .map(|l| serde_json::from_str(l).expect("a request line"))
            .collect()
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
