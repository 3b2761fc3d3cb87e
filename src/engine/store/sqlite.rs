//! `createSqliteSessionStore({ path })`: sessions kept in a SQLite file, durable across restarts.
//!
//! [`SqliteStore`] owns one connection, on a dedicated thread (`worker`): the async methods send
//! it a command and await a one-shot reply, so a tokio worker never blocks on SQLite. Records are
//! serialized, hashed and sealed, and listed summaries decoded and sorted, on the caller's task
//! (CPU work, as the memory store's clones are): the thread mostly runs SQL.
//!
//! Invariants:
//! - every `save` is one atomic write: a crash at any moment leaves the session as it was before
//!   or as it is after; a save that returned is durable (WAL with `synchronous=FULL` syncs the
//!   WAL at every commit);
//! - `get` returns exactly what `save` wrote: JSON values equal (object key order kept, floats bit
//!   for bit, thanks to serde_json's `float_roundtrip`), the times as their text, the fields the
//!   store does not know kept;
//! - a session is one `sessions` row (its summary as JSON, and the order key of its `updatedAt`)
//!   and its message rows; `list` reads the `sessions` table only (one scan, no message), in the
//!   order of [`super::sort_newest_first`]; `list_json` and `list_since` answer from the summaries
//!   the thread keeps ([`super::listing`]), read again when another connection wrote the file;
//! - a save writes only the message rows that changed;
//! - the resume state has a row only while a save gives one; with an encryption key it is sealed
//!   (see `seal`), and it never appears in an error message or a log;
//! - the file is created with mode 0600, the SQLite library is at least 3.51.3, the schema is
//!   versioned (see `schema`);
//! - one open store per file: a second one, in this process or another, is refused at once (see
//!   `lock`); closing the store, dropping it, or the process dying releases the file.

pub mod key;
mod lock;
pub(crate) mod rows;
mod schema;
pub(crate) mod seal;
mod summaries;
#[cfg(test)]
mod tests;
mod worker;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use sha2::{Digest, Sha256};

use self::rows::{PreparedMessage, PreparedSave};
use self::seal::ResumeStateCodec;
use self::worker::{Command, OpenParams, WorkerHandle};
use super::listing::{from_order_key, order_key, Stamps};
use super::SessionStore;
use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionRecord, SessionSummary};

/// The oldest SQLite the store opens a file with, as `sqlite3_libversion_number()` gives it:
/// 3.51.3, which fixes a corruption of WAL databases on a WAL reset.
pub const MIN_SQLITE_VERSION_NUMBER: i32 = 3_051_003;

/// How a [`SqliteStore`] is opened.
#[derive(Clone)]
pub struct SqliteStoreOptions {
    /// A 256-bit key to encrypt resume states at rest with (XChaCha20-Poly1305). A store opened
    /// with a key refuses to read resume states written without one, and the other way round.
    pub encryption_key: Option<[u8; 32]>,
    /// How long a write waits for another process holding the file's lock. Default: 5 s.
    pub busy_timeout: Duration,
}

