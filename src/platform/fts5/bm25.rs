//! FTS5's `bm25()` that reads fewer postings. `bm25()` counts the rows of every phrase of a
//! query, for its IDF, by reading all of the phrase's postings at the query's first row: on
//! 1 GiB of transcripts that was 95 % of a search for `src/main.rs`, and for a prefix that a
//! search has made an OR of 256 terms, every posting of those terms, read again right after
//! the vocabulary table read them to choose the terms. This function scores each row with
//! `bm25()`'s formula, in its order of operations, but:
//! - a phrase that is one term named in `known` takes its rows from there;
//! - a phrase is counted when it first occurs in a scored row, so one that never does (the
//!   right of a `NOT`) is never counted;
//! - a query of one phrase is not counted at all: its IDF would scale every score alike, so
//!   its scores are `bm25()`'s divided by that IDF, in the same order.
//!
//! With two phrases or more, and the rows `known` gives and the sizes `size` gives true, its
//! scores are `bm25()`'s.
//!
//! `NAME(table, known, size)`: `size`, when given and not NULL, is the row's size in tokens
//! as FTS5 counts it (what `bm25()` reads from the table's sizes, one lookup per row, for a
//! caller that keeps it beside the row). `known` is NULL or text of lines `term<TAB>rows`,
//! each a term as the index holds it and the number of rows that hold it. A phrase whose only
//! token is a term named there takes its rows from it: the caller gives none for a query with
//! a prefix phrase (`pre*`, whose one token is `pre`), an initial-token phrase (`^`) or a
//! column filter, which count rows differently. Per statement the rows are read once, at its first call: two calls
//! of the function in one statement share them (FTS5 keeps one auxiliary datum per function).

use super::{fts5_api, misuse};
use rusqlite::Connection;
use rusqlite::ffi;
use std::collections::HashMap;
use std::ffi::{CString, c_int, c_void};
use std::ptr;

/// BM25's constants, as FTS5's `bm25()` has them.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Registers the function `name` on `conn`'s FTS5.
pub(crate) fn register(conn: &Connection, name: &str) -> rusqlite::Result<()> {
    let api = fts5_api(conn)?;
    let name = CString::new(name).map_err(|_| misuse("a function name holds a NUL"))?;
    // SAFETY: `api` is the connection's FTS5 API (checked non-null by `fts5_api`), valid for
    // the connection's life; FTS5 copies the name and keeps no user data (none is given).
    let rc = unsafe {
        let create_function = (*api)
            .xCreateFunction
            .ok_or_else(|| misuse("no xCreateFunction"))?;
        create_function(api, name.as_ptr(), ptr::null_mut(), Some(score), None)
    };
    match rc {
        ffi::SQLITE_OK => Ok(()),
        rc => Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None)),
    }
}

/// What a query's scores share, made at its first row: `bm25()`'s `Fts5Bm25Data`.
struct Query {
    /// The rows of the table.
    rows: i64,
    /// The average row's length in tokens.
    avgdl: f64,
    /// Each phrase's inverse document frequency, once known.
    idf: Vec<Option<f64>>,
}

