//! Many instances serving one set of sessions: the [`Cluster`] seam a store offers
//! ([`crate::engine::store::SessionStore::cluster`]) when several managers, in several
//! processes, share it.
//!
//! A cluster gives the manager four things, all judged by one shared authority (the database,
//! and its clock), never by an instance's own clock:
//! - **Leases.** A live session has one owner at a time. [`Cluster::claim`] takes a free or
//!   expired lease with a new epoch (a fencing token, one higher at each takeover); the cluster
//!   renews what this instance holds and reports a lease it lost ([`LeaseEvent::Lost`]); every
//!   write of the owner ([`Cluster::save`], the turn log) names its [`Fence`] and fails with
//!   [`SessionError::LeaseLost`] once another instance holds a newer epoch.
//!   [`Cluster::take_expired`] takes over the leases of dead owners (the sweeper).
//! - **A turn log.** The owner writes each turn's chunks ([`Cluster::open_turn`],
//!   [`Cluster::append`], [`Cluster::end_turn`]) so that any instance can stream it
//!   ([`Cluster::read_turn`] after a cursor, woken by [`Cluster::watch_turns`], with polling as a
//!   fallback: see [`follow`]).
//! - **Commands to the owner.** A call that lands on an instance that does not own the session is
//!   handed to the owner ([`Cluster::forward`]); the owner takes it from its inbox
//!   ([`Cluster::take_inbox`]) and answers ([`Cluster::answer`]).
//! - **Change notes**, so that `subscribe()` on every instance sees every change
//!   ([`Cluster::changed`], [`Cluster::changes`]).
//!
//! [`local`] is an in-process implementation (several managers of one process sharing a hub):
//! what the manager's many-instance logic is tested on without a database.

pub mod follow;
pub mod held;
pub mod local;
pub mod wire;

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use crate::engine::error::Result;
use crate::engine::session::SessionRecord;

pub use self::follow::follow;

/// A lease as its holder knows it: the session, and the epoch its writes are fenced with.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    /// The session the lease is on.
    pub session_id: String,
    /// The lease's epoch: one higher at each takeover.
    pub epoch: u64,
}

/// What [`Cluster::claim`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The lease is this instance's now (or already was), with this fence.
    Granted(Fence),
    /// A live instance holds it.
    Held {
        /// The owner's instance id.
        owner: String,
    },
}

/// A lease this instance held and no longer does: its turn must stop, its writes are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseEvent {
    /// The lease's renewal failed: it expired, or another instance took it over.
    Lost(Fence),
}

/// One turn's log: the session, and the turn's number in it (1, 2, ...: one higher per turn).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TurnKey {
    /// The session.
    pub session_id: String,
    /// The turn's number in the session's log.
    pub turn: u64,
}

/// Chunks of a turn's log read after a cursor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogRead {
    /// `(seq, chunk)`, in order, every `seq` after the cursor (1 is the first chunk).
    pub chunks: Vec<(u64, String)>,
    /// Whether the turn's log is closed: nothing follows the last chunk read.
    pub ended: bool,
}

/// A command handed to the owner of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct Forwarded {
    /// The command's id, to answer it with.
    pub id: u64,
    /// The session it is for.
    pub session_id: String,
    /// The instance it came from.
    pub from: String,
    /// What to do: `{ "kind": "interrupt" | "send" | ..., ... }` (see [`wire`]).
    pub command: Value,
}

/// A session changed on some instance (written or deleted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The session.
    pub session_id: String,
    /// Whether it was deleted.
    pub deleted: bool,
    /// The change's place in the cluster's order of changes: increasing.
    pub version: u64,
    /// The instance that made it.
    pub from: String,
}

/// The many-instance seam: see the module documentation.
#[async_trait]
pub trait Cluster: Send + Sync {
    /// This instance's id.
    fn instance_id(&self) -> &str;

    /// How long a lease lasts without renewal.
    fn lease_ttl(&self) -> Duration;

    /// Takes the lease of `session_id` when it is free, expired, or this instance's already;
    /// a takeover raises the epoch. The cluster renews the lease until it is released, lost, or
    /// the instance leaves.
    ///
    /// # Errors
    /// When the cluster could not be reached.
    async fn claim(&self, session_id: &str) -> Result<Claim>;

    /// Renews `fence` at once: `false` when it is lost (expired, or taken over).
    ///
    /// # Errors
    /// When the cluster could not be reached.
    async fn renew(&self, fence: &Fence) -> Result<bool>;

