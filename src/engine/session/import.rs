//! Imported conversations: `create({ initialHistory })` in the portable format of OpenWorker
//! (`{ type: 'user' | 'assistant', text }`, `{ type: 'tool_call', callId, name, arguments }`,
//! `{ type: 'tool_result', callId, output }`), checked whole and turned into the session's
//! `UIMessage`s, and the words that give it to the agent with the first turn.
//!
//! Pure: nothing here touches a store or an agent. [`read_history`] refuses a transcript that
//! breaks any rule with a [`SessionError::Input`] naming the item (`initialHistory[3].arguments`)
//! and the rule, so that a refused import changes nothing. The rules:
//!
//! - a nonempty transcript starts with a user item;
//! - every tool call has exactly one result after it, before the next user item; every result
//!   follows its call; no two calls share a `callId`;
//! - `arguments` are objects; `callId` and `name` are nonempty strings of at most
//!   [`MOST_ID_BYTES`] bytes; items have no fields but their type's;
//! - at most [`MOST_ITEMS`] items, [`MOST_ITEM_BYTES`] UTF-8 bytes per text, arguments or output
//!   (arguments and a non-string output measured as compact JSON text, a string output as its
//!   text), [`MOST_TOTAL_BYTES`] for all of them together, and [`MOST_NESTING`] levels of nesting
//!   in arguments and outputs (the arguments object itself is the first level).
//!
//! Imported calls are history: they become tool parts with their output (`output-available`),
//! the shape a `HarnessAgent` turn writes, and never run.

use std::collections::{BTreeMap, HashMap};

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::record::{nesting, StoredMessage};
use crate::engine::error::{Result, SessionError};

/// The most items a transcript may hold.
pub const MOST_ITEMS: usize = 256;
/// The most UTF-8 bytes of one text, arguments or output.
pub const MOST_ITEM_BYTES: usize = 256_000;
/// The most UTF-8 bytes of every text, arguments and output of a transcript together.
pub const MOST_TOTAL_BYTES: usize = 512_000;
/// The deepest nesting of arguments and outputs.
pub const MOST_NESTING: usize = 32;
/// The longest `callId` or tool `name`, in UTF-8 bytes.
pub const MOST_ID_BYTES: usize = 512;

/// The field of a record that marks a session holding an imported conversation its agent was not
/// given yet (`true`; absent otherwise). A field the reference does not know, kept by every store.
pub const IMPORT_PENDING: &str = "importPending";

/// Where the transcript is, in the errors' paths.
const PATH: &str = "initialHistory";

/// One item of the transcript, checked.
enum Item {
    User(String),
    Assistant(String),
    Call {
        call_id: String,
        name: String,
        arguments: Value,
    },
    Result {
        call_id: String,
        output: Value,
    },
}

/// Checks the whole transcript `items` and turns it into `UIMessage`s, the `n`th message created
/// taking the `n`th of `message_ids` (one id per item is always enough).
///
/// # Errors
/// [`SessionError::Input`] naming the first item at fault and the rule it breaks.
pub fn read_history(items: &[Box<RawValue>], message_ids: &[String]) -> Result<Vec<StoredMessage>> {
    if items.len() > MOST_ITEMS {
        return Err(refused(
            MOST_ITEMS,
            None,
            format!("a transcript holds at most {MOST_ITEMS} items"),
        ));
    }
    let mut total = 0usize;
    let mut checked = Vec::with_capacity(items.len());
    for (index, raw) in items.iter().enumerate() {
        let (item, bytes) = read_item(index, raw)?;
        total += bytes;
        if total > MOST_TOTAL_BYTES {
            return Err(refused(
                index,
                None,
                format!(
                    "the texts, arguments and outputs of a transcript come to at most \
                     {MOST_TOTAL_BYTES} bytes in all"
                ),
            ));
        }
        checked.push(item);
    }
    check_order(&checked)?;
    to_messages(&checked, message_ids)
}

