//! What a sink is: from a `[[sink]]` table of `config.toml` or a `--ship URL`, checked before
//! anything starts (no password in a URL, a known type, a usable secret source).

use crate::consumers::redact::Redactor;
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Default time a live record waits for others to share its batch.
pub(super) const DEFAULT_FLUSH: Duration = Duration::from_secs(1);
/// Default records per batch, at most.
pub(super) const DEFAULT_BATCH_RECORDS: usize = 5000;
/// Default bytes of records per batch, at most (past one record).
pub(super) const DEFAULT_BATCH_BYTES: u64 = 8 << 20;
/// Default time one delivery may take before it counts as failed.
pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default PostgreSQL schema.
pub(super) const DEFAULT_SCHEMA: &str = "transcript_sync";
/// Default time between two pulls from a store that sends no notifications.
pub(super) const DEFAULT_PULL_INTERVAL: Duration = Duration::from_secs(5);

/// One sink, resolved.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SinkSpec {
    /// Its name: in `status`, log lines and its cursor (`sink:<name>`).
    pub name: String,
    /// Where it ships to.
    pub target: Target,
    /// How long a record waits for others to share its batch.
    pub flush_interval: Duration,
    /// Records per batch, at most.
    pub batch_records: usize,
    /// Bytes of records per batch, at most (past one record).
    pub batch_bytes: u64,
    /// How long one delivery may take.
    pub timeout: Duration,
    /// Whether records (and a database's session rows) leave redacted.
    pub redact: bool,
    /// What finds secrets: in records when `redact`, and in every message of the sink's
    /// destination (log lines, events, dead letters), always.
    pub redactor: Arc<Redactor>,
    /// For a PostgreSQL sink with `pull = true`: the other machines' records are pulled from
    /// it into this archive, at the latest this long after the last pull.
    pub pull: Option<Duration>,
    /// Whether it ships the sessions' marks (star, tags, note) too, and every change of them.
    pub marks: bool,
}

/// A sink's destination. Its `Debug` shows what `display` shows, and header names only:
/// header values and query strings may hold secrets.
#[derive(Clone, PartialEq)]
pub(crate) enum Target {
    /// A PostgreSQL database.
    Postgres {
        /// The connection URL, without a password.
        url: String,
        /// Where the password comes from.
        password: Option<Secret>,
        /// The schema its tables live in.
        schema: String,
        /// Whether to use TLS, and how to check the server.
        sslmode: SslMode,
        /// The certificates (PEM) a `verify-full` server's chain must lead to, instead of
        /// the Mozilla roots compiled in.
        ca_file: Option<PathBuf>,
    },
    /// An HTTP endpoint taking NDJSON.
    Http {
        /// The URL POSTed to, without credentials.
        url: String,
        /// Where the bearer token comes from.
        token: Option<Secret>,
        /// Extra headers.
        headers: BTreeMap<String, String>,
        /// Gzip the body (the default).
        gzip: bool,
    },
    /// A directory of byte-exact transcript copies.
    Mirror {
        /// The directory.
        dir: PathBuf,
        /// The watched roots, (path, harness), longest first: a mirrored file's path is its
        /// path under its root.
        roots: Vec<(PathBuf, String)>,
    },
}

impl Target {
    /// `postgres`, `http` or `mirror`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Target::Postgres { .. } => "postgres",
            Target::Http { .. } => "http",
            Target::Mirror { .. } => "mirror",
        }
    }

    /// Where to, for people: a URL (never with a password) or the directory.
    pub(crate) fn display(&self) -> String {
        match self {
            Target::Postgres { url, .. } | Target::Http { url, .. } => mask(url),
            Target::Mirror { dir, .. } => dir.display().to_string(),
        }
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct(self.kind());
        d.field("target", &self.display());
        if let Target::Http { headers, .. } = self {
            d.field("headers", &headers.keys().collect::<Vec<_>>());
        }
        d.finish_non_exhaustive()
    }
}

/// Where a password or token comes from: never the command line, never a log line.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Secret {
    /// The first line of this file.
    File(PathBuf),
    /// This environment variable.
    Env(String),
}

impl Secret {
    /// Reads the secret now (a changed file is read again at the next connection).
    pub(crate) fn read(&self) -> std::result::Result<String, String> {
        match self {
            Secret::File(path) => match std::fs::read_to_string(path) {
                Ok(text) => Ok(text.lines().next().unwrap_or_default().to_owned()),
                Err(e) => Err(format!(
                    "cannot read the secret file {}: {e}",
                    path.display()
                )),
            },
            Secret::Env(name) => std::env::var(name)
                .map_err(|_| format!("the environment variable {name} is not set")),
        }
    }
}

