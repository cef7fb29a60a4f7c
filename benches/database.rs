//! Following OpenCode's database: what a 1 GB `opencode.db` costs the daemon to archive, to
//! follow while the agent writes into it, and to keep an eye on while it is idle. OpenCode
//! 1.2+ keeps every session in one SQLite database in WAL mode
//! (`~/.local/share/opencode/opencode.db`): tables `session`, `message` and `part`, whose
//! rows it updates in place, and `event`, the log of its changes, whose rowid only grows. The
//! real binary's `run`, with its built-in watchers under a HOME of the benchmark's own, reads
//! it read-only, finds the sessions changed since its mark through `event`, and captures each
//! as one whole document (its row, every message with its parts), archived by difference.
//!
//! The database is generated here, deterministically, with the tables' schema copied from the
//! recorded fixture (`tests/fixtures/agents/opencode/`) and rows in its shapes: about 2,000
//! sessions of 2–60 messages and a few of thousands, written interleaved in time as an agent
//! used over three months would (a long session's rows are spread over the whole file); each
//! turn a prompt, then replies that each open a step, think now and then, say something, call
//! one or two tools (bash, read, grep, edit; output 1–20 KB) and close the step; text of
//! 0.2–4 KB from a made-up vocabulary (no passage repeats); and the events OpenCode writes
//! for each change, each carrying the row as it then was. It is cached under
//! `target/bench/database/`, keyed by [`RECIPE`].
//!
//! 1. Backfill: `run --once` over a copy of it, beside a plain `SELECT` of every message and
//!    part, and the reader's own queries with its JSON building redone here: wall time, CPU
//!    and peak RSS (`wait4`), the bytes read (`rchar`), records, the archive against the
//!    database. And the daemon's query for the sessions changed since a mark, alone, beside
//!    the same kept to the rowid range.
//! 2. Following: `run` (caught up) while this process, as the agent, adds a message every
//!    0.5 s to one session, each write one transaction as OpenCode makes them, for 20 s; once
//!    to a session of 20 messages, once to the longest. The daemon's CPU and reads, its
//!    captures, each message's time from the commit that completes it to its record on the
//!    tap; then three lone messages, each left to settle.
//! 3. Idle: the daemon's CPU and reads over 60 s with nothing written.
//!
//! `cargo bench --bench database` (about 2.5 minutes on a 2-core VM, after the build and the
//! one-time generation of about 15 s); `DATABASE_QUICK=1` for a 100 MB database (one long
//! session of 1,200 messages) and a run of about a minute. Results: tables on stdout and
//! `target/bench/database.md`.

use rusqlite::{Connection, OpenFlags, params};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use testkit::cpu;
use testkit::daemon::{self, TapReader};
use testkit::env::env_flag;
use testkit::machine::{self, Machine};
use testkit::procfs;
use testkit::records::Rng;
use testkit::stats::quantile_of;
use testkit::words::Words;
use transcript_sync::RECORDS_COMMITTED;

const BIN: &str = env!("CARGO_BIN_EXE_transcript-sync");
/// The generator's version: a change to what it writes changes this, and so the cache's name.
const RECIPE: &str = "opencode-2";
/// The database OpenCode 1.18.33 wrote, recorded: the schema is copied from it.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/agents/opencode/.local/share/opencode/opencode.db"
);
/// The tables the generated database has, and their indexes.
const TABLES: &str = "'project', 'session', 'message', 'part', 'event_sequence', 'event'";
/// What one message takes in the file, all told (its parts, its events, pages), measured on
/// this generator; used to decide how many sessions make the database's size.
const BYTES_PER_MESSAGE: u64 = 25_000;
/// The days over which the sessions were written, and in how many projects.
const SPAN_DAYS: i64 = 90;
const PROJECTS: usize = 12;
/// How often the agent adds a message while followed, and the pause between the writes of
/// one message (a model streaming it).
const EVERY: Duration = Duration::from_millis(500);
const STEP_GAP: Duration = Duration::from_millis(8);
/// How many messages the short followed session has.
const SHORT: usize = 20;
/// How often the archive or the tap is looked at.
const POLL: Duration = Duration::from_millis(5);
/// The daemon is idle once its threads ran less than this in [`QUIET`].
const IDLE_CPU: Duration = Duration::from_millis(2);
const QUIET: Duration = Duration::from_millis(300);
/// Lone messages added after each following, each left to settle.
const LONE: usize = 3;

/// How large a run is.
struct Shape {
    mode: &'static str,
    /// The database's size, about.
    target: u64,
    /// The long sessions' lengths, in messages; the first is followed.
    long: &'static [usize],
    follow: Duration,
    idle: Duration,
}

const FULL: Shape = Shape {
    mode: "full",
    target: 1_000_000_000,
    long: &[4000, 2500, 1500],
    follow: Duration::from_secs(20),
    idle: Duration::from_secs(60),
};

const QUICK: Shape = Shape {
    mode: "quick",
    target: 100_000_000,
    long: &[1200],
    follow: Duration::from_secs(10),
    idle: Duration::from_secs(20),
};

fn main() {
    let shape = if env_flag("DATABASE_QUICK") {
        QUICK
    } else {
        FULL
    };
    let bench = machine::target_dir().join("bench");
    let (cached, made) = cached_database(&bench.join("database"), &shape);
    let scratch = bench.join("database-scratch");
    let _ = fs::remove_dir_all(&scratch);
    let home = scratch.join("home");
    let db = home.join(".local/share/opencode/opencode.db");
    fs::create_dir_all(db.parent().expect("a parent")).expect("creating the opencode directory");
    fs::copy(&cached, &db).expect("copying the database into the HOME");
    let started = humantime::format_rfc3339_seconds(SystemTime::now());
    let mut md = format!(
        "Taken {started} ({} mode). {}\n\n",
        shape.mode,
        Machine::summary()
    );
    report_database(&mut md, &made);
    let archive = scratch.join("archive.db");
    let bare = bare_read(&db);
    let documents = documents_read(&db);
    let finding = finding_changes(&db);
    let backfill = backfill(&home, &archive);
    report_backfill(&mut md, &made, &bare, &documents, &backfill);
    report_finding(&mut md, &made, &finding);
    let run = Run::start(&home, &archive);
    let short = follow(&run, &db, &made.short, shape.follow);
    let long = follow(&run, &db, &made.long, shape.follow);
    report_following(&mut md, &shape, run.caught_up, &short, &long);
    let idle = idle(&run, shape.idle);
    report_idle(&mut md, &idle);
    run.stop();
    let _ = writeln!(md, "Load average at end {}.", machine::load());
    println!("\n{md}");
    fs::write(bench.join("database.md"), &md).expect("writing database.md");
    println!("wrote {}", bench.join("database.md").display());
    let _ = fs::remove_dir_all(&scratch);
}

// ---------------------------------------------------------------------------------------
// Text: words, prose, code

/// Names, code and paths in the words of [`Words`].
trait Code {
    /// `a_b`: a name in code.
    fn ident(&mut self) -> String;
    fn code_line(&mut self) -> String;
    fn path(&mut self) -> String;
    fn lines(&mut self, len: usize, line: impl FnMut(&mut Words, usize) -> String) -> String;
}

impl Code for Words {
    fn ident(&mut self) -> String {
        let a = self.word().to_owned();
        format!("{a}_{}", self.word())
    }

    /// One line of Rust-looking code.
    fn code_line(&mut self) -> String {
        let (a, b, c) = (self.ident(), self.ident(), self.word().to_owned());
        let n = self.rng.below(1000);
        match self.rng.below(4) {
            0 => format!("    let {a} = {c}::{b}(&{a}, {n})?;"),
            1 => format!("    fn {a}(&self, {c}: &{b}) -> Result<{c}> {{"),
            2 => format!("        if {a}.{b}() > {n} {{ return Err(Error::{c}); }}"),
            _ => format!("    // {}", self.prose(40).trim_end()),
        }
    }

    /// A path in a project's tree.
    fn path(&mut self) -> String {
        let (a, b) = (self.word().to_owned(), self.word().to_owned());
        format!("src/{a}/{b}.rs")
    }

    /// Lines made by `line` until about `len` bytes.
    fn lines(&mut self, len: usize, mut line: impl FnMut(&mut Words, usize) -> String) -> String {
        let mut text = String::with_capacity(len + 128);
        let mut n = 1;
        while text.len() < len {
            text.push_str(&line(self, n));
            text.push('\n');
            n += 1;
        }
        text
    }
}

