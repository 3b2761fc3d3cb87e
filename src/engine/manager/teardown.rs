//! Suspending, closing, deleting, and shutting down: how sessions let go of what they hold.
//!
//! Suspending stops the harness session with its state (kept in the store while suspended) and
//! suspends the sandbox lease; closing destroys the harness session and closes the lease, or, for
//! a suspended session, lets the sandboxes discard what they keep for it.

use std::sync::Arc;

use futures::future::join_all;

use super::entry::{now_ms, Entry};
use super::messages;
use super::{
    timers, Inner, APPLICATION_STOPPED, NOT_STOPPED_CLEANLY, SESSION_CLOSED, STOPPED_BEFORE_READY,
};
use crate::engine::error::{Result, SessionError};
use crate::engine::hooks::SessionEvent;
use crate::engine::session::lifecycle::{decide, Command, Decision};
use crate::engine::session::{SessionStatus, SessionSummary, StoredMessage};

impl Inner {
    /// `suspend()`.
    pub(super) async fn suspend_command(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
    ) -> Result<SessionSummary> {
        let _command = entry.commands.lock().await;
        self.load(entry).await?;
        let (status, error) = status_and_error(entry)?;
        match decide(status, Command::Suspend, false) {
            Decision::Suspend => self.suspend_entry(entry).await,
            Decision::Nothing => Ok(entry.snapshot()?.summary),
            _ => Err(SessionError::in_status(&entry.id, status, error.as_deref())),
        }
    }

    /// Suspends a live session, idle or awaiting input, under its command lock: its harness
    /// session stopped with its state, its lease suspended, its slot handed back.
    ///
    /// # Errors
    /// When the session could not be written; a harness session that will not stop leaves the
    /// session `interrupted` instead (its state is lost).
    pub(super) async fn suspend_entry(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
    ) -> Result<SessionSummary> {
        let (harness, lease) = {
            let mut state = entry.state();
            (state.harness.take(), state.lease.take())
        };
        let resume_state = match harness {
            Some(harness) => self
                .bounded(async move { harness.stop().await })
                .await
                .unwrap_or_else(|| Err(self.no_answer("The harness session's stop()"))),
            None => Err(SessionError::internal(
                "a live session had no harness session",
            )),
        };
        if let Some(lease) = lease {
            let suspended = self
                .bounded(async move { lease.suspend().await })
                .await
                .unwrap_or_else(|| Err(self.no_answer("The sandbox lease's suspend()")));
            if let Err(error) = suspended {
                self.seams
                    .hooks
                    .on_error(&error, "suspend", Some(&entry.id));
            }
        }
        let resume_state = match resume_state {
            Ok(state) => state,
            Err(error) => {
                self.seams
                    .hooks
                    .on_error(&error, "suspend", Some(&entry.id));
                {
                    let mut state = entry.state();
                    state.set_status(SessionStatus::Interrupted, now_ms())?;
                    state.set_error(Some(NOT_STOPPED_CLEANLY.to_owned()))?;
                    state.record_mut()?.summary.pending_input = None;
                }
                self.release_slot(&entry.id);
                let summary = self.save(entry, None).await;
                entry.notify();
                return summary;
            }
        };
        {
            let mut state = entry.state();
            state.set_status(SessionStatus::Suspended, now_ms())?;
            state.paused_turn_lost = false;
        }
        self.release_slot(&entry.id);
        let summary = self.save(entry, Some(&resume_state)).await;
        entry.notify();
        if let Ok(summary) = &summary {
            timers::arm_close_suspended(self, &entry.id, summary.updated_at);
        }
        summary
    }

    /// `close()`.
    pub(super) async fn close_command(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
    ) -> Result<SessionSummary> {
        loop {
            let command = entry.commands.lock().await;
            self.load(entry).await?;
            let (status, error) = status_and_error(entry)?;
            if status == SessionStatus::Interrupted {
                // What it held may still be kept (a crash, a stop that failed): free it.
                self.discard_bounded(&entry.id).await;
                return self.mark_closed(entry).await;
            }
            match decide(status, Command::Close, false) {
                Decision::Close => return self.close_entry(entry).await,
                Decision::Discard => return self.discard_entry(entry).await,
                Decision::CutTurnAndClose => {
                    let turn = entry.state().turn.clone();
                    if let Some(turn) = turn {
                        turn.cut(SESSION_CLOSED);
                    }
                    drop(command);
                    self.wind_down(entry, SESSION_CLOSED).await;
                }
                Decision::CutStartAndClose => {
                    if let Some(start) = entry.state().start.as_ref() {
                        let _ = start.cancel.send(Some(SESSION_CLOSED.to_owned()));
                    }
                    drop(command);
                    self.wait_while(entry, SessionStatus::Preparing).await;
                }
                _ => return Err(SessionError::in_status(&entry.id, status, error.as_deref())),
            }
        }
    }

    /// Closes a live or failed session: its harness session destroyed, its lease closed.
    async fn close_entry(&self, entry: &Entry) -> Result<SessionSummary> {
        let (harness, lease) = {
            let mut state = entry.state();
            (state.harness.take(), state.lease.take())
        };
        if let Some(harness) = harness {
            let destroyed = self
                .bounded(async move { harness.destroy().await })
                .await
                .unwrap_or_else(|| Err(self.no_answer("The harness session's destroy()")));
            if let Err(error) = destroyed {
                self.seams.hooks.on_error(&error, "close", Some(&entry.id));
            }
        }
        if let Some(lease) = lease {
            let closed = self
                .bounded(async move { lease.close().await })
                .await
                .unwrap_or_else(|| Err(self.no_answer("The sandbox lease's close()")));
            if let Err(error) = closed {
                self.seams.hooks.on_error(&error, "close", Some(&entry.id));
            }
        }
        self.mark_closed(entry).await
    }

