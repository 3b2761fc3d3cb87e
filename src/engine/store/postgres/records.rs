//! Records as rows: the statements of `save`, `get`, `list`, `getResumeState` and `delete`.
//!
//! Invariants:
//! - a save is one transaction whose statements are pipelined (one round trip once prepared):
//!   the session row (its `version` raised), the message rows past the end deleted, the changed
//!   message rows upserted (a row whose digest is unchanged is not rewritten), the resume state
//!   written or dropped;
//! - statements are prepared once per connection (`prepare_cached`), named by their text;
//! - errors name the session and the action, in the server's words, never the SQL or a value.

use serde::Deserialize;

use super::Opened;
use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionRecord, SessionStatus, SessionSummary, StoredMessage};
use crate::engine::store::sqlite::rows::PreparedSave;
use crate::engine::store::sqlite::seal::{ResumeStateCodec, StoredResumeState};

/// The text of the store's statements in its schema.
pub(crate) struct Statements {
    upsert_session: String,
    delete_messages_past: String,
    upsert_messages: String,
    upsert_resume_state: String,
    delete_resume_state: String,
    get: String,
    list: String,
    get_resume_state: String,
    delete: String,
}

impl Statements {
    /// The statements on the tables of `schema` (quoted).
    pub(crate) fn new(schema: &str) -> Statements {
        Statements {
            upsert_session: format!(
                "INSERT INTO {schema}.sessions \
                     (id, updated_at_key, status, summary, submissions, command_results) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (id) DO UPDATE SET updated_at_key = EXCLUDED.updated_at_key, \
                     status = EXCLUDED.status, summary = EXCLUDED.summary, \
                     submissions = EXCLUDED.submissions, \
                     command_results = EXCLUDED.command_results, \
                     version = {schema}.sessions.version + 1, written_at = now()"
            ),
            delete_messages_past: format!(
                "DELETE FROM {schema}.messages WHERE session_id = $1 AND position >= $2"
            ),
            upsert_messages: format!(
                "INSERT INTO {schema}.messages AS m (session_id, position, digest, body) \
                 SELECT $1, u.position, u.digest, u.body \
                   FROM unnest($2::int4[], $3::bytea[], $4::text[]) AS u (position, digest, body) \
                 ON CONFLICT (session_id, position) DO UPDATE \
                     SET digest = EXCLUDED.digest, body = EXCLUDED.body \
                     WHERE m.digest <> EXCLUDED.digest"
            ),
            upsert_resume_state: format!(
                "INSERT INTO {schema}.resume_states (session_id, format, body) VALUES ($1, $2, $3) \
                 ON CONFLICT (session_id) DO UPDATE SET format = EXCLUDED.format, \
                     body = EXCLUDED.body"
            ),
            delete_resume_state: format!(
                "DELETE FROM {schema}.resume_states WHERE session_id = $1"
            ),
            get: format!(
                "SELECT s.summary, s.submissions, s.command_results, \
                        ARRAY(SELECT m.position FROM {schema}.messages m \
                              WHERE m.session_id = s.id ORDER BY m.position), \
                        ARRAY(SELECT m.body FROM {schema}.messages m \
                              WHERE m.session_id = s.id ORDER BY m.position) \
                   FROM {schema}.sessions s WHERE s.id = $1"
            ),
            list: format!(
                "SELECT id, summary FROM {schema}.sessions \
                 ORDER BY updated_at_key DESC, id COLLATE \"C\""
            ),
            get_resume_state: format!(
                "SELECT format, body FROM {schema}.resume_states WHERE session_id = $1"
            ),
            delete: format!("DELETE FROM {schema}.sessions WHERE id = $1"),
        }
    }
}

/// A save ready to write: the record serialized, its resume state sealed, its status.
pub(crate) struct Save {
    prepared: PreparedSave,
    status: &'static str,
}

/// Serializes `record` and seals `resume_state`, on the caller's task.
///
/// # Errors
/// When the record cannot be serialized or the state sealed.
pub(crate) fn prepare(
    codec: &ResumeStateCodec,
    record: &SessionRecord,
    resume_state: Option<&serde_json::Value>,
) -> Result<Save> {
    Ok(Save {
        prepared: crate::engine::store::sqlite::prepare_save(codec, record, resume_state)?,
        status: record.summary.status.as_str(),
    })
}

