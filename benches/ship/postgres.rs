//! Shipping to PostgreSQL: `run --once --ship postgres://…` over the archived corpus
//! (redacting, as every PostgreSQL sink does unless told not to), the same from a `[[sink]]`
//! table with `redact = false`, and `psql \copy` of the same rows into the same table, in
//! turns on one cluster, the table emptied and a checkpoint taken before each run.

use crate::{Archived, Ctx, forget_sinks, list};
use rusqlite::{Connection, OpenFlags};
use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use testkit::cpu::children_cpu_secs;
use testkit::postgres::{self, Cluster};
use testkit::stats::median;
use transcript_sync::copy_text;

/// The table the sink creates and every subject loads.
const TABLE: &str = "transcript_sync.records";

/// What is timed.
#[derive(Clone, Copy)]
enum Subject {
    /// `run --once --ship postgres://…`: the sink, batch after batch, redacting.
    Sink,
    /// The sink from a `[[sink]]` table with `redact = false`: records as archived.
    SinkUnredacted,
    /// One `\copy` into the table, `doc` given as the record's text (parsed as jsonb by COPY).
    CopyDirect,
    /// What the sink's SQL does, in one batch: `\copy` into a temporary staging table, then
    /// `INSERT … SELECT … record::jsonb … ON CONFLICT DO NOTHING`, in one transaction.
    CopyStaged,
}

const SUBJECTS: [Subject; 4] = [
    Subject::Sink,
    Subject::SinkUnredacted,
    Subject::CopyDirect,
    Subject::CopyStaged,
];

impl Subject {
    fn label(self) -> &'static str {
        match self {
            Subject::Sink => "`run --once --ship postgres://…` (sink, redacting)",
            Subject::SinkUnredacted => "`[[sink]]` with `redact = false` (sink)",
            Subject::CopyDirect => "`psql \\copy` into the table (baseline)",
            Subject::CopyStaged => "`psql \\copy` into staging + `INSERT … SELECT` (baseline)",
        }
    }
}

/// One timed run: wall seconds, the client's CPU seconds, and the server's (every PostgreSQL
/// process: the subject's backend, and the checkpointer, WAL writer and autovacuum).
#[derive(Clone, Copy)]
struct Sample {
    secs: f64,
    client_cpu: f64,
    server_cpu: f64,
}

pub fn run(ctx: &Ctx, a: &Archived, md: &mut String) {
    let cluster = Cluster::start_for_benchmark();
    println!("postgres: {} on port {}", cluster.version(), cluster.port);
    let scripts = Scripts::write(ctx, a);
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); SUBJECTS.len()];
    let mut table_bytes = 0;
    for round in 0..ctx.runs {
        for (i, subject) in SUBJECTS.into_iter().enumerate() {
            empty_table(&cluster);
            let sample = time_subject(ctx, a, &cluster, &scripts, subject);
            let docs = check_rows(&cluster, a);
            println!(
                "  round {}: {:<60} {:>7.2} s, {} of {} docs",
                round + 1,
                subject.label(),
                sample.secs,
                docs,
                a.records
            );
            samples[i].push(sample);
            table_bytes = table_size(&cluster);
        }
    }
    report(md, a, &cluster, &samples, table_bytes);
    let _ = fs::remove_dir_all(&scripts.dir);
}

fn time_subject(
    ctx: &Ctx,
    a: &Archived,
    cluster: &Cluster,
    scripts: &Scripts,
    subject: Subject,
) -> Sample {
    let server_before = cluster.server_cpu();
    let (secs, client_cpu) = match subject {
        Subject::Sink | Subject::SinkUnredacted => ship(ctx, a, cluster, subject),
        Subject::CopyDirect => psql_run(cluster, &scripts.direct),
        Subject::CopyStaged => psql_run(cluster, &scripts.staged),
    };
    Sample {
        secs,
        client_cpu,
        server_cpu: (cluster.server_cpu() - server_before).as_secs_f64(),
    }
}

/// `run --once` shipping every record to the cluster: `--ship URL`, or for
/// [`Subject::SinkUnredacted`] a `[[sink]]` table to the same URL with `redact = false`.
fn ship(ctx: &Ctx, a: &Archived, cluster: &Cluster, subject: Subject) -> (f64, f64) {
    forget_sinks(&a.db);
    let mut cmd = ctx.run_once(&a.db, &a.corpus);
    cmd.env("PGPASSWORD", postgres::PASSWORD);
    match subject {
        Subject::SinkUnredacted => cmd.arg("--config").arg(unredacted_config(ctx, cluster)),
        _ => cmd.args(["--ship", &cluster.url()]),
    };
    let t = crate::time_run(&mut cmd, subject.label());
    (t.secs, t.cpu_secs)
}