// ---------------------------------------------------------------------------------------
// What OpenCode writes (`tests/fixtures/agents/opencode/`), one transaction at a time

/// One row written, or one event logged.
enum Write {
    NewSession(Box<SessionRow>),
    /// A message's row, inserted or updated in place.
    Message {
        id: String,
        created: i64,
        at: i64,
        data: String,
    },
    Part {
        id: String,
        message: String,
        created: i64,
        at: i64,
        data: String,
    },
    /// The session's `time_updated`.
    Touch {
        at: i64,
    },
    Event {
        id: String,
        seq: i64,
        kind: &'static str,
        data: String,
    },
}

/// What one transaction of the agent writes.
type Step = Vec<Write>;

struct SessionRow {
    project: String,
    slug: String,
    directory: String,
    title: String,
    model: String,
    created: i64,
}

/// A session being written: what its next writes need.
struct Session {
    id: String,
    directory: String,
    /// Its next event's `seq`.
    seq: i64,
    /// The last prompt's id: the parent of the replies after it.
    prompt: String,
    created: i64,
    slug: String,
    title: String,
    /// Messages written so far, and planned.
    written: usize,
    planned: usize,
}

/// A message's writes, and which of them completes its record.
struct Message {
    id: String,
    steps: Vec<Step>,
    /// The step after which the message's record is as it stays.
    last: usize,
    /// A piece of its record once complete (and not before).
    marker: &'static str,
}

/// Writes what OpenCode writes: ids as it makes them (a prefix, 12 hex digits of the time in
/// ms by 4096 plus a counter, 14 random characters), rows and events in its shapes.
struct Agent {
    words: Words,
    rng: Rng,
    counter: u64,
}

impl Agent {
    fn new(seed: u64) -> Agent {
        Agent {
            words: Words::new(seed),
            rng: Rng::new(seed + 1),
            counter: 0,
        }
    }

    fn id(&mut self, prefix: &str, at: i64) -> String {
        const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
        self.counter += 1;
        let stamp = ((at as u64) * 4096 + (self.counter & 0xfff)) & 0xffff_ffff_ffff;
        let mut id = format!("{prefix}_{stamp:012x}");
        id.extend((0..14).map(|_| char::from(BASE62[self.rng.below(62) as usize])));
        id
    }

    /// A new session of `planned` messages in `project`, and its first write.
    fn session(&mut self, planned: usize, project: usize, at: i64) -> (Session, Step) {
        let id = self.id("ses", at);
        let directory = format!("/home/dev/src/{}-{project}", self.words.word());
        let first = self.words.word().to_owned();
        let slug = format!("{first}-{}", self.words.word());
        let title = self.words.prose(30 + self.rng.below(40) as usize);
        let title = title.trim_end().trim_end_matches('.').to_owned();
        let row = SessionRow {
            project: project_id(project),
            slug: slug.clone(),
            directory: directory.clone(),
            title: title.clone(),
            model: json!({"id": "claude-sonnet-4-5", "providerID": "anthropic"}).to_string(),
            created: at,
        };
        let mut session = Session {
            id,
            directory,
            seq: 0,
            prompt: String::new(),
            created: at,
            slug,
            title,
            written: 0,
            planned,
        };
        let info = self.session_info(&session, at);
        let event = self.event(&mut session, "session.created.1", info, at);
        (session, vec![Write::NewSession(Box::new(row)), event])
    }

    /// A logged change of `session`, carrying `data` (and the session's id).
    fn event(&mut self, s: &mut Session, kind: &'static str, data: Value, at: i64) -> Write {
        let mut data = match data {
            Value::Object(map) => map,
            other => Map::from_iter([("data".to_owned(), other)]),
        };
        data.insert("sessionID".into(), s.id.clone().into());
        let seq = s.seq;
        s.seq += 1;
        Write::Event {
            id: self.id("evt", at),
            seq,
            kind,
            data: Value::Object(data).to_string(),
        }
    }

    fn session_info(&mut self, s: &Session, at: i64) -> Value {
        json!({"info": {
            "id": s.id, "slug": s.slug, "projectID": "global", "directory": s.directory,
            "title": s.title, "version": "1.18.33",
            "time": {"created": s.created, "updated": at},
            "permission": [{"permission": "question", "pattern": "*", "action": "deny"}],
        }})
    }

    /// One turn of session `s` from `at`: a prompt, then replies (each a message, the last
    /// one's step ending the turn), no more than its plan leaves.
    fn turn(&mut self, s: &mut Session, at: &mut i64) -> Vec<Message> {
        let mut messages = vec![self.prompt(s, at)];
        let replies = (1 + self.rng.below(4) as usize).min(s.planned - s.written);
        for i in 0..replies {
            let last = i + 1 == replies;
            let tools = if last {
                0
            } else {
                1 + self.rng.below(2) as usize
            };
            messages.push(self.reply(s, at, tools));
        }
        messages
    }

    /// A prompt: the message, its text, the session touched.
    fn prompt(&mut self, s: &mut Session, at: &mut i64) -> Message {
        *at += 5_000 + self.rng.below(120_000) as i64;
        let created = *at;
        let id = self.id("msg", created);
        s.prompt = id.clone();
        s.written += 1;
        let info = json!({"role": "user", "time": {"created": created}, "agent": "build",
            "model": {"providerID": "anthropic", "modelID": "claude-sonnet-4-5"}});
        let mut steps = vec![self.message_write(s, &id, created, created, info)];
        let len = self.rng.log_uniform(200.0, 4000.0);
        let text = json!({"type": "text", "text": self.words.prose(len)});
        *at += 20;
        steps.push(self.part_write(s, &id, None, *at, text));
        steps.push(self.touch(s, *at + 5));
        Message {
            id,
            last: steps.len() - 2,
            steps,
            marker: "\"parts\":[{",
        }
    }

    /// A reply: its message, a step started, perhaps reasoning, its text, `tools` tool calls
    /// (each pending, running, with partial output for bash, completed), the step finished,
    /// the message completed, the session touched.
    fn reply(&mut self, s: &mut Session, at: &mut i64, tools: usize) -> Message {
        *at += 500 + self.rng.below(3000) as i64;
        let created = *at;
        let id = self.id("msg", created);
        s.written += 1;
        let mut info = json!({"parentID": s.prompt, "role": "assistant", "mode": "build",
            "agent": "build", "path": {"cwd": s.directory, "root": "/"}, "cost": 0,
            "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}},
            "modelID": "claude-sonnet-4-5", "providerID": "anthropic",
            "time": {"created": created}});
        let mut steps = vec![self.message_write(s, &id, created, created, info.clone())];
        let mut tick = |agent: &mut Agent| {
            *at += 50 + agent.rng.below(1500) as i64;
            *at
        };
        let t = tick(self);
        steps.push(self.part_write(s, &id, None, t, json!({"type": "step-start"})));
        if self.rng.below(4) == 0 {
            let t = tick(self);
            let len = self.rng.log_uniform(200.0, 2000.0);
            let text = json!({"type": "reasoning", "text": self.words.prose(len),
                "time": {"start": t, "end": t + 900}});
            steps.push(self.part_write(s, &id, None, t, text));
        }
        let t = tick(self);
        let text_id = self.id("prt", t);
        let empty = json!({"type": "text", "text": "", "time": {"start": t}});
        steps.push(self.part_write(s, &id, Some(&text_id), t, empty));
        let len = self.rng.log_uniform(200.0, 4000.0);
        let text = json!({"type": "text", "text": self.words.prose(len),
            "time": {"start": t, "end": t + 1200}});
        let t = tick(self);
        steps.push(self.part_write(s, &id, Some(&text_id), t, text));
        for _ in 0..tools {
            steps.extend(self.tool(s, &id, &mut tick));
        }
        let (input, output) = (20_000 + self.rng.below(80_000), 100 + self.rng.below(2000));
        let tokens = json!({"total": input + output, "input": input, "output": output,
            "reasoning": 0, "cache": {"write": 0, "read": self.rng.below(input)}});
        let reason = if tools == 0 { "stop" } else { "tool-calls" };
        let finish = json!({"reason": reason, "type": "step-finish", "tokens": tokens,
            "cost": 0.01});
        let t = tick(self);
        steps.push(self.part_write(s, &id, None, t, finish));
        info["tokens"] = tokens;
        info["cost"] = json!(0.01);
        info["time"]["completed"] = json!(t + 5);
        info["finish"] = json!(reason);
        steps.push(self.message_write(s, &id, created, t + 5, info));
        steps.push(self.touch(s, t + 10));
        Message {
            id,
            last: steps.len() - 2,
            steps,
            marker: "\"finish\":\"",
        }
    }

