//! The Cursor editor's own agent and chat (its "composer"; the Cursor CLI's transcripts are
//! `agents::cursor`'s): every conversation in the editor's global state database,
//! `<Cursor's user folder>/globalStorage/state.vscdb`, read as one JSON document per
//! conversation (`read::database`): `{"composer": <its composerData>, "bubbles": [<each
//! bubble, in the order its headers give>]}`.
//!
//! Cursor is closed source: its format is the one its public readers show
//! (specstoryai/getspecstory, `specstory-cli/pkg/providers/cursoride/CURSORIDE-FORMAT.md` at
//! commit c38a6052bde9 and `types.go`, `tool_shell.go`; michaeldhood/chatrxiv,
//! `docs/cursor/storage-reference.md` at commit d28513a810b1: composer `_v` 10 and bubble `_v` 3,
//! December 2025). Table `cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)`, a
//! JSON text per row: `composerData:<composerId>` (`composerId`, `name`, `createdAt` and
//! `lastUpdatedAt` in ms, `modelConfig.modelName`, `createdOnBranch`, since Cursor 3.12
//! `workspaceIdentifier.uri.fsPath`, and the conversation: `fullConversationHeadersOnly`, its
//! bubbles' ids in order, or before `_v` 3 an inline `conversation` of the bubbles themselves,
//! which the document moves to `bubbles`, leaving the list empty) and
//! `bubbleId:<composerId>:<bubbleId>` (`type` 1 the person's, 2 the model's; `text`,
//! `thinking.text`, `toolFormerData` {`name`, `params` or `rawArgs`, `result`: JSON texts},
//! `tokenCount` {`inputTokens`, `outputTokens`}, `modelInfo.modelName`, `createdAt` as RFC
//! 3339, the person's `workspaceUris`).
//!
//! Cursor keeps no log of its changes and rewrites a row whole (the table's `ON CONFLICT
//! REPLACE`, which gives the row a new rowid): what changed since the last read is the
//! conversations whose `lastUpdatedAt`, which Cursor moves at each write of one (specstory's
//! watcher relies on it too), is past the mark's time, and those of the mark's time whose rows'
//! rowids changed since. Finding them reads the conversations' rows, through the key's index,
//! and the keys alone of the last written ones' bubbles; each changed conversation is then
//! read whole.

use super::Agent;
use super::message::*;
use super::restore::{self, Restore};
use super::session::Identified;
use crate::capture::harness::Formats;
use crate::domain::{SnapshotFormat, SnapshotSpec};
use crate::read::database::SqliteFormat;
use crate::read::database::{Changed, column_value, in_read_transaction};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OptionalExtension};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::sync::Mutex;
use xxhash_rust::xxh3::Xxh3;

/// The Cursor editor's agent and chat (its global state database).
pub(crate) static AGENT: Agent = Agent {
    name: "cursor-editor",
    watcher: include_str!("../../watchers/cursor-editor.toml"),
    formats: Formats {
        databases: &[&DATABASE],
        documents: &[],
    },
    parse: cursor_editor,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};

/// A conversation's composer (the document without its bubbles), or one of its bubbles.
fn cursor_editor(obj: &Map<String, Value>) -> Option<Parsed> {
    match obj.get("composer") {
        Some(composer) => composer_facts(composer.as_object()?),
        None => bubble(obj),
    }
}

/// What a composer says of its conversation; `None` for one that keeps its conversation in
/// no shape this reader knows.
fn composer_facts(composer: &Map<String, Value>) -> Option<Parsed> {
    if !has_known_shape(composer) {
        return None;
    }
    let name = string(composer, "name").filter(|n| !n.trim().is_empty());
    let model = composer.get("modelConfig").and_then(|m| m.get("modelName"));
    let folder = (composer.get("workspaceIdentifier"))
        .and_then(|w| w.pointer("/uri/fsPath"))
        .and_then(Value::as_str);
    Some(Parsed {
        session_id: string(composer, "composerId"),
        project: folder.map(str::to_owned),
        branch: string(composer, "createdOnBranch").filter(|b| !b.is_empty()),
        title: name.map(|n| (title_of(&n), 2)),
        model: model.and_then(Value::as_str).map(str::to_owned),
        at_ms: composer.get("createdAt").and_then(Value::as_i64),
        ..Parsed::default()
    })
}

