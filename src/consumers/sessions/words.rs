//! How the session index cuts text into terms, for every script. Scripts that put spaces
//! between words (Latin, Cyrillic, Greek, Arabic, Devanagari…) are left to SQLite's
//! `unicode61` (lower case, diacritics removed), as before. Scripts that do not (Chinese,
//! Japanese, Korean with its particles attached, Thai, Lao, Khmer, Myanmar) are cut into
//! overlapping pairs of characters, as Lucene's CJK analyzer does: `连接池` is `连接` `接池`, so a
//! word of two characters or more is found inside running text as the pairs it is made of, in
//! a row (a query is cut the same way, and FTS5 reads the pieces of one word as a phrase). A
//! character is a grapheme cluster (UAX #29), so a Thai or Khmer vowel sign stays with its
//! consonant and a snippet never marks half of one. In the index, the last character of each
//! run is also a term of its own at the last pair's place, so that a query of one character
//! (`池*`, see `query::fts_word`) finds it wherever it is: as the first of a pair, or last.
//!
//! Registered on each connection that reads or writes the index as the FTS5 tokenizer
//! [`TOKENIZER`] (`platform::fts5`), and as [`TERMS`], the index's own: a message is given it
//! as its terms ([`terms_of`]), made on the thread that reads the records beside the one that
//! writes the index.

use crate::platform::fts5::{Piece, Terms};
use std::cell::RefCell;
use std::ops::Range;
use unicode_segmentation::UnicodeSegmentation;

/// The tokenizer's name, as the snippet table names it.
pub(crate) const TOKENIZER: &str = "words";

/// The index's tokenizer, as its schema names it: a message is given as its terms
/// ([`terms_of`]), a query is cut as [`TOKENIZER`] cuts it (`platform::fts5::register_ready`).
pub(crate) const TERMS: &str = "terms";

/// What `unicode61` is given under [`TOKENIZER`]: diacritics removed, and combining marks
/// (`M*`) part of words, so that a word of Devanagari, Bengali or Tamil is one term with its
/// vowel signs rather than pieces cut at each (Latin letters still lose theirs).
const UNICODE61: [&str; 4] = ["remove_diacritics", "2", "categories", "L* N* Co M*"];

/// The `tokenize` option, as SQL (quotes doubled), of a table whose text `over` (the index's
/// [`TERMS`], the snippets' [`TOKENIZER`], or `porter unicode61` for stems) cuts with
/// [`UNICODE61`]'s arguments.
pub(crate) fn tokenize_option(over: &str) -> String {
    let args = UNICODE61.map(|a| match a.contains(' ') {
        true => format!("''{a}''"),
        false => a.to_owned(),
    });
    format!("'{over} {}'", args.join(" "))
}

thread_local! {
    /// Each thread's instance of [`TOKENIZER`], made when it first cuts a message.
    static THREAD_TERMS: RefCell<Option<Terms>> = const { RefCell::new(None) };
}

/// The terms of `text`, a message, as the index's [`TERMS`] takes them: what [`TOKENIZER`]
/// makes of it; and its size in places, as FTS5 counts it (`platform::fts5::Terms::of`).
pub(crate) fn terms_of(text: &str) -> rusqlite::Result<(String, i64)> {
    THREAD_TERMS.with_borrow_mut(|terms| {
        let terms = match terms {
            Some(t) => t,
            None => terms.insert(Terms::new(split, &UNICODE61)?),
        };
        terms.of(text)
    })
}

/// Cuts `text` (a message to index, or with `query` a query) into what FTS5 makes terms of,
/// in order, giving each to `emit` until it returns false.
pub(crate) fn split(text: &str, query: bool, emit: &mut dyn FnMut(Piece) -> bool) {
    let mut spaced_from = 0;
    let mut at = 0;
    while let Some(start) = next_wide(text, at) {
        let c = text[start..]
            .chars()
            .next()
            .expect("a wide byte starts a character");
        at = start + c.len_utf8();
        if !unspaced(c) {
            continue;
        }
        let more = text[at..].char_indices();
        let run_end = (more
            .take_while(|&(_, c)| unspaced(c) || continues(c))
            .last())
        .map_or(at, |(i, c)| at + i + c.len_utf8());
        if spaced_from < start && !emit(Piece::Words(spaced_from..start)) {
            return;
        }
        if !pairs(text, start..run_end, query, emit) {
            return;
        }
        (spaced_from, at) = (run_end, run_end);
    }
    if spaced_from < text.len() {
        emit(Piece::Words(spaced_from..text.len()));
    }
}

