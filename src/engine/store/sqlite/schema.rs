//! Opening the database file: its permissions, the SQLite library it needs, the connection's
//! settings, and the versioned schema with its migrations.
//!
//! Invariants:
//! - the linked SQLite is at least [`MIN_SQLITE_VERSION_NUMBER`] (3.51.3, the WAL-reset corruption
//!   fix), or nothing is opened;
//! - a file this module creates is created with mode 0600 before SQLite ever opens it, so there is
//!   no moment where it is more open than that; SQLite gives the `-wal` and `-shm` files the main
//!   file's mode, and `-wal`/`-shm` files left more open than the main file are narrowed to it;
//! - the connection runs in WAL mode with `synchronous=FULL`, foreign keys on and a busy timeout,
//!   each checked after it is set;
//! - `PRAGMA user_version` is the schema version: migrations run in order, each in its own
//!   `BEGIN IMMEDIATE` transaction that also sets the version, so a crash leaves the file at the
//!   version before or after a migration, never between; a file newer than this build, or a file
//!   that is another application's database, is refused untouched.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use super::{describe, MIN_SQLITE_VERSION_NUMBER};
use crate::engine::error::{Result, SessionError};

/// `PRAGMA application_id` of a harness-sessions store: `HSES` in ASCII.
pub(super) const APPLICATION_ID: i32 = 0x4853_4553;

/// One step of the schema: it brings a file from `version - 1` to `version`.
#[derive(Clone, Copy)]
pub(super) struct Migration {
    /// The schema version the file has once this step ran.
    pub(super) version: u32,
    /// What the step does, for error messages.
    pub(super) name: &'static str,
    /// The step, run inside the migration's transaction.
    pub(super) apply: fn(&Transaction<'_>) -> rusqlite::Result<()>,
}

/// Every migration, oldest first; the last one's version is the current schema version.
pub(super) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "sessions, messages and resume states",
        apply: create_tables,
    },
    Migration {
        version: 2,
        name: "each session's summary as JSON",
        apply: add_summaries,
    },
    Migration {
        version: 3,
        name: "records of the reference's shape",
        apply: adopt_reference_records,
    },
    Migration {
        version: 4,
        name: "each session's last submissions",
        apply: add_submissions,
    },
    Migration {
        version: 5,
        name: "the results of keyed commands",
        apply: add_command_results,
    },
];

/// Schema version 5: `sessions.command_results`, the results of the commands `exec()` ran with a
/// `key`, as JSON text (`NULL` when there are none).
fn add_command_results(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE sessions ADD COLUMN command_results TEXT")
}

/// Schema version 4: `sessions.submissions`, the session's last submissions (`submissionId`s) as
/// JSON text, `NULL` when it has none.
fn add_submissions(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE sessions ADD COLUMN submissions TEXT")
}

