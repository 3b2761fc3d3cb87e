//! Bounds on every wait for the application's code: a turn cut short (by `interrupt()`,
//! `close()`, `shutdown()` or `turnTimeoutMs`) gets the wind-down bound to end; one that does not
//! is let go of. A harness session's `stop()`/`destroy()`, a lease's `suspend()`/`close()` and the
//! sandboxes' `discard()` get the same bound, and go on in the background past it.
//!
//! Letting go of a turn: its harness session and its lease are dropped (destroyed and closed in
//! the background), the session is written `interrupted` with the reason, the client's stream is
//! ended, and the failure reported to `onError` (action `turn`). The turn's driver, if it ever
//! wakes, finds the turn no longer the session's and writes nothing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::entry::{lock, Entry, Live, Phase, TurnSlot};
use super::Inner;
use crate::engine::error::{Result, SessionError};
use crate::engine::session::lifecycle::Event;
use crate::engine::session::SessionStatus;

/// Stops the turn timer of a turn when dropped (the turn ended).
pub(super) struct TimerGuard(Option<tokio::task::JoinHandle<()>>);

impl Drop for TimerGuard {
    fn drop(&mut self) {
        if let Some(timer) = self.0.take() {
            timer.abort();
        }
    }
}

impl Inner {
    /// Runs `work` in its own task and waits for it `wind_down` at most: past it, the work goes
    /// on in the background and `None` is answered.
    pub(super) async fn bounded<T, F>(&self, work: F) -> Option<T>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        self.bounded_for(self.options.wind_down, work).await
    }

    /// [`Inner::bounded`] with its own bound.
    pub(super) async fn bounded_for<T, F>(&self, bound: Duration, work: F) -> Option<T>
    where
        T: Send + 'static,
        F: Future<Output = T> + Send + 'static,
    {
        let task = tokio::spawn(work);
        match tokio::time::timeout(bound, task).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(_)) | Err(_) => None,
        }
    }

    /// The words of a call the application's code did not answer within the bound.
    pub(super) fn no_answer(&self, what: &str) -> SessionError {
        self.no_answer_within(what, self.options.wind_down)
    }

    /// [`Inner::no_answer`] with its own bound.
    pub(super) fn no_answer_within(&self, what: &str, bound: Duration) -> SessionError {
        SessionError::host(format!(
            "{what} did not answer within {} ms: harness-sessions let go of it.",
            bound.as_millis()
        ))
    }

    /// Lets the sandboxes free what they keep for session `id`, within the bound; a failure is
    /// reported (action `discard`).
    pub(super) async fn discard_bounded(&self, id: &str) {
        let sandboxes = self.seams.sandboxes.clone();
        let owned = id.to_owned();
        match self
            .bounded(async move { sandboxes.discard(&owned).await })
            .await
        {
            Some(Ok(())) => {}
            Some(Err(error)) => self.seams.hooks.on_error(&error, "discard", Some(id)),
            None => {
                let error = self.no_answer("The sandboxes' discard()");
                self.seams.hooks.on_error(&error, "discard", Some(id));
            }
        }
    }

    /// Waits for the turn of `entry`, cut short, to end, within the bound; lets go of it past
    /// the bound. `reason` is why it was cut; `turn_over`: wait for the turn to be over (a close
    /// or a shutdown, for which it writes nothing), else for the session to leave `busy`.
    pub(super) async fn wind_down(&self, entry: &Arc<Entry>, reason: &str, turn_over: bool) {
        let bound = self.options.wind_down;
        let waited = if turn_over {
            tokio::time::timeout(bound, self.wait_turn_over(entry)).await
        } else {
            tokio::time::timeout(bound, self.wait_while(entry, SessionStatus::Busy)).await
        };
        if waited.is_err() {
            self.let_go(entry, reason).await;
        }
    }

    /// Resolves once the turn in `slot` has been cut short and has had the wind-down bound to
    /// end: with the reason it was cut. For a turn whose `agent.stream()` does not resolve.
    pub(super) async fn cut_and_wound_down(&self, slot: &TurnSlot) -> String {
        loop {
            if let Some(reason) = slot.cut_reason() {
                tokio::time::sleep(self.options.wind_down).await;
                return reason;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Arms the turn's timeout for the turn in `slot` (its `limits.timeoutMs`, which replaces
    /// `turnTimeoutMs` longer or shorter, else `turnTimeoutMs`): cut short at the timeout, let go
    /// of one wind-down later. The timer stops with the guard.
    pub(super) fn arm_turn_timeout(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        slot: &Arc<TurnSlot>,
        turn_timeout: Option<Duration>,
    ) -> TimerGuard {
        let Some(timeout) = turn_timeout.or(self.options.turn_timeout) else {
            return TimerGuard(None);
        };
        let manager = Arc::downgrade(self);
        let entry = entry.clone();
        let slot = Arc::downgrade(slot);
        TimerGuard(Some(tokio::spawn(async move {
            tokio::time::sleep(timeout).await;
            let Some(turn) = slot.upgrade() else { return };
            turn.cut(super::TURN_TOO_LONG);
            drop(turn);
            let Some(inner) = manager.upgrade() else {
                return;
            };
            tokio::time::sleep(inner.options.wind_down).await;
            if let Some(turn) = slot.upgrade() {
                if is_current(&entry, &turn) {
                    inner.let_go(&entry, super::TURN_TOO_LONG).await;
                }
            }
        })))
    }

    /// Lets go of the turn under way in `entry`, which did not wind down: see the module
    /// documentation.
    pub(super) async fn let_go(&self, entry: &Arc<Entry>, reason: &str) {
        let _command = entry.commands.lock().await;
        self.let_go_locked(entry, reason).await;
    }

    /// [`Inner::let_go`], the caller holding the session's command lock. Returns whether there
    /// was a turn to let go of.
    pub(super) async fn let_go_locked(&self, entry: &Arc<Entry>, reason: &str) -> bool {
        let words = format!(
            "{} The turn did not wind down within {} ms: its harness session was let go.",
            reason,
            self.options.wind_down.as_millis()
        );
        let taken = {
            let mut state = entry.state();
            let busy = state.record.as_ref().map(|r| r.summary.status) == Some(SessionStatus::Busy);
            if !busy || state.turn().is_none() {
                None
            } else {
                let Phase::Busy(live, turn) = std::mem::replace(&mut state.phase, Phase::Kept)
                else {
                    unreachable!("the phase was checked above, under the same lock");
                };
                let result = (|| -> Result<()> {
                    let record = state.record_mut()?;
                    let message =
                        crate::engine::session::StoredMessage::from_value(turn.reply.message());
                    if turn.index < record.messages.len() {
                        record.messages[turn.index] = message;
                    } else {
                        record.messages.push(message);
                    }
                    record.summary.pending_input = None;
                    state.apply(Event::StopFailed)?;
                    state.set_error(Some(words.clone()))
                })();
                Some((turn.slot, live, result))
            }
        };
        let Some((slot, Live { harness, lease, .. }, result)) = taken else {
            return false;
        };
        if let Err(error) = result {
            self.seams.hooks.on_error(&error, "turn", Some(&entry.id));
        }
        tokio::spawn(async move {
            let _ = harness.destroy().await;
            let _ = lease.close().await;
        });
        self.release_slot(&entry.id);
        self.seams
            .hooks
            .on_error(&SessionError::host(words), "turn", Some(&entry.id));
        let summary = self.save(entry, None).await;
        let turn_id = {
            let mut registry = lock(&self.registry);
            let id = registry
                .turns
                .iter()
                .find(|(_, t)| t.upgrade().is_some_and(|t| Arc::ptr_eq(&t, &slot)))
                .map(|(id, _)| *id);
            if let Some(id) = id {
                registry.turns.remove(&id);
            }
            id
        };
        if let (Some(turn_id), Ok(summary)) = (turn_id, summary) {
            self.seams.clients.finish(turn_id, &summary);
        }
        entry.notify();
        true
    }
}

/// Whether `turn` is still the turn under way in `entry`.
pub(super) fn is_current(entry: &Entry, turn: &TurnSlot) -> bool {
    entry
        .state()
        .turn()
        .is_some_and(|t| std::ptr::eq(Arc::as_ptr(&t.slot), turn))
}
