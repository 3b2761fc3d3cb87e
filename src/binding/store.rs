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
use crate::engine::store::lazy::{LazyStore, OpenStore};
use crate::engine::store::memory::MemoryStore;
use crate::engine::store::sqlite::{SqliteStore, SqliteStoreOptions};
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

    /// A SQLite store in the file at `path` (a relative one resolved against the working directory
    /// now), opened
    /// at its first use: the file created (mode 0600) when missing, with its missing parent
    /// folders (mode 0700); resume states are encrypted with `encryption_key` (32 bytes) when one
    /// is given. A bad path or an old SQLite fails the first call that uses the store.
    #[napi(factory)]
    pub fn sqlite(
        path: String,
        encryption_key: Option<napi::bindgen_prelude::Buffer>,
    ) -> napi::Result<NativeStore> {
        super::error::guard_sync(|| {
            if path.is_empty() || path.contains('\0') {
                return Err(SessionError::input(
                    "path",
                    "path must be the path of a file",
                ));
            }
            let path = std::path::absolute(&path).map_err(|e| {
                SessionError::input("path", format!("path must be the path of a file: {e}"))
            })?;
            let encryption_key = match encryption_key {
                None => None,
                Some(key) => Some(<[u8; 32]>::try_from(key.as_ref()).map_err(|_| {
                    SessionError::input("encryptionKey", "encryptionKey must be 32 bytes")
                })?),
            };
            let options = SqliteStoreOptions {
                encryption_key,
                ..SqliteStoreOptions::default()
            };
            let open: OpenStore = Box::new(move || {
                let (path, options) = (path.clone(), options.clone());
                Box::pin(async move {
                    let store = SqliteStore::open(&path, options).await?;
                    Ok(Arc::new(store) as Arc<dyn SessionStore>)
                })
            });
            Ok(NativeStore {
                store: Arc::new(LazyStore::new(open)),
            })
        })
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
        guard(self.store.list_json()).await
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

    /// `close()`: lets go of the store (the SQLite store closes its file, and frees it for
    /// another store); later calls fail.
    #[napi]
    pub async fn close(&self) -> napi::Result<()> {
        guard(self.store.release()).await
    }
}
