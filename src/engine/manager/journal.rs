//! The store-writing path: every write of a session goes through the [`Journal`], which keeps
//! what could not be written and writes it again in the background until the store takes it.
//!
//! Invariants:
//! - the writes of one session reach the store one at a time, in order (a lock per session);
//! - a write that fails is reported once (`onError`, action `write`) and kept, whole, as the
//!   session's *pending* write: a later write of the session replaces it (each write is the whole
//!   session), a successful one clears it; so a resume state is never dropped because its write
//!   failed;
//! - while a session has a pending write, the manager reads it from here rather than from the
//!   store (its record, and its resume state when suspended): it carries on from memory;
//! - a retrier task writes the pending writes again, backing off up to [`MAX_BACKOFF`], until
//!   none is left, without any further call: once the disk has room again, every session's latest
//!   state reaches the file. `flush` waits for them within a bound and says what is left.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::entry::lock;
use crate::engine::error::{Result, SessionError};
use crate::engine::hooks::ManagerHooks;
use crate::engine::session::{SessionRecord, SessionSummary};
use crate::engine::store::{sort_newest_first, SessionStore};

/// The first wait before a failed write is tried again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// The longest wait between two tries of the pending writes: a store that keeps failing is
/// called a few times a minute at most, a dozen times during the shutdown's wait.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// A write the store refused, kept until it takes it.
#[derive(Clone)]
struct Pending {
    /// Bumped by each failed write of the session, so a retry knows whether it wrote the latest.
    version: u64,
    record: SessionRecord,
    resume_state: Option<Value>,
    /// Why the store refused it, last time.
    error: SessionError,
}

/// The writes of every session, and the ones still to write.
pub(crate) struct Journal {
    store: Arc<dyn SessionStore>,
    /// In many-instance mode: every write fenced by this instance's lease on its session.
    fences: Option<Arc<super::many::Fences>>,
    hooks: Arc<dyn ManagerHooks>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    pending: HashMap<String, Pending>,
    /// One lock per session being written: its writes reach the store in order.
    order: HashMap<String, Arc<tokio::sync::Mutex<()>>>,
    next_version: u64,
    retrying: bool,
    /// The shutdown's `flush` tries the pending writes itself: the retrier leaves them to it.
    flushing: bool,
    /// The manager shut down: nothing is retried any more (the store may be closed).
    closed: bool,
}

impl Journal {
    /// A journal writing to `store`, reporting to `hooks`.
    pub(crate) fn new(
        store: Arc<dyn SessionStore>,
        hooks: Arc<dyn ManagerHooks>,
        fences: Option<Arc<super::many::Fences>>,
    ) -> Arc<Journal> {
        Arc::new(Journal {
            store,
            fences,
            hooks,
            state: Mutex::new(State::default()),
        })
    }

    /// Writes `record` (with `resume_state` when it is suspended). A failure is reported and kept
    /// for the retrier: the call itself never fails because the store did. Once the manager has
    /// shut down (and released its store), nothing is written: a turn let go of that wakes late
    /// must not take the file back.
    pub(crate) async fn write(
        self: &Arc<Self>,
        record: &SessionRecord,
        resume_state: Option<&Value>,
    ) {
        if lock(&self.state).closed {
            return;
        }
        let id = record.summary.id.clone();
        let order = self.order_of(&id);
        {
            let _order = order.lock().await;
            match self.save(record, resume_state).await {
                Ok(()) => {
                    lock(&self.state).pending.remove(&id);
                }
                // Fenced out: another instance owns the session now; this write is not kept.
                Err(error @ SessionError::LeaseLost { .. }) => {
                    lock(&self.state).pending.remove(&id);
                    self.hooks.on_error(&error, "write", Some(&id));
                }
                Err(error) => {
                    self.hooks.on_error(&error, "write", Some(&id));
                    let mut state = lock(&self.state);
                    state.next_version += 1;
                    let version = state.next_version;
                    state.pending.insert(
                        id.clone(),
                        Pending {
                            version,
                            record: record.clone(),
                            resume_state: resume_state.cloned(),
                            error,
                        },
                    );
                    if !state.retrying {
                        state.retrying = true;
                        let journal = self.clone();
                        tokio::spawn(async move { journal.retry().await });
                    }
                }
            }
        }
        self.forget_order(&id, order);
    }

    /// Writes to the store, fenced in many-instance mode.
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()> {
        match &self.fences {
            Some(fences) => fences.save(record, resume_state).await,
            None => self.store.save(record, resume_state).await,
        }
    }

    /// Forgets session `id`: its pending write dropped, then its rows deleted.
    ///
    /// # Errors
    /// When the store could not delete it.
    pub(crate) async fn delete(&self, id: &str) -> Result<()> {
        let order = self.order_of(id);
        let result = {
            let _order = order.lock().await;
            lock(&self.state).pending.remove(id);
            self.store.delete(id).await
        };
        self.forget_order(id, order);
        result
    }

