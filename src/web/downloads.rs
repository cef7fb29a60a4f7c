//! What the web view gives as files: a session's conversation as one HTML file to share
//! (redacted, the same file `show --format html` writes), and the sessions list and usage as
//! CSV, each following the filters of the page it is linked from.

use super::filter::{all_matching, find, session_filter, usage_window};
use super::layout::failed;
use super::{Answer, Shared};
use crate::archive::Archive;
use crate::consumers::sessions::usage;
use crate::error::{Error, Result};
use crate::history::csv;
use crate::history::html::share::shared_file;
use tiny_http::StatusCode;

/// Session `id`'s conversation as the file to share, secrets redacted by the
/// configuration's `[redact]` rules.
pub(super) fn share(
    shared: &Shared,
    archive: &mut Archive,
    asked: &super::Asked,
    id: &str,
) -> Result<Answer> {
    let s = match find(archive, asked, id)? {
        Ok(s) => s,
        Err(answer) => return Ok(answer),
    };
    let redactor = match shared.redactor.get() {
        Ok(r) => r,
        Err(e) => {
            let why = format!("the conversation is not shared unredacted, and {e}");
            return Ok(Answer::Html(StatusCode(500), failed(&why)));
        }
    };
    let now = crate::platform::time::now_ms();
    let html = shared_file(archive, &s, false, Some(&redactor), now)?;
    let short: String = s.id.chars().take(8).collect();
    Ok(Answer::Bytes {
        kind: "text/html; charset=utf-8",
        body: html.into_bytes(),
        download: Some(format!("{}-{short}.html", s.harness)),
    })
}

/// Every session the sessions page's filters keep, in its order, as CSV.
pub(super) fn sessions_csv(archive: &mut Archive, asked: &super::Asked) -> Result<Answer> {
    let filter = match session_filter(archive, asked)? {
        Ok(filter) => filter,
        Err(answer) => return Ok(answer),
    };
    let list = all_matching(archive, asked, &filter)?;
    let body = csv_written(csv::write_sessions(Vec::new(), archive, &list))?;
    Ok(csv_file(body, "sessions.csv"))
}

/// The usage page's rows, then their total, as CSV.
pub(super) fn usage_csv(
    shared: &Shared,
    archive: &mut Archive,
    asked: &super::Asked,
) -> Result<Answer> {
    let (by, by_name, _, since_ms) = match usage_window(asked) {
        Ok(window) => window,
        Err(answer) => return Ok(answer),
    };
    let request = usage::Request {
        since_ms: Some(since_ms),
        ..usage::Request::default()
    };
    let (rows, total) = usage::usage(archive, by, &request, &shared.prices)?;
    let body = csv_written(csv::write_usage(Vec::new(), &rows, &total))?;
    Ok(csv_file(body, &format!("usage-by-{by_name}.csv")))
}

/// A CSV written in memory, or the page's error.
fn csv_written(written: std::io::Result<Vec<u8>>) -> Result<Vec<u8>> {
    written.map_err(|e| Error::Ui {
        reason: format!("the CSV could not be written: {e}"),
    })
}

fn csv_file(body: Vec<u8>, name: &str) -> Answer {
    Answer::Bytes {
        kind: "text/csv; charset=utf-8; header=present",
        body,
        download: Some(name.to_owned()),
    }
}
