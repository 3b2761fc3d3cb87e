//! Suspending, closing, deleting, and shutting down: how sessions let go of what they hold.
//!
//! Suspending stops the harness session with its state (kept in the store while suspended) and
//! suspends the sandbox lease; closing destroys the harness session and closes the lease, or, for
//! a suspended session, lets the sandboxes discard what they keep for it.

use std::sync::Arc;

use futures::future::join_all;

use super::entry::{lock, Entry, Live, Phase};
use super::{
    timers, Inner, APPLICATION_STOPPED, NOT_STOPPED_CLEANLY, SESSION_CLOSED, STOPPED_BEFORE_READY,
};
use crate::engine::error::{Result, SessionError};
use crate::engine::hooks::SessionEvent;
use crate::engine::session::lifecycle::{decide, Command, Decision, Event, Input};
use crate::engine::session::{SessionStatus, SessionSummary};

impl Inner {
    /// `suspend()`.
    pub(super) async fn suspend_command(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
    ) -> Result<SessionSummary> {
        loop {
            let command = entry.commands.lock().await;
            self.load(entry).await?;
            let (status, error) = status_and_error(entry)?;
            match decide(status, Input::Command(Command::Suspend)) {
                Decision::Suspend => return self.suspend_entry(entry, None).await,
                Decision::Nothing => return Ok(entry.snapshot()?.summary),
                Decision::WaitReady => {
                    drop(command);
                    self.wait_while(entry, SessionStatus::Preparing).await;
                }
                _ => return Err(SessionError::in_status(&entry.id, status, error.as_deref())),
            }
        }
    }

    /// Suspends a live session under its command lock: its harness session stopped with its
    /// state, its lease suspended, its slot handed back; `error` is what the record says of it
    /// (a shutdown that cut a turn short). A turn cut short for it is finished with the session
    /// written.
    ///
    /// # Errors
    /// When the session could not be written; a harness session that will not stop leaves the
    /// session `interrupted` instead (its state is lost).
    pub(super) async fn suspend_entry(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        error: Option<&str>,
    ) -> Result<SessionSummary> {
        let Live { harness, lease, .. } = take_live(entry)?;
        let resume_state = self
            .bounded(async move { harness.stop().await })
            .await
            .unwrap_or_else(|| Err(self.no_answer("The harness session's stop()")));
        let suspended = self
            .bounded(async move { lease.suspend().await })
            .await
            .unwrap_or_else(|| Err(self.no_answer("The sandbox lease's suspend()")));
        if let Err(error) = suspended {
            self.seams
                .hooks
                .on_error(&error, "suspend", Some(&entry.id));
        }
        let resume_state = match resume_state {
            Ok(state) => state,
            Err(stop_error) => {
                self.seams
                    .hooks
                    .on_error(&stop_error, "stop", Some(&entry.id));
                {
                    let mut state = entry.state();
                    state.phase = Phase::Kept;
                    state.apply(Event::StopFailed)?;
                    state.set_error(Some(NOT_STOPPED_CLEANLY.to_owned()))?;
                    state.record_mut()?.summary.pending_input = None;
                }
                self.release_slot(&entry.id);
                let summary = self.save(entry, None).await;
                self.finish_cut_turn(entry, summary.as_ref().ok());
                entry.notify();
                return summary;
            }
        };
        {
            let mut state = entry.state();
            state.phase = Phase::Kept;
            state.apply(Event::Stopped)?;
            state.set_error(error.map(str::to_owned))?;
        }
        self.release_slot(&entry.id);
        let summary = self.save(entry, Some(&resume_state)).await;
        self.finish_cut_turn(entry, summary.as_ref().ok());
        entry.notify();
        if let Ok(summary) = &summary {
            timers::arm_close_suspended(self, &entry.id, summary.updated_at.millis());
        }
        summary
    }

