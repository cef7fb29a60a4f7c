//! Full-text search of the session index: the query read as FTS5 reads it (words, phrases,
//! prefixes, stems), the newest matches ranked, and their snippets.

use super::rank;
use super::*;
use crate::platform::fts5::bm25;

/// One search hit.
#[derive(Debug, serde::Serialize)]
pub(crate) struct Hit {
    /// The session's id.
    pub session: String,
    /// The host name of the machine that wrote it.
    pub machine: String,
    /// Its machine in this archive: 0 for this one.
    #[serde(skip)]
    pub machine_id: i64,
    /// Its watcher.
    pub harness: String,
    /// Its project.
    pub project: Option<String>,
    /// When the message was written (or its session last active, for agents without times).
    #[serde(serialize_with = "rfc3339")]
    pub timestamp: Option<i64>,
    /// Who speaks.
    pub role: String,
    /// The record's seq.
    pub seq: i64,
    /// The text around the match, the matched terms between `mark`s.
    pub snippet: String,
}

/// How many of the newest matching messages a search ranks: ranking scores every message it
/// is given, for each term of the query, and a word in most messages would make it score them
/// all.
const RANKED: i64 = 2_000;
/// A query whose prefixes and stems stand for more terms than this (a short prefix stands for
/// up to [`PREFIX_TERMS`]) ranks fewer than [`RANKED`], in proportion, for the same work
/// ([`ranked_of`]).
const RANKED_TERMS: usize = 32;

/// How many of the newest matches a search ranks when its prefixes and stems stand for `terms`
/// terms.
fn ranked_of(terms: usize) -> i64 {
    RANKED * RANKED_TERMS as i64 / terms.max(RANKED_TERMS) as i64
}

/// The `FROM` and `WHERE` of a search: matches of `?1`, filtered by harness (`?2`), project
/// (`?3`), time (`?4`), machine (`?7`), a star (`?8`) and a tag (`?9`), from message `?5` on.
const MATCHES: &str = concat!(
    "
    FROM message_text
    JOIN messages m ON m.id = message_text.rowid
    JOIN sessions se ON se.id = m.session
    WHERE message_text MATCH ?1
      AND (?2 IS NULL OR se.harness = ?2)
      AND (?3 IS NULL OR instr(lower(se.project), lower(?3)) > 0)
      AND (?4 IS NULL OR coalesce(m.at_ms, se.last_ms) >= ?4)
      AND message_text.rowid >= ?5
      AND (?7 IS NULL OR se.machine = ?7)",
    marked_sql!("?8", "?9")
);

/// The messages matching `query` (FTS5 syntax: words, "phrases", prefix*, AND, OR, NOT,
/// parentheses; other punctuation is taken literally), best first as [`rank`] orders them;
/// when more than [`RANKED`] match, the newest of them ([`ranked_of`]). Matches are marked
/// with `open` and `close` in the snippet, which is made from the message redacted by
/// `redactor`, if given (a secret cut by the snippet's edge would no longer be found).
///
/// With `stem`, a word stands for the indexed words of its stem as well (see [`stem_terms`]).
pub(crate) fn search(
    archive: &mut Archive,
    query: &str,
    stem: bool,
    filter: &Filter,
    marks: (&str, &str),
    redactor: Option<&Redactor>,
) -> Result<Vec<Hit>> {
    let path = archive.path().to_owned();
    let records = archive.records_reader();
    let conn = records.connection();
    // The terms a word or prefix stood for, with the rows of each, which ranking then need
    // not count again.
    let mut counted: Vec<Term> = Vec::new();
    let mut expand = |word: Word| {
        let terms = match word {
            Word::Prefix(prefix) => prefix_terms(conn, prefix).unwrap_or_else(|e| {
                log::warn!(
                    "cannot list the terms {prefix}* stands for ({e}); searching it as a prefix"
                );
                None
            }),
            Word::Whole(word) if stem => stem_terms(conn, word).unwrap_or_else(|e| {
                log::warn!("cannot list the words of {word}'s stem ({e}); searching the word only");
                None
            }),
            Word::Whole(_) => None,
        };
        terms.map(|terms| {
            let or = or_of(&terms);
            counted.extend(terms);
            or
        })
    };
    if let Some(reason) = query_problem(query) {
        return Err(Error::SearchQuery {
            query: query.to_owned(),
            reason,
        });
    }
    let fts = fts_query(query, &mut expand);
    log::debug!("search {query:?} as the FTS5 query {fts:?}");
    // A prefix FTS5 expands itself (`pre*`) is one phrase whose only token is `pre`, which the
    // ranking would take for the term `pre`: no counts are given beside one.
    let known = (!fts.contains('*')).then(|| bm25::known(counted.iter().map(|(t, n)| (&**t, *n))));
    let names = MachineNames::of(archive)?;
    let ranked = ranked_hits(
        &records,
        &fts,
        known.as_deref(),
        filter,
        marks,
        redactor,
        ranked_of(counted.len()),
    );
    let result = ranked.map(|mut hits| {
        for hit in &mut hits {
            hit.machine = names.name(hit.machine_id);
        }
        hits
    });
    result.map_err(|e| match e {
        // What `query_problem` does not foresee, in words of the query rather than SQLite's.
        rusqlite::Error::SqliteFailure(_, Some(msg)) if msg.contains("fts5") => {
            log::debug!("search query {query:?}: {msg}");
            Error::SearchQuery {
                query: query.to_owned(),
                reason: "it is not a combination of words, phrases and operators".into(),
            }
        }
        source => Error::Archive { path, source },
    })
}

