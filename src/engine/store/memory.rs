//! `createMemorySessionStore()`: sessions kept in this process's memory, lost with it.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;

use super::listing::{order_key, Listing, Stamps};
use super::SessionStore;
use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionRecord, SessionSummary};

/// Sessions in memory: the default store.
pub struct MemoryStore {
    entries: Mutex<Entries>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            entries: Mutex::new(Entries {
                by_id: HashMap::new(),
                listing: Listing::new(Stamps::default()),
                unlisted: Vec::new(),
            }),
        }
    }
}

/// The records, and their summaries as `list()` gives them.
///
/// A save only keeps its record; its summary is written into the listing by the next list (or
/// once the saves not listed yet outnumber the sessions): writes are a store's hot path, lists
/// its rare one.
struct Entries {
    by_id: HashMap<String, Entry>,
    /// The summaries as JSON, in list order: `list_json` only joins them.
    listing: Listing,
    /// The sessions saved since the last list whose summary the listing lacks, each once (and
    /// those deleted since, skipped when listed).
    unlisted: Vec<String>,
}

struct Entry {
    record: SessionRecord,
    resume_state: Option<Value>,
    /// Whether the listing holds this record's summary.
    listed: bool,
}

impl Entries {
    /// Writes the summaries saved since the last list into the listing.
    fn list_saved(&mut self) -> Result<()> {
        for id in self.unlisted.drain(..) {
            let Some(entry) = self.by_id.get_mut(&id) else {
                continue;
            };
            if entry.listed {
                continue;
            }
            let summary = &entry.record.summary;
            let json = serde_json::to_string(summary).map_err(|e| {
                SessionError::internal(format!("a summary could not be written: {e}"))
            })?;
            self.listing
                .put(&id, order_key(summary.updated_at.millis()), json);
            entry.listed = true;
        }
        Ok(())
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> Result<std::sync::MutexGuard<'_, Entries>> {
        self.entries
            .lock()
            .map_err(|_| SessionError::internal("the memory store was poisoned by a panic"))
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()> {
        self.save_owned(record.clone(), resume_state.cloned()).await
    }

    async fn save_owned(&self, record: SessionRecord, resume_state: Option<Value>) -> Result<()> {
        let id = record.summary.id.clone();
        let mut entries = self.entries()?;
        let entry = Entry {
            record,
            resume_state,
            listed: false,
        };
        let listed_before = match entries.by_id.get_mut(&id) {
            Some(kept) => std::mem::replace(kept, entry).listed,
            None => {
                entries.by_id.insert(id.clone(), entry);
                true
            }
        };
        // Unlisted before: its id is queued already.
        if listed_before {
            entries.unlisted.push(id);
        }
        if entries.unlisted.len() > entries.by_id.len() * 2 + 64 {
            // Deleted sessions' ids pile up when nothing lists: list now, so that they go.
            entries.list_saved()?;
        }
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        Ok(self
            .entries()?
            .by_id
            .get(id)
            .map(|entry| entry.record.clone()))
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        let mut guard = self.entries()?;
        guard.list_saved()?;
        let Entries { by_id, listing, .. } = &mut *guard;
        Ok(listing
            .ids()
            .filter_map(|id| by_id.get(id))
            .map(|entry| entry.record.summary.clone())
            .collect())
    }

    async fn list_json(&self) -> Result<String> {
        let mut entries = self.entries()?;
        entries.list_saved()?;
        Ok(entries.listing.json())
    }

    async fn list_since(&self, known: u64) -> Result<String> {
        let mut entries = self.entries()?;
        entries.list_saved()?;
        Ok(entries.listing.since(known))
    }

    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        Ok(self
            .entries()?
            .by_id
            .get(id)
            .and_then(|entry| entry.resume_state.clone()))
    }