    /// Finishes the client of a turn a close or a shutdown cut short, with the session they wrote.
    fn finish_cut_turn(&self, entry: &Entry, written: Option<&SessionSummary>) {
        let Some(cut) = entry.state().cut_turn.take() else {
            return;
        };
        let summary = match written {
            Some(summary) => summary.clone(),
            None => match entry.snapshot() {
                Ok(record) => record.summary,
                Err(_) => return,
            },
        };
        if !cut.closing.is_empty() && !cut.client_gone {
            self.seams.clients.deliver(cut.turn_id, cut.closing);
        }
        lock(&self.registry).turns.remove(&cut.turn_id);
        self.seams.clients.finish(cut.turn_id, &summary);
    }

    /// `close()`.
    pub(super) async fn close_command(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
    ) -> Result<SessionSummary> {
        loop {
            // A turn whose `agent.stream()` has not answered holds the command lock: cut it
            // first, so that it lets go past the wind-down.
            cut_before_locking(entry, SESSION_CLOSED);
            let command = entry.commands.lock().await;
            self.load(entry).await?;
            let (status, error) = status_and_error(entry)?;
            match decide(status, Input::Command(Command::Close)) {
                Decision::Close => return self.close_entry(entry).await,
                Decision::Discard => return self.discard_entry(entry).await,
                Decision::Nothing => return Ok(entry.snapshot()?.summary),
                Decision::CutTurnAndClose => {
                    let turn = entry.state().turn().map(|turn| turn.slot.clone());
                    let Some(turn) = turn else {
                        // The turn was cut short and wrote nothing: the close writes it.
                        return self.close_entry(entry).await;
                    };
                    turn.cut(SESSION_CLOSED);
                    drop(command);
                    self.wind_down(entry, SESSION_CLOSED, true).await;
                }
                Decision::CutStartAndClose => {
                    if let Phase::Preparing(start) = &entry.state().phase {
                        let _ = start.cancel.send(Some(SESSION_CLOSED.to_owned()));
                    }
                    drop(command);
                    self.wait_while(entry, SessionStatus::Preparing).await;
                }
                _ => return Err(SessionError::in_status(&entry.id, status, error.as_deref())),
            }
        }
    }

    /// Closes a live session (its harness session destroyed, its lease closed), or a failed or
    /// interrupted one, which holds nothing.
    async fn close_entry(&self, entry: &Entry) -> Result<SessionSummary> {
        let live = {
            let mut state = entry.state();
            match std::mem::replace(&mut state.phase, Phase::Leaving) {
                Phase::Ready(live) => Some(live),
                _ => None,
            }
        };
        if let Some(Live { harness, lease, .. }) = live {
            let destroyed = self
                .bounded(async move { harness.destroy().await })
                .await
                .unwrap_or_else(|| Err(self.no_answer("The harness session's destroy()")));
            if let Err(error) = destroyed {
                self.seams
                    .hooks
                    .on_error(&error, "destroy", Some(&entry.id));
            }
            let closed = self
                .bounded(async move { lease.close().await })
                .await
                .unwrap_or_else(|| Err(self.no_answer("The sandbox lease's close()")));
            if let Err(error) = closed {
                self.seams.hooks.on_error(&error, "close", Some(&entry.id));
            }
        } else if entry.status() == Some(SessionStatus::Interrupted) {
            // What it held may still be kept (a crash, a stop that failed, a turn let go of).
            self.discard_bounded(&entry.id).await;
        }
        self.mark_closed(entry).await
    }

    /// Closes a suspended session: the sandboxes discard what they keep for it.
    pub(super) async fn discard_entry(&self, entry: &Entry) -> Result<SessionSummary> {
        if let Err(error) = self.seams.sandboxes.discard(&entry.id).await {
            self.seams
                .hooks
                .on_error(&error, "discard", Some(&entry.id));
        }
        self.mark_closed(entry).await
    }

