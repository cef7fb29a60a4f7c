//! Deterministic records shaped like Claude Code and Codex CLI transcript lines: prompts,
//! assistant messages, tool calls, tool results, the odd base64 image.

use serde_json::{Value, json};
use std::time::{Duration, UNIX_EPOCH};

/// SplitMix64: small, fast, and the same sequence on every machine for a given seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Log-uniform in [lo, hi): as many records of 0.5–1 KB as of 2.5–5 KB.
    pub fn log_uniform(&mut self, lo: f64, hi: f64) -> usize {
        (lo * (hi / lo).powf(self.unit())) as usize
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = self.unit().max(f64::MIN_POSITIVE);
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    pub fn hex(&mut self, len: usize) -> String {
        (0..len)
            .map(|_| char::from(b"0123456789abcdef"[self.below(16) as usize]))
            .collect()
    }

    pub fn uuid(&mut self) -> String {
        format!(
            "{}-{}-4{}-a{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(3),
            self.hex(3),
            self.hex(12)
        )
    }

    /// `len` characters of base64, as an image's data would be.
    pub fn base64(&mut self, len: usize) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = Vec::with_capacity(len + 10);
        while out.len() < len {
            let mut bits = self.next_u64();
            for _ in 0..10 {
                out.push(ALPHABET[(bits & 63) as usize]);
                bits >>= 6;
            }
        }
        out.truncate(len);
        String::from_utf8(out).expect("base64 alphabet is ASCII")
    }
}

/// How big a record is, by class; the classes follow real transcripts: mostly messages and
/// tool calls of 0.5–5 KB, some long tool results, rarely a pasted or captured image.
#[derive(Clone, Copy, Debug)]
pub enum Size {
    Small(usize),
    Medium(usize),
    Large(usize),
    Image(usize),
}

impl Size {
    pub fn pick(rng: &mut Rng) -> Size {
        let p = rng.unit();
        if p < 0.0002 {
            Size::Image(rng.log_uniform(1e6, 4e6))
        } else if p < 0.0102 {
            Size::Large(rng.log_uniform(50e3, 500e3))
        } else if p < 0.0702 {
            Size::Medium(rng.log_uniform(5e3, 50e3))
        } else {
            Size::Small(rng.log_uniform(500.0, 5e3))
        }
    }

    /// About how many bytes the record takes.
    pub fn bytes(self) -> usize {
        match self {
            Size::Small(n) | Size::Medium(n) | Size::Large(n) | Size::Image(n) => n,
        }
    }

    /// 0 for small, 1 medium, 2 large, 3 image.
    pub fn class(self) -> usize {
        match self {
            Size::Small(_) => 0,
            Size::Medium(_) => 1,
            Size::Large(_) => 2,
            Size::Image(_) => 3,
        }
    }

    /// Only the small class: what a live session appends between tool runs.
    pub fn small(rng: &mut Rng) -> Size {
        Size::Small(rng.log_uniform(500.0, 5e3))
    }
}

/// A block of prose, code and tool output to cut record text from: quotes, backslashes,
/// tabs, newlines and non-ASCII characters, so JSON escaping does its usual work.
pub struct TextPool(String);

impl TextPool {
    pub fn new(seed: u64) -> TextPool {
        const WORDS: &[&str] = &[
            "the",
            "function",
            "returns",
            "a",
            "value",
            "of",
            "type",
            "Result",
            "error",
            "file",
            "path",
            "read",
            "write",
            "cursor",
            "offset",
            "test",
            "passes",
            "fails",
            "build",
            "cargo",
            "let",
            "mut",
            "fn",
            "impl",
            "struct",
            "=",
            "{",
            "}",
            "(",
            ")",
            "&self",
            "->",
            "Ok(())",
            "//",
            "TODO",
            "résumé",
            "naïve",
            "→",
            "✓",
            "λ",
            "config.toml",
            "src/main.rs",
            "line",
            "42:",
            "warning:",
            "unused",
            "variable",
            "`x`",
            "\"quoted\"",
            "C:\\Users\\dev",
            "\\n",
            "<div>",
            "</div>",
            "SELECT",
            "*",
            "FROM",
            "records;",
        ];
        let mut rng = Rng::new(seed);
        let mut s = String::with_capacity(1 << 20);
        while s.len() < 1 << 20 {
            s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
            s.push(match rng.below(16) {
                0 => '\n',
                1 => '\t',
                2 => '.',
                _ => ' ',
            });
        }
        TextPool(s)
    }

