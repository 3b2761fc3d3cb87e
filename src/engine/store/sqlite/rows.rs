//! A save as rows: the record the caller prepared (serialized, its resume state sealed) and the
//! writes that store it inside the thread's transaction, only the messages that changed.

use rusqlite::{params, Connection};

use super::seal::StoredResumeState;

/// A message ready to store: its JSON text and the text's SHA-256.
pub(crate) struct PreparedMessage {
    pub(crate) digest: [u8; 32],
    pub(crate) body: String,
}

/// A record ready to store, serialized (and its resume state sealed) by the caller.
pub(crate) struct PreparedSave {
    pub(crate) id: String,
    /// The order key of `updatedAt`'s milliseconds.
    pub(crate) updated_at_key: i64,
    /// The whole summary as JSON: what `list()` gives, and `get()` with the messages.
    pub(crate) summary: String,
    /// The results of keyed commands as JSON, when there are some.
    pub(crate) command_results: Option<String>,
    /// The session's last submissions as JSON, `None` when it has none.
    pub(crate) submissions: Option<String>,
    pub(crate) messages: Vec<PreparedMessage>,
    pub(crate) resume_state: Option<StoredResumeState>,
}

/// Writes one save inside the caller's transaction: the summary, the messages that changed, the
/// resume state.
/// Writes `save`; answers whether it dropped a resume state (the session left `suspended`).
pub(super) fn write_save(conn: &Connection, save: &PreparedSave) -> rusqlite::Result<bool> {
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
