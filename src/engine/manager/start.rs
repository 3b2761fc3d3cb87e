//! Opening a session: its sandbox lease, then its harness session, fresh or resumed from the
//! state it was suspended with. Runs in the background while the session is `preparing`.
//!
//! A start can be cut short (by `close()` or `shutdown()`): the step under way then finishes in
//! the background and what it opened is given back, so that nothing leaks.

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use serde_json::Value;
use tokio::sync::watch;

use super::entry::{now_ms, Entry, StartSlot};
use super::{timers, Inner, NOTHING_KEPT};
use crate::engine::agent::{HarnessSession, OpenRequest};
use crate::engine::error::{Result, SessionError};
use crate::engine::lease::Lease;
use crate::engine::session::SessionStatus;

/// How a step of a start ended.
enum Step<T> {
    Done(T),
    Cut(String),
}

/// Why a start did not end with a ready session.
pub(super) enum StartFailure {
    /// A step failed: reported to `onError`, kept as the session's error.
    Failed(SessionError),
    /// `close()` or `shutdown()` cut it short, with these words for the session's error.
    Cut(String),
}

/// Starts opening `entry` in the background. `resume_state` is what a suspended session resumes
/// from; `victim` the idle session to suspend first, to make room.
pub(super) fn spawn_start(
    inner: &Arc<Inner>,
    entry: &Arc<Entry>,
    resuming: bool,
    resume_state: Option<Value>,
    victim: Option<Arc<Entry>>,
) {
    let (cancel, cancelled) = watch::channel(None);
    entry.state().start = Some(StartSlot { cancel });
    let inner = inner.clone();
    let entry = entry.clone();
    tokio::spawn(async move {
        let run = inner.run_start(&entry, resuming, resume_state.clone(), victim, cancelled);
        if let Err(panic) = std::panic::AssertUnwindSafe(run).catch_unwind().await {
            let error = SessionError::internal(crate::engine::error::panic_message(&*panic));
            let failure = StartFailure::Failed(error);
            inner
                .start_failed(&entry, resuming, resume_state.as_ref(), failure)
                .await;
        }
        inner.release(&entry);
    });
}

impl Inner {
    async fn run_start(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        resuming: bool,
        resume_state: Option<Value>,
        victim: Option<Arc<Entry>>,
        mut cancelled: watch::Receiver<Option<String>>,
    ) {
        if let Some(victim) = victim {
            self.evict(&victim).await;
        }
        let sandboxes = self.seams.sandboxes.clone();
        let id = entry.id.clone();
        let acquire = async move { sandboxes.acquire(&id, resuming).await };
        let undo = move |lease: Box<dyn Lease>| give_back(lease, resuming);
        let lease = match cut_short(acquire, &mut cancelled, undo).await {
            Step::Done(Ok(lease)) => lease,
            Step::Done(Err(error)) => {
                let failure = StartFailure::Failed(error);
                return self
                    .start_failed(entry, resuming, resume_state.as_ref(), failure)
                    .await;
            }
            Step::Cut(reason) => {
                let failure = StartFailure::Cut(reason);
                return self
                    .start_failed(entry, resuming, resume_state.as_ref(), failure)
                    .await;
            }
        };
        let metadata = entry
            .state()
            .record
            .as_ref()
            .map(|r| r.summary.metadata.clone())
            .unwrap_or(Value::Null);
        let request = OpenRequest {
            session_id: entry.id.clone(),
            metadata,
            sandbox: lease.sandbox(),
            resume_from: resume_state.clone(),
        };
        let agent = self.seams.agent.clone();
        let open = async move {
            agent
                .open(request)
                .await
                .map(Arc::<dyn HarnessSession>::from)
        };
        let harness = match cut_short(open, &mut cancelled, stop_harness).await {
            Step::Done(Ok(harness)) => harness,
            Step::Done(Err(error)) => {
                self.report(give_back(lease, resuming).await, &entry.id);
                let failure = StartFailure::Failed(error);
                return self
                    .start_failed(entry, resuming, resume_state.as_ref(), failure)
                    .await;
            }
            Step::Cut(reason) => {
                self.report(give_back(lease, resuming).await, &entry.id);
                let failure = StartFailure::Cut(reason);
                return self
                    .start_failed(entry, resuming, resume_state.as_ref(), failure)
                    .await;
            }
        };
        let kept_turn = resume_state
            .as_ref()
            .is_some_and(|state| state.get("continueFrom").is_some_and(|c| !c.is_null()));
        self.start_succeeded(entry, harness, lease, kept_turn).await;
    }

    /// The session is ready: `idle`, or `awaiting-input` when it was suspended while it waited;
    /// `kept_turn` tells whether the harness kept the turn it waited in (its resume state has a
    /// `continueFrom`), else the answers will be told in words.
    async fn start_succeeded(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        harness: Arc<dyn HarnessSession>,
        lease: Box<dyn Lease>,
        kept_turn: bool,
    ) {
        let result = (|| -> Result<()> {
            let mut state = entry.state();
            state.start = None;
            state.harness = Some(harness);
            state.lease = Some(lease);
            let waits = state
                .record
                .as_ref()
                .and_then(|r| r.summary.pending_input.as_ref())
                .is_some_and(|p| !p.is_empty());
            let status = if waits {
                state.paused_turn_lost = !kept_turn;
                SessionStatus::AwaitingInput
            } else {
                SessionStatus::Idle
            };
            state.set_status(status, now_ms())?;
            state.set_error(None)
        })();
        if let Err(error) = result {
            self.seams.hooks.on_error(&error, "start", Some(&entry.id));
        }
        self.save_or_report(entry, None, "start").await;
        entry.notify();
        timers::arm_idle(self, entry);
    }

