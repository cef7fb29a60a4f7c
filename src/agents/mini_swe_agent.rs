//! mini-swe-agent's trajectories (`*.traj.json`, rewritten whole after each step, taken apart
//! by the snapshot reader): the run around its messages (`info`: the run's configuration, its
//! version, exit status and submission) and its messages, the chat as the model is sent it
//! (`{role, content, tool_calls}`), each with the agent's own `extra`: a reply's `response`
//! (with its `usage`) and `timestamp` (Unix seconds), a tool's `raw_output` and `timestamp`, a
//! format error's `interrupt_type`. The last message, of role `exit`, holds how the run ended.
//!
//! The task is given inside the configuration's instance template ("Please solve this issue:
//! {{task}}" by default); the working directory is recorded only when the configuration sets
//! one (`environment.cwd`).

use super::Agent;
use super::message::*;
use super::restore::{Restore, no_resume};
use super::session::Identified;
use crate::capture::harness::Formats;
use serde_json::{Map, Value};
use std::path::Path;

/// mini-swe-agent (its trajectories, rewritten whole).
pub(crate) static AGENT: Agent = Agent {
    name: "mini-swe-agent",
    watcher: include_str!("../../watchers/mini-swe-agent.toml"),
    formats: Formats::NONE,
    parse: mini,
    unread: &[],
    identify,
    // It starts every run afresh: no command takes a trajectory back.
    restore: Restore::keeping_layout(no_resume),
    doctor: None,
};

/// A run is its file: `last_mini_run.traj.json`, `<instance>.traj.json`, named without
/// `.traj.json`.
fn identify(path: &Path, first: &Parsed) -> Identified {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let run = name.as_deref().and_then(|n| n.strip_suffix(".traj.json"));
    match run {
        Some(run) => Identified {
            session: run.to_owned(),
            ..Identified::by_stem(path, first)
        },
        None => Identified::by_stem(path, first),
    }
}

/// The document around the messages, or one message.
pub(super) fn mini(obj: &Map<String, Value>) -> Option<Parsed> {
    if obj.contains_key("info") && obj.contains_key("messages") {
        return Some(run(obj));
    }
    let extra = obj.get("extra").and_then(Value::as_object);
    let mut parsed = Parsed {
        at_ms: (extra.and_then(|e| e.get("timestamp")?.as_f64())).map(|s| (s * 1000.0) as i64),
        ..Parsed::default()
    };
    let content = obj.get("content").unwrap_or(&Value::Null);
    let mut parts = content_parts(content).unwrap_or_default();
    let role = match string(obj, "role")?.as_str() {
        // A format error is the agent's own word to the model, in a user's message.
        "user" if extra.is_some_and(|e| e.contains_key("interrupt_type")) => Role::System,
        "user" => {
            parsed.prompt = task_of(&Part::joined(&parts)).or_else(|| typed_prompt(&parts));
            Role::User
        }
        "assistant" => {
            parts.extend(tool_calls(obj));
            let response = extra.and_then(|e| e.get("response"));
            parsed.model = response.and_then(|r| Some(r.get("model")?.as_str()?.to_owned()));
            parsed.usage = response.and_then(|r| usage(r, parsed.model.clone()));
            role_of(Role::Assistant, &parts)
        }
        "tool" => {
            let raw = extra.and_then(|e| string(e, "raw_output"));
            parts = vec![Part::ToolResult(
                raw.unwrap_or_else(|| result_text(Some(content))),
            )];
            Role::Tool
        }
        "exit" => {
            let status = extra.and_then(|e| string(e, "exit_status"));
            parts.retain(|p| !p.text().is_empty());
            parts.splice(0..0, status.map(|s| Part::Text(format!("exit: {s}"))));
            Role::System
        }
        _ => Role::System,
    };
    parsed.message = Some(Message::new(None, role, parts));
    Some(parsed)
}

/// The run: the model it was configured with, and the working directory its configuration
/// gives the local environment, where it gives one.
fn run(obj: &Map<String, Value>) -> Parsed {
    let config = obj.get("info").and_then(|i| i.get("config"));
    let at = |pointer: &str| {
        let text = config.and_then(|c| c.pointer(pointer)?.as_str());
        text.filter(|t| !t.is_empty()).map(str::to_owned)
    };
    let local = at("/environment_type").is_some_and(|t| t.ends_with(".LocalEnvironment"));
    Parsed {
        model: at("/model/model_name"),
        project: at("/environment/cwd").filter(|_| local),
        ..Parsed::default()
    }
}

/// The task inside the instance templates mini-swe-agent ships: "Please solve this issue:
/// {{task}}" followed by a blank line (`mini`'s), or a PR description (its SWE-bench runs').
fn task_of(text: &str) -> Option<String> {
    let task = if let Some(rest) = text.strip_prefix("Please solve this issue: ") {
        rest.split("\n\n").next()
    } else {
        let rest = text
            .split_once("Consider the following PR description:\n")?
            .1;
        rest.split("\n</pr_description>").next()
    };
    task.map(str::trim).filter(|t| !t.is_empty()).map(title_of)
}

