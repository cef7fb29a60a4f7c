//! Claude Code transcripts: a session's main thread and its subagents.

use super::Count;
use super::json::{Fields, Json, Transcript, obj};
use super::random::{alnum, base64, hex, log_uniform, pick, uuid, weighted};
use super::session::{ASKS, Session};
use super::workspace::{WorkFile, numbered, window};
use std::io;
use std::path::{Path, PathBuf};

const CLAUDE_VERSIONS: &[&str] = &["2.0.14", "2.0.22", "2.0.31", "2.0.37"];

/// The system reminder Claude Code appends to every file it reads.
const READ_REMINDER: &str = "\n\n<system-reminder>\nWhenever you read a file, you should \
    consider whether it would be considered malware. You CAN and SHOULD provide analysis of \
    malware, what it is doing. But you MUST refuse to improve or augment the code. You can still \
    analyze existing code, write reports, or answer questions about the code behavior.\n\
    </system-reminder>\n";

/// Claude Code's Read shows at most this many lines at once.
const READ_LINES: usize = 2000;

/// One Claude Code transcript: a session's main thread or one of its subagents.
struct Claude {
    out: Transcript,
    session_id: String,
    cwd: String,
    version: &'static str,
    branch: String,
    model: &'static str,
    /// Set in a subagent's transcript.
    agent_id: Option<String>,
    parent: Option<String>,
    /// The project's directory under `claude/`, where subagents go.
    dir: PathBuf,
    subagents: Count,
    target: u64,
}

/// A tool call, and what came back.
struct ToolCall {
    id: String,
    name: &'static str,
    input: Json,
    outcome: Outcome,
}

enum Outcome {
    Done {
        content: Json,
        detail: Json,
        error: bool,
    },
    /// A Task: the subagent runs between the call and its result.
    Subagent { prompt: String, kind: &'static str },
}

pub(super) fn write_claude(root: &Path, s: &mut Session, target: u64) -> io::Result<Count> {
    let session_id = uuid(s.rng);
    let dir = root.join("claude").join(encode_project(&s.ws.cwd));
    let path = dir.join(format!("{session_id}.jsonl"));
    let mut main = Claude {
        out: Transcript::create(&path)?,
        session_id,
        cwd: s.ws.cwd.clone(),
        version: pick(s.rng, CLAUDE_VERSIONS),
        branch: pick(s.rng, &["main", "main", "fix/review", "feature/cli"]).to_owned(),
        model: pick(
            s.rng,
            &["claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805"],
        ),
        agent_id: None,
        parent: None,
        dir,
        subagents: Count::default(),
        target,
    };
    while main.spent() < target {
        main.turn(s)?;
    }
    if s.rng.f64() < 0.3 {
        let title = s.shelf.sentence(s.rng);
        let id = main.session_id.clone();
        let record = obj!("type": "custom-title", "customTitle": title, "sessionId": id);
        main.out.write(&record)?;
    }
    let mut count = main.subagents;
    count += main.out.finish()?;
    Ok(count)
}

/// Claude Code's directory name for a project: `/home/u/src/a_b` is `-home-u-src-a-b`.
fn encode_project(cwd: &str) -> String {
    let encode = |c: char| if c.is_ascii_alphanumeric() { c } else { '-' };
    cwd.chars().map(encode).collect()
}

impl Claude {
    fn spent(&self) -> u64 {
        self.out.count.bytes + self.subagents.bytes
    }

    /// A prompt, tool calls until the work is done (or the session's bytes are), an answer.
    fn turn(&mut self, s: &mut Session) -> io::Result<()> {
        s.clock.tick(s.rng, 20_000, 900_000);
        self.snapshot(s)?;
        let prompt = s.prompt();
        self.prompt(s, prompt)?;
        let steps = log_uniform(s.rng, 1.0, 20.0);
        for _ in 0..steps {
            if self.spent() >= self.target {
                break;
            }
            self.step(s)?;
        }
        let answer = s.summary();
        self.assistant(s, vec![obj!("type": "text", "text": answer)], "end_turn")
    }