    /// About `len` bytes of text from a random place in the pool.
    pub fn text(&self, rng: &mut Rng, len: usize) -> String {
        let pool = &self.0;
        let mut out = String::with_capacity(len + 8);
        while out.len() < len {
            let mut start = rng.below(pool.len() as u64 / 2) as usize;
            while !pool.is_char_boundary(start) {
                start += 1;
            }
            let mut end = (start + len - out.len()).min(pool.len());
            while !pool.is_char_boundary(end) {
                end -= 1;
            }
            out.push_str(&pool[start..end]);
        }
        out
    }
}

/// Which agent's transcript format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Harness {
    ClaudeCode,
    Codex,
}

/// One session's running state: ids, clock, the previous message's uuid.
pub struct Session {
    harness: Harness,
    id: String,
    cwd: String,
    clock_ms: u64,
    parent: Option<String>,
    started: bool,
}

/// JSON overhead of a record around its text, roughly; text is sized to leave room for it.
const OVERHEAD: usize = 400;

impl Session {
    pub fn new(harness: Harness, rng: &mut Rng, project: usize) -> Session {
        Session {
            harness,
            id: rng.uuid(),
            cwd: format!("/home/dev/src/project-{project}"),
            clock_ms: 1_750_000_000_000 + rng.below(30 * 86_400_000),
            parent: None,
            started: false,
        }
    }

    /// The next line of the session (without its newline), of about the size asked for.
    pub fn next_line(&mut self, rng: &mut Rng, pool: &TextPool, size: Size) -> Vec<u8> {
        let value = self.next_value(rng, pool, size);
        serde_json::to_vec(&value).expect("a JSON value serializes")
    }

    /// The next line, with `"mk":marker` added so a subject's output can be matched to it.
    pub fn marked_line(&mut self, rng: &mut Rng, pool: &TextPool, marker: &str) -> Vec<u8> {
        let size = Size::small(rng);
        let mut value = self.next_value(rng, pool, size);
        value["mk"] = Value::from(marker);
        serde_json::to_vec(&value).expect("a JSON value serializes")
    }

    fn next_value(&mut self, rng: &mut Rng, pool: &TextPool, size: Size) -> Value {
        self.clock_ms += rng.below(20_000);
        match self.harness {
            Harness::ClaudeCode => self.claude(rng, pool, size),
            Harness::Codex => self.codex(rng, pool, size),
        }
    }

    fn timestamp(&self) -> String {
        let at = UNIX_EPOCH + Duration::from_millis(self.clock_ms);
        humantime::format_rfc3339_millis(at).to_string()
    }

    fn claude(&mut self, rng: &mut Rng, pool: &TextPool, size: Size) -> Value {
        let uuid = rng.uuid();
        let tool_id = format!("toolu_01{}", rng.hex(22));
        let message = match size {
            Size::Small(len) => claude_small(rng, pool, len.saturating_sub(OVERHEAD), &tool_id),
            Size::Medium(len) | Size::Large(len) => {
                let half = pool.text(rng, len / 2);
                return self.claude_envelope(
                    "user",
                    json!({"role": "user", "content": [{"type": "tool_result",
                        "tool_use_id": tool_id, "content": half.clone()}]}),
                    uuid,
                    Some(json!({"stdout": half, "stderr": "", "interrupted": false})),
                );
            }
            Size::Image(len) => json!({"role": "user", "content": [{"type": "tool_result",
                "tool_use_id": tool_id, "content": [{"type": "image", "source": {
                    "type": "base64", "media_type": "image/png", "data": rng.base64(len)}}]}]}),
        };
        let kind = message["role"].as_str().unwrap_or("user").to_owned();
        self.claude_envelope(&kind, message, uuid, None)
    }

    fn claude_envelope(
        &mut self,
        kind: &str,
        message: Value,
        uuid: String,
        tool_use_result: Option<Value>,
    ) -> Value {
        let mut v = json!({
            "parentUuid": self.parent.replace(uuid.clone()),
            "isSidechain": false,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.id,
            "version": "1.0.98",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": uuid,
            "timestamp": self.timestamp(),
        });
        if let Some(result) = tool_use_result {
            v["toolUseResult"] = result;
        }
        v
    }

