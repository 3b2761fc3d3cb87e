//! The manager against faults, from Rust alone: a store that refuses writes (a full disk), an
//! agent whose turns never end or never start, rows a store cannot read, sessions a crash left
//! live. Each test waits for conditions with generous deadlines, never for a moment.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::*;
use crate::engine::agent::{
    HarnessSession, OpenRequest, TurnControl, TurnEnd, TurnFeed, TurnInput, TurnReport, TurnStart,
};
use crate::engine::lease::{Lease, SandboxRef};
use crate::engine::store::memory::MemoryStore;
use crate::engine::ui::UiChunk;

/// An agent whose turns answer at once, except: `deaf` (a stream that ignores its abort),
/// `never` (`agent.stream()` never resolves).
#[derive(Default)]
struct Agent {
    resumed: AtomicUsize,
}

struct Harness;

struct Deaf;

impl TurnControl for Deaf {
    fn abort(&self, _reason: &str) {}
}

#[async_trait]
impl crate::engine::agent::Agent for Agent {
    async fn open(&self, request: OpenRequest) -> Result<Box<dyn HarnessSession>> {
        if request.resume_from.is_some() {
            self.resumed.fetch_add(1, Ordering::SeqCst);
        }
        Ok(Box::new(Harness))
    }
}

#[async_trait]
impl HarnessSession for Harness {
    async fn start_turn(&self, turn: TurnStart, feed: TurnFeed) -> Result<Box<dyn TurnControl>> {
        let prompt = match turn.input {
            TurnInput::Prompt(prompt) => prompt,
            TurnInput::Continue { .. } => String::new(),
        };
        if prompt == "never" {
            std::future::pending::<()>().await;
        }
        let chunks = |value: Value| {
            TurnReport::Chunks(
                value
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| UiChunk::from_value(c.clone()).expect("a chunk"))
                    .collect(),
            )
        };
        feed.report(chunks(json!([
            {"type": "start", "messageId": turn.message_id},
            {"type": "start-step"},
            {"type": "text-start", "id": "t"},
            {"type": "text-delta", "id": "t", "delta": "half"},
        ])));
        if prompt == "deaf" {
            // Never ends, whatever it is told: the feed is kept alive for ever.
            tokio::spawn(async move {
                std::future::pending::<()>().await;
                drop(feed);
            });
            return Ok(Box::new(Deaf));
        }
        feed.report(chunks(json!([
            {"type": "text-end", "id": "t"},
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "stop"},
        ])));
        feed.report(TurnReport::End(TurnEnd::default()));
        Ok(Box::new(Deaf))
    }

    async fn has_unfinished_turn(&self) -> Result<bool> {
        Ok(false)
    }

    async fn stop(&self) -> Result<Value> {
        Ok(json!({"type": "resume-session", "data": {}}))
    }

    async fn destroy(&self) -> Result<()> {
        Ok(())
    }
}

/// Sandboxes that log what they are asked.
#[derive(Default)]
struct Sandboxes {
    log: Mutex<Vec<String>>,
}

struct NoLease;

#[async_trait]
impl Lease for NoLease {
    fn sandbox(&self) -> SandboxRef {
        SandboxRef::NONE
    }
    async fn suspend(&self) -> Result<()> {
        Ok(())
    }
    async fn close(&self) -> Result<()> {
        Ok(())
    }
}

#[async_trait]
impl SessionSandboxes for Arc<Sandboxes> {
    fn capacity(&self) -> Option<u32> {
        None
    }
    async fn acquire(&self, session_id: &str, _resume: bool) -> Result<Box<dyn Lease>> {
        self.log
            .lock()
            .unwrap()
            .push(format!("acquire {session_id}"));
        Ok(Box::new(NoLease))
    }
    async fn discard(&self, session_id: &str) -> Result<()> {
        self.log
            .lock()
            .unwrap()
            .push(format!("discard {session_id}"));
        Ok(())
    }
    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }
}

/// A memory store that refuses every write while `full` (a full disk).
#[derive(Default)]
struct Disk {
    inner: MemoryStore,
    full: AtomicBool,
    /// The metadata of every write the disk took, in order.
    written: Mutex<Vec<Value>>,
}

