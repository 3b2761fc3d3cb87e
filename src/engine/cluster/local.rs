//! An in-process [`Cluster`]: several managers of one process sharing a [`Hub`] (the stand-in for
//! the database: one lease table, one clock, one turn log, one bus), each through its own
//! [`LocalCluster`] and [`LocalStore`]. It exists to test the manager's many-instance logic
//! without PostgreSQL; [`LocalCluster::pause`] and [`LocalCluster::kill`] play an instance
//! stopped past its lease and an instance that died.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::time::Instant;

use super::held::HeldLeases;
use super::{Change, Claim, Cluster, Fence, Forwarded, LeaseEvent, LogRead, TurnKey};
use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionRecord, SessionSummary};
use crate::engine::store::SessionStore;

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A lease row.
struct LeaseRow {
    owner: String,
    epoch: u64,
    expires_at: Instant,
}

/// One turn's chunks.
#[derive(Default)]
struct TurnLog {
    chunks: Vec<String>,
    ended: bool,
}

/// What the hub keeps, changed as one transaction at a time.
#[derive(Default)]
struct Tables {
    leases: HashMap<String, LeaseRow>,
    /// Each session's turns, turn `n` at index `n - 1`.
    logs: HashMap<String, Vec<TurnLog>>,
}

impl Tables {
    /// Whether `fence` holds right now, by `instance`.
    fn holds(&self, instance: &str, fence: &Fence) -> bool {
        self.leases.get(&fence.session_id).is_some_and(|row| {
            row.owner == instance && row.epoch == fence.epoch && row.expires_at > Instant::now()
        })
    }
}

/// The shared side of the in-process cluster: see the module documentation.
pub struct Hub {
    store: Arc<dyn SessionStore>,
    /// Held across a fenced write, as a transaction holds its rows.
    tables: tokio::sync::Mutex<Tables>,
    turns: broadcast::Sender<TurnKey>,
    changes: broadcast::Sender<Change>,
    change_version: Mutex<u64>,
    inboxes: Mutex<HashMap<String, mpsc::UnboundedSender<Forwarded>>>,
    answers: Mutex<HashMap<u64, oneshot::Sender<Result<Value>>>>,
    next_command: AtomicU64,
}

impl Hub {
    /// A hub whose sessions are kept in `store`.
    pub fn new(store: Arc<dyn SessionStore>) -> Arc<Hub> {
        Arc::new(Hub {
            store,
            tables: tokio::sync::Mutex::new(Tables::default()),
            turns: broadcast::channel(4096).0,
            changes: broadcast::channel(4096).0,
            change_version: Mutex::new(0),
            inboxes: Mutex::new(HashMap::new()),
            answers: Mutex::new(HashMap::new()),
            next_command: AtomicU64::new(1),
        })
    }

    /// An instance `id` on this hub, whose leases last `ttl`.
    pub fn instance(self: &Arc<Self>, id: &str, ttl: Duration) -> Arc<LocalCluster> {
        let (inbox, taken) = mpsc::unbounded_channel();
        locked(&self.inboxes).insert(id.to_owned(), inbox);
        Arc::new_cyclic(|me| LocalCluster {
            me: me.clone(),
            hub: self.clone(),
            id: id.to_owned(),
            ttl,
            held: HeldLeases::default(),
            inbox: Mutex::new(Some(taken)),
            paused: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            renewing: AtomicBool::new(false),
        })
    }

    /// The epoch of `session_id`'s lease, and its owner, expired or not.
    pub async fn lease_of(&self, session_id: &str) -> Option<(String, u64)> {
        let tables = self.tables.lock().await;
        tables
            .leases
            .get(session_id)
            .map(|row| (row.owner.clone(), row.epoch))
    }
}

/// One instance's side of the in-process cluster.
pub struct LocalCluster {
    me: Weak<LocalCluster>,
    hub: Arc<Hub>,
    id: String,
    ttl: Duration,
    /// The leases this instance holds, by session: their epochs.
    held: HeldLeases,
    inbox: Mutex<Option<mpsc::UnboundedReceiver<Forwarded>>>,
    /// Renewing nothing, as a process stopped (`SIGSTOP`).
    paused: AtomicBool,
    /// Left, or killed: renewing nothing, ever again.
    gone: AtomicBool,
    renewing: AtomicBool,
}

