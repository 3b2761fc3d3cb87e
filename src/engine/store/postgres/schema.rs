//! The store's tables in their schema, created and migrated at first use under a lock.
//!
//! Invariants:
//! - `<schema>.migrations` lists the versions applied; migrations run in order, all of those
//!   missing in one transaction that first takes `pg_advisory_xact_lock` on a key of the schema's
//!   name, so two instances starting together wait for each other and the second finds the work
//!   done (the lock is a mutex held for the migration's transaction only, never a lease: it ends
//!   with the transaction, which also works through a transaction-mode pooler);
//! - a schema at a version newer than this build knows is refused untouched;
//! - a database already at this build's version is checked with one read and no lock.
//!
//! The tables (version 1), every one keyed by session id first:
//! - `sessions`: one row per session: `summary` (the record but its messages, as JSON text, kept
//!   byte for byte), `status` (the summary's, for conditional updates), `updated_at_key`
//!   (`list()`'s order, see [`crate::engine::store::listing::order_key`]), `submissions` and
//!   `command_results` (JSON text or `NULL`), `version` (raised by every write);
//! - `messages`: `(session_id, position)` with no gap, `digest` the SHA-256 of `body`;
//! - `resume_states`: while a session is suspended; `format` 0 JSON text, 1 sealed;
//! - for running one set of sessions on many instances: `instances` (who runs), `leases`
//!   (`session_id`, `owner`, `epoch`, `expires_at` on the database's clock, `sandbox_ref`),
//!   `turns`, `submissions` (unique per session), `turn_events` (the turn log: `(session_id,
//!   turn_id, seq)` with the writer's `epoch`), `commands` (the owner's inbox).

use tokio_postgres::Client;

use super::connection::Connections;
use crate::engine::error::{Result, SessionError};

/// One step of the schema; `sql` names the schema as `{schema}` (written quoted).
#[derive(Clone, Copy)]
pub(crate) struct Migration {
    /// The version the schema has once this step ran.
    pub(crate) version: i32,
    /// What the step does, for errors.
    pub(crate) name: &'static str,
    /// The statements, `{schema}` standing for the quoted schema.
    pub(crate) sql: &'static str,
}

/// Every migration, oldest first.
pub(crate) const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "sessions, messages, resume states, leases and the turn log",
    sql: r#"
CREATE TABLE {schema}.sessions (
    id              text        NOT NULL PRIMARY KEY,
    updated_at_key  bigint      NOT NULL,
    status          text        NOT NULL,
    summary         text        NOT NULL,
    submissions     text,
    command_results text,
    version         bigint      NOT NULL DEFAULT 1,
    written_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sessions_newest_first ON {schema}.sessions (updated_at_key DESC, id COLLATE "C");
CREATE TABLE {schema}.messages (
    session_id text    NOT NULL REFERENCES {schema}.sessions (id) ON DELETE CASCADE,
    position   integer NOT NULL CHECK (position >= 0),
    digest     bytea   NOT NULL,
    body       text    NOT NULL,
    PRIMARY KEY (session_id, position)
);
CREATE TABLE {schema}.resume_states (
    session_id text     NOT NULL PRIMARY KEY REFERENCES {schema}.sessions (id) ON DELETE CASCADE,
    format     smallint NOT NULL,
    body       bytea    NOT NULL
);
CREATE TABLE {schema}.instances (
    owner      text        NOT NULL PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE {schema}.leases (
    session_id  text        NOT NULL PRIMARY KEY,
    owner       text        NOT NULL,
    epoch       bigint      NOT NULL CHECK (epoch > 0),
    expires_at  timestamptz NOT NULL,
    sandbox_ref jsonb
);
CREATE INDEX leases_expiry ON {schema}.leases (expires_at);
CREATE INDEX leases_owner ON {schema}.leases (owner);
CREATE TABLE {schema}.turns (
    session_id       text        NOT NULL,
    turn_id          text        NOT NULL,
    status           text        NOT NULL,
    submission_id    text,
    digest           bytea,
    started_by       text        NOT NULL,
    epoch            bigint      NOT NULL,
    cancel_requested boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    ended_at         timestamptz,
    PRIMARY KEY (session_id, turn_id)
);
CREATE TABLE {schema}.submissions (
    session_id    text        NOT NULL,
    submission_id text        NOT NULL,
    turn_id       text        NOT NULL,
    digest        bytea,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, submission_id)
);
CREATE TABLE {schema}.turn_events (
    session_id text        NOT NULL,
    turn_id    text        NOT NULL,
    seq        bigint      NOT NULL CHECK (seq >= 0),
    epoch      bigint      NOT NULL,
    chunk      text        NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, turn_id, seq)
);
CREATE TABLE {schema}.commands (
    id         bigserial   NOT NULL PRIMARY KEY,
    session_id text        NOT NULL,
    kind       text        NOT NULL,
    payload    jsonb,
    created_by text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX commands_by_session ON {schema}.commands (session_id, id);
"#,
}];

