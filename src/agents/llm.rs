//! LLM (Simon Willison's CLI, PyPI `llm`): every conversation in one SQLite database,
//! `logs.db` in its user directory (`$LLM_USER_PATH`), read as one JSON document per thread
//! (`read::database`): `{"session": <its row>, "messages": [<each message of its chain>]}`.
//!
//! The tables (llm's message store since 0.32, migration `m023_message_store`, as 0.36 writes
//! it): `messages` (`hash`,
//! `parent_hash`, `role`), content-addressed, each naming its parent, so that threads sharing
//! a prefix share its rows; `parts` (`message_hash`, `position`, `type` `text`, `reasoning`,
//! `tool_call`, `tool_result` or `attachment`, `tool_name`, `text`, `payload` as JSON: a tool
//! call's `arguments`, a tool result's `output`, or `text_ref`, literals and ids of
//! `fragments` rows in place of text that borrows them); `threads` (`id`, `name`,
//! `tip_message_hash`, `forked_from`, `datetime_utc`), the only rows changed in place; and
//! `turns` (`id`, `thread_id`, `parent_message_hash` and `tip_message_hash`, the messages the
//! call was given and the last it added, `model`, token counts, `datetime_utc`), one per model
//! call. A thread is its chain from its tip back to the root; a message's time is its turn's
//! (the first turn whose tip is it or comes after it), and the turn's tokens are on its tip.
//!
//! Releases before 0.32 logged each call to `responses` instead, which later ones keep, show
//! and no longer write to: a conversation there is read by [`legacy`], when no thread has its
//! id (a conversation a later release went on in is a thread of the same id, whose chain holds
//! it all). What changed since the last read is the threads of the turns added since, every
//! thread without a turn (a fork not yet prompted), and the conversations of the responses
//! added since.

use super::Agent;
use super::message::*;
use super::restore::{self, Restore};
use super::session::Identified;
use crate::capture::harness::Formats;
use crate::domain::{SnapshotFormat, SnapshotSpec};
use crate::read::database::SqliteFormat;
use crate::read::database::{
    Changed, column, column_value, in_read_transaction, row_object, session_document,
};
use rusqlite::{Connection, OptionalExtension};
use serde_json::{Map, Value};
use std::collections::HashMap;

mod legacy;

/// LLM (its SQLite logs database).
pub(crate) static AGENT: Agent = Agent {
    name: "llm",
    watcher: include_str!("../../watchers/llm.toml"),
    formats: Formats {
        databases: &[&DATABASE],
        documents: &[],
    },
    parse: llm,
    unread: &[],
    identify: Identified::by_record,
    restore: Restore::keeping_layout(restore::no_resume),
    doctor: None,
};

