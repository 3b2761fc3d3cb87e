//! The manager's many-instance mode, on when its store offers a [`Cluster`]
//! ([`crate::engine::store::SessionStore::cluster`]); without one nothing here runs.
//!
//! - **One owner.** A command on a session first holds the session's lease on this instance
//!   ([`Many::hold`]): free or expired, it is taken, and the command runs here; held by another
//!   live instance, the command is handed to that owner ([`Inner::route`]) and its answer given
//!   back as if it had run here. A session this instance no longer has in memory (not live, no
//!   command on it) lets go of its lease ([`Inner::let_go_lease`]).
//! - **Fencing.** Every write of a session goes through [`Fences::save`]: the cluster checks the
//!   lease's epoch in the same transaction. A lost lease ([`Inner::lease_lost`]) cuts the turn,
//!   stops the harness and forgets the session here; nothing of it is written any more.
//! - **The turn log.** Each turn run here is written, batched, to the cluster's log
//!   ([`write_log`]): every chunk its client gets, in order, ending with the client's end. Any
//!   instance streams it ([`crate::engine::cluster::follow`]).
//! - **Dead owners.** A sweeper takes over leases that expired ([`Inner::sweep`]): the session is
//!   recovered as after a crash (`interrupted`, its reply marked cut) and its log closed, so that
//!   every reader ends.
//! - **Changes** made on other instances are told to `subscribe()` here.
//! - **Shutdown** suspends the sessions owned here, then leaves the cluster (every lease let go).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::entry::{lock, Phase};
use super::turn::{ContinueRequest, SendRequest, TurnStarted};
use super::turn_options::TurnOptions;
use super::{turn_output, Inner, SessionManager, STOPPED_WITHOUT_SUSPENDING};
use crate::engine::client::TurnClients;
use crate::engine::cluster::{Claim, Cluster, Fence, Forwarded, LeaseEvent, TurnKey};
use crate::engine::error::{Result, SessionError};
use crate::engine::hooks::SessionEvent;
use crate::engine::session::{messages, SessionRecord, SessionSummary, StoredMessage};
use crate::engine::ui::UiChunk;

/// How long a call waits for the owner of its session to answer a command handed to it.
pub(super) const FORWARD_WAIT: Duration = Duration::from_secs(60);
/// The words of a turn cut because this instance lost the session's lease.
pub const LEASE_LOST: &str = "This instance lost the session to another instance.";
/// The numbers of turns run here for a caller on another instance: above any a caller chooses.
const FORWARDED_TURNS: u64 = 1 << 62;
/// The most chunks one append writes.
const BATCH_CHUNKS: usize = 32;
/// The longest a chunk waits to be written.
const BATCH_DELAY: Duration = Duration::from_millis(50);
/// How many expired leases one sweep takes over.
const SWEEP_BATCH: usize = 16;
/// How long a lost turn gets to end before what it holds is let go of.
const LOST_WIND_DOWN: Duration = Duration::from_secs(1);

/// The leases this instance holds, for the writes of their sessions.
pub(crate) struct Fences {
    cluster: Arc<dyn Cluster>,
    held: Mutex<HashMap<String, Fence>>,
}

impl Fences {
    /// Writes `record` fenced by this instance's lease on it.
    ///
    /// # Errors
    /// [`SessionError::LeaseLost`] when this instance holds no lease on it, or lost it.
    pub(crate) async fn save(
        &self,
        record: &SessionRecord,
        resume_state: Option<&Value>,
    ) -> Result<()> {
        let fence = lock(&self.held).get(&record.summary.id).cloned();
        match fence {
            Some(fence) => self.cluster.save(&fence, record, resume_state).await,
            None => Err(SessionError::LeaseLost {
                session_id: record.summary.id.clone(),
            }),
        }
    }

    fn get(&self, id: &str) -> Option<Fence> {
        lock(&self.held).get(id).cloned()
    }
}

/// What a turn's log writer is told.
enum LogOp {
    Chunks(Vec<String>),
    End,
}

/// A turn under way here, written to the log.
struct TurnLog {
    session_id: String,
    sender: mpsc::UnboundedSender<LogOp>,
    /// Whether its `start` was written: a continuation's own `start` never reaches the client.
    started: bool,
}

/// The many-instance side of a manager.
pub(crate) struct Many {
    pub(crate) cluster: Arc<dyn Cluster>,
    pub(crate) fences: Arc<Fences>,
    /// One gate per session: a claim and a let-go of its lease never cross.
    gates: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// The logs of the turns under way here, by turn number.
    logs: Mutex<HashMap<u64, TurnLog>>,
    next_turn: AtomicU64,
    started: AtomicBool,
}