/// A config file whose one sink ships to the cluster with `redact = false`.
fn unredacted_config(ctx: &Ctx, cluster: &Cluster) -> PathBuf {
    let path = ctx.scratch.join("pg-unredacted.toml");
    let table = format!(
        "[[sink]]\nname = \"unredacted\"\ntype = \"postgres\"\nurl = \"{}\"\n\
         password_env = \"PGPASSWORD\"\nredact = false\n",
        cluster.url()
    );
    fs::write(&path, table).expect("writing a config.toml");
    path
}

fn psql_run(cluster: &Cluster, script: &Path) -> (f64, f64) {
    let before = children_cpu_secs();
    let took = cluster.time_script(script).as_secs_f64();
    (took, children_cpu_secs() - before)
}

/// Truncates the table (once the sink has created it) and takes a checkpoint, so that no
/// run inherits the previous one's rows or dirty pages.
fn empty_table(cluster: &Cluster) {
    let exists = cluster.psql(&format!("SELECT to_regclass('{TABLE}') IS NOT NULL"));
    if exists == ["t"] {
        cluster.psql(&format!("TRUNCATE {TABLE}"));
    }
    cluster.psql("CHECKPOINT");
}

/// Checks that the table holds one row per archived record; how many have a `doc`.
fn check_rows(cluster: &Cluster, a: &Archived) -> u64 {
    let row = cluster.psql(&format!("SELECT count(*), count(doc) FROM {TABLE}"));
    let (rows, docs) = row[0].split_once('|').expect("two columns");
    assert_eq!(rows, a.records.to_string(), "rows in {TABLE}");
    docs.parse().expect("a count")
}

fn table_size(cluster: &Cluster) -> u64 {
    let size = cluster.psql(&format!("SELECT pg_total_relation_size('{TABLE}')"));
    size[0].parse().expect("a size")
}

/// The baselines' psql scripts and the COPY files they load.
struct Scripts {
    dir: PathBuf,
    direct: PathBuf,
    staged: PathBuf,
}

impl Scripts {
    /// Writes the rows the sink inserts, from `transcript-sync export`, as COPY text files:
    /// one with `doc` (the record again) for the direct load, one without for staging.
    fn write(ctx: &Ctx, a: &Archived) -> Scripts {
        let dir = ctx.scratch.join("pg-copy");
        fs::create_dir_all(&dir).expect("creating the COPY directory");
        let (with_doc, without) = (dir.join("direct.copy"), dir.join("staged.copy"));
        write_copy_files(ctx, a, &with_doc, &without);
        let direct = dir.join("direct.sql");
        let columns = "machine, source, generation, \"offset\", seq, harness, record";
        let script = format!(
            "\\copy {TABLE} ({columns}, doc) FROM '{}'\n",
            with_doc.display()
        );
        fs::write(&direct, script).expect("writing a psql script");
        let staged = dir.join("staged.sql");
        let script = format!(
            "BEGIN;\n\
             CREATE TEMP TABLE staging (machine uuid, source bigint, generation bigint, \
             \"offset\" bigint, seq bigint, harness text, record text) ON COMMIT DROP;\n\
             \\copy staging FROM '{}'\n\
             INSERT INTO {TABLE} ({columns}, doc) SELECT {columns}, record::jsonb FROM staging \
             ON CONFLICT DO NOTHING;\n\
             COMMIT;\n",
            without.display()
        );
        fs::write(&staged, script).expect("writing a psql script");
        Scripts {
            dir,
            direct,
            staged,
        }
    }
}

/// The head of an export envelope, everything before its `record`.
#[derive(serde::Deserialize)]
struct Head {
    seq: i64,
    source: i64,
    harness: String,
    generation: i64,
    offset: u64,
}

