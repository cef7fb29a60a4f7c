//! The HTTP destination: each batch is one POST of NDJSON envelopes (gzip by default), with
//! an `Idempotency-Key` derived from its first and last record's keys. A 2xx acknowledges the
//! batch; 408, 429 and 5xx (and no answer) may pass; any other answer refuses it. Marks go in
//! batches of their own, one line per session (`{"machine":…,"host":…,"marks":{…}}`).

use super::{Destination, Failure, Machine, SinkSpec, Target};
use crate::archive::ExportRow;
use crate::archive::envelope::Envelope;
use crate::archive::marks::MarksNow;
use crate::consumers::ship::spec::Secret;
use crate::error::Result;
use flate2::Compression;
use flate2::write::GzEncoder;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

/// How much of an error answer's body goes into the log and `dead_letters`.
const ANSWER_LIMIT: u64 = 1024;

/// An HTTP collector.
pub(super) struct Http {
    url: String,
    token: Option<Secret>,
    headers: BTreeMap<String, String>,
    gzip: bool,
    machine: Machine,
    agent: ureq::Agent,
}

impl Http {
    /// The destination of `spec` (an http target).
    pub(super) fn new(spec: &SinkSpec, machine: &Machine) -> Result<Http> {
        let Target::Http {
            url,
            token,
            headers,
            gzip,
        } = &spec.target
        else {
            unreachable!("an http destination is made from an http target")
        };
        // A redirect would turn the POST into a GET without the body, and a 2xx to that
        // would acknowledge a batch never delivered: a 3xx is an answer here.
        let agent = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(spec.timeout))
            .user_agent(concat!("transcript-sync/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Ok(Http {
            url: url.clone(),
            token: token.clone(),
            headers: headers.clone(),
            gzip: *gzip,
            machine: machine.clone(),
            agent,
        })
    }

    /// The request body: one envelope per line, gzipped when asked.
    fn body(&self, batch: &[ExportRow]) -> std::io::Result<Vec<u8>> {
        let mut ndjson = Vec::new();
        for row in batch {
            Envelope::of(row).write_shipped(&mut ndjson, &self.machine.id, &self.machine.host)?;
        }
        self.encoded(ndjson)
    }

    /// The request body of `marks`: one line per session, gzipped when asked.
    fn marks_body(&self, marks: &[MarksNow]) -> std::io::Result<Vec<u8>> {
        let mut ndjson = Vec::new();
        for m in marks {
            let line = serde_json::json!({
                "machine": self.machine.id,
                "host": self.machine.host,
                "marks": {
                    "harness": m.key.harness,
                    "session": m.key.session,
                    "starred": m.marks.starred,
                    "tags": m.marks.tags,
                    "note": m.marks.note,
                    "changed_ms": m.changed_ms,
                },
            });
            serde_json::to_writer(&mut ndjson, &line)?;
            ndjson.push(b'\n');
        }
        self.encoded(ndjson)
    }

    /// `ndjson`, gzipped when asked.
    fn encoded(&self, ndjson: Vec<u8>) -> std::io::Result<Vec<u8>> {
        if !self.gzip {
            return Ok(ndjson);
        }
        let mut gz = GzEncoder::new(Vec::with_capacity(ndjson.len() / 4), Compression::fast());
        gz.write_all(&ndjson)?;
        gz.finish()
    }

    /// What an answer means: 2xx acknowledges; 408, 429 and 5xx may pass (after
    /// `Retry-After`); anything else refuses the batch. The answer's body, up to a KiB, goes
    /// into the message.
    fn answered(
        &self,
        mut response: ureq::http::Response<ureq::Body>,
    ) -> std::result::Result<(), Failure> {
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        let retry_after = (response.headers().get("retry-after"))
            .and_then(|v| v.to_str().ok())
            .and_then(retry_after);
        let mut answer = Vec::new();
        let _ = (response.body_mut().as_reader())
            .take(ANSWER_LIMIT)
            .read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        let mut message = format!("HTTP {} answered {status}: {}", self.url, answer.trim());
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok());
        match refusal(status) {
            Refusal::OfTheRecords => Err(Failure::Refused { message }),
            Refusal::Passing => Err(Failure::Transient {
                message,
                retry_after,
            }),
            Refusal::OfTheSink(fix) => {
                message.push_str(&format!("; {fix}"));
                if let Some(location) = location {
                    message.push_str(&format!(" (Location: {location})"));
                }
                Err(Failure::transient(message))
            }
        }
    }

    /// The batch's idempotency key: the machine and the first and last record's keys.
    fn idempotency_key(&self, batch: &[ExportRow]) -> String {
        let key = |r: &ExportRow| format!("{}.{}.{}", r.source, r.generation, r.offset);
        let (first, last) = (&batch[0], &batch[batch.len() - 1]);
        format!("{}:{}-{}", self.machine.id, key(first), key(last))
    }

    /// POSTs `body` (or fails with the error that made no body) under the idempotency key
    /// `key`.
    fn post(
        &mut self,
        body: std::io::Result<Vec<u8>>,
        key: String,
    ) -> std::result::Result<(), Failure> {
        let body =
            body.map_err(|e| Failure::transient(format!("building the request body: {e}")))?;
        let mut request = (self.agent.post(&self.url))
            .header("Content-Type", "application/x-ndjson")
            .header("Idempotency-Key", key);
        if self.gzip {
            request = request.header("Content-Encoding", "gzip");
        }
        if let Some(secret) = &self.token {
            let token = secret.read().map_err(Failure::transient)?;
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        match request.send(&body[..]) {
            Ok(response) => self.answered(response),
            Err(e) => Err(Failure::transient(format!("HTTP {}: {e}", self.url))),
        }
    }
}