    /// Closes a suspended session: the sandboxes discard what they keep for it.
    pub(super) async fn discard_entry(&self, entry: &Entry) -> Result<SessionSummary> {
        if let Err(error) = self.seams.sandboxes.discard(&entry.id).await {
            self.seams.hooks.on_error(&error, "close", Some(&entry.id));
        }
        self.mark_closed(entry).await
    }

    async fn mark_closed(&self, entry: &Entry) -> Result<SessionSummary> {
        {
            let mut state = entry.state();
            state.set_status(SessionStatus::Closed, now_ms())?;
            let record = state.record_mut()?;
            // What it waited for can never be answered now: its tool calls are closed.
            if record.summary.pending_input.take().is_some() {
                if let Some(last) = record.messages.last_mut() {
                    let mut message = last.to_value();
                    if messages::close_open_calls(&mut message, SESSION_CLOSED) {
                        *last = StoredMessage::from_value(&message);
                    }
                }
            }
        }
        self.release_slot(&entry.id);
        let summary = self.save(entry, None).await;
        entry.notify();
        summary
    }

    /// `delete()`: closes the session if it can be closed, then forgets it.
    pub(super) async fn delete(self: &Arc<Self>, entry: &Arc<Entry>) -> Result<()> {
        if let Err(error) = self.load(entry).await {
            // A row that cannot be read is removed unread.
            if !self.seams.store.is_unreadable(&entry.id) {
                return Err(error);
            }
            let _command = entry.commands.lock().await;
            self.journal.delete(&entry.id).await?;
            self.seams
                .hooks
                .on_event(SessionEvent::Deleted(entry.id.clone()));
            return Ok(());
        }
        if entry.status() == Some(SessionStatus::Interrupted) {
            // What it held may still be kept (a crash, a stop that failed): free it.
            self.discard_bounded(&entry.id).await;
        }
        let closable = !matches!(
            entry.status(),
            Some(SessionStatus::Closed | SessionStatus::Interrupted)
        );
        if closable {
            match self.close_command(entry).await {
                // Closed meanwhile (a close() under way finished first): nothing left to close.
                Err(SessionError::Conflict {
                    status: SessionStatus::Closed | SessionStatus::Interrupted,
                    ..
                }) => {}
                other => {
                    other?;
                }
            }
        }
        let _command = entry.commands.lock().await;
        {
            let _order = entry.saving.lock().await;
            self.journal.delete(&entry.id).await?;
        }
        entry.state().record = None;
        self.seams
            .hooks
            .on_event(SessionEvent::Deleted(entry.id.clone()));
        entry.notify();
        Ok(())
    }

    /// `shutdown()`: every turn cut short, every start cut short, every live session suspended;
    /// then the sandboxes shut down.
    pub(super) async fn shutdown(self: &Arc<Self>) -> Result<()> {
        let entries = self.all_entries();
        join_all(entries.iter().map(|entry| self.shut_down_entry(entry))).await;
        // Stopping every sandbox (one after the other, each with its own stop timeout) gets six
        // wind-downs: a minute by default.
        let sandboxes = self.seams.sandboxes.clone();
        let bound = self.options.wind_down * 6;
        let stopped = self
            .bounded_for(bound, async move { sandboxes.shutdown().await })
            .await
            .unwrap_or_else(|| Err(self.no_answer_within("The sandboxes' shutdown()", bound)));
        self.journal.flush(self.options.wind_down).await;
        if let Err(error) = self.seams.store.release().await {
            self.seams.hooks.on_error(&error, "write", None);
        }
        stopped
    }

    async fn shut_down_entry(self: &Arc<Self>, entry: &Arc<Entry>) {
        loop {
            let command = entry.commands.lock().await;
            let status = entry.status();
            match status {
                Some(SessionStatus::Busy) => {
                    let turn = entry.state().turn.clone();
                    if let Some(turn) = turn {
                        turn.cut(APPLICATION_STOPPED);
                    }
                    drop(command);
                    self.wind_down(entry, APPLICATION_STOPPED).await;
                }
                Some(SessionStatus::Preparing) => {
                    if let Some(start) = entry.state().start.as_ref() {
                        let _ = start.cancel.send(Some(STOPPED_BEFORE_READY.to_owned()));
                    }
                    drop(command);
                    self.wait_while(entry, SessionStatus::Preparing).await;
                }
                Some(SessionStatus::Idle | SessionStatus::AwaitingInput) => {
                    if let Err(error) = self.suspend_entry(entry).await {
                        self.seams
                            .hooks
                            .on_error(&error, "suspend", Some(&entry.id));
                    }
                    return;
                }
                _ => return,
            }
        }
    }
}

fn status_and_error(entry: &Entry) -> Result<(SessionStatus, Option<String>)> {
    let state = entry.state();
    let record = state
        .record
        .as_ref()
        .ok_or_else(|| SessionError::NotFound {
            session_id: entry.id.clone(),
        })?;
    Ok((record.summary.status, record.summary.error.clone()))
}
