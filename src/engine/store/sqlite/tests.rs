//! Tests of the SQLite store on real files in temporary directories: round trips, resume states,
//! incremental writes, migrations, permissions, encryption, a dead worker, concurrency, a writer
//! killed with SIGKILL, and measurements that print their figures (never timed assertions).

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::{json, Value};
use tempfile::TempDir;

use super::schema::{self, Migration, MIGRATIONS};
use super::{from_order_key, order_key, SqliteStore, SqliteStoreOptions};
use crate::engine::error::SessionError;
use crate::engine::session::StoredMessage;
use crate::engine::session::{
    ApprovalVerdict, PendingApproval, PendingInput, PendingToolCall, SessionRecord, SessionStatus,
    SessionSummary, SessionUsage, Timestamp,
};
use crate::engine::store::{sort_newest_first, SessionStore};

const KEY: [u8; 32] = [0x5a; 32];
const OTHER_KEY: [u8; 32] = [0xa5; 32];

fn db_path(dir: &TempDir) -> PathBuf {
    dir.path().join("sessions.db")
}

fn with_key(key: [u8; 32]) -> SqliteStoreOptions {
    SqliteStoreOptions {
        encryption_key: Some(key),
        ..SqliteStoreOptions::default()
    }
}

async fn open(path: &Path) -> SqliteStore {
    SqliteStore::open(path, SqliteStoreOptions::default())
        .await
        .expect("the store opens")
}

/// A second, plain connection on the store's file, to look at and tamper with its rows.
fn raw(path: &Path) -> Connection {
    let conn = Connection::open(path).expect("a raw connection opens");
    conn.busy_timeout(Duration::from_secs(5))
        .expect("busy timeout");
    conn
}

fn count(path: &Path, sql: &str) -> i64 {
    raw(path)
        .query_row(sql, [], |row| row.get(0))
        .expect("the count runs")
}

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
        json!({ "title": format!("session {id}"), "tags": ["a", "b"] }),
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

fn usage(input: u64, output: u64, total: u64) -> SessionUsage {
    SessionUsage {
        input_tokens: input as f64,
        output_tokens: output as f64,
        total_tokens: total as f64,
        extra: serde_json::Map::new(),
    }
}

fn assert_host_error(err: &SessionError, contains: &str) {
    match err {
        SessionError::Host { message, .. } => assert!(
            message.contains(contains),
            "{message:?} should contain {contains:?}"
        ),
        other => panic!("expected a host error containing {contains:?}, got {other:?}"),
    }
}

#[test]
fn order_keys_sort_like_total_cmp_and_keep_every_bit() {
    let values = [
        f64::NEG_INFINITY,
        -1e300,
        -1.5,
        -f64::MIN_POSITIVE,
        -0.0,
        0.0,
        f64::MIN_POSITIVE,
        1.0,
        1_700_000_000_000.5,
        f64::INFINITY,
        f64::NAN,
        -f64::NAN,
    ];
    for a in values {
        assert_eq!(from_order_key(order_key(a)).to_bits(), a.to_bits());
        for b in values {
            assert_eq!(
                order_key(a).cmp(&order_key(b)),
                a.total_cmp(&b),
                "{a} vs {b}"
            );
        }
    }
}

#[tokio::test]
async fn records_round_trip_exactly() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&db_path(&dir)).await;
    let mut extra = serde_json::Map::new();
    extra.insert(
        "owner".to_owned(),
        json!({ "name": "ada", "since": [2024, -0.0] }),
    );
    extra.insert("pinned".to_owned(), json!(true));
    let full = SessionRecord {
        summary: SessionSummary {
            id: "s-ü/1 \u{1f600}".to_owned(),
            status: SessionStatus::AwaitingInput,
            metadata: json!({
                "zeta": 1, "alpha": { "nested": [1, 2.5, -0.0, null, true] },
                "tiny": 1.947_700_395_895_162e-169, "huge": -1.490_143_767_845_386e129,
                "text": "line\nbreak \"quoted\" \u{0}nul",
            }),
            // A time as another program wrote it is kept as it was written.
            created_at: Timestamp::from_text("2026-12-02T01:23:47.944+01:00"),
            updated_at: Timestamp::from_text("not a date"),
            turns: 7,
            usage: SessionUsage {
                extra: serde_json::Map::from_iter([("cachedTokens".to_owned(), json!(4))]),
                ..usage(1, 2, 3)
            },
            error: Some("the sandbox died.".to_owned()),
            pending_input: Some(PendingInput {
                approvals: vec![PendingApproval {
                    approval_id: "ap1".to_owned(),
                    tool_call_id: "tc1".to_owned(),
                    tool_name: "bash".to_owned(),
                    input: json!({ "command": "ls" }),
                    decision: Some(ApprovalVerdict {
                        approved: false,
                        reason: Some("no".to_owned()),
                    }),
                    extra: Default::default(),
                }],
                tool_calls: vec![PendingToolCall {
                    tool_call_id: "tc2".to_owned(),
                    tool_name: "ask".to_owned(),
                    input: Value::Null,
                    extra: Default::default(),
                }],
                extra: Default::default(),
            }),
            extra,
        },
        messages: vec![
            Value::Null.into(),
            json!(3.000_000_000_000_000_4).into(),
            json!("just a string").into(),
            json!([1, [2, [3]]]).into(),
            json!({ "b": 1, "a": 2 }).into(),
        ],
        command_results: Vec::new(),
        submissions: vec![crate::engine::session::Submission {
            id: "sub-1 ü".to_owned(),
            digest: "d".repeat(64),
            reply_id: "reply-1".to_owned(),
        }],
    };
    let bare = SessionRecord {
        summary: SessionSummary {
            metadata: Value::Null,
            ..record("bare", 5.0, 0).summary
        },
        messages: Vec::new(),
        command_results: Vec::new(),
        submissions: Vec::new(),
    };
    store.save(&full, None).await.expect("save");
    store.save(&bare, None).await.expect("save");

    let got = store.get(full.id()).await.expect("get").expect("present");
    assert_eq!(got, full);
    // Object key order is kept, as text, and so is the whole record.
    assert_eq!(
        serde_json::to_string(&got).expect("json"),
        serde_json::to_string(&full).expect("json")
    );
    assert_eq!(store.get("bare").await.expect("get"), Some(bare));
    assert_eq!(store.get("missing").await.expect("get"), None);
    let listed = serde_json::to_value(store.list().await.expect("list")).expect("json");
    let mut summary = serde_json::to_value(&full).expect("json");
    summary
        .as_object_mut()
        .expect("an object")
        .remove("messages");
    // The submissions are the manager's own bookkeeping: `get()` gives them, `list()` does not.
    summary
        .as_object_mut()
        .expect("an object")
        .remove("submissions");
    assert_eq!(
        listed[1], summary,
        "a summary lists with the fields it was given"
    );
    assert_eq!(listed[0]["id"], "bare", "a time that is no date lists last");
}

