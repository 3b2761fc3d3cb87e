//! The thread that owns the SQLite connection, and the commands it runs: saves (their rows written
//! by [`super::rows`]), reads of a record, and `list()` (its rows packed by [`super::summaries`],
//! or answered from the [`Listing`] the thread keeps).
//!
//! The async side sends a [`Command`] over a channel, each with a one-shot reply channel, and awaits
//! the reply: no tokio worker ever blocks on SQLite. The thread runs commands in the order they
//! arrive.
//!
//! Invariants:
//! - every save is atomic: its own savepoint inside a `BEGIN IMMEDIATE` transaction, whose commit
//!   is what makes it visible. Saves that queue up while the thread is busy (a commit with
//!   `synchronous=FULL` waits for the disk) share one commit, group commit; each still succeeds or
//!   fails alone, and none is answered before the commit that holds it is durable;
//! - a save writes only the message rows whose content changed (by position and SHA-256 digest)
//!   and deletes the rows past the new end; the summary row and the resume state row (written, or
//!   deleted when none is given) are in the same transaction;
//! - a panic while running a command stops the thread: the command's reply channel and every
//!   queued one are dropped, so their callers and every later caller get an error, never a hang;
//! - dropping the [`WorkerHandle`] closes the channel and joins the thread once it has run what
//!   was queued; the connection closes with the thread;
//! - the [`Listing`], once read, is the `sessions` table as of the file's `data_version` it was
//!   read at, with every save and delete of this connection committed since put on it right
//!   after its commit (in commit order); another connection's commit changes `data_version`, and
//!   the next listing reads the table again. A write that failed drops the listing.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use tokio::sync::oneshot;

use super::failed;
use super::rows::{write_save, PreparedSave};
use super::schema::{self, Migration};
use super::seal::StoredResumeState;
use super::summaries::{
    check_summary_json, damaged_summary, decode_summary, unreadable, PackedSummaries, Unreadable,
};
use crate::engine::error::{Result, SessionError};
use crate::engine::session::SessionRecord;
use crate::engine::session::StoredMessage;
use crate::engine::store::listing::{Listing, Stamps};

/// Where a command's answer goes.
pub(super) type Reply<T> = oneshot::Sender<Result<T>>;

/// The most saves that share one commit.
const MAX_GROUP: usize = 256;

/// What the thread is asked to do.
pub(super) enum Command {
    Save(Box<PreparedSave>, Reply<()>),
    Get(String, Reply<Option<SessionRecord>>),
    List(Reply<PackedSummaries>),
    /// The list as JSON text, from the listing (see [`Listed`]).
    ListJson(Reply<Listed>),
    /// The answer of `list_since(known)`, from the listing (see [`Listed`]).
    ListSince(u64, Reply<Listed>),
    GetResumeState(String, Reply<Option<StoredResumeState>>),
    Delete(String, Reply<()>),
    /// Checkpoint the WAL into the database, close the connection, stop.
    Close(Reply<()>),
    /// Saves in one transaction, for seeding large stores in tests.
    #[cfg(test)]
    SaveMany(Vec<PreparedSave>, Reply<()>),
    /// Panic, as a bug would (the reply is dropped while unwinding).
    #[cfg(test)]
    Panic(Reply<()>),
}

/// How to open the connection.
pub(super) struct OpenParams {
    pub(super) path: PathBuf,
    pub(super) busy_timeout: Duration,
    pub(super) migrations: Vec<Migration>,
    /// The store's stamps: every listing the thread reads takes its stamps from them.
    pub(super) stamps: Stamps,
}

/// A list as JSON text, and the rows that could not be listed (found when the thread read the
/// table again; each with why).
pub(super) struct Listed {
    pub(super) text: String,
    pub(super) unreadable: Vec<Unreadable>,
}

/// The async side's handle on the thread.
pub(super) struct WorkerHandle {
    sender: Option<mpsc::Sender<Command>>,
    thread: Option<JoinHandle<()>>,
}