impl Many {
    /// The many-instance side on `cluster`.
    pub(crate) fn new(cluster: Arc<dyn Cluster>) -> Arc<Many> {
        Arc::new(Many {
            fences: Arc::new(Fences {
                cluster: cluster.clone(),
                held: Mutex::new(HashMap::new()),
            }),
            cluster,
            gates: Mutex::new(HashMap::new()),
            logs: Mutex::new(HashMap::new()),
            next_turn: AtomicU64::new(FORWARDED_TURNS),
            started: AtomicBool::new(false),
        })
    }

    fn gate(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.gates).entry(id.to_owned()).or_default().clone()
    }

    fn forget_gate(&self, id: &str, gate: Arc<tokio::sync::Mutex<()>>) {
        let mut gates = lock(&self.gates);
        if Arc::strong_count(&gate) == 2 && !lock(&self.fences.held).contains_key(id) {
            gates.remove(id);
        }
    }

    /// Holds the lease of `id` here: `None` once held, or the owner's id when another live
    /// instance holds it.
    pub(super) async fn hold(&self, id: &str) -> Result<Option<String>> {
        let gate = self.gate(id);
        let answer = {
            let _gate = gate.lock().await;
            let known = self.fences.get(id);
            if known
                .as_ref()
                .is_some_and(|fence| self.cluster.held().contains(fence))
            {
                Ok(None)
            } else {
                match self.cluster.claim(id).await {
                    Ok(Claim::Granted(fence)) => {
                        lock(&self.fences.held).insert(id.to_owned(), fence);
                        Ok(None)
                    }
                    Ok(Claim::Held { owner }) => Ok(Some(owner)),
                    Err(error) => Err(error),
                }
            }
        };
        self.forget_gate(id, gate);
        answer
    }

    /// A number for a turn run here for another instance's caller.
    fn forwarded_turn(&self) -> u64 {
        self.next_turn.fetch_add(1, Ordering::SeqCst)
    }

    /// Writes `chunks` (those the client got) to the log of the turn of `session_id` under way.
    pub(super) fn log_session_chunks(&self, session_id: &str, chunks: &[&UiChunk]) {
        let mut logs = lock(&self.logs);
        if let Some(log) = logs.values_mut().find(|log| log.session_id == session_id) {
            log.send(chunks);
        }
    }

    fn log_turn_chunks(&self, turn_id: u64, chunks: &[UiChunk]) {
        if let Some(log) = lock(&self.logs).get_mut(&turn_id) {
            log.send(&chunks.iter().collect::<Vec<_>>());
        }
    }

    /// Closes the log of turn `turn_id`, once what was sent to it is written.
    pub(super) fn end_turn_log(&self, turn_id: u64) {
        if let Some(log) = lock(&self.logs).remove(&turn_id) {
            let _ = log.sender.send(LogOp::End);
        }
    }
}

impl TurnLog {
    fn send(&mut self, chunks: &[&UiChunk]) {
        let mut texts = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            if chunk.type_name() == "start" {
                if self.started {
                    continue;
                }
                self.started = true;
            }
            if let Ok(text) = serde_json::to_string(chunk) {
                texts.push(text);
            }
        }
        if !texts.is_empty() {
            let _ = self.sender.send(LogOp::Chunks(texts));
        }
    }
}

/// Writes the ops of one turn's log, in batches of at most [`BATCH_CHUNKS`] chunks, none waiting
/// more than [`BATCH_DELAY`]; stops at the first write refused (a lost lease).
async fn write_log(
    cluster: Arc<dyn Cluster>,
    fence: Fence,
    key: TurnKey,
    mut ops: mpsc::UnboundedReceiver<LogOp>,
) {
    let mut pending: Vec<String> = Vec::new();
    let mut due = None;
    loop {
        let next = match due {
            None => ops.recv().await,
            Some(at) => match tokio::time::timeout_at(at, ops.recv()).await {
                Ok(op) => op,
                Err(_) => {
                    let batch = std::mem::take(&mut pending);
                    if cluster.append(&fence, &key, batch).await.is_err() {
                        return;
                    }
                    due_clear(&mut due);
                    continue;
                }
            },
        };
        match next {
            Some(LogOp::Chunks(chunks)) => {
                if pending.is_empty() {
                    due = Some(tokio::time::Instant::now() + BATCH_DELAY);
                }
                pending.extend(chunks);
                if pending.len() >= BATCH_CHUNKS {
                    let batch = std::mem::take(&mut pending);
                    if cluster.append(&fence, &key, batch).await.is_err() {
                        return;
                    }
                    due_clear(&mut due);
                }
            }
            // The end, or the turn dropped without one: the log closes either way.
            Some(LogOp::End) | None => {
                let _ = cluster.end_turn(&fence, &key, pending).await;
                return;
            }
        }
    }
}

