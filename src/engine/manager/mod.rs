//! The session manager: every session's lifecycle, from `create()` to `delete()`.
//!
//! The manager owns the sessions in memory ([`entry`]), decides what each command does with the
//! pure [`crate::engine::session::lifecycle::decide`], and does the I/O: opening and resuming
//! ([`start`]), running turns ([`turn`]), suspending and closing ([`teardown`]), timers
//! ([`timers`]), and the sandbox slots ([`slots`]). Sessions that are not live (suspended, closed,
//! failed, interrupted) are not held in memory: the store has them.

mod bounds;
mod command_wait;
mod entry;
mod exec;
mod journal;
mod many;
mod slots;
mod start;
pub mod submissions;
mod teardown;
mod timers;
mod trim;
mod turn;
pub mod turn_options;
pub mod turn_output;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::OnceCell;

use self::entry::{lock, now_ms, Entry};
use self::journal::Journal;
use self::many::{LoggedClients, Many, Route};
use self::slots::Registry;
use crate::engine::agent::Agent;
use crate::engine::client::TurnClients;
use crate::engine::error::{Result, SessionError};
use crate::engine::hooks::{ManagerHooks, SessionEvent};
use crate::engine::lease::SessionSandboxes;
use crate::engine::session::import;
use crate::engine::session::lifecycle::{self, decide, Command, Decision, Event, Input};
use crate::engine::session::messages;
use crate::engine::session::{
    SessionRecord, SessionStatus, SessionSummary, StoredMessage, Timestamp,
};
use crate::engine::store::SessionStore;

pub use self::exec::{ExecRequest, DEFAULT_MAX_OUTPUT_BYTES, MOST_OUTPUT_BYTES};
pub use self::many::LEASE_LOST;
pub use self::submissions::SubmissionAsk;
pub use self::turn::{ContinueRequest, SendRequest, TurnStarted};
pub use self::turn_options::TurnOptions;

/// How the manager behaves: the options of `createSessionManager()` that are not seams.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// Suspend a session idle, or awaiting input, for this long.
    pub idle_timeout: Option<Duration>,
    /// Close a session suspended for this long.
    pub close_suspended_after: Option<Duration>,
    /// Cut a turn short after this long.
    pub turn_timeout: Option<Duration>,
    /// When every sandbox slot is taken, suspend the session idle the longest to make room.
    pub suspend_idle_when_full: bool,
    /// How often a turn under way writes its reply so far to the store.
    pub checkpoint_interval: Duration,
    /// How long `interrupt()`, `close()`, `shutdown()` and the turn timeout wait for a turn they
    /// cut short to wind down (and `shutdown()` for the writes still pending), before letting go.
    pub wind_down: Duration,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            idle_timeout: None,
            close_suspended_after: None,
            turn_timeout: None,
            suspend_idle_when_full: true,
            checkpoint_interval: Duration::from_millis(500),
            wind_down: Duration::from_secs(10),
        }
    }
}

/// What the application supplies: the seams the manager works through.
#[derive(Clone)]
pub struct Seams {
    /// Opens harness sessions and runs their turns.
    pub agent: Arc<dyn Agent>,
    /// Gives sessions their sandboxes.
    pub sandboxes: Arc<dyn SessionSandboxes>,
    /// Keeps the sessions.
    pub store: Arc<dyn SessionStore>,
    /// Tells and asks the application.
    pub hooks: Arc<dyn ManagerHooks>,
    /// Where the chunks the engine itself sends go.
    pub clients: Arc<dyn TurnClients>,
}

/// The words of a turn cut by `interrupt()`.
pub const TURN_INTERRUPTED: &str = "The turn was interrupted.";
/// The words of a turn cut by `turnTimeoutMs`.
pub const TURN_TOO_LONG: &str = "The turn took too long.";
/// The words of a turn cut by `close()`.
pub const SESSION_CLOSED: &str = "The session was closed.";
/// The words of a turn cut by `shutdown()`.
pub const APPLICATION_STOPPED: &str =
    "The turn was cut short: the application stopped. Send the message again.";
/// The error of a session found live at start.
pub const STOPPED_WITHOUT_SUSPENDING: &str =
    "The application stopped without suspending the session.";
