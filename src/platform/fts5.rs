//! A tokenizer of the project's own for SQLite's full-text index, through FTS5's C API (which
//! rusqlite does not wrap; the only `unsafe` here is that API's), and a ranking (`bm25`). It
//! wraps FTS5's built-in
//! `unicode61`: a [`Split`] function cuts the text into pieces, and each piece is either
//! given to `unicode61` (with the arguments the table names, such as `remove_diacritics 2`)
//! or is a term as it is. Offsets are the text's own, so snippets mark what was matched. The
//! same tokenizer can also take documents as their terms, cut beforehand ([`register_ready`],
//! [`Terms`]): their offsets are then the terms', for a table that keeps no text. And one
//! setting of SQLite's for the whole process, through the same C API
//! ([`without_memory_statistics`]).
#![allow(unsafe_code)] // FTS5's API and sqlite3_config are C only: rusqlite wraps neither

use rusqlite::Connection;
use rusqlite::ffi;
use std::ffi::{CString, c_char, c_int, c_void};
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

pub(crate) mod bm25;

/// Turns off SQLite's count of the memory it holds (`SQLITE_CONFIG_MEMSTATUS`), which nothing
/// here reads: with it on, each of SQLite's allocations and frees takes a process-wide mutex,
/// and the full-text index allocates and frees for each term it writes and each row it reads
/// (a search made 5 % fewer instructions without it, BENCHMARKS.md). Returns false when SQLite
/// refused it, having been used already (the setting is then left as it was).
///
/// Called first, before the process opens any connection or starts a thread:
/// `sqlite3_config` may not run beside any other call into SQLite.
pub(crate) fn without_memory_statistics() -> bool {
    // SAFETY: as the caller promises, no other call into SQLite runs meanwhile; the call's one
    // variadic argument for this option is an int. After SQLite was initialized it is refused
    // with SQLITE_MISUSE and changes nothing.
    let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as c_int) };
    rc == ffi::SQLITE_OK
}

/// A piece of a text, as a [`Split`] gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Bytes that `unicode61` cuts into terms.
    Words(Range<usize>),
    /// Bytes that are one term as they are.
    Token {
        /// Where it is in the text.
        range: Range<usize>,
        /// True when it takes the place of the term before it rather than the next place.
        colocated: bool,
    },
}

/// Cuts a text (a document, or with the flag a query) into pieces, giving each to the
/// function until it returns false. It must not panic (a panic is caught and fails the
/// statement).
pub(crate) type Split = fn(&str, bool, &mut dyn FnMut(Piece) -> bool);

/// Registers the tokenizer `name` on `conn`: `split` over `unicode61`. A table made with
/// `tokenize = 'NAME ARGS'` passes ARGS to `unicode61`. Every connection that reads or
/// writes such a table must have it registered first.
pub(crate) fn register(conn: &Connection, name: &str, split: Split) -> rusqlite::Result<()> {
    register_as(conn, name, split, false)
}

/// Registers the tokenizer `name` on `conn` for a table whose documents are given as their
/// terms, made beforehand by [`Terms::of`] (of the same `split` and ARGS): it reads a
/// document's terms as they are, and cuts a query as [`register`]'s does. The terms of a
/// text are made on the thread that reads it, beside the one that inserts it. Offsets in such
/// a document are the terms', so its table keeps no text to mark (`content = ''`).
pub(crate) fn register_ready(conn: &Connection, name: &str, split: Split) -> rusqlite::Result<()> {
    register_as(conn, name, split, true)
}

fn register_as(conn: &Connection, name: &str, split: Split, ready: bool) -> rusqlite::Result<()> {
    let api = fts5_api(conn)?;
    let name = CString::new(name).map_err(|_| misuse("a tokenizer name holds a NUL"))?;
    let mut tokenizer = ffi::fts5_tokenizer {
        xCreate: Some(create),
        xDelete: Some(delete),
        xTokenize: Some(tokenize),
    };
    let registration = Box::into_raw(Box::new(Registration { api, split, ready }));
    // SAFETY: `api` is the connection's FTS5 API (checked non-null by `fts5_api`), valid for
    // the connection's life; FTS5 copies `tokenizer`, keeps `registration` until it calls
    // `drop_registration`, and gives it back to `create` as its first argument.
    let rc = unsafe {
        let create_tokenizer = (*api)
            .xCreateTokenizer
            .ok_or_else(|| misuse("no xCreateTokenizer"))?;
        create_tokenizer(
            api,
            name.as_ptr(),
            registration.cast(),
            &mut tokenizer,
            Some(drop_registration),
        )
    };
    if rc != ffi::SQLITE_OK {
        // SAFETY: FTS5 did not take it: it is still this function's.
        drop(unsafe { Box::from_raw(registration) });
        return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None));
    }
    Ok(())
}