    /// A tool call's writes: pending, running, (bash) running with part of its output,
    /// completed.
    fn tool(
        &mut self,
        s: &mut Session,
        message: &str,
        tick: &mut impl FnMut(&mut Agent) -> i64,
    ) -> Vec<Step> {
        let t = tick(self);
        let id = self.id("prt", t);
        let call = format!("toolu_{}", self.id("x", t).split_off(2));
        let len = self.rng.log_uniform(1000.0, 20_000.0);
        let (tool, input, output, metadata) = self.tool_result(len);
        let part = |state: Value| {
            json!({"type": "tool", "tool": tool, "callID": call,
            "state": state})
        };
        let mut steps = Vec::new();
        let pending = part(json!({"status": "pending", "input": {}, "raw": ""}));
        steps.push(self.part_write(s, message, Some(&id), t, pending));
        let start = tick(self);
        let running = json!({"status": "running", "input": input, "time": {"start": start}});
        steps.push(self.part_write(s, message, Some(&id), start, part(running)));
        if tool == "bash" {
            // The output is ASCII: any byte is a character's boundary.
            let half = &output[..output.len() / 2];
            let partial = json!({"status": "running", "input": input,
                "metadata": {"output": half}, "time": {"start": start}});
            let t = tick(self);
            steps.push(self.part_write(s, message, Some(&id), t, part(partial)));
        }
        let end = tick(self);
        let title = format!("{tool} {}", self.words.word());
        let done = json!({"status": "completed", "input": input, "output": output,
            "metadata": metadata, "title": title, "time": {"start": start, "end": end}});
        steps.push(self.part_write(s, message, Some(&id), end, part(done)));
        steps
    }

    /// A tool's name, input, output of about `len` bytes, and metadata, as OpenCode's own
    /// tools make them (bash keeps its output in its metadata too; read a preview; edit its
    /// output is its diff).
    fn tool_result(&mut self, len: usize) -> (&'static str, Value, String, Value) {
        let w = &mut self.words;
        match self.rng.below(20) {
            0..8 => {
                let package = w.word().to_owned();
                let command = format!("cargo test -p {package} {}", w.ident());
                let output = w.lines(len, |w, _| {
                    let (a, b) = (w.ident(), w.ident());
                    format!("test {a}::{b} ... ok")
                });
                let metadata = json!({"output": output, "exit": 0, "truncated": false,
                    "description": command});
                let input = json!({"command": command, "description": w.prose(30)});
                ("bash", input, output, metadata)
            }
            8..14 => {
                let path = w.path();
                let body = w.lines(len, |w, n| format!("{n:05}| {}", w.code_line()));
                let preview: String = body.lines().take(20).collect::<Vec<_>>().join("\n");
                let output = format!("<file>\n{body}</file>");
                let metadata = json!({"preview": preview, "truncated": false});
                ("read", json!({"filePath": path}), output, metadata)
            }
            14..17 => {
                let pattern = w.ident();
                let mut matches = 0;
                let body = w.lines(len, |w, _| {
                    matches += 1;
                    let (path, line) = (w.path(), 1 + matches * 7);
                    format!("{path}:\n  Line {line}: {}", w.code_line())
                });
                let output = format!("Found {matches} matches\n{body}");
                let metadata = json!({"matches": matches, "truncated": false});
                let input = json!({"pattern": pattern, "path": "."});
                ("grep", input, output, metadata)
            }
            _ => {
                let path = w.path();
                let diff = w.lines(len, |w, n| {
                    let sign = ["+", "-", " "][n % 3];
                    format!("{sign}{}", w.code_line())
                });
                let input = json!({"filePath": path, "oldString": w.code_line(),
                    "newString": w.code_line()});
                let metadata = json!({"diff": format!("Index: {path}\n{diff}"),
                    "diagnostics": {}});
                ("edit", input, String::new(), metadata)
            }
        }
    }

    /// A message's row written, and its event.
    fn message_write(
        &mut self,
        s: &mut Session,
        id: &str,
        created: i64,
        at: i64,
        info: Value,
    ) -> Step {
        let data = info.to_string();
        let mut info = info;
        info["id"] = id.into();
        info["sessionID"] = s.id.clone().into();
        let event = self.event(s, "message.updated.1", json!({"info": info}), at);
        let row = Write::Message {
            id: id.to_owned(),
            created,
            at,
            data,
        };
        vec![row, event]
    }

    /// A part's row written (a new part unless `id` names one), and its event.
    fn part_write(
        &mut self,
        s: &mut Session,
        message: &str,
        id: Option<&str>,
        at: i64,
        part: Value,
    ) -> Step {
        let id = id.map_or_else(|| self.id("prt", at), str::to_owned);
        let data = part.to_string();
        let mut part = part;
        part["id"] = id.clone().into();
        part["sessionID"] = s.id.clone().into();
        part["messageID"] = message.into();
        let event = self.event(
            s,
            "message.part.updated.1",
            json!({"part": part, "time": at}),
            at,
        );
        let row = Write::Part {
            id,
            message: message.to_owned(),
            created: at,
            at,
            data,
        };
        vec![row, event]
    }

    fn touch(&mut self, s: &mut Session, at: i64) -> Step {
        let info = self.session_info(s, at);
        let event = self.event(s, "session.updated.1", info, at);
        vec![Write::Touch { at }, event]
    }
}

/// The id of the `n`th project (OpenCode's: the hash of the repository's first commit).
fn project_id(n: usize) -> String {
    format!("{:040x}", (n as u128 + 1) * 0x9e37_79b9_7f4a_7c15)
}

/// Applies `w`, a write of session `session`, as OpenCode's statements do (rows upserted in
/// place; the event logged with the session's last seq).
fn apply(conn: &Connection, session: &str, w: &Write) -> rusqlite::Result<()> {
    match w {
        Write::NewSession(row) => conn
            .prepare_cached(
                "INSERT INTO session (id, project_id, slug, directory, path, title, version,
                     permission, agent, model, time_created, time_updated)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, '1.18.33', ?7, 'build', ?8, ?9, ?9)",
            )?
            .execute(params![
                session,
                row.project,
                row.slug,
                row.directory,
                row.directory.trim_start_matches('/'),
                row.title,
                r#"[{"permission":"question","pattern":"*","action":"deny"}]"#,
                row.model,
                row.created
            ]),
        Write::Message {
            id,
            created,
            at,
            data,
        } => conn
            .prepare_cached(
                "INSERT INTO message (id, session_id, time_created, time_updated, data)
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO UPDATE
                 SET time_updated = excluded.time_updated, data = excluded.data",
            )?
            .execute(params![id, session, created, at, data]),
        Write::Part {
            id,
            message,
            created,
            at,
            data,
        } => conn
            .prepare_cached(
                "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (id) DO UPDATE
                 SET time_updated = excluded.time_updated, data = excluded.data",
            )?
            .execute(params![id, message, session, created, at, data]),
        Write::Touch { at } => conn
            .prepare_cached("UPDATE session SET time_updated = ?2 WHERE id = ?1")?
            .execute(params![session, at]),
        Write::Event {
            id,
            seq,
            kind,
            data,
        } => {
            conn.prepare_cached(
                "INSERT INTO event_sequence (aggregate_id, seq) VALUES (?1, ?2)
                 ON CONFLICT (aggregate_id) DO UPDATE SET seq = excluded.seq",
            )?
            .execute(params![session, seq])?;
            conn.prepare_cached(
                "INSERT INTO event (id, aggregate_id, seq, type, data) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![id, session, seq, kind, data])
        }
    }
    .map(drop)
}

// ---------------------------------------------------------------------------------------
// The database, generated once

