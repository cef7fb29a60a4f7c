//! What one record says, per harness: about its session (project, branch, title, model, time)
//! and which message it is (role, parts), for the index and for `show`.
//!
//! Each agent's module says how its records look and reads them (`agents/`); the vocabulary
//! they read into, and the helpers they share, are here.

use crate::read::record::parse_value;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// How much of a title or prompt is kept.
pub(super) const TITLE_CHARS: usize = 200;

/// What a record says about its session, and the message it is, if any.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Parsed {
    /// The session's id, when the record names it (Claude's `sessionId`, which a subagent's
    /// records share with their parent; Codex `session_meta`; Gemini metadata).
    pub session_id: Option<String>,
    /// The project directory.
    pub project: Option<String>,
    /// The git branch.
    pub branch: Option<String>,
    /// A title the agent recorded, with its rank (1 summary, 2 generated, 3 given by the user).
    pub title: Option<(String, i64)>,
    /// A prompt the user typed (the title, when it is the first and the agent records none).
    pub prompt: Option<String>,
    /// The model that answered.
    pub model: Option<String>,
    /// When the record was written (Unix ms).
    pub at_ms: Option<i64>,
    /// When the session started, where a record says so beside its own time (a document
    /// rewritten whole that keeps its creation time and its last change, no message's).
    pub started_ms: Option<i64>,
    /// The message the record is.
    pub message: Option<Message>,
    /// Drop the session's messages from this id on (Gemini's `$rewindTo`).
    pub rewind_to: Option<String>,
    /// The tokens of the model call the record reports.
    pub usage: Option<Usage>,
}

/// The tokens of one model call, as an agent records them: input not read from a cache,
/// output (thinking included), input read from the cache and written to it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Usage {
    /// The agent's id for the call (its reply's or its request's), which a copy of it (a resume,
    /// a compaction) repeats; `None` when it writes none (the record's place is used).
    pub key: Option<String>,
    /// The model called, when the record names it.
    pub model: Option<String>,
    pub input: i64,
    pub output: i64,
    pub cache_read: i64,
    pub cache_write: i64,
    /// Whether `key` is unique only within its session (a message's number in a thread, a
    /// running total), not among the agent's calls.
    pub in_session: bool,
}

impl Usage {
    /// From an object of token counts, given the names of its fields: input (`input_total`
    /// says whether it counts the cached input too), output, cache read, cache write.
    pub(super) fn of(
        counts: &Map<String, Value>,
        [input, output, read, write]: [&str; 4],
        input_total: bool,
    ) -> Option<Usage> {
        let n = |k: &str| counts.get(k).and_then(Value::as_i64).unwrap_or(0);
        let cache_read = n(read);
        let all_input = counts.get(input).and_then(Value::as_i64)?;
        let input = if input_total {
            all_input - cache_read
        } else {
            all_input
        };
        Some(Usage {
            input: input.max(0),
            output: n(output),
            cache_read,
            cache_write: n(write),
            ..Usage::default()
        })
    }

    pub(super) fn keyed(mut self, key: Option<String>, model: Option<String>) -> Usage {
        self.key = key;
        self.model = model;
        self
    }

    /// Keyed by `key`, unique only within its session.
    pub(super) fn keyed_in_session(self, key: Option<String>, model: Option<String>) -> Usage {
        Usage {
            in_session: true,
            ..self.keyed(key, model)
        }
    }
}

/// One message of a session.
#[derive(Debug, PartialEq)]
pub(crate) struct Message {
    /// The agent's id for it; `None` when the format has none (its place in the file is used).
    pub key: Option<String>,
    /// Who speaks.
    pub role: Role,
    /// What it holds.
    pub parts: Vec<Part>,
    /// A later message with the same key replaces this one (else the first copy stays).
    pub upsert: bool,
    /// Which copy of a prompt this is, for an agent that writes each prompt twice.
    pub copy: Option<PromptCopy>,
}

