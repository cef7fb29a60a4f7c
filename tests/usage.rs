//! `usage`: the tokens the real agents recorded (the fixtures of `tests/fixtures/agents/`,
//! recorded against the scripted model, whose every answer reports 120 input tokens not read
//! from the cache, 30 output, 40 read from the cache and, where the API has the field, 10
//! written to it), counted once per call, priced, filtered by time.

use crate::util::{Env, copy_agent_fixture, stdout_of};
use serde_json::Value;
use std::fs;

/// The agents that record usage per call, by watcher, and the calls, input, output, cache
/// reads and cache writes of their fixtures, by hand: two calls each, as the scripted model
/// reported them (cache writes where the API has them: Anthropic's). Cline's are its two
/// releases' (its CLI 3 on OpenAI's API; its CLI 2 on Anthropic's, whose output it counts one
/// token more).
const AGENTS: [(&str, [i64; 5]); 14] = [
    ("amp", [2, 240, 60, 80, 20]),
    ("claude-code", [2, 240, 60, 80, 20]),
    ("cline", [4, 480, 122, 160, 20]),
    ("code-puppy", [2, 240, 60, 80, 0]),
    ("codex", [2, 240, 60, 80, 0]),
    ("copilot-cli", [2, 240, 60, 80, 0]),
    ("gemini-cli", [2, 240, 60, 80, 0]),
    ("gptme", [2, 240, 60, 80, 0]),
    ("kimi-cli", [2, 240, 60, 80, 0]),
    ("llm", [2, 240, 60, 80, 0]),
    ("mini-swe-agent", [2, 240, 60, 80, 0]),
    ("opencode", [2, 240, 60, 80, 0]),
    ("pi", [2, 240, 60, 80, 0]),
    ("qwen-code", [2, 240, 60, 80, 0]),
];

/// Every agent's fixture under one HOME (Cline's two releases).
fn with_agents(env: &Env) {
    let home = env.dir.path().join("home");
    for (agent, _) in AGENTS {
        copy_agent_fixture(agent, &home);
    }
    copy_agent_fixture("cline-tasks", &home);
}