fn due_clear(due: &mut Option<tokio::time::Instant>) {
    *due = None;
}

/// The clients of a manager in many-instance mode: what each client gets is written to its
/// turn's log too, and a client's end closes the log.
pub(super) struct LoggedClients {
    pub(super) clients: Arc<dyn TurnClients>,
    pub(super) many: Arc<Many>,
}

impl TurnClients for LoggedClients {
    fn deliver(&self, turn_id: u64, chunks: Vec<UiChunk>) {
        self.many.log_turn_chunks(turn_id, &chunks);
        self.clients.deliver(turn_id, chunks);
    }

    fn finish(&self, turn_id: u64, session: &SessionSummary) {
        self.many.end_turn_log(turn_id);
        self.clients.finish(turn_id, session);
    }

    fn answer(&self, turn_id: u64, outcome: &Value) {
        self.clients.answer(turn_id, outcome);
    }
}

/// Where a command runs.
pub(super) enum Route {
    /// Here: this instance holds the session's lease (or there is no cluster).
    Here,
    /// On the owner, which answered this.
    There(Value),
}

impl Inner {
    /// Where the command `wire` on session `id` runs: here, once this instance holds the lease,
    /// or on the live owner, whose answer is given. The caller holds the session's entry.
    pub(super) async fn route(&self, id: &str, wire: impl Fn() -> Value) -> Result<Route> {
        let Some(many) = &self.many else {
            return Ok(Route::Here);
        };
        loop {
            if many.hold(id).await?.is_none() {
                return Ok(Route::Here);
            }
            if let Some(answer) = many.cluster.forward(id, wire(), FORWARD_WAIT).await? {
                return Ok(Route::There(answer));
            }
            // The owner died meanwhile: the lease is anybody's.
        }
    }

    /// Lets go of the lease of `id` once this instance has nothing of the session in memory.
    pub(super) async fn let_go_lease(&self, id: &str) {
        let Some(many) = &self.many else {
            return;
        };
        let gate = many.gate(id);
        {
            let _gate = gate.lock().await;
            if lock(&self.registry).entries.contains_key(id) {
                return;
            }
            let fence = lock(&many.fences.held).remove(id);
            if let Some(fence) = fence {
                if let Err(error) = many.cluster.release(&fence).await {
                    self.seams.hooks.on_error(&error, "release", Some(id));
                }
            }
        }
        many.forget_gate(id, gate);
    }

    /// Opens the log of turn `turn_id` of `session_id`, and its writer.
    pub(super) async fn open_log(&self, session_id: &str, turn_id: u64) -> Option<TurnKey> {
        let many = self.many.as_ref()?;
        let fence = many.fences.get(session_id)?;
        let key = match many.cluster.open_turn(&fence).await {
            Ok(key) => key,
            Err(error) => {
                self.seams.hooks.on_error(&error, "turn", Some(session_id));
                return None;
            }
        };
        let (sender, ops) = mpsc::unbounded_channel();
        lock(&many.logs).insert(
            turn_id,
            TurnLog {
                session_id: session_id.to_owned(),
                sender,
                started: false,
            },
        );
        tokio::spawn(write_log(many.cluster.clone(), fence, key.clone(), ops));
        Some(key)
    }

    /// The log a reader of a turn replayed by its `submissionId` follows: the session's last.
    pub(super) async fn replayed_log(&self, session_id: &str) -> Option<TurnKey> {
        let many = self.many.as_ref()?;
        many.cluster.latest_turn(session_id).await.ok().flatten()
    }

    /// Tells the other instances that session `id` changed.
    pub(super) async fn tell_change(&self, id: &str, deleted: bool) {
        if let Some(many) = &self.many {
            if let Err(error) = many.cluster.changed(id, deleted).await {
                self.seams.hooks.on_error(&error, "write", Some(id));
            }
        }
    }

