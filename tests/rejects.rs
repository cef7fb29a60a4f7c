//! Nothing an agent wrote is lost: lines with lone surrogate escapes are records, rejected
//! lines and unfinished last lines are kept whole, and `rejects` shows them.

use crate::util::*;
use serde_json::Value;

/// Lines that JavaScript's `JSON.stringify` writes when a string is cut between the two
/// halves of an emoji, and that `JSON.parse` and Python's `json` read back: the archive may be
/// the only copy left, so they must be records, byte for byte.
const SURROGATE_LINES: [&str; 2] = [
    r#"{"type":"user","message":{"content":"tool output \ud83d"}}"#,
    r#"{"lone_high":"abc\ud83d","lone_low":"\udc00x","reversed":"\ude00\ud83d"}"#,
];

#[test]
fn lines_with_lone_or_reversed_surrogate_escapes_are_archived_and_exported_byte_for_byte() {
    let env = Env::new();
    let mut all: Vec<String> = SURROGATE_LINES.iter().map(|l| l.to_string()).collect();
    // Long enough that the single pass sees the escapes in a block of their own.
    all.push(format!(r#"{{"pad":"{}","s":"\ud83d"}}"#, "x".repeat(100)));
    env.write("s.jsonl", &lines(&all));
    let log = env.run_once(&[]);
    assert_eq!(counter(&log, "rejects"), 0, "{log}");
    assert_eq!(env.records(), all);
    assert!(env.rejects(&[]).is_empty());
}

#[test]
fn a_line_node_writes_with_a_cut_emoji_is_archived_byte_for_byte() {
    let env = Env::new();
    // The text is cut one UTF-16 unit short, inside the emoji, as a truncating agent does.
    let script = r#"const text = "tool output 😀"; process.stdout.write(JSON.stringify({type: "user", message: {content: text.slice(0, text.length - 1)}}) + "\n");"#;
    let out = env.command("node").args(["-e", script]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let line = String::from_utf8(out.stdout).unwrap();
    assert!(line.contains(r"\ud83d"), "node wrote {line}");
    env.write("node.jsonl", line.as_bytes());
    env.run_once(&[]);
    assert_eq!(env.records(), vec![line.trim_end().to_owned()]);
}

#[test]
fn a_3_mib_invalid_line_is_kept_whole_and_written_out_by_rejects_raw() {
    let env = Env::new();
    let mut bad = format!(r#"{{"image":"{}""#, "QUJD".repeat(3 << 18)).into_bytes();
    bad.extend_from_slice(b",oops}\r");
    let mut bytes = b"{\"before\":1}\n".to_vec();
    bytes.extend_from_slice(&bad);
    bytes.extend_from_slice(b"\n{\"after\":2}\n");
    env.write("s.jsonl", &bytes);
    env.run_once(&[]);
    assert_eq!(env.records(), vec![r#"{"before":1}"#, r#"{"after":2}"#]);
    let rejects = env.rejects(&[]);
    assert_eq!(rejects.len(), 1);
    let r = &rejects[0];
    assert_eq!(r["offset"], 13);
    assert_eq!(r["length"], bad.len());
    assert_eq!(r["kept"], bad.len());
    assert!(
        r["reason"].as_str().unwrap().starts_with("invalid JSON: "),
        "{r}"
    );
    assert_eq!(sha256(&env.reject_raw(&r["id"])), sha256(&bad));
}

#[test]
fn a_line_over_the_record_limit_keeps_exactly_the_limit_and_its_true_length() {
    let env = Env::new();
    let long: Vec<u8> = (0..3_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut bytes = long.clone();
    bytes.extend_from_slice(b"\n{\"after\":1}\n");
    env.write("s.jsonl", &bytes);
    // Small batches: the line is read in many chunks, past several batch ends.
    env.run_once(&["--record-limit", "1M", "--batch-bytes", "64K"]);
    assert_eq!(env.records(), vec![r#"{"after":1}"#]);
    let r = &env.rejects(&[])[0];
    assert_eq!(r["length"], 3_000_000);
    assert_eq!(r["kept"], 1 << 20);
    let reason = r["reason"].as_str().unwrap();
    assert!(reason.contains("line of 3000000 bytes"), "{reason}");
    assert!(
        env.reject_raw(&r["id"]) == long[..1 << 20],
        "the first 1 MiB"
    );
}

#[test]
fn an_unfinished_last_line_is_kept_whole_when_its_generation_ends() {
    // 2 MiB held back past the cursor: more than the cursor keeps at hand (64 KiB) and more
    // than SQLite is handed as one value (1 MiB). The file is then cut to a new, shorter
    // content, which ends the generation before the line was finished.
    let env = Env::new();
    let unfinished = format!(r#"{{"partial":"{}"#, "z".repeat(2 << 20)).into_bytes();
    let mut bytes = b"{\"a\":1}\n".to_vec();
    bytes.extend_from_slice(&unfinished);
    env.write("s.jsonl", &bytes);
    let log = env.run_once(&[]);
    assert_eq!(counter(&log, "held_back_bytes"), unfinished.len() as u64);
    env.write("s.jsonl", b"{\"b\":2}\n");
    let log = env.run_once(&[]);
    assert_log_has(&log, "new generation");
    let r = &env.rejects(&[])[0];
    assert_eq!(
        (r["generation"].clone(), r["offset"].clone()),
        (0.into(), 8.into())
    );
    assert_eq!(r["length"], unfinished.len());
    assert_eq!(r["kept"], unfinished.len());
    assert!(
        r["reason"].as_str().unwrap().contains("never completed"),
        "{r}"
    );
    assert!(env.reject_raw(&r["id"]) == unfinished);
    assert_eq!(env.records(), vec![r#"{"a":1}"#, r#"{"b":2}"#]);
}

#[test]
fn an_unfinished_line_that_grows_is_kept_as_it_last_was_when_its_file_is_deleted() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"grow");
    env.run_once(&[]);
    env.append("s.jsonl", &[b'x'; 100_000]);
    env.run_once(&[]);
    std::fs::remove_file(env.path("s.jsonl")).unwrap();
    env.run_once(&[]);
    let r = &env.rejects(&[])[0];
    let mut want = b"{\"grow".to_vec();
    want.extend_from_slice(&[b'x'; 100_000]);
    assert_eq!(r["length"], want.len());
    assert!(env.reject_raw(&r["id"]) == want);
    assert!(
        env.sql("SELECT count(*) FROM held_back") == vec!["0"],
        "forgotten once rejected"
    );
}

#[test]
fn rejects_lists_every_field_filters_by_path_and_prints_a_table() {
    let env = Env::new();
    env.write("a/s.jsonl", b"{\"a\":1}\nnot json\n");
    env.write("b/t.jsonl", b"[1,]\n{\"b\":1}\n{\"x\":\"\\u12\"}\n");
    env.run_once(&[]);
    let all = env.rejects(&[]);
    assert_eq!(all.len(), 3);
    let a = &all[0];
    let json = env.rejects_output(&["--json"], &[]).stdout;
    let first = String::from_utf8(json)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let fields = [
        "id",
        "time",
        "path",
        "source",
        "generation",
        "offset",
        "length",
        "kept",
    ];
    let at: Vec<usize> = (fields.iter().chain(&["reason"]))
        .map(|f| {
            first
                .find(&format!("\"{f}\":"))
                .unwrap_or_else(|| panic!("{f}: {first}"))
        })
        .collect();
    assert!(at.is_sorted(), "fields in this order: {first}");
    assert_eq!(a["path"], env.path("a/s.jsonl").to_str().unwrap());
    assert_eq!(
        (a["offset"].clone(), a["length"].clone()),
        (8.into(), 8.into())
    );
    assert!(a["time"].as_str().unwrap().ends_with('Z'));
    assert!(
        all[2]["reason"].as_str().unwrap().contains("escape"),
        "{}",
        all[2]
    );
    let b = env.rejects(&["--path", env.path("b").to_str().unwrap()]);
    let offsets: Vec<&Value> = b.iter().map(|r| &r["offset"]).collect();
    assert_eq!(offsets, [&Value::from(0), &Value::from(13)]);
    assert_eq!(env.reject_raw(&a["id"]), b"not json");
    let table = env.rejects_output(&[], &[]);
    let table = String::from_utf8(table.stdout).unwrap();
    let rows: Vec<&str> = table.lines().collect();
    assert_eq!(rows.len(), 5, "{table}");
    assert!(rows[0].trim_start().starts_with("ID  TIME"), "{table}");
    assert!(
        rows[1].contains(env.path("a/s.jsonl").to_str().unwrap()),
        "{table}"
    );
    assert!(
        rows[1].ends_with("invalid JSON: expected ident at line 1 column 2"),
        "{table}"
    );
    assert!(rows[4].starts_with("total: rejects=3"), "{table}");
    assert!(
        env.status()["totals"]["rejects"] == 3,
        "status keeps its count"
    );
}

#[test]
fn rejects_raw_of_an_unknown_id_names_the_archive_and_how_to_list_them() {
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n");
    env.run_once(&[]);
    let out = env.rejects_output(&["--raw", "7"], &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(env.db.to_str().unwrap()), "{err}");
    assert!(
        err.contains("no reject with id 7; `transcript-sync rejects` lists them"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

/// The SHA-256 of `bytes`, by coreutils' `sha256sum`.
fn sha256(bytes: &[u8]) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = (Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped()))
    .spawn()
    .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn an_unfinished_line_past_the_record_limit_keeps_the_limit_and_its_length_when_deleted() {
    let env = Env::new();
    let long: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    env.write("s.jsonl", b"{\"a\":1}\n");
    env.append("s.jsonl", &long[..200_000]);
    env.run_once(&["--record-limit", "100K"]);
    env.append("s.jsonl", &long[200_000..]);
    env.run_once(&["--record-limit", "100K"]);
    std::fs::remove_file(env.path("s.jsonl")).unwrap();
    env.run_once(&["--record-limit", "100K"]);
    let r = &env.rejects(&[])[0];
    assert_eq!(
        (r["length"].clone(), r["kept"].clone()),
        (300_000.into(), 102_400.into())
    );
    assert!(env.reject_raw(&r["id"]) == long[..102_400]);
}

#[test]
fn a_long_rejected_line_costs_no_more_memory_than_a_record_of_its_size() {
    // Keeping a reject whole must not cost more than archiving a record of the same size:
    // neither may be loaded twice (SQLite allocates a zero-filled blob meant to be written in
    // place unless it is the row's last column). Peak RSS of two daemons, side by side, read
    // from VmHWM once each has caught up (the exit status's ru_maxrss would also count the
    // test process, whose memory a spawned child shares until it runs the binary).
    let line = |valid: bool| {
        let mut l = format!(r#"{{"big":"{}""#, "x".repeat(40 << 20)).into_bytes();
        l.extend_from_slice(if valid { b"}\n" } else { b" oops}\n" });
        l
    };
    let peak_kib = |valid: bool| {
        let env = Env::new();
        env.write("s.jsonl", &line(valid));
        let d = Daemon::start_without_tap(&env);
        d.wait_log("INFO  caught up sources=");
        let status = std::fs::read_to_string(format!("/proc/{}/status", d.pid())).unwrap();
        let hwm = (status.lines())
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap();
        assert_eq!(env.rejects(&[]).len(), usize::from(!valid));
        drop(d);
        hwm
    };
    let (record, reject) = (peak_kib(true), peak_kib(false));
    assert!(
        reject < record + 8 * 1024,
        "peak RSS {reject} KiB for a 40 MiB reject, {record} KiB for a 40 MiB record"
    );
}

#[test]
fn an_unfinished_line_that_grows_is_stored_by_what_it_adds() {
    // Each read that finds the line longer stores only the bytes it added, as a piece of its
    // own, rather than all of it again; the reject puts the pieces back together.
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"grow\":\"");
    env.run_once(&[]);
    env.append("s.jsonl", &[b'x'; 50_000]);
    env.run_once(&[]);
    env.append("s.jsonl", &[b'y'; 50_000]);
    env.run_once(&[]);
    assert_eq!(
        env.sql("SELECT start || ':' || length(bytes) FROM held_back ORDER BY start"),
        vec!["0:9", "9:50000", "50009:50000"]
    );
    let mut want = b"{\"grow\":\"".to_vec();
    want.extend_from_slice(&[b'x'; 50_000]);
    // Overwritten (not grown): the stored pieces are recorded, then replaced by the new bytes.
    let mut bytes = b"{\"a\":1}\n{\"GROW\":\"".to_vec();
    bytes.extend_from_slice(&[b'z'; 100_001]);
    std::fs::write(env.path("s.jsonl"), &bytes).unwrap();
    env.run_once(&[]);
    assert_eq!(
        env.sql("SELECT start || ':' || length(bytes) FROM held_back"),
        vec!["0:100010"]
    );
    let r = &env.rejects(&[])[0];
    want.extend_from_slice(&[b'y'; 50_000]);
    assert!(r["reason"].as_str().unwrap().contains("overwritten"), "{r}");
    assert!(env.reject_raw(&r["id"]) == want);
}

#[test]
fn a_raised_record_limit_keeps_more_of_an_unfinished_line_past_the_old_one() {
    let env = Env::new();
    let long: Vec<u8> = (0..250_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    env.write("s.jsonl", b"{\"a\":1}\n");
    env.append("s.jsonl", &long[..150_000]);
    env.run_once(&["--record-limit", "100K"]);
    env.append("s.jsonl", &long[150_000..]);
    env.run_once(&["--record-limit", "120K"]);
    std::fs::remove_file(env.path("s.jsonl")).unwrap();
    env.run_once(&[]);
    let r = &env.rejects(&[])[0];
    assert_eq!(
        (r["length"].clone(), r["kept"].clone()),
        (250_000.into(), 122_880.into())
    );
    assert!(env.reject_raw(&r["id"]) == long[..122_880]);
}

#[test]
fn an_unfinished_line_is_rejected_once_when_its_file_goes_and_comes_back() {
    // Gone: its unfinished line is recorded. Back, overwritten: the new bytes are read as
    // they are, and nothing is recorded a second time for the old ones.
    let env = Env::new();
    env.write("s.jsonl", b"{\"a\":1}\n{\"partial\":");
    env.run_once(&[]);
    let away = env.dir.path().join("away.jsonl");
    std::fs::rename(env.path("s.jsonl"), &away).unwrap();
    env.run_once(&[]);
    std::fs::rename(&away, env.path("s.jsonl")).unwrap();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(env.path("s.jsonl"))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"{\"b\":2}\n{\"c\":", 8).unwrap();
    let log = env.run_once(&[]);
    assert_eq!(counter(&log, "rejects"), 0, "{log}");
    assert_eq!(env.rejects(&[]).len(), 1);
    assert_eq!(env.status()["totals"]["rejects"], 1);
    assert_eq!(env.status()["sources"][0]["held_back"], 5);
    assert_eq!(env.records(), vec![r#"{"a":1}"#, r#"{"b":2}"#]);
}