/// The best of the newest `newest` matches of `fts`, with their snippets; `known` is the
/// rows of some of its terms, as the ranking takes them ([`bm25::known`]).
fn ranked_hits(
    records: &Records,
    fts: &str,
    known: Option<&str>,
    filter: &Filter,
    marks: (&str, &str),
    redactor: Option<&Redactor>,
    newest: i64,
) -> rusqlite::Result<Vec<Hit>> {
    let conn = records.connection();
    // The newest `newest` matches, scored as FTS5 walks its rowids backwards (it stops there),
    // then ranked: the query is evaluated once.
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT session, harness, project, at, role, seq, machine FROM (
             SELECT se.session, se.harness, se.project, coalesce(m.at_ms, se.last_ms) AS at,
                    m.role, m.seq, se.machine, {} AS score
             {MATCHES}
             ORDER BY message_text.rowid DESC
             LIMIT ?6)
         ORDER BY {}
         LIMIT ?10",
        rank::score("?11"),
        rank::ORDER_BY
    ))?;
    let args = params![
        fts,
        filter.harness,
        filter.project,
        filter.since_ms,
        0,
        newest,
        filter.machine,
        filter.starred,
        filter.tag,
        filter.sql_limit(),
        known
    ];
    let ranked = stmt.query_map(args, |r| {
        Ok(Hit {
            session: r.get(0)?,
            harness: r.get(1)?,
            project: r.get(2)?,
            timestamp: r.get(3)?,
            role: r.get(4)?,
            seq: r.get(5)?,
            // Named by `search`, from the archive's machines.
            machine: String::new(),
            machine_id: r.get(6)?,
            snippet: String::new(),
        })
    })?;
    let mut hits = ranked.collect::<rusqlite::Result<Vec<_>>>()?;
    if hits.is_empty() {
        return Ok(hits);
    }
    let snippets = snippets(records, fts, &hits, marks, redactor)?;
    for (hit, snippet) in hits.iter_mut().zip(snippets) {
        hit.snippet = snippet;
    }
    Ok(hits)
}