impl Message {
    /// A message that is no upsert and no prompt copy.
    pub(super) fn new(key: Option<String>, role: Role, parts: Vec<Part>) -> Message {
        Message {
            key,
            role,
            parts,
            upsert: false,
            copy: None,
        }
    }
}

/// One of the two copies Codex writes of each prompt: the `response_item` user message sent
/// to the model, then the `event_msg` of type `user_message` (both persisted since the
/// rollout policy kept `EventMsg::UserMessage`; older rollouts hold the item only, and a
/// session may hold the event only). The index keeps the first copy of a pair: a copy is the
/// twin of the session's latest copy when that one has the same text and is of the other
/// kind, so the same words typed twice stay two prompts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PromptCopy {
    /// Whether this is the event (else the response item).
    pub event: bool,
    /// A hash (XXH3) of the prompt's text.
    pub hash: u64,
}

impl PromptCopy {
    pub(super) fn of(event: bool, parts: &[Part]) -> PromptCopy {
        PromptCopy {
            event,
            hash: xxhash_rust::xxh3::xxh3_64(Part::joined(parts).as_bytes()),
        }
    }

    /// This copy's tag: the start of its message key in the index.
    pub(crate) fn tag(self) -> String {
        self.tag_of(self.event)
    }

    /// The tag its twin (the other copy of the same prompt) has.
    pub(crate) fn twin_tag(self) -> String {
        self.tag_of(!self.event)
    }

    pub(super) fn tag_of(self, event: bool) -> String {
        let kind = if event { "event" } else { "item" };
        format!("prompt:{:016x}:{kind}", self.hash)
    }
}

/// Who speaks in a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
    /// A tool's call or result.
    Tool,
    /// The model's reasoning, in a record of its own.
    Reasoning,
    /// The agent itself (injected context, notices, errors).
    System,
    /// A compaction boundary: what came before was summarised.
    Compact,
    /// A record whose fields are missing or of an unexpected type: shown as its raw JSON.
    Unparsed,
}

impl Role {
    /// Every role.
    pub(crate) const ALL: [Role; 7] = [
        Role::User,
        Role::Assistant,
        Role::Tool,
        Role::Reasoning,
        Role::System,
        Role::Compact,
        Role::Unparsed,
    ];

    /// The role's name, as stored and printed.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Reasoning => "reasoning",
            Role::System => "system",
            Role::Compact => "compact",
            Role::Unparsed => "unparsed",
        }
    }
}

/// One piece of a message.
#[derive(Debug, PartialEq)]
pub(crate) enum Part {
    /// Text a person or the model wrote.
    Text(String),
    /// The model's reasoning, where the agent keeps it.
    Thinking(String),
    /// A tool call: its name and its input, as compact JSON or text.
    ToolCall {
        /// The tool.
        name: String,
        /// Its input.
        input: String,
    },
    /// A tool's output.
    ToolResult(String),
    /// The record itself, when it could not be read as a message.
    Raw(String),
}

impl Part {
    /// The text of the part, as searched.
    pub(crate) fn text(&self) -> String {
        match self {
            Part::Text(t) | Part::Thinking(t) | Part::ToolResult(t) | Part::Raw(t) => t.clone(),
            Part::ToolCall { name, input } => format!("{name} {input}"),
        }
    }

    /// The text of `parts`, as searched, one part a line.
    pub(crate) fn joined(parts: &[Part]) -> String {
        parts.iter().map(Part::text).collect::<Vec<_>>().join("\n")
    }
}

/// The longest string, as written, that the session index reads of a record: the searchable
/// text of a message is cut at 1 MiB anyway, and a record of tens of MiB would otherwise be
/// held a second time, whole, as the parsed value.
pub(crate) const INDEXED_STRING: usize = 1 << 20;

