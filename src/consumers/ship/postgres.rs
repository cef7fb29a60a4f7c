//! The PostgreSQL destination: a schema of its own (created and migrated here), records
//! inserted idempotently on their key (machine, source, generation, offset) by `COPY` into a
//! staging table and `INSERT … ON CONFLICT DO NOTHING`, one transaction per batch.

use super::{Destination, Failure, Machine, SinkSpec, Target};
use crate::archive::marks::MarksNow;
use crate::archive::{Archive, ExportRow};
use crate::consumers::redact::Redactor;
use crate::consumers::sessions::{
    self,
    query::{self, SessionExport},
};
use crate::consumers::ship::spec::{Secret, SslMode};
use crate::error::Result as ArchiveResult;
use crate::error::error_chain;
use postgres::config::SslMode as PgSslMode;
use postgres::{Client, NoTls};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The schema's migrations, in order; `{schema}` is replaced by the schema's name.
const MIGRATIONS: &[&str] = &[
    include_str!("postgres_v1.sql"),
    include_str!("postgres_v2.sql"),
    include_str!("postgres_v3.sql"),
    include_str!("postgres_v4.sql"),
];

/// One session's marks, as they are now.
const UPSERT_MARKS: &str = "INSERT INTO {schema}.marks (machine, harness, session, starred,
         tags, note, updated_at)
     VALUES ($1::text::uuid, $2, $3, $4, $5, $6, to_timestamp($7::bigint / 1000.0))
     ON CONFLICT (machine, harness, session) DO UPDATE SET
         starred = EXCLUDED.starred, tags = EXCLUDED.tags, note = EXCLUDED.note,
         updated_at = EXCLUDED.updated_at";

/// One session's row, as the machine's index has it now.
const UPSERT_SESSION: &str = "INSERT INTO {schema}.sessions (machine, harness, session, parent,
         project, branch, title, started_at, last_at, user_messages, assistant_messages,
         compactions, models, git_remote, updated_at)
     VALUES ($1::text::uuid, $2, $3, $4, $5, $6, $7,
         to_timestamp($8::bigint / 1000.0), to_timestamp($9::bigint / 1000.0),
         $10::bigint::integer, $11::bigint::integer, $12::bigint::integer, $13, $14, now())
     ON CONFLICT (machine, harness, session) DO UPDATE SET
         parent = EXCLUDED.parent, project = EXCLUDED.project, branch = EXCLUDED.branch,
         title = EXCLUDED.title, started_at = EXCLUDED.started_at, last_at = EXCLUDED.last_at,
         user_messages = EXCLUDED.user_messages, assistant_messages = EXCLUDED.assistant_messages,
         compactions = EXCLUDED.compactions, models = EXCLUDED.models,
         git_remote = EXCLUDED.git_remote, updated_at = now()";

/// Which session a source's records belong to.
const UPSERT_SESSION_SOURCE: &str = "INSERT INTO {schema}.session_sources
         (machine, source, harness, session)
     VALUES ($1::text::uuid, $2, $3, $4)
     ON CONFLICT (machine, source) DO UPDATE
     SET harness = EXCLUDED.harness, session = EXCLUDED.session";

/// The key under which the sink keeps how far it shipped the session index's rows.
const SESSIONS_SEQ: &str = "sessions_seq";

/// A PostgreSQL sink's connection, opened (and the schema migrated) at the first delivery and
/// again after any failure.
pub(super) struct Postgres {
    url: String,
    password: Option<Secret>,
    sslmode: SslMode,
    ca_file: Option<PathBuf>,
    schema: String,
    timeout: Duration,
    machine: Machine,
    client: Option<Client>,
    /// The sink's name, for log lines.
    name: String,
    /// The archive, for the session index's rows.
    db: PathBuf,
    index: Option<Archive>,
    /// The sessions of records up to this seq are shipped as the index had them then.
    sessions_seq: i64,
    sessions_moved: bool,
    /// Whether the sessions' text is redacted (titles are prompts); records come redacted.
    redact: bool,
    /// What finds secrets, in that text and in what is logged here.
    redactor: Arc<Redactor>,
}

