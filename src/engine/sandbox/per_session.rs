//! `sandboxPerSession()`: a sandbox of its own for each session, created for a new session,
//! found again (or created) when it resumes, stopped when it is suspended, destroyed when it is
//! closed.
//!
//! This module owns [`SandboxPerSession`], the strategy, and [`SandboxMaker`], where the sandboxes
//! come from: a native provider ([`ProviderMaker`], driven without crossing into JavaScript) or the
//! application's `create`/`resume` functions (the binding implements the trait with host calls).
//!
//! Invariants:
//!
//! - At most `maxSessions` leases are held at once (none when unbounded): an acquire takes its
//!   place before it creates anything, and gives it back if the creation fails.
//! - A lease gives its place back once, whichever of `suspend`, `close` or a drop comes first; a
//!   dropped lease stops its sandbox (never destroys it: its session may resume) unless it was
//!   given back. Its sandbox is called at every `suspend` (stop) and `close` (destroy), in any
//!   order, as the reference's lease does.
//! - `discard` of a suspended session resumes its sandbox only to destroy it; a session with no
//!   sandbox left is fine.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::handout::SandboxHandouts;
use super::shared::{HeldSandbox, NativeSandbox};
use super::SandboxProvider;
use crate::engine::error::{Result, SessionError};
use crate::engine::lease::{Lease, SandboxRef, SessionSandboxes};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Where `sandboxPerSession()` gets each session's sandbox.
#[async_trait]
pub trait SandboxMaker: Send + Sync {
    /// A new sandbox for session `session_id`.
    ///
    /// # Errors
    /// When it cannot be created.
    async fn create(&self, session_id: &str) -> Result<Arc<dyn HeldSandbox>>;

    /// The sandbox of session `session_id`, running again, or `None` when it has none.
    ///
    /// # Errors
    /// When it exists but cannot be brought back, or cannot be looked up.
    async fn resume(&self, session_id: &str) -> Result<Option<Arc<dyn HeldSandbox>>>;
}

/// The sandboxes of a native provider: `create` and `find` by session id.
pub struct ProviderMaker {
    provider: Arc<dyn SandboxProvider>,
    handouts: Arc<dyn SandboxHandouts>,
}

impl ProviderMaker {
    /// The sandboxes of `provider`, handed out through `handouts` while their lease holds them.
    pub fn new(provider: Arc<dyn SandboxProvider>, handouts: Arc<dyn SandboxHandouts>) -> Self {
        ProviderMaker { provider, handouts }
    }
}

#[async_trait]
impl SandboxMaker for ProviderMaker {
    async fn create(&self, session_id: &str) -> Result<Arc<dyn HeldSandbox>> {
        let session = self.provider.create(Some(session_id)).await?;
        Ok(Arc::new(NativeSandbox::handed_out(
            session,
            self.handouts.clone(),
        )))
    }

    async fn resume(&self, session_id: &str) -> Result<Option<Arc<dyn HeldSandbox>>> {
        let found = self.provider.find(session_id).await?;
        Ok(found.map(|session| {
            Arc::new(NativeSandbox::handed_out(session, self.handouts.clone()))
                as Arc<dyn HeldSandbox>
        }))
    }
}

/// `sandboxPerSession()`. See the module documentation for its invariants.
pub struct SandboxPerSession {
    inner: Arc<PerSession>,
}

struct PerSession {
    maker: Arc<dyn SandboxMaker>,
    max_sessions: Option<u32>,
    /// The places taken, by lease: its sandbox once it has one.
    leases: Mutex<HashMap<u64, Option<Arc<dyn HeldSandbox>>>>,
    next_lease: AtomicU64,
}

impl SandboxPerSession {
    /// The strategy, with at most `max_sessions` sandboxes held at once (unbounded for `None`).
    ///
    /// # Errors
    /// An input error at `maxSessions` for zero.
    pub fn new(maker: Arc<dyn SandboxMaker>, max_sessions: Option<u32>) -> Result<Self> {
        if max_sessions == Some(0) {
            return Err(SessionError::input(
                "maxSessions",
                "maxSessions must be a whole number, one or more.",
            ));
        }
        Ok(SandboxPerSession {
            inner: Arc::new(PerSession {
                maker,
                max_sessions,
                leases: Mutex::new(HashMap::new()),
                next_lease: AtomicU64::new(1),
            }),
        })
    }

    /// How many sessions hold a sandbox now.
    pub fn held(&self) -> usize {
        lock(&self.inner.leases).len()
    }
}

