//! Secrets in records, found and replaced with `[REDACTED:<rule>]` in every copy that leaves
//! the machine; the archive itself keeps every record whole.
//!
//! The rules are data (`redact/rules.toml`), extended by the user's `[redact]` table. A record
//! is searched in three steps, cheapest first: its bytes for any rule's keywords (most records
//! have none and are done); then, for each JSON string holding a keyword, the rules of those
//! keywords over the string's decoded text (so an escape such as `\u0041KIA` hides nothing);
//! then the members whose names say they hold a secret (`{"api_key": "…"}`). A secret is
//! replaced inside its JSON string, so the record stays one JSON value of the same shape.

mod files;

pub(crate) use files::{Checked, check_files, redact_files};

use crate::read::record::strings as json;
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;

/// The built-in rules and skipped members.
const RULES: &str = include_str!("redact/rules.toml");

/// One rule, as written in `rules.toml` or a `[[redact.rule]]` table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleDef {
    /// What `[REDACTED:<id>]` names it by.
    pub id: String,
    /// What it finds.
    #[serde(default)]
    pub description: String,
    /// Text of which one must occur, in any case, where it finds a secret.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// The regex; its group named `secret`, else the whole match, is replaced.
    pub pattern: String,
    /// The least Shannon entropy (bits per byte) of a replaced value.
    #[serde(default)]
    pub entropy: f64,
    /// A replaced value must hold a digit.
    #[serde(default)]
    pub digit: bool,
    /// With `value`: a JSON member whose name matches this holds a secret as its value.
    pub key: Option<String>,
    /// With `key`: what the whole value of such a member must match.
    pub value: Option<String>,
    /// Text it must find a secret in.
    pub example: Option<String>,
    /// Text it must find none in.
    pub not_example: Option<String>,
}

/// A member whose string values are never searched.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SkipDef {
    key: String,
    #[serde(default)]
    base64: bool,
    #[allow(dead_code)]
    why: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    rule: Vec<RuleDef>,
    skip: Vec<SkipDef>,
}

/// The `[redact]` table of `config.toml`: the user's rules and allowlist.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactSettings {
    /// Rules added to the built-in ones (`[[redact.rule]]`).
    #[serde(default)]
    pub rule: Vec<RuleDef>,
    /// Regexes: a found value that one matches (anywhere in it) is left as it is.
    #[serde(default)]
    pub allow: Vec<String>,
    /// SHA-256 digests (hex) of values left as they are.
    #[serde(default)]
    pub allow_sha256: Vec<String>,
}

/// A rule, compiled.
struct Rule {
    id: String,
    regex: Regex,
    /// The capture group replaced, when it is not the whole match.
    group: Option<usize>,
    entropy: f64,
    digit: bool,
    /// Member name and whole value, both to match.
    member: Option<(Regex, Regex)>,
}

/// One secret found in a piece of text: its bytes there, and the rule that found it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Hit {
    range: Range<usize>,
    rule: usize,
}

/// A piece of a line that holds secrets: a JSON string, or the whole line when the line is
/// not a JSON object or array.
struct Piece<'a> {
    /// Its bytes in the line (inside the quotes, for a JSON string).
    raw: Range<usize>,
    json: bool,
    escaped: bool,
    text: Cow<'a, str>,
    hits: Vec<Hit>,
}

/// A rule or allowlist entry that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// The built-in rules do not parse (a defect of this build).
    #[error("the built-in rules.toml: {0}")]
    Builtin(#[from] toml::de::Error),
    /// A rule's id is taken.
    #[error("rule {id:?}: a rule with that id exists")]
    Taken {
        /// The id.
        id: String,
    },
    /// A rule's id is not letters, digits and '-'.
    #[error("rule {id:?}: an id is letters, digits and '-'")]
    BadId {
        /// The id.
        id: String,
    },
    /// A rule's regex does not compile.
    #[error("rule {id:?}: {field}: {source}")]
    Regex {
        /// The rule.
        id: String,
        /// `pattern`, `key` or `value`.
        field: &'static str,
        /// Why.
        source: regex::Error,
    },
    /// A rule has `key` without `value`, or the other way round.
    #[error("rule {id:?}: give key and value together")]
    HalfMember {
        /// The rule.
        id: String,
    },
    /// A keyword that cannot occur in a record's text as written.
    #[error(
        "rule {id:?}: keyword {keyword:?}: a keyword is text without quotes, backslashes or control characters"
    )]
    BadKeyword {
        /// The rule.
        id: String,
        /// The keyword.
        keyword: String,
    },
    /// The keywords do not make one automaton.
    #[error("keywords: {0}")]
    Keywords(#[from] aho_corasick::BuildError),
    /// A rule finds nothing in its `example`.
    #[error("rule {id:?}: finds nothing in its example")]
    MissesExample {
        /// The rule.
        id: String,
    },
    /// A rule finds a secret in its `not_example`.
    #[error("rule {id:?}: finds a secret in its not_example")]
    FindsNotExample {
        /// The rule.
        id: String,
    },
    /// An `allow` regex does not compile.
    #[error("allow {pattern:?}: {source}")]
    Allow {
        /// The regex as written.
        pattern: String,
        /// Why.
        source: regex::Error,
    },
    /// An `allow_sha256` entry is not 64 hex digits.
    #[error("allow_sha256 {0:?}: a SHA-256 digest is 64 hex digits")]
    Digest(String),
}

