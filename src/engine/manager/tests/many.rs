//! The manager's many-instance mode on the in-process cluster: several managers of this process
//! share one [`Hub`] (one store, one lease table, one turn log), each with its own agent,
//! sandboxes and hooks, as instances on several hosts would. Leases last 300 ms; every wait is on
//! a condition, bounded generously.

use std::time::Duration;

use futures::StreamExt;

use super::*;
use crate::engine::cluster::local::{Hub, LocalCluster};
use crate::engine::cluster::{Cluster, TurnKey};

const TTL: Duration = Duration::from_millis(300);

struct Instance {
    manager: SessionManager,
    cluster: Arc<LocalCluster>,
    agent: Arc<ScriptedAgent>,
    sandboxes: Arc<CountingSandboxes>,
    recorder: Arc<Recorder>,
}

fn hub() -> Arc<Hub> {
    Hub::new(Arc::new(MemoryStore::new()))
}

fn instance(hub: &Arc<Hub>, id: &str) -> Instance {
    let cluster = hub.instance(id, TTL);
    let agent = Arc::new(ScriptedAgent::default());
    let sandboxes = Arc::new(CountingSandboxes {
        capacity: None,
        log: Mutex::default(),
    });
    let recorder = Arc::new(Recorder::default());
    let seams = Seams {
        agent: agent.clone(),
        sandboxes: Arc::new(sandboxes.clone()),
        store: cluster.store(),
        hooks: recorder.clone(),
        clients: recorder.clone(),
    };
    let options = ManagerOptions {
        wind_down: Duration::from_secs(2),
        ..ManagerOptions::default()
    };
    Instance {
        manager: SessionManager::new(seams, options),
        cluster,
        agent,
        sandboxes,
        recorder,
    }
}

/// Waits up to 20 s for `check`.
pub(super) async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub(super) async fn status_on(manager: &SessionManager, id: &str) -> Option<SessionStatus> {
    manager.get(id).await.unwrap().map(|r| r.summary.status)
}

async fn idle_session(owner: &Instance, id: &str) {
    owner.manager.create(id.into(), json!({})).await.unwrap();
    eventually("idle", async || {
        status_on(&owner.manager, id).await == Some(SessionStatus::Idle)
    })
    .await;
}