/// What was generated, kept beside the database.
#[derive(Serialize, Deserialize)]
struct Made {
    /// The database's file, and its tables' shares of it.
    bytes: u64,
    sessions: u64,
    messages: u64,
    parts: u64,
    events: u64,
    /// Bytes of `data` in `message`, `part` and `event`.
    message_data: u64,
    part_data: u64,
    event_data: u64,
    /// The followed sessions: the longest, and one of [`SHORT`] messages.
    long: String,
    short: String,
    generate_secs: f64,
}

/// The database of `shape` under `dir`, generated unless it is there; and what it holds.
fn cached_database(dir: &Path, shape: &Shape) -> (PathBuf, Made) {
    let db = dir.join(format!("{RECIPE}-{}.db", shape.mode));
    let about = db.with_extension("json");
    // The note is written last: with it, the database is whole.
    let noted = (fs::read(&about).ok()).and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(made) = noted.filter(|_| db.exists()) {
        eprintln!("database: {} (cached)", db.display());
        return (db, made);
    }
    fs::create_dir_all(dir).expect("creating target/bench/database");
    let partial = db.with_extension("partial");
    let _ = fs::remove_file(&partial);
    eprintln!("database: generating {} (once)", db.display());
    let start = Instant::now();
    let (long, short) = generate(&partial, shape);
    let mut made = measure(&partial, long, short);
    made.generate_secs = start.elapsed().as_secs_f64();
    fs::rename(&partial, &db).expect("renaming the generated database");
    fs::write(&about, serde_json::to_vec(&made).expect("serializes")).expect("writing its note");
    eprintln!(
        "database: {:.0} MB in {:.0} s",
        made.bytes as f64 / 1e6,
        made.generate_secs
    );
    (db, made)
}

/// The sessions' lengths, in messages: the long ones, the short followed one, then others of
/// 2–60 until the database is about its size.
fn plan(shape: &Shape) -> Vec<usize> {
    let mut lengths = shape.long.to_vec();
    lengths.push(SHORT);
    let mut rng = Rng::new(3);
    let mut total: usize = lengths.iter().sum();
    while (total as u64) * BYTES_PER_MESSAGE < shape.target {
        let n = rng.log_uniform(2.0, 60.0);
        lengths.push(n);
        total += n;
    }
    lengths
}

/// Writes the database at `path`; returns the ids of the longest session and the short
/// followed one. Sessions are written side by side: each has a start in the 90 days and a
/// time between its turns (the long ones span most of the 90 days), and the turn due first
/// is written next, as an agent used every day would have written them.
fn generate(path: &Path, shape: &Shape) -> (String, String) {
    let conn = Connection::open(path).expect("creating the database");
    conn.execute_batch(
        "PRAGMA page_size = 4096; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;",
    )
    .expect("pragmas");
    create_tables(&conn);
    for n in 0..PROJECTS {
        conn.execute(
            "INSERT INTO project (id, worktree, vcs, time_created, time_updated, sandboxes)
             VALUES (?1, ?2, 'git', 1785542400000, 1785542400000, '[]')",
            params![project_id(n), format!("/home/dev/src/project-{n}")],
        )
        .expect("a project");
    }
    let lengths = plan(shape);
    let base = 1_785_542_400_000; // 2026-08-01
    let span = SPAN_DAYS * 86_400_000;
    let mut rng = Rng::new(5);
    let mut due = BinaryHeap::new();
    let mut gaps = Vec::with_capacity(lengths.len());
    for (i, &n) in lengths.iter().enumerate() {
        let turns = (n as i64 / 3).max(1);
        let (start, gap) = if i < shape.long.len() {
            (base + rng.below(86_400_000) as i64, span * 9 / 10 / turns)
        } else {
            let start = base + (rng.unit() * span as f64) as i64;
            (start, 60_000 + rng.below(600_000) as i64)
        };
        gaps.push(gap);
        due.push(Reverse((start, i)));
    }
    let mut agent = Agent::new(7);
    let mut sessions: Vec<Option<Session>> = (0..lengths.len()).map(|_| None).collect();
    let mut ids = vec![String::new(); lengths.len()];
    let mut writes = 0;
    conn.execute_batch("BEGIN").expect("begin");
    while let Some(Reverse((mut at, i))) = due.pop() {
        let mut steps = Vec::new();
        let session = sessions[i].get_or_insert_with(|| {
            let (s, first) = agent.session(lengths[i], i % PROJECTS, at);
            ids[i] = s.id.clone();
            steps.push(first);
            s
        });
        for m in agent.turn(session, &mut at) {
            steps.extend(m.steps);
        }
        for w in steps.iter().flatten() {
            apply(&conn, &session.id, w).expect("writing a row");
            writes += 1;
        }
        if session.written < session.planned {
            due.push(Reverse((at + gaps[i], i)));
        } else {
            sessions[i] = None;
        }
        if writes >= 20_000 {
            conn.execute_batch("COMMIT; BEGIN").expect("commit");
            writes = 0;
        }
    }
    conn.execute_batch("COMMIT; PRAGMA journal_mode = WAL;")
        .expect("commit, and WAL mode as OpenCode keeps it");
    (ids[0].clone(), ids[shape.long.len()].clone())
}

/// The tables and indexes of [`TABLES`], as the recorded fixture has them.
fn create_tables(conn: &Connection) {
    let fixture = Connection::open_with_flags(FIXTURE, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("opening the recorded OpenCode database");
    let mut stmt = fixture
        .prepare(&format!(
            "SELECT sql FROM sqlite_master WHERE tbl_name IN ({TABLES}) AND sql IS NOT NULL
             ORDER BY type = 'index', rowid"
        ))
        .expect("reading its schema");
    let sql: Vec<String> = (stmt.query_map([], |r| r.get(0)))
        .expect("reading its schema")
        .map(|r| r.expect("a statement"))
        .collect();
    assert!(
        sql.len() >= 6,
        "the fixture's schema has the tables: {sql:?}"
    );
    for statement in sql {
        conn.execute_batch(&statement).expect("creating a table");
    }
}

/// What the database at `path` holds.
fn measure(path: &Path, long: String, short: String) -> Made {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("opening the database");
    let n = |sql: &str| -> u64 {
        (conn.query_row(sql, [], |r| r.get::<_, i64>(0))).unwrap_or_else(|e| panic!("{sql}: {e}"))
            as u64
    };
    Made {
        bytes: fs::metadata(path).map_or(0, |m| m.len()),
        sessions: n("SELECT count(*) FROM session"),
        messages: n("SELECT count(*) FROM message"),
        parts: n("SELECT count(*) FROM part"),
        events: n("SELECT count(*) FROM event"),
        message_data: n("SELECT sum(length(data)) FROM message"),
        part_data: n("SELECT sum(length(data)) FROM part"),
        event_data: n("SELECT sum(length(data)) FROM event"),
        long,
        short,
        generate_secs: 0.0,
    }
}

// ---------------------------------------------------------------------------------------
// Reading it without the daemon

/// A plain `SELECT` of every message's and part's row.
struct BareRead {
    rows: u64,
    bytes: u64,
    secs: f64,
}

fn bare_read(db: &Path) -> BareRead {
    let conn = read_only(db);
    let start = Instant::now();
    let (mut rows, mut bytes) = (0, 0);
    for sql in [
        "SELECT id, session_id, time_created, data FROM message",
        "SELECT id, message_id, session_id, time_created, data FROM part",
    ] {
        let mut stmt = conn.prepare(sql).expect("preparing");
        let mut it = stmt.query([]).expect("querying");
        while let Some(r) = it.next().expect("a row") {
            rows += 1;
            for i in 0..r.as_ref().column_count() {
                bytes += r
                    .get_ref(i)
                    .expect("a column")
                    .as_bytes()
                    .map_or(8, <[u8]>::len) as u64;
            }
        }
    }
    BareRead {
        rows,
        bytes,
        secs: start.elapsed().as_secs_f64(),
    }
}

/// The reader's work redone here: each session's row, parts and messages by its queries,
/// each `data` parsed and the document serialized (`src/agents/opencode.rs`).
struct DocumentsRead {
    sessions: u64,
    bytes: u64,
    secs: f64,
    /// What this process read meanwhile (`rchar`: SQLite's pages).
    read: u64,
}

fn documents_read(db: &Path) -> DocumentsRead {
    let conn = read_only(db);
    let read0 = own_read();
    let start = Instant::now();
    let mut stmt = conn.prepare("SELECT id FROM session").expect("preparing");
    let ids: Vec<String> = (stmt.query_map([], |r| r.get(0)))
        .expect("querying")
        .map(|r| r.expect("an id"))
        .collect();
    let bytes = ids.iter().map(|id| document(&conn, id).len() as u64).sum();
    DocumentsRead {
        sessions: ids.len() as u64,
        bytes,
        secs: start.elapsed().as_secs_f64(),
        read: own_read() - read0,
    }
}

/// This process's `rchar` so far.
fn own_read() -> u64 {
    procfs::io(std::process::id()).map_or(0, |io| io.0)
}

fn read_only(db: &Path) -> Connection {
    Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("opening the database")
}

/// Session `id`'s document, built as the reader builds it.
fn document(conn: &Connection, id: &str) -> Vec<u8> {
    let mut stmt = conn
        .prepare_cached("SELECT * FROM session WHERE id = ?1")
        .expect("preparing");
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let session = stmt
        .query_row([id], |r| {
            let row = names.iter().enumerate().map(|(i, n)| {
                let v = r.get_ref(i).map(json_of).unwrap_or(Value::Null);
                (n.clone(), v)
            });
            Ok(Map::from_iter(row))
        })
        .expect("the session's row");
    let mut parts: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, message_id, data FROM part WHERE session_id = ?1 ORDER BY message_id, id",
        )
        .expect("preparing");
    let mut rows = stmt.query([id]).expect("querying");
    while let Some(r) = rows.next().expect("a part") {
        let (part, message): (String, String) = (r.get(0).expect("id"), r.get(1).expect("id"));
        let mut data = json_of(r.get_ref(2).expect("data"));
        data["id"] = part.into();
        data["messageID"] = message.clone().into();
        parts.entry(message).or_default().push(data);
    }
    let mut messages = Vec::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, data FROM message WHERE session_id = ?1 ORDER BY time_created, id",
        )
        .expect("preparing");
    let mut rows = stmt.query([id]).expect("querying");
    while let Some(r) = rows.next().expect("a message") {
        let message: String = r.get(0).expect("id");
        let mut info = json_of(r.get_ref(1).expect("data"));
        info["id"] = message.clone().into();
        info["sessionID"] = id.into();
        let parts = parts.remove(&message).unwrap_or_default();
        messages.push(json!({"info": info, "parts": parts}));
    }
    serde_json::to_vec(&json!({"session": session, "messages": messages})).expect("serializes")
}