/// The longest prefix of `text` that is at most `max` bytes long and ends on a character
/// boundary: `text` itself when it has `max` bytes or fewer, else `text` cut at byte `max` or,
/// when that falls inside a character, at the start of that character (so at most three bytes
/// short of `max`, and empty when `max` is 0). It never panics.
pub fn prefix_of(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `record` with every JSON string value (not member names) longer than `limit` bytes (as
/// written) cut to its first `limit` bytes or a little fewer (never inside an escape or a
/// UTF-8 sequence); the record itself when it has no such string, or is not a JSON object or
/// array.
pub(crate) fn with_long_strings_cut(record: &[u8], limit: usize) -> Cow<'_, [u8]> {
    if record.len() <= limit {
        return Cow::Borrowed(record);
    }
    let Some(strings) = crate::read::record::strings::strings(record) else {
        return Cow::Borrowed(record);
    };
    let mut long = (strings.iter())
        .filter(|s| !s.is_name && s.raw.len() > limit)
        .peekable();
    if long.peek().is_none() {
        return Cow::Borrowed(record);
    }
    let mut out = Vec::new();
    let mut at = 0;
    for s in long {
        out.extend_from_slice(&record[at..s.raw.start + cut_at(&record[s.raw.clone()], limit)]);
        at = s.raw.end;
    }
    out.extend_from_slice(&record[at..]);
    Cow::Owned(out)
}

/// The last place at or before `limit` where `raw`, a JSON string's contents longer than
/// `limit`, can be cut: between two characters, outside any escape, and not between the two
/// escapes of a surrogate pair (a lone half would make the whole record's surrogates read as
/// U+FFFD).
pub(super) fn cut_at(raw: &[u8], limit: usize) -> usize {
    let mut at = 0;
    loop {
        let step = match raw[at] {
            b'\\' if is_high_surrogate(&raw[at..]) && raw[at + 6..].starts_with(b"\\u") => 12,
            b'\\' if raw.get(at + 1) == Some(&b'u') => 6,
            b'\\' => 2,
            b if b < 0x80 => 1,
            b if b >= 0xf0 => 4,
            b if b >= 0xe0 => 3,
            _ => 2,
        };
        if at + step > limit {
            return at;
        }
        at += step;
    }
}

/// Whether `escape` begins with the `\\u` escape of a UTF-16 high surrogate (D800 to DBFF).
pub(super) fn is_high_surrogate(escape: &[u8]) -> bool {
    escape.len() >= 6
        && escape[1] == b'u'
        && escape[2].eq_ignore_ascii_case(&b'd')
        && matches!(escape[3].to_ascii_lowercase(), b'8' | b'9' | b'a' | b'b')
}

/// What `record`, a record of a `harness` transcript, says. Never fails: a record that is not
/// what its format promises becomes an [`Role::Unparsed`] message holding its raw JSON. A
/// harness no agent has (an archive written by a newer release) is read as the generic agent
/// reads (see [`super::of`]).
pub(crate) fn parse(harness: &str, record: &[u8]) -> Parsed {
    let agent = super::of(harness);
    let Some(value) = parse_value(record, agent.unread) else {
        return unparsed(record);
    };
    let parsed = value.as_object().and_then(agent.parse);
    parsed.unwrap_or_else(|| unparsed(record))
}

/// A record shown as its raw JSON.
pub(super) fn unparsed(record: &[u8]) -> Parsed {
    Parsed {
        message: Some(Message::new(
            None,
            Role::Unparsed,
            vec![Part::Raw(String::from_utf8_lossy(record).into_owned())],
        )),
        ..Parsed::default()
    }
}

pub(super) fn string(obj: &Map<String, Value>, key: &str) -> Option<String> {
    obj.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// `text` cut to a title's length, on one line.
pub(super) fn title_of(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(TITLE_CHARS).collect()
}

/// Milliseconds since the epoch of an RFC 3339 time.
pub(crate) fn time_ms(text: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339_weak(text.trim_end_matches('Z')).ok()?;
    let ms = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis();
    Some(ms as i64)
}

/// The record's `timestamp` (RFC 3339) as Unix ms.
pub(super) fn timestamp_ms(obj: &Map<String, Value>) -> Option<i64> {
    obj.get("timestamp")
        .and_then(Value::as_str)
        .and_then(time_ms)
}

/// A tool input as compact JSON (a string as itself).
pub(super) fn input_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

/// The text of a tool result's content: a string, or text blocks.
pub(super) fn result_text(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => {
            let texts = items.iter().map(|i| match i {
                Value::String(s) => s.clone(),
                Value::Object(o) => (string(o, "text").or_else(|| string(o, "output")))
                    .unwrap_or_else(|| match o.get("type").and_then(Value::as_str) {
                        // An image (base64) or a document is not text to search or show.
                        Some(kind) => format!("[{kind}]"),
                        None => i.to_string(),
                    }),
                other => other.to_string(),
            });
            texts.collect::<Vec<_>>().join("\n")
        }
        Some(Value::Object(o)) => string(o, "output")
            .or_else(|| string(o, "content"))
            .or_else(|| string(o, "text"))
            .unwrap_or_else(|| Value::Object(o.clone()).to_string()),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

/// Content blocks (`text`, `tool_use`, `tool_result`, `thinking`) or a plain string as parts.
pub(super) fn content_parts(content: &Value) -> Option<Vec<Part>> {
    if let Some(text) = content.as_str() {
        return Some(vec![Part::Text(text.to_owned())]);
    }
    let blocks = content.as_array()?;
    let parts = blocks.iter().filter_map(|b| {
        let b = b.as_object()?;
        Some(match b.get("type").and_then(Value::as_str)? {
            "text" | "input_text" | "output_text" => Part::Text(string(b, "text")?),
            "thinking" => Part::Thinking(string(b, "thinking")?),
            "tool_use" => Part::ToolCall {
                name: string(b, "name").unwrap_or_default(),
                input: input_text(b.get("input")),
            },
            // Pi's.
            "toolCall" => Part::ToolCall {
                name: string(b, "name").unwrap_or_default(),
                input: input_text(b.get("arguments")),
            },
            "tool_result" => Part::ToolResult(result_text(b.get("content"))),
            _ => return None,
        })
    });
    Some(parts.collect())
}

/// The role of a message by its parts: one whose parts are all tool calls and results is a
/// tool's, one of thinking only is reasoning (Claude Code writes each content block of a
/// reply as a record of its own: a reply of text and a tool call is one assistant message and
/// one tool message); else `role`.
pub(super) fn role_of(role: Role, parts: &[Part]) -> Role {
    let all = |f: fn(&Part) -> bool| !parts.is_empty() && parts.iter().all(f);
    if all(|p| matches!(p, Part::ToolResult(_) | Part::ToolCall { .. })) {
        Role::Tool
    } else if all(|p| matches!(p, Part::Thinking(_))) {
        Role::Reasoning
    } else {
        role
    }
}

/// The role of a message its agent names with the chat APIs' words (`user`, `assistant`,
/// `tool`; anything else is the agent's own), by its parts as [`role_of`] reads them.
pub(super) fn role_named(name: &str, parts: &[Part]) -> Role {
    match name {
        "user" => role_of(Role::User, parts),
        "assistant" => role_of(Role::Assistant, parts),
        "tool" => Role::Tool,
        _ => Role::System,
    }
}

/// A prompt a person typed: text that is not the agent's own markup (commands, caveats,
/// reminders, interruptions), which starts with `<` or `[`.
pub(super) fn typed_prompt(parts: &[Part]) -> Option<String> {
    let text = parts.iter().find_map(|p| match p {
        Part::Text(t) => Some(t.trim()),
        _ => None,
    })?;
    let text = text
        .strip_prefix("<user_query>")
        .map_or(text, |t| t.trim_end_matches("</user_query>").trim());
    let markup = text.starts_with('<') || text.starts_with('[') || text.starts_with("# AGENTS.md");
    (!text.is_empty() && !markup).then(|| title_of(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    // A role added to `Role` does not compile here until it has its place, and fails until
    // `Role::ALL` (which search weighs each role by) holds it there.
    #[test]
    fn every_role_is_in_all_in_its_place() {
        let place = |role: Role| match role {
            Role::User => 0,
            Role::Assistant => 1,
            Role::Tool => 2,
            Role::Reasoning => 3,
            Role::System => 4,
            Role::Compact => 5,
            Role::Unparsed => 6,
        };
        let places: Vec<usize> = Role::ALL.iter().map(|r| place(*r)).collect();
        assert_eq!(places, (0..7).collect::<Vec<_>>());
    }

    #[test]
    fn long_strings_are_cut_between_characters_and_the_record_stays_json() {
        // Every cut place of a string of escapes and two-, three- and four-byte characters.
        let text = "aé€😀\\\"\u{1}\n".repeat(3);
        let record =
            serde_json::json!({"type": "user", "uuid": "u1", "message": {"content": text}, "n": 1});
        let mut record = serde_json::to_vec(&record).unwrap();
        // An emoji as JavaScript writes it: a surrogate pair of escapes, never cut apart.
        let emoji = (record.windows(4))
            .position(|w| w == "😀".as_bytes())
            .unwrap();
        record.splice(emoji..emoji + 4, br"\ud83d\ude00".iter().copied());
        for limit in 8..60 {
            let cut = with_long_strings_cut(&record, limit);
            let value =
                parse_value(&cut, &[]).unwrap_or_else(|| panic!("{limit}: not JSON: {cut:?}"));
            let kept = value["message"]["content"].as_str().unwrap();
            assert!(text.starts_with(kept), "{limit}: {kept:?}");
            assert!(!kept.contains('\u{fffd}'), "{limit}: {kept:?}");
            assert!(
                serde_json::to_string(kept).unwrap().len() - 2 <= limit,
                "{limit}"
            );
            // What is short is left as it was.
            assert_eq!(
                (value["type"].as_str(), value["uuid"].as_str()),
                (Some("user"), Some("u1"))
            );
            assert_eq!(value["n"], 1);
        }
        assert!(matches!(
            with_long_strings_cut(&record, 1 << 20),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            with_long_strings_cut(b"not json at all, but long", 4),
            Cow::Borrowed(_)
        ));
        // The index reads a huge record's facts, and the first MiB of its text.
        let huge = serde_json::json!({"type": "user", "uuid": "u2", "sessionId": "s9",
            "message": {"role": "user", "content": "x".repeat(3 << 20)}});
        let huge = serde_json::to_vec(&huge).unwrap();
        let cut = with_long_strings_cut(&huge, INDEXED_STRING);
        assert!(cut.len() < INDEXED_STRING + 200, "{}", cut.len());
        let p = parse("claude-code", &cut);
        assert_eq!(p.message.unwrap().key.as_deref(), Some("u2"));
    }

    #[test]
    fn a_codex_token_count_is_a_call_without_its_cached_input_and_one_without_info_none() {
        let limits = br#"{"type":"event_msg","payload":{"type":"token_count","info":null}}"#;
        let p = parse("codex", limits);
        assert_eq!((p.usage, p.message), (None, None));
        let call = br#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"total_tokens":380},"last_token_usage":{"input_tokens":160,"cached_input_tokens":40,"output_tokens":30}}}}"#;
        let usage = parse("codex", call).usage.unwrap();
        assert_eq!((usage.input, usage.cache_read, usage.output), (120, 40, 30));
        assert_eq!(
            (usage.key.as_deref(), usage.in_session),
            (Some("total:380"), true)
        );
        let record = br#"{"type":"session.usage_record","id":"e1","data":{}}"#;
        assert_eq!(parse("copilot-cli", record).message, None);
    }

    #[test]
    fn claude_user_and_assistant_records_are_messages_with_their_session_facts() {
        let user = br#"{"type":"user","uuid":"u1","sessionId":"s1","cwd":"/home/u/app","gitBranch":"main","timestamp":"2026-11-30T10:00:00.000Z","message":{"role":"user","content":"fix the flaky test"}}"#;
        let p = parse("claude-code", user);
        assert_eq!(p.project.as_deref(), Some("/home/u/app"));
        assert_eq!(p.branch.as_deref(), Some("main"));
        assert_eq!(p.prompt.as_deref(), Some("fix the flaky test"));
        assert_eq!(p.at_ms, Some(1_796_032_800_000));
        let m = p.message.unwrap();
        assert_eq!((m.key.as_deref(), m.role), (Some("u1"), Role::User));
        let assistant = br#"{"type":"assistant","uuid":"a1","message":{"model":"claude-opus-4-5","content":[{"type":"thinking","thinking":"hm"},{"type":"tool_use","name":"Bash","input":{"command":"cargo test"}}]}}"#;
        let p = parse("claude-code", assistant);
        assert_eq!(p.model.as_deref(), Some("claude-opus-4-5"));
        let parts = p.message.unwrap().parts;
        assert_eq!(parts[1].text(), r#"Bash {"command":"cargo test"}"#);
    }

    #[test]
    fn claude_command_meta_and_tool_result_lines_are_not_prompts() {
        let lines: [&[u8]; 3] = [
            br#"{"type":"user","message":{"content":"<command-name>/clear</command-name>"}}"#,
            br#"{"type":"user","isMeta":true,"message":{"content":"Caveat: the messages below"}}"#,
            br#"{"type":"user","message":{"content":[{"type":"tool_result","content":"ok"}]}}"#,
        ];
        let roles: Vec<_> = lines
            .iter()
            .map(|l| {
                let p = parse("claude-code", l);
                assert_eq!(p.prompt, None);
                p.message.unwrap().role
            })
            .collect();
        assert_eq!(roles, [Role::User, Role::System, Role::Tool]);
    }

    #[test]
    fn claude_titles_rank_the_users_over_the_generated_over_summaries() {
        let rank = |l: &[u8]| parse("claude-code", l).title.unwrap().1;
        assert_eq!(rank(br#"{"type":"summary","summary":"A"}"#), 1);
        assert_eq!(rank(br#"{"type":"ai-title","aiTitle":"B"}"#), 2);
        assert_eq!(rank(br#"{"type":"custom-title","customTitle":"C"}"#), 3);
        let boundary = br#"{"type":"system","subtype":"compact_boundary","content":"Conversation compacted","uuid":"c1"}"#;
        assert_eq!(
            parse("claude-code", boundary).message.unwrap().role,
            Role::Compact
        );
    }

    #[test]
    fn a_record_with_fields_of_the_wrong_type_is_unparsed_and_kept_raw() {
        let odd = br#"{"type":"user","message":{"content":42}}"#;
        let m = parse("claude-code", odd).message.unwrap();
        assert_eq!(m.role, Role::Unparsed);
        assert_eq!(
            m.parts,
            [Part::Raw(String::from_utf8_lossy(odd).into_owned())]
        );
        assert_eq!(
            parse("codex", b"[1,2]").message.unwrap().role,
            Role::Unparsed
        );
    }

    #[test]
    fn codex_session_meta_names_the_session_and_environment_lines_are_not_prompts() {
        let meta = br#"{"timestamp":"2026-11-30T10:00:00.000Z","type":"session_meta","payload":{"id":"0199-ab","cwd":"/w","git":{"branch":"dev"}}}"#;
        let p = parse("codex", meta);
        assert_eq!(p.session_id.as_deref(), Some("0199-ab"));
        assert_eq!(
            (p.project.as_deref(), p.branch.as_deref()),
            (Some("/w"), Some("dev"))
        );
        let env = br#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}]}}"#;
        assert_eq!(parse("codex", env).message.unwrap().role, Role::System);
        let typed = br#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"add a flag"}]}}"#;
        assert_eq!(parse("codex", typed).prompt.as_deref(), Some("add a flag"));
        let out = br#"{"type":"response_item","payload":{"type":"function_call_output","call_id":"c","output":"exit 0"}}"#;
        let image = br#"{"type":"user","message":{"content":[{"type":"tool_result","content":[{"type":"text","text":"shot"},{"type":"image","source":{"type":"base64","data":"iVBORw0KGgo"}}]}]}}"#;
        let parts = parse("claude-code", image).message.unwrap().parts;
        assert_eq!(
            parts,
            [Part::ToolResult("shot\n[image]".into())],
            "no base64 in the text"
        );
        assert_eq!(
            parse("codex", out).message.unwrap().parts,
            [Part::ToolResult("exit 0".into())]
        );
    }

    #[test]
    fn codex_prompt_events_are_prompts_and_reasoning_without_text_is_no_message() {
        let event = br#"{"type":"event_msg","payload":{"type":"user_message","message":"add a flag","images":[]}}"#;
        let item = br#"{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"add a flag"}]}}"#;
        let (event, item) = (parse("codex", event), parse("codex", item));
        assert_eq!(event.prompt.as_deref(), Some("add a flag"));
        let (event, item) = (event.message.unwrap(), item.message.unwrap());
        assert_eq!((event.role, item.role), (Role::User, Role::User));
        let (event, item) = (event.copy.unwrap(), item.copy.unwrap());
        assert_eq!(
            (event.tag(), item.tag()),
            (item.twin_tag(), event.twin_tag())
        );
        let answer = br#"{"type":"event_msg","payload":{"type":"agent_message","message":"done"}}"#;
        assert_eq!(
            parse("codex", answer).message,
            None,
            "a copy of a response item"
        );
        let hidden = br#"{"type":"response_item","payload":{"type":"reasoning","summary":[],"content":null,"encrypted_content":"gAAA"}}"#;
        assert_eq!(parse("codex", hidden).message, None);
        let raw = br#"{"type":"response_item","payload":{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"check the bound"}]}}"#;
        let m = parse("codex", raw).message.unwrap();
        assert_eq!(
            (m.role, m.parts),
            (
                Role::Reasoning,
                vec![Part::Thinking("check the bound".into())]
            )
        );
        let call = br#"{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{}","call_id":"c"}}"#;
        assert_eq!(parse("codex", call).message.unwrap().role, Role::Tool);
    }

    #[test]
    fn gemini_metadata_set_rewind_and_messages() {
        let meta =
            br#"{"sessionId":"g1","projectHash":"ab","startTime":"2026-11-30T10:00:00.000Z"}"#;
        assert_eq!(parse("gemini-cli", meta).session_id.as_deref(), Some("g1"));
        let set = br#"{"$set":{"summary":"Listing files"}}"#;
        assert_eq!(
            parse("gemini-cli", set).title,
            Some(("Listing files".into(), 1))
        );
        assert_eq!(
            parse("gemini-cli", br#"{"$rewindTo":"m2"}"#)
                .rewind_to
                .as_deref(),
            Some("m2")
        );
        let msg = br#"{"id":"m2","type":"gemini","content":"done","model":"gemini-2.5-pro","toolCalls":[{"name":"ls","args":{"path":"."},"result":[{"functionResponse":{"response":{"output":"a.txt"}}}]}]}"#;
        let m = parse("gemini-cli", msg).message.unwrap();
        assert!(m.upsert);
        assert_eq!(m.parts.last(), Some(&Part::ToolResult("a.txt".into())));
    }

    #[test]
    fn other_watchers_records_are_their_strings_without_data() {
        let blob = "QUJD".repeat(300);
        let line = format!(r#"{{"role":"user","text":"hello there","image":"{blob}","n":3}}"#);
        let m = parse("generic", line.as_bytes()).message.unwrap();
        assert_eq!(
            (m.role, m.parts),
            (Role::User, vec![Part::Text("user hello there".into())])
        );
    }

    #[test]
    fn cursor_lines_have_roles_and_blocks_but_no_keys() {
        let user = br#"{"role":"user","message":{"content":[{"type":"text","text":"<user_query>\nfix the build\n</user_query>"}]}}"#;
        let p = parse("cursor", user);
        assert_eq!(p.prompt.as_deref(), Some("fix the build"));
        assert_eq!(p.message.unwrap().key, None);
    }
}