#[tokio::test]
async fn resume_state_is_kept_only_while_given() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    let store = open(&path).await;
    let mut session = record("s1", 1.0, 3);
    let state = json!({ "token": "bridge-secret", "cursor": [1, 2, 3] });

    store.save(&session, Some(&state)).await.expect("save");
    assert_eq!(
        store.get_resume_state("s1").await.expect("get"),
        Some(state)
    );
    assert_eq!(count(&path, "SELECT count(*) FROM resume_states"), 1);

    session.summary.status = SessionStatus::Idle;
    store.save(&session, None).await.expect("save");
    assert_eq!(store.get_resume_state("s1").await.expect("get"), None);
    assert_eq!(count(&path, "SELECT count(*) FROM resume_states"), 0);
    assert_eq!(store.get("s1").await.expect("get"), Some(session));
    assert_eq!(store.get_resume_state("never").await.expect("get"), None);
}

#[tokio::test]
async fn delete_forgets_the_session_and_every_row_of_it() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    let store = open(&path).await;
    store
        .save(&record("gone", 1.0, 4), Some(&json!({ "t": 1 })))
        .await
        .expect("save");
    store
        .save(&record("kept", 2.0, 2), None)
        .await
        .expect("save");

    store.delete("gone").await.expect("delete");
    store
        .delete("never-was")
        .await
        .expect("deleting a missing id is fine");

    assert_eq!(store.get("gone").await.expect("get"), None);
    assert_eq!(store.get_resume_state("gone").await.expect("get"), None);
    let ids: Vec<String> = store
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|summary| summary.id)
        .collect();
    assert_eq!(ids, ["kept"]);
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM messages WHERE session_id = 'gone'"
        ),
        0
    );
    assert_eq!(count(&path, "SELECT count(*) FROM messages"), 2);
    assert_eq!(count(&path, "SELECT count(*) FROM resume_states"), 0);
}

#[tokio::test]
async fn list_gives_every_summary_newest_first_with_ties_by_id() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&db_path(&dir)).await;
    let times = [
        5.0,
        -3.0,
        5.0,
        0.0,
        -0.0,
        f64::INFINITY,
        1e-300,
        5.0,
        1_700_000_000_000.0,
        -1e300,
    ];
    let mut expected = Vec::new();
    for (index, updated_at) in times.into_iter().enumerate() {
        // Ids out of order, so that ties have to be ordered by id.
        let mut session = record(&format!("id-{}", (index * 7) % 10), updated_at, 1);
        session.summary.usage = usage(index as u64, 0, 0);
        store.save(&session, None).await.expect("save");
        expected.push(session.summary);
    }
    sort_newest_first(&mut expected);
    let listed = store.list().await.expect("list");
    assert_eq!(listed, expected);
}

/// Triggers on a second connection count every row the store inserts, updates or deletes in
/// `messages`: the proof that a save writes only what changed.
#[tokio::test]
async fn a_save_writes_only_the_messages_that_changed() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    let store = open(&path).await;
    raw(&path)
        .execute_batch(
            "CREATE TABLE message_writes (kind TEXT NOT NULL);
             CREATE TRIGGER count_inserts AFTER INSERT ON messages
                 BEGIN INSERT INTO message_writes VALUES ('insert'); END;
             CREATE TRIGGER count_updates AFTER UPDATE ON messages
                 BEGIN INSERT INTO message_writes VALUES ('update'); END;
             CREATE TRIGGER count_deletes AFTER DELETE ON messages
                 BEGIN INSERT INTO message_writes VALUES ('delete'); END;",
        )
        .expect("triggers");
    // (inserts, updates, deletes) since the last call.
    let writes = || {
        let conn = raw(&path);
        let tally = |kind: &str| -> i64 {
            conn.query_row(
                "SELECT count(*) FROM message_writes WHERE kind = ?1",
                [kind],
                |row| row.get(0),
            )
            .expect("tally")
        };
        let counts = (tally("insert"), tally("update"), tally("delete"));
        conn.execute("DELETE FROM message_writes", [])
            .expect("reset");
        counts
    };

    let mut session = record("s", 1.0, 20);
    store.save(&session, None).await.expect("save");
    assert_eq!(
        writes(),
        (20, 0, 0),
        "a new conversation writes every message"
    );

    session.summary.updated_at = Timestamp::from_millis(2.0);
    store
        .save(&session, Some(&json!({ "t": 1 })))
        .await
        .expect("save");
    assert_eq!(writes(), (0, 0, 0), "an unchanged conversation writes none");

    session.messages[19] = message(19, "the streamed reply, longer now");
    store.save(&session, None).await.expect("save");
    assert_eq!(writes(), (0, 1, 0), "a changed last message writes one row");

    session.messages.push(message(20, "another question"));
    session.messages.push(message(21, "another answer"));
    store.save(&session, None).await.expect("save");
    assert_eq!(writes(), (2, 0, 0), "two new messages write two rows");

    session.messages[5] = json!({ "edited": true }).into();
    store.save(&session, None).await.expect("save");
    assert_eq!(
        writes(),
        (0, 1, 0),
        "a message changed in the middle writes one row"
    );

    session.messages.truncate(10);
    store.save(&session, None).await.expect("save");
    assert_eq!(
        writes(),
        (0, 0, 12),
        "a shorter conversation deletes the rows past its end"
    );

    session.messages.clear();
    store.save(&session, None).await.expect("save");
    assert_eq!(writes(), (0, 0, 10));

    session.messages = (0..3).map(|position| message(position, "again")).collect();
    store.save(&session, None).await.expect("save");
    assert_eq!(writes(), (3, 0, 0));
    assert_eq!(store.get("s").await.expect("get"), Some(session));
}

#[tokio::test]
async fn a_store_reopens_after_drop_and_after_close() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    let first = record("a", 1.0, 5);
    {
        let store = open(&path).await;
        store
            .save(&first, Some(&json!({ "k": "v" })))
            .await
            .expect("save");
        // Dropped without close: its thread finishes and the connection closes.
    }
    let store = open(&path).await;
    assert_eq!(store.get("a").await.expect("get"), Some(first.clone()));
    assert_eq!(
        store.get_resume_state("a").await.expect("get"),
        Some(json!({ "k": "v" }))
    );
    let second = record("b", 2.0, 1);
    store.save(&second, None).await.expect("save");
    store.close().await.expect("close");

    let wal = dir.path().join("sessions.db-wal");
    let wal_len = std::fs::metadata(&wal).map_or(0, |metadata| metadata.len());
    assert_eq!(wal_len, 0, "close checkpoints the WAL into the database");

    let store = open(&path).await;
    assert_eq!(store.get("a").await.expect("get"), Some(first));
    assert_eq!(store.get("b").await.expect("get"), Some(second));
    assert_eq!(store.list().await.expect("list").len(), 2);
}

