//! `usage`'s table: what each row is of, its calls and tokens, and their estimated cost.

use crate::consumers::sessions::usage::{By, Row, Tokens};
use crate::history::display::printable;
use std::io::{self, Write};

/// The widest the first column gets (longer names are cut, with `…`).
const NAME_WIDTH: usize = 40;

/// Writes `rows` and their `total` as a table.
pub(crate) fn write_table(
    out: &mut impl Write,
    by: By,
    rows: &[Row],
    total: &Tokens,
) -> io::Result<()> {
    let heading = match by {
        By::Day => "DAY",
        By::Week => "WEEK OF",
        By::Month => "MONTH",
        By::Model => "MODEL",
        By::Project => "PROJECT",
        By::Agent => "AGENT",
        By::Machine => "MACHINE",
        By::Session => "SESSION",
    };
    // A project's or a model's name is the agent's text: no control character reaches the
    // terminal.
    let name = |of: &str| match of {
        "" => "(none)".to_owned(),
        of => name_of(&printable(of)),
    };
    let width = (rows.iter().map(|r| name(&r.of).chars().count()))
        .chain([heading.len(), "TOTAL".len()])
        .max()
        .unwrap_or(0);
    writeln!(
        out,
        "{heading:<width$}  {:>7}  {:>13}  {:>11}  {:>13}  {:>11}  {:>10}",
        "CALLS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "COST"
    )?;
    for row in rows {
        line(out, &name(&row.of), width, &row.tokens)?;
    }
    line(out, "TOTAL", width, total)?;
    if !total.unpriced.is_empty() {
        let models = total.unpriced.join(", ");
        writeln!(
            out,
            "* has calls of models with no price ({models}): their tokens are counted, not their \
             cost; a [prices.\"MODEL\"] table in config.toml gives one"
        )?;
    }
    Ok(())
}

/// `of`, cut to [`NAME_WIDTH`] characters (with `…`) when longer.
fn name_of(of: &str) -> String {
    match of.chars().count() > NAME_WIDTH {
        true => format!("{}…", of.chars().take(NAME_WIDTH - 1).collect::<String>()),
        false => of.to_owned(),
    }
}

fn line(out: &mut impl Write, name: &str, width: usize, t: &Tokens) -> io::Result<()> {
    let cost = match (t.cost, t.unpriced.is_empty()) {
        (Some(c), true) => format!("${c:.2}"),
        (Some(c), false) => format!("${c:.2}*"),
        (None, _) => "*".to_owned(),
    };
    writeln!(
        out,
        "{name:<width$}  {:>7}  {:>13}  {:>11}  {:>13}  {:>11}  {cost:>10}",
        grouped(t.calls),
        grouped(t.input),
        grouped(t.output),
        grouped(t.cache_read),
        grouped(t.cache_write),
    )
}

/// `n` with its thousands set apart by commas.
fn grouped(n: i64) -> String {
    indicatif::HumanCount(n.max(0) as u64).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_of_an_unpriced_model_is_marked_and_its_models_named_under_the_table() {
        let priced = Tokens {
            calls: 2,
            input: 1_234_567,
            output: 30,
            cost: Some(3.7),
            ..Tokens::default()
        };
        let unpriced = Tokens {
            calls: 1,
            input: 5,
            unpriced: vec!["local-model".into()],
            ..Tokens::default()
        };
        let mut total = priced.clone();
        total.calls += 1;
        total.input += 5;
        total.unpriced = unpriced.unpriced.clone();
        let rows = [
            Row {
                of: "2026-12-01".into(),
                tokens: priced,
            },
            Row {
                of: "2026-12-02\x1b[2J".into(),
                tokens: unpriced,
            },
        ];
        let mut out = Vec::new();
        write_table(&mut out, By::Day, &rows, &total).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("DAY "), "{text}");
        assert!(
            lines[1].contains("1,234,567") && lines[1].ends_with("$3.70"),
            "{text}"
        );
        assert!(lines[2].ends_with(" *"), "{text}");
        assert!(
            lines[2].starts_with("2026-12-02?[2J "),
            "no escape reaches the terminal: {text}"
        );
        assert!(
            lines[3].starts_with("TOTAL") && lines[3].ends_with("$3.70*"),
            "{text}"
        );
        assert!(lines[4].contains("(local-model)"), "{text}");
    }
}
