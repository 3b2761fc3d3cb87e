//! `NativeStore`: the engine's own stores (in memory, SQLite) as a JavaScript class.
//!
//! `index.js` wraps it in an object with the five methods of `SessionStore`, so that applications
//! can call it; the manager, given one, uses the Rust store directly, with no crossing.

use std::sync::Arc;

use napi_derive::napi;
use serde_json::Value;

use super::error::guard;
use crate::engine::error::SessionError;
use crate::engine::session::SessionRecord;
use crate::engine::store::memory::MemoryStore;
use crate::engine::store::SessionStore;

/// One of the engine's stores.
#[napi]
pub struct NativeStore {
    store: Arc<dyn SessionStore>,
}

impl NativeStore {
    /// The store, for the manager.
    pub(crate) fn store(&self) -> Arc<dyn SessionStore> {
        self.store.clone()
    }
}

fn parse<T: serde::de::DeserializeOwned>(json: &str, name: &str) -> Result<T, SessionError> {
    serde_json::from_str(json).map_err(|e| {
        SessionError::input(name, format!("{name} is not a valid session record: {e}"))
    })
}

fn write<T: serde::Serialize>(value: &T) -> Result<String, SessionError> {
    serde_json::to_string(value)
        .map_err(|e| SessionError::internal(format!("a record could not be written as JSON: {e}")))
}

#[napi]
impl NativeStore {
    /// A store in memory.
    #[napi(factory)]
    pub fn memory() -> NativeStore {
        NativeStore {
            store: Arc::new(MemoryStore::new()),
        }
    }

    /// `save(record, resumeState?)`, both as JSON.
    #[napi]
    pub async fn save(
        &self,
        record_json: String,
        resume_state_json: Option<String>,
    ) -> napi::Result<()> {
        guard(async {
            let record: SessionRecord = parse(&record_json, "record")?;
            let resume_state: Option<Value> = match resume_state_json {
                Some(json) => Some(parse(&json, "resumeState")?),
                None => None,
            };
            self.store.save(&record, resume_state.as_ref()).await
        })
        .await
    }

    /// `get(id)`: the record as JSON, or nothing.
    #[napi]
    pub async fn get(&self, id: String) -> napi::Result<Option<String>> {
        guard(async {
            match self.store.get(&id).await? {
                Some(record) => write(&record).map(Some),
                None => Ok(None),
            }
        })
        .await
    }

    /// `list()`: the summaries as JSON.
    #[napi]
    pub async fn list(&self) -> napi::Result<String> {
        guard(async { write(&self.store.list().await?) }).await
    }

    /// `getResumeState(id)`: the state as JSON, or nothing.
    #[napi]
    pub async fn get_resume_state(&self, id: String) -> napi::Result<Option<String>> {
        guard(async {
            match self.store.get_resume_state(&id).await? {
                Some(state) => write(&state).map(Some),
                None => Ok(None),
            }
        })
        .await
    }

    /// `delete(id)`.
    #[napi]
    pub async fn delete(&self, id: String) -> napi::Result<()> {
        guard(self.store.delete(&id)).await
    }
}
