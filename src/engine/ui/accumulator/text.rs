//! Text and reasoning parts: a `text-start` / `reasoning-start` opens a block, deltas append to
//! it, and the matching end closes it; a delta or end without its open block stops the reader.

use serde_json::Value;

use super::object::{assign, assign_or_keep, object, string, Literal};
use super::{AccumulateError, Changed, MessageAccumulator};
use crate::engine::ui::chunk::{PartBoundary, PartDelta, UiChunk};

impl MessageAccumulator {
    /// `text-start`: a streaming text part.
    pub(super) fn text_start(&mut self, c: &PartBoundary) -> Result<Changed, AccumulateError> {
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

    /// `text-delta` and `reasoning-delta`: text appended to the open block.
    pub(super) fn block_delta(
        &mut self,
        chunk: &UiChunk,
        c: &PartDelta,
    ) -> Result<Changed, AccumulateError> {
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

    /// `text-end`: the text part is done.
    pub(super) fn text_end(&mut self, c: &PartBoundary) -> Result<Changed, AccumulateError> {
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

    /// `reasoning-start`: a streaming reasoning part.
    pub(super) fn reasoning_start(&mut self, c: &PartBoundary) -> Result<Changed, AccumulateError> {
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

    /// `reasoning-end`: the reasoning part is done.
    pub(super) fn reasoning_end(&mut self, c: &PartBoundary) -> Result<Changed, AccumulateError> {
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
