//! The manager driven from Rust alone, with a scripted agent: what `cargo test` proves of the
//! engine without Node (the JavaScript suites prove the rest through the addon).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::*;
use crate::engine::agent::{
    EncodedChunks, HarnessSession, OpenRequest, TurnControl, TurnEnd, TurnFeed, TurnInput,
    TurnReport, TurnStart,
};
use crate::engine::lease::{Lease, SandboxRef};
use crate::engine::session::answers;
use crate::engine::store::memory::MemoryStore;
use crate::engine::ui::UiChunk;

/// An agent whose turns answer `You said: <prompt>`; a prompt `hang` waits for an abort; a prompt
/// `pause` asks an approval and leaves the harness session with an unfinished turn; a prompt
/// `refuse` is refused before any stream (as `agent.stream()` rejecting).
#[derive(Default)]
struct ScriptedAgent {
    opened: AtomicUsize,
    resumed: AtomicUsize,
    /// What each open was handed to resume from.
    resumed_from: Mutex<Vec<Value>>,
    /// Every prompt its sessions were told.
    prompts: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Agent for ScriptedAgent {
    async fn open(&self, request: OpenRequest) -> Result<Box<dyn HarnessSession>> {
        self.opened.fetch_add(1, Ordering::SeqCst);
        if let Some(state) = &request.resume_from {
            self.resumed.fetch_add(1, Ordering::SeqCst);
            self.resumed_from.lock().unwrap().push(state.clone());
        }
        Ok(Box::new(ScriptedSession {
            id: request.session_id,
            unfinished: Arc::default(),
            prompts: self.prompts.clone(),
        }))
    }
}

struct ScriptedSession {
    id: String,
    unfinished: Arc<std::sync::atomic::AtomicBool>,
    prompts: Arc<Mutex<Vec<String>>>,
}

struct Abort(tokio::sync::watch::Sender<Option<String>>);

impl TurnControl for Abort {
    fn abort(&self, reason: &str) {
        let _ = self.0.send(Some(reason.to_owned()));
    }
}

/// Chunks reported as JSON text, decoded by the engine as the binding's are.
fn encoded(text: String) -> TurnReport {
    TurnReport::Encoded(EncodedChunks::new(move || {
        serde_json::from_str(&text).map_err(|e| e.to_string())
    }))
}

fn chunk(value: Value) -> UiChunk {
    UiChunk::from_value(value).expect("a chunk")
}

#[async_trait]
impl HarnessSession for ScriptedSession {
    async fn start_turn(&self, turn: TurnStart, feed: TurnFeed) -> Result<Box<dyn TurnControl>> {
        let prompt = match turn.input {
            TurnInput::Prompt(prompt) => prompt,
            TurnInput::Continue { .. } => "continued".into(),
        };
        self.prompts.lock().unwrap().push(prompt.clone());
        if prompt == "refuse" {
            return Err(SessionError::host("the agent refused the turn"));
        }
        self.unfinished.store(prompt == "pause", Ordering::SeqCst);
        let (abort, mut aborted) = tokio::sync::watch::channel(None);
        tokio::spawn(async move {
            feed.report(TurnReport::Chunks(vec![
                chunk(json!({"type": "start", "messageId": turn.message_id})),
                chunk(json!({"type": "start-step"})),
            ]));
            if prompt == "pause" {
                feed.report(encoded(
                    json!([
                        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "bash", "input": {"command": "ls"}},
                        {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1"},
                        {"type": "finish-step"},
                        {"type": "finish", "finishReason": "tool-calls"},
                    ])
                    .to_string(),
                ));
                feed.report(TurnReport::End(TurnEnd::default()));
                return;
            }
            if prompt == "hang" {
                let _ = aborted.changed().await;
                let reason = aborted.borrow().clone().unwrap_or_default();
                feed.report(TurnReport::Chunks(vec![chunk(
                    json!({"type": "abort", "reason": reason}),
                )]));
                feed.report(TurnReport::End(TurnEnd::default()));
                return;
            }
            feed.report(encoded(
                json!([
                    {"type": "text-start", "id": "t"},
                    {"type": "text-delta", "id": "t", "delta": format!("You said: {prompt}")},
                    {"type": "text-end", "id": "t"},
                    {"type": "finish-step"},
                    {"type": "finish", "finishReason": "stop"},
                ])
                .to_string(),
            ));
            feed.report(TurnReport::End(TurnEnd {
                usage: Some(json!({"outputTokens": 2})),
                failure: None,
                caller_aborted: false,
            }));
        });
        Ok(Box::new(Abort(abort)))
    }