#[async_trait]
impl SessionStore for Disk {
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()> {
        if self.full.load(Ordering::SeqCst) {
            return Err(SessionError::host("database or disk is full"));
        }
        self.written
            .lock()
            .unwrap()
            .push(record.summary.metadata.clone());
        self.inner.save(record, resume_state).await
    }
    async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        self.inner.get(id).await
    }
    async fn list(&self) -> Result<Vec<SessionSummary>> {
        self.inner.list().await
    }
    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        self.inner.get_resume_state(id).await
    }
    async fn delete(&self, id: &str) -> Result<()> {
        self.inner.delete(id).await
    }
}

/// What the manager tells.
#[derive(Default)]
struct Told {
    errors: Mutex<Vec<(String, String)>>,
    finished: Mutex<Vec<(u64, SessionStatus)>>,
}

#[async_trait]
impl ManagerHooks for Told {
    fn on_event(&self, _event: SessionEvent) {}
    fn on_error(&self, error: &SessionError, action: &str, _id: Option<&str>) {
        self.errors
            .lock()
            .unwrap()
            .push((action.to_owned(), error.to_string()));
    }
    async fn client_message(&self, _: &SessionError) -> String {
        "An error occurred.".into()
    }
}

impl TurnClients for Told {
    fn deliver(&self, _turn_id: u64, _chunks: Vec<crate::engine::ui::UiChunk>) {}
    fn finish(&self, turn_id: u64, session: &SessionSummary) {
        self.finished
            .lock()
            .unwrap()
            .push((turn_id, session.status));
    }
}

struct Fixture {
    manager: SessionManager,
    agent: Arc<Agent>,
    sandboxes: Arc<Sandboxes>,
    told: Arc<Told>,
}

fn fixture(store: Arc<dyn SessionStore>, options: ManagerOptions) -> Fixture {
    let agent = Arc::new(Agent::default());
    let sandboxes = Arc::new(Sandboxes::default());
    let told = Arc::new(Told::default());
    let seams = Seams {
        agent: agent.clone(),
        sandboxes: Arc::new(sandboxes.clone()),
        store,
        hooks: told.clone(),
        clients: told.clone(),
    };
    Fixture {
        manager: SessionManager::new(seams, options),
        agent,
        sandboxes,
        told,
    }
}

/// A short wind-down, for the tests of what happens past it.
fn quick() -> ManagerOptions {
    ManagerOptions {
        wind_down: Duration::from_millis(500),
        ..ManagerOptions::default()
    }
}

/// The default wind-down (10 s), for the tests where nothing should reach it, even on a loaded
/// machine.
fn patient() -> ManagerOptions {
    ManagerOptions::default()
}

/// Waits for `check` to hold, 30 s at most.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn status(manager: &SessionManager, id: &str) -> Option<SessionStatus> {
    manager.get(id).await.unwrap().map(|r| r.summary.status)
}

async fn ready(manager: &SessionManager, id: &str) {
    manager.create(id.to_owned(), json!({})).await.unwrap();
    until("ready", || async {
        status(manager, id).await == Some(SessionStatus::Idle)
    })
    .await;
}

fn send(turn_id: u64, text: &str) -> SendRequest {
    SendRequest {
        turn_id,
        message: json!(text),
        prompt: None,
        reply_id: format!("r{turn_id}"),
        message_id: format!("m{turn_id}"),
        submission: None,
        options: Default::default(),
    }
}