impl LocalCluster {
    /// The store of this instance: the hub's, offering this cluster.
    pub fn store(self: &Arc<Self>) -> Arc<dyn SessionStore> {
        Arc::new(LocalStore {
            store: self.hub.store.clone(),
            cluster: self.clone(),
        })
    }

    /// Stops (`true`) or starts again (`false`) renewing leases, as `SIGSTOP` and `SIGCONT` would.
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    /// The instance dies: it renews nothing more and its inbox is gone; its leases expire.
    pub fn kill(&self) {
        self.gone.store(true, Ordering::SeqCst);
        locked(&self.hub.inboxes).remove(&self.id);
    }

    /// Starts the renewal of held leases, every third of the ttl, once.
    fn renew_in_background(&self) {
        if self.renewing.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.me.clone();
        let every = self.ttl / 3;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(cluster) = me.upgrade() else { return };
                if cluster.gone.load(Ordering::SeqCst) {
                    return;
                }
                if cluster.paused.load(Ordering::SeqCst) {
                    continue;
                }
                let fences: Vec<Fence> = cluster.held();
                for fence in fences {
                    // `renew` reports a loss itself.
                    let _ = cluster.renew(&fence).await;
                }
            }
        });
    }

    /// Forgets `fence` as held, and tells the manager, once.
    fn lose(&self, fence: &Fence) {
        self.held.lose(fence);
    }

    fn lease_lost(fence: &Fence) -> SessionError {
        SessionError::LeaseLost {
            session_id: fence.session_id.clone(),
        }
    }

    /// Appends to `turn` under `fence`, closing it when `end`.
    async fn write_log(
        &self,
        fence: &Fence,
        turn: &TurnKey,
        chunks: Vec<String>,
        end: bool,
    ) -> Result<u64> {
        let seq = {
            let mut tables = self.hub.tables.lock().await;
            if !tables.holds(&self.id, fence) || turn.session_id != fence.session_id {
                drop(tables);
                self.lose(fence);
                return Err(Self::lease_lost(fence));
            }
            let log = tables
                .logs
                .get_mut(&turn.session_id)
                .and_then(|turns| {
                    let last = turns.len() as u64;
                    (turn.turn == last && last > 0).then(|| turns.last_mut())
                })
                .flatten()
                .filter(|log| !log.ended)
                .ok_or_else(|| SessionError::internal("the turn's log is closed"))?;
            log.chunks.extend(chunks);
            log.ended = end;
            log.chunks.len() as u64
        };
        // Sent after the write, as `NOTIFY` is delivered at commit.
        let _ = self.hub.turns.send(turn.clone());
        Ok(seq)
    }
}

#[async_trait]
impl Cluster for LocalCluster {
    fn instance_id(&self) -> &str {
        &self.id
    }

    fn lease_ttl(&self) -> Duration {
        self.ttl
    }

    async fn claim(&self, session_id: &str) -> Result<Claim> {
        if self.gone.load(Ordering::SeqCst) {
            return Err(SessionError::ShutDown);
        }
        self.renew_in_background();
        let mut tables = self.hub.tables.lock().await;
        let now = Instant::now();
        let expires_at = now + self.ttl;
        let epoch = match tables.leases.get_mut(session_id) {
            Some(row) if row.owner == self.id && row.expires_at > now => {
                row.expires_at = expires_at;
                row.epoch
            }
            Some(row) if row.expires_at > now => {
                return Ok(Claim::Held {
                    owner: row.owner.clone(),
                });
            }
            Some(row) => {
                row.owner = self.id.clone();
                row.epoch += 1;
                row.expires_at = expires_at;
                row.epoch
            }
            None => {
                tables.leases.insert(
                    session_id.to_owned(),
                    LeaseRow {
                        owner: self.id.clone(),
                        epoch: 1,
                        expires_at,
                    },
                );
                1
            }
        };
        drop(tables);
        let fence = Fence {
            session_id: session_id.to_owned(),
            epoch,
        };
        self.held.hold(&fence);
        Ok(Claim::Granted(fence))
    }

    async fn renew(&self, fence: &Fence) -> Result<bool> {
        let renewed = {
            let mut tables = self.hub.tables.lock().await;
            let now = Instant::now();
            match tables.leases.get_mut(&fence.session_id) {
                Some(row)
                    if row.owner == self.id && row.epoch == fence.epoch && row.expires_at > now =>
                {
                    row.expires_at = now + self.ttl;
                    true
                }
                _ => false,
            }
        };
        if !renewed {
            self.lose(fence);
        }
        Ok(renewed)
    }