impl Query {
    /// `bm25()`'s IDF of a phrase in `hits` of the table's rows (one in more than half of
    /// them would be negative: it is 1e-6 then).
    fn idf(&self, hits: i64) -> f64 {
        let value = (((self.rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
        if value <= 0.0 { 1e-6 } else { value }
    }
}

/// `NAME(table, known, size)`, for the row FTS5's cursor is on.
unsafe extern "C" fn score(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_values: c_int,
    values: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 calls this with its API and cursor for the current row, the function's
    // context, and `n_values` arguments after the table; none is kept past the call.
    unsafe {
        let known = match n_values {
            0 => ptr::null_mut(),
            _ => *values,
        };
        let size = match n_values {
            2.. if ffi::sqlite3_value_type(*values.add(1)) != ffi::SQLITE_NULL => {
                Some(ffi::sqlite3_value_int64(*values.add(1)))
            }
            _ => None,
        };
        match row_score(&*api, fts, known, size) {
            Ok(score) => ffi::sqlite3_result_double(ctx, score),
            Err(rc) => ffi::sqlite3_result_error_code(ctx, rc),
        }
    }
}

/// The row's score, the lower the better, as the module says; or SQLite's error code.
///
/// # Safety
/// `api` and `fts` are those FTS5 passed to an auxiliary function for the current row, and
/// `known` is null or the function's second argument; `size` its third, if given.
unsafe fn row_score(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    known: *mut ffi::sqlite3_value,
    size: Option<i64>,
) -> Result<f64, c_int> {
    let missing = ffi::SQLITE_MISUSE;
    let get_aux = api.xGetAuxdata.ok_or(missing)?;
    let set_aux = api.xSetAuxdata.ok_or(missing)?;
    let first = api.xPhraseFirst.ok_or(missing)?;
    let next = api.xPhraseNext.ok_or(missing)?;
    let column_size = api.xColumnSize.ok_or(missing)?;
    // SAFETY: as the caller promises; the auxiliary data is only ever a `Query` this
    // function stored, freed by FTS5 through `drop_query` when the query ends, and used by
    // one call at a time (FTS5 calls a function for one row at a time).
    unsafe {
        let mut query = get_aux(fts, 0).cast::<Query>();
        if query.is_null() {
            let made = Box::into_raw(Box::new(query_of(api, fts, known)?));
            // On failure FTS5 frees it with `drop_query` itself.
            check(set_aux(fts, made.cast(), Some(drop_query)))?;
            query = made;
        }
        let query = &mut *query;
        let tokens = match size {
            Some(size) => size as f64,
            None => {
                let mut tokens: c_int = 0;
                check(column_size(fts, -1, &mut tokens))?;
                f64::from(tokens)
            }
        };
        let length = K1 * (1.0 - B + B * tokens / query.avgdl);
        let mut score = 0.0;
        for phrase in 0..query.idf.len() {
            let mut iter = ffi::Fts5PhraseIter {
                a: ptr::null(),
                b: ptr::null(),
            };
            let (mut column, mut offset): (c_int, c_int) = (0, 0);
            let at = phrase as c_int;
            check(first(fts, at, &mut iter, &mut column, &mut offset))?;
            let mut freq = 0.0;
            while column >= 0 {
                freq += 1.0;
                next(fts, &mut iter, &mut column, &mut offset);
            }
            // A phrase not in the row adds 0 (most of an OR's 256 terms are not).
            if freq > 0.0 {
                let idf = match query.idf[phrase] {
                    Some(idf) => idf,
                    None => {
                        let idf = query.idf(phrase_rows(api, fts, at)?);
                        query.idf[phrase] = Some(idf);
                        idf
                    }
                };
                score += idf * ((freq * (K1 + 1.0)) / (freq + length));
            }
        }
        Ok(-score)
    }
}

/// What the query's scores share: the table's rows, the average row's length, and the IDF
/// of each phrase whose rows `known` gives (of every phrase: 1, when there is one).
///
/// # Safety
/// As [`row_score`].
unsafe fn query_of(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    known: *mut ffi::sqlite3_value,
) -> Result<Query, c_int> {
    let missing = ffi::SQLITE_MISUSE;
    // SAFETY: as the caller promises.
    unsafe {
        let (mut rows, mut tokens): (i64, i64) = (0, 0);
        check(api.xRowCount.ok_or(missing)?(fts, &mut rows))?;
        check(api.xColumnTotalSize.ok_or(missing)?(fts, -1, &mut tokens))?;
        let phrases = api.xPhraseCount.ok_or(missing)?(fts);
        let mut query = Query {
            rows,
            avgdl: tokens as f64 / rows as f64,
            idf: vec![None; usize::try_from(phrases).unwrap_or(0)],
        };
        if phrases == 1 {
            query.idf[0] = Some(1.0);
            return Ok(query);
        }
        let known = known_rows(known);
        for phrase in 0..phrases {
            if let Some(hits) = one_term(api, fts, phrase).and_then(|t| known.get(t)) {
                query.idf[phrase as usize] = Some(query.idf(*hits));
            }
        }
        Ok(query)
    }
}

/// The rows that hold `phrase`, as `bm25()` counts them: by reading its postings.
///
/// # Safety
/// As [`row_score`].
unsafe fn phrase_rows(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    phrase: c_int,
) -> Result<i64, c_int> {
    let query_phrase = api.xQueryPhrase.ok_or(ffi::SQLITE_MISUSE)?;
    let mut hits: i64 = 0;
    let out = (&mut hits as *mut i64).cast::<c_void>();
    // SAFETY: as the caller promises; `count_row` is given a pointer to the live `hits`.
    check(unsafe { query_phrase(fts, phrase, out, Some(count_row)) })?;
    Ok(hits)
}

/// The token of `phrase` when it has one, as bytes of the query (for a prefix phrase `pre*`,
/// `pre`).
///
/// # Safety
/// As [`row_score`].
unsafe fn one_term<'q>(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    phrase: c_int,
) -> Option<&'q [u8]> {
    // SAFETY: as the caller promises; FTS5 keeps a query token's bytes for the query's life.
    unsafe {
        if api.xPhraseSize?(fts, phrase) != 1 {
            return None;
        }
        let (mut token, mut n): (*const std::ffi::c_char, c_int) = (ptr::null(), 0);
        let rc = api.xQueryToken?(fts, phrase, 0, &mut token, &mut n);
        if rc != ffi::SQLITE_OK || token.is_null() {
            return None;
        }
        Some(std::slice::from_raw_parts(
            token.cast(),
            usize::try_from(n).ok()?,
        ))
    }
}

/// The rows of each term `known` names (see the module's documentation); none when it is
/// null or not text.
///
/// # Safety
/// `known` is null or an SQL value of the current call.
unsafe fn known_rows<'v>(known: *mut ffi::sqlite3_value) -> HashMap<&'v [u8], i64> {
    if known.is_null() {
        return HashMap::new();
    }
    // SAFETY: as the caller promises; the text stays as it is while the query runs, and it is
    // read only while the query's data is made.
    let text = unsafe {
        let start = ffi::sqlite3_value_text(known);
        let n = ffi::sqlite3_value_bytes(known);
        match (start.is_null(), usize::try_from(n)) {
            (false, Ok(n)) => std::slice::from_raw_parts(start, n),
            _ => return HashMap::new(),
        }
    };
    (text.split(|b| *b == b'\n'))
        .filter_map(|line| {
            let tab = line.iter().position(|b| *b == b'\t')?;
            let rows = std::str::from_utf8(&line[tab + 1..]).ok()?.parse().ok()?;
            Some((&line[..tab], rows))
        })
        .collect()
}

/// The `known` argument for terms and the rows that hold each.
pub(crate) fn known<'t>(terms: impl IntoIterator<Item = (&'t str, i64)>) -> String {
    terms
        .into_iter()
        .map(|(term, rows)| format!("{term}\t{rows}\n"))
        .collect()
}

