//! Tests of the PostgreSQL store against a real server (see `testing`): round trips, resume
//! states (sealed or not), only changed messages rewritten, listing order, deletion, migrations
//! racing, a newer schema refused, an unreachable server, the listening connection, TLS per URL.

use std::time::Duration;

use serde_json::{json, Value};

use super::testing::{self, skipping};
use super::{PostgresStore, PostgresStoreOptions};
use crate::engine::error::SessionError;
use crate::engine::session::{
    SessionRecord, SessionStatus, SessionSummary, StoredMessage, Submission, Timestamp,
};
use crate::engine::store::SessionStore;

fn message(position: usize, text: &str) -> StoredMessage {
    StoredMessage::from_value(&json!({
        "id": format!("m{position}"),
        "role": if position % 2 == 0 { "user" } else { "assistant" },
        "parts": [{ "type": "text", "text": text }],
    }))
}

fn record(id: &str, updated_at: f64, messages: usize) -> SessionRecord {
    let mut summary = SessionSummary::new(
        id.to_owned(),
        SessionStatus::Idle,
        json!({ "title": format!("session {id}"), "zeta": 1, "alpha": [1, 2.5, -0.0] }),
        Timestamp::from_millis(1_700_000_000_000.0),
    );
    summary.updated_at = Timestamp::from_millis(updated_at);
    SessionRecord {
        summary,
        messages: (0..messages)
            .map(|position| message(position, &format!("text {position} of {id}")))
            .collect(),
        command_results: Vec::new(),
        submissions: Vec::new(),
    }
}

/// A plain client on the test server, to look at the store's rows.
async fn raw() -> tokio_postgres::Client {
    let url = testing::server_url().expect("a server");
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("a raw connection");
    tokio::spawn(connection);
    client
}

async fn count(schema: &str, sql: &str) -> i64 {
    raw()
        .await
        .query_one(&sql.replace("{schema}", &format!("\"{schema}\"")), &[])
        .await
        .expect("the count runs")
        .get(0)
}

async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), future)
        .await
        .expect("done within 60 s")
}

#[tokio::test]
async fn records_round_trip_exactly_with_unknown_fields() {
    let Some(store) = testing::store("roundtrip").await else {
        return skipping("records_round_trip_exactly_with_unknown_fields");
    };
    let mut full = record("s-ü/1 \u{1f600}", 10.0, 3);
    full.summary.extra.insert(
        "owner".to_owned(),
        json!({ "name": "ada", "since": [2024, -0.0, 1.947_700_395_895_162e-169] }),
    );
    full.summary.metadata = json!({ "b": 1, "a": "line\nbreak \u{0}nul" });
    full.summary.created_at = Timestamp::from_text("2026-12-02T01:23:47.944+01:00");
    full.messages.push(Value::Null.into());
    full.messages.push(json!({ "b": 1, "a": 2 }).into());
    full.submissions = vec![Submission {
        id: "sub-1 ü".to_owned(),
        digest: "d".repeat(64),
        reply_id: "reply-1".to_owned(),
    }];
    store.save(&full, None).await.expect("save");
    let got = store.get(full.id()).await.expect("get").expect("present");
    assert_eq!(got, full);
    assert_eq!(
        serde_json::to_string(&got).expect("json"),
        serde_json::to_string(&full).expect("json"),
        "key order and floats kept"
    );
    assert_eq!(store.get("missing").await.expect("get"), None);
    let listed = serde_json::to_value(store.list().await.expect("list")).expect("json");
    assert_eq!(listed[0]["owner"]["name"], "ada");
    assert!(listed[0].get("messages").is_none());
    assert!(listed[0].get("submissions").is_none());
}

#[tokio::test]
async fn a_save_rewrites_only_changed_messages_and_drops_the_tail() {
    let Some(store) = testing::store("messages").await else {
        return skipping("a_save_rewrites_only_changed_messages_and_drops_the_tail");
    };
    let schema = store.schema().to_owned();
    let mut session = record("a", 1.0, 20);
    store.save(&session, None).await.expect("save");
    let xmin = |position: i32| {
        let schema = schema.clone();
        async move {
            raw()
                .await
                .query_one(
                    &format!(
                        "SELECT xmin::text FROM \"{schema}\".messages \
                         WHERE session_id = 'a' AND position = $1"
                    ),
                    &[&position],
                )
                .await
                .expect("xmin")
                .get::<_, String>(0)
        }
    };
    let (first, changed) = (xmin(0).await, xmin(5).await);
    session.messages[5] = message(5, "changed");
    store.save(&session, None).await.expect("save");
    assert_eq!(
        xmin(0).await,
        first,
        "an unchanged message is not rewritten"
    );
    assert_ne!(xmin(5).await, changed, "a changed one is");
    session.messages.truncate(7);
    store.save(&session, None).await.expect("save");
    assert_eq!(store.get("a").await.expect("get"), Some(session.clone()));
    assert_eq!(
        count(&schema, "SELECT count(*) FROM {schema}.messages").await,
        7
    );
    assert_eq!(
        count(
            &schema,
            "SELECT version FROM {schema}.sessions WHERE id = 'a'"
        )
        .await,
        3,
        "each save raises the version"
    );
}

