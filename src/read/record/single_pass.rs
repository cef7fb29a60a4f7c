//! A single-pass JSON checker for the common case: it answers "certainly valid" for a record
//! the full rule of [`super::validate`] accepts, and "not sure" for anything else, which then
//! goes to the slow path for the verdict and its reason.
//!
//! It never says "valid" where the rule says "invalid": whatever it does not check exactly
//! (numbers that could overflow an `f64`, deep nesting) is "not sure". What it does check is
//! JSON's grammar (RFC 8259, where `\u` takes any four hex digits, a lone surrogate half
//! included), UTF-8, and control characters in strings.

/// Deeper nesting than this is left to the slow path, which allows 127 levels.
const MAX_DEPTH: u32 = 64;

/// A number with more digits or a larger exponent than this might overflow an `f64`, which
/// is rejected; it is left to the slow path.
const MAX_MAGNITUDE: i64 = 300;

/// True when `bytes` is certainly one JSON value that [`super::validate`] accepts.
pub fn certainly_valid(bytes: &[u8]) -> bool {
    simdutf8::basic::from_utf8(bytes).is_ok() && Checker { bytes, at: 0 }.value_then_end()
}

struct Checker<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Checker<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_space(&mut self) -> Option<u8> {
        while let Some(b) = self.peek() {
            if !matches!(b, b' ' | b'\t' | b'\r' | b'\n') {
                return Some(b);
            }
            self.at += 1;
        }
        None
    }

    /// One value, iteratively (a stack of bits: 1 for an object, 0 for an array), then only
    /// white space.
    fn value_then_end(mut self) -> bool {
        let mut stack: u64 = 0;
        let mut depth: u32 = 0;
        'value: loop {
            // A value is expected here.
            match self.skip_space() {
                Some(open @ (b'{' | b'[')) => {
                    self.at += 1;
                    let (close, object) = if open == b'{' { (b'}', 1) } else { (b']', 0) };
                    if self.skip_space() == Some(close) {
                        self.at += 1;
                    } else {
                        if depth == MAX_DEPTH {
                            return false;
                        }
                        stack = stack << 1 | object;
                        depth += 1;
                        if object == 1 && !self.key() {
                            return false;
                        }
                        continue 'value;
                    }
                }
                Some(b'"') => {
                    self.at += 1;
                    if !self.string() {
                        return false;
                    }
                }
                Some(b't') => {
                    if !self.literal(b"true") {
                        return false;
                    }
                }
                Some(b'f') => {
                    if !self.literal(b"false") {
                        return false;
                    }
                }
                Some(b'n') => {
                    if !self.literal(b"null") {
                        return false;
                    }
                }
                Some(b'-' | b'0'..=b'9') => {
                    if !self.number() {
                        return false;
                    }
                }
                _ => return false,
            }
            // A value ended: close containers until one takes a comma.
            loop {
                if depth == 0 {
                    return self.skip_space().is_none();
                }
                let in_object = stack & 1 == 1;
                match self.skip_space() {
                    Some(b',') => {
                        self.at += 1;
                        if in_object && !self.key() {
                            return false;
                        }
                        continue 'value;
                    }
                    Some(b'}') if in_object => {}
                    Some(b']') if !in_object => {}
                    _ => return false,
                }
                self.at += 1;
                stack >>= 1;
                depth -= 1;
            }
        }
    }

    /// A member's key and its colon.
    fn key(&mut self) -> bool {
        if self.skip_space() != Some(b'"') {
            return false;
        }
        self.at += 1;
        if !self.string() || self.skip_space() != Some(b':') {
            return false;
        }
        self.at += 1;
        true
    }

    /// The rest of a string after its opening quote, 64 bytes at a time: a block's quotes and
    /// backslashes become bit masks, the escaped bytes follow from the backslash runs without a
    /// branch per byte, and the first quote not escaped closes the string.
    fn string(&mut self) -> bool {
        let mut escaped_first = false;
        loop {
            let rest = &self.bytes[self.at..];
            if rest.is_empty() {
                return false;
            }
            let len = rest.len().min(64);
            let Masks {
                quotes,
                backslashes,
                controls,
            } = match rest.first_chunk::<64>() {
                Some(block) => block_masks(block),
                None => {
                    let mut block = [0; 64];
                    block[..len].copy_from_slice(&rest[..len]);
                    block_masks(&block)
                }
            };
            let escaped = escaped_bytes(backslashes, &mut escaped_first);
            let close = quotes & !escaped;
            let inside = match close {
                0 => u64::MAX >> (64 - len),
                _ => (close & close.wrapping_neg()) - 1,
            };
            // An escaped quote or backslash is always valid: only letters need a look.
            let letters = escaped & inside & !(quotes | backslashes);
            if controls & inside != 0 || !self.escapes_valid(letters) {
                return false;
            }
            if close != 0 {
                self.at += close.trailing_zeros() as usize + 1;
                return true;
            }
            self.at += len;
        }
    }

    /// Checks the byte after each backslash that escapes, at bit `i` for `self.at + i`. The
    /// loop looks each byte up without branching on it; `\u` escapes are rare and checked after.
    fn escapes_valid(&self, escaped: u64) -> bool {
        let mut seen = 0;
        let mut rest = escaped;
        while rest != 0 {
            seen |= ESCAPE[usize::from(self.bytes[self.at + rest.trailing_zeros() as usize])];
            rest &= rest - 1;
        }
        match seen {
            0 => true,
            UNICODE => self.unicode_escapes_valid(escaped),
            _ => false,
        }
    }

    /// Each `\u` must be followed by four hex digits, whatever they name: a surrogate half,
    /// paired or not, is as valid as any other code unit.
    #[cold]
    fn unicode_escapes_valid(&self, mut escaped: u64) -> bool {
        while escaped != 0 {
            let at = self.at + escaped.trailing_zeros() as usize;
            if self.bytes[at] == b'u' {
                let hex = self.bytes.get(at + 1..at + 5);
                if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                    return false;
                }
            }
            escaped &= escaped - 1;
        }
        true
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.bytes[self.at..].starts_with(word) {
            self.at += word.len();
            true
        } else {
            false
        }
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, of a size that cannot overflow.
    fn number(&mut self) -> bool {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        let int_digits = match self.peek() {
            Some(b'0') => {
                self.at += 1;
                1
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return false,
        };
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return false;
            }
        }
        let mut exponent = 0i64;
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            let start = self.at;
            let n = self.digits();
            if n == 0 || n > 4 {
                return false;
            }
            exponent =
                (self.bytes[start..self.at].iter()).fold(0, |e, d| e * 10 + i64::from(d - b'0'));
        }
        (int_digits as i64) + exponent <= MAX_MAGNITUDE
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - start
    }
}