/// Whether `composer` keeps its conversation as this reader knows: a list of headers, or a
/// list of the bubbles themselves.
fn has_known_shape(composer: &Map<String, Value>) -> bool {
    let listed = |key: &str| composer.get(key).is_some_and(Value::is_array);
    listed("fullConversationHeadersOnly") || listed("conversation")
}

/// A bubble: a message of the person's or the model's; `None` for one of another type.
fn bubble(obj: &Map<String, Value>) -> Option<Parsed> {
    let role = match obj.get("type").and_then(Value::as_i64)? {
        1 => Role::User,
        2 => Role::Assistant,
        _ => return None,
    };
    let parts = parts(obj);
    let role = role_of(role, &parts);
    let mut parsed = Parsed {
        at_ms: bubble_ms(obj),
        ..Parsed::default()
    };
    if role == Role::User {
        parsed.prompt = typed_prompt(&parts);
        parsed.project = workspace_folder(obj);
    }
    // The model a prompt was sent to, or that wrote a reply.
    let model = obj.get("modelInfo").and_then(|m| m.get("modelName"));
    parsed.model = model.and_then(Value::as_str).map(str::to_owned);
    let key = string(obj, "bubbleId");
    parsed.usage = usage(obj).map(|u| u.keyed(key.clone(), parsed.model.clone()));
    // A bubble with nothing to show (one Cursor made and left empty) is no message.
    if !parts.is_empty() {
        // A bubble is written again as its reply streams and its tool runs: the latest wins.
        parsed.message = Some(Message {
            upsert: true,
            ..Message::new(key, role, parts)
        });
    }
    Some(parsed)
}

/// A bubble's parts: its thinking, its text, its tool call and the tool's result.
fn parts(obj: &Map<String, Value>) -> Vec<Part> {
    let mut parts = Vec::new();
    let thinking = obj.get("thinking").and_then(|t| t.get("text"));
    parts.extend(non_empty(thinking.and_then(Value::as_str)).map(Part::Thinking));
    parts.extend(non_empty(obj.get("text").and_then(Value::as_str)).map(Part::Text));
    if let Some(tool) = obj.get("toolFormerData").and_then(Value::as_object) {
        parts.extend(tool_parts(tool));
    }
    parts
}

/// A tool's call (its `params`, else its `rawArgs`) and, once it ran, its result.
fn tool_parts(tool: &Map<String, Value>) -> Vec<Part> {
    let Some(name) = string(tool, "name") else {
        return Vec::new();
    };
    let given = |key: &str| tool.get(key).filter(|v| !v.is_null());
    let args = ["params", "rawArgs"].into_iter().find_map(|key| {
        let text = input_text(Some(given(key)?));
        (!text.is_empty()).then_some(text)
    });
    let mut parts = vec![Part::ToolCall {
        name,
        input: args.unwrap_or_default(),
    }];
    let result = given("result").map(tool_result).filter(|r| !r.is_empty());
    parts.extend(result.map(Part::ToolResult));
    parts
}

/// A tool's result: a JSON text (a terminal's `{"output", "exitCode", ...}`) read for its
/// output, or text.
fn tool_result(result: &Value) -> String {
    let parsed = match result {
        Value::String(text) => serde_json::from_str::<Value>(text).ok(),
        _ => None,
    };
    match parsed {
        Some(value @ (Value::Object(_) | Value::Array(_))) => result_text(Some(&value)),
        _ => result_text(Some(result)),
    }
}

