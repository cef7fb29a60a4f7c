//! The judged set (`set.toml`): each query, its language, what its wanted session says, and
//! the words its distractors share with it.

use serde::Deserialize;
use std::collections::BTreeMap;

/// The languages the set is in, in the order the tables list them.
pub const LANGUAGES: &[&str] = &["en", "de", "ru", "zh", "ja", "ko"];

/// One judged query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    /// What a person types after `search`.
    pub query: String,
    /// The language it is in (one of [`LANGUAGES`]).
    pub lang: String,
    /// The wanted session's prompt: what the person asked.
    pub prompt: String,
    /// The wanted session's last answer: what solved it.
    pub answer: String,
    /// A line a tool prints that holds every word of the query: distractors repeat it in
    /// their tool output (a log read with `cat`, a test run, a search of the code).
    pub log: String,
    /// A sentence that mentions the query's words in passing, in a newer session about
    /// something else.
    pub aside: String,
}

/// The whole set.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Set {
    /// Sentences of ordinary talk about other work, per language: the distractors' prompts
    /// and answers, and the rest of the message around an aside.
    pub filler: BTreeMap<String, Vec<String>>,
    #[serde(rename = "case")]
    pub cases: Vec<Case>,
}

impl Set {
    /// The set kept beside this file. Panics when it is malformed: a case in a language the
    /// tables do not list, or without filler, or a query used twice.
    pub fn load() -> Set {
        let set: Set = toml::from_str(include_str!("set.toml")).expect("set.toml parses");
        for lang in LANGUAGES {
            let filler = set.filler.get(*lang).map_or(0, Vec::len);
            assert!(
                filler >= 6,
                "set.toml: filler.{lang} needs 6 sentences or more"
            );
        }
        let mut queries = std::collections::BTreeSet::new();
        for case in &set.cases {
            assert!(
                LANGUAGES.contains(&case.lang.as_str()),
                "set.toml: {:?} is in an unknown language {:?}",
                case.query,
                case.lang
            );
            assert!(
                queries.insert(&case.query),
                "set.toml: {:?} twice",
                case.query
            );
        }
        set
    }

    /// The filler sentences of `lang`.
    pub fn filler(&self, lang: &str) -> &[String] {
        &self.filler[lang]
    }
}
