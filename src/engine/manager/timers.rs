//! The manager's timers: a session idle (or awaiting input) for `idleTimeoutMs` is suspended, one
//! suspended for `closeSuspendedAfterMs` is closed.
//!
//! A timer holds the session's id and the generation of its status when armed, and a weak
//! reference to the manager: it does nothing if the session changed since, or if the manager is
//! gone. So timers never keep a session in memory, nor a dropped manager alive.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::entry::{now_ms, Entry};
use super::Inner;
use crate::engine::session::lifecycle::{decide, Decision, Event, Input};

/// Arms the idle timeout of `entry`, now idle or awaiting input.
pub(super) fn arm_idle(inner: &Arc<Inner>, entry: &Entry) {
    let Some(timeout) = inner.options.idle_timeout else {
        return;
    };
    let generation = entry.state().generation;
    let manager = Arc::downgrade(inner);
    let id = entry.id.clone();
    tokio::spawn(async move {
        tokio::time::sleep(timeout).await;
        if let Some(inner) = live_manager(&manager) {
            inner.on_idle(&id, generation).await;
        }
    });
}

/// Arms the closing of session `id`, suspended at `suspended_at` (milliseconds since the epoch).
pub(super) fn arm_close_suspended(inner: &Arc<Inner>, id: &str, suspended_at: f64) {
    let Some(after) = inner.options.close_suspended_after else {
        return;
    };
    let elapsed = Duration::from_millis((now_ms() - suspended_at).max(0.0) as u64);
    let wait = after.saturating_sub(elapsed);
    let manager = Arc::downgrade(inner);
    let id = id.to_owned();
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        if let Some(inner) = live_manager(&manager) {
            inner.on_suspended_too_long(&id, suspended_at).await;
        }
    });
}

fn live_manager(manager: &Weak<Inner>) -> Option<Arc<Inner>> {
    manager
        .upgrade()
        .filter(|inner| !inner.shut_down.load(Ordering::SeqCst))
}

impl Inner {
    async fn on_idle(self: &Arc<Self>, id: &str, generation: u64) {
        let Some(entry) = self.existing(id) else {
            return;
        };
        {
            let _command = entry.commands.lock().await;
            let current = {
                let state = entry.state();
                let status = state.record.as_ref().map(|r| r.summary.status);
                state.generation == generation
                    && status.is_some_and(|status| {
                        decide(status, Input::Event(Event::IdleTimeout)) == Decision::Suspend
                    })
            };
            if current && !self.is_evicting(id) {
                if let Err(error) = self.suspend_entry(&entry, None).await {
                    self.seams.hooks.on_error(&error, "suspend", Some(id));
                }
            }
        }
        self.release(&entry);
    }

    async fn on_suspended_too_long(self: &Arc<Self>, id: &str, suspended_at: f64) {
        let entry = self.entry(id);
        // In many-instance mode, only with the session's lease: its owner, if live, has its own
        // timer.
        let held = match &self.many {
            Some(many) => matches!(many.hold(id).await, Ok(None)),
            None => true,
        };
        if held {
            let _command = entry.commands.lock().await;
            if self.load(&entry).await.is_ok() {
                let still = entry.state().record.as_ref().is_some_and(|r| {
                    decide(r.summary.status, Input::Event(Event::SuspendedTooLong))
                        == Decision::Discard
                        && r.summary.updated_at.millis() <= suspended_at
                });
                if still {
                    if let Err(error) = self.discard_entry(&entry).await {
                        self.seams.hooks.on_error(&error, "close", Some(id));
                    }
                }
            }
        }
        self.release(&entry);
    }
}
