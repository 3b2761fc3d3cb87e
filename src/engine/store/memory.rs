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
    entries: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    record: SessionRecord,
    /// The summary as JSON, written once at `save`, so that `list_json` only sorts and joins.
    summary_json: String,
    resume_state: Option<Value>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn entries(&self) -> Result<std::sync::MutexGuard<'_, HashMap<String, Entry>>> {
        self.entries
            .lock()
            .map_err(|_| SessionError::internal("the memory store was poisoned by a panic"))
    }
}

#[async_trait]
impl SessionStore for MemoryStore {
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()> {
        let summary_json = serde_json::to_string(&record.summary)
            .map_err(|e| SessionError::internal(format!("a summary could not be written: {e}")))?;
        self.entries()?.insert(
            record.summary.id.clone(),
            Entry {
                record: record.clone(),
                summary_json,
                resume_state: resume_state.cloned(),
            },
        );
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        Ok(self.entries()?.get(id).map(|entry| entry.record.clone()))
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        let mut summaries: Vec<SessionSummary> = self
            .entries()?
            .values()
            .map(|entry| entry.record.summary.clone())
            .collect();
        sort_newest_first(&mut summaries);
        Ok(summaries)
    }

    async fn list_json(&self) -> Result<String> {
        let entries = self.entries()?;
        let mut rows: Vec<(f64, &str, &str)> = entries
            .values()
            .map(|e| {
                (
                    e.record.summary.updated_at.millis(),
                    e.record.summary.id.as_str(),
                    e.summary_json.as_str(),
                )
            })
            .collect();
        rows.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let mut json = String::with_capacity(rows.iter().map(|r| r.2.len() + 1).sum::<usize>() + 2);
        json.push('[');
        for (index, (_, _, summary)) in rows.iter().enumerate() {
            if index > 0 {
                json.push(',');
            }
            json.push_str(summary);
        }
        json.push(']');
        Ok(json)
    }

    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        Ok(self
            .entries()?
            .get(id)
            .and_then(|entry| entry.resume_state.clone()))
    }

    async fn delete(&self, id: &str) -> Result<()> {
        self.entries()?.remove(id);
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
}