/// The snippet of each of `hits`, in order: the text around what `fts` matches in it. The
/// index keeps no text, so each is made from its record: the hits' texts are indexed again,
/// in one transaction, in a table of this connection's, asked for their snippets at once,
/// and rolled back (the table is empty again for the next search).
fn snippets(
    records: &Records,
    fts: &str,
    hits: &[Hit],
    (open, close): (&str, &str),
    redactor: Option<&Redactor>,
) -> rusqlite::Result<Vec<String>> {
    let conn = records.connection();
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.snippet_text
             USING fts5 (body, tokenize = {});",
        words::tokenize_option(words::TOKENIZER)
    ))?;
    let tx = conn.unchecked_transaction()?;
    let mut insert =
        tx.prepare_cached("INSERT INTO temp.snippet_text (rowid, body) VALUES (?1, ?2)")?;
    for (i, hit) in hits.iter().enumerate() {
        insert.execute(params![i as i64, hit_text(records, hit.seq, redactor)?])?;
    }
    let mut snippets = vec![String::new(); hits.len()];
    let mut stmt = tx.prepare_cached(
        "SELECT rowid, snippet(snippet_text, 0, ?2, ?3, '…', 24) FROM temp.snippet_text
         WHERE snippet_text MATCH ?1",
    )?;
    let mut rows = stmt.query(params![fts, open, close])?;
    while let Some(row) = rows.next()? {
        let at = usize::try_from(row.get::<_, i64>(0)?).ok();
        if let Some(slot) = at.and_then(|i| snippets.get_mut(i)) {
            *slot = row.get::<_, String>(1)?.replace(['\n', '\r', '\t'], " ");
        }
    }
    Ok(snippets)
}

/// The searchable text of the message whose record is `seq`, redacted by `redactor` if given
/// (a secret cut by a snippet's edge would no longer be found); empty when the record is gone.
fn hit_text(records: &Records, seq: i64, redactor: Option<&Redactor>) -> rusqlite::Result<String> {
    let mut record = records.connection().prepare_cached(
        "SELECT s.harness, r.record FROM records r JOIN sources s ON s.id = r.source_id
         WHERE r.seq = ?1",
    )?;
    let found = record.query_row([seq], |r| {
        let record = records.record(r, 1, seq)?;
        Ok(parse(&r.get::<_, String>(0)?, &indexed(&record)).message)
    });
    let text = found.optional()?.flatten().map(|m| body(&m.parts));
    Ok(match (text, redactor) {
        (Some(text), Some(r)) => r.redact_text(&text).into_owned(),
        (text, _) => text.unwrap_or_default(),
    })
}

/// One piece of a query as [`fts_query`] reads it, with the place (in characters, from 1)
/// where it starts.
#[derive(Clone, Copy, PartialEq)]
enum Piece<'q> {
    Open(usize),
    Close(usize),
    Operator(&'q str, usize),
    Term,
}

/// What makes `query` unreadable, said in its own terms (a quote or parenthesis left open, an
/// operator without a word on each side), or `None` when FTS5 can read it as [`fts_query`]
/// writes it.
fn query_problem(query: &str) -> Option<String> {
    let mut pieces = Vec::new();
    let mut depth = Vec::new();
    let mut chars = query.char_indices().enumerate().peekable();
    while let Some((n, (at, c))) = chars.next() {
        let place = n + 1;
        match c {
            c if c.is_whitespace() => {}
            '(' => {
                depth.push(place);
                pieces.push(Piece::Open(place));
            }
            ')' if depth.pop().is_none() => {
                return Some(format!("the `)` at character {place} closes no `(`"));
            }
            ')' => pieces.push(Piece::Close(place)),
            '"' => {
                if !chars.by_ref().any(|(_, (_, c))| c == '"') {
                    return Some(format!("the `\"` at character {place} is never closed"));
                }
                pieces.push(Piece::Term);
            }
            _ => {
                let mut end = at + c.len_utf8();
                while let Some((_, (i, c))) =
                    chars.next_if(|(_, (_, c))| !c.is_whitespace() && !"()\"".contains(*c))
                {
                    end = i + c.len_utf8();
                }
                pieces.push(match &query[at..end] {
                    op @ ("AND" | "OR" | "NOT") => Piece::Operator(op, place),
                    _ => Piece::Term,
                });
            }
        }
    }
    if let Some(open) = depth.pop() {
        return Some(format!("the `(` at character {open} is never closed"));
    }
    if pieces.is_empty() {
        return Some("it holds no word".into());
    }
    for (i, piece) in pieces.iter().enumerate() {
        let before = i.checked_sub(1).map(|b| pieces[b]);
        let after = pieces.get(i + 1).copied();
        match *piece {
            Piece::Operator(op, place) => {
                let left = matches!(before, Some(Piece::Term | Piece::Close(_)));
                let right = matches!(after, Some(Piece::Term | Piece::Open(_)));
                if !(left && right) {
                    return Some(format!(
                        "{op} at character {place} needs a word or a group on each side, as in \"a {op} b\""
                    ));
                }
            }
            Piece::Open(place) if matches!(after, Some(Piece::Close(_))) => {
                return Some(format!("the `()` at character {place} holds nothing"));
            }
            _ => {}
        }
    }
    None
}

