//! The assistant `UIMessage` built from UI message chunks, exactly as `readUIMessageStream` of `ai`
//! 7.0.112 builds it (`process-ui-message-stream.ts`).
//!
//! The message and its parts are `serde_json` objects handled the way the JavaScript code handles
//! its objects, so the JSON matches the real reader's, key order included:
//! - a key JavaScript assigns `undefined` is absent from the JSON but keeps its place, and comes
//!   back there when a value is assigned later (the `Ghosts` of a part);
//! - a new key is appended; an assigned existing key stays where it is.
//!
//! Invariants, kept by every mutation: `message` is an object whose `parts` is an array of
//! objects with a string `type`; `ghosts` runs parallel to `parts`; the indexes (open text and
//! reasoning blocks, tool parts by `toolCallId`, data parts by type and id, the start of the
//! current step) point into `parts`, and `reset-step`, the only removal, truncates them all.
//!
//! Each family of chunks is applied by a module of its own: [`text`] (text and reasoning), [`tools`]
//! (tool calls, approvals, outputs), [`data`] (data, sources, files, the message's own fields and
//! metadata), [`steps`]; [`object`] holds JavaScript's object semantics they all write with.
//!
//! Like the real reader, the accumulator stops at the first chunk it cannot apply (a delta
//! without its start, a tool result for an unknown call, ...): that error is recorded and later
//! chunks are ignored. An `error` chunk is recorded and reading goes on.

mod data;
mod object;
mod steps;
mod text;
mod tools;

use std::collections::HashMap;

use serde_json::{Map, Value};

use self::object::{assign, string, Ghosts, Literal};
use self::tools::{is_tool_type, PartialToolCall};
use super::chunk::UiChunk;

/// A chunk the reader cannot apply. The messages are word for word those of `ai`, which the
/// real reader reports and applications may match, hence their capitals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccumulateError {
    /// A `text-delta` or `text-end` for a text block that is not open in this stream.
    #[error(
        "Received {chunk_type} for missing text part with ID \"{id}\". Ensure a \"text-start\" chunk is sent before any \"{chunk_type}\" chunks."
    )]
    MissingTextPart {
        /// `text-delta` or `text-end`.
        chunk_type: &'static str,
        /// The block's id.
        id: String,
    },
    /// A `reasoning-delta` or `reasoning-end` for a reasoning block that is not open.
    #[error(
        "Received {chunk_type} for missing reasoning part with ID \"{id}\". Ensure a \"reasoning-start\" chunk is sent before any \"{chunk_type}\" chunks."
    )]
    MissingReasoningPart {
        /// `reasoning-delta` or `reasoning-end`.
        chunk_type: &'static str,
        /// The block's id.
        id: String,
    },
    /// A `tool-input-delta` for a call whose `tool-input-start` this stream has not seen.
    #[error(
        "Received tool-input-delta for missing tool call with ID \"{tool_call_id}\". Ensure a \"tool-input-start\" chunk is sent before any \"tool-input-delta\" chunks."
    )]
    MissingToolCall {
        /// The call's id.
        tool_call_id: String,
    },
    /// An approval request, output or denial for a call the message has no part for.
    #[error("No tool invocation found for tool call ID \"{tool_call_id}\".")]
    NoToolInvocation {
        /// The call's id.
        tool_call_id: String,
    },
    /// An approval response for an approval no tool part carries.
    #[error("No tool invocation found for approval ID \"{approval_id}\".")]
    NoApproval {
        /// The approval's id.
        approval_id: String,
    },
    /// Metadata that JavaScript cannot merge (the `TypeError` of `mergeObjects` when the message's
    /// metadata is a primitive): its message, as V8 words it.
    #[error("{message}")]
    Metadata {
        /// The `TypeError`'s message.
        message: String,
    },
    /// The message to continue is not an assistant `UIMessage` the reader can work on.
    #[error("the input message is not a ui message: {reason}")]
    InputMessage {
        /// What is wrong with it.
        reason: String,
    },
}

/// An error the reader reports, in the order it reports them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReaderError {
    /// An `error` chunk, with its `errorText`; reading goes on.
    Chunk(String),
    /// A chunk the reader could not apply; reading stopped there.
    Violation(AccumulateError),
}