/// The error of a session whose start the application's stop cut short.
pub const STOPPED_BEFORE_READY: &str = "The application stopped before the session was ready.";
/// The error of a session whose harness session would not stop.
pub const NOT_STOPPED_CLEANLY: &str = "The harness session could not be stopped cleanly.";
/// The error of a resume with no state to resume from.
pub const NOTHING_KEPT: &str = "Nothing was kept to resume the session from.";

/// How many sessions found live at start are marked `interrupted` at once.
const RECOVERY_CONCURRENCY: usize = 64;

/// The sessions of an application: see the module documentation.
#[derive(Clone)]
pub struct SessionManager {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// This manager, for the work it hands to tasks of its own.
    me: Weak<Inner>,
    seams: Seams,
    /// The many-instance side, when the store offers a cluster.
    many: Option<Arc<Many>>,
    journal: Arc<Journal>,
    options: ManagerOptions,
    registry: Mutex<Registry>,
    recovered: OnceCell<()>,
    /// Whether this manager holds its store's claim.
    claimed: AtomicBool,
    shut_down: AtomicBool,
    clients_gone: std::sync::atomic::AtomicU64,
    /// The commands and messages waiting for their turn, which their callers may cut.
    waiting: exec::Waiting,
}

impl SessionManager {
    /// A manager on `seams`. Sessions a crashed process left live are found, and marked
    /// `interrupted`, before the first command runs.
    pub fn new(mut seams: Seams, options: ManagerOptions) -> SessionManager {
        let many = seams.store.cluster().map(Many::new);
        if let Some(many) = &many {
            seams.clients = Arc::new(LoggedClients {
                clients: seams.clients.clone(),
                many: many.clone(),
            });
        }
        let fences = many.as_ref().map(|many| many.fences.clone());
        SessionManager {
            inner: Arc::new_cyclic(|me| Inner {
                me: me.clone(),
                journal: Journal::new(seams.store.clone(), seams.hooks.clone(), fences),
                seams,
                many,
                options,
                registry: Mutex::new(Registry::default()),
                recovered: OnceCell::new(),
                claimed: AtomicBool::new(false),
                shut_down: AtomicBool::new(false),
                clients_gone: std::sync::atomic::AtomicU64::new(0),
                waiting: exec::Waiting::default(),
            }),
        }
    }

    /// Whether the manager runs in many-instance mode: its store offers a cluster.
    pub fn is_clustered(&self) -> bool {
        self.inner.many.is_some()
    }

    /// The log of session `id`'s last turn, in many-instance mode: what
    /// [`SessionManager::follow_turn`] streams, on any instance.
    ///
    /// # Errors
    /// When the cluster could not be reached.
    pub async fn latest_turn(&self, id: &str) -> Result<Option<crate::engine::cluster::TurnKey>> {
        self.inner.ready().await?;
        match &self.inner.many {
            Some(many) => many.cluster.latest_turn(id).await,
            None => Ok(None),
        }
    }