/// TLS to PostgreSQL, as libpq's `sslmode` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain TCP or a Unix socket.
    Disable,
    /// TLS, the certificate not checked (encryption against eavesdropping only).
    Require,
    /// TLS, the certificate checked against the roots and the host name.
    VerifyFull,
}

/// A `[[sink]]` table as written; every key but `name` and `type` is optional.
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SinkTable {
    /// The sink's name.
    pub name: String,
    /// `postgres`, `http` or `mirror`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The URL, for `postgres` and `http`.
    pub url: Option<String>,
    /// The directory, for `mirror`.
    pub dir: Option<PathBuf>,
    /// Where the PostgreSQL password comes from.
    pub password_file: Option<PathBuf>,
    /// The environment variable holding the PostgreSQL password.
    pub password_env: Option<String>,
    /// Where the HTTP bearer token comes from.
    pub token_file: Option<PathBuf>,
    /// The environment variable holding the HTTP bearer token.
    pub token_env: Option<String>,
    /// The PostgreSQL schema.
    pub schema: Option<String>,
    /// `disable`, `require` or `verify-full`.
    pub sslmode: Option<String>,
    /// The CA certificates (PEM) for `verify-full`.
    pub ca_file: Option<PathBuf>,
    /// Extra HTTP headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Gzip HTTP bodies.
    pub gzip: Option<bool>,
    /// `1s`, `250ms`…
    pub flush_interval: Option<String>,
    /// Records per batch.
    pub batch_records: Option<usize>,
    /// Bytes per batch, as a number.
    pub batch_bytes: Option<u64>,
    /// `30s`…
    pub timeout: Option<String>,
    /// Redact records: on by default for `postgres` and `http`, off for `mirror`.
    pub redact: Option<bool>,
    /// Pull the other machines' records from a `postgres` store into this archive.
    pub pull: Option<bool>,
    /// The longest time between two pulls: `5s`…
    pub pull_interval: Option<String>,
    /// Ship the sessions' marks, for `postgres` and `http`: off by default.
    pub marks: Option<bool>,
}

/// The sink of table `t`, with mirror paths relative to `roots`. `Err` says what is wrong.
pub(crate) fn from_table(
    t: &SinkTable,
    roots: &[(PathBuf, String)],
    redactor: &Arc<Redactor>,
) -> std::result::Result<SinkSpec, String> {
    check_name(&t.name)?;
    let target = match t.kind.as_str() {
        "postgres" => postgres_target(t)?,
        "http" => http_target(t)?,
        "mirror" => mirror_target(t, roots)?,
        other => {
            return Err(format!(
                "unknown sink type {other:?}; the types are postgres, http and mirror"
            ));
        }
    };
    check_keys(t)?;
    Ok(SinkSpec {
        name: t.name.clone(),
        target,
        flush_interval: interval(&t.flush_interval, DEFAULT_FLUSH)?,
        batch_records: t.batch_records.unwrap_or(DEFAULT_BATCH_RECORDS).max(1),
        batch_bytes: t.batch_bytes.unwrap_or(DEFAULT_BATCH_BYTES).max(1),
        timeout: interval(&t.timeout, DEFAULT_TIMEOUT)?,
        redact: t.redact.unwrap_or(t.kind != "mirror"),
        redactor: Arc::clone(redactor),
        pull: match (t.pull.unwrap_or(false), &t.pull_interval) {
            (true, every) => Some(interval(every, DEFAULT_PULL_INTERVAL)?),
            (false, Some(_)) => return Err("pull_interval: only with pull = true".into()),
            (false, None) => None,
        },
        marks: t.marks.unwrap_or(false),
    })
}