/// The folder of the first workspace a prompt names (`file://` URIs).
fn workspace_folder(obj: &Map<String, Value>) -> Option<String> {
    let uris = obj.get("workspaceUris")?.as_array()?;
    let uri = uris.iter().find_map(Value::as_str)?;
    let path = uri.strip_prefix("file://")?;
    Some(percent_decoded(path))
}

/// `text` with its `%XX` escapes decoded (as a URI's path writes a space or a `#`).
fn percent_decoded(text: &str) -> String {
    let decoded = percent_encoding::percent_decode_str(text).decode_utf8_lossy();
    decoded.into_owned()
}

/// The tokens of the model call a bubble ends (Cursor counts them on the last bubble of a
/// turn, zero on the others, and keeps no cached input apart).
fn usage(obj: &Map<String, Value>) -> Option<Usage> {
    let counts = obj.get("tokenCount")?.as_object()?;
    let usage = Usage::of(counts, ["inputTokens", "outputTokens", "", ""], false)?;
    (usage.input > 0 || usage.output > 0).then_some(usage)
}

/// When a bubble was written: its `createdAt`, an RFC 3339 time (or ms).
fn bubble_ms(obj: &Map<String, Value>) -> Option<i64> {
    match obj.get("createdAt")? {
        Value::String(text) => time_ms(text),
        value => value.as_i64(),
    }
}

fn non_empty(text: Option<&str>) -> Option<String> {
    text.filter(|t| !t.trim().is_empty()).map(str::to_owned)
}

/// The Cursor editor's database, as its watcher's `[[database]]` `reader = "cursor-editor"`
/// names it.
pub(crate) static DATABASE: SqliteFormat = SqliteFormat {
    name: "cursor-editor",
    spec,
    changed,
    document,
};

/// How a conversation's document keeps its messages.
fn spec() -> SnapshotSpec {
    SnapshotSpec {
        messages: Some("/bubbles".into()),
        key: "/bubbleId".into(),
        format: SnapshotFormat::Json,
    }
}

/// Every conversation's id and the time it was last written (`lastUpdatedAt`, else
/// `createdAt`; none for a row that is not JSON), read by the key's index: the keys from
/// `composerData:` up to `composerData;` (`;` follows `:`). A value may be a BLOB holding the
/// text, which SQLite's JSON functions would read as its binary JSON: it is read as text.
const COMPOSERS: &str = "SELECT substr(key, 14), CASE WHEN json_valid(CAST(value AS TEXT))
    THEN CAST(coalesce(json_extract(CAST(value AS TEXT), '$.lastUpdatedAt'),
                       json_extract(CAST(value AS TEXT), '$.createdAt')) AS INTEGER) END
    FROM cursorDiskKV WHERE key >= 'composerData:' AND key < 'composerData;'";

/// The bits of a mark below its time: a digest of the rows of the conversations last written
/// at that time. The time (ms) takes 43 bits until the year 2248.
const DIGEST_BITS: u32 = 20;

/// A mark: the greatest `lastUpdatedAt`, and the digest of its conversations' rows.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Mark {
    at: i64,
    digest: i64,
}

impl Mark {
    fn of(mark: i64) -> Mark {
        Mark {
            at: mark >> DIGEST_BITS,
            digest: mark & ((1 << DIGEST_BITS) - 1),
        }
    }

    fn value(self) -> i64 {
        (self.at << DIGEST_BITS) | self.digest
    }
}