impl Default for SqliteStoreOptions {
    fn default() -> Self {
        Self {
            encryption_key: None,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

impl fmt::Debug for SqliteStoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStoreOptions")
            .field(
                "encryption_key",
                &self.encryption_key.as_ref().map(|_| "<redacted>"),
            )
            .field("busy_timeout", &self.busy_timeout)
            .finish()
    }
}

/// Sessions in a SQLite file.
///
/// Calls are answered in the order they were sent. A call whose future is dropped after it was
/// sent still runs: a save then completes or fails as a whole. Saves that arrive while the thread
/// waits for the disk share one commit (group commit), each still atomic on its own.
///
/// Dropping the store lets its thread finish the commands already sent, then joins it (the drop
/// waits for them); [`SqliteStore::close`] does the same and also checkpoints the WAL, reporting
/// errors. [`SqliteStore::release`] closes it through a shared reference: the file is free for
/// another store, and the next call opens it again (or is refused, if another store holds it).
pub struct SqliteStore {
    path: PathBuf,
    codec: ResumeStateCodec,
    busy_timeout: Duration,
    migrations: Vec<schema::Migration>,
    /// The connection's thread and the file's lock, while open.
    open: tokio::sync::Mutex<Option<Arc<Opened>>>,
    /// The sessions whose rows could not be read: `list()` skips them, each reported once.
    unreadable: super::UnreadableRows,
    /// Whether a session manager runs on the store.
    claimed: std::sync::atomic::AtomicBool,
    /// The stamps of `list_since`, kept across the store's threads (it may be released and
    /// opened again): a stamp is never given twice.
    stamps: Stamps,
}

/// An open store: its thread, and the file's lock, released once the thread has closed the
/// connection (fields drop in order: the thread is joined first).
struct Opened {
    worker: WorkerHandle,
    _lock: lock::FileLock,
}

impl std::ops::Deref for Opened {
    type Target = WorkerHandle;
    fn deref(&self) -> &WorkerHandle {
        &self.worker
    }
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("encrypted", &self.codec.seals())
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens the store in the file at `path`, creating it with mode 0600 if it does not exist (an
    /// existing file keeps its mode), and migrating it to this build's schema. The work runs on
    /// the store's own thread; this awaits it, so it can be called from any async context.
    ///
    /// # Errors
    /// [`SessionError::Host`] naming the path and what failed: a SQLite library older than
    /// 3.51.3, a file that cannot be created or opened, a file that is not a harness-sessions
    /// store or has a newer schema, a setting SQLite refuses, a failed migration.
    pub async fn open(path: impl AsRef<Path>, options: SqliteStoreOptions) -> Result<Self> {
        Self::open_with_migrations(path.as_ref(), options, schema::MIGRATIONS.to_vec()).await
    }

    async fn open_with_migrations(
        path: &Path,
        options: SqliteStoreOptions,
        migrations: Vec<schema::Migration>,
    ) -> Result<Self> {
        let store = Self {
            path: path.to_owned(),
            codec: ResumeStateCodec::new(options.encryption_key.as_ref()),
            busy_timeout: options.busy_timeout,
            migrations,
            open: tokio::sync::Mutex::new(None),
            unreadable: super::UnreadableRows::default(),
            claimed: std::sync::atomic::AtomicBool::new(false),
            stamps: Stamps::default(),
        };
        store.worker().await?;
        Ok(store)
    }

    /// The open store's thread: opened (the file locked, then the connection opened) when the
    /// store was released since.
    ///
    /// # Errors
    /// As [`SqliteStore::open`]: the file in use by another store among them.
    async fn worker(&self) -> Result<Arc<Opened>> {
        let mut open = self.open.lock().await;
        if let Some(opened) = open.as_ref() {
            return Ok(opened.clone());
        }
        let lock = lock::FileLock::acquire_waiting(&self.path).await?;
        let worker = WorkerHandle::start(OpenParams {
            path: self.path.clone(),
            busy_timeout: self.busy_timeout,
            migrations: self.migrations.clone(),
            stamps: self.stamps.clone(),
        })
        .await?;
        let opened = Arc::new(Opened {
            worker,
            _lock: lock,
        });
        *open = Some(opened.clone());
        Ok(opened)
    }

    /// The file the store is kept in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes the store: runs what was already sent, checkpoints the WAL into the database file
    /// (truncating the WAL), closes the connection and stops the thread.
    ///
    /// # Errors
    /// [`SessionError::Host`] when the checkpoint or the close fails (the committed saves are
    /// durable all the same), [`SessionError::Internal`] when the thread had already stopped.
    pub async fn close(self) -> Result<()> {
        self.release().await
        // Dropping `self` joins the thread, which has returned after answering.
    }

    /// [`SqliteStore::close`] through a shared reference: the file is free for another store
    /// once the calls under way are answered; the next call opens it again. Releasing a store
    /// that is not open does nothing.
    ///
    /// # Errors
    /// As [`SqliteStore::close`]; the file is released all the same.
    pub async fn release(&self) -> Result<()> {
        self.claimed
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let Some(opened) = self.open.lock().await.take() else {
            return Ok(());
        };
        opened.call(Command::Close).await
    }

    /// Writes many records in one transaction: seeds large stores for tests and measurements.
    #[cfg(test)]
    async fn save_many(&self, records: &[SessionRecord]) -> Result<()> {
        let saves = records
            .iter()
            .map(|record| prepare_save(&self.codec, record, None))
            .collect::<Result<Vec<_>>>()?;
        self.worker()
            .await?
            .call(|reply| Command::SaveMany(saves, reply))
            .await
    }

    /// Makes the thread panic, as a bug would; gives the error its caller sees.
    #[cfg(test)]
    async fn panic_worker(&self) -> Result<()> {
        self.worker().await?.call(Command::Panic).await
    }
}

impl SqliteStore {
    /// The text of `listed`, once the rows it could not list are noted.
    fn noting_unreadable(&self, listed: worker::Listed) -> String {
        for (id, error) in listed.unreadable {
            self.unreadable.note(&id, error);
        }
        listed.text
    }
}

/// Whether `error`, from reading a row, says the row is damaged (rather than that the read
/// failed): the words of the worker's `unreadable()` and of a conversation with a gap.
fn is_damaged_row(error: &SessionError) -> bool {
    matches!(error, SessionError::Host { message, .. } if message.starts_with("the sqlite store holds "))
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()> {
        let save = prepare_save(&self.codec, record, resume_state)?;
        self.worker()
            .await?
            .call(|reply| Command::Save(Box::new(save), reply))
            .await?;
        // Written whole: it is readable again.
        self.unreadable.forget(&record.summary.id);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        let got = self
            .worker()
            .await?
            .call(|reply| Command::Get(id.to_owned(), reply))
            .await;
        if let Err(error) = &got {
            if is_damaged_row(error) {
                self.unreadable.note(id, error.clone());
            }
        }
        got
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        // Decoded and sorted here, on the caller's task: see `PackedSummaries`.
        let (summaries, unreadable) = self
            .worker()
            .await?
            .call(Command::List)
            .await?
            .into_newest_first();
        for (id, error) in unreadable {
            self.unreadable.note(&id, error);
        }
        Ok(summaries)
    }

    async fn list_json(&self) -> Result<String> {
        let listed = self.worker().await?.call(Command::ListJson).await?;
        Ok(self.noting_unreadable(listed))
    }

    async fn list_since(&self, known: u64) -> Result<String> {
        let listed = self
            .worker()
            .await?
            .call(|reply| Command::ListSince(known, reply))
            .await?;
        Ok(self.noting_unreadable(listed))
    }

    fn take_unreadable(&self) -> Vec<(String, SessionError)> {
        self.unreadable.take()
    }

    fn is_unreadable(&self, id: &str) -> bool {
        self.unreadable.contains(id)
    }

    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        let stored = self
            .worker()
            .await?
            .call(|reply| Command::GetResumeState(id.to_owned(), reply))
            .await?;
        stored
            .map(|stored| self.codec.decode(id, stored))
            .transpose()
    }

