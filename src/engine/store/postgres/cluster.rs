//! The [`Cluster`] of the PostgreSQL store: leases, the turn log, commands to the owner and change
//! notes in the store's tables, judged by the database's clock, woken by `LISTEN`/`NOTIFY`.
//!
//! Invariants:
//! - a lease is a row of `leases`: taken when free (owner `''`), expired (`expires_at <= now()`),
//!   or this instance's; a takeover raises `epoch`; all of an instance's leases are renewed in
//!   one statement every third of the ttl, on a connection of their own (not the pool), and a
//!   lease is lost only when the database says so (its row no longer this instance's, or its
//!   epoch changed), not because a renewal came late: a late renewal renews what nobody took;
//! - every fenced write (a record, a turn's log) first reads its lease row `FOR KEY SHARE` with
//!   its owner and epoch, in the same transaction; every statement that changes owner or epoch
//!   (a claim, a release, a takeover) first locks the row `FOR UPDATE`, so it waits for the
//!   writes in flight to commit, and once it committed no write of the old epoch can; a renewal
//!   changes `expires_at` only (`FOR NO KEY UPDATE`, which `FOR KEY SHARE` does not block), so
//!   it never waits behind fenced writes (`FOR SHARE` made it wait for each of them);
//! - a turn's log is `turns` (one row per turn, `open` or `ended`) and `turn_events` (its chunks,
//!   `seq` 1, 2, ... with no gap); appending and ending are one transaction each, their
//!   `NOTIFY` sent at commit; a read is one statement (one snapshot: chunks and end agree);
//! - commands go through `commands` rows (`payload.to` names the owner), their answers too
//!   (`kind` `answer`, `session_id` the command's id); notifications only wake, the rows decide,
//!   and every waiter also polls (a notification is lost while a listener reconnects).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};

use super::PostgresStore;
use crate::engine::cluster::held::HeldLeases;
use crate::engine::cluster::wire::{error_from_wire, error_to_wire};
use crate::engine::cluster::{
    Change, Claim, Cluster, Fence, Forwarded, LeaseEvent, LogRead, TurnKey,
};
use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionRecord, SessionSummary};
use crate::engine::store::SessionStore;