    /// The envelope every record carries, around `head` (type, message…) and before `tail`.
    fn emit(&mut self, s: &mut Session, head: Fields, tail: Fields) -> io::Result<()> {
        s.clock.tick(s.rng, 30, 3000);
        let uuid = uuid(s.rng);
        let mut fields: Fields = Vec::with_capacity(head.len() + tail.len() + 11);
        fields.push(("parentUuid", self.parent.replace(uuid.clone()).into()));
        fields.push(("isSidechain", self.agent_id.is_some().into()));
        fields.push(("userType", "external".into()));
        fields.push(("cwd", (&self.cwd).into()));
        fields.push(("sessionId", (&self.session_id).into()));
        fields.push(("version", self.version.into()));
        fields.push(("gitBranch", (&self.branch).into()));
        if let Some(agent) = &self.agent_id {
            fields.push(("agentId", agent.into()));
        }
        fields.extend(head);
        fields.push(("uuid", uuid.into()));
        fields.push(("timestamp", s.clock.stamp().into()));
        fields.extend(tail);
        self.out.write(&Json::Obj(fields))
    }

    /// Claude Code's backup list of the files changed so far, written before each prompt.
    fn snapshot(&mut self, s: &mut Session) -> io::Result<()> {
        if self.agent_id.is_some() {
            return Ok(());
        }
        let id = uuid(s.rng);
        let stamp = s.clock.stamp();
        let backups = (s.ws.files.iter().filter(|f| f.edited))
            .map(|f| {
                let name = format!("{:016x}@v2", xxhash_rust::xxh3::xxh3_64(f.rel.as_bytes()));
                let backup = obj!("backupFileName": name,
                    "version": 2u64, "backupTime": &stamp);
                (f.rel.clone(), backup)
            })
            .collect();
        let snapshot = obj!("messageId": &id, "trackedFileBackups": Json::Map(backups),
            "timestamp": &stamp);
        let record = obj!("type": "file-history-snapshot", "messageId": id,
            "snapshot": snapshot, "isSnapshotUpdate": false);
        self.out.write(&record)
    }

    fn prompt(&mut self, s: &mut Session, text: String) -> io::Result<()> {
        let content = match s.rng.f64() < 0.0025 {
            // A pasted screenshot: random bytes stand for the PNG.
            true => {
                let len = log_uniform(s.rng, 50e3, 500e3);
                let data = format!("iVBORw0KGgo{}", base64(s.rng, len));
                let source = obj!("type": "base64", "media_type": "image/png", "data": data);
                Json::Arr(vec![
                    obj!("type": "text", "text": text),
                    obj!("type": "image", "source": source),
                ])
            }
            false => text.into(),
        };
        let thinking = obj!("level": "high", "disabled": false, "triggers": Json::Arr(vec![]));
        let head = vec![
            ("type", "user".into()),
            ("message", obj!("role": "user", "content": content)),
        ];
        self.emit(s, head, vec![("thinkingMetadata", thinking)])
    }

    /// One response of the model: maybe thinking, maybe a line of text, one to three tool
    /// calls; then their results.
    fn step(&mut self, s: &mut Session) -> io::Result<()> {
        let calls = match s.rng.f64() < 0.06 {
            true => (0..s.rng.usize(2..4)).map(|_| self.read(s)).collect(),
            false => vec![self.tool_call(s)],
        };
        let mut blocks = Vec::new();
        if s.rng.f64() < 0.45 {
            let thinking = s.thought();
            let signature = format!("Eu{}", base64(s.rng, 200 + (thinking.len() / 3).min(2000)));
            blocks.push(obj!("type": "thinking", "thinking": thinking, "signature": signature));
        }
        if s.rng.f64() < 0.35 {
            blocks.push(obj!("type": "text", "text": s.lead_in()));
        }
        for call in &calls {
            blocks.push(obj!("type": "tool_use", "id": &call.id, "name": call.name,
                "input": call.input.clone()));
        }
        self.assistant(s, blocks, "tool_use")?;
        for call in calls {
            self.tool_result(s, call)?;
        }
        Ok(())
    }

    /// One record per content block, as Claude Code writes a streamed response: the same
    /// message id, request id and usage on each.
    fn assistant(&mut self, s: &mut Session, blocks: Vec<Json>, stop: &str) -> io::Result<()> {
        let id = format!("msg_01{}", alnum(s.rng, 22));
        let request = format!("req_011C{}", alnum(s.rng, 20));
        let usage = self.usage(s);
        let last = blocks.len().saturating_sub(1);
        for (i, block) in blocks.into_iter().enumerate() {
            let stop_reason = if i == last { stop.into() } else { Json::Null };
            let message = obj!("model": self.model, "id": &id, "type": "message",
                "role": "assistant", "content": vec![block], "stop_reason": stop_reason,
                "stop_sequence": Json::Null, "usage": usage.clone());
            let head = vec![
                ("message", message),
                ("requestId", (&request).into()),
                ("type", "assistant".into()),
            ];
            self.emit(s, head, Vec::new())?;
        }
        Ok(())
    }