/// Opens `path` with this build's migrations plus `extra`.
async fn open_with_extra(path: &Path, extra: Migration) -> Result<SqliteStore, SessionError> {
    let mut migrations = MIGRATIONS.to_vec();
    migrations.push(extra);
    SqliteStore::open_with_migrations(path, SqliteStoreOptions::default(), migrations).await
}

fn user_version(path: &Path) -> i64 {
    count(path, "PRAGMA user_version")
}

#[tokio::test]
async fn a_file_of_an_older_schema_is_migrated_and_keeps_its_sessions() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    let latest = MIGRATIONS.len() as u32;
    let session = record("old", 1.0, 3);
    {
        let store = open(&path).await;
        store
            .save(&session, Some(&json!({ "resume": true })))
            .await
            .expect("save");
        store.close().await.expect("close");
    }
    assert_eq!(user_version(&path), i64::from(latest));

    // The next schema version, as a future build would ship it: a column and a backfill.
    let next = Migration {
        version: latest + 1,
        name: "message counts",
        apply: |tx| {
            tx.execute_batch(
                "ALTER TABLE sessions ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
                 UPDATE sessions SET message_count =
                     (SELECT count(*) FROM messages WHERE session_id = sessions.id);",
            )
        },
    };
    let store = open_with_extra(&path, next).await.expect("migrates");
    assert_eq!(user_version(&path), i64::from(latest + 1));
    assert_eq!(
        count(&path, "SELECT message_count FROM sessions WHERE id = 'old'"),
        3
    );
    assert_eq!(store.get("old").await.expect("get"), Some(session.clone()));
    assert_eq!(
        store.get_resume_state("old").await.expect("get"),
        Some(json!({ "resume": true }))
    );
    store.close().await.expect("close");

    // Migrating again is a no-op; this build now refuses the newer file.
    open_with_extra(&path, next).await.expect("opens again");
    let err = SqliteStore::open(&path, SqliteStoreOptions::default())
        .await
        .expect_err("a newer schema is refused");
    assert_host_error(&err, "is newer than this build");
}

#[tokio::test]
async fn a_failed_migration_leaves_the_file_at_the_version_before_it() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    let latest = MIGRATIONS.len() as u32;
    let session = record("kept", 1.0, 2);
    {
        let store = open(&path).await;
        store.save(&session, None).await.expect("save");
    }
    let broken = Migration {
        version: latest + 1,
        name: "a step that fails half-way",
        apply: |tx| {
            tx.execute_batch(
                "CREATE TABLE half_done (x INTEGER);
                 DELETE FROM messages;
                 INSERT INTO no_such_table VALUES (1);",
            )
        },
    };
    let err = open_with_extra(&path, broken)
        .await
        .expect_err("the migration fails");
    assert_host_error(
        &err,
        &format!(
            "could not migrate it to schema version {} (a step that fails half-way)",
            latest + 1
        ),
    );
    assert_host_error(&err, "no such table");
    assert_eq!(user_version(&path), i64::from(latest));
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM sqlite_schema WHERE name = 'half_done'"
        ),
        0
    );
    let store = open(&path).await;
    assert_eq!(store.get("kept").await.expect("get"), Some(session));
}

#[tokio::test]
async fn a_new_or_empty_file_is_migrated_from_version_0() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    std::fs::write(&path, b"").expect("an empty file");
    let store = open(&path).await;
    store.save(&record("x", 1.0, 1), None).await.expect("save");
    assert_eq!(user_version(&path), MIGRATIONS.len() as i64);
    assert_eq!(
        count(&path, "PRAGMA application_id"),
        i64::from(schema::APPLICATION_ID)
    );
}

#[tokio::test]
async fn another_applications_database_or_a_non_database_is_refused() {
    let dir = TempDir::new().expect("temp dir");
    let foreign = dir.path().join("foreign.db");
    raw(&foreign)
        .execute_batch("CREATE TABLE sessions (whatever TEXT);")
        .expect("foreign database");
    let err = open_foreign(&foreign).await;
    assert_host_error(&err, "not a harness-sessions store");
    assert_eq!(
        count(&foreign, "SELECT count(*) FROM sqlite_schema"),
        1,
        "untouched"
    );

    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![b'x'; 8192]).expect("garbage file");
    let err = open_foreign(&garbage).await;
    assert_host_error(&err, "could not open the sqlite store at");
    assert_host_error(&err, "file is not a database");

    // A missing folder is created (mode 0700); one that cannot be, under a file, is refused.
    let err = open_foreign(&garbage.join("x.db")).await;
    assert_host_error(&err, "could not create the file");
}

async fn open_foreign(path: &Path) -> SessionError {
    SqliteStore::open(path, SqliteStoreOptions::default())
        .await
        .expect_err("refused")
}

