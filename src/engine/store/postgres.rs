//! `createPostgresSessionStore({ url, schema?, leaseTtlMs?, instanceId?, listenUrl? })`: sessions
//! kept in PostgreSQL (14 or later), in a schema of their own (`harness_sessions` by default).
//!
//! [`PostgresStore`] holds a pool of connections (`tokio-postgres` pooled by `deadpool-postgres`,
//! TLS by rustls: see `connection` and `tls`), opened at the first use with the schema created
//! and migrated under a lock (`schema`), and, for the work of many instances, one connection that
//! `LISTEN`s (`listen`), opened at the first listen.
//!
//! Invariants:
//! - it holds what the SQLite store holds, in the same shapes: each record (its summary as JSON
//!   text, byte for byte, with the fields the store does not know; its messages one row each;
//!   its submissions and keyed `exec()` results), and, while a session is suspended, its resume
//!   state, sealed with XChaCha20-Poly1305 when the store has a key (see `sqlite::seal`);
//! - every `save` is one transaction: the session is as before or as after, never between; a save
//!   whose caller stops waiting still completes or fails as a whole (it runs on its own task);
//!   only the message rows that changed are rewritten;
//! - `get` reads the session in one statement (one snapshot); `list` gives the summaries newest
//!   first, ties by id in byte order ([`super::sort_newest_first`]);
//! - any number of managers, in any number of processes, may use one store: the tables are
//!   shared; running one set of sessions on many instances (leases, the turn log) is built on the
//!   `pub(crate)` API below ([`PostgresStore::connections`], [`PostgresStore::listener`],
//!   [`PostgresStore::statements`]);
//! - the URL's password never appears in an error, a log or a `Debug` output.

pub mod cluster;
pub mod config;
mod connection;
// Used by the many-instance work (leases, the turn log), beside the store.
#[allow(dead_code)]
mod listen;
mod records;
mod schema;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
mod tls;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

pub use self::config::{PostgresStoreOptions, TlsMode};
pub(crate) use self::connection::Connections;
#[allow(unused_imports)]
pub(crate) use self::listen::{ListenState, Listener, Notification};
pub(crate) use self::records::Statements;
use super::sqlite::seal::ResumeStateCodec;
use super::SessionStore;
use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionRecord, SessionSummary};

/// Sessions in PostgreSQL.
pub struct PostgresStore {
    options: PostgresStoreOptions,
    codec: Arc<ResumeStateCodec>,
    /// The pool and the statements, while open (opened at the first use, again after
    /// [`SessionStore::release`]).
    open: tokio::sync::Mutex<Option<Arc<Opened>>>,
    /// The `LISTEN`ing connection, once asked for.
    listener: tokio::sync::Mutex<Option<Arc<Listener>>>,
    /// The sessions whose rows could not be read.
    unreadable: super::UnreadableRows,
    /// Whether a session manager runs on this store object.
    claimed: std::sync::atomic::AtomicBool,
}

