//! The conversation's messages: the user message of a turn, the prompt the agent is told, what a
//! paused turn waits for, and the tool calls a crash left without a result.
//!
//! Messages are `UIMessage`s as JSON objects; everything here checks their shape first, so that a
//! malformed message gets a [`SessionError::Input`] naming the field, and changes nothing.

use serde_json::{json, Map, Value};

use crate::engine::error::{Result, SessionError};
use crate::engine::session::{PendingApproval, PendingInput, PendingToolCall, StoredMessage};

/// The deepest nesting a message or metadata value may have.
pub const MAX_DEPTH: usize = 64;

/// The user message of a turn, from what `send()` was given: a text, or a `UIMessage`.
///
/// # Errors
/// [`SessionError::Input`] naming the field at fault when `message` is neither.
pub fn user_message(message: &Value, new_id: impl FnOnce() -> String) -> Result<Value> {
    match message {
        Value::String(text) => Ok(json!({
            "id": new_id(),
            "role": "user",
            "parts": [{ "type": "text", "text": text }],
        })),
        Value::Object(object) => {
            check_message(object, "message")?;
            match object.get("role").and_then(Value::as_str) {
                Some("user") => {}
                _ => {
                    return Err(SessionError::input(
                        "message.role",
                        "message.role must be \"user\": send() takes the user's message",
                    ))
                }
            }
            let mut message = object.clone();
            if !matches!(message.get("id"), Some(Value::String(id)) if !id.is_empty()) {
                message.insert("id".into(), Value::String(new_id()));
            }
            Ok(Value::Object(message))
        }
        _ => Err(SessionError::input(
            "message",
            "message must be a string or a UIMessage object",
        )),
    }
}

/// Checks the shape of a `UIMessage`: an object with a string `id`, a `role`, and `parts`, an
/// array of objects each with a string `type`.
///
/// # Errors
/// [`SessionError::Input`] naming the field at fault.
pub fn check_message(message: &Map<String, Value>, path: &str) -> Result<()> {
    if let Some(id) = message.get("id") {
        if !id.is_string() {
            return Err(SessionError::input(
                format!("{path}.id"),
                format!("{path}.id must be a string"),
            ));
        }
    }
    match message.get("role") {
        Some(Value::String(role)) if matches!(role.as_str(), "user" | "assistant" | "system") => {}
        _ => {
            return Err(SessionError::input(
                format!("{path}.role"),
                format!("{path}.role must be \"user\", \"assistant\" or \"system\""),
            ))
        }
    }
    let Some(Value::Array(parts)) = message.get("parts") else {
        return Err(SessionError::input(
            format!("{path}.parts"),
            format!("{path}.parts must be an array"),
        ));
    };
    for (index, part) in parts.iter().enumerate() {
        let here = format!("{path}.parts[{index}]");
        let Value::Object(part) = part else {
            return Err(SessionError::input(
                &here,
                format!("{here} must be an object"),
            ));
        };
        if !matches!(part.get("type"), Some(Value::String(_))) {
            return Err(SessionError::input(
                format!("{here}.type"),
                format!("{here}.type must be a string"),
            ));
        }
        if part.get("type").and_then(Value::as_str) == Some("text")
            && !matches!(part.get("text"), Some(Value::String(_)))
        {
            return Err(SessionError::input(
                format!("{here}.text"),
                format!("{here}.text must be a string"),
            ));
        }
    }
    check_depth(&Value::Object(message.clone()), path)
}

/// Refuses values nested deeper than [`MAX_DEPTH`].
///
/// # Errors
/// [`SessionError::Input`] at `path`.
pub fn check_depth(value: &Value, path: &str) -> Result<()> {
    fn depth(value: &Value, level: usize) -> bool {
        if level > MAX_DEPTH {
            return false;
        }
        match value {
            Value::Array(items) => items.iter().all(|v| depth(v, level + 1)),
            Value::Object(map) => map.values().all(|v| depth(v, level + 1)),
            _ => true,
        }
    }
    if depth(value, 0) {
        Ok(())
    } else {
        Err(SessionError::input(
            path,
            format!("{path} is nested more than {MAX_DEPTH} levels deep"),
        ))
    }
}

/// What the agent is told of a user message: its text parts, joined by blank lines.
pub fn prompt_of(message: &Value) -> String {
    message
        .get("parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n\n")
        })
        .unwrap_or_default()
}

/// Puts `message` in the conversation: in place of the message with its id, dropping what came
/// after it (the conversation goes on from there, as `useChat` shows it), or at the end.
pub fn put_user_message(messages: &mut Vec<StoredMessage>, message: &Value) {
    let id = message.get("id").and_then(Value::as_str);
    let known = id.and_then(|id| messages.iter().position(|m| m.id().as_deref() == Some(id)));
    if let Some(index) = known {
        messages.truncate(index);
    }
    messages.push(StoredMessage::from_value(message));
}

