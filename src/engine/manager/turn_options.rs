//! What `send()` and `continue()` may add for one turn: guidance from the application
//! (`instructionAddendum`), told to the agent with the prompt but not kept as the user's words, and
//! limits (`maxSteps`, `timeoutMs`), and the structured answer asked for (`output`, see
//! [`super::turn_output`]).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

use super::turn_output::{self, OutputSpec};
use crate::engine::error::{Result, SessionError};
use crate::engine::input::{self, Count, Millis};
use crate::engine::ui::UiChunk;

/// The longest addendum, in UTF-8 bytes.
pub const MOST_ADDENDUM_BYTES: usize = 32_000;

/// The options of one turn.
#[derive(Debug, Clone, Default)]
pub struct TurnOptions {
    /// Application-owned guidance for this turn only.
    pub instruction_addendum: Option<String>,
    /// The most steps (`start-step` chunks) the turn may start.
    pub max_steps: Option<u32>,
    /// Cuts the turn after this long, instead of `turnTimeoutMs`.
    pub timeout: Option<Duration>,
    /// The structured answer asked for.
    pub output: Option<OutputSpec>,
    /// The addendum of an earlier `continue()` the agent could not be told (a continuation
    /// carries no words): told with this turn's prompt.
    pub carried_addendum: Option<String>,
}

impl TurnOptions {
    /// Refuses an addendum too long or with a NUL, and a `maxSteps` of zero.
    ///
    /// # Errors
    /// [`SessionError::Input`] naming the option.
    pub fn check(&self) -> Result<()> {
        if let Some(addendum) = &self.instruction_addendum {
            if addendum.len() > MOST_ADDENDUM_BYTES || addendum.contains('\0') {
                return Err(SessionError::input(
                    "instructionAddendum",
                    format!(
                        "instructionAddendum must be at most {MOST_ADDENDUM_BYTES} UTF-8 bytes, \
                         without NUL"
                    ),
                ));
            }
        }
        if self.max_steps == Some(0) {
            return Err(SessionError::input(
                "limits.maxSteps",
                "limits.maxSteps must be a whole number, one or more",
            ));
        }
        Ok(())
    }

    /// What the agent is told: `prompt`, followed by the addendum when there is one, the
    /// addendum carried from an earlier `continue()`, and the answer's format when `output` asks
    /// one.
    pub fn prompt(&self, prompt: String) -> String {
        let mut told = prompt;
        if let Some(addendum) = self
            .instruction_addendum
            .as_deref()
            .filter(|a| !a.is_empty())
        {
            told.push_str(&format!(
                "\n\n<instructions-for-this-turn>\n{addendum}\n</instructions-for-this-turn>"
            ));
        }
        if let Some(carried) = self.carried_addendum.as_deref().filter(|a| !a.is_empty()) {
            told.push_str(&format!(
                "\n\n<instructions-given-with-my-last-answers>\n{carried}\n</instructions-given-with-my-last-answers>"
            ));
        }
        if let Some(output) = &self.output {
            told.push_str("\n\n");
            told.push_str(&output.guidance());
        }
        told
    }

    /// The chunk that keeps the addendum with the turn's reply (its `metadata`), when there is one.
    /// With `untold`, the agent could not be told it with this turn (a continuation carries no
    /// words): the reply's `metadata.instructionAddendumUntold` is `true`, and the next prompt
    /// tells it (see [`carried_addendum`]).
    pub fn metadata_chunk(&self, untold: bool) -> Option<UiChunk> {
        let addendum = self.instruction_addendum.as_deref()?;
        let mut metadata = json!({ "instructionAddendum": addendum });
        if untold {
            metadata[UNTOLD] = json!(true);
        }
        let chunk = json!({ "type": "message-metadata", "messageMetadata": metadata });
        serde_json::from_value::<UiChunk>(chunk).ok()
    }

    /// The words of a turn cut by `maxSteps`.
    pub fn steps_reached(max_steps: u32) -> String {
        format!("The turn reached its limit of {max_steps} steps.")
    }
}

/// The key of a reply's `metadata` that marks its addendum as not told to the agent yet.
pub const UNTOLD: &str = "instructionAddendumUntold";