    /// Lets go of `fence`, if it is still held: the session is free for any instance.
    ///
    /// # Errors
    /// When the cluster could not be reached.
    async fn release(&self, fence: &Fence) -> Result<()>;

    /// The live owner of `session_id`'s lease (not expired), if any.
    ///
    /// # Errors
    /// When the cluster could not be reached.
    async fn owner(&self, session_id: &str) -> Result<Option<String>>;

    /// Takes over, with a higher epoch, at most `limit` leases whose owners let them expire
    /// (the sweeper); the caller recovers each session, then releases it.
    ///
    /// # Errors
    /// When the cluster could not be reached.
    async fn take_expired(&self, limit: usize) -> Result<Vec<Fence>>;

    /// The leases this instance holds, as far as it knows.
    fn held(&self) -> Vec<Fence>;

    /// Leases this instance lost.
    fn lease_events(&self) -> broadcast::Receiver<LeaseEvent>;

    /// Writes `record` (and `resume_state`, as [`crate::engine::store::SessionStore::save`])
    /// only while `fence` holds, checked in the same transaction.
    ///
    /// # Errors
    /// [`crate::engine::error::SessionError::LeaseLost`] when it does not hold; the store's
    /// failures.
    async fn save(
        &self,
        fence: &Fence,
        record: &SessionRecord,
        resume_state: Option<&Value>,
    ) -> Result<()>;

    /// Opens the next turn of `fence`'s session in the log (ending, cut, any turn left open).
    ///
    /// # Errors
    /// `LeaseLost` when `fence` does not hold.
    async fn open_turn(&self, fence: &Fence) -> Result<TurnKey>;

    /// Appends `chunks` (JSON texts) to the open turn `turn`, in one fenced write: the seq of
    /// the last chunk written.
    ///
    /// # Errors
    /// `LeaseLost` when `fence` does not hold; an internal error when the turn is closed.
    async fn append(&self, fence: &Fence, turn: &TurnKey, chunks: Vec<String>) -> Result<u64>;

    /// Appends `chunks` and closes the turn, in one fenced write: the seq of the last chunk.
    ///
    /// # Errors
    /// As [`Cluster::append`].
    async fn end_turn(&self, fence: &Fence, turn: &TurnKey, chunks: Vec<String>) -> Result<u64>;

    /// The chunks of `turn` after seq `after`, and whether the turn is closed.
    ///
    /// # Errors
    /// When the cluster could not be reached; not found when the log has no such turn.
    async fn read_turn(&self, turn: &TurnKey, after: u64) -> Result<LogRead>;

    /// The last turn of `session_id` in the log, if any.
    ///
    /// # Errors
    /// When the cluster could not be reached.
    async fn latest_turn(&self, session_id: &str) -> Result<Option<TurnKey>>;

    /// Wake-ups: a turn's log grew or closed. A wake-up may be lost (a listener reconnecting):
    /// readers poll too.
    fn watch_turns(&self) -> broadcast::Receiver<TurnKey>;

    /// Hands `command` to the live owner of `session_id` and waits, up to `wait`, for its answer.
    /// `None` when the session has no live owner (the caller may take the lease).
    ///
    /// # Errors
    /// The owner's answer when it is an error; a host error when it did not answer in time.
    async fn forward(
        &self,
        session_id: &str,
        command: Value,
        wait: Duration,
    ) -> Result<Option<Value>>;

    /// The commands handed to this instance, once (later calls: `None`).
    fn take_inbox(&self) -> Option<mpsc::UnboundedReceiver<Forwarded>>;

    /// Answers the command `command_id`.
    ///
    /// # Errors
    /// When the cluster could not be reached.
    async fn answer(&self, command_id: u64, answer: Result<Value>) -> Result<()>;

    /// Tells every instance that `session_id` changed (or was deleted).
    ///
    /// # Errors
    /// When the cluster could not be reached.
    async fn changed(&self, session_id: &str, deleted: bool) -> Result<()>;

    /// The changes made on every instance, this one's included, in order.
    fn changes(&self) -> broadcast::Receiver<Change>;

    /// This instance leaves: it releases every lease it holds, stops renewing and listening.
    ///
    /// # Errors
    /// When the cluster could not be reached (the leases then expire).
    async fn leave(&self) -> Result<()>;
}