impl Postgres {
    /// The destination of `spec` (a postgres target) over the archive at `db`, not yet
    /// connected.
    pub(super) fn new(spec: &SinkSpec, machine: &Machine, db: &Path) -> ArchiveResult<Postgres> {
        let Target::Postgres {
            url,
            password,
            schema,
            sslmode,
            ca_file,
        } = &spec.target
        else {
            unreachable!("a postgres destination is made from a postgres target")
        };
        let index = Archive::open(db)?;
        sessions::store::attach(&index)?;
        let mut sessions_seq = 0;
        index.sink_state(&spec.name, |key, value| {
            if key == SESSIONS_SEQ {
                sessions_seq = value.parse().unwrap_or(0);
            }
        })?;
        Ok(Postgres {
            url: url.clone(),
            password: password.clone(),
            sslmode: *sslmode,
            ca_file: ca_file.clone(),
            schema: schema.clone(),
            timeout: spec.timeout,
            machine: machine.clone(),
            client: None,
            name: spec.name.clone(),
            db: db.to_owned(),
            index: Some(index),
            sessions_seq,
            sessions_moved: false,
            redact: spec.redact,
            redactor: Arc::clone(&spec.redactor),
        })
    }

    /// The open connection, or a new one.
    fn client(&mut self) -> Result<Client, Failure> {
        match self.client.take() {
            Some(c) if !c.is_closed() => Ok(c),
            _ => self.connect(),
        }
    }

    /// The index's rows of the sessions holding records shipped up to `shipped`, as far as
    /// the index has them, since the last time; one transaction.
    fn ship_sessions(&mut self, shipped: i64) -> Result<bool, Failure> {
        let archive_failure = |e: crate::error::Error| Failure::transient(error_chain(&e));
        let index = match self.index.take() {
            Some(index) => index,
            None => {
                let archive = Archive::open(&self.db).map_err(archive_failure)?;
                sessions::store::attach(&archive).map_err(archive_failure)?;
                archive
            }
        };
        let mut index = index;
        let indexed = sessions::store::done(&self.db).map_err(archive_failure)?;
        let through = indexed.min(shipped);
        if through <= self.sessions_seq {
            self.index = Some(index);
            return Ok(false);
        }
        let touched = query::touched_sessions(&mut index, self.sessions_seq, through);
        self.index = Some(index);
        let mut rows = touched.map_err(archive_failure)?;
        // PostgreSQL's text takes no NUL; a title or prompt may hold one.
        for row in &mut rows {
            row.strip_nul();
            if self.redact {
                row.redact(&self.redactor);
            }
        }
        let mut client = self.client()?;
        let upserted = self.upsert_sessions(&mut client, &rows);
        let failure = upserted.as_ref().err().map(|e| self.failure(e));
        if !matches!(failure, Some(Failure::Transient { .. })) {
            self.client = Some(client);
        }
        match failure {
            Some(f @ Failure::Transient { .. }) => return Err(f),
            // Refused for good: these sessions' rows stay behind (until they change), the
            // others go on.
            // Logged here, not through the destination's caller: its answer may quote a row.
            Some(Failure::Refused { message }) => log::warn!(
                "sink {}: the rows of {} sessions were refused: {}; they are sent again when their sessions change",
                self.name,
                rows.len(),
                self.redactor.redact_text(&message)
            ),
            None => log::debug!("PostgreSQL {}: {} sessions updated", self.url, rows.len()),
        }
        self.sessions_seq = through;
        self.sessions_moved = true;
        Ok(true)
    }