#[test]
fn sqlite_older_than_3_51_3_is_refused() {
    assert!(rusqlite::version_number() >= super::MIN_SQLITE_VERSION_NUMBER);
    schema::check_sqlite_version(rusqlite::version_number())
        .expect("the bundled sqlite is new enough");
    schema::check_sqlite_version(3_051_003).expect("3.51.3 is enough");
    for old in [3_051_002, 3_040_001, 3_007_000] {
        let err = schema::check_sqlite_version(old).expect_err("too old");
        assert_host_error(&err, &format!("version {}", schema::dotted_version(old)));
        assert_host_error(&err, "older than 3.51.3");
    }
    assert_eq!(schema::dotted_version(3_040_001), "3.40.1");
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

#[cfg(unix)]
#[tokio::test]
async fn the_file_and_its_wal_and_shm_are_created_with_mode_0600() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    let store = open(&path).await;
    store
        .save(&record("s", 1.0, 2), Some(&json!({ "secret": 1 })))
        .await
        .expect("save");
    for name in ["sessions.db", "sessions.db-wal", "sessions.db-shm"] {
        assert_eq!(mode(&dir.path().join(name)), 0o600, "{name}");
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_wal_file_more_open_than_the_database_is_narrowed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    open(&path).await.close().await.expect("close");
    let wal = dir.path().join("sessions.db-wal");
    std::fs::write(&wal, b"").expect("an empty WAL");
    std::fs::set_permissions(&wal, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let store = open(&path).await;
    store.save(&record("s", 1.0, 1), None).await.expect("save");
    assert_eq!(mode(&wal), 0o600);
}

#[tokio::test]
async fn encrypted_resume_states_round_trip_and_are_not_stored_in_clear() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    let store = SqliteStore::open(&path, with_key(KEY)).await.expect("open");
    let state = json!({ "token": "bridge-token-do-not-leak", "n": 1.5 });
    store
        .save(&record("s", 1.0, 1), Some(&state))
        .await
        .expect("save");
    assert_eq!(
        store.get_resume_state("s").await.expect("get"),
        Some(state.clone())
    );
    let (format, body): (i64, Vec<u8>) = raw(&path)
        .query_row("SELECT format, body FROM resume_states", [], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .expect("row");
    assert_eq!(format, super::seal::FORMAT_SEALED);
    assert!(!body
        .windows(b"bridge-token".len())
        .any(|window| window == b"bridge-token"));

    // A fresh nonce per write: the same state seals differently.
    store
        .save(&record("s", 2.0, 1), Some(&state))
        .await
        .expect("save");
    let again: Vec<u8> = raw(&path)
        .query_row("SELECT body FROM resume_states", [], |row| row.get(0))
        .expect("row");
    assert_ne!(again, body);
    assert_eq!(store.get_resume_state("s").await.expect("get"), Some(state));
}

/// Every fail-closed error is a host error that names the session and leaks nothing.
fn assert_fails_closed(result: Result<Option<Value>, SessionError>, contains: &str) {
    let err = result.expect_err("fails closed");
    assert_host_error(&err, contains);
    let text = err.to_string();
    assert!(!text.contains("bridge-token"), "{text}");
    assert!(!text.contains("5a5a") && !text.contains("90, 90"), "{text}");
    assert_eq!(text, text.to_lowercase(), "messages are lower-case");
}

async fn store_with_sealed_states(path: &Path) {
    let store = SqliteStore::open(path, with_key(KEY)).await.expect("open");
    for id in ["a", "b"] {
        store
            .save(
                &record(id, 1.0, 1),
                Some(&json!({ "token": format!("bridge-token-{id}") })),
            )
            .await
            .expect("save");
    }
    store.close().await.expect("close");
}

#[tokio::test]
async fn a_flipped_bit_fails_closed() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    store_with_sealed_states(&path).await;
    let mut body: Vec<u8> = raw(&path)
        .query_row(
            "SELECT body FROM resume_states WHERE session_id = 'a'",
            [],
            |row| row.get(0),
        )
        .expect("row");
    let middle = body.len() / 2;
    body[middle] ^= 0x01;
    raw(&path)
        .execute(
            "UPDATE resume_states SET body = ?1 WHERE session_id = 'a'",
            [&body],
        )
        .expect("tamper");
    let store = SqliteStore::open(&path, with_key(KEY)).await.expect("open");
    assert_fails_closed(store.get_resume_state("a").await, "could not be decrypted");
    assert!(store
        .get_resume_state("b")
        .await
        .expect("b is intact")
        .is_some());
}

#[tokio::test]
async fn a_row_swapped_to_another_session_fails_closed() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    store_with_sealed_states(&path).await;
    let conn = raw(&path);
    let body = |id: &str| -> Vec<u8> {
        conn.query_row(
            "SELECT body FROM resume_states WHERE session_id = ?1",
            [id],
            |row| row.get(0),
        )
        .expect("row")
    };
    let (a, b) = (body("a"), body("b"));
    for (id, swapped) in [("a", &b), ("b", &a)] {
        conn.execute(
            "UPDATE resume_states SET body = ?2 WHERE session_id = ?1",
            rusqlite::params![id, swapped],
        )
        .expect("swap");
    }
    drop(conn);
    let store = SqliteStore::open(&path, with_key(KEY)).await.expect("open");
    assert_fails_closed(
        store.get_resume_state("a").await,
        "moved from another session",
    );
    assert_fails_closed(store.get_resume_state("b").await, "could not be decrypted");
}

#[tokio::test]
async fn a_wrong_key_fails_closed() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    store_with_sealed_states(&path).await;
    let store = SqliteStore::open(&path, with_key(OTHER_KEY))
        .await
        .expect("open");
    assert_fails_closed(
        store.get_resume_state("a").await,
        "the encryption key is wrong",
    );
    // The records themselves are not encrypted and stay readable.
    assert!(store.get("a").await.expect("get").is_some());
}

#[tokio::test]
async fn an_encrypted_row_read_without_a_key_fails_closed() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    store_with_sealed_states(&path).await;
    let store = open(&path).await;
    assert_fails_closed(
        store.get_resume_state("a").await,
        "is encrypted but the sqlite store was opened without an encryption key",
    );
}

#[tokio::test]
async fn a_plaintext_row_read_with_a_key_fails_closed() {
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    {
        let store = open(&path).await;
        store
            .save(
                &record("a", 1.0, 1),
                Some(&json!({ "token": "bridge-token-a" })),
            )
            .await
            .expect("save");
    }
    let store = SqliteStore::open(&path, with_key(KEY)).await.expect("open");
    assert_fails_closed(
        store.get_resume_state("a").await,
        "is stored unencrypted but the sqlite store has an encryption key",
    );
    // Saving again with the key seals it.
    store
        .save(
            &record("a", 2.0, 1),
            Some(&json!({ "token": "bridge-token-a" })),
        )
        .await
        .expect("save");
    assert!(store.get_resume_state("a").await.expect("get").is_some());
}

#[test]
fn the_options_never_show_the_key() {
    let shown = format!("{:?}", with_key(KEY));
    assert!(shown.contains("<redacted>"), "{shown}");
    assert!(!shown.contains("90"), "{shown}");
}

/// Fails the test instead of hanging it.
async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("no hang")
}

#[tokio::test]
async fn a_worker_that_panicked_gives_errors_and_never_hangs() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&db_path(&dir)).await;
    store.save(&record("s", 1.0, 1), None).await.expect("save");
    let err = within(store.panic_worker())
        .await
        .expect_err("the panic is an error");
    assert!(matches!(err, SessionError::Internal { .. }), "{err:?}");
    let err = within(store.get("s"))
        .await
        .expect_err("a dead worker gives errors");
    assert!(err.to_string().contains("thread has stopped"), "{err}");
    within(store.save(&record("t", 1.0, 1), None))
        .await
        .expect_err("a dead worker gives errors");
    let err = within(store.close()).await.expect_err("close reports it");
    assert!(matches!(err, SessionError::Internal { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_tasks_save_different_sessions_at_once() {
    let dir = TempDir::new().expect("temp dir");
    let store = Arc::new(open(&db_path(&dir)).await);
    let tasks: Vec<_> = (0..32)
        .map(|task| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let id = format!("task-{task:02}");
                let mut session = record(&id, 0.0, 0);
                for step in 0..20_u32 {
                    session.summary.updated_at = Timestamp::from_millis(f64::from(step));
                    session
                        .messages
                        .push(message(step as usize, &format!("{id} {step}")));
                    let state = (step % 2 == 0).then(|| json!({ "step": step }));
                    store.save(&session, state.as_ref()).await.expect("save");
                    // Reads interleave with the other tasks' writes.
                    assert_eq!(store.get(&id).await.expect("get").as_ref(), Some(&session));
                }
                session
            })
        })
        .collect();
    let mut finals = Vec::new();
    for task in tasks {
        finals.push(task.await.expect("task"));
    }
    let listed = store.list().await.expect("list");
    assert_eq!(listed.len(), 32);
    for session in finals {
        assert_eq!(
            store.get(session.id()).await.expect("get"),
            Some(session.clone())
        );
        assert_eq!(
            store.get_resume_state(session.id()).await.expect("get"),
            None,
            "the last save (step 19) gave no state"
        );
    }
}