/// One secret that `redact --check` reports: never the value itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The rule's id.
    pub rule: String,
    /// Its byte offset in the line (for a secret inside an escaped JSON string: the offset
    /// of that string's first byte).
    pub offset: usize,
    /// The first few characters, then `****…`.
    pub preview: String,
}

/// Finds and replaces secrets. Built once (from the built-in rules and the user's settings)
/// and shared by every thread.
pub struct Redactor {
    settings: RedactSettings,
    rules: Vec<Rule>,
    keywords: Keywords,
    skips: Vec<SkipDef>,
    allow: Vec<Regex>,
    allow_sha256: HashSet<Vec<u8>>,
}

impl PartialEq for Redactor {
    fn eq(&self, other: &Redactor) -> bool {
        self.settings == other.settings
    }
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("rules", &self.rules.len())
            .field("allow", &(self.allow.len() + self.allow_sha256.len()))
            .finish()
    }
}

impl Redactor {
    /// The built-in rules alone.
    pub fn builtin() -> Redactor {
        Redactor::new(&RedactSettings::default()).expect("the built-in rules compile")
    }

    /// The built-in rules, with `settings` added. `Err` names the rule or entry at fault and
    /// what is wrong with it.
    pub fn new(settings: &RedactSettings) -> Result<Redactor, RuleError> {
        let file: RuleFile = toml::from_str(RULES)?;
        let mut defs = file.rule;
        for def in &settings.rule {
            if defs.iter().any(|d| d.id == def.id) {
                return Err(RuleError::Taken { id: def.id.clone() });
            }
            defs.push(def.clone());
        }
        let rules = (defs.iter().map(compile)).collect::<Result<Vec<Rule>, RuleError>>()?;
        let keywords = Keywords::of(&defs)?;
        let allow = (settings.allow.iter())
            .map(|p| {
                Regex::new(p).map_err(|source| RuleError::Allow {
                    pattern: p.clone(),
                    source,
                })
            })
            .collect::<Result<Vec<Regex>, RuleError>>()?;
        let allow_sha256 = (settings.allow_sha256.iter())
            .map(|h| hex_digest(h))
            .collect::<Result<HashSet<Vec<u8>>, RuleError>>()?;
        let redactor = Redactor {
            settings: settings.clone(),
            rules,
            keywords,
            skips: file.skip,
            allow,
            allow_sha256,
        };
        redactor.check_examples(&defs[defs.len() - settings.rule.len()..])?;
        Ok(redactor)
    }

    /// A user's rule whose example finds nothing, or whose counter-example finds something,
    /// is refused: it would not do what its author meant.
    fn check_examples(&self, defs: &[RuleDef]) -> Result<(), RuleError> {
        for def in defs {
            let found = |text: &str| self.text_rules_found(text).contains(&def.id);
            let id = || def.id.clone();
            if let Some(example) = &def.example
                && !found(example)
            {
                return Err(RuleError::MissesExample { id: id() });
            }
            if let Some(text) = &def.not_example
                && found(text)
            {
                return Err(RuleError::FindsNotExample { id: id() });
            }
        }
        Ok(())
    }