    fn codex(&mut self, rng: &mut Rng, pool: &TextPool, size: Size) -> Value {
        let payload = if !self.started {
            self.started = true;
            json!({"type": "session_meta", "payload": {"id": self.id, "timestamp": self.timestamp(),
                "cwd": self.cwd, "originator": "codex_cli_rs", "cli_version": "0.46.0",
                "instructions": pool.text(rng, 1500)}})
        } else {
            match size {
                Size::Small(len) => codex_small(rng, pool, len.saturating_sub(OVERHEAD)),
                Size::Medium(len) | Size::Large(len) => {
                    // Codex stores tool output as JSON inside a JSON string: escaped twice.
                    let output = json!({"output": pool.text(rng, len * 3 / 4),
                        "metadata": {"exit_code": 0, "duration_seconds": 0.4}});
                    json!({"type": "response_item", "payload": {"type": "function_call_output",
                        "call_id": format!("call_{}", rng.hex(24)), "output": output.to_string()}})
                }
                Size::Image(len) => json!({"type": "response_item", "payload": {"type": "message",
                    "role": "user", "content": [{"type": "input_image",
                    "image_url": format!("data:image/png;base64,{}", rng.base64(len))}]}}),
            }
        };
        let mut v = payload;
        v["timestamp"] = Value::from(self.timestamp());
        v
    }
}

fn claude_small(rng: &mut Rng, pool: &TextPool, len: usize, tool_id: &str) -> Value {
    let model = "claude-sonnet-4-20250514";
    let usage = json!({"input_tokens": rng.below(5000), "output_tokens": rng.below(2000),
        "cache_read_input_tokens": rng.below(90000)});
    match rng.below(5) {
        0 => json!({"role": "user", "content": pool.text(rng, len)}),
        1 => json!({"id": format!("msg_01{}", rng.hex(22)), "type": "message",
            "role": "assistant", "model": model, "content": [{"type": "text",
            "text": pool.text(rng, len)}], "stop_reason": null, "usage": usage}),
        2 => json!({"id": format!("msg_01{}", rng.hex(22)), "type": "message",
            "role": "assistant", "model": model, "content": [{"type": "tool_use", "id": tool_id,
            "name": "Bash", "input": {"command": pool.text(rng, len.min(400)),
            "description": pool.text(rng, len.saturating_sub(400))}}], "usage": usage}),
        3 => json!({"id": format!("msg_01{}", rng.hex(22)), "type": "message",
            "role": "assistant", "model": model, "content": [{"type": "thinking",
            "thinking": pool.text(rng, len * 2 / 3), "signature": rng.base64(len / 3)}],
            "usage": usage}),
        _ => json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_id,
            "content": pool.text(rng, len)}]}),
    }
}

fn codex_small(rng: &mut Rng, pool: &TextPool, len: usize) -> Value {
    let call_id = format!("call_{}", rng.hex(24));
    match rng.below(6) {
        0 => json!({"type": "response_item", "payload": {"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": pool.text(rng, len)}]}}),
        1 => json!({"type": "response_item", "payload": {"type": "message",
            "role": "assistant", "content": [{"type": "output_text", "text": pool.text(rng, len)}]}}),
        2 => json!({"type": "response_item", "payload": {"type": "reasoning", "summary": [
            {"type": "summary_text", "text": pool.text(rng, len / 2)}],
            "encrypted_content": rng.base64(len / 2)}}),
        3 => {
            let args = json!({"command": ["bash", "-lc", pool.text(rng, len)],
                "workdir": "/home/dev/src", "timeout_ms": 120000});
            json!({"type": "response_item", "payload": {"type": "function_call", "name": "shell",
                "arguments": args.to_string(), "call_id": call_id}})
        }
        4 => {
            let output = json!({"output": pool.text(rng, len),
                "metadata": {"exit_code": rng.below(2), "duration_seconds": 0.1}});
            json!({"type": "response_item", "payload": {"type": "function_call_output",
                "call_id": call_id, "output": output.to_string()}})
        }
        _ => json!({"type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": rng.below(200000),
            "output_tokens": rng.below(20000)}}, "note": pool.text(rng, len.min(200))}}),
    }
}