// --- The crash test -----------------------------------------------------------------------------

const CRASH_WRITER_ENV: &str = "HARNESS_SESSIONS_SQLITE_CRASH_WRITER";
const CRASH_SESSIONS: usize = 6;

/// Version `version` of crash-test session `session`: the conversation grows, its last message
/// changes every time, an earlier one every seventh time, and it shrinks when `version % 25`
/// wraps, so saves insert, update and delete message rows.
fn crash_record(session: usize, version: u64) -> SessionRecord {
    let len = 1 + (version % 25) as usize;
    SessionRecord {
        summary: SessionSummary {
            updated_at: Timestamp::from_millis(version as f64),
            turns: version,
            usage: usage(0, 0, version * 10),
            ..SessionSummary::new(
                format!("crash-{session}"),
                if version % 3 == 0 {
                    SessionStatus::Idle
                } else {
                    SessionStatus::Suspended
                },
                json!({ "version": version, "session": session }),
                Timestamp::from_millis(1.0),
            )
        },
        messages: (0..len)
            .map(|position| {
                let text = if position + 1 == len {
                    format!("s{session} last v{version} {}", "x".repeat(200))
                } else {
                    format!("s{session} m{position} epoch {}", version / 7)
                };
                message(position, &text)
            })
            .collect(),
        command_results: Vec::new(),
        submissions: Vec::new(),
    }
}

fn crash_resume_state(session: usize, version: u64) -> Option<Value> {
    (version % 3 != 0).then(|| json!({ "token": format!("t-{session}-{version}") }))
}

fn stored_version(record: &SessionRecord) -> u64 {
    record.summary.metadata["version"]
        .as_u64()
        .expect("a version in the metadata")
}

/// The child process of the crash test: saves every crash session over and over, one task per
/// session, printing `saved <session> <version>` once each save has returned, until it is killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the crash test's child process: the crash test runs it"]
async fn crash_writer_child() {
    let Ok(path) = std::env::var(CRASH_WRITER_ENV) else {
        return;
    };
    let store = Arc::new(
        SqliteStore::open(&path, with_key(KEY))
            .await
            .expect("the child opens the store"),
    );
    let tasks: Vec<_> = (0..CRASH_SESSIONS)
        .map(|session| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let id = format!("crash-{session}");
                let mut version = match store.get(&id).await.expect("get") {
                    Some(record) => stored_version(&record),
                    None => 0,
                };
                loop {
                    version += 1;
                    store
                        .save(
                            &crash_record(session, version),
                            crash_resume_state(session, version).as_ref(),
                        )
                        .await
                        .expect("save");
                    println!("saved {session} {version}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("the child's task");
    }
}

/// A tiny xorshift generator: the crash test needs random delays, not a dependency.
struct Random(u64);

impl Random {
    fn seeded() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |elapsed| elapsed.as_nanos() as u64);
        Self(nanos | 1)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// A child process saves in a loop and is killed with SIGKILL at a random moment, again and again;
/// after each kill the file passes `PRAGMA integrity_check` and every session is exactly the
/// version of its last save the child saw return, or of the save in flight when it died.
#[test]
fn a_writer_killed_at_random_moments_leaves_every_session_before_or_after_its_save() {
    const ROUNDS: usize = 12;
    let dir = TempDir::new().expect("temp dir");
    let path = db_path(&dir);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut random = Random::seeded();
    let mut last = vec![0u64; CRASH_SESSIONS];
    let mut total_saves = 0u64;
    let exe = std::env::current_exe().expect("the test binary");
    for round in 0..ROUNDS {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "engine::store::sqlite::tests::crash_writer_child",
                "--ignored",
                "--nocapture",
                "--quiet",
                "--test-threads=1",
            ])
            .env(CRASH_WRITER_ENV, &path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("the child starts");
        let stdout = child.stdout.take().expect("the child's stdout");
        let (lines_sender, lines) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = lines_sender.send(line);
            }
        });
        // Wait for the first save in most rounds; in some, kill it while it opens.
        let mut seen = Vec::new();
        if round % 4 != 3 {
            if let Ok(line) = lines.recv_timeout(Duration::from_secs(60)) {
                seen.push(line);
            }
        }
        std::thread::sleep(Duration::from_millis(random.below(250)));
        child.kill().expect("SIGKILL");
        child.wait().expect("the child is reaped");
        reader.join().expect("the reader thread");
        seen.extend(lines.try_iter());

        let mut seen_last = last.clone();
        for line in &seen {
            // libtest may print its own words before the child's first line on the same line.
            let Some(at) = line.find("saved ") else {
                continue;
            };
            let mut words = line[at..].split_whitespace().skip(1);
            let (Some(session), Some(version)) = (words.next(), words.next()) else {
                continue;
            };
            let (Ok(session), Ok(version)) = (session.parse::<usize>(), version.parse::<u64>())
            else {
                continue;
            };
            seen_last[session] = seen_last[session].max(version);
            total_saves += 1;
        }

        let conn = raw(&path);
        let integrity: String = conn
            .query_row("PRAGMA integrity_check", [], |row| row.get(0))
            .expect("integrity check");
        assert_eq!(integrity, "ok", "round {round}");
        let violations: i64 = conn
            .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |row| {
                row.get(0)
            })
            .unwrap_or(0);
        assert_eq!(violations, 0, "round {round}");
        drop(conn);

        runtime.block_on(async {
            let store = SqliteStore::open(&path, with_key(KEY))
                .await
                .expect("reopen");
            for session in 0..CRASH_SESSIONS {
                let id = format!("crash-{session}");
                let Some(stored) = store.get(&id).await.expect("get") else {
                    assert_eq!(seen_last[session], 0, "session {session} lost its saves");
                    continue;
                };
                let version = stored_version(&stored);
                assert!(
                    version == seen_last[session] || version == seen_last[session] + 1,
                    "round {round}: session {session} is at version {version}, its last \
                     save returned version {}",
                    seen_last[session]
                );
                assert_eq!(stored, crash_record(session, version), "round {round}");
                assert_eq!(
                    store.get_resume_state(&id).await.expect("resume state"),
                    crash_resume_state(session, version),
                    "round {round}"
                );
                last[session] = version;
            }
            store.close().await.expect("close");
        });
    }
    println!(
        "crash test: {ROUNDS} SIGKILLs, {total_saves} saves seen to return, final versions {last:?}"
    );
    assert!(
        total_saves > 0,
        "the child never saved: the test proved nothing"
    );
}

