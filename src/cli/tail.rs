//! `tail`: the archived records that match, and with `--follow` each new one as it commits,
//! through the daemon's socket. Across a `lagged` or a daemon restart it connects again from
//! the last `seq` it printed, so its output has no gap and no duplicate.

use crate::agents::message::{self, Part};
use crate::archive::Archive;
use crate::consumers::redact::Redactor;
use crate::consumers::socket::{Control, Filter, Request};
use crate::error::{Error, Result};
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How `tail` writes a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Style {
    /// The export envelope, one JSON line.
    Envelope,
    /// Time, harness, session, role and the first line of text.
    Text,
}

/// What `tail` was asked.
pub(crate) struct Tail<'a> {
    /// The archive.
    pub db: &'a Path,
    /// The daemon's socket.
    pub socket: &'a Path,
    /// Which records.
    pub request: Request,
    /// Only this machine's records (0: this one's), else every machine's.
    pub machine: Option<i64>,
    /// Start with the last this many matching records (when `request.since_seq` is unset).
    pub last: u64,
    /// Follow through the daemon.
    pub follow: bool,
    /// How to write them.
    pub style: Style,
    /// Redact each record.
    pub redactor: Option<&'a Redactor>,
}

/// The longest pause between two attempts to reach the daemon again.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

impl Tail<'_> {
    /// Writes the matching archived records to `out`, then, following, each new one until
    /// `out` is closed. `Err` when the archive cannot be read, or (following) no daemon
    /// answers at the first attempt, or it refuses the request.
    pub(crate) fn run(mut self, out: &mut impl Write) -> Result<io::Result<()>> {
        if self.request.since_seq.is_none() {
            self.request.since_seq = Some(self.start_seq()?);
        }
        if !self.follow {
            return self.archived(out);
        }
        let mut first = true;
        let mut backoff = Duration::from_millis(100);
        loop {
            let stream = match UnixStream::connect(self.socket) {
                Ok(stream) => stream,
                Err(e) if first => {
                    return Err(Error::NoDaemon {
                        archive: self.db.to_owned(),
                        socket: self.socket.to_owned(),
                        reason: e.to_string(),
                    });
                }
                Err(_) => {
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            first = false;
            match self.stream(stream, out)? {
                Ok(true) => backoff = Duration::from_millis(100),
                Ok(false) => {
                    log::info!("the daemon went away; waiting for it to start again");
                    std::thread::sleep(backoff);
                }
                Err(e) => return Ok(Err(e)),
            }
        }
    }

    /// Where the output starts: before the last `self.last` matching records.
    fn start_seq(&self) -> Result<i64> {
        let archive = Archive::open_existing(self.db)?;
        let unfiltered = self.request == Request::default() && self.machine.is_none();
        if unfiltered {
            return archive.before_last(self.last);
        }
        let filter = self.filter()?;
        let mut machines = Machines::default();
        let mut kept = std::collections::VecDeque::new();
        archive
            .export(0, None, |row| {
                let mine = machines.wanted(&archive, self.machine, row.source);
                if mine && filter.matches(&row.harness, &row.path, row.source) {
                    kept.push_back(row.seq);
                    if kept.len() as u64 > self.last {
                        kept.pop_front();
                    }
                }
                Ok(())
            })?
            .map_err(|source| Error::Stdout { source })?;
        Ok(match kept.front() {
            Some(seq) => seq - 1,
            None => archive.last_seq()?,
        })
    }

    fn filter(&self) -> Result<Filter> {
        Filter::of(&self.request, self.db).map_err(|reason| Error::Tail { reason })
    }

    /// Without `--follow`: the matching archived records after `since_seq`.
    fn archived(&self, out: &mut impl Write) -> Result<io::Result<()>> {
        let archive = Archive::open_existing(self.db)?;
        let filter = self.filter()?;
        let since = self.request.since_seq.unwrap_or(0);
        let mut machines = Machines::default();
        archive.export(since, self.request.path.as_deref(), |row| {
            if !filter.matches(&row.harness, &row.path, row.source)
                || !machines.wanted(&archive, self.machine, row.source)
            {
                return Ok(());
            }
            let mut line = Vec::new();
            crate::archive::envelope::write_envelope(&mut line, &row)?;
            let host = machines.host(&archive, row.source);
            self.write_line(out, &line, host.as_deref())
        })
    }

    /// Reads one connection: `Ok(true)` when it is to be opened again at once (lagged),
    /// `Ok(false)` when the daemon went away. Moves `since_seq` past each record written.
    fn stream(&mut self, stream: UnixStream, out: &mut impl Write) -> Result<io::Result<bool>> {
        let mut request = serde_json::to_vec(&self.request).expect("a request serializes");
        request.push(b'\n');
        if (&stream).write_all(&request).is_err() {
            return Ok(Ok(false));
        }
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        // Opened when a pulled record first needs its machine's name.
        let mut archive: Option<Archive> = None;
        let mut machines = Machines::default();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return Ok(Ok(false)),
                Ok(_) if !line.ends_with(b"\n") => return Ok(Ok(false)),
                Ok(_) => {}
            }
            if let Ok(control) = serde_json::from_slice::<Control>(&line) {
                match control {
                    Control::CaughtUp { .. } => continue,
                    Control::Lagged { resume_from } => {
                        self.request.since_seq = Some(resume_from - 1);
                        return Ok(Ok(true));
                    }
                    Control::Error { reason } => return Err(Error::Tail { reason }),
                }
            }
            let (seq, source) = crate::archive::envelope::seq_of(&line);
            if seq.is_some_and(|s| s <= self.request.since_seq.unwrap_or(0)) {
                continue;
            }
            let source = source.unwrap_or(0);
            let host = match crate::archive::is_pulled(source) || self.machine.is_some() {
                false => None,
                true => {
                    if archive.is_none() {
                        archive = Some(Archive::open_existing(self.db)?);
                    }
                    let archive = archive.as_ref().expect("opened above");
                    if !machines.wanted(archive, self.machine, source) {
                        self.request.since_seq = seq.or(self.request.since_seq);
                        continue;
                    }
                    machines.host(archive, source)
                }
            };
            if let Err(e) = self.write_line(out, &line, host.as_deref()) {
                return Ok(Err(e));
            }
            self.request.since_seq = seq.or(self.request.since_seq);
        }
    }

    /// Writes one envelope line (with its `\n`) as asked; a record pulled from another
    /// machine (`host`) is named as that machine's.
    fn write_line(&self, out: &mut impl Write, line: &[u8], host: Option<&str>) -> io::Result<()> {
        let line = match self.redactor {
            Some(r) => r.redact_record(line),
            None => std::borrow::Cow::Borrowed(line),
        };
        let line = match (host, line.strip_prefix(b"{")) {
            (Some(host), Some(rest)) => {
                let mut named = b"{\"machine\":".to_vec();
                serde_json::to_writer(&mut named, host)?;
                named.push(b',');
                named.extend_from_slice(rest);
                std::borrow::Cow::Owned(named)
            }
            _ => line,
        };
        match self.style {
            Style::Envelope => out.write_all(&line)?,
            Style::Text => writeln!(out, "{}", text_line(&line))?,
        }
        if !line.ends_with(b"\n") && self.style == Style::Envelope {
            out.write_all(b"\n")?;
        }
        out.flush()
    }
}

