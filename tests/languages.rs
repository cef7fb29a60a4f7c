//! Search in every script: a word written in a script without spaces between words (Chinese,
//! Japanese, Thai, Lao, Khmer, Myanmar), or in Korean with its particles attached, is found
//! inside running text, marked as itself in the snippet, and not found where it is absent;
//! scripts with spaces are found as before, and so is each part of a message that mixes them.

use crate::util::{Env, cli, stderr, stdout_of};
use serde_json::Value;
use std::fs;

/// One Claude Code session per language: its id's first group, and what the user wrote (the
/// assistant answers with the same text, so each language has two messages).
const SESSIONS: [(&str, &str); 10] = [
    (
        "0000000a",
        "我们需要检查数据库的连接池配置，内存使用太高了。",
    ),
    (
        "0000000b",
        "認証トークンの有効期限が切れたので、再ログインしてください。",
    ),
    ("0000000c", "กรุณาตรวจสอบฐานข้อมูลก่อนรันการทดสอบ"),
    ("0000000d", "ກະລຸນາກວດສອບຖານຂໍ້ມູນກ່ອນ"),
    ("0000000e", "សូមពិនិត្យមូលដ្ឋានទិន្នន័យជាមុនសិន"),
    ("0000000f", "ကျေးဇူးပြု၍ဒေတာဘေ့စ်ကိုစစ်ဆေးပါ"),
    ("00000010", "결제를 확인하려면 서버를 다시 시작하세요"),
    ("00000011", "Run cargo test 然后检查src/main.rs里的错误处理"),
    (
        "00000012",
        "Проверьте подключение к серверу, bitte prüfen Sie die Verbindung",
    ),
    ("00000013", "नमूना डेटा लोड करें"),
];

fn session_id(short: &str) -> String {
    format!("{short}-0000-4000-8000-000000000000")
}

/// A Claude Code home with the sessions of [`SESSIONS`], archived.
fn archived_home() -> Env {
    let env = Env::new();
    let project = env.dir.path().join("home/.claude/projects/-home-me-app");
    fs::create_dir_all(&project).unwrap();
    for (short, text) in SESSIONS {
        let id = session_id(short);
        let line = |kind: &str, uuid: &str, content: Value| {
            serde_json::json!({"type": kind, "uuid": uuid, "sessionId": id, "cwd": "/home/me/app",
                "timestamp": "2026-12-04T10:00:00.000Z",
                "message": {"role": kind, "content": content}})
            .to_string()
        };
        let user = line("user", &format!("{short}-u"), Value::from(text));
        let reply = serde_json::json!([{"type": "text", "text": text}]);
        let assistant = line("assistant", &format!("{short}-a"), reply);
        fs::write(
            project.join(format!("{id}.jsonl")),
            format!("{user}\n{assistant}\n"),
        )
        .unwrap();
    }
    env.run_once_home();
    env
}

/// The sessions (their ids' first groups) that `query` finds, and the snippets of its hits.
fn found(env: &Env, query: &str) -> (Vec<String>, Vec<String>) {
    let out = cli(env, &["search", query, "--json"]);
    if out.status.code() == Some(1) {
        return (Vec::new(), Vec::new());
    }
    assert!(out.status.success(), "{query}: {}", stderr(&out));
    let hits: Vec<Value> = (String::from_utf8(out.stdout).unwrap().lines())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut sessions: Vec<String> = (hits.iter())
        .map(|h| h["session"].as_str().unwrap()[..8].to_owned())
        .collect();
    sessions.dedup();
    let snippets = (hits.iter()).map(|h| h["snippet"].as_str().unwrap().to_owned());
    (sessions, snippets.collect())
}

#[test]
fn a_word_in_each_script_is_found_inside_running_text_and_marked_as_itself() {
    let env = archived_home();
    for (query, short) in [
        ("连接池", "0000000a"),
        ("内存", "0000000a"),
        ("認証", "0000000b"),
        ("トークン", "0000000b"),
        ("有効期限", "0000000b"),
        ("ฐานข้อมูล", "0000000c"),
        ("ทดสอบ", "0000000c"),
        ("ຖານຂໍ້ມູນ", "0000000d"),
        ("មូលដ្ឋានទិន្នន័យ", "0000000e"),
        ("ဒေတာဘေ့စ်", "0000000f"),
        // Korean: a word finds it with its particle attached (결제를).
        ("결제", "00000010"),
        ("서버", "00000010"),
        // Mixed text: the code, the English and the Chinese each.
        ("cargo", "00000011"),
        ("src/main.rs", "00000011"),
        ("错误处理", "00000011"),
        // Scripts with spaces, as before.
        ("подключение", "00000012"),
        ("prüfen", "00000012"),
        ("डेटा", "00000013"),
    ] {
        let (sessions, snippets) = found(&env, query);
        assert_eq!(sessions, [short], "{query}");
        for snippet in &snippets {
            let marked = format!("**{query}**");
            assert!(snippet.contains(&marked), "{query}: {snippet}");
        }
    }
}

#[test]
fn a_word_is_not_found_where_it_is_absent_nor_across_punctuation() {
    let env = archived_home();
    // 缓存 is in no message; 置内 spans "配置，内存" across the comma; ทดลอง is not ทดสอบ.
    for query in ["缓存", "置内", "ทดลอง", "決済", "결재"] {
        assert_eq!(found(&env, query).0, Vec::<String>::new(), "{query}");
    }
    let out = cli(&env, &["search", "ทดลอง"]);
    assert_eq!(out.status.code(), Some(1));
    // The query as typed, its combining marks unescaped.
    assert!(
        stderr(&out).contains("no message matches \"ทดลอง\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn one_character_and_a_prefix_find_every_word_they_start() {
    let env = archived_home();
    // 池 inside 连接池配置, 了 at the end of a run, 理 at the end of 错误处理.
    for (query, short) in [("池", "0000000a"), ("了", "0000000a"), ("理", "00000011")] {
        assert_eq!(found(&env, query).0, [short], "{query}");
    }
    assert_eq!(found(&env, "有効*").0, ["0000000b"]);
    assert_eq!(found(&env, "\"连接池配置\"").0, ["0000000a"]);
    let text = stdout_of(&env, &["search", "内存"]);
    assert!(text.contains("**内存**使用"), "{text}");
}

#[test]
fn an_index_of_the_previous_version_is_rebuilt_once_by_the_first_search() {
    // An index made by the build before, which cut these scripts' runs into no words: its
    // version says so, and the first command that reads it empties it and builds it again
    // (dropping its tables in any order, their rows referring to each other's).
    let env = archived_home();
    let index = rusqlite::Connection::open(env.index_file()).unwrap();
    index.pragma_update(None, "user_version", 4).unwrap();
    drop(index);
    let first = cli(&env, &["search", "连接池"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let said = stderr(&first);
    assert!(
        said.contains("its schema version is 4") && said.contains("built again"),
        "{said}"
    );
    let again = cli(&env, &["search", "连接池"]);
    assert!(again.status.success() && !stderr(&again).contains("built again"));
}
