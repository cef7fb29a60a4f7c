//! Redaction: every copy that leaves the machine (PostgreSQL, HTTP, a mirror that asks, and
//! `export`/`show --redact`) holds `[REDACTED:<rule>]` where a secret was, as valid JSON of
//! the same shape; the archive keeps every record byte for byte; no log line, event, dead
//! letter or status line holds a secret; `redact --check` finds them and exits 1.

use crate::util::{Collector, Env, PgCluster, lines, on_a_terminal, stderr};
use serde_json::{Value, json};
use std::fs;
use std::path::Path;

/// One secret of each kind, as the text that holds it and the secret itself.
const SECRETS: &[(&str, &str)] = &[
    (
        "aws_access_key_id = AKIAJPJOMKEFOIUC5LGT",
        "AKIAJPJOMKEFOIUC5LGT",
    ),
    (
        "AWS_SECRET_ACCESS_KEY=vQGY7nU4dINx2eZRwN/ptWPYxAwIZ0DqK7fCOokP",
        "vQGY7nU4dINx2eZRwN/ptWPYxAwIZ0DqK7fCOokP",
    ),
    (
        "maps key=AIzayQnP8o4FG5B5EGnwAp-cz2jlPR9-RrxEmlK",
        "AIzayQnP8o4FG5B5EGnwAp-cz2jlPR9-RrxEmlK",
    ),
    (
        r#"{"type": "service_account", "private_key_id": "902f32839de243ddb409f938bc77f41928a4e758"}"#,
        "902f32839de243ddb409f938bc77f41928a4e758",
    ),
    (
        "AccountName=ts;AccountKey=i+Mf549e3y3FEYVFPqTLkCVeHcKMTXsHH/hkz0nQQG9WJ05X72qibobT+Jox17RWEVxropmO6W9/yNsOSUTbfU==;",
        "i+Mf549e3y3FEYVFPqTLkCVeHcKMTXsHH/hkz0nQQG9WJ05X72qibobT+Jox17RWEVxropmO6W9/yNsOSUTbfU==",
    ),
    (
        "AZURE_CLIENT_SECRET=ZMl8Q~zov1sjBNMFZlvLu5MhikfhyPsrTEIXdHJw",
        "ZMl8Q~zov1sjBNMFZlvLu5MhikfhyPsrTEIXdHJw",
    ),
    (
        "export GH_TOKEN=ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz",
        "ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz",
    ),
    (
        "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",
        "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",
    ),
    (
        "CI_TOKEN=glpat-LqFWfDNJGhjaIFw40YUc",
        "glpat-LqFWfDNJGhjaIFw40YUc",
    ),
    (
        "SLACK_BOT_TOKEN=xoxb-275667734965-8066411974319-ZHvXNbPp0ZReJwRQ5EzzJn9Q",
        "xoxb-275667734965-8066411974319-ZHvXNbPp0ZReJwRQ5EzzJn9Q",
    ),
    (
        "curl https://hooks.slack.com/services/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",
        "TZ7OSS9JL/BMXTH7EP3OC/hmt98tBqsVi3CXFlnb5SbZij",
    ),
    (
        "STRIPE_SECRET_KEY=sk_live_XQTDAoQNCvMKjjzvHFb5ssSc",
        "sk_live_XQTDAoQNCvMKjjzvHFb5ssSc",
    ),
    (
        "OPENAI_API_KEY=sk-proj-PSX6if6ElAcpkGXv-XjCnGvpYta8JntZfwxusEfLxNA4gcHw52ECUMeEYDJjGhohT3BlbkFJBpwYEuf1BWKWiO_r8Fg9ZFIBv4YSmtIAD1TjFBPQBouywU-S7PWD_hZsGLZBl3CU",
        "sk-proj-PSX6if6ElAcpkGXv-XjCnGvpYta8JntZfwxusEfLxNA4gcHw52ECUMeEYDJjGhohT3BlbkFJ",
    ),
    (
        "ANTHROPIC_API_KEY=sk-ant-api03-y5TLaFfSX3hD-qgR2k_dhLHEWRfkAYtPo-aK3lbpMeUU3B9w_Q-0lMUA9wrnFZlPLQuEZpPQh1SigvyeROnphcwvRErpWAA",
        "sk-ant-api03-y5TLaFfSX3hD-qgR2k_dhLHEWRfkAYtPo",
    ),
    (
        "HF_TOKEN=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",
        "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",
    ),
    (
        "//registry.npmjs.org/:_authToken=npm_pffPmDpfBJy14EBQaXP3wC7e6yIkeVqnIO0h",
        "npm_pffPmDpfBJy14EBQaXP3wC7e6yIkeVqnIO0h",
    ),
    (
        "password = pypi-AgEIcHlwaS5vcmcJmNnOLpeZaYPjPITayynpUiJquH7cndSLLcei5rYEKkYgy4nx2Aly21R-Clj-fbWdyK9g3",
        "pypi-AgEIcHlwaS5vcmcJmNnOLpeZaYPjPITayynpUiJquH7",
    ),
    (
        "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiAiTXRsdlFSaUhLdyIsICJpYXQiOiAxNzY0NTQ3MjAwfQ.cFDu25VGiqcq-6ijp-DCMMhVtieSf8NxCGgx2oc3kau",
        "cFDu25VGiqcq-6ijp-DCMMhVtieSf8NxCGgx2oc3kau",
    ),
    (
        "-----BEGIN RSA PRIVATE KEY-----\n7f902KgET8sEJOYh6Doc6olFFA/CXTNjqBl98qzosMkE5K9ThWX+orpV5maYFDzlsobALSboTBqKzf1SsnaiuCa9ZOT14HAkf0cAwbuLQ0Ak6RgZC7JrqGFCrxQodHjA\n-----END RSA PRIVATE KEY-----",
        "7f902KgET8sEJOYh6Doc6olFFA",
    ),
    (
        "DATABASE_URL=postgres://app:PtYgjmUhBel31iEl2hpC@db.internal:5432/app",
        "PtYgjmUhBel31iEl2hpC",
    ),
    (
        "mongodb+srv://svc:hYgCfrL1spNxnyVmihA!@cluster0.example.net/db",
        "hYgCfrL1spNxnyVmihA!",
    ),
    (
        "REDIS_URL=redis://default:2O76UMFxFkM!R5Kjp1vR@cache:6379/0",
        "2O76UMFxFkM!R5Kjp1vR",
    ),
    (
        "amqp://celery:t%1fjORS!6ilI8ihN5KX@rabbit:5672//",
        "t%1fjORS!6ilI8ihN5KX",
    ),
    (
        "curl -H 'Authorization: Bearer v5r7Oea8lQyoBGZ7_wBXcyrBXjSuEaRr' https://api.example.com",
        "v5r7Oea8lQyoBGZ7_wBXcyrBXjSuEaRr",
    ),
    (
        "Authorization: Basic ZGVwbG95Omh3Z3VRT2NIcDlIeEhtbXo=",
        "ZGVwbG95Omh3Z3VRT2NIcDlIeEhtbXo=",
    ),
    ("DB_PASSWORD=Sc7Tvo!hBKqFYY!kv5ZJ", "Sc7Tvo!hBKqFYY!kv5ZJ"),
    (
        r#"{"token": "r3J1TWDtkwtDDb%xHKas"}"#,
        "r3J1TWDtkwtDDb%xHKas",
    ),
    (
        "api_key = AIxNKu8iS2G8NPRVdD53X83R",
        "AIxNKu8iS2G8NPRVdD53X83R",
    ),
];