    async fn release(&self, fence: &Fence) -> Result<()> {
        let mut tables = self.hub.tables.lock().await;
        if tables.holds(&self.id, fence) {
            if let Some(row) = tables.leases.get_mut(&fence.session_id) {
                // Expired now and nobody's: free for any instance (and nothing for the sweeper),
                // the epoch kept so that the next is higher.
                row.expires_at = Instant::now();
                row.owner = String::new();
            }
        }
        drop(tables);
        self.held.forget(fence);
        Ok(())
    }

    async fn owner(&self, session_id: &str) -> Result<Option<String>> {
        let tables = self.hub.tables.lock().await;
        Ok(tables
            .leases
            .get(session_id)
            .filter(|row| row.expires_at > Instant::now())
            .map(|row| row.owner.clone()))
    }

    async fn take_expired(&self, limit: usize) -> Result<Vec<Fence>> {
        if self.gone.load(Ordering::SeqCst) || self.paused.load(Ordering::SeqCst) {
            return Ok(Vec::new());
        }
        self.renew_in_background();
        let mut tables = self.hub.tables.lock().await;
        let now = Instant::now();
        let mut taken = Vec::new();
        // Only leases whose owner let them lapse: a released one has nothing to recover (the
        // next caller's claim takes it).
        let mut expired: Vec<String> = tables
            .leases
            .iter()
            .filter(|(_, row)| row.expires_at <= now && !row.owner.is_empty())
            .map(|(id, _)| id.clone())
            .collect();
        expired.sort();
        expired.truncate(limit);
        for id in expired {
            if let Some(row) = tables.leases.get_mut(&id) {
                row.owner = self.id.clone();
                row.epoch += 1;
                row.expires_at = now + self.ttl;
                taken.push(Fence {
                    session_id: id,
                    epoch: row.epoch,
                });
            }
        }
        drop(tables);
        for fence in &taken {
            self.held.hold(fence);
        }
        Ok(taken)
    }

    fn held(&self) -> Vec<Fence> {
        self.held.fences()
    }

    fn lease_events(&self) -> broadcast::Receiver<LeaseEvent> {
        self.held.subscribe()
    }

    async fn save(
        &self,
        fence: &Fence,
        record: &SessionRecord,
        resume_state: Option<&Value>,
    ) -> Result<()> {
        let tables = self.hub.tables.lock().await;
        if !tables.holds(&self.id, fence) || record.summary.id != fence.session_id {
            drop(tables);
            self.lose(fence);
            return Err(Self::lease_lost(fence));
        }
        let saved = self.hub.store.save(record, resume_state).await;
        drop(tables);
        saved
    }

    async fn open_turn(&self, fence: &Fence) -> Result<TurnKey> {
        let key = {
            let mut tables = self.hub.tables.lock().await;
            if !tables.holds(&self.id, fence) {
                drop(tables);
                self.lose(fence);
                return Err(Self::lease_lost(fence));
            }
            let turns = tables.logs.entry(fence.session_id.clone()).or_default();
            if let Some(last) = turns.last_mut() {
                last.ended = true;
            }
            turns.push(TurnLog::default());
            TurnKey {
                session_id: fence.session_id.clone(),
                turn: turns.len() as u64,
            }
        };
        if key.turn > 1 {
            let _ = self.hub.turns.send(TurnKey {
                session_id: key.session_id.clone(),
                turn: key.turn - 1,
            });
        }
        Ok(key)
    }

    async fn append(&self, fence: &Fence, turn: &TurnKey, chunks: Vec<String>) -> Result<u64> {
        self.write_log(fence, turn, chunks, false).await
    }

    async fn end_turn(&self, fence: &Fence, turn: &TurnKey, chunks: Vec<String>) -> Result<u64> {
        self.write_log(fence, turn, chunks, true).await
    }

