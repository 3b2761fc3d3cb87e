//! The sandboxes seam: how a session gets a sandbox, and gives it back (`SessionSandboxes`).
//!
//! A live session holds one [`Lease`]. Suspending the session suspends its lease (a port handed
//! back, a sandbox stopped); closing it closes the lease. The strategies the engine ships
//! (`sharedSandbox`, `sandboxPerSession`) implement [`SessionSandboxes`]; so does a JavaScript
//! object, through the binding.

use async_trait::async_trait;

use crate::engine::error::Result;

/// A sandbox as the agent receives it: an opaque handle, a number only the strategy that gave it
/// (and the binding that reads it) knows how to turn into an object; or none, when the agent
/// brings its own (tests of the engine).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxRef(Option<u64>);

impl SandboxRef {
    /// No sandbox object.
    pub const NONE: SandboxRef = SandboxRef(None);

    /// The sandbox known by `number`.
    pub fn handle(number: u64) -> Self {
        SandboxRef(Some(number))
    }

    /// The number of the sandbox, when there is one.
    pub fn number(&self) -> Option<u64> {
        self.0
    }
}

/// How sessions get a sandbox: the JavaScript `SessionSandboxes`.
#[async_trait]
pub trait SessionSandboxes: Send + Sync {
    /// How many sessions can be live at once, when bounded.
    fn capacity(&self) -> Option<u32>;

    /// A sandbox for session `session_id`; `resume` when the session comes back from suspended.
    ///
    /// # Errors
    /// When no sandbox could be had.
    async fn acquire(&self, session_id: &str, resume: bool) -> Result<Box<dyn Lease>>;

    /// Frees what the sandboxes keep for a suspended session that ends.
    ///
    /// # Errors
    /// When freeing it failed.
    async fn discard(&self, session_id: &str) -> Result<()>;

    /// Stops everything; called once, by the manager's `shutdown()`.
    ///
    /// # Errors
    /// When stopping failed.
    async fn shutdown(&self) -> Result<()>;
}

/// A session's hold on its sandbox. `suspend` and `close` may each be called again, in any order
/// (as the reference's leases are: a JavaScript caller may call both); what each does the second
/// time is the strategy's to say.
#[async_trait]
pub trait Lease: Send + Sync {
    /// The sandbox to hand the agent.
    fn sandbox(&self) -> SandboxRef;

    /// The session is suspended: give back what it need not keep.
    ///
    /// # Errors
    /// When the sandbox could not be suspended.
    async fn suspend(&self) -> Result<()>;

    /// The session ends: give back everything.
    ///
    /// # Errors
    /// When the sandbox could not be closed.
    async fn close(&self) -> Result<()>;
}
