//! A session in memory: its record as it stands, what it holds while live (harness session,
//! sandbox lease, turn under way), and the locks that give it one owner at a time.
//!
//! Invariants:
//! - every command on a session runs under its `commands` lock, one at a time;
//! - the record's status is only changed by [`apply`], which asks the lifecycle
//!   ([`crate::engine::session::lifecycle::decide`]), with the `state` lock held; every change is
//!   saved (under the `saving` lock, which orders the writes of one session) before it is
//!   announced;
//! - what a session holds is its [`Phase`]: a live session always has its harness session and
//!   lease (no `Option`), a busy one its turn;
//! - a turn under way is owned by its driver task, which ends it without taking `commands`: so a
//!   command may wait for a turn to end while holding `commands`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use tokio::sync::watch;

use crate::engine::agent::{HarnessSession, TurnControl};
use crate::engine::error::{Result, SessionError};
use crate::engine::lease::Lease;
use crate::engine::session::lifecycle::{decide, Decision, Event, Input};
use crate::engine::session::{SessionRecord, SessionStatus};
use crate::engine::ui::MessageAccumulator;

/// A session in memory.
pub(crate) struct Entry {
    /// The session's id.
    pub(crate) id: String,
    /// One command at a time.
    pub(crate) commands: tokio::sync::Mutex<()>,
    /// Orders the writes of this session to the store.
    pub(crate) saving: tokio::sync::Mutex<()>,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
}

/// What an entry holds.
pub(crate) struct State {
    /// The record as it stands; `None` until loaded from the store.
    pub(crate) record: Option<SessionRecord>,
    /// What the session holds in its phase of the lifecycle.
    pub(crate) phase: Phase,
    /// When the session last did something, for the idle timeout and for eviction.
    pub(crate) last_active: Instant,
    /// Bumped at each change of status, so a timer armed before it knows it is stale.
    pub(crate) generation: u64,
    /// A turn a close or a shutdown cut short: it wrote nothing itself, and whoever ends the
    /// session finishes its client with the session they wrote.
    pub(crate) cut_turn: Option<CutTurn>,
}

/// What a session holds, by phase. The phase follows the status: `Preparing` while `preparing`,
/// `Ready` while `idle` or `awaiting-input`, `Busy` while `busy`, `Kept` otherwise (the record is
/// all there is), and `Leaving` while a live session is being suspended or closed.
pub(crate) enum Phase {
    /// Not live, or not loaded: the record is the session.
    Kept,
    /// Its sandbox and harness session are opening.
    Preparing(StartSlot),
    /// Live, between turns.
    Ready(Live),
    /// Live, a turn under way.
    Busy(Live, Box<Turn>),
    /// Leaving memory (being suspended or closed): readers go to the store.
    Leaving,
}

/// What a live session holds.
pub(crate) struct Live {
    /// The harness session.
    pub(crate) harness: Arc<dyn HarnessSession>,
    /// The sandbox lease.
    pub(crate) lease: Box<dyn Lease>,
    /// The turn the session waits in was lost with a suspension: its answers are told in words.
    pub(crate) lost_turn: bool,
}

/// A turn under way.
pub(crate) struct Turn {
    /// How to cut it short.
    pub(crate) slot: Arc<TurnSlot>,
    /// Where the reply goes in the conversation.
    pub(crate) index: usize,
    /// The assistant message the turn is writing.
    pub(crate) reply: MessageAccumulator,
    /// The answers the `approve` policy gave, when it left some to a person.
    pub(crate) policy_decisions: Option<crate::engine::session::PendingInput>,
}

/// A turn cut by a close or a shutdown, waiting for the session to be written.
pub(crate) struct CutTurn {
    /// The turn's number: the key of its client.
    pub(crate) turn_id: u64,
    /// What its client still gets before its end (the held-back `finish`).
    pub(crate) closing: Vec<crate::engine::ui::UiChunk>,
    /// Whether its client went away.
    pub(crate) client_gone: bool,
}

/// A start under way: how to cut it short.
pub(crate) struct StartSlot {
    /// Cancels the start.
    pub(crate) cancel: tokio::sync::watch::Sender<Option<String>>,
}

/// A turn under way: how to cut it short, and why it was.
#[derive(Default)]
pub(crate) struct TurnSlot {
    control: Mutex<Option<Box<dyn TurnControl>>>,
    cut: Mutex<Option<String>>,
    /// The client went away: the turn goes on, but nothing more is sent to it.
    pub(crate) client_gone: std::sync::atomic::AtomicBool,
}

impl TurnSlot {
    /// Cuts the turn short with `reason` (the first reason given stays).
    pub(crate) fn cut(&self, reason: &str) {
        {
            let mut cut = lock(&self.cut);
            if cut.is_some() {
                return;
            }
            *cut = Some(reason.to_owned());
        }
        if let Some(control) = lock(&self.control).as_ref() {
            control.abort(reason);
        }
    }

    /// Why the turn was cut short, if it was.
    pub(crate) fn cut_reason(&self) -> Option<String> {
        lock(&self.cut).clone()
    }

