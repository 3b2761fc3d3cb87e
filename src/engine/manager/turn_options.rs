//! What `send()` and `continue()` may add for one turn: guidance from the application
//! (`instructionAddendum`), told to the agent with the prompt but not kept as the user's words, and
//! limits (`maxSteps`, `timeoutMs`).

use std::time::Duration;

use serde_json::{json, Value};

use crate::engine::error::{Result, SessionError};
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

/// The options of a turn from the JSON `send()` and `continue()` are given: `instructionAddendum`,
/// `limits: { maxSteps?, timeoutMs? }`.
///
/// # Errors
/// [`SessionError::Input`] naming the option at fault.
pub fn read(addendum: Option<Value>, limits: Option<Value>) -> Result<TurnOptions> {
    let instruction_addendum = match addendum {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text),
        Some(_) => {
            return Err(SessionError::input(
                "instructionAddendum",
                "instructionAddendum must be a string",
            ))
        }
    };
    let mut options = TurnOptions {
        instruction_addendum,
        ..TurnOptions::default()
    };
    match limits {
        None | Some(Value::Null) => {}
        Some(Value::Object(limits)) => {
            for key in limits.keys() {
                if key != "maxSteps" && key != "timeoutMs" {
                    return Err(SessionError::input(
                        format!("limits.{key}"),
                        format!("limits.{key} is not a limit: maxSteps, timeoutMs"),
                    ));
                }
            }
            match limits.get("maxSteps") {
                None | Some(Value::Null) => {}
                Some(value) => match value.as_u64() {
                    Some(n) if (1..=u64::from(u32::MAX)).contains(&n) => {
                        options.max_steps = Some(n as u32)
                    }
                    _ => {
                        return Err(SessionError::input(
                            "limits.maxSteps",
                            "limits.maxSteps must be a whole number, one or more",
                        ))
                    }
                },
            }
            match limits.get("timeoutMs") {
                None | Some(Value::Null) => {}
                Some(value) => match value.as_f64() {
                    Some(ms) if (0.0..=1e15).contains(&ms) => {
                        options.timeout = Some(Duration::from_micros((ms * 1000.0) as u64))
                    }
                    _ => {
                        return Err(SessionError::input(
                            "limits.timeoutMs",
                            "limits.timeoutMs must be a number of milliseconds, zero or more",
                        ))
                    }
                },
            }
        }
        Some(_) => {
            return Err(SessionError::input(
                "limits",
                "limits must be { maxSteps?, timeoutMs? }",
            ))
        }
    }
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
    }

    #[test]
    fn limits_are_read() {
        let options = read(None, Some(json!({ "maxSteps": 2, "timeoutMs": 1500 }))).unwrap();
        assert_eq!(options.max_steps, Some(2));
        assert_eq!(options.timeout, Some(Duration::from_millis(1500)));
        for bad in [
            json!({ "maxSteps": 0 }),
            json!({ "maxSteps": 1.5 }),
            json!({ "timeoutMs": -1 }),
            json!({ "other": 1 }),
            json!(3),
        ] {
            assert!(read(None, Some(bad)).is_err());
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