/// What may follow a backslash: 0 for `"`, `\\`, `/`, `b`, `f`, `n`, `r`, `t`; [`UNICODE`] for
/// `u`; [`INVALID`] for anything else.
static ESCAPE: [u8; 256] = {
    let mut table = [INVALID; 256];
    let mut i = 0;
    let simple = b"\"\\/bfnrt";
    while i < simple.len() {
        table[simple[i] as usize] = 0;
        i += 1;
    }
    table[b'u' as usize] = UNICODE;
    table
};
const UNICODE: u8 = 1;
const INVALID: u8 = 2;

/// The bytes a backslash escapes, given a block's backslashes: in a run of backslashes, the
/// first, third, fifth… escape the byte after them. `escaped_first` says the block's first
/// byte is escaped by the block before, and on return says the same of the next block.
///
/// The run arithmetic is the one described in Langdale and Lemire, "Parsing Gigabytes of
/// JSON per Second" (2019): adding a run's start bit to the run carries through it.
fn escaped_bytes(backslashes: u64, escaped_first: &mut bool) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let carried = u64::from(*escaped_first);
    // An escaped backslash at bit 0 escapes nothing.
    let runs = backslashes & !carried;
    let starts = runs & !(runs << 1);
    // Runs that start on an odd bit vanish from the sum (the carry lands past their end).
    let sum = runs.wrapping_add(starts & !EVEN);
    let even_runs = runs & sum;
    let odd_runs = runs & !sum;
    let escapers = (even_runs & EVEN) | (odd_runs & !EVEN);
    *escaped_first = escapers >> 63 == 1;
    escapers << 1 | carried
}