/// Schema version 3: the summary JSON (`sessions.summary`) is the whole summary, in the shape of
/// `ai-sdk-harness-sessions` (ISO 8601 `createdAt`/`updatedAt`, `turns`, `usage` with its three
/// keys) with any field a caller gave kept; the columns it was made from go, but for
/// `updated_at_key`, `list()`'s order.
///
/// Each row's summary is written anew from its columns: the times in ISO 8601, `usage` cut to its
/// three counts (zeros when the session had no turn), `turns` the number of its assistant
/// messages (versions 1 and 2 did not count turns: a turn leaves one assistant message, a turn
/// continued after a pause continues the same one, so this is the fewest it can have had).
/// A row that cannot be read fails the migration, which leaves the file as it was.
fn adopt_reference_records(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    use crate::engine::session::{PendingInput, SessionStatus, SessionSummary, Timestamp};

    let damaged = |id: &str, what: &str| {
        rusqlite::Error::ToSqlConversionFailure(
            format!("session {id} holds {what} that cannot be read").into(),
        )
    };
    let mut rewritten = Vec::new();
    {
        let mut rows = tx.prepare(
            "SELECT id, status, metadata, created_at_key, updated_at_key, error, pending_input, \
                    usage, (SELECT count(*) FROM messages \
                            WHERE session_id = sessions.id AND body ->> '$.role' = 'assistant') \
               FROM sessions",
        )?;
        let mut rows = rows.query([])?;
        while let Some(row) = rows.next()? {
            let id: String = row.get(0)?;
            let status: String = row.get(1)?;
            let status = SessionStatus::ALL
                .into_iter()
                .find(|known| known.as_str() == status)
                .ok_or_else(|| damaged(&id, "a status"))?;
            let metadata: String = row.get(2)?;
            let metadata = serde_json::from_str(&metadata).map_err(|_| damaged(&id, "metadata"))?;
            let time = |index: usize| -> rusqlite::Result<Timestamp> {
                Ok(Timestamp::from_millis(super::from_order_key(
                    row.get(index)?,
                )))
            };
            let mut summary = SessionSummary::new(id.clone(), status, metadata, time(3)?);
            summary.updated_at = time(4)?;
            summary.error = row.get(5)?;
            summary.pending_input = row
                .get::<_, Option<String>>(6)?
                .map(|text| serde_json::from_str::<PendingInput>(&text))
                .transpose()
                .map_err(|_| damaged(&id, "a pending input"))?;
            if let Some(usage) = row.get::<_, Option<String>>(7)? {
                let usage = serde_json::from_str(&usage).map_err(|_| damaged(&id, "a usage"))?;
                summary.usage.add(&usage);
            }
            summary.turns = row.get::<_, i64>(8)?.try_into().unwrap_or(0);
            let text = serde_json::to_string(&summary).map_err(|_| damaged(&id, "a summary"))?;
            let key = super::order_key(summary.updated_at.millis());
            rewritten.push((id, key, text));
        }
    }
    for (id, key, text) in rewritten {
        tx.execute(
            "UPDATE sessions SET summary = ?2, updated_at_key = ?3 WHERE id = ?1",
            rusqlite::params![id, text, key],
        )?;
    }
    tx.execute_batch(
        "ALTER TABLE sessions DROP COLUMN status;
         ALTER TABLE sessions DROP COLUMN metadata;
         ALTER TABLE sessions DROP COLUMN created_at_key;
         ALTER TABLE sessions DROP COLUMN error;
         ALTER TABLE sessions DROP COLUMN pending_input;
         ALTER TABLE sessions DROP COLUMN usage;",
    )
}

/// Schema version 2: `sessions.summary`, the summary as JSON text, written with the other columns
/// at each save, so that `list()` joins stored texts rather than writing JSON for every row. Rows
/// saved before it have none until their next save: `list()` writes theirs from their columns.
fn add_summaries(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch("ALTER TABLE sessions ADD COLUMN summary TEXT")
}

/// Schema version 1 (version 3 keeps of `sessions` only `id`, `updated_at_key` and the summary).
///
/// - `sessions`: one row per session, everything `list()` gives, so it never reads messages.
///   `created_at_key`/`updated_at_key` hold the `f64` milliseconds as order keys
///   ([`super::order_key`]): integers that turn back into the exact same `f64` (a SQLite `REAL`
///   loses `-0.0` and turns NaN into NULL) and sort like `f64::total_cmp`, so `ORDER BY
///   updated_at_key DESC, id` is `list()`'s order.
/// - `messages`: one row per message, `position` 0.. with no gap, `digest` the SHA-256 of `body`
///   (the message as JSON text), which is what lets a save write only the messages that changed.
/// - `resume_states`: a row only while a session is suspended; `format` 0 is JSON text, 1 is
///   XChaCha20-Poly1305 (`nonce || ciphertext || tag`, see `seal`).
fn create_tables(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "CREATE TABLE sessions (
             id             TEXT    NOT NULL PRIMARY KEY,
             status         TEXT    NOT NULL,
             metadata       TEXT    NOT NULL,
             created_at_key INTEGER NOT NULL,
             updated_at_key INTEGER NOT NULL,
             error          TEXT,
             pending_input  TEXT,
             usage          TEXT
         ) STRICT;
         CREATE TABLE messages (
             session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
             position   INTEGER NOT NULL CHECK (position >= 0),
             digest     BLOB    NOT NULL,
             body       TEXT    NOT NULL,
             PRIMARY KEY (session_id, position)
         ) STRICT, WITHOUT ROWID;
         CREATE TABLE resume_states (
             session_id TEXT    NOT NULL PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
             format     INTEGER NOT NULL,
             body       BLOB    NOT NULL
         ) STRICT, WITHOUT ROWID;",
    )?;
    tx.pragma_update(None, "application_id", APPLICATION_ID)
}

