//! A Claude Code transcript as the judged sessions are written: one record per content block,
//! as Claude Code streams a reply, so that a tool call and its result are tool messages, a
//! thinking block is reasoning and a line of text is the assistant's.

use serde_json::{Value, json};
use std::fs;
use std::io;
use std::path::Path;
use std::time::{Duration, UNIX_EPOCH};

/// One session's transcript, held until it is written.
pub struct Transcript {
    session: String,
    cwd: String,
    /// Unix ms of the next record.
    clock: u64,
    parent: Option<String>,
    lines: Vec<String>,
}

impl Transcript {
    /// A session `session` in project `cwd`, whose first record is at `start_ms`.
    pub fn new(session: &str, cwd: &str, start_ms: u64) -> Transcript {
        Transcript {
            session: session.to_owned(),
            cwd: cwd.to_owned(),
            clock: start_ms,
            parent: None,
            lines: Vec::new(),
        }
    }

    /// What the person typed.
    pub fn prompt(&mut self, text: &str) {
        self.emit("user", json!({"role": "user", "content": text}));
    }

    /// The model's thinking.
    pub fn thinking(&mut self, text: &str) {
        self.block(json!({"type": "thinking", "thinking": text, "signature": "EuYBCkYIBxgC"}));
    }

    /// The model's text.
    pub fn text(&mut self, text: &str) {
        self.block(json!({"type": "text", "text": text}));
    }

    /// A tool call and what it returned.
    pub fn tool(&mut self, name: &str, input: Value, output: &str) {
        let id = format!("toolu_{}_{}", self.lines.len(), &self.session[..8]);
        self.block(json!({"type": "tool_use", "id": &id, "name": name, "input": input}));
        let result = json!({"tool_use_id": id, "type": "tool_result", "content": output});
        self.emit("user", json!({"role": "user", "content": [result]}));
    }

    /// Writes the transcript to `path`, its directories made. Returns its size.
    pub fn write(&self, path: &Path) -> io::Result<u64> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let text = self.lines.concat();
        fs::write(path, &text)?;
        Ok(text.len() as u64)
    }

    fn block(&mut self, block: Value) {
        let message = json!({"id": format!("msg_{}", self.lines.len()), "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5-20250929", "content": [block]});
        self.emit("assistant", message);
    }

    fn emit(&mut self, kind: &str, message: Value) {
        self.clock += 20_000;
        let uuid = format!("{}-{:012x}", &self.session[..23], self.lines.len() + 1);
        let stamp =
            humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(self.clock));
        let record = json!({"parentUuid": self.parent.replace(uuid.clone()),
            "isSidechain": false, "userType": "external", "cwd": &self.cwd,
            "sessionId": &self.session, "version": "2.0.31", "gitBranch": "main",
            "type": kind, "message": message, "uuid": uuid, "timestamp": stamp.to_string()});
        self.lines.push(format!("{record}\n"));
    }
}
