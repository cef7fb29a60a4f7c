use super::*;
use serde_json::Value;

fn file() -> RuleFile {
    toml::from_str(RULES).expect("rules.toml parses")
}

/// The secret each built-in example holds: what the rule replaces in it.
fn secret_of(r: &Redactor, def: &RuleDef) -> String {
    let example = def.example.as_deref().expect("every rule has an example");
    let hits = r.text_hits(example);
    let hit = (hits.iter())
        .find(|h| r.rules[h.rule].id == def.id)
        .unwrap_or_else(|| panic!("rule {} finds nothing in its example", def.id));
    example[hit.range.clone()].to_owned()
}

/// Pins the data file's form: every rule can be told apart and checked by its examples.
#[test]
fn the_rules_file_is_well_formed() {
    let file = file();
    let mut ids = HashSet::new();
    for def in &file.rule {
        assert!(ids.insert(def.id.clone()), "two rules are named {}", def.id);
        assert!(!def.description.is_empty(), "{} has no description", def.id);
        assert!(!def.keywords.is_empty(), "{} has no keywords", def.id);
        for k in &def.keywords {
            assert_eq!(
                *k,
                k.to_ascii_lowercase(),
                "{}: keywords are lowercase",
                def.id
            );
        }
        assert!(
            def.example.is_some() && def.not_example.is_some(),
            "{}",
            def.id
        );
    }
    assert!(file.skip.iter().all(|s| !s.why.is_empty()));
}

#[test]
fn every_rule_finds_its_example_and_nothing_in_its_counter_example() {
    let r = Redactor::builtin();
    for def in file().rule {
        let secret = secret_of(&r, &def);
        let redacted = r.redact_text(def.example.as_deref().unwrap());
        assert!(!redacted.contains(&secret), "{}: {redacted}", def.id);
        assert!(
            redacted.contains(&format!("[REDACTED:{}]", def.id)),
            "{redacted}"
        );
        let not = def.not_example.as_deref().unwrap();
        assert!(
            r.text_hits(not)
                .iter()
                .all(|h| r.rules[h.rule].id != def.id),
            "{} finds a secret in {not:?}",
            def.id
        );
    }
}

/// Each rule's secret planted in realistic records: a tool result, a prompt, a string with
/// escapes (after a `\n`, inside quotes), and a `.env` file read by a tool, as JSON text
/// inside JSON. Every one comes out redacted, valid, of the same shape.
#[test]
fn every_rules_secret_is_redacted_wherever_a_record_holds_it() {
    let r = Redactor::builtin();
    for def in file().rule {
        let example = def.example.clone().unwrap();
        let secret = secret_of(&r, &def);
        let records = [
            serde_json::json!({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": example}]}}),
            serde_json::json!({"type": "user", "message": {"role": "user",
                "content": format!("please use this: {example} thanks")}}),
            serde_json::json!({"payload": {"output": format!("line one\n{example}\n\"quoted\"\tend")}}),
            serde_json::json!({"content": serde_json::to_string(
                &serde_json::json!({"file": format!("# .env\n{example}\n")})).unwrap()}),
        ];
        for record in records {
            let line = serde_json::to_vec(&record).unwrap();
            let out = r.redact_record(&line);
            let text = String::from_utf8(out.to_vec()).unwrap();
            assert!(!text.contains(&secret), "{}: {text}", def.id);
            let back: Value = serde_json::from_slice(&out).expect("still JSON");
            assert_eq!(shape(&back), shape(&record), "{}", def.id);
            assert!(text.contains("[REDACTED:"), "{text}");
        }
    }
}

/// The record with every string emptied: what redaction must keep.
fn shape(v: &Value) -> Value {
    match v {
        Value::String(_) => Value::String(String::new()),
        Value::Array(a) => Value::Array(a.iter().map(shape).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), shape(v))).collect()),
        other => other.clone(),
    }
}

#[test]
fn an_escape_inside_a_secret_hides_nothing() {
    let r = Redactor::builtin();
    let line = br#"{"text":"id \u0041KIAJPJOMKEFOIUC5LGT and https:\/\/u:xGXEPB%QcHGWAJfTr5Cd@h.example\/x"}"#;
    let out = String::from_utf8(r.redact_record(line).into_owned()).unwrap();
    assert_eq!(
        out,
        r#"{"text":"id [REDACTED:aws-access-key-id] and https://u:[REDACTED:url-password]@h.example/x"}"#
    );
}

