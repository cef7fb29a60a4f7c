//! An HTTP collector on loopback that receives the daemon's sink batches: HTTP/1.1 with
//! keep-alive, a body of `Content-Length` bytes. It answers from a script (then accepts),
//! and refuses a body holding a chosen string with a 400 that quotes the start of the body
//! back, as many collectors do. What it does with a body is its [`Body`]: keep it for a test
//! to read, count its records' keys as a collector that stores before it acknowledges
//! would, or drop it unread past its length for a throughput benchmark.

use flate2::read::GzDecoder;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the collector answers a request.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// 200.
    Accept,
    /// 503 with `Retry-After: 0`.
    Unavailable,
    /// Waits this long, then 200 (after the client gave up).
    Slow(Duration),
    /// Closes the connection with a reset, without an answer.
    Reset,
}

/// What the collector does with a body.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// Un-gzips it and keeps it, with the headers, in [`Collector::received`].
    Keep,
    /// Reads it and drops it.
    Discard,
    /// Un-gzips it and counts the records' keys in the [`Tally`].
    CountKeys,
}

/// A request the collector kept: its headers (lowercase names), its body un-gzipped, and the
/// status it answered (0 for none).
#[derive(Clone, Debug)]
pub struct Received {
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub status: u16,
}

/// A record's key anywhere it is shipped (the machine is the same for every record here).
pub type Key = (i64, i64, u64);

/// What arrived since the collector started or was last taken.
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
    /// Answers still to give, in order; once empty, it accepts.
    pub script: Arc<Mutex<VecDeque<Answer>>>,
    /// A body holding this gets a 400 ([`Body::Keep`]).
    pub refuse: Arc<Mutex<Option<String>>>,
    /// Every request, with [`Body::Keep`].
    pub received: Arc<Mutex<Vec<Received>>>,
    tally: Arc<Mutex<Tally>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

/// What every connection's thread shares with the collector.
#[derive(Clone)]
struct Shared {
    body: Body,
    script: Arc<Mutex<VecDeque<Answer>>>,
    refuse: Arc<Mutex<Option<String>>>,
    received: Arc<Mutex<Vec<Received>>>,
    tally: Arc<Mutex<Tally>>,
}