/// Where a block's quotes, backslashes and control characters (below 0x20) are: bit `i` for
/// byte `i`.
struct Masks {
    quotes: u64,
    backslashes: u64,
    controls: u64,
}

/// A block's [`Masks`]: 32 bytes at a time where the processor has AVX2, else 16.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // calls the AVX2 version once the processor is known to have AVX2
fn block_masks(block: &[u8; 64]) -> Masks {
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, checked just above.
        unsafe { block_masks_avx2(block) }
    } else {
        block_masks_sse2(block)
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)] // SIMD loads
fn block_masks_avx2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_max_epu8, _mm256_movemask_epi8,
        _mm256_set1_epi8,
    };
    let mut masks = Masks {
        quotes: 0,
        backslashes: 0,
        controls: 0,
    };
    for (i, lane) in block.chunks_exact(32).enumerate() {
        // SAFETY: `lane` is 32 readable bytes, and an unaligned load needs no alignment.
        let v = unsafe { _mm256_loadu_si256(lane.as_ptr().cast::<__m256i>()) };
        let equal = |c: u8| _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(c as i8)));
        let space = _mm256_set1_epi8(0x1f);
        let below_space = _mm256_cmpeq_epi8(_mm256_max_epu8(v, space), space);
        let at = |m: i32| u64::from(m as u32) << (32 * i);
        masks.quotes |= at(equal(b'"'));
        masks.backslashes |= at(equal(b'\\'));
        masks.controls |= at(_mm256_movemask_epi8(below_space));
    }
    masks
}

/// A block's [`Masks`], sixteen bytes at a time.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // SIMD loads
fn block_masks_sse2(block: &[u8; 64]) -> Masks {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8, _mm_set1_epi8,
    };
    let mut masks = Masks {
        quotes: 0,
        backslashes: 0,
        controls: 0,
    };
    for (i, lane) in block.chunks_exact(16).enumerate() {
        // SAFETY: SSE2 is part of every x86_64 target, and `lane` is 16 readable bytes (an
        // unaligned load needs no alignment).
        let (q, b, c) = unsafe {
            let v = _mm_loadu_si128(lane.as_ptr().cast::<__m128i>());
            let equal = |c: u8| _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8)));
            let below_space =
                _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
            (equal(b'"'), equal(b'\\'), _mm_movemask_epi8(below_space))
        };
        let at = |m: i32| u64::from(m as u16) << (16 * i);
        masks.quotes |= at(q);
        masks.backslashes |= at(b);
        masks.controls |= at(c);
    }
    masks
}

#[cfg(not(target_arch = "x86_64"))]
fn block_masks(block: &[u8; 64]) -> Masks {
    block_masks_swar(block)
}

