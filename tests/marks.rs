//! `mark`: a person's star, tags and note on a session, kept in the archive, shown and
//! filtered on by `sessions`, `search` and the MCP server, kept through `reindex`, and shipped
//! to the sinks that ask for them.

use crate::util::{
    Collector, Daemon, Env, PgCluster, TapReader, copy_agent_fixture, home_daemon_cmd, stderr,
    stdout_of, wait_until,
};
use serde_json::{Value, json};

/// Two recorded agents' sessions in the sandbox's home, archived; their ids, Claude Code's
/// first.
fn two_sessions(env: &Env) -> [String; 2] {
    let home = env.dir.path().join("home");
    copy_agent_fixture("claude-code", &home);
    copy_agent_fixture("codex", &home);
    env.run_once_home();
    let listed = listed(env, &[]);
    let id = |harness: &str| {
        let s = listed.iter().find(|s| s["harness"] == harness).unwrap();
        s["id"].as_str().unwrap().to_owned()
    };
    [id("claude-code"), id("codex")]
}

/// `sessions --json` with `extra` arguments.
fn listed(env: &Env, extra: &[&str]) -> Vec<Value> {
    let args = [&["sessions", "--json"], extra].concat();
    (stdout_of(env, &args).lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn ids(sessions: &[Value]) -> Vec<&str> {
    sessions.iter().map(|s| s["id"].as_str().unwrap()).collect()
}

#[test]
fn a_marked_session_is_listed_and_searched_by_its_marks_and_keeps_them_through_reindex() {
    let env = Env::new();
    let [claude, codex] = two_sessions(&env);
    let args = [
        "mark",
        claude.as_str(),
        "--star",
        "--tag",
        "infra",
        "--tag",
        "bug",
    ];
    let shown = stdout_of(&env, &[&args[..], &["--note", "the pool ran dry"]].concat());
    assert!(
        shown.contains("starred: yes\ntags: bug infra\nnote: the pool ran dry"),
        "{shown}"
    );
    stdout_of(&env, &["mark", &codex, "--tag", "infra"]);

    assert_eq!(ids(&listed(&env, &["--starred"])), [claude.as_str()]);
    assert_eq!(ids(&listed(&env, &["--tag", "bug"])), [claude.as_str()]);
    assert_eq!(listed(&env, &["--tag", "infra"]).len(), 2);
    assert!(listed(&env, &["--tag", "nothing"]).is_empty());
    let marked = &listed(&env, &["--starred"])[0];
    assert_eq!(
        (&marked["starred"], &marked["tags"], &marked["note"]),
        (
            &json!(true),
            &json!(["bug", "infra"]),
            &json!("the pool ran dry")
        )
    );
    let hits = stdout_of(&env, &["search", "scripted", "--json", "--tag", "bug"]);
    assert!(!hits.is_empty());
    for hit in hits
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        assert_eq!(hit["session"], claude.as_str(), "{hit}");
    }

    stdout_of(&env, &["reindex"]);
    assert_eq!(ids(&listed(&env, &["--starred"])), [claude.as_str()]);

    let args = [
        "mark",
        claude.as_str(),
        "--unstar",
        "--untag",
        "bug",
        "--clear-note",
    ];
    let shown = stdout_of(&env, &args);
    assert!(
        shown.contains("starred: no\ntags: infra\nnote: -"),
        "{shown}"
    );
    assert!(listed(&env, &["--starred"]).is_empty());
}

#[test]
fn the_session_list_shows_a_star_and_tags_after_the_title() {
    let env = Env::new();
    let [claude, _] = two_sessions(&env);
    stdout_of(&env, &["mark", &claude, "--star", "--tag", "infra"]);
    let table = stdout_of(&env, &["sessions", "--starred"]);
    let row = table.lines().nth(1).unwrap();
    assert!(row.ends_with(" #infra ★"), "{table}");
    assert_eq!(table.lines().count(), 2, "{table}");
}

#[test]
fn a_tag_that_is_not_one_word_is_refused_and_nothing_changes() {
    let env = Env::new();
    let [claude, _] = two_sessions(&env);
    let out = (env
        .cmd()
        .args(["mark", &claude, "--star", "--tag", "two words", "--db"]))
    .arg(&env.db)
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("tag \"two words\" cannot be used: a tag is one word"),
        "{}",
        stderr(&out)
    );
    assert!(listed(&env, &["--starred"]).is_empty());
}

