//! The chunks of the AI SDK v7 UI message stream (`ai` 7.0.112, `ui-message-chunks.ts`), as they
//! travel on the wire.
//!
//! [`UiChunk`] has one variant per chunk type (listed once, in `ui_chunks!`), `data-<name>` chunks
//! included, and [`UiChunk::Unknown`] for a type this model does not know: it is carried through
//! untouched.
//!
//! Invariants:
//! - Field names are the wire names (`toolCallId`, `providerMetadata`, ...).
//! - Fields the model does not name are kept, in order, in each chunk's [`Extra`].
//! - JSON → [`UiChunk`] → JSON gives back the same object, key order included: the keys are
//!   written in the order the AI SDK writes them, and a chunk read with its keys in another order
//!   remembers that order. The one exception: a `null` in an optional field of a declared type
//!   (`title: null`, `providerExecuted: null`, ...) reads as absent and is not written back, since
//!   the client's schema rejects it. Fields typed `unknown` upstream (`input`, `output`, `data`,
//!   `messageMetadata`, `approvalDescriptor`) keep a `null`.
//! - An absent optional field is never written as `null`.

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// The deepest a chunk may nest (the chunk object itself is level 1): the reply stored around it
/// adds a few levels, and a record must stay under serde_json's limit of 128 to be read again.
pub const MAX_CHUNK_DEPTH: usize = 100;

/// How deep `value` nests: 0 for a scalar, 1 for an empty or flat object or array. Iterative, so
/// that any depth serde_json let through is measured without recursion.
fn depth_of(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((value, level)) = stack.pop() {
        match value {
            Value::Array(items) => {
                deepest = deepest.max(level);
                stack.extend(items.iter().map(|item| (item, level + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(level);
                stack.extend(map.values().map(|item| (item, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// Why a JSON value is not a UI message chunk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// The value is not a JSON object.
    #[error("a ui message chunk must be a json object")]
    NotAnObject,
    /// The object has no `type`, or its `type` is not a string.
    #[error("a ui message chunk needs a string `type`")]
    MissingType,
    /// A field of a known chunk type has the wrong type, or a required one is missing.
    #[error("`{chunk}` chunk: `{field}` {problem}")]
    Field {
        /// The chunk's type.
        chunk: &'static str,
        /// The field at fault, as named on the wire.
        field: &'static str,
        /// What is wrong with it: `must be a string`, `is missing`, ...
        problem: &'static str,
    },
}

/// The fields of a chunk that the model does not name, and the wire order of its keys when that
/// order is not the one the AI SDK writes.
#[derive(Debug, Clone, Default)]
pub struct Extra {
    /// The unknown fields, in wire order. Keys the chunk names (and `type`) are ignored here.
    pub fields: Map<String, Value>,
    /// Every key of the chunk as read, in order; `None` when the order was the canonical one.
    order: Option<Box<[Box<str>]>>,
}

impl PartialEq for Extra {
    /// Equal when the unknown fields are: key order is presentation, not content.
    fn eq(&self, other: &Self) -> bool {
        self.fields == other.fields
    }
}

impl Extra {
    /// Unknown fields in `fields`, written after the named ones.
    pub fn new(fields: Map<String, Value>) -> Extra {
        Extra {
            fields,
            order: None,
        }
    }

    /// Whether there are no unknown fields.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// A borrowed field value, ready to be written.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FieldRef<'a> {
    /// A string.
    Str(&'a str),
    /// A boolean.
    Bool(bool),
    /// Any JSON value.
    Value(&'a Value),
    /// A JSON object.
    Object(&'a Map<String, Value>),
}

impl FieldRef<'_> {
    /// The field as an owned JSON value.
    pub(crate) fn to_value(self) -> Value {
        match self {
            FieldRef::Str(s) => Value::String(s.to_owned()),
            FieldRef::Bool(b) => Value::Bool(b),
            FieldRef::Value(v) => v.clone(),
            FieldRef::Object(m) => Value::Object(m.clone()),
        }
    }
}

impl Serialize for FieldRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            FieldRef::Str(s) => serializer.serialize_str(s),
            FieldRef::Bool(b) => serializer.serialize_bool(*b),
            FieldRef::Value(v) => v.serialize(serializer),
            FieldRef::Object(m) => m.serialize(serializer),
        }
    }
}

/// How one field type is read from a chunk object and borrowed for writing.
trait Field: Sized {
    /// Takes the field `key` out of `map`; `Err` says what is wrong with it.
    fn take(map: &mut Map<String, Value>, key: &str) -> Result<Self, &'static str>;
    /// The field's value, `None` when absent.
    fn get(&self) -> Option<FieldRef<'_>>;
}

impl Field for String {
    fn take(map: &mut Map<String, Value>, key: &str) -> Result<Self, &'static str> {
        match map.shift_remove(key) {
            Some(Value::String(s)) => Ok(s),
            None => Err("is missing"),
            Some(_) => Err("must be a string"),
        }
    }
    fn get(&self) -> Option<FieldRef<'_>> {
        Some(FieldRef::Str(self))
    }
}

impl Field for Option<String> {
    fn take(map: &mut Map<String, Value>, key: &str) -> Result<Self, &'static str> {
        match map.shift_remove(key) {
            Some(Value::String(s)) => Ok(Some(s)),
            None | Some(Value::Null) => Ok(None),
            Some(_) => Err("must be a string"),
        }
    }
    fn get(&self) -> Option<FieldRef<'_>> {
        self.as_deref().map(FieldRef::Str)
    }
}

impl Field for bool {
    fn take(map: &mut Map<String, Value>, key: &str) -> Result<Self, &'static str> {
        match map.shift_remove(key) {
            Some(Value::Bool(b)) => Ok(b),
            None => Err("is missing"),
            Some(_) => Err("must be a boolean"),
        }
    }
    fn get(&self) -> Option<FieldRef<'_>> {
        Some(FieldRef::Bool(*self))
    }
}

impl Field for Option<bool> {
    fn take(map: &mut Map<String, Value>, key: &str) -> Result<Self, &'static str> {
        match map.shift_remove(key) {
            Some(Value::Bool(b)) => Ok(Some(b)),
            None | Some(Value::Null) => Ok(None),
            Some(_) => Err("must be a boolean"),
        }
    }
    fn get(&self) -> Option<FieldRef<'_>> {
        self.map(FieldRef::Bool)
    }
}

