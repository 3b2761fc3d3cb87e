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
//! Like the real reader, the accumulator stops at the first chunk it cannot apply (a delta
//! without its start, a tool result for an unknown call, ...): that error is recorded and later
//! chunks are ignored. An `error` chunk is recorded and reading goes on.

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Map, Value};

use super::chunk::UiChunk;
use super::js::{merge_objects, parse_partial_json};

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

/// The key order of a JavaScript object whose keys include some assigned `undefined`: every own
/// key in order, those absent from the JSON object included. `None` when there are none.
#[derive(Debug, Clone, Default)]
struct Ghosts {
    order: Option<Vec<Cow<'static, str>>>,
}

/// `object[key] = value` as JavaScript does it, `None` standing for `undefined`.
fn assign(
    object: &mut Map<String, Value>,
    ghosts: &mut Ghosts,
    key: &'static str,
    value: Option<Value>,
) {
    match value {
        Some(value) => {
            if let Some(slot) = object.get_mut(key) {
                *slot = value;
                return;
            }
            if let Some(order) = &mut ghosts.order {
                if let Some(position) = order.iter().position(|k| k == key) {
                    let index = order[..position]
                        .iter()
                        .filter(|k| object.contains_key(k.as_ref()))
                        .count();
                    object.shift_insert(index, key.to_owned(), value);
                    return;
                }
                order.push(Cow::Borrowed(key));
            }
            object.insert(key.to_owned(), value);
        }
        None => {
            let order = ghosts
                .order
                .get_or_insert_with(|| object.keys().map(|k| Cow::Owned(k.clone())).collect());
            if object.shift_remove(key).is_none() && !order.iter().any(|k| k == key) {
                order.push(Cow::Borrowed(key));
            }
        }
    }
}

/// `object[key] = value ?? object[key]` (and `object[key] = object[key]` for `None`): the key
/// becomes an own property, `undefined` if it was not one.
fn assign_or_keep(
    object: &mut Map<String, Value>,
    ghosts: &mut Ghosts,
    key: &'static str,
    value: Option<Value>,
) {
    match value {
        Some(value) => assign(object, ghosts, key, Some(value)),
        None if object.contains_key(key) => {}
        None => assign(object, ghosts, key, None),
    }
}

/// A JavaScript object literal under construction.
struct Literal {
    map: Map<String, Value>,
    order: Vec<Cow<'static, str>>,
    has_ghost: bool,
}

impl Literal {
    fn new() -> Literal {
        Literal {
            map: Map::new(),
            order: Vec::new(),
            has_ghost: false,
        }
    }

    /// `key: value`, `None` being `undefined`.
    fn field(mut self, key: &'static str, value: Option<Value>) -> Literal {
        self.order.push(Cow::Borrowed(key));
        match value {
            Some(value) => {
                self.map.insert(key.to_owned(), value);
            }
            None => self.has_ghost = true,
        }
        self
    }

    /// `...(value !== undefined ? { key: value } : {})`.
    fn field_if(self, key: &'static str, value: Option<Value>) -> Literal {
        match value {
            Some(value) => self.field(key, Some(value)),
            None => self,
        }
    }

    fn build(self) -> (Value, Ghosts) {
        let ghosts = Ghosts {
            order: self.has_ghost.then_some(self.order),
        };
        (Value::Object(self.map), ghosts)
    }
}

fn string(s: &str) -> Option<Value> {
    Some(Value::String(s.to_owned()))
}

fn object(map: &Option<Map<String, Value>>) -> Option<Value> {
    map.as_ref().map(|m| Value::Object(m.clone()))
}

/// A value of a chunk's own, for an assignment from a tool part's existing field.
#[derive(Debug)]
enum Slot {
    /// `part.key = part.key`.
    Keep,
    /// `part.key = value`.
    Set(Option<Value>),
}

impl Slot {
    fn into_value(self) -> Option<Value> {
        match self {
            Slot::Keep => None,
            Slot::Set(value) => value,
        }
    }
}

/// The last fields `updateToolPart` and `updateDynamicToolPart` both set on an existing part.
struct ToolTail {
    preliminary: Option<bool>,
    title: Option<Value>,
    tool_metadata: Option<Value>,
    provider_executed: Option<bool>,
    provider_metadata: Option<Value>,
}