/// A lone surrogate escape (JavaScript's string cut inside an emoji, which the archive keeps)
/// hides nothing in its string, nor does an escape in a member's name.
#[test]
fn a_lone_surrogate_or_an_escaped_name_hides_nothing() {
    let r = Redactor::builtin();
    let line = br#"{"out":"GITHUB_TOKEN=ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz\nLANG=en \ud83d","api\u005fkey":"xGXEPB%QcHGWAJfTr5Cd9"}"#;
    let out = String::from_utf8(r.redact_record(line).into_owned()).unwrap();
    assert_eq!(
        out,
        r#"{"out":"GITHUB_TOKEN=[REDACTED:github-token]\nLANG=en �","api\u005fkey":"[REDACTED:generic-secret]"}"#
    );
}

#[test]
fn a_record_without_secrets_is_left_byte_for_byte() {
    let r = Redactor::builtin();
    let line = br#"{"type":"assistant","message":{"usage":{"input_tokens":12},"content":[{"type":"text","text":"The token count is 12; set password = os.environ[\"PW\"]."}]},"uuid":"3f1c2a9e-8d7b-4c1e-9a2f-5b6d7e8f9a0b"}"#;
    assert!(matches!(r.redact_record(line), Cow::Borrowed(_)));
    assert!(r.findings(line).is_empty());
}

#[test]
fn only_the_secret_is_replaced_and_the_rest_of_the_line_is_untouched() {
    let r = Redactor::builtin();
    let line = br#"{"n": 1.50e3, "a" : [ "x\u00e9" ], "t": "export GH_TOKEN=ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz; echo ok"}"#;
    let out = String::from_utf8(r.redact_record(line).into_owned()).unwrap();
    assert_eq!(
        out,
        r#"{"n": 1.50e3, "a" : [ "x\u00e9" ], "t": "export GH_TOKEN=[REDACTED:github-token]; echo ok"}"#
    );
}

#[test]
fn a_member_named_for_a_secret_has_a_random_value_redacted_and_a_name_kept() {
    let r = Redactor::builtin();
    let line = br#"{"api_key":"Zq8mW2xR7vN4pL9sK3tY","password":"process.env.DB_PASSWORD","token":"short","input_tokens":"12"}"#;
    let out = String::from_utf8(r.redact_record(line).into_owned()).unwrap();
    assert_eq!(
        out,
        r#"{"api_key":"[REDACTED:generic-secret]","password":"process.env.DB_PASSWORD","token":"short","input_tokens":"12"}"#
    );
}

