//! What a session is, as stored and as shown: [`SessionSummary`] (what `list()` gives) and
//! [`SessionRecord`] (a summary with its conversation, what `get()` gives).
//!
//! Field names are the JavaScript ones (`createdAt`, `pendingInput`); absent optional fields are
//! omitted, never `null`. A record never holds the resume state: that secret lives apart, in the
//! store, and only while the session is suspended.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub use super::timestamp::Timestamp;

/// Where a session is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionStatus {
    /// Its sandbox and harness session are being opened, or brought back from `suspended`.
    Preparing,
    /// Ready for a message.
    Idle,
    /// A turn is under way.
    Busy,
    /// The turn paused on a tool call that waits for an answer.
    AwaitingInput,
    /// Stopped, its state kept in the store and its sandbox freed.
    Suspended,
    /// Ended for good; its conversation can still be read.
    Closed,
    /// A new session that could not start; the next message tries again.
    Failed,
    /// The process stopped without suspending it; its conversation can still be read.
    Interrupted,
}

impl SessionStatus {
    /// Every status, in the order of the lifecycle.
    pub const ALL: [SessionStatus; 8] = [
        SessionStatus::Preparing,
        SessionStatus::Idle,
        SessionStatus::Busy,
        SessionStatus::AwaitingInput,
        SessionStatus::Suspended,
        SessionStatus::Closed,
        SessionStatus::Failed,
        SessionStatus::Interrupted,
    ];

    /// The status as JavaScript spells it: `awaiting-input`.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Preparing => "preparing",
            SessionStatus::Idle => "idle",
            SessionStatus::Busy => "busy",
            SessionStatus::AwaitingInput => "awaiting-input",
            SessionStatus::Suspended => "suspended",
            SessionStatus::Closed => "closed",
            SessionStatus::Failed => "failed",
            SessionStatus::Interrupted => "interrupted",
        }
    }

    /// Live sessions hold a sandbox slot and a harness session: `preparing`, `idle`, `busy`,
    /// `awaiting-input`.
    pub fn is_live(self) -> bool {
        matches!(
            self,
            SessionStatus::Preparing
                | SessionStatus::Idle
                | SessionStatus::Busy
                | SessionStatus::AwaitingInput
        )
    }
}

impl std::fmt::Display for SessionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer to an approval: given by a person, or by the `approve` policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalVerdict {
    /// Whether the tool call may run.
    pub approved: bool,
    /// Why, told to the agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A tool call waiting for its approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    /// The id the answer must carry.
    pub approval_id: String,
    /// The tool call it is about.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The call's input.
    #[serde(default)]
    pub input: Value,
    /// The answer the `approve` policy already gave, which a person cannot overturn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<ApprovalVerdict>,
    /// Fields a store was given beside those, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A tool call waiting for the result of a tool the application runs, or a question's answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingToolCall {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The call's input.
    #[serde(default)]
    pub input: Value,
    /// Fields a store was given beside those, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// What a session `awaiting-input` waits for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingInput {
    /// Tool calls waiting for an approval.
    #[serde(default)]
    pub approvals: Vec<PendingApproval>,
    /// Tool calls waiting for their result.
    #[serde(default)]
    pub tool_calls: Vec<PendingToolCall>,
    /// Fields a store was given beside those, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PendingInput {
    /// Whether it waits for nothing.
    pub fn is_empty(&self) -> bool {
        self.approvals.is_empty() && self.tool_calls.is_empty()
    }
}

/// The tokens a session's turns used, added up: zeros at `create()`, each turn adding its
/// `inputTokens`, `outputTokens` and `totalTokens` (`0` for any it lacks).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionUsage {
    /// Input tokens.
    #[serde(default, serialize_with = "count")]
    pub input_tokens: f64,
    /// Output tokens.
    #[serde(default, serialize_with = "count")]
    pub output_tokens: f64,
    /// Input and output tokens.
    #[serde(default, serialize_with = "count")]
    pub total_tokens: f64,
    /// Fields a store was given beside those three, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SessionUsage {
    /// Adds a turn's usage (an `ai` `LanguageModelUsage`): its three counts, `0` for any that is
    /// missing or not a number.
    pub fn add(&mut self, turn: &Value) {
        let of = |key: &str| turn.get(key).and_then(Value::as_f64).unwrap_or(0.0);
        self.input_tokens += of("inputTokens");
        self.output_tokens += of("outputTokens");
        self.total_tokens += of("totalTokens");
    }
}