#[tokio::test]
async fn resume_states_are_kept_only_while_given_and_sealed_with_a_key() {
    let Some(mut options) = testing::options("resume") else {
        return skipping("resume_states_are_kept_only_while_given_and_sealed_with_a_key");
    };
    let plain = PostgresStore::connect(options.clone())
        .await
        .expect("connect");
    let session = record("r", 1.0, 1);
    let state = json!({ "bridge": { "token": "secret-token-123", "port": 4 } });
    plain.save(&session, Some(&state)).await.expect("save");
    assert_eq!(
        plain.get_resume_state("r").await.expect("get"),
        Some(state.clone())
    );
    plain.save(&session, None).await.expect("save");
    assert_eq!(plain.get_resume_state("r").await.expect("get"), None);

    options.encryption_key = Some([0x5a; 32]);
    let sealed = PostgresStore::connect(options.clone())
        .await
        .expect("connect");
    sealed.save(&session, Some(&state)).await.expect("save");
    assert_eq!(
        sealed.get_resume_state("r").await.expect("get"),
        Some(state.clone())
    );
    let body: Vec<u8> = raw()
        .await
        .query_one(
            &format!(
                "SELECT body FROM \"{}\".resume_states WHERE session_id = 'r'",
                options.schema
            ),
            &[],
        )
        .await
        .expect("row")
        .get(0);
    assert!(
        !String::from_utf8_lossy(&body).contains("secret-token-123"),
        "the state is not stored in clear"
    );
    let error = plain.get_resume_state("r").await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("is encrypted but the postgres store"),
        "{error}"
    );
    options.encryption_key = Some([0xa5; 32]);
    let wrong = PostgresStore::connect(options).await.expect("connect");
    let error = wrong.get_resume_state("r").await.unwrap_err();
    assert!(
        error.to_string().contains("could not be decrypted"),
        "{error}"
    );
    assert!(!error.to_string().contains("secret-token"));
}

#[tokio::test]
async fn list_is_newest_first_with_ties_by_id_and_delete_forgets() {
    let Some(store) = testing::store("list").await else {
        return skipping("list_is_newest_first_with_ties_by_id_and_delete_forgets");
    };
    for (id, at) in [
        ("b", 5.0),
        ("a", 5.0),
        ("Z", 5.0),
        ("old", 1.0),
        ("new", 9.0),
        ("neg", -0.0),
    ] {
        let mut session = record(id, at, 2);
        session.summary.status = SessionStatus::Suspended;
        store
            .save(&session, Some(&json!({ "for": id })))
            .await
            .expect("save");
    }
    let ids =
        |summaries: Vec<SessionSummary>| summaries.into_iter().map(|s| s.id).collect::<Vec<_>>();
    let mut expected = store.list().await.expect("list");
    crate::engine::store::sort_newest_first(&mut expected);
    assert_eq!(ids(store.list().await.expect("list")), ids(expected));
    assert_eq!(
        ids(store.list().await.expect("list")),
        ["new", "Z", "a", "b", "old", "neg"]
    );
    let json: Value = serde_json::from_str(&store.list_json().await.expect("json")).expect("json");
    assert_eq!(
        json,
        serde_json::to_value(store.list().await.expect("list")).unwrap()
    );
    store.delete("a").await.expect("delete");
    store.delete("never").await.expect("delete of nothing");
    assert_eq!(store.get("a").await.expect("get"), None);
    assert_eq!(store.get_resume_state("a").await.expect("get"), None);
    let schema = store.schema().to_owned();
    assert_eq!(
        count(
            &schema,
            "SELECT count(*) FROM {schema}.messages WHERE session_id = 'a'"
        )
        .await,
        0
    );
    assert_eq!(
        count(&schema, "SELECT count(*) FROM {schema}.resume_states").await,
        5
    );
}