    /// The chunks of turn `key` after seq `after` (JSON texts with their seq), each once, in
    /// order, until the turn ends; any instance streams any turn. Nothing without a cluster.
    pub fn follow_turn(
        &self,
        key: crate::engine::cluster::TurnKey,
        after: u64,
    ) -> futures::stream::BoxStream<'static, Result<(u64, String)>> {
        use futures::StreamExt;
        match &self.inner.many {
            Some(many) => crate::engine::cluster::follow(
                many.cluster.clone(),
                key,
                after,
                crate::engine::cluster::follow::DEFAULT_POLL,
            )
            .boxed(),
            None => futures::stream::empty().boxed(),
        }
    }

    /// Opens a session and returns it `preparing`: its sandbox and harness session open in the
    /// background.
    ///
    /// # Errors
    /// [`SessionError::AlreadyExists`] for a known id, [`SessionError::Capacity`] when no slot can
    /// be had, [`SessionError::Input`] for metadata that is not JSON enough.
    pub async fn create(&self, id: String, metadata: Value) -> Result<SessionSummary> {
        self.create_with_history(id, metadata, Vec::new()).await
    }

    /// [`SessionManager::create`] with an imported conversation, `history` (from
    /// [`crate::engine::session::import::read_history`]): the session is written with it as its
    /// messages, marked to give it to the agent with its first turn, in one save.
    ///
    /// # Errors
    /// As [`SessionManager::create`].
    pub async fn create_with_history(
        &self,
        id: String,
        metadata: Value,
        history: Vec<StoredMessage>,
    ) -> Result<SessionSummary> {
        crate::engine::input::check_session_id(&id, "id")?;
        messages::check_depth(&metadata, "metadata")?;
        let (there, held) = self
            .route_first(
                &id,
                || serde_json::json!({"kind": "create", "metadata": metadata, "history": history}),
            )
            .await?;
        let result = match there {
            Some(answer) => many::answer(answer),
            None => {
                self.on_session(&id, async |inner, entry| {
                    inner.create(entry, metadata, history).await
                })
                .await
            }
        };
        self.routed(held, result)
    }

    /// The session with its conversation; a live one as it stands right now.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        self.inner.ready().await?;
        if let Some(entry) = self.inner.existing(id) {
            if entry.shown_from_memory() {
                return entry.snapshot().map(Some);
            }
        }
        let record = self.inner.journal.get(id).await;
        self.inner.report_unreadable();
        record
    }

    /// Every session without its conversation, the most recently updated first.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn list(&self) -> Result<Vec<SessionSummary>> {
        self.inner.ready().await?;
        let summaries = self.inner.journal.list().await;
        self.inner.report_unreadable();
        summaries
    }

    /// [`SessionManager::list`] as JSON text, written by the store without decoding what it keeps.
    ///
    /// # Errors
    /// When the store fails.
    pub async fn list_json(&self) -> Result<String> {
        self.inner.ready().await?;
        let summaries = self.inner.journal.list_json().await;
        self.inner.report_unreadable();
        summaries
    }

    /// [`SessionManager::list_json`] for a caller that keeps the summaries it was given: see
    /// [`crate::engine::store::SessionStore::list_since`].
    ///
    /// # Errors
    /// When the store fails.
    pub async fn list_since(&self, known: u64) -> Result<String> {
        self.inner.ready().await?;
        let summaries = self.inner.journal.list_since(known).await;
        self.inner.report_unreadable();
        summaries
    }

    /// Starts a turn in reply to a user message.
    ///
    /// # Errors
    /// [`SessionError::NotFound`], [`SessionError::Conflict`] (busy, awaiting input, closed...),
    /// [`SessionError::Capacity`] when a suspended session cannot get a slot back,
    /// [`SessionError::Input`] for a malformed message.
    pub async fn send(&self, id: &str, request: SendRequest) -> Result<TurnStarted> {
        self.turn_command(id, request.turn_id, turn::TurnAsk::Send(request))
            .await
    }

    /// Resumes a paused turn with its answers.
    ///
    /// # Errors
    /// As [`SessionManager::send`], and a conflict when the session waits for nothing, or when
    /// the request answers nothing it waits for.
    pub async fn continue_turn(&self, id: &str, request: ContinueRequest) -> Result<TurnStarted> {
        self.turn_command(id, request.turn_id, turn::TurnAsk::Continue(request))
            .await
    }

    /// The frame of `send()` and `continue()`: the turn's wait registered (so that its abort is
    /// seen), the session's entry held while the command runs.
    async fn turn_command(
        &self,
        id: &str,
        turn_id: u64,
        ask: turn::TurnAsk,
    ) -> Result<TurnStarted> {
        let mut cancel = self.inner.waiting.enter(turn_id);
        let result = match self.route_first(id, || ask.to_wire()).await {
            Ok((Some(answer), held)) => self.routed(held, many::started_from_wire(answer)),
            Ok((None, held)) => {
                let result = self
                    .on_session(id, async |inner, entry| {
                        inner.command_turn(entry, ask, &mut cancel).await
                    })
                    .await;
                self.routed(held, result)
            }
            Err(error) => Err(error),
        };
        self.inner.waiting.leave(turn_id);
        result
    }

    /// The frame of every command on one session: the manager ready (recovered, not shut down),
    /// the session's entry held while `command` runs, and let go of after it (forgotten unless
    /// live or held by another command).
    async fn on_session<T>(
        &self,
        id: &str,
        command: impl AsyncFnOnce(&Arc<Inner>, &Arc<Entry>) -> Result<T>,
    ) -> Result<T> {
        self.inner.ready().await?;
        let entry = self.inner.entry(id);
        let result = command(&self.inner, &entry).await;
        self.inner.release(&entry);
        result
    }

    /// Where a command any instance may be asked runs: `None` here (this instance holds, or
    /// took, the session's lease; or there is no cluster), else the answer of the owner, which
    /// ran it as `wire` says (`wire` is only made in many-instance mode). The entry returned is
    /// held until [`SessionManager::routed`], so that the lease is not let go of meanwhile.
    async fn route_first(
        &self,
        id: &str,
        wire: impl FnOnce() -> Value,
    ) -> Result<(Option<Value>, Option<Arc<Entry>>)> {
        if self.inner.many.is_none() {
            return Ok((None, None));
        }
        self.inner.ready().await?;
        let entry = self.inner.entry(id);
        let wire = wire();
        match self.inner.route(id, move || wire.clone()).await {
            Ok(Route::Here) => Ok((None, Some(entry))),
            Ok(Route::There(answer)) => Ok((Some(answer), Some(entry))),
            Err(error) => {
                self.inner.release(&entry);
                Err(error)
            }
        }
    }

    /// Lets go of the entry [`SessionManager::route_first`] held; gives `result` back.
    fn routed<T>(&self, entry: Option<Arc<Entry>>, result: Result<T>) -> Result<T> {
        if let Some(entry) = entry {
            self.inner.release(&entry);
        }
        result
    }

    /// Replaces the metadata of a session, whatever its status.
    ///
    /// # Errors
    /// [`SessionError::NotFound`], [`SessionError::Input`].
    pub async fn update(&self, id: &str, metadata: Value) -> Result<SessionSummary> {
        messages::check_depth(&metadata, "metadata")?;
        let (there, held) = self
            .route_first(
                id,
                || serde_json::json!({"kind": "update", "metadata": metadata}),
            )
            .await?;
        let result = match there {
            Some(answer) => many::answer(answer),
            None => {
                self.on_session(id, async |inner, entry| {
                    inner.update(entry, async |_| Ok(metadata)).await
                })
                .await
            }
        };
        self.routed(held, result)
    }

    /// Changes the metadata of a session, whatever its status, with `change`: given the metadata
    /// as they stand, it answers the new ones. It runs under the session's command lock, so no
    /// other command (another update, plain or not, included) comes between the read and the
    /// write; updates of other sessions are not held up. In many-instance mode, on an instance
    /// that does not own the session, `change` is given the metadata as the store has them and
    /// its answer is written by the owner only if they are still those: else `change` is called
    /// again with the fresh ones (an optimistic transaction).
    ///
    /// # Errors
    /// [`SessionError::NotFound`], [`SessionError::Input`] for new metadata that are not JSON
    /// enough, and what `change` fails with (then nothing changes).
    pub async fn update_with<F>(
        &self,
        id: &str,
        mut change: impl FnMut(Value) -> F + Send,
    ) -> Result<SessionSummary>
    where
        F: std::future::Future<Output = Result<Value>> + Send,
    {
        let Some(many) = self.inner.many.clone() else {
            return self
                .on_session(id, async |inner, entry| {
                    inner.update(entry, async |m| change(m).await).await
                })
                .await;
        };
        // The metadata the owner had instead of those `change` was given.
        let mut known: Option<Value> = None;
        loop {
            self.inner.ready().await?;
            let entry = self.inner.entry(id);
            let outcome: Option<Result<SessionSummary>> = 'attempt: {
                let owner = match many.hold(id).await {
                    Ok(owner) => owner,
                    Err(error) => break 'attempt Some(Err(error)),
                };
                if owner.is_none() {
                    let _command = entry.commands.lock().await;
                    let current = match self.inner.current_metadata(&entry).await {
                        Ok(current) => current,
                        Err(error) => break 'attempt Some(Err(error)),
                    };
                    break 'attempt Some(match change(current).await {
                        Ok(metadata) => self.inner.write_metadata(&entry, metadata).await,
                        Err(error) => Err(error),
                    });
                }
                let current = match known.take() {
                    Some(current) => current,
                    None => match self.inner.journal.get(id).await {
                        Ok(Some(record)) => record.summary.metadata,
                        Ok(None) => {
                            break 'attempt Some(Err(SessionError::NotFound {
                                session_id: id.to_owned(),
                            }))
                        }
                        Err(error) => break 'attempt Some(Err(error)),
                    },
                };
                let metadata = match change(current.clone()).await {
                    Ok(metadata) => metadata,
                    Err(error) => break 'attempt Some(Err(error)),
                };
                if let Err(error) = messages::check_depth(&metadata, "metadata") {
                    break 'attempt Some(Err(error));
                }
                let wire = serde_json::json!({
                    "kind": "update_if", "expected": current, "metadata": metadata,
                });
                match many.cluster.forward(id, wire, many::FORWARD_WAIT).await {
                    Ok(Some(mut answer)) => match answer.get_mut("stale") {
                        Some(fresh) => {
                            known = Some(fresh.take());
                            None
                        }
                        None => Some(many::answer(
                            answer
                                .get_mut("summary")
                                .map(Value::take)
                                .unwrap_or_default(),
                        )),
                    },
                    // The owner died meanwhile: try again, taking the lease.
                    Ok(None) => None,
                    Err(error) => Some(Err(error)),
                }
            };
            self.inner.release(&entry);
            if let Some(result) = outcome {
                return result;
            }
        }
    }

    /// Cuts the turn under way short, and returns once the session is written.
    ///
    /// # Errors
    /// [`SessionError::NotFound`].
    pub async fn interrupt(&self, id: &str) -> Result<()> {
        let (there, held) = self
            .route_first(id, || serde_json::json!({"kind": "interrupt"}))
            .await?;
        let result = match there {
            Some(_answer) => Ok(()),
            None => {
                self.on_session(id, async |inner, entry| {
                    inner.cut_turn(entry, TURN_INTERRUPTED).await
                })
                .await
            }
        };
        self.routed(held, result)
    }

    /// Suspends a session idle or awaiting input.
    ///
    /// # Errors
    /// [`SessionError::NotFound`], [`SessionError::Conflict`] in another status.
    pub async fn suspend(&self, id: &str) -> Result<SessionSummary> {
        let (there, held) = self
            .route_first(id, || serde_json::json!({"kind": "suspend"}))
            .await?;
        let result = match there {
            Some(answer) => many::answer(answer),
            None => {
                self.on_session(id, async |inner, entry| inner.suspend_command(entry).await)
                    .await
            }
        };
        self.routed(held, result)
    }

    /// Ends a session for good.
    ///
    /// # Errors
    /// [`SessionError::NotFound`], [`SessionError::Conflict`] once closed or interrupted.
    pub async fn close(&self, id: &str) -> Result<SessionSummary> {
        let (there, held) = self
            .route_first(id, || serde_json::json!({"kind": "close"}))
            .await?;
        let result = match there {
            Some(answer) => many::answer(answer),
            None => {
                self.on_session(id, async |inner, entry| inner.close_command(entry).await)
                    .await
            }
        };
        self.routed(held, result)
    }

    /// Closes a session if it can be, then forgets it.
    ///
    /// # Errors
    /// [`SessionError::NotFound`].
    pub async fn delete(&self, id: &str) -> Result<()> {
        let (there, held) = self
            .route_first(id, || serde_json::json!({"kind": "delete"}))
            .await?;
        let result = match there {
            Some(_answer) => Ok(()),
            None => {
                self.on_session(id, async |inner, entry| inner.delete(entry).await)
                    .await
            }
        };
        self.routed(held, result)
    }

    /// Suspends every live session, cutting turns short, then shuts the sandboxes down; the
    /// manager refuses everything afterwards but `shutdown()` itself, which, called again (during
    /// the first or after it), succeeds at once and does nothing, as the reference's.
    ///
    /// # Errors
    /// When the sandboxes failed to shut down (every session is handled first).
    pub async fn shutdown(&self) -> Result<()> {
        match self.inner.ready().await {
            Err(SessionError::ShutDown) => return Ok(()),
            ready => ready?,
        }
        if self.inner.shut_down.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.shutdown().await
    }

    /// Cuts turn `turn_id` short with `reason`, if it is still under way.
    pub fn cut_turn(&self, turn_id: u64, reason: &str) {
        let turn = lock(&self.inner.registry)
            .turns
            .get(&turn_id)
            .and_then(|t| t.upgrade());
        if let Some(turn) = turn {
            turn.cut(reason);
        }
    }

    /// The client of turn `turn_id` went away: the turn goes on, read to its end, and the engine
    /// sends it nothing more.
    pub fn client_gone(&self, turn_id: u64) {
        let turn = lock(&self.inner.registry)
            .turns
            .get(&turn_id)
            .and_then(|t| t.upgrade());
        if let Some(turn) = turn {
            if !turn.client_gone.swap(true, Ordering::SeqCst) {
                self.inner.clients_gone.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// How many turns saw their client go away, since the manager started.
    pub fn clients_gone(&self) -> u64 {
        self.inner.clients_gone.load(Ordering::SeqCst)
    }

    /// How many sessions are in memory: live ones, and those a command is handling.
    pub fn sessions_in_memory(&self) -> usize {
        lock(&self.inner.registry).entries.len()
    }
}

impl Inner {
    /// Waits for the recovery of the sessions a crash left live; refuses once shut down.
    async fn ready(self: &Arc<Self>) -> Result<()> {
        if self.shut_down.load(Ordering::SeqCst) {
            return Err(SessionError::ShutDown);
        }
        self.recovered
            .get_or_try_init(|| async {
                // Claimed once by this manager, even if the recovery fails and is tried again.
                if !self.claimed.swap(true, Ordering::SeqCst) {
                    if let Err(error) = self.seams.store.claim() {
                        self.claimed.store(false, Ordering::SeqCst);
                        return Err(error);
                    }
                }
                self.recover().await?;
                self.start_many();
                Ok(())
            })
            .await?;
        Ok(())
    }

    /// Marks `interrupted` every session a previous process left live, many at a time (a store
    /// that commits in groups, as the SQLite one does, writes them together), and releases the
    /// sandboxes they held. A row that cannot be read is reported and set aside.
    async fn recover(self: &Arc<Self>) -> Result<()> {
        use futures::stream::{self, StreamExt};
        let summaries = self.journal.list().await?;
        self.report_unreadable();
        let mut live = Vec::new();
        for summary in summaries {
            if summary.status == SessionStatus::Suspended {
                timers::arm_close_suspended(self, &summary.id, summary.updated_at.millis());
            } else if summary.status.is_live() {
                live.push(summary.id);
            }
        }
        if let Some(many) = &self.many {
            // Live sessions are other instances' while their leases hold; one whose lease lapsed
            // (or that has none: a process before the cluster) is recovered here.
            for id in live {
                if let Ok(None) = many.cluster.owner(&id).await {
                    if let Ok(crate::engine::cluster::Claim::Granted(fence)) =
                        many.cluster.claim(&id).await
                    {
                        self.recover_taken(fence).await;
                    }
                }
            }
            return Ok(());
        }
        stream::iter(live)
            .map(|id| self.interrupt_left_live(id))
            .buffer_unordered(RECOVERY_CONCURRENCY)
            .collect::<()>()
            .await;
        Ok(())
    }

    /// Reports, once each, the sessions the store found unreadable (and set aside).
    fn report_unreadable(&self) {
        for (id, error) in self.seams.store.take_unreadable() {
            // An entry without an id (a `null` in a list) is noted under the empty id.
            let id = Some(id.as_str()).filter(|id| !id.is_empty());
            self.seams.hooks.on_error(&error, "read", id);
        }
    }

    /// Marks `interrupted` the session `id`, found live at start, whatever it was doing (as the
    /// reference, even while preparing): its messages are kept as they are (a reply it cut
    /// short marked as cut), and the sandbox it held is released (`discard`), within the wind-down bound. A row that cannot be
    /// read is reported and set aside.
    async fn interrupt_left_live(self: &Arc<Self>, id: String) {
        let mut record = match self.journal.get(&id).await {
            Ok(Some(record)) => record,
            Ok(None) => return,
            Err(error) => {
                self.report_unreadable();
                if !self.seams.store.is_unreadable(&id) {
                    // An entry without an id (a `null` in a list) is noted under the empty id.
                    let id = Some(id.as_str()).filter(|id| !id.is_empty());
                    self.seams.hooks.on_error(&error, "read", id);
                }
                return;
            }
        };
        let error = STOPPED_WITHOUT_SUSPENDING;
        let was_busy = record.summary.status == SessionStatus::Busy;
        if let Some(last) = record.messages.last_mut() {
            let mut message = last.to_value();
            // The reply a crash cut short is marked as cut, with the session's error; its tool
            // calls are left as they were, as the reference leaves them.
            if was_busy && message.get("role").and_then(Value::as_str) == Some("assistant") {
                messages::mark_cut(&mut message, error);
                *last = crate::engine::session::StoredMessage::from_value(&message);
            }
        }
        if entry::apply(&mut record, Event::FoundLiveAtStart).is_none() {
            return;
        }
        record.summary.error = Some(error.to_owned());
        self.journal.write(&record, None).await;
        self.discard_bounded(&id).await;
    }

    /// The session `id` in memory, put there if it is not.
    fn entry(&self, id: &str) -> Arc<Entry> {
        let mut registry = lock(&self.registry);
        registry
            .entries
            .entry(id.to_owned())
            .or_insert_with(|| Entry::new(id))
            .clone()
    }

    /// The session `id`, if it is in memory.
    fn existing(&self, id: &str) -> Option<Arc<Entry>> {
        lock(&self.registry).entries.get(id).cloned()
    }

    /// Forgets `entry` if it is not live and nobody else holds it.
    fn release(&self, entry: &Arc<Entry>) {
        let live = entry.status().is_some_and(SessionStatus::is_live);
        if live {
            return;
        }
        let mut registry = lock(&self.registry);
        let held_by_others = Arc::strong_count(entry) > 2;
        let same = registry
            .entries
            .get(&entry.id)
            .is_some_and(|e| Arc::ptr_eq(e, entry));
        if same && !held_by_others {
            registry.entries.remove(&entry.id);
            drop(registry);
            // Nothing of it here any more: its lease is let go of.
            if self.many.is_some() {
                if let Some(inner) = self.me.upgrade() {
                    let id = entry.id.clone();
                    tokio::spawn(async move { inner.let_go_lease(&id).await });
                }
            }
        }
    }

    /// Loads the record of `entry` from the store, if it is not in memory yet.
    async fn load(&self, entry: &Entry) -> Result<()> {
        if entry.state().record.is_some() {
            return Ok(());
        }
        let record = self
            .journal
            .get(&entry.id)
            .await?
            .ok_or_else(|| SessionError::NotFound {
                session_id: entry.id.clone(),
            })?;
        let mut state = entry.state();
        if state.record.is_none() {
            state.record = Some(record);
        }
        Ok(())
    }

    /// Writes the session as it stands, with `resume_state` when it is suspended, then tells the
    /// subscribers.
    async fn save(&self, entry: &Entry, resume_state: Option<&Value>) -> Result<SessionSummary> {
        let _order = entry.saving.lock().await;
        let record = entry.snapshot()?;
        // A failed write is reported and kept to be written again: the manager carries on.
        self.journal.write(&record, resume_state).await;
        let summary = record.summary;
        self.seams
            .hooks
            .on_event(SessionEvent::Updated(summary.clone()));
        self.tell_change(&entry.id, false).await;
        Ok(summary)
    }

    /// Writes the session, reporting a failure to `onError` rather than returning it.
    async fn save_or_report(&self, entry: &Entry, resume_state: Option<&Value>, action: &str) {
        if let Err(error) = self.save(entry, resume_state).await {
            self.seams.hooks.on_error(&error, action, Some(&entry.id));
        }
    }

    /// `create()`.
    async fn create(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        metadata: Value,
        history: Vec<StoredMessage>,
    ) -> Result<SessionSummary> {
        let _command = entry.commands.lock().await;
        if entry.state().record.is_none() {
            if let Some(existing) = self.journal.get(&entry.id).await? {
                return Err(SessionError::AlreadyExists {
                    session_id: entry.id.clone(),
                    status: existing.summary.status,
                });
            }
        } else if let Some(status) = entry.status() {
            return Err(SessionError::AlreadyExists {
                session_id: entry.id.clone(),
                status,
            });
        }
        let victim = self.reserve_slot(entry)?;
        let now = now_ms();
        let mut summary = SessionSummary::new(
            entry.id.clone(),
            lifecycle::NEW,
            metadata,
            Timestamp::from_millis(now),
        );
        import::mark_pending(&mut summary.extra, !history.is_empty());
        entry.state().record = Some(SessionRecord {
            summary,
            messages: history,
            command_results: Vec::new(),
            submissions: Vec::new(),
        });
        match self.save(entry, None).await {
            Ok(summary) => {
                start::spawn_start(self, entry, false, None, victim);
                Ok(summary)
            }
            Err(error) => {
                entry.state().record = None;
                self.release_slot(&entry.id);
                self.unmark_victim(victim.as_ref());
                Err(error)
            }
        }
    }

    /// `update()`: the metadata `change` makes of the current ones, read and written under the
    /// session's command lock.
    async fn update(
        self: &Arc<Self>,
        entry: &Entry,
        change: impl AsyncFnOnce(Value) -> Result<Value>,
    ) -> Result<SessionSummary> {
        let _command = entry.commands.lock().await;
        let current = self.current_metadata(entry).await?;
        let metadata = change(current).await?;
        self.write_metadata(entry, metadata).await
    }

    /// The metadata of `entry` as they stand; the caller holds its command lock.
    async fn current_metadata(&self, entry: &Entry) -> Result<Value> {
        self.load(entry).await?;
        Ok(entry.state().record_ref()?.summary.metadata.clone())
    }

    /// Writes `metadata` as the session's; the caller holds its command lock.
    async fn write_metadata(
        self: &Arc<Self>,
        entry: &Entry,
        metadata: Value,
    ) -> Result<SessionSummary> {
        messages::check_depth(&metadata, "metadata")?;
        {
            let mut state = entry.state();
            let record = state.record_mut()?;
            // Not activity: `updatedAt` stays, so that `list()` keeps its order and a suspended
            // session is closed when it would have been.
            record.summary.metadata = metadata;
        }
        let resume_state = self.kept_resume_state(entry).await?;
        let summary = self.save(entry, resume_state.as_ref()).await?;
        if summary.status == SessionStatus::Suspended {
            timers::arm_close_suspended(self, &entry.id, summary.updated_at.millis());
        }
        Ok(summary)
    }

    /// The resume state a suspended session keeps, so that a write of its record keeps it too.
    async fn kept_resume_state(&self, entry: &Entry) -> Result<Option<Value>> {
        if entry.status() == Some(SessionStatus::Suspended) {
            self.journal.get_resume_state(&entry.id).await
        } else {
            Ok(None)
        }
    }

    /// Waits, without holding the session's command lock, until no turn is under way.
    async fn wait_turn_over(&self, entry: &Entry) {
        let mut changes = entry.watch();
        while entry.state().turn().is_some() {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// Waits, without holding the session's command lock, until its status is no longer `status`.
    async fn wait_while(&self, entry: &Entry, status: SessionStatus) {
        let mut changes = entry.watch();
        while entry.status() == Some(status) {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    /// `interrupt()`: cuts the turn under way, and waits until it is written (or lets go of it
    /// past the wind-down bound).
    async fn cut_turn(&self, entry: &Arc<Entry>, reason: &str) -> Result<()> {
        self.load(entry).await?;
        let turn = {
            let state = entry.state();
            match state.record.as_ref().map(|r| r.summary.status) {
                Some(status) => match decide(status, Input::Command(Command::Interrupt)) {
                    Decision::CutTurn => state.turn().map(|turn| turn.slot.clone()),
                    _ => None,
                },
                None => None,
            }
        };
        if let Some(turn) = turn {
            turn.cut(reason);
            self.wind_down(entry, reason, false).await;
        }
        Ok(())
    }
}

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod tests;
