//! Steps: `start-step` adds a `step-start` part (shown in the next snapshot only) and marks where
//! the current step begins; `reset-step` removes the current step's parts and forgets its open
//! blocks and streaming calls.

use serde_json::Value;

use super::object::{string, Literal};
use super::{AccumulateError, Changed, MessageAccumulator};

impl MessageAccumulator {
    /// `start-step`.
    pub(super) fn start_step(&mut self) -> Result<Changed, AccumulateError> {
        let (part, ghosts) = Literal::new().field("type", string("step-start")).build();
        let index = self.push_part((part, ghosts));
        self.step_start = index + 1;
        Ok(Changed::Quietly)
    }

    /// `reset-step`.
    pub(super) fn reset_step(&mut self) -> Result<Changed, AccumulateError> {
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

    /// Removes the parts from `len` on, with everything that points at them.
    pub(super) fn truncate_parts(&mut self, len: usize) {
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
}
