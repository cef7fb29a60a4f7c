//! `service install|uninstall|status`: the files it writes and the commands it runs. The
//! service managers do not run here, so recording fakes of `systemctl` and `launchctl` go
//! first on PATH.

use crate::util::*;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fake service manager client: appends its arguments, one call a line, to `log`.
struct Fake {
    dir: PathBuf,
    log: PathBuf,
}

impl Fake {
    /// A fake `program` that records its call, then runs `body` (shell).
    fn new(env: &Env, program: &str, body: &str) -> Fake {
        let dir = env.dir.path().join("fakebin");
        fs::create_dir_all(&dir).unwrap();
        let log = env.dir.path().join(format!("{program}.calls"));
        let script = format!("#!/bin/sh\necho \"$*\" >> '{}'\n{body}\n", log.display());
        let path = dir.join(program);
        fs::write(&path, script).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        Fake { dir, log }
    }

    /// A fake that succeeds at everything and prints nothing.
    fn ok(env: &Env, program: &str) -> Fake {
        Fake::new(env, program, "exit 0")
    }

    /// The calls so far, one string of arguments each.
    fn calls(&self) -> Vec<String> {
        fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn clear(&self) {
        let _ = fs::remove_file(&self.log);
    }
}

/// `transcript-sync service ARGS` with the fake first on PATH.
fn service(env: &Env, fake: &Fake, args: &[&str]) -> Output {
    let path = format!(
        "{}:{}",
        fake.dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.cmd()
        .arg("service")
        .args(args)
        .env("PATH", path)
        .output()
        .unwrap()
}

/// Like [`service`], and it must succeed; returns stdout.
fn service_ok(env: &Env, fake: &Fake, args: &[&str]) -> String {
    let out = service(env, fake, args);
    assert!(
        out.status.success(),
        "service {args:?} failed:\n{}",
        stderr(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The file a `--dry-run` would write, as it prints it.
fn would_write(stdout: &str) -> String {
    let start = stdout.find("would write ").expect("a file to write");
    let body = &stdout[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("--- end of ").expect("end marker")].to_owned()
}

/// The binary's path as the service names it: the path the tests run it by.
fn this_binary() -> PathBuf {
    PathBuf::from(BIN)
}

fn home(env: &Env) -> PathBuf {
    env.dir.path().join("home")
}

fn unit_file(env: &Env) -> PathBuf {
    home(env).join(".config/systemd/user/transcript-sync.service")
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p != dir)
        .collect()
}

fn db_arg(env: &Env) -> [&str; 2] {
    ["--db", env.db.to_str().unwrap()]
}

#[test]
fn dry_run_prints_the_unit_and_the_commands_and_changes_nothing() {
    let env = Env::outside_tmp();
    let fake = Fake::ok(&env, "systemctl");
    let out = service_ok(
        &env,
        &fake,
        &["install", "--dry-run", "--manager", "systemd"],
    );
    let unit = would_write(&out);
    let exec = format!("\nExecStart=\"{}\" run\n", this_binary().display());
    assert!(unit.contains(&exec), "{unit}");
    assert!(
        out.contains("would run: systemctl --user daemon-reload\n"),
        "{out}"
    );
    assert!(
        out.contains("would run: systemctl --user enable --now transcript-sync.service\n"),
        "{out}"
    );
    assert_eq!(files_under(&home(&env)), Vec::<PathBuf>::new());
    assert_eq!(fake.calls(), Vec::<String>::new());
}

#[test]
fn the_unit_names_the_link_the_binary_was_run_by_which_outlives_an_upgrade() {
    // Homebrew's layout: `bin/transcript-sync` on PATH leads into the versioned
    // `Cellar/transcript-sync/VERSION/`, which the next upgrade removes. The unit must run the
    // link, not the file behind it.
    let env = Env::outside_tmp();
    let fake = Fake::ok(&env, "systemctl");
    let prefix = env.dir.path().join("brew");
    let cellar = prefix.join("Cellar/transcript-sync/0.1.0/bin");
    fs::create_dir_all(&cellar).unwrap();
    fs::create_dir_all(prefix.join("bin")).unwrap();
    std::os::unix::fs::symlink(BIN, cellar.join("transcript-sync")).unwrap();
    let link = prefix.join("bin/transcript-sync");
    std::os::unix::fs::symlink("../Cellar/transcript-sync/0.1.0/bin/transcript-sync", &link)
        .unwrap();
    // A file of that name that cannot be run, earlier on PATH, is not what was run.
    let stray = env.dir.path().join("stray");
    fs::create_dir_all(&stray).unwrap();
    fs::write(stray.join("transcript-sync"), "not a program").unwrap();
    let path = format!(
        "{}:{}:{}",
        fake.dir.display(),
        stray.display(),
        prefix.join("bin").display()
    );
    let out = env
        .command("transcript-sync")
        .args(["service", "install", "--dry-run", "--manager", "systemd"])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let unit = would_write(&String::from_utf8(out.stdout).unwrap());
    let exec = format!("\nExecStart=\"{}\" run\n", link.display());
    assert!(unit.contains(&exec), "{unit}");
}

#[test]
fn the_unit_passes_systemd_analyze_verify() {
    // Pins that the shipped unit is one systemd accepts without a warning: an unknown or
    // misspelt directive is only a warning at `daemon-reload`, and is then silently ignored.
    let env = Env::outside_tmp();
    let fake = Fake::ok(&env, "systemctl");
    let db = env.dir.path().join("odd 100%/a$b.db");
    // A mirror sink's directory goes into ReadWritePaths= beside the archive's.
    let mirror = env.dir.path().join("mirror copy");
    env.write_config(&format!(
        "[[sink]]\nname = \"m\"\ntype = \"mirror\"\ndir = {mirror:?}\n"
    ));
    let args = ["install", "--dry-run", "--manager", "systemd", "--db"];
    let out = service_ok(&env, &fake, &[&args[..], &[db.to_str().unwrap()]].concat());
    let unit = would_write(&out);
    assert!(unit.contains(" run --db \""), "{unit}");
    assert!(unit.contains(&format!(" -{mirror:?}\n")), "{unit}");
    let dir = env.dir.path().join("verify");
    let runtime = dir.join("runtime");
    fs::create_dir_all(&runtime).unwrap();
    fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(dir.join("transcript-sync.service"), &unit).unwrap();
    // --user checks it as a user unit; that needs a runtime directory, even without a
    // running user manager.
    let verify = Command::new("systemd-analyze")
        .args(["verify", "--user", "--man=no", "transcript-sync.service"])
        .current_dir(&dir)
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze is needed (Debian package systemd; .ci/run installs it)");
    let said = stderr(&verify);
    assert!(verify.status.success() && said.is_empty(), "{said}\n{unit}");
}

#[test]
fn the_launchd_plist_parses_with_the_expected_keys() {
    let env = Env::outside_tmp();
    let fake = Fake::ok(&env, "launchctl");
    let out = service_ok(
        &env,
        &fake,
        &["install", "--dry-run", "--manager", "launchd"],
    );
    let text = would_write(&out);
    let plist = plist::Value::from_reader_xml(text.as_bytes()).unwrap();
    let dict = plist.as_dictionary().unwrap();
    assert_eq!(dict["Label"].as_string(), Some("dev.transcript-sync"));
    let args: Vec<_> = dict["ProgramArguments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_string().unwrap().to_owned())
        .collect();
    assert_eq!(args, [this_binary().to_str().unwrap(), "run"]);
    assert_eq!(dict["RunAtLoad"].as_boolean(), Some(true));
    let keep_alive = dict["KeepAlive"].as_dictionary().unwrap();
    assert_eq!(keep_alive["SuccessfulExit"].as_boolean(), Some(false));
    let logs = home(&env).join("Library/Logs/transcript-sync");
    for key in ["StandardOutPath", "StandardErrorPath"] {
        let path = Path::new(dict[key].as_string().unwrap());
        assert_eq!(path.parent(), Some(logs.as_path()), "{key}");
    }
    assert!(dict["ExitTimeOut"].as_signed_integer().unwrap() > 5);
    let target = format!("gui/{}/dev.transcript-sync", unsafe { libc::getuid() });
    assert!(
        out.contains(&format!("would run: launchctl bootout {target}")),
        "{out}"
    );
}

#[test]
fn install_writes_the_unit_then_reloads_and_enables_the_service() {
    let env = Env::outside_tmp();
    let fake = Fake::ok(&env, "systemctl");
    let planned = would_write(&service_ok(&env, &fake, &["install", "--dry-run"]));
    let out = service_ok(&env, &fake, &["install"]);
    assert_eq!(fs::read_to_string(unit_file(&env)).unwrap(), planned);
    assert_eq!(
        fake.calls(),
        [
            "--user daemon-reload",
            "--user enable --now transcript-sync.service"
        ]
    );
    let archive_dir = home(&env).join(".local/share/transcript-sync");
    let mode = fs::metadata(&archive_dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{out}");
}

#[test]
fn installing_twice_leaves_the_unit_and_still_enables_the_service() {
    let env = Env::outside_tmp();
    let fake = Fake::ok(&env, "systemctl");
    service_ok(&env, &fake, &["install"]);
    let first = fs::read_to_string(unit_file(&env)).unwrap();
    fake.clear();
    let out = service_ok(&env, &fake, &["install"]);
    assert!(out.contains("is unchanged"), "{out}");
    assert_eq!(fs::read_to_string(unit_file(&env)).unwrap(), first);
    assert_eq!(
        fake.calls(),
        [
            "--user daemon-reload",
            "--user enable --now transcript-sync.service"
        ]
    );
}

#[test]
fn a_replaced_unit_restarts_the_service() {
    // `enable --now` leaves a running service on its old definition; a changed unit (here,
    // another archive) must reach the daemon.
    let env = Env::outside_tmp();
    let fake = Fake::ok(&env, "systemctl");
    service_ok(&env, &fake, &["install"]);
    fake.clear();
    service_ok(&env, &fake, &[&["install"][..], &db_arg(&env)].concat());
    let unit = fs::read_to_string(unit_file(&env)).unwrap();
    assert!(
        unit.contains(&format!("run --db \"{}\"", env.db.display())),
        "{unit}"
    );
    assert_eq!(
        fake.calls(),
        [
            "--user daemon-reload",
            "--user enable transcript-sync.service",
            "--user restart transcript-sync.service"
        ]
    );
}

#[test]
fn uninstall_disables_the_service_removes_the_unit_and_keeps_the_archive() {
    let env = Env::outside_tmp();
    env.write("a.jsonl", &lines(&records("a", 1)));
    env.run_once(&[]);
    let fake = Fake::ok(&env, "systemctl");
    service_ok(&env, &fake, &[&["install"][..], &db_arg(&env)].concat());
    fake.clear();
    let out = service_ok(&env, &fake, &[&["uninstall"][..], &db_arg(&env)].concat());
    assert_eq!(
        fake.calls(),
        [
            "--user disable --now transcript-sync.service",
            "--user daemon-reload"
        ]
    );
    assert!(!unit_file(&env).exists());
    assert!(env.db.exists());
    assert_eq!(env.records().len(), 1);
    assert!(out.contains("is left as it is"), "{out}");
}

#[test]
fn an_unreachable_user_bus_fails_naming_the_command_and_the_fix() {
    let env = Env::outside_tmp();
    let fake = Fake::new(
        &env,
        "systemctl",
        "echo 'Failed to connect to bus: No medium found' >&2; exit 1",
    );
    let out = service(&env, &fake, &["install"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    for needle in [
        "`systemctl --user daemon-reload` failed",
        "exit status: 1",
        "Failed to connect to bus: No medium found",
        "loginctl enable-linger",
    ] {
        assert_log_has(&err, needle);
    }
}

#[test]
fn an_archive_under_tmp_is_named_since_the_service_cannot_see_it() {
    // PrivateTmp=yes gives the service its own /tmp: a unit pointing there fails with
    // 203/EXEC or cannot open its archive, over and over; the installer says so.
    let env = Env::new();
    let fake = Fake::ok(&env, "systemctl");
    let [flag, db] = db_arg(&env);
    let out = service_ok(&env, &fake, &["install", flag, db]);
    let warning = format!("warning: the archive {db} is under /tmp");
    assert!(out.contains(&warning), "{out}");
    assert!(out.contains("PrivateTmp=yes"), "{out}");
}

#[test]
fn status_says_what_the_unit_runs_and_what_systemd_reports() {
    let env = Env::outside_tmp();
    let show = "printf 'LoadState=loaded\\nActiveState=active\\nSubState=running\\n\
                MainPID=4242\\nUnitFileState=enabled\\n'";
    let fake = Fake::new(&env, "systemctl", show);
    let before = service_ok(&env, &fake, &["status"]);
    assert!(before.contains("not installed"), "{before}");
    service_ok(&env, &fake, &["install"]);
    let out = service_ok(&env, &fake, &["status"]);
    assert!(
        out.contains(&format!("installed: {}", unit_file(&env).display())),
        "{out}"
    );
    assert!(
        out.contains(&format!("runs: {} (this binary)", this_binary().display())),
        "{out}"
    );
    assert!(out.contains("active (running), unit file enabled"), "{out}");
    assert!(out.contains("pid 4242"), "{out}");
}

#[test]
fn status_explains_an_unreachable_service_manager() {
    let env = Env::outside_tmp();
    let fake = Fake::new(
        &env,
        "systemctl",
        "echo 'Failed to connect to bus: No medium found' >&2; exit 1",
    );
    let out = service_ok(&env, &fake, &["status"]);
    assert!(out.contains("service manager: unreachable"), "{out}");
    assert!(out.contains("loginctl enable-linger"), "{out}");
}

#[test]
fn launchd_install_boots_out_a_loaded_agent_then_bootstraps_it() {
    let env = Env::outside_tmp();
    // `bootout` of an agent that is not loaded fails; install goes on.
    let fake = Fake::new(
        &env,
        "launchctl",
        "[ \"$1\" = bootout ] && { echo 'Boot-out failed: 3: No such process' >&2; exit 3; }\nexit 0",
    );
    service_ok(&env, &fake, &["install", "--manager", "launchd"]);
    let plist = home(&env).join("Library/LaunchAgents/dev.transcript-sync.plist");
    assert!(plist.exists());
    assert!(home(&env).join("Library/Logs/transcript-sync").is_dir());
    let uid = unsafe { libc::getuid() };
    assert_eq!(
        fake.calls(),
        [
            format!("bootout gui/{uid}/dev.transcript-sync"),
            format!("enable gui/{uid}/dev.transcript-sync"),
            format!("bootstrap gui/{uid} {}", plist.display()),
        ]
    );
    fake.clear();
    let out = service_ok(&env, &fake, &["uninstall", "--manager", "launchd"]);
    assert!(!plist.exists());
    assert_eq!(
        fake.calls(),
        [format!("bootout gui/{uid}/dev.transcript-sync")]
    );
    assert!(out.contains("is left as it is"), "{out}");
}