impl PerSession {
    async fn open(&self, session_id: &str, resume: bool) -> Result<Arc<dyn HeldSandbox>> {
        if resume {
            if let Some(sandbox) = self.maker.resume(session_id).await? {
                return Ok(sandbox);
            }
        }
        self.maker.create(session_id).await
    }

    /// Forgets lease `lease`: its sandbox, if it still had it.
    fn forget(&self, lease: u64) -> Option<Arc<dyn HeldSandbox>> {
        lock(&self.leases).remove(&lease).flatten()
    }
}

#[async_trait]
impl SessionSandboxes for SandboxPerSession {
    fn capacity(&self) -> Option<u32> {
        self.inner.max_sessions
    }

    async fn acquire(&self, session_id: &str, resume: bool) -> Result<Box<dyn Lease>> {
        let inner = &self.inner;
        let lease = inner.next_lease.fetch_add(1, Ordering::Relaxed);
        {
            let mut leases = lock(&inner.leases);
            if let Some(capacity) = inner.max_sessions {
                if leases.len() >= capacity as usize {
                    return Err(SessionError::Capacity { capacity });
                }
            }
            leases.insert(lease, None);
        }
        match inner.open(session_id, resume).await {
            Ok(sandbox) => {
                lock(&inner.leases).insert(lease, Some(sandbox.clone()));
                Ok(Box::new(OwnLease {
                    inner: inner.clone(),
                    lease,
                    sandbox_ref: sandbox.sandbox_ref(),
                    sandbox,
                    given_back: AtomicBool::new(false),
                }))
            }
            Err(error) => {
                inner.forget(lease);
                Err(error)
            }
        }
    }

    async fn discard(&self, session_id: &str) -> Result<()> {
        match self.inner.maker.resume(session_id).await? {
            Some(sandbox) => sandbox.destroy().await,
            None => Ok(()),
        }
    }

    /// Nothing, as the reference's strategy, which has no `shutdown()`: the manager suspended its
    /// sessions, and the sandboxes anything else still holds are left as they are.
    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }
}

/// A session's own sandbox.
struct OwnLease {
    inner: Arc<PerSession>,
    lease: u64,
    sandbox_ref: SandboxRef,
    /// The sandbox: stopped by every `suspend`, destroyed by every `close`, in any order, as the
    /// reference's lease calls its sandbox at every call.
    sandbox: Arc<dyn HeldSandbox>,
    /// Whether its place was given back (by the first `suspend` or `close`).
    given_back: AtomicBool,
}

impl OwnLease {
    /// Gives its place back, the first time only.
    fn give_back(&self) {
        if !self.given_back.swap(true, Ordering::SeqCst) {
            self.inner.forget(self.lease);
        }
    }
}

#[async_trait]
impl Lease for OwnLease {
    fn sandbox(&self) -> SandboxRef {
        self.sandbox_ref.clone()
    }

    async fn suspend(&self) -> Result<()> {
        self.give_back();
        self.sandbox.stop().await
    }

    async fn close(&self) -> Result<()> {
        self.give_back();
        self.sandbox.destroy().await
    }
}