/// Where the next character of three bytes or more in UTF-8 starts, from `from` on. Every
/// character of the scripts cut in pairs is past U+0E00, so one: its first byte is 0xE0 or
/// more, which no other byte of UTF-8 is (the rest of a text is skipped byte by byte, not
/// decoded).
fn next_wide(text: &str, from: usize) -> Option<usize> {
    let bytes = &text.as_bytes()[from..];
    let wide = |b: &u8| *b >= 0xE0;
    // Blocks of 32 bytes tested without an early exit, which the compiler makes a few vector
    // instructions: the text is mostly ASCII, and this runs over every message indexed.
    let mut blocks = bytes.chunks_exact(32);
    let mut skipped = 0;
    for block in blocks.by_ref() {
        if block.iter().fold(false, |any, b| any | wide(b)) {
            return block.iter().position(wide).map(|i| from + skipped + i);
        }
        skipped += 32;
    }
    let tail = blocks.remainder().iter().position(wide)?;
    Some(from + skipped + tail)
}

/// True when `word` is one character of a script cut in pairs: a query of it stands for every
/// term it starts.
pub(crate) fn one_unspaced_character(word: &str) -> bool {
    let mut graphemes = word.graphemes(true);
    let first = graphemes.next().and_then(|g| g.chars().next());
    first.is_some_and(unspaced) && graphemes.next().is_none()
}

/// Emits the run `run` of `text` as its overlapping pairs of characters, and (in the index)
/// its last character at the last pair's place; false when `emit` said to stop.
fn pairs(text: &str, run: Range<usize>, query: bool, emit: &mut dyn FnMut(Piece) -> bool) -> bool {
    let part = &text[run.clone()];
    let at = |(i, unit): (usize, &str)| run.start + i..run.start + i + unit.len();
    // A run of ideographs, kana and Hangul syllables alone (most of Chinese, Japanese and
    // Korean text) is a character a grapheme: no need to find where its graphemes end.
    if part.chars().all(own_grapheme) {
        let chars = part
            .char_indices()
            .map(|(i, c)| (i, &part[i..i + c.len_utf8()]));
        emit_pairs(chars.map(at), query, emit)
    } else {
        emit_pairs(part.grapheme_indices(true).map(at), query, emit)
    }
}

/// Emits the overlapping pairs of `units` (the characters of a run, in order), and (in the
/// index) the last at the last pair's place; a run of one character is that character alone.
fn emit_pairs(
    units: impl Iterator<Item = Range<usize>>,
    query: bool,
    emit: &mut dyn FnMut(Piece) -> bool,
) -> bool {
    let token = |range, colocated| Piece::Token { range, colocated };
    let (mut before, mut count): (Option<Range<usize>>, usize) = (None, 0);
    for unit in units {
        if let Some(first) = before.replace(unit.clone())
            && !emit(token(first.start..unit.end, false))
        {
            return false;
        }
        count += 1;
    }
    match before {
        Some(one) if count == 1 => emit(token(one, false)),
        Some(last) if !query => emit(token(last, true)),
        _ => true,
    }
}

/// True for a character that is a grapheme of its own beside any other such: an ideograph,
/// kana (not the combining sound marks), or a Hangul syllable (not the jamo that join one).
fn own_grapheme(c: char) -> bool {
    matches!(c as u32,
        0x3041..=0x3096 | 0x309D..=0x309F // Hiragana, but the combining marks
        | 0x30A1..=0x30FA | 0x30FC..=0x30FF // Katakana
        | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x3134F // Han
        | 0xAC00..=0xD7A3 // Hangul syllables
    )
}