/// `unknown` upstream: any value, `null` included; absent is `None`.
impl Field for Option<Value> {
    fn take(map: &mut Map<String, Value>, key: &str) -> Result<Self, &'static str> {
        Ok(map.shift_remove(key))
    }
    fn get(&self) -> Option<FieldRef<'_>> {
        self.as_ref().map(FieldRef::Value)
    }
}

impl Field for Option<Map<String, Value>> {
    fn take(map: &mut Map<String, Value>, key: &str) -> Result<Self, &'static str> {
        match map.shift_remove(key) {
            Some(Value::Object(m)) => Ok(Some(m)),
            None | Some(Value::Null) => Ok(None),
            Some(_) => Err("must be an object"),
        }
    }
    fn get(&self) -> Option<FieldRef<'_>> {
        self.as_ref().map(FieldRef::Object)
    }
}

/// The payload of a chunk: its named fields and its [`Extra`].
trait Body {
    /// The named keys, in the order the AI SDK writes them.
    fn keys(&self) -> &'static [&'static str];
    /// The named field `key`, `None` when absent or not named by this body.
    fn field(&self, key: &str) -> Option<FieldRef<'_>>;
    /// The unknown fields.
    fn extra(&self) -> &Extra;
    /// The unknown fields, to fill after reading.
    fn extra_mut(&mut self) -> &mut Extra;
}

macro_rules! chunk_body {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $key:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
            /// Fields the model does not name, kept as they came.
            pub extra: Extra,
        }

        impl $name {
            const KEYS: &'static [&'static str] = &[$($key),*];

            /// Reads the named fields out of `map`; what remains is left in it.
            fn take(map: &mut Map<String, Value>) -> Result<Self, (&'static str, &'static str)> {
                let _ = &map;
                Ok(Self {
                    $( $field: Field::take(map, $key).map_err(|problem| ($key, problem))?, )*
                    extra: Extra::default(),
                })
            }
        }

        impl Body for $name {
            fn keys(&self) -> &'static [&'static str] {
                Self::KEYS
            }
            fn field(&self, key: &str) -> Option<FieldRef<'_>> {
                match key {
                    $( $key => Field::get(&self.$field), )*
                    _ => None,
                }
            }
            fn extra(&self) -> &Extra {
                &self.extra
            }
            fn extra_mut(&mut self) -> &mut Extra {
                &mut self.extra
            }
        }
    };
}

chunk_body! {
    /// `start`: the message begins (or a continuation of it does).
    Start {
        /// Metadata to merge into the message's.
        message_metadata: Option<Value> = "messageMetadata",
        /// The message's id.
        message_id: Option<String> = "messageId",
    }
}

chunk_body! {
    /// `finish`: the message is complete.
    Finish {
        /// `stop`, `length`, `content-filter`, `tool-calls`, `error` or `other`.
        finish_reason: Option<String> = "finishReason",
        /// Metadata to merge into the message's.
        message_metadata: Option<Value> = "messageMetadata",
    }
}

chunk_body! {
    /// `abort`: the turn was interrupted.
    Abort {
        /// Why.
        reason: Option<String> = "reason",
    }
}

chunk_body! {
    /// `error`: the stream reports an error (the text is what the client may show).
    ErrorChunk {
        /// The error's text.
        error_text: String = "errorText",
    }
}

chunk_body! {
    /// `message-metadata`: metadata to merge into the message's.
    MessageMetadata {
        /// The metadata.
        message_metadata: Option<Value> = "messageMetadata",
    }
}

chunk_body! {
    /// `start-step`, `finish-step` or `reset-step`: a step boundary, no payload.
    StepBoundary {}
}

chunk_body! {
    /// `text-start`, `text-end`, `reasoning-start` or `reasoning-end`: a block opens or closes.
    PartBoundary {
        /// The block's id within the stream.
        id: String = "id",
        /// Provider metadata for the block.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
    }
}

chunk_body! {
    /// `text-delta` or `reasoning-delta`: text appended to an open block.
    PartDelta {
        /// The block's id within the stream.
        id: String = "id",
        /// The text to append.
        delta: String = "delta",
        /// Provider metadata for the block.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
    }
}

chunk_body! {
    /// `custom`: provider-specific content.
    Custom {
        /// `<provider>.<kind>`.
        kind: String = "kind",
        /// Provider metadata.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
    }
}