/// A column as JSON: text holding an object or a list as that value.
fn json_of(v: rusqlite::types::ValueRef<'_>) -> Value {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => i.into(),
        ValueRef::Real(f) => json!(f),
        ValueRef::Text(t) if t.starts_with(b"{") || t.starts_with(b"[") => {
            serde_json::from_slice(t).unwrap_or_else(|_| String::from_utf8_lossy(t).into())
        }
        ValueRef::Text(t) | ValueRef::Blob(t) => String::from_utf8_lossy(t).into(),
    }
}

/// The daemon's query for the sessions changed since its mark (`src/agents/opencode.rs`), and
/// the same kept to the rowid range (`+` makes `aggregate_id` no index's column).
const CHANGED: [(&str, &str); 2] = [
    (
        "the daemon's: `SELECT DISTINCT aggregate_id FROM event WHERE rowid > ?1 AND \
         aggregate_id IN (SELECT id FROM session)`",
        "SELECT DISTINCT aggregate_id FROM event WHERE rowid > ?1
         AND aggregate_id IN (SELECT id FROM session)",
    ),
    (
        "the same with `+aggregate_id` (the rowid range only)",
        "SELECT DISTINCT +aggregate_id FROM event WHERE rowid > ?1
         AND +aggregate_id IN (SELECT id FROM session)",
    ),
];

/// One way of finding what changed: its plan, and its time and `rchar` on a new connection
/// (as the daemon opens one for each read), best of three.
struct Finding {
    label: &'static str,
    plan: String,
    ms: f64,
    read: u64,
}

/// [`CHANGED`]'s queries asked for what changed in the last 20 events.
fn finding_changes(db: &Path) -> Vec<Finding> {
    let last: i64 = (read_only(db).query_row("SELECT max(rowid) FROM event", [], |r| r.get(0)))
        .expect("the last event");
    let since = last - 20;
    (CHANGED.iter())
        .map(|&(label, sql)| {
            let conn = read_only(db);
            let mut stmt = (conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))).expect("explain");
            let plan: Vec<String> = (stmt.query_map([since], |r| r.get(3)))
                .expect("explain")
                .map(|r| r.expect("a step"))
                .collect();
            let (mut ms, mut read) = (f64::MAX, u64::MAX);
            for _ in 0..3 {
                let conn = read_only(db);
                let (read0, start) = (own_read(), Instant::now());
                let mut stmt = conn.prepare(sql).expect("preparing");
                let ids = (stmt.query_map([since], |r| r.get::<_, String>(0)))
                    .expect("querying")
                    .count();
                assert!(ids > 0, "the last events name a session");
                ms = ms.min(start.elapsed().as_secs_f64() * 1e3);
                read = read.min(own_read() - read0);
            }
            Finding {
                label,
                plan: plan.join("; "),
                ms,
                read,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Backfill

struct Backfill {
    wall: f64,
    /// From the start to the log's line saying every record is committed.
    committed: Option<f64>,
    cpu: f64,
    peak_mib: f64,
    /// `rchar`, read once it exited and before it was reaped.
    read: u64,
    /// The daemon's reads of the database (its log's `database read` lines).
    reads: usize,
    records: u64,
    sessions: u64,
    /// `sources.bytes` and `sources.stored`: the records as read and as stored.
    record_bytes: u64,
    record_stored: u64,
    /// The latest states, zstd frames in `snapshots`.
    states: u64,
    state_bytes: u64,
    state_stored: u64,
    archive: u64,
    index: u64,
}

/// `run --once` into a fresh archive at `archive`, under `home`; timed from spawn to exit,
/// its CPU and peak RSS from `wait4`.
fn backfill(home: &Path, archive: &Path) -> Backfill {
    let log = archive.with_extension("once.log");
    let mut cmd = daemon_cmd(home, archive);
    cmd.arg("--once")
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log).expect("a log file"));
    eprintln!("backfill: run --once");
    let spawned = SystemTime::now();
    let start = Instant::now();
    // Reaped by `wait_measured`, which also gives its resource usage; std's wait() does not.
    #[allow(clippy::zombie_processes)]
    let child = cmd.spawn().expect("starting transcript-sync run --once");
    let exited = wait_measured(child.id());
    let wall = start.elapsed().as_secs_f64();
    let text = fs::read_to_string(&log).unwrap_or_default();
    assert!(exited.status == 0, "run --once failed:\n{text}");
    let committed = (text.lines())
        .find(|l| l.contains(RECORDS_COMMITTED))
        .and_then(|l| humantime::parse_rfc3339(l.split_whitespace().next()?).ok())
        .and_then(|at| at.duration_since(spawned).ok())
        .map(|d| d.as_secs_f64());
    let conn = read_only(archive);
    let n = |sql: &str| -> u64 {
        (conn.query_row(sql, [], |r| r.get::<_, Option<i64>>(0)))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .unwrap_or(0) as u64
    };
    let size = |p: &Path| fs::metadata(p).map_or(0, |m| m.len());
    let with_wal = |p: &Path| size(p) + size(&with_suffix(p, "-wal"));
    Backfill {
        wall,
        committed,
        cpu: cpu::rusage_secs(&exited.usage),
        peak_mib: exited.usage.ru_maxrss as f64 / 1024.0,
        read: exited.read,
        reads: text.matches("database read").count(),
        records: n("SELECT count(*) FROM records"),
        sessions: n("SELECT count(DISTINCT source_id) FROM snapshots"),
        record_bytes: n("SELECT sum(bytes) FROM sources"),
        record_stored: n("SELECT sum(stored) FROM sources"),
        states: n("SELECT count(*) FROM snapshots"),
        state_bytes: n("SELECT sum(size) FROM snapshots"),
        state_stored: n("SELECT sum(length(bytes)) FROM snapshots"),
        archive: with_wal(archive),
        index: with_wal(&with_suffix(archive, "-index")),
    }
}

/// How a child ended, what it used, and what it read.
struct Exited {
    status: i32,
    usage: libc::rusage,
    read: u64,
}

