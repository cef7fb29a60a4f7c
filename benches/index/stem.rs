//! What `search --stem` adds, word by word, on the corpus just indexed: the words each query
//! word stands for with `--stem` (read from the search's debug log, so it is the daemon's own
//! expansion), and how many messages match without and with it. Whether the added words are
//! forms of the query word is judged by reading them (BENCHMARKS.md gives the judgement).

use rusqlite::{Connection, OpenFlags};
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

/// Words people search transcripts for: verbs and nouns of the work, in several forms.
const WORDS: [&str; 20] = [
    "fail",
    "error",
    "test",
    "build",
    "run",
    "install",
    "parse",
    "commit",
    "merge",
    "deploy",
    "timeout",
    "connection",
    "generate",
    "configure",
    "update",
    "import",
    "format",
    "compile",
    "depend",
    "optimize",
];

/// The table: per word, messages matching it exactly, with `--stem`, and the words added.
pub fn report(bin: &Path, home: &Path, db: &Path) -> String {
    let index = db.with_file_name(format!(
        "{}-index",
        db.file_name().expect("a file name").to_string_lossy()
    ));
    let conn = Connection::open_with_flags(&index, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("opening the index");
    transcript_sync::register_index_tokenizer(&conn).expect("registering the index's tokenizer");
    let mut md = String::from(
        "| word | messages, exact | messages, `--stem` | words added (messages holding each) |\n\
         |---|---:|---:|---|\n",
    );
    let (mut exact_all, mut stemmed_all) = (0, 0);
    for word in WORDS {
        let fts = stemmed_query(bin, home, db, word);
        let exact = matches(&conn, word);
        let stemmed = matches(&conn, &fts);
        exact_all += exact;
        stemmed_all += stemmed;
        let added: Vec<String> = terms_of(&fts)
            .into_iter()
            .filter(|t| t != word)
            .map(|t| format!("{t} ({})", docs(&conn, &t)))
            .collect();
        let _ = writeln!(
            md,
            "| {word} | {exact} | {stemmed} | {} |",
            added.join(", ")
        );
    }
    let _ = writeln!(md, "| all | {exact_all} | {stemmed_all} | |");
    md
}

/// The FTS5 query `search --stem word` runs, from its debug log line.
fn stemmed_query(bin: &Path, home: &Path, db: &Path, word: &str) -> String {
    let out = Command::new(bin)
        .args(["search", "--stem", "--json", word, "--db"])
        .arg(db)
        .env("HOME", home)
        .env("RUST_LOG", "transcript_sync=debug")
        .output()
        .expect("running search");
    let log = String::from_utf8_lossy(&out.stderr);
    let line = (log.lines())
        .find(|l| l.contains("as the FTS5 query"))
        .unwrap_or_else(|| panic!("no query in the log of search --stem {word}:\n{log}"));
    let quoted = line.split("as the FTS5 query ").nth(1).expect("a query");
    serde_json::from_str(quoted).expect("the query as a quoted string")
}

/// The quoted terms of an expansion such as `("a" OR "b")`, or the word itself.
fn terms_of(fts: &str) -> Vec<String> {
    if !fts.starts_with('(') {
        return vec![fts.to_owned()];
    }
    fts.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn matches(conn: &Connection, fts: &str) -> i64 {
    conn.query_row(
        "SELECT count(*) FROM message_text WHERE message_text MATCH ?1",
        [fts],
        |r| r.get(0),
    )
    .expect("counting matches")
}

fn docs(conn: &Connection, term: &str) -> i64 {
    conn.query_row(
        "SELECT coalesce(sum(doc), 0) FROM message_vocab WHERE term = ?1",
        [term],
        |r| r.get(0),
    )
    .expect("counting a term's messages")
}