/// How often a waiter polls when no notification woke it.
const POLL: Duration = Duration::from_millis(250);

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The channel `suffix` of `schema`: at most 63 bytes.
fn channel(schema: &str, suffix: &str) -> String {
    let name = format!("{schema}_{suffix}");
    if name.len() <= 63 {
        return name;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in schema.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("hs_{hash:016x}_{suffix}")
}

/// The channels of one store.
struct Channels {
    turns: String,
    commands: String,
    answers: String,
    changes: String,
}

/// The statements' text in the store's schema.
struct Sql {
    claim: String,
    holder: String,
    renew: String,
    renew_all: String,
    lock_lease: String,
    release: String,
    owner: String,
    take_expired: String,
    fence: String,
    close_open_turns: String,
    next_turn: String,
    insert_turn: String,
    turn_for_append: String,
    append: String,
    end_turn: String,
    read_turn: String,
    latest_turn: String,
    insert_command: String,
    take_commands: String,
    take_answer: String,
}

impl Sql {
    fn new(s: &str) -> Sql {
        Sql {
            claim: format!(
                "INSERT INTO {s}.leases AS l (session_id, owner, epoch, expires_at) \
                 VALUES ($1, $2, 1, now() + $3::bigint * interval '1 millisecond') \
                 ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, \
                     epoch = CASE WHEN l.owner = EXCLUDED.owner AND l.expires_at > now() \
                         THEN l.epoch ELSE l.epoch + 1 END, \
                     expires_at = EXCLUDED.expires_at \
                 WHERE l.expires_at <= now() OR l.owner = EXCLUDED.owner \
                 RETURNING epoch"
            ),
            holder: format!(
                "SELECT owner FROM {s}.leases WHERE session_id = $1 AND expires_at > now() \
                 AND owner <> ''"
            ),
            renew: format!(
                "UPDATE {s}.leases SET expires_at = now() + $4::bigint * interval '1 millisecond' \
                 WHERE session_id = $1 AND owner = $2 AND epoch = $3"
            ),
            renew_all: format!(
                "UPDATE {s}.leases SET expires_at = now() + $3::bigint * interval '1 millisecond' \
                 WHERE owner = $1 AND session_id = ANY($2) RETURNING session_id, epoch"
            ),
            lock_lease: format!("SELECT 1 FROM {s}.leases WHERE session_id = $1 FOR UPDATE"),
            release: format!(
                "WITH mine AS (SELECT session_id FROM {s}.leases \
                     WHERE session_id = $1 AND owner = $2 AND epoch = $3 FOR UPDATE) \
                 UPDATE {s}.leases l SET owner = '', expires_at = now() \
                 FROM mine WHERE l.session_id = mine.session_id"
            ),
            owner: format!(
                "SELECT owner FROM {s}.leases WHERE session_id = $1 AND expires_at > now() \
                 AND owner <> ''"
            ),
            take_expired: format!(
                "WITH expired AS (SELECT session_id FROM {s}.leases \
                     WHERE expires_at <= now() AND owner <> '' \
                     ORDER BY expires_at LIMIT $3 FOR UPDATE SKIP LOCKED) \
                 UPDATE {s}.leases l SET owner = $1, epoch = l.epoch + 1, \
                     expires_at = now() + $2::bigint * interval '1 millisecond' \
                 FROM expired WHERE l.session_id = expired.session_id \
                 RETURNING l.session_id, l.epoch"
            ),
            fence: format!(
                "SELECT 1 FROM {s}.leases WHERE session_id = $1 AND owner = $2 AND epoch = $3 \
                 FOR KEY SHARE"
            ),
            close_open_turns: format!(
                "UPDATE {s}.turns SET status = 'ended', ended_at = now() \
                 WHERE session_id = $1 AND status = 'open' RETURNING turn_id"
            ),
            next_turn: format!(
                "SELECT coalesce(max(turn_id::bigint), 0) + 1 FROM {s}.turns WHERE session_id = $1"
            ),
            insert_turn: format!(
                "INSERT INTO {s}.turns (session_id, turn_id, status, started_by, epoch) \
                 VALUES ($1, $2, 'open', $3, $4)"
            ),
            turn_for_append: format!(
                "SELECT t.status, (SELECT coalesce(max(seq), 0) FROM {s}.turn_events e \
                     WHERE e.session_id = t.session_id AND e.turn_id = t.turn_id) \
                 FROM {s}.turns t WHERE t.session_id = $1 AND t.turn_id = $2 FOR UPDATE"
            ),
            append: format!(
                "INSERT INTO {s}.turn_events (session_id, turn_id, seq, epoch, chunk) \
                 SELECT $1, $2, $3::bigint + c.n, $4, c.chunk \
                 FROM unnest($5::text[]) WITH ORDINALITY AS c (chunk, n)"
            ),
            end_turn: format!(
                "UPDATE {s}.turns SET status = 'ended', ended_at = now() \
                 WHERE session_id = $1 AND turn_id = $2"
            ),
            read_turn: format!(
                "SELECT t.status, e.seq, e.chunk FROM {s}.turns t \
                 LEFT JOIN {s}.turn_events e ON e.session_id = t.session_id \
                     AND e.turn_id = t.turn_id AND e.seq > $3 \
                 WHERE t.session_id = $1 AND t.turn_id = $2 ORDER BY e.seq"
            ),
            latest_turn: format!(
                "SELECT max(turn_id::bigint) FROM {s}.turns WHERE session_id = $1"
            ),
            insert_command: format!(
                "INSERT INTO {s}.commands (session_id, kind, payload, created_by) \
                 VALUES ($1, $2, $3::text::jsonb, $4) RETURNING id"
            ),
            take_commands: format!(
                "DELETE FROM {s}.commands WHERE kind = 'command' AND payload->>'to' = $1 \
                 RETURNING id, session_id, payload::text, created_by"
            ),
            take_answer: format!(
                "DELETE FROM {s}.commands WHERE kind = 'answer' AND session_id = $1 \
                 RETURNING payload::text"
            ),
        }
    }
}

/// The cluster of a PostgreSQL store: see the module documentation.
pub struct PostgresCluster {
    store: Arc<PostgresStore>,
    id: String,
    ttl: Duration,
    sql: Sql,
    channels: Channels,
    held: HeldLeases,
    turns: broadcast::Sender<TurnKey>,
    changes: broadcast::Sender<Change>,
    answers: broadcast::Sender<u64>,
    inbox: Mutex<Option<mpsc::UnboundedReceiver<Forwarded>>>,
    inbox_sender: mpsc::UnboundedSender<Forwarded>,
    /// Renewing and serving nothing, as a stopped process (tests).
    paused: AtomicBool,
    gone: AtomicBool,
    change_version: AtomicU64,
}

impl PostgresCluster {
    /// The cluster of `store`: it starts listening and renewing at once (in the background).
    pub fn new(store: Arc<PostgresStore>) -> Arc<PostgresCluster> {
        let schema = store.quoted_schema();
        let bare = store.schema().to_owned();
        let (inbox_sender, inbox) = mpsc::unbounded_channel();
        let cluster = Arc::new(PostgresCluster {
            id: store.instance_id().to_owned(),
            ttl: store.lease_ttl(),
            sql: Sql::new(&schema),
            channels: Channels {
                turns: channel(&bare, "turns"),
                commands: channel(&bare, "commands"),
                answers: channel(&bare, "answers"),
                changes: channel(&bare, "changes"),
            },
            store,
            held: HeldLeases::default(),
            turns: broadcast::channel(4096).0,
            changes: broadcast::channel(4096).0,
            answers: broadcast::channel(4096).0,
            inbox: Mutex::new(Some(inbox)),
            inbox_sender,
            paused: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            change_version: AtomicU64::new(0),
        });
        tokio::spawn(listen(Arc::downgrade(&cluster)));
        tokio::spawn(renew(Arc::downgrade(&cluster)));
        cluster
    }

    /// Stops (`true`) or starts again renewing leases and serving commands, as `SIGSTOP` and
    /// `SIGCONT` would (for tests).
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }

    fn ttl_ms(&self) -> i64 {
        i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX)
    }

    fn lease_lost(fence: &Fence) -> SessionError {
        SessionError::LeaseLost {
            session_id: fence.session_id.clone(),
        }
    }

    fn lose(&self, fence: &Fence) {
        self.held.lose(fence);
    }

    async fn opened(&self) -> Result<Arc<super::Opened>> {
        self.store.connections().await
    }

    /// Runs `work` in a transaction that first checks `fence` (`FOR KEY SHARE`): `LeaseLost` when
    /// it does not hold, and nothing of `work` is written.
    async fn fenced<T>(
        &self,
        fence: &Fence,
        action: &str,
        work: impl AsyncFnOnce(&deadpool_postgres::Transaction<'_>, &super::Opened) -> Result<T>,
    ) -> Result<T> {
        let opened = self.opened().await?;
        let fail = |error: tokio_postgres::Error| opened.connections.failed(action, &error);
        let mut client = opened.connections.get().await?;
        let tx = client.transaction().await.map_err(fail)?;
        let holds = tx
            .query_opt(
                &self.sql.fence,
                &[&fence.session_id, &self.id, &(fence.epoch as i64)],
            )
            .await
            .map_err(fail)?
            .is_some();
        if !holds {
            drop(tx);
            self.lose(fence);
            return Err(Self::lease_lost(fence));
        }
        let value = work(&tx, &opened).await?;
        tx.commit().await.map_err(fail)?;
        Ok(value)
    }

    /// Appends to `turn`, closing it when `end`.
    async fn write_log(
        &self,
        fence: &Fence,
        turn: &TurnKey,
        chunks: Vec<String>,
        end: bool,
    ) -> Result<u64> {
        if turn.session_id != fence.session_id {
            return Err(Self::lease_lost(fence));
        }
        let turn_id = turn.turn.to_string();
        let action = format!("write the turn log of session {}", turn.session_id);
        self.fenced(fence, &action, async |tx, opened| {
            let fail = |error: tokio_postgres::Error| opened.connections.failed(&action, &error);
            let row = tx
                .query_opt(&self.sql.turn_for_append, &[&turn.session_id, &turn_id])
                .await
                .map_err(fail)?
                .ok_or_else(|| SessionError::internal("the turn's log is closed"))?;
            let status: String = row.get(0);
            let last: i64 = row.get(1);
            if status != "open" {
                return Err(SessionError::internal("the turn's log is closed"));
            }
            let count = chunks.len() as i64;
            if count > 0 {
                tx.execute(
                    &self.sql.append,
                    &[
                        &turn.session_id,
                        &turn_id,
                        &last,
                        &(fence.epoch as i64),
                        &chunks,
                    ],
                )
                .await
                .map_err(fail)?;
            }
            if end {
                tx.execute(&self.sql.end_turn, &[&turn.session_id, &turn_id])
                    .await
                    .map_err(fail)?;
            }
            let payload = format!("{}\t{}", turn.session_id, turn.turn);
            tx.execute(
                "SELECT pg_notify($1, $2)",
                &[&self.channels.turns, &payload],
            )
            .await
            .map_err(fail)?;
            Ok((last + count) as u64)
        })
        .await
    }

    /// Takes the commands handed to this instance into its inbox.
    async fn take_commands(&self) -> Result<()> {
        if self.paused.load(Ordering::SeqCst) {
            return Ok(());
        }
        let opened = self.opened().await?;
        let client = opened.connections.get().await?;
        let rows = client
            .query(&self.sql.take_commands, &[&self.id])
            .await
            .map_err(|e| opened.connections.failed("take its commands", &e))?;
        for row in rows {
            let id: i64 = row.get(0);
            let session_id: String = row.get(1);
            let payload: String = row.get(2);
            let payload: Value = serde_json::from_str(&payload).unwrap_or(Value::Null);
            let from: Option<String> = row.get(3);
            let _ = self.inbox_sender.send(Forwarded {
                id: id as u64,
                session_id,
                from: from.unwrap_or_default(),
                command: payload.get("command").cloned().unwrap_or(Value::Null),
            });
        }
        Ok(())
    }

    /// The answer of command `id`, if given.
    async fn take_answer(&self, id: u64) -> Result<Option<Value>> {
        let opened = self.opened().await?;
        let client = opened.connections.get().await?;
        let row = client
            .query_opt(&self.sql.take_answer, &[&id.to_string()])
            .await
            .map_err(|e| opened.connections.failed("read an answer", &e))?;
        Ok(row.and_then(|row| serde_json::from_str(row.get::<_, &str>(0)).ok()))
    }
}