/// Waits for child `pid` to exit, reads its `/proc/PID/io` while it is a zombie, then reaps
/// it with `wait4` for its resource usage.
fn wait_measured(pid: u32) -> Exited {
    // SAFETY: waitid and wait4 write only the structs they are given, which live on this
    // stack; the pid is our own child, not reaped before wait4 here.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOWAIT;
        assert_eq!(
            libc::waitid(libc::P_PID, pid, &mut info, flags),
            0,
            "waitid"
        );
        let read = procfs::io(pid).map_or(0, |io| io.0);
        let mut status = 0;
        let mut usage: libc::rusage = std::mem::zeroed();
        let r = libc::wait4(pid as i32, &mut status, 0, &mut usage);
        assert_eq!(r, pid as i32, "wait4");
        let status = if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            -1
        };
        Exited {
            status,
            usage,
            read,
        }
    }
}

/// `transcript-sync run` with the built-in watchers under `home`, into `archive`, logging
/// each read of a database.
fn daemon_cmd(home: &Path, archive: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_LOG", "info,transcript_sync::engine::database=debug")
        .args(["run", "--db"])
        .arg(archive);
    cmd
}

/// `path` with `suffix` after its file name, as SQLite names a database's companions.
fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.to_owned().into_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

// ---------------------------------------------------------------------------------------
// The daemon, followed

/// A `transcript-sync run` with its tap, and its archive read beside it.
struct Run {
    daemon: daemon::Daemon,
    archive: PathBuf,
    conn: Connection,
    /// Tap lines taken from the daemon and not yet used.
    tap: std::cell::RefCell<Vec<daemon::Line>>,
    /// From the start to "caught up".
    caught_up: Duration,
}

impl Run {
    /// Starts the daemon on the backfilled archive; returns once it has caught up and gone
    /// idle.
    fn start(home: &Path, archive: &Path) -> Run {
        let mut cmd = daemon_cmd(home, archive);
        cmd.args(["--sink", "stdout"]);
        let start = Instant::now();
        let daemon = daemon::Daemon::spawn(cmd, TapReader::Read);
        daemon.wait_log("caught up");
        let run = Run {
            daemon,
            archive: archive.to_owned(),
            conn: read_only(archive),
            tap: Default::default(),
            caught_up: start.elapsed(),
        };
        run.wait_idle();
        run
    }

    fn pid(&self) -> u32 {
        self.daemon.child.id()
    }

    /// Its bytes read so far (`rchar`).
    fn read(&self) -> u64 {
        procfs::io(self.pid()).map_or(0, |io| io.0)
    }

    /// Its peak RSS (KiB) since the last [`Run::reset_peak`].
    fn peak_kib(&self) -> u64 {
        procfs::status_kib(self.pid(), "VmHWM").unwrap_or(0)
    }

    fn reset_peak(&self) {
        fs::write(format!("/proc/{}/clear_refs", self.pid()), "5")
            .expect("resetting the daemon's peak RSS (clear_refs)");
    }

    /// Its reads of the database so far, from its log's `database read` lines: when each
    /// was logged (once the sessions changed were found, before they were read), and how many
    /// sessions had changed.
    fn reads(&self) -> Vec<(SystemTime, u64)> {
        (self.daemon.log().lines())
            .filter(|l| l.contains("database read"))
            .filter_map(|l| {
                let at = humantime::parse_rfc3339(l.split_whitespace().next()?).ok()?;
                let changed = l.rsplit("sessions_changed=").next()?.trim().parse().ok()?;
                Some((at, changed))
            })
            .collect()
    }

    /// True when the session index has indexed every record.
    fn indexed_all(&self) -> bool {
        let last: i64 = (self.conn)
            .query_row("SELECT coalesce(max(seq), 0) FROM records", [], |r| {
                r.get(0)
            })
            .expect("the last seq");
        let index = with_suffix(&self.archive, "-index");
        let indexed = (Connection::open_with_flags(index, OpenFlags::SQLITE_OPEN_READ_ONLY))
            .and_then(|c| c.query_row("SELECT seq FROM progress", [], |r| r.get::<_, i64>(0)));
        indexed.is_ok_and(|seq| seq >= last)
    }

    /// Waits until the session index has every record and the daemon's threads have been
    /// all but idle for [`QUIET`].
    fn wait_idle(&self) {
        let deadline = Instant::now() + daemon::PATIENCE * 5;
        loop {
            let before = self.daemon.cpu_precise();
            std::thread::sleep(QUIET);
            let after = self.daemon.cpu_precise();
            if after.saturating_sub(before) < IDLE_CPU && self.indexed_all() {
                return;
            }
            assert!(Instant::now() < deadline, "the daemon never went idle");
        }
    }

    /// Takes the tap's lines, each given to `done`, until it says it is done; panics with
    /// the log after [`daemon::PATIENCE`].
    fn tap_until(&self, what: &str, mut done: impl FnMut(&daemon::Line) -> bool) {
        let deadline = Instant::now() + daemon::PATIENCE;
        let mut tap = self.tap.borrow_mut();
        loop {
            match self.daemon.tap.recv_timeout(POLL) {
                Ok(line) => {
                    let finished = done(&line);
                    tap.push(line);
                    if finished {
                        return;
                    }
                }
                Err(_) => assert!(
                    Instant::now() < deadline,
                    "{what}: never; log:\n{}",
                    self.daemon.log()
                ),
            }
        }
    }

    /// Takes the tap's lines that have come, and gives every line taken so far.
    fn take_tap(&self) -> Vec<daemon::Line> {
        let mut tap = self.tap.borrow_mut();
        tap.extend(self.daemon.tap.try_iter());
        std::mem::take(&mut *tap)
    }

    fn stop(self) {
        let (status, _) = self.daemon.terminate();
        assert!(status.success(), "the daemon exited with {status}");
    }
}

/// A message the agent added while followed: its id, what its record holds once complete,
/// when the write completing it committed, and when that record came out of the tap.
struct Appended {
    /// `"id":"<its id>"`, as its record holds it.
    needle: String,
    marker: &'static str,
    committed: Instant,
    archived: Option<Instant>,
}

impl Appended {
    fn latency_ms(&self) -> f64 {
        let archived = self.archived.expect("archived");
        ms(archived.saturating_duration_since(self.committed))
    }

    /// Whether `line` is this message's complete record.
    fn is(&self, line: &str) -> bool {
        line.contains(&self.needle) && line.contains(self.marker)
    }

    fn of(m: Message, committed: Instant) -> Appended {
        Appended {
            needle: format!("\"id\":\"{}\"", m.id),
            marker: m.marker,
            committed,
            archived: None,
        }
    }
}

/// The agent's side of one session: its connection, and where the session stands.
struct Writer {
    conn: Connection,
    agent: Agent,
    session: Session,
}