/// Refuses a SQLite library older than 3.51.3, whose WAL reset can corrupt a database.
///
/// # Errors
/// [`SessionError::Host`] naming the version found, when it is older.
pub(super) fn check_sqlite_version(found: i32) -> Result<()> {
    if found >= MIN_SQLITE_VERSION_NUMBER {
        return Ok(());
    }
    Err(SessionError::host(format!(
        "the sqlite library is version {}, older than 3.51.3 which fixes a corruption of WAL \
         databases: refusing to open the sqlite store",
        dotted_version(found)
    )))
}

/// `3051003` as `3.51.3`.
pub(super) fn dotted_version(number: i32) -> String {
    format!(
        "{}.{}.{}",
        number / 1_000_000,
        number / 1_000 % 1_000,
        number % 1_000
    )
}

/// Opens the store's connection on `path`: creates the file, applies the settings, checks the file
/// is a harness-sessions store (or empty), and migrates it to the newest of `migrations`.
///
/// # Errors
/// [`SessionError::Host`] saying what failed and naming the path.
pub(super) fn open_connection(
    path: &Path,
    busy_timeout: Duration,
    migrations: &[Migration],
) -> Result<Connection> {
    let fail = |what: String| {
        SessionError::host(format!(
            "could not open the sqlite store at {}: {what}",
            path.display()
        ))
    };
    check_sqlite_version(rusqlite::version_number())?;
    create_private_file(path).map_err(|err| fail(format!("could not create the file: {err}")))?;
    narrow_sidecar_modes(path).map_err(|err| {
        fail(format!(
            "could not restrict the permissions of its -wal/-shm files: {err}"
        ))
    })?;
    // No SQLITE_OPEN_CREATE: the file exists (created above), and SQLite must never create it
    // with its own default mode.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags).map_err(|err| fail(describe(&err)))?;
    configure(&conn, busy_timeout).map_err(fail)?;
    check_identity(&conn).map_err(fail)?;
    migrate(&mut conn, migrations).map_err(fail)?;
    Ok(conn)
}