/// Writes `save` inside the transaction `tx`.
///
/// # Errors
/// When a statement fails; the transaction is then to be rolled back.
pub(crate) async fn write(
    tx: &deadpool_postgres::Transaction<'_>,
    statements: &Statements,
    save: &Save,
) -> std::result::Result<(), tokio_postgres::Error> {
    let prepared = &save.prepared;
    let upsert_session = tx.prepare_cached(&statements.upsert_session).await?;
    let delete_past = tx.prepare_cached(&statements.delete_messages_past).await?;
    let upsert_messages = tx.prepare_cached(&statements.upsert_messages).await?;
    let resume = match &prepared.resume_state {
        Some(_) => tx.prepare_cached(&statements.upsert_resume_state).await?,
        None => tx.prepare_cached(&statements.delete_resume_state).await?,
    };
    let count = position(prepared.messages.len());
    let positions: Vec<i32> = (0..prepared.messages.len()).map(position).collect();
    let digests: Vec<&[u8]> = prepared
        .messages
        .iter()
        .map(|message| message.digest.as_slice())
        .collect();
    let bodies: Vec<&str> = prepared
        .messages
        .iter()
        .map(|message| message.body.as_str())
        .collect();
    let session_params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
        &prepared.id,
        &prepared.updated_at_key,
        &save.status,
        &prepared.summary,
        &prepared.submissions,
        &prepared.command_results,
    ];
    let session = tx.execute(&upsert_session, &session_params);
    let past_params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&prepared.id, &count];
    let past = tx.execute(&delete_past, &past_params);
    let messages = async {
        if positions.is_empty() {
            return Ok(0);
        }
        tx.execute(
            &upsert_messages,
            &[&prepared.id, &positions, &digests, &bodies],
        )
        .await
    };
    let resume_state = async {
        match &prepared.resume_state {
            Some(state) => {
                let format = i16::try_from(state.format).unwrap_or(i16::MAX);
                tx.execute(&resume, &[&prepared.id, &format, &state.body])
                    .await
            }
            None => tx.execute(&resume, &[&prepared.id]).await,
        }
    };
    // Sent together, answered in order: one round trip.
    futures::try_join!(session, past, messages, resume_state)?;
    Ok(())
}

/// A position as the table keeps it; a conversation never comes near `i32::MAX` messages.
fn position(index: usize) -> i32 {
    i32::try_from(index).unwrap_or(i32::MAX)
}

/// `save` in a transaction of its own.
///
/// # Errors
/// [`SessionError::StoreUnavailable`] when the server cannot be reached, [`SessionError::Host`]
/// when the write fails (nothing of it stays).
pub(crate) async fn save(opened: &Opened, save: Save) -> Result<()> {
    let id = save.prepared.id.clone();
    let fail = |error: tokio_postgres::Error| {
        opened
            .connections
            .failed(&format!("save session {id}"), &error)
    };
    let mut client = opened.connections.get().await?;
    let tx = client.transaction().await.map_err(fail)?;
    write(&tx, &opened.statements, &save).await.map_err(fail)?;
    tx.commit().await.map_err(fail)
}

/// The record of session `id`.
///
/// # Errors
/// When the read fails, or the rows are damaged (see [`is_damaged`]).
pub(crate) async fn get(opened: &Opened, id: &str) -> Result<Option<SessionRecord>> {
    let fail = |error: tokio_postgres::Error| {
        opened
            .connections
            .failed(&format!("read session {id}"), &error)
    };
    let client = opened.connections.get().await?;
    let statement = client
        .prepare_cached(&opened.statements.get)
        .await
        .map_err(fail)?;
    let Some(row) = client.query_opt(&statement, &[&id]).await.map_err(fail)? else {
        return Ok(None);
    };
    let summary: String = row.try_get(0).map_err(fail)?;
    let submissions: Option<String> = row.try_get(1).map_err(fail)?;
    let command_results: Option<String> = row.try_get(2).map_err(fail)?;
    let positions: Vec<i32> = row.try_get(3).map_err(fail)?;
    let bodies: Vec<String> = row.try_get(4).map_err(fail)?;
    let summary: SessionSummary =
        serde_json::from_str(&summary).map_err(|_| unreadable(id, "its summary"))?;
    let submissions = match submissions {
        Some(text) => serde_json::from_str(&text).map_err(|_| unreadable(id, "its submissions"))?,
        None => Vec::new(),
    };
    let command_results = match command_results {
        Some(text) => serde_json::from_str(&text)
            .map_err(|_| unreadable(id, "the results of its commands"))?,
        None => Vec::new(),
    };
    let mut messages = Vec::with_capacity(bodies.len());
    for (index, (stored_position, body)) in positions.into_iter().zip(bodies).enumerate() {
        if usize::try_from(stored_position) != Ok(index) {
            return Err(SessionError::host(format!(
                "the postgres store holds a damaged conversation for session {id}: message \
                 {index} is missing"
            )));
        }
        messages.push(StoredMessage::from_json(body).map_err(|_| unreadable(id, "a message"))?);
    }
    Ok(Some(SessionRecord {
        summary,
        messages,
        command_results,
        submissions,
    }))
}