    /// Tokens as the API counts them: the context (about a token per 4 bytes so far, and the
    /// system prompt) is mostly read from the cache.
    fn usage(&self, s: &mut Session) -> Json {
        let fresh = s.rng.u64(0..4000);
        let cached = 14_000 + self.out.count.bytes / 4;
        let cache = obj!("ephemeral_5m_input_tokens": fresh, "ephemeral_1h_input_tokens": 0u64);
        obj!("input_tokens": s.rng.u64(1..12), "cache_creation_input_tokens": fresh,
            "cache_read_input_tokens": cached, "cache_creation": cache,
            "output_tokens": s.rng.u64(1..1500), "service_tier": "standard")
    }

    fn tool_result(&mut self, s: &mut Session, call: ToolCall) -> io::Result<()> {
        let (content, detail, error) = match call.outcome {
            Outcome::Done {
                content,
                detail,
                error,
            } => (content, detail, error),
            Outcome::Subagent { prompt, kind } => {
                let (content, detail) = self.subagent(s, prompt, kind)?;
                (content, detail, false)
            }
        };
        let mut block = vec![
            ("tool_use_id", Json::from(call.id)),
            ("type", "tool_result".into()),
            ("content", content),
        ];
        if error {
            block.push(("is_error", true.into()));
        }
        let message = obj!("role": "user", "content": vec![Json::Obj(block)]);
        let head = vec![("type", "user".into()), ("message", message)];
        self.emit(s, head, vec![("toolUseResult", detail)])
    }

    /// The next tool call, in about the mix of a real session: commands, reads and searches
    /// most, edits often, a new file or a subagent now and then.
    fn tool_call(&mut self, s: &mut Session) -> ToolCall {
        // A subagent only looks: it neither edits nor starts subagents of its own.
        let main = self.agent_id.is_none() as u32;
        let weights = [20, 12, 4, 28, 18 * main, main, 5, main];
        match weighted(s.rng, &weights) {
            0 => self.read(s),
            1 => self.grep(s),
            2 => self.glob(s),
            3 => self.bash(s),
            4 => self.edit(s),
            5 => self.write(s),
            6 => self.todo(s),
            _ => self.task(s),
        }
    }

    fn call(
        s: &mut Session,
        name: &'static str,
        input: Json,
        content: Json,
        detail: Json,
    ) -> ToolCall {
        ToolCall {
            id: format!("toolu_01{}", alnum(s.rng, 22)),
            name,
            input,
            outcome: Outcome::Done {
                content,
                detail,
                error: false,
            },
        }
    }

    fn read(&mut self, s: &mut Session) -> ToolCall {
        let i = s.ws.pick(s.rng);
        self.read_file(s, i)
    }

    /// Reads file `i` whole, or a window of it when it is longer than Read shows at once.
    fn read_file(&mut self, s: &mut Session, i: usize) -> ToolCall {
        let path = s.ws.path(i);
        let file = &mut s.ws.files[i];
        file.read = true;
        let total = file.text.lines().count().max(1);
        let (from, input) = match total > READ_LINES {
            true => {
                let from = 1 + s.rng.usize(0..total - READ_LINES / 2);
                (
                    from,
                    obj!("file_path": &path, "offset": from, "limit": READ_LINES),
                )
            }
            false => (1, obj!("file_path": &path)),
        };
        let to = (from + READ_LINES - 1).min(total);
        let content = format!("{}{READ_REMINDER}", numbered(&file.text, from, to));
        let raw = match total > READ_LINES {
            true => window(&file.text, from, to),
            false => file.text.clone(),
        };
        let file_detail = obj!("filePath": path, "content": raw, "numLines": to + 1 - from,
            "startLine": from, "totalLines": total);
        let detail = obj!("type": "text", "file": file_detail);
        Claude::call(s, "Read", input, content.into(), detail)
    }

