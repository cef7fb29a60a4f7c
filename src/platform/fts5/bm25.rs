//! FTS5's `bm25()`, told how many rows hold some of the query's terms. `bm25()` counts the
//! rows of every phrase of the query by reading all of its postings, once per query: for a
//! prefix a search has made an OR of the 256 terms it stands for, that is every posting of
//! those terms, read again right after the vocabulary table read them to find the terms. Given
//! those counts, this function scores each row exactly as `bm25()` does (same formula, same
//! order of operations) and counts only the phrases it was not told about.
//!
//! `NAME(table, known)`: `known` is NULL or text of lines `term<TAB>rows`, each a term as the
//! index holds it and the number of rows that hold it; a phrase of the query that is that one
//! term takes its count from there.

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
    /// The average row's length in tokens.
    avgdl: f64,
    /// Each phrase's inverse document frequency.
    idf: Vec<f64>,
}

/// `NAME(table, known)`, for the row FTS5's cursor is on.
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
        match row_score(&*api, fts, known) {
            Ok(score) => ffi::sqlite3_result_double(ctx, score),
            Err(rc) => ffi::sqlite3_result_error_code(ctx, rc),
        }
    }
}

/// The row's score, the lower the better, as `bm25()` makes it; or SQLite's error code.
///
/// # Safety
/// `api` and `fts` are those FTS5 passed to an auxiliary function for the current row, and
/// `known` is null or the function's second argument.
unsafe fn row_score(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    known: *mut ffi::sqlite3_value,
) -> Result<f64, c_int> {
    let missing = ffi::SQLITE_MISUSE;
    let get_aux = api.xGetAuxdata.ok_or(missing)?;
    let first = api.xPhraseFirst.ok_or(missing)?;
    let next = api.xPhraseNext.ok_or(missing)?;
    let column_size = api.xColumnSize.ok_or(missing)?;
    // SAFETY: as the caller promises; the auxiliary data is only ever a `Query` this
    // function stored, freed by FTS5 through `drop_query` when the query ends.
    unsafe {
        let mut query = get_aux(fts, 0).cast::<Query>();
        if query.is_null() {
            let made = Box::into_raw(Box::new(query_of(api, fts, known)?));
            let set_aux = api.xSetAuxdata.ok_or(missing)?;
            check(set_aux(fts, made.cast(), Some(drop_query)))?;
            query = made;
        }
        let query = &*query;
        let mut tokens: c_int = 0;
        check(column_size(fts, -1, &mut tokens))?;
        let length = K1 * (1.0 - B + B * f64::from(tokens) / query.avgdl);
        let mut score = 0.0;
        for (phrase, idf) in query.idf.iter().enumerate() {
            let mut iter = ffi::Fts5PhraseIter {
                a: ptr::null(),
                b: ptr::null(),
            };
            let (mut column, mut offset): (c_int, c_int) = (0, 0);
            check(first(
                fts,
                phrase as c_int,
                &mut iter,
                &mut column,
                &mut offset,
            ))?;
            let mut freq = 0.0;
            while column >= 0 {
                freq += 1.0;
                next(fts, &mut iter, &mut column, &mut offset);
            }
            // A phrase not in the row adds 0 (most of an OR's 256 terms are not).
            if freq > 0.0 {
                score += idf * ((freq * (K1 + 1.0)) / (freq + length));
            }
        }
        Ok(-score)
    }
}

/// What the query's scores share: the average row's length and each phrase's IDF, counted by
/// FTS5 unless `known` names the phrase's one term.
///
/// # Safety
/// As [`row_score`].
unsafe fn query_of(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    known: *mut ffi::sqlite3_value,
) -> Result<Query, c_int> {
    let missing = ffi::SQLITE_MISUSE;
    // SAFETY: as the caller promises; `count_row` is given a pointer to a live `i64`.
    unsafe {
        let known = known_rows(known);
        let (mut rows, mut tokens): (i64, i64) = (0, 0);
        check(api.xRowCount.ok_or(missing)?(fts, &mut rows))?;
        check(api.xColumnTotalSize.ok_or(missing)?(fts, -1, &mut tokens))?;
        let phrases = api.xPhraseCount.ok_or(missing)?(fts);
        let mut idf = Vec::with_capacity(usize::try_from(phrases).unwrap_or(0));
        for phrase in 0..phrases {
            let hits = match one_term(api, fts, phrase).and_then(|t| known.get(t)) {
                Some(hits) => *hits,
                None => {
                    let mut hits: i64 = 0;
                    let query_phrase = api.xQueryPhrase.ok_or(missing)?;
                    let out = (&mut hits as *mut i64).cast::<c_void>();
                    check(query_phrase(fts, phrase, out, Some(count_row)))?;
                    hits
                }
            };
            // `bm25()`'s: the IDF of a phrase in more than half the rows would be negative.
            let value = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
            idf.push(if value <= 0.0 { 1e-6 } else { value });
        }
        Ok(Query {
            avgdl: tokens as f64 / rows as f64,
            idf,
        })
    }
}

/// The term of `phrase` when it is one term (not a prefix), as bytes of the query.
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

    #[test]
    fn told_nothing_or_the_true_rows_it_scores_every_row_as_bm25_does() {
        let conn = table();
        let all = all_known(&conn);
        let queries = [
            "red",
            "red OR read OR ready OR result",
            "\"cargo build\"",
            "cargo NOT blue",
            "(red OR blue) AND green",
            "re*",
            "red NOT res*",
        ];
        for query in queries {
            for known in [None, Some(all.as_str())] {
                let rows = scores(&conn, query, known);
                assert!(rows.len() > 2, "{query}: {rows:?}");
                for (rowid, bm25, ours) in rows {
                    assert_eq!(
                        bm25.to_bits(),
                        ours.to_bits(),
                        "{query}, row {rowid}, told {}",
                        known.is_some()
                    );
                }
            }
        }
    }

    #[test]
    fn a_term_told_takes_the_rows_it_is_told_and_a_phrase_does_not() {
        let conn = table();
        let told = known([("red", 1), ("cargo", 1)]);
        for (rowid, bm25, ours) in scores(&conn, "red", Some(&told)) {
            assert!(
                ours < bm25,
                "row {rowid}: red as rare as told, not as counted"
            );
        }
        for query in ["\"red blue\"", "\"cargo build\"", "blue"] {
            for (rowid, bm25, ours) in scores(&conn, query, Some(&told)) {
                assert_eq!(bm25, ours, "{query}, row {rowid}: not one term told");
            }
        }
    }
}