impl Drop for OwnLease {
    fn drop(&mut self) {
        if self.given_back.swap(true, Ordering::SeqCst) {
            return;
        }
        self.inner.forget(self.lease);
        // Dropped without being given back: stopped, so that its session can still resume.
        let sandbox = self.sandbox.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = sandbox.stop().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::sandbox::handout::Handouts;
    use crate::engine::sandbox::local::{LocalSandbox, LocalSandboxOptions};
    use crate::engine::sandbox::{Command, SandboxSession};

    struct Fixture {
        _root: tempfile::TempDir,
        provider: Arc<LocalSandbox>,
        registry: Handouts<Arc<dyn SandboxSession>>,
        strategy: SandboxPerSession,
    }

    fn fixture(max_sessions: Option<u32>) -> Fixture {
        let root = tempfile::tempdir().expect("a temporary folder");
        let provider = Arc::new(
            LocalSandbox::new(LocalSandboxOptions {
                root: root.path().to_path_buf(),
                ports: vec![4200],
                ..LocalSandboxOptions::default()
            })
            .expect("valid options"),
        );
        let registry = Handouts::<Arc<dyn SandboxSession>>::new();
        let strategy = SandboxPerSession::new(
            Arc::new(ProviderMaker::new(
                provider.clone(),
                Arc::new(registry.clone()),
            )),
            max_sessions,
        )
        .expect("valid options");
        Fixture {
            _root: root,
            provider,
            registry,
            strategy,
        }
    }

    impl Fixture {
        fn session(&self, lease: &dyn Lease) -> Arc<dyn SandboxSession> {
            match self.registry.get(&lease.sandbox()) {
                Some(session) => session,
                None => panic!("no sandbox handed out as {:?}", lease.sandbox()),
            }
        }

        async fn exists(&self, session_id: &str) -> bool {
            self.provider
                .find(session_id)
                .await
                .expect("looked up")
                .is_some()
        }
    }

    #[test]
    fn zero_sessions_is_refused() {
        let maker = Arc::new(ProviderMaker::new(
            Arc::new(
                LocalSandbox::new(LocalSandboxOptions {
                    root: std::env::temp_dir(),
                    ..LocalSandboxOptions::default()
                })
                .expect("valid options"),
            ),
            Arc::new(Handouts::<Arc<dyn SandboxSession>>::new()),
        ));
        assert!(matches!(
            SandboxPerSession::new(maker, Some(0)),
            Err(SessionError::Input { path, .. }) if path == "maxSessions"
        ));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn creates_stops_resumes_and_destroys_a_sandbox_per_session() {
        let f = fixture(Some(2));
        assert_eq!(f.strategy.capacity(), Some(2));
        let a = f.strategy.acquire("a", false).await.expect("a lease");
        let b = f.strategy.acquire("b", false).await.expect("a lease");
        let (sandbox_a, sandbox_b) = (f.session(&*a), f.session(&*b));
        assert_ne!(sandbox_a.id(), sandbox_b.id(), "a sandbox each");
        assert!(matches!(
            f.strategy.acquire("c", false).await.err(),
            Some(SessionError::Capacity { capacity: 2 })
        ));
        sandbox_a
            .write_text("notes.txt", "from a")
            .await
            .expect("written");
        assert_eq!(sandbox_b.read_text("notes.txt").await.expect("read"), None);

        a.suspend().await.expect("suspended");
        assert_eq!(f.strategy.held(), 1);
        assert!(
            sandbox_a.run(Command::new("true")).await.is_err(),
            "stopped"
        );
        let again = f.strategy.acquire("a", true).await.expect("resumed");
        assert_eq!(
            f.session(&*again)
                .read_text("notes.txt")
                .await
                .expect("read")
                .as_deref(),
            Some("from a"),
            "a resumed session finds its files"
        );
        again.close().await.expect("closed");
        assert!(!f.exists("a").await, "destroyed with its session");
        b.close().await.expect("closed");
        assert_eq!(f.strategy.held(), 0);
        drop((a, again, b));
        assert!(f.registry.is_empty(), "handed out while a lease holds it");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn resumes_by_creating_when_there_is_nothing_to_resume() {
        let f = fixture(None);
        assert_eq!(f.strategy.capacity(), None);
        let lease = f.strategy.acquire("new", true).await.expect("created");
        assert!(f.exists("new").await);
        lease.suspend().await.expect("suspended");
        assert!(f.exists("new").await, "kept while suspended");
        assert!(
            f.strategy.acquire("new", false).await.is_err(),
            "a new session with that id exists already"
        );
        assert_eq!(f.strategy.held(), 0, "a failed create gives its place back");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lease_calls_its_sandbox_at_every_call_in_any_order() {
        let f = fixture(Some(1));
        let lease = f.strategy.acquire("twice", false).await.expect("a lease");
        lease.suspend().await.expect("suspended");
        assert_eq!(f.strategy.held(), 0, "its place given back");
        lease.close().await.expect("closed after a suspend");
        assert!(!f.exists("twice").await, "destroyed all the same");
        lease.close().await.expect("closed again");
        let other = f
            .strategy
            .acquire("other", false)
            .await
            .expect("one place, free again");
        other.close().await.expect("closed");
        // Stopping a destroyed sandbox is the sandbox's to refuse or not: the lease calls it.
        let _ = other.suspend().await;
        assert_eq!(f.strategy.held(), 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn discard_destroys_what_a_suspended_session_kept() {
        let f = fixture(Some(1));
        let lease = f.strategy.acquire("gone", false).await.expect("a lease");
        lease.suspend().await.expect("suspended");
        drop(lease);
        f.strategy.discard("gone").await.expect("discarded");
        assert!(!f.exists("gone").await);
        f.strategy
            .discard("never-was")
            .await
            .expect("nothing to discard is fine");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shutdown_leaves_the_sandboxes_still_held_as_they_are() {
        let f = fixture(None);
        let lease = f.strategy.acquire("held", false).await.expect("a lease");
        let sandbox = f.session(&*lease);
        f.strategy.shutdown().await.expect("shut down");
        assert!(
            sandbox.run(Command::new("true")).await.is_ok(),
            "still running"
        );
        lease.suspend().await.expect("suspended");
        assert!(f.exists("held").await);
    }
}