    /// Installs the control of the agent's turn; cuts it at once if a cut came first.
    pub(crate) fn install(&self, control: Box<dyn TurnControl>) {
        let reason = lock(&self.cut).clone();
        if let Some(reason) = reason {
            control.abort(&reason);
        }
        *lock(&self.control) = Some(control);
    }
}

/// Locks `mutex`, recovering from poisoning: the data stays consistent because every critical
/// section here is short and completes its writes before anything that could panic.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Entry {
    /// A session in memory, not yet loaded.
    pub(crate) fn new(id: &str) -> Arc<Entry> {
        Arc::new(Entry {
            id: id.to_owned(),
            commands: tokio::sync::Mutex::new(()),
            saving: tokio::sync::Mutex::new(()),
            state: Mutex::new(State {
                record: None,
                phase: Phase::Kept,
                last_active: Instant::now(),
                generation: 0,
                cut_turn: None,
            }),
            changed: watch::channel(0).0,
        })
    }

    /// The state, locked.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The status, when loaded.
    pub(crate) fn status(&self) -> Option<SessionStatus> {
        self.state().record.as_ref().map(|r| r.summary.status)
    }

    /// Whether readers see the session as it stands in memory: loaded, and not leaving it.
    pub(crate) fn shown_from_memory(&self) -> bool {
        let state = self.state();
        state.record.is_some() && !matches!(state.phase, Phase::Leaving)
    }

    /// Tells the waiters something changed.
    pub(crate) fn notify(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A receiver to wait for the next change on.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The record as it stands, the turn's reply included.
    pub(crate) fn snapshot(&self) -> Result<SessionRecord> {
        let state = self.state();
        let Some(record) = state.record.as_ref() else {
            return Err(SessionError::NotFound {
                session_id: self.id.clone(),
            });
        };
        let mut record = record.clone();
        if let Phase::Busy(_, turn) = &state.phase {
            let message = crate::engine::session::StoredMessage::from_value(turn.reply.message());
            if turn.index < record.messages.len() {
                record.messages[turn.index] = message;
            } else {
                record.messages.push(message);
            }
        }
        Ok(record)
    }
}

impl State {
    /// The record; only called once loaded.
    pub(crate) fn record_mut(&mut self) -> Result<&mut SessionRecord> {
        self.record
            .as_mut()
            .ok_or_else(|| SessionError::internal("a session was used before it was loaded"))
    }

    /// The record; only called once loaded.
    pub(crate) fn record_ref(&self) -> Result<&SessionRecord> {
        self.record
            .as_ref()
            .ok_or_else(|| SessionError::internal("a session was used before it was loaded"))
    }

    /// Applies `event` to the session: the status the lifecycle gives it, with `updatedAt`, and
    /// the generation bumped. The only place a status changes. Returns the new status, or `None`
    /// when the event changes nothing in the status the session is in.
    pub(crate) fn apply(&mut self, event: Event) -> Result<Option<SessionStatus>> {
        let changed = apply(self.record_mut()?, event);
        if changed.is_some() {
            self.generation += 1;
            self.last_active = Instant::now();
        }
        Ok(changed)
    }

    /// The live session's harness session, when it has one.
    pub(crate) fn harness(&self) -> Option<Arc<dyn HarnessSession>> {
        match &self.phase {
            Phase::Ready(live) | Phase::Busy(live, _) => Some(live.harness.clone()),
            _ => None,
        }
    }

    /// The turn under way, when there is one.
    pub(crate) fn turn(&self) -> Option<&Turn> {
        match &self.phase {
            Phase::Busy(_, turn) => Some(turn),
            _ => None,
        }
    }

    /// The turn under way, when there is one.
    pub(crate) fn turn_mut(&mut self) -> Option<&mut Turn> {
        match &mut self.phase {
            Phase::Busy(_, turn) => Some(turn),
            _ => None,
        }
    }

    /// Sets the error the session keeps.
    pub(crate) fn set_error(&mut self, error: Option<String>) -> Result<()> {
        self.record_mut()?.summary.error = error;
        Ok(())
    }
}

/// Applies `event` to `record`: the status the lifecycle gives it, with `updatedAt`. Returns the
/// new status, or `None` when the event changes nothing in the status the record is in.
pub(crate) fn apply(record: &mut SessionRecord, event: Event) -> Option<SessionStatus> {
    let Decision::Become(status) = decide(record.summary.status, Input::Event(event)) else {
        return None;
    };
    record.summary.status = status;
    record.summary.updated_at = now_ms();
    Some(status)
}

/// Milliseconds since the epoch, strictly increasing within the process: two changes never share
/// a time, so "the most recently updated first" is a total order. Under more than a thousand
/// changes a second the clock runs ahead of the wall a little, and waits for it afterwards.
pub(crate) fn now_ms() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let mut previous = LAST.load(Ordering::Relaxed);
    loop {
        let next = wall.max(previous + 1);
        match LAST.compare_exchange_weak(previous, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next as f64,
            Err(actual) => previous = actual,
        }
    }
}
