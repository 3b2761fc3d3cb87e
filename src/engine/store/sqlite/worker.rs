//! The thread that owns the SQLite connection, the commands it runs, and the conversion between
//! rows and records.
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
//!   was queued; the connection closes with the thread.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use tokio::sync::oneshot;

use super::failed;
use super::schema::{self, Migration};
use super::seal::StoredResumeState;
use crate::engine::error::{Result, SessionError};
use crate::engine::session::StoredMessage;
use crate::engine::session::{SessionRecord, SessionStatus, SessionSummary};

/// Where a command's answer goes.
pub(super) type Reply<T> = oneshot::Sender<Result<T>>;

/// The most saves that share one commit.
const MAX_GROUP: usize = 256;

/// A message ready to store: its JSON text and the text's SHA-256.
pub(super) struct PreparedMessage {
    pub(super) digest: [u8; 32],
    pub(super) body: String,
}

/// A record ready to store, serialized (and its resume state sealed) by the caller.
pub(super) struct PreparedSave {
    pub(super) id: String,
    /// The order key of `updatedAt`'s milliseconds.
    pub(super) updated_at_key: i64,
    /// The whole summary as JSON: what `list()` gives, and `get()` with the messages.
    pub(super) summary: String,
    /// The results of keyed commands as JSON, when there are some.
    pub(super) command_results: Option<String>,
    /// The session's last submissions as JSON, `None` when it has none.
    pub(super) submissions: Option<String>,
    pub(super) messages: Vec<PreparedMessage>,
    pub(super) resume_state: Option<StoredResumeState>,
}

/// A byte range of [`PackedSummaries::text`].
#[derive(Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

/// One `sessions` row of [`PackedSummaries`].
struct PackedSummary {
    id: Span,
    updated_at_key: i64,
    /// The summary as JSON; none only in a damaged row.
    summary: Option<Span>,
}

/// Every `sessions` row, the text of all of them in one buffer: `list()` moves two allocations
/// from the thread to the caller, not a few per row, and the caller decodes (and frees) in its
/// own allocator arena, which measured about twice as fast as decoding on the thread.
#[derive(Default)]
pub(super) struct PackedSummaries {
    text: String,
    rows: Vec<PackedSummary>,
}

impl PackedSummaries {
    /// Appends `text`, if any, and gives its span.
    fn push(&mut self, text: Option<&str>) -> Option<Span> {
        let text = text?;
        let start = self.text.len();
        self.text.push_str(text);
        Some(Span {
            start,
            end: self.text.len(),
        })
    }

    fn str(&self, span: Span) -> &str {
        // Spans are made by `push` on this buffer, on `str` boundaries.
        self.text.get(span.start..span.end).unwrap_or_default()
    }

    /// Sorts the rows the most recently updated first, ties by id: the order of
    /// [`crate::engine::store::sort_newest_first`], since order keys sort like `f64::total_cmp`
    /// and ids are unique.
    fn newest_first(&mut self) -> Vec<PackedSummary> {
        let mut rows = std::mem::take(&mut self.rows);
        rows.sort_unstable_by(|a, b| {
            b.updated_at_key
                .cmp(&a.updated_at_key)
                .then_with(|| self.str(a.id).cmp(self.str(b.id)))
        });
        rows
    }

    /// The summary text of `row`.
    fn summary(&self, row: &PackedSummary) -> Result<&str> {
        row.summary
            .map(|span| self.str(span))
            .ok_or_else(|| damaged_summary(self.str(row.id)))
    }

    /// The summaries, newest first, each decoded once.
    ///
    /// A row that cannot be decoded is set aside: it is given, with why, in the second list.
    pub(super) fn into_newest_first(mut self) -> (Vec<SessionSummary>, Vec<Unreadable>) {
        let rows = self.newest_first();
        let mut summaries = Vec::with_capacity(rows.len());
        let mut unreadable = Vec::new();
        for row in &rows {
            let id = self.str(row.id);
            match self.summary(row).and_then(|text| decode_summary(id, text)) {
                Ok(summary) => summaries.push(summary),
                Err(error) => unreadable.push((id.to_owned(), error)),
            }
        }
        (summaries, unreadable)
    }

    /// The summaries as JSON text, in the order of [`PackedSummaries::into_newest_first`],
    /// joined from their stored JSON without decoding them (the whole is checked to be JSON, so
    /// that a damaged row is an error, never a broken list).
    ///
    /// A row that holds something that is not JSON, or a status this build does not know, is
    /// set aside: it is given, with why, in the second list.
    ///
    /// # Errors
    /// [`SessionError::Host`] when the list could not be written.
    pub(super) fn into_newest_first_json(mut self) -> Result<(String, Vec<Unreadable>)> {
        let rows = self.newest_first();
        let mut json = String::with_capacity(self.text.len() + rows.len() + 2);
        let mut unreadable = Vec::new();
        json.push('[');
        let mut first = true;
        for row in &rows {
            let id = self.str(row.id);
            let mark = json.len();
            if !first {
                json.push(',');
            }
            let written = self
                .summary(row)
                .and_then(|text| check_summary_json(id, text).map(|()| json.push_str(text)));
            match written {
                Ok(()) => first = false,
                Err(error) => {
                    json.truncate(mark);
                    unreadable.push((id.to_owned(), error));
                }
            }
        }
        json.push(']');
        // One pass over the whole text: a damaged row is an error here, never a broken list.
        serde_json::from_str::<serde::de::IgnoredAny>(&json).map_err(|_| {
            SessionError::host("the sqlite store holds a damaged summary: list() cannot be written")
        })?;
        Ok((json, unreadable))
    }
}