chunk_body! {
    /// `tool-input-start`: a tool call begins streaming its input.
    ToolInputStart {
        /// The call's id.
        tool_call_id: String = "toolCallId",
        /// The tool's name.
        tool_name: String = "toolName",
        /// Whether the provider runs the tool.
        provider_executed: Option<bool> = "providerExecuted",
        /// Provider metadata for the call.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
        /// Tool metadata.
        tool_metadata: Option<Map<String, Value>> = "toolMetadata",
        /// Whether the tool is dynamic (`dynamic-tool` part).
        dynamic: Option<bool> = "dynamic",
        /// A title for the call.
        title: Option<String> = "title",
    }
}

chunk_body! {
    /// `tool-input-delta`: more of a streaming tool input's JSON text.
    ToolInputDelta {
        /// The call's id.
        tool_call_id: String = "toolCallId",
        /// The text to append.
        input_text_delta: String = "inputTextDelta",
    }
}

chunk_body! {
    /// `tool-input-available`: a tool call with its complete input.
    ToolInputAvailable {
        /// The call's id.
        tool_call_id: String = "toolCallId",
        /// The tool's name.
        tool_name: String = "toolName",
        /// The input.
        input: Option<Value> = "input",
        /// Whether the provider runs the tool.
        provider_executed: Option<bool> = "providerExecuted",
        /// Provider metadata for the call.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
        /// Tool metadata.
        tool_metadata: Option<Map<String, Value>> = "toolMetadata",
        /// Whether the tool is dynamic (`dynamic-tool` part).
        dynamic: Option<bool> = "dynamic",
        /// A title for the call.
        title: Option<String> = "title",
    }
}

chunk_body! {
    /// `tool-input-error`: a tool call whose input is invalid.
    ToolInputError {
        /// The call's id.
        tool_call_id: String = "toolCallId",
        /// The tool's name.
        tool_name: String = "toolName",
        /// The invalid input.
        input: Option<Value> = "input",
        /// Whether the provider runs the tool.
        provider_executed: Option<bool> = "providerExecuted",
        /// Provider metadata for the call.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
        /// Tool metadata.
        tool_metadata: Option<Map<String, Value>> = "toolMetadata",
        /// Whether the tool is dynamic (`dynamic-tool` part).
        dynamic: Option<bool> = "dynamic",
        /// What is wrong with the input.
        error_text: String = "errorText",
        /// A title for the call.
        title: Option<String> = "title",
    }
}

chunk_body! {
    /// `tool-approval-request`: a tool call waits for the user's approval.
    ToolApprovalRequest {
        /// The approval's id.
        approval_id: String = "approvalId",
        /// The call's id.
        tool_call_id: String = "toolCallId",
        /// What is to be approved, for display.
        approval_descriptor: Option<Value> = "approvalDescriptor",
        /// Why approval is asked.
        reason: Option<String> = "reason",
        /// Whether the request was made automatically.
        is_automatic: Option<bool> = "isAutomatic",
        /// A signature over the request.
        signature: Option<String> = "signature",
    }
}

chunk_body! {
    /// `tool-approval-response`: the user's answer to an approval request.
    ToolApprovalResponse {
        /// The approval's id.
        approval_id: String = "approvalId",
        /// Whether the call is approved.
        approved: bool = "approved",
        /// Why.
        reason: Option<String> = "reason",
        /// Whether the provider runs the tool.
        provider_executed: Option<bool> = "providerExecuted",
        /// Provider metadata for the call.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
    }
}

chunk_body! {
    /// `tool-output-available`: a tool call's output (or a preliminary one).
    ToolOutputAvailable {
        /// The call's id.
        tool_call_id: String = "toolCallId",
        /// The output.
        output: Option<Value> = "output",
        /// Whether the provider ran the tool.
        provider_executed: Option<bool> = "providerExecuted",
        /// Provider metadata for the result.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
        /// Tool metadata.
        tool_metadata: Option<Map<String, Value>> = "toolMetadata",
        /// Whether more output follows.
        preliminary: Option<bool> = "preliminary",
        /// Whether the tool is dynamic.
        dynamic: Option<bool> = "dynamic",
    }
}

chunk_body! {
    /// `tool-output-error`: a tool call failed.
    ToolOutputError {
        /// The call's id.
        tool_call_id: String = "toolCallId",
        /// The error's text.
        error_text: String = "errorText",
        /// Whether the provider ran the tool.
        provider_executed: Option<bool> = "providerExecuted",
        /// Provider metadata for the result.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
        /// Tool metadata.
        tool_metadata: Option<Map<String, Value>> = "toolMetadata",
        /// Whether the tool is dynamic.
        dynamic: Option<bool> = "dynamic",
    }
}

chunk_body! {
    /// `tool-output-denied`: a tool call's approval was denied.
    ToolOutputDenied {
        /// The call's id.
        tool_call_id: String = "toolCallId",
    }
}

chunk_body! {
    /// `source-url`: a cited web page.
    SourceUrl {
        /// The source's id.
        source_id: String = "sourceId",
        /// Its address.
        url: String = "url",
        /// Its title.
        title: Option<String> = "title",
        /// Provider metadata.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
    }
}

chunk_body! {
    /// `source-document`: a cited document.
    SourceDocument {
        /// The source's id.
        source_id: String = "sourceId",
        /// Its media type.
        media_type: String = "mediaType",
        /// Its title.
        title: String = "title",
        /// Its file name.
        filename: Option<String> = "filename",
        /// Provider metadata.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
    }
}

