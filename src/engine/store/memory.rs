//! `createMemorySessionStore()`: sessions kept in this process's memory, lost with it.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::Value;

use super::{sort_newest_first, SessionStore};
use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionRecord, SessionSummary};

/// Sessions in memory: the default store.
#[derive(Default)]
pub struct MemoryStore {
    entries: Mutex<Entries>,
}

/// The records, and the last stamp given (see [`SessionStore::list_since`]).
#[derive(Default)]
struct Entries {
    by_id: HashMap<String, Entry>,
    stamp: u64,
}

struct Entry {
    record: SessionRecord,
    /// The summary as JSON, written once at `save`, so that `list_json` only sorts and joins.
    summary_json: String,
    /// The stamp of this summary: given at `save`, one more than the last.
    stamp: u64,
    resume_state: Option<Value>,
}

impl Entries {
    /// The entries, newest first (ties by id).
    fn newest_first(&self) -> Vec<&Entry> {
        let mut rows: Vec<&Entry> = self.by_id.values().collect();
        rows.sort_unstable_by(|a, b| {
            let (a, b) = (&a.record.summary, &b.record.summary);
            b.updated_at
                .millis()
                .total_cmp(&a.updated_at.millis())
                .then_with(|| a.id.cmp(&b.id))
        });
        rows
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
        let summary_json = serde_json::to_string(&record.summary)
            .map_err(|e| SessionError::internal(format!("a summary could not be written: {e}")))?;
        let mut entries = self.entries()?;
        entries.stamp += 1;
        let stamp = entries.stamp;
        entries.by_id.insert(
            record.summary.id.clone(),
            Entry {
                record,
                summary_json,
                stamp,
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
        let mut summaries: Vec<SessionSummary> = self
            .entries()?
            .by_id
            .values()
            .map(|entry| entry.record.summary.clone())
            .collect();
        sort_newest_first(&mut summaries);
        Ok(summaries)
    }

    async fn list_json(&self) -> Result<String> {
        let entries = self.entries()?;
        let rows = entries.newest_first();
        let mut json =
            String::with_capacity(rows.iter().map(|e| e.summary_json.len() + 1).sum::<usize>() + 2);
        json.push('[');
        for (index, entry) in rows.iter().enumerate() {
            if index > 0 {
                json.push(',');
            }
            json.push_str(&entry.summary_json);
        }
        json.push(']');
        Ok(json)
    }

    async fn list_since(&self, known: u64) -> Result<String> {
        use std::fmt::Write;
        let entries = self.entries()?;
        let rows = entries.newest_first();
        let fresh: usize = rows
            .iter()
            .filter(|e| e.stamp > known)
            .map(|e| e.summary_json.len() + 24)
            .sum();
        let mut json = String::with_capacity(fresh + rows.len() * 8 + 24);
        let _ = write!(json, "[{},[", entries.stamp);
        for (index, entry) in rows.iter().enumerate() {
            if index > 0 {
                json.push(',');
            }
            if entry.stamp <= known {
                let _ = write!(json, "{}", entry.stamp);
            } else {
                let _ = write!(json, "[{},{}]", entry.stamp, entry.summary_json);
            }
        }
        json.push_str("]]");
        Ok(json)
    }

    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        Ok(self
            .entries()?
            .by_id
            .get(id)
            .and_then(|entry| entry.resume_state.clone()))
    }

    async fn delete(&self, id: &str) -> Result<()> {
        self.entries()?.by_id.remove(id);
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
        assert_eq!(all[0], 2);
        assert_eq!(all[1][0][0], 2, "b, stamped 2, first");
        assert_eq!(all[1][0][1]["id"], "b");
        assert_eq!(all[1][1][1]["id"], "a");

        store.save(&record("a", 3000.0), None).await.unwrap();
        store.save(&record("c", 500.0), None).await.unwrap();
        store.delete("b").await.unwrap();
        let since: Value = serde_json::from_str(&store.list_since(2).await.unwrap()).unwrap();
        assert_eq!(
            since,
            json!([
                4,
                [
                    [
                        3,
                        serde_json::to_value(&record("a", 3000.0).summary).unwrap()
                    ],
                    [
                        4,
                        serde_json::to_value(&record("c", 500.0).summary).unwrap()
                    ]
                ]
            ])
        );

        let unchanged: Value = serde_json::from_str(&store.list_since(4).await.unwrap()).unwrap();
        assert_eq!(unchanged, json!([4, [3, 4]]));
    }
}