/// What a registration keeps: the API (to find `unicode61` when a table is opened) and the
/// split.
struct Registration {
    api: *mut ffi::fts5_api,
    split: Split,
    /// Whether documents come as their terms ([`register_ready`]).
    ready: bool,
}

/// One tokenizer instance, made for a table: `unicode61` made with the table's arguments.
struct Instance {
    inner: ffi::fts5_tokenizer,
    inner_instance: *mut ffi::Fts5Tokenizer,
    split: Split,
    ready: bool,
}

/// The byte before each term in a text of terms ([`Terms::of`]): a term at the next place, or
/// at the same place as the term before it. No term holds either byte: `unicode61` makes
/// terms of the categories it is given, and a [`Split`]'s tokens are text it chose, never a
/// control character (checked in debug builds as the terms are made).
const NEXT: u8 = 0x01;
const COLOCATED: u8 = 0x02;

/// The terms of texts, as a tokenizer registered with a [`Split`] and ARGS cuts a document,
/// for a table whose tokenizer [`register_ready`] registered. An instance of the tokenizer of
/// its own (found through an in-memory connection), used from one thread.
pub(crate) struct Terms {
    instance: *mut ffi::Fts5Tokenizer,
    /// Where `unicode61` was found; kept while its instance is.
    _conn: Connection,
}

impl Terms {
    /// The terms of `split` over `unicode61` made with `args` (as a table's `tokenize` option
    /// would give them, one word each).
    pub(crate) fn new(split: Split, args: &[&str]) -> rusqlite::Result<Terms> {
        let conn = Connection::open_in_memory()?;
        let api = fts5_api(&conn)?;
        let args: Vec<CString> = (args.iter())
            .map(|a| CString::new(*a).map_err(|_| misuse("a tokenizer argument holds a NUL")))
            .collect::<rusqlite::Result<_>>()?;
        let mut arg_ptrs: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
        let mut registration = Registration {
            api,
            split,
            ready: false,
        };
        let mut instance = ptr::null_mut();
        // SAFETY: `registration` outlives the call, which reads it only to find `unicode61`
        // through `api` (the connection's, alive as long as `conn`); `arg_ptrs` points to
        // `args`' strings, alive during the call, which `unicode61` copies what it keeps of.
        let rc = unsafe {
            create(
                (&mut registration as *mut Registration).cast(),
                arg_ptrs.as_mut_ptr(),
                arg_ptrs.len() as c_int,
                &mut instance,
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None));
        }
        Ok(Terms {
            instance,
            _conn: conn,
        })
    }

    /// The terms of `text`, a document, each after the byte that says its place; and how
    /// many places they take, the document's size as FTS5 counts it.
    pub(crate) fn of(&mut self, text: &str) -> rusqlite::Result<(String, i64)> {
        let mut out = Collected {
            terms: Vec::with_capacity(text.len() + text.len() / 4),
            places: 0,
        };
        let n = c_int::try_from(text.len()).map_err(|_| misuse("a text of 2 GiB or more"))?;
        // SAFETY: `instance` is the one `new` made, alive until `drop`; `text` holds `n`
        // bytes; `collect` is given `out`, alive during the call.
        let rc = unsafe {
            tokenize(
                self.instance,
                (&mut out as *mut Collected).cast(),
                ffi::FTS5_TOKENIZE_DOCUMENT,
                text.as_ptr().cast(),
                n,
                Some(collect),
            )
        };
        if rc != ffi::SQLITE_OK {
            return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None));
        }
        // `unicode61` writes its terms in UTF-8, and a split's are pieces of `text`: checked
        // with SIMD, as the text was, not again byte by byte.
        if simdutf8::basic::from_utf8(&out.terms).is_err() {
            return Err(misuse("a term that is not UTF-8"));
        }
        // SAFETY: checked just above.
        let terms = unsafe { String::from_utf8_unchecked(out.terms) };
        Ok((terms, out.places))
    }
}