fn write_copy_files(ctx: &Ctx, a: &Archived, with_doc: &Path, without: &Path) {
    let machine = machine_id(&a.db);
    let mut export = ctx
        .ts()
        .args(["export", "--db"])
        .arg(&a.db)
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting transcript-sync export");
    let stdout = export.stdout.take().expect("a piped stdout");
    let mut envelopes = BufReader::with_capacity(1 << 20, stdout);
    let open = |p: &Path| BufWriter::with_capacity(1 << 20, File::create(p).expect("a file"));
    let (mut a_out, mut b_out) = (open(with_doc), open(without));
    let mut line = Vec::new();
    let mut row = Vec::new();
    let mut rows = 0u64;
    while envelopes
        .read_until(b'\n', &mut line)
        .expect("reading export")
        > 0
    {
        row.clear();
        let record = copy_row(&mut row, &machine, &line);
        b_out.write_all(&row).expect("writing a COPY file");
        b_out.write_all(b"\n").expect("writing a COPY file");
        a_out.write_all(&row).expect("writing a COPY file");
        a_out.write_all(b"\t").expect("writing a COPY file");
        a_out.write_all(&record).expect("writing a COPY file");
        a_out.write_all(b"\n").expect("writing a COPY file");
        line.clear();
        rows += 1;
    }
    a_out.flush().expect("writing a COPY file");
    b_out.flush().expect("writing a COPY file");
    assert!(
        export.wait().expect("waiting for export").success(),
        "export failed"
    );
    assert_eq!(rows, a.records, "export gives every record");
}

/// Appends to `row` the COPY text of the envelope `line` without `doc`; returns the record's
/// escaped text (for `doc`).
fn copy_row(row: &mut Vec<u8>, machine: &str, line: &[u8]) -> Vec<u8> {
    // A JSON string escapes its quotes, so the first `,"record":` is the field itself.
    let at = memchr::memmem::find(line, b",\"record\":").expect("an envelope with a record");
    let mut head = line[..at].to_vec();
    head.push(b'}');
    let head: Head = serde_json::from_slice(&head).expect("an envelope's head");
    let record = line[at + 10..]
        .strip_suffix(b"}\n")
        .expect("an envelope ends with its record");
    let _ = write!(
        row,
        "{machine}\t{}\t{}\t{}\t{}\t",
        head.source, head.generation, head.offset, head.seq
    );
    copy_text(row, head.harness.as_bytes());
    row.push(b'\t');
    let mut text = Vec::with_capacity(record.len() + 64);
    copy_text(&mut text, record);
    row.extend_from_slice(&text);
    text
}

/// The archive's machine id: the sink's `machine` column.
fn machine_id(db: &Path) -> String {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("opening the archive");
    conn.query_row(
        "SELECT value FROM state WHERE key = 'machine_id'",
        [],
        |r| r.get(0),
    )
    .expect("the archive's machine id")
}

fn report(md: &mut String, a: &Archived, cluster: &Cluster, samples: &[Vec<Sample>], size: u64) {
    let _ = writeln!(
        md,
        "### PostgreSQL\n\n{} on 127.0.0.1, `{}`, other settings default; table `{TABLE}` \
         {:.1} GB after a load (indexes and TOAST included).\n",
        cluster.version(),
        postgres::benchmark_settings(),
        size as f64 / 1e9
    );
    md.push_str(
        "| subject | runs, s | median s | MB/s | records/s | client CPU s | server CPU s |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    for (subject, runs) in SUBJECTS.iter().zip(samples) {
        let secs: Vec<f64> = runs.iter().map(|s| s.secs).collect();
        let m = median(&secs);
        let (mbs, rps) = a.rates(m);
        let cpu = |f: fn(&Sample) -> f64| median(&runs.iter().map(f).collect::<Vec<_>>());
        let _ = writeln!(
            md,
            "| {} | {} | {m:.2} | {mbs:.1} | {rps:.0} | {:.2} | {:.2} |",
            subject.label(),
            list(&secs),
            cpu(|s| s.client_cpu),
            cpu(|s| s.server_cpu)
        );
    }
    let medians: Vec<f64> = samples
        .iter()
        .map(|r| median(&r.iter().map(|s| s.secs).collect::<Vec<_>>()))
        .collect();
    let [sink, unredacted, direct, staged]: [f64; 4] =
        medians.try_into().expect("a median for each of SUBJECTS");
    let best = direct.min(staged);
    let _ = writeln!(
        md,
        "\nThe sink ships at {:.0} % of the faster baseline's rate, {:.0} % of the staged one's \
         (target ≥ 50 %); with `redact = false`, at {:.0} % of the faster baseline's.\n",
        100.0 * best / sink,
        100.0 * staged / sink,
        100.0 * best / unredacted
    );
}
