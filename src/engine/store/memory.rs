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
            }),
        }
    }
}

/// The records, and their summaries as `list()` gives them.
struct Entries {
    by_id: HashMap<String, Entry>,
    /// The summaries as JSON, written once at `save`, in list order: `list_json` only joins them.
    listing: Listing,
}

struct Entry {
    record: SessionRecord,
    resume_state: Option<Value>,
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
        let summary_json = serde_json::to_string(&record.summary)
            .map_err(|e| SessionError::internal(format!("a summary could not be written: {e}")))?;
        let id = record.summary.id.clone();
        let key = order_key(record.summary.updated_at.millis());
        let mut entries = self.entries()?;
        entries.listing.put(&id, key, summary_json);
        entries.by_id.insert(
            id,
            Entry {
                record,
                resume_state,
            },
        );
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
        let Entries { by_id, listing } = &mut *guard;
        Ok(listing
            .ids()
            .filter_map(|id| by_id.get(id))
            .map(|entry| entry.record.summary.clone())
            .collect())
    }

    async fn list_json(&self) -> Result<String> {
        Ok(self.entries()?.listing.json())
    }

    async fn list_since(&self, known: u64) -> Result<String> {
        Ok(self.entries()?.listing.since(known))
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
        assert_eq!(
            since,
            json!([
                6,
                [
                    [
                        4,
                        serde_json::to_value(&record("a", 3000.0).summary).unwrap()
                    ],
                    [
                        5,
                        serde_json::to_value(&record("c", 500.0).summary).unwrap()
                    ]
                ]
            ])
        );

        let unchanged: Value = serde_json::from_str(&store.list_since(6).await.unwrap()).unwrap();
        assert_eq!(unchanged, json!([6]), "nothing changed: the stamp alone");
        let older: Value = serde_json::from_str(&store.list_since(5).await.unwrap()).unwrap();
        assert_eq!(older, json!([6, [4, 5]]), "the delete of b was a change");
    }
}