    fn upsert_sessions(
        &self,
        client: &mut Client,
        rows: &[SessionExport],
    ) -> Result<(), postgres::Error> {
        let mut tx = client.transaction()?;
        let session = tx.prepare(&self.sql(UPSERT_SESSION))?;
        let source = tx.prepare(&self.sql(UPSERT_SESSION_SOURCE))?;
        let machine = &self.machine.id;
        for r in rows {
            tx.execute(
                &session,
                &[
                    machine,
                    &r.harness,
                    &r.session,
                    &r.parent,
                    &r.project,
                    &r.branch,
                    &r.title,
                    &r.started_ms,
                    &r.last_ms,
                    &r.user_messages,
                    &r.assistant_messages,
                    &r.compactions,
                    &r.models,
                    &r.git_remote,
                ],
            )?;
            for id in &r.sources {
                tx.execute(&source, &[machine, id, &r.harness, &r.session])?;
            }
        }
        // Machines that pull take the new rows (a git remote) at once.
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[&notify_channel(&self.schema), machine],
        )?;
        tx.commit()
    }

    fn upsert_marks(&self, client: &mut Client, marks: &[MarksNow]) -> Result<(), postgres::Error> {
        let mut tx = client.transaction()?;
        let upsert = tx.prepare(&self.sql(UPSERT_MARKS))?;
        for m in marks {
            // PostgreSQL's text takes no NUL; a note may hold one.
            let note = m.marks.note.as_ref().map(|n| n.replace('\0', ""));
            tx.execute(
                &upsert,
                &[
                    &self.machine.id,
                    &m.key.harness,
                    &m.key.session,
                    &m.marks.starred,
                    &m.marks.tags,
                    &note,
                    &m.changed_ms,
                ],
            )?;
        }
        tx.commit()
    }

    pub(super) fn connect(&mut self) -> Result<Client, Failure> {
        let mut config: postgres::Config = (self.url.parse())
            .map_err(|e| Failure::transient(format!("PostgreSQL url {}: {e}", self.url)))?;
        if let Some(secret) = &self.password {
            config.password(secret.read().map_err(Failure::transient)?);
        }
        let ms = self.timeout.as_millis();
        // statement_timeout bounds the server's side; a connection that silently died is
        // found by TCP's own timeout and keepalives instead of hours of retransmits. The
        // server's notices (a schema that exists already, at each connection's migration
        // check) are not logged: only its warnings and errors are sent.
        config
            .connect_timeout(self.timeout)
            .tcp_user_timeout(self.timeout)
            .keepalives_idle(self.timeout)
            .application_name("transcript-sync")
            .options(&format!(
                "-c statement_timeout={ms} -c lock_timeout={ms} -c client_min_messages=warning"
            ));
        let connected = match self.sslmode {
            SslMode::Disable => config.ssl_mode(PgSslMode::Disable).connect(NoTls),
            SslMode::Require | SslMode::VerifyFull => {
                let tls = self.tls().map_err(Failure::transient)?;
                config.ssl_mode(PgSslMode::Require).connect(tls)
            }
        };
        let mut client = connected.map_err(|e| self.failure(&e))?;
        if let Some(version) = self.migrate(&mut client).map_err(|e| self.failure(&e))? {
            return Err(Failure::transient(format!(
                "PostgreSQL at {}: schema {} is at version {version}, newer than this build writes ({}); upgrade transcript-sync",
                self.url,
                self.schema,
                MIGRATIONS.len()
            )));
        }
        let registered = client.execute(
            &self.sql(
                "INSERT INTO {schema}.machines (machine, host) VALUES ($1::text::uuid, $2)
                 ON CONFLICT (machine) DO UPDATE SET host = EXCLUDED.host, last_seen = now()",
            ),
            &[&self.machine.id, &self.machine.host],
        );
        registered.map_err(|e| self.failure(&e))?;
        client
            .batch_execute(
                "CREATE TEMP TABLE ts_staging (
                    source bigint, generation bigint, \"offset\" bigint, seq bigint,
                    harness text, path text, record text, json_ok boolean
                 ) ON COMMIT DELETE ROWS",
            )
            .map_err(|e| self.failure(&e))?;
        Ok(client)
    }

    /// Creates or migrates the schema, under a lock that other machines' sinks take too.
    /// `Ok(Some(version))` when the schema is newer than this build writes.
    fn migrate(&self, client: &mut Client) -> Result<Option<i32>, postgres::Error> {
        let mut tx = client.transaction()?;
        // Adding a column to a large table rewrites it: no statement timeout for the schema's
        // own changes (the connection's timeout bounds a delivery, not an upgrade).
        tx.batch_execute("SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0")?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1))",
            &[&self.schema],
        )?;
        tx.batch_execute(&self.sql(
            "CREATE SCHEMA IF NOT EXISTS {schema};
             CREATE TABLE IF NOT EXISTS {schema}.schema_version (version integer NOT NULL);",
        ))?;
        let query = self.sql("SELECT coalesce(max(version), 0) FROM {schema}.schema_version");
        let version: i32 = tx.query_one(&query, &[])?.get(0);
        if version as usize > MIGRATIONS.len() {
            // Written by a newer transcript-sync on another machine: not ours to write into.
            return Ok(Some(version));
        }
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.batch_execute(&self.sql(sql))?;
            let applied = i as i32 + 1;
            let insert = self.sql("INSERT INTO {schema}.schema_version (version) VALUES ($1)");
            tx.execute(&insert, &[&applied])?;
            log::info!(
                "PostgreSQL {}: schema {} at version {applied}",
                self.url,
                self.schema
            );
        }
        tx.commit().map(|()| None)
    }

    /// The TLS connector of `sslmode`: `verify-full` checks the chain against `ca_file` (or
    /// the Mozilla roots compiled in) and the host name; `require` checks nothing.
    fn tls(&self) -> Result<MakeRustlsConnect, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?;
        let config = match self.sslmode {
            SslMode::Require => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth(),
            _ => builder
                .with_root_certificates(self.roots()?)
                .with_no_client_auth(),
        };
        Ok(MakeRustlsConnect::new(config))
    }

    /// `ca_file`'s certificates, else the Mozilla roots.
    fn roots(&self) -> Result<RootCertStore, String> {
        let Some(path) = &self.ca_file else {
            return Ok(RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            });
        };
        let fail = |e: &dyn std::fmt::Display| format!("ca_file {}: {e}", path.display());
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(path).map_err(|e| fail(&e))? {
            roots
                .add(cert.map_err(|e| fail(&e))?)
                .map_err(|e| fail(&e))?;
        }
        if roots.is_empty() {
            return Err(fail(&"no certificate in it"));
        }
        Ok(roots)
    }

    pub(super) fn sql(&self, text: &str) -> String {
        text.replace("{schema}", &self.schema)
    }

    /// Inserts `batch` in one transaction. A failed write of the `COPY` data is the
    /// connection's failure.
    fn insert(&self, client: &mut Client, batch: &[ExportRow]) -> Result<(), Failure> {
        let mut tx = client.transaction().map_err(|e| self.failure(&e))?;
        let mut copy = tx
            .copy_in(
                "COPY ts_staging (source, generation, \"offset\", seq, harness, path, record, json_ok) FROM STDIN",
            )
            .map_err(|e| self.failure(&e))?;
        let mut data = Vec::new();
        for row in batch {
            copy_line(&mut data, row);
        }
        copy.write_all(&data).map_err(|e| {
            Failure::transient(format!("PostgreSQL at {} unreachable: {e}", self.url))
        })?;
        copy.finish().map_err(|e| self.failure(&e))?;
        self.insert_staged(tx).map_err(|e| self.failure(&e))
    }

    fn insert_staged(&self, mut tx: postgres::Transaction<'_>) -> Result<(), postgres::Error> {
        let machine = &self.machine.id;
        // One machine's record transactions commit one at a time (a daemon's sink, `sink
        // retry`, a sink renamed by a reload), so its records become visible in `pull_id`
        // order: a puller that has a machine's records up to an id has every one before it.
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1))",
            &[&format!("{}.records:{machine}", self.schema)],
        )?;
        tx.execute(
            &self.sql(
                "INSERT INTO {schema}.sources (machine, source, harness, path, generation)
                 SELECT DISTINCT ON (source) $1::text::uuid, source, harness, path, generation
                 FROM ts_staging ORDER BY source, seq DESC
                 ON CONFLICT (machine, source) DO UPDATE
                 SET harness = EXCLUDED.harness, path = EXCLUDED.path,
                     generation = EXCLUDED.generation
                 WHERE sources.generation <= EXCLUDED.generation",
            ),
            &[machine],
        )?;
        tx.execute(
            &self.sql(
                "INSERT INTO {schema}.records
                 (machine, source, generation, \"offset\", seq, harness, record, doc)
                 SELECT $1::text::uuid, source, generation, \"offset\", seq, harness, record,
                        CASE WHEN json_ok THEN record::jsonb END
                 FROM ts_staging
                 ON CONFLICT DO NOTHING",
            ),
            &[machine],
        )?;
        // Delivered at the commit: machines that pull are woken at once.
        tx.execute(
            "SELECT pg_notify($1, $2)",
            &[&notify_channel(&self.schema), machine],
        )?;
        tx.commit()
    }

    /// A failure as a sink sees it: what PostgreSQL said, and whether it may pass.
    pub(super) fn failure(&self, e: &postgres::Error) -> Failure {
        let message = match e.as_db_error() {
            Some(db) => format!(
                "PostgreSQL at {}: {} ({}){}",
                self.url,
                db.message(),
                db.code().code(),
                db.detail().map(|d| format!(": {d}")).unwrap_or_default()
            ),
            None => format!("PostgreSQL at {} unreachable: {}", self.url, error_chain(e)),
        };
        let code = e.code().map(|c| c.code());
        match code {
            // A foreign key to a machines row someone deleted: the next connection makes it
            // again, so this may pass.
            Some("23503") => Failure::transient(message),
            // Data exceptions, integrity violations, a program limit (a record nested deeper
            // than the server's stack): this batch will never go in as it is.
            Some(c) if ["22", "23", "54"].contains(&&c[..2]) => Failure::Refused { message },
            _ => Failure::transient(message),
        }
    }
}

