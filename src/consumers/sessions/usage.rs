//! What the sessions cost: the tokens the index holds of each model call (its `usage` table:
//! each call once, however many sessions copy it), summed by day, week, month, model,
//! project, agent, machine or session, and priced per model from `data/prices.toml` and
//! config.toml's `[prices]` tables. A model with no price has tokens and no cost.

use super::query::MachineNames;
use crate::archive::Archive;
use crate::error::Result;
use rusqlite::params;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the rows are of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum By {
    /// Each day (UTC).
    Day,
    /// Each week (UTC), named by its Monday.
    Week,
    /// Each month (UTC).
    Month,
    /// Each model.
    Model,
    /// Each project.
    Project,
    /// Each agent.
    Agent,
    /// Each machine.
    Machine,
    /// Each session.
    Session,
}

impl By {
    /// The row's name, in SQL over `usage u JOIN sessions s` (`at`: the call's time in s).
    fn sql(self) -> &'static str {
        match self {
            By::Day => "strftime('%Y-%m-%d', at, 'unixepoch')",
            By::Week => "date(at, 'unixepoch', 'weekday 0', '-6 days')",
            By::Month => "strftime('%Y-%m', at, 'unixepoch')",
            By::Model => "coalesce(model, '')",
            By::Project => "coalesce(s.project, '')",
            By::Agent => "u.harness",
            By::Machine => "CAST(u.machine AS TEXT)",
            By::Session => "s.session",
        }
    }
}

/// Which calls to count.
#[derive(Debug, Default)]
pub(crate) struct Request {
    /// Only calls at or after this time (Unix ms).
    pub since_ms: Option<i64>,
    /// Only calls before this time (Unix ms).
    pub until_ms: Option<i64>,
    /// Only this agent's.
    pub harness: Option<String>,
    /// Only those of sessions whose project contains this text (any case).
    pub project: Option<String>,
    /// Only this machine's (0: this one).
    pub machine: Option<i64>,
}

/// Tokens, and what they cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub(crate) struct Tokens {
    /// Model calls.
    pub calls: i64,
    /// Input not read from the cache.
    pub input: i64,
    /// Output, thinking included.
    pub output: i64,
    /// Input read from the cache.
    pub cache_read: i64,
    /// Input written to the cache.
    pub cache_write: i64,
    /// What the priced calls cost (US dollars); `None` when none is priced.
    pub cost: Option<f64>,
    /// The models of calls that have no price (their tokens are counted, their cost is not).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unpriced: Vec<String>,
}

impl Tokens {
    fn add(&mut self, other: &Tokens) {
        self.calls += other.calls;
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.cost = match (self.cost, other.cost) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
        for model in &other.unpriced {
            if !self.unpriced.contains(model) {
                self.unpriced.push(model.clone());
            }
        }
    }
}

/// One row: what it is of, and its tokens.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Row {
    /// The day, week, month, model, project, agent, machine or session.
    pub of: String,
    #[serde(flatten)]
    pub tokens: Tokens,
}

/// The total of the rows, written as one more row whose `of` is `null`, its fields in a row's
/// order.
#[derive(Debug, Serialize)]
pub(crate) struct TotalRow<'a> {
    pub of: Option<&'a str>,
    #[serde(flatten)]
    pub tokens: &'a Tokens,
}

impl Tokens {
    /// These tokens as the total row.
    pub(crate) fn as_total(&self) -> TotalRow<'_> {
        TotalRow {
            of: None,
            tokens: self,
        }
    }
}

/// A model's price, in US dollars per million tokens.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

impl Price {
    fn of(&self, t: &Tokens) -> f64 {
        let per = |n: i64, price: f64| n as f64 * price / 1e6;
        per(t.input, self.input)
            + per(t.output, self.output)
            + per(t.cache_read, self.cache_read)
            + per(t.cache_write, self.cache_write)
    }
}

/// The prices known: by model name (a model id matches a name equal to it, or the name
/// followed by a release date, `-YYYYMMDD`, or by `@` or `:` and a tag; the longest name
/// that matches wins). `gpt-5.4-pro` is not `gpt-5.4`, nor `claude-opus-4-7` `claude-opus-4`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Prices(BTreeMap<String, Price>);

/// `data/prices.toml`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceFile {
    model: Vec<PricedModels>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PricedModels {
    names: Vec<String>,
    #[serde(flatten)]
    price: Price,
    #[allow(dead_code)] // read by people: when the price was taken
    taken: String,
    #[allow(dead_code)] // read by people: where it was taken from
    source: String,
}

impl Prices {
    /// The prices of `data/prices.toml`, with `overrides` (config.toml's) added over them.
    pub(crate) fn with(overrides: &BTreeMap<String, Price>) -> Prices {
        let file: PriceFile = toml::from_str(include_str!("../../../data/prices.toml"))
            .expect("data/prices.toml is checked by a unit test");
        let mut prices = BTreeMap::new();
        for models in file.model {
            for name in models.names {
                prices.insert(name, models.price);
            }
        }
        prices.extend(overrides.iter().map(|(k, v)| (k.clone(), *v)));
        Prices(prices)
    }