/// A count written as JavaScript writes a number: `3`, never `3.0`.
fn count<S: serde::Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if value.fract() == 0.0 && value.abs() < 9e15 {
        serializer.serialize_i64(*value as i64)
    } else {
        serializer.serialize_f64(*value)
    }
}

/// A session without its conversation: what `list()` gives and `subscribe()` sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// The session's id.
    pub id: String,
    /// Where it is in its lifecycle.
    pub status: SessionStatus,
    /// What the application keeps with it, as JSON.
    #[serde(default)]
    pub metadata: Value,
    /// When it was created, in ISO 8601.
    pub created_at: Timestamp,
    /// Its last change of status, or the end of its last turn, in ISO 8601.
    pub updated_at: Timestamp,
    /// The turns that reached their end.
    #[serde(default)]
    pub turns: u64,
    /// The tokens its turns used, added up.
    #[serde(default)]
    pub usage: SessionUsage,
    /// Why its last start, resume or turn failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What it waits for, when `awaiting-input` (and when suspended while it waited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_input: Option<PendingInput>,
    /// Fields a store was given that are none of the above, kept as they were.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl SessionSummary {
    /// A new session's summary: no turn, no usage, created and updated `now`.
    pub fn new(id: String, status: SessionStatus, metadata: Value, now: Timestamp) -> Self {
        SessionSummary {
            id,
            status,
            metadata,
            created_at: now.clone(),
            updated_at: now,
            turns: 0,
            usage: SessionUsage::default(),
            error: None,
            pending_input: None,
            extra: Map::new(),
        }
    }
}

/// The deepest nesting a stored message may have: as deep as the engine can read it into values.
pub const MESSAGE_DEPTH: usize = 128;

/// How deeply `json` (valid JSON text) nests its arrays and objects.
pub(super) fn nesting(json: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for byte in json.bytes() {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// A message of the conversation (a `UIMessage`), kept as its JSON text: cloned, stored and
/// sent as it is, parsed only where the engine needs to look into it (the last messages of a
/// turn). A conversation of many turns so costs its text, not a tree of values per message.
#[derive(Clone, Serialize)]
#[serde(transparent)]
pub struct StoredMessage(Box<RawValue>);

impl<'de> Deserialize<'de> for StoredMessage {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        if nesting(raw.get()) > MESSAGE_DEPTH {
            return Err(serde::de::Error::custom(format!(
                "a message is nested more than {MESSAGE_DEPTH} levels deep"
            )));
        }
        Ok(StoredMessage(raw))
    }
}

impl StoredMessage {
    /// The message `value`, as JSON text.
    pub fn from_value(value: &Value) -> StoredMessage {
        // A `Value` always writes as JSON, and that JSON always reads back as a raw value.
        let text = serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned());
        StoredMessage(RawValue::from_string(text).unwrap_or_else(|_| null_raw()))
    }

    /// A message from JSON text, which is checked to be JSON.
    ///
    /// # Errors
    /// When `text` is not JSON.
    pub fn from_json(text: String) -> Result<StoredMessage, serde_json::Error> {
        serde_json::from_str(&text)
    }

    /// The message as a value, to look into it.
    pub fn to_value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The message's JSON text.
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// The message's `id`, read without parsing the rest of it into values.
    pub fn id(&self) -> Option<String> {
        self.head().id
    }

    /// The message's `role`, read without parsing the rest of it into values.
    pub fn role(&self) -> Option<String> {
        self.head().role
    }

    fn head(&self) -> Head {
        serde_json::from_str::<Head>(self.0.get()).unwrap_or_default()
    }
}

/// The fields of a message read without its parts.
#[derive(Default, Deserialize)]
struct Head {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    role: Option<String>,
}

fn null_raw() -> Box<RawValue> {
    RawValue::from_string("null".to_owned()).expect("null is JSON")
}

impl From<Value> for StoredMessage {
    fn from(value: Value) -> Self {
        StoredMessage::from_value(&value)
    }
}

impl PartialEq for StoredMessage {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl std::fmt::Debug for StoredMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.get())
    }
}

/// A session with its conversation: what `get()` gives and what a store keeps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRecord {
    /// Everything but the conversation.
    #[serde(flatten)]
    pub summary: SessionSummary,
    /// The conversation as `UIMessage`s, oldest first.
    pub messages: Vec<StoredMessage>,
    /// The results of the commands `exec()` ran with a `key`, oldest first: the same key again
    /// returns its result without running anything.
    #[serde(rename = "commandResults", skip_serializing_if = "Vec::is_empty")]
    pub command_results: Vec<KeyedCommand>,
    /// The last submissions of turns (`submissionId`), oldest first: a retry finds its turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub submissions: Vec<Submission>,
}