/// The machine of each pulled source, as looked up (this machine's sources have none).
#[derive(Default)]
struct Machines {
    known: std::collections::HashMap<i64, Option<(i64, String)>>,
}

impl Machines {
    /// Source `source`'s machine here and its name; `None` for this machine's.
    fn of(&mut self, archive: &Archive, source: i64) -> Option<(i64, String)> {
        if !crate::archive::is_pulled(source) {
            return None;
        }
        let found = (self.known.entry(source))
            .or_insert_with(|| archive.machine_of_source(source).ok().flatten());
        found.clone()
    }

    /// Whether `source` is of `machine` (any machine's when `None`).
    fn wanted(&mut self, archive: &Archive, machine: Option<i64>, source: i64) -> bool {
        match machine {
            None => true,
            Some(0) => !crate::archive::is_pulled(source),
            Some(m) => self.of(archive, source).is_some_and(|(id, _)| id == m),
        }
    }

    /// The name of `source`'s machine, for a pulled one.
    fn host(&mut self, archive: &Archive, source: i64) -> Option<String> {
        self.of(archive, source).map(|(_, host)| host)
    }
}

/// One readable line for an envelope: time, harness, session, role, the first line of its
/// text.
pub(crate) fn text_line(envelope: &[u8]) -> String {
    let Ok(v) = serde_json::from_slice::<Value>(envelope) else {
        return String::from_utf8_lossy(envelope).trim_end().to_owned();
    };
    let harness = match v["machine"].as_str() {
        Some(machine) => format!("{}@{machine}", v["harness"].as_str().unwrap_or("-")),
        None => v["harness"].as_str().unwrap_or("-").to_owned(),
    };
    let record = serde_json::to_vec(&v["record"]).unwrap_or_default();
    let parsed = message::parse(v["harness"].as_str().unwrap_or("-"), &record);
    let time = parsed.at_ms.map_or("-".to_owned(), |ms| {
        let at = std::time::UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
        humantime::format_rfc3339_seconds(at).to_string()
    });
    let session: String = (parsed.session_id.as_deref().unwrap_or("-").chars())
        .take(8)
        .collect();
    let (role, text) = match &parsed.message {
        Some(m) => (
            m.role.as_str(),
            m.parts
                .iter()
                .map(Part::text)
                .find(|t| !t.trim().is_empty()),
        ),
        None => ("-", v["record"]["type"].as_str().map(|t| format!("({t})"))),
    };
    let text = text.unwrap_or_default();
    let first: String = text
        .trim()
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .take(160)
        .collect();
    format!(
        "{time}  {harness:<11}  {session:<8}  {role:<9}  {first}",
        time = time,
    )
}
