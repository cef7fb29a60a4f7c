//! Two machines, one PostgreSQL store: each ships its sessions and pulls the other's, finds
//! them with `sessions`, `show` and `search`, and restores them into its own checkout of the
//! same repository. Two machines are two archives under two homes, each with its daemon and
//! its machine name.

use crate::util::{
    BIN, Daemon, Env, PgCluster, TapReader, on_a_terminal, stderr, wait_until, wait_until_else,
};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

const SESSION: &str = "7c9e6679-7425-40de-944b-e07fc1f90ae7";
/// The fixture's project directory, replaced by a real one.
const FIXTURE_CWD: &str = "/home/dana/src/ledger";

/// One machine: its env (HOME, archive) and its name.
struct Machine {
    env: Env,
    name: &'static str,
}

impl Machine {
    /// A machine named `name` shipping to and pulling from `pg`: at once when the store
    /// announces a commit, and otherwise only hourly, so that what arrives in time came by
    /// notification.
    fn new(name: &'static str, pg: &PgCluster) -> Machine {
        let env = Env::new();
        env.write_config(&format!(
            "[[sink]]\nname = \"team\"\ntype = \"postgres\"\nurl = \"{}\"\npassword_file = \"{}\"\n\
             timeout = \"5s\"\npull = true\npull_interval = \"1h\"\n",
            pg.url(),
            pg.password_file().display()
        ));
        Machine { env, name }
    }

    fn home(&self) -> PathBuf {
        self.env.dir.path().join("home")
    }

    /// A git checkout under HOME whose `origin` is `remote`.
    fn checkout(&self, rel: &str, remote: &str) -> PathBuf {
        let dir = self.home().join(rel);
        fs::create_dir_all(dir.join(".git")).unwrap();
        fs::write(
            dir.join(".git/config"),
            format!("[core]\n\tbare = false\n[remote \"origin\"]\n\turl = {remote}\n"),
        )
        .unwrap();
        dir
    }

