//! Codex rollouts: a session as Codex writes it.

use super::Count;
use super::json::{Json, Transcript, obj};
use super::random::{alnum, base64, hex, log_uniform, pick, uuid_v7};
use super::session::Session;
use std::io;
use std::path::Path;
use transcript_sync::prefix_of;

const CODEX_VERSION: &str = "0.46.0";

/// One Codex rollout.
struct Codex {
    out: Transcript,
    cwd: String,
    /// Input, cached input, output and reasoning tokens so far.
    tokens: [u64; 4],
}

pub(super) fn write_codex(root: &Path, s: &mut Session, target: u64) -> io::Result<Count> {
    let id = uuid_v7(s.rng, s.clock.0);
    let stamp = s.clock.file_stamp();
    let (year, month, day) = (&stamp[..4], &stamp[5..7], &stamp[8..10]);
    let path = root.join(format!(
        "codex/{year}/{month}/{day}/rollout-{stamp}-{id}.jsonl"
    ));
    let mut rollout = Codex {
        out: Transcript::create(&path)?,
        cwd: s.ws.cwd.clone(),
        tokens: [0; 4],
    };
    rollout.meta(s, id)?;
    while rollout.out.count.bytes < target {
        rollout.turn(s, target)?;
    }
    rollout.out.finish()
}

impl Codex {
    fn item(&mut self, s: &mut Session, kind: &str, payload: Json) -> io::Result<()> {
        s.clock.tick(s.rng, 20, 2500);
        let record = obj!("timestamp": s.clock.stamp(), "type": kind, "payload": payload);
        self.out.write(&record)
    }

    /// The session's first records: its metadata with the base prompt, the project's
    /// instructions (its README standing for AGENTS.md) and the environment.
    fn meta(&mut self, s: &mut Session, id: String) -> io::Result<()> {
        let project = &s.ws.project.name;
        let git = obj!("commit_hash": hex(s.rng, 40), "branch": "main",
            "repository_url": format!("git@github.com:{}/{project}.git", s.user));
        let meta = obj!("id": id, "timestamp": s.clock.stamp(), "cwd": &self.cwd,
            "originator": "codex_cli_rs", "cli_version": CODEX_VERSION,
            "instructions": &s.shelf.base_prompt, "source": "cli", "model_provider": "openai",
            "git": git);
        self.item(s, "session_meta", meta)?;
        if let Some(readme) = s.ws.files.iter().find(|f| f.rel.ends_with(".md")) {
            let text = format!(
                "<user_instructions>\n\n{}\n\n</user_instructions>",
                prefix_of(&readme.text, 8000)
            );
            self.item(s, "response_item", message("user", "input_text", text))?;
        }
        let environment = format!(
            "<environment_context>\n  <cwd>{}</cwd>\n  \
             <approval_policy>on-request</approval_policy>\n  \
             <sandbox_mode>workspace-write</sandbox_mode>\n  \
             <network_access>restricted</network_access>\n  \
             <shell>bash</shell>\n</environment_context>",
            self.cwd
        );
        self.item(
            s,
            "response_item",
            message("user", "input_text", environment),
        )
    }

    /// The turn's settings, a prompt, steps until the work is done (or the session's bytes
    /// are), an answer.
    fn turn(&mut self, s: &mut Session, target: u64) -> io::Result<()> {
        s.clock.tick(s.rng, 20_000, 900_000);
        self.item(s, "turn_context", self.turn_context())?;
        let prompt = s.prompt();
        let asked = message("user", "input_text", prompt.clone());
        self.item(s, "response_item", asked)?;
        let event = obj!("type": "user_message", "message": prompt, "images": Json::Arr(vec![]));
        self.item(s, "event_msg", event)?;
        for _ in 0..log_uniform(s.rng, 2.0, 30.0) {
            if self.out.count.bytes >= target {
                break;
            }
            self.step(s)?;
        }
        let answer = s.summary();
        let event = obj!("type": "agent_message", "message": &answer);
        self.item(s, "event_msg", event)?;
        let answered = message("assistant", "output_text", answer);
        self.item(s, "response_item", answered)?;
        self.token_count(s)
    }

    fn turn_context(&self) -> Json {
        let sandbox = obj!("mode": "workspace-write", "network_access": false,
            "exclude_tmpdir_env_var": false, "exclude_slash_tmp": false);
        obj!("cwd": &self.cwd, "approval_policy": "on-request", "sandbox_policy": sandbox,
            "model": "gpt-5-codex", "effort": "medium", "summary": "auto")
    }

    /// One response of the model: reasoning, a command or a patch, its output, the tokens.
    fn step(&mut self, s: &mut Session) -> io::Result<()> {
        if s.rng.f64() < 0.5 {
            self.reasoning(s)?;
        }
        let call_id = format!("call_{}", alnum(s.rng, 24));
        let edited = s.rng.f64() < 0.2 && self.apply_patch(s, &call_id)?;
        if !edited {
            self.shell(s, &call_id)?;
        }
        self.token_count(s)
    }