fn errors(told: &Told, action: &str) -> Vec<String> {
    told.errors
        .lock()
        .unwrap()
        .iter()
        .filter(|(a, _)| a == action)
        .map(|(_, e)| e.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspension_whose_write_fails_keeps_its_resume_state_and_resumes() {
    let disk = Arc::new(Disk::default());
    let f = fixture(disk.clone(), patient());
    ready(&f.manager, "s").await;
    disk.full.store(true, Ordering::SeqCst);
    let suspended = f.manager.suspend("s").await.expect("suspend returns");
    assert_eq!(suspended.status, SessionStatus::Suspended);
    assert!(
        !errors(&f.told, "write").is_empty(),
        "the failed write is reported"
    );
    assert_eq!(
        status(&f.manager, "s").await,
        Some(SessionStatus::Suspended)
    );
    // Still no room: the session resumes from the state kept in memory, and answers.
    f.manager.send("s", send(1, "hi")).await.expect("resumed");
    until("the turn ends", || async {
        status(&f.manager, "s").await == Some(SessionStatus::Idle)
    })
    .await;
    assert_eq!(f.agent.resumed.load(Ordering::SeqCst), 1);
    // Room again: the latest state reaches the store with no further call.
    disk.full.store(false, Ordering::SeqCst);
    until("written", || async {
        let record = disk.inner.get("s").await.unwrap().unwrap();
        record.summary.status == SessionStatus::Idle && record.messages.len() == 2
    })
    .await;
    f.manager.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_refused_on_a_full_disk_reach_the_store_once_there_is_room() {
    let disk = Arc::new(Disk::default());
    let f = fixture(disk.clone(), patient());
    disk.full.store(true, Ordering::SeqCst);
    f.manager
        .create("a".into(), json!("a"))
        .await
        .expect("create carries on");
    until("ready", || async {
        status(&f.manager, "a").await == Some(SessionStatus::Idle)
    })
    .await;
    f.manager.update("a", json!("a, renamed")).await.unwrap();
    assert!(disk.inner.get("a").await.unwrap().is_none());
    let listed = f.manager.list().await.unwrap();
    assert_eq!(listed.len(), 1, "listed from memory");
    assert_eq!(listed[0].metadata, json!("a, renamed"));
    disk.full.store(false, Ordering::SeqCst);
    until("written", || async {
        disk.inner
            .get("a")
            .await
            .unwrap()
            .is_some_and(|r| r.summary.metadata == json!("a, renamed"))
    })
    .await;
    f.manager.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_reports_what_it_could_not_write_and_returns() {
    let disk = Arc::new(Disk::default());
    let f = fixture(disk.clone(), quick());
    ready(&f.manager, "a").await;
    disk.full.store(true, Ordering::SeqCst);
    f.manager.shutdown().await.unwrap();
    let left = errors(&f.told, "write");
    assert!(
        left.iter()
            .any(|e| e.contains("could not be written before the shutdown")),
        "{left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_lets_go_of_a_stream_that_ignores_its_abort() {
    let f = fixture(Arc::new(MemoryStore::new()), quick());
    ready(&f.manager, "d").await;
    f.manager.send("d", send(7, "deaf")).await.unwrap();
    f.manager.interrupt("d").await.expect("interrupt returns");
    let record = f.manager.get("d").await.unwrap().unwrap();
    assert_eq!(record.summary.status, SessionStatus::Interrupted);
    let error = record.summary.error.unwrap_or_default();
    assert!(error.contains("did not wind down"), "{error}");
    assert!(f
        .told
        .finished
        .lock()
        .unwrap()
        .contains(&(7, SessionStatus::Interrupted)));
    assert!(!errors(&f.told, "turn").is_empty(), "reported");
    // Closing it frees what its sandbox kept.
    let closed = f.manager.close("d").await.unwrap();
    assert_eq!(closed.status, SessionStatus::Closed);
    assert!(f
        .sandboxes
        .log
        .lock()
        .unwrap()
        .contains(&"discard d".into()));
    f.manager.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_and_shutdown_return_against_an_agent_that_never_starts_its_turn() {
    let f = fixture(Arc::new(MemoryStore::new()), quick());
    ready(&f.manager, "c").await;
    ready(&f.manager, "s").await;
    // `agent.stream()` never resolves: send() waits for it, until the turn is cut and let go.
    let manager = f.manager.clone();
    let stuck = tokio::spawn(async move { manager.send("c", send(1, "never")).await });
    until("busy", || async {
        status(&f.manager, "c").await == Some(SessionStatus::Busy)
    })
    .await;
    f.manager.send("s", send(2, "deaf")).await.unwrap();
    let closed = f.manager.close("c").await.expect("close returns");
    assert_eq!(closed.status, SessionStatus::Closed);
    let refused = stuck
        .await
        .unwrap()
        .expect_err("the send let go of is refused");
    assert!(
        refused.to_string().contains("did not wind down"),
        "{refused}"
    );
    f.manager.shutdown().await.expect("shutdown returns");
    let record = f.manager.inner.journal.get("s").await.unwrap().unwrap();
    assert_eq!(record.summary.status, SessionStatus::Interrupted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_timeout_lets_go_of_a_turn_that_never_ends() {
    let options = ManagerOptions {
        turn_timeout: Some(Duration::from_millis(50)),
        ..quick()
    };
    let f = fixture(Arc::new(MemoryStore::new()), options);
    ready(&f.manager, "t").await;
    let refused = f.manager.send("t", send(1, "never")).await;
    assert!(refused.is_err(), "the send let go of is refused");
    until("let go", || async {
        status(&f.manager, "t").await == Some(SessionStatus::Interrupted)
    })
    .await;
    let error = f.manager.get("t").await.unwrap().unwrap().summary.error;
    assert!(error.unwrap_or_default().starts_with(TURN_TOO_LONG));
    f.manager.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_found_live_at_start_are_interrupted_and_their_sandboxes_discarded() {
    let store = Arc::new(MemoryStore::new());
    let crashed = fixture(store.clone(), patient());
    ready(&crashed.manager, "left").await;
    // The first manager is abandoned, as a crash would leave it.
    let next = fixture(store.clone(), patient());
    assert_eq!(
        status(&next.manager, "left").await,
        Some(SessionStatus::Interrupted)
    );
    assert!(next
        .sandboxes
        .log
        .lock()
        .unwrap()
        .contains(&"discard left".into()));
    next.manager.delete("left").await.unwrap();
    assert!(next.manager.get("left").await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_row_is_set_aside_and_the_rest_works() {
    use crate::engine::store::sqlite::{SqliteStore, SqliteStoreOptions};
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("sessions.db");
    {
        let store = Arc::new(
            SqliteStore::open(&path, SqliteStoreOptions::default())
                .await
                .unwrap(),
        );
        let f = fixture(store.clone(), patient());
        ready(&f.manager, "good").await;
        ready(&f.manager, "bad").await;
        f.manager.shutdown().await.unwrap();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE sessions SET summary = json_set(summary, '$.status', 'from-the-future') \
         WHERE id = 'bad'",
        [],
    )
    .unwrap();
    drop(conn);
    let store = Arc::new(
        SqliteStore::open(&path, SqliteStoreOptions::default())
            .await
            .unwrap(),
    );
    let f = fixture(store, patient());
    let listed = f.manager.list().await.expect("list works");
    assert_eq!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["good"]
    );
    assert!(f.manager.list_json().await.unwrap().contains("good"));
    assert!(!f.manager.list_json().await.unwrap().contains("bad"));
    let read = errors(&f.told, "read");
    assert_eq!(read.len(), 1, "reported once: {read:?}");
    assert!(read[0].contains("bad"));
    assert!(
        f.manager.get("bad").await.is_err(),
        "get of it is a clear error"
    );
    f.manager
        .send("good", send(1, "hi"))
        .await
        .expect("the rest works");
    f.manager.delete("bad").await.expect("delete removes it");
    assert!(f.manager.get("bad").await.unwrap().is_none());
    f.manager.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_never_writes_over_a_newer_write() {
    let disk = Arc::new(Disk::default());
    let f = fixture(disk.clone(), patient());
    ready(&f.manager, "o").await;
    disk.full.store(true, Ordering::SeqCst);
    f.manager.update("o", json!("older")).await.unwrap();
    disk.full.store(false, Ordering::SeqCst);
    f.manager.update("o", json!("newer")).await.unwrap();
    f.manager.shutdown().await.unwrap();
    let record = disk.inner.get("o").await.unwrap().unwrap();
    assert_eq!(record.summary.metadata, json!("newer"));
    let written = disk.written.lock().unwrap().clone();
    let newer = written.iter().position(|m| *m == json!("newer")).unwrap();
    assert!(
        !written[newer..].contains(&json!("older")),
        "an older write landed after a newer one: {written:?}"
    );
}