    /// The record of session `id`: its pending write, else the store's.
    ///
    /// # Errors
    /// When the store fails.
    pub(crate) async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        if let Some(pending) = lock(&self.state).pending.get(id) {
            return Ok(Some(pending.record.clone()));
        }
        self.store.get(id).await
    }

    /// The resume state of session `id`: its pending write's, else the store's.
    ///
    /// # Errors
    /// When the store fails.
    pub(crate) async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        if let Some(pending) = lock(&self.state).pending.get(id) {
            return Ok(pending.resume_state.clone());
        }
        self.store.get_resume_state(id).await
    }

    /// Every summary, the pending writes in place of what the store has.
    ///
    /// # Errors
    /// When the store fails.
    pub(crate) async fn list(&self) -> Result<Vec<SessionSummary>> {
        let mut summaries = self.store.list().await?;
        if self.overlay(&mut summaries) {
            sort_newest_first(&mut summaries);
        }
        Ok(summaries)
    }

    /// [`Journal::list`] as JSON text: the store's own text when nothing is pending.
    ///
    /// # Errors
    /// When the store fails.
    pub(crate) async fn list_json(&self) -> Result<String> {
        if lock(&self.state).pending.is_empty() {
            return self.store.list_json().await;
        }
        serde_json::to_string(&self.list().await?)
            .map_err(|e| SessionError::internal(format!("the list could not be written: {e}")))
    }

    /// [`Journal::list_json`] for a caller that keeps summaries: see
    /// [`SessionStore::list_since`]. With writes pending, every row a summary (stamp 0).
    ///
    /// # Errors
    /// When the store fails.
    pub(crate) async fn list_since(&self, known: u64) -> Result<String> {
        if lock(&self.state).pending.is_empty() {
            return self.store.list_since(known).await;
        }
        Ok(format!("[0,{}]", self.list_json().await?))
    }

    /// Puts the pending writes' summaries in place of the store's; whether any was.
    fn overlay(&self, summaries: &mut Vec<SessionSummary>) -> bool {
        let state = lock(&self.state);
        if state.pending.is_empty() {
            return false;
        }
        let mut missing: HashMap<&String, &Pending> = state.pending.iter().collect();
        for summary in summaries.iter_mut() {
            if let Some(pending) = missing.remove(&summary.id) {
                *summary = pending.record.summary.clone();
            }
        }
        summaries.extend(missing.into_values().map(|p| p.record.summary.clone()));
        true
    }

    /// Waits until every pending write is written, for `bound` at most; then reports each one
    /// still pending (its latest state is not in the store), stops retrying (the manager shuts
    /// down and its store is released), and answers how many were left.
    pub(crate) async fn flush(&self, bound: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + bound;
        let mut backoff = FIRST_BACKOFF;
        // One caller of the store at a time: the background retrier stops at its next wake-up.
        lock(&self.state).flushing = true;
        loop {
            self.write_pending().await;
            if lock(&self.state).pending.is_empty() {
                lock(&self.state).closed = true;
                return 0;
            }
            if tokio::time::Instant::now() + backoff > deadline || self.store.past_bound() {
                break;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        let left: Vec<(String, SessionError)> = lock(&self.state)
            .pending
            .iter()
            .map(|(id, pending)| (id.clone(), pending.error.clone()))
            .collect();
        lock(&self.state).closed = true;
        for (id, error) in &left {
            let error = SessionError::host(format!(
                "the latest state of session {id} could not be written before the shutdown: {error}"
            ));
            self.hooks.on_error(&error, "write", Some(id));
        }
        left.len()
    }

    /// The background retrier: tries the pending writes again until none is left.
    async fn retry(self: Arc<Self>) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            tokio::time::sleep(backoff).await;
            {
                let mut state = lock(&self.state);
                if state.closed || state.flushing {
                    state.retrying = false;
                    return;
                }
            }
            self.write_pending().await;
            let mut state = lock(&self.state);
            if state.pending.is_empty() || state.closed {
                state.retrying = false;
                return;
            }
            drop(state);
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Tries each pending write once, in each session's order.
    async fn write_pending(&self) {
        let ids: Vec<String> = lock(&self.state).pending.keys().cloned().collect();
        for id in ids {
            let order = self.order_of(&id);
            {
                let _order = order.lock().await;
                let pending = lock(&self.state).pending.get(&id).cloned();
                if let Some(pending) = pending {
                    let written = self
                        .save(&pending.record, pending.resume_state.as_ref())
                        .await;
                    let mut state = lock(&self.state);
                    match written {
                        Ok(()) => {
                            if state.pending.get(&id).map(|p| p.version) == Some(pending.version) {
                                state.pending.remove(&id);
                            }
                        }
                        Err(SessionError::LeaseLost { .. }) => {
                            state.pending.remove(&id);
                        }
                        Err(error) => {
                            if let Some(kept) = state.pending.get_mut(&id) {
                                kept.error = error;
                            }
                        }
                    }
                }
            }
            self.forget_order(&id, order);
        }
    }

    /// The lock that orders the writes of session `id`.
    fn order_of(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.state)
            .order
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    /// Drops the order lock of `id` when nobody else holds it and nothing is pending.
    fn forget_order(&self, id: &str, order: Arc<tokio::sync::Mutex<()>>) {
        let mut state = lock(&self.state);
        // Clones are only made under `state`: the map's and this one mean nobody else has it.
        if Arc::strong_count(&order) == 2 && !state.pending.contains_key(id) {
            state.order.remove(id);
        }
    }
}
