//! Shared helpers: a temp directory with an archive and a watched root, driven through the
//! real binary.

use serde_json::Value;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output};
use tempfile::TempDir;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");

/// A test environment: `dir/watch` is the watched root, `dir/state/archive.db` the archive,
/// `dir/home` the HOME the binary sees.
pub struct Env {
    pub dir: TempDir,
    pub db: PathBuf,
    pub root: PathBuf,
}

impl Env {
    pub fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("watch");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(dir.path().join("home")).unwrap();
        let db = dir.path().join("state").join("archive.db");
        Env { dir, db, root }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The binary with a clean environment of its own.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("HOME", self.dir.path().join("home"))
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RUST_LOG", "info");
        cmd
    }

    /// `run --once` over the watched root; must succeed. Returns stderr.
    pub fn run_once(&self, extra: &[&str]) -> String {
        let out = self.run_once_output(extra);
        assert!(out.status.success(), "run --once failed:\n{}", stderr(&out));
        stderr(&out)
    }

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

    /// The raw records `export` prints, in seq order.
    pub fn records(&self) -> Vec<String> {
        self.export(&[])
            .iter()
            .map(|l| raw_record(l).to_owned())
            .collect()
    }

    /// The raw records of one file (by current path), in seq order.
    pub fn records_of(&self, rel: &str) -> Vec<String> {
        let p = self.path(rel);
        self.export(&["--path", p.to_str().unwrap()])
            .iter()
            .map(|l| raw_record(l).to_owned())
            .collect()
    }

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

    pub fn write(&self, rel: &str, bytes: &[u8]) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

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

pub fn assert_log_has(log: &str, needle: &str) {
    assert!(log.contains(needle), "log lacks {needle:?}:\n{log}");
}