/// How many terms a prefix (`pre*`) stands for at most: its commonest.
const PREFIX_TERMS: usize = 256;

/// A word of a query, as [`fts_query`] asks what it stands for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Word<'a> {
    /// `pre*`, without its `*`.
    Prefix(&'a str),
    /// A word of letters and digits only.
    Whole(&'a str),
}

/// `query` in FTS5's syntax: operators, parentheses and "phrases" pass as they are; a word
/// holding punctuation (`exit-code`, `foo.rs`), which FTS5 would refuse, becomes a phrase of
/// its own; a prefix `pre*` or a word becomes what `expand` makes of it (the terms it stands
/// for), or stays as it is.
fn fts_query(query: &str, expand: &mut dyn FnMut(Word) -> Option<String>) -> String {
    let mut out = Vec::new();
    let mut chars = query.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '(' || c == ')' {
            out.push(c.to_string());
            chars.next();
        } else if c == '"' {
            chars.next();
            let phrase: String = chars.by_ref().take_while(|c| *c != '"').collect();
            let star = chars.next_if_eq(&'*').map_or("", |_| "*");
            out.push(format!("\"{}\"{star}", phrase.replace('"', "")));
        } else {
            let mut word = String::new();
            while let Some(c) = chars.next_if(|c| !c.is_whitespace() && !"()\"".contains(*c)) {
                word.push(c);
            }
            out.push(fts_word(&word, expand));
        }
    }
    out.join(" ")
}

fn fts_word(word: &str, expand: &mut dyn FnMut(Word) -> Option<String>) -> String {
    if matches!(word, "AND" | "OR" | "NOT") {
        return word.to_owned();
    }
    let (stem, star) = match word.strip_suffix('*') {
        Some(stem) if !stem.is_empty() => (stem, "*"),
        _ => (word, ""),
    };
    // One character of a script cut in pairs stands for every pair it starts (and is a term
    // of its own where a run ends): FTS5's own prefix query, since the terms may be many.
    if words::one_unspaced_character(stem) {
        return format!("{stem}*");
    }
    let bare = (stem.chars()).all(|c| c.is_alphanumeric() || c == '_' || !c.is_ascii());
    match (bare, star) {
        (true, "*") => expand(Word::Prefix(stem)).unwrap_or_else(|| format!("{stem}*")),
        (true, _) => expand(Word::Whole(stem)).unwrap_or_else(|| stem.to_owned()),
        (false, _) => format!("\"{}\"{star}", stem.replace('"', "")),
    }
}

/// An indexed term, with how many rows hold it.
type Term = (String, i64);

/// The indexed terms that start with `stem` (folded as the index folds text), with their rows,
/// the [`PREFIX_TERMS`] commonest when there are more; the search takes an OR of them. FTS5
/// answers a prefix by merging the postings of all its terms before it returns a row; an OR
/// of the same terms is merged as it is read, so that a search that keeps the newest matches
/// stops early. `None` when `stem` is not one term, or no term starts with it.
fn prefix_terms(conn: &Connection, stem: &str) -> rusqlite::Result<Option<Vec<Term>>> {
    let Some(folded) = fold(conn, stem)? else {
        return Ok(None);
    };
    let mut terms = terms_starting(conn, &folded, PREFIX_TERMS as i64 + 1)?;
    if terms.len() > PREFIX_TERMS {
        log::warn!(
            "{stem}* stands for more than {PREFIX_TERMS} terms; searching the {PREFIX_TERMS} commonest"
        );
        terms.truncate(PREFIX_TERMS);
    }
    Ok((!terms.is_empty()).then_some(terms))
}