/// Sessions whose rows could not be read, with why.
pub(crate) type Unreadable = Vec<(String, SessionError)>;

async fn summary_rows(opened: &Opened) -> Result<Vec<(String, String)>> {
    let fail =
        |error: tokio_postgres::Error| opened.connections.failed("list the sessions", &error);
    let client = opened.connections.get().await?;
    let statement = client
        .prepare_cached(&opened.statements.list)
        .await
        .map_err(fail)?;
    let rows = client.query(&statement, &[]).await.map_err(fail)?;
    rows.iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
        .collect::<std::result::Result<Vec<_>, tokio_postgres::Error>>()
        .map_err(fail)
}

/// Every summary, newest first, and the sessions whose summary could not be read.
///
/// # Errors
/// When the read fails.
pub(crate) async fn list(opened: &Opened) -> Result<(Vec<SessionSummary>, Unreadable)> {
    let mut summaries = Vec::new();
    let mut unreadable_rows = Vec::new();
    for (id, text) in summary_rows(opened).await? {
        match serde_json::from_str::<SessionSummary>(&text) {
            Ok(summary) => summaries.push(summary),
            Err(_) => {
                let error = unreadable(&id, "its summary");
                unreadable_rows.push((id, error));
            }
        }
    }
    Ok((summaries, unreadable_rows))
}

/// [`list`] as JSON text, the stored summaries joined as they are (each checked: JSON, with a
/// status this build knows).
///
/// # Errors
/// When the read fails.
pub(crate) async fn list_json(opened: &Opened) -> Result<(String, Unreadable)> {
    let mut text = String::from("[");
    let mut unreadable_rows = Vec::new();
    for (id, summary) in summary_rows(opened).await? {
        match check_summary(&id, &summary) {
            Ok(()) => {
                if text.len() > 1 {
                    text.push(',');
                }
                text.push_str(&summary);
            }
            Err(error) => unreadable_rows.push((id, error)),
        }
    }
    text.push(']');
    Ok((text, unreadable_rows))
}

/// Checks a stored summary: JSON, with a status this build knows.
fn check_summary(id: &str, text: &str) -> Result<()> {
    #[derive(Deserialize)]
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

/// The stored resume state of session `id`.
///
/// # Errors
/// When the read fails.
pub(crate) async fn get_resume_state(
    opened: &Opened,
    id: &str,
) -> Result<Option<StoredResumeState>> {
    let fail = |error: tokio_postgres::Error| {
        opened
            .connections
            .failed(&format!("read the resume state of session {id}"), &error)
    };
    let client = opened.connections.get().await?;
    let statement = client
        .prepare_cached(&opened.statements.get_resume_state)
        .await
        .map_err(fail)?;
    let Some(row) = client.query_opt(&statement, &[&id]).await.map_err(fail)? else {
        return Ok(None);
    };
    let format: i16 = row.try_get(0).map_err(fail)?;
    let body: Vec<u8> = row.try_get(1).map_err(fail)?;
    Ok(Some(StoredResumeState {
        format: i64::from(format),
        body,
    }))
}

/// Forgets session `id`: its row, its messages and its resume state.
///
/// # Errors
/// When the write fails.
pub(crate) async fn delete(opened: &Opened, id: &str) -> Result<()> {
    let fail = |error: tokio_postgres::Error| {
        opened
            .connections
            .failed(&format!("delete session {id}"), &error)
    };
    let client = opened.connections.get().await?;
    let statement = client
        .prepare_cached(&opened.statements.delete)
        .await
        .map_err(fail)?;
    client.execute(&statement, &[&id]).await.map_err(fail)?;
    Ok(())
}

/// Whether `error`, from reading a session, says its rows are damaged.
pub(crate) fn is_damaged(error: &SessionError) -> bool {
    matches!(error, SessionError::Host { message, .. } if message.starts_with("the postgres store holds "))
}

fn unreadable(id: &str, what: &str) -> SessionError {
    SessionError::host(format!(
        "the postgres store holds an unreadable session {id}: {what} could not be decoded"
    ))
}