    fn grep(&mut self, s: &mut Session) -> ToolCall {
        let i = s.ws.pick(s.rng);
        let pattern = s.ws.identifier(s.rng, i);
        let hits = s.ws.grep(&pattern, 120);
        let path = format!("{}/src", s.ws.cwd);
        match s.rng.f64() < 0.6 {
            true => {
                let content = hits.join("\n");
                let input = obj!("pattern": &pattern, "path": path, "output_mode": "content",
                    "-n": true);
                let detail = obj!("mode": "content", "numFiles": 0u64,
                    "filenames": Json::Arr(vec![]), "content": &content, "numLines": hits.len());
                Claude::call(s, "Grep", input, content.into(), detail)
            }
            false => {
                let mut files: Vec<String> = (hits.iter())
                    .filter_map(|h| h.split(':').next())
                    .map(|rel| format!("{}/{rel}", s.ws.cwd))
                    .collect();
                files.dedup();
                let content = format!("Found {} files\n{}", files.len(), files.join("\n"));
                let input = obj!("pattern": pattern, "path": path);
                let detail = obj!("mode": "files_with_matches", "filenames": files.clone(),
                    "numFiles": files.len());
                Claude::call(s, "Grep", input, content.into(), detail)
            }
        }
    }

    fn glob(&mut self, s: &mut Session) -> ToolCall {
        let ext = s.ws.files[0]
            .rel
            .rsplit('.')
            .next()
            .unwrap_or("rs")
            .to_owned();
        let pattern = format!("**/*.{ext}");
        let files: Vec<String> = (s.ws.project.files.iter())
            .filter(|f| f.ends_with(&format!(".{ext}")))
            .take(100)
            .map(|f| format!("{}/{f}", s.ws.cwd))
            .collect();
        let duration = s.rng.u64(5..400);
        let detail = obj!("filenames": files.clone(), "durationMs": duration,
            "numFiles": files.len(), "truncated": files.len() == 100);
        let input = obj!("pattern": pattern);
        Claude::call(s, "Glob", input, files.join("\n").into(), detail)
    }

    fn bash(&mut self, s: &mut Session) -> ToolCall {
        let shell = s.shell(&[20, 25, 12, 8, 6, 8, 5, 6, 6, 4]);
        let input = obj!("command": &shell.command, "description": shell.description);
        let detail = obj!("stdout": &shell.output, "stderr": "", "interrupted": false,
            "isImage": false);
        let mut call = Claude::call(s, "Bash", input, Json::Null, detail);
        let failed = shell.exit_code != 0;
        if let Outcome::Done { content, error, .. } = &mut call.outcome {
            *content = match failed {
                true => format!("Exit code {}\n{}", shell.exit_code, shell.output).into(),
                false => shell.output.into(),
            };
            *error = failed;
        }
        call
    }

    /// An Edit of a file read before (Claude Code refuses to edit a file it has not read, so
    /// an unread file is read first).
    fn edit(&mut self, s: &mut Session) -> ToolCall {
        let i = s.ws.pick(s.rng);
        if !s.ws.files[i].read {
            return self.read_file(s, i);
        }
        let Some(edit) = s.ws.edit(s.rng, s.shelf, i) else {
            return self.read_file(s, i);
        };
        let path = s.ws.path(edit.file);
        let text = &s.ws.files[edit.file].text;
        let shown_from = edit.line.saturating_sub(4).max(1);
        let shown_to = edit.line + edit.new.lines().count() + 4;
        let content = format!(
            "The file {path} has been updated. Here's the result of running `cat -n` on a \
             snippet of the edited file:\n{}",
            numbered(text, shown_from, shown_to)
        );
        let input = obj!("file_path": &path, "old_string": &edit.old, "new_string": &edit.new);
        let detail = obj!("filePath": path, "oldString": &edit.old, "newString": &edit.new,
            "originalFile": &edit.original, "structuredPatch": edit.structured_patch(),
            "userModified": false, "replaceAll": false);
        Claude::call(s, "Edit", input, content.into(), detail)
    }