/// The indexed words that share `word`'s stem (`running`: run, runs, running), with their
/// rows, the [`PREFIX_TERMS`] commonest when there are more; `None` when `word` is not one
/// term or no other indexed word shares its stem. The stem is Porter's English one, taken
/// from SQLite's own `porter` tokenizer; the index itself keeps words unstemmed, so a search
/// without `--stem` finds exactly the word.
fn stem_terms(conn: &Connection, word: &str) -> rusqlite::Result<Option<Vec<Term>>> {
    let Some(folded) = fold(conn, word)? else {
        return Ok(None);
    };
    let Some(stem) = stems(conn, &[folded.as_str()])?.pop() else {
        return Ok(None);
    };
    // Porter's stems are the word's start, bar a last letter changed (happy: happi): the
    // words of a stem are among those that start as both do.
    let common: String = (folded.chars().zip(stem.chars()))
        .take_while(|(a, b)| a == b)
        .map(|(a, _)| a)
        .collect();
    if common.chars().count() < 2 {
        return Ok(None);
    }
    let candidates = terms_starting(conn, &common, -1)?;
    let words: Vec<&str> = candidates.iter().map(|(t, _)| t.as_str()).collect();
    let stemmed = stems(conn, &words)?;
    let mut terms: Vec<Term> = (candidates.into_iter().zip(stemmed))
        .filter(|(_, s)| *s == stem)
        .map(|(t, _)| t)
        .collect();
    if terms.len() > PREFIX_TERMS {
        log::warn!(
            "the stem of {word} stands for more than {PREFIX_TERMS} words; searching the {PREFIX_TERMS} commonest"
        );
        terms.truncate(PREFIX_TERMS);
    }
    if !terms.iter().any(|(t, _)| *t != folded) {
        return Ok(None);
    }
    Ok(Some(terms))
}

/// The indexed terms that start with `start`, with their rows, the commonest first (then in
/// order), at most `limit` of them (-1: all).
fn terms_starting(conn: &Connection, start: &str, limit: i64) -> rusqlite::Result<Vec<Term>> {
    let mut stmt = conn.prepare_cached(
        "SELECT term, doc FROM message_vocab WHERE term >= ?1 AND term < ?2
         ORDER BY doc DESC, term LIMIT ?3",
    )?;
    let end = format!("{start}\u{10FFFF}");
    let rows = stmt.query_map(params![start, end, limit], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// The Porter stem of each of `terms` (each one term, as the index folds them), in order.
fn stems(conn: &Connection, terms: &[&str]) -> rusqlite::Result<Vec<String>> {
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.stem
             USING fts5 (t, tokenize = {});
         CREATE VIRTUAL TABLE IF NOT EXISTS temp.stem_terms
             USING fts5vocab (temp, stem, instance);
         DELETE FROM temp.stem;",
        words::tokenize_option("porter unicode61")
    ))?;
    let mut insert = conn.prepare_cached("INSERT INTO temp.stem (rowid, t) VALUES (?1, ?2)")?;
    for (i, term) in terms.iter().enumerate() {
        insert.execute(params![i as i64, term])?;
    }
    let mut out = vec![String::new(); terms.len()];
    let mut stmt = conn.prepare_cached("SELECT doc, term FROM temp.stem_terms")?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        let doc: i64 = row.get(0)?;
        if let Some(slot) = usize::try_from(doc).ok().and_then(|d| out.get_mut(d)) {
            *slot = row.get(1)?;
        }
    }
    Ok(out)
}