/// An item, with the bytes it counts towards the transcript's total.
fn read_item(index: usize, raw: &RawValue) -> Result<(Item, usize)> {
    let fields: BTreeMap<String, Box<RawValue>> = serde_json::from_str(raw.get())
        .map_err(|_| refused(index, None, "an item must be an object"))?;
    let kind = match fields
        .get("type")
        .map(|t| serde_json::from_str::<String>(t.get()))
    {
        Some(Ok(kind)) => kind,
        _ => {
            return Err(refused(
                index,
                Some("type"),
                "type must be \"user\", \"assistant\", \"tool_call\" or \"tool_result\"",
            ))
        }
    };
    let allowed: &[&str] = match kind.as_str() {
        "user" | "assistant" => &["type", "text"],
        "tool_call" => &["type", "callId", "name", "arguments"],
        "tool_result" => &["type", "callId", "output"],
        _ => {
            return Err(refused(
                index,
                Some("type"),
                "type must be \"user\", \"assistant\", \"tool_call\" or \"tool_result\"",
            ))
        }
    };
    if let Some(other) = fields.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(refused(
            index,
            Some(other),
            format!(
                "a {kind} item has no field {other:?}: only {}",
                allowed.join(", ")
            ),
        ));
    }
    let field = |name: &str| fields.get(name).map(|raw| raw.get());
    match kind.as_str() {
        "user" | "assistant" => {
            let text = text_of(index, field("text"))?;
            let bytes = text.len();
            let item = if kind == "user" {
                Item::User(text)
            } else {
                Item::Assistant(text)
            };
            Ok((item, bytes))
        }
        "tool_call" => {
            let call_id = id_of(index, "callId", field("callId"))?;
            let name = id_of(index, "name", field("name"))?;
            let (arguments, bytes) = json_of(index, "arguments", field("arguments"))?;
            if !arguments.is_object() {
                return Err(refused(
                    index,
                    Some("arguments"),
                    "the arguments of a tool call must be an object",
                ));
            }
            let item = Item::Call {
                call_id,
                name,
                arguments,
            };
            Ok((item, bytes))
        }
        _ => {
            let call_id = id_of(index, "callId", field("callId"))?;
            let (output, bytes) = json_of(index, "output", field("output"))?;
            Ok((Item::Result { call_id, output }, bytes))
        }
    }
}

/// A `text`: a string of well-formed text, of at most [`MOST_ITEM_BYTES`] bytes.
fn text_of(index: usize, raw: Option<&str>) -> Result<String> {
    let text = raw
        .and_then(|raw| serde_json::from_str::<String>(raw).ok())
        .ok_or_else(|| {
            let rule = if raw.is_some_and(|raw| raw.starts_with('"')) {
                "text must be well-formed text (it holds a lone surrogate)"
            } else {
                "text must be a string"
            };
            refused(index, Some("text"), rule)
        })?;
    if text.len() > MOST_ITEM_BYTES {
        return Err(refused(
            index,
            Some("text"),
            format!("a text is at most {MOST_ITEM_BYTES} UTF-8 bytes"),
        ));
    }
    Ok(text)
}

/// A `callId` or `name`: a nonempty string of at most [`MOST_ID_BYTES`] bytes.
fn id_of(index: usize, field: &str, raw: Option<&str>) -> Result<String> {
    match raw.and_then(|raw| serde_json::from_str::<String>(raw).ok()) {
        Some(id) if !id.is_empty() && id.len() <= MOST_ID_BYTES => Ok(id),
        _ => Err(refused(
            index,
            Some(field),
            format!("{field} must be a nonempty string of at most {MOST_ID_BYTES} UTF-8 bytes"),
        )),
    }
}

/// `arguments` or `output`: any JSON (its nesting checked on the text, before it is read into
/// values), with its size: a string's text, anything else's compact JSON text.
fn json_of(index: usize, field: &str, raw: Option<&str>) -> Result<(Value, usize)> {
    let raw = raw.ok_or_else(|| refused(index, Some(field), format!("{field} is missing")))?;
    if nesting(raw) > MOST_NESTING {
        return Err(refused(
            index,
            Some(field),
            format!("{field} is nested at most {MOST_NESTING} levels deep"),
        ));
    }
    let value: Value = serde_json::from_str(raw)
        .map_err(|_| refused(index, Some(field), format!("{field} must be JSON")))?;
    let bytes = match &value {
        Value::String(text) => text.len(),
        other => serde_json::to_string(other).map_or(usize::MAX, |text| text.len()),
    };
    if bytes > MOST_ITEM_BYTES {
        return Err(refused(
            index,
            Some(field),
            format!("{field} is at most {MOST_ITEM_BYTES} UTF-8 bytes (as JSON text)"),
        ));
    }
    Ok((value, bytes))
}