// --- Measurements (printed, never asserted) -----------------------------------------------------

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// The CPU time every thread of this process has used, from Linux's schedstat; `None` elsewhere.
fn cpu_time() -> Option<Duration> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut nanos = 0u64;
    for task in tasks {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        nanos += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(Duration::from_nanos(nanos))
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}

#[tokio::test]
#[ignore = "a measure: npm run bench runs it (figure engine)"]
async fn measure_saves_of_a_20_message_record_with_one_changed_message() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&db_path(&dir)).await;
    let mut session = record("bench", 0.0, 20);
    let state = json!({ "token": "t", "cursor": 1 });
    store.save(&session, Some(&state)).await.expect("save");
    let rounds = 500;
    let mut latencies = Vec::with_capacity(rounds);
    let started = Instant::now();
    for round in 0..rounds {
        session.summary.updated_at = Timestamp::from_millis(round as f64);
        session.messages[19] = message(19, &format!("streamed reply, chunk {round}"));
        let save_started = Instant::now();
        store.save(&session, Some(&state)).await.expect("save");
        latencies.push(save_started.elapsed());
    }
    let elapsed = started.elapsed();
    latencies.sort();
    println!(
        "save, 20 messages, 1 changed: {:.0} commits/s, median {:.2} ms, p95 {:.2} ms, p99 {:.2} ms",
        rounds as f64 / elapsed.as_secs_f64(),
        millis(percentile(&latencies, 0.5)),
        millis(percentile(&latencies, 0.95)),
        millis(percentile(&latencies, 0.99)),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measure: npm run bench runs it (figure engine)"]
async fn measure_concurrent_saves() {
    let dir = TempDir::new().expect("temp dir");
    let store = Arc::new(open(&db_path(&dir)).await);
    let tasks = 16;
    let per_task = 100;
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|task| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut session = record(&format!("c{task}"), 0.0, 20);
                for round in 0..per_task {
                    session.summary.updated_at = Timestamp::from_millis(round as f64);
                    session.messages[19] = message(19, &format!("chunk {round}"));
                    store.save(&session, None).await.expect("save");
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.expect("task");
    }
    let elapsed = started.elapsed();
    println!(
        "save, {tasks} tasks at once, 20 messages, 1 changed: {:.0} saves/s (group commit)",
        f64::from(tasks * per_task) / elapsed.as_secs_f64()
    );
}

#[tokio::test]
#[ignore = "a measure: npm run bench runs it (figure engine)"]
async fn measure_list_and_get_with_10000_sessions() {
    let dir = TempDir::new().expect("temp dir");
    let store = open(&db_path(&dir)).await;
    let sessions = 10_000;
    let mut batch = Vec::new();
    for index in 0..sessions {
        let mut session = record(
            &format!("session-{index:05}"),
            (index * 7919 % sessions) as f64,
            if index % 100 == 0 { 20 } else { 4 },
        );
        if index % 10 == 0 {
            session.summary.status = SessionStatus::AwaitingInput;
            session.summary.pending_input = Some(PendingInput {
                approvals: Vec::new(),
                tool_calls: vec![PendingToolCall {
                    tool_call_id: format!("tc{index}"),
                    tool_name: "ask".to_owned(),
                    input: json!({ "question": "which?" }),
                    extra: Default::default(),
                }],
                extra: Default::default(),
            });
        }
        session.summary.usage = usage(index as u64, index as u64 * 2, 0);
        batch.push(session);
        if batch.len() == 1_000 {
            store.save_many(&batch).await.expect("seed");
            batch.clear();
        }
    }
    let listed = store.list().await.expect("list");
    assert_eq!(listed.len(), sessions);
    let mut expected = listed.clone();
    sort_newest_first(&mut expected);
    assert_eq!(listed, expected);

    let mut list_times = Vec::new();
    let cpu_before = cpu_time();
    for _ in 0..40 {
        let started = Instant::now();
        let listed = store.list().await.expect("list");
        list_times.push(started.elapsed());
        assert_eq!(listed.len(), sessions);
    }
    let cpu_per_list = cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| millis(after.saturating_sub(before)) / 40.0);
    list_times.sort();
    let mut get_times = Vec::new();
    let mut random = Random::seeded();
    for round in 0..400 {
        // Half the reads are of 20-message records.
        let index = if round % 2 == 0 {
            random.below(100) * 100
        } else {
            random.below(sessions as u64)
        };
        let started = Instant::now();
        let got = store
            .get(&format!("session-{index:05}"))
            .await
            .expect("get");
        get_times.push(started.elapsed());
        assert!(got.is_some());
    }
    get_times.sort();
    println!(
        "list, {sessions} sessions: median {:.2} ms, p95 {:.2} ms, min {:.2} ms; get (4 or 20 \
         messages): median {:.3} ms, p95 {:.3} ms",
        millis(percentile(&list_times, 0.5)),
        millis(percentile(&list_times, 0.95)),
        millis(list_times[0]),
        millis(percentile(&get_times, 0.5)),
        millis(percentile(&get_times, 0.95)),
    );
    if let Some(cpu) = cpu_per_list {
        println!(
            "list, {sessions} sessions: {cpu:.2} ms of CPU per call, every thread, dropping the \
             result included (wall times above vary with the machine's load)"
        );
    }
}

#[test]
fn a_record_is_the_same_after_any_number_of_saves() {
    // Guards the digest comparison against stale rows: every prefix/suffix edit round trips.
    let dir = TempDir::new().expect("temp dir");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = open(&db_path(&dir)).await;
        let mut random = Random::seeded();
        let mut session = record("edit", 0.0, 0);
        let mut texts: HashMap<usize, u64> = HashMap::new();
        for step in 0..300u64 {
            match random.below(4) {
                0 => session
                    .messages
                    .push(message(session.messages.len(), "new")),
                1 if !session.messages.is_empty() => {
                    let position = random.below(session.messages.len() as u64) as usize;
                    let edits = texts.entry(position).or_default();
                    *edits += 1;
                    session.messages[position] = message(position, &format!("edit {edits}"));
                }
                2 => {
                    let keep = random.below(session.messages.len() as u64 + 1) as usize;
                    session.messages.truncate(keep);
                }
                _ => session.summary.updated_at = Timestamp::from_millis(step as f64),
            }
            store.save(&session, None).await.expect("save");
            assert_eq!(
                store.get("edit").await.expect("get").as_ref(),
                Some(&session)
            );
        }
    });
}