fn rows(env: &Env, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["usage", "--json"];
    all.extend(args);
    let out = stdout_of(env, &all);
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn tokens(row: &Value) -> [i64; 5] {
    ["calls", "input", "output", "cache_read", "cache_write"].map(|k| row[k].as_i64().unwrap())
}

/// Each agent's two calls (the reply with its tool call, the final answer), as the scripted
/// model reported them, by hand: once each, whatever the agent's own fields and whether its
/// input counts the cached input.
#[test]
fn each_agents_calls_are_counted_once_as_the_model_reported_them() {
    let env = Env::new();
    with_agents(&env);
    env.run_once_home();
    let by_agent = rows(&env, &["--by", "agent"]);
    let (total, rows) = by_agent.split_last().unwrap();
    let agents: Vec<&str> = rows.iter().map(|r| r["of"].as_str().unwrap()).collect();
    assert_eq!(agents, AGENTS.map(|(a, _)| a));
    for ((agent, counted), row) in AGENTS.iter().zip(rows) {
        assert_eq!(tokens(row), *counted, "{agent}: {row}");
    }
    assert_eq!(total["of"], Value::Null);
    let sum = (AGENTS.iter()).fold([0; 5], |sum, (_, counted)| {
        std::array::from_fn(|i| sum[i] + counted[i])
    });
    assert_eq!(tokens(total), sum);
    // The total lists its fields in the rows' order.
    let out = stdout_of(&env, &["usage", "--json", "--by", "agent"]);
    let keys = |line: &str| -> Vec<String> {
        let priced = line.split(",\"unpriced\"").next().unwrap();
        let fields = priced.split(",\"").map(|f| f.trim_start_matches("{\""));
        fields
            .map(|f| f.split('"').next().unwrap().to_owned())
            .collect()
    };
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(keys(lines[lines.len() - 1]), keys(lines[0]), "{out}");
}

/// A resumed Claude Code session copies the earlier records into a file of its own: the calls
/// they report are counted once, in the session they were made in.
#[test]
fn a_call_copied_into_a_resumed_session_is_counted_once() {
    let env = Env::new();
    let home = env.dir.path().join("home");
    copy_agent_fixture("claude-code", &home);
    let project = fs::read_dir(home.join(".claude/projects"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let original = (fs::read_dir(&project).unwrap())
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    let old = original.file_stem().unwrap().to_string_lossy().into_owned();
    let new = "0f5e3c2a-1b2c-4d5e-8f90-123456789abc";
    let copied = fs::read_to_string(&original).unwrap().replace(&old, new);
    fs::write(project.join(format!("{new}.jsonl")), copied).unwrap();
    env.run_once_home();
    let sessions = stdout_of(&env, &["sessions", "--json"]);
    assert_eq!(sessions.lines().count(), 2, "{sessions}");
    let by_session = rows(&env, &["--by", "session"]);
    let (total, rows) = by_session.split_last().unwrap();
    assert_eq!(tokens(total), [2, 240, 60, 80, 20], "{by_session:?}");
    assert_eq!(rows.len(), 1, "one session made the calls: {by_session:?}");
}

/// config.toml prices a model the price file does not know; its calls cost what the tokens
/// of each kind cost, and a model with no price has none (never a made-up one). A time range
/// holds the calls made in it.
#[test]
fn a_configured_price_costs_each_kind_of_token_and_an_unpriced_model_costs_nothing() {
    let env = Env::new();
    with_agents(&env);
    env.write_config(
        "[prices.\"scripted-model\"]\ninput = 1.0\noutput = 2.0\ncache_read = 0.5\ncache_write = 4.0\n",
    );
    env.run_once_home();
    let by_agent = rows(&env, &["--by", "agent", "--harness", "codex"]);
    // 240 × 1 + 60 × 2 + 80 × 0.5 per million.
    let cost = by_agent[0]["cost"].as_f64().unwrap();
    assert!((cost - 400e-6).abs() < 1e-12, "{cost}");
    assert!(by_agent[0].get("unpriced").is_none(), "{by_agent:?}");
    let gptme = rows(&env, &["--by", "model", "--harness", "gptme"]);
    assert_eq!(gptme[0]["of"], "local/scripted-model");
    assert_eq!(gptme[0]["cost"], Value::Null);
    assert_eq!(
        gptme[0]["unpriced"],
        serde_json::json!(["local/scripted-model"])
    );
    // The fixtures were recorded on 2026-12-03 (UTC).
    let before = rows(&env, &["--until", "2026-12-03"]);
    assert_eq!(tokens(&before[0]), [0, 0, 0, 0, 0], "{before:?}");
    let day = rows(&env, &["--since", "2026-12-03", "--until", "2026-12-04"]);
    assert_eq!(day[0]["of"], "2026-12-03");
    assert_eq!(tokens(day.last().unwrap())[0], 22);
}

/// On a terminal, as a person reads it: a row per agent under a heading, the numbers in
/// columns with their thousands apart, the total, and the models with no price named.
#[test]
fn the_table_reads_on_a_terminal() {
    let env = Env::new();
    with_agents(&env);
    env.run_once_home();
    let command = format!(
        "{} usage --by agent --db {}",
        crate::util::BIN,
        env.db.display()
    );
    let screen = crate::util::on_a_terminal(&env, &command);
    let lines: Vec<&str> = screen.lines().collect();
    let heading: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        heading,
        [
            "AGENT", "CALLS", "INPUT", "OUTPUT", "CACHE", "READ", "CACHE", "WRITE", "COST"
        ],
        "{screen}"
    );
    let amp: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        amp,
        ["amp", "2", "240", "60", "80", "20", "$0.00"],
        "{screen}"
    );
    let at = lines.iter().position(|l| l.starts_with("TOTAL")).unwrap();
    let total: Vec<&str> = lines[at].split_whitespace().collect();
    assert_eq!(
        total[..6],
        ["TOTAL", "30", "3,600", "902", "1,200", "60"],
        "{screen}"
    );
    assert!(
        total[6].starts_with('$') && total[6].ends_with('*'),
        "{screen}"
    );
    assert!(
        lines[at + 1].starts_with("* has calls of models with no price ("),
        "{screen}"
    );
    // The columns line up: each number ends where its heading does.
    let end = |line: &str, word: &str| line.find(word).unwrap() + word.len();
    assert_eq!(end(lines[0], "INPUT"), end(lines[at], "3,600"), "{screen}");
}
