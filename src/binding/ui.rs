//! The UI message stream code of the engine, exposed for the differential tests against the real
//! `ai` package: building a message from chunks as `readUIMessageStream` does.
//!
//! It takes and gives JSON text, so that what JavaScript compares is exactly what Rust produced.

// In a test build the exports have no caller: napi registers them only in the addon.
#![cfg_attr(test, allow(dead_code))]

use napi::Env;
use napi_derive::napi;
use serde_json::{json, Value};

use super::error::guard_sync;
use crate::engine::error::SessionError;
use crate::engine::ui::{to_json, Changed, MessageAccumulator, UiChunk};

/// Reads `chunks_json`, a JSON array of chunk objects, into chunks; `path` names the argument.
fn parse_chunks(chunks_json: &str, path: &str) -> Result<Vec<UiChunk>, SessionError> {
    let values: Vec<Value> = serde_json::from_str(chunks_json)
        .map_err(|e| SessionError::input(path, format!("{path} is not a json array: {e}")))?;
    values
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            UiChunk::from_value(value).map_err(|e| {
                SessionError::input(format!("{path}[{i}]"), format!("{path}[{i}]: {e}"))
            })
        })
        .collect()
}

fn json_text(value: &Value) -> Result<String, SessionError> {
    to_json(value).map_err(|e| SessionError::internal(format!("cannot write json: {e}")))
}

/// Builds the assistant message from UI message chunks as `readUIMessageStream` of `ai` does.
///
/// `inputMessageJson` is the message the stream continues (JSON, or `null`); `chunksJson` a JSON
/// array of chunks. Returns JSON `{ message, errors, snapshotCount, snapshots? }`: `message` is
/// the last message the reader yields (`null` if none), `errors` the texts it reports, in order,
/// and `snapshots` (with `withSnapshots`) every message it yields.
#[napi]
pub fn accumulate_ui_message(
    env: Env,
    input_message_json: Option<String>,
    chunks_json: String,
    with_snapshots: Option<bool>,
) -> napi::Result<String> {
    guard_sync(&env, || {
        let input = match input_message_json.as_deref() {
            None => None,
            Some(text) => Some(serde_json::from_str::<Value>(text).map_err(|e| {
                SessionError::input(
                    "inputMessageJson",
                    format!("inputMessageJson is not json: {e}"),
                )
            })?)
            .filter(|m| !m.is_null()),
        };
        let chunks = parse_chunks(&chunks_json, "chunksJson")?;
        let with_snapshots = with_snapshots.unwrap_or(false);
        let mut accumulator = MessageAccumulator::new(input, None);
        let mut snapshots = Vec::new();
        for chunk in &chunks {
            if let Ok(Changed::Snapshot) = accumulator.push(chunk) {
                if with_snapshots {
                    snapshots.push(accumulator.last_snapshot().unwrap_or(Value::Null));
                }
            }
        }
        let errors: Vec<String> = accumulator
            .errors()
            .iter()
            .map(ToString::to_string)
            .collect();
        let mut result = json!({
            "message": accumulator.last_snapshot(),
            "errors": errors,
            "snapshotCount": accumulator.snapshot_count(),
        });
        if with_snapshots {
            result["snapshots"] = Value::Array(snapshots);
        }
        json_text(&result)
    })
}

/// Checks the JSON text of one chunk of an agent's stream before any client is sent it: `null`
/// when the engine takes it as it is, else what is wrong with it (not JSON, nested past
/// `MAX_CHUNK_DEPTH`, a field of the wrong type). The turn's pump (`js/chunks.js`) asks it of every
/// chunk but the plain deltas, so that the client and the stored reply agree chunk for chunk.
#[napi]
pub fn check_chunk(chunk_json: String) -> Option<String> {
    UiChunk::check_json(&chunk_json).err()
}