/// What a shell command run by `exec()` gave: its exit code and its output, each stream cut to
/// `maxOutputBytes` (how many bytes were cut is said).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecResult {
    /// The command's exit code; nonzero is a result, not an error.
    pub exit_code: i64,
    /// Its standard output, at most `max_output_bytes` of it.
    pub stdout: String,
    /// Its standard error, at most `max_output_bytes` of it.
    pub stderr: String,
    /// The bound each stream was cut to, in UTF-8 bytes.
    pub max_output_bytes: u64,
    /// How many bytes of the standard output were cut.
    pub stdout_cut_bytes: u64,
    /// How many bytes of the standard error were cut.
    pub stderr_cut_bytes: u64,
}

/// The result of a command run with a `key`, kept with the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyedCommand {
    /// The caller's key.
    pub key: String,
    /// The command, exactly as given.
    pub command: String,
    /// What it gave.
    pub result: ExecResult,
}

/// A turn a `submissionId` started: a retry with the same id and request finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Submission {
    /// The caller's `submissionId`.
    pub id: String,
    /// The digest of what was submitted: the same id with another request is refused.
    pub digest: String,
    /// The id of the assistant message the turn wrote.
    pub reply_id: String,
}

impl<'de> Deserialize<'de> for SessionRecord {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `flatten` would buffer the messages as values, which raw messages cannot come from: the
        // fields are read one by one instead, those it does not know kept as values.
        deserializer.deserialize_map(RecordVisitor)
    }
}

struct RecordVisitor;

impl<'de> serde::de::Visitor<'de> for RecordVisitor {
    type Value = SessionRecord;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a session record")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> Result<SessionRecord, A::Error> {
        use serde::de::Error;
        let (mut id, mut status, mut metadata, mut created_at, mut updated_at) =
            (None, None, None, None, None);
        let (mut turns, mut usage, mut error, mut pending_input, mut messages) =
            (None, None, None, None, None);
        let (mut submissions, mut command_results) = (None, None);
        let mut extra = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "id" => id = Some(map.next_value::<String>()?),
                "status" => status = Some(map.next_value::<SessionStatus>()?),
                "metadata" => metadata = Some(map.next_value::<Value>()?),
                "createdAt" => created_at = Some(map.next_value::<Timestamp>()?),
                "updatedAt" => updated_at = Some(map.next_value::<Timestamp>()?),
                "turns" => turns = Some(map.next_value::<u64>()?),
                "usage" => usage = map.next_value::<Option<SessionUsage>>()?,
                "error" => error = map.next_value::<Option<String>>()?,
                "pendingInput" => pending_input = map.next_value::<Option<PendingInput>>()?,
                "messages" => messages = Some(map.next_value::<Vec<StoredMessage>>()?),
                "submissions" => submissions = Some(map.next_value::<Vec<Submission>>()?),
                "commandResults" => {
                    command_results = Some(map.next_value::<Vec<KeyedCommand>>()?);
                }
                _ => {
                    let value = map.next_value::<Value>()?;
                    extra.insert(key, value);
                }
            }
        }
        Ok(SessionRecord {
            summary: SessionSummary {
                id: id.ok_or_else(|| A::Error::missing_field("id"))?,
                status: status.ok_or_else(|| A::Error::missing_field("status"))?,
                metadata: metadata.unwrap_or_default(),
                created_at: created_at.ok_or_else(|| A::Error::missing_field("createdAt"))?,
                updated_at: updated_at.ok_or_else(|| A::Error::missing_field("updatedAt"))?,
                turns: turns.unwrap_or(0),
                usage: usage.unwrap_or_default(),
                error,
                pending_input,
                extra,
            },
            messages: messages.unwrap_or_default(),
            command_results: command_results.unwrap_or_default(),
            submissions: submissions.unwrap_or_default(),
        })
    }
}

