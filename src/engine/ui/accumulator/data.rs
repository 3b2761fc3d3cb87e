//! Data, sources, files and custom parts, and the message's own fields: `start` (its id),
//! `finish` (its finish reason), metadata merged into the message's, and `error` chunks recorded.

use serde_json::Value;

use super::object::{assign, object, string, Ghosts, Literal};
use super::{AccumulateError, Changed, MessageAccumulator, ReaderError};
use crate::engine::ui::chunk::{
    Custom, DataChunk, ErrorChunk, FileChunk, Finish, MessageMetadata, SourceDocument, SourceUrl,
    Start, UiChunk,
};
use crate::engine::ui::js::merge_objects;

impl MessageAccumulator {
    /// The message's metadata after merging `metadata` into it (`updateMessageMetadata`), or
    /// `None` when `metadata` is absent or `null`.
    pub(super) fn merged_metadata(
        &self,
        metadata: Option<&Value>,
    ) -> Result<Option<Value>, AccumulateError> {
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

    /// `custom`: a custom part.
    pub(super) fn custom(&mut self, c: &Custom) -> Result<Changed, AccumulateError> {
        let part = Literal::new()
            .field("type", string("custom"))
            .field("kind", string(&c.kind))
            .field("providerMetadata", object(&c.provider_metadata))
            .build();
        self.push_part(part);
        Ok(Changed::Snapshot)
    }

    /// `file` and `reasoning-file`: a file part.
    pub(super) fn file(
        &mut self,
        chunk: &UiChunk,
        c: &FileChunk,
    ) -> Result<Changed, AccumulateError> {
        let part = Literal::new()
            .field("type", string(chunk.type_name()))
            .field("mediaType", string(&c.media_type))
            .field("url", string(&c.url))
            .field_if("providerMetadata", object(&c.provider_metadata))
            .build();
        self.push_part(part);
        Ok(Changed::Snapshot)
    }

    /// `source-url`: a source part.
    pub(super) fn source_url(&mut self, c: &SourceUrl) -> Result<Changed, AccumulateError> {
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

    /// `source-document`: a source part.
    pub(super) fn source_document(
        &mut self,
        c: &SourceDocument,
    ) -> Result<Changed, AccumulateError> {
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

    /// `data-*`: a data part, replaced in place when one of its type and id exists; a transient one is not kept.
    pub(super) fn data(
        &mut self,
        chunk: &UiChunk,
        c: &DataChunk,
    ) -> Result<Changed, AccumulateError> {
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
                let index = self.push_part((Value::Object(chunk.to_map()), Ghosts::default()));
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

    /// `start`: the id and metadata of the message.
    pub(super) fn start(&mut self, c: &Start) -> Result<Changed, AccumulateError> {
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

    /// `finish`: the finish reason and metadata.
    pub(super) fn finish(&mut self, c: &Finish) -> Result<Changed, AccumulateError> {
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

    /// `message-metadata`: metadata merged into that of the message.
    pub(super) fn message_metadata(
        &mut self,
        c: &MessageMetadata,
    ) -> Result<Changed, AccumulateError> {
        let metadata = self.merged_metadata(c.message_metadata.as_ref())?;
        let changed = metadata.is_some();
        if let Some(metadata) = metadata {
            self.set_message_field("metadata", metadata);
        }
        Ok(Self::snapshot_if(changed))
    }

    /// `error`: recorded; reading goes on.
    pub(super) fn error(&mut self, c: &ErrorChunk) -> Result<Changed, AccumulateError> {
        self.errors.push(ReaderError::Chunk(c.error_text.clone()));
        Ok(Changed::Unchanged)
    }
}