/// The name of a tool part's tool: `tool-<name>` parts, or `dynamic-tool` ones with `toolName`.
pub fn tool_name(part: &Map<String, Value>) -> Option<String> {
    let kind = part.get("type")?.as_str()?;
    if kind == "dynamic-tool" {
        return part.get("toolName")?.as_str().map(str::to_owned);
    }
    kind.strip_prefix("tool-").map(str::to_owned)
}

/// What a turn that ended with `message` (the assistant's) waits for: its tool calls waiting for
/// an approval, and those of tools the application runs, still without an output. An approved
/// call of such a tool waits for its output only when the turn `paused` (`HarnessAgent` pauses
/// again, silently, after approving a tool that has no `execute`).
pub fn pending_input_of(message: &Value, paused: bool) -> PendingInput {
    let mut pending = PendingInput::default();
    let Some(parts) = message.get("parts").and_then(Value::as_array) else {
        return pending;
    };
    for part in parts.iter().filter_map(Value::as_object) {
        let Some(name) = tool_name(part) else {
            continue;
        };
        let call_id = part
            .get("toolCallId")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let input = part.get("input").cloned().unwrap_or(Value::Null);
        match part.get("state").and_then(Value::as_str) {
            Some("approval-requested") => {
                let approval_id = part
                    .get("approval")
                    .and_then(|a| a.get("id"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                pending.approvals.push(PendingApproval {
                    approval_id: approval_id.to_owned(),
                    tool_call_id: call_id.to_owned(),
                    tool_name: name,
                    input,
                    decision: None,
                    extra: Default::default(),
                });
            }
            Some("input-available") if !provider_executed(part) => {
                pending.tool_calls.push(PendingToolCall {
                    tool_call_id: call_id.to_owned(),
                    tool_name: name,
                    input,
                    extra: Default::default(),
                });
            }
            // An approved call of a tool the application runs waits for its output.
            Some("approval-responded") if paused && approved(part) && !provider_executed(part) => {
                pending.tool_calls.push(PendingToolCall {
                    tool_call_id: call_id.to_owned(),
                    tool_name: name,
                    input,
                    extra: Default::default(),
                });
            }
            _ => {}
        }
    }
    pending
}

fn provider_executed(part: &Map<String, Value>) -> bool {
    part.get("providerExecuted").and_then(Value::as_bool) == Some(true)
}

fn approved(part: &Map<String, Value>) -> bool {
    part.get("approval")
        .and_then(|a| a.get("approved"))
        .and_then(Value::as_bool)
        == Some(true)
}

/// The words of a turn whose caller aborted it (its `abortSignal`).
pub const TURN_ABORTED: &str = "The turn was aborted.";

/// Marks `message`, the reply of a turn cut short, as cut: its text and reasoning cut
/// mid-stream are `done`, and its metadata carry `cut: <reason>` (kept with any metadata it
/// has). Does nothing to a message that is not an object.
pub fn mark_cut(message: &mut Value, reason: &str) {
    let Some(object) = message.as_object_mut() else {
        return;
    };
    if let Some(parts) = object.get_mut("parts").and_then(Value::as_array_mut) {
        for part in parts.iter_mut().filter_map(Value::as_object_mut) {
            let kind = part.get("type").and_then(Value::as_str);
            if matches!(kind, Some("text" | "reasoning"))
                && part.get("state").and_then(Value::as_str) == Some("streaming")
            {
                part.insert("state".into(), json!("done"));
            }
        }
    }
    match object.get_mut("metadata") {
        Some(Value::Object(metadata)) => {
            metadata.insert("cut".into(), json!(reason));
        }
        _ => {
            object.insert("metadata".into(), json!({ "cut": reason }));
        }
    }
}

/// The `message-metadata` chunk that tells a reader its reply was cut short for `reason`.
pub fn cut_chunk(reason: &str) -> Option<crate::engine::ui::UiChunk> {
    crate::engine::ui::UiChunk::from_value(json!({
        "type": "message-metadata",
        "messageMetadata": { "cut": reason },
    }))
    .ok()
}

/// Adds the usage of a turn to the session's: every number summed, field by field.
pub fn add_usage(total: Option<Value>, turn: &Value) -> Option<Value> {
    fn add(total: &mut Value, turn: &Value) {
        match (total, turn) {
            (Value::Object(total), Value::Object(turn)) => {
                for (key, value) in turn {
                    if key == "raw" {
                        continue;
                    }
                    match total.get_mut(key) {
                        Some(existing) => add(existing, value),
                        None if value.is_number() || value.is_object() => {
                            total.insert(key.clone(), value.clone());
                        }
                        None => {}
                    }
                }
            }
            (total @ Value::Number(_), Value::Number(n)) => {
                let sum = total.as_f64().unwrap_or(0.0) + n.as_f64().unwrap_or(0.0);
                *total = if sum.fract() == 0.0 && sum.abs() < 9e15 {
                    json!(sum as i64)
                } else {
                    json!(sum)
                };
            }
            _ => {}
        }
    }
    if !turn.is_object() {
        return total;
    }
    let mut total = total.unwrap_or_else(|| json!({}));
    add(&mut total, turn);
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_becomes_a_user_message() {
        let message = user_message(&json!("hi"), || "u1".into()).unwrap();
        assert_eq!(
            message,
            json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
        );
        assert_eq!(prompt_of(&message), "hi");
    }

    #[test]
    fn malformed_messages_name_the_field() {
        let cases = [
            (json!(3), "message"),
            (json!({"role": "user"}), "message.parts"),
            (json!({"role": "assistant", "parts": []}), "message.role"),
            (json!({"role": "user", "parts": [1]}), "message.parts[0]"),
            (
                json!({"role": "user", "parts": [{"type": "text"}]}),
                "message.parts[0].text",
            ),
            (json!({"id": 4, "role": "user", "parts": []}), "message.id"),
        ];
        for (message, path) in cases {
            match user_message(&message, || "x".into()) {
                Err(SessionError::Input { path: got, .. }) => assert_eq!(got, path, "{message}"),
                other => panic!("{message}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_message_with_a_known_id_replaces_it_and_what_follows() {
        let mut messages: Vec<StoredMessage> = vec![
            json!({"id": "a"}).into(),
            json!({"id": "b"}).into(),
            json!({"id": "c"}).into(),
        ];
        put_user_message(&mut messages, &json!({"id": "b", "new": true}));
        let values: Vec<Value> = messages.iter().map(StoredMessage::to_value).collect();
        assert_eq!(
            values,
            vec![json!({"id": "a"}), json!({"id": "b", "new": true})]
        );
        put_user_message(&mut messages, &json!({"id": "d"}));
        assert_eq!(messages.len(), 3);
    }

    #[test]
    fn pending_input_is_read_from_the_tool_parts() {
        let message = json!({"id": "m", "role": "assistant", "parts": [
            {"type": "tool-write", "toolCallId": "c1", "state": "approval-requested", "input": {"p": 1}, "approval": {"id": "a1"}},
            {"type": "dynamic-tool", "toolName": "ask", "toolCallId": "c2", "state": "input-available", "input": {}},
            {"type": "tool-read", "toolCallId": "c3", "state": "output-available", "input": {}, "output": 1},
            {"type": "tool-bash", "toolCallId": "c4", "state": "input-available", "input": {}, "providerExecuted": true},
        ]});
        let pending = pending_input_of(&message, true);
        assert_eq!(pending.approvals.len(), 1);
        assert_eq!(pending.approvals[0].approval_id, "a1");
        assert_eq!(pending.approvals[0].tool_name, "write");
        assert_eq!(pending.tool_calls.len(), 1);
        assert_eq!(pending.tool_calls[0].tool_name, "ask");
    }

    #[test]
    fn a_cut_reply_is_closed_and_carries_its_reason() {
        let mut message = json!({"id": "m", "role": "assistant", "metadata": {"a": 1}, "parts": [
            {"type": "reasoning", "text": "hm", "state": "streaming"},
            {"type": "text", "text": "half", "state": "streaming"},
            {"type": "text", "text": "whole", "state": "done"},
        ]});
        mark_cut(&mut message, TURN_ABORTED);
        assert_eq!(message["parts"][0]["state"], "done");
        assert_eq!(message["parts"][1]["state"], "done");
        assert_eq!(message["metadata"], json!({"a": 1, "cut": TURN_ABORTED}));
        let mut bare = json!({"id": "m", "role": "assistant", "parts": []});
        mark_cut(&mut bare, "x");
        assert_eq!(bare["metadata"], json!({"cut": "x"}));
        let chunk = cut_chunk("x").expect("a chunk");
        assert_eq!(chunk.type_name(), "message-metadata");
    }

    #[test]
    fn usage_is_summed_field_by_field() {
        let a = json!({"inputTokens": 3, "outputTokens": 4, "inputTokenDetails": {"cacheReadTokens": 1}, "raw": {"x": 1}});
        let total = add_usage(None, &a);
        let total = add_usage(total, &a).unwrap();
        assert_eq!(
            total,
            json!({"inputTokens": 6, "outputTokens": 8, "inputTokenDetails": {"cacheReadTokens": 2}})
        );
    }

    #[test]
    fn deep_nesting_is_refused() {
        let mut value = json!(1);
        for _ in 0..100 {
            value = json!([value]);
        }
        assert!(check_depth(&value, "metadata").is_err());
    }
}
