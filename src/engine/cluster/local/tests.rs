//! The in-process cluster keeps the promises of [`Cluster`]: one owner, fencing, the turn log,
//! commands to the owner, change notes. Time is real but short (leases of a few hundred ms);
//! every wait is bounded generously and waits on a condition.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;

use super::*;
use crate::engine::cluster::follow;
use crate::engine::session::{SessionStatus, Timestamp};
use crate::engine::store::memory::MemoryStore;

const TTL: Duration = Duration::from_millis(300);

fn hub() -> Arc<Hub> {
    Hub::new(Arc::new(MemoryStore::new()))
}

fn record(id: &str) -> SessionRecord {
    SessionRecord {
        summary: SessionSummary::new(
            id.to_owned(),
            SessionStatus::Idle,
            json!({}),
            Timestamp::from_millis(1000.0),
        ),
        messages: Vec::new(),
        command_results: Vec::new(),
        submissions: Vec::new(),
    }
}

fn granted(claim: Claim) -> Fence {
    match claim {
        Claim::Granted(fence) => fence,
        Claim::Held { owner } => panic!("held by {owner}"),
    }
}

/// Waits up to 10 s for `check`.
async fn eventually(mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "the condition never held");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owner_at_a_time_and_a_renewed_lease_stays() {
    let hub = hub();
    let (a, b) = (hub.instance("a", TTL), hub.instance("b", TTL));
    let fence = granted(a.claim("s").await.unwrap());
    assert_eq!(fence.epoch, 1);
    assert_eq!(
        b.claim("s").await.unwrap(),
        Claim::Held { owner: "a".into() }
    );
    // Claiming again is a no-op for the owner.
    assert_eq!(granted(a.claim("s").await.unwrap()), fence);
    // Renewed in the background: still a's well past the ttl.
    tokio::time::sleep(TTL * 3).await;
    assert_eq!(b.owner("s").await.unwrap().as_deref(), Some("a"));
    assert!(a.held().contains(&fence));
    // Released: b takes it with a higher epoch.
    a.release(&fence).await.unwrap();
    let taken = granted(b.claim("s").await.unwrap());
    assert_eq!(taken.epoch, 2);
    assert!(a.held().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_owner_is_fenced_out_and_told() {
    let hub = hub();
    let (a, b) = (hub.instance("a", TTL), hub.instance("b", TTL));
    let mut lost = a.lease_events();
    let fence = granted(a.claim("s").await.unwrap());
    a.save(&fence, &record("s"), None).await.unwrap();
    let turn = a.open_turn(&fence).await.unwrap();
    a.append(&fence, &turn, vec!["1".into()]).await.unwrap();
    a.pause(true);
    let mut taken = Vec::new();
    eventually(async || {
        taken = b.take_expired(16).await.unwrap();
        !taken.is_empty()
    })
    .await;
    assert_eq!(taken[0].epoch, 2, "taken over with a higher epoch");
    // Nothing of the old epoch lands any more.
    assert_eq!(
        a.save(&fence, &record("s"), None).await,
        Err(SessionError::LeaseLost {
            session_id: "s".into()
        })
    );
    assert!(matches!(
        a.append(&fence, &turn, vec!["2".into()]).await,
        Err(SessionError::LeaseLost { .. })
    ));
    assert_eq!(lost.recv().await.unwrap(), LeaseEvent::Lost(fence.clone()));
    a.pause(false);
    assert!(!a.renew(&fence).await.unwrap());
    // The new owner closes the turn; the log holds the old owner's one chunk and its own.
    b.end_turn(&taken[0], &turn, vec!["end".into()])
        .await
        .unwrap();
    let read = b.read_turn(&turn, 0).await.unwrap();
    assert_eq!(read.chunks, vec![(1, "1".into()), (2, "end".into())]);
    assert!(read.ended);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_owners_lease_expires_and_a_released_one_is_not_swept() {
    let hub = hub();
    let (a, b) = (hub.instance("a", TTL), hub.instance("b", TTL));
    granted(a.claim("busy").await.unwrap());
    let quiet = granted(a.claim("quiet").await.unwrap());
    a.release(&quiet).await.unwrap();
    a.kill();
    eventually(async || b.owner("busy").await.unwrap().is_none()).await;
    let taken = b.take_expired(16).await.unwrap();
    assert_eq!(
        taken,
        vec![Fence {
            session_id: "busy".into(),
            epoch: 2
        }]
    );
    assert_eq!(granted(b.claim("quiet").await.unwrap()).epoch, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_attached_before_the_producer_gets_every_chunk_once_in_order() {
    let hub = hub();
    let (a, b) = (hub.instance("a", TTL), hub.instance("b", TTL));
    let fence = granted(a.claim("s").await.unwrap());
    let turn = a.open_turn(&fence).await.unwrap();
    let reader: Arc<dyn Cluster> = b.clone();
    // Polling rarely: the wake-ups must carry it.
    let read = tokio::spawn(
        follow(reader, turn.clone(), 0, Duration::from_secs(30))
            .map(|chunk| chunk.unwrap())
            .collect::<Vec<_>>(),
    );
    for batch in 0..20u64 {
        let chunks = (0..5).map(|i| format!("{}", batch * 5 + i + 1)).collect();
        a.append(&fence, &turn, chunks).await.unwrap();
        tokio::task::yield_now().await;
    }
    a.end_turn(&fence, &turn, vec!["101".into()]).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap()
        .unwrap();
    let expected: Vec<(u64, String)> = (1..=101).map(|n| (n, n.to_string())).collect();
    assert_eq!(got, expected);
    // From a cursor: what follows it only.
    let reader: Arc<dyn Cluster> = b.clone();
    let tail: Vec<_> = follow(reader, turn, 99, Duration::from_millis(50))
        .map(|chunk| chunk.unwrap().0)
        .collect()
        .await;
    assert_eq!(tail, vec![100, 101]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_of_a_turn_whose_owner_died_ends_with_the_sweepers_ending() {
    let hub = hub();
    let (a, b) = (hub.instance("a", TTL), hub.instance("b", TTL));
    let fence = granted(a.claim("s").await.unwrap());
    let turn = a.open_turn(&fence).await.unwrap();
    a.append(&fence, &turn, vec!["x".into()]).await.unwrap();
    let reader: Arc<dyn Cluster> = b.clone();
    let read = tokio::spawn(
        follow(reader, turn.clone(), 0, Duration::from_millis(100))
            .map(|chunk| chunk.unwrap().1)
            .collect::<Vec<_>>(),
    );
    a.kill();
    let mut taken = Vec::new();
    eventually(async || {
        taken = b.take_expired(16).await.unwrap();
        !taken.is_empty()
    })
    .await;
    b.end_turn(&taken[0], &turn, vec!["abort".into()])
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got, vec!["x".to_owned(), "abort".to_owned()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_reaches_the_owner_and_its_answer_the_caller() {
    let hub = hub();
    let (a, b) = (hub.instance("a", TTL), hub.instance("b", TTL));
    assert_eq!(
        b.forward("s", json!({"kind": "interrupt"}), TTL)
            .await
            .unwrap(),
        None,
        "no owner: the caller may take it"
    );
    granted(a.claim("s").await.unwrap());
    let mut inbox = a.take_inbox().unwrap();
    assert!(a.take_inbox().is_none());
    let owner = a.clone();
    tokio::spawn(async move {
        while let Some(command) = inbox.recv().await {
            let answer = if command.command["kind"] == "interrupt" {
                Ok(json!({"done": command.session_id, "from": command.from}))
            } else {
                Err(SessionError::in_status(
                    &command.session_id,
                    SessionStatus::Busy,
                    None,
                ))
            };
            owner.answer(command.id, answer).await.unwrap();
        }
    });
    let wait = Duration::from_secs(5);
    assert_eq!(
        b.forward("s", json!({"kind": "interrupt"}), wait)
            .await
            .unwrap(),
        Some(json!({"done": "s", "from": "b"}))
    );
    assert_eq!(
        b.forward("s", json!({"kind": "send"}), wait).await,
        Err(SessionError::in_status("s", SessionStatus::Busy, None))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_to_a_dead_owner_comes_back_once_its_lease_expired() {
    let hub = hub();
    let (a, b) = (hub.instance("a", TTL), hub.instance("b", TTL));
    granted(a.claim("s").await.unwrap());
    a.kill();
    let answer = b
        .forward("s", json!({"kind": "interrupt"}), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(answer, None);
    assert_eq!(granted(b.claim("s").await.unwrap()).epoch, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_instance_sees_every_change_once_in_order() {
    let hub = hub();
    let (a, b) = (hub.instance("a", TTL), hub.instance("b", TTL));
    let mut seen = b.changes();
    a.changed("s", false).await.unwrap();
    b.changed("t", false).await.unwrap();
    a.changed("s", true).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..3 {
        let change = seen.recv().await.unwrap();
        got.push((
            change.session_id,
            change.deleted,
            change.from,
            change.version,
        ));
    }
    assert_eq!(
        got,
        vec![
            ("s".into(), false, "a".into(), 1),
            ("t".into(), false, "b".into(), 2),
            ("s".into(), true, "a".into(), 3),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaving_frees_every_lease_and_the_store_offers_the_cluster() {
    let hub = hub();
    let (a, b) = (hub.instance("a", TTL), hub.instance("b", TTL));
    granted(a.claim("s").await.unwrap());
    granted(a.claim("t").await.unwrap());
    a.leave().await.unwrap();
    assert!(a.held().is_empty());
    assert_eq!(granted(b.claim("s").await.unwrap()).epoch, 2);
    assert_eq!(granted(b.claim("t").await.unwrap()).epoch, 2);
    let store = b.store();
    let cluster = store.cluster().expect("the store offers its cluster");
    assert_eq!(cluster.instance_id(), "b");
    assert!(MemoryStore::new().cluster().is_none());
}