/// Refuses a key given to a type it does not apply to, naming the types it does.
fn check_keys(t: &SinkTable) -> std::result::Result<(), String> {
    let keys: [(&str, bool, &[&str]); 10] = [
        ("url", t.url.is_some(), &["postgres", "http"]),
        ("dir", t.dir.is_some(), &["mirror"]),
        (
            "password_file and password_env",
            t.password_file.is_some() || t.password_env.is_some(),
            &["postgres"],
        ),
        ("schema", t.schema.is_some(), &["postgres"]),
        (
            "sslmode and ca_file",
            t.sslmode.is_some() || t.ca_file.is_some(),
            &["postgres"],
        ),
        (
            "token_file and token_env",
            t.token_file.is_some() || t.token_env.is_some(),
            &["http"],
        ),
        ("headers", !t.headers.is_empty(), &["http"]),
        ("gzip", t.gzip.is_some(), &["http"]),
        (
            "pull and pull_interval",
            t.pull.is_some() || t.pull_interval.is_some(),
            &["postgres"],
        ),
        // A mirror holds transcripts byte for byte, and marks are in none of them.
        ("marks", t.marks.is_some(), &["postgres", "http"]),
    ];
    for (key, given, kinds) in keys {
        if given && !kinds.contains(&t.kind.as_str()) {
            return Err(format!("{key}: only for {} sinks", kinds.join(" and ")));
        }
    }
    Ok(())
}

/// Where a secret comes from: `<what>_file` (absolute) or `<what>_env`, not both.
fn secret(
    file: &Option<PathBuf>,
    env: &Option<String>,
    what: &str,
) -> std::result::Result<Option<Secret>, String> {
    match (file, env) {
        (Some(_), Some(_)) => Err(format!("give {what}_file or {what}_env, not both")),
        (Some(f), None) if f.is_absolute() => Ok(Some(Secret::File(f.clone()))),
        (Some(f), None) => Err(format!(
            "{what}_file {} must be an absolute path",
            f.display()
        )),
        (None, Some(e)) => Ok(Some(Secret::Env(e.clone()))),
        (None, None) => Ok(None),
    }
}

/// A duration such as `250ms` or `30s`, or `default`.
fn interval(text: &Option<String>, default: Duration) -> std::result::Result<Duration, String> {
    match text {
        Some(text) => humantime::parse_duration(text).map_err(|e| format!("{text:?}: {e}")),
        None => Ok(default),
    }
}

/// The sink of `--ship ARG`, named after its type and destination (`postgres-1a2b3c4d`). The
/// PostgreSQL password comes from `$PGPASSWORD`, the HTTP token from
/// `$TRANSCRIPT_SYNC_TOKEN`, when set: never from the command line.
pub(crate) fn parse_ship(
    arg: &str,
    roots: &[(PathBuf, String)],
    redactor: &Arc<Redactor>,
) -> Result<SinkSpec> {
    let fail = |message: String| Error::Sink {
        name: format!("--ship {}", mask(arg)),
        message,
    };
    let mut table = SinkTable::default();
    if arg.starts_with("postgres://") || arg.starts_with("postgresql://") {
        table.kind = "postgres".into();
        table.password_env = std::env::var_os("PGPASSWORD").map(|_| "PGPASSWORD".into());
    } else if arg.starts_with("http://") || arg.starts_with("https://") {
        table.kind = "http".into();
        table.token_env =
            std::env::var_os("TRANSCRIPT_SYNC_TOKEN").map(|_| "TRANSCRIPT_SYNC_TOKEN".into());
    } else if let Some(dir) = arg.strip_prefix("mirror:") {
        table.kind = "mirror".into();
        table.dir = Some(crate::capture::harness::absolute(Path::new(dir)));
    } else {
        return Err(fail(
            "expected postgres://…, http(s)://… or mirror:DIR".into(),
        ));
    }
    let pg_password = table.kind == "postgres"
        && (arg.parse::<::postgres::Config>()).is_ok_and(|c| c.get_password().is_some());
    if table.kind != "mirror" {
        if password_in(arg) || pg_password {
            return Err(fail(
                "the URL holds a password, which any user can read in `ps`; set PGPASSWORD (or TRANSCRIPT_SYNC_TOKEN), or use a [[sink]] table with password_file".into(),
            ));
        }
        table.url = Some(arg.to_owned());
    }
    // Named after the destination itself: another destination of the same type is another
    // sink, with a cursor of its own (it gets every record, not what another one lacked).
    let target = table.url.clone().unwrap_or_else(|| {
        let dir = table.dir.as_deref().unwrap_or(Path::new(""));
        dir.display().to_string()
    });
    let hash = xxhash_rust::xxh3::xxh3_64(target.as_bytes());
    table.name = format!("{}-{:08x}", table.kind, hash as u32);
    from_table(&table, roots, redactor).map_err(fail)
}

