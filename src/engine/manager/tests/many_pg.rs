//! The manager's many-instance mode on PostgreSQL: several managers of this process, each with
//! its own PostgreSQL store (its own pool and `LISTEN` connection) on one schema of a real
//! server, as instances on several hosts would. Leases last 1 s. Skipped, with the reason
//! printed, only where no PostgreSQL can be had (`HARNESS_SESSIONS_REQUIRE_POSTGRES=1` fails
//! instead, as the store's own tests do).

use std::time::Duration;

use super::many::{eventually, read_types, status_on};
use super::*;
use crate::engine::cluster::Cluster;
use crate::engine::store::postgres::cluster::{ClusteredPostgresStore, PostgresCluster};
use crate::engine::store::postgres::testing;
use crate::engine::store::postgres::{PostgresStore, PostgresStoreOptions};

struct Instance {
    manager: SessionManager,
    cluster: Arc<PostgresCluster>,
    agent: Arc<ScriptedAgent>,
    sandboxes: Arc<CountingSandboxes>,
    recorder: Arc<Recorder>,
}

/// The options of a schema the instances of one test share, or `None` to skip.
fn shared(what: &str) -> Option<PostgresStoreOptions> {
    let mut options = testing::options(what)?;
    options.lease_ttl = Duration::from_secs(1);
    Some(options)
}