/// The rules of order: a user item first; each call answered once, after it and before the next
/// user item; call ids unique.
fn check_order(items: &[Item]) -> Result<()> {
    if items
        .first()
        .is_some_and(|item| !matches!(item, Item::User(_)))
    {
        return Err(refused(
            0,
            Some("type"),
            "a transcript starts with a user item",
        ));
    }
    // Each call id seen: the index of its call, and whether it has its result.
    let mut calls: HashMap<&str, (usize, bool)> = HashMap::new();
    let mut unanswered: Vec<usize> = Vec::new();
    let no_result = |call: usize, id: &str| {
        refused(
            call,
            None,
            format!(
                "the tool call {id:?} has no result: every call has exactly one result after \
                 it, before the next user item"
            ),
        )
    };
    for (index, item) in items.iter().enumerate() {
        match item {
            Item::User(_) => {
                if let Some(&call) = unanswered.first() {
                    let Item::Call { call_id, .. } = &items[call] else {
                        unreachable!("only calls are unanswered");
                    };
                    return Err(no_result(call, call_id));
                }
            }
            Item::Assistant(_) => {}
            Item::Call { call_id, .. } => {
                if let Some((first, _)) = calls.get(call_id.as_str()) {
                    return Err(refused(
                        index,
                        Some("callId"),
                        format!("the call id {call_id:?} is already the id of item {first}"),
                    ));
                }
                calls.insert(call_id, (index, false));
                unanswered.push(index);
            }
            Item::Result { call_id, .. } => match calls.get_mut(call_id.as_str()) {
                Some((call, answered @ false)) => {
                    *answered = true;
                    let call = *call;
                    unanswered.retain(|&c| c != call);
                }
                Some((call, true)) => {
                    return Err(refused(
                        index,
                        Some("callId"),
                        format!("the tool call {call_id:?} (item {call}) has a result already"),
                    ))
                }
                None => {
                    return Err(refused(
                        index,
                        Some("callId"),
                        format!(
                            "a tool result follows its call: no tool call {call_id:?} before it"
                        ),
                    ))
                }
            },
        }
    }
    if let Some(&call) = unanswered.first() {
        let Item::Call { call_id, .. } = &items[call] else {
            unreachable!("only calls are unanswered");
        };
        return Err(no_result(call, call_id));
    }
    Ok(())
}

/// The `UIMessage`s of a checked transcript: each user item a user message; the assistant items
/// and tool calls between two user items one assistant message, a new step (`step-start`) after
/// tool results, each call a `tool-<name>` part holding its output.
fn to_messages(items: &[Item], message_ids: &[String]) -> Result<Vec<StoredMessage>> {
    let mut messages: Vec<Value> = Vec::new();
    // The assistant message being written, as an index of `messages`, and whether its last step
    // ended with tool results (the next text or call starts a step).
    let mut assistant: Option<usize> = None;
    let mut step_over = false;
    // Where each call's part is: (message, part).
    let mut parts_of: HashMap<&str, (usize, usize)> = HashMap::new();
    let mut next_id = {
        let mut ids = message_ids.iter();
        move || {
            ids.next().cloned().ok_or_else(|| {
                SessionError::internal("an imported transcript had fewer message ids than messages")
            })
        }
    };
    for item in items {
        let part = match item {
            Item::User(text) => {
                assistant = None;
                messages.push(json!({
                    "id": next_id()?,
                    "role": "user",
                    "parts": [{ "type": "text", "text": text }],
                }));
                continue;
            }
            Item::Result { call_id, output } => {
                let &(message, part) = parts_of
                    .get(call_id.as_str())
                    .ok_or_else(|| SessionError::internal("a checked result had no call"))?;
                if let Some(part) = messages[message]["parts"].get_mut(part) {
                    part["state"] = json!("output-available");
                    part["output"] = output.clone();
                }
                step_over = true;
                continue;
            }
            Item::Assistant(text) => json!({ "type": "text", "text": text, "state": "done" }),
            Item::Call {
                call_id,
                name,
                arguments,
            } => json!({
                "type": format!("tool-{name}"),
                "toolCallId": call_id,
                "state": "input-available",
                "input": arguments,
            }),
        };
        let message = match assistant {
            Some(message) => message,
            None => {
                messages.push(json!({
                    "id": next_id()?,
                    "role": "assistant",
                    "parts": [{ "type": "step-start" }],
                }));
                step_over = false;
                messages.len() - 1
            }
        };
        assistant = Some(message);
        let Some(parts) = messages[message]["parts"].as_array_mut() else {
            return Err(SessionError::internal("an assistant message had no parts"));
        };
        if step_over {
            parts.push(json!({ "type": "step-start" }));
            step_over = false;
        }
        parts.push(part);
        if let Item::Call { call_id, .. } = item {
            parts_of.insert(call_id, (message, parts.len() - 1));
        }
    }
    Ok(messages.iter().map(StoredMessage::from_value).collect())
}