const SESSION: &str = "5b7f0c1e-2d3a-4b5c-8d9e-0f1a2b3c4d5e";

/// A Claude Code session holding every secret: the first prompt (its title) holds one, then
/// each secret in a prompt or a tool's output, in turn.
fn session_with_secrets() -> Vec<String> {
    let common = |kind: &str, uuid: usize| {
        json!({"type": kind, "sessionId": SESSION, "cwd": "/home/dana/src/ledger",
               "uuid": format!("00000000-0000-4000-8000-{uuid:012}"),
               "timestamp": format!("2026-11-30T10:{:02}:00.000Z", uuid % 60)})
    };
    let mut out = Vec::new();
    for (i, (text, _)) in SECRETS.iter().enumerate() {
        let mut record = common("user", i);
        record["message"] = match i % 2 {
            0 => json!({"role": "user", "content": format!("use this: {text}")}),
            _ => json!({"role": "user", "content": [{"type": "tool_result",
                 "tool_use_id": format!("toolu_{i}"), "content": format!("$ cat .env\n{text}\n")}]}),
        };
        out.push(serde_json::to_string(&record).unwrap());
    }
    out
}

/// Writes `recs` as the session's transcript, where Claude Code keeps it under the env's home.
fn write_session(env: &Env, recs: &[String]) {
    let project = (env.dir.path()).join("home/.claude/projects/-home-dana-src-ledger");
    fs::create_dir_all(&project).unwrap();
    fs::write(project.join(format!("{SESSION}.jsonl")), lines(recs)).unwrap();
}

