//! Where sessions are kept: the [`SessionStore`] seam and the stores the engine ships.
//!
//! A store keeps each session's record (with its conversation) and, only while the session is
//! suspended, the state its harness session resumes from: a secret (it holds the bridge token),
//! kept apart from the record and never listed.

pub mod lazy;
pub mod listing;
pub mod memory;
pub mod postgres;
pub mod sqlite;

use async_trait::async_trait;
use serde_json::Value;

use crate::engine::error::{Result, SessionError};
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

    /// [`SessionStore::save`] of a record the caller gives away: a store that keeps records as
    /// they are (in memory) keeps it without copying it. Default: [`SessionStore::save`].
    ///
    /// # Errors
    /// When the write fails; nothing is half-written.
    async fn save_owned(&self, record: SessionRecord, resume_state: Option<Value>) -> Result<()> {
        self.save(&record, resume_state.as_ref()).await
    }

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
        serde_json::to_string(&self.list().await?)
            .map_err(|e| SessionError::internal(format!("the list could not be written: {e}")))
    }

    /// [`SessionStore::list_json`] for a caller that keeps the summaries it was given before:
    /// `[stamp, rows]`, `rows` newest first, each row either a summary (one the caller must not
    /// keep: it has no stamp), `[stamp, summary]` (a summary the caller has not seen, which it may
    /// keep under that stamp), or a bare stamp, for a summary the caller was given under that stamp
    /// by an earlier answer whose `stamp` was `known` or more. A stamp names one summary as it was
    /// written, once, in this store; `stamp` is the latest given when the list was read (pass it
    /// as `known` next time). `[stamp]` alone, when `known` is that stamp: nothing was written or
    /// deleted since (every change takes a new stamp). With `known` 0 every row carries its
    /// summary. Default: every row a summary, stamp 0.
    ///
    /// # Errors
    /// When the read fails.
    async fn list_since(&self, known: u64) -> Result<String> {
        let _ = known;
        Ok(format!("[0,{}]", self.list_json().await?))
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

    /// A manager starts on the store: a store that keeps one manager's sessions only (the SQLite
    /// store) refuses a second manager while the first runs. [`SessionStore::release`] ends the
    /// claim. Default: any number of managers.
    ///
    /// # Errors
    /// When another manager holds the store.
    fn claim(&self) -> Result<()> {
        Ok(())
    }

    /// Lets go of what the store holds (the SQLite store closes its file, and frees it for
    /// another store): the manager's `shutdown()` calls it once every write is done. Later calls
    /// may fail. Default: nothing to let go of.
    ///
    /// # Errors
    /// When closing failed (what was written stays written).
    async fn release(&self) -> Result<()> {
        Ok(())
    }

    /// The manager is shutting down: the store's calls still waiting at `deadline`, and any made
    /// after it, fail rather than wait (a store written in JavaScript may never answer). Default:
    /// nothing, for a store whose calls end on their own.
    fn bound_calls_until(&self, deadline: tokio::time::Instant) {
        let _ = deadline;
    }

    /// Whether the shutdown's bound is past (see [`SessionStore::bound_calls_until`]): a write
    /// that failed is not tried again. Default: never.
    fn past_bound(&self) -> bool {
        false
    }

    /// The sessions whose rows could not be read, found by `list()` (which skips them) or
    /// `get()` since the last call, each given once, with why. Default: none.
    fn take_unreadable(&self) -> Vec<(String, SessionError)> {
        Vec::new()
    }

    /// Whether session `id` is known to be unreadable: `delete()` then removes it unread.
    fn is_unreadable(&self, id: &str) -> bool {
        let _ = id;
        false
    }

    /// The cluster of instances this store is shared by, when it offers one: the manager then
    /// runs in many-instance mode (see [`crate::engine::cluster`]). Default: none, one process
    /// per store.
    fn cluster(&self) -> Option<std::sync::Arc<dyn crate::engine::cluster::Cluster>> {
        None
    }
}

/// The sessions a store found unreadable, each given once by
/// [`SessionStore::take_unreadable`]; forgotten once written whole again or deleted.
#[derive(Default)]
pub struct UnreadableRows {
    found: std::sync::Mutex<std::collections::HashMap<String, (SessionError, bool)>>,
}

impl UnreadableRows {
    fn found(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, (SessionError, bool)>> {
        self.found
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Notes that session `id` could not be read, and why (the first reason stays).
    pub fn note(&self, id: &str, error: SessionError) {
        self.found().entry(id.to_owned()).or_insert((error, false));
    }

    /// Session `id` is readable again (written whole), or gone.
    pub fn forget(&self, id: &str) {
        self.found().remove(id);
    }

    /// Whether session `id` is known to be unreadable.
    pub fn contains(&self, id: &str) -> bool {
        self.found().contains_key(id)
    }

    /// The sessions not given yet, with why.
    pub fn take(&self) -> Vec<(String, SessionError)> {
        let mut found = self.found();
        let mut fresh = Vec::new();
        for (id, (error, given)) in found.iter_mut() {
            if !*given {
                *given = true;
                fresh.push((id.clone(), error.clone()));
            }
        }
        fresh
    }
}

/// Sorts summaries as `list()` gives them: the most recently updated first, ties by id.
pub fn sort_newest_first(summaries: &mut [SessionSummary]) {
    summaries.sort_by(|a, b| {
        b.updated_at
            .millis()
            .total_cmp(&a.updated_at.millis())
            .then_with(|| a.id.cmp(&b.id))
    });
}