impl Writer {
    /// Opens the database as OpenCode does (WAL, `synchronous = NORMAL`) and picks up
    /// session `id` where it is.
    fn open(db: &Path, id: &str, seed: u64) -> Writer {
        let conn = Connection::open(db).expect("opening the database as the agent");
        conn.execute_batch("PRAGMA busy_timeout = 5000; PRAGMA synchronous = NORMAL;")
            .expect("pragmas");
        let (directory, created, slug, title): (String, i64, String, String) = conn
            .query_row(
                "SELECT directory, time_created, slug, title FROM session WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .expect("the followed session");
        let seq: i64 = conn
            .query_row(
                "SELECT seq FROM event_sequence WHERE aggregate_id = ?1",
                [id],
                |r| r.get(0),
            )
            .expect("its event sequence");
        let (written, prompt): (i64, String) = conn
            .query_row(
                "SELECT count(*),
                     coalesce(max(CASE WHEN data ->> '$.role' = 'user' THEN id END), '')
                 FROM message WHERE session_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("its messages");
        let session = Session {
            id: id.to_owned(),
            directory,
            seq: seq + 1,
            prompt,
            created,
            slug,
            title,
            written: written as usize,
            planned: usize::MAX,
        };
        Writer {
            conn,
            agent: Agent::new(seed),
            session,
        }
    }

    /// The `k`th message added: a prompt, a reply calling tools, a reply ending the turn.
    fn next(&mut self, k: usize) -> Message {
        let mut at = now_ms();
        let s = &mut self.session;
        match k % 3 {
            0 => self.agent.prompt(s, &mut at),
            1 => self.agent.reply(s, &mut at, 1 + k % 2),
            _ => self.agent.reply(s, &mut at, 0),
        }
    }

    /// Writes `m`, each step one transaction, [`STEP_GAP`] apart; returns when the step that
    /// completes its record committed.
    fn write(&mut self, m: &Message) -> Instant {
        let mut completed = Instant::now();
        for (i, step) in m.steps.iter().enumerate() {
            let tx = self.conn.transaction().expect("a write transaction");
            for w in step {
                apply(&tx, &self.session.id, w).expect("writing a row");
            }
            tx.commit().expect("committing");
            if i == m.last {
                completed = Instant::now();
            }
            std::thread::sleep(STEP_GAP);
        }
        completed
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

/// One following: a session, and what the daemon did while the agent wrote into it.
struct Following {
    messages_before: usize,
    document: u64,
    /// Building that document here, and what this process read for it.
    document_secs: f64,
    document_read: u64,
    appended: Vec<Appended>,
    secs: f64,
    /// Database reads in the run, and those that found the session changed.
    reads: usize,
    captures: usize,
    /// When each read that found the session changed was logged, in seconds from the first
    /// write.
    captured_at: Vec<f64>,
    cpu: Duration,
    read: u64,
    peak_kib: u64,
    records: usize,
    /// One message alone, left to settle (mean of [`LONE`]): CPU, commit to tap, `rchar`.
    lone_cpu: Duration,
    lone_latency_ms: Vec<f64>,
    lone_read: u64,
}

/// The agent adds a message to session `id` every [`EVERY`] for `secs`, then [`LONE`]
/// more, each once the daemon is idle again.
fn follow(run: &Run, db: &Path, id: &str, secs: Duration) -> Following {
    let (document, document_secs, document_read) = timed_document(db, id);
    let mut writer = Writer::open(db, id, 17);
    let messages_before = writer.session.written;
    eprintln!("following {id}: {messages_before} messages, a document of {document} B");
    run.take_tap();
    let (reads0, cpu0, read0) = (run.reads().len(), run.daemon.cpu(), run.read());
    run.reset_peak();
    let (start, began) = (Instant::now(), SystemTime::now());
    let mut due = start;
    let mut appended = Vec::new();
    while start.elapsed() < secs {
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let m = writer.next(appended.len());
        let committed = writer.write(&m);
        appended.push(Appended::of(m, committed));
        due += EVERY;
    }
    let secs = start.elapsed().as_secs_f64();
    run.tap_until("every appended message archived", |line| {
        mark_archived(&mut appended, line)
    });
    run.wait_idle();
    let (cpu, read, peak_kib) = (run.daemon.cpu() - cpu0, run.read() - read0, run.peak_kib());
    let reads = run.reads().split_off(reads0);
    let lines = run.take_tap();
    let captured_at: Vec<f64> = (reads.iter())
        .filter(|(_, changed)| *changed > 0)
        .map(|(at, _)| at.duration_since(began).unwrap_or_default().as_secs_f64())
        .collect();
    let (lone_cpu, lone_latency_ms, lone_read) = lone(run, &mut writer);
    Following {
        messages_before,
        document,
        document_secs,
        document_read,
        secs,
        reads: reads.len(),
        captures: captured_at.len(),
        captured_at,
        cpu,
        read,
        peak_kib,
        records: lines.len(),
        appended,
        lone_cpu,
        lone_latency_ms,
        lone_read,
    }
}

/// Session `id`'s document built here as the reader builds it: its length, how long that
/// took, and what this process read for it (`rchar`: SQLite's pages).
fn timed_document(db: &Path, id: &str) -> (u64, f64, u64) {
    let conn = read_only(db);
    let read0 = own_read();
    let start = Instant::now();
    let len = document(&conn, id).len() as u64;
    let secs = start.elapsed().as_secs_f64();
    (len, secs, own_read() - read0)
}

/// Marks the appended message whose complete record `line` is, if one is; true when all
/// are marked.
fn mark_archived(appended: &mut [Appended], line: &daemon::Line) -> bool {
    let unmarked = appended.iter_mut().filter(|a| a.archived.is_none());
    if let Some(a) = unmarked.into_iter().find(|a| a.is(&line.text)) {
        a.archived = Some(line.at);
    }
    appended.iter().all(|a| a.archived.is_some())
}

/// [`LONE`] messages, each written whole and left to settle: the daemon's CPU and reads
/// from the first write until it is idle again (mean), and each one's commit to tap.
fn lone(run: &Run, writer: &mut Writer) -> (Duration, Vec<f64>, u64) {
    let (mut cpu, mut read, mut latency) = (Duration::ZERO, 0, Vec::new());
    for k in 0..LONE {
        let m = writer.next(k);
        let (cpu0, read0) = (run.daemon.cpu(), run.read());
        let committed = writer.write(&m);
        let mut one = [Appended::of(m, committed)];
        run.tap_until("a lone message archived", |line| {
            mark_archived(&mut one, line)
        });
        latency.push(one[0].latency_ms());
        run.wait_idle();
        // The idle wait's own [`QUIET`] is in the reading; the daemon spends under
        // [`IDLE_CPU`] of it.
        cpu += run.daemon.cpu() - cpu0;
        read += run.read() - read0;
        run.take_tap();
    }
    (cpu / LONE as u32, latency, read / LONE as u64)
}

struct Idle {
    secs: f64,
    cpu: Duration,
    read: u64,
    /// The daemon's reads of the database meanwhile.
    reads: Vec<(SystemTime, u64)>,
    /// What it logged meanwhile.
    log: String,
    /// Its threads that read meanwhile (`rchar`), by name.
    readers: BTreeMap<String, u64>,
    /// The seconds of the window in which it read, and how much.
    read_at: Vec<(u64, u64)>,
}

/// The daemon's CPU and reads over `secs` with nothing written, once it is idle and has
/// seen the agent's last connection close (which checkpoints the WAL into the database).
fn idle(run: &Run, secs: Duration) -> Idle {
    std::thread::sleep(Duration::from_secs(2));
    run.wait_idle();
    eprintln!("idle: {} s", secs.as_secs());
    let (log0, reads0) = (run.daemon.log().len(), run.reads().len());
    let (cpu0, read0, threads0) = (run.daemon.cpu(), run.read(), thread_reads(run.pid()));
    let start = Instant::now();
    let (mut read_at, mut last) = (Vec::new(), read0);
    for second in 1..=secs.as_secs() {
        let due = start + Duration::from_secs(second);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let now = run.read();
        if now > last {
            read_at.push((second, now - last));
        }
        last = now;
    }
    let (cpu, read) = (run.daemon.cpu() - cpu0, run.read() - read0);
    let mut readers = BTreeMap::new();
    for ((tid, name), n) in thread_reads(run.pid()) {
        let before = threads0.get(&(tid, name.clone())).copied().unwrap_or(0);
        if n > before {
            *readers.entry(name).or_default() += n - before;
        }
    }
    let log = run.daemon.log().split_off(log0);
    eprint!("{log}");
    Idle {
        secs: start.elapsed().as_secs_f64(),
        cpu,
        read,
        reads: run.reads().split_off(reads0),
        log,
        readers,
        read_at,
    }
}

/// Each live thread of process `pid` (id, name) and its `rchar` so far.
fn thread_reads(pid: u32) -> BTreeMap<(u32, String), u64> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    (tasks.flatten())
        .filter_map(|t| {
            let tid: u32 = t.file_name().to_str()?.parse().ok()?;
            let name = fs::read_to_string(t.path().join("comm")).ok()?;
            let io = fs::read_to_string(t.path().join("io")).ok()?;
            let rchar = io.lines().find_map(|l| l.strip_prefix("rchar: "))?;
            Some(((tid, name.trim().to_owned()), rchar.trim().parse().ok()?))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// The report

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn size(bytes: f64) -> String {
    if bytes.abs() >= 1e9 {
        format!("{:.2} GB", bytes / 1e9)
    } else if bytes.abs() >= 1e6 {
        format!("{:.1} MB", bytes / 1e6)
    } else if bytes.abs() >= 1e3 {
        format!("{:.1} KB", bytes / 1e3)
    } else {
        format!("{bytes:.0} B")
    }
}

/// `n` with a comma between thousands.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn report_database(md: &mut String, made: &Made) {
    let share = |b: u64| format!("{} ({:.0} %)", size(b as f64), pct(b, made.bytes));
    let _ = writeln!(
        md,
        "The database: {} in one file, {} sessions, {} messages, {} parts, {} events \
         (generated in {:.0} s, cached). `data` columns: messages {}, parts {}, events {} of \
         the file.\n",
        size(made.bytes as f64),
        count(made.sessions),
        count(made.messages),
        count(made.parts),
        count(made.events),
        made.generate_secs,
        share(made.message_data),
        share(made.part_data),
        share(made.event_data),
    );
}

fn pct(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

fn report_backfill(
    md: &mut String,
    made: &Made,
    bare: &BareRead,
    docs: &DocumentsRead,
    b: &Backfill,
) {
    let _ = writeln!(
        md,
        "### Backfill\n\n`run --once` into an empty archive, beside reading the same rows \
         here (warm page cache, the database just copied):\n"
    );
    let _ = writeln!(md, "| reading | wall | CPU | MB/s of the file | notes |");
    let _ = writeln!(md, "|---|---:|---:|---:|---|");
    let rate = |secs: f64| made.bytes as f64 / 1e6 / secs;
    let _ = writeln!(
        md,
        "| plain `SELECT` of every message and part | {:.1} s | – | {:.0} | {} rows, {} |",
        bare.secs,
        rate(bare.secs),
        count(bare.rows),
        size(bare.bytes as f64)
    );
    let _ = writeln!(
        md,
        "| each session's document, the reader's queries and JSON redone here | {:.1} s | – | \
         {:.0} | {} documents, {}; read {} (`rchar`) |",
        docs.secs,
        rate(docs.secs),
        count(docs.sessions),
        size(docs.bytes as f64),
        size(docs.read as f64)
    );
    let committed = b.committed.map_or("–".into(), |s| format!("{s:.1} s"));
    let _ = writeln!(
        md,
        "| `run --once`, until every record committed | {committed} | – | {} | |",
        b.committed
            .map_or("–".into(), |s| format!("{:.0}", rate(s)))
    );
    let _ = writeln!(
        md,
        "| `run --once`, to exit (session index built) | {:.1} s | {:.1} s | {:.0} | peak RSS \
         {:.0} MiB, read {} (`rchar`), {} database read(s) |",
        b.wall,
        b.cpu,
        rate(b.wall),
        b.peak_mib,
        size(b.read as f64),
        b.reads
    );
    let _ = writeln!(
        md,
        "\n| archived | value |\n|---|---:|\n\
         | sessions captured; records | {}; {} |\n\
         | records as read; as stored | {}; {} ({:.1} %) |\n\
         | latest states in `snapshots` ({}): whole; as stored | {}; {} ({:.1} %) |\n\
         | archive file with its WAL | {} ({:.1} % of the database) |\n\
         | session index (`archive.db-index`) | {} ({:.1} %) |\n",
        count(b.sessions),
        count(b.records),
        size(b.record_bytes as f64),
        size(b.record_stored as f64),
        pct(b.record_stored, b.record_bytes),
        count(b.states),
        size(b.state_bytes as f64),
        size(b.state_stored as f64),
        pct(b.state_stored, b.state_bytes),
        size(b.archive as f64),
        pct(b.archive, made.bytes),
        size(b.index as f64),
        pct(b.index, made.bytes),
    );
}

fn report_finding(md: &mut String, made: &Made, finding: &[Finding]) {
    let _ = writeln!(
        md,
        "### Finding what changed\n\nEach read of the database starts by asking `event` for \
         the sessions changed since the mark; here for the last 20 of its {} events, on a new \
         connection (best of 3):\n",
        count(made.events)
    );
    let _ = writeln!(md, "| query | plan | time | `rchar` |\n|---|---|---:|---:|");
    for f in finding {
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} ms | {} |",
            f.label,
            f.plan,
            f.ms,
            size(f.read as f64)
        );
    }
    md.push('\n');
}

fn report_following(
    md: &mut String,
    shape: &Shape,
    caught_up: Duration,
    short: &Following,
    long: &Following,
) {
    let _ = writeln!(
        md,
        "### Following\n\n`run` on the backfilled archive, caught up; the agent adds a message \
         every {} ms to one session for {} s (a prompt, a reply calling one or two tools, a \
         reply ending the turn, in turn; each write one transaction, {} ms apart), then {LONE} \
         lone messages, each left to settle. \"Commit → tap\": from the commit that completes \
         a message to its complete record out of the daemon's tap. The daemon, started on \
         the backfilled archive, said it had caught up after {:.2} s.\n",
        EVERY.as_millis(),
        shape.follow.as_secs(),
        STEP_GAP.as_millis(),
        caught_up.as_secs_f64(),
    );
    let _ = writeln!(md, "| measure | short session | long session |");
    let _ = writeln!(md, "|---|---:|---:|");
    let mut row = |what: &str, f: &dyn Fn(&Following) -> String| {
        let _ = writeln!(md, "| {what} | {} | {} |", f(short), f(long));
    };
    row("session when following began", &|f| {
        format!(
            "{} messages, a {} document",
            count(f.messages_before as u64),
            size(f.document as f64)
        )
    });
    row("messages added", &|f| {
        format!("{} in {:.1} s", f.appended.len(), f.secs)
    });
    row("database reads; that captured the session", &|f| {
        format!("{}; {}", f.reads, f.captures)
    });
    row("reads that captured, logged at", &|f| {
        let at: Vec<String> = f.captured_at.iter().map(|s| format!("{s:.1} s")).collect();
        at.join(", ")
    });
    row("records on the tap", &|f| f.records.to_string());
    row("commit → tap p50 / p90 / max", &|f| {
        let l: Vec<f64> = f.appended.iter().map(Appended::latency_ms).collect();
        format!(
            "{:.0} / {:.0} / {:.0} ms",
            quantile_of(&l, 0.5),
            quantile_of(&l, 0.9),
            quantile_of(&l, 1.0)
        )
    });
    row("daemon CPU, first write to idle again", &|f| {
        format!(
            "{:.2} s ({:.1} % of a core)",
            f.cpu.as_secs_f64(),
            100.0 * f.cpu.as_secs_f64() / f.secs
        )
    });
    row("daemon CPU per capture; per message added", &|f| {
        format!(
            "{:.0} ms; {:.1} ms",
            ms(f.cpu) / f.captures.max(1) as f64,
            ms(f.cpu) / f.appended.len().max(1) as f64
        )
    });
    row("daemon read (`rchar`); per capture", &|f| {
        format!(
            "{}; {}",
            size(f.read as f64),
            size(f.read as f64 / f.captures.max(1) as f64)
        )
    });
    row("that document built here: time, `rchar`", &|f| {
        format!(
            "{:.0} ms, {}",
            f.document_secs * 1e3,
            size(f.document_read as f64)
        )
    });
    row("daemon peak RSS while following", &|f| {
        format!("{:.0} MiB", f.peak_kib as f64 / 1024.0)
    });
    row("one lone message: daemon CPU, `rchar` (mean)", &|f| {
        format!("{:.0} ms, {}", ms(f.lone_cpu), size(f.lone_read as f64))
    });
    row("one lone message: commit → tap", &|f| {
        let l: Vec<String> = f
            .lone_latency_ms
            .iter()
            .map(|l| format!("{l:.0}"))
            .collect();
        format!("{} ms", l.join(", "))
    });
    md.push('\n');
}

fn report_idle(md: &mut String, idle: &Idle) {
    let _ = writeln!(
        md,
        "### Idle\n\nNothing written for {:.0} s: daemon CPU {:.0} ms ({:.3} % of a core), \
         read {} (`rchar`), {} database read(s) ({} log lines).\n",
        idle.secs,
        ms(idle.cpu),
        100.0 * idle.cpu.as_secs_f64() / idle.secs,
        size(idle.read as f64),
        idle.reads.len(),
        idle.log.lines().count()
    );
    if !idle.readers.is_empty() {
        let by: Vec<String> = (idle.readers.iter())
            .map(|(name, n)| format!("{name} {}", size(*n as f64)))
            .collect();
        let at: Vec<String> = (idle.read_at.iter())
            .map(|(s, n)| format!("{} in second {s}", size(*n as f64)))
            .collect();
        let _ = writeln!(
            md,
            "Read by thread: {}; {}.\n",
            by.join(", "),
            at.join(", ")
        );
    }
}
