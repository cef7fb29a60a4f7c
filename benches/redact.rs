//! Redaction over the side-by-side corpus: throughput on one core beside the scans it is
//! built from, false positives (the corpus holds no secrets by construction, so every change
//! is one), and recall on a planted set (every rule's example, planted in realistic records).
//!
//! `cargo bench --bench redact` reads every line of the corpus into memory (`REDACT_CORPUS`,
//! default `target/bench/corpus/transcripts-1000f-1073741824b`, made by `cargo bench --bench
//! compare`), then times each pass over all lines on this thread, best of `REDACT_ROUNDS`
//! (default 3). Nothing is read from disk while timing.

use testkit::corpus_lines::{Corpus, best_of};
use transcript_sync::Redactor;

const RULES: &str = include_str!("../src/consumers/redact/rules.toml");

/// One pass over a line: what it counts there.
type Pass<'a> = &'a dyn Fn(&[u8]) -> usize;

fn main() {
    let corpus = Corpus::load("REDACT");
    let (lines, bytes) = corpus.lines();
    let rounds = corpus.rounds;
    let redactor = Redactor::builtin();
    throughput(&redactor, &lines, bytes, rounds);
    false_positives(&redactor, &lines);
    recall(&redactor);
}

fn throughput(redactor: &Redactor, lines: &[&[u8]], bytes: usize, rounds: usize) {
    let literal = memchr::memmem::Finder::new(b"\"type\"");
    #[derive(serde::Deserialize)]
    struct File {
        rule: Vec<transcript_sync::RuleDef>,
    }
    let file: File = toml::from_str(RULES).expect("rules.toml parses");
    let words: Vec<String> = file.rule.iter().flat_map(|r| r.keywords.clone()).collect();
    let ac = aho_corasick::AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(&words)
        .unwrap();
    let passes: [(&str, Pass); 4] = [
        ("keywords alone (aho-corasick, any case)", &|l| {
            ac.find_overlapping_iter(l).count()
        }),
        ("memmem (one literal, a floor)", &|l| {
            literal.find_iter(l).count()
        }),
        ("serde_json validation (the archive's slow path)", &|l| {
            serde_json::from_slice::<serde::de::IgnoredAny>(l).is_ok() as usize
        }),
        ("redact_record", &|l| {
            matches!(redactor.redact_record(l), std::borrow::Cow::Owned(_)) as usize
        }),
    ];
    println!("\n| pass, one thread | best of {rounds} | MB/s | lines counted |");
    println!("|---|---:|---:|---:|");
    for (name, pass) in passes {
        let (secs, n) = best_of(rounds, || lines.iter().map(|l| pass(l)).sum());
        let rate = bytes as f64 / secs / 1e6;
        println!("| {name} | {secs:.3} s | {rate:.0} | {n} |");
    }
}

fn false_positives(redactor: &Redactor, lines: &[&[u8]]) {
    let mut changed = 0;
    let mut by_rule = std::collections::BTreeMap::<String, usize>::new();
    for line in lines {
        let found = redactor.findings(line);
        if !found.is_empty() {
            changed += 1;
            if changed <= 20 {
                for f in &found {
                    let at = f.offset.saturating_sub(40);
                    let end = (f.offset + 60).min(line.len());
                    println!(
                        "  false positive {}: …{}…",
                        f.rule,
                        String::from_utf8_lossy(&line[at..end])
                    );
                }
            }
        }
        for f in found {
            *by_rule.entry(f.rule).or_default() += 1;
        }
    }
    println!(
        "\nfalse positives: {changed} of {} records ({:.2} per 100,000); by rule: {by_rule:?}",
        lines.len(),
        changed as f64 * 1e5 / lines.len() as f64
    );
}

/// Every rule's example planted five ways; each must come out without the secret, as JSON.
fn recall(redactor: &Redactor) {
    #[derive(serde::Deserialize)]
    struct File {
        rule: Vec<transcript_sync::RuleDef>,
    }
    let file: File = toml::from_str(RULES).expect("rules.toml parses");
    let (mut planted, mut found) = (0, 0);
    for def in &file.rule {
        let example = def.example.clone().expect("every rule has an example");
        let redacted = redactor.redact_text(&example);
        let differs = (example.bytes().zip(redacted.bytes())).position(|(a, b)| a != b);
        let Some(secret) = differs.map(|at| secret_prefix(&example[at..])) else {
            println!("  rule {}: its example is not found as text", def.id);
            planted += 1;
            continue;
        };
        for record in plantings(&example) {
            planted += 1;
            let line = serde_json::to_vec(&record).expect("a record serializes");
            let out = redactor.redact_record(&line);
            let valid = serde_json::from_slice::<serde_json::Value>(&out).is_ok();
            if valid && memchr::memmem::find(&out, secret.as_bytes()).is_none() {
                found += 1;
            } else {
                println!(
                    "  missed: rule {} in {}",
                    def.id,
                    String::from_utf8_lossy(&line)
                );
            }
        }
    }
    println!(
        "\nrecall: {found} of {planted} planted secrets redacted ({:.1} %)",
        found as f64 * 100.0 / planted as f64
    );
}

/// The start of a secret found as text: enough of it to tell whether it survived.
fn secret_prefix(from_offset: &str) -> String {
    from_offset.chars().take(24).collect()
}

fn plantings(example: &str) -> Vec<serde_json::Value> {
    use serde_json::json;
    vec![
        json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": format!("$ cat .env\n{example}\n")}]}}),
        json!({"type": "user", "message": {"role": "user", "content": format!("use this: {example}")}}),
        json!({"type": "response_item", "payload": {"type": "function_call_output",
            "output": serde_json::to_string(&json!({"output": format!("{example}\n"), "exit_code": 0})).unwrap()}}),
        json!({"type": "assistant", "message": {"content": [{"type": "text",
            "text": format!("first line\n{example}\nlast line")}]}}),
        json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Bash",
            "input": {"command": format!("echo '{example}' > /tmp/x")}}]}}),
    ]
}