impl Drop for Terms {
    fn drop(&mut self) {
        // SAFETY: the instance `create` made, deleted once.
        unsafe { delete(self.instance) }
    }
}

/// What [`Terms::of`] gathers.
struct Collected {
    terms: Vec<u8>,
    /// Places taken: each term not colocated, and a first one that is (as FTS5 counts a
    /// document's size).
    places: i64,
}

/// [`Terms::of`]'s callback: appends a term to the [`Collected`] at `out`.
unsafe extern "C" fn collect(
    out: *mut c_void,
    tflags: c_int,
    term: *const c_char,
    n_term: c_int,
    _start: c_int,
    _end: c_int,
) -> c_int {
    // SAFETY: `out` is the `Collected` `Terms::of` passed, alive during the call; `term`
    // holds `n_term` bytes, the tokenizer's, during this call.
    let (out, term) = unsafe {
        let term = match n_term {
            n if n > 0 && !term.is_null() => std::slice::from_raw_parts(term.cast(), n as usize),
            _ => &[][..],
        };
        (&mut *out.cast::<Collected>(), term)
    };
    // Checked in tests: a panic here could not unwind into SQLite.
    if cfg!(debug_assertions) && term.iter().any(|b| *b == NEXT || *b == COLOCATED) {
        return ffi::SQLITE_ERROR;
    }
    let colocated = tflags & ffi::FTS5_TOKEN_COLOCATED != 0;
    if !colocated || out.places == 0 {
        out.places += 1;
    }
    out.terms.push(if colocated { COLOCATED } else { NEXT });
    out.terms.extend_from_slice(term);
    ffi::SQLITE_OK
}

/// The connection's FTS5 API, as SQLite hands it out: a pointer bound to `SELECT fts5(?1)`.
fn fts5_api(conn: &Connection) -> rusqlite::Result<*mut ffi::fts5_api> {
    let mut api: *mut ffi::fts5_api = ptr::null_mut();
    // SAFETY: the statement is prepared, bound, stepped and finalized on this connection's
    // handle, which outlives it; the bound pointer is to `api`, which outlives the statement,
    // and is of the type `fts5_api_ptr` names, which FTS5 writes through.
    let rc = unsafe {
        let db = conn.handle();
        let mut stmt = ptr::null_mut();
        let sql = c"SELECT fts5(?1)";
        let mut rc = ffi::sqlite3_prepare_v2(db, sql.as_ptr(), -1, &mut stmt, ptr::null_mut());
        if rc == ffi::SQLITE_OK {
            let out = (&mut api as *mut *mut ffi::fts5_api).cast();
            rc = ffi::sqlite3_bind_pointer(stmt, 1, out, c"fts5_api_ptr".as_ptr(), None);
            if rc == ffi::SQLITE_OK && ffi::sqlite3_step(stmt) != ffi::SQLITE_ROW {
                rc = ffi::SQLITE_ERROR;
            }
        }
        ffi::sqlite3_finalize(stmt);
        rc
    };
    if rc != ffi::SQLITE_OK || api.is_null() {
        return Err(misuse("this SQLite has no FTS5"));
    }
    Ok(api)
}

fn misuse(why: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        ffi::Error::new(ffi::SQLITE_MISUSE),
        Some(format!("fts5: {why}")),
    )
}

unsafe extern "C" fn drop_registration(registration: *mut c_void) {
    // SAFETY: FTS5 calls this once, with the pointer `register` made by `Box::into_raw`.
    drop(unsafe { Box::from_raw(registration.cast::<Registration>()) });
}