#[test]
fn a_notes_control_characters_never_reach_the_terminal_and_search_keeps_the_starred() {
    let env = Env::new();
    let [claude, codex] = two_sessions(&env);
    let shown = stdout_of(
        &env,
        &["mark", &codex, "--star", "--note", "red \x1b[31mtext"],
    );
    assert!(shown.contains("note: red ?[31mtext"), "{shown:?}");
    assert!(!shown.contains('\x1b'), "{shown:?}");
    let hits = stdout_of(&env, &["search", "scripted", "--json", "--starred"]);
    assert!(!hits.is_empty());
    for hit in hits
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
    {
        assert_eq!(hit["session"], codex.as_str(), "{hit}");
        assert_ne!(hit["session"], claude.as_str());
    }
}

/// `config.toml` with the `[[sink]]` tables `sinks`.
fn sinks_config(env: &Env, sinks: &str) {
    env.write_config(&format!("archive = {:?}\n{sinks}", env.db));
}

/// The marks of `session` in PostgreSQL: `starred|{tags}|note`, none before the schema has
/// them.
fn pg_marks(pg: &PgCluster, session: &str) -> Vec<String> {
    let out = pg.try_psql(&format!(
        "SELECT starred, tags, coalesce(note, '-') FROM transcript_sync.marks
         WHERE session = '{session}'"
    ));
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().map(str::to_owned).collect()
}

/// A sink with `marks = true` gets every session's marks, then every change of them, as they
/// are now (an unstarred, untagged session without a note too); marks made while PostgreSQL
/// is down arrive once it is back; a restart ships nothing again.
#[test]
fn a_postgresql_sink_with_marks_gets_each_change_once_through_an_outage_and_a_restart() {
    let pg = PgCluster::start();
    let env = Env::new();
    let [claude, codex] = two_sessions(&env);
    stdout_of(&env, &["mark", &claude, "--tag", "early"]);
    sinks_config(
        &env,
        &format!(
            "[[sink]]\nname = \"team\"\ntype = \"postgres\"\nurl = \"{}\"\npassword_file = \"{}\"\n\
             flush_interval = \"100ms\"\ntimeout = \"5s\"\nmarks = true\n",
            pg.url(),
            pg.password_file().display()
        ),
    );
    let daemon = Daemon::spawn(home_daemon_cmd(&env), TapReader::Read);
    wait_until("the marks made before arrive", || {
        pg_marks(&pg, &claude) == ["f|{early}|-"]
    });
    // Every write of a marks row, counted by PostgreSQL itself.
    pg.psql(
        "CREATE TABLE public.marks_writes (session text);
         CREATE FUNCTION public.count_marks_write() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN INSERT INTO public.marks_writes VALUES (NEW.session); RETURN NEW; END $$;
         CREATE TRIGGER counted AFTER INSERT OR UPDATE ON transcript_sync.marks
             FOR EACH ROW EXECUTE FUNCTION public.count_marks_write();",
    );
    let args = [
        "mark", &claude, "--star", "--untag", "early", "--tag", "bug",
    ];
    stdout_of(&env, &[&args[..], &["--note", "the pool ran dry"]].concat());
    wait_until("the new marks arrive", || {
        pg_marks(&pg, &claude) == ["t|{bug}|the pool ran dry"]
    });
    let args = [
        "mark",
        &claude,
        "--unstar",
        "--untag",
        "bug",
        "--clear-note",
    ];
    stdout_of(&env, &args);
    wait_until("the removed marks arrive", || {
        pg_marks(&pg, &claude) == ["f|{}|-"]
    });

    pg.stop();
    stdout_of(
        &env,
        &["mark", &codex, "--star", "--note", "made while down"],
    );
    daemon.wait_log("; retrying in");
    pg.start_again();
    wait_until("the marks made while down arrive", || {
        pg_marks(&pg, &codex) == ["t|{}|made while down"]
    });
    let (status, _) = daemon.terminate();
    assert!(status.success());

    let daemon = Daemon::spawn(home_daemon_cmd(&env), TapReader::Read);
    stdout_of(&env, &["mark", &codex, "--tag", "after"]);
    wait_until("the mark made after the restart arrives", || {
        pg_marks(&pg, &codex) == ["t|{after}|made while down"]
    });
    drop(daemon);
    // Shipped in order: had the restart shipped any marks again, they would have come first.
    let writes = pg.psql("SELECT session FROM public.marks_writes");
    assert_eq!(writes, [claude.clone(), claude, codex.clone(), codex]);
}