impl SessionRecord {
    /// The session's id.
    pub fn id(&self) -> &str {
        &self.summary.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    #[test]
    fn a_record_of_the_reference_shape_round_trips_with_its_unknown_fields() {
        let text = r#"{"id":"a","status":"awaiting-input","metadata":{"t":1},"createdAt":"2026-01-02T03:04:05.678Z","updatedAt":"2026-01-02T03:04:06.000Z","turns":3,"usage":{"inputTokens":1,"outputTokens":2.5,"totalTokens":3,"cached":{"x":1}},"error":"e","pendingInput":{"approvals":[],"toolCalls":[]},"owner":{"name":"ada"},"n":-0.0,"messages":[{"id":"m","role":"user","parts":[]}],"later":null}"#;
        let record: SessionRecord = serde_json::from_str(text).unwrap();
        assert_eq!(record.summary.turns, 3);
        assert_eq!(record.summary.usage.output_tokens, 2.5);
        assert_eq!(
            record.summary.created_at.millis(),
            1_767_323_045_678.0,
            "2026-01-02T03:04:05.678Z"
        );
        assert_eq!(
            record.summary.extra.keys().collect::<Vec<_>>(),
            ["owner", "n", "later"]
        );
        // Written back: the known fields in the reference's order, the others after them, the
        // messages last.
        assert_eq!(
            serde_json::to_string(&record).unwrap(),
            r#"{"id":"a","status":"awaiting-input","metadata":{"t":1},"createdAt":"2026-01-02T03:04:05.678Z","updatedAt":"2026-01-02T03:04:06.000Z","turns":3,"usage":{"inputTokens":1,"outputTokens":2.5,"totalTokens":3,"cached":{"x":1}},"error":"e","pendingInput":{"approvals":[],"toolCalls":[]},"owner":{"name":"ada"},"n":-0.0,"later":null,"messages":[{"id":"m","role":"user","parts":[]}]}"#
        );
        let summary: SessionSummary = serde_json::from_str(text).unwrap();
        assert_eq!(summary.extra.get("owner"), Some(&json!({"name": "ada"})));
        assert!(
            summary.extra.contains_key("messages"),
            "a summary keeps what it is given"
        );
    }

    #[test]
    fn a_record_of_0_1_reads_with_iso_times_no_turn_and_zero_usage() {
        let record: SessionRecord = serde_json::from_str(
            r#"{"id":"a","status":"idle","metadata":null,"createdAt":1700000000000,"updatedAt":1700000000001.5,"messages":[]}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_value(&record).unwrap(),
            json!({
                "id": "a", "status": "idle", "metadata": null,
                "createdAt": "2023-11-14T22:13:20.000Z", "updatedAt": "2023-11-14T22:13:20.001Z",
                "turns": 0, "usage": {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0},
                "messages": [],
            })
        );
    }

    #[test]
    fn a_record_of_the_wrong_shape_is_refused() {
        for text in [
            r#"{"status":"idle","createdAt":"x","updatedAt":"x"}"#,
            r#"{"id":"a","status":"idle","updatedAt":"x"}"#,
            r#"{"id":"a","status":"idle","createdAt":null,"updatedAt":"x"}"#,
            r#"{"id":"a","status":"idle","createdAt":"x","updatedAt":"x","turns":-1}"#,
            r#"{"id":"a","status":"idle","createdAt":"x","updatedAt":"x","usage":{"inputTokens":"1"}}"#,
            r#"{"id":"a","status":"asleep","createdAt":"x","updatedAt":"x"}"#,
        ] {
            assert!(
                serde_json::from_str::<SessionRecord>(text).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn usage_adds_the_three_counts_of_a_turn_zero_for_what_it_lacks() {
        let mut usage = SessionUsage::default();
        usage.add(
            &json!({"inputTokens": 3, "outputTokens": null, "totalTokens": 3, "raw": {"x": 1}}),
        );
        usage.add(&json!({"inputTokens": 1, "outputTokens": 2, "inputTokenDetails": {"a": 1}}));
        usage.add(&json!("not usage"));
        assert_eq!(
            serde_json::to_value(&usage).unwrap(),
            json!({"inputTokens": 4, "outputTokens": 2, "totalTokens": 3})
        );
    }

    #[test]
    fn nesting_counts_brackets_outside_strings() {
        assert_eq!(nesting("1"), 0);
        assert_eq!(nesting(r#"{"a":[1,{"b":"[[[{"}]}"#), 3);
        assert_eq!(nesting(r#"["\"[["]"#), 1);
    }

    #[test]
    fn a_message_nested_too_deep_is_refused() {
        let deep = format!(
            "{}{}",
            "[".repeat(MESSAGE_DEPTH + 1),
            "]".repeat(MESSAGE_DEPTH + 1)
        );
        assert!(StoredMessage::from_json(deep).is_err());
        let fine = format!("{}{}", "[".repeat(MESSAGE_DEPTH), "]".repeat(MESSAGE_DEPTH));
        assert!(StoredMessage::from_json(fine).is_ok());
    }
}