impl Destination for Postgres {
    fn deliver(&mut self, batch: &[ExportRow]) -> Result<(), Failure> {
        let mut client = self.client()?;
        match self.insert(&mut client, batch) {
            Ok(()) => {
                self.client = Some(client);
                Ok(())
            }
            Err(failure) => {
                // The transaction rolled back; after a refusal the connection is still good.
                if matches!(failure, Failure::Refused { .. }) {
                    self.client = Some(client);
                }
                Err(failure)
            }
        }
    }

    fn deliver_marks(&mut self, marks: &[MarksNow]) -> Result<(), Failure> {
        let mut client = self.client()?;
        let failure =
            (self.upsert_marks(&mut client, marks).as_ref().err()).map(|e| self.failure(e));
        // After a refusal the transaction rolled back, and the connection is still good.
        if !matches!(failure, Some(Failure::Transient { .. })) {
            self.client = Some(client);
        }
        failure.map_or(Ok(()), Err)
    }

    fn idle(&mut self, shipped: i64) -> Result<bool, Failure> {
        self.ship_sessions(shipped)
    }

    fn take_state(&mut self) -> Vec<(String, String)> {
        match std::mem::take(&mut self.sessions_moved) {
            true => vec![(SESSIONS_SEQ.to_owned(), self.sessions_seq.to_string())],
            false => Vec::new(),
        }
    }