/// `run --once` with the env's configuration file, which must succeed; its log.
fn run_once(env: &Env) -> String {
    let out = env.cmd().args(["run", "--once"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    stderr(&out)
}

/// Asserts that `text` holds no secret, naming the first one it does.
fn assert_no_secret(what: &str, text: &str) {
    for (_, secret) in SECRETS {
        assert!(!text.contains(secret), "{what} holds {secret}:\n{text}");
    }
}

/// `record`, redacted, has the shape of `original`: the same JSON with only strings changed,
/// and each secret's string now saying `[REDACTED:`.
fn assert_redacted_copy(original: &str, record: &str) {
    let (a, b): (Value, Value) = (
        serde_json::from_str(original).unwrap(),
        serde_json::from_str(record).expect("a redacted record is still JSON"),
    );
    assert_eq!(shape(&a), shape(&b), "{record}");
    assert!(record.contains("[REDACTED:"), "{record}");
    assert_no_secret("a redacted record", record);
}

fn shape(v: &Value) -> Value {
    match v {
        Value::String(_) => Value::Null,
        Value::Array(a) => Value::Array(a.iter().map(shape).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        other => other.clone(),
    }
}

/// Every secret, shipped to PostgreSQL and to an HTTP collector, arrives redacted and still
/// valid JSON of the same shape (the session's title, its first prompt, too), while the
/// archive keeps every record byte for byte and `export` without `--redact` gives them back.
#[test]
fn secrets_shipped_to_postgresql_and_http_arrive_redacted_and_the_archive_keeps_them() {
    let pg = PgCluster::start();
    let collector = Collector::start(&[], None);
    let env = Env::new();
    let recs = session_with_secrets();
    write_session(&env, &recs);
    env.write_config(&format!(
        "archive = {:?}\n\
         [[sink]]\nname = \"team\"\ntype = \"postgres\"\nurl = \"{}\"\npassword_file = \"{}\"\n\
         [[sink]]\nname = \"collector\"\ntype = \"http\"\nurl = \"{}\"\n",
        env.db,
        pg.url(),
        pg.password_file().display(),
        collector.url()
    ));
    assert_no_secret("the log", &run_once(&env));

    let shipped = pg.psql("SELECT record FROM transcript_sync.records ORDER BY seq");
    assert_eq!(shipped.len(), recs.len());
    for (original, copy) in recs.iter().zip(&shipped) {
        assert_redacted_copy(original, copy);
    }
    let docs = pg.psql("SELECT count(*) FROM transcript_sync.records WHERE doc IS NOT NULL");
    assert_eq!(docs, [recs.len().to_string()], "every copy is jsonb");
    let title = pg.psql("SELECT title FROM transcript_sync.sessions");
    assert_eq!(
        title,
        ["use this: aws_access_key_id = [REDACTED:aws-access-key-id]"]
    );

    let received: Vec<Value> = collector
        .bodies()
        .iter()
        .flat_map(|b| envelopes(b))
        .collect();
    assert_eq!(received.len(), recs.len());
    for (original, envelope) in recs.iter().zip(&received) {
        assert_redacted_copy(original, &envelope["record"].to_string());
    }

    let archived: Vec<String> = (env.export(&[]).iter())
        .map(|l| crate::util::raw_record(l).to_owned())
        .collect();
    assert_eq!(archived, recs, "the archive keeps every record as written");
}

fn envelopes(body: &[u8]) -> Vec<Value> {
    (body.split(|b| *b == b'\n'))
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect()
}

/// A sink with `redact = false` ships records as archived (and says so at WARN), and a
/// collector that refuses a record and quotes it back: its answer is logged, kept in
/// `dead_letters`, in the events and in `status`, with the secrets it quoted redacted, at
/// every log level.
#[test]
fn no_log_line_event_dead_letter_or_status_of_a_run_with_secrets_holds_one() {
    let collector = Collector::start(&[], Some("REFUSE-ME"));
    let env = Env::new();
    let mut recs = session_with_secrets();
    let mut refused: Value = serde_json::from_str(&recs[6]).unwrap();
    refused["note"] = json!("REFUSE-ME");
    recs[6] = refused.to_string();
    write_session(&env, &recs);
    env.write_config(&format!(
        "archive = {:?}\n[[sink]]\nname = \"raw\"\ntype = \"http\"\nurl = \"{}\"\nredact = false\n",
        env.db,
        collector.url()
    ));
    let out = (env.cmd().env("RUST_LOG", "trace"))
        .args(["run", "--once"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let log = stderr(&out);
    assert!(
        log.contains("sink raw: redact = false: records leave this machine as archived"),
        "{log}"
    );
    assert!(log.contains("answered 400: bad record"), "{log}");
    assert_no_secret("the log", &log);

    // Shipped as archived, as asked.
    let received: Vec<Value> = collector
        .bodies()
        .iter()
        .flat_map(|b| envelopes(b))
        .collect();
    let sent: Vec<String> = received.iter().map(|e| e["record"].to_string()).collect();
    assert!(sent.iter().any(|r| r.contains(SECRETS[1].1)));

    let answer = env.sql("SELECT answer FROM dead_letters");
    assert_eq!(answer.len(), 1);
    assert!(answer[0].contains("[REDACTED:github-token]"), "{answer:?}");
    assert_no_secret("the dead letter", &answer.join("\n"));
    assert_no_secret("the events", &env.sql("SELECT * FROM events").join("\n"));
    assert_no_secret("the sinks", &env.sql("SELECT * FROM sinks").join("\n"));
    let status = (env.cmd().args(["status", "--db"]).arg(&env.db))
        .output()
        .unwrap();
    assert_no_secret("status", &String::from_utf8_lossy(&status.stdout));
}

/// A mirror copies records as archived unless it says `redact = true`; a redacting mirror's
/// file written again from the archive (it was cut short) is redacted too.
#[test]
fn a_mirror_redacts_only_when_asked() {
    let env = Env::new();
    let recs = session_with_secrets();
    write_session(&env, &recs);
    let (plain, redacted) = (env.path("mirror-plain"), env.path("mirror-redacted"));
    env.write_config(&format!(
        "archive = {:?}\n\
         [[sink]]\nname = \"plain\"\ntype = \"mirror\"\ndir = {plain:?}\n\
         [[sink]]\nname = \"shared\"\ntype = \"mirror\"\ndir = {redacted:?}\nredact = true\n",
        env.db
    ));
    run_once(&env);
    let copy = |dir: &Path| {
        let file = walkdir::WalkDir::new(dir)
            .into_iter()
            .filter_map(Result::ok)
            .find(|e| e.file_type().is_file())
            .expect("a mirrored file");
        fs::read_to_string(file.path()).unwrap()
    };
    assert_eq!(copy(&plain).into_bytes(), lines(&recs));
    let shared = copy(&redacted);
    assert_eq!(shared.lines().count(), recs.len());
    for (original, copy) in recs.iter().zip(shared.lines()) {
        assert_redacted_copy(original, copy);
    }

    let file = (walkdir::WalkDir::new(&redacted)
        .into_iter()
        .filter_map(Result::ok))
    .find(|e| e.file_type().is_file())
    .unwrap();
    fs::write(file.path(), shared.lines().next().unwrap()).unwrap();
    let out = env.cmd().args(["run", "--once"]).output().unwrap();
    assert!(
        stderr(&out).contains("writing it again from the archive"),
        "{}",
        stderr(&out)
    );
    assert_eq!(copy(&redacted), shared, "written again, redacted again");
}

/// `redact --check` reports each secret (file, line, offset, rule, a masked preview) and
/// exits 1; a clean file passes; `redact` writes every line redacted, as JSON of the same
/// shape. Neither ever prints a secret.
#[test]
fn redact_check_reports_every_secret_without_its_value_and_exits_1() {
    let env = Env::new();
    let recs = session_with_secrets();
    let file = env.path("leaky.jsonl");
    fs::write(&file, lines(&recs)).unwrap();
    let out = env
        .cmd()
        .args(["redact", "--check"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = String::from_utf8(out.stdout.clone()).unwrap();
    assert_no_secret("the report", &report);
    assert_no_secret("stderr", &stderr(&out));
    assert_eq!(report.lines().count(), SECRETS.len(), "{report}");
    let first = report.lines().next().unwrap();
    let offset = recs[0].find("AKIA").unwrap();
    assert_eq!(
        first,
        format!("{}:1:{offset}: aws-access-key-id AKIA****…", file.display())
    );
    assert!(
        stderr(&out).contains("secret(s) found in 1 input(s)"),
        "{}",
        stderr(&out)
    );

    let clean = env.path("clean.jsonl");
    fs::write(&clean, lines(&crate::util::records("ok", 3))).unwrap();
    let out = env
        .cmd()
        .args(["redact", "--check"])
        .arg(&clean)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());

    // From stdin, as a filter.
    let mut child = (env.cmd().args(["redact", "-"]))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &lines(&recs)).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let written = String::from_utf8(out.stdout).unwrap();
    assert_eq!(written.lines().count(), recs.len());
    for (original, copy) in recs.iter().zip(written.lines()) {
        assert_redacted_copy(original, copy);
    }
}

/// A rule of the user's finds what the built-in ones do not; an allowlisted value (by its
/// SHA-256) and one matching an allowed pattern are left alone; a rule that does not find
/// its own example is refused at its line in the file.
#[test]
fn a_users_rule_and_allowlist_in_the_config_apply() {
    let env = Env::new();
    let file = env.path("notes.txt");
    fs::write(
        &file,
        "deploy with acme_live_0123456789abcdef\n\
         fixture token ghp_000000000000000000000000000000000000\n\
         real token ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz\n\
         stripe sk_live_XQTDAoQNCvMKjjzvHFb5ssSc\n",
    )
    .unwrap();
    let sha = sha256_hex("sk_live_XQTDAoQNCvMKjjzvHFb5ssSc");
    env.write_config(&format!(
        "[redact]\nallow = ['^ghp_0+$']\nallow_sha256 = [\"{sha}\"]\n\
         [[redact.rule]]\nid = \"acme-key\"\ndescription = \"Acme deploy key\"\n\
         keywords = [\"acme_live_\"]\npattern = 'acme_live_[0-9a-f]{{16}}'\n\
         example = \"acme_live_0123456789abcdef\"\n"
    ));
    let out = (env.cmd().args(["redact"]).arg(&file)).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "deploy with [REDACTED:acme-key]\n\
         fixture token ghp_000000000000000000000000000000000000\n\
         real token [REDACTED:github-token]\n\
         stripe sk_live_XQTDAoQNCvMKjjzvHFb5ssSc\n"
    );

    let config = env.write_config(
        "log_level = \"info\"\n[[redact.rule]]\nid = \"acme-key\"\npattern = 'acme_live_[0-9a-f]{16}'\n\
         example = \"acme_live_short\"\n",
    );
    let out = (env.cmd().args(["redact", "--check"]).arg(&file))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!(
            "{}:2:3: [redact]: rule \"acme-key\": finds nothing in its example",
            config.display()
        )),
        "{}",
        stderr(&out)
    );
    // The rules are compiled when first needed, but `run` and `config check` refuse a table
    // at fault at once, sinks or not.
    for args in [&["run", "--once"][..], &["config", "check"]] {
        let out = env.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&out).contains("[redact]: rule \"acme-key\""),
            "{}",
            stderr(&out)
        );
    }
}

