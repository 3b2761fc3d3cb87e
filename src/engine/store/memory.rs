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
        self.entries()?.insert(
            record.summary.id.clone(),
            Entry {
                record: record.clone(),
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