    /// Starts the background work of the many-instance mode, once: the inbox of commands, the
    /// lost leases, the sweeper, the changes of other instances.
    pub(super) fn start_many(self: &Arc<Self>) {
        let Some(many) = &self.many else {
            return;
        };
        if many.started.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(mut inbox) = many.cluster.take_inbox() {
            let manager = Arc::downgrade(self);
            tokio::spawn(async move {
                while let Some(command) = inbox.recv().await {
                    let Some(inner) = manager.upgrade() else {
                        return;
                    };
                    tokio::spawn(serve(inner, command));
                }
            });
        }
        let mut lost = many.cluster.lease_events();
        let manager = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let event = match lost.recv().await {
                    Ok(event) => event,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                };
                let Some(inner) = manager.upgrade() else {
                    return;
                };
                let LeaseEvent::Lost(fence) = event;
                tokio::spawn(async move { inner.lease_lost(fence).await });
            }
        });
        let mut changes = many.cluster.changes();
        let me = many.cluster.instance_id().to_owned();
        let manager = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let change = match changes.recv().await {
                    Ok(change) => change,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(_) => return,
                };
                if change.from == me {
                    continue;
                }
                let Some(inner) = live(&manager) else {
                    return;
                };
                if change.deleted {
                    inner
                        .seams
                        .hooks
                        .on_event(SessionEvent::Deleted(change.session_id));
                } else if let Ok(Some(record)) = inner.seams.store.get(&change.session_id).await {
                    inner
                        .seams
                        .hooks
                        .on_event(SessionEvent::Updated(record.summary));
                }
            }
        });
        let manager = Arc::downgrade(self);
        let every = many.cluster.lease_ttl() / 2;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every + jitter(every / 4)).await;
                let Some(inner) = live(&manager) else {
                    return;
                };
                inner.sweep().await;
            }
        });
    }

    /// Takes over the sessions whose owners died, and recovers each.
    async fn sweep(self: &Arc<Self>) {
        let Some(many) = &self.many else {
            return;
        };
        let taken = match many.cluster.take_expired(SWEEP_BATCH).await {
            Ok(taken) => taken,
            Err(error) => {
                self.seams.hooks.on_error(&error, "sweep", None);
                return;
            }
        };
        for fence in taken {
            self.recover_taken(fence).await;
        }
    }

    /// Recovers session `fence.session_id`, whose lease this instance took over from an owner
    /// that died (or from a previous process): `interrupted` as after a crash, its reply marked
    /// cut, its turn's log closed; then lets go of the lease.
    pub(super) async fn recover_taken(self: &Arc<Self>, fence: Fence) {
        let Some(many) = &self.many else {
            return;
        };
        let id = fence.session_id.clone();
        let entry = self.entry(&id);
        {
            let gate = many.gate(&id);
            let _gate = gate.lock().await;
            lock(&many.fences.held).insert(id.clone(), fence.clone());
        }
        {
            let _command = entry.commands.lock().await;
            let live_here = entry.status().is_some_and(|s| s.is_live())
                && !matches!(entry.state().phase, Phase::Kept);
            if !live_here {
                entry.state().record = None;
                self.interrupt_left_live(id.clone()).await;
                if let Ok(Some(key)) = many.cluster.latest_turn(&id).await {
                    let open = many
                        .cluster
                        .read_turn(&key, u64::MAX)
                        .await
                        .is_ok_and(|read| !read.ended);
                    if open {
                        let ending = closing_chunks(STOPPED_WITHOUT_SUSPENDING);
                        if let Err(error) = many.cluster.end_turn(&fence, &key, ending).await {
                            self.seams.hooks.on_error(&error, "turn", Some(&id));
                        }
                    }
                }
                if let Ok(Some(record)) = self.journal.get(&id).await {
                    self.seams
                        .hooks
                        .on_event(SessionEvent::Updated(record.summary));
                }
                self.tell_change(&id, false).await;
            }
        }
        self.release(&entry);
    }

    /// This instance lost the lease of `fence.session_id`: its turn is cut, its harness session
    /// and sandbox let go of, and the session forgotten here (its next owner writes it).
    async fn lease_lost(self: &Arc<Self>, fence: Fence) {
        let Some(many) = &self.many else {
            return;
        };
        let id = fence.session_id.clone();
        if many.fences.get(&id).as_ref() != Some(&fence) {
            return;
        }
        self.seams.hooks.on_error(
            &SessionError::LeaseLost {
                session_id: id.clone(),
            },
            "lease",
            Some(&id),
        );
        if let Some(entry) = self.existing(&id) {
            let slot = entry.state().turn().map(|turn| turn.slot.clone());
            if let Some(slot) = &slot {
                slot.cut(LEASE_LOST);
            }
            if let Phase::Preparing(start) = &entry.state().phase {
                let _ = start.cancel.send(Some(LEASE_LOST.to_owned()));
            }
            // The turn ends itself (its writes refused), or is let go of.
            let _ = tokio::time::timeout(LOST_WIND_DOWN, self.wait_turn_over(&entry)).await;
            if entry.state().turn().is_some() {
                self.let_go_locked(&entry, LEASE_LOST).await;
            }
            let live = {
                let mut state = entry.state();
                let live = match std::mem::replace(&mut state.phase, Phase::Kept) {
                    Phase::Ready(live) => Some(live),
                    Phase::Busy(live, _) => Some(live),
                    other => {
                        state.phase = other;
                        None
                    }
                };
                if !matches!(state.phase, Phase::Preparing(_)) {
                    state.record = None;
                    state.generation += 1;
                }
                live
            };
            if let Some(live) = live {
                let harness = live.harness;
                let lease = live.lease;
                tokio::spawn(async move {
                    let _ = harness.destroy().await;
                    let _ = lease.close().await;
                });
            }
            self.release_slot(&id);
            entry.notify();
            self.release(&entry);
        } else {
            self.let_go_lease(&id).await;
        }
    }
}