chunk_body! {
    /// `file` or `reasoning-file`: a file, usually a `data:` URL.
    FileChunk {
        /// Its media type.
        media_type: String = "mediaType",
        /// Its URL.
        url: String = "url",
        /// Provider metadata.
        provider_metadata: Option<Map<String, Value>> = "providerMetadata",
    }
}

/// `data-<name>`: application data; with an `id` it replaces the data of the part of the same
/// type and id, and a `transient` one is not kept in the message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DataChunk {
    /// The wire type, `data-<name>`.
    pub data_type: String,
    /// The id of the data part it creates or replaces.
    pub id: Option<String>,
    /// The data.
    pub data: Option<Value>,
    /// Whether the data is for this stream only.
    pub transient: Option<bool>,
    /// Fields the model does not name, kept as they came.
    pub extra: Extra,
}

impl DataChunk {
    const KEYS: &'static [&'static str] = &["id", "data", "transient"];

    /// A `data-<name>` chunk with `data`.
    pub fn new(name: &str, data: Value) -> DataChunk {
        DataChunk {
            data_type: format!("data-{name}"),
            data: Some(data),
            ..DataChunk::default()
        }
    }

    /// The name after `data-`.
    pub fn name(&self) -> &str {
        self.data_type
            .strip_prefix("data-")
            .unwrap_or(&self.data_type)
    }

    fn take(
        map: &mut Map<String, Value>,
        data_type: String,
    ) -> Result<Self, (&'static str, &'static str)> {
        Ok(DataChunk {
            data_type,
            id: Field::take(map, "id").map_err(|p| ("id", p))?,
            data: Field::take(map, "data").map_err(|p| ("data", p))?,
            transient: Field::take(map, "transient").map_err(|p| ("transient", p))?,
            extra: Extra::default(),
        })
    }
}

impl Body for DataChunk {
    fn keys(&self) -> &'static [&'static str] {
        Self::KEYS
    }
    fn field(&self, key: &str) -> Option<FieldRef<'_>> {
        match key {
            "id" => self.id.get(),
            "data" => self.data.get(),
            "transient" => self.transient.get(),
            _ => None,
        }
    }
    fn extra(&self) -> &Extra {
        &self.extra
    }
    fn extra_mut(&mut self) -> &mut Extra {
        &mut self.extra
    }
}