    /// `line` with every secret replaced: the same bytes (borrowed) when it holds none. A
    /// JSON object or array stays one, of the same shape; other text is searched as text.
    pub fn redact_record<'a>(&self, line: &'a [u8]) -> Cow<'a, [u8]> {
        let mut out = Vec::new();
        let mut done = 0;
        let mut changed = false;
        self.walk(line, |piece| {
            out.extend_from_slice(&line[done..piece.raw.start]);
            let text = self.replace(&piece.text, &piece.hits);
            if piece.json {
                let quoted = json::encode(&text);
                out.extend_from_slice(&quoted.as_bytes()[1..quoted.len() - 1]);
            } else {
                out.extend_from_slice(text.as_bytes());
            }
            done = piece.raw.end;
            changed = true;
        });
        if !changed {
            return Cow::Borrowed(line);
        }
        out.extend_from_slice(&line[done..]);
        Cow::Owned(out)
    }

    /// Replaces every secret in `record` where it is (see [`Redactor::redact_record`]).
    pub fn redact_record_in_place(&self, record: &mut Vec<u8>) {
        if let Cow::Owned(redacted) = self.redact_record(record) {
            *record = redacted;
        }
    }

    /// Replaces every secret in `text` where it is (see [`Redactor::redact_text`]).
    pub fn redact_text_in_place(&self, text: &mut String) {
        if let Cow::Owned(redacted) = self.redact_text(text) {
            *text = redacted;
        }
    }

    /// `text` (not JSON: a message, a title, a line of a conversation) with every secret
    /// replaced.
    pub fn redact_text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let hits = self.text_hits(text);
        if hits.is_empty() {
            return Cow::Borrowed(text);
        }
        Cow::Owned(self.replace(text, &hits).into_owned())
    }

    /// The secrets in `line`, in order, as `redact --check` reports them.
    pub fn findings(&self, line: &[u8]) -> Vec<Finding> {
        let mut found = Vec::new();
        self.walk(line, |piece| {
            for hit in &piece.hits {
                let offset = match piece.escaped {
                    true => piece.raw.start,
                    false => piece.raw.start + hit.range.start,
                };
                found.push(Finding {
                    rule: self.rules[hit.rule].id.clone(),
                    offset,
                    preview: preview(&piece.text[hit.range.clone()]),
                });
            }
        });
        found
    }

    /// Calls `found` with each piece of `line` that holds a secret, in order.
    fn walk<'a>(&self, line: &'a [u8], mut found: impl FnMut(Piece<'a>)) {
        let seen = self.keyword_hits(line);
        let hidden = may_hide_keywords(line);
        if seen.is_empty() && !hidden && self.keywords.everywhere.is_empty() {
            return;
        }
        let Some(strings) = json::strings(line) else {
            let text = String::from_utf8_lossy(line);
            let hits = self.text_hits(&text);
            if !hits.is_empty() {
                found(Piece {
                    raw: 0..line.len(),
                    json: false,
                    escaped: false,
                    text,
                    hits,
                });
            }
            return;
        };
        for s in &strings {
            if let Some(piece) = self.search_string(line, s, &seen) {
                found(piece);
            }
        }
    }

    /// The secrets of one JSON string of `line`, if it holds any.
    fn search_string<'a>(
        &self,
        line: &'a [u8],
        s: &json::Str,
        seen: &[(Range<usize>, usize)],
    ) -> Option<Piece<'a>> {
        let raw = &line[s.raw.clone()];
        if let Some(m) = &s.member
            && self.skipped(&line[m.clone()], raw)
        {
            return None;
        }
        let hidden = s.escaped && may_hide_keywords(raw);
        let member_rules = match &s.member {
            Some(m) => self.name_rules(&line[m.clone()], seen, m),
            None => Vec::new(),
        };
        let rules = match hidden {
            false => self.rules_seen(seen, &s.raw),
            true => Vec::new(),
        };
        if !hidden
            && rules.is_empty()
            && member_rules.is_empty()
            && self.keywords.everywhere.is_empty()
        {
            return None;
        }
        let Some(text) = json::decode(raw, s.escaped) else {
            return self.undecodable(raw, s);
        };
        let mut hits = match hidden {
            true => self.text_hits(&text),
            false => self.hits_of(&text, &rules),
        };
        if hits.is_empty()
            && !member_rules.is_empty()
            && let Some(m) = &s.member
            && let Some(rule) = self.member_secret(&line[m.clone()], &text, &member_rules)
        {
            hits.push(Hit {
                range: 0..text.len(),
                rule,
            });
        }
        (!hits.is_empty()).then_some(Piece {
            raw: s.raw.clone(),
            json: true,
            escaped: s.escaped,
            text,
            hits,
        })
    }

    /// The rules of the keywords in a member's name (`raw`, at `at` in the line), decoded
    /// first when an escape may hide one.
    fn name_rules(
        &self,
        raw: &[u8],
        seen: &[(Range<usize>, usize)],
        at: &Range<usize>,
    ) -> Vec<usize> {
        if !may_hide_keywords(raw) {
            return self.rules_seen(seen, at);
        }
        let name = json::decode(raw, true).unwrap_or_default();
        let found = self.keyword_hits(name.as_bytes());
        self.rules_seen(&found, &(0..name.len()))
    }

    /// A string that cannot be decoded (invalid UTF-8 or escapes): searched as its bytes
    /// read lossily, and, holding a secret, replaced whole. Never shipped as it is.
    fn undecodable<'a>(&self, raw: &'a [u8], s: &json::Str) -> Option<Piece<'a>> {
        let text = String::from_utf8_lossy(raw);
        let rule = self.text_hits(&text).first()?.rule;
        Some(Piece {
            raw: s.raw.clone(),
            json: true,
            escaped: true,
            hits: vec![Hit {
                range: 0..text.len(),
                rule,
            }],
            text,
        })
    }

    /// Whether the value `raw` of the member named `name` (both as written) is one the
    /// rules never search.
    fn skipped(&self, name: &[u8], raw: &[u8]) -> bool {
        let base64 =
            |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_');
        (self.skips.iter())
            .any(|s| s.key.as_bytes() == name && (!s.base64 || raw.iter().all(base64)))
    }

    /// Every keyword occurrence in `bytes`, with the keyword's index, by start.
    fn keyword_hits(&self, bytes: &[u8]) -> Vec<(Range<usize>, usize)> {
        let mut seen: Vec<(Range<usize>, usize)> =
            (self.keywords.automaton.find_overlapping_iter(bytes))
                .map(|m| (m.range(), m.pattern().as_usize()))
                .collect();
        seen.sort_by_key(|(r, _)| r.start);
        seen
    }

    /// The rules of the keywords seen wholly inside `within`, and those without keywords.
    fn rules_seen(&self, seen: &[(Range<usize>, usize)], within: &Range<usize>) -> Vec<usize> {
        let first = seen.partition_point(|(r, _)| r.start < within.start);
        let mut rules: Vec<usize> = (seen[first..].iter())
            .take_while(|(r, _)| r.start < within.end)
            .filter(|(r, _)| r.end <= within.end)
            .flat_map(|(_, k)| self.keywords.rules[*k].iter().copied())
            .chain(self.keywords.everywhere.iter().copied())
            .collect();
        rules.sort_unstable();
        rules.dedup();
        rules
    }

    /// The secrets in `text`, by every rule whose keyword it holds.
    fn text_hits(&self, text: &str) -> Vec<Hit> {
        let seen = self.keyword_hits(text.as_bytes());
        let rules = self.rules_seen(&seen, &(0..text.len()));
        self.hits_of(text, &rules)
    }

    /// The secrets that `rules` find in `text`, in order, none overlapping another.
    fn hits_of(&self, text: &str, rules: &[usize]) -> Vec<Hit> {
        let mut hits = Vec::new();
        for &i in rules {
            let rule = &self.rules[i];
            for caps in rule.regex.captures_iter(text) {
                let m = rule.group.and_then(|g| caps.get(g)).or_else(|| caps.get(0));
                if let Some(m) = m
                    && !m.is_empty()
                    && self.accepts(rule, m.as_str())
                {
                    hits.push(Hit {
                        range: m.range(),
                        rule: i,
                    });
                }
            }
        }
        // The first to start wins, the longest among those.
        hits.sort_by_key(|h| (h.range.start, std::cmp::Reverse(h.range.end)));
        let mut end = 0;
        hits.retain(|h| {
            let keep = h.range.start >= end;
            end = end.max(h.range.end);
            keep
        });
        hits
    }

    /// The rule by which the member named `name` (as written) holds `value` as a secret, if
    /// one does.
    fn member_secret(&self, name: &[u8], value: &str, rules: &[usize]) -> Option<usize> {
        let name = json::decode(name, name.contains(&b'\\'))?;
        let name: &str = &name;
        rules.iter().copied().find(|&i| {
            let rule = &self.rules[i];
            rule.member.as_ref().is_some_and(|(key, whole)| {
                key.is_match(name) && whole.is_match(value) && self.accepts(rule, value)
            })
        })
    }

    /// Whether `value`, found by `rule`, is a secret: random enough, and not allowed.
    fn accepts(&self, rule: &Rule, value: &str) -> bool {
        entropy(value.as_bytes()) >= rule.entropy
            && (!rule.digit || value.bytes().any(|b| b.is_ascii_digit()))
            && !self.allowed(value)
    }

    /// Whether the user's allowlist names `value`.
    fn allowed(&self, value: &str) -> bool {
        self.allow.iter().any(|a| a.is_match(value))
            || (!self.allow_sha256.is_empty()
                && self.allow_sha256.contains(&sha256(value.as_bytes())))
    }

    /// `text` with each hit replaced by `[REDACTED:<rule>]`.
    fn replace<'t>(&self, text: &'t str, hits: &[Hit]) -> Cow<'t, str> {
        if hits.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut done = 0;
        for hit in hits {
            out.push_str(&text[done..hit.range.start]);
            out.push_str("[REDACTED:");
            out.push_str(&self.rules[hit.rule].id);
            out.push(']');
            done = hit.range.end;
        }
        out.push_str(&text[done..]);
        Cow::Owned(out)
    }

    /// The ids of the rules that find a secret in `text`.
    fn text_rules_found(&self, text: &str) -> Vec<String> {
        let mut ids: Vec<String> = (self.findings(text.as_bytes()).into_iter())
            .map(|f| f.rule)
            .collect();
        ids.dedup();
        ids
    }
}

