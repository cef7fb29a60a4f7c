//! Live feeds: server-sent events of the records the daemon archives, read from its
//! subscriber socket from a `seq` on. A session's page asks for its own records after the
//! last one its index held when the page was made; the live page for every record from now.
//! Each record is sent as the HTML of its message, with its `seq` as the event's id, so
//! that a browser that connects again (with `Last-Event-ID`) misses none and repeats none.

use super::{Answer, Asked, Shared, pages};
use crate::consumers::socket::{Control, Request};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// How long a quiet feed waits before it writes a comment, which finds a closed page.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long it waits before it tries a daemon that did not answer again.
const RETRY: Duration = Duration::from_secs(2);

/// What a feed sends.
pub(crate) struct Feed {
    request: Request,
    /// Each record as a message of a conversation (else as a line of the live page).
    conversation: bool,
}

/// The feed of session `id`'s records after `since` (or the `Last-Event-ID`).
pub(crate) fn session(asked: &Asked, id: &str) -> Answer {
    Answer::Live(Feed {
        request: Request {
            since_seq: since(asked),
            session: Some(id.to_owned()),
            ..Request::default()
        },
        conversation: true,
    })
}

/// The feed of every record from now on (or after `since`, or the `Last-Event-ID`).
pub(crate) fn global(asked: &Asked) -> Answer {
    Answer::Live(Feed {
        request: Request {
            since_seq: since(asked),
            harness: asked.param("harness").map(str::to_owned),
            ..Request::default()
        },
        conversation: false,
    })
}

fn since(asked: &Asked) -> Option<i64> {
    (asked.last_event.as_deref())
        .or(asked.param("since"))
        .and_then(|s| s.parse().ok())
}

impl Feed {
    /// Writes the response's head, then the events, until the page goes away.
    pub(crate) fn run(mut self, shared: &Shared, mut out: Box<dyn Write + Send>) {
        let mut head = String::from(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n",
        );
        for (name, value) in super::common_headers() {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        if out.write_all(head.as_bytes()).is_err() {
            return;
        }
        let mut said_down = false;
        loop {
            let written = match UnixStream::connect(&shared.socket) {
                Ok(stream) => {
                    said_down = false;
                    self.follow(stream, &mut out)
                }
                Err(e) if !said_down => {
                    said_down = true;
                    log::debug!("no daemon at {:?}: {e}", shared.socket);
                    let text = format!(
                        "Not live: no daemon answers at {}. New messages show once \
                         `transcript-sync run` archives them.",
                        shared.socket.display()
                    );
                    event(&mut out, "daemon", None, &text).map(|()| false)
                }
                Err(_) => out
                    .write_all(b": waiting\n\n")
                    .and_then(|()| out.flush())
                    .map(|()| false),
            };
            match written {
                // Lagged: at once again from where it was.
                Ok(true) => {}
                Ok(false) => std::thread::sleep(RETRY),
                Err(_) => return,
            }
        }
    }

    /// Follows one connection to the daemon: `Ok(true)` to connect again at once (lagged),
    /// `Ok(false)` when the daemon went away, `Err` when the page did.
    fn follow(&mut self, stream: UnixStream, out: &mut dyn Write) -> io::Result<bool> {
        let mut line = serde_json::to_vec(&self.request).expect("a request serializes");
        line.push(b'\n');
        if (&stream).write_all(&line).is_err() {
            return Ok(false);
        }
        let _ = stream.set_read_timeout(Some(KEEP_ALIVE));
        event(out, "daemon", None, "up")?;
        let mut reader = BufReader::new(stream);
        line.clear();
        loop {
            // A read that times out may have taken part of a line: it stays in `line`, and
            // the next read goes on from there.
            match reader.read_until(b'\n', &mut line) {
                Ok(0) => return Ok(false),
                Ok(_) if !line.ends_with(b"\n") => return Ok(false),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    out.write_all(b": keep-alive\n\n")?;
                    out.flush()?;
                    continue;
                }
                Err(_) => return Ok(false),
            }
            let again = self.send(&line, out)?;
            line.clear();
            if again {
                return Ok(true);
            }
        }
    }

    /// Sends what one line from the daemon says: a record as its event. `Ok(true)` when the
    /// daemon said `lagged` (to connect again from where it was).
    fn send(&mut self, line: &[u8], out: &mut dyn Write) -> io::Result<bool> {
        if let Ok(control) = serde_json::from_slice::<Control>(line) {
            return match control {
                Control::CaughtUp { seq } => {
                    event(out, "caught-up", None, &seq.to_string()).map(|()| false)
                }
                Control::Lagged { resume_from } => {
                    self.request.since_seq = Some(resume_from - 1);
                    Ok(true)
                }
                Control::Error { reason } => {
                    event(out, "refused", None, &reason)?;
                    Err(io::Error::other(reason))
                }
            };
        }
        let (Some(seq), _) = crate::archive::envelope::seq_of(line) else {
            return Ok(false);
        };
        if seq <= self.request.since_seq.unwrap_or(0) {
            return Ok(false);
        }
        let html = match self.conversation {
            true => pages::live_message(line),
            false => Some(pages::live_line(line)),
        };
        match html {
            Some(html) => event(out, "record", Some(seq), &html)?,
            // Not a message: only its place is said.
            None => event(out, "seq", Some(seq), &seq.to_string())?,
        }
        self.request.since_seq = Some(seq);
        Ok(false)
    }
}

/// Writes one event: its name, its id, its data a line each.
fn event(out: &mut dyn Write, name: &str, id: Option<i64>, data: &str) -> io::Result<()> {
    let mut text = format!("event: {name}\n");
    if let Some(id) = id {
        text.push_str(&format!("id: {id}\n"));
    }
    // A browser ends a line of the stream at `\r` too: one in the data (a progress bar's, in
    // a tool's output) is written as HTML's `&#13;`, so that it cannot end the line early
    // and start a field of its own (an event's name or id).
    for line in data.split('\n') {
        text.push_str("data: ");
        text.push_str(&line.replace('\r', "&#13;"));
        text.push('\n');
    }
    text.push('\n');
    out.write_all(text.as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_carriage_return_in_the_data_starts_no_field() {
        let mut out = Vec::new();
        event(
            &mut out,
            "record",
            Some(7),
            "<pre>10%\r\revent: refused\rid: 99\r\r</pre>\nb",
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains('\r'), "{text:?}");
        assert_eq!(
            text,
            "event: record\nid: 7\ndata: <pre>10%&#13;&#13;event: refused&#13;id: 99&#13;&#13;</pre>\ndata: b\n\n"
        );
    }
}