/// A session whose row could not be read, and why.
pub(super) type Unreadable = (String, SessionError);

/// Checks a stored summary: JSON, with a status this build knows.
fn check_summary_json(id: &str, text: &str) -> Result<()> {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow)]
        status: std::borrow::Cow<'a, str>,
    }
    let probe: Probe<'_> = serde_json::from_str(text).map_err(|_| unreadable(id, "its summary"))?;
    if SessionStatus::ALL
        .iter()
        .any(|known| known.as_str() == probe.status)
    {
        Ok(())
    } else {
        Err(unreadable(id, "its status"))
    }
}

fn damaged_summary(id: &str) -> SessionError {
    SessionError::host(format!(
        "the sqlite store holds a damaged summary for session {id}"
    ))
}

/// What the thread is asked to do.
pub(super) enum Command {
    Save(Box<PreparedSave>, Reply<()>),
    Get(String, Reply<Option<SessionRecord>>),
    List(Reply<PackedSummaries>),
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
    let mut worker = Worker { conn };
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
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(outcome);
                }
            }
            Err(err) => {
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
            let id = packed.push(Some(text(0).map_err(fail)?.unwrap_or_default()));
            let summary = packed.push(text(2).map_err(fail)?);
            packed.rows.push(PackedSummary {
                id: id.unwrap_or(Span { start: 0, end: 0 }),
                updated_at_key: row.get(1).map_err(fail)?,
                summary,
            });
        }
        Ok(packed)
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
        tx.commit().map_err(fail)?;
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

/// A summary from its JSON text.
fn decode_summary(id: &str, text: &str) -> Result<SessionSummary> {
    serde_json::from_str(text).map_err(|_| unreadable(id, "its summary"))
}

fn unreadable(id: &str, what: &str) -> SessionError {
    SessionError::host(format!(
        "the sqlite store holds an unreadable session {id}: {what} could not be decoded"
    ))
}

/// Writes one save inside the caller's transaction: the summary, the messages that changed, the
/// resume state.
/// Writes `save`; answers whether it dropped a resume state (the session left `suspended`).
fn write_save(conn: &Connection, save: &PreparedSave) -> rusqlite::Result<bool> {
    conn.prepare_cached(
        "INSERT INTO sessions (id, updated_at_key, summary, command_results) \
         VALUES (?1, ?2, ?3, ?4) \
         ON CONFLICT (id) DO UPDATE SET updated_at_key = excluded.updated_at_key, \
             summary = excluded.summary, command_results = excluded.command_results",
    )?
    .execute(params![
        save.id,
        save.updated_at_key,
        save.summary,
        save.command_results
    ])?;
    conn.prepare_cached("UPDATE sessions SET submissions = ?2 WHERE id = ?1")?
        .execute(params![save.id, save.submissions])?;

    // What is stored, by position: a message whose digest matches is left alone.
    let mut unchanged = vec![false; save.messages.len()];
    let mut stored_past_end = false;
    {
        let mut statement = conn.prepare_cached(
            "SELECT position, digest FROM messages WHERE session_id = ?1 ORDER BY position",
        )?;
        let mut rows = statement.query([&save.id])?;
        while let Some(row) = rows.next()? {
            let position: i64 = row.get(0)?;
            let digest = row.get_ref(1)?.as_blob()?;
            match usize::try_from(position)
                .ok()
                .and_then(|position| save.messages.get(position).map(|new| (position, new)))
            {
                Some((position, new)) => unchanged[position] = new.digest.as_slice() == digest,
                None => stored_past_end = true,
            }
        }
    }
    {
        let mut upsert = conn.prepare_cached(
            "INSERT INTO messages (session_id, position, digest, body) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (session_id, position) DO UPDATE SET digest = excluded.digest, \
                 body = excluded.body",
        )?;
        for (position, message) in save.messages.iter().enumerate() {
            if !unchanged[position] {
                upsert.execute(params![
                    save.id,
                    position_key(position),
                    message.digest.as_slice(),
                    message.body,
                ])?;
            }
        }
    }
    if stored_past_end {
        conn.prepare_cached("DELETE FROM messages WHERE session_id = ?1 AND position >= ?2")?
            .execute(params![save.id, position_key(save.messages.len())])?;
    }

    let dropped = match &save.resume_state {
        Some(state) => conn
            .prepare_cached(
                "INSERT INTO resume_states (session_id, format, body) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (session_id) DO UPDATE SET format = excluded.format, \
                     body = excluded.body",
            )?
            .execute(params![save.id, state.format, state.body])
            .map(|_| false)?,
        None => {
            conn.prepare_cached("DELETE FROM resume_states WHERE session_id = ?1")?
                .execute([&save.id])?
                > 0
        }
    };
    Ok(dropped)
}

/// A position as SQLite stores it; a conversation never comes near `i64::MAX` messages.
fn position_key(position: usize) -> i64 {
    i64::try_from(position).unwrap_or(i64::MAX)
}