#[test]
fn opaque_members_are_skipped_by_rule_and_other_members_are_not() {
    let r = Redactor::builtin();
    let key = "AKIAJPJOMKEFOIUC5LGT";
    let skipped = format!(
        r#"{{"type":"thinking","signature":"x {key} y","source":{{"type":"base64","data":"iVBOR{key}w0KGgo="}}}}"#
    );
    assert!(matches!(
        r.redact_record(skipped.as_bytes()),
        Cow::Borrowed(_)
    ));
    let searched = format!(r#"{{"data":"not base64: {key}"}}"#);
    assert!(!String::from_utf8_lossy(&r.redact_record(searched.as_bytes())).contains(key));
}

#[test]
fn text_that_is_not_json_is_redacted_as_text() {
    let r = Redactor::builtin();
    let out = r.redact_record(b"export STRIPE=sk_live_XQTDAoQNCvMKjjzvHFb5ssSc # not json");
    assert_eq!(&*out, b"export STRIPE=[REDACTED:stripe-key] # not json");
}

#[test]
fn findings_give_the_offset_and_a_preview_never_the_value() {
    let r = Redactor::builtin();
    let line = br#"{"a":"x ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz","b":"\"q\" 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"}"#;
    let found = r.findings(line);
    assert_eq!(
        found,
        vec![
            Finding {
                rule: "github-token".into(),
                offset: 8,
                preview: "ghp_****…".into()
            },
            Finding {
                rule: "huggingface-token".into(),
                offset: 55,
                preview: "hf_W****…".into()
            },
        ]
    );
    assert_eq!(&line[8..12], b"ghp_");
    assert_eq!(preview("abcdefgh"), "ab****…");
}

#[test]
fn a_users_rule_and_allowlist_apply_and_are_checked() {
    let settings = RedactSettings {
        rule: vec![RuleDef {
            id: "acme-token".into(),
            keywords: vec!["acme_".into()],
            pattern: r"\bacme_[a-z0-9]{16}\b".into(),
            example: Some("acme_0123456789abcdef".into()),
            ..RuleDef::default()
        }],
        allow: vec!["^ghp_0{36}$".into()],
        allow_sha256: vec![hex(&sha256(b"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"))],
    };
    let r = Redactor::new(&settings).unwrap();
    let text = format!(
        "acme_0123456789abcdef ghp_{} 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 ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz",
        "0".repeat(36)
    );
    assert_eq!(
        r.redact_text(&text),
        format!(
            "[REDACTED:acme-token] ghp_{} 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 [REDACTED:github-token]",
            "0".repeat(36)
        )
    );
    let refuse = |def: RuleDef| {
        Redactor::new(&RedactSettings {
            rule: vec![def],
            ..RedactSettings::default()
        })
        .unwrap_err()
        .to_string()
    };
    let base = settings.rule[0].clone();
    let wrong_example = RuleDef {
        example: Some("acme_short".into()),
        ..base.clone()
    };
    assert!(refuse(wrong_example).contains("finds nothing in its example"));
    let taken = RuleDef {
        id: "jwt".into(),
        ..base.clone()
    };
    assert!(refuse(taken).contains("a rule with that id exists"));
    let bad = RuleDef {
        pattern: "(".into(),
        ..base
    };
    assert!(refuse(bad).starts_with("rule \"acme-token\": pattern:"));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn entropy_is_in_bits_per_byte() {
    assert_eq!(entropy(b""), 0.0);
    assert_eq!(entropy(b"aaaa"), 0.0);
    assert_eq!(entropy(b"abab"), 1.0);
    assert_eq!(entropy(b"abcdefgh"), 3.0);
}

/// Output cut short (a tool's head, a truncated result) can end inside a key block: what is
/// there of the key is redacted, to the end of the string.
#[test]
fn a_private_key_cut_off_before_its_end_is_redacted_to_the_end_of_the_string() {
    let r = Redactor::builtin();
    let line = br#"{"out":"-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oa8Ab7yGqcWQoAoGCCqGSM49\n[output truncated]","next":"kept"}"#;
    let out = String::from_utf8(r.redact_record(line).into_owned()).unwrap();
    assert_eq!(
        out,
        r#"{"out":"-----BEGIN EC PRIVATE KEY-----[REDACTED:private-key]","next":"kept"}"#
    );
}

mod property {
    use super::*;
    use proptest::prelude::*;

    /// Pieces that strings are made of: keywords, secrets, and what JSON escapes.
    const PIECES: &[&str] = &[
        "token=",
        "password: ",
        " ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz ",
        "AKIAJPJOMKEFOIUC5LGT",
        "Xy7kQ2mN9pL4vR8s",
        "postgres://u:",
        "@db/x",
        "-----BEGIN RSA PRIVATE KEY-----",
        "Authorization: Bearer ",
        "\"",
        "\\",
        "\\u0041",
        "\n",
        "\t",
        "\u{1}",
        "é",
        "😀",
        "/",
        " ",
        "api_key",
        "signature",
        "data",
    ];

    /// Compiled once for every case.
    static BUILTIN: std::sync::LazyLock<Redactor> = std::sync::LazyLock::new(Redactor::builtin);

    /// Member names: plain ones, and those rules treat apart (`signature` is never searched,
    /// so it is not among them).
    const NAMES: &[&str] = &["a", "b", "text", "api_key", "password", "data"];

    fn text() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(PIECES), 0..8).prop_map(|p| p.concat())
    }

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            text().prop_map(Value::String),
            any::<i32>().prop_map(Value::from),
            Just(Value::Null),
        ];
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((prop::sample::select(NAMES), inner), 0..6).prop_map(|m| {
                    Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }),
            ]
        })
    }

    proptest! {
        /// Whatever a record holds, and however its strings are escaped, it comes out one
        /// JSON value of the same shape, without the token planted in it.
        #[test]
        fn any_record_stays_json_of_the_same_shape(
            v in value().prop_filter("an object or array", |v| v.is_object() || v.is_array()),
            ascii in any::<bool>(),
        ) {
            let r = &*BUILTIN;
            let mut line = serde_json::to_string(&v).unwrap();
            if ascii {
                // Writers that escape what is not ASCII, and '/'.
                line = line.replace('é', "\\u00e9").replace('😀', "\\ud83d\\ude00").replace('/', "\\/");
            }
            let out = r.redact_record(line.as_bytes());
            let back: Value = serde_json::from_slice(&out).expect("still JSON");
            prop_assert_eq!(shape(&back), shape(&v));
            let text = String::from_utf8(out.into_owned()).unwrap();
            prop_assert!(!text.contains("ghp_Wi3vrM6jI6nLriRfmoRiJOM2ytq3aEGQ21Zz"), "{}", text);
        }
    }
}