/// Follows the store's notifications: wakes readers, takes commands, tells answers and changes.
async fn listen(cluster: Weak<PostgresCluster>) {
    let Some(this) = cluster.upgrade() else {
        return;
    };
    let listener = match this.store.listener().await {
        Ok(listener) => listener,
        Err(_) => return,
    };
    let mut notifications = listener.notifications();
    for name in [
        &this.channels.turns,
        &this.channels.commands,
        &this.channels.answers,
        &this.channels.changes,
    ] {
        // A server down now: the listener listens once it is back.
        let _ = listener.listen(name).await;
    }
    drop(this);
    let mut poll = tokio::time::interval(Duration::from_secs(1));
    loop {
        let notification = tokio::select! {
            received = notifications.recv() => match received {
                Ok(notification) => Some(notification),
                Err(broadcast::error::RecvError::Lagged(_)) => None,
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = poll.tick() => None,
        };
        let Some(this) = cluster.upgrade() else {
            return;
        };
        if this.gone.load(Ordering::SeqCst) {
            return;
        }
        let Some(notification) = notification else {
            // A poll: commands whose notification was lost.
            let _ = this.take_commands().await;
            continue;
        };
        let payload = notification.payload.as_str();
        if notification.channel == this.channels.turns {
            if let Some((session_id, turn)) = payload.rsplit_once('\t') {
                if let Ok(turn) = turn.parse() {
                    let _ = this.turns.send(TurnKey {
                        session_id: session_id.to_owned(),
                        turn,
                    });
                }
            }
        } else if notification.channel == this.channels.commands {
            if payload.split('\t').next() == Some(this.id.as_str()) {
                let _ = this.take_commands().await;
            }
        } else if notification.channel == this.channels.answers {
            if let Ok(id) = payload.parse() {
                let _ = this.answers.send(id);
            }
        } else if notification.channel == this.channels.changes {
            if let Ok(change) = serde_json::from_str::<Value>(payload) {
                let version = this.change_version.fetch_add(1, Ordering::SeqCst) + 1;
                let _ = this.changes.send(Change {
                    session_id: change["sessionId"].as_str().unwrap_or_default().to_owned(),
                    deleted: change["deleted"].as_bool().unwrap_or(false),
                    version,
                    from: change["from"].as_str().unwrap_or_default().to_owned(),
                });
            }
        }
    }
}

/// Renews the leases held, every third of the ttl.
async fn renew(cluster: Weak<PostgresCluster>) {
    let every = match cluster.upgrade() {
        Some(this) => this.ttl / 3,
        None => return,
    };
    let mut connection: Option<tokio_postgres::Client> = None;
    loop {
        tokio::time::sleep(every).await;
        let Some(this) = cluster.upgrade() else {
            return;
        };
        if this.gone.load(Ordering::SeqCst) {
            return;
        }
        if this.paused.load(Ordering::SeqCst) {
            continue;
        }
        // A renewal that fails (the server away, the connection lost) is tried again next
        // time on a new connection; a late renewal still renews what nobody took meanwhile.
        // Bounded by the ttl: a server that stops answering must not stall the renewals.
        if connection.is_none() {
            connection = tokio::time::timeout(this.ttl, this.renewal_connection())
                .await
                .ok()
                .flatten();
        }
        if let Some(client) = &connection {
            let renewed = tokio::time::timeout(this.ttl, this.renew_all(client)).await;
            if !matches!(renewed, Ok(Ok(()))) {
                connection = None;
            }
        }
    }
}

impl PostgresCluster {
    /// A connection of the renewals' own, apart from the pool (busy with fenced writes under
    /// load); `None` when none can be opened now.
    async fn renewal_connection(&self) -> Option<tokio_postgres::Client> {
        let (config, connector) = super::tls::connector(&self.store.options().url, "url").ok()?;
        let (client, connection) = config.connect(connector).await.ok()?;
        tokio::spawn(connection);
        Some(client)
    }

    /// Renews every lease held in one statement; a lease is lost only when the database says
    /// so: its row is no longer this instance's or its epoch changed.
    async fn renew_all(&self, client: &tokio_postgres::Client) -> Result<()> {
        let held = self.held();
        if held.is_empty() {
            return Ok(());
        }
        let ids: Vec<&str> = held.iter().map(|f| f.session_id.as_str()).collect();
        let rows = client
            .query(&self.sql.renew_all, &[&self.id, &ids, &self.ttl_ms()])
            .await
            .map_err(|e| {
                super::connection::failed(&self.store.options().url, "renew leases", &e)
            })?;
        let renewed: HashMap<String, u64> = rows
            .iter()
            .map(|row| (row.get(0), row.get::<_, i64>(1) as u64))
            .collect();
        for fence in &held {
            if renewed.get(&fence.session_id) != Some(&fence.epoch) {
                self.lose(fence);
            }
        }
        Ok(())
    }
}

#[async_trait]
impl Cluster for PostgresCluster {
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
        let opened = self.opened().await?;
        let fail = |e: tokio_postgres::Error| {
            opened
                .connections
                .failed(&format!("take the lease of session {session_id}"), &e)
        };
        let mut client = opened.connections.get().await?;
        for _ in 0..3 {
            // The row locked `FOR UPDATE` first: a takeover waits for the fenced writes in
            // flight (`FOR KEY SHARE`), which a plain `UPDATE` of non-key columns would not.
            let tx = client.transaction().await.map_err(fail)?;
            tx.execute(&self.sql.lock_lease, &[&session_id])
                .await
                .map_err(fail)?;
            let claimed = tx
                .query_opt(&self.sql.claim, &[&session_id, &self.id, &self.ttl_ms()])
                .await
                .map_err(fail)?;
            tx.commit().await.map_err(fail)?;
            if let Some(row) = claimed {
                let epoch = row.get::<_, i64>(0) as u64;
                let fence = Fence {
                    session_id: session_id.to_owned(),
                    epoch,
                };
                self.held.hold(&fence);
                return Ok(Claim::Granted(fence));
            }
            let holder = client
                .query_opt(&self.sql.holder, &[&session_id])
                .await
                .map_err(fail)?;
            if let Some(row) = holder {
                return Ok(Claim::Held { owner: row.get(0) });
            }
            // Expired between the two statements: try again.
        }
        Err(SessionError::host(format!(
            "The lease of session {session_id} changed hands too often to be taken."
        )))
    }

    async fn renew(&self, fence: &Fence) -> Result<bool> {
        let opened = self.opened().await?;
        let client = opened.connections.get().await?;
        let renewed = client
            .execute(
                &self.sql.renew,
                &[
                    &fence.session_id,
                    &self.id,
                    &(fence.epoch as i64),
                    &self.ttl_ms(),
                ],
            )
            .await
            .map_err(|e| opened.connections.failed("renew a lease", &e))?
            == 1;
        if !renewed {
            self.lose(fence);
        }
        Ok(renewed)
    }

    async fn release(&self, fence: &Fence) -> Result<()> {
        self.held.forget(fence);
        let opened = self.opened().await?;
        let client = opened.connections.get().await?;
        client
            .execute(
                &self.sql.release,
                &[&fence.session_id, &self.id, &(fence.epoch as i64)],
            )
            .await
            .map_err(|e| opened.connections.failed("release a lease", &e))?;
        Ok(())
    }

    async fn owner(&self, session_id: &str) -> Result<Option<String>> {
        let opened = self.opened().await?;
        let client = opened.connections.get().await?;
        let row = client
            .query_opt(&self.sql.owner, &[&session_id])
            .await
            .map_err(|e| opened.connections.failed("read a lease", &e))?;
        Ok(row.map(|row| row.get(0)))
    }

    async fn take_expired(&self, limit: usize) -> Result<Vec<Fence>> {
        if self.gone.load(Ordering::SeqCst) || self.paused.load(Ordering::SeqCst) {
            return Ok(Vec::new());
        }
        let opened = self.opened().await?;
        let client = opened.connections.get().await?;
        let rows = client
            .query(
                &self.sql.take_expired,
                &[&self.id, &self.ttl_ms(), &(limit as i64)],
            )
            .await
            .map_err(|e| opened.connections.failed("take over expired leases", &e))?;
        let taken: Vec<Fence> = rows
            .iter()
            .map(|row| Fence {
                session_id: row.get(0),
                epoch: row.get::<_, i64>(1) as u64,
            })
            .collect();
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
        if record.summary.id != fence.session_id {
            return Err(Self::lease_lost(fence));
        }
        let action = format!("save session {}", record.summary.id);
        self.fenced(fence, &action, async |tx, opened| {
            self.store.save_in(tx, opened, record, resume_state).await
        })
        .await
    }

    async fn open_turn(&self, fence: &Fence) -> Result<TurnKey> {
        let action = format!("open a turn of session {}", fence.session_id);
        let key = self
            .fenced(fence, &action, async |tx, opened| {
                let fail =
                    |error: tokio_postgres::Error| opened.connections.failed(&action, &error);
                let closed = tx
                    .query(&self.sql.close_open_turns, &[&fence.session_id])
                    .await
                    .map_err(fail)?;
                for row in closed {
                    let turn: String = row.get(0);
                    let payload = format!("{}\t{turn}", fence.session_id);
                    tx.execute(
                        "SELECT pg_notify($1, $2)",
                        &[&self.channels.turns, &payload],
                    )
                    .await
                    .map_err(fail)?;
                }
                let next: i64 = tx
                    .query_one(&self.sql.next_turn, &[&fence.session_id])
                    .await
                    .map_err(fail)?
                    .get(0);
                tx.execute(
                    &self.sql.insert_turn,
                    &[
                        &fence.session_id,
                        &next.to_string(),
                        &self.id,
                        &(fence.epoch as i64),
                    ],
                )
                .await
                .map_err(fail)?;
                Ok(next as u64)
            })
            .await?;
        Ok(TurnKey {
            session_id: fence.session_id.clone(),
            turn: key,
        })
    }

    async fn append(&self, fence: &Fence, turn: &TurnKey, chunks: Vec<String>) -> Result<u64> {
        self.write_log(fence, turn, chunks, false).await
    }

    async fn end_turn(&self, fence: &Fence, turn: &TurnKey, chunks: Vec<String>) -> Result<u64> {
        self.write_log(fence, turn, chunks, true).await
    }

    async fn read_turn(&self, turn: &TurnKey, after: u64) -> Result<LogRead> {
        let opened = self.opened().await?;
        let client = opened.connections.get().await?;
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let rows = client
            .query(
                &self.sql.read_turn,
                &[&turn.session_id, &turn.turn.to_string(), &after],
            )
            .await
            .map_err(|e| opened.connections.failed("read a turn's log", &e))?;
        if rows.is_empty() {
            return Err(SessionError::NotFound {
                session_id: turn.session_id.clone(),
            });
        }
        let mut read = LogRead::default();
        for row in rows {
            let status: String = row.get(0);
            read.ended = status != "open";
            let seq: Option<i64> = row.get(1);
            let chunk: Option<String> = row.get(2);
            if let (Some(seq), Some(chunk)) = (seq, chunk) {
                read.chunks.push((seq as u64, chunk));
            }
        }
        Ok(read)
    }

    async fn latest_turn(&self, session_id: &str) -> Result<Option<TurnKey>> {
        let opened = self.opened().await?;
        let client = opened.connections.get().await?;
        let row = client
            .query_one(&self.sql.latest_turn, &[&session_id])
            .await
            .map_err(|e| opened.connections.failed("read a turn's log", &e))?;
        let turn: Option<i64> = row.get(0);
        Ok(turn.map(|turn| TurnKey {
            session_id: session_id.to_owned(),
            turn: turn as u64,
        }))
    }

    fn watch_turns(&self) -> broadcast::Receiver<TurnKey> {
        self.turns.subscribe()
    }

    async fn forward(
        &self,
        session_id: &str,
        command: Value,
        wait: Duration,
    ) -> Result<Option<Value>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let Some(owner) = self.owner(session_id).await? else {
                return Ok(None);
            };
            // Registered before the command is written, so that its answer's wake-up is seen.
            let mut answers = self.answers.subscribe();
            let opened = self.opened().await?;
            let id: i64 = {
                let client = opened.connections.get().await?;
                let payload = json!({"to": owner, "command": command}).to_string();
                let id: i64 = client
                    .query_one(
                        &self.sql.insert_command,
                        &[&session_id, &"command", &payload, &self.id],
                    )
                    .await
                    .map_err(|e| opened.connections.failed("hand a command over", &e))?
                    .get(0);
                client
                    .execute(
                        "SELECT pg_notify($1, $2)",
                        &[&self.channels.commands, &format!("{owner}\t{id}")],
                    )
                    .await
                    .map_err(|e| opened.connections.failed("hand a command over", &e))?;
                id
            };
            let bound = deadline.min(tokio::time::Instant::now() + self.ttl);
            loop {
                if let Some(answer) = self.take_answer(id as u64).await? {
                    return match answer.get("error") {
                        Some(error) => Err(error_from_wire(error)),
                        None => Ok(Some(answer.get("ok").cloned().unwrap_or(Value::Null))),
                    };
                }
                if tokio::time::Instant::now() >= bound {
                    break;
                }
                let nap = tokio::time::sleep_until(bound.min(tokio::time::Instant::now() + POLL));
                tokio::pin!(nap);
                tokio::select! {
                    () = &mut nap => {}
                    _ = answers.recv() => {}
                }
            }
            // No answer within a ttl: the command is withdrawn (if not taken yet), and the
            // owner looked at again.
            if let Ok(client) = opened.connections.get().await {
                let _ = client
                    .execute(
                        &format!(
                            "DELETE FROM {}.commands WHERE id = $1 AND kind = 'command'",
                            self.store.quoted_schema()
                        ),
                        &[&id],
                    )
                    .await;
            }
            if tokio::time::Instant::now() >= deadline {
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
        let payload = match answer {
            Ok(value) => json!({ "ok": value }),
            Err(error) => json!({ "error": error_to_wire(&error) }),
        }
        .to_string();
        let opened = self.opened().await?;
        let client = opened.connections.get().await?;
        client
            .query_one(
                &self.sql.insert_command,
                &[&command_id.to_string(), &"answer", &payload, &self.id],
            )
            .await
            .map_err(|e| opened.connections.failed("answer a command", &e))?;
        client
            .execute(
                "SELECT pg_notify($1, $2)",
                &[&self.channels.answers, &command_id.to_string()],
            )
            .await
            .map_err(|e| opened.connections.failed("answer a command", &e))?;
        Ok(())
    }

    async fn changed(&self, session_id: &str, deleted: bool) -> Result<()> {
        let payload = json!({"sessionId": session_id, "deleted": deleted, "from": self.id});
        let opened = self.opened().await?;
        let client = opened.connections.get().await?;
        client
            .execute(
                "SELECT pg_notify($1, $2)",
                &[&self.channels.changes, &payload.to_string()],
            )
            .await
            .map_err(|e| opened.connections.failed("tell a change", &e))?;
        Ok(())
    }

    fn changes(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    async fn leave(&self) -> Result<()> {
        let mut result = Ok(());
        for fence in self.held() {
            if let Err(error) = self.release(&fence).await {
                result = Err(error);
            }
        }
        self.gone.store(true, Ordering::SeqCst);
        result
    }
}

/// A PostgreSQL store that offers its cluster: the manager on it runs in many-instance mode.
pub struct ClusteredPostgresStore {
    store: Arc<PostgresStore>,
    cluster: Arc<PostgresCluster>,
}

impl ClusteredPostgresStore {
    /// `store`, offering its cluster (started now: call within a tokio runtime).
    pub fn new(store: Arc<PostgresStore>) -> ClusteredPostgresStore {
        ClusteredPostgresStore {
            cluster: PostgresCluster::new(store.clone()),
            store,
        }
    }

    /// The cluster, for tests that stop it.
    pub fn postgres_cluster(&self) -> &Arc<PostgresCluster> {
        &self.cluster
    }
}

#[async_trait]
impl SessionStore for ClusteredPostgresStore {
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

    async fn release(&self) -> Result<()> {
        self.store.release().await
    }

    fn take_unreadable(&self) -> Vec<(String, SessionError)> {
        self.store.take_unreadable()
    }

    fn is_unreadable(&self, id: &str) -> bool {
        self.store.is_unreadable(id)
    }

    fn cluster(&self) -> Option<Arc<dyn Cluster>> {
        Some(self.cluster.clone())
    }
}

impl std::fmt::Debug for PostgresCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresCluster")
            .field("instance", &self.id)
            .finish_non_exhaustive()
    }
}