unsafe extern "C" fn create(
    registration: *mut c_void,
    args: *mut *const c_char,
    n_args: c_int,
    out: *mut *mut ffi::Fts5Tokenizer,
) -> c_int {
    // SAFETY: `registration` is the pointer `register` gave FTS5, alive until
    // `drop_registration`; `args` and `out` are FTS5's, passed on as its API says.
    unsafe {
        let registration = &*registration.cast::<Registration>();
        let api = registration.api;
        let Some(find) = (*api).xFindTokenizer else {
            return ffi::SQLITE_ERROR;
        };
        let mut inner = ffi::fts5_tokenizer {
            xCreate: None,
            xDelete: None,
            xTokenize: None,
        };
        let mut inner_data = ptr::null_mut();
        let rc = find(api, c"unicode61".as_ptr(), &mut inner_data, &mut inner);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let (Some(inner_create), Some(_), Some(_)) =
            (inner.xCreate, inner.xDelete, inner.xTokenize)
        else {
            return ffi::SQLITE_ERROR;
        };
        let mut inner_instance = ptr::null_mut();
        let rc = inner_create(inner_data, args, n_args, &mut inner_instance);
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        let instance = Instance {
            inner,
            inner_instance,
            split: registration.split,
            ready: registration.ready,
        };
        *out = Box::into_raw(Box::new(instance)).cast();
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn delete(instance: *mut ffi::Fts5Tokenizer) {
    // SAFETY: FTS5 calls this once per instance `create` made; `unicode61`'s own instance is
    // deleted by its own `xDelete`, which `create` checked is there.
    unsafe {
        let instance = Box::from_raw(instance.cast::<Instance>());
        if let Some(inner_delete) = instance.inner.xDelete {
            inner_delete(instance.inner_instance);
        }
    }
}

/// FTS5's callback for each term.
type TokenCallback =
    unsafe extern "C" fn(*mut c_void, c_int, *const c_char, c_int, c_int, c_int) -> c_int;

unsafe extern "C" fn tokenize(
    instance: *mut ffi::Fts5Tokenizer,
    ctx: *mut c_void,
    flags: c_int,
    text: *const c_char,
    n_text: c_int,
    token: Option<TokenCallback>,
) -> c_int {
    let Some(token) = token else {
        return ffi::SQLITE_ERROR;
    };
    // SAFETY: `instance` is one `create` made; `text` holds `n_text` bytes (FTS5 may pass a
    // null pointer with none).
    let (instance, bytes) = unsafe {
        let bytes = match n_text {
            n if n > 0 && !text.is_null() => std::slice::from_raw_parts(text.cast(), n as usize),
            _ => &[][..],
        };
        (&*instance.cast::<Instance>(), bytes)
    };
    let call = Call {
        instance,
        ctx,
        flags,
        token,
        bytes,
    };
    if instance.ready && flags & ffi::FTS5_TOKENIZE_DOCUMENT != 0 {
        return call.ready();
    }
    let Ok(text) = simdutf8::basic::from_utf8(bytes) else {
        return call.words(0..bytes.len());
    };
    let query = flags & ffi::FTS5_TOKENIZE_QUERY != 0;
    let mut rc = ffi::SQLITE_OK;
    let split = catch_unwind(AssertUnwindSafe(|| {
        (instance.split)(text, query, &mut |piece| {
            rc = match piece {
                Piece::Words(range) => call.words(range),
                Piece::Token { range, colocated } => call.term(range, colocated),
            };
            rc == ffi::SQLITE_OK
        })
    }));
    match split {
        Ok(()) => rc,
        Err(_) => ffi::SQLITE_ERROR,
    }
}

/// One call of [`tokenize`]: what it passes on to FTS5 and to `unicode61`.
struct Call<'a> {
    instance: &'a Instance,
    ctx: *mut c_void,
    flags: c_int,
    token: TokenCallback,
    bytes: &'a [u8],
}

impl Call<'_> {
    /// Gives the bytes `range` to FTS5 as one term.
    fn term(&self, range: Range<usize>, colocated: bool) -> c_int {
        let tflags = if colocated {
            ffi::FTS5_TOKEN_COLOCATED
        } else {
            0
        };
        let Some(piece) = self.bytes.get(range.clone()) else {
            return ffi::SQLITE_ERROR;
        };
        // SAFETY: `token` and `ctx` are FTS5's for this call; the term is `piece`'s bytes,
        // inside the text FTS5 gave.
        unsafe {
            (self.token)(
                self.ctx,
                tflags,
                piece.as_ptr().cast(),
                piece.len() as c_int,
                range.start as c_int,
                range.end as c_int,
            )
        }
    }

    /// Gives FTS5 the terms of a text [`Terms::of`] made, each at the place its byte says;
    /// bytes before the first such byte are no term.
    fn ready(&self) -> c_int {
        // Terms are a few bytes long: a plain scan is quicker than a vector search per term.
        let place = |b: &u8| *b == NEXT || *b == COLOCATED;
        let mut at = self
            .bytes
            .iter()
            .position(place)
            .unwrap_or(self.bytes.len());
        while at < self.bytes.len() {
            let rest = &self.bytes[at + 1..];
            let end = at + 1 + rest.iter().position(place).unwrap_or(rest.len());
            let rc = self.term(at + 1..end, self.bytes[at] == COLOCATED);
            if rc != ffi::SQLITE_OK {
                return rc;
            }
            at = end;
        }
        ffi::SQLITE_OK
    }

    /// Has `unicode61` cut the bytes `range` into terms, given to FTS5 at their places in the
    /// whole text.
    fn words(&self, range: Range<usize>) -> c_int {
        let Some(piece) = self.bytes.get(range.clone()) else {
            return ffi::SQLITE_ERROR;
        };
        let mut shifted = Shifted {
            ctx: self.ctx,
            token: self.token,
            by: range.start as c_int,
        };
        let Some(inner_tokenize) = self.instance.inner.xTokenize else {
            return ffi::SQLITE_ERROR;
        };
        // Offsets that need no shift (the whole of most texts) go to FTS5's own callback.
        let (ctx, callback): (*mut c_void, TokenCallback) = match range.start {
            0 => (self.ctx, self.token),
            _ => ((&mut shifted as *mut Shifted).cast(), shift),
        };
        // SAFETY: `unicode61`'s instance is alive while ours is; it reads `piece` only during
        // the call, and calls `callback` with `ctx`: FTS5's own for this call, or `shifted`,
        // which outlives the call.
        unsafe {
            inner_tokenize(
                self.instance.inner_instance,
                ctx,
                self.flags,
                piece.as_ptr().cast(),
                piece.len() as c_int,
                Some(callback),
            )
        }
    }
}