    async fn read_turn(&self, turn: &TurnKey, after: u64) -> Result<LogRead> {
        let tables = self.hub.tables.lock().await;
        let log = tables
            .logs
            .get(&turn.session_id)
            .and_then(|turns| {
                usize::try_from(turn.turn)
                    .ok()
                    .and_then(|n| n.checked_sub(1))
                    .and_then(|i| turns.get(i))
            })
            .ok_or_else(|| SessionError::NotFound {
                session_id: turn.session_id.clone(),
            })?;
        let from = usize::try_from(after).unwrap_or(usize::MAX);
        Ok(LogRead {
            chunks: log
                .chunks
                .iter()
                .enumerate()
                .skip(from)
                .map(|(i, chunk)| (i as u64 + 1, chunk.clone()))
                .collect(),
            ended: log.ended,
        })
    }

    async fn latest_turn(&self, session_id: &str) -> Result<Option<TurnKey>> {
        let tables = self.hub.tables.lock().await;
        Ok(tables
            .logs
            .get(session_id)
            .filter(|turns| !turns.is_empty())
            .map(|turns| TurnKey {
                session_id: session_id.to_owned(),
                turn: turns.len() as u64,
            }))
    }

    fn watch_turns(&self) -> broadcast::Receiver<TurnKey> {
        self.hub.turns.subscribe()
    }

    async fn forward(
        &self,
        session_id: &str,
        command: Value,
        wait: Duration,
    ) -> Result<Option<Value>> {
        let deadline = Instant::now() + wait;
        loop {
            let Some(owner) = self.owner(session_id).await? else {
                return Ok(None);
            };
            let id = self.hub.next_command.fetch_add(1, Ordering::SeqCst);
            let (answer, answered) = oneshot::channel();
            locked(&self.hub.answers).insert(id, answer);
            let delivered = locked(&self.hub.inboxes).get(&owner).is_some_and(|inbox| {
                inbox
                    .send(Forwarded {
                        id,
                        session_id: session_id.to_owned(),
                        from: self.id.clone(),
                        command: command.clone(),
                    })
                    .is_ok()
            });
            // An owner that does not answer within its ttl is dead or stopped: once its lease
            // expired, the session is anybody's.
            let bound = deadline.min(Instant::now() + self.ttl);
            let outcome = if delivered {
                tokio::time::timeout_at(bound, answered).await.ok()
            } else {
                tokio::time::sleep_until(bound).await;
                None
            };
            locked(&self.hub.answers).remove(&id);
            if let Some(Ok(answer)) = outcome {
                return answer.map(Some);
            }
            if Instant::now() >= deadline {
                return Err(SessionError::host(format!(
                    "The instance that owns session {session_id} did not answer."
                )));
            }
        }
    }

    fn take_inbox(&self) -> Option<mpsc::UnboundedReceiver<Forwarded>> {
        locked(&self.inbox).take()
    }

    async fn answer(&self, command_id: u64, answer: Result<Value>) -> Result<()> {
        if let Some(waiting) = locked(&self.hub.answers).remove(&command_id) {
            let _ = waiting.send(answer);
        }
        Ok(())
    }

    async fn changed(&self, session_id: &str, deleted: bool) -> Result<()> {
        let mut version = locked(&self.hub.change_version);
        *version += 1;
        let _ = self.hub.changes.send(Change {
            session_id: session_id.to_owned(),
            deleted,
            version: *version,
            from: self.id.clone(),
        });
        Ok(())
    }

    fn changes(&self) -> broadcast::Receiver<Change> {
        self.hub.changes.subscribe()
    }

    async fn leave(&self) -> Result<()> {
        for fence in self.held() {
            self.release(&fence).await?;
        }
        self.gone.store(true, Ordering::SeqCst);
        locked(&self.hub.inboxes).remove(&self.id);
        Ok(())
    }
}

/// The store of one instance of the in-process cluster: the hub's store, offering its cluster.
pub struct LocalStore {
    store: Arc<dyn SessionStore>,
    cluster: Arc<LocalCluster>,
}

#[async_trait]
impl SessionStore for LocalStore {
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()> {
        self.store.save(record, resume_state).await
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        self.store.get(id).await
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        self.store.list().await
    }

    async fn list_json(&self) -> Result<String> {
        self.store.list_json().await
    }

    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        self.store.get_resume_state(id).await
    }

    async fn delete(&self, id: &str) -> Result<()> {
        self.store.delete(id).await
    }

    fn cluster(&self) -> Option<Arc<dyn super::Cluster>> {
        Some(self.cluster.clone())
    }
}

#[cfg(test)]
mod tests;
