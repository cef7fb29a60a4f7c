//! An HTTP collector on loopback that acknowledges every POST at once: HTTP/1.1 with
//! keep-alive, a body of `Content-Length` bytes, answered `200` with `Content-Length: 0`.
//! Either it drops the body unread past its length, or it unzips it and counts the key
//! (source, generation, offset) of every NDJSON line before it answers, as a collector that
//! stores before it acknowledges would.

use flate2::read::GzDecoder;
use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// What the collector does with a body.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// Reads it and drops it.
    Discard,
    /// Unzips it and counts the records' keys.
    CountKeys,
}

/// A record's key anywhere it is shipped (the machine is the same for every record here).
pub type Key = (i64, i64, u64);

/// What arrived since the collector started or was last reset.
#[derive(Default)]
pub struct Tally {
    pub requests: u64,
    /// Body bytes as sent (gzip).
    pub body_bytes: u64,
    /// NDJSON lines (counting only).
    pub lines: u64,
    /// Lines whose key had arrived before (counting only).
    pub duplicates: u64,
    pub keys: HashSet<Key>,
    pub first_request: Option<Instant>,
    /// Bodies that could not be read as gzip'd NDJSON envelopes, with why.
    pub bad_bodies: Vec<String>,
}

/// A running collector; it stops taking connections when dropped.
pub struct Collector {
    pub port: u16,
    tally: Arc<Mutex<Tally>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl Collector {
    /// Listens on 127.0.0.1:`port`; each connection gets a thread of its own.
    pub fn start(port: u16, body: Body) -> Collector {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("binding the collector");
        let tally = Arc::new(Mutex::new(Tally::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, s) = (Arc::clone(&tally), Arc::clone(&stop));
        let accept = std::thread::spawn(move || accept_loop(&listener, body, &t, &s));
        Collector {
            port,
            tally,
            stop,
            accept: Some(accept),
        }
    }

    /// When the first request since the last [`Collector::take`] arrived.
    pub fn first_request(&self) -> Option<Instant> {
        self.tally
            .lock()
            .expect("a collector thread panicked")
            .first_request
    }

    /// The tally so far, and a fresh one from now on.
    pub fn take(&self) -> Tally {
        std::mem::take(&mut *self.tally.lock().expect("a collector thread panicked"))
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, body: Body, tally: &Arc<Mutex<Tally>>, stop: &AtomicBool) {
    for stream in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let tally = Arc::clone(tally);
        // A connection ends when the client closes it; its thread is not joined.
        std::thread::spawn(move || {
            let _ = serve(stream, body, &tally);
        });
    }
}

/// One request's head: what the body is.
struct Head {
    content_length: Option<u64>,
    gzip: bool,
    expect_continue: bool,
}

/// Answers requests on `stream` until the client closes it.
fn serve(stream: TcpStream, body: Body, tally: &Mutex<Tally>) -> io::Result<()> {
    let mut reader = BufReader::with_capacity(1 << 16, stream.try_clone()?);
    let mut writer = stream;
    let mut buf = Vec::new();
    while let Some(head) = read_head(&mut reader)? {
        if head.expect_continue {
            writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        }
        let Some(len) = head.content_length else {
            writer.write_all(b"HTTP/1.1 411 Length Required\r\nContent-Length: 0\r\n\r\n")?;
            return Ok(());
        };
        let at = Instant::now();
        let mut limited = (&mut reader).take(len);
        let read = match body {
            Body::Discard => io::copy(&mut limited, &mut io::sink())?,
            Body::CountKeys => {
                buf.clear();
                limited.read_to_end(&mut buf)? as u64
            }
        };
        if read < len {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        note(tally, body, &buf, &head, len, at);
        writer.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")?;
    }
    Ok(())
}

/// Reads a request line and headers; `None` at a clean end of the connection.
fn read_head(reader: &mut impl BufRead) -> io::Result<Option<Head>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut head = Head {
        content_length: None,
        gzip: false,
        expect_continue: false,
    };
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let header = line.trim_end();
        if header.is_empty() {
            return Ok(Some(head));
        }
        let Some((name, value)) = header.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => head.content_length = value.parse().ok(),
            "content-encoding" => head.gzip = value.eq_ignore_ascii_case("gzip"),
            "expect" => head.expect_continue = value.eq_ignore_ascii_case("100-continue"),
            _ => {}
        }
    }
}

/// Adds one request to the tally (and, when counting, the keys of its body).
fn note(tally: &Mutex<Tally>, body: Body, buf: &[u8], head: &Head, len: u64, at: Instant) {
    let keys = match body {
        Body::Discard => Ok(Vec::new()),
        Body::CountKeys => keys_of(buf, head.gzip),
    };
    let mut t = tally.lock().expect("a collector thread panicked");
    t.requests += 1;
    t.body_bytes += len;
    t.first_request.get_or_insert(at);
    match keys {
        Ok(keys) => {
            t.lines += keys.len() as u64;
            for key in keys {
                if !t.keys.insert(key) {
                    t.duplicates += 1;
                }
            }
        }
        Err(e) => t.bad_bodies.push(e.to_string()),
    }
}

/// The keys of the envelopes in `body`, in order.
fn keys_of(body: &[u8], gzip: bool) -> io::Result<Vec<Key>> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        source: i64,
        generation: i64,
        offset: u64,
    }
    let mut ndjson = Vec::new();
    match gzip {
        true => GzDecoder::new(body).read_to_end(&mut ndjson).map(drop)?,
        false => ndjson.extend_from_slice(body),
    }
    let lines = ndjson.split(|b| *b == b'\n').filter(|l| !l.is_empty());
    lines
        .map(|line| {
            let e: Envelope = serde_json::from_slice(line)?;
            Ok((e.source, e.generation, e.offset))
        })
        .collect()
}