/// FTS5's callback, for terms whose offsets are from a piece `by` bytes into the text.
struct Shifted {
    ctx: *mut c_void,
    token: TokenCallback,
    by: c_int,
}

unsafe extern "C" fn shift(
    shifted: *mut c_void,
    tflags: c_int,
    term: *const c_char,
    n_term: c_int,
    start: c_int,
    end: c_int,
) -> c_int {
    // SAFETY: `shifted` is the `Shifted` that `Call::words` passed, alive during the call
    // that calls this; the rest is `unicode61`'s, passed on to FTS5's callback unchanged.
    unsafe {
        let s = &*shifted.cast::<Shifted>();
        (s.token)(s.ctx, tflags, term, n_term, start + s.by, end + s.by)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs of letters for runs of `x`, the rest to `unicode61`.
    fn xx(text: &str, _query: bool, emit: &mut dyn FnMut(Piece) -> bool) {
        match text.find("xx") {
            Some(at) => {
                let _ = (at > 0 && !emit(Piece::Words(0..at)))
                    || !emit(Piece::Token {
                        range: at..at + 2,
                        colocated: false,
                    })
                    || !emit(Piece::Words(at + 2..text.len()));
            }
            None => {
                emit(Piece::Words(0..text.len()));
            }
        }
    }

    #[test]
    fn a_registered_tokenizer_cuts_its_pieces_and_leaves_the_rest_to_unicode61() {
        let conn = Connection::open_in_memory().unwrap();
        register(&conn, "xx", xx).unwrap();
        conn.execute_batch(
            "CREATE VIRTUAL TABLE t USING fts5 (body, tokenize = 'xx remove_diacritics 2');
             CREATE VIRTUAL TABLE v USING fts5vocab (t, instance);
             INSERT INTO t (body) VALUES ('Café xxAB done');",
        )
        .unwrap();
        let terms: Vec<(String, i64)> = (conn
            .prepare("SELECT term, offset FROM v ORDER BY offset"))
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
        let want = [("cafe", 0), ("xx", 1), ("ab", 2), ("done", 3)];
        let want: Vec<(String, i64)> = want.iter().map(|(t, o)| (t.to_string(), *o)).collect();
        assert_eq!(terms, want);
        let marked: String = conn
            .query_row(
                "SELECT highlight(t, 0, '[', ']') FROM t WHERE t MATCH 'ab'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(marked, "Café xx[AB] done");
    }

    #[test]
    fn a_table_of_an_unregistered_tokenizer_cannot_be_made() {
        let conn = Connection::open_in_memory().unwrap();
        let made = conn.execute_batch("CREATE VIRTUAL TABLE t USING fts5 (body, tokenize = 'xx')");
        assert!(made.is_err());
    }
}
