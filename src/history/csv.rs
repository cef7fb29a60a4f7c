//! Lists as CSV, for a spreadsheet: a header row, then a row each, quoted as RFC 4180 says,
//! in the columns of the JSON the same list is written as (`sessions --json`, `usage
//! --json`). A list's items are one cell, a line each. Text that an agent wrote can begin as
//! a formula does, and a spreadsheet would run it: such a cell is given a `'` first.

use serde::Serialize;
use serde_json::Value;
use std::io::{self, Write};

/// The columns of a session, in the order of its JSON.
pub(crate) const SESSION_COLUMNS: &[&str] = &[
    "id",
    "machine",
    "git_remote",
    "harness",
    "project",
    "title",
    "branch",
    "started",
    "last_activity",
    "messages",
    "user_messages",
    "assistant_messages",
    "compactions",
    "unparsed",
    "records",
    "models",
    "parent",
    "subagents",
    "files",
    "on_disk",
    "starred",
    "tags",
    "note",
];

/// The columns of a usage row; the total is the last row, its `of` empty (JSON's `null`).
pub(crate) const USAGE_COLUMNS: &[&str] = &[
    "of",
    "calls",
    "input",
    "output",
    "cache_read",
    "cache_write",
    "cost",
    "unpriced",
];

/// `list`'s sessions as CSV into `out`, each followed by its subagents; `out` back.
pub(crate) fn write_sessions<W: Write>(
    out: W,
    archive: &mut crate::archive::Archive,
    list: &[crate::consumers::sessions::query::Session],
) -> io::Result<W> {
    let mut table = Table::new(out, SESSION_COLUMNS)?;
    super::each_with_subagents(archive, list, |s| table.row(s))?;
    table.finish()
}

/// Usage `rows`, then their `total` (its `of` empty), as CSV into `out`; `out` back.
pub(crate) fn write_usage<W: Write>(
    out: W,
    rows: &[crate::consumers::sessions::usage::Row],
    total: &crate::consumers::sessions::usage::Tokens,
) -> io::Result<W> {
    let mut table = Table::new(out, USAGE_COLUMNS)?;
    rows.iter().try_for_each(|r| table.row(r))?;
    table.row(&total.as_total())?;
    table.finish()
}

/// A CSV table being written: its header is written when it is made.
pub(crate) struct Table<W: Write> {
    writer: csv::Writer<W>,
    columns: &'static [&'static str],
}

impl<W: Write> Table<W> {
    /// A table of `columns` into `out`, its header row written.
    pub(crate) fn new(out: W, columns: &'static [&'static str]) -> io::Result<Table<W>> {
        let mut writer = csv::WriterBuilder::new()
            .terminator(csv::Terminator::CRLF)
            .from_writer(out);
        writer.write_record(columns)?;
        Ok(Table { writer, columns })
    }

    /// Writes `item` (serialised as its JSON) as a row: its value of each column, empty where
    /// it has none.
    pub(crate) fn row(&mut self, item: &impl Serialize) -> io::Result<()> {
        let value = serde_json::to_value(item)?;
        let cells = (self.columns.iter()).map(|c| cell(value.get(c).unwrap_or(&Value::Null)));
        Ok(self.writer.write_record(cells)?)
    }

    /// Writes what is buffered out, and gives the writer back.
    pub(crate) fn finish(self) -> io::Result<W> {
        self.writer
            .into_inner()
            .map_err(|e| io::Error::other(e.error().to_string()))
    }
}

/// A JSON value as a cell: text neutralised, a list a line an item, `null` empty.
fn cell(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => neutral(s),
        Value::Array(items) => {
            let lines: Vec<String> = items.iter().map(plain).collect();
            neutral(&lines.join("\n"))
        }
        other => neutral(&other.to_string()),
    }
}

/// An item of a list: a string as itself, anything else as its JSON.
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `text` as a cell no spreadsheet runs: a `'` before a first character that starts a
/// formula (`=`, `+`, `-`, `@`) or that a spreadsheet skips before one (tab, carriage
/// return), as OWASP advises against CSV injection.
fn neutral(text: &str) -> String {
    match text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        true => format!("'{text}"),
        false => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cell_that_a_spreadsheet_would_run_is_given_a_quote_first() {
        for formula in ["=1+1", "+1", "-2", "@SUM(A1)", "\t=1", "\r=1"] {
            assert_eq!(neutral(formula), format!("'{formula}"));
        }
        assert_eq!(neutral("plain = text"), "plain = text");
        assert_eq!(cell(&json!(["=a", "b"])), "'=a\nb");
        assert_eq!(cell(&json!(-3)), "'-3");
        assert_eq!(cell(&json!(null)), "");
    }

    #[test]
    fn rows_are_quoted_as_rfc_4180_says() {
        let mut table = Table::new(Vec::new(), &["a", "b"]).unwrap();
        table
            .row(&json!({"a": "say \"hi\", then go", "b": ["x", "y"]}))
            .unwrap();
        let written = String::from_utf8(table.finish().unwrap()).unwrap();
        assert_eq!(written, "a,b\r\n\"say \"\"hi\"\", then go\",\"x\ny\"\r\n");
    }
}