/// Creates `path` with mode 0600 if it does not exist, and its missing parent folders with mode
/// 0700; an existing file or folder keeps its mode.
pub(super) fn create_private_file(path: &Path) -> std::io::Result<()> {
    if let Some(parent) = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
    {
        let mut folders = std::fs::DirBuilder::new();
        folders.recursive(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            folders.mode(0o700);
        }
        folders.create(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}

/// Narrows existing `-wal` and `-shm` files to the main file's mode: SQLite creates them with it,
/// but files left by another tool could be more open.
#[cfg(unix)]
fn narrow_sidecar_modes(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let main_mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
    for suffix in ["-wal", "-shm"] {
        let mut sidecar = path.as_os_str().to_owned();
        sidecar.push(suffix);
        let metadata = match std::fs::symlink_metadata(&sidecar) {
            Ok(metadata) => metadata,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(err),
        };
        if !metadata.is_file() {
            continue;
        }
        let mode = metadata.permissions().mode() & 0o777;
        if mode & !main_mode != 0 {
            std::fs::set_permissions(&sidecar, std::fs::Permissions::from_mode(mode & main_mode))?;
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn narrow_sidecar_modes(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Busy timeout, foreign keys, WAL, `synchronous=FULL`, secure delete: set, then read back.
fn configure(conn: &Connection, busy_timeout: Duration) -> Result<(), String> {
    let setting =
        |name: &str, err: rusqlite::Error| format!("could not set {name}: {}", describe(&err));
    conn.busy_timeout(busy_timeout)
        .map_err(|err| setting("the busy timeout", err))?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(|err| setting("foreign_keys", err))?;
    let foreign_keys: i64 = conn
        .pragma_query_value(None, "foreign_keys", |row| row.get(0))
        .map_err(|err| setting("foreign_keys", err))?;
    if foreign_keys != 1 {
        return Err("sqlite refused to turn foreign keys on".to_owned());
    }
    let journal_mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0))
        .map_err(|err| setting("the WAL journal mode", err))?;
    if !journal_mode.eq_ignore_ascii_case("wal") {
        return Err(format!(
            "sqlite refused the WAL journal mode (it kept {journal_mode:?})"
        ));
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(|err| setting("synchronous=FULL", err))?;
    let synchronous: i64 = conn
        .pragma_query_value(None, "synchronous", |row| row.get(0))
        .map_err(|err| setting("synchronous=FULL", err))?;
    if synchronous != 2 {
        return Err("sqlite refused synchronous=FULL".to_owned());
    }
    // Resume states are secrets: overwrite what a delete or an update frees.
    conn.pragma_update(None, "secure_delete", true)
        .map_err(|err| setting("secure_delete", err))?;
    conn.pragma_update(None, "trusted_schema", false)
        .map_err(|err| setting("trusted_schema", err))?;
    Ok(())
}

/// Refuses a file that is another application's database.
fn check_identity(conn: &Connection) -> Result<(), String> {
    let read = |err: rusqlite::Error| format!("could not read its header: {}", describe(&err));
    let application_id: i32 = conn
        .pragma_query_value(None, "application_id", |row| row.get(0))
        .map_err(read)?;
    let version = user_version(conn).map_err(read)?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))
        .map_err(read)?;
    let ours = application_id == APPLICATION_ID;
    let empty = application_id == 0 && version == 0 && tables == 0;
    if ours || empty {
        Ok(())
    } else {
        Err(
            "the file is a database of another application, not a harness-sessions store"
                .to_owned(),
        )
    }
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Brings the file to the newest version of `migrations`, one transaction per migration.
///
/// # Errors
/// When the file is newer than `migrations` know, or a migration fails (the file then stays at the
/// version before it).
pub(super) fn migrate(conn: &mut Connection, migrations: &[Migration]) -> Result<(), String> {
    let latest = migrations.last().map_or(0, |migration| migration.version);
    let ordered = migrations
        .iter()
        .enumerate()
        .all(|(index, migration)| u32::try_from(index + 1) == Ok(migration.version));
    if !ordered {
        return Err("its migrations are not numbered 1, 2, 3, ... in order".to_owned());
    }
    let current = user_version(conn)
        .map_err(|err| format!("could not read its schema version: {}", describe(&err)))?;
    if current > i64::from(latest) {
        return Err(format!(
            "its schema version {current} is newer than this build of harness-sessions knows \
             ({latest}): refusing to touch it"
        ));
    }
    for migration in migrations {
        if i64::from(migration.version) <= current {
            continue;
        }
        run_migration(conn, migration).map_err(|err| {
            format!(
                "could not migrate it to schema version {} ({}): {}",
                migration.version,
                migration.name,
                describe(&err)
            )
        })?;
    }
    Ok(())
}

fn run_migration(conn: &mut Connection, migration: &Migration) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Another process may have migrated the file while this one waited for the lock.
    if user_version(&tx)? >= i64::from(migration.version) {
        return tx.commit();
    }
    (migration.apply)(&tx)?;
    tx.pragma_update(None, "user_version", migration.version)?;
    tx.commit()
}