    async fn delete(&self, id: &str) -> Result<()> {
        self.worker()
            .await?
            .call(|reply| Command::Delete(id.to_owned(), reply))
            .await?;
        self.unreadable.forget(id);
        Ok(())
    }

    async fn release(&self) -> Result<()> {
        SqliteStore::release(self).await
    }

    fn claim(&self) -> Result<()> {
        if self.claimed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(SessionError::host(format!(
                "the sqlite store at {} is in use by another session manager: one manager per \
                 store; shut the other down first",
                self.path.display()
            )));
        }
        Ok(())
    }
}

/// Serializes `record`, hashes its messages and seals its resume state.
pub(crate) fn prepare_save(
    codec: &ResumeStateCodec,
    record: &SessionRecord,
    resume_state: Option<&Value>,
) -> Result<PreparedSave> {
    let summary = &record.summary;
    let id = summary.id.as_str();
    let json = |what: &str, text: serde_json::Result<String>| {
        text.map_err(|_| {
            SessionError::internal(format!("could not serialize the {what} of session {id}"))
        })
    };
    let messages = record
        .messages
        .iter()
        .map(|message| {
            let body = message.json().to_owned();
            let digest = Sha256::digest(body.as_bytes()).into();
            Ok(PreparedMessage { digest, body })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(PreparedSave {
        summary: json("summary", serde_json::to_string(summary))?,
        submissions: (!record.submissions.is_empty())
            .then(|| json("submissions", serde_json::to_string(&record.submissions)))
            .transpose()?,
        id: id.to_owned(),
        updated_at_key: order_key(summary.updated_at.millis()),
        command_results: if record.command_results.is_empty() {
            None
        } else {
            Some(json(
                "command results",
                serde_json::to_string(&record.command_results),
            )?)
        },
        messages,
        resume_state: resume_state
            .map(|state| codec.encode(id, state))
            .transpose()?,
    })
}

/// The store's error for a failed `action` ("save session a1"): SQLite's own message, never SQL.
fn failed(action: impl fmt::Display, err: &rusqlite::Error) -> SessionError {
    SessionError::host(format!(
        "the sqlite store could not {action}: {}",
        describe(err)
    ))
}

/// What went wrong, in SQLite's words: its error message (which names tables and constraints,
/// never bound values), or its error code's description; never the SQL text.
fn describe(err: &rusqlite::Error) -> String {
    match err {
        rusqlite::Error::SqliteFailure(code, Some(message)) => {
            format!("{message} (sqlite error {})", code.extended_code)
        }
        rusqlite::Error::SqliteFailure(code, None) => format!(
            "{} (sqlite error {})",
            lower_first(rusqlite::ffi::code_to_str(code.extended_code)),
            code.extended_code
        ),
        rusqlite::Error::SqlInputError { error, msg, .. } => {
            format!("{msg} (sqlite error {})", error.extended_code)
        }
        rusqlite::Error::InvalidColumnType(_, column, found) => {
            format!("column {column} holds a value of the wrong type ({found})")
        }
        rusqlite::Error::FromSqlConversionFailure(index, found, _) => {
            format!("column {index} holds a value of the wrong type ({found})")
        }
        other => lower_first(&other.to_string()),
    }
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}