#[tokio::test]
async fn a_damaged_summary_is_reported_and_skipped_by_list() {
    let Some(store) = testing::store("damaged").await else {
        return skipping("a_damaged_summary_is_reported_and_skipped_by_list");
    };
    store.save(&record("ok", 1.0, 1), None).await.expect("save");
    store
        .save(&record("bad", 2.0, 1), None)
        .await
        .expect("save");
    raw()
        .await
        .execute(
            &format!(
                "UPDATE \"{}\".sessions SET summary = '{{not json' WHERE id = 'bad'",
                store.schema()
            ),
            &[],
        )
        .await
        .expect("tamper");
    let listed = store.list().await.expect("list");
    assert_eq!(listed.len(), 1);
    let json = store.list_json().await.expect("list");
    assert!(json.contains("\"ok\"") && !json.contains("not json"));
    let error = store.get("bad").await.unwrap_err();
    assert!(
        error.to_string().contains("unreadable session bad"),
        "{error}"
    );
    assert!(store.is_unreadable("bad"));
    assert_eq!(store.take_unreadable().len(), 1);
    store.delete("bad").await.expect("delete");
    assert!(!store.is_unreadable("bad"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn instances_starting_together_migrate_once() {
    let Some(options) = testing::options("race") else {
        return skipping("instances_starting_together_migrate_once");
    };
    let starts = (0..8).map(|index| {
        let mut options = options.clone();
        options.instance_id = format!("instance-{index}");
        tokio::spawn(async move {
            let store = PostgresStore::connect(options).await?;
            store
                .save(&record(&format!("s{index}"), 1.0, 1), None)
                .await?;
            Ok::<_, SessionError>(store)
        })
    });
    let stores = within(futures::future::join_all(starts)).await;
    for store in stores {
        store
            .expect("joined")
            .expect("every instance starts and writes");
    }
    let schema = &options.schema;
    assert_eq!(
        count(schema, "SELECT count(*) FROM {schema}.migrations").await,
        super::schema::MIGRATIONS.len() as i64
    );
    assert_eq!(
        count(schema, "SELECT count(*) FROM {schema}.sessions").await,
        8
    );
    for table in [
        "leases",
        "turns",
        "submissions",
        "turn_events",
        "commands",
        "instances",
    ] {
        assert_eq!(
            count(schema, &format!("SELECT count(*) FROM {{schema}}.{table}")).await,
            0,
            "{table} exists"
        );
    }
}

#[tokio::test]
async fn a_schema_newer_than_this_build_is_refused() {
    let Some(options) = testing::options("newer") else {
        return skipping("a_schema_newer_than_this_build_is_refused");
    };
    let store = PostgresStore::connect(options.clone())
        .await
        .expect("connect");
    raw()
        .await
        .execute(
            &format!(
                "INSERT INTO \"{}\".migrations (version, name) VALUES (999, 'future')",
                options.schema
            ),
            &[],
        )
        .await
        .expect("a future migration");
    drop(store);
    let error = PostgresStore::connect(options).await.unwrap_err();
    assert!(
        error.to_string().contains("newer than this build"),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreachable_server_is_a_typed_error_without_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let options = PostgresStoreOptions::new(&format!(
        "postgres://app:hunter2secret@127.0.0.1:{port}/db?connect_timeout=2"
    ))
    .expect("options");
    let store = PostgresStore::new(options).expect("no connection yet");
    let error = within(store.get("x")).await.unwrap_err();
    let SessionError::StoreUnavailable { message } = &error else {
        panic!("{error:?}");
    };
    assert!(
        message.contains(&format!("127.0.0.1:{port}/db as app")),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
    assert_eq!(error.code(), "SESSION_STORE_UNAVAILABLE");
    // Tried again at the next call.
    assert!(matches!(
        within(store.list()).await,
        Err(SessionError::StoreUnavailable { .. })
    ));
}

#[tokio::test]
async fn a_wrong_password_is_a_typed_error_without_it() {
    let Some(url) = testing::server_url() else {
        return skipping("a_wrong_password_is_a_typed_error_without_it");
    };
    let client = raw().await;
    client
        .batch_execute(
            "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'hs_nologin') \
             THEN CREATE ROLE hs_nologin NOLOGIN; END IF; END $$",
        )
        .await
        .expect("role");
    let url = url.replacen("postgres://postgres@", "postgres://hs_nologin:pa55word@", 1);
    let store = PostgresStore::new(PostgresStoreOptions::new(&url).expect("options")).unwrap();
    let error = within(store.list()).await.unwrap_err();
    assert!(
        matches!(&error, SessionError::StoreUnavailable { message } if message.contains("not permitted to log in")),
        "{error:?}"
    );
    assert!(!error.to_string().contains("pa55word"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_listener_keeps_its_own_connection_and_gets_notifications() {
    let Some(store) = testing::store("listen").await else {
        return skipping("the_listener_keeps_its_own_connection_and_gets_notifications");
    };
    let listener = store.listener().await.expect("listener");
    let mut notifications = listener.notifications();
    within(listener.listen("hs_test")).await.expect("listen");
    let listen_pid = listener.state().borrow().backend_pid.expect("connected");
    let opened = store.connections().await.expect("pool");
    let client = opened.connections.get().await.expect("a connection");
    let pool_pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    assert_ne!(pool_pid, listen_pid, "two backends");
    client
        .execute("SELECT pg_notify('hs_test', 'a:1:7')", &[])
        .await
        .unwrap();
    let got = within(notifications.recv()).await.expect("a notification");
    assert_eq!(got.channel, "hs_test");
    assert_eq!(got.payload, "a:1:7");

    // The server ends the listening connection: it comes back, listening again.
    let generation = listener.state().borrow().generation;
    client
        .execute("SELECT pg_terminate_backend($1)", &[&listen_pid])
        .await
        .unwrap();
    let mut state = listener.state();
    within(state.wait_for(|s| s.generation > generation && s.backend_pid.is_some()))
        .await
        .expect("reconnected");
    client
        .execute("SELECT pg_notify('hs_test', 'again')", &[])
        .await
        .unwrap();
    loop {
        let got = within(notifications.recv()).await.expect("a notification");
        if got.payload == "again" {
            break;
        }
    }
}

#[tokio::test]
async fn tls_is_used_refused_or_verified_as_the_url_says() {
    let Some(bin) = testing::binaries() else {
        return skipping("tls_is_used_refused_or_verified_as_the_url_says");
    };
    let tls = testing::start_cluster(&bin, &[], true);
    testing::stop_at_exit(&tls);
    let plain = testing::start_cluster(&bin, &[], false);
    testing::stop_at_exit(&plain);
    let ssl_in_use = |url: String| async move {
        let mut options = PostgresStoreOptions::new(&url).expect("options");
        options.schema = testing::fresh_schema("tls");
        let store = PostgresStore::connect(options).await?;
        let opened = store.connections().await?;
        let client = opened.connections.get().await?;
        let ssl: bool = client
            .query_one(
                "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .expect("pg_stat_ssl")
            .get(0);
        Ok::<bool, SessionError>(ssl)
    };
    assert!(within(ssl_in_use(tls.url("sslmode=require")))
        .await
        .unwrap());
    assert!(within(ssl_in_use(tls.url(""))).await.unwrap(), "prefer");
    assert!(!within(ssl_in_use(tls.url("sslmode=disable")))
        .await
        .unwrap());
    assert!(
        !within(ssl_in_use(plain.url(""))).await.unwrap(),
        "prefer, no TLS offered"
    );
    let refused = within(ssl_in_use(plain.url("sslmode=require")))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, SessionError::StoreUnavailable { .. }),
        "{refused:?}"
    );
    // Verified: against the test's authority, by name; Mozilla's roots do not know it.
    let cert = tls.dir.join("ca.crt");
    let localhost = |query: String| {
        format!(
            "postgres://postgres@localhost:{}/postgres?{query}",
            tls.port
        )
    };
    assert!(within(ssl_in_use(localhost(format!(
        "sslmode=verify-full&sslrootcert={}",
        cert.display()
    ))))
    .await
    .unwrap());
    assert!(
        within(ssl_in_use(tls.url(&format!(
            "sslmode=verify-ca&sslrootcert={}",
            cert.display()
        ))))
        .await
        .unwrap(),
        "verify-ca ignores the name"
    );
    let wrong_name = within(ssl_in_use(tls.url(&format!(
        "sslmode=verify-full&sslrootcert={}",
        cert.display()
    ))))
    .await
    .unwrap_err();
    assert!(
        matches!(wrong_name, SessionError::StoreUnavailable { .. }),
        "{wrong_name:?}"
    );
    let unknown = within(ssl_in_use(localhost("sslmode=verify-full".to_owned())))
        .await
        .unwrap_err();
    assert!(
        matches!(unknown, SessionError::StoreUnavailable { .. }),
        "{unknown:?}"
    );
    tls.stop();
    plain.stop();
}
