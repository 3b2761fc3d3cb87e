//! The manager's hooks: what the application is told (`subscribe()`, `onError`) and what it is
//! asked (`approve`, `errorMessage`).

use async_trait::async_trait;

use crate::engine::error::SessionError;
use crate::engine::session::{ApprovalVerdict, PendingApproval, SessionSummary};

/// A change to the sessions, for `subscribe()`.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // short-lived, sent at once: boxing would only add a copy
pub enum SessionEvent {
    /// The session changed: its status, or its conversation at the end of a turn.
    Updated(SessionSummary),
    /// The session was deleted.
    Deleted(String),
}

/// What the manager tells and asks the application.
#[async_trait]
pub trait ManagerHooks: Send + Sync {
    /// A session changed.
    fn on_event(&self, event: SessionEvent);

    /// Something failed in the background: `action` says what (`start`, `suspend`, `save`, ...).
    fn on_error(&self, error: &SessionError, action: &str, session_id: Option<&str>);

    /// What a client is told of `error`, a turn's (`errorMessage`).
    async fn client_message(&self, error: &SessionError) -> String;

    /// Whether an `approve` policy answers approvals.
    fn approves(&self) -> bool {
        false
    }

    /// The policy's answer to `approval`, or `None` to leave it to a person (`approve`).
    ///
    /// # Errors
    /// When the policy threw: the approval is then left to a person.
    async fn approve(
        &self,
        approval: &PendingApproval,
        session: &SessionSummary,
    ) -> Result<Option<ApprovalVerdict>, SessionError> {
        let _ = (approval, session);
        Ok(None)
    }
}
