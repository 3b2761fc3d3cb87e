//! The pool of connections to the server, and what its failures become.
//!
//! Invariants:
//! - the pool connects lazily, one connection per concurrent query at most `max_connections`;
//!   a connection found closed (the server restarted, the network cut) is dropped and replaced at
//!   the next checkout;
//! - a failure to reach the server (refused, timed out, login or TLS refused, a connection lost)
//!   is [`SessionError::StoreUnavailable`] naming the server as `host:port/database as user`; a
//!   failure of a statement is [`SessionError::Host`] with the server's message (never the SQL,
//!   never a bound value: `DETAIL`s, which may quote values, are left out); neither holds the
//!   password.

use std::time::Duration;

use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};

use super::config::ConnectionTarget;
use super::tls;
use crate::engine::error::{Result, SessionError};

/// How long a query waits for a free connection before it fails.
const WAIT_TIMEOUT: Duration = Duration::from_secs(30);

/// The pool of connections to `url`, and what errors name it.
pub(crate) struct Connections {
    pool: Pool,
    target: ConnectionTarget,
}

impl Connections {
    /// A pool of at most `max_connections` connections to `target` (none opened yet).
    ///
    /// # Errors
    /// [`SessionError::Input`] at `url` when its TLS roots cannot be read.
    pub(crate) fn new(target: &ConnectionTarget, max_connections: usize) -> Result<Connections> {
        let (config, connector) = tls::connector(target, "url")?;
        let connect_timeout = config
            .get_connect_timeout()
            .copied()
            .unwrap_or(Duration::from_secs(10));
        let manager = Manager::from_config(
            config,
            connector,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(WAIT_TIMEOUT))
            // The connection's own timeout, with room for the TLS handshake and the login.
            .create_timeout(Some(connect_timeout + Duration::from_secs(5)))
            .build()
            .map_err(|error| SessionError::internal(format!("the pool was refused: {error}")))?;
        Ok(Connections {
            pool,
            target: target.clone(),
        })
    }

    /// A connection of the pool.
    ///
    /// # Errors
    /// [`SessionError::StoreUnavailable`] when no connection can be made or none frees up.
    pub(crate) async fn get(&self) -> Result<Object> {
        self.pool.get().await.map_err(|error| match error {
            PoolError::Backend(error) => self.unreachable(&error),
            PoolError::Timeout(_) => SessionError::StoreUnavailable {
                message: format!(
                    "the postgres store at {} gave no connection in time: the server does not \
                     answer, or every connection of the pool is busy",
                    self.target.describe()
                ),
            },
            PoolError::Closed => SessionError::StoreUnavailable {
                message: format!("the postgres store at {} is closed", self.target.describe()),
            },
            other => SessionError::internal(
                self.target
                    .scrub(&format!("the postgres store's pool failed: {other}")),
            ),
        })
    }

    /// The pool, for the work that needs its own transactions (leases, the turn log).
    #[allow(dead_code)] // For the many-instance work (leases, the turn log).
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The server, as errors name it.
    #[allow(dead_code)] // For the many-instance work (leases, the turn log).
    pub(crate) fn target(&self) -> &ConnectionTarget {
        &self.target
    }

    /// Closes the pool: connections in use close when given back, later checkouts fail.
    pub(crate) fn close(&self) {
        self.pool.close();
    }

    /// The error for a connection that could not be made.
    pub(crate) fn unreachable(&self, error: &tokio_postgres::Error) -> SessionError {
        unreachable(&self.target, error)
    }

    /// The error for a statement that failed while the store tried to `action` ("save session
    /// a1"): [`SessionError::StoreUnavailable`] when the connection was lost.
    pub(crate) fn failed(&self, action: &str, error: &tokio_postgres::Error) -> SessionError {
        failed(&self.target, action, error)
    }
}

/// The error for a connection to `target` that could not be made.
pub(crate) fn unreachable(
    target: &ConnectionTarget,
    error: &tokio_postgres::Error,
) -> SessionError {
    SessionError::StoreUnavailable {
        message: target.scrub(&format!(
            "could not connect to the postgres store at {}: {}",
            target.describe(),
            describe(error)
        )),
    }
}

/// The error for a statement on `target` that failed while the store tried to `action`.
pub(crate) fn failed(
    target: &ConnectionTarget,
    action: &str,
    error: &tokio_postgres::Error,
) -> SessionError {
    if error.as_db_error().is_none() && (error.is_closed() || is_io(error)) {
        return SessionError::StoreUnavailable {
            message: target.scrub(&format!(
                "the postgres store at {} could not {action}: the connection was lost ({})",
                target.describe(),
                describe(error)
            )),
        };
    }
    SessionError::host(target.scrub(&format!(
        "the postgres store could not {action}: {}",
        describe(error)
    )))
}

/// What went wrong, in the server's words (its message and SQLSTATE, no `DETAIL`), or in the
/// client's (with the causes' messages).
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{} (sqlstate {})", db.message(), db.code().code());
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn is_io(error: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause.is::<std::io::Error>() {
            return true;
        }
        source = cause.source();
    }
    false
}