impl WorkerHandle {
    /// Starts the thread and waits until it has opened (and migrated) the database.
    ///
    /// # Errors
    /// When the thread cannot start or the database cannot be opened.
    pub(super) async fn start(params: OpenParams) -> Result<Self> {
        let (sender, receiver) = mpsc::channel();
        let (opened_sender, opened) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("harness-sessions-sqlite".to_owned())
            .spawn(move || run(params, opened_sender, receiver))
            .map_err(|err| {
                SessionError::host(format!("could not start the sqlite store's thread: {err}"))
            })?;
        let handle = Self {
            sender: Some(sender),
            thread: Some(thread),
        };
        match opened.await {
            Ok(Ok(())) => Ok(handle),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(SessionError::internal(
                "the sqlite store's thread stopped while it opened the database",
            )),
        }
    }

    /// Sends the command `make` builds around a reply channel, and awaits the reply.
    ///
    /// # Errors
    /// The command's error, or [`SessionError::Internal`] when the thread has stopped.
    pub(super) async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T> {
        let stopped = || {
            SessionError::internal(
                "the sqlite store's thread has stopped (the store was closed, or a bug made it \
                 panic)",
            )
        };
        let sender = self.sender.as_ref().ok_or_else(stopped)?;
        let (reply, answer) = oneshot::channel();
        sender.send(make(reply)).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        // Closing the channel lets the thread run what is queued, then stop.
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            // A panic in the thread was already answered as errors; nothing to add here.
            let _ = thread.join();
        }
    }
}

/// What the loop does after a command.
enum Flow {
    /// Goes on, first with the command a save group stopped at, if any.
    Continue(Option<Command>),
    /// Closes the connection and answers `reply`.
    Close(Reply<()>),
}

fn run(params: OpenParams, opened: oneshot::Sender<Result<()>>, commands: mpsc::Receiver<Command>) {
    let open = catch_unwind(AssertUnwindSafe(|| {
        schema::open_connection(&params.path, params.busy_timeout, &params.migrations)
    }));
    let conn = match open {
        Ok(Ok(conn)) => conn,
        Ok(Err(err)) => {
            let _ = opened.send(Err(err));
            return;
        }
        Err(_) => {
            let _ = opened.send(Err(SessionError::internal(
                "the sqlite store's thread panicked while it opened the database",
            )));
            return;
        }
    };
    if opened.send(Ok(())).is_err() {
        // Whoever opened the store has given up on it.
        return;
    }
    let mut worker = Worker {
        conn,
        stamps: params.stamps,
        listing: None,
    };
    let mut next = None;
    loop {
        let command = match next.take() {
            Some(command) => command,
            None => match commands.recv() {
                Ok(command) => command,
                Err(_) => return,
            },
        };
        match catch_unwind(AssertUnwindSafe(|| worker.handle(command, &commands))) {
            Ok(Flow::Continue(pending)) => next = pending,
            Ok(Flow::Close(reply)) => {
                let _ = reply.send(worker.close());
                return;
            }
            // The command's reply was dropped while unwinding; the queued ones drop with
            // `commands`. Stopping beats running on after a bug.
            Err(_) => return,
        }
    }
}

struct Worker {
    conn: Connection,
    stamps: Stamps,
    /// The summaries as last read, and the `data_version` of the file they were read at.
    listing: Option<(Listing, i64)>,
}

