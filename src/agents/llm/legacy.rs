//! What LLM logged before its message store (releases before 0.32): a conversation is a row
//! of `conversations` (`id`, `name`, `model`) and its `responses` (`id`, `prompt`, `response`,
//! `model`, `datetime_utc`, token counts, `conversation_id`), one per model call, in the order
//! written (`rowid`), each with its `tool_calls` (`response_id`, `name`, `arguments`) and the
//! `tool_results` sent with its prompt (`response_id`, `name`, `output`), as llm 0.31.1 writes
//! them. Read into the messages of a thread's document: for each response, the tool results it
//! was sent, its prompt, then its reply with its tool calls and, as its turn, its tokens.

use crate::read::database::{row_object, session_document};
use rusqlite::{Connection, OptionalExtension};
use serde_json::{Map, Value, json};

/// Conversation `id`'s document; `None` when there is no such conversation (any more).
pub(super) fn conversation_document(
    conn: &Connection,
    id: &str,
) -> rusqlite::Result<Option<Vec<u8>>> {
    let mut stmt = conn.prepare_cached("SELECT * FROM conversations WHERE id = ?1")?;
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let Some(conversation) = stmt.query_row([id], |r| row_object(r, &names)).optional()? else {
        return Ok(None);
    };
    let mut stmt =
        conn.prepare_cached("SELECT * FROM responses WHERE conversation_id = ?1 ORDER BY rowid")?;
    let names: Vec<String> = stmt.column_names().map(String::from).collect();
    let responses = stmt.query_map([id], |r| {
        // The prompt and the reply as written, never read as JSON.
        let texts = (r.get::<_, Option<String>>("prompt")?, r.get("response")?);
        Ok((row_object(r, &names)?, texts))
    })?;
    let mut messages = Vec::new();
    for response in responses {
        let (row, (prompt, reply)) = response?;
        messages.extend(response_messages(conn, row, prompt, reply)?);
    }
    Ok(Some(session_document(conversation, messages)))
}

/// One response's messages, in the order they were sent and answered.
fn response_messages(
    conn: &Connection,
    row: Map<String, Value>,
    prompt: Option<String>,
    reply: Option<String>,
) -> rusqlite::Result<Vec<Value>> {
    let id = row.get("id").and_then(Value::as_str).unwrap_or_default();
    let at = row.get("datetime_utc").cloned().unwrap_or(Value::Null);
    let message = |key: String, role: &str, parts: Vec<Value>| json!({"hash": key, "role": role, "parts": parts, "datetime_utc": at});
    let mut messages = Vec::new();
    let results = tool_parts(conn, "tool_results", "output", "tool_result", id)?;
    if !results.is_empty() {
        messages.push(message(format!("{id}:results"), "tool", results));
    }
    if let Some(prompt) = prompt.filter(|p| !p.is_empty()) {
        let text = json!({"type": "text", "text": prompt});
        messages.push(message(format!("{id}:prompt"), "user", vec![text]));
    }
    let mut parts: Vec<Value> = (reply.filter(|r| !r.is_empty()).into_iter())
        .map(|text| json!({"type": "text", "text": text}))
        .collect();
    parts.extend(tool_parts(
        conn,
        "tool_calls",
        "arguments",
        "tool_call",
        id,
    )?);
    let mut reply = message(id.to_owned(), "assistant", parts);
    let turn = [
        "id",
        "model",
        "resolved_model",
        "input_tokens",
        "output_tokens",
        "token_details",
    ];
    let turn: Map<String, Value> = (turn.iter())
        .filter_map(|k| Some((k.to_string(), row.get(*k)?.clone())))
        .collect();
    reply["turn"] = Value::Object(turn);
    messages.push(reply);
    Ok(messages)
}

/// The rows of `table` (`tool_calls` or `tool_results`) of response `id`, as parts of `kind`
/// whose payload holds `field` (the call's arguments, the result's output).
fn tool_parts(
    conn: &Connection,
    table: &str,
    field: &str,
    kind: &str,
    id: &str,
) -> rusqlite::Result<Vec<Value>> {
    // Releases before 0.26 had no tools, nor these tables.
    if !super::has_tables(conn, &[table])? {
        return Ok(Vec::new());
    }
    let sql = format!("SELECT name, {field} FROM {table} WHERE response_id = ?1 ORDER BY id");
    let mut stmt = conn.prepare_cached(&sql)?;
    let parts = stmt.query_map([id], |r| {
        let name: Option<String> = r.get(0)?;
        let value: Option<String> = r.get(1)?;
        // Arguments are JSON; an output is the tool's text as it returned it.
        let value: Value = match field {
            "arguments" => value
                .as_deref()
                .and_then(|v| serde_json::from_str::<Value>(v).ok())
                .unwrap_or_else(|| value.clone().into()),
            _ => value.into(),
        };
        Ok(json!({"type": kind, "tool_name": name, "payload": {field: value}}))
    })?;
    parts.collect()
}