/// Sets `tail` on an existing tool part, in the order both updates of `ai` set it: the provider
/// metadata goes to `resultProviderMetadata` for a result, `callProviderMetadata` otherwise.
fn assign_tool_tail(
    part: &mut Map<String, Value>,
    ghosts: &mut Ghosts,
    tail: ToolTail,
    is_result: bool,
) {
    assign(
        part,
        ghosts,
        "preliminary",
        tail.preliminary.map(Value::Bool),
    );
    if let Some(title) = tail.title {
        assign(part, ghosts, "title", Some(title));
    }
    if let Some(tool_metadata) = tail.tool_metadata {
        assign(part, ghosts, "toolMetadata", Some(tool_metadata));
    }
    assign_or_keep(
        part,
        ghosts,
        "providerExecuted",
        tail.provider_executed.map(Value::Bool),
    );
    if let Some(provider_metadata) = tail.provider_metadata {
        let key = if is_result {
            "resultProviderMetadata"
        } else {
            "callProviderMetadata"
        };
        assign(part, ghosts, key, Some(provider_metadata));
    }
}

/// The options of `updateToolPart` / `updateDynamicToolPart`.
struct ToolUpdate<'a> {
    tool_call_id: &'a str,
    tool_name: Slot,
    state: &'static str,
    input: Slot,
    output: Option<Value>,
    raw_input: Slot,
    error_text: Option<Value>,
    provider_executed: Option<bool>,
    preliminary: Option<bool>,
    provider_metadata: Option<Value>,
    /// `None` is `undefined`: the part's title is left alone.
    title: Option<Value>,
    /// `None` is `undefined`: the part's tool metadata is left alone.
    tool_metadata: Option<Value>,
}

impl<'a> ToolUpdate<'a> {
    fn new(tool_call_id: &'a str, state: &'static str) -> ToolUpdate<'a> {
        ToolUpdate {
            tool_call_id,
            tool_name: Slot::Set(None),
            state,
            input: Slot::Set(None),
            output: None,
            raw_input: Slot::Set(None),
            error_text: None,
            provider_executed: None,
            preliminary: None,
            provider_metadata: None,
            title: None,
            tool_metadata: None,
        }
    }

    fn is_result(&self) -> bool {
        self.state == "output-available" || self.state == "output-error"
    }
}

/// A tool call whose input is streaming (`partialToolCalls`).
#[derive(Debug)]
struct PartialToolCall {
    text: String,
    tool_name: String,
    dynamic: bool,
    title: Option<String>,
    tool_metadata: Option<Map<String, Value>>,
}