/// `terms` quoted, as an OR in parentheses.
fn or_of(terms: &[Term]) -> String {
    let quoted: Vec<String> = (terms.iter())
        .map(|(t, _)| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect();
    format!("({})", quoted.join(" OR "))
}

/// `text` as the index's tokenizer makes it a term (lower case, diacritics removed), by having
/// that tokenizer read it; `None` unless it is exactly one term (a word of a script cut in
/// pairs is not: FTS5 reads its prefix itself).
fn fold(conn: &Connection, text: &str) -> rusqlite::Result<Option<String>> {
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.fold
             USING fts5 (t, tokenize = {});
         CREATE VIRTUAL TABLE IF NOT EXISTS temp.fold_terms USING fts5vocab (temp, fold, row);
         DELETE FROM temp.fold;",
        words::tokenize_option(words::TOKENIZER)
    ))?;
    conn.execute("INSERT INTO temp.fold (t) VALUES (?1)", [text])?;
    let mut stmt = conn.prepare_cached("SELECT term FROM temp.fold_terms")?;
    let mut terms: Vec<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(if terms.len() == 1 { terms.pop() } else { None })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message of [`archive_of`]: its session (1: `a`, of Codex; 2: `b`, of Cursor), role,
    /// time (Unix ms) and text.
    type Message<'a> = (i64, &'a str, i64, &'a str);

    /// An archive and its index holding `messages`, by id (and seq) from 1, each with the
    /// record its snippet is made from.
    fn archive_of(messages: &[Message]) -> (tempfile::TempDir, Archive) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        let mut archive = Archive::open(&db).unwrap();
        let index = crate::consumers::sessions::store::open_to_write(&db).unwrap();
        index
            .execute_batch("INSERT INTO sessions (id, harness, session) VALUES (1, 'codex', 'a'), (2, 'cursor', 'b');")
            .unwrap();
        let conn = archive.connection();
        conn.execute_batch(
            "INSERT INTO sources (id, dev, ino, path, harness, generation, gone, created_ms)
                 VALUES (1, 1, 1, x'2f61', 'codex', 0, 0, 0);",
        )
        .unwrap();
        for (i, (session, role, at_ms, body)) in messages.iter().enumerate() {
            let id = i as i64 + 1;
            let (terms, places) = words::terms_of(body).unwrap();
            index
                .execute(
                    "INSERT INTO messages (id, session, key, ord, seq, role, at_ms, places)
                     VALUES (?1, ?2, ?1, ?1, ?1, ?3, ?4, ?5)",
                    params![id, session, role, at_ms, places],
                )
                .unwrap();
            index
                .execute(
                    "INSERT INTO message_text (rowid, body) VALUES (?1, ?2)",
                    params![id, terms],
                )
                .unwrap();
            let record = serde_json::json!({"type": "response_item", "payload": {
                "type": "message", "role": "user", "content": [{"type": "input_text", "text": body}]}});
            conn.execute(
                "INSERT INTO records (seq, source_id, generation, offset, record) VALUES (?1, 1, 0, ?1, ?2)",
                params![id, record.to_string().into_bytes()],
            )
            .unwrap();
        }
        crate::consumers::sessions::store::attach(&archive).unwrap();
        (dir, archive)
    }

    /// The seqs of the hits of `fts` over `archive`, best first.
    fn ranked(archive: &Archive, fts: &str, filter: &Filter, newest: i64) -> Vec<i64> {
        let records = archive.records_reader();
        let hits = ranked_hits(&records, fts, None, filter, ("[", "]"), None, newest).unwrap();
        hits.iter().map(|h| h.seq).collect()
    }

    #[test]
    fn only_the_newest_matches_are_ranked_and_filters_apply_before_the_cut() {
        // Message 1 says the word most often (the best match by relevance), and is the oldest.
        let bodies = ["lock lock lock lock", "lock", "lock", "lock", "lock"];
        let messages: Vec<Message> = (bodies.iter().enumerate())
            .map(|(i, body)| (if i == 0 { 2 } else { 1 }, "user", i as i64, *body))
            .collect();
        let (_dir, archive) = archive_of(&messages);
        let all = Filter::default();
        assert_eq!(
            ranked(&archive, "lock", &all, 10)[0],
            1,
            "ranked by relevance"
        );
        assert!(
            !ranked(&archive, "lock", &all, 3).contains(&1),
            "past the 3 newest matches"
        );
        assert_eq!(ranked(&archive, "lock", &all, 3).len(), 3);
        let cursor = Filter {
            harness: Some("cursor".into()),
            ..Filter::default()
        };
        assert_eq!(
            ranked(&archive, "lock", &cursor, 3),
            [1],
            "the cut counts only what the filter keeps"
        );
        let records = archive.records_reader();
        let hits = ranked_hits(&records, "lock", None, &cursor, ("[", "]"), None, 3).unwrap();
        assert_eq!(hits[0].snippet, "[lock] [lock] [lock] [lock]");
    }

    /// The web view and the MCP server search many times on one connection: the texts a
    /// search indexes for its snippets must not be there for the next one.
    #[test]
    fn each_search_on_one_connection_makes_the_snippets_of_its_own_hits() {
        let messages: Vec<Message> = vec![
            (1, "user", 1_000, "the lock file is stale"),
            (1, "user", 2_000, "a lock again"),
            (2, "user", 3_000, "zstd levels compared"),
        ];
        let (_dir, archive) = archive_of(&messages);
        let records = archive.records_reader();
        let all = Filter::default();
        let snippets = |fts: &str| {
            let hits = ranked_hits(&records, fts, None, &all, ("[", "]"), None, 10).unwrap();
            hits.into_iter().map(|h| h.snippet).collect::<Vec<_>>()
        };
        assert_eq!(
            snippets("lock"),
            ["a [lock] again", "the [lock] file is stale"]
        );
        assert_eq!(snippets("zstd"), ["[zstd] levels compared"]);
        assert_eq!(snippets("lock OR zstd").len(), 3);
    }

    /// A person searches for the session where they asked; the test run that prints the
    /// words forty times is newer and, by BM25 alone, the better match.
    #[test]
    fn a_prompt_ranks_above_a_newer_tool_output_that_repeats_its_words() {
        let log: String = (0..40)
            .map(|n| format!("step {n}: build cache miss, layer invalidated\n"))
            .collect();
        let messages: Vec<Message> = vec![
            (
                1,
                "user",
                1_000,
                "Every build reinstalls everything; why is the cache never used?",
            ),
            (2, "tool", 2_000, &log),
            (
                2,
                "user",
                3_000,
                "Add a --verbose flag to the sync command.",
            ),
            (
                1,
                "assistant",
                4_000,
                "The README now lists the install steps first.",
            ),
        ];
        let (_dir, archive) = archive_of(&messages);
        assert_eq!(
            ranked(&archive, "build cache", &Filter::default(), 10),
            [1, 2]
        );
    }

    /// The model's reasoning that restates a prompt scores as the prompt does; among equals
    /// the newer comes first, and the reasoning always comes after the prompt.
    #[test]
    fn reasoning_that_restates_a_prompt_ranks_below_it_and_equals_go_newest_first() {
        let said = "Why does the nightly backup stall at 3 am?";
        let messages: Vec<Message> = vec![
            (1, "user", 1_000, said),
            (2, "user", 2_000, said),
            (2, "reasoning", 3_000, said),
            (
                1,
                "assistant",
                4_000,
                "The README now lists the install steps first.",
            ),
        ];
        let (_dir, archive) = archive_of(&messages);
        assert_eq!(
            ranked(&archive, "nightly backup", &Filter::default(), 10),
            [2, 1, 3]
        );
    }

    fn fts(query: &str) -> String {
        fts_query(query, &mut |_| None)
    }

    /// An index (of a new archive) whose full-text table holds `bodies`, by rowid.
    fn index_of(bodies: &[(i64, &str)]) -> (tempfile::TempDir, rusqlite::Connection) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("a.db");
        drop(Archive::open(&db).unwrap());
        let index = crate::consumers::sessions::store::open_to_write(&db).unwrap();
        for (id, body) in bodies {
            let (terms, _) = words::terms_of(body).unwrap();
            index
                .execute(
                    "INSERT INTO message_text (rowid, body) VALUES (?1, ?2)",
                    params![id, terms],
                )
                .unwrap();
        }
        (dir, index)
    }

    #[test]
    fn a_query_of_many_terms_ranks_fewer_matches_for_the_same_work() {
        assert_eq!(ranked_of(0), RANKED);
        assert_eq!(ranked_of(RANKED_TERMS), RANKED);
        assert_eq!(ranked_of(2 * RANKED_TERMS), RANKED / 2);
        assert_eq!(ranked_of(PREFIX_TERMS), 250);
    }

    #[test]
    fn a_prefix_stands_for_the_terms_it_starts_folded_as_the_index_folds() {
        let (_dir, index) = index_of(&[
            (1, "Résumé resume"),
            (2, "result"),
            (3, "other"),
            (4, "resume"),
        ]);
        let conn = &index;
        let expanded = prefix_terms(conn, "RÉS").unwrap().unwrap();
        let rows = |terms: &[(&str, i64)]| -> Vec<Term> {
            terms.iter().map(|(t, n)| (t.to_string(), *n)).collect()
        };
        assert_eq!(
            expanded,
            rows(&[("resume", 2), ("result", 1)]),
            "with their rows"
        );
        assert_eq!(or_of(&expanded), r#"("resume" OR "result")"#);
        assert_eq!(prefix_terms(conn, "zz").unwrap(), None);
        assert_eq!(
            prefix_terms(conn, "a-b").unwrap(),
            None,
            "two terms are no prefix"
        );
        let query = fts_query("rés* AND other", &mut |w| match w {
            Word::Prefix(p) => prefix_terms(conn, p).unwrap().map(|t| or_of(&t)),
            Word::Whole(_) => None,
        });
        assert_eq!(query, r#"("resume" OR "result") AND other"#);
    }

    #[test]
    fn with_stems_a_word_stands_for_the_indexed_words_of_its_stem() {
        let (_dir, index) = index_of(&[
            (1, "the build failed"),
            (2, "Failing tests, failed again"),
            (3, "a failure"),
            (4, "it fails"),
            (5, "happy path"),
            (6, "happiness"),
            (7, "fail"),
        ]);
        let conn = &index;
        assert_eq!(
            or_of(&stem_terms(conn, "Fails").unwrap().unwrap()),
            r#"("failed" OR "fail" OR "failing" OR "fails")"#,
            "commonest first; `failure` is another stem"
        );
        assert_eq!(
            or_of(&stem_terms(conn, "happy").unwrap().unwrap()),
            r#"("happiness" OR "happy")"#,
            "a stem that is not the word's start (happi)"
        );
        assert_eq!(stem_terms(conn, "failure").unwrap(), None, "alone");
        assert_eq!(stem_terms(conn, "a-b").unwrap(), None, "two terms");
        let query = fts_query(r#"fails AND "failed build" fail*"#, &mut |w| match w {
            Word::Whole(w) => stem_terms(conn, w).unwrap().map(|t| or_of(&t)),
            Word::Prefix(_) => None,
        });
        assert_eq!(
            query, r#"("failed" OR "fail" OR "failing" OR "fails") AND "failed build" fail*"#,
            "phrases and prefixes are searched as written"
        );
    }

    #[test]
    fn an_unreadable_query_is_explained_in_its_own_terms() {
        let problem = |q: &str| query_problem(q).unwrap_or_default();
        assert_eq!(
            problem("\"lock file"),
            "the `\"` at character 1 is never closed"
        );
        assert_eq!(
            problem("(xz OR zstd"),
            "the `(` at character 1 is never closed"
        );
        assert_eq!(problem("xz) zstd"), "the `)` at character 3 closes no `(`");
        assert_eq!(problem("a ()"), "the `()` at character 3 holds nothing");
        assert_eq!(problem("  "), "it holds no word");
        for (query, op, at) in [
            ("NOT", "NOT", 1),
            ("xz OR", "OR", 4),
            ("a AND NOT b", "AND", 3),
        ] {
            assert_eq!(
                problem(query),
                format!(
                    "{op} at character {at} needs a word or a group on each side, as in \"a {op} b\""
                ),
                "{query}"
            );
        }
        for fine in [
            "xz",
            "\"a phrase\" OR (b NOT c)",
            "backup NOT xz",
            "and or not",
            "ré*",
            "x\"y\"",
        ] {
            assert_eq!(query_problem(fine), None, "{fine}");
        }
    }

    #[test]
    fn queries_keep_operators_phrases_and_prefixes_and_quote_punctuation() {
        assert_eq!(
            fts(r#"flaky AND "exit code" migr*"#),
            r#"flaky AND "exit code" migr*"#
        );
        assert_eq!(
            fts("exit-code OR src/main.rs"),
            r#""exit-code" OR "src/main.rs""#
        );
        assert_eq!(fts("(a OR b) NOT c"), "( a OR b ) NOT c");
        assert_eq!(fts("naïve café*"), "naïve café*");
    }
}