    fn kind(&self) -> &'static str {
        "PostgreSQL unreachable"
    }
}

/// The channel on which the store's records are announced as they commit: named after the
/// schema, so that two stores in one database do not wake each other's pullers; a hash of a
/// long name, since a channel's name is an identifier (63 bytes at most).
pub(super) fn notify_channel(schema: &str) -> String {
    match schema.len() <= 40 {
        true => format!("{schema}_records"),
        false => format!(
            "transcript_sync_{:016x}_records",
            xxhash_rust::xxh3::xxh3_64(schema.as_bytes())
        ),
    }
}

/// `sslmode = "require"`: any certificate, as libpq's `require` without a root file. The
/// handshake's signatures are still checked, so the channel is encrypted to whoever holds the
/// certificate's key; who that is goes unchecked.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One line of `COPY … FROM STDIN` text format for `row`.
fn copy_line(out: &mut Vec<u8>, row: &ExportRow) {
    use std::io::Write as _;
    let _ = write!(
        out,
        "{}\t{}\t{}\t{}\t",
        row.source, row.generation, row.offset, row.seq
    );
    copy_text(out, row.harness.as_bytes());
    out.push(b'\t');
    copy_text(out, row.path.to_string_lossy().as_bytes());
    out.push(b'\t');
    copy_text(out, &row.record);
    out.extend_from_slice(if jsonb_accepts(&row.record) {
        b"\tt\n"
    } else {
        b"\tf\n"
    });
}