/// A block's [`Masks`], eight bytes at a time: a byte's high bit says "equal" (or "below"),
/// and a multiply gathers the high bits into one bit per byte. (On x86_64 only the tests use
/// it.)
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
fn block_masks_swar(block: &[u8; 64]) -> Masks {
    const ONES: u64 = u64::MAX / 255;
    const LOWS: u64 = ONES * 0x7f;
    let zero = |x: u64| !(((x & LOWS) + LOWS) | x) & !LOWS;
    let gather = |m: u64| ((m >> 7).wrapping_mul(0x0102_0408_1020_4080)) >> 56;
    let mut masks = Masks {
        quotes: 0,
        backslashes: 0,
        controls: 0,
    };
    for (i, word) in block.chunks_exact(8).enumerate() {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        masks.quotes |= gather(zero(w ^ (ONES * u64::from(b'"')))) << (8 * i);
        masks.backslashes |= gather(zero(w ^ (ONES * u64::from(b'\\')))) << (8 * i);
        masks.controls |= gather(zero(w & (ONES * 0xe0))) << (8 * i);
    }
    masks
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::read::record::{reference_accepts, validate};

    /// The escaped bytes of a whole line, one byte at a time.
    fn escaped_naively(bytes: &[u8]) -> Vec<bool> {
        let mut escaped = vec![false; bytes.len()];
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'\\' && i + 1 < bytes.len() {
                escaped[i + 1] = true;
                i += 2;
            } else {
                i += 1;
            }
        }
        escaped
    }

    proptest! {
        /// Every way of masking a block, on this processor, gives what a byte-by-byte look
        /// gives.
        #[test]
        #[allow(unsafe_code)] // calls the AVX2 version where the processor has AVX2
        fn every_way_of_masking_a_block_agrees(
            bytes in proptest::array::uniform32(prop_oneof![
                prop::sample::select(b"\"\\\x00\x1f\x20\x7f\x80\xff\xe0a".to_vec()),
                any::<u8>(),
            ]),
            more in proptest::array::uniform32(any::<u8>()),
        ) {
            let mut block = [0u8; 64];
            block[..32].copy_from_slice(&bytes);
            block[32..].copy_from_slice(&more);
            block.swap(5, 40);
            let bits = |f: &dyn Fn(u8) -> bool| {
                (block.iter().enumerate()).fold(0u64, |m, (i, b)| m | u64::from(f(*b)) << i)
            };
            let want = (bits(&|b| b == b'"'), bits(&|b| b == b'\\'), bits(&|b| b < 0x20));
            let as_tuple = |m: Masks| (m.quotes, m.backslashes, m.controls);
            prop_assert_eq!(as_tuple(block_masks(&block)), want);
            prop_assert_eq!(as_tuple(block_masks_swar(&block)), want);
            #[cfg(target_arch = "x86_64")]
            {
                prop_assert_eq!(as_tuple(block_masks_sse2(&block)), want);
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: the processor has AVX2.
                    prop_assert_eq!(as_tuple(unsafe { block_masks_avx2(&block) }), want);
                }
            }
        }

        /// Backslash runs of any length, across block boundaries, escape what a byte-by-byte
        /// reading says they escape.
        #[test]
        fn escaped_bytes_match_a_byte_by_byte_reading(
            bytes in proptest::collection::vec(prop_oneof![Just(b'\\'), Just(b'x')], 0..300)
        ) {
            let naive = escaped_naively(&bytes);
            let mut escaped_first = false;
            for (block, chunk) in bytes.chunks(64).enumerate() {
                let backslashes = (chunk.iter().enumerate())
                    .filter(|(_, b)| **b == b'\\')
                    .fold(0u64, |m, (i, _)| m | 1 << i);
                let escaped = escaped_bytes(backslashes, &mut escaped_first);
                for (i, _) in chunk.iter().enumerate() {
                    prop_assert_eq!(escaped >> i & 1 == 1, naive[block * 64 + i], "byte {}", block * 64 + i);
                }
            }
        }

        /// What serde_json writes, the checker settles: the slow path stays for the unusual.
        #[test]
        fn ordinary_json_is_settled_by_the_checker(value in json_value()) {
            let text = serde_json::to_string(&value).expect("a value serializes");
            prop_assert!(certainly_valid(text.as_bytes()), "{}", text);
            let pretty = serde_json::to_string_pretty(&value).expect("a value serializes");
            prop_assert!(certainly_valid(pretty.as_bytes()), "{}", pretty);
        }

        /// Whatever the checker calls valid, the reference accepts, and `validate` gives the
        /// reference's verdict: mutations of valid JSON with the bytes that matter to the
        /// grammar and with `\u` escapes, surrogate halves among them.
        #[test]
        fn the_checker_never_accepts_what_the_reference_rejects(
            value in json_value(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), edit(), 0..3u8), 1..4),
        ) {
            let mut bytes = serde_json::to_vec(&value).expect("a value serializes");
            for (at, piece, kind) in edits {
                let at = at.index(bytes.len() + 1);
                match kind {
                    0 => { bytes.splice(at..at, piece); }
                    1 if at < bytes.len() => { bytes.remove(at); }
                    _ if at < bytes.len() => { bytes.splice(at..at + 1, piece); }
                    _ => bytes.extend(piece),
                }
            }
            let reference = reference_accepts(&bytes);
            if certainly_valid(&bytes) {
                prop_assert!(reference, "{}", String::from_utf8_lossy(&bytes));
            }
            prop_assert_eq!(validate(&bytes).is_ok(), reference, "{}", String::from_utf8_lossy(&bytes));
        }
    }

    /// A byte that matters to the grammar, any byte, or a `\u` escape.
    fn edit() -> impl Strategy<Value = Vec<u8>> {
        let escapes: &[&[u8]] = &[
            br"\ud83d",
            br"\ude00",
            br"\uDBFF\uDFFF",
            br"\u00e9",
            br"\u12",
            br"\uzzzz",
            br"\u+d80",
            br"\\ud800",
            br#""\ud83d""#,
        ];
        prop_oneof![
            prop::sample::select(
                b"\"\\{}[]:,-+.0123456789eEtrufalsn/bu \t\r\n\x00\x1f\x7f".to_vec()
            )
            .prop_map(|b| vec![b]),
            any::<u8>().prop_map(|b| vec![b]),
            prop::sample::select(escapes).prop_map(<[u8]>::to_vec),
        ]
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1e200..1e200f64).prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[\"\\\\/\u{8}\u{c}\n\r\t\u{1}\u{1f}é✓😀a]{0,80}".prop_map(Value::String),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn strings_spanning_blocks_with_escapes_at_the_edges() {
        for len in 0..200 {
            for tail in ["\\\"", "\\\\", "\\n", "\\u00e9", "é", "\\\\\\\""] {
                let text = format!("[\"{}{tail}\",1]", "a".repeat(len));
                assert!(certainly_valid(text.as_bytes()), "{text}");
                let cut = format!("[\"{}{tail}", "a".repeat(len));
                assert!(!certainly_valid(cut.as_bytes()), "{cut}");
            }
            let escaped_end = format!("[\"{}\\\"]", "a".repeat(len));
            assert!(!certainly_valid(escaped_end.as_bytes()), "{escaped_end}");
        }
    }

    #[test]
    fn leaves_the_unusual_to_the_slow_path() {
        for unsure in [
            &b"1e400"[..],
            b"1e300",
            br#""\x""#,
            b"\"tab\there\"",
            b"\"\x01\"",
            b"\"\xff\"",
            b"{\"a\" 1}",
            b"[1,]",
            b"[1 2]",
            b"{\"a\":1,}",
            b"01",
            b"1.",
            b"-",
            b".5",
            b"tru",
            b"nul",
            b"[}",
            b"{]",
            b"",
            b"1 1",
            b"\"\\u12\"",
        ] {
            assert!(
                !certainly_valid(unsure),
                "{}",
                String::from_utf8_lossy(unsure)
            );
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(!certainly_valid(deep.as_bytes()));
        let shallow = "[".repeat(60) + &"]".repeat(60);
        assert!(certainly_valid(shallow.as_bytes()));
    }

    #[test]
    fn settles_the_usual() {
        for sure in [
            &b"{}"[..],
            b"[]",
            b" \t{ \"a\" : [ 1 , -2.5e-3 , true , false , null , \"\\u00e9\\n\" ] }\r ",
            b"0",
            b"-0.0",
            b"\"\"",
            br#""\ud83d\ude00""#,
            br#"{"lone_high":"abc\ud83d","lone_low":"\udc00x","reversed":"\ude00\ud83d"}"#,
            "\"résumé ✓\"".as_bytes(),
        ] {
            assert!(certainly_valid(sure), "{}", String::from_utf8_lossy(sure));
        }
    }
}