/// A random wait up to `most`, so that the sweepers of several instances do not run together.
fn jitter(most: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let most = most.as_millis().max(1) as u64;
    Duration::from_millis(u64::from(nanos) % most)
}

fn live(manager: &Weak<Inner>) -> Option<Arc<Inner>> {
    manager
        .upgrade()
        .filter(|inner| !inner.shut_down.load(Ordering::SeqCst))
}

/// The chunks that close the log of a turn its owner did not end: the reply marked cut, then
/// `abort`.
fn closing_chunks(reason: &str) -> Vec<String> {
    let mut chunks = Vec::new();
    if let Some(chunk) = messages::cut_chunk(reason) {
        chunks.extend(serde_json::to_string(&chunk).ok());
    }
    chunks.push(json!({"type": "abort", "reason": reason}).to_string());
    chunks
}

/// Runs a command handed to this instance, and answers it.
async fn serve(inner: Arc<Inner>, command: Forwarded) {
    let Some(many) = inner.many.clone() else {
        return;
    };
    let manager = SessionManager { inner };
    let answer = run(manager, many.clone(), command.session_id, command.command).await;
    let _ = many.cluster.answer(command.id, answer).await;
}

fn to_value<T: serde::Serialize>(value: &T) -> Result<Value> {
    serde_json::to_value(value)
        .map_err(|e| SessionError::internal(format!("an answer could not be written: {e}")))
}

fn from_value<T: serde::de::DeserializeOwned>(value: Value) -> Result<T> {
    serde_json::from_value(value)
        .map_err(|e| SessionError::internal(format!("an instance's answer could not be read: {e}")))
}

/// Takes field `name` of a command.
fn field(command: &mut Value, name: &str) -> Value {
    command
        .get_mut(name)
        .map(Value::take)
        .unwrap_or(Value::Null)
}

