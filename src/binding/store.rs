//! `NativeStore`: the engine's own stores (in memory, SQLite) as a JavaScript class.
//!
//! `index.js` wraps it in an object with the five methods of `SessionStore`, so that applications
//! can call it; the manager, given one, uses the Rust store directly, with no crossing.
//!
//! Each method has two forms: the promise (the store's work on the engine's threads), and the
//! `*Now` form for a store that answers at once (the memory store: [`NativeStore::immediate`]),
//! which does the work on the calling thread, saving the two thread hops of a promise.

use std::sync::Arc;

use futures::FutureExt;
use napi_derive::napi;
use serde_json::Value;

use super::error::{guard, guard_sync, Settled};
use crate::engine::error::SessionError;
use crate::engine::input::{self, GivenText};
use crate::engine::session::SessionRecord;
use crate::engine::store::lazy::{LazyStore, OpenStore};
use crate::engine::store::memory::MemoryStore;
use crate::engine::store::postgres::{config as pg_config, PostgresStore, PostgresStoreOptions};
use crate::engine::store::sqlite::key::{self, GivenKey};
use crate::engine::store::sqlite::{SqliteStore, SqliteStoreOptions};
use crate::engine::store::SessionStore;

/// One of the engine's stores.
#[napi]
pub struct NativeStore {
    store: Arc<dyn SessionStore>,
    /// Whether every call of the store completes without waiting (a store in memory).
    immediate: bool,
    /// The same store as a PostgreSQL store, when it is one: the many-instance work runs its
    /// leases and turn log on its pool.
    postgres: Option<Arc<PostgresStore>>,
}

impl NativeStore {
    /// The store, for the manager.
    pub(crate) fn store(&self) -> Arc<dyn SessionStore> {
        self.store.clone()
    }

    /// The PostgreSQL store, when this is one.
    #[allow(dead_code)] // For the many-instance work (leases, the turn log).
    pub(crate) fn postgres_store(&self) -> Option<Arc<PostgresStore>> {
        self.postgres.clone()
    }

    async fn saving(
        &self,
        record_json: String,
        resume_state_json: Option<String>,
    ) -> Result<(), SessionError> {
        let record: SessionRecord = parse(&record_json, "record")?;
        let resume_state: Option<Value> = match resume_state_json {
            Some(json) => Some(parse(&json, "resumeState")?),
            None => None,
        };
        self.store.save_owned(record, resume_state).await
    }

    async fn getting(&self, id: GivenText) -> Result<Option<String>, SessionError> {
        match self.store.get(&input::session_id(id, "id")?).await? {
            Some(record) => write(&record).map(Some),
            None => Ok(None),
        }
    }

    async fn deleting(&self, id: GivenText) -> Result<(), SessionError> {
        self.store.delete(&input::session_id(id, "id")?).await
    }

    async fn getting_resume_state(&self, id: GivenText) -> Result<Option<String>, SessionError> {
        match self
            .store
            .get_resume_state(&input::session_id(id, "id")?)
            .await?
        {
            Some(state) => write(&state).map(Some),
            None => Ok(None),
        }
    }

    /// Runs `future` to its end on this thread, for a store that never waits: an internal error
    /// (and nothing done) if it would wait, a store that is not [`NativeStore::immediate`].
    fn at_once<T>(
        &self,
        env: &napi::Env,
        future: impl std::future::Future<Output = Result<T, SessionError>>,
    ) -> napi::Result<T> {
        guard_sync(env, || {
            if !self.immediate {
                return Err(SessionError::internal(
                    "this store answers only through promises",
                ));
            }
            future.now_or_never().unwrap_or_else(|| {
                Err(SessionError::internal("the store could not answer at once"))
            })
        })
    }
}

fn parse<T: serde::de::DeserializeOwned>(json: &str, name: &str) -> Result<T, SessionError> {
    serde_json::from_str(json).map_err(|e| {
        SessionError::input(name, format!("{name} is not a valid session record: {e}"))
    })
}