/// A reply's tool calls (`tool_calls[].function`).
fn tool_calls(obj: &Map<String, Value>) -> Vec<Part> {
    let calls = obj.get("tool_calls").and_then(Value::as_array);
    let functions = calls
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("function"));
    (functions.filter_map(Value::as_object))
        .map(|f| Part::ToolCall {
            name: string(f, "name").unwrap_or_default(),
            input: input_text(f.get("arguments")),
        })
        .collect()
}

/// The tokens of a reply's model call, as LiteLLM returned them (OpenAI's counts: the prompt's
/// include the cached), keyed by the response's id.
fn usage(response: &Value, model: Option<String>) -> Option<Usage> {
    let counts = response.get("usage")?;
    let n = |pointer: &str| counts.pointer(pointer).and_then(Value::as_i64).unwrap_or(0);
    let cache_read = n("/prompt_tokens_details/cached_tokens");
    let key = response
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let usage = Usage {
        input: (counts.get("prompt_tokens")?.as_i64()? - cache_read).max(0),
        output: n("/completion_tokens"),
        cache_read,
        cache_write: n("/cache_creation_input_tokens"),
        ..Usage::default()
    };
    Some(usage.keyed(key, model))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(json: &str) -> Parsed {
        let value: Value = serde_json::from_str(json).unwrap();
        mini(value.as_object().unwrap()).unwrap()
    }

    #[test]
    fn a_run_is_named_by_its_file_without_traj_json() {
        let id = |path: &str| identify(Path::new(path), &Parsed::default()).session;
        let default = "/h/.config/mini-swe-agent/last_mini_run.traj.json";
        assert_eq!(id(default), "last_mini_run");
        assert_eq!(id("/runs/django-1/django-1.traj.json"), "django-1");
    }

    #[test]
    fn the_task_is_read_out_of_the_instance_templates_it_ships() {
        let mini = "Please solve this issue: Fix the parser.\n\nYou can execute bash commands";
        assert_eq!(task_of(mini).as_deref(), Some("Fix the parser."));
        let swebench = "<pr_description>\nConsider the following PR description:\nA bug.\n\
                        It crashes.\n</pr_description>\n\n<instructions>";
        assert_eq!(task_of(swebench).as_deref(), Some("A bug. It crashes."));
        assert_eq!(task_of("Fix it"), None);
        let user = parsed(r#"{"role": "user", "content": "Fix it, please."}"#);
        assert_eq!(user.prompt.as_deref(), Some("Fix it, please."));
    }

    #[test]
    fn a_format_error_is_the_agents_word_not_a_prompt() {
        let error = parsed(
            r#"{"role": "user", "content": "Tool call error: no tool calls.",
                "extra": {"interrupt_type": "FormatError"}}"#,
        );
        assert_eq!(error.message.unwrap().role, Role::System);
        assert_eq!(error.prompt, None);
    }

    #[test]
    fn a_reply_holds_its_tool_calls_and_its_calls_tokens() {
        let reply = parsed(
            r#"{"role": "assistant", "content": "I will look.", "tool_calls": [{"function":
                {"name": "bash", "arguments": "{\"command\": \"ls\"}"}, "id": "c1"}],
                "extra": {"timestamp": 1796440696.5, "response": {"id": "r1", "model": "m",
                "usage": {"prompt_tokens": 160, "completion_tokens": 30,
                "prompt_tokens_details": {"cached_tokens": 40}}}}}"#,
        );
        assert_eq!(reply.at_ms, Some(1_796_440_696_500));
        let message = reply.message.unwrap();
        assert_eq!(message.role, Role::Assistant);
        assert_eq!(
            message.parts[1],
            Part::ToolCall {
                name: "bash".into(),
                input: r#"{"command": "ls"}"#.into()
            }
        );
        let usage = reply.usage.unwrap();
        let counted = (
            usage.input,
            usage.output,
            usage.cache_read,
            usage.key.as_deref(),
        );
        assert_eq!(counted, (120, 30, 40, Some("r1")));
    }

    #[test]
    fn a_tool_result_is_its_raw_output_and_the_run_names_a_configured_directory() {
        let result = parsed(
            r#"{"role": "tool", "content": "{\"returncode\": 0}", "tool_call_id": "c1",
                "extra": {"raw_output": "out\n", "returncode": 0}}"#,
        );
        let parts = result.message.unwrap().parts;
        assert_eq!(parts, [Part::ToolResult("out\n".into())]);
        let run = |cwd: &str, kind: &str| {
            let doc = format!(
                r#"{{"info": {{"config": {{"model": {{"model_name": "openai/m"}},
                    "environment": {{"cwd": "{cwd}"}}, "environment_type": "{kind}"}}}},
                    "messages": []}}"#
            );
            let parsed = parsed(&doc);
            (parsed.project, parsed.model)
        };
        let local = "minisweagent.environments.local.LocalEnvironment";
        let model = Some("openai/m".to_owned());
        assert_eq!(run("/p", local), (Some("/p".into()), model.clone()));
        assert_eq!(run("", local), (None, model.clone()));
        let docker = "minisweagent.environments.docker.DockerEnvironment";
        assert_eq!(run("/testbed", docker), (None, model));
    }
}