    async fn mark_closed(&self, entry: &Entry) -> Result<SessionSummary> {
        {
            let mut state = entry.state();
            state.phase = Phase::Kept;
            state.apply(Event::Closed)?;
            state.set_error(None)?;
            // What it waited for can never be answered now; as the reference, its message is
            // left as it is.
            state.record_mut()?.summary.pending_input = None;
        }
        self.release_slot(&entry.id);
        let summary = self.save(entry, None).await;
        self.finish_cut_turn(entry, summary.as_ref().ok());
        entry.notify();
        summary
    }

    /// `delete()`: closes the session, then forgets it.
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
        self.close_command(entry).await?;
        let _command = entry.commands.lock().await;
        {
            let _order = entry.saving.lock().await;
            self.journal.delete(&entry.id).await?;
        }
        entry.state().record = None;
        self.seams
            .hooks
            .on_event(SessionEvent::Deleted(entry.id.clone()));
        self.tell_change(&entry.id, true).await;
        entry.notify();
        Ok(())
    }

    /// `shutdown()`: every turn cut short, every start cut short, every live session suspended;
    /// then the sandboxes shut down.
    pub(super) async fn shutdown(self: &Arc<Self>) -> Result<()> {
        // No call into the store outlives the wind-down: a save that never settles would hold
        // its session's lock, and the shutdown with it.
        self.seams
            .store
            .bound_calls_until(tokio::time::Instant::now() + self.options.wind_down);
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
        if let Some(many) = &self.many {
            // Every lease let go of: the next call for each session, anywhere, takes it.
            if let Err(error) = many.cluster.leave().await {
                self.seams.hooks.on_error(&error, "release", None);
            }
        }
        if let Err(error) = self.seams.store.release().await {
            self.seams.hooks.on_error(&error, "write", None);
        }
        stopped
    }

    async fn shut_down_entry(self: &Arc<Self>, entry: &Arc<Entry>) {
        loop {
            cut_before_locking(entry, APPLICATION_STOPPED);
            let command = entry.commands.lock().await;
            let Some(status) = entry.status() else {
                return;
            };
            match decide(status, Input::Event(Event::Shutdown)) {
                Decision::CutTurn => {
                    let turn = entry.state().turn().map(|turn| turn.slot.clone());
                    let Some(turn) = turn else {
                        // The turn was cut short and wrote nothing: the suspension writes it.
                        if let Err(error) =
                            self.suspend_entry(entry, Some(APPLICATION_STOPPED)).await
                        {
                            self.seams
                                .hooks
                                .on_error(&error, "suspend", Some(&entry.id));
                        }
                        return;
                    };
                    turn.cut(APPLICATION_STOPPED);
                    drop(command);
                    self.wind_down(entry, APPLICATION_STOPPED, true).await;
                }
                Decision::CutStart => {
                    if let Phase::Preparing(start) = &entry.state().phase {
                        let _ = start.cancel.send(Some(STOPPED_BEFORE_READY.to_owned()));
                    }
                    drop(command);
                    self.wait_while(entry, SessionStatus::Preparing).await;
                }
                Decision::Suspend => {
                    if let Err(error) = self.suspend_entry(entry, None).await {
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

/// Cuts the turn under way in `entry`, if any, without its command lock: a turn still waiting
/// for `agent.stream()` holds that lock, and lets go of it once cut and wound down.
fn cut_before_locking(entry: &Entry, reason: &str) {
    let turn = entry.state().turn().map(|turn| turn.slot.clone());
    if let Some(turn) = turn {
        turn.cut(reason);
    }
}

/// Takes what a live session between turns holds; it is leaving memory.
fn take_live(entry: &Entry) -> Result<Live> {
    let mut state = entry.state();
    match std::mem::replace(&mut state.phase, Phase::Leaving) {
        Phase::Ready(live) => Ok(live),
        other => {
            state.phase = other;
            Err(SessionError::internal(
                "only a live session between turns can be suspended",
            ))
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