impl Worker {
    fn handle(&mut self, command: Command, commands: &mpsc::Receiver<Command>) -> Flow {
        match command {
            Command::Save(save, reply) => {
                let mut group = vec![(save, reply)];
                let mut pending = None;
                while group.len() < MAX_GROUP {
                    match commands.try_recv() {
                        Ok(Command::Save(save, reply)) => group.push((save, reply)),
                        Ok(other) => {
                            pending = Some(other);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                self.save_group(group);
                return Flow::Continue(pending);
            }
            Command::Get(id, reply) => {
                let _ = reply.send(self.get(&id));
            }
            Command::List(reply) => {
                let _ = reply.send(self.list());
            }
            Command::ListJson(reply) => {
                let _ = reply.send(self.listed(Listing::json));
            }
            Command::ListSince(known, reply) => {
                let _ = reply.send(self.listed(|listing| listing.since(known)));
            }
            Command::GetResumeState(id, reply) => {
                let _ = reply.send(self.get_resume_state(&id));
            }
            Command::Delete(id, reply) => {
                let _ = reply.send(self.delete(&id));
            }
            Command::Close(reply) => return Flow::Close(reply),
            #[cfg(test)]
            Command::SaveMany(saves, reply) => {
                let _ = reply.send(self.save_many(&saves));
            }
            #[cfg(test)]
            Command::Panic(_reply) => panic!("a panic the tests asked for"),
        }
        Flow::Continue(None)
    }

    /// Writes `group` in one transaction, each save in its own savepoint, and answers each once
    /// the commit is done.
    fn save_group(&mut self, group: Vec<(Box<PreparedSave>, Reply<()>)>) {
        let (saves, replies): (Vec<_>, Vec<_>) = group.into_iter().unzip();
        match self.write_group(&saves) {
            Ok(outcomes) => {
                for ((save, reply), outcome) in saves.into_iter().zip(replies).zip(outcomes) {
                    match (&outcome, &mut self.listing) {
                        (Ok(()), Some((listing, _))) => {
                            listing.put(&save.id, save.updated_at_key, save.summary);
                        }
                        (Err(_), _) => self.listing = None,
                        (Ok(()), None) => {}
                    }
                    let _ = reply.send(outcome);
                }
            }
            Err(err) => {
                self.listing = None;
                for reply in replies {
                    let _ = reply.send(Err(err.clone()));
                }
            }
        }
    }

    fn write_group(&mut self, saves: &[Box<PreparedSave>]) -> Result<Vec<Result<()>>> {
        let subject = match saves {
            [single] => format!("save session {}", single.id),
            _ => format!("save {} sessions", saves.len()),
        };
        let fail = |err: &rusqlite::Error| failed(&subject, err);
        let mut tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|err| fail(&err))?;
        let mut outcomes = Vec::with_capacity(saves.len());
        let mut dropped = false;
        for save in saves {
            let mut savepoint = tx.savepoint().map_err(|err| fail(&err))?;
            match write_save(&savepoint, save) {
                Ok(dropped_one) => {
                    dropped |= dropped_one;
                    savepoint.commit().map_err(|err| fail(&err))?;
                    outcomes.push(Ok(()));
                }
                Err(err) => {
                    // If SQLite already rolled the whole transaction back (it may, on a full
                    // disk or an I/O error), this fails and so does the whole group: nothing
                    // after it runs outside the transaction.
                    savepoint.rollback().map_err(|err| fail(&err))?;
                    savepoint.commit().map_err(|err| fail(&err))?;
                    outcomes.push(Err(failed(format!("save session {}", save.id), &err)));
                }
            }
            if tx.is_autocommit() {
                return Err(SessionError::host(format!(
                    "the sqlite store could not {subject}: sqlite ended the transaction early"
                )));
            }
        }
        tx.commit().map_err(|err| fail(&err))?;
        if dropped {
            self.forget_dropped_states();
        }
        Ok(outcomes)
    }

    /// A resume state was dropped: its text is still in the WAL's frames until a checkpoint
    /// writes them into the database (where `secure_delete` zeroes what was freed) and truncates
    /// the WAL. A secret must not outlive the suspension in either file, so checkpoint now.
    fn forget_dropped_states(&mut self) {
        // A busy checkpoint (another process reading) leaves frames behind; the next one gets them.
        let _ = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
    }

    #[cfg(test)]
    fn save_many(&mut self, saves: &[PreparedSave]) -> Result<()> {
        self.listing = None;
        let fail = |err: rusqlite::Error| failed("save many sessions", &err);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        for save in saves {
            write_save(&tx, save).map_err(fail)?;
        }
        tx.commit().map_err(fail)
    }

    fn get(&mut self, id: &str) -> Result<Option<SessionRecord>> {
        let fail = |err: rusqlite::Error| failed(format!("read session {id}"), &err);
        // One read transaction: both reads see the same commit, even with another process writing.
        let tx = self.conn.transaction().map_err(fail)?;
        let summary = {
            let mut statement = tx
                .prepare_cached("SELECT summary FROM sessions WHERE id = ?1")
                .map_err(fail)?;
            let mut rows = statement.query([id]).map_err(fail)?;
            match rows.next().map_err(fail)? {
                Some(row) => {
                    let text = row
                        .get_ref(0)
                        .and_then(|value| Ok(value.as_str_or_null()?))
                        .map_err(fail)?;
                    decode_summary(id, text.ok_or_else(|| damaged_summary(id))?)?
                }
                None => return Ok(None),
            }
        };
        let submissions = {
            let mut statement = tx
                .prepare_cached("SELECT submissions FROM sessions WHERE id = ?1")
                .map_err(fail)?;
            let text: Option<String> = statement.query_row([id], |row| row.get(0)).map_err(fail)?;
            match text {
                Some(text) => {
                    serde_json::from_str(&text).map_err(|_| unreadable(id, "its submissions"))?
                }
                None => Vec::new(),
            }
        };
        let mut messages = Vec::new();
        {
            let mut statement = tx
                .prepare_cached(
                    "SELECT position, body FROM messages WHERE session_id = ?1 ORDER BY position",
                )
                .map_err(fail)?;
            let mut rows = statement.query([id]).map_err(fail)?;
            while let Some(row) = rows.next().map_err(fail)? {
                let position: i64 = row.get(0).map_err(fail)?;
                if usize::try_from(position) != Ok(messages.len()) {
                    return Err(SessionError::host(format!(
                        "the sqlite store holds a damaged conversation for session {id}: \
                         message {} is missing",
                        messages.len()
                    )));
                }
                let body = row.get_ref(1).and_then(|value| Ok(value.as_str()?));
                let body = body.map_err(|_| unreadable(id, "a message"))?;
                let message = StoredMessage::from_json(body.to_owned());
                messages.push(message.map_err(|_| unreadable(id, "a message"))?);
            }
        }
        let command_results = {
            let mut statement = tx
                .prepare_cached("SELECT command_results FROM sessions WHERE id = ?1")
                .map_err(fail)?;
            let text: Option<String> = statement.query_row([id], |row| row.get(0)).map_err(fail)?;
            match text {
                Some(text) => serde_json::from_str(&text)
                    .map_err(|_| unreadable(id, "the results of its commands"))?,
                None => Vec::new(),
            }
        };
        tx.commit().map_err(fail)?;
        Ok(Some(SessionRecord {
            summary,
            messages,
            command_results,
            submissions,
        }))
    }

    /// Every summary, undecoded and in no order: a plain scan of `sessions`.
    fn list(&mut self) -> Result<PackedSummaries> {
        let fail = |err: rusqlite::Error| failed("list the sessions", &err);
        let mut statement = self
            .conn
            .prepare_cached("SELECT id, updated_at_key, summary FROM sessions")
            .map_err(fail)?;
        let mut rows = statement.query([]).map_err(fail)?;
        let mut packed = PackedSummaries::default();
        while let Some(row) = rows.next().map_err(fail)? {
            let text = |index: usize| -> rusqlite::Result<Option<&str>> {
                Ok(row.get_ref(index)?.as_str_or_null()?)
            };
            packed.push_row(
                text(0).map_err(fail)?.unwrap_or_default(),
                row.get(1).map_err(fail)?,
                text(2).map_err(fail)?,
            );
        }
        Ok(packed)
    }

    /// What `answer` makes of the listing, read again first if another connection wrote the
    /// file since (or if it was never read).
    fn listed(&mut self, answer: impl FnOnce(&mut Listing) -> String) -> Result<Listed> {
        let fail = |err: rusqlite::Error| failed("list the sessions", &err);
        let version: i64 = self
            .conn
            .query_row("PRAGMA data_version", [], |row| row.get(0))
            .map_err(fail)?;
        let mut unreadable = Vec::new();
        if !matches!(&self.listing, Some((_, read_at)) if *read_at == version) {
            self.listing = None;
            self.listing = Some(self.read_listing(&mut unreadable)?);
        }
        let Some((listing, _)) = &mut self.listing else {
            return Err(SessionError::internal("the sqlite store lost its listing"));
        };
        Ok(Listed {
            text: answer(listing),
            unreadable,
        })
    }

    /// Every summary of the `sessions` table, and the `data_version` it was read at (one read
    /// transaction: the version is that of the rows); the rows that cannot be listed go to
    /// `unreadable`.
    fn read_listing(&mut self, unreadable: &mut Vec<Unreadable>) -> Result<(Listing, i64)> {
        let fail = |err: rusqlite::Error| failed("list the sessions", &err);
        let tx = self.conn.transaction().map_err(fail)?;
        let version: i64 = tx
            .query_row("PRAGMA data_version", [], |row| row.get(0))
            .map_err(fail)?;
        let mut listing = Listing::new(self.stamps.clone());
        {
            let mut statement = tx
                .prepare_cached("SELECT id, updated_at_key, summary FROM sessions")
                .map_err(fail)?;
            let mut rows = statement.query([]).map_err(fail)?;
            while let Some(row) = rows.next().map_err(fail)? {
                let text = |index: usize| -> rusqlite::Result<Option<&str>> {
                    Ok(row.get_ref(index)?.as_str_or_null()?)
                };
                let id = text(0).map_err(fail)?.unwrap_or_default();
                let key: i64 = row.get(1).map_err(fail)?;
                let checked = text(2)
                    .map_err(fail)?
                    .ok_or_else(|| damaged_summary(id))
                    .and_then(|summary| check_summary_json(id, summary).map(|()| summary));
                match checked {
                    Ok(summary) => listing.put(id, key, summary),
                    Err(error) => unreadable.push((id.to_owned(), error)),
                }
            }
        }
        tx.commit().map_err(fail)?;
        Ok((listing, version))
    }

    fn get_resume_state(&mut self, id: &str) -> Result<Option<StoredResumeState>> {
        let fail =
            |err: rusqlite::Error| failed(format!("read the resume state of session {id}"), &err);
        let mut statement = self
            .conn
            .prepare_cached("SELECT format, body FROM resume_states WHERE session_id = ?1")
            .map_err(fail)?;
        statement
            .query_row([id], |row| {
                Ok(StoredResumeState {
                    format: row.get(0)?,
                    body: row.get(1)?,
                })
            })
            .optional()
            .map_err(fail)
    }

    fn delete(&mut self, id: &str) -> Result<()> {
        let fail = |err: rusqlite::Error| failed(format!("delete session {id}"), &err);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(fail)?;
        // The foreign keys cascade too; deleting each table's rows says it without relying on it.
        let mut dropped = false;
        for sql in [
            "DELETE FROM messages WHERE session_id = ?1",
            "DELETE FROM resume_states WHERE session_id = ?1",
            "DELETE FROM sessions WHERE id = ?1",
        ] {
            let removed = tx
                .prepare_cached(sql)
                .and_then(|mut statement| statement.execute([id]))
                .map_err(fail)?;
            dropped |= sql.contains("resume_states") && removed > 0;
        }
        if let Err(err) = tx.commit() {
            self.listing = None;
            return Err(fail(err));
        }
        if let Some((listing, _)) = &mut self.listing {
            listing.remove(id);
        }
        if dropped {
            self.forget_dropped_states();
        }
        Ok(())
    }

    /// Checkpoints the WAL into the database and truncates it, then closes the connection.
    fn close(self) -> Result<()> {
        let checkpoint = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
                row.get::<_, i64>(0)
            });
        let closed = self.conn.close();
        match (checkpoint, closed) {
            (_, Err((_, err))) => Err(failed("close the database", &err)),
            (Err(err), Ok(())) => Err(failed("checkpoint the WAL", &err)),
            // `busy` means another connection (another process) still reads an older snapshot:
            // it checkpoints what it can, the rest is done by the last connection to close.
            (Ok(_busy), Ok(())) => Ok(()),
        }
    }
}