/// The addendum of `message` (the last of a conversation) that its agent was not told yet: a
/// `continue()` gave it, and a continuation carries no words.
pub fn carried_addendum(message: Option<&Value>) -> Option<String> {
    let metadata = message?.get("metadata")?;
    if metadata.get(UNTOLD).and_then(Value::as_bool) != Some(true) {
        return None;
    }
    metadata
        .get("instructionAddendum")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The chunk that marks the carried addendum of a reply as told.
pub fn told_chunk() -> Option<UiChunk> {
    serde_json::from_value::<UiChunk>(json!({
        "type": "message-metadata",
        "messageMetadata": { UNTOLD: false },
    }))
    .ok()
}

/// Whether `chunk` starts a step.
pub(super) fn starts_step(chunk: &UiChunk) -> bool {
    chunk.type_name() == "start-step"
}

/// The options of a turn as `send()` and `continue()` are given them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct TurnInput {
    #[serde(default, deserialize_with = "input::present")]
    instruction_addendum: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    limits: Option<Limits>,
}

/// `limits: { maxSteps?, timeoutMs? }`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Limits {
    #[serde(default, deserialize_with = "input::present")]
    max_steps: Option<Count<1>>,
    #[serde(default, deserialize_with = "input::present")]
    timeout_ms: Option<Millis>,
}

/// The options of a turn from the JSON `send()` and `continue()` are given: `instructionAddendum`,
/// `limits: { maxSteps?, timeoutMs? }`, `output: { schema, name?, description? }`.
///
/// # Errors
/// [`SessionError::Input`] naming the option at fault.
pub fn read(
    addendum: Option<Value>,
    limits: Option<Value>,
    output: Option<Value>,
) -> Result<TurnOptions> {
    let mut given = serde_json::Map::new();
    if let Some(addendum) = addendum {
        given.insert("instructionAddendum".into(), addendum);
    }
    if let Some(limits) = limits {
        given.insert("limits".into(), limits);
    }
    let TurnInput {
        instruction_addendum,
        limits,
    } = input::read(Value::Object(given), "options", "a turn")?;
    let limits = limits.unwrap_or(Limits {
        max_steps: None,
        timeout_ms: None,
    });
    let mut options = TurnOptions {
        instruction_addendum,
        max_steps: limits.max_steps.map(|Count(max)| max),
        timeout: limits.timeout_ms.map(|Millis(timeout)| timeout),
        ..TurnOptions::default()
    };
    options.check()?;
    options.output = turn_output::read(output)?;
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_addendum_is_bounded() {
        let at = "a".repeat(MOST_ADDENDUM_BYTES);
        assert!(read(Some(Value::String(at)), None, None).is_ok());
        let past = "a".repeat(MOST_ADDENDUM_BYTES + 1);
        assert!(read(Some(Value::String(past)), None, None).is_err());
        assert!(read(Some(Value::String("a\0".into())), None, None).is_err());
        assert!(read(Some(json!(3)), None, None).is_err());
        assert!(
            read(Some(Value::Null), None, None).is_err(),
            "null is no addendum"
        );
    }

    #[test]
    fn limits_are_read() {
        let options = read(
            None,
            Some(json!({ "maxSteps": 2, "timeoutMs": 1500 })),
            None,
        )
        .unwrap();
        assert_eq!(options.max_steps, Some(2));
        assert_eq!(options.timeout, Some(Duration::from_millis(1500)));
        for (bad, at) in [
            (json!({ "maxSteps": 0 }), "limits.maxSteps"),
            (json!({ "maxSteps": 1.5 }), "limits.maxSteps"),
            (json!({ "timeoutMs": -1 }), "limits.timeoutMs"),
            (json!({ "timeoutMs": "NaN" }), "limits.timeoutMs"),
            (json!({ "other": 1 }), "limits.other"),
            (json!(3), "limits"),
        ] {
            match read(None, Some(bad.clone()), None) {
                Err(SessionError::Input { path, message }) => {
                    assert_eq!(path, at, "{bad}");
                    assert!(message.starts_with(at), "{message}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_prompt_carries_the_addendum() {
        let mut options = read(
            Some(json!("be brief")),
            None,
            Some(json!({ "schema": { "type": "object" } })),
        )
        .unwrap();
        options.carried_addendum = Some("from before".into());
        let prompt = options.prompt("hello".into());
        assert!(prompt.starts_with("hello\n\n"));
        assert!(prompt.contains("be brief"));
        assert!(prompt.contains("from before"));
        assert!(prompt.contains("<answer-format>"));
        assert_eq!(TurnOptions::default().prompt("hello".into()), "hello");
        assert!(options.metadata_chunk(false).is_some());
    }

    #[test]
    fn an_untold_addendum_is_carried() {
        let untold = json!({ "metadata": { "instructionAddendum": "x", UNTOLD: true } });
        assert_eq!(carried_addendum(Some(&untold)).as_deref(), Some("x"));
        let told = json!({ "metadata": { "instructionAddendum": "x", UNTOLD: false } });
        assert_eq!(carried_addendum(Some(&told)), None);
        assert_eq!(carried_addendum(None), None);
    }
}