/// An open store: its pool, migrated, and its statements' text.
pub(crate) struct Opened {
    /// The pool.
    pub(crate) connections: Connections,
    /// The statements of the records, in the store's schema.
    pub(crate) statements: Statements,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// A store with `options`; nothing is connected before the first use.
    ///
    /// # Errors
    /// [`SessionError::Input`] for a schema that is not a plain identifier.
    pub fn new(options: PostgresStoreOptions) -> Result<PostgresStore> {
        config::schema_name(&options.schema)?;
        config::instance_id(&options.instance_id)?;
        Ok(PostgresStore {
            codec: Arc::new(ResumeStateCodec::new(options.encryption_key.as_ref())),
            options,
            open: tokio::sync::Mutex::new(None),
            listener: tokio::sync::Mutex::new(None),
            unreadable: super::UnreadableRows::default(),
            claimed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// [`PostgresStore::new`], then connects and migrates at once.
    ///
    /// # Errors
    /// As [`PostgresStore::new`], then [`SessionError::StoreUnavailable`] when the server cannot
    /// be reached, [`SessionError::Host`] when the schema cannot be migrated.
    pub async fn connect(options: PostgresStoreOptions) -> Result<PostgresStore> {
        let store = PostgresStore::new(options)?;
        store.opened().await?;
        Ok(store)
    }

    /// The options the store was made with.
    pub fn options(&self) -> &PostgresStoreOptions {
        &self.options
    }

    /// The schema the tables live in.
    pub fn schema(&self) -> &str {
        &self.options.schema
    }

    /// The open store: connected and migrated now if it was not.
    ///
    /// # Errors
    /// As [`PostgresStore::connect`].
    pub(crate) async fn opened(&self) -> Result<Arc<Opened>> {
        let mut open = self.open.lock().await;
        if let Some(opened) = open.as_ref() {
            return Ok(opened.clone());
        }
        let connections = Connections::new(&self.options.url, self.options.max_connections)?;
        schema::migrate(&connections, &self.options.schema, schema::MIGRATIONS).await?;
        let opened = Arc::new(Opened {
            connections,
            statements: Statements::new(&schema::quoted(&self.options.schema)),
        });
        *open = Some(opened.clone());
        Ok(opened)
    }

    /// The pool (connected and migrated), for work that runs its own transactions on the
    /// store's tables: leases, the turn log.
    ///
    /// # Errors
    /// As [`PostgresStore::connect`].
    #[allow(dead_code)] // For the many-instance work (leases, the turn log).
    pub(crate) async fn connections(&self) -> Result<Arc<Opened>> {
        self.opened().await
    }

    /// The statements' text in the store's schema (`<schema>.leases`, ...): `"schema"`.
    #[allow(dead_code)] // For the many-instance work (leases, the turn log).
    pub(crate) fn quoted_schema(&self) -> String {
        schema::quoted(&self.options.schema)
    }

    /// The store's `LISTEN`ing connection (on `listenUrl`, else `url`), started at the first
    /// call; it opens its connection at its first `listen`.
    ///
    /// # Errors
    /// [`SessionError::Input`] when the TLS roots of its URL cannot be read.
    #[allow(dead_code)] // For the many-instance work (leases, the turn log).
    pub(crate) async fn listener(&self) -> Result<Arc<Listener>> {
        let mut listener = self.listener.lock().await;
        if let Some(listener) = listener.as_ref() {
            return Ok(listener.clone());
        }
        let started = Arc::new(match &self.options.listen_url {
            Some(target) => Listener::start(target, "listenUrl")?,
            None => Listener::start(&self.options.url, "url")?,
        });
        *listener = Some(started.clone());
        Ok(started)
    }

    /// Writes `record` (and its resume state) inside `tx`, the caller's transaction on a
    /// connection of `opened`: what [`SessionStore::save`] does, for a caller that checks a lease
    /// in the same transaction.
    ///
    /// # Errors
    /// When the record cannot be serialized or a statement fails; the caller's transaction is
    /// then to be rolled back.
    #[allow(dead_code)] // For the many-instance work (leases, the turn log).
    pub(crate) async fn save_in(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        opened: &Opened,
        record: &SessionRecord,
        resume_state: Option<&Value>,
    ) -> Result<()> {
        let save = records::prepare(&self.codec, record, resume_state)?;
        records::write(tx, &opened.statements, &save)
            .await
            .map_err(|error| {
                opened
                    .connections
                    .failed(&format!("save session {}", record.summary.id), &error)
            })
    }

    /// The id of this instance in leases.
    #[allow(dead_code)] // For the many-instance work (leases, the turn log).
    pub(crate) fn instance_id(&self) -> &str {
        &self.options.instance_id
    }

    /// How long a lease lasts without renewal.
    #[allow(dead_code)] // For the many-instance work (leases, the turn log).
    pub(crate) fn lease_ttl(&self) -> std::time::Duration {
        self.options.lease_ttl
    }
}

#[async_trait]
impl SessionStore for PostgresStore {
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()> {
        let save = records::prepare(&self.codec, record, resume_state)?;
        let opened = self.opened().await?;
        let id = record.summary.id.clone();
        // On a task of its own: a caller that stops waiting does not cut the transaction.
        tokio::spawn(async move { records::save(&opened, save).await })
            .await
            .map_err(|_| SessionError::internal(format!("the save of session {id} stopped")))??;
        self.unreadable.forget(&record.summary.id);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        let got = records::get(&*self.opened().await?, id).await;
        if let Err(error) = &got {
            if records::is_damaged(error) {
                self.unreadable.note(id, error.clone());
            }
        }
        got
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        let (summaries, unreadable) = records::list(&*self.opened().await?).await?;
        for (id, error) in unreadable {
            self.unreadable.note(&id, error);
        }
        Ok(summaries)
    }

    async fn list_json(&self) -> Result<String> {
        let (text, unreadable) = records::list_json(&*self.opened().await?).await?;
        for (id, error) in unreadable {
            self.unreadable.note(&id, error);
        }
        Ok(text)
    }

    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        let stored = records::get_resume_state(&*self.opened().await?, id).await?;
        stored
            .map(|stored| {
                self.codec.decode(id, stored).map_err(|error| match error {
                    SessionError::Host { message, origin } => SessionError::Host {
                        message: message.replace("the sqlite store", "the postgres store"),
                        origin,
                    },
                    other => other,
                })
            })
            .transpose()
    }

    async fn delete(&self, id: &str) -> Result<()> {
        records::delete(&*self.opened().await?, id).await?;
        self.unreadable.forget(id);
        Ok(())
    }

    fn claim(&self) -> Result<()> {
        if self.claimed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(SessionError::host(format!(
                "the postgres store on schema {} is in use by another session manager: one \
                 manager per store object; shut the other down first",
                self.options.schema
            )));
        }
        Ok(())
    }

    async fn release(&self) -> Result<()> {
        self.claimed
            .store(false, std::sync::atomic::Ordering::SeqCst);
        self.listener.lock().await.take();
        if let Some(opened) = self.open.lock().await.take() {
            opened.connections.close();
        }
        Ok(())
    }

    fn take_unreadable(&self) -> Vec<(String, SessionError)> {
        self.unreadable.take()
    }

    fn is_unreadable(&self, id: &str) -> bool {
        self.unreadable.contains(id)
    }
}