fn sha256_hex(text: &str) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            std::io::Write::write_all(&mut c.stdin.take().unwrap(), text.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

/// `export --redact` and `show --redact` (text, on a terminal, and raw) hide every secret;
/// the same commands without it show the records as archived.
#[test]
fn export_and_show_redact_for_sharing_by_hand() {
    let env = Env::new();
    let recs = session_with_secrets();
    write_session(&env, &recs);
    env.write_config(&format!("archive = {:?}\n", env.db));
    run_once(&env);

    let exported = env.export(&["--redact"]);
    assert_eq!(exported.len(), recs.len());
    for (original, line) in recs.iter().zip(&exported) {
        let envelope: Value = serde_json::from_str(line).unwrap();
        assert_redacted_copy(original, &envelope["record"].to_string());
    }
    let plain = env.export(&[]).join("\n");
    assert!(
        plain.contains(SECRETS[0].1),
        "without --redact, as archived"
    );

    let show = |args: &[&str]| {
        let out = (env.cmd().arg("show").arg(&SESSION[..8]).args(args))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let text = show(&["--redact"]);
    assert_no_secret("show --redact", &text);
    assert!(text.contains("[REDACTED:github-token]"), "{text}");
    assert!(
        show(&[]).contains(SECRETS[6].1),
        "without --redact, as archived"
    );
    let raw = show(&["--redact", "--format", "raw"]);
    for (original, copy) in recs.iter().zip(raw.lines()) {
        assert_redacted_copy(original, copy);
    }

    let cmd = format!(
        "{} --config {} show {} --redact",
        env!("CARGO_BIN_EXE_transcript-sync"),
        env.config_path().display(),
        &SESSION[..8]
    );
    let screen = on_a_terminal(&env, &cmd);
    assert_no_secret("show --redact on a terminal", &screen);
    assert!(
        screen.contains("use this: aws_access_key_id = [REDACTED:aws-access-key-id]"),
        "{screen}"
    );
}