/// The one list of the known chunk types: each variant, its body and its wire `type`. It makes
/// [`ChunkKind`] and [`UiChunk`] (with [`UiChunk::Data`] and [`UiChunk::Unknown`] added), and every
/// match over them: `type` ↔ kind, a chunk's kind, reading a body, borrowing it.
macro_rules! ui_chunks {
    ( $( $(#[$doc:meta])* $variant:ident($body:ident) = $type:literal, )* ) => {
        /// The kind of a chunk: its `type` without the payload, cheap to copy and match.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ChunkKind {
            $( $(#[$doc])* $variant, )*
            /// `data-<name>`
            Data,
            /// Any other `type`.
            Unknown,
        }

        impl ChunkKind {
            /// The kind of a chunk whose `type` is `type_name`.
            pub fn from_type(type_name: &str) -> ChunkKind {
                match type_name {
                    $( $type => ChunkKind::$variant, )*
                    other if other.starts_with("data-") => ChunkKind::Data,
                    _ => ChunkKind::Unknown,
                }
            }

            /// The wire `type` of this kind; `None` for [`ChunkKind::Data`] and
            /// [`ChunkKind::Unknown`], whose type is the chunk's own.
            pub fn as_str(self) -> Option<&'static str> {
                Some(match self {
                    $( ChunkKind::$variant => $type, )*
                    ChunkKind::Data | ChunkKind::Unknown => return None,
                })
            }

            /// The named keys of this kind's body, in the order the AI SDK writes them; `None`
            /// for [`ChunkKind::Unknown`].
            fn keys(self) -> Option<&'static [&'static str]> {
                Some(match self {
                    $( ChunkKind::$variant => $body::KEYS, )*
                    ChunkKind::Data => DataChunk::KEYS,
                    ChunkKind::Unknown => return None,
                })
            }
        }

        /// One chunk of the UI message stream.
        #[derive(Debug, Clone, PartialEq)]
        pub enum UiChunk {
            $( $(#[$doc])* $variant($body), )*
            /// `data-<name>`
            Data(DataChunk),
            /// A chunk of a type this model does not know, whole and untouched (its `type` is a
            /// string).
            Unknown(Map<String, Value>),
        }

        impl UiChunk {
            /// The chunk's kind.
            pub fn kind(&self) -> ChunkKind {
                match self {
                    $( UiChunk::$variant(_) => ChunkKind::$variant, )*
                    UiChunk::Data(_) => ChunkKind::Data,
                    UiChunk::Unknown(_) => ChunkKind::Unknown,
                }
            }

            /// Reads the named fields of a chunk of `kind` (known, not data) out of `map`.
            fn take_known(
                kind: ChunkKind,
                map: &mut Map<String, Value>,
            ) -> Option<Result<UiChunk, (&'static str, &'static str)>> {
                Some(match kind {
                    $( ChunkKind::$variant => $body::take(map).map(UiChunk::$variant), )*
                    ChunkKind::Data | ChunkKind::Unknown => return None,
                })
            }

            fn body(&self) -> Option<&dyn Body> {
                Some(match self {
                    $( UiChunk::$variant(b) => b, )*
                    UiChunk::Data(b) => b,
                    UiChunk::Unknown(_) => return None,
                })
            }

            fn body_mut(&mut self) -> Option<&mut dyn Body> {
                Some(match self {
                    $( UiChunk::$variant(b) => b, )*
                    UiChunk::Data(b) => b,
                    UiChunk::Unknown(_) => return None,
                })
            }
        }
    };
}

ui_chunks! {
    /// `start`
    Start(Start) = "start",
    /// `finish`
    Finish(Finish) = "finish",
    /// `abort`
    Abort(Abort) = "abort",
    /// `error`
    Error(ErrorChunk) = "error",
    /// `message-metadata`
    MessageMetadata(MessageMetadata) = "message-metadata",
    /// `start-step`
    StartStep(StepBoundary) = "start-step",
    /// `finish-step`
    FinishStep(StepBoundary) = "finish-step",
    /// `reset-step`: drop the parts of the current step.
    ResetStep(StepBoundary) = "reset-step",
    /// `text-start`
    TextStart(PartBoundary) = "text-start",
    /// `text-delta`
    TextDelta(PartDelta) = "text-delta",
    /// `text-end`
    TextEnd(PartBoundary) = "text-end",
    /// `reasoning-start`
    ReasoningStart(PartBoundary) = "reasoning-start",
    /// `reasoning-delta`
    ReasoningDelta(PartDelta) = "reasoning-delta",
    /// `reasoning-end`
    ReasoningEnd(PartBoundary) = "reasoning-end",
    /// `custom`
    Custom(Custom) = "custom",
    /// `tool-input-start`
    ToolInputStart(ToolInputStart) = "tool-input-start",
    /// `tool-input-delta`
    ToolInputDelta(ToolInputDelta) = "tool-input-delta",
    /// `tool-input-available`
    ToolInputAvailable(ToolInputAvailable) = "tool-input-available",
    /// `tool-input-error`
    ToolInputError(ToolInputError) = "tool-input-error",
    /// `tool-approval-request`
    ToolApprovalRequest(ToolApprovalRequest) = "tool-approval-request",
    /// `tool-approval-response`
    ToolApprovalResponse(ToolApprovalResponse) = "tool-approval-response",
    /// `tool-output-available`
    ToolOutputAvailable(ToolOutputAvailable) = "tool-output-available",
    /// `tool-output-error`
    ToolOutputError(ToolOutputError) = "tool-output-error",
    /// `tool-output-denied`
    ToolOutputDenied(ToolOutputDenied) = "tool-output-denied",
    /// `source-url`
    SourceUrl(SourceUrl) = "source-url",
    /// `source-document`
    SourceDocument(SourceDocument) = "source-document",
    /// `file`
    File(FileChunk) = "file",
    /// `reasoning-file`
    ReasoningFile(FileChunk) = "reasoning-file",
}

impl UiChunk {
    /// The chunk's wire `type`.
    pub fn type_name(&self) -> &str {
        match self {
            UiChunk::Data(chunk) => &chunk.data_type,
            UiChunk::Unknown(map) => map.get("type").and_then(Value::as_str).unwrap_or(""),
            other => other.kind().as_str().unwrap_or(""),
        }
    }

    /// Whether the chunk ends the turn's stream: `finish`, `abort` or `error`.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            UiChunk::Finish(_) | UiChunk::Abort(_) | UiChunk::Error(_)
        )
    }

    /// The unknown fields of a known chunk; `None` for [`UiChunk::Unknown`].
    pub fn extra(&self) -> Option<&Extra> {
        self.body().map(Body::extra)
    }

    /// `start`, with a message id.
    pub fn start(message_id: Option<String>) -> UiChunk {
        UiChunk::Start(Start {
            message_id,
            ..Start::default()
        })
    }

    /// `finish`, with a finish reason.
    pub fn finish(finish_reason: Option<String>) -> UiChunk {
        UiChunk::Finish(Finish {
            finish_reason,
            ..Finish::default()
        })
    }

    /// `abort`, with a reason.
    pub fn abort(reason: Option<String>) -> UiChunk {
        UiChunk::Abort(Abort {
            reason,
            ..Abort::default()
        })
    }

    /// `error` with `error_text`.
    pub fn error(error_text: impl Into<String>) -> UiChunk {
        UiChunk::Error(ErrorChunk {
            error_text: error_text.into(),
            ..ErrorChunk::default()
        })
    }

    /// `text-delta` of block `id`.
    pub fn text_delta(id: impl Into<String>, delta: impl Into<String>) -> UiChunk {
        UiChunk::TextDelta(PartDelta {
            id: id.into(),
            delta: delta.into(),
            ..PartDelta::default()
        })
    }

    /// Reads a chunk from a JSON value.
    ///
    /// # Errors
    ///
    /// [`ChunkError`] when the value is not an object with a string `type`, or a field of a known
    /// chunk type has the wrong type.
    pub fn from_value(value: Value) -> Result<UiChunk, ChunkError> {
        match value {
            Value::Object(map) => UiChunk::from_map(map),
            _ => Err(ChunkError::NotAnObject),
        }
    }

    /// Reads a chunk from a JSON object.
    ///
    /// # Errors
    ///
    /// As [`UiChunk::from_value`].
    pub fn from_map(mut map: Map<String, Value>) -> Result<UiChunk, ChunkError> {
        let kind = match map.get("type") {
            Some(Value::String(type_name)) => ChunkKind::from_type(type_name),
            _ => return Err(ChunkError::MissingType),
        };
        let Some(keys) = kind.keys() else {
            return Ok(UiChunk::Unknown(map));
        };
        let order = if is_canonical(&map, keys) {
            None
        } else {
            Some(map.keys().map(|k| Box::<str>::from(k.as_str())).collect())
        };
        let type_value = map.shift_remove("type");
        let field_error = |(field, problem): (&'static str, &'static str)| ChunkError::Field {
            chunk: kind.as_str().unwrap_or("data-*"),
            field,
            problem,
        };
        let map = &mut map;
        let mut chunk = match UiChunk::take_known(kind, map) {
            Some(chunk) => chunk.map_err(field_error)?,
            None if kind == ChunkKind::Data => {
                let data_type = match type_value {
                    Some(Value::String(t)) => t,
                    _ => return Err(ChunkError::MissingType),
                };
                UiChunk::Data(DataChunk::take(map, data_type).map_err(field_error)?)
            }
            None => return Err(ChunkError::MissingType),
        };
        if let Some(extra) = chunk.body_mut().map(Body::extra_mut) {
            extra.fields = std::mem::take(map);
            extra.order = order;
        }
        Ok(chunk)
    }

    /// Reads a chunk from JSON text.
    ///
    /// # Errors
    ///
    /// A message naming the problem: the text is not JSON, or not a chunk ([`ChunkError`]).
    pub fn from_json(text: &str) -> Result<UiChunk, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid json: {e}"))?;
        UiChunk::from_value(value).map_err(|e| e.to_string())
    }

    /// Checks the JSON text of one chunk as the turn's pump hands it over: JSON, no deeper than
    /// [`MAX_CHUNK_DEPTH`], and a chunk ([`UiChunk::from_value`]).
    ///
    /// # Errors
    ///
    /// A message naming the problem, as [`UiChunk::from_json`]'s, or the depth.
    pub fn check_json(text: &str) -> Result<(), String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("invalid json: {e}"))?;
        let depth = depth_of(&value);
        if depth > MAX_CHUNK_DEPTH {
            return Err(format!(
                "the chunk nests {depth} levels deep, past the {MAX_CHUNK_DEPTH} a reply can hold"
            ));
        }
        UiChunk::from_value(value)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// The chunk as a JSON object, keys in the order they are written.
    pub fn to_map(&self) -> Map<String, Value> {
        let mut map = Map::new();
        let _ = self.visit(&mut |key, value| -> Result<(), std::convert::Infallible> {
            map.insert(key.to_owned(), value.to_value());
            Ok(())
        });
        map
    }

    /// The chunk as a JSON value.
    pub fn to_value(&self) -> Value {
        Value::Object(self.to_map())
    }

    /// Calls `f` with every key and value of the chunk, in the order they are written.
    fn visit<E>(&self, f: &mut dyn FnMut(&str, FieldRef<'_>) -> Result<(), E>) -> Result<(), E> {
        let Some(body) = self.body() else {
            if let UiChunk::Unknown(map) = self {
                for (key, value) in map {
                    f(key, FieldRef::Value(value))?;
                }
            }
            return Ok(());
        };
        let type_name = self.type_name();
        let keys = body.keys();
        let extra = body.extra();
        // An unknown field never shadows `type` or a named field.
        let is_extra = |key: &str| key != "type" && !keys.contains(&key);
        match &extra.order {
            None => {
                f("type", FieldRef::Str(type_name))?;
                for key in keys {
                    if let Some(value) = body.field(key) {
                        f(key, value)?;
                    }
                }
                for (key, value) in &extra.fields {
                    if is_extra(key) {
                        f(key, FieldRef::Value(value))?;
                    }
                }
            }
            Some(order) => {
                let mut wrote_type = false;
                for key in order.iter() {
                    let key: &str = key;
                    if key == "type" {
                        f("type", FieldRef::Str(type_name))?;
                        wrote_type = true;
                    } else if keys.contains(&key) {
                        if let Some(value) = body.field(key) {
                            f(key, value)?;
                        }
                    } else if let Some(value) = extra.fields.get(key) {
                        f(key, FieldRef::Value(value))?;
                    }
                }
                if !wrote_type {
                    f("type", FieldRef::Str(type_name))?;
                }
                // Fields set after the chunk was read, which the recorded order does not know.
                let recorded = |key: &str| order.iter().any(|k| &**k == key);
                for key in keys {
                    if !recorded(key) {
                        if let Some(value) = body.field(key) {
                            f(key, value)?;
                        }
                    }
                }
                for (key, value) in &extra.fields {
                    if is_extra(key) && !recorded(key) {
                        f(key, FieldRef::Value(value))?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether `map`'s keys come as the AI SDK writes them: `type`, then named keys in `keys` order,
/// then unknown ones.
fn is_canonical(map: &Map<String, Value>, keys: &[&str]) -> bool {
    let mut iter = map.keys();
    if iter.next().map(String::as_str) != Some("type") {
        return false;
    }
    let mut next_known = 0;
    let mut in_unknown = false;
    for key in iter {
        match keys.iter().position(|k| *k == key.as_str()) {
            Some(index) => {
                if in_unknown || index < next_known {
                    return false;
                }
                next_known = index + 1;
            }
            None => in_unknown = true,
        }
    }
    true
}

impl Serialize for UiChunk {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        self.visit(&mut |key, value| map.serialize_entry(key, &value))?;
        map.end()
    }
}

impl<'de> Deserialize<'de> for UiChunk {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        UiChunk::from_value(value).map_err(serde::de::Error::custom)
    }
}

impl From<UiChunk> for Value {
    fn from(chunk: UiChunk) -> Value {
        chunk.to_value()
    }
}

impl TryFrom<Value> for UiChunk {
    type Error = ChunkError;
    fn try_from(value: Value) -> Result<Self, ChunkError> {
        UiChunk::from_value(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ui::json::to_json;
    use serde_json::json;

    fn round_trip(text: &str) -> String {
        let chunk: UiChunk = serde_json::from_str(text).unwrap();
        to_json(&chunk).unwrap()
    }

    #[test]
    fn every_chunk_type_round_trips_unchanged() {
        let cases = [
            r#"{"type":"start"}"#,
            r#"{"type":"start","messageMetadata":{"a":1},"messageId":"m"}"#,
            r#"{"type":"start","messageId":"m","messageMetadata":null}"#,
            r#"{"type":"finish","finishReason":"stop","messageMetadata":[1,2]}"#,
            r#"{"type":"abort","reason":"user"}"#,
            r#"{"type":"error","errorText":"boom"}"#,
            r#"{"type":"message-metadata","messageMetadata":"x"}"#,
            r#"{"type":"start-step"}"#,
            r#"{"type":"finish-step","extra":1}"#,
            r#"{"type":"reset-step"}"#,
            r#"{"type":"text-start","id":"t","providerMetadata":{"p":{"k":1}}}"#,
            r#"{"type":"text-delta","id":"t","delta":"hé\n"}"#,
            r#"{"type":"text-end","id":"t"}"#,
            r#"{"type":"reasoning-start","id":"r"}"#,
            r#"{"type":"reasoning-delta","id":"r","delta":"x"}"#,
            r#"{"type":"reasoning-end","id":"r"}"#,
            r#"{"type":"custom","kind":"p.k","providerMetadata":{}}"#,
            r#"{"type":"tool-input-start","toolCallId":"c","toolName":"n","providerExecuted":true,"providerMetadata":{},"toolMetadata":{"a":1},"dynamic":true,"title":"T"}"#,
            r#"{"type":"tool-input-delta","toolCallId":"c","inputTextDelta":"{\""}"#,
            r#"{"type":"tool-input-available","toolCallId":"c","toolName":"n","input":null}"#,
            r#"{"type":"tool-input-available","toolCallId":"c","toolName":"n"}"#,
            r#"{"type":"tool-input-error","toolCallId":"c","toolName":"n","input":"{bad","dynamic":false,"errorText":"e","title":"t"}"#,
            r#"{"type":"tool-approval-request","approvalId":"a","toolCallId":"c","approvalDescriptor":{"d":1},"reason":"r","isAutomatic":false,"signature":"s"}"#,
            r#"{"type":"tool-approval-response","approvalId":"a","approved":false,"reason":"no","providerExecuted":true}"#,
            r#"{"type":"tool-output-available","toolCallId":"c","output":null,"preliminary":true,"dynamic":true}"#,
            r#"{"type":"tool-output-error","toolCallId":"c","errorText":"e","providerExecuted":false}"#,
            r#"{"type":"tool-output-denied","toolCallId":"c"}"#,
            r#"{"type":"source-url","sourceId":"s","url":"https://x","title":"X"}"#,
            r#"{"type":"source-document","sourceId":"s","mediaType":"text/plain","title":"T","filename":"f.txt"}"#,
            r#"{"type":"file","mediaType":"image/png","url":"data:image/png;base64,AA=="}"#,
            r#"{"type":"reasoning-file","mediaType":"image/png","url":"u"}"#,
            r#"{"type":"data-weather","id":"w","data":{"t":1.5},"transient":false}"#,
            r#"{"type":"data-x","data":null}"#,
            r#"{"type":"data-x"}"#,
            r#"{"type":"something-new","whatever":[1,{"b":2,"a":1}]}"#,
            // Keys in another order than the AI SDK writes them, and unknown keys among them.
            r#"{"toolCallId":"c","type":"tool-input-available","zz":1,"input":{},"toolName":"n","dynamic":true,"providerExecuted":true}"#,
            r#"{"type":"text-delta","delta":"d","id":"t"}"#,
            r#"{"id":"p","type":"data-x","data":1}"#,
        ];
        for text in cases {
            assert_eq!(round_trip(text), text);
        }
    }

    #[test]
    fn kinds_and_helpers() {
        let chunk: UiChunk = serde_json::from_str(r#"{"type":"data-progress","data":1}"#).unwrap();
        assert_eq!(chunk.kind(), ChunkKind::Data);
        assert_eq!(chunk.type_name(), "data-progress");
        let UiChunk::Data(data) = &chunk else {
            panic!("not data")
        };
        assert_eq!(data.name(), "progress");
        assert!(!chunk.is_terminal());
        assert!(UiChunk::error("x").is_terminal());
        assert!(UiChunk::abort(None).is_terminal());
        assert!(UiChunk::finish(Some("stop".into())).is_terminal());
        let unknown: UiChunk = serde_json::from_str(r#"{"type":"later","x":1}"#).unwrap();
        assert_eq!(unknown.kind(), ChunkKind::Unknown);
        assert_eq!(unknown.type_name(), "later");
        assert_eq!(
            ChunkKind::from_type("tool-output-denied").as_str(),
            Some("tool-output-denied")
        );
        let chunk = UiChunk::from_json(r#"{"type":"text-end","id":"t","foo":[1]}"#).unwrap();
        assert_eq!(
            chunk.extra().map(|e| e.fields.clone()),
            Some(json!({"foo": [1]}).as_object().unwrap().clone())
        );
    }

    #[test]
    fn built_chunks_omit_absent_fields() {
        let chunk = UiChunk::TextStart(PartBoundary {
            id: "t".into(),
            ..PartBoundary::default()
        });
        assert_eq!(
            to_json(&chunk).unwrap(),
            r#"{"type":"text-start","id":"t"}"#
        );
        assert_eq!(
            to_json(&UiChunk::start(None)).unwrap(),
            r#"{"type":"start"}"#
        );
        let data = UiChunk::Data(DataChunk::new("x", json!({"a": 1})));
        assert_eq!(
            to_json(&data).unwrap(),
            r#"{"type":"data-x","data":{"a":1}}"#
        );
    }

    #[test]
    fn a_field_set_after_reading_is_written_too() {
        let mut chunk = UiChunk::from_json(r#"{"id":"t","type":"text-end"}"#).unwrap();
        if let UiChunk::TextEnd(end) = &mut chunk {
            end.provider_metadata = Some(Map::new());
        }
        assert_eq!(
            to_json(&chunk).unwrap(),
            r#"{"id":"t","type":"text-end","providerMetadata":{}}"#
        );
    }

    #[test]
    fn null_in_a_typed_optional_field_reads_as_absent() {
        assert_eq!(
            round_trip(r#"{"type":"source-url","sourceId":"s","url":"u","title":null}"#),
            r#"{"type":"source-url","sourceId":"s","url":"u"}"#
        );
    }

    #[test]
    fn malformed_chunks_are_refused() {
        let refuse = |text: &str| UiChunk::from_json(text).unwrap_err();
        assert_eq!(refuse("[1]"), "a ui message chunk must be a json object");
        assert_eq!(
            refuse(r#"{"id":"x"}"#),
            "a ui message chunk needs a string `type`"
        );
        assert_eq!(
            refuse(r#"{"type":5}"#),
            "a ui message chunk needs a string `type`"
        );
        assert_eq!(
            refuse(r#"{"type":"text-delta","id":"t"}"#),
            "`text-delta` chunk: `delta` is missing"
        );
        assert_eq!(
            refuse(r#"{"type":"text-delta","id":"t","delta":1}"#),
            "`text-delta` chunk: `delta` must be a string"
        );
        assert_eq!(
            refuse(r#"{"type":"tool-approval-response","approvalId":"a","approved":"yes"}"#),
            "`tool-approval-response` chunk: `approved` must be a boolean"
        );
        assert_eq!(
            refuse(r#"{"type":"data-x","id":3}"#),
            "`data-*` chunk: `id` must be a string"
        );
        assert_eq!(
            refuse(r#"{"type":"text-start","id":"t","providerMetadata":"x"}"#),
            "`text-start` chunk: `providerMetadata` must be an object"
        );
        assert!(refuse("{").starts_with("invalid json"));
    }

    #[test]
    fn the_fixture_chunks_round_trip() {
        let mut seen = 0;
        for (name, fixture) in crate::engine::ui::fixtures() {
            for chunk in fixture["chunks"].as_array().unwrap() {
                let text = serde_json::to_string(chunk).unwrap();
                assert_eq!(round_trip(&text), text, "{name}");
                seen += 1;
            }
        }
        assert!(seen > 50, "only {seen} chunks");
    }

    #[test]
    fn a_chunk_is_checked_for_json_depth_and_fields() {
        let nested = |depth: usize| {
            // The chunk object is level 1, `input` level 2, then `depth - 2` arrays.
            let inner = "[".repeat(depth - 2) + &"]".repeat(depth - 2);
            format!(
                r#"{{"type":"tool-input-available","toolCallId":"t","toolName":"x","input":{{"a":{inner}}}}}"#
            )
        };
        assert_eq!(
            UiChunk::check_json(r#"{"type":"text-delta","id":"1","delta":"a"}"#),
            Ok(())
        );
        assert_eq!(UiChunk::check_json(&nested(MAX_CHUNK_DEPTH)), Ok(()));
        let too_deep = UiChunk::check_json(&nested(MAX_CHUNK_DEPTH + 1)).unwrap_err();
        assert!(too_deep.contains("101 levels"), "{too_deep}");
        let past_serde = UiChunk::check_json(&nested(5000)).unwrap_err();
        assert!(past_serde.contains("recursion limit"), "{past_serde}");
        let wrong = UiChunk::check_json(r#"{"type":"text-delta","id":"1","delta":5}"#).unwrap_err();
        assert!(wrong.contains("`delta` must be a string"), "{wrong}");
        assert!(UiChunk::check_json("[1]").is_err());
        assert!(UiChunk::check_json(r#"{"type":"text-delta","id":"1","delta":"\ud800"}"#).is_err());
    }
}