impl Destination for Http {
    fn deliver(&mut self, batch: &[ExportRow]) -> std::result::Result<(), Failure> {
        let key = self.idempotency_key(batch);
        self.post(self.body(batch), key)
    }

    fn deliver_marks(&mut self, marks: &[MarksNow]) -> std::result::Result<(), Failure> {
        // The seqs of the changes: the same marks shipped again have the same key.
        let (first, last) = (marks[0].seq, marks[marks.len() - 1].seq);
        let key = format!("{}:marks:{first}-{last}", self.machine.id);
        self.post(self.marks_body(marks), key)
    }

    fn kind(&self) -> &'static str {
        "HTTP collector unreachable"
    }
}

/// What a status other than 2xx says about the batch.
#[derive(Debug, PartialEq, Eq)]
enum Refusal {
    /// The records (400, 413, 422, other 4xx): bisected down to those at fault.
    OfTheRecords,
    /// Busy or down (408, 429, 5xx): retried.
    Passing,
    /// The sink's configuration (a redirect, no or a wrong token, no such endpoint): retried
    /// until someone fixes it, never blamed on the records; the fix.
    OfTheSink(&'static str),
}

fn refusal(status: u16) -> Refusal {
    match status {
        408 | 429 | 500..=599 => Refusal::Passing,
        300..=399 => {
            Refusal::OfTheSink("the collector redirects: set the sink's url to where it points")
        }
        401 | 403 | 407 => Refusal::OfTheSink("check the sink's token (token_file or token_env)"),
        404 | 405 | 410 => {
            Refusal::OfTheSink("check the sink's url: the collector has no such endpoint")
        }
        _ => Refusal::OfTheRecords,
    }
}

/// A `Retry-After` value in seconds; an HTTP date is not read (the backoff applies then).
fn retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_about_the_records_refuse_them() {
        assert_eq!(refusal(400), Refusal::OfTheRecords);
        assert_eq!(refusal(413), Refusal::OfTheRecords);
        assert_eq!(refusal(503), Refusal::Passing);
        assert_eq!(refusal(429), Refusal::Passing);
        for status in [301, 302, 307, 401, 403, 404, 410] {
            assert!(matches!(refusal(status), Refusal::OfTheSink(_)), "{status}");
        }
    }

    #[test]
    fn retry_after_is_read_in_seconds() {
        assert_eq!(retry_after(" 120 "), Some(Duration::from_secs(120)));
        assert_eq!(retry_after("0"), Some(Duration::ZERO));
        assert_eq!(retry_after("Wed, 21 Oct 2026 07:28:00 GMT"), None);
    }
}
