//! Upgrades never lose the archive: each `tests/fixtures/upgrade/<version>/` holds an archive
//! and its session index as that release wrote them (`scripts/upgrade-fixture`), with what
//! its own `export` and `sessions` said they hold. This build opens each: its migrations are
//! applied, every record and session is still there as that release saw it, and the index is
//! built again only when its version is not this build's.

use crate::util::{Env, stderr, stdout_of};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};

/// What the session index logs when it empties itself and builds again.
const REBUILT: &str = "it is emptied and built again from the archive's records";

/// The fixture folders, one per release, oldest first.
fn releases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upgrade");
    let mut found: Vec<PathBuf> = (fs::read_dir(&dir).unwrap())
        .map(|e| e.unwrap().path())
        .collect();
    found.sort();
    assert!(!found.is_empty(), "no release in {dir:?}");
    found
}

/// A sandbox holding the archive and index of `release`.
fn with_release(release: &Path) -> Env {
    let env = Env::new();
    fs::create_dir_all(env.db.parent().unwrap()).unwrap();
    fs::copy(release.join("archive.db"), &env.db).unwrap();
    fs::copy(release.join("archive.db-index"), env.index_file()).unwrap();
    env
}

/// The archive migrations this build knows: `src/archive/schema_v*.sql`.
fn migrations() -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/archive");
    (fs::read_dir(dir).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("schema_v") && n.ends_with(".sql"))
        .count()
}

fn index_version(env: &Env) -> i64 {
    let conn = rusqlite::Connection::open(env.index_file()).unwrap();
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

fn json_lines(text: &str) -> Vec<Value> {
    (text.lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Asserts that every field `old` has, `new` has with the same value (a later release may add
/// fields), but those in `skip`.
fn holds_as_before(what: &str, old: &[Value], new: &[Value], skip: &[&str]) {
    assert_eq!(old.len(), new.len(), "{what}: how many");
    for (o, n) in old.iter().zip(new) {
        for (key, value) in o.as_object().unwrap() {
            if !skip.contains(&key.as_str()) {
                assert_eq!(&n[key], value, "{what}: {key} of {o}");
            }
        }
    }
}

/// Opens the release's archive with this build (a pass, then the listing); returns its logs.
fn open_and_check(release: &Path, env: &Env) -> String {
    let mut logs = env.run_once_home();
    assert_eq!(
        env.sql("PRAGMA user_version"),
        vec![migrations().to_string()]
    );
    let records = json_lines(&fs::read_to_string(release.join("records.jsonl")).unwrap());
    let exported: Vec<Value> = (env.export(&[]).iter())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    holds_as_before("records", &records, &exported, &[]);
    let mut listed = env.cmd();
    listed.args(["sessions", "--json", "--limit", "100000", "--db"]);
    let out = listed.arg(&env.db).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    logs.push_str(&stderr(&out));
    let sessions = json_lines(&fs::read_to_string(release.join("sessions.json")).unwrap());
    let now = json_lines(&String::from_utf8(out.stdout).unwrap());
    // Their files are not on this machine, whose host name may not be the one that wrote
    // them: only whether they are on disk, and the machine's name, differ.
    holds_as_before("sessions", &sessions, &now, &["on_disk", "machine"]);
    let found = stdout_of(env, &["search", "Run the scripted command", "--json"]);
    assert_eq!(json_lines(&found).len(), sessions.len(), "{found}");
    logs
}

#[test]
fn each_earlier_releases_archive_opens_with_every_record_and_session() {
    for release in releases() {
        let env = with_release(&release);
        let before = index_version(&env);
        let logs = open_and_check(&release, &env);
        // The index is kept when its version is this build's, else built again.
        let rebuilt = index_version(&env) != before;
        assert_eq!(logs.contains(REBUILT), rebuilt, "{release:?}:\n{logs}");
    }
}

#[test]
fn an_index_of_another_version_is_built_again_and_lists_the_same_sessions() {
    let release = releases().pop().unwrap();
    let env = with_release(&release);
    let conn = rusqlite::Connection::open(env.index_file()).unwrap();
    conn.pragma_update(None, "user_version", 1).unwrap();
    drop(conn);
    let logs = open_and_check(&release, &env);
    assert!(logs.contains(REBUILT), "{logs}");
    assert_ne!(index_version(&env), 1);
}
