//! What `send()` and `continue()` may add for one turn: guidance from the application
//! (`instructionAddendum`), told to the agent with the prompt but not kept as the user's words, and
//! limits (`maxSteps`, `timeoutMs`).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Value};

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

    /// What the agent is told: `prompt`, followed by the addendum when there is one.
    pub fn prompt(&self, prompt: String) -> String {
        match self.instruction_addendum.as_deref() {
            Some(addendum) if !addendum.is_empty() => format!(
                "{prompt}\n\n<instructions-for-this-turn>\n{addendum}\n</instructions-for-this-turn>"
            ),
            _ => prompt,
        }
    }

    /// The chunk that keeps the addendum with the turn's reply (its `metadata`), when there is one.
    pub fn metadata_chunk(&self) -> Option<UiChunk> {
        let addendum = self.instruction_addendum.as_deref()?;
        let chunk = json!({
            "type": "message-metadata",
            "messageMetadata": { "instructionAddendum": addendum },
        });
        serde_json::from_value::<UiChunk>(chunk).ok()
    }

    /// The words of a turn cut by `maxSteps`.
    pub fn steps_reached(max_steps: u32) -> String {
        format!("The turn reached its limit of {max_steps} steps.")
    }
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
/// `limits: { maxSteps?, timeoutMs? }`.
///
/// # Errors
/// [`SessionError::Input`] naming the option at fault.
pub fn read(addendum: Option<Value>, limits: Option<Value>) -> Result<TurnOptions> {
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
    let options = TurnOptions {
        instruction_addendum,
        max_steps: limits.max_steps.map(|Count(max)| max),
        timeout: limits.timeout_ms.map(|Millis(timeout)| timeout),
    };
    options.check()?;
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_addendum_is_bounded() {
        let at = "a".repeat(MOST_ADDENDUM_BYTES);
        assert!(read(Some(Value::String(at)), None).is_ok());
        let past = "a".repeat(MOST_ADDENDUM_BYTES + 1);
        assert!(read(Some(Value::String(past)), None).is_err());
        assert!(read(Some(Value::String("a\0".into())), None).is_err());
        assert!(read(Some(json!(3)), None).is_err());
        assert!(
            read(Some(Value::Null), None).is_err(),
            "null is no addendum"
        );
    }

    #[test]
    fn limits_are_read() {
        let options = read(None, Some(json!({ "maxSteps": 2, "timeoutMs": 1500 }))).unwrap();
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
            match read(None, Some(bad.clone())) {
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
        let options = read(Some(json!("be brief")), None).unwrap();
        let prompt = options.prompt("hello".into());
        assert!(prompt.starts_with("hello\n\n"));
        assert!(prompt.contains("be brief"));
        assert_eq!(TurnOptions::default().prompt("hello".into()), "hello");
        assert!(options.metadata_chunk().is_some());
    }
}