    async fn has_unfinished_turn(&self) -> Result<bool> {
        Ok(self.unfinished.load(Ordering::SeqCst))
    }

    async fn stop(&self) -> Result<Value> {
        let mut state = json!({"type": "resume-session", "data": {"id": self.id}});
        if self.unfinished.load(Ordering::SeqCst) {
            state["data"]["bridge"] = json!({"token": "t"});
            state["continueFrom"] = json!({"type": "continue-turn"});
        }
        Ok(state)
    }

    async fn destroy(&self) -> Result<()> {
        Ok(())
    }
}

/// Sandboxes that count what they give and take.
struct CountingSandboxes {
    capacity: Option<u32>,
    log: Mutex<Vec<String>>,
}

struct CountingLease {
    id: String,
    sandboxes: Arc<CountingSandboxes>,
}

#[async_trait]
impl SessionSandboxes for Arc<CountingSandboxes> {
    fn capacity(&self) -> Option<u32> {
        self.capacity
    }
    async fn acquire(&self, session_id: &str, resume: bool) -> Result<Box<dyn Lease>> {
        self.log
            .lock()
            .unwrap()
            .push(format!("acquire {session_id} {resume}"));
        Ok(Box::new(CountingLease {
            id: session_id.to_owned(),
            sandboxes: self.clone(),
        }))
    }
    async fn discard(&self, session_id: &str) -> Result<()> {
        self.log
            .lock()
            .unwrap()
            .push(format!("discard {session_id}"));
        Ok(())
    }
    async fn shutdown(&self) -> Result<()> {
        self.log.lock().unwrap().push("shutdown".into());
        Ok(())
    }
}

#[async_trait]
impl Lease for CountingLease {
    fn sandbox(&self) -> SandboxRef {
        SandboxRef::NONE
    }
    async fn suspend(&self) -> Result<()> {
        self.sandboxes
            .log
            .lock()
            .unwrap()
            .push(format!("suspend {}", self.id));
        Ok(())
    }
    async fn close(&self) -> Result<()> {
        self.sandboxes
            .log
            .lock()
            .unwrap()
            .push(format!("close {}", self.id));
        Ok(())
    }
}

/// Hooks and clients that record what they are told.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
    errors: Mutex<Vec<String>>,
    delivered: Mutex<HashMap<u64, Vec<String>>>,
    finished: Mutex<HashMap<u64, SessionSummary>>,
}

#[async_trait]
impl ManagerHooks for Recorder {
    fn on_event(&self, event: SessionEvent) {
        let line = match event {
            SessionEvent::Updated(s) => format!("{} {}", s.id, s.status),
            SessionEvent::Deleted(id) => format!("{id} deleted"),
        };
        self.events.lock().unwrap().push(line);
    }
    fn on_error(&self, error: &SessionError, action: &str, _: Option<&str>) {
        self.errors
            .lock()
            .unwrap()
            .push(format!("{action}: {error}"));
    }
    async fn client_message(&self, _: &SessionError) -> String {
        "An error occurred.".into()
    }
}

impl TurnClients for Recorder {
    fn deliver(&self, turn_id: u64, chunks: Vec<UiChunk>) {
        let mut delivered = self.delivered.lock().unwrap();
        let list = delivered.entry(turn_id).or_default();
        list.extend(chunks.iter().map(|c| c.type_name().to_owned()));
    }
    fn finish(&self, turn_id: u64, session: &SessionSummary) {
        self.finished
            .lock()
            .unwrap()
            .insert(turn_id, session.clone());
    }
}

struct World {
    manager: SessionManager,
    agent: Arc<ScriptedAgent>,
    sandboxes: Arc<CountingSandboxes>,
    recorder: Arc<Recorder>,
    store: Arc<MemoryStore>,
}

fn world(capacity: Option<u32>, options: ManagerOptions, store: Option<Arc<MemoryStore>>) -> World {
    let agent = Arc::new(ScriptedAgent::default());
    let sandboxes = Arc::new(CountingSandboxes {
        capacity,
        log: Mutex::default(),
    });
    let recorder = Arc::new(Recorder::default());
    let store = store.unwrap_or_default();
    let seams = Seams {
        agent: agent.clone(),
        sandboxes: Arc::new(sandboxes.clone()),
        store: store.clone(),
        hooks: recorder.clone(),
        clients: recorder.clone(),
    };
    World {
        manager: SessionManager::new(seams, options),
        agent,
        sandboxes,
        recorder,
        store,
    }
}