impl std::fmt::Display for ReaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReaderError::Chunk(text) => f.write_str(text),
            ReaderError::Violation(error) => write!(f, "{error}"),
        }
    }
}

/// What a chunk did to the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Changed {
    /// Nothing (`finish-step`, `abort`, `error`, transient data, unknown chunks, ...).
    Unchanged,
    /// The message changed, but the real reader yields no snapshot for it (`start-step`): the
    /// change shows in the next one.
    Quietly,
    /// The message changed and the real reader yields a snapshot.
    Snapshot,
}

fn part_type(part: &Value) -> &str {
    part.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Builds the assistant `UIMessage` of a turn from its UI message chunks.
#[derive(Debug)]
pub struct MessageAccumulator {
    message: Value,
    message_ghosts: Ghosts,
    ghosts: Vec<Ghosts>,
    active_text: HashMap<String, usize>,
    active_reasoning: HashMap<String, usize>,
    partial_tool_calls: HashMap<String, PartialToolCall>,
    /// The index of the first part of the current step (after the last `step-start`).
    step_start: usize,
    /// Tool parts by `toolCallId`, ascending.
    tools: HashMap<String, Vec<usize>>,
    /// The first data part of each type and id.
    data: HashMap<String, HashMap<String, usize>>,
    finish_reason: Option<String>,
    errors: Vec<ReaderError>,
    halted: bool,
    snapshots: u64,
    /// `step-start` parts pushed since the last snapshot: the last ones of `parts`.
    unpublished_step_starts: usize,
    /// The parts of the message this one continues: those before the turn's own.
    input_parts: usize,
}

impl MessageAccumulator {
    /// An accumulator that continues `input_message` when it is an assistant message, and
    /// otherwise starts an empty one. The new message's id is `message_id_hint`, else the input
    /// message's id, else `""` (as `readUIMessageStream` does: `message?.id ?? ''`); a `start`
    /// chunk with a `messageId` replaces it.
    ///
    /// An assistant input message the reader cannot work on (see
    /// [`MessageAccumulator::try_new`]) gives an accumulator that starts a fresh message and is
    /// already halted, with the [`AccumulateError::InputMessage`] in its errors: the real reader
    /// would fail on its first chunk.
    pub fn new(input_message: Option<Value>, message_id_hint: Option<String>) -> Self {
        let (mut accumulator, invalid) = Self::build(input_message, message_id_hint);
        if let Some(error) = invalid {
            accumulator.halted = true;
            accumulator.errors.push(ReaderError::Violation(error));
        }
        accumulator
    }

    /// As [`MessageAccumulator::new`], refusing an input message the reader cannot work on.
    ///
    /// # Errors
    ///
    /// [`AccumulateError::InputMessage`] when an assistant input message has no `parts` array,
    /// or a part that is not an object with a string `type`.
    pub fn try_new(
        input_message: Option<Value>,
        message_id_hint: Option<String>,
    ) -> Result<Self, AccumulateError> {
        match Self::build(input_message, message_id_hint) {
            (accumulator, None) => Ok(accumulator),
            (_, Some(error)) => Err(error),
        }
    }

    /// The accumulator, and what is wrong with the input message if the reader cannot use it
    /// (the accumulator then starts a fresh message).
    fn build(
        input_message: Option<Value>,
        message_id_hint: Option<String>,
    ) -> (Self, Option<AccumulateError>) {
        let mut accumulator = MessageAccumulator {
            message: Value::Null,
            message_ghosts: Ghosts::default(),
            ghosts: Vec::new(),
            active_text: HashMap::new(),
            active_reasoning: HashMap::new(),
            partial_tool_calls: HashMap::new(),
            step_start: 0,
            tools: HashMap::new(),
            data: HashMap::new(),
            finish_reason: None,
            errors: Vec::new(),
            halted: false,
            snapshots: 0,
            unpublished_step_starts: 0,
            input_parts: 0,
        };
        let mut invalid = None;
        if let Some(Value::Object(map)) = &input_message {
            if map.get("role").and_then(Value::as_str) == Some("assistant") {
                invalid = match map.get("parts") {
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .position(|part| !matches!(part.get("type"), Some(Value::String(_))))
                        .map(|index| {
                            format!("`parts[{index}]` must be an object with a string `type`")
                        }),
                    _ => Some("`parts` must be an array".to_owned()),
                };
                if invalid.is_none() {
                    if let Some(Value::Object(map)) = input_message {
                        let parts = map
                            .get("parts")
                            .and_then(Value::as_array)
                            .map_or(0, Vec::len);
                        accumulator.ghosts = vec![Ghosts::default(); parts];
                        accumulator.input_parts = parts;
                        accumulator.message = Value::Object(map);
                        accumulator.index_input_parts();
                    }
                    return (accumulator, None);
                }
            }
        }
        let id = match message_id_hint {
            Some(hint) => Value::String(hint),
            None => input_message
                .as_ref()
                .and_then(|m| m.get("id"))
                .filter(|id| !id.is_null())
                .cloned()
                .unwrap_or_else(|| Value::String(String::new())),
        };
        let (message, ghosts) = Literal::new()
            .field("id", Some(id))
            .field("metadata", None)
            .field("role", string("assistant"))
            .field("parts", Some(Value::Array(Vec::new())))
            .build();
        accumulator.message = message;
        accumulator.message_ghosts = ghosts;
        (
            accumulator,
            invalid.map(|reason| AccumulateError::InputMessage { reason }),
        )
    }

    fn index_input_parts(&mut self) {
        let parts = match self.message.get("parts") {
            Some(Value::Array(parts)) => parts,
            _ => return,
        };
        self.step_start = parts
            .iter()
            .rposition(|p| part_type(p) == "step-start")
            .map_or(0, |i| i + 1);
        for (index, part) in parts.iter().enumerate() {
            let kind = part_type(part);
            if is_tool_type(kind) {
                if let Some(id) = part.get("toolCallId").and_then(Value::as_str) {
                    self.tools.entry(id.to_owned()).or_default().push(index);
                }
            } else if kind.starts_with("data-") {
                if let Some(id) = part.get("id").and_then(Value::as_str) {
                    self.data
                        .entry(kind.to_owned())
                        .or_default()
                        .entry(id.to_owned())
                        .or_insert(index);
                }
            }
        }
    }

    /// What a reader joining the stream mid-way needs to rebuild it: the message so far, the
    /// parts of the message it continues (`inputParts`, not the turn's), and the parts still open:
    /// each text and reasoning part's index by its chunk id, and each streaming tool call's input
    /// text so far by its `toolCallId`.
    pub fn message_so_far(&self) -> Value {
        let mut open_text = serde_json::Map::new();
        for (id, index) in &self.active_text {
            open_text.insert(id.clone(), Value::from(*index));
        }
        let mut open_reasoning = serde_json::Map::new();
        for (id, index) in &self.active_reasoning {
            open_reasoning.insert(id.clone(), Value::from(*index));
        }
        let mut tool_inputs = serde_json::Map::new();
        for (id, partial) in &self.partial_tool_calls {
            tool_inputs.insert(id.clone(), Value::String(partial.text().to_owned()));
        }
        serde_json::json!({
            "message": self.message,
            "inputParts": self.input_parts,
            "openText": open_text,
            "openReasoning": open_reasoning,
            "toolInputs": tool_inputs,
        })
    }

    /// The message as the chunks so far have built it.
    pub fn message(&self) -> &Value {
        &self.message
    }

    /// The message, consuming the accumulator.
    pub fn into_message(self) -> Value {
        self.message
    }

    /// The message as the real reader last yielded it: [`MessageAccumulator::message`] without
    /// the `step-start` parts pushed since; `None` when it has yielded nothing.
    pub fn last_snapshot(&self) -> Option<Value> {
        if self.snapshots == 0 {
            return None;
        }
        let mut snapshot = self.message.clone();
        if let Some(Value::Array(parts)) = snapshot.get_mut("parts") {
            let keep = parts.len().saturating_sub(self.unpublished_step_starts);
            parts.truncate(keep);
        }
        Some(snapshot)
    }

    /// How many snapshots the real reader would have yielded so far.
    pub fn snapshot_count(&self) -> u64 {
        self.snapshots
    }

    /// The errors reported so far, in order.
    pub fn errors(&self) -> &[ReaderError] {
        &self.errors
    }

    /// Whether reading stopped at a chunk that could not be applied.
    pub fn is_halted(&self) -> bool {
        self.halted
    }

    /// The `finishReason` of the last `finish` chunk that had one.
    pub fn finish_reason(&self) -> Option<&str> {
        self.finish_reason.as_deref()
    }

    /// Applies `chunk` to the message.
    ///
    /// # Errors
    ///
    /// The [`AccumulateError`] of a chunk the reader cannot apply. It is recorded in
    /// [`MessageAccumulator::errors`], and from then on chunks are ignored (`Ok(Unchanged)`), as
    /// the real reader stops reading.
    pub fn push(&mut self, chunk: &UiChunk) -> Result<Changed, AccumulateError> {
        if self.halted {
            return Ok(Changed::Unchanged);
        }
        match self.apply(chunk) {
            Ok(changed) => {
                match changed {
                    Changed::Snapshot => {
                        self.snapshots += 1;
                        self.unpublished_step_starts = 0;
                    }
                    Changed::Quietly => self.unpublished_step_starts += 1,
                    Changed::Unchanged => {}
                }
                Ok(changed)
            }
            Err(error) => {
                self.halted = true;
                self.errors.push(ReaderError::Violation(error.clone()));
                Err(error)
            }
        }
    }

    fn parts(&self) -> &[Value] {
        match self.message.get("parts") {
            Some(Value::Array(parts)) => parts,
            _ => &[],
        }
    }

    fn parts_len(&self) -> usize {
        self.parts().len()
    }

    /// The part at `index` with its ghosts.
    fn part_mut(&mut self, index: usize) -> Option<(&mut Map<String, Value>, &mut Ghosts)> {
        let part = match self.message.get_mut("parts") {
            Some(Value::Array(parts)) => parts.get_mut(index)?.as_object_mut()?,
            _ => return None,
        };
        Some((part, self.ghosts.get_mut(index)?))
    }

    /// Appends a part; returns its index.
    fn push_part(&mut self, (part, ghosts): (Value, Ghosts)) -> usize {
        let Some(Value::Array(parts)) = self.message.get_mut("parts") else {
            return 0;
        };
        parts.push(part);
        self.ghosts.push(ghosts);
        parts.len() - 1
    }

    fn set_message_field(&mut self, key: &'static str, value: Value) {
        if let Value::Object(message) = &mut self.message {
            assign(message, &mut self.message_ghosts, key, Some(value));
        }
    }

    fn part_field(&self, index: usize, key: &str) -> Option<Value> {
        self.parts().get(index).and_then(|p| p.get(key)).cloned()
    }

    fn snapshot_if(changed: bool) -> Changed {
        if changed {
            Changed::Snapshot
        } else {
            Changed::Unchanged
        }
    }

    fn apply(&mut self, chunk: &UiChunk) -> Result<Changed, AccumulateError> {
        match chunk {
            UiChunk::TextStart(c) => self.text_start(c),
            UiChunk::TextDelta(c) | UiChunk::ReasoningDelta(c) => self.block_delta(chunk, c),
            UiChunk::TextEnd(c) => self.text_end(c),
            UiChunk::ReasoningStart(c) => self.reasoning_start(c),
            UiChunk::ReasoningEnd(c) => self.reasoning_end(c),
            UiChunk::ToolInputStart(c) => self.tool_input_start(c),
            UiChunk::ToolInputDelta(c) => self.tool_input_delta(c),
            UiChunk::ToolInputAvailable(c) => self.tool_input_available(c),
            UiChunk::ToolInputError(c) => self.tool_input_error(c),
            UiChunk::ToolApprovalRequest(c) => self.tool_approval_request(c),
            UiChunk::ToolApprovalResponse(c) => self.tool_approval_response(c),
            UiChunk::ToolOutputDenied(c) => self.tool_output_denied(c),
            UiChunk::ToolOutputAvailable(c) => self.tool_output_available(c),
            UiChunk::ToolOutputError(c) => self.tool_output_error(c),
            UiChunk::Custom(c) => self.custom(c),
            UiChunk::File(c) | UiChunk::ReasoningFile(c) => self.file(chunk, c),
            UiChunk::SourceUrl(c) => self.source_url(c),
            UiChunk::SourceDocument(c) => self.source_document(c),
            UiChunk::Data(c) => self.data(chunk, c),
            UiChunk::Start(c) => self.start(c),
            UiChunk::Finish(c) => self.finish(c),
            UiChunk::MessageMetadata(c) => self.message_metadata(c),
            UiChunk::Error(c) => self.error(c),
            UiChunk::StartStep(_) => self.start_step(),
            UiChunk::ResetStep(_) => self.reset_step(),
            UiChunk::FinishStep(_) | UiChunk::Abort(_) | UiChunk::Unknown(_) => {
                Ok(Changed::Unchanged)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ui::json::to_json;
    use serde_json::json;

    fn run(input: Option<Value>, chunks: &[Value]) -> MessageAccumulator {
        let mut accumulator = MessageAccumulator::new(input, None);
        for chunk in chunks {
            let chunk = UiChunk::from_value(chunk.clone()).unwrap();
            let _ = accumulator.push(&chunk);
        }
        accumulator
    }

    fn error_texts(accumulator: &MessageAccumulator) -> Vec<String> {
        accumulator
            .errors()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_reply_so_far_names_its_open_parts_and_the_continued_parts() {
        let input = json!({"id": "m", "role": "assistant", "parts": [{"type": "text", "text": "before", "state": "done"}]});
        let accumulator = run(
            Some(input),
            &[
                json!({"type": "start-step"}),
                json!({"type": "text-start", "id": "t"}),
                json!({"type": "text-delta", "id": "t", "delta": "so far"}),
                json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "look"}),
                json!({"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "{\"q\":"}),
            ],
        );
        let reply = accumulator.message_so_far();
        assert_eq!(reply["inputParts"], json!(1));
        assert_eq!(reply["openText"], json!({"t": 2}));
        assert_eq!(reply["openReasoning"], json!({}));
        assert_eq!(reply["toolInputs"], json!({"c": "{\"q\":"}));
        assert_eq!(reply["message"]["parts"][2]["text"], json!("so far"));
    }

    #[test]
    fn the_fixtures_come_out_as_ai_7_0_112_reads_them() {
        let mut cases = 0;
        for (name, fixture) in crate::engine::ui::fixtures() {
            let input = Some(fixture["inputMessage"].clone()).filter(|m| !m.is_null());
            let accumulator = run(input, fixture["chunks"].as_array().unwrap());
            let expected = &fixture["server_ai_7_0_112"];
            // Key order included: compare the JSON text.
            assert_eq!(
                to_json(&accumulator.last_snapshot()).unwrap(),
                to_json(&expected["final"]).unwrap(),
                "final of {name}"
            );
            let errors: Vec<String> = expected["errors"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap().to_owned())
                .collect();
            assert_eq!(error_texts(&accumulator), errors, "errors of {name}");
            assert_eq!(
                accumulator.snapshot_count(),
                expected["snapshots"].as_array().unwrap().len() as u64,
                "snapshot count of {name}"
            );
            cases += 1;
        }
        assert_eq!(cases, 9);
    }

    #[test]
    fn keys_assigned_undefined_keep_their_place() {
        let accumulator = run(
            None,
            &[
                json!({"type": "text-start", "id": "t"}),
                json!({"type": "text-end", "id": "t", "providerMetadata": {"p": {}}}),
                json!({"type": "message-metadata", "messageMetadata": {"m": 1}}),
                json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "x"}),
                json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "x", "input": {}, "title": "T"}),
            ],
        );
        assert_eq!(
            to_json(accumulator.message()).unwrap(),
            concat!(
                r#"{"id":"","metadata":{"m":1},"role":"assistant","parts":["#,
                r#"{"type":"text","text":"","providerMetadata":{"p":{}},"state":"done"},"#,
                r#"{"type":"tool-x","toolCallId":"c","state":"input-available","title":"T","input":{}}]}"#
            )
        );
    }

    #[test]
    fn a_continuation_cannot_continue_a_text_block_of_an_earlier_stream() {
        let input = json!({"id": "m", "role": "assistant", "parts": [{"type": "text", "text": "a", "state": "streaming"}]});
        let accumulator = run(
            Some(input),
            &[json!({"type": "text-delta", "id": "t", "delta": "b"})],
        );
        assert_eq!(
            error_texts(&accumulator),
            ["Received text-delta for missing text part with ID \"t\". Ensure a \"text-start\" chunk is sent before any \"text-delta\" chunks."]
        );
        assert!(accumulator.is_halted());
        assert_eq!(accumulator.last_snapshot(), None);
    }

    #[test]
    fn reading_stops_at_the_first_violation() {
        let mut accumulator = MessageAccumulator::new(None, Some("m".into()));
        let denied =
            UiChunk::from_json(r#"{"type":"tool-output-denied","toolCallId":"nope"}"#).unwrap();
        assert_eq!(
            accumulator.push(&denied),
            Err(AccumulateError::NoToolInvocation {
                tool_call_id: "nope".into()
            })
        );
        assert_eq!(
            accumulator.push(&UiChunk::start(Some("x".into()))),
            Ok(Changed::Unchanged)
        );
        assert_eq!(accumulator.message()["id"], "m");
        assert_eq!(accumulator.errors().len(), 1);
    }

    #[test]
    fn a_start_step_shows_in_the_next_snapshot_only() {
        let mut accumulator = MessageAccumulator::new(None, None);
        assert_eq!(
            accumulator.push(&UiChunk::start(Some("m".into()))),
            Ok(Changed::Snapshot)
        );
        let step = UiChunk::from_json(r#"{"type":"start-step"}"#).unwrap();
        assert_eq!(accumulator.push(&step), Ok(Changed::Quietly));
        assert_eq!(
            accumulator.message()["parts"].as_array().map(Vec::len),
            Some(1)
        );
        assert_eq!(accumulator.last_snapshot().unwrap()["parts"], json!([]));
        assert_eq!(accumulator.snapshot_count(), 1);
    }

    #[test]
    fn metadata_merging_into_a_primitive_fails_as_in_javascript() {
        let accumulator = run(
            None,
            &[
                json!({"type": "start", "messageMetadata": 5}),
                json!({"type": "message-metadata", "messageMetadata": {"a": 1}}),
            ],
        );
        assert_eq!(
            error_texts(&accumulator),
            ["Cannot use 'in' operator to search for 'a' in 5"]
        );
    }

    #[test]
    fn an_invalid_input_message_is_refused() {
        let bad = json!({"id": "m", "role": "assistant", "parts": [{"text": "no type"}]});
        assert!(matches!(
            MessageAccumulator::try_new(Some(bad.clone()), None),
            Err(AccumulateError::InputMessage { .. })
        ));
        let accumulator = MessageAccumulator::new(Some(bad), None);
        assert!(accumulator.is_halted());
        assert_eq!(accumulator.message()["id"], "m");
        let user = json!({"id": "u1", "role": "user", "parts": []});
        let accumulator = MessageAccumulator::new(Some(user), None);
        assert_eq!(
            accumulator.message(),
            &json!({"id": "u1", "role": "assistant", "parts": []})
        );
    }

    #[test]
    fn data_parts_with_an_id_are_replaced_and_reset_step_forgets_them() {
        let accumulator = run(
            None,
            &[
                json!({"type": "start-step"}),
                json!({"type": "data-p", "id": "a", "data": 1}),
                json!({"type": "data-p", "id": "a", "data": 2}),
                json!({"type": "reset-step"}),
                json!({"type": "data-p", "id": "a", "data": 3}),
                json!({"type": "data-p", "id": "a"}),
            ],
        );
        assert_eq!(
            to_json(accumulator.message()).unwrap(),
            r#"{"id":"","role":"assistant","parts":[{"type":"step-start"},{"type":"data-p","id":"a"}]}"#
        );
    }
}