    /// Writes the Claude Code fixture as a session of `project`, where the agent puts it.
    fn claude_session(&self, project: &Path, id: &str) -> PathBuf {
        let text = String::from_utf8(fixture()).unwrap();
        let text = (text.replace(FIXTURE_CWD, &project.to_string_lossy())).replace(SESSION, id);
        let path = self
            .home()
            .join(".claude/projects")
            .join(encoded(project))
            .join(format!("{id}.jsonl"));
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, text).unwrap();
        path
    }

    fn cmd(&self) -> std::process::Command {
        let mut cmd = self.env.cmd();
        cmd.env("TRANSCRIPT_SYNC_MACHINE_NAME", self.name);
        cmd
    }

    fn daemon(&self) -> Daemon {
        let mut cmd = self.cmd();
        cmd.args(["run", "--rescan-interval", "3600", "--db"])
            .arg(&self.env.db);
        Daemon::spawn(cmd, TapReader::Read)
    }

    fn cli(&self, args: &[&str]) -> Output {
        let mut cmd = self.cmd();
        cmd.args(args).arg("--db").arg(&self.env.db);
        cmd.output().unwrap()
    }

    fn stdout(&self, args: &[&str]) -> String {
        let out = self.cli(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    }

    fn json_lines(&self, args: &[&str]) -> Vec<Value> {
        (self.stdout(args).lines())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn run_once(&self) -> String {
        let out = self.cli(&["run", "--once"]);
        assert!(out.status.success(), "run --once: {}", stderr(&out));
        stderr(&out)
    }
}

/// Two machines on one store: the laptop, with a Claude Code session (the fixture) in its
/// checkout of the ledger repository, and the desktop.
struct Team {
    pg: PgCluster,
    laptop: Machine,
    desktop: Machine,
    /// The laptop's checkout.
    there: PathBuf,
    /// The session's file on the laptop.
    original: PathBuf,
}

impl Team {
    fn new() -> Team {
        let pg = PgCluster::start();
        let laptop = Machine::new("laptop", &pg);
        let desktop = Machine::new("desktop", &pg);
        let there = laptop.checkout("src/ledger", "git@github.com:dana/ledger.git");
        let original = laptop.claude_session(&there, SESSION);
        Team {
            pg,
            laptop,
            desktop,
            there,
            original,
        }
    }
}

fn fixture() -> Vec<u8> {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sessions/claude-code.jsonl");
    fs::read(path).unwrap()
}

/// Claude Code's directory name for a project: every byte that is not an ASCII letter or
/// digit becomes `-` (the test's paths are short and ASCII).
fn encoded(project: &Path) -> String {
    (project.to_string_lossy().chars())
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// The search hits of `query` on `m` for machine `machine` (none while `m` does not know
/// that machine yet, or nothing of it matches).
fn hits(m: &Machine, query: &str, machine: &str) -> Vec<Value> {
    let out = m.cli(&["search", query, "--json", "--machine", machine]);
    if !out.status.success() {
        let said = stderr(&out);
        let none = said.contains("none pulled yet") || said.contains("no message matches");
        assert!(none, "{said}");
        return Vec::new();
    }
    (String::from_utf8(out.stdout).unwrap().lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What `m` archived of `id`'s file, as `show --format raw` gives it.
fn raw(m: &Machine, id: &str, machine: &str) -> String {
    m.stdout(&["show", id, "--format", "raw", "--machine", machine])
}

#[test]
fn a_session_on_one_machine_is_found_live_on_the_other_and_restored_into_its_checkout() {
    let Team {
        pg,
        laptop,
        desktop,
        there,
        original,
    } = Team::new();
    // The same repository, checked out here too, with its remote written another way.
    let here = desktop.checkout("work/ledger-copy", "https://github.com/dana/ledger");
    // The desktop's own session in its checkout: how `restore` finds the checkout.
    let own = "0b5e1c2d-1111-4222-8333-944455556666";
    desktop.claude_session(&here, own);

    let desktop_daemon = desktop.daemon();
    desktop_daemon.wait_log("pull team: pulling");
    let laptop_daemon = laptop.daemon();
    wait_until("the laptop's session searchable on the desktop", || {
        !hits(&desktop, "\"one cent short\"", "laptop").is_empty()
    });
    let found = hits(&desktop, "\"one cent short\"", "all");
    let machines: Vec<&str> = found
        .iter()
        .map(|h| h["machine"].as_str().unwrap())
        .collect();
    assert!(
        machines.contains(&"laptop") && machines.contains(&"desktop"),
        "{found:#?}"
    );

    // Live: a prompt typed on the laptop now reaches the desktop's index, and a `tail -f` of
    // the laptop's records there.
    let last_seq = desktop.env.sql("SELECT max(seq) FROM records")[0].clone();
    let mut follow = desktop.cmd();
    follow
        .args([
            "tail",
            "-f",
            "--machine",
            "laptop",
            "--since-seq",
            &last_seq,
            "--db",
        ])
        .arg(&desktop.env.db);
    let follower = Daemon::spawn(follow, TapReader::Read);
    let line = fs::read_to_string(&original)
        .unwrap()
        .lines()
        .find(|l| l.contains("one cent short"))
        .unwrap()
        .replace("one cent short", "zanzibar quokka")
        .replace(
            "8d0e1f2a-0001-4000-8000-000000000003",
            "8d0e1f2a-0001-4000-8000-0000000000ff",
        );
    let mut file = fs::OpenOptions::new().append(true).open(&original).unwrap();
    std::io::Write::write_all(&mut file, format!("{line}\n").as_bytes()).unwrap();
    drop(file);
    wait_until("the laptop's new prompt on the desktop", || {
        !hits(&desktop, "zanzibar quokka", "laptop").is_empty()
    });
    let followed: Value = serde_json::from_str(&follower.take_tap(1)[0]).unwrap();
    assert_eq!(followed["machine"], "laptop");
    assert!(
        followed["record"].to_string().contains("zanzibar quokka"),
        "{followed}"
    );
    drop(follower);

    // The desktop lists it as the laptop's, with the repository's remote from the laptop: it
    // comes with the laptop's session rows, shipped once the laptop's own index has read the
    // session, and pulled after that.
    wait_until("the laptop's git remote on the desktop", || {
        let list = desktop.json_lines(&["sessions", "--json", "--machine", "laptop"]);
        list.first().is_some_and(|s| s["git_remote"].is_string())
    });
    let listed = desktop.json_lines(&["sessions", "--json", "--machine", "laptop"]);
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["id"], SESSION);
    assert_eq!(listed[0]["machine"], "laptop");
    assert_eq!(listed[0]["git_remote"], "git@github.com:dana/ledger.git");
    let mine = desktop.json_lines(&["sessions", "--json", "--machine", "this"]);
    assert_eq!(
        mine.iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect::<Vec<_>>(),
        [own]
    );
    assert_eq!(mine[0]["machine"], "desktop");
    let unknown = desktop.cli(&["sessions", "--machine", "tablet"]);
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("no machine \"tablet\""),
        "{}",
        stderr(&unknown)
    );
    assert!(
        stderr(&unknown).contains("laptop ("),
        "{}",
        stderr(&unknown)
    );

    // Restored on the desktop into its own checkout, found by the git remote: where Claude
    // Code looks for a session of that directory, byte for byte as the laptop wrote it.
    let laptop_bytes = fs::read(&original).unwrap();
    wait_until("every record of the laptop's file on the desktop", || {
        raw(&desktop, SESSION, "laptop").as_bytes() == laptop_bytes.as_slice()
    });
    let said = desktop.stdout(&["restore", SESSION]);
    let target = desktop
        .home()
        .join(".claude/projects")
        .join(encoded(&here))
        .join(format!("{SESSION}.jsonl"));
    assert_eq!(fs::read(&target).unwrap(), laptop_bytes, "{said}");
    assert!(said.contains("a session here has its git remote"), "{said}");
    assert!(
        said.contains(&format!(
            "cd {} && claude --resume {SESSION}",
            here.display()
        )),
        "{said}"
    );
    assert!(said.contains("--rewrite-cwd changes them"), "{said}");

    // With --rewrite-cwd, the records' cwd is the checkout here, and nothing else changed.
    let said = desktop.stdout(&["restore", SESSION, "--rewrite-cwd", "--force"]);
    let rewritten = fs::read_to_string(&target).unwrap();
    assert!(said.contains("its records' cwd changed to it"), "{said}");
    let cwd = |text: &str, dir: &Path| {
        text.matches(&format!("\"cwd\":\"{}\"", dir.display()))
            .count()
    };
    let laptop_text = String::from_utf8(laptop_bytes.clone()).unwrap();
    assert!(cwd(&laptop_text, &there) > 3);
    assert_eq!(cwd(&rewritten, &here), cwd(&laptop_text, &there));
    assert_eq!(cwd(&rewritten, &there), 0);
    let back = rewritten.replace(
        &format!("\"cwd\":\"{}\"", here.display()),
        &format!("\"cwd\":\"{}\"", there.display()),
    );
    assert_eq!(back, laptop_text);

    let (status, _) = laptop_daemon.terminate();
    assert!(status.success());
    let (status, _) = desktop_daemon.terminate();
    assert!(status.success());

    // Nothing went back: the store holds each machine's records once, shipped by it alone.
    let per_machine = pg.psql(
        "SELECT m.host, count(*), count(DISTINCT (r.source, r.generation, r.\"offset\"))
         FROM transcript_sync.records r JOIN transcript_sync.machines m USING (machine)
         GROUP BY m.host ORDER BY m.host",
    );
    let records = |m: &Machine| {
        let st: Value = serde_json::from_str(&m.stdout(&["status", "--json"])).unwrap();
        st["totals"]["records"].as_u64().unwrap()
    };
    let (d, l) = (records(&desktop), records(&laptop));
    assert_eq!(
        per_machine,
        [format!("desktop|{d}|{d}"), format!("laptop|{l}|{l}")]
    );
    // The desktop's status counts its own sources, and the laptop's apart.
    let st: Value = serde_json::from_str(&desktop.stdout(&["status", "--json"])).unwrap();
    let home = desktop.home().display().to_string();
    for s in st["sources"].as_array().unwrap() {
        assert!(s["path"].as_str().unwrap().starts_with(&home), "{st:#}");
    }
    assert_eq!(st["pulled"][0]["machine"], "laptop", "{st:#}");
    assert_eq!(st["pulled"][0]["records"].as_u64(), Some(l), "{st:#}");
    let text = desktop.stdout(&["status"]);
    assert!(text.contains("pulled from machine laptop ("), "{text}");

    // `tail` names a pulled record's machine, and keeps to the machine asked for.
    let theirs = desktop.json_lines(&["tail", "--machine", "laptop", "--last", "1000"]);
    assert_eq!(theirs.len() as u64, l);
    assert!(theirs.iter().all(|t| t["machine"] == "laptop"));
    let mine = desktop.json_lines(&["tail", "--machine", "this", "--last", "1000"]);
    assert_eq!(mine.len() as u64, d);
    assert!(mine.iter().all(|t| t.get("machine").is_none()));
    let db = desktop.env.db.display();
    let seen = on_a_terminal(
        &desktop.env,
        &format!("{BIN} tail --format text --machine laptop --last 3 --db {db}"),
    );
    assert_eq!(seen.matches("claude-code@laptop").count(), 3, "{seen}");
    assert!(seen.contains("zanzibar quokka"), "{seen}");
    let seen = on_a_terminal(
        &desktop.env,
        &format!("TRANSCRIPT_SYNC_MACHINE_NAME=desktop {BIN} sessions --db {db}"),
    );
    assert!(seen.contains("laptop"), "{seen}");
}

#[test]
fn run_once_pulls_and_restore_asks_for_the_project_directory_it_cannot_find() {
    let Team {
        pg: _pg,
        laptop,
        desktop,
        there,
        original,
    } = Team::new();
    laptop.run_once();
    desktop.run_once();
    let listed = desktop.json_lines(&["sessions", "--json"]);
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["machine"], "laptop");
    assert_eq!(
        raw(&desktop, SESSION, "laptop").as_bytes(),
        fs::read(&original).unwrap()
    );
    let messages = desktop.json_lines(&["show", SESSION, "--format", "json"]);
    assert!(messages.len() > 2);
    assert!(
        messages.iter().all(|m| m["machine"] == "laptop"),
        "{messages:#?}"
    );
    // A second pull takes nothing again.
    desktop.run_once();
    assert_eq!(desktop.json_lines(&["sessions", "--json"]).len(), 1);
    let pulled = desktop.env.sql("SELECT count(*) FROM records");
    let archived = laptop.env.sql("SELECT count(*) FROM records");
    assert_eq!(pulled, archived);

    // No checkout here with its remote, and its path is gone: restore names the flag.
    fs::remove_dir_all(&there).unwrap();
    let out = desktop.cli(&["restore", SESSION]);
    assert!(!out.status.success());
    let said = stderr(&out);
    assert!(said.contains("give --project-dir PATH"), "{said}");
    assert!(said.contains("git@github.com:dana/ledger.git"), "{said}");
    let elsewhere = desktop.home().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    let said = desktop.stdout(&[
        "restore",
        SESSION,
        "--project-dir",
        // As a shell completes it: the trailing `/` is not part of the agent's name for it.
        &format!("{}/", elsewhere.display()),
        "--dry-run",
    ]);
    let target = (desktop.home().join(".claude/projects"))
        .join(encoded(&elsewhere))
        .join(format!("{SESSION}.jsonl"));
    assert!(
        said.contains(&format!("would write {}", target.display())),
        "{said}"
    );
    assert!(!target.exists());
    // A session of this machine takes neither flag.
    let own = "0b5e1c2d-1111-4222-8333-944455556666";
    desktop.claude_session(&elsewhere, own);
    desktop.run_once();
    let out = desktop.cli(&["restore", own, "--rewrite-cwd"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("for another machine's session"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_store_outage_while_pulling_loses_and_doubles_nothing() {
    let Team {
        pg,
        laptop,
        desktop,
        there,
        original,
    } = Team::new();
    let desktop_daemon = desktop.daemon();
    let laptop_daemon = laptop.daemon();
    let first = fs::read(&original).unwrap();
    // What a time-out shows: both daemons' logs, and what `show` said last.
    let said = std::cell::RefCell::new(String::new());
    let shown_raw = |whole: &[u8]| {
        let out = desktop.cli(&["show", SESSION, "--format", "raw"]);
        *said.borrow_mut() = stderr(&out);
        out.stdout == whole
    };
    let context = || {
        format!(
            "show said: {}\ndesktop's log:\n{}\nlaptop's log:\n{}",
            said.borrow(),
            desktop_daemon.log(),
            laptop_daemon.log()
        )
    };
    wait_until_else(
        "the laptop's file on the desktop",
        || shown_raw(&first),
        context,
    );
    pg.stop();
    desktop_daemon.wait_log("nothing is lost: pulling starts again");
    // Appended while the store is down: shipped and pulled once it is back.
    let lines: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "{{\"type\":\"user\",\"cwd\":\"{}\",\"sessionId\":\"{SESSION}\",\"uuid\":\"outage-{i}\",\"timestamp\":\"2026-11-30T10:00:{:02}.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"while the store was down {i}\"}}}}\n",
                there.display(),
                i % 60
            )
        })
        .collect();
    let mut file = fs::OpenOptions::new().append(true).open(&original).unwrap();
    std::io::Write::write_all(&mut file, lines.concat().as_bytes()).unwrap();
    drop(file);
    // Its sink has tried to ship them, and failed (a failure of its idle work, the session
    // rows, is "tried again later").
    laptop_daemon.wait_log("; retrying in");
    pg.start_again();
    let whole = fs::read(&original).unwrap();
    wait_until_else(
        "the appended records on the desktop",
        || shown_raw(&whole),
        context,
    );
    // Said once the pull is back; the records it pulled may reach `show` before the line
    // reaches the log's reader.
    let log = desktop_daemon.wait_log("the store answers again");
    // Connecting again creates nothing: the server's notices of what exists already are not
    // the daemon's to log.
    for log in [log, laptop_daemon.log()] {
        assert!(!log.contains("NOTICE"), "{log}");
    }
    let pulled = desktop
        .env
        .sql("SELECT count(*) FROM records WHERE source_id < 0");
    let distinct = desktop.env.sql(
        "SELECT count(*) FROM (SELECT DISTINCT source_id, generation, offset FROM records
         WHERE source_id < 0)",
    );
    let archived = laptop.env.sql("SELECT count(*) FROM records");
    assert_eq!(pulled, archived);
    assert_eq!(distinct, archived);
}

#[test]
fn pull_is_checked_in_the_configuration() {
    let env = Env::new();
    let check = |text: &str| {
        env.write_config(text);
        env.cmd()
            .args(["config", "check", "--db"])
            .arg(&env.db)
            .output()
            .unwrap()
    };
    let pg = |name: &str, extra: &str| {
        format!(
            "[[sink]]\nname = \"{name}\"\ntype = \"postgres\"\nurl = \"postgres://me@db.example/t\"\n{extra}"
        )
    };
    let out = check(&pg("team", "pull = true\n"));
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains("pull_interval = \"5s\""), "{shown}");
    let out = check(&pg("team", "pull = true\npull_interval = \"250ms\"\n"));
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("pull_interval = \"250ms\"")
    );
    let out = check(&pg("team", "pull_interval = \"1s\"\n"));
    assert!(
        stderr(&out).contains("pull_interval: only with pull = true"),
        "{}",
        stderr(&out)
    );
    let out = check(
        "[[sink]]\nname = \"h\"\ntype = \"http\"\nurl = \"http://127.0.0.1:9/\"\npull = true\n",
    );
    assert!(
        stderr(&out).contains("pull and pull_interval: only for postgres sinks"),
        "{}",
        stderr(&out)
    );
    let two = format!("{}{}", pg("a", "pull = true\n"), pg("b", "pull = true\n"));
    let out = check(&two);
    assert!(
        stderr(&out).contains("sink \"b\": pull = true, and sink \"a\" pulls already"),
        "{}",
        stderr(&out)
    );
}

/// A store written before machines pulled (schema 2) is upgraded by the first machine that
/// connects, its records numbered as they are, and a machine that pulls takes every one.
#[test]
fn a_store_of_schema_2_is_upgraded_and_pulled_whole() {
    let Team {
        pg,
        laptop,
        desktop,
        there: _,
        original,
    } = Team::new();
    laptop.run_once();
    pg.psql(
        "DROP INDEX transcript_sync.records_pull; DROP INDEX transcript_sync.sessions_updated;
         ALTER TABLE transcript_sync.records DROP COLUMN pull_id;
         ALTER TABLE transcript_sync.sessions DROP COLUMN git_remote;
         DROP TABLE transcript_sync.marks;
         DELETE FROM transcript_sync.schema_version WHERE version >= 3",
    );
    desktop.run_once();
    assert_eq!(
        pg.psql("SELECT max(version) FROM transcript_sync.schema_version"),
        ["4"]
    );
    assert_eq!(
        raw(&desktop, SESSION, "laptop").as_bytes(),
        fs::read(&original).unwrap()
    );
    assert_eq!(
        desktop
            .env
            .sql("SELECT count(*) FROM records WHERE source_id < 0"),
        laptop.env.sql("SELECT count(*) FROM records")
    );
}