/// Appends `text` to `out` as one field of PostgreSQL's `COPY … FROM` text format (tab
/// delimiter): backslash, tab, newline and carriage return become `\\`, `\t`, `\n` and `\r`;
/// every other byte is appended as it is. `COPY` reads the field back as `text` byte for byte,
/// never as NULL (`\N`) nor as more than one field; bytes the database's encoding refuses are
/// still refused. The PostgreSQL sink writes every text column of its staging rows through it.
pub fn copy_text(out: &mut Vec<u8>, text: &[u8]) {
    for &b in text {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

/// False for a record PostgreSQL's `jsonb` refuses although it is valid JSON: one with a
/// `\u0000` escape or a lone surrogate escape. Its text is kept and its `doc` left null.
fn jsonb_accepts(record: &[u8]) -> bool {
    let mut i = 0;
    let mut pending_high = false;
    while let Some(at) = memchr::memchr(b'\\', &record[i..]) {
        let at = i + at;
        let Some(&kind) = record.get(at + 1) else {
            break;
        };
        if kind != b'u' {
            if pending_high {
                return false;
            }
            i = at + 2;
            continue;
        }
        let hex = record
            .get(at + 2..at + 6)
            .and_then(|h| std::str::from_utf8(h).ok());
        let Some(unit) = hex.and_then(|h| u16::from_str_radix(h, 16).ok()) else {
            return false;
        };
        let low = (0xDC00..=0xDFFF).contains(&unit);
        if unit == 0 || (low && !pending_high) || (pending_high && !low) {
            return false;
        }
        pending_high = (0xD800..=0xDBFF).contains(&unit);
        // A high surrogate must be followed at once by its low half.
        if pending_high && record.get(at + 6) != Some(&b'\\') {
            return false;
        }
        i = at + 6;
    }
    !pending_high
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonb_refusals_are_told_apart() {
        assert!(jsonb_accepts(br#"{"a":"plain \" \\ \n"}"#));
        assert!(jsonb_accepts(br#"{"e":"\ud83d\ude00 \u00e9"}"#));
        assert!(!jsonb_accepts(br#"{"a":"nul \u0000 here"}"#));
        assert!(!jsonb_accepts(br#"{"a":"lone \ud83d here"}"#));
        assert!(!jsonb_accepts(br#"{"a":"lone \ude00 here"}"#));
        assert!(!jsonb_accepts(br#"{"a":"\ud83d\u0041"}"#));
    }

    #[test]
    fn a_notification_channel_is_a_name_postgresql_takes() {
        assert_eq!(notify_channel("transcript_sync"), "transcript_sync_records");
        let long = "t".repeat(63);
        let channel = notify_channel(&long);
        assert!(channel.len() <= 63, "{channel}");
        assert_ne!(channel, notify_channel(&"u".repeat(63)));
    }

    #[test]
    fn copy_text_escapes_what_the_format_reserves() {
        let mut out = Vec::new();
        copy_text(&mut out, b"a\tb\\c\nd\re");
        assert_eq!(out, b"a\\tb\\\\c\\nd\\re");
    }
}