/// A thread's row, or one message of its chain. (The thread's `name` is its first prompt cut
/// to 32 characters: the prompt itself names the session.)
fn llm(obj: &Map<String, Value>) -> Option<Parsed> {
    if let Some(thread) = obj.get("session").and_then(Value::as_object) {
        return Some(Parsed {
            session_id: string(thread, "id"),
            ..Parsed::default()
        });
    }
    let parts = (obj.get("parts").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .map(part)
        .collect::<Vec<_>>();
    let role = role_named(obj.get("role").and_then(Value::as_str)?, &parts);
    let turn = obj.get("turn").and_then(Value::as_object);
    Some(Parsed {
        at_ms: obj
            .get("datetime_utc")
            .and_then(Value::as_str)
            .and_then(time),
        prompt: (role == Role::User).then(|| typed_prompt(&parts)).flatten(),
        model: turn.and_then(|t| string(t, "model")),
        usage: turn.and_then(usage),
        message: Some(Message::new(string(obj, "hash"), role, parts)),
        ..Parsed::default()
    })
}

/// One row of `parts`, its payload read as its JSON.
fn part(row: &Map<String, Value>) -> Part {
    let empty = Map::new();
    let payload = row
        .get("payload")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let text = || string(row, "text").or_else(|| string(payload, "text"));
    let name = || string(row, "tool_name").or_else(|| string(payload, "name"));
    match row.get("type").and_then(Value::as_str) {
        Some("text") => Part::Text(text().unwrap_or_default()),
        Some("reasoning") => Part::Thinking(text().unwrap_or_default()),
        Some("tool_call") => Part::ToolCall {
            name: name().unwrap_or_default(),
            input: input_text(payload.get("arguments")),
        },
        Some("tool_result") => Part::ToolResult(result_text(
            payload.get("output").or(payload.get("exception")),
        )),
        // An attachment is stored as the id of its row (its bytes are not text to show).
        Some("attachment") => {
            Part::Text(format!("[attachment {}]", Value::Object(payload.clone())))
        }
        _ => Part::Raw(Value::Object(row.clone()).to_string()),
    }
}

/// Milliseconds since the epoch of llm's times, `2026-12-05T03:12:35.520803+00:00` (UTC).
fn time(text: &str) -> Option<i64> {
    time_ms(text.trim_end_matches("+00:00"))
}

/// A turn's tokens: its input counts the cached input (OpenAI's `cached_tokens`, under
/// `token_details`); keyed by the turn's id.
fn usage(turn: &Map<String, Value>) -> Option<Usage> {
    let input = turn.get("input_tokens")?.as_i64()?;
    let cached = (turn.get("token_details"))
        .and_then(|d| d.pointer("/prompt_tokens_details/cached_tokens"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let output = turn.get("output_tokens").and_then(Value::as_i64);
    let counts = Usage {
        input: (input - cached).max(0),
        output: output.unwrap_or(0),
        cache_read: cached,
        ..Usage::default()
    };
    let model = string(turn, "resolved_model").or_else(|| string(turn, "model"));
    Some(counts.keyed(string(turn, "id"), model))
}

/// LLM's database, as its watcher's `[[database]]` `reader = "llm"` names it.
pub(crate) static DATABASE: SqliteFormat = SqliteFormat {
    name: "llm",
    spec,
    changed,
    document,
};

/// How a thread's document keeps its messages: by hash, each written once (a message's hash
/// covers its content).
fn spec() -> SnapshotSpec {
    SnapshotSpec {
        messages: Some("/messages".into()),
        key: "/hash".into(),
        format: SnapshotFormat::Json,
    }
}

/// The sessions changed since mark `since`, read in one read transaction. The mark is the
/// last rowid of each store's table of model calls, the turns' in its high 32 bits and the
/// responses' in its low 32: the threads of the turns added since, every thread without a turn
/// (a fork not yet prompted), and the conversations of the responses added since.
fn changed(conn: &Connection, since: i64) -> rusqlite::Result<Changed> {
    in_read_transaction(conn, || {
        let store = has_tables(conn, &["threads", "turns"])?;
        let legacy = has_tables(conn, &["conversations", "responses"])?;
        let last = |table: &str, held: bool| -> rusqlite::Result<i64> {
            let sql = format!("SELECT coalesce(max(rowid), 0) FROM {table}");
            match held {
                true => conn.query_row(&sql, [], |r| r.get(0)),
                false => Ok(0),
            }
        };
        let (turns, responses) = (last("turns", store)?, last("responses", legacy)?);
        let mark = (turns.min(MARK_HALF) << 32) | responses.min(MARK_HALF);
        // A mark past a table's last row (the table made anew) says nothing of this one.
        let after = |since: i64, last: i64| if since > last { 0 } else { since };
        let (since_turns, since_responses) = (
            after(since >> 32, turns),
            after(since & MARK_HALF, responses),
        );
        let mut sessions = Vec::new();
        let mut all = Vec::new();
        if store {
            sessions.extend(column(
                conn,
                "SELECT thread_id FROM turns WHERE rowid > ?1
                 UNION SELECT id FROM threads
                     WHERE ?1 = 0 OR id NOT IN (SELECT thread_id FROM turns)",
                [since_turns],
            )?);
            all.extend(column(conn, "SELECT id FROM threads", [])?);
        }
        if legacy {
            sessions.extend(column(
                conn,
                "SELECT DISTINCT conversation_id FROM responses
                 WHERE rowid > ?1 AND conversation_id IS NOT NULL",
                [since_responses],
            )?);
            all.extend(column(conn, "SELECT id FROM conversations", [])?);
        }
        sessions.sort();
        sessions.dedup();
        Ok(Changed {
            sessions,
            all: all.into_iter().collect(),
            mark,
        })
    })
}

/// The largest rowid a mark holds of each table (31 bits: the mark stays positive).
const MARK_HALF: i64 = (1 << 31) - 1;

/// Whether the database has every table of `names` (a store of llm's: a release before 0.32
/// has no message store, and a database made by 0.32 or later no `responses` to read).
fn has_tables(conn: &Connection, names: &[&str]) -> rusqlite::Result<bool> {
    let sql = "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1";
    for name in names {
        if conn.query_row(sql, [name], |r| r.get::<_, i64>(0))? == 0 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Session `id`'s document, read in one read transaction: the thread of that id, else the
/// conversation of that id in `responses` (a conversation 0.32 or later went on in is a thread
/// of the same id, whose chain holds the whole conversation); `None` when there is neither
/// (any more).
fn document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    in_read_transaction(conn, || {
        if has_tables(conn, &["threads", "turns"])?
            && let Some(doc) = thread_document(conn, id)?
        {
            return Ok(Some(doc));
        }
        match has_tables(conn, &["conversations", "responses"])? {
            true => legacy::conversation_document(conn, id),
            false => Ok(None),
        }
    })
}

/// The longest chain read: a message's parent is named by its hash, and a database written by
/// something else could make a cycle of them.
const LONGEST_CHAIN: i64 = 1_000_000;

/// [`document`]'s reads: the thread's row, its chain oldest first, each message with its
/// parts, the time of its turn, and the turn it ends.
fn thread_document(conn: &Connection, id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    let Some(thread) = rows(conn, "SELECT * FROM threads WHERE id = ?1", id)?.pop() else {
        return Ok(None);
    };
    let chain = "WITH RECURSIVE chain(hash, depth) AS (
            SELECT tip_message_hash, 0 FROM threads WHERE id = ?1
            UNION ALL SELECT m.parent_hash, c.depth + 1 FROM chain c
                JOIN messages m ON m.hash = c.hash
                WHERE m.parent_hash IS NOT NULL AND c.depth < ?2)
        SELECT m.hash, m.role FROM chain c JOIN messages m ON m.hash = c.hash
        ORDER BY c.depth DESC";
    let mut stmt = conn.prepare_cached(chain)?;
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let messages = (stmt.query_map((id, LONGEST_CHAIN), |r| row_object(r, &names))?)
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let turns = rows(
        conn,
        "SELECT id, parent_message_hash, tip_message_hash, model, resolved_model,
             input_tokens, output_tokens, token_details, duration_ms, datetime_utc
         FROM turns WHERE thread_id = ?1 ORDER BY datetime_utc, rowid",
        id,
    )?;
    let messages = with_turns(messages, turns)
        .into_iter()
        .map(|m| with_parts(conn, m).map(Value::Object))
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(Some(session_document(thread, messages)))
}

/// `messages` (a chain, oldest first), each with the time of its turn (the first turn whose
/// tip is it or a later message) and, on a turn's tip, the turn.
fn with_turns(
    mut messages: Vec<Map<String, Value>>,
    turns: Vec<Map<String, Value>>,
) -> Vec<Map<String, Value>> {
    let mut by_tip: HashMap<String, Map<String, Value>> = HashMap::new();
    for turn in turns {
        let tip = string(&turn, "tip_message_hash").unwrap_or_default();
        by_tip.entry(tip).or_insert(turn);
    }
    let mut time = None;
    for message in messages.iter_mut().rev() {
        let hash = string(message, "hash").unwrap_or_default();
        if let Some(turn) = by_tip.remove(&hash) {
            time = turn.get("datetime_utc").cloned();
            message.insert("turn".into(), Value::Object(turn));
        }
        if let Some(at) = &time {
            message.insert("datetime_utc".into(), at.clone());
        }
    }
    messages
}

/// `message` with its parts, in order, text borrowed from fragments put back.
fn with_parts(
    conn: &Connection,
    mut message: Map<String, Value>,
) -> rusqlite::Result<Map<String, Value>> {
    let hash = string(&message, "hash").unwrap_or_default();
    let sql = "SELECT type, tool_name, text, payload FROM parts
               WHERE message_hash = ?1 ORDER BY position";
    let mut stmt = conn.prepare_cached(sql)?;
    let mut parts = (stmt.query_map([&hash], part_row)?).collect::<rusqlite::Result<Vec<_>>>()?;
    for part in &mut parts {
        let refs = (part.get_mut("payload").and_then(Value::as_object_mut))
            .and_then(|p| p.remove("text_ref"));
        if let Some(Value::Array(pieces)) = refs {
            part.insert("text".into(), borrowed_text(conn, &pieces)?.into());
        }
    }
    message.insert(
        "parts".into(),
        parts.into_iter().map(Value::Object).collect(),
    );
    Ok(message)
}

/// A row of `parts`: its text as it is (never read as JSON, whatever it looks like), its
/// payload as its JSON.
fn part_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Map<String, Value>> {
    let mut part = Map::new();
    for (i, name) in ["type", "tool_name", "text"].into_iter().enumerate() {
        part.insert(name.into(), r.get::<_, Option<String>>(i)?.into());
    }
    part.insert("payload".into(), column_value(r.get_ref(3)?));
    Ok(part)
}

/// The text of a `text_ref`: its literals, and the content of the fragments it names.
fn borrowed_text(conn: &Connection, pieces: &[Value]) -> rusqlite::Result<String> {
    let mut text = String::new();
    for piece in pieces {
        if let Some(literal) = piece.get("literal").and_then(Value::as_str) {
            text.push_str(literal);
        } else if let Some(id) = piece.get("fragment").and_then(Value::as_i64) {
            let sql = "SELECT content FROM fragments WHERE id = ?1";
            let content: Option<String> = conn.query_row(sql, [id], |r| r.get(0)).optional()?;
            text.push_str(&content.unwrap_or_default());
        }
    }
    Ok(text)
}

/// The rows `sql` selects by `?1`, each an object of its columns.
fn rows(conn: &Connection, sql: &str, id: &str) -> rusqlite::Result<Vec<Map<String, Value>>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let rows = stmt.query_map([id], |r| row_object(r, &names))?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::database::open;

    /// LLM's message store, reduced to the columns read.
    fn database(path: &std::path::Path) -> Connection {
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "CREATE TABLE messages (hash TEXT PRIMARY KEY, parent_hash TEXT, role TEXT);
             CREATE TABLE parts (id INTEGER PRIMARY KEY, message_hash TEXT, position INTEGER,
                 type TEXT, tool_name TEXT, text TEXT, payload TEXT);
             CREATE TABLE fragments (id INTEGER PRIMARY KEY, hash TEXT, content TEXT);
             CREATE TABLE threads (id TEXT PRIMARY KEY, name TEXT, tip_message_hash TEXT,
                 forked_from TEXT, datetime_utc TEXT);
             CREATE TABLE turns (id TEXT PRIMARY KEY, thread_id TEXT,
                 parent_message_hash TEXT, tip_message_hash TEXT, model TEXT,
                 resolved_model TEXT, input_tokens INTEGER, output_tokens INTEGER,
                 token_details TEXT, duration_ms INTEGER, datetime_utc TEXT);",
        )
        .unwrap();
        conn
    }

    /// Message `hash` after `parent`, of one text part.
    fn message(conn: &Connection, hash: &str, parent: Option<&str>, role: &str, text: &str) {
        conn.execute(
            "INSERT INTO messages VALUES (?1, ?2, ?3)",
            (hash, parent, role),
        )
        .unwrap();
        let sql =
            "INSERT INTO parts (message_hash, position, type, text) VALUES (?1, 0, 'text', ?2)";
        conn.execute(sql, (hash, text)).unwrap();
    }

    /// A turn of `thread` that was given `parent` and ended at `tip`, at second `at`.
    fn turn(conn: &Connection, id: &str, thread: &str, parent: &str, tip: &str, at: u32) {
        let sql = "INSERT INTO turns (id, thread_id, parent_message_hash, tip_message_hash,
                       model, input_tokens, output_tokens, token_details, datetime_utc)
                   VALUES (?1, ?2, ?3, ?4, 'm', 160, 30,
                       '{\"prompt_tokens_details\": {\"cached_tokens\": 40}}', ?5)";
        let at = format!("2026-12-05T03:12:{at:02}.500000+00:00");
        conn.execute(sql, (id, thread, parent, tip, at)).unwrap();
        conn.execute(
            "UPDATE threads SET tip_message_hash = ?1 WHERE id = ?2",
            (tip, thread),
        )
        .unwrap();
    }

    fn thread(conn: &Connection, id: &str, tip: &str) {
        let sql = "INSERT INTO threads (id, tip_message_hash, datetime_utc) VALUES (?1, ?2, '')";
        conn.execute(sql, (id, tip)).unwrap();
    }

    #[test]
    fn the_threads_of_new_turns_and_those_without_a_turn_are_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs.db");
        let conn = database(&path);
        message(&conn, "u1", None, "user", "one");
        message(&conn, "a1", Some("u1"), "assistant", "reply");
        thread(&conn, "t1", "u1");
        turn(&conn, "turn1", "t1", "u1", "a1", 1);
        thread(&conn, "t2", "u1");
        turn(&conn, "turn2", "t2", "u1", "a1", 2);
        let reader = open(&path).unwrap();
        let first = changed(&reader, 0).unwrap();
        assert_eq!((first.sessions.len(), first.mark), (2, 2 << 32));
        assert!(changed(&reader, first.mark).unwrap().sessions.is_empty());
        // A fork of a thread, not yet prompted: it has no turn, and is read at each change.
        thread(&conn, "fork", "a1");
        let fork = changed(&reader, first.mark).unwrap();
        assert_eq!(
            (fork.sessions.as_slice(), fork.all.len()),
            (&["fork".to_owned()][..], 3)
        );
        message(&conn, "u2", Some("a1"), "user", "two");
        message(&conn, "a2", Some("u2"), "assistant", "reply");
        turn(&conn, "turn3", "t1", "u2", "a2", 3);
        let next = changed(&reader, fork.mark).unwrap();
        assert_eq!(next.sessions, ["fork", "t1"]);
        // A mark past the last turn (the table made anew) reads everything.
        assert_eq!(changed(&reader, 100 << 32).unwrap().sessions.len(), 3);
    }

    // A logs.db of a release before 0.32 holds its conversations in `responses` only: each is
    // read, its new responses found by their rowid.
    #[test]
    fn a_conversation_logged_before_the_message_store_is_read_from_its_responses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE conversations (id TEXT PRIMARY KEY, name TEXT, model TEXT);
             CREATE TABLE responses (id TEXT PRIMARY KEY, model TEXT, prompt TEXT,
                 response TEXT, conversation_id TEXT, datetime_utc TEXT, input_tokens INTEGER,
                 output_tokens INTEGER, token_details TEXT);
             CREATE TABLE tool_calls (id INTEGER PRIMARY KEY, response_id TEXT, name TEXT,
                 arguments TEXT);
             CREATE TABLE tool_results (id INTEGER PRIMARY KEY, response_id TEXT, name TEXT,
                 output TEXT);
             INSERT INTO conversations VALUES ('c', 'Run it', 'm');
             INSERT INTO responses VALUES ('r1', 'm', '{\"a\": 1}', 'Running.', 'c',
                 '2026-12-05T03:12:01.500000+00:00', 160, 30, NULL);
             INSERT INTO tool_calls VALUES (1, 'r1', 'bash', '{\"command\": \"ls\"}');",
        )
        .unwrap();
        let reader = open(&path).unwrap();
        let first = changed(&reader, 0).unwrap();
        assert_eq!(
            (first.sessions.as_slice(), first.mark),
            (&["c".to_owned()][..], 1)
        );
        conn.execute_batch(
            "INSERT INTO responses VALUES ('r2', 'm', '', 'Done.', 'c',
                 '2026-12-05T03:12:02.500000+00:00', 160, 30, NULL);
             INSERT INTO tool_results VALUES (1, 'r2', 'bash', 'a.txt');",
        )
        .unwrap();
        assert!(changed(&reader, 2).unwrap().sessions.is_empty());
        let next = changed(&reader, first.mark).unwrap();
        assert_eq!(
            (next.sessions.as_slice(), next.mark),
            (&["c".to_owned()][..], 2)
        );
        let doc: Value = serde_json::from_slice(&document(&reader, "c").unwrap().unwrap()).unwrap();
        let parsed: Vec<Parsed> = (doc["messages"].as_array().unwrap().iter())
            .map(|m| llm(m.as_object().unwrap()).unwrap())
            .collect();
        let roles: Vec<Role> = parsed
            .iter()
            .map(|p| p.message.as_ref().unwrap().role)
            .collect();
        assert_eq!(
            roles,
            [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
        );
        // The prompt as typed, though it looks like JSON.
        assert_eq!(
            parsed[0].message.as_ref().unwrap().parts[0],
            Part::Text("{\"a\": 1}".into())
        );
        let call = &parsed[1].message.as_ref().unwrap().parts[1];
        assert!(
            matches!(call, Part::ToolCall { name, input } if name == "bash" && input.contains("ls"))
        );
        assert_eq!(
            parsed[2].message.as_ref().unwrap().parts[0],
            Part::ToolResult("a.txt".into())
        );
        assert_eq!(
            parsed[3].usage.as_ref().map(|u| u.key.as_deref()),
            Some(Some("r2"))
        );
        assert!(document(&reader, "none").unwrap().is_none());
        // A database of a release before tools (0.26) has no tool tables.
        conn.execute_batch("DROP TABLE tool_calls; DROP TABLE tool_results;")
            .unwrap();
        let doc: Value = serde_json::from_slice(&document(&reader, "c").unwrap().unwrap()).unwrap();
        assert_eq!(doc["messages"].as_array().unwrap().len(), 3);
        // A database with neither store holds nothing to read.
        let empty = dir.path().join("empty.db");
        Connection::open(&empty)
            .unwrap()
            .execute_batch("CREATE TABLE t (x);")
            .unwrap();
        let none = changed(&open(&empty).unwrap(), 0).unwrap();
        assert!(none.sessions.is_empty() && none.all.is_empty() && none.mark == 0);
    }

    #[test]
    fn a_thread_is_its_chain_oldest_first_each_message_at_its_turns_time() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs.db");
        let conn = database(&path);
        // Text that looks like JSON is the text as written.
        message(&conn, "u1", None, "user", "[1, 2]");
        message(&conn, "a1", Some("u1"), "assistant", "first");
        message(&conn, "u2", Some("a1"), "user", "again");
        message(&conn, "a2", Some("u2"), "assistant", "second");
        thread(&conn, "t", "u1");
        turn(&conn, "turn1", "t", "u1", "a1", 1);
        turn(&conn, "turn2", "t", "u2", "a2", 7);
        let reader = open(&path).unwrap();
        let doc: Value = serde_json::from_slice(&document(&reader, "t").unwrap().unwrap()).unwrap();
        let messages = doc["messages"].as_array().unwrap();
        let hashes: Vec<&str> = messages
            .iter()
            .map(|m| m["hash"].as_str().unwrap())
            .collect();
        assert_eq!(hashes, ["u1", "a1", "u2", "a2"]);
        assert_eq!(messages[0]["parts"][0]["text"], "[1, 2]");
        let seconds = |m: &Value| llm(m.as_object().unwrap()).unwrap().at_ms.unwrap() / 1000 % 60;
        let times: Vec<i64> = messages.iter().map(seconds).collect();
        assert_eq!(times, [1, 1, 7, 7], "a message's time is its turn's");
        assert_eq!(messages[1]["turn"]["id"], "turn1");
        assert!(messages[2].get("turn").is_none());
        assert!(document(&reader, "none").unwrap().is_none());
    }

    #[test]
    fn text_borrowed_from_fragments_is_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs.db");
        let conn = database(&path);
        conn.execute_batch(
            "INSERT INTO fragments VALUES (7, 'h', 'THE NOVEL');
             INSERT INTO messages VALUES ('u', NULL, 'user');
             INSERT INTO parts (message_hash, position, type, payload) VALUES ('u', 0, 'text',
                 '{\"text_ref\": [{\"literal\": \"Summarise \"}, {\"fragment\": 7}]}');",
        )
        .unwrap();
        thread(&conn, "t", "u");
        let reader = open(&path).unwrap();
        let doc: Value = serde_json::from_slice(&document(&reader, "t").unwrap().unwrap()).unwrap();
        let parsed = llm(doc["messages"][0].as_object().unwrap()).unwrap();
        assert_eq!(parsed.prompt.as_deref(), Some("Summarise THE NOVEL"));
    }

    #[test]
    fn a_tool_call_its_result_and_the_turns_tokens_are_read_as_such() {
        let reply = serde_json::json!({"hash": "a", "role": "assistant",
            "datetime_utc": "2026-12-05T03:12:35.520803+00:00",
            "parts": [{"type": "text", "text": "Running it."}, {"type": "tool_call",
                "tool_name": "bash", "payload": {"name": "bash",
                "arguments": {"command": "echo hi"}, "tool_call_id": "c1"}}],
            "turn": {"id": "turn1", "model": "scripted", "input_tokens": 160,
                "output_tokens": 30,
                "token_details": {"prompt_tokens_details": {"cached_tokens": 40}}}});
        let parsed = llm(reply.as_object().unwrap()).unwrap();
        assert_eq!(parsed.at_ms, Some(1_796_440_355_520));
        let message = parsed.message.unwrap();
        assert_eq!(message.role, Role::Assistant);
        assert!(
            matches!(&message.parts[1], Part::ToolCall { name, input } if name == "bash" && input.contains("echo hi"))
        );
        let usage = parsed.usage.unwrap();
        assert_eq!(
            (
                usage.input,
                usage.output,
                usage.cache_read,
                usage.key.as_deref()
            ),
            (120, 30, 40, Some("turn1"))
        );
        let result = serde_json::json!({"hash": "r", "role": "tool", "parts": [
            {"type": "tool_result", "tool_name": "bash",
             "payload": {"name": "bash", "output": "hi\n", "tool_call_id": "c1"}}]});
        let message = llm(result.as_object().unwrap()).unwrap().message.unwrap();
        assert_eq!(message.role, Role::Tool);
        assert!(matches!(&message.parts[0], Part::ToolResult(t) if t == "hi\n"));
    }
}