impl Collector {
    /// A collector on a free port that keeps every request, answering `script` first and
    /// refusing bodies that hold `refuse`.
    pub fn start(script: &[Answer], refuse: Option<&str>) -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding the collector");
        Collector::serve_on(listener, Body::Keep, script, refuse)
    }

    /// A collector on 127.0.0.1:`port` that accepts every request and does `body` with it.
    pub fn listen(port: u16, body: Body) -> Collector {
        let listener = TcpListener::bind(("127.0.0.1", port)).expect("binding the collector");
        Collector::serve_on(listener, body, &[], None)
    }

    /// Each connection gets a thread of its own.
    fn serve_on(
        listener: TcpListener,
        body: Body,
        script: &[Answer],
        refuse: Option<&str>,
    ) -> Collector {
        let shared = Shared {
            body,
            script: Arc::new(Mutex::new(script.iter().copied().collect())),
            refuse: Arc::new(Mutex::new(refuse.map(str::to_owned))),
            received: Arc::default(),
            tally: Arc::default(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let port = listener.local_addr().expect("a bound address").port();
        let (s, st) = (shared.clone(), Arc::clone(&stop));
        let accept = std::thread::spawn(move || accept_loop(&listener, &s, &st));
        Collector {
            port,
            script: shared.script,
            refuse: shared.refuse,
            received: shared.received,
            tally: shared.tally,
            stop,
            accept: Some(accept),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/ingest", self.port)
    }

    /// The bodies of the requests it accepted, in order ([`Body::Keep`]).
    pub fn bodies(&self) -> Vec<Vec<u8>> {
        (self
            .received
            .lock()
            .expect("a collector thread panicked")
            .iter())
        .filter(|r| r.status == 200)
        .map(|r| r.body.clone())
        .collect()
    }

    /// The keys (source, generation, offset) of the records in accepted requests, and how
    /// many times each came ([`Body::Keep`]).
    pub fn accepted(&self) -> BTreeMap<(i64, i64, i64), usize> {
        let mut keys = BTreeMap::new();
        let received = self.received.lock().expect("a collector thread panicked");
        for r in received.iter().filter(|r| r.status == 200) {
            for line in r.body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let v: serde_json::Value = serde_json::from_slice(line).expect("an envelope");
                let key = (
                    v["source"].as_i64().expect("a source"),
                    v["generation"].as_i64().expect("a generation"),
                    v["offset"].as_i64().expect("an offset"),
                );
                *keys.entry(key).or_insert(0) += 1;
            }
        }
        keys
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

fn accept_loop(listener: &TcpListener, shared: &Shared, stop: &AtomicBool) {
    for stream in listener.incoming() {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let shared = shared.clone();
        // A connection ends when the client closes it; its thread is not joined.
        std::thread::spawn(move || {
            let _ = serve(stream, &shared);
        });
    }
}

/// One request's head.
struct Head {
    /// Every header, by lowercase name.
    headers: HashMap<String, String>,
    content_length: Option<u64>,
    gzip: bool,
    expect_continue: bool,
}

/// Answers requests on `stream` until the client closes it (or is reset).
fn serve(stream: TcpStream, shared: &Shared) -> io::Result<()> {
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
        let read = match shared.body {
            Body::Discard => io::copy(&mut limited, &mut io::sink())?,
            Body::Keep | Body::CountKeys => {
                buf.clear();
                limited.read_to_end(&mut buf)? as u64
            }
        };
        if read < len {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        note(shared, &buf, &head, len, at);
        let answer = shared.script.lock().expect("script lock").pop_front();
        let answer = answer.unwrap_or(Answer::Accept);
        let plain = match shared.body {
            Body::Keep => plain_body(&buf, head.gzip)?,
            Body::Discard | Body::CountKeys => Vec::new(),
        };
        if let Answer::Reset = answer {
            keep(shared, head.headers, plain, 0);
            reset(&writer);
            return Ok(());
        }
        reply(&mut writer, shared, head.headers, plain, answer)?;
    }
    Ok(())
}

/// Answers one request: 503 when the script says so, 400 when the body holds the refused
/// string, else 200 (after a wait, for [`Answer::Slow`]).
fn reply(
    writer: &mut TcpStream,
    shared: &Shared,
    headers: HashMap<String, String>,
    plain: Vec<u8>,
    answer: Answer,
) -> io::Result<()> {
    let refused = (shared.refuse.lock().expect("refuse lock").as_ref())
        .is_some_and(|m| plain.windows(m.len()).any(|w| w == m.as_bytes()));
    let status = match answer {
        Answer::Unavailable => 503,
        _ if refused => 400,
        _ => 200,
    };
    let start: String = String::from_utf8_lossy(&plain).chars().take(588).collect();
    keep(shared, headers, plain, status);
    let text = match (answer, status) {
        (Answer::Slow(d), 200) => {
            std::thread::sleep(d);
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_owned()
        }
        (_, 400) => {
            let quoted = format!("bad record: {start}");
            format!(
                "HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\n\r\n{quoted}",
                quoted.len()
            )
        }
        (_, 503) => {
            "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 4\r\n\r\nbusy"
                .into()
        }
        _ => "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_owned(),
    };
    writer.write_all(text.as_bytes())
}

/// Keeps a request (with [`Body::Keep`]) and the status it got.
fn keep(shared: &Shared, headers: HashMap<String, String>, body: Vec<u8>, status: u16) {
    if shared.body != Body::Keep {
        return;
    }
    let received = Received {
        headers,
        body,
        status,
    };
    shared
        .received
        .lock()
        .expect("received lock")
        .push(received);
}

/// Reads a request line and headers; `None` at a clean end of the connection.
fn read_head(reader: &mut impl BufRead) -> io::Result<Option<Head>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut head = Head {
        headers: HashMap::new(),
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
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        match name.as_str() {
            "content-length" => head.content_length = value.parse().ok(),
            "content-encoding" => head.gzip = value.eq_ignore_ascii_case("gzip"),
            "expect" => head.expect_continue = value.eq_ignore_ascii_case("100-continue"),
            _ => {}
        }
        head.headers.insert(name, value.to_owned());
    }
}

/// Adds one request to the tally (and, when counting, the keys of its body).
fn note(shared: &Shared, buf: &[u8], head: &Head, len: u64, at: Instant) {
    let keys = match shared.body {
        Body::CountKeys => keys_of(buf, head.gzip),
        Body::Keep | Body::Discard => Ok(Vec::new()),
    };
    let mut t = shared.tally.lock().expect("a collector thread panicked");
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

/// The body as the client meant it: un-gzipped when it came gzip'd.
fn plain_body(body: &[u8], gzip: bool) -> io::Result<Vec<u8>> {
    let mut plain = Vec::new();
    match gzip {
        true => GzDecoder::new(body).read_to_end(&mut plain).map(drop)?,
        false => plain.extend_from_slice(body),
    }
    Ok(plain)
}

/// The keys of the envelopes in `body`, in order.
fn keys_of(body: &[u8], gzip: bool) -> io::Result<Vec<Key>> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        source: i64,
        generation: i64,
        offset: u64,
    }
    let ndjson = plain_body(body, gzip)?;
    let lines = ndjson.split(|b| *b == b'\n').filter(|l| !l.is_empty());
    lines
        .map(|line| {
            let e: Envelope = serde_json::from_slice(line)?;
            Ok((e.source, e.generation, e.offset))
        })
        .collect()
}

/// Closes `stream` with a TCP reset (SO_LINGER 0) rather than an orderly close.
fn reset(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket descriptor, and a pointer to a linger of the size given.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}
