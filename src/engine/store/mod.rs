//! Where sessions are kept: the [`SessionStore`] seam and the stores the engine ships.
//!
//! A store keeps each session's record (with its conversation) and, only while the session is
//! suspended, the state its harness session resumes from: a secret (it holds the bridge token),
//! kept apart from the record and never listed.

pub mod lazy;
pub mod memory;
pub mod sqlite;

use async_trait::async_trait;
use serde_json::Value;

use crate::engine::error::Result;
use crate::engine::session::{SessionRecord, SessionSummary};

/// Where sessions are kept: the five methods of the JavaScript `SessionStore`.
///
/// Implementations must be safe to call concurrently for different sessions; the manager never
/// writes one session from two places at once.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Writes `record`. With `resume_state`, keeps it beside the record; without, drops any kept.
    ///
    /// # Errors
    /// When the write fails; nothing is half-written.
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()>;

    /// The record of session `id`, with its conversation.
    ///
    /// # Errors
    /// When the read fails.
    async fn get(&self, id: &str) -> Result<Option<SessionRecord>>;

    /// Every session without its conversation, the most recently updated first.
    ///
    /// # Errors
    /// When the read fails.
    async fn list(&self) -> Result<Vec<SessionSummary>>;

    /// [`SessionStore::list`] as JSON text (`[summary, ...]`, newest first): what crosses to
    /// JavaScript. Stores that keep their summaries as JSON write it without decoding them.
    ///
    /// # Errors
    /// When the read fails.
    async fn list_json(&self) -> Result<String> {
        serde_json::to_string(&self.list().await?).map_err(|e| {
            crate::engine::error::SessionError::internal(format!(
                "the list could not be written: {e}"
            ))
        })
    }

    /// The state session `id` resumes from, kept while it is suspended.
    ///
    /// # Errors
    /// When the read fails.
    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>>;

    /// Forgets session `id` and its resume state.
    ///
    /// # Errors
    /// When the write fails.
    async fn delete(&self, id: &str) -> Result<()>;
}

/// Sorts summaries as `list()` gives them: the most recently updated first, ties by id.
pub fn sort_newest_first(summaries: &mut [SessionSummary]) {
    summaries.sort_by(|a, b| {
        b.updated_at
            .total_cmp(&a.updated_at)
            .then_with(|| a.id.cmp(&b.id))
    });
}
