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

use super::entry::{Entry, Live, Phase, StartSlot};
use super::{timers, Inner, NOTHING_KEPT};
use crate::engine::agent::{HarnessSession, OpenRequest};
use crate::engine::error::{Result, SessionError};
use crate::engine::hooks::SessionEvent;
use crate::engine::lease::Lease;
use crate::engine::session::lifecycle::Event;
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
    entry.state().phase = Phase::Preparing(StartSlot { cancel });
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
            resume_from: resume_state.as_ref().map(without_unfinished_turn),
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
        self.start_succeeded(entry, harness, lease).await;
    }

    /// The session is ready: `awaiting-input` when its harness session holds an unfinished turn,
    /// or when it was suspended while it waited for input and resumed without that turn (the
    /// answers are then told in words); `idle` otherwise.
    async fn start_succeeded(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        harness: Arc<dyn HarnessSession>,
        lease: Box<dyn Lease>,
    ) {
        let unfinished = match harness.has_unfinished_turn().await {
            Ok(unfinished) => unfinished,
            Err(error) => {
                self.seams.hooks.on_error(&error, "start", Some(&entry.id));
                false
            }
        };
        let result = (|| -> Result<()> {
            let mut state = entry.state();
            let recorded = state
                .record_ref()?
                .summary
                .pending_input
                .as_ref()
                .is_some_and(|p| !p.is_empty());
            let lost_turn = !unfinished && recorded;
            state.phase = Phase::Ready(Live {
                harness,
                lease,
                lost_turn,
            });
            state.apply(Event::StartSucceeded {
                waits: unfinished || lost_turn,
            })?;
            state.set_error(None)
        })();
        if let Err(error) = result {
            self.seams.hooks.on_error(&error, "start", Some(&entry.id));
        }
        self.save_or_report(entry, None, "write").await;
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
        {
            let mut state = entry.state();
            state.phase = Phase::Kept;
            let _ = state.apply(Event::StartFailed { resuming });
            // A resume cut short stays suspended as it was, without an error of the cut.
            let words = match &failure {
                StartFailure::Failed(error) => Some(error.to_string()),
                StartFailure::Cut(_) if resuming => None,
                StartFailure::Cut(reason) => Some(reason.clone()),
            };
            let _ = state.set_error(words);
        }
        self.release_slot(&entry.id);
        if let StartFailure::Failed(error) = &failure {
            let action = if resuming { "resume" } else { "start" };
            self.seams.hooks.on_error(error, action, Some(&entry.id));
        }
        self.save_or_report(entry, resume_state.filter(|_| resuming), "write")
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
            if let Err(error) = self.suspend_entry(victim, None).await {
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
    /// it. Returns at once. A resume is not written `preparing`: the store keeps the session
    /// suspended, with what it resumes from, until it is back (a crash meanwhile leaves it
    /// resumable); subscribers are told.
    ///
    /// # Errors
    /// [`SessionError::Capacity`] when no slot can be had; a conflict with status `interrupted`
    /// when nothing was kept to resume from (the session is written so).
    pub(super) async fn bring_back(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        resuming: bool,
    ) -> Result<()> {
        let resume_state = if resuming {
            match self.seams.store.get_resume_state(&entry.id).await? {
                Some(state) => Some(state),
                None => {
                    {
                        let mut state = entry.state();
                        state.apply(Event::NothingToResume)?;
                        state.set_error(Some(NOTHING_KEPT.to_owned()))?;
                    }
                    let summary = self.save(entry, None).await?;
                    entry.notify();
                    return Err(SessionError::in_status(
                        &entry.id,
                        summary.status,
                        summary.error.as_deref(),
                    ));
                }
            }
        } else {
            None
        };
        let victim = self.reserve_slot(entry)?;
        entry.state().apply(Event::BroughtBack)?;
        if resuming {
            let summary = entry.snapshot()?.summary;
            self.seams.hooks.on_event(SessionEvent::Updated(summary));
        } else if let Err(error) = self.save(entry, None).await {
            let _ = entry.state().apply(Event::StartFailed { resuming });
            self.release_slot(&entry.id);
            self.unmark_victim(victim.as_ref());
            return Err(error);
        }
        spawn_start(self, entry, resuming, resume_state, victim);
        Ok(())
    }
}

/// The resume state without the turn it was suspended in: `continueFrom` and `data.bridge`
/// dropped. The suspension stopped the bridge that turn ran on; a bridge-backed harness resumed
/// with it would wait for its startup timeout (two minutes for Claude Code), then lose the
/// answers. Only what is handed to the agent drops them: the store keeps the state whole.
pub(super) fn without_unfinished_turn(state: &Value) -> Value {
    let mut state = state.clone();
    let Some(object) = state.as_object_mut() else {
        return state;
    };
    if object.remove("continueFrom").is_none() {
        return state;
    }
    match object.get_mut("data").and_then(Value::as_object_mut) {
        Some(data) => {
            data.remove("bridge");
        }
        None => {
            object.insert("data".into(), Value::Object(serde_json::Map::new()));
        }
    }
    state
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

#[cfg(test)]
mod tests {
    use super::without_unfinished_turn;
    use serde_json::json;

    #[test]
    fn a_state_with_a_paused_turn_is_handed_over_without_it_nor_its_bridge() {
        let kept = json!({
            "type": "resume-session",
            "harnessId": "claude-code",
            "data": {"sessionId": "s", "bridge": {"url": "http://127.0.0.1:4001", "token": "t"}},
            "continueFrom": {"type": "continue-turn", "data": {}},
        });
        assert_eq!(
            without_unfinished_turn(&kept),
            json!({"type": "resume-session", "harnessId": "claude-code", "data": {"sessionId": "s"}})
        );
        let no_data = json!({"type": "resume-session", "continueFrom": {}});
        assert_eq!(
            without_unfinished_turn(&no_data),
            json!({"type": "resume-session", "data": {}})
        );
    }

    #[test]
    fn a_state_without_a_paused_turn_is_handed_over_as_it_is() {
        let kept = json!({"type": "resume-session", "data": {"bridge": {"token": "t"}}});
        assert_eq!(without_unfinished_turn(&kept), kept);
    }
}