/// Names must be usable in a consumer name and a log line.
fn check_name(name: &str) -> std::result::Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    match ok {
        true => Ok(()),
        false => Err(format!(
            "sink name {name:?} must be 1 to 64 letters, digits, '-', '_' or '.'"
        )),
    }
}

fn postgres_target(t: &SinkTable) -> std::result::Result<Target, String> {
    let url = t.url.as_deref().ok_or("a postgres sink needs url")?;
    let config: ::postgres::Config = url.parse().map_err(|e| format!("url {}: {e}", mask(url)))?;
    if config.get_password().is_some() || password_in(url) {
        return Err(format!(
            "url {} holds a password; put it in password_file or password_env",
            mask(url)
        ));
    }
    let sslmode = sslmode(t, &config)?;
    let schema = t.schema.clone().unwrap_or_else(|| DEFAULT_SCHEMA.into());
    let plain = schema
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if schema.is_empty() || !plain || schema.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!(
            "schema {schema:?} must be lowercase letters, digits and '_', not starting with a digit"
        ));
    }
    Ok(Target::Postgres {
        url: url.to_owned(),
        password: secret(&t.password_file, &t.password_env, "password")?,
        schema,
        sslmode,
        ca_file: t.ca_file.clone(),
    })
}

/// The table's `sslmode` (else the URL's `sslmode=require`, else `disable`), checked with
/// `ca_file`.
fn sslmode(t: &SinkTable, config: &::postgres::Config) -> std::result::Result<SslMode, String> {
    let from_url = match config.get_ssl_mode() {
        ::postgres::config::SslMode::Require => "require",
        _ => "disable",
    };
    let sslmode = match t.sslmode.as_deref().unwrap_or(from_url) {
        "disable" => SslMode::Disable,
        "require" => SslMode::Require,
        "verify-full" => SslMode::VerifyFull,
        other => {
            return Err(format!(
                "sslmode {other:?}: expected disable, require or verify-full"
            ));
        }
    };
    match &t.ca_file {
        Some(_) if sslmode != SslMode::VerifyFull => {
            Err("ca_file applies to sslmode = \"verify-full\" only".into())
        }
        Some(f) if !f.is_absolute() => {
            Err(format!("ca_file {} must be an absolute path", f.display()))
        }
        _ => Ok(sslmode),
    }
}

fn http_target(t: &SinkTable) -> std::result::Result<Target, String> {
    let url = t.url.as_deref().ok_or("an http sink needs url")?;
    Ok(Target::Http {
        url: http_url(url)?,
        token: secret(&t.token_file, &t.token_env, "token")?,
        headers: t.headers.clone(),
        gzip: t.gzip.unwrap_or(true),
    })
}

fn http_url(url: &str) -> std::result::Result<String, String> {
    if userinfo(url).is_some() {
        return Err(format!(
            "url {} holds credentials before its host; put the token in token_file or token_env",
            mask(url)
        ));
    }
    let uri: ureq::http::Uri = url.parse().map_err(|e| format!("url {url}: {e}"))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.host().is_some() => Ok(url.to_owned()),
        _ => Err(format!("url {url} must be http://host/… or https://host/…")),
    }
}

fn mirror_target(
    t: &SinkTable,
    roots: &[(PathBuf, String)],
) -> std::result::Result<Target, String> {
    let dir = t.dir.as_ref().ok_or("a mirror sink needs dir")?;
    if !dir.is_absolute() {
        return Err(format!("dir {} must be an absolute path", dir.display()));
    }
    let mut roots = roots.to_vec();
    roots.sort_by_key(|(p, _)| std::cmp::Reverse(p.as_os_str().len()));
    Ok(Target::Mirror {
        dir: dir.to_owned(),
        roots,
    })
}

/// True when `url` has a password in its user info (`scheme://user:password@host`).
fn password_in(url: &str) -> bool {
    userinfo(url).is_some_and(|u| u.contains(':'))
}

/// The user info of `url`, if any.
fn userinfo(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    authority.rsplit_once('@').map(|(user, _)| user)
}