async fn status(manager: &SessionManager, id: &str) -> Option<SessionStatus> {
    manager.get(id).await.unwrap().map(|r| r.summary.status)
}

async fn until_status(manager: &SessionManager, id: &str, want: SessionStatus) {
    for _ in 0..500 {
        if status(manager, id).await == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{id} never became {want}");
}

fn send(turn_id: u64, text: &str) -> SendRequest {
    SendRequest {
        turn_id,
        message: json!(text),
        prompt: None,
        reply_id: format!("reply-{turn_id}"),
        message_id: format!("user-{turn_id}"),
        options: Default::default(),
        submission: None,
    }
}

async fn wait_turn(world: &World, turn_id: u64) -> SessionSummary {
    for _ in 0..500 {
        if let Some(s) = world.recorder.finished.lock().unwrap().get(&turn_id) {
            return s.clone();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("turn {turn_id} never finished");
}

#[tokio::test]
async fn a_refused_turn_fails_its_caller_and_sends_nothing_to_a_client() {
    let w = world(None, ManagerOptions::default(), None);
    w.manager.create("r".into(), json!({})).await.unwrap();
    until_status(&w.manager, "r", SessionStatus::Idle).await;
    let refused = w.manager.send("r", send(1, "refuse")).await.unwrap_err();
    assert_eq!(refused, SessionError::host("the agent refused the turn"));
    let record = w.manager.get("r").await.unwrap().unwrap();
    assert_eq!(record.summary.status, SessionStatus::Idle);
    assert_eq!(
        record.summary.error.as_deref(),
        Some("the agent refused the turn")
    );
    assert_eq!(record.summary.turns, 0, "a refused turn does not count");
    // The caller was told; the turn's client stream is the caller's to drop.
    assert!(!w.recorder.delivered.lock().unwrap().contains_key(&1));
    assert!(!w.recorder.finished.lock().unwrap().contains_key(&1));
    // The next turn goes as any other.
    w.manager.send("r", send(2, "hello")).await.unwrap();
    assert_eq!(wait_turn(&w, 2).await.status, SessionStatus::Idle);
    w.manager.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_session_opens_takes_a_turn_and_keeps_the_conversation() {
    let w = world(None, ManagerOptions::default(), None);
    let created = w.manager.create("a".into(), json!({"t": 1})).await.unwrap();
    assert_eq!(created.status, SessionStatus::Preparing);
    assert_eq!(created.turns, 0);
    assert_eq!(
        serde_json::to_value(&created.usage).unwrap(),
        json!({"inputTokens": 0, "outputTokens": 0, "totalTokens": 0})
    );
    let started = w.manager.send("a", send(1, "hello")).await.unwrap();
    assert_eq!(started.session.status, SessionStatus::Busy);
    assert_eq!(started.message_id, "reply-1");
    let done = wait_turn(&w, 1).await;
    assert_eq!(done.status, SessionStatus::Idle);
    assert_eq!(
        serde_json::to_value(&done.usage).unwrap(),
        json!({"inputTokens": 0, "outputTokens": 2, "totalTokens": 0})
    );
    assert_eq!(done.turns, 1);
    assert_eq!(
        w.recorder.delivered.lock().unwrap()[&1],
        vec!["finish"],
        "the engine sent only the held finish"
    );
    let record = w.manager.get("a").await.unwrap().unwrap();
    assert_eq!(record.messages.len(), 2);
    let reply = record.messages[1].to_value();
    assert_eq!(reply["id"], "reply-1");
    assert_eq!(reply["parts"][1]["text"], "You said: hello");
    let events = w.recorder.events.lock().unwrap().clone();
    assert_eq!(events, ["a preparing", "a idle", "a busy", "a idle"]);
}

#[tokio::test]
async fn one_turn_at_a_time() {
    let w = world(None, ManagerOptions::default(), None);
    w.manager.create("b".into(), json!(null)).await.unwrap();
    w.manager.send("b", send(1, "hang")).await.unwrap();
    match w.manager.send("b", send(2, "again")).await {
        Err(SessionError::Conflict {
            status, message, ..
        }) => {
            assert_eq!(status, SessionStatus::Busy);
            assert_eq!(message, "The session is busy.");
        }
        other => panic!("{other:?}"),
    }
    w.manager.interrupt("b").await.unwrap();
    let done = wait_turn(&w, 1).await;
    assert_eq!(done.error.as_deref(), Some(TURN_INTERRUPTED));
}

#[tokio::test]
async fn suspended_then_resumed_from_the_kept_state() {
    let w = world(None, ManagerOptions::default(), None);
    w.manager.create("s".into(), json!(null)).await.unwrap();
    until_status(&w.manager, "s", SessionStatus::Idle).await;
    let suspended = w.manager.suspend("s").await.unwrap();
    assert_eq!(suspended.status, SessionStatus::Suspended);
    assert!(w.store.get_resume_state("s").await.unwrap().is_some());
    assert_eq!(
        w.manager.sessions_in_memory(),
        0,
        "a suspended session is not held in memory"
    );
    w.manager.send("s", send(1, "back")).await.unwrap();
    wait_turn(&w, 1).await;
    assert_eq!(w.agent.resumed.load(Ordering::SeqCst), 1);
    assert!(
        w.store.get_resume_state("s").await.unwrap().is_none(),
        "dropped once resumed"
    );
    let log = w.sandboxes.log.lock().unwrap().clone();
    assert_eq!(log, ["acquire s false", "suspend s", "acquire s true"]);
}

#[tokio::test]
async fn the_session_idle_the_longest_makes_room() {
    let w = world(Some(2), ManagerOptions::default(), None);
    for id in ["one", "two"] {
        w.manager.create(id.into(), json!(null)).await.unwrap();
        until_status(&w.manager, id, SessionStatus::Idle).await;
    }
    w.manager.send("one", send(1, "used")).await.unwrap();
    wait_turn(&w, 1).await;
    w.manager.create("three".into(), json!(null)).await.unwrap();
    until_status(&w.manager, "three", SessionStatus::Idle).await;
    assert_eq!(
        status(&w.manager, "two").await,
        Some(SessionStatus::Suspended)
    );
    assert_eq!(status(&w.manager, "one").await, Some(SessionStatus::Idle));
}

#[tokio::test]
async fn full_with_nobody_idle_is_a_capacity_error() {
    let w = world(Some(1), ManagerOptions::default(), None);
    w.manager.create("x".into(), json!(null)).await.unwrap();
    w.manager.send("x", send(1, "hang")).await.unwrap();
    match w.manager.create("y".into(), json!(null)).await {
        Err(SessionError::Capacity { capacity }) => assert_eq!(capacity, 1),
        other => panic!("{other:?}"),
    }
    assert!(w.manager.get("y").await.unwrap().is_none());
    w.manager.interrupt("x").await.unwrap();
}

#[tokio::test]
async fn a_turn_that_takes_too_long_is_cut() {
    let options = ManagerOptions {
        turn_timeout: Some(Duration::from_millis(30)),
        ..ManagerOptions::default()
    };
    let w = world(None, options, None);
    w.manager.create("t".into(), json!(null)).await.unwrap();
    w.manager.send("t", send(1, "hang")).await.unwrap();
    let done = wait_turn(&w, 1).await;
    assert_eq!(done.status, SessionStatus::Idle);
    assert_eq!(done.error.as_deref(), Some(TURN_TOO_LONG));
}

#[tokio::test]
async fn sessions_a_crash_left_live_become_interrupted() {
    let first = world(None, ManagerOptions::default(), None);
    first
        .manager
        .create("live".into(), json!(null))
        .await
        .unwrap();
    first.manager.send("live", send(1, "hang")).await.unwrap();
    let next = world(None, ManagerOptions::default(), Some(first.store.clone()));
    let list = next.manager.list().await.unwrap();
    assert_eq!(list[0].status, SessionStatus::Interrupted);
    assert_eq!(list[0].error.as_deref(), Some(STOPPED_WITHOUT_SUSPENDING));
    first.manager.interrupt("live").await.unwrap();
}

#[tokio::test]
async fn shutdown_suspends_and_then_refuses() {
    let w = world(None, ManagerOptions::default(), None);
    w.manager.create("a".into(), json!(null)).await.unwrap();
    w.manager.send("a", send(1, "hang")).await.unwrap();
    w.manager.shutdown().await.unwrap();
    assert_eq!(
        wait_turn(&w, 1).await.error.as_deref(),
        Some(APPLICATION_STOPPED)
    );
    assert_eq!(
        w.store.get("a").await.unwrap().unwrap().summary.status,
        SessionStatus::Suspended
    );
    assert!(matches!(
        w.manager.list().await,
        Err(SessionError::ShutDown)
    ));
    assert_eq!(
        w.sandboxes.log.lock().unwrap().last().map(String::as_str),
        Some("shutdown")
    );
    let calls = w.sandboxes.log.lock().unwrap().len();
    w.manager
        .shutdown()
        .await
        .expect("a second shutdown does nothing");
    assert_eq!(w.sandboxes.log.lock().unwrap().len(), calls);
}

#[tokio::test]
async fn a_paused_turn_lost_with_a_suspension_is_answered_in_words() {
    let w = world(None, ManagerOptions::default(), None);
    w.manager.create("p".into(), json!(null)).await.unwrap();
    w.manager.send("p", send(1, "pause")).await.unwrap();
    let paused = wait_turn(&w, 1).await;
    assert_eq!(paused.status, SessionStatus::AwaitingInput);
    assert_eq!(paused.pending_input.as_ref().unwrap().approvals.len(), 1);
    w.manager.suspend("p").await.unwrap();
    let kept = w.store.get_resume_state("p").await.unwrap().unwrap();
    assert!(
        kept.get("continueFrom").is_some(),
        "the store keeps it whole"
    );
    // A message resumes it, then is refused: it still waits for its answer.
    match w.manager.send("p", send(2, "hello?")).await {
        Err(SessionError::Conflict {
            status, message, ..
        }) => {
            assert_eq!(status, SessionStatus::AwaitingInput);
            assert_eq!(message, crate::engine::session::lifecycle::WAITS_FOR_INPUT);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        w.agent.resumed_from.lock().unwrap().clone(),
        vec![json!({"type": "resume-session", "data": {"id": "p"}})],
        "handed over without the paused turn nor its bridge"
    );
    let request = ContinueRequest {
        turn_id: 3,
        approvals: vec![json!({"approvalId": "a1", "approved": true})],
        ..ContinueRequest::default()
    };
    w.manager.continue_turn("p", request).await.unwrap();
    let done = wait_turn(&w, 3).await;
    assert_eq!(done.status, SessionStatus::Idle);
    assert_eq!(
        w.agent.prompts.lock().unwrap().last().unwrap(),
        &format!(
            "{}\n- I approve bash {{\"command\":\"ls\"}}",
            answers::TOLD_AFTER_SUSPENSION
        )
    );
}

#[tokio::test]
async fn an_imported_conversation_is_kept_and_told_with_the_first_turn_only() {
    let w = world(None, ManagerOptions::default(), None);
    let items: Vec<Box<serde_json::value::RawValue>> = serde_json::from_str(
        r#"[{"type":"user","text":"Check Atlas."},{"type":"assistant","text":"Taken."}]"#,
    )
    .unwrap();
    let ids = vec!["m1".to_owned(), "m2".to_owned()];
    let history = import::read_history(&items, &ids).unwrap();
    let created = w
        .manager
        .create_with_history("i".into(), json!({}), history.clone())
        .await
        .unwrap();
    assert!(import::is_pending(&created.extra));
    assert_eq!(w.store.get("i").await.unwrap().unwrap().messages, history);
    w.manager.send("i", send(1, "And Borealis?")).await.unwrap();
    assert!(!import::is_pending(&wait_turn(&w, 1).await.extra));
    w.manager.send("i", send(2, "again")).await.unwrap();
    wait_turn(&w, 2).await;
    let prompts = w.agent.prompts.lock().unwrap().clone();
    assert_eq!(prompts.len(), 2);
    assert!(prompts[0].contains("User: Check Atlas.\nAssistant: Taken."));
    assert!(prompts[0].ends_with("\n\nAnd Borealis?"));
    assert_eq!(prompts[1], "again");
    let record = w.manager.get("i").await.unwrap().unwrap();
    assert_eq!(record.messages.len(), 6);
    assert_eq!(
        record.messages[2].to_value()["parts"][0]["text"],
        "And Borealis?"
    );
    assert!(!import::is_pending(
        &w.store.get("i").await.unwrap().unwrap().summary.extra
    ));
}

mod many;
mod many_pg;