fn is_tool_type(part_type: &str) -> bool {
    part_type.starts_with("tool-") || part_type == "dynamic-tool"
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

    /// The first tool part of the current step with `tool_call_id` whose type passes `accept`.
    fn current_step_tool(
        &self,
        tool_call_id: &str,
        accept: impl Fn(&str) -> bool,
    ) -> Option<usize> {
        let indexes = self.tools.get(tool_call_id)?;
        let parts = self.parts();
        let from = indexes.partition_point(|&i| i < self.step_start);
        indexes[from..]
            .iter()
            .copied()
            .find(|&i| parts.get(i).is_some_and(|p| accept(part_type(p))))
    }

    /// `getToolInvocation`: the call's part in the current step, else its last part anywhere.
    fn tool_invocation(&self, tool_call_id: &str) -> Result<usize, AccumulateError> {
        self.current_step_tool(tool_call_id, |_| true)
            .or_else(|| self.tools.get(tool_call_id).and_then(|v| v.last().copied()))
            .ok_or_else(|| AccumulateError::NoToolInvocation {
                tool_call_id: tool_call_id.to_owned(),
            })
    }

    fn is_dynamic_part(&self, index: usize) -> bool {
        self.parts()
            .get(index)
            .is_some_and(|p| part_type(p) == "dynamic-tool")
    }

    fn part_field(&self, index: usize, key: &str) -> Option<Value> {
        self.parts().get(index).and_then(|p| p.get(key)).cloned()
    }

    /// Removes the parts from `len` on, with everything that points at them.
    fn truncate_parts(&mut self, len: usize) {
        if let Some(Value::Array(parts)) = self.message.get_mut("parts") {
            parts.truncate(len);
        }
        self.ghosts.truncate(len);
        self.tools.retain(|_, indexes| {
            indexes.retain(|&i| i < len);
            !indexes.is_empty()
        });
        self.data.retain(|_, ids| {
            ids.retain(|_, i| *i < len);
            !ids.is_empty()
        });
    }

    /// `updateToolPart`.
    fn update_tool_part(&mut self, options: ToolUpdate<'_>, existing: Option<usize>) {
        let index = existing
            .or_else(|| self.current_step_tool(options.tool_call_id, |t| t.starts_with("tool-")));
        match index {
            Some(index) => {
                let is_result = options.is_result();
                let Some((part, ghosts)) = self.part_mut(index) else {
                    return;
                };
                assign(part, ghosts, "state", string(options.state));
                set_slot(part, ghosts, "input", options.input);
                assign(part, ghosts, "output", options.output);
                assign(part, ghosts, "errorText", options.error_text);
                set_slot(part, ghosts, "rawInput", options.raw_input);
                assign_tool_tail(
                    part,
                    ghosts,
                    ToolTail {
                        preliminary: options.preliminary,
                        title: options.title,
                        tool_metadata: options.tool_metadata,
                        provider_executed: options.provider_executed,
                        provider_metadata: options.provider_metadata,
                    },
                    is_result,
                );
            }
            None => {
                let is_result = options.is_result();
                let tool_name = match &options.tool_name {
                    Slot::Set(Some(Value::String(name))) => name.clone(),
                    _ => "undefined".to_owned(),
                };
                let (call_metadata, result_metadata) = match options.provider_metadata {
                    Some(m) if is_result => (None, Some(m)),
                    Some(m) => (Some(m), None),
                    None => (None, None),
                };
                let part = Literal::new()
                    .field("type", Some(Value::String(format!("tool-{tool_name}"))))
                    .field("toolCallId", string(options.tool_call_id))
                    .field("state", string(options.state))
                    .field("title", options.title)
                    .field_if("toolMetadata", options.tool_metadata)
                    .field("input", options.input.into_value())
                    .field("output", options.output)
                    .field("rawInput", options.raw_input.into_value())
                    .field("errorText", options.error_text)
                    .field(
                        "providerExecuted",
                        options.provider_executed.map(Value::Bool),
                    )
                    .field("preliminary", options.preliminary.map(Value::Bool))
                    .field_if("resultProviderMetadata", result_metadata)
                    .field_if("callProviderMetadata", call_metadata)
                    .build();
                let index = self.push_part(part);
                self.tools
                    .entry(options.tool_call_id.to_owned())
                    .or_default()
                    .push(index);
            }
        }
    }

    /// `updateDynamicToolPart`.
    fn update_dynamic_tool_part(&mut self, options: ToolUpdate<'_>, existing: Option<usize>) {
        let index = existing
            .or_else(|| self.current_step_tool(options.tool_call_id, |t| t == "dynamic-tool"));
        match index {
            Some(index) => {
                let is_result = options.is_result();
                let Some((part, ghosts)) = self.part_mut(index) else {
                    return;
                };
                assign(part, ghosts, "state", string(options.state));
                set_slot(part, ghosts, "toolName", options.tool_name);
                set_slot(part, ghosts, "input", options.input);
                assign(part, ghosts, "output", options.output);
                assign(part, ghosts, "errorText", options.error_text);
                // `options.rawInput ?? part.rawInput`
                match options.raw_input {
                    Slot::Set(Some(raw)) if !raw.is_null() => {
                        assign(part, ghosts, "rawInput", Some(raw))
                    }
                    _ => assign_or_keep(part, ghosts, "rawInput", None),
                }
                assign_tool_tail(
                    part,
                    ghosts,
                    ToolTail {
                        preliminary: options.preliminary,
                        title: options.title,
                        tool_metadata: options.tool_metadata,
                        provider_executed: options.provider_executed,
                        provider_metadata: options.provider_metadata,
                    },
                    is_result,
                );
            }
            None => {
                let is_result = options.is_result();
                let (call_metadata, result_metadata) = match options.provider_metadata {
                    Some(m) if is_result => (None, Some(m)),
                    Some(m) => (Some(m), None),
                    None => (None, None),
                };
                let part = Literal::new()
                    .field("type", string("dynamic-tool"))
                    .field("toolName", options.tool_name.into_value())
                    .field("toolCallId", string(options.tool_call_id))
                    .field("state", string(options.state))
                    .field("input", options.input.into_value())
                    .field("output", options.output)
                    .field("errorText", options.error_text)
                    .field("preliminary", options.preliminary.map(Value::Bool))
                    .field(
                        "providerExecuted",
                        options.provider_executed.map(Value::Bool),
                    )
                    .field("title", options.title)
                    .field_if("toolMetadata", options.tool_metadata)
                    .field_if("resultProviderMetadata", result_metadata)
                    .field_if("callProviderMetadata", call_metadata)
                    .build();
                let index = self.push_part(part);
                self.tools
                    .entry(options.tool_call_id.to_owned())
                    .or_default()
                    .push(index);
            }
        }
    }

    /// The message's metadata after merging `metadata` into it (`updateMessageMetadata`), or
    /// `None` when `metadata` is absent or `null`.
    fn merged_metadata(&self, metadata: Option<&Value>) -> Result<Option<Value>, AccumulateError> {
        let Some(metadata) = metadata.filter(|m| !m.is_null()) else {
            return Ok(None);
        };
        match self.message.get("metadata").filter(|m| !m.is_null()) {
            Some(current) => merge_objects(current, metadata)
                .map(Some)
                .map_err(|message| AccumulateError::Metadata { message }),
            None => Ok(Some(metadata.clone())),
        }
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
            UiChunk::TextStart(c) => {
                let part = Literal::new()
                    .field("type", string("text"))
                    .field("text", string(""))
                    .field("providerMetadata", object(&c.provider_metadata))
                    .field("state", string("streaming"))
                    .build();
                let index = self.push_part(part);
                self.active_text.insert(c.id.clone(), index);
                Ok(Changed::Snapshot)
            }
            UiChunk::TextDelta(c) | UiChunk::ReasoningDelta(c) => {
                let (active, chunk_type) = match chunk {
                    UiChunk::TextDelta(_) => (&self.active_text, "text-delta"),
                    _ => (&self.active_reasoning, "reasoning-delta"),
                };
                let Some(&index) = active.get(&c.id) else {
                    return Err(missing_block(chunk_type, &c.id));
                };
                if let Some((part, ghosts)) = self.part_mut(index) {
                    match part.get_mut("text") {
                        Some(Value::String(text)) => text.push_str(&c.delta),
                        _ => assign(part, ghosts, "text", string(&c.delta)),
                    }
                    assign_or_keep(
                        part,
                        ghosts,
                        "providerMetadata",
                        object(&c.provider_metadata),
                    );
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::TextEnd(c) => {
                let Some(index) = self.active_text.remove(&c.id) else {
                    return Err(missing_block("text-end", &c.id));
                };
                if let Some((part, ghosts)) = self.part_mut(index) {
                    assign(part, ghosts, "state", string("done"));
                    assign_or_keep(
                        part,
                        ghosts,
                        "providerMetadata",
                        object(&c.provider_metadata),
                    );
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::ReasoningStart(c) => {
                let part = Literal::new()
                    .field("type", string("reasoning"))
                    .field("id", string(&c.id))
                    .field("text", string(""))
                    .field("providerMetadata", object(&c.provider_metadata))
                    .field("state", string("streaming"))
                    .build();
                let index = self.push_part(part);
                self.active_reasoning.insert(c.id.clone(), index);
                Ok(Changed::Snapshot)
            }
            UiChunk::ReasoningEnd(c) => {
                let Some(index) = self.active_reasoning.remove(&c.id) else {
                    return Err(missing_block("reasoning-end", &c.id));
                };
                if let Some((part, ghosts)) = self.part_mut(index) {
                    assign_or_keep(
                        part,
                        ghosts,
                        "providerMetadata",
                        object(&c.provider_metadata),
                    );
                    assign(part, ghosts, "state", string("done"));
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::Custom(c) => {
                let part = Literal::new()
                    .field("type", string("custom"))
                    .field("kind", string(&c.kind))
                    .field("providerMetadata", object(&c.provider_metadata))
                    .build();
                self.push_part(part);
                Ok(Changed::Snapshot)
            }
            UiChunk::File(c) | UiChunk::ReasoningFile(c) => {
                let part = Literal::new()
                    .field("type", string(chunk.type_name()))
                    .field("mediaType", string(&c.media_type))
                    .field("url", string(&c.url))
                    .field_if("providerMetadata", object(&c.provider_metadata))
                    .build();
                self.push_part(part);
                Ok(Changed::Snapshot)
            }
            UiChunk::SourceUrl(c) => {
                let part = Literal::new()
                    .field("type", string("source-url"))
                    .field("sourceId", string(&c.source_id))
                    .field("url", string(&c.url))
                    .field("title", c.title.as_deref().and_then(string))
                    .field("providerMetadata", object(&c.provider_metadata))
                    .build();
                self.push_part(part);
                Ok(Changed::Snapshot)
            }
            UiChunk::SourceDocument(c) => {
                let part = Literal::new()
                    .field("type", string("source-document"))
                    .field("sourceId", string(&c.source_id))
                    .field("mediaType", string(&c.media_type))
                    .field("title", string(&c.title))
                    .field("filename", c.filename.as_deref().and_then(string))
                    .field("providerMetadata", object(&c.provider_metadata))
                    .build();
                self.push_part(part);
                Ok(Changed::Snapshot)
            }
            UiChunk::ToolInputStart(c) => {
                self.partial_tool_calls.insert(
                    c.tool_call_id.clone(),
                    PartialToolCall {
                        text: String::new(),
                        tool_name: c.tool_name.clone(),
                        dynamic: c.dynamic == Some(true),
                        title: c.title.clone(),
                        tool_metadata: c.tool_metadata.clone(),
                    },
                );
                let options = ToolUpdate {
                    tool_name: Slot::Set(string(&c.tool_name)),
                    provider_executed: c.provider_executed,
                    title: c.title.as_deref().and_then(string),
                    tool_metadata: object(&c.tool_metadata),
                    provider_metadata: object(&c.provider_metadata),
                    ..ToolUpdate::new(&c.tool_call_id, "input-streaming")
                };
                if c.dynamic == Some(true) {
                    self.update_dynamic_tool_part(options, None);
                } else {
                    self.update_tool_part(options, None);
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::ToolInputDelta(c) => {
                let Some(partial) = self.partial_tool_calls.get_mut(&c.tool_call_id) else {
                    return Err(AccumulateError::MissingToolCall {
                        tool_call_id: c.tool_call_id.clone(),
                    });
                };
                partial.text.push_str(&c.input_text_delta);
                let input = parse_partial_json(&partial.text);
                let dynamic = partial.dynamic;
                let options = ToolUpdate {
                    tool_name: Slot::Set(string(&partial.tool_name)),
                    input: Slot::Set(input),
                    title: partial.title.as_deref().and_then(string),
                    tool_metadata: object(&partial.tool_metadata),
                    ..ToolUpdate::new(&c.tool_call_id, "input-streaming")
                };
                if dynamic {
                    self.update_dynamic_tool_part(options, None);
                } else {
                    self.update_tool_part(options, None);
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::ToolInputAvailable(c) => {
                let options = ToolUpdate {
                    tool_name: Slot::Set(string(&c.tool_name)),
                    input: Slot::Set(c.input.clone()),
                    provider_executed: c.provider_executed,
                    provider_metadata: object(&c.provider_metadata),
                    title: c.title.as_deref().and_then(string),
                    tool_metadata: object(&c.tool_metadata),
                    ..ToolUpdate::new(&c.tool_call_id, "input-available")
                };
                if c.dynamic == Some(true) {
                    self.update_dynamic_tool_part(options, None);
                } else {
                    self.update_tool_part(options, None);
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::ToolInputError(c) => {
                let existing = self.current_step_tool(&c.tool_call_id, |_| true);
                let is_dynamic = match existing {
                    Some(index) => self.is_dynamic_part(index),
                    None => c.dynamic == Some(true),
                };
                let common = ToolUpdate {
                    tool_name: Slot::Set(string(&c.tool_name)),
                    error_text: string(&c.error_text),
                    provider_executed: c.provider_executed,
                    provider_metadata: object(&c.provider_metadata),
                    tool_metadata: object(&c.tool_metadata),
                    ..ToolUpdate::new(&c.tool_call_id, "output-error")
                };
                if is_dynamic {
                    let options = ToolUpdate {
                        input: Slot::Set(c.input.clone()),
                        ..common
                    };
                    self.update_dynamic_tool_part(options, None);
                } else {
                    let options = ToolUpdate {
                        input: Slot::Set(None),
                        raw_input: Slot::Set(c.input.clone()),
                        ..common
                    };
                    self.update_tool_part(options, None);
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::ToolApprovalRequest(c) => {
                let index = self.tool_invocation(&c.tool_call_id)?;
                let (approval, _) = Literal::new()
                    .field("id", string(&c.approval_id))
                    .field_if(
                        "descriptor",
                        c.approval_descriptor.clone().filter(|d| !d.is_null()),
                    )
                    .field_if("requestReason", c.reason.as_deref().and_then(string))
                    .field_if(
                        "isAutomatic",
                        (c.is_automatic == Some(true)).then_some(Value::Bool(true)),
                    )
                    .field_if("signature", c.signature.as_deref().and_then(string))
                    .build();
                if let Some((part, ghosts)) = self.part_mut(index) {
                    assign(part, ghosts, "state", string("approval-requested"));
                    assign(part, ghosts, "approval", Some(approval));
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::ToolApprovalResponse(c) => {
                let index = self
                    .parts()
                    .iter()
                    .position(|p| {
                        is_tool_type(part_type(p))
                            && p.get("approval")
                                .and_then(|a| a.get("id"))
                                .and_then(Value::as_str)
                                == Some(c.approval_id.as_str())
                    })
                    .ok_or_else(|| AccumulateError::NoApproval {
                        approval_id: c.approval_id.clone(),
                    })?;
                let mut approval = match self.part_field(index, "approval") {
                    Some(Value::Object(approval)) => approval,
                    _ => Map::new(),
                };
                approval.insert("id".to_owned(), Value::String(c.approval_id.clone()));
                approval.insert("approved".to_owned(), Value::Bool(c.approved));
                if let Some(reason) = &c.reason {
                    approval.insert("reason".to_owned(), Value::String(reason.clone()));
                }
                if let Some((part, ghosts)) = self.part_mut(index) {
                    assign(part, ghosts, "state", string("approval-responded"));
                    assign(part, ghosts, "approval", Some(Value::Object(approval)));
                    if let Some(provider_executed) = c.provider_executed {
                        assign(
                            part,
                            ghosts,
                            "providerExecuted",
                            Some(Value::Bool(provider_executed)),
                        );
                    }
                    if let Some(provider_metadata) = object(&c.provider_metadata) {
                        assign(
                            part,
                            ghosts,
                            "callProviderMetadata",
                            Some(provider_metadata),
                        );
                    }
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::ToolOutputDenied(c) => {
                let index = self.tool_invocation(&c.tool_call_id)?;
                if let Some((part, ghosts)) = self.part_mut(index) {
                    assign(part, ghosts, "state", string("output-denied"));
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::ToolOutputAvailable(c) => {
                let index = self.tool_invocation(&c.tool_call_id)?;
                let options = ToolUpdate {
                    tool_name: Slot::Keep,
                    input: Slot::Keep,
                    output: c.output.clone(),
                    preliminary: c.preliminary,
                    provider_executed: c.provider_executed,
                    provider_metadata: object(&c.provider_metadata),
                    // `title: part.title` and `toolMetadata: part.toolMetadata` assign a part's
                    // own values back: nothing changes.
                    ..ToolUpdate::new(&c.tool_call_id, "output-available")
                };
                if self.is_dynamic_part(index) {
                    self.update_dynamic_tool_part(options, Some(index));
                } else {
                    self.update_tool_part(options, Some(index));
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::ToolOutputError(c) => {
                let index = self.tool_invocation(&c.tool_call_id)?;
                let options = ToolUpdate {
                    tool_name: Slot::Keep,
                    input: Slot::Keep,
                    error_text: string(&c.error_text),
                    provider_executed: c.provider_executed,
                    provider_metadata: object(&c.provider_metadata),
                    ..ToolUpdate::new(&c.tool_call_id, "output-error")
                };
                if self.is_dynamic_part(index) {
                    self.update_dynamic_tool_part(options, Some(index));
                } else {
                    let options = ToolUpdate {
                        raw_input: Slot::Keep,
                        ..options
                    };
                    self.update_tool_part(options, Some(index));
                }
                Ok(Changed::Snapshot)
            }
            UiChunk::StartStep(_) => {
                let (part, ghosts) = Literal::new().field("type", string("step-start")).build();
                let index = self.push_part((part, ghosts));
                self.step_start = index + 1;
                Ok(Changed::Quietly)
            }
            UiChunk::FinishStep(_) => Ok(Changed::Unchanged),
            UiChunk::ResetStep(_) => {
                self.active_text.clear();
                self.active_reasoning.clear();
                self.partial_tool_calls.clear();
                let len = self.parts_len();
                if len > self.step_start {
                    self.truncate_parts(self.step_start);
                    Ok(Changed::Snapshot)
                } else {
                    Ok(Changed::Unchanged)
                }
            }
            UiChunk::Start(c) => {
                let metadata = self.merged_metadata(c.message_metadata.as_ref())?;
                if let Some(id) = &c.message_id {
                    self.set_message_field("id", Value::String(id.clone()));
                }
                let changed = c.message_id.is_some() || metadata.is_some();
                if let Some(metadata) = metadata {
                    self.set_message_field("metadata", metadata);
                }
                Ok(Self::snapshot_if(changed))
            }
            UiChunk::Finish(c) => {
                let metadata = self.merged_metadata(c.message_metadata.as_ref())?;
                if let Some(reason) = &c.finish_reason {
                    self.finish_reason = Some(reason.clone());
                }
                let changed = metadata.is_some();
                if let Some(metadata) = metadata {
                    self.set_message_field("metadata", metadata);
                }
                Ok(Self::snapshot_if(changed))
            }
            UiChunk::MessageMetadata(c) => {
                let metadata = self.merged_metadata(c.message_metadata.as_ref())?;
                let changed = metadata.is_some();
                if let Some(metadata) = metadata {
                    self.set_message_field("metadata", metadata);
                }
                Ok(Self::snapshot_if(changed))
            }
            UiChunk::Error(c) => {
                self.errors.push(ReaderError::Chunk(c.error_text.clone()));
                Ok(Changed::Unchanged)
            }
            UiChunk::Abort(_) | UiChunk::Unknown(_) => Ok(Changed::Unchanged),
            UiChunk::Data(c) => {
                if c.transient == Some(true) {
                    return Ok(Changed::Unchanged);
                }
                let existing = c.id.as_ref().and_then(|id| {
                    self.data
                        .get(&c.data_type)
                        .and_then(|ids| ids.get(id))
                        .copied()
                });
                match existing {
                    Some(index) => {
                        if let Some((part, ghosts)) = self.part_mut(index) {
                            assign(part, ghosts, "data", c.data.clone());
                        }
                    }
                    None => {
                        let index =
                            self.push_part((Value::Object(chunk.to_map()), Ghosts::default()));
                        if let Some(id) = &c.id {
                            self.data
                                .entry(c.data_type.clone())
                                .or_default()
                                .entry(id.clone())
                                .or_insert(index);
                        }
                    }
                }
                Ok(Changed::Snapshot)
            }
        }
    }
}

/// `part.key = value` for a [`Slot`].
fn set_slot(part: &mut Map<String, Value>, ghosts: &mut Ghosts, key: &'static str, slot: Slot) {
    match slot {
        Slot::Keep => assign_or_keep(part, ghosts, key, None),
        Slot::Set(value) => assign(part, ghosts, key, value),
    }
}

fn missing_block(chunk_type: &'static str, id: &str) -> AccumulateError {
    match chunk_type {
        "text-delta" | "text-end" => AccumulateError::MissingTextPart {
            chunk_type,
            id: id.to_owned(),
        },
        _ => AccumulateError::MissingReasoningPart {
            chunk_type,
            id: id.to_owned(),
        },
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
