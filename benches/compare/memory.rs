//! Memory: peak RSS (VmHWM) of each live subject while it forwards one very large record, a
//! single JSON line appended to a watched file.

use crate::Ctx;
use crate::corpus::live_dir;
use crate::latency::{self, SUBJECTS};
use crate::peers;
use crate::records::Rng;
use serde::Serialize;
use std::fs::OpenOptions;
use std::io::Write;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub subject: String,
    pub record_bytes: u64,
    /// From `write()` of the record to its line on the output.
    pub secs: Option<f64>,
    /// Bytes of the line that came out (the record whole is `record_bytes` + 1, or more for
    /// an envelope).
    pub line_bytes: Option<u64>,
    pub peak_rss_mib: Option<f64>,
    pub note: String,
}

pub fn run(ctx: &Ctx) -> Vec<Row> {
    let record = big_record(ctx.scale.big_record);
    let mut rows = Vec::new();
    for name in SUBJECTS {
        if name != "tail -F" && name != "transcript-sync" && ctx.peers.is_none() {
            continue;
        }
        let state = ctx.fresh_state(name);
        let files = live_dir(&state.path().join("live"), 1, 2);
        let mut subject = latency::start(ctx, name, state.path(), &files);
        latency::warm_up(&mut subject, &files);
        let mut file = OpenOptions::new()
            .append(true)
            .open(&files[0])
            .expect("opening the live file");
        let start = Instant::now();
        file.write_all(&record).expect("appending the record");
        let arrived = subject.output.wait(Duration::from_secs(120), |s| {
            s.per_tag.contains_key(&b'b') || s.eof
        });
        let arrival = subject
            .output
            .with(|s| s.arrivals.iter().find(|a| a.tag == b'b').copied());
        let row = Row {
            subject: name.to_owned(),
            record_bytes: record.len() as u64 - 1,
            secs: arrival.map(|a| (a.at - start).as_secs_f64()),
            line_bytes: arrival.map(|a| a.len as u64),
            peak_rss_mib: subject.peak_rss_kib().map(|k| k as f64 / 1024.0),
            note: match arrival {
                None => format!("not forwarded; last log lines: {}", subject.logs.tail(3)),
                Some(a) if (a.len as u64) < record.len() as u64 => "cut short".to_owned(),
                Some(_) => String::new(),
            },
        };
        println!(
            "  {:<26} {} MiB record: {} peak RSS {:.1} MiB",
            name,
            row.record_bytes >> 20,
            match (arrived, row.secs, row.line_bytes) {
                (true, Some(s), Some(len)) => format!("out in {s:.3} s as a line of {len} bytes;"),
                _ => "NOT forwarded within 120 s;".to_owned(),
            },
            row.peak_rss_mib.unwrap_or(f64::NAN)
        );
        rows.push(row);
        subject.stop();
        peers::assert_no_system_logger(ctx.had_dev_log);
    }
    rows
}

/// A user message holding one base64 image of about `len` bytes, as one JSON line with its
/// newline, marked `b1`.
fn big_record(len: u64) -> Vec<u8> {
    let head = br#"{"mk":"b1","type":"user","message":{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":""#;
    let tail = b"\"}}]}}\n";
    let data = Rng::new(len).base64(len as usize - head.len() - tail.len() + 1);
    let mut out = Vec::with_capacity(len as usize + 1);
    out.extend_from_slice(head);
    out.extend_from_slice(data.as_bytes());
    out.extend_from_slice(tail);
    out
}