/// Marks go to an HTTP collector in batches of their own, after the records of their
/// sessions, the note redacted with the records (`redact` is on by default); a sink without
/// `marks = true` gets records and no marks.
#[test]
fn an_http_sink_gets_marks_only_when_it_asks_and_their_notes_redacted() {
    let with = Collector::start(&[], None);
    let without = Collector::start(&[], None);
    let env = Env::new();
    let [claude, _] = two_sessions(&env);
    let secret = "AKIAJPJOMKEFOIUC5LGT";
    let note = format!("aws_access_key_id = {secret}");
    stdout_of(
        &env,
        &[
            "mark", &claude, "--star", "--tag", "infra", "--tag", secret, "--note", &note,
        ],
    );
    let table = |name: &str, url: String, marks: &str| {
        format!("[[sink]]\nname = \"{name}\"\ntype = \"http\"\nurl = \"{url}\"\n{marks}")
    };
    sinks_config(
        &env,
        &[
            table("with", with.url(), "marks = true\nbatch_records = 1\n"),
            table("without", without.url(), ""),
        ]
        .concat(),
    );
    env.run_once_home();
    let marks_lines = |c: &Collector| -> Vec<Value> {
        (c.bodies().iter())
            .flat_map(|b| b.split(|c| *c == b'\n').filter(|l| !l.is_empty()))
            .map(|l| serde_json::from_slice::<Value>(l).unwrap())
            .filter(|v| v.get("marks").is_some())
            .collect()
    };
    let shipped = marks_lines(&with);
    assert_eq!(shipped.len(), 1, "{shipped:?}");
    let marks = &shipped[0]["marks"];
    assert_eq!(
        (&marks["session"], &marks["starred"]),
        (&json!(claude), &json!(true))
    );
    // A tag can hold a secret as a note can: both leave redacted.
    let tags: Vec<&str> = (marks["tags"].as_array().unwrap().iter())
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tags.len(), 2, "{tags:?}");
    assert!(tags.contains(&"infra"), "{tags:?}");
    assert!(tags.iter().any(|t| t.starts_with("[REDACTED")), "{tags:?}");
    let shipped_note = marks["note"].as_str().unwrap();
    assert!(
        shipped_note.starts_with("aws_access_key_id = [REDACTED"),
        "{shipped_note}"
    );
    // A batch a record: the marks wait for the records the archive held when they were made.
    let last = with.bodies().pop().unwrap();
    assert!(
        String::from_utf8(last).unwrap().contains("\"marks\":"),
        "the marks come after every record"
    );
    assert!(
        !without.bodies().is_empty(),
        "the records went to the other sink"
    );
    assert!(marks_lines(&without).is_empty());

    env.run_once_home();
    assert_eq!(marks_lines(&with).len(), 1, "nothing shipped again");
}

/// The marks lines of the bodies `collector` accepted.
fn marks_lines(collector: &Collector) -> Vec<Value> {
    (collector.bodies().iter())
        .flat_map(|b| b.split(|c| *c == b'\n').filter(|l| !l.is_empty()))
        .map(|l| serde_json::from_slice::<Value>(l).unwrap())
        .filter(|v| v.get("marks").is_some())
        .collect()
}

// A destination that refuses one session's marks still gets every other session's: the
// refused batch is sent again a session at a time, and only the session refused by itself
// is passed over, and said.
#[test]
fn marks_a_sink_refuses_for_one_session_hold_back_no_other() {
    let collector = Collector::start(&[], Some("not-for-this-sink"));
    let env = Env::new();
    let [first, second] = two_sessions(&env);
    stdout_of(&env, &["mark", &first, "--note", "not-for-this-sink"]);
    stdout_of(&env, &["mark", &second, "--tag", "kept"]);
    let url = collector.url();
    sinks_config(
        &env,
        &format!("[[sink]]\nname = \"h\"\ntype = \"http\"\nurl = \"{url}\"\nmarks = true\n"),
    );
    let log = env.run_once_home();
    let shipped = marks_lines(&collector);
    assert_eq!(shipped.len(), 1, "{shipped:?}");
    assert_eq!(shipped[0]["marks"]["session"], json!(second));
    assert_eq!(shipped[0]["marks"]["tags"], json!(["kept"]));
    assert!(
        log.contains(&format!("the marks of session {first} were refused")),
        "{log}"
    );
}