#[tokio::test]
async fn list_json_is_list_written_as_json() {
    let dir = TempDir::new().unwrap();
    let store = open(&db_path(&dir)).await;
    for (i, updated_at) in [5.0, 1.5, 5.0, 1e12 + 0.25, -0.0].into_iter().enumerate() {
        let mut record = record(&format!("s{i}"), updated_at, 1);
        record.summary.error = (i % 2 == 0).then(|| format!("error \"{i}\" ✓"));
        record.summary.usage = usage(i as u64, 3, 0);
        record.summary.turns = i as u64;
        record.summary.metadata =
            serde_json::json!({"title": format!("t{i}"), "nested": [i, null]});
        store.save(&record, None).await.unwrap();
    }
    let listed = serde_json::to_value(store.list().await.unwrap()).unwrap();
    let json: Value = serde_json::from_str(&store.list_json().await.unwrap()).unwrap();
    assert_eq!(json, listed);
}

#[tokio::test]
async fn a_damaged_summary_is_an_error_never_a_broken_list() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    let store = open(&path).await;
    for i in 0..3 {
        store
            .save(&record(&format!("s{i}"), f64::from(i), 1), None)
            .await
            .unwrap();
    }
    raw(&path)
        .execute(
            "UPDATE sessions SET summary = '{\"id\":' WHERE id = 's2'",
            [],
        )
        .unwrap();
    // A damaged row is set aside, not fatal: listed without it, and given once as unreadable.
    let json: Value = serde_json::from_str(&store.list_json().await.unwrap()).unwrap();
    let ids: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, ["s1", "s0"]);
    let unreadable = store.take_unreadable();
    assert_eq!(unreadable.len(), 1);
    assert_eq!(unreadable[0].0, "s2");
    assert!(store.take_unreadable().is_empty(), "each is given once");
    assert_host_error(&store.get("s2").await.unwrap_err(), "unreadable session s2");
    raw(&path)
        .execute("UPDATE sessions SET summary = NULL WHERE id = 's1'", [])
        .unwrap();
    assert_host_error(&store.get("s1").await.unwrap_err(), "damaged summary");
}