    /// A new file: another of the project's files, as a stand-in for what the model writes.
    fn write(&mut self, s: &mut Session) -> ToolCall {
        let project = s.ws.project;
        let rel = &project.files[s.rng.usize(0..project.files.len())];
        let Some(mut file) = WorkFile::load(project, rel) else {
            return self.read(s);
        };
        file.rel = match rel.rsplit_once('.') {
            Some((stem, ext)) => format!("{stem}_new.{ext}"),
            None => format!("{rel}_new"),
        };
        file.edited = true;
        file.read = true;
        let path = format!("{}/{}", s.ws.cwd, file.rel);
        let content = format!("File created successfully at: {path}");
        let input = obj!("file_path": &path, "content": &file.text);
        let detail = obj!("type": "create", "filePath": path, "content": &file.text,
            "structuredPatch": Json::Arr(vec![]));
        s.ws.files.push(file);
        Claude::call(s, "Write", input, content.into(), detail)
    }

    fn todo(&mut self, s: &mut Session) -> ToolCall {
        let n = s.rng.usize(2..7);
        let done = s.rng.usize(0..n);
        let todos: Vec<Json> = (0..n)
            .map(|k| {
                let i = s.ws.pick(s.rng);
                let task = format!(
                    "{} `{}` in {}",
                    pick(s.rng, ASKS),
                    s.ws.identifier(s.rng, i),
                    s.ws.files[i].rel
                );
                let status = match k.cmp(&done) {
                    std::cmp::Ordering::Less => "completed",
                    std::cmp::Ordering::Equal => "in_progress",
                    std::cmp::Ordering::Greater => "pending",
                };
                let active = format!("Working on: {task}");
                obj!("content": task, "status": status, "activeForm": active)
            })
            .collect();
        let content = "Todos have been modified successfully. Ensure that you continue to use the \
            todo list to track your progress. Please proceed with the current tasks if applicable";
        let input = obj!("todos": todos.clone());
        let detail = obj!("oldTodos": Json::Arr(vec![]), "newTodos": todos);
        Claude::call(s, "TodoWrite", input, content.into(), detail)
    }

    fn task(&mut self, s: &mut Session) -> ToolCall {
        let i = s.ws.pick(s.rng);
        let name = s.ws.identifier(s.rng, i);
        let description = format!("Find uses of {name}");
        let prompt = format!(
            "Find every place `{name}` is used in {} and what each caller expects. {}.",
            s.ws.cwd,
            s.shelf.sentence(s.rng)
        );
        let kind = pick(s.rng, &["Explore", "general-purpose"]);
        let input = obj!("description": description, "prompt": &prompt, "subagent_type": kind);
        ToolCall {
            id: format!("toolu_01{}", alnum(s.rng, 22)),
            name: "Task",
            input,
            outcome: Outcome::Subagent { prompt, kind },
        }
    }

    /// Runs a subagent in its own transcript beside the session's, and gives what the Task
    /// tool returns: its last answer, and the run's summary.
    fn subagent(
        &mut self,
        s: &mut Session,
        prompt: String,
        kind: &str,
    ) -> io::Result<(Json, Json)> {
        let agent = hex(s.rng, 8);
        let mut sub = self.sidechain(&agent)?;
        sub.prompt(s, prompt.clone())?;
        let tools = log_uniform(s.rng, 2.0, 25.0);
        for _ in 0..tools {
            sub.step(s)?;
        }
        let answer = s.summary();
        sub.assistant(s, vec![obj!("type": "text", "text": &answer)], "end_turn")?;
        self.subagents += sub.out.finish()?;
        let usage = obj!("input_tokens": s.rng.u64(1..50),
            "output_tokens": s.rng.u64(100..3000));
        let content = Json::Arr(vec![obj!("type": "text", "text": answer)]);
        let detail = obj!("status": "completed", "prompt": prompt, "agentId": agent,
            "agentType": kind, "content": content.clone(),
            "totalDurationMs": s.rng.u64(5000..300_000), "totalTokens": s.rng.u64(5000..90_000),
            "totalToolUseCount": tools, "usage": usage);
        Ok((content, detail))
    }

    /// A subagent's transcript: the session's envelope, marked as a sidechain of `agent`.
    fn sidechain(&self, agent: &str) -> io::Result<Claude> {
        let path = (self.dir.join(&self.session_id).join("subagents"))
            .join(format!("agent-{agent}.jsonl"));
        Ok(Claude {
            out: Transcript::create(&path)?,
            session_id: self.session_id.clone(),
            cwd: self.cwd.clone(),
            version: self.version,
            branch: self.branch.clone(),
            model: "claude-haiku-4-5-20251001",
            agent_id: Some(agent.to_owned()),
            parent: None,
            dir: self.dir.clone(),
            subagents: Count::default(),
            target: u64::MAX,
        })
    }
}