/// `schema` as SQL writes it: quoted (it is a plain identifier, see `config::schema_name`).
pub(crate) fn quoted(schema: &str) -> String {
    format!("\"{schema}\"")
}

/// The key of the advisory lock that serialises the migrations of `schema`: FNV-1a of
/// `harness-sessions:migrate:<schema>`.
fn lock_key(schema: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in b"harness-sessions:migrate:".iter().chain(schema.as_bytes()) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash as i64
}

/// Brings `schema` to the newest of `migrations`.
///
/// # Errors
/// [`SessionError::StoreUnavailable`] when the server cannot be reached, [`SessionError::Host`]
/// when the schema is newer than this build or a migration fails (nothing of it stays).
pub(crate) async fn migrate(
    connections: &Connections,
    schema: &str,
    migrations: &[Migration],
) -> Result<()> {
    let latest = migrations.last().map_or(0, |migration| migration.version);
    let mut client = connections.get().await?;
    let fail = |error: tokio_postgres::Error| {
        connections.failed(&format!("migrate its schema {schema}"), &error)
    };
    if current_version(&client, schema).await.map_err(fail)? == Some(latest) {
        return Ok(());
    }
    let quoted_schema = quoted(schema);
    let tx = client.transaction().await.map_err(fail)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_key(schema)])
        .await
        .map_err(fail)?;
    let exists = tx
        .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema])
        .await
        .map_err(fail)?
        .is_some();
    if !exists {
        tx.batch_execute(&format!("CREATE SCHEMA {quoted_schema}"))
            .await
            .map_err(fail)?;
    }
    tx.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {quoted_schema}.migrations (
             version    integer     NOT NULL PRIMARY KEY,
             name       text        NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now()
         )"
    ))
    .await
    .map_err(fail)?;
    let current: i32 = tx
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {quoted_schema}.migrations"),
            &[],
        )
        .await
        .map_err(fail)?
        .get(0);
    if current > latest {
        return Err(SessionError::host(format!(
            "the postgres store's schema {schema} is at version {current}, newer than this build \
             of harness-sessions knows ({latest}): refusing to touch it"
        )));
    }
    for migration in migrations.iter().filter(|m| m.version > current) {
        let step_failed = |error: tokio_postgres::Error| {
            connections.failed(
                &format!(
                    "migrate its schema {schema} to version {} ({})",
                    migration.version, migration.name
                ),
                &error,
            )
        };
        tx.batch_execute(&migration.sql.replace("{schema}", &quoted_schema))
            .await
            .map_err(step_failed)?;
        tx.execute(
            &format!("INSERT INTO {quoted_schema}.migrations (version, name) VALUES ($1, $2)"),
            &[&migration.version, &migration.name],
        )
        .await
        .map_err(step_failed)?;
    }
    tx.commit().await.map_err(fail)
}

/// The version `schema` is at, `None` when it has no migrations table.
async fn current_version(
    client: &Client,
    schema: &str,
) -> std::result::Result<Option<i32>, tokio_postgres::Error> {
    let table = format!("{}.migrations", quoted(schema));
    let exists: Option<String> = client
        .query_one("SELECT to_regclass($1)::text", &[&table])
        .await?
        .get(0);
    if exists.is_none() {
        return Ok(None);
    }
    let row = client
        .query_one(
            &format!("SELECT coalesce(max(version), 0) FROM {table}"),
            &[],
        )
        .await?;
    Ok(Some(row.get(0)))
}