/// The types of the chunks of turn `key`, read from `manager`'s instance to the turn's end.
pub(super) async fn read_types(manager: &SessionManager, key: TurnKey) -> Vec<String> {
    let chunks = manager.follow_turn(key, 0).map(|chunk| {
        let (_, text) = chunk.expect("a chunk");
        let value: Value = serde_json::from_str(&text).expect("JSON");
        value["type"].as_str().unwrap_or_default().to_owned()
    });
    tokio::time::timeout(Duration::from_secs(20), chunks.collect::<Vec<_>>())
        .await
        .expect("the turn's log ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_to_another_instance_runs_on_the_owner_and_streams_there() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    idle_session(&a, "s").await;
    assert_eq!(hub.lease_of("s").await.map(|l| l.0).as_deref(), Some("a"));
    // b sees it, and sends to it: a runs the turn, b streams it from the log.
    assert_eq!(status_on(&b.manager, "s").await, Some(SessionStatus::Idle));
    let started = b.manager.send("s", send(1, "hello")).await.unwrap();
    assert_eq!(started.session.status, SessionStatus::Busy);
    let key = started.log.expect("a turn log");
    let types = read_types(&b.manager, key.clone()).await;
    assert_eq!(
        types,
        [
            "start",
            "start-step",
            "text-start",
            "text-delta",
            "text-end",
            "finish-step",
            "finish"
        ]
    );
    assert_eq!(*a.agent.prompts.lock().unwrap(), ["hello"]);
    assert!(b.agent.prompts.lock().unwrap().is_empty(), "b ran nothing");
    assert_eq!(b.agent.opened.load(Ordering::SeqCst), 0);
    // A reader on the owner reads the same.
    assert_eq!(read_types(&a.manager, key).await, types);
    eventually("idle again, seen from b", async || {
        status_on(&b.manager, "s").await == Some(SessionStatus::Idle)
    })
    .await;
    let record = b.manager.get("s").await.unwrap().unwrap();
    assert_eq!(record.messages.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_from_another_instance_cuts_the_owners_turn() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    idle_session(&a, "s").await;
    let started = a.manager.send("s", send(1, "hang")).await.unwrap();
    let key = started.log.expect("a turn log");
    let reader = {
        let manager = b.manager.clone();
        tokio::spawn(async move { read_types(&manager, key).await })
    };
    b.manager.interrupt("s").await.unwrap();
    let types = reader.await.unwrap();
    assert!(types.contains(&"abort".to_owned()), "{types:?}");
    assert_eq!(types.last().map(String::as_str), Some("abort"));
    eventually("idle", async || {
        status_on(&b.manager, "s").await == Some(SessionStatus::Idle)
    })
    .await;
    let record = b.manager.get("s").await.unwrap().unwrap();
    let reply = record.messages.last().unwrap().to_value();
    assert_eq!(
        reply["metadata"]["cut"],
        json!(TURN_INTERRUPTED),
        "the reply is marked cut"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_turn_at_a_time_across_instances() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    idle_session(&a, "s").await;
    for round in 0..5u64 {
        let sends = (0..6u64).map(|i| {
            let manager = if i % 2 == 0 { &a.manager } else { &b.manager };
            manager.send("s", send(round * 100 + i + 1, "hang"))
        });
        let results = futures::future::join_all(sends).await;
        let started = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(started, 1, "round {round}: {results:?}");
        for result in &results {
            if let Err(error) = result {
                assert_eq!(error.code(), "SESSION_CONFLICT", "{error}");
            }
        }
        b.manager.interrupt("s").await.unwrap();
        eventually("idle", async || {
            status_on(&a.manager, "s").await == Some(SessionStatus::Idle)
        })
        .await;
    }
    assert_eq!(a.agent.prompts.lock().unwrap().len(), 5);
    assert!(b.agent.prompts.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_of_a_dead_owner_are_taken_over_and_its_readers_end() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    idle_session(&a, "s").await;
    let started = a.manager.send("s", send(1, "hang")).await.unwrap();
    let key = started.log.expect("a turn log");
    let reader = {
        let manager = b.manager.clone();
        let key = key.clone();
        tokio::spawn(async move { read_types(&manager, key).await })
    };
    // Let a chunk or two reach the log, then the owner dies.
    eventually("chunks in the log", async || {
        !b.cluster
            .read_turn(&key, 0)
            .await
            .unwrap()
            .chunks
            .is_empty()
    })
    .await;
    a.cluster.kill();
    // Any instance's call starts the sweep, which b runs every half ttl.
    b.manager.list().await.unwrap();
    eventually("interrupted, seen from b", async || {
        status_on(&b.manager, "s").await == Some(SessionStatus::Interrupted)
    })
    .await;
    let types = reader.await.unwrap();
    assert_eq!(types.last().map(String::as_str), Some("abort"), "{types:?}");
    let record = b.manager.get("s").await.unwrap().unwrap();
    let reply = record.messages.last().unwrap().to_value();
    assert_eq!(reply["role"], "assistant");
    assert_eq!(reply["metadata"]["cut"], json!(STOPPED_WITHOUT_SUSPENDING));
    assert_eq!(
        hub.lease_of("s").await.map(|l| l.1),
        Some(2),
        "taken over once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_paused_past_its_lease_writes_nothing_more_and_stops_its_harness() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    idle_session(&a, "s").await;
    a.manager.send("s", send(1, "hang")).await.unwrap();
    a.cluster.pause(true);
    b.manager.list().await.unwrap();
    eventually("interrupted, seen from b", async || {
        status_on(&b.manager, "s").await == Some(SessionStatus::Interrupted)
    })
    .await;
    let taken_over = b.manager.get("s").await.unwrap().unwrap();
    // a runs again: it finds its lease lost, cuts its turn and lets go of its sandbox.
    a.cluster.pause(false);
    eventually("a's sandbox closed", async || {
        a.sandboxes
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l == "close s")
    })
    .await;
    eventually("a forgot the session", async || {
        a.manager.sessions_in_memory() == 0
    })
    .await;
    // Nothing of a's epoch was written after the takeover.
    tokio::time::sleep(TTL).await;
    let now = b.manager.get("s").await.unwrap().unwrap();
    assert_eq!(now, taken_over);
    assert!(a
        .recorder
        .errors
        .lock()
        .unwrap()
        .iter()
        .any(|e| e.contains("no longer owns")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_from_every_instance_all_land() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    idle_session(&a, "s").await;
    let updates = (0..20).map(|i| {
        let manager = if i % 2 == 0 { &a.manager } else { &b.manager };
        manager.update_with("s", move |mut metadata: Value| async move {
            metadata[format!("k{i}")] = json!(i);
            Ok(metadata)
        })
    });
    for result in futures::future::join_all(updates).await {
        result.unwrap();
    }
    let metadata = b.manager.get("s").await.unwrap().unwrap().summary.metadata;
    assert_eq!(metadata.as_object().unwrap().len(), 20, "{metadata}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_hears_of_every_change() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    b.manager.list().await.unwrap();
    idle_session(&a, "s").await;
    a.manager.suspend("s").await.unwrap();
    a.manager.delete("s").await.unwrap();
    eventually("b heard the deletion", async || {
        b.recorder
            .events
            .lock()
            .unwrap()
            .contains(&"s deleted".to_owned())
    })
    .await;
    // A change note carries no summary: b reads the session as it stands when it hears of it,
    // so an update heard after the deletion shows nothing, and states in between may be missed.
    let heard = b.recorder.events.lock().unwrap().clone();
    assert_eq!(
        heard.last().map(String::as_str),
        Some("s deleted"),
        "{heard:?}"
    );
    assert_eq!(heard.iter().filter(|e| *e == "s deleted").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_hands_its_sessions_over() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    for id in ["s", "t"] {
        idle_session(&a, id).await;
    }
    a.manager.shutdown().await.unwrap();
    for id in ["s", "t"] {
        assert_eq!(
            status_on(&b.manager, id).await,
            Some(SessionStatus::Suspended)
        );
        // Free now: b takes it and resumes it itself.
        let started = b.manager.send(id, send(1, "again")).await.unwrap();
        let types = read_types(&b.manager, started.log.unwrap()).await;
        assert_eq!(types.last().map(String::as_str), Some("finish"));
    }
    assert_eq!(b.agent.resumed.load(Ordering::SeqCst), 2);
    assert_eq!(b.cluster.held().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_created_twice_on_two_instances_exists_once() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    let (one, two) = futures::join!(
        a.manager.create("s".into(), json!({})),
        b.manager.create("s".into(), json!({}))
    );
    assert!(one.is_ok() != two.is_ok(), "{one:?} {two:?}");
    let refused = one.err().or(two.err()).unwrap();
    assert!(
        matches!(refused, SessionError::AlreadyExists { .. }),
        "{refused}"
    );
    let opened = a.agent.opened.load(Ordering::SeqCst) + b.agent.opened.load(Ordering::SeqCst);
    eventually("idle", async || {
        status_on(&a.manager, "s").await == Some(SessionStatus::Idle)
    })
    .await;
    assert!(opened <= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_sent_to_both_instances_starts_one_turn() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    idle_session(&a, "s").await;
    let ask = |turn_id| {
        let mut request = send(turn_id, "hello");
        request.submission = Some(SubmissionAsk {
            id: "sub-1".into(),
            digest: "d".into(),
        });
        request
    };
    let (one, two) = futures::join!(a.manager.send("s", ask(1)), b.manager.send("s", ask(2)));
    let (one, two) = (one.unwrap(), two.unwrap());
    assert!(
        one.replayed != two.replayed,
        "one started it, the other found it"
    );
    assert_eq!(one.message_id, two.message_id);
    assert_eq!(one.log, two.log);
    assert_eq!(a.agent.prompts.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_the_agent_refused_closes_its_log_and_its_error_crosses() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    idle_session(&a, "s").await;
    let refused = b.manager.send("s", send(1, "refuse")).await.unwrap_err();
    assert_eq!(refused.to_string(), "the agent refused the turn");
    assert_eq!(refused.code(), "SESSION_HOST");
    let key = b.manager.latest_turn("s").await.unwrap().expect("a log");
    assert_eq!(read_types(&b.manager, key).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_sent_to_another_instance_continue_the_owners_paused_turn() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    idle_session(&a, "p").await;
    let started = b.manager.send("p", send(1, "pause")).await.unwrap();
    read_types(&b.manager, started.log.unwrap()).await;
    eventually("awaiting input", async || {
        status_on(&b.manager, "p").await == Some(SessionStatus::AwaitingInput)
    })
    .await;
    let request = ContinueRequest {
        turn_id: 2,
        approvals: vec![json!({"approvalId": "a1", "approved": true})],
        options: TurnOptions {
            instruction_addendum: Some("be brief".into()),
            ..TurnOptions::default()
        },
        ..ContinueRequest::default()
    };
    let started = b.manager.continue_turn("p", request).await.unwrap();
    let types = read_types(&b.manager, started.log.unwrap()).await;
    assert_eq!(
        types.last().map(String::as_str),
        Some("finish"),
        "{types:?}"
    );
    eventually("idle", async || {
        status_on(&b.manager, "p").await == Some(SessionStatus::Idle)
    })
    .await;
    assert_eq!(*a.agent.prompts.lock().unwrap(), ["pause", "continued"]);
    // A bad answer is refused by the owner, as the same error.
    let wrong = ContinueRequest {
        turn_id: 3,
        approvals: vec![json!({"approvalId": "nope", "approved": true})],
        ..ContinueRequest::default()
    };
    let refused = b.manager.continue_turn("p", wrong).await.unwrap_err();
    assert_eq!(refused.code(), "SESSION_CONFLICT", "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_close_and_delete_from_another_instance_act_on_the_owner() {
    let hub = hub();
    let (a, b) = (instance(&hub, "a"), instance(&hub, "b"));
    idle_session(&a, "s").await;
    let suspended = b.manager.suspend("s").await.unwrap();
    assert_eq!(suspended.status, SessionStatus::Suspended);
    assert!(a
        .sandboxes
        .log
        .lock()
        .unwrap()
        .contains(&"suspend s".to_owned()));
    // Suspended, it is nobody's: b's next command takes it.
    eventually("the lease let go of", async || {
        hub.lease_of("s")
            .await
            .is_some_and(|(owner, _)| owner.is_empty())
    })
    .await;
    let closed = b.manager.close("s").await.unwrap();
    assert_eq!(closed.status, SessionStatus::Closed);
    b.manager.delete("s").await.unwrap();
    assert_eq!(a.manager.get("s").await.unwrap(), None);
    assert!(matches!(
        a.manager.interrupt("s").await,
        Err(SessionError::NotFound { .. })
    ));
}