/// True for a character of a script written without spaces between words (or, for Korean,
/// with its particles attached to them): Han, kana, Hangul, Thai, Lao, Khmer, Myanmar, and
/// the marks used with them; not their punctuation.
fn unspaced(c: char) -> bool {
    // Most characters are below every range, and the wide ones of code and tool output
    // (punctuation, arrows, box drawing) between them: a comparison or two for those.
    let n = c as u32;
    if n < 0x0E00 || (0x2000..0x2E80).contains(&n) {
        return false;
    }
    // Then the commonest of a text that has them, ideographs and kana, in two comparisons,
    // before the ranges below, which are tried one by one.
    if (0x4E00..=0x9FFF).contains(&n) || (0x3040..=0x30FA).contains(&n) {
        return true;
    }
    matches!(c as u32,
        0x0E00..=0x0E4E | 0x0E50..=0x0E59 // Thai, but its punctuation ๏ ๚ ๛
        | 0x0E80..=0x0EFF // Lao
        | 0x1000..=0x1049 | 0x1050..=0x109F // Myanmar, but its punctuation
        | 0x1100..=0x11FF // Hangul Jamo
        | 0x1780..=0x17D3 | 0x17D7 | 0x17DC..=0x17FF // Khmer, but its punctuation
        | 0x19E0..=0x19FF // Khmer symbols
        | 0x2E80..=0x2FDF // CJK and Kangxi radicals
        | 0x3005..=0x3007 | 0x3021..=0x3029 | 0x3031..=0x3035 | 0x303B..=0x303C // 々 〆 〇 …
        | 0x3040..=0x309F // Hiragana
        | 0x30A0..=0x30FA | 0x30FC..=0x30FF // Katakana, but the middle dot ・
        | 0x3100..=0x312F | 0x31A0..=0x31BF // Bopomofo
        | 0x3130..=0x318F // Hangul compatibility Jamo
        | 0x31F0..=0x31FF // Katakana phonetic extensions
        | 0x3400..=0x4DBF | 0x4E00..=0x9FFF // CJK ideographs
        | 0xA960..=0xA97F | 0xD7B0..=0xD7FF // Hangul Jamo extensions
        | 0xA9E0..=0xA9FF | 0xAA60..=0xAA7F // Myanmar extensions
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0xFF66..=0xFF9F | 0xFFA0..=0xFFDC // half-width Katakana and Hangul
        | 0x1B000..=0x1B16F // Kana supplement and extensions
        | 0x20000..=0x3134F // CJK ideographs, extensions B to H
    )
}