    /// The start failed, or was cut short: a new session is `failed`, a resumed one `suspended`
    /// again with its resume state kept, and the slot is handed back.
    pub(super) async fn start_failed(
        &self,
        entry: &Entry,
        resuming: bool,
        resume_state: Option<&Value>,
        failure: StartFailure,
    ) {
        let status = if resuming {
            SessionStatus::Suspended
        } else {
            SessionStatus::Failed
        };
        {
            let mut state = entry.state();
            state.start = None;
            let _ = state.set_status(status, now_ms());
            let words = match &failure {
                StartFailure::Failed(error) => error.to_string(),
                StartFailure::Cut(reason) => reason.clone(),
            };
            let _ = state.set_error(Some(words));
            state.start_failure = match &failure {
                StartFailure::Failed(error) => Some(error.clone()),
                StartFailure::Cut(_) => None,
            };
        }
        self.release_slot(&entry.id);
        if let StartFailure::Failed(error) = &failure {
            let action = if resuming { "resume" } else { "start" };
            self.seams.hooks.on_error(error, action, Some(&entry.id));
        }
        self.save_or_report(entry, resume_state.filter(|_| resuming), "start")
            .await;
        entry.notify();
    }

    /// Reports a failure to give something back, which does not change the session's fate.
    fn report(&self, result: Result<()>, session_id: &str) {
        if let Err(error) = result {
            self.seams.hooks.on_error(&error, "start", Some(session_id));
        }
    }

    /// Suspends `victim` to make room, if it is still idle; else it keeps its slot.
    async fn evict(self: &Arc<Self>, victim: &Arc<Entry>) {
        let _command = victim.commands.lock().await;
        if victim.status() == Some(SessionStatus::Idle) {
            if let Err(error) = self.suspend_entry(victim).await {
                self.seams
                    .hooks
                    .on_error(&error, "suspend", Some(&victim.id));
            }
            self.unmark_victim(Some(victim));
        } else {
            self.restore_victim(victim);
        }
    }

    /// Brings a suspended (`resuming`) or failed session back to `preparing`, and starts opening
    /// it. Returns at once.
    ///
    /// # Errors
    /// [`SessionError::Capacity`] when no slot can be had; the resume state missing leaves the
    /// session suspended with [`NOTHING_KEPT`].
    pub(super) async fn bring_back(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        resuming: bool,
    ) -> Result<()> {
        let resume_state = if resuming {
            match self.journal.get_resume_state(&entry.id).await? {
                Some(state) => Some(state),
                None => {
                    entry.state().set_error(Some(NOTHING_KEPT.to_owned()))?;
                    self.save(entry, None).await?;
                    return Ok(());
                }
            }
        } else {
            None
        };
        let victim = self.reserve_slot(entry)?;
        {
            let mut state = entry.state();
            state.set_status(SessionStatus::Preparing, now_ms())?;
        }
        if let Err(error) = self.save(entry, resume_state.as_ref()).await {
            let previous = if resuming {
                SessionStatus::Suspended
            } else {
                SessionStatus::Failed
            };
            let _ = entry.state().set_status(previous, now_ms());
            self.release_slot(&entry.id);
            self.unmark_victim(victim.as_ref());
            return Err(error);
        }
        spawn_start(self, entry, resuming, resume_state, victim);
        Ok(())
    }
}

/// Runs `step` until it ends or the start is cut short; when cut short, the step goes on in the
/// background and `undo` gives back what it opened.
async fn cut_short<T, F, U, UF>(
    step: F,
    cancelled: &mut watch::Receiver<Option<String>>,
    undo: U,
) -> Step<Result<T>>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
    U: FnOnce(T) -> UF + Send + 'static,
    UF: Future + Send + 'static,
{
    if let Some(reason) = cancelled.borrow().clone() {
        return Step::Cut(reason);
    }
    let mut task = tokio::spawn(step);
    tokio::select! {
        joined = &mut task => Step::Done(joined.unwrap_or_else(|e| {
            Err(SessionError::internal(format!("a start failed inside: {e}")))
        })),
        reason = wait_cancel(cancelled) => {
            tokio::spawn(async move {
                if let Ok(Ok(opened)) = task.await {
                    let _ = undo(opened).await;
                }
            });
            Step::Cut(reason)
        }
    }
}

async fn wait_cancel(cancelled: &mut watch::Receiver<Option<String>>) -> String {
    loop {
        if let Some(reason) = cancelled.borrow_and_update().clone() {
            return reason;
        }
        if cancelled.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Gives back a lease that will not be used: suspended when resuming (the sandbox keeps the
/// session's files), closed otherwise.
async fn give_back(lease: Box<dyn Lease>, resuming: bool) -> Result<()> {
    if resuming {
        lease.suspend().await
    } else {
        lease.close().await
    }
}

async fn stop_harness(harness: Arc<dyn HarnessSession>) {
    let _ = harness.destroy().await;
}
