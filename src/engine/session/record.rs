//! What a session is, as stored and as shown: [`SessionSummary`] (what `list()` gives) and
//! [`SessionRecord`] (a summary with its conversation, what `get()` gives).
//!
//! Field names are the JavaScript ones (`createdAt`, `pendingInput`); absent optional fields are
//! omitted, never `null`. A record never holds the resume state: that secret lives apart, in the
//! store, and only while the session is suspended.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

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
}

impl PendingInput {
    /// Whether it waits for nothing.
    pub fn is_empty(&self) -> bool {
        self.approvals.is_empty() && self.tool_calls.is_empty()
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
    /// When it was created, in milliseconds since the epoch.
    pub created_at: f64,
    /// When it last changed, in milliseconds since the epoch.
    pub updated_at: f64,
    /// Why its last start, resume or turn failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What it waits for, when `awaiting-input` (and when suspended while it waited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_input: Option<PendingInput>,
    /// The tokens its turns used, summed over every turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
}

/// The deepest nesting a stored message may have: as deep as the engine can read it into values.
pub const MESSAGE_DEPTH: usize = 128;

/// How deeply `json` (valid JSON text) nests its arrays and objects.
fn nesting(json: &str) -> usize {
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
        // fields are read one by one instead.
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Shape {
            id: String,
            status: SessionStatus,
            #[serde(default)]
            metadata: Value,
            created_at: f64,
            updated_at: f64,
            #[serde(default)]
            error: Option<String>,
            #[serde(default)]
            pending_input: Option<PendingInput>,
            #[serde(default)]
            usage: Option<Value>,
            #[serde(default)]
            messages: Vec<StoredMessage>,
            #[serde(default)]
            command_results: Vec<KeyedCommand>,
            #[serde(default)]
            submissions: Vec<Submission>,
        }
        let shape = Shape::deserialize(deserializer)?;
        Ok(SessionRecord {
            summary: SessionSummary {
                id: shape.id,
                status: shape.status,
                metadata: shape.metadata,
                created_at: shape.created_at,
                updated_at: shape.updated_at,
                error: shape.error,
                pending_input: shape.pending_input,
                usage: shape.usage,
            },
            messages: shape.messages,
            command_results: shape.command_results,
            submissions: shape.submissions,
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