/// Whether JSON text holds an escape that may spell a keyword's character: only `\uXXXX`
/// and `\/` can; any other stands for a quote, a backslash or a control character, which no
/// keyword holds. Where it holds none, keywords are found in its bytes as written.
fn may_hide_keywords(json: &[u8]) -> bool {
    memchr::memmem::find(json, b"\\u").is_some() || memchr::memmem::find(json, b"\\/").is_some()
}

fn compile(def: &RuleDef) -> Result<Rule, RuleError> {
    let at = |field: &'static str, source: regex::Error| RuleError::Regex {
        id: def.id.clone(),
        field,
        source,
    };
    if def.id.is_empty()
        || !def
            .id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(RuleError::BadId { id: def.id.clone() });
    }
    let regex = build(&def.pattern).map_err(|e| at("pattern", e))?;
    let group = regex.capture_names().position(|n| n == Some("secret"));
    let member = match (&def.key, &def.value) {
        (Some(key), Some(value)) => Some((
            build(key).map_err(|e| at("key", e))?,
            build(&format!("^(?:{value})$")).map_err(|e| at("value", e))?,
        )),
        (None, None) => None,
        _ => return Err(RuleError::HalfMember { id: def.id.clone() }),
    };
    Ok(Rule {
        id: def.id.clone(),
        regex,
        group,
        entropy: def.entropy,
        digit: def.digit,
        member,
    })
}