unsafe extern "C" fn count_row(
    _api: *const ffi::Fts5ExtensionApi,
    _fts: *mut ffi::Fts5Context,
    rows: *mut c_void,
) -> c_int {
    // SAFETY: `query_of` passes a pointer to its live `i64`.
    unsafe { *rows.cast::<i64>() += 1 };
    ffi::SQLITE_OK
}

unsafe extern "C" fn drop_query(query: *mut c_void) {
    // SAFETY: FTS5 calls this once, with the pointer `row_score` made by `Box::into_raw`.
    drop(unsafe { Box::from_raw(query.cast::<Query>()) });
}

fn check(rc: c_int) -> Result<(), c_int> {
    match rc {
        ffi::SQLITE_OK => Ok(()),
        rc => Err(rc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::params;

    /// A table of texts whose words repeat unevenly, with its vocabulary.
    fn table() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn, "bm25_known").unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5 (body);
             CREATE VIRTUAL TABLE v USING fts5vocab (t, row);",
        )
        .unwrap();
        // Words in a row of every 3rd to 11th row, some of them several times, among filler
        // that makes rows of unequal lengths.
        let words = [
            (3, "blue"),
            (4, "green"),
            (5, "red"),
            (7, "read"),
            (9, "result"),
        ];
        for i in 0..200usize {
            let mut body = vec!["filler"; i % 13];
            for (every, word) in words {
                if i % every == 0 {
                    body.extend(std::iter::repeat_n(word, 1 + i % 3));
                }
            }
            if i % 11 == 0 {
                body.extend(["cargo", "build", "then", "cargo"]);
            }
            conn.execute("INSERT INTO t (body) VALUES (?1)", [body.join(" ")])
                .unwrap();
        }
        conn
    }

    /// Each matching row's (rowid, `bm25(t)`, `bm25_known(t, known)`), by rowid.
    fn scores(conn: &Connection, query: &str, known: Option<&str>) -> Vec<(i64, f64, f64)> {
        let mut stmt = conn
            .prepare(
                "SELECT rowid, bm25(t), bm25_known(t, ?2) FROM t WHERE t MATCH ?1 ORDER BY rowid",
            )
            .unwrap();
        let rows = stmt.query_map(params![query, known], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        });
        rows.unwrap().map(Result::unwrap).collect()
    }

    /// The `known` of every term the vocabulary holds, with its true rows.
    fn all_known(conn: &Connection) -> String {
        let mut stmt = conn.prepare("SELECT term, doc FROM v").unwrap();
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get(1)?)));
        let rows: Vec<(String, i64)> = rows.unwrap().map(Result::unwrap).collect();
        known(rows.iter().map(|(t, n)| (t.as_str(), *n)))
    }

    /// Whether `a` and `b` are the same but for rounding (a C compiler may fuse `bm25()`'s
    /// multiplications and additions, as on arm64).
    fn same(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
    }

    #[test]
    fn with_two_phrases_or_more_told_nothing_or_the_true_rows_it_scores_as_bm25_does() {
        let conn = table();
        let all = all_known(&conn);
        let queries = [
            "red OR read OR ready OR result",
            "cargo NOT blue",
            "(red OR blue) AND green",
            "\"cargo build\" OR green",
            "red NOT res*",
        ];
        for query in queries {
            for known in [None, Some(all.as_str())] {
                let rows = scores(&conn, query, known);
                assert!(rows.len() > 2, "{query}: {rows:?}");
                for (rowid, bm25, ours) in rows {
                    assert!(
                        same(bm25, ours),
                        "{query}, row {rowid}, told {}: {bm25} against {ours}",
                        known.is_some()
                    );
                }
            }
        }
    }

    #[test]
    fn with_one_phrase_it_scores_as_bm25_does_but_for_that_phrases_idf() {
        let conn = table();
        for query in ["red", "\"cargo build\"", "re*"] {
            let rows = scores(&conn, query, None);
            assert!(rows.len() > 2, "{query}: {rows:?}");
            let idf = rows[0].1 / rows[0].2;
            assert!(
                idf > 0.0 && !same(idf, 1.0),
                "{query}: not counted, {rows:?}"
            );
            for (rowid, bm25, ours) in rows {
                assert!(
                    same(bm25, ours * idf),
                    "{query}, row {rowid}: {bm25} against {ours}"
                );
            }
        }
    }

    /// A row's size given (as the caller keeps it) scores as the table's own, and is what the
    /// score is made from.
    #[test]
    fn a_size_given_scores_as_the_size_the_table_keeps() {
        let conn = table();
        // The rows' words are single-spaced.
        let words = "(length(body) - length(replace(body, ' ', '')) + (body != ''))";
        for query in ["red", "blue OR \"cargo build\"", "re* AND filler"] {
            let sql = format!(
                "SELECT bm25_known(t, NULL), bm25_known(t, NULL, {words}),
                        bm25_known(t, NULL, {words} + 5), bm25_known(t, NULL, NULL)
                 FROM t WHERE t MATCH ?1"
            );
            let mut stmt = conn.prepare(&sql).unwrap();
            let rows = stmt.query_map([query], |r| {
                Ok((
                    r.get::<_, f64>(0)?,
                    r.get::<_, f64>(1)?,
                    r.get::<_, f64>(2)?,
                    r.get::<_, f64>(3)?,
                ))
            });
            let rows: Vec<_> = rows.unwrap().map(Result::unwrap).collect();
            assert!(rows.len() > 10, "{query}");
            for (own, given, longer, null) in rows {
                assert!((own - given).abs() < 1e-12, "{query}: {own} {given}");
                assert_eq!(own, null, "{query}");
                assert!(longer > given, "{query}: a longer row scores worse");
            }
        }
    }

    #[test]
    fn a_term_told_takes_the_rows_it_is_told_and_a_phrase_does_not() {
        let conn = table();
        let told = known([("red", 1), ("cargo", 1)]);
        let rows = scores(&conn, "red OR blue", Some(&told));
        let rarer = rows.iter().filter(|(_, bm25, ours)| ours < bm25).count();
        assert!(rarer > 2, "red as rare as told, not as counted: {rows:?}");
        assert!(rows.iter().all(|(_, bm25, ours)| ours <= bm25), "{rows:?}");
        for query in ["\"red blue\" OR green", "\"cargo build\" OR green"] {
            for (rowid, bm25, ours) in scores(&conn, query, Some(&told)) {
                assert!(same(bm25, ours), "{query}, row {rowid}: not one term told");
            }
        }
    }
}