/// True for a character that continues the one before it (a variation selector after an
/// ideograph), which a grapheme cluster keeps with it.
fn continues(c: char) -> bool {
    matches!(c as u32, 0xFE00..=0xFE0F | 0xE0100..=0xE01EF | 0x200D)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `text` is cut into: the spaced parts as they are, each pair or character with a
    /// `+` when it shares the place of the one before.
    fn cut(text: &str, query: bool) -> Vec<String> {
        let mut pieces = Vec::new();
        split(text, query, &mut |p| {
            pieces.push(match p {
                Piece::Words(r) => format!("[{}]", &text[r]),
                Piece::Token { range, colocated } => {
                    format!("{}{}", &text[range], if colocated { "+" } else { "" })
                }
            });
            true
        });
        pieces
    }

    /// `pairs` takes each character of a run of [`own_grapheme`] ones for a grapheme: true of
    /// every such character beside every other (a sample of each block), as UAX #29 says.
    #[test]
    fn a_character_taken_for_a_grapheme_of_its_own_is_one() {
        let ranges = [
            0x3041..=0x309F,
            0x30A1..=0x30FF,
            0x3400..=0x4DBF,
            0x4E00..=0x9FFF,
            0xF900..=0xFAFF,
            0x20000..=0x3134F,
            0xAC00..=0xD7A3,
        ];
        let own: Vec<char> = (ranges.iter().cloned().flatten())
            .filter_map(char::from_u32)
            .filter(|c| own_grapheme(*c))
            .collect();
        assert!(own.len() > 90_000, "{}", own.len());
        let others: Vec<char> = own.iter().step_by(4999).copied().collect();
        for c in &own {
            for d in &others {
                let two = format!("{c}{d}{c}");
                assert_eq!(two.graphemes(true).count(), 3, "{c:?} {d:?}");
            }
        }
        // Those it leaves to the graphemes' rules do join the character before them.
        for (text, joined) in [("か\u{3099}", 1), ("한\u{11A8}", 1), ("漢\u{FE00}", 1)] {
            assert!(!text.chars().all(own_grapheme), "{text}");
            assert_eq!(text.graphemes(true).count(), joined, "{text}");
        }
    }

    #[test]
    fn runs_without_spaces_are_pairs_and_the_rest_is_left_to_unicode61() {
        assert_eq!(cut("plain text, café", false), ["[plain text, café]"]);
        assert_eq!(
            cut("fix 连接池 in db.rs", false),
            ["[fix ]", "连接", "接池", "池+", "[ in db.rs]"]
        );
        assert_eq!(cut("连接池", true), ["连接", "接池"]);
        assert_eq!(cut("API连接", true), ["[API]", "连接"]);
        assert_eq!(cut("池。", false), ["池", "[。]"]);
        // Other wide characters (a dash, an emoji) stay with the spaced text.
        assert_eq!(cut("— 连接 😀", false), ["[— ]", "连接", "接+", "[ 😀]"]);
        // Korean: a word with its particle is the pairs of both.
        assert_eq!(cut("결제를 확인", true), ["결제", "제를", "[ ]", "확인"]);
    }

    #[test]
    fn a_character_is_a_grapheme_cluster() {
        // ข้ is a consonant and its tone mark: one character of the pairs.
        assert_eq!(cut("ข้อมูล", true), ["ข้อ", "อมู", "มูล"]);
        // An ideograph with a variation selector stays whole.
        assert_eq!(cut("葛\u{E0100}城", true), ["葛\u{E0100}城"]);
    }

    #[test]
    fn the_index_schema_names_this_tokenizer() {
        let schema = include_str!("schema.sql");
        assert!(schema.contains(&format!("tokenize = {}", tokenize_option(TERMS))));
    }

    /// The index's terms of a message are the ones [`TOKENIZER`] makes of it, at the same
    /// places (the last character of a run at its last pair's), and a query finds them as it
    /// finds its own; the tables are of one connection, as the index's.
    #[test]
    fn a_message_given_as_its_terms_is_indexed_as_its_text_would_be() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        crate::consumers::sessions::store::register_words(&conn).unwrap();
        for (name, over) in [("text", TOKENIZER), ("given", TERMS)] {
            conn.execute_batch(&format!(
                "CREATE VIRTUAL TABLE {name} USING fts5 (body, content = '', tokenize = {});
                 CREATE VIRTUAL TABLE {name}_v USING fts5vocab ({name}, instance);",
                tokenize_option(over)
            ))
            .unwrap();
        }
        let texts = [
            "Café déjà vu: the cargo build failed, exit_code 101",
            "连接池的内存泄漏 in src/pool.rs，トークンの有効期限",
            "ฐานข้อมูลล่ม และ 결제를 다시 시도했습니다 Привет मेरा नाम",
            "",
            "一",
        ];
        for (id, text) in texts.iter().enumerate() {
            let insert = |table: &str, body: &str| {
                conn.execute(
                    &format!("INSERT INTO {table} (rowid, body) VALUES (?1, ?2)"),
                    rusqlite::params![id as i64 + 1, body],
                )
                .unwrap();
            };
            insert("text", text);
            let (terms, places) = terms_of(text).unwrap();
            insert("given", &terms);
            // FTS5's size of the text: a varint, one byte below 128.
            let size: Vec<u8> = conn
                .query_row(
                    "SELECT sz FROM text_docsize WHERE id = ?1",
                    [id as i64 + 1],
                    |r| r.get(0),
                )
                .unwrap();
            assert!(size.len() == 1 && size[0] < 128, "{size:?}");
            assert_eq!(places, i64::from(size[0]), "{text}");
        }
        let instances = |table: &str| -> Vec<(String, i64, i64)> {
            let sql = format!("SELECT term, doc, offset FROM {table}_v ORDER BY doc, offset, term");
            let mut stmt = conn.prepare(&sql).unwrap();
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)));
            rows.unwrap().map(Result::unwrap).collect()
        };
        let given = instances("given");
        assert!(given.len() > 40, "{given:?}");
        assert_eq!(given, instances("text"));
        for query in [
            "内存",
            "\"cargo build\"",
            "有効期限",
            "결제",
            "데이",
            "caf*",
            "限",
        ] {
            let hits = |table: &str| -> Vec<i64> {
                let sql =
                    format!("SELECT rowid FROM {table} WHERE {table} MATCH ?1 ORDER BY rowid");
                let mut stmt = conn.prepare(&sql).unwrap();
                let rows = stmt.query_map([query], |r| r.get(0)).unwrap();
                rows.map(Result::unwrap).collect()
            };
            assert_eq!(hits("given"), hits("text"), "{query}");
            assert_eq!(hits("given").is_empty(), query == "데이", "{query}");
        }
    }

    #[test]
    fn stopping_stops() {
        let mut n = 0;
        split("一二三四五 six", false, &mut |_| {
            n += 1;
            n < 2
        });
        assert_eq!(n, 2);
    }

    #[test]
    fn one_character_is_told_from_a_word() {
        assert!(one_unspaced_character("池"));
        assert!(one_unspaced_character("ข้"));
        assert!(!one_unspaced_character("连接"));
        assert!(!one_unspaced_character("a"));
        assert!(!one_unspaced_character(""));
    }
}