fn build(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern).size_limit(1 << 22).build()
}

/// Every rule's keywords, to find in one pass.
struct Keywords {
    /// One automaton over them all, any case.
    automaton: AhoCorasick,
    /// The rules of each keyword, by the keyword's index.
    rules: Vec<Vec<usize>>,
    /// Rules without keywords: searched for in every string.
    everywhere: Vec<usize>,
}

impl Keywords {
    fn of(defs: &[RuleDef]) -> Result<Keywords, RuleError> {
        let mut words: Vec<String> = Vec::new();
        let mut rules: Vec<Vec<usize>> = Vec::new();
        let mut everywhere = Vec::new();
        for (i, def) in defs.iter().enumerate() {
            if def.keywords.is_empty() {
                everywhere.push(i);
            }
            for word in &def.keywords {
                let word = word.to_ascii_lowercase();
                if word.is_empty() || word.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
                    return Err(RuleError::BadKeyword {
                        id: def.id.clone(),
                        keyword: word,
                    });
                }
                match words.iter().position(|w| *w == word) {
                    Some(k) => rules[k].push(i),
                    None => {
                        words.push(word);
                        rules.push(vec![i]);
                    }
                }
            }
        }
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&words)?;
        Ok(Keywords {
            automaton,
            rules,
            everywhere,
        })
    }
}

/// Shannon entropy of `bytes`, in bits per byte.
pub(crate) fn entropy(bytes: &[u8]) -> f64 {
    if bytes.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    bytes.iter().for_each(|&b| counts[b as usize] += 1);
    let n = bytes.len() as f64;
    (counts.iter().filter(|&&c| c > 0))
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .to_vec()
}

fn hex_digest(hex: &str) -> Result<Vec<u8>, RuleError> {
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(RuleError::Digest(hex.to_owned()));
    }
    let digit = |b: u8| (b as char).to_digit(16).expect("checked: a hex digit") as u8;
    Ok((hex.as_bytes().chunks(2))
        .map(|pair| digit(pair[0]) << 4 | digit(pair[1]))
        .collect())
}

/// What a report shows of a secret: at most its first 4 characters, and fewer for a short
/// one (a quarter of it), then `****…`; on one line, whatever the secret holds.
fn preview(secret: &str) -> String {
    let secret = secret.trim_start();
    let shown = (secret.chars().count() / 4).min(4);
    let head: String = (secret.chars().take(shown))
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    format!("{head}****…")
}

#[cfg(test)]
mod tests;