/// The ids of a `list_since` answer's rows that carry their summary, and the answer's stamp.
fn fresh_ids(answer: &str) -> (u64, Vec<String>) {
    let answer: Value = serde_json::from_str(answer).expect("an answer is JSON");
    let ids = answer[1]
        .as_array()
        .map(|rows| {
            rows.iter()
                .filter_map(|row| row[1]["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (answer[0].as_u64().expect("a stamp"), ids)
}

#[tokio::test]
async fn list_since_answers_from_the_listing_and_shows_every_write() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    let store = open(&path).await;
    store.save(&record("a", 1.0, 1), None).await.unwrap();
    store.save(&record("b", 2.0, 1), None).await.unwrap();
    let (known, ids) = fresh_ids(&store.list_since(0).await.unwrap());
    assert_eq!(ids, ["b", "a"]);
    assert_eq!(
        store.list_since(known).await.unwrap(),
        format!("[{known}]"),
        "nothing changed: the stamp alone"
    );

    // A save of this store: listed at its new place, alone with its summary.
    store.save(&record("a", 3.0, 2), None).await.unwrap();
    let answer: Value = serde_json::from_str(&store.list_since(known).await.unwrap()).unwrap();
    assert_eq!(answer[1][0][1]["id"], "a", "a moved first");
    assert!(answer[1][1].is_u64(), "b as a bare stamp: unchanged");
    let known = answer[0].as_u64().unwrap();

    // A delete is a change.
    store.delete("b").await.unwrap();
    let answer: Value = serde_json::from_str(&store.list_since(known).await.unwrap()).unwrap();
    assert_eq!(answer[1].as_array().unwrap().len(), 1);
    let known = answer[0].as_u64().unwrap();

    // Another connection's write (a tool on the file): read again, every summary fresh.
    raw(&path)
        .execute(
            "UPDATE sessions SET summary = json_set(summary, '$.metadata.title', 'renamed')",
            [],
        )
        .unwrap();
    let answer: Value = serde_json::from_str(&store.list_since(known).await.unwrap()).unwrap();
    assert_eq!(answer[1][0][1]["metadata"]["title"], "renamed");
    let known = answer[0].as_u64().unwrap();
    assert_eq!(store.list_since(known).await.unwrap(), format!("[{known}]"));
    assert_eq!(
        serde_json::from_str::<Value>(&store.list_json().await.unwrap()).unwrap()[0]["metadata"]
            ["title"],
        "renamed"
    );
}

#[tokio::test]
async fn a_store_opened_again_never_gives_a_stamp_twice() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    let store = open(&path).await;
    store.save(&record("a", 1.0, 1), None).await.unwrap();
    let (known, _) = fresh_ids(&store.list_since(0).await.unwrap());
    store.release().await.unwrap();
    // While released, another store writes the file.
    {
        let other = open(&path).await;
        other.save(&record("b", 2.0, 1), None).await.unwrap();
        other.close().await.unwrap();
    }
    let (stamp, ids) = fresh_ids(&store.list_since(known).await.unwrap());
    assert!(stamp > known);
    assert_eq!(ids, ["b", "a"], "a listing read again: every summary fresh");
}

#[tokio::test]
async fn a_damaged_row_written_by_another_connection_is_set_aside_then_listed_once_repaired() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    let store = open(&path).await;
    store.save(&record("a", 1.0, 1), None).await.unwrap();
    store.save(&record("b", 2.0, 1), None).await.unwrap();
    let (known, _) = fresh_ids(&store.list_since(0).await.unwrap());
    raw(&path)
        .execute("UPDATE sessions SET summary = '{' WHERE id = 'b'", [])
        .unwrap();
    let (known, ids) = fresh_ids(&store.list_since(known).await.unwrap());
    assert_eq!(ids, ["a"]);
    assert_eq!(store.take_unreadable().len(), 1);
    // Written whole again by this store: listed.
    store.save(&record("b", 2.0, 1), None).await.unwrap();
    let (_, ids) = fresh_ids(&store.list_since(known).await.unwrap());
    assert_eq!(ids, ["b"]);
}

#[tokio::test]
#[ignore = "a measure: npm run bench runs it (figure engine)"]
async fn measure_list_json() {
    let dir = TempDir::new().unwrap();
    let store = open(&db_path(&dir)).await;
    for i in 0..10_000 {
        let mut r = record(&format!("session-{i:05}"), f64::from(i), 0);
        r.summary.usage = usage(120, 80, 200);
        store.save(&r, None).await.unwrap();
    }
    let mut known = 0;
    for _ in 0..3 {
        let t = std::time::Instant::now();
        let json = store.list_json().await.unwrap();
        let whole = t.elapsed();
        let t = std::time::Instant::now();
        let since = store.list_since(known).await.unwrap();
        println!(
            "list_json {whole:?} ({} bytes), list_since({known}) {:?} ({} bytes)",
            json.len(),
            t.elapsed(),
            since.len()
        );
        let answer: Value = serde_json::from_str(&since).unwrap();
        known = answer[0].as_u64().unwrap();
    }
}

/// The file `__test__/fixtures/stores/v2.db` (written by harness-sessions 0.1, schema version 2:
/// epoch milliseconds, no `turns`, `usage` as the agent gave it or none) and what that release
/// read back from it (`v2.json`).
fn fixture_v2(dir: &TempDir) -> (PathBuf, Value) {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("__test__/fixtures/stores");
    let path = dir.path().join("v2.db");
    std::fs::copy(fixtures.join("v2.db"), &path).expect("the fixture copies");
    let read = std::fs::read_to_string(fixtures.join("v2.json")).expect("the fixture reads");
    (
        path,
        serde_json::from_str(&read).expect("the fixture is JSON"),
    )
}

#[tokio::test]
async fn a_file_of_the_0_1_release_is_migrated_in_place_to_records_of_the_reference() {
    let dir = TempDir::new().unwrap();
    let (path, before) = fixture_v2(&dir);
    assert_eq!(user_version(&path), 2);
    let store = open(&path).await;
    assert_eq!(user_version(&path), MIGRATIONS.len() as i64);
    let columns: Vec<String> = raw(&path)
        .prepare("SELECT name FROM pragma_table_info('sessions')")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        columns,
        [
            "id",
            "updated_at_key",
            "summary",
            "submissions",
            "command_results"
        ]
    );

    let before = before.as_object().expect("sessions by id");
    assert_eq!(before.len(), 7);
    for (id, old) in before {
        let old_record = &old["record"];
        let mut expected = old_record.clone();
        let object = expected.as_object_mut().unwrap();
        for key in ["createdAt", "updatedAt"] {
            let millis = old_record[key].as_f64().unwrap();
            object.insert(key.into(), json!(Timestamp::from_millis(millis).as_str()));
        }
        let assistant = old_record["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        object.insert("turns".into(), json!(assistant));
        let count = |key: &str| old_record["usage"][key].as_u64().unwrap_or(0);
        object.insert(
            "usage".into(),
            json!({
                "inputTokens": count("inputTokens"),
                "outputTokens": count("outputTokens"),
                "totalTokens": count("totalTokens"),
            }),
        );
        let got = store.get(id).await.unwrap().expect("every session is kept");
        assert_eq!(
            serde_json::to_value(&got).unwrap(),
            expected,
            "session {id}"
        );
        assert_eq!(
            store.get_resume_state(id).await.unwrap(),
            old["resumeState"].as_object().map(|state| json!(state)),
            "the resume state of {id}"
        );
    }
    // The times are those of the old file, to the millisecond.
    let idle = store.get("idle").await.unwrap().unwrap().summary;
    assert_eq!(
        idle.created_at.millis(),
        before["idle"]["record"]["createdAt"].as_f64().unwrap()
    );
    assert_eq!(idle.turns, 1);
    assert_eq!(
        serde_json::to_value(&idle.usage).unwrap(),
        json!({"inputTokens": 12, "outputTokens": 3, "totalTokens": 15})
    );
    let fresh = store.get("fresh").await.unwrap().unwrap().summary;
    assert_eq!((fresh.turns, fresh.usage.total_tokens), (0, 0.0));
    let waiting = store.get("suspended-awaiting").await.unwrap().unwrap();
    assert_eq!(waiting.summary.status, SessionStatus::Suspended);
    assert_eq!(waiting.summary.pending_input.unwrap().approvals.len(), 1);
    // Newest first, as before.
    let order: Vec<String> = store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|summary| summary.id)
        .collect();
    let mut old_order: Vec<(f64, &String)> = before
        .iter()
        .map(|(id, old)| (old["record"]["updatedAt"].as_f64().unwrap(), id))
        .collect();
    old_order.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    assert_eq!(
        order,
        old_order
            .into_iter()
            .map(|(_, id)| id.clone())
            .collect::<Vec<_>>()
    );
    // A migrated session saves and reads back as any other.
    let mut again = store.get("idle").await.unwrap().unwrap();
    again.summary.turns += 1;
    store.save(&again, None).await.unwrap();
    assert_eq!(store.get("idle").await.unwrap(), Some(again));
}

#[tokio::test]
async fn a_migration_that_meets_a_damaged_row_leaves_the_file_as_it_was() {
    let dir = TempDir::new().unwrap();
    let (path, _) = fixture_v2(&dir);
    raw(&path)
        .execute("UPDATE sessions SET metadata = '{' WHERE id = 'closed'", [])
        .unwrap();
    let err = SqliteStore::open(&path, SqliteStoreOptions::default())
        .await
        .expect_err("the migration fails");
    assert_host_error(&err, "could not migrate it to schema version 3");
    assert_host_error(&err, "session closed holds metadata that cannot be read");
    assert_eq!(user_version(&path), 2);
    assert_eq!(
        count(&path, "SELECT count(*) FROM pragma_table_info('sessions')"),
        9,
        "every column is still there"
    );
    assert_eq!(
        count(
            &path,
            "SELECT count(*) FROM sessions WHERE summary LIKE '%\"createdAt\":\"%'"
        ),
        0,
        "no summary was rewritten"
    );
}

#[tokio::test]
async fn a_file_of_a_newer_schema_is_refused_and_left_untouched() {
    let dir = TempDir::new().unwrap();
    let path = db_path(&dir);
    {
        let store = open(&path).await;
        store.save(&record("a", 1.0, 1), None).await.unwrap();
        store.close().await.unwrap();
    }
    raw(&path)
        .pragma_update(None, "user_version", MIGRATIONS.len() as i64 + 1)
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = SqliteStore::open(&path, SqliteStoreOptions::default())
        .await
        .expect_err("a newer file is refused");
    assert_host_error(&err, "is newer than this build of harness-sessions knows");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file is untouched"
    );
}
