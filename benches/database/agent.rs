//! What OpenCode writes (`tests/fixtures/agents/opencode/`), one transaction at a time.

use crate::text::Code;
use rusqlite::{Connection, params};
use serde_json::{Map, Value, json};
use testkit::records::Rng;
use testkit::words::Words;

/// One row written, or one event logged.
pub(crate) enum Write {
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

pub(crate) struct SessionRow {
    project: String,
    slug: String,
    directory: String,
    title: String,
    model: String,
    created: i64,
}

/// A session being written: what its next writes need.
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) directory: String,
    /// Its next event's `seq`.
    pub(crate) seq: i64,
    /// The last prompt's id: the parent of the replies after it.
    pub(crate) prompt: String,
    pub(crate) created: i64,
    pub(crate) slug: String,
    pub(crate) title: String,
    /// Messages written so far, and planned.
    pub(crate) written: usize,
    pub(crate) planned: usize,
}

/// A message's writes, and which of them completes its record.
pub(crate) struct Message {
    pub(crate) id: String,
    pub(crate) steps: Vec<Step>,
    /// The step after which the message's record is as it stays.
    pub(crate) last: usize,
    /// A piece of its record once complete (and not before).
    pub(crate) marker: &'static str,
}

/// Writes what OpenCode writes: ids as it makes them (a prefix, 12 hex digits of the time in
/// ms by 4096 plus a counter, 14 random characters), rows and events in its shapes.
pub(crate) struct Agent {
    words: Words,
    rng: Rng,
    counter: u64,
}

impl Agent {
    pub(crate) fn new(seed: u64) -> Agent {
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
    pub(crate) fn session(&mut self, planned: usize, project: usize, at: i64) -> (Session, Step) {
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
    pub(crate) fn turn(&mut self, s: &mut Session, at: &mut i64) -> Vec<Message> {
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
    pub(crate) fn prompt(&mut self, s: &mut Session, at: &mut i64) -> Message {
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
    pub(crate) fn reply(&mut self, s: &mut Session, at: &mut i64, tools: usize) -> Message {
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
pub(crate) fn project_id(n: usize) -> String {
    format!("{:040x}", (n as u128 + 1) * 0x9e37_79b9_7f4a_7c15)
}

/// Applies `w`, a write of session `session`, as OpenCode's statements do (rows upserted in
/// place; the event logged with the session's last seq).
pub(crate) fn apply(conn: &Connection, session: &str, w: &Write) -> rusqlite::Result<()> {
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