/// The stamp a caller says it has seen up to: 0 (none) unless a whole number a stamp can be.
pub(crate) fn stamp(known: f64) -> u64 {
    if known.is_finite() && known >= 1.0 && known.fract() == 0.0 && known <= 9_007_199_254_740_991.0
    {
        known as u64
    } else {
        0
    }
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
            immediate: true,
            postgres: None,
        }
    }

    /// A SQLite store in the file at `path` (a relative one resolved against the working directory
    /// now), opened at its first use: the file created (mode 0600) when missing, with its missing
    /// parent folders (mode 0700); resume states are encrypted with `key` when one is given
    /// (`keyFrom`: the environment variable it was read from, `null` for the `encryptionKey`
    /// option; see `engine::store::sqlite::key`). `path` and `key` are read as JavaScript gave
    /// them, and checked here. A bad path or an old SQLite fails the first call that uses the store.
    #[napi(factory)]
    pub fn sqlite(
        env: napi::Env,
        #[napi(ts_arg_type = "unknown")] path: GivenText,
        #[napi(ts_arg_type = "unknown")] key: GivenKey,
        key_from: Option<String>,
    ) -> napi::Result<NativeStore> {
        super::error::guard_sync(&env, || {
            let path = input::file_path(path, "path")?;
            let options = SqliteStoreOptions {
                encryption_key: key::encryption_key(key, key_from.as_deref())?,
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
                immediate: false,
                postgres: None,
            })
        })
    }

    /// A PostgreSQL store on `url` (a `postgres://` connection string), connected at its first
    /// use, its schema (`harness_sessions` unless `schema`) created or migrated then under a lock.
    /// `leaseTtlMs` (default 15,000), `instanceId` (default a random id of the process) and
    /// `listenUrl` (the `LISTEN` connection's server, default `url`) serve the many-instance
    /// work; resume states are encrypted with `key` as for [`NativeStore::sqlite`]. Everything is
    /// checked here; a bad value is refused at once, an unreachable server at the first use.
    #[napi(factory)]
    #[allow(clippy::too_many_arguments)]
    pub fn postgres(
        env: napi::Env,
        #[napi(ts_arg_type = "unknown")] url: GivenText,
        #[napi(ts_arg_type = "unknown")] schema: GivenText,
        #[napi(ts_arg_type = "unknown")] lease_ttl_ms: Value,
        #[napi(ts_arg_type = "unknown")] instance_id: GivenText,
        #[napi(ts_arg_type = "unknown")] listen_url: GivenText,
        #[napi(ts_arg_type = "unknown")] key: GivenKey,
        key_from: Option<String>,
    ) -> napi::Result<NativeStore> {
        super::error::guard_sync(&env, || {
            let url = match url {
                GivenText::Text(url) => url,
                GivenText::NotText | GivenText::LoneSurrogate => {
                    return Err(SessionError::input(
                        "url",
                        "url must be a postgres:// connection string",
                    ))
                }
            };
            let mut options = PostgresStoreOptions::new(&url)?;
            if let Some(schema) = input::optional_text(schema, "schema")? {
                options.schema = pg_config::schema_name(&schema)?;
            }
            match lease_ttl_ms {
                Value::Null => {}
                Value::Number(millis) => {
                    options.lease_ttl = pg_config::lease_ttl(millis.as_f64().unwrap_or(f64::NAN))?
                }
                _ => {
                    return Err(SessionError::input(
                        "leaseTtlMs",
                        "leaseTtlMs must be a whole number of milliseconds from 100 to 86400000",
                    ))
                }
            }
            if let Some(id) = input::optional_text(instance_id, "instanceId")? {
                options.instance_id = pg_config::instance_id(&id)?;
            }
            if let Some(listen) = input::optional_text(listen_url, "listenUrl")? {
                options.listen_url =
                    Some(pg_config::ConnectionTarget::parse(&listen, "listenUrl")?);
            }
            options.encryption_key = key::encryption_key(key, key_from.as_deref())?;
            let store = Arc::new(PostgresStore::new(options)?);
            Ok(NativeStore {
                store: store.clone(),
                immediate: false,
                postgres: Some(store),
            })
        })
    }

    /// `save(record, resumeState?)`, both as JSON.
    #[napi]
    pub async fn save(
        &self,
        record_json: String,
        resume_state_json: Option<String>,
    ) -> Settled<()> {
        guard(self.saving(record_json, resume_state_json)).await
    }

    /// `get(id)`: the record as JSON, or nothing.
    #[napi]
    pub async fn get(
        &self,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
    ) -> Settled<Option<String>> {
        guard(self.getting(id)).await
    }

    /// `list()`: the summaries as JSON.
    #[napi]
    pub async fn list(&self) -> Settled<String> {
        guard(self.store.list_json()).await
    }

    /// `list()` for a caller that keeps the summaries it was given (`js/summaries.js`): `[stamp,
    /// rows]`, the summaries stamped at most `known` left out, or `[stamp]` alone when nothing
    /// changed since `known` (see `SessionStore::list_since`).
    #[napi]
    pub async fn list_since(&self, known: f64) -> Settled<String> {
        guard(self.store.list_since(stamp(known))).await
    }

    /// `getResumeState(id)`: the state as JSON, or nothing.
    #[napi]
    pub async fn get_resume_state(
        &self,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
    ) -> Settled<Option<String>> {
        guard(self.getting_resume_state(id)).await
    }

    /// `delete(id)`.
    #[napi]
    pub async fn delete(&self, #[napi(ts_arg_type = "unknown")] id: GivenText) -> Settled<()> {
        guard(self.deleting(id)).await
    }

    /// Whether the store answers at once (the memory store): `index.js` then calls the `*Now`
    /// methods, which do the work on the calling thread.
    #[napi(getter)]
    pub fn immediate(&self) -> bool {
        self.immediate
    }

    /// [`NativeStore::save`], done at once (an immediate store only).
    #[napi]
    pub fn save_now(
        &self,
        env: napi::Env,
        record_json: String,
        resume_state_json: Option<String>,
    ) -> napi::Result<()> {
        self.at_once(&env, self.saving(record_json, resume_state_json))
    }

    /// [`NativeStore::get`], done at once (an immediate store only).
    #[napi]
    pub fn get_now(
        &self,
        env: napi::Env,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
    ) -> napi::Result<Option<String>> {
        self.at_once(&env, self.getting(id))
    }

    /// [`NativeStore::list`], done at once (an immediate store only).
    #[napi]
    pub fn list_now(&self, env: napi::Env) -> napi::Result<String> {
        self.at_once(&env, self.store.list_json())
    }

    /// [`NativeStore::list_since`], done at once (an immediate store only).
    #[napi]
    pub fn list_since_now(&self, env: napi::Env, known: f64) -> napi::Result<String> {
        self.at_once(&env, self.store.list_since(stamp(known)))
    }

    /// [`NativeStore::get_resume_state`], done at once (an immediate store only).
    #[napi]
    pub fn get_resume_state_now(
        &self,
        env: napi::Env,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
    ) -> napi::Result<Option<String>> {
        self.at_once(&env, self.getting_resume_state(id))
    }

    /// [`NativeStore::delete`], done at once (an immediate store only).
    #[napi]
    pub fn delete_now(
        &self,
        env: napi::Env,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
    ) -> napi::Result<()> {
        self.at_once(&env, self.deleting(id))
    }

    /// `close()`: lets go of the store (the SQLite store closes its file, and frees it for
    /// another store); later calls fail.
    #[napi]
    pub async fn close(&self) -> Settled<()> {
        guard(self.store.release()).await
    }
}