/// The conversations written since mark `since`, read in one read transaction: those written
/// after its time, and those written at its time when their rows changed since (a bubble
/// rewritten without its conversation's `lastUpdatedAt` moving, as a reply streams into it; a
/// conversation written within the mark's millisecond after the read).
fn changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    let then = Mark::of(since);
    let (composers, rewritten, mark) = in_read_transaction(conn, || {
        let mut stmt = conn.prepare_cached(COMPOSERS)?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let composers: Vec<(String, Option<i64>)> = rows.collect::<rusqlite::Result<_>>()?;
        // A time that does not fit beside the digest (not in ms, or no time) marks nothing.
        let latest = composers
            .iter()
            .filter_map(|(_, at)| *at)
            .filter(|at| (0..1 << (63 - DIGEST_BITS)).contains(at))
            .max()
            .unwrap_or(0);
        let at = |time: i64| (composers.iter()).filter(move |(_, at)| *at == Some(time));
        let rewritten = since != 0 && rows_digest(conn, at(then.at))? != then.digest;
        let digest = rows_digest(conn, at(latest))?;
        Ok((composers, rewritten, Mark { at: latest, digest }))
    })?;
    // A row that is not JSON has no time: it is read with everything, at the first read.
    let written = |at: Option<i64>| match at {
        _ if since == 0 => true,
        None => false,
        Some(at) => at > then.at || (at == then.at && rewritten),
    };
    let mut sessions: Vec<String> = (composers.iter())
        .filter(|(_, at)| written(*at))
        .map(|(id, _)| id.clone())
        .collect();
    sessions.sort();
    Ok(Changed {
        sessions,
        all: composers.into_iter().map(|(id, _)| id).collect(),
        mark: mark.value(),
    })
}

/// A digest of the rows of `conversations`: each row's rowid, which Cursor's REPLACE of a
/// row renews, and how many bubbles there are, read from the key's index alone.
fn rows_digest<'a>(
    conn: &Connection,
    conversations: impl Iterator<Item = &'a (String, Option<i64>)>,
) -> rusqlite::Result<i64> {
    let mut stmt = conn.prepare_cached(
        "SELECT (SELECT rowid FROM cursorDiskKV WHERE key = 'composerData:' || ?1),
                max(rowid), count(*)
         FROM cursorDiskKV WHERE key >= 'bubbleId:' || ?1 || ':' AND key < 'bubbleId:' || ?1 || ';'",
    )?;
    let mut hash = Xxh3::new();
    for (id, _) in conversations {
        let rows: [Option<i64>; 3] =
            stmt.query_row([id], |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?]))?;
        for n in rows {
            hash.update(&n.unwrap_or(-1).to_le_bytes());
        }
    }
    Ok((hash.digest() & ((1 << DIGEST_BITS) - 1)) as i64)
}

/// Conversation `id`'s document, read in one read transaction; `None` when there is no such
/// conversation (any more).
fn document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    in_read_transaction(conn, || {
        let Some(composer) = value(conn, &format!("composerData:{id}"))? else {
            return Ok(None);
        };
        note_unknown_format(conn, &composer);
        let (composer, bubbles) = conversation(conn, id, composer)?;
        let doc = serde_json::json!({"composer": composer, "bubbles": bubbles});
        Ok(Some(
            serde_json::to_vec(&doc).expect("a JSON value serialises"),
        ))
    })
}

/// The composer and its bubbles: those its headers list, in their order (a header whose
/// bubble is gone is left out, and so is a bubble no header lists: a branch the person edited
/// away), or the bubbles of its inline `conversation`, moved out of it.
fn conversation(
    conn: &Connection,
    id: &str,
    mut composer: Value,
) -> rusqlite::Result<(Value, Vec<Value>)> {
    if let Some(inline) = composer
        .get_mut("conversation")
        .and_then(Value::as_array_mut)
    {
        let bubbles = std::mem::take(inline);
        return Ok((composer, bubbles));
    }
    let headers = composer.get("fullConversationHeadersOnly");
    let listed = headers.and_then(Value::as_array).into_iter().flatten();
    let mut bubbles = Vec::new();
    for bubble in listed.filter_map(|h| h.get("bubbleId")?.as_str()) {
        match value(conn, &format!("bubbleId:{id}:{bubble}"))? {
            None | Some(Value::Null) => {}
            Some(found) => bubbles.push(found),
        }
    }
    Ok((composer, bubbles))
}