/// The error of item `index` (its `field`, if one is at fault) breaking `rule`.
fn refused(index: usize, field: Option<&str>, rule: impl Into<String>) -> SessionError {
    let path = match field {
        Some(field) => format!("{PATH}[{index}].{field}"),
        None => format!("{PATH}[{index}]"),
    };
    let rule = rule.into();
    SessionError::input(&path, format!("{path}: {rule}"))
}

/// What the agent is told with the first turn of a session that holds an imported conversation:
/// that conversation, `messages`, as a transcript it can read, then `prompt`.
pub fn with_transcript(messages: &[StoredMessage], prompt: &str) -> String {
    let mut lines = Vec::new();
    for message in messages {
        let message = message.to_value();
        let speaker = match message.get("role").and_then(Value::as_str) {
            Some("user") => "User",
            Some("assistant") => "Assistant",
            _ => continue,
        };
        let Some(parts) = message.get("parts").and_then(Value::as_array) else {
            continue;
        };
        for part in parts {
            if let Some(line) = transcript_line(speaker, part) {
                lines.push(line);
            }
        }
    }
    if lines.is_empty() {
        return prompt.to_owned();
    }
    format!(
        "<imported-conversation>\nThe conversation so far, imported from elsewhere (its tool calls \
         ran then; do not run them again):\n\n{}\n</imported-conversation>\n\n{prompt}",
        lines.join("\n")
    )
}

/// One line of the transcript: a text part, or a tool call with its result.
fn transcript_line(speaker: &str, part: &Value) -> Option<String> {
    let kind = part.get("type").and_then(Value::as_str)?;
    if kind == "text" {
        let text = part.get("text").and_then(Value::as_str)?;
        return Some(format!("{speaker}: {text}"));
    }
    let name = match kind {
        "dynamic-tool" => part.get("toolName").and_then(Value::as_str)?,
        _ => kind.strip_prefix("tool-")?,
    };
    let input = compact(part.get("input").unwrap_or(&Value::Null));
    let result = match (part.get("output"), part.get("errorText")) {
        (Some(output), _) => compact(output),
        (None, Some(Value::String(error))) => format!("error: {error}"),
        _ => "no result".to_owned(),
    };
    Some(format!("Tool call {name}({input}) → {result}"))
}

/// A value as the transcript shows it: a string as its text, anything else as compact JSON.
fn compact(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Marks `extra` (a record's fields the reference does not know) as holding an imported
/// conversation the agent was not given yet, or clears the mark.
pub fn mark_pending(extra: &mut Map<String, Value>, pending: bool) {
    if pending {
        extra.insert(IMPORT_PENDING.to_owned(), Value::Bool(true));
    } else {
        extra.remove(IMPORT_PENDING);
    }
}

/// Whether `extra` marks an imported conversation the agent was not given yet.
pub fn is_pending(extra: &Map<String, Value>) -> bool {
    extra.get(IMPORT_PENDING) == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests;