    async fn delete(&self, id: &str) -> Result<()> {
        let mut entries = self.entries()?;
        entries.by_id.remove(id);
        entries.listing.remove(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::session::{SessionStatus, SessionSummary, Timestamp};
    use serde_json::json;

    #[tokio::test]
    async fn list_json_is_list_written_as_json() {
        let store = MemoryStore::new();
        for (i, updated_at) in [3.0, 1.0, 3.0, 2.5].into_iter().enumerate() {
            let record = SessionRecord {
                summary: SessionSummary::new(
                    format!("s{i}"),
                    SessionStatus::Idle,
                    json!({"i": i}),
                    Timestamp::from_millis(updated_at * 1000.0),
                ),
                messages: vec![json!({"id": "m"}).into()],
                command_results: Vec::new(),
                submissions: Vec::new(),
            };
            store.save(&record, None).await.unwrap();
        }
        let listed = serde_json::to_value(store.list().await.unwrap()).unwrap();
        let json: Value = serde_json::from_str(&store.list_json().await.unwrap()).unwrap();
        assert_eq!(json, listed);
        assert_eq!(json[0]["id"], "s0", "newest first, ties by id");
    }

    fn record(id: &str, updated_at: f64) -> SessionRecord {
        SessionRecord {
            summary: SessionSummary::new(
                id.to_owned(),
                SessionStatus::Idle,
                json!({"id": id}),
                Timestamp::from_millis(updated_at),
            ),
            messages: Vec::new(),
            command_results: Vec::new(),
            submissions: Vec::new(),
        }
    }

    #[tokio::test]
    async fn list_since_sends_only_the_summaries_written_since() {
        let store = MemoryStore::new();
        store.save(&record("a", 1000.0), None).await.unwrap();
        store.save(&record("b", 2000.0), None).await.unwrap();
        let all: Value = serde_json::from_str(&store.list_since(0).await.unwrap()).unwrap();
        // The empty store took stamp 1; a and b 2 and 3.
        assert_eq!(all[0], 3);
        assert_eq!(all[1][0][0], 3, "b, stamped 3, first");
        assert_eq!(all[1][0][1]["id"], "b");
        assert_eq!(all[1][1][1]["id"], "a");

        store.save(&record("a", 3000.0), None).await.unwrap();
        store.save(&record("c", 500.0), None).await.unwrap();
        store.delete("b").await.unwrap();
        let since: Value = serde_json::from_str(&store.list_since(3).await.unwrap()).unwrap();
        // Stamped at the list (the delete of b first, at once): b 4, then a 5 and c 6.
        assert_eq!(
            since,
            json!([
                6,
                [
                    [
                        5,
                        serde_json::to_value(&record("a", 3000.0).summary).unwrap()
                    ],
                    [
                        6,
                        serde_json::to_value(&record("c", 500.0).summary).unwrap()
                    ]
                ]
            ])
        );

        let unchanged: Value = serde_json::from_str(&store.list_since(6).await.unwrap()).unwrap();
        assert_eq!(unchanged, json!([6]), "nothing changed: the stamp alone");
        let older: Value = serde_json::from_str(&store.list_since(5).await.unwrap()).unwrap();
        assert_eq!(
            older,
            json!([
                6,
                [
                    5,
                    [
                        6,
                        serde_json::to_value(&record("c", 500.0).summary).unwrap()
                    ]
                ]
            ]),
            "c came after 5"
        );
        let before_delete: Value =
            serde_json::from_str(&store.list_since(4).await.unwrap()).unwrap();
        assert_eq!(before_delete[1].as_array().unwrap().len(), 2, "a and c");
    }

    /// Saves not listed yet are listed by the next list, each once, a deleted one never; and
    /// when nothing lists, the queue of them stays bounded.
    #[tokio::test]
    async fn saves_are_listed_by_the_next_list_and_never_pile_up() {
        let store = MemoryStore::new();
        for round in 0..500 {
            store
                .save(&record("kept", f64::from(round)), None)
                .await
                .unwrap();
            let id = format!("gone-{round}");
            store.save(&record(&id, 1.0), None).await.unwrap();
            store.delete(&id).await.unwrap();
        }
        // One session kept: at most twice that and 64 queued, and the save that tips it over.
        assert!(store.entries().unwrap().unlisted.len() <= 2 + 64 + 1);
        let listed: Value = serde_json::from_str(&store.list_json().await.unwrap()).unwrap();
        assert_eq!(
            listed,
            json!([serde_json::to_value(&record("kept", 499.0).summary).unwrap()])
        );
        assert!(store.entries().unwrap().unlisted.is_empty());
    }
}
