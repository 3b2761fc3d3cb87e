//! The one error type of the engine, and the stable codes JavaScript turns into error classes.
//!
//! Every refusal a user can act on is a variant here, with its message word for word as
//! applications match it (`No session <id>.`, `The session is <status>.`, ...). The binding maps
//! [`SessionError::code`] to a JavaScript class (`SessionNotFoundError`, ...); nothing else in the
//! engine builds user-facing error text.

use crate::engine::session::SessionStatus;

/// What went wrong, as users and applications see it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionError {
    /// No session has this id.
    #[error("No session {session_id}.")]
    NotFound {
        /// The id asked for.
        session_id: String,
    },
    /// `create()` with the id of a session that exists.
    #[error("A session {session_id} already exists.")]
    AlreadyExists {
        /// The id of the existing session.
        session_id: String,
        /// Its status.
        status: SessionStatus,
    },
    /// The session cannot do it in its status.
    #[error("{message}")]
    Conflict {
        /// The session that refused.
        session_id: String,
        /// Its status when it refused.
        status: SessionStatus,
        /// Why, word for word: `The session is busy.`, `The session waits for input: ...`.
        message: String,
    },
    /// Every sandbox slot is taken by a session that cannot be suspended to make room.
    #[error(
        "{capacity} sessions are live, the most the sandboxes take: close or suspend one first."
    )]
    Capacity {
        /// How many sessions the sandboxes take at once.
        capacity: u32,
    },
    /// An argument of the wrong shape.
    #[error("{message}")]
    Input {
        /// The argument, field or path at fault: `message.parts[2].type`.
        path: String,
        /// What is wrong with it, naming the path.
        message: String,
    },
    /// A command or message its caller cut (its `abortSignal`) before it started: nothing was
    /// done. JavaScript throws the signal's reason instead.
    #[error("It was cut short by its caller before it started.")]
    CutBeforeStart,
    /// This instance's lease on the session was lost (it paused past it, or was cut off from the
    /// database) and another instance took the session over: it writes nothing more of it.
    #[error(
        "This instance no longer owns the session {session_id}: another instance took it over."
    )]
    LeaseLost {
        /// The session.
        session_id: String,
    },
    /// `shutdown()` ran: the manager refuses everything.
    #[error("The session manager is shut down.")]
    ShutDown,
    /// Something the application supplied failed: the agent, a sandbox, the store, a hook.
    #[error("{message}")]
    Host {
        /// The error's message.
        message: String,
        /// The original JavaScript error, kept by the binding, when there is one.
        origin: Option<u64>,
    },
    /// The store's database cannot be reached (the PostgreSQL store: a server that refuses or
    /// does not answer, a failed login, a TLS handshake refused). The message names the server,
    /// never the password.
    #[error("{message}")]
    StoreUnavailable {
        /// What failed, naming the server.
        message: String,
    },
    /// A failure of the engine itself, a panic among them: a bug, reported rather than crashing.
    #[error("{message}")]
    Internal {
        /// What failed.
        message: String,
    },
}

impl SessionError {
    /// The stable string code JavaScript maps to an error class.
    pub fn code(&self) -> &'static str {
        match self {
            SessionError::NotFound { .. } => "SESSION_NOT_FOUND",
            SessionError::AlreadyExists { .. } | SessionError::Conflict { .. } => {
                "SESSION_CONFLICT"
            }
            SessionError::Capacity { .. } => "SESSION_CAPACITY",
            SessionError::Input { .. } => "SESSION_INPUT",
            SessionError::ShutDown => "SESSION_SHUT_DOWN",
            SessionError::LeaseLost { .. } => "SESSION_LEASE_LOST",
            SessionError::CutBeforeStart => "SESSION_CUT_BEFORE_START",
            SessionError::Host { .. } => "SESSION_HOST",
            SessionError::StoreUnavailable { .. } => "SESSION_STORE_UNAVAILABLE",
            SessionError::Internal { .. } => "SESSION_INTERNAL",
        }
    }

    /// A conflict: the session `session_id`, in `status`, refuses with `message`.
    pub fn conflict(session_id: &str, status: SessionStatus, message: impl Into<String>) -> Self {
        SessionError::Conflict {
            session_id: session_id.to_owned(),
            status,
            message: message.into(),
        }
    }

    /// The standard conflict: `The session is <status>.`, or `The session is <status>: <error>.`
    pub fn in_status(session_id: &str, status: SessionStatus, error: Option<&str>) -> Self {
        // As the reference writes it, verbatim: an error ending with a period ends with two.
        let message = match error.filter(|error| !error.is_empty()) {
            Some(error) => format!("The session is {}: {error}.", status.as_str()),
            None => format!("The session is {}.", status.as_str()),
        };
        Self::conflict(session_id, status, message)
    }

    /// Bad input at `path`: `message` should name the path.
    pub fn input(path: impl Into<String>, message: impl Into<String>) -> Self {
        SessionError::Input {
            path: path.into(),
            message: message.into(),
        }
    }

    /// A failure of the engine itself.
    pub fn internal(message: impl Into<String>) -> Self {
        SessionError::Internal {
            message: message.into(),
        }
    }

    /// A failure of something the application supplied, without an original error to keep.
    pub fn host(message: impl Into<String>) -> Self {
        SessionError::Host {
            message: message.into(),
            origin: None,
        }
    }
}

/// The message of a panic's payload, for the internal error it becomes.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let detail = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned());
    format!("harness-sessions failed inside (a panic: {detail}); please report it")
}

/// The engine's result type.
pub type Result<T, E = SessionError> = std::result::Result<T, E>;