/// Runs `command` on session `id`, as the forwarding side wrote it.
async fn run(
    manager: SessionManager,
    many: Arc<Many>,
    id: String,
    mut command: Value,
) -> Result<Value> {
    let kind = field(&mut command, "kind");
    match kind.as_str().unwrap_or("") {
        "create" => {
            let metadata = field(&mut command, "metadata");
            let history: Vec<StoredMessage> =
                serde_json::from_value(field(&mut command, "history")).map_err(|e| {
                    SessionError::internal(format!("a history could not be read: {e}"))
                })?;
            let summary = manager.create_with_history(id, metadata, history).await?;
            to_value(&summary)
        }
        "update" => {
            let metadata = field(&mut command, "metadata");
            to_value(&manager.update(&id, metadata).await?)
        }
        "update_if" => {
            let expected = field(&mut command, "expected");
            let metadata = field(&mut command, "metadata");
            let mut stale = None;
            let updated = manager
                .update_with(&id, |current| {
                    std::future::ready(if current == expected {
                        Ok(metadata.clone())
                    } else {
                        stale = Some(current);
                        Err(SessionError::internal("stale"))
                    })
                })
                .await;
            match (updated, stale) {
                (_, Some(current)) => Ok(json!({ "stale": current })),
                (Ok(summary), None) => Ok(json!({ "summary": to_value(&summary)? })),
                (Err(error), None) => Err(error),
            }
        }
        "interrupt" => {
            manager.interrupt(&id).await?;
            Ok(Value::Null)
        }
        "suspend" => to_value(&manager.suspend(&id).await?),
        "close" => to_value(&manager.close(&id).await?),
        "delete" => {
            manager.delete(&id).await?;
            Ok(Value::Null)
        }
        "exec" => {
            let request = super::ExecRequest {
                exec_id: many.forwarded_turn(),
                command: from_value(field(&mut command, "command"))?,
                key: from_value(field(&mut command, "key"))?,
                max_output_bytes: from_value(field(&mut command, "maxOutputBytes"))?,
            };
            to_value(&manager.exec(&id, request).await?)
        }
        "send" => {
            let request = SendRequest {
                turn_id: many.forwarded_turn(),
                message: field(&mut command, "message"),
                prompt: from_value(field(&mut command, "prompt"))?,
                reply_id: from_value(field(&mut command, "replyId"))?,
                message_id: from_value(field(&mut command, "messageId"))?,
                options: options_from_wire(&field(&mut command, "options"))?,
                submission: submission_from_wire(&field(&mut command, "submission")),
            };
            started_to_wire(manager.send(&id, request).await?)
        }
        "continue" => {
            let message = Some(field(&mut command, "message")).filter(|m| !m.is_null());
            let request = ContinueRequest {
                turn_id: many.forwarded_turn(),
                message,
                approvals: from_value(field(&mut command, "approvals"))?,
                tool_results: from_value(field(&mut command, "toolResults"))?,
                options: options_from_wire(&field(&mut command, "options"))?,
                submission: submission_from_wire(&field(&mut command, "submission")),
            };
            started_to_wire(manager.continue_turn(&id, request).await?)
        }
        other => Err(SessionError::internal(format!(
            "an instance was handed a command it does not know: {other}"
        ))),
    }
}

/// The options of a turn as they cross to the owner (what the owner works out, it works out).
pub(super) fn options_to_wire(options: &TurnOptions) -> Value {
    json!({
        "instructionAddendum": options.instruction_addendum,
        "maxSteps": options.max_steps,
        "timeoutMs": options.timeout.map(|t| t.as_millis() as u64),
        "output": options.output.as_ref().map(|o| json!({
            "schema": o.schema,
            "name": o.name,
            "description": o.description,
        })),
    })
}

fn options_from_wire(value: &Value) -> Result<TurnOptions> {
    let output = value.get("output").cloned().filter(|o| !o.is_null());
    Ok(TurnOptions {
        instruction_addendum: from_value(value.get("instructionAddendum").cloned().into())?,
        max_steps: from_value(value.get("maxSteps").cloned().into())?,
        timeout: from_value::<Option<u64>>(value.get("timeoutMs").cloned().into())?
            .map(Duration::from_millis),
        output: turn_output::read(output)?,
        carried_addendum: None,
    })
}

pub(super) fn submission_to_wire(submission: Option<&super::SubmissionAsk>) -> Value {
    submission.map_or(Value::Null, |s| json!({"id": s.id, "digest": s.digest}))
}

fn submission_from_wire(value: &Value) -> Option<super::SubmissionAsk> {
    Some(super::SubmissionAsk {
        id: value.get("id")?.as_str()?.to_owned(),
        digest: value.get("digest")?.as_str()?.to_owned(),
    })
}

fn started_to_wire(started: TurnStarted) -> Result<Value> {
    Ok(json!({
        "messageId": started.message_id,
        "session": to_value(&started.session)?,
        "replayed": started.replayed,
        "log": started.log.map(|key| json!({"sessionId": key.session_id, "turn": key.turn})),
    }))
}

/// The answer of a `send` or `continue` the owner ran.
pub(super) fn started_from_wire(value: Value) -> Result<TurnStarted> {
    let log = value.get("log").and_then(|log| {
        Some(TurnKey {
            session_id: log.get("sessionId")?.as_str()?.to_owned(),
            turn: log.get("turn")?.as_u64()?,
        })
    });
    Ok(TurnStarted {
        message_id: from_value(value.get("messageId").cloned().into())?,
        session: from_value(value.get("session").cloned().into())?,
        replayed: value
            .get("replayed")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        log,
    })
}

/// An answer the owner gave, decoded.
pub(super) fn answer<T: serde::de::DeserializeOwned>(value: Value) -> Result<T> {
    from_value(value)
}