fn instance(shared: &PostgresStoreOptions, id: &str) -> Instance {
    let mut options = shared.clone();
    options.instance_id = id.to_owned();
    let store = ClusteredPostgresStore::new(Arc::new(PostgresStore::new(options).unwrap()));
    let cluster = store.postgres_cluster().clone();
    let agent = Arc::new(ScriptedAgent::default());
    let sandboxes = Arc::new(CountingSandboxes {
        capacity: None,
        log: Mutex::default(),
    });
    let recorder = Arc::new(Recorder::default());
    let seams = Seams {
        agent: agent.clone(),
        sandboxes: Arc::new(sandboxes.clone()),
        store: Arc::new(store),
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

async fn idle_session(owner: &Instance, id: &str) {
    owner.manager.create(id.into(), json!({})).await.unwrap();
    eventually("idle", async || {
        status_on(&owner.manager, id).await == Some(SessionStatus::Idle)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_message_sent_to_another_instance_runs_on_the_owner_and_streams_there() {
    let Some(options) = shared("many_send") else {
        return testing::skipping("postgres_a_message_sent_to_another_instance...");
    };
    let (a, b) = (instance(&options, "a"), instance(&options, "b"));
    idle_session(&a, "s").await;
    let started = b.manager.send("s", send(1, "hello")).await.unwrap();
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
    assert_eq!(read_types(&a.manager, key).await, types);
    assert_eq!(*a.agent.prompts.lock().unwrap(), ["hello"]);
    assert!(b.agent.prompts.lock().unwrap().is_empty());
    eventually("idle, seen from b", async || {
        status_on(&b.manager, "s").await == Some(SessionStatus::Idle)
    })
    .await;
    assert_eq!(b.manager.get("s").await.unwrap().unwrap().messages.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_interrupt_from_another_instance_cuts_the_owners_turn() {
    let Some(options) = shared("many_interrupt") else {
        return testing::skipping("postgres_an_interrupt_from_another_instance...");
    };
    let (a, b) = (instance(&options, "a"), instance(&options, "b"));
    idle_session(&a, "s").await;
    let started = a.manager.send("s", send(1, "hang")).await.unwrap();
    let key = started.log.expect("a turn log");
    let reader = {
        let manager = b.manager.clone();
        tokio::spawn(async move { read_types(&manager, key).await })
    };
    b.manager.interrupt("s").await.unwrap();
    let types = reader.await.unwrap();
    assert_eq!(types.last().map(String::as_str), Some("abort"), "{types:?}");
    eventually("idle", async || {
        status_on(&b.manager, "s").await == Some(SessionStatus::Idle)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_one_turn_at_a_time_across_instances() {
    let Some(options) = shared("many_one_turn") else {
        return testing::skipping("postgres_one_turn_at_a_time_across_instances");
    };
    let (a, b) = (instance(&options, "a"), instance(&options, "b"));
    idle_session(&a, "s").await;
    for round in 0..3u64 {
        let sends = (0..6u64).map(|i| {
            let manager = if i % 2 == 0 { &a.manager } else { &b.manager };
            manager.send("s", send(round * 100 + i + 1, "hang"))
        });
        let results = futures::future::join_all(sends).await;
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "{results:?}"
        );
        for error in results.iter().filter_map(|r| r.as_ref().err()) {
            assert_eq!(error.code(), "SESSION_CONFLICT", "{error}");
        }
        b.manager.interrupt("s").await.unwrap();
        eventually("idle", async || {
            status_on(&a.manager, "s").await == Some(SessionStatus::Idle)
        })
        .await;
    }
    assert_eq!(a.agent.prompts.lock().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_an_owner_stopped_past_its_lease_is_taken_over_and_fenced_out() {
    let Some(options) = shared("many_paused") else {
        return testing::skipping("postgres_an_owner_stopped_past_its_lease...");
    };
    let (a, b) = (instance(&options, "a"), instance(&options, "b"));
    idle_session(&a, "s").await;
    let started = a.manager.send("s", send(1, "hang")).await.unwrap();
    let key = started.log.expect("a turn log");
    let reader = {
        let manager = b.manager.clone();
        let key = key.clone();
        tokio::spawn(async move { read_types(&manager, key).await })
    };
    a.cluster.pause(true);
    b.manager.list().await.unwrap();
    eventually("interrupted, seen from b", async || {
        status_on(&b.manager, "s").await == Some(SessionStatus::Interrupted)
    })
    .await;
    let types = reader.await.unwrap();
    assert_eq!(types.last().map(String::as_str), Some("abort"), "{types:?}");
    let taken_over = b.manager.get("s").await.unwrap().unwrap();
    assert_eq!(
        taken_over.messages.last().unwrap().to_value()["metadata"]["cut"],
        json!(STOPPED_WITHOUT_SUSPENDING)
    );
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
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(b.manager.get("s").await.unwrap().unwrap(), taken_over);
    // Every chunk of the turn's log was written under the first epoch, but the closing ones.
    let read = b.cluster.read_turn(&key, 0).await.unwrap();
    assert!(read.ended);
    assert!(a
        .recorder
        .errors
        .lock()
        .unwrap()
        .iter()
        .any(|e| e.contains("no longer owns")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_concurrent_updates_from_every_instance_all_land() {
    let Some(options) = shared("many_updates") else {
        return testing::skipping("postgres_concurrent_updates_from_every_instance_all_land");
    };
    let (a, b) = (instance(&options, "a"), instance(&options, "b"));
    idle_session(&a, "s").await;
    let updates = (0..10).map(|i| {
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
    assert_eq!(metadata.as_object().unwrap().len(), 10, "{metadata}");
    let heard = b.recorder.events.lock().unwrap().clone();
    assert!(heard.iter().any(|e| e == "s idle"), "{heard:?}");
}

/// A measurement, not a check: 50 sessions of one instance each run a turn at once while every
/// core spins; prints how many leases the instance lost. Run by hand with `--ignored
/// --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn postgres_measure_leases_lost_under_load() {
    let Some(options) = shared("many_measure") else {
        return testing::skipping("postgres_measure_leases_lost_under_load");
    };
    let (a, _b) = (instance(&options, "a"), instance(&options, "b"));
    let mut events = a.cluster.lease_events();
    let lost = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = lost.clone();
    tokio::spawn(async move {
        while let Ok(event) = events.recv().await {
            if matches!(event, crate::engine::cluster::LeaseEvent::Lost(_)) {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinners: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = x.wrapping_mul(31).wrapping_add(1);
                }
                x
            })
        })
        .collect();
    let ids: Vec<String> = (0..50).map(|i| format!("m{i}")).collect();
    let started = std::time::Instant::now();
    futures::future::join_all(ids.iter().map(|id| idle_session(&a, id))).await;
    let turns = futures::future::join_all(
        ids.iter()
            .enumerate()
            .map(|(i, id)| a.manager.send(id, send(i as u64 + 1, "hello"))),
    )
    .await;
    let mut delays = Vec::new();
    let mut unended = 0;
    for turn in turns.into_iter().flatten() {
        if let Some(key) = turn.log {
            let t = std::time::Instant::now();
            let manager = a.manager.clone();
            match tokio::spawn(async move { read_types(&manager, key).await }).await {
                Ok(_) => delays.push(t.elapsed()),
                Err(_) => unended += 1,
            }
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for spinner in spinners {
        spinner.join().unwrap();
    }
    delays.sort();
    let at = |q: f64| delays[((delays.len() as f64 - 1.0) * q) as usize];
    eprintln!(
        "MEASURE lost={} unended={unended} turns={} elapsed={:?} log read p50={:?} p99={:?}",
        lost.load(std::sync::atomic::Ordering::SeqCst),
        delays.len(),
        started.elapsed(),
        at(0.5),
        at(0.99)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_late_renewal_keeps_a_lease_nobody_took() {
    let Some(options) = shared("many_late_renewal") else {
        return testing::skipping("postgres_a_late_renewal_keeps_a_lease_nobody_took");
    };
    let mut b_options = options.clone();
    b_options.instance_id = "b".into();
    let mut options = options;
    options.instance_id = "a".into();
    let store = ClusteredPostgresStore::new(Arc::new(PostgresStore::new(options).unwrap()));
    let cluster = store.postgres_cluster().clone();
    let mut events = cluster.lease_events();
    let crate::engine::cluster::Claim::Granted(fence) = cluster.claim("s").await.unwrap() else {
        panic!("the lease of a new session is free");
    };
    // No renewal for twice the ttl: the lease expires, but nobody takes it.
    cluster.pause(true);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(cluster.owner("s").await.unwrap(), None);
    cluster.pause(false);
    eventually("renewed", async || {
        cluster.owner("s").await.unwrap().as_deref() == Some("a")
    })
    .await;
    assert_eq!(cluster.held(), std::slice::from_ref(&fence));
    assert!(events.try_recv().is_err(), "no lease event");
    // Taken over once expired: the next renewal finds it lost.
    cluster.pause(true);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let b = ClusteredPostgresStore::new(Arc::new(PostgresStore::new(b_options).unwrap()));
    let taken = b.postgres_cluster().take_expired(10).await.unwrap();
    assert_eq!(taken.len(), 1);
    cluster.pause(false);
    eventually("lost", async || cluster.held().is_empty()).await;
    assert!(matches!(
        events.recv().await.unwrap(),
        crate::engine::cluster::LeaseEvent::Lost(lost) if lost == fence
    ));
}