/// `url` as it may be shown: the password of its user info and every query value (where
/// `?password=`, `?api_key=` and the like go) replaced by `***`; in libpq's `key=value`
/// form, the value of `password`.
pub(super) fn mask(url: &str) -> String {
    if !url.contains("://") {
        return (url.split_whitespace())
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" ");
    }
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let http = url.starts_with("http://") || url.starts_with("https://");
    let mut shown = match userinfo(base) {
        // In an HTTP URL, what comes before the host is a credential, user name or not.
        Some(user) if http => base.replacen(user, "***", 1),
        Some(user) if user.contains(':') => {
            let name = user.split(':').next().unwrap_or_default();
            base.replacen(user, &format!("{name}:***"), 1)
        }
        _ => base.to_owned(),
    };
    if let Some(query) = query {
        let params: Vec<String> = (query.split('&'))
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) => format!("{k}=***"),
                None => kv.to_owned(),
            })
            .collect();
        shown.push('?');
        shown.push_str(&params.join("&"));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin() -> Arc<Redactor> {
        Arc::new(Redactor::builtin())
    }

    #[test]
    fn a_password_in_a_url_is_refused_and_masked() {
        let err = parse_ship("postgres://me:hunter2@db.example/t", &[], &builtin()).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("me:***@db.example"), "{text}");
        assert!(text.contains("`ps`"), "{text}");
        let err = parse_ship("https://u:tok@collector.example/in", &[], &builtin()).unwrap_err();
        assert!(!err.to_string().contains("tok@"), "{err}");
    }

    #[test]
    fn secrets_in_query_strings_and_key_value_forms_are_masked() {
        assert_eq!(
            mask("postgres://me@h/db?password=hunter2&sslmode=require"),
            "postgres://me@h/db?password=***&sslmode=***"
        );
        assert_eq!(
            mask("host=h password=hunter2 user=me"),
            "host=h password=*** user=me"
        );
        let err = parse_ship("postgres://me@h/db?password=hunter2", &[], &builtin()).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let err = parse_ship("https://tok123@collector.example/in", &[], &builtin()).unwrap_err();
        assert!(!err.to_string().contains("tok123"), "{err}");
        let spec = parse_ship("https://collector.example/in?api_key=k3y", &[], &builtin()).unwrap();
        assert!(!format!("{spec:?}").contains("k3y"));
        assert!(!spec.target.display().contains("k3y"));
    }

    #[test]
    fn ship_arguments_name_their_sinks_by_type() {
        let s = parse_ship("postgres://me@127.0.0.1:5432/team", &[], &builtin()).unwrap();
        assert!(
            s.name.starts_with("postgres-") && s.name.len() == 17,
            "{}",
            s.name
        );
        let other = parse_ship("postgres://me@127.0.0.1:5432/other", &[], &builtin()).unwrap();
        assert_ne!(other.name, s.name, "another destination, another cursor");
        assert!(
            matches!(s.target, Target::Postgres { ref schema, .. } if schema == DEFAULT_SCHEMA)
        );
        let s = parse_ship("http://127.0.0.1:9/in", &[], &builtin()).unwrap();
        assert!(matches!(s.target, Target::Http { gzip: true, .. }));
        let s = parse_ship("mirror:/tmp/m", &[], &builtin()).unwrap();
        assert_eq!(s.target.display(), "/tmp/m");
        assert!(parse_ship("ftp://x", &[], &builtin()).is_err());
    }

    #[test]
    fn tables_are_checked_key_by_key() {
        let t = |kind: &str| SinkTable {
            name: "team".into(),
            kind: kind.into(),
            ..SinkTable::default()
        };
        assert!(
            from_table(&t("kafka"), &[], &builtin())
                .unwrap_err()
                .contains("unknown sink type")
        );
        assert!(
            from_table(&t("http"), &[], &builtin())
                .unwrap_err()
                .contains("needs url")
        );
        let mut m = t("mirror");
        m.dir = Some("relative".into());
        assert!(
            from_table(&m, &[], &builtin())
                .unwrap_err()
                .contains("absolute")
        );
        let mut p = t("postgres");
        p.url = Some("postgres://me@h/db".into());
        p.token_env = Some("T".into());
        assert!(
            from_table(&p, &[], &builtin())
                .unwrap_err()
                .contains("token_file and token_env: only for http sinks")
        );
        let mut m = t("mirror");
        (m.dir, m.marks) = (Some("/m".into()), Some(true));
        assert_eq!(
            from_table(&m, &[], &builtin()).unwrap_err(),
            "marks: only for postgres and http sinks"
        );
        let mut bad = t("mirror");
        bad.name = "a b".into();
        assert!(
            from_table(&bad, &[], &builtin())
                .unwrap_err()
                .contains("sink name")
        );
    }
}