/// Row `key`'s value as JSON (a text that is not JSON as a string); `None` when there is no
/// such row.
fn value(conn: &Connection, key: &str) -> rusqlite::Result<Option<Value>> {
    let mut stmt = conn.prepare_cached("SELECT value FROM cursorDiskKV WHERE key = ?1")?;
    let json = |r: &rusqlite::Row<'_>| {
        Ok(match r.get_ref(0)? {
            ValueRef::Blob(text) => column_value(ValueRef::Text(text)),
            other => column_value(other),
        })
    };
    stmt.query_row([key], json).optional()
}

/// The newest composer format version the sources show (chatrxiv's, December 2025).
const KNOWN_VERSION: i64 = 10;

/// Logs, once per database and version, a composer of a newer version than [`KNOWN_VERSION`]
/// or of a shape this reader does not know: it is archived as it is, and what of it cannot be
/// read is counted as unparsed.
fn note_unknown_format(conn: &Connection, composer: &Value) {
    let version = composer.get("_v").and_then(Value::as_i64);
    let shaped = composer.as_object().is_some_and(has_known_shape);
    if shaped && version.is_none_or(|v| v <= KNOWN_VERSION) {
        return;
    }
    static NOTED: Mutex<BTreeSet<(String, Option<i64>)>> = Mutex::new(BTreeSet::new());
    let path = conn.path().unwrap_or_default().to_owned();
    let mut noted = NOTED.lock().unwrap_or_else(|e| e.into_inner());
    if noted.insert((path.clone(), version)) {
        let version = version.map_or("none".to_owned(), |v| v.to_string());
        log::warn!(
            "{path}: a Cursor conversation of format version {version} (this release reads up to \
             {KNOWN_VERSION}{}): archived as it is, what cannot be read counted as unparsed",
            if shaped { "" } else { ", and not its shape" }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::database::open;
    use serde_json::json;
    use std::path::Path;

    /// Cursor's key-value table, as its global state database has it, in WAL mode.
    fn database(path: &Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE cursorDiskKV (key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB);",
        )
        .unwrap();
        conn
    }

    fn put(conn: &Connection, key: &str, value: &Value) {
        let sql = "INSERT INTO cursorDiskKV VALUES (?1, ?2)";
        conn.execute(sql, (key, value.to_string())).unwrap();
    }

    fn composer(id: &str, updated: i64, bubbles: &[&str]) -> Value {
        let headers: Vec<Value> = (bubbles.iter())
            .map(|b| json!({"bubbleId": b, "type": 1}))
            .collect();
        json!({"_v": 10, "composerId": id, "createdAt": 1, "lastUpdatedAt": updated,
            "fullConversationHeadersOnly": headers})
    }

    fn document_of(path: &Path, id: &str) -> Value {
        let reader = open(path).unwrap();
        serde_json::from_slice(&document(&reader, id).unwrap().unwrap()).unwrap()
    }

    fn parsed(value: Value) -> Option<Parsed> {
        cursor_editor(value.as_object().unwrap())
    }

    #[test]
    fn a_conversation_is_its_composer_then_the_bubbles_its_headers_list_in_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.vscdb");
        let conn = database(&path);
        put(
            &conn,
            "composerData:c",
            &composer("c", 5, &["b2", "b1", "gone"]),
        );
        put(
            &conn,
            "bubbleId:c:b1",
            &json!({"bubbleId": "b1", "type": 1, "text": "one"}),
        );
        put(
            &conn,
            "bubbleId:c:orphan",
            &json!({"bubbleId": "orphan", "type": 2}),
        );
        // A value kept as a BLOB of its text is read as the text.
        let blob = json!({"bubbleId": "b2", "type": 2, "text": "two"}).to_string();
        let sql = "INSERT INTO cursorDiskKV VALUES ('bubbleId:c:b2', ?1)";
        conn.execute(sql, [blob.into_bytes()]).unwrap();
        let doc = document_of(&path, "c");
        assert_eq!(doc["composer"]["composerId"], "c");
        let ids: Vec<&Value> = (doc["bubbles"].as_array().unwrap().iter())
            .map(|b| &b["bubbleId"])
            .collect();
        assert_eq!(
            ids,
            ["b2", "b1"],
            "in header order, the missing and unlisted left out"
        );
        assert!(document(&open(&path).unwrap(), "none").unwrap().is_none());
    }

    #[test]
    fn an_inline_conversation_is_moved_out_of_its_composer_into_the_bubbles() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.vscdb");
        let conn = database(&path);
        let bubbles = json!([{"bubbleId": "b1", "type": 1, "text": "old"}]);
        let older = json!({"_v": 1, "composerId": "c", "createdAt": 1, "conversation": bubbles});
        put(&conn, "composerData:c", &older);
        let doc = document_of(&path, "c");
        assert_eq!(doc["bubbles"], bubbles);
        assert_eq!(doc["composer"]["conversation"], json!([]));
        let head = json!({"composer": doc["composer"], "bubbles": []});
        assert_eq!(parsed(head).unwrap().session_id.as_deref(), Some("c"));
    }

    #[test]
    fn conversations_written_after_the_mark_or_whose_rows_changed_at_its_time_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.vscdb");
        let conn = database(&path);
        put(&conn, "composerData:c1", &composer("c1", 10, &[]));
        put(&conn, "composerData:c2", &composer("c2", 20, &["b1"]));
        let sql = "INSERT INTO cursorDiskKV VALUES ('composerData:c3', '{not')";
        conn.execute(sql, []).unwrap();
        put(&conn, "bubbleId:c2:b1", &json!({"type": 1, "text": "one"}));
        put(&conn, "composerDataX", &json!({"lastUpdatedAt": 99}));
        let reader = open(&path).unwrap();
        let ids = |c: &Changed| c.sessions.clone();
        let first = changed(&reader, 0).unwrap();
        assert_eq!(ids(&first), ["c1", "c2", "c3"]);
        assert_eq!(Mark::of(first.mark).at, 20);
        // A write of something else (the editor's own state) changes no conversation.
        put(&conn, "ItemTable-like", &json!({}));
        let quiet = changed(&reader, first.mark).unwrap();
        assert!(ids(&quiet).is_empty(), "{:?}", quiet.sessions);
        assert_eq!(quiet.mark, first.mark);
        // A bubble rewritten as a reply streams, its conversation's time unmoved.
        put(
            &conn,
            "bubbleId:c2:b1",
            &json!({"type": 1, "text": "one, then more"}),
        );
        let streamed = changed(&reader, quiet.mark).unwrap();
        assert_eq!(ids(&streamed), ["c2"]);
        // A conversation written in the mark's millisecond after the read.
        put(&conn, "composerData:c4", &composer("c4", 20, &[]));
        let same_ms = changed(&reader, streamed.mark).unwrap();
        assert_eq!(ids(&same_ms), ["c2", "c4"]);
        put(&conn, "composerData:c1", &composer("c1", 30, &["b1"]));
        let next = changed(&reader, same_ms.mark).unwrap();
        assert_eq!(
            (ids(&next), Mark::of(next.mark).at),
            (vec!["c1".to_owned()], 30)
        );
        conn.execute("DELETE FROM cursorDiskKV WHERE key = 'composerData:c2'", [])
            .unwrap();
        let last = changed(&reader, next.mark).unwrap();
        assert!(ids(&last).is_empty());
        let mut all: Vec<_> = last.all.into_iter().collect();
        all.sort();
        assert_eq!(all, ["c1", "c3", "c4"]);
    }

    #[test]
    fn a_composer_names_the_conversation_its_title_project_branch_and_model() {
        let head = json!({"composer": {"_v": 10, "composerId": "c", "name": "Fix it",
            "createdAt": 1_790_000_000_000_i64, "createdOnBranch": "main",
            "modelConfig": {"modelName": "claude-4.5-sonnet"},
            "workspaceIdentifier": {"id": "9f2c", "uri": {"fsPath": "/src/app"}},
            "fullConversationHeadersOnly": []}, "bubbles": []});
        let facts = parsed(head).unwrap();
        assert_eq!(facts.session_id.as_deref(), Some("c"));
        assert_eq!(facts.title, Some(("Fix it".into(), 2)));
        assert_eq!(
            (facts.project.as_deref(), facts.branch.as_deref()),
            (Some("/src/app"), Some("main"))
        );
        assert_eq!(facts.model.as_deref(), Some("claude-4.5-sonnet"));
        assert_eq!(facts.at_ms, Some(1_790_000_000_000));
        // A conversation in no shape this reader knows is not read.
        let unknown =
            json!({"composer": {"_v": 99, "composerId": "c", "turns": []}, "bubbles": []});
        assert_eq!(parsed(unknown), None);
    }

    #[test]
    fn a_bubble_is_a_prompt_thinking_a_tool_call_with_its_result_or_an_answer() {
        let prompt = json!({"bubbleId": "u", "type": 1, "text": "Run it, please.",
            "createdAt": "2026-09-23T08:00:00.000Z",
            "workspaceUris": ["file:///src/my%20app"]});
        let p = parsed(prompt).unwrap();
        assert_eq!(p.prompt.as_deref(), Some("Run it, please."));
        assert_eq!(p.project.as_deref(), Some("/src/my app"));
        assert_eq!(p.at_ms, Some(1_790_150_400_000));
        assert_eq!(p.message.unwrap().role, Role::User);
        let thinking = json!({"bubbleId": "t", "type": 2, "text": "",
            "thinking": {"text": "The user wants it run."}});
        assert_eq!(
            parsed(thinking).unwrap().message.unwrap().role,
            Role::Reasoning
        );
        let tool = json!({"bubbleId": "x", "type": 2, "text": "", "capabilityType": 15,
            "toolFormerData": {"tool": 15, "name": "run_terminal_cmd", "status": "completed",
                "rawArgs": "{\"command\": \"echo hi\"}",
                "params": "{\"command\":\"echo hi\"}",
                "result": "{\"output\":\"hi\\n\",\"exitCode\":0}"}});
        let m = parsed(tool).unwrap().message.unwrap();
        assert_eq!(m.role, Role::Tool);
        assert_eq!(
            m.parts,
            [
                Part::ToolCall {
                    name: "run_terminal_cmd".into(),
                    input: r#"{"command":"echo hi"}"#.into()
                },
                Part::ToolResult("hi\n".into())
            ]
        );
        let answer = json!({"bubbleId": "a", "type": 2, "text": "Done.",
            "modelInfo": {"modelName": "gpt-5"},
            "tokenCount": {"inputTokens": 120, "outputTokens": 30}});
        let a = parsed(answer).unwrap();
        assert_eq!(a.model.as_deref(), Some("gpt-5"));
        let usage = a.usage.unwrap();
        assert_eq!(
            (usage.input, usage.output, usage.key.as_deref()),
            (120, 30, Some("a"))
        );
        assert!(a.message.unwrap().upsert);
        let empty = json!({"bubbleId": "e", "type": 2, "text": "",
            "tokenCount": {"inputTokens": 0, "outputTokens": 0}});
        let e = parsed(empty).unwrap();
        assert_eq!(
            (e.message, e.usage),
            (None, None),
            "nothing to show, no call"
        );
        assert_eq!(parsed(json!({"bubbleId": "?", "type": 7})), None);
    }
}