    /// The price of `model`, if one is known.
    pub(crate) fn of(&self, model: &str) -> Option<&Price> {
        let dated = |rest: &str| {
            let date = rest.strip_prefix('-').unwrap_or("");
            date.len() >= 8 && date.bytes().take(8).all(|b| b.is_ascii_digit())
        };
        let matches = |name: &str| {
            model == name
                || (model.strip_prefix(name))
                    .is_some_and(|rest| rest.starts_with(['@', ':']) || dated(rest))
        };
        (self.0.iter())
            .filter(|(name, _)| matches(name))
            .max_by_key(|(name, _)| name.len())
            .map(|(_, price)| price)
    }
}

/// The rows of `request`, by `by`, in order of what they are of, and their total.
pub(crate) fn usage(
    archive: &mut Archive,
    by: By,
    request: &Request,
    prices: &Prices,
) -> Result<(Vec<Row>, Tokens)> {
    let groups = groups(archive, by, request)?;
    let names = MachineNames::of(archive)?;
    let mut rows: Vec<Row> = Vec::new();
    let mut total = Tokens::default();
    for (of, model, mut tokens) in groups {
        let model = model.unwrap_or_default();
        match prices.of(&model) {
            Some(price) => tokens.cost = Some(price.of(&tokens)),
            None if model.is_empty() => tokens.unpriced.push("(none)".into()),
            None => tokens.unpriced.push(model),
        }
        total.add(&tokens);
        let of = match (by, of.parse::<i64>()) {
            (By::Machine, Ok(id)) => names.name(id),
            _ => of,
        };
        match rows.last_mut() {
            Some(last) if last.of == of => last.tokens.add(&tokens),
            _ => rows.push(Row { of, tokens }),
        }
    }
    Ok((rows, total))
}

/// The tokens of `request`'s calls, by what `by` names and by model, in that order.
fn groups(
    archive: &mut Archive,
    by: By,
    request: &Request,
) -> Result<Vec<(String, Option<String>, Tokens)>> {
    // A call whose record names no model has its session's, when the session has one.
    let sql = format!(
        "SELECT {of}, model, count(*), sum(input), sum(output), sum(cache_read), sum(cache_write)
         FROM (SELECT u.session, u.harness, u.machine, u.input, u.output, u.cache_read,
                  u.cache_write, coalesce(u.at_ms, s.last_ms) AS at_ms,
                  coalesce(u.at_ms, s.last_ms) / 1000 AS at,
                  coalesce(u.model, (SELECT min(m.model) FROM session_models m
                      WHERE m.session = u.session HAVING count(*) = 1)) AS model
               FROM usage u JOIN sessions s ON s.id = u.session) u
         JOIN sessions s ON s.id = u.session
         WHERE (?1 IS NULL OR at_ms >= ?1) AND (?2 IS NULL OR at_ms < ?2)
           AND (?3 IS NULL OR u.harness = ?3)
           AND (?4 IS NULL OR instr(lower(s.project), lower(?4)) > 0)
           AND (?5 IS NULL OR u.machine = ?5)
         GROUP BY 1, 2 ORDER BY 1, 2",
        of = by.sql()
    );
    let result = (|| {
        let conn = archive.connection();
        let mut stmt = conn.prepare(&sql)?;
        let args = params![
            request.since_ms,
            request.until_ms,
            request.harness,
            request.project,
            request.machine
        ];
        let rows = stmt.query_map(args, |r| {
            let model: Option<String> = r.get(1)?;
            let tokens = Tokens {
                calls: r.get(2)?,
                input: r.get(3)?,
                output: r.get(4)?,
                cache_read: r.get(5)?,
                cache_write: r.get(6)?,
                ..Tokens::default()
            };
            Ok((
                r.get::<_, Option<String>>(0)?.unwrap_or_default(),
                model,
                tokens,
            ))
        })?;
        rows.collect::<rusqlite::Result<Vec<_>>>()
    })();
    archive.db(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_model_of_the_price_file_is_priced_and_a_dated_release_takes_its_models_price() {
        let prices = Prices::with(&BTreeMap::new());
        assert!(!prices.0.is_empty());
        let sonnet = prices.of("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!((sonnet.input, sonnet.output), (3.0, 15.0));
        // The longest name wins: claude-opus-4-5 is not claude-opus-4.
        assert_eq!(prices.of("claude-opus-4-5-20251101").unwrap().input, 5.0);
        assert_eq!(prices.of("claude-opus-4-20250514").unwrap().input, 15.0);
        assert!(prices.of("claude-opus-45").is_none());
        assert!(
            prices.of("claude-opus-4-7").is_none(),
            "a release not priced is none"
        );
        assert!(prices.of("gpt-5.4-pro").is_none());
        assert_eq!(prices.of("claude-sonnet-4-5@20250929").unwrap().input, 3.0);
        assert!(prices.of("scripted-model").is_none());
        let mine = BTreeMap::from([(
            "scripted-model".to_owned(),
            Price {
                input: 1.0,
                output: 2.0,
                ..Price::default()
            },
        )]);
        assert_eq!(
            Prices::with(&mine).of("scripted-model").unwrap().output,
            2.0
        );
    }

    #[test]
    fn a_price_is_per_million_tokens_of_each_kind() {
        let price = Price {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
        };
        let tokens = Tokens {
            input: 1_000_000,
            output: 100_000,
            cache_read: 2_000_000,
            cache_write: 400_000,
            ..Tokens::default()
        };
        let cost = price.of(&tokens);
        assert!((cost - (3.0 + 1.5 + 0.6 + 1.5)).abs() < 1e-9, "{cost}");
    }
}