    fn reasoning(&mut self, s: &mut Session) -> io::Result<()> {
        let i = s.ws.pick(s.rng);
        let name = s.ws.identifier(s.rng, i);
        let title = pick(s.rng, REASONING_TITLES);
        let text = format!("**{title} `{name}`**\n\n{}", s.shelf.paragraph(s.rng));
        let len = log_uniform(s.rng, 300.0, 2400.0);
        let encrypted = format!("gAAAAAB{}", base64(s.rng, len));
        let summary = vec![obj!("type": "summary_text", "text": &text)];
        self.item(
            s,
            "event_msg",
            obj!("type": "agent_reasoning", "text": text),
        )?;
        let item = obj!("type": "reasoning", "summary": summary, "content": Json::Null,
            "encrypted_content": encrypted);
        self.item(s, "response_item", item)
    }

    fn shell(&mut self, s: &mut Session, call_id: &str) -> io::Result<()> {
        let shell = s.shell(&[8, 12, 6, 6, 3, 5, 5, 14, 35, 2]);
        let arguments = obj!("command": vec!["bash".to_owned(), "-lc".to_owned(), shell.command],
            "workdir": &self.cwd, "timeout_ms": 120_000u64);
        let call = obj!("type": "function_call", "name": "shell", "arguments": arguments.text(),
            "call_id": call_id);
        self.item(s, "response_item", call)?;
        let secs = s.rng.u32(1..300) as f64 / 10.0;
        let metadata = obj!("exit_code": shell.exit_code, "duration_seconds": secs);
        let output = obj!("output": shell.output, "metadata": metadata);
        let result = obj!("type": "function_call_output", "call_id": call_id,
            "output": output.text());
        self.item(s, "response_item", result)
    }

    /// Codex's edit: a patch through the apply_patch tool. False when there was nothing it
    /// had read to change.
    fn apply_patch(&mut self, s: &mut Session, call_id: &str) -> io::Result<bool> {
        let i = s.ws.pick(s.rng);
        if !s.ws.files[i].read {
            return Ok(false);
        }
        let Some(edit) = s.ws.edit(s.rng, s.shelf, i) else {
            return Ok(false);
        };
        let rel = s.ws.files[edit.file].rel.clone();
        let (_, hunk) = edit.hunk_lines();
        let input = format!(
            "*** Begin Patch\n*** Update File: {rel}\n@@\n{}\n*** End Patch",
            hunk.join("\n")
        );
        let call = obj!("type": "custom_tool_call", "status": "completed", "call_id": call_id,
            "name": "apply_patch", "input": input);
        self.item(s, "response_item", call)?;
        let metadata = obj!("exit_code": 0u64, "duration_seconds": 0.0);
        let output = obj!("output": format!("Success. Updated the following files:\nM {rel}\n"),
            "metadata": metadata);
        let result = obj!("type": "custom_tool_call_output", "call_id": call_id,
            "output": output.text());
        self.item(s, "response_item", result)?;
        Ok(true)
    }

    fn token_count(&mut self, s: &mut Session) -> io::Result<()> {
        let last = [
            8_000 + self.out.count.bytes / 4,
            self.out.count.bytes / 5,
            s.rng.u64(20..2000),
            s.rng.u64(0..1500),
        ];
        for (total, add) in self.tokens.iter_mut().zip(last) {
            *total += add;
        }
        let info = obj!("total_token_usage": token_usage(self.tokens),
            "last_token_usage": token_usage(last), "model_context_window": 272_000u64);
        let window = |minutes: u64, s: &mut Session| {
            obj!("used_percent": s.rng.u32(0..100) as f64, "window_minutes": minutes,
                "resets_in_seconds": s.rng.u64(0..minutes * 60))
        };
        let limits = obj!("primary": window(299, s), "secondary": window(10079, s));
        let payload = obj!("type": "token_count", "info": info, "rate_limits": limits);
        self.item(s, "event_msg", payload)
    }
}

const REASONING_TITLES: &[&str] = &[
    "Inspecting",
    "Reviewing",
    "Checking",
    "Planning changes to",
    "Updating",
    "Considering",
    "Verifying",
    "Searching for",
];

fn message(role: &str, kind: &str, text: String) -> Json {
    let content = vec![obj!("type": kind, "text": text)];
    obj!("type": "message", "role": role, "content": content)
}

fn token_usage([input, cached, output, reasoning]: [u64; 4]) -> Json {
    obj!("input_tokens": input, "cached_input_tokens": cached, "output_tokens": output,
        "reasoning_output_tokens": reasoning, "total_tokens": input + output)
}
