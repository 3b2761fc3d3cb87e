//! `sharedSandbox()`: one sandbox for every session, each session a view of it (`fork`) with a
//! port of its own for its bridge and a working directory of its own.
//!
//! This module owns:
//!
//! - [`HeldSandbox`], a sandbox or a view as a strategy holds it, whether it is one of the
//!   engine's own ([`NativeSandbox`], forked natively) or an object JavaScript keeps (the binding
//!   implements the trait with host calls); [`SandboxOpener`], where the shared sandbox comes from.
//! - The views handed to agents get their [`SandboxRef`] from the strategy's
//!   [`SandboxHandouts`] (see [`super::handout`]).
//! - [`SharedSandbox`], the strategy itself, and its [`PortBook`].
//!
//! Invariants:
//!
//! - A port is held by one lease at most; capacity is the number of ports. A lease gives its port
//!   back once, whichever of `suspend`, `close` or a drop comes first.
//! - One sandbox is open at most, opened by one acquire at a time under the sandbox lock; an open
//!   that fails leaves nothing behind (its acquire's port is freed), and the next acquire opens
//!   again.
//! - Every acquire reserves its port *before* it takes the sandbox lock, and `stopWhenUnused`
//!   stops the sandbox only under that lock and when no port is held: an acquire under way never
//!   gets a stopped sandbox, and the sandbox never stops under a live session.
//! - A session's view is stopped (its own processes end) when its lease is suspended or closed;
//!   its files stay in the sandbox, in a working directory named after the session id, where the
//!   session finds them again when it resumes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;

use super::handout::{HandedOut, SandboxHandouts};
use super::view::resource_name;
use super::{ForkOptions, SandboxProvider, SandboxSession};
use crate::engine::error::{Result, SessionError};
use crate::engine::lease::{Lease, SandboxRef, SessionSandboxes};

/// The words refusing empty or repeated ports, exactly as the seed has them.
pub const PORTS_MESSAGE: &str = "sharedSandbox() needs at least one port, each listed once.";

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A sandbox, or a view of one, as a strategy holds it: one of the engine's own, or an object
/// JavaScript keeps.
#[async_trait]
pub trait HeldSandbox: Send + Sync {
    /// What the agent is handed for it ([`SandboxRef::NONE`] for a sandbox never handed out).
    fn sandbox_ref(&self) -> SandboxRef;

    /// A view of this sandbox for session `session_id`, with `port` for its bridge and a working
    /// directory of its own, the same for the same session id (for a native sandbox).
    ///
    /// # Errors
    /// When the sandbox cannot make the view: stopped, gone, no network for ports.
    async fn fork(&self, session_id: &str, port: u16) -> Result<Arc<dyn HeldSandbox>>;

    /// Hands a view back: the processes it started end, its files stay.
    ///
    /// # Errors
    /// When the sandbox cannot be reached to end them.
    async fn release(&self) -> Result<()>;

    /// Stops the sandbox, keeping its files.
    ///
    /// # Errors
    /// When the sandbox cannot be reached to stop it.
    async fn stop(&self) -> Result<()>;

    /// Stops the sandbox and removes it with its files.
    ///
    /// # Errors
    /// When the sandbox cannot be reached to remove it.
    async fn destroy(&self) -> Result<()>;
}

/// Where `sharedSandbox()` gets its sandbox: the `open` option.
#[async_trait]
pub trait SandboxOpener: Send + Sync {
    /// The sandbox, found again or created, running.
    ///
    /// # Errors
    /// When it cannot be opened.
    async fn open(&self) -> Result<Arc<dyn HeldSandbox>>;
}

/// The working directory of session `session_id` in a shared sandbox, relative to the sandbox's
/// own: stable, so that a resumed session finds its files.
pub fn session_directory(session_id: &str) -> String {
    format!("sessions/{}", resource_name(session_id))
}

/// One of the engine's own sandboxes (local or Docker) as a strategy holds it: forked, stopped
/// and destroyed natively, without crossing into JavaScript.
pub struct NativeSandbox {
    session: Arc<dyn SandboxSession>,
    handouts: Arc<dyn SandboxHandouts>,
    handed_out: Option<HandedOut>,
}

impl NativeSandbox {
    /// A sandbox the strategy keeps to itself (the shared one, which only its views leave); its
    /// views are handed out through `handouts`.
    pub fn kept(session: Arc<dyn SandboxSession>, handouts: Arc<dyn SandboxHandouts>) -> Self {
        NativeSandbox {
            session,
            handouts,
            handed_out: None,
        }
    }

    /// A sandbox handed to an agent: its reference is known to `handouts` while it is held.
    pub fn handed_out(
        session: Arc<dyn SandboxSession>,
        handouts: Arc<dyn SandboxHandouts>,
    ) -> Self {
        let handed_out = handouts.hand_out(session.clone());
        NativeSandbox {
            session,
            handouts,
            handed_out: Some(handed_out),
        }
    }

    /// The engine's sandbox session.
    pub fn session(&self) -> &Arc<dyn SandboxSession> {
        &self.session
    }
}

#[async_trait]
impl HeldSandbox for NativeSandbox {
    fn sandbox_ref(&self) -> SandboxRef {
        self.handed_out
            .as_ref()
            .map_or(SandboxRef::NONE, HandedOut::sandbox_ref)
    }

    async fn fork(&self, session_id: &str, port: u16) -> Result<Arc<dyn HeldSandbox>> {
        let view = self
            .session
            .fork(ForkOptions {
                ports: vec![port],
                working_directory: Some(session_directory(session_id)),
            })
            .await?;
        Ok(Arc::new(NativeSandbox::handed_out(
            view,
            self.handouts.clone(),
        )))
    }

    async fn release(&self) -> Result<()> {
        // A fork's `stop` ends the processes started through it, and nothing else.
        self.session.stop().await
    }

    async fn stop(&self) -> Result<()> {
        self.session.stop().await
    }

    async fn destroy(&self) -> Result<()> {
        self.session.destroy().await
    }
}

/// Opens a sandbox of a native provider by name (`provider.open(name)`).
pub struct ProviderOpener {
    provider: Arc<dyn SandboxProvider>,
    name: String,
    handouts: Arc<dyn SandboxHandouts>,
}

impl ProviderOpener {
    /// Opens the sandbox `name` of `provider`; its views are handed out through `handouts`.
    pub fn new(
        provider: Arc<dyn SandboxProvider>,
        name: impl Into<String>,
        handouts: Arc<dyn SandboxHandouts>,
    ) -> Self {
        ProviderOpener {
            provider,
            name: name.into(),
            handouts,
        }
    }
}

#[async_trait]
impl SandboxOpener for ProviderOpener {
    async fn open(&self) -> Result<Arc<dyn HeldSandbox>> {
        let session = self.provider.open(&self.name).await?;
        Ok(Arc::new(NativeSandbox::kept(
            session,
            self.handouts.clone(),
        )))
    }
}

/// Which lease holds which port of a shared sandbox.
///
/// Ports are handed out in the order they were given, the first free one first; a lease holds
/// one port at most, and gives it back once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortBook {
    ports: Vec<u16>,
    holders: Vec<Option<u64>>,
}

impl PortBook {
    /// A book of `ports`, all free.
    ///
    /// # Errors
    /// An input error at `ports` ([`PORTS_MESSAGE`]) when there are none or one is listed twice,
    /// at `ports[i]` for port 0.
    pub fn new(ports: Vec<u16>) -> Result<Self> {
        let repeated = ports
            .iter()
            .enumerate()
            .any(|(index, port)| ports[..index].contains(port));
        if ports.is_empty() || repeated {
            return Err(SessionError::input("ports", PORTS_MESSAGE));
        }
        if let Some(index) = ports.iter().position(|port| *port == 0) {
            return Err(SessionError::input(
                format!("ports[{index}]"),
                format!("ports[{index}]: port 0 is not a port a sandbox can expose."),
            ));
        }
        let holders = vec![None; ports.len()];
        Ok(PortBook { ports, holders })
    }

    /// How many ports there are: the capacity.
    pub fn capacity(&self) -> usize {
        self.ports.len()
    }

    /// A free port for `lease` (the one it holds already, if it does), or `None` when every port
    /// is taken.
    pub fn take(&mut self, lease: u64) -> Option<u16> {
        if let Some(port) = self.port_of(lease) {
            return Some(port);
        }
        let index = self.holders.iter().position(Option::is_none)?;
        self.holders[index] = Some(lease);
        Some(self.ports[index])
    }

    /// Gives back the port `lease` holds: the port, or `None` when it held none (given back
    /// already).
    pub fn give_back(&mut self, lease: u64) -> Option<u16> {
        let index = self.holders.iter().position(|h| *h == Some(lease))?;
        self.holders[index] = None;
        Some(self.ports[index])
    }

    /// Frees every port.
    pub fn free_all(&mut self) {
        self.holders.iter_mut().for_each(|holder| *holder = None);
    }

    /// The port `lease` holds.
    pub fn port_of(&self, lease: u64) -> Option<u16> {
        let index = self.holders.iter().position(|h| *h == Some(lease))?;
        Some(self.ports[index])
    }

    /// How many ports are held.
    pub fn held(&self) -> usize {
        self.holders.iter().filter(|h| h.is_some()).count()
    }

    /// The ports held, in the order they were given.
    pub fn held_ports(&self) -> Vec<u16> {
        self.ports
            .iter()
            .zip(&self.holders)
            .filter(|(_, holder)| holder.is_some())
            .map(|(port, _)| *port)
            .collect()
    }
}

/// The options of `sharedSandbox()`, the `open` function aside.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedSandboxOptions {
    /// One port per live session: their count is the capacity.
    pub ports: Vec<u16>,
    /// Stop the sandbox once no session holds it; the next acquire opens it again.
    pub stop_when_unused: bool,
}

/// `sharedSandbox()`: a view of one sandbox per session, with a port of its own. See the module
/// documentation for its invariants.
pub struct SharedSandbox {
    shared: Arc<Shared>,
}

struct Shared {
    opener: Arc<dyn SandboxOpener>,
    stop_when_unused: bool,
    book: Mutex<PortBook>,
    /// The sandbox, while it is open. Taken across its open and its stop: acquires wait for them.
    sandbox: tokio::sync::Mutex<Option<Arc<dyn HeldSandbox>>>,
    next_lease: AtomicU64,
}

impl SharedSandbox {
    /// The strategy, opening its sandbox with `opener` at the first acquire.
    ///
    /// # Errors
    /// An input error for empty or repeated ports ([`PORTS_MESSAGE`]), or port 0.
    pub fn new(opener: Arc<dyn SandboxOpener>, options: SharedSandboxOptions) -> Result<Self> {
        let book = PortBook::new(options.ports)?;
        Ok(SharedSandbox {
            shared: Arc::new(Shared {
                opener,
                stop_when_unused: options.stop_when_unused,
                book: Mutex::new(book),
                sandbox: tokio::sync::Mutex::new(None),
                next_lease: AtomicU64::new(1),
            }),
        })
    }

    /// The ports held by sessions now, in the order they were given.
    pub fn held_ports(&self) -> Vec<u16> {
        lock(&self.shared.book).held_ports()
    }

    /// Whether the sandbox is open now (waits for an open or a stop under way).
    pub async fn is_open(&self) -> bool {
        self.shared.sandbox.lock().await.is_some()
    }
}

impl Shared {
    /// The open sandbox, opened first when it is not.
    async fn sandbox(&self) -> Result<Arc<dyn HeldSandbox>> {
        let mut sandbox = self.sandbox.lock().await;
        if let Some(open) = sandbox.as_ref() {
            return Ok(open.clone());
        }
        let opened = self.opener.open().await?;
        *sandbox = Some(opened.clone());
        Ok(opened)
    }

    /// Gives back what lease `lease` holds: its view released, its port freed, and, with
    /// `stopWhenUnused`, the sandbox stopped if that was the last port held.
    async fn give_back(&self, lease: u64, view: Option<Arc<dyn HeldSandbox>>) -> Result<()> {
        let released = match &view {
            Some(view) => view.release().await,
            None => Ok(()),
        };
        drop(view);
        let unused = {
            let mut book = lock(&self.book);
            book.give_back(lease);
            book.held() == 0
        };
        let stopped = if self.stop_when_unused && unused {
            self.stop_if_unused().await
        } else {
            Ok(())
        };
        released.and(stopped)
    }

    /// Stops the sandbox if no port is held, under the sandbox lock.
    async fn stop_if_unused(&self) -> Result<()> {
        let mut sandbox = self.sandbox.lock().await;
        if lock(&self.book).held() != 0 {
            return Ok(());
        }
        match sandbox.take() {
            Some(open) => open.stop().await,
            None => Ok(()),
        }
    }
}

#[async_trait]
impl SessionSandboxes for SharedSandbox {
    fn capacity(&self) -> Option<u32> {
        Some(u32::try_from(lock(&self.shared.book).capacity()).unwrap_or(u32::MAX))
    }

    async fn acquire(&self, session_id: &str, _resume: bool) -> Result<Box<dyn Lease>> {
        let shared = &self.shared;
        let lease = shared.next_lease.fetch_add(1, Ordering::Relaxed);
        let port = {
            let mut book = lock(&shared.book);
            let capacity = u32::try_from(book.capacity()).unwrap_or(u32::MAX);
            book.take(lease)
                .ok_or(SessionError::Capacity { capacity })?
        };
        let forked = match shared.sandbox().await {
            Ok(sandbox) => sandbox.fork(session_id, port).await,
            Err(error) => Err(error),
        };
        match forked {
            Ok(view) => Ok(Box::new(SharedLease {
                shared: shared.clone(),
                lease,
                sandbox: view.sandbox_ref(),
                view: tokio::sync::Mutex::new(Some(view)),
            })),
            Err(error) => {
                // Whatever the release says, the acquire's own failure is the one to report.
                let _ = shared.give_back(lease, None).await;
                Err(error)
            }
        }
    }

    async fn discard(&self, _session_id: &str) -> Result<()> {
        // A suspended session holds no port, and its files stay in the sandbox.
        Ok(())
    }

    /// Frees every port; stops the sandbox with `stopWhenUnused` only. Without it, the sandbox
    /// keeps running (its first start installed the harness in it, which takes minutes).
    async fn shutdown(&self) -> Result<()> {
        lock(&self.shared.book).free_all();
        if !self.shared.stop_when_unused {
            return Ok(());
        }
        let mut sandbox = self.shared.sandbox.lock().await;
        match sandbox.take() {
            Some(open) => open.stop().await,
            None => Ok(()),
        }
    }
}

/// A session's view of the shared sandbox, and its port.
struct SharedLease {
    shared: Arc<Shared>,
    lease: u64,
    sandbox: SandboxRef,
    /// The view, until it is given back (once: a later `suspend` or `close` waits for that give
    /// back and does nothing more, as the reference's lease, which releases once).
    view: tokio::sync::Mutex<Option<Arc<dyn HeldSandbox>>>,
}

impl SharedLease {
    async fn give_back(&self) -> Result<()> {
        let mut view = self.view.lock().await;
        let Some(taken) = view.take() else {
            return Ok(());
        };
        self.shared.give_back(self.lease, Some(taken)).await
    }
}

#[async_trait]
impl Lease for SharedLease {
    fn sandbox(&self) -> SandboxRef {
        self.sandbox.clone()
    }

    async fn suspend(&self) -> Result<()> {
        self.give_back().await
    }

    async fn close(&self) -> Result<()> {
        // The session's files stay in the shared sandbox: only its view and port go.
        self.give_back().await
    }
}

impl Drop for SharedLease {
    fn drop(&mut self) {
        let Some(view) = self.view.get_mut().take() else {
            return;
        };
        // Dropped without being given back: give the port back all the same.
        let shared = self.shared.clone();
        let lease = self.lease;
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    let _ = shared.give_back(lease, Some(view)).await;
                });
            }
            Err(_) => {
                lock(&shared.book).give_back(lease);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::engine::sandbox::handout::Handouts;
    use crate::engine::sandbox::local::{LocalSandbox, LocalSandboxOptions};
    use crate::engine::sandbox::Command;

    #[test]
    fn ports_go_out_in_order_and_come_back_once() {
        let mut book = PortBook::new(vec![4001, 4002, 4003]).expect("valid ports");
        assert_eq!(book.capacity(), 3);
        assert_eq!(book.take(1), Some(4001));
        assert_eq!(book.take(2), Some(4002));
        assert_eq!(book.take(1), Some(4001), "a lease holds one port");
        assert_eq!(book.held(), 2);
        assert_eq!(book.give_back(1), Some(4001));
        assert_eq!(book.give_back(1), None, "given back once");
        assert_eq!(book.held_ports(), vec![4002]);
        assert_eq!(book.take(3), Some(4001), "the first free port first");
        assert_eq!(book.take(4), Some(4003));
        assert_eq!(book.take(5), None, "every port is taken");
        assert_eq!(book.port_of(4), Some(4003));
        assert_eq!(book.give_back(9), None, "an unknown lease holds nothing");
        for lease in [2, 3, 4] {
            assert!(book.give_back(lease).is_some());
        }
        assert_eq!(book.held(), 0);
    }

    #[test]
    fn empty_or_repeated_ports_are_refused_with_the_seed_words() {
        for ports in [vec![], vec![4000, 4000], vec![1, 2, 1]] {
            assert_eq!(
                PortBook::new(ports),
                Err(SessionError::input("ports", PORTS_MESSAGE))
            );
        }
        assert!(matches!(
            PortBook::new(vec![4000, 0]),
            Err(SessionError::Input { path, .. }) if path == "ports[1]"
        ));
    }

    /// A sandbox that counts what it is asked, failing its first `fail_opens` opens.
    #[derive(Default)]
    struct Counting {
        opens: AtomicUsize,
        fail_opens: AtomicUsize,
        stops: AtomicUsize,
        forks: AtomicUsize,
        releases: AtomicUsize,
    }

    struct CountingSandbox(Arc<Counting>);

    #[async_trait]
    impl HeldSandbox for CountingSandbox {
        fn sandbox_ref(&self) -> SandboxRef {
            SandboxRef::NONE
        }
        async fn fork(&self, _session_id: &str, _port: u16) -> Result<Arc<dyn HeldSandbox>> {
            self.0.forks.fetch_add(1, Ordering::SeqCst);
            Ok(Arc::new(CountingSandbox(self.0.clone())))
        }
        async fn release(&self) -> Result<()> {
            self.0.releases.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        async fn stop(&self) -> Result<()> {
            self.0.stops.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        async fn destroy(&self) -> Result<()> {
            Ok(())
        }
    }

    #[async_trait]
    impl SandboxOpener for CountingSandbox {
        async fn open(&self) -> Result<Arc<dyn HeldSandbox>> {
            self.0.opens.fetch_add(1, Ordering::SeqCst);
            let failing = self.0.fail_opens.load(Ordering::SeqCst);
            if failing > 0 {
                self.0.fail_opens.store(failing - 1, Ordering::SeqCst);
                return Err(SessionError::host("the sandbox would not open"));
            }
            Ok(Arc::new(CountingSandbox(self.0.clone())))
        }
    }

    fn counting(ports: Vec<u16>, stop_when_unused: bool) -> (SharedSandbox, Arc<Counting>) {
        let counts = Arc::new(Counting::default());
        let strategy = SharedSandbox::new(
            Arc::new(CountingSandbox(counts.clone())),
            SharedSandboxOptions {
                ports,
                stop_when_unused,
            },
        )
        .expect("valid ports");
        (strategy, counts)
    }

    #[tokio::test]
    async fn opens_once_and_hands_each_session_a_port() {
        let (shared, counts) = counting(vec![4001, 4002], false);
        assert_eq!(shared.capacity(), Some(2));
        let a = shared.acquire("a", false).await.expect("a lease");
        let b = shared.acquire("b", false).await.expect("a lease");
        assert_eq!(shared.held_ports(), vec![4001, 4002]);
        assert_eq!(counts.opens.load(Ordering::SeqCst), 1);
        assert_eq!(counts.forks.load(Ordering::SeqCst), 2);
        assert!(matches!(
            shared.acquire("c", false).await.err(),
            Some(SessionError::Capacity { capacity: 2 })
        ));
        a.suspend().await.expect("suspended");
        assert_eq!(shared.held_ports(), vec![4002]);
        assert_eq!(counts.releases.load(Ordering::SeqCst), 1);
        let c = shared.acquire("c", true).await.expect("a lease");
        assert_eq!(shared.held_ports(), vec![4001, 4002]);
        b.close().await.expect("closed");
        c.close().await.expect("closed");
        assert_eq!(counts.stops.load(Ordering::SeqCst), 0, "kept running");
        assert!(shared.is_open().await);
        shared.shutdown().await.expect("shut down");
        assert_eq!(
            counts.stops.load(Ordering::SeqCst),
            0,
            "without stopWhenUnused, shutdown() leaves it running"
        );
        assert!(shared.is_open().await);
    }

    #[tokio::test]
    async fn a_failed_open_is_forgotten_and_its_port_freed() {
        let (shared, counts) = counting(vec![4001], false);
        counts.fail_opens.store(1, Ordering::SeqCst);
        let error = shared.acquire("a", false).await.err();
        assert_eq!(
            error,
            Some(SessionError::host("the sandbox would not open"))
        );
        assert!(shared.held_ports().is_empty());
        assert!(!shared.is_open().await);
        let lease = shared.acquire("a", false).await.expect("opened again");
        assert_eq!(counts.opens.load(Ordering::SeqCst), 2);
        assert_eq!(shared.held_ports(), vec![4001]);
        lease.close().await.expect("closed");
    }

    #[tokio::test]
    async fn stops_when_unused_and_opens_again_with_the_next() {
        let (shared, counts) = counting(vec![4001, 4002], true);
        let a = shared.acquire("a", false).await.expect("a lease");
        let b = shared.acquire("b", false).await.expect("a lease");
        a.suspend().await.expect("suspended");
        assert_eq!(counts.stops.load(Ordering::SeqCst), 0, "b still holds it");
        b.close().await.expect("closed");
        assert_eq!(counts.stops.load(Ordering::SeqCst), 1);
        assert!(!shared.is_open().await);
        let c = shared.acquire("a", true).await.expect("opened again");
        assert_eq!(counts.opens.load(Ordering::SeqCst), 2);
        drop(c);
        // A dropped lease gives its port back too, and the sandbox stops.
        for _ in 0..100 {
            if shared.held_ports().is_empty() && counts.stops.load(Ordering::SeqCst) == 2 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(shared.held_ports().is_empty());
        assert_eq!(counts.stops.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn with_stop_when_unused_shutdown_stops_it_and_frees_the_ports() {
        let (shared, counts) = counting(vec![4001], true);
        let _held = shared.acquire("a", false).await.expect("a lease");
        shared.shutdown().await.expect("shut down");
        assert!(shared.held_ports().is_empty());
        assert_eq!(counts.stops.load(Ordering::SeqCst), 1);
        assert!(!shared.is_open().await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_acquires_share_one_open() {
        let (shared, counts) = counting((4001..4009).collect(), true);
        let shared = Arc::new(shared);
        let leases = futures::future::join_all((0..8).map(|n| {
            let shared = shared.clone();
            async move { shared.acquire(&format!("s{n}"), false).await }
        }))
        .await;
        assert_eq!(counts.opens.load(Ordering::SeqCst), 1);
        let mut ports = shared.held_ports();
        ports.sort_unstable();
        assert_eq!(ports, (4001..4009).collect::<Vec<_>>());
        futures::future::join_all(
            leases
                .into_iter()
                .map(|lease| async move { lease.expect("a lease").suspend().await }),
        )
        .await;
        assert_eq!(counts.stops.load(Ordering::SeqCst), 1);
        assert!(shared.held_ports().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forks_a_local_sandbox_natively_a_directory_per_session() {
        let root = tempfile::tempdir().expect("a temporary folder");
        let provider = Arc::new(
            LocalSandbox::new(LocalSandboxOptions {
                root: root.path().to_path_buf(),
                ..LocalSandboxOptions::default()
            })
            .expect("valid options"),
        );
        let registry = Handouts::<Arc<dyn SandboxSession>>::new();
        let shared = SharedSandbox::new(
            Arc::new(ProviderOpener::new(
                provider,
                "shared",
                Arc::new(registry.clone()),
            )),
            SharedSandboxOptions {
                ports: vec![4101, 4102],
                stop_when_unused: false,
            },
        )
        .expect("valid ports");
        let view_of = |lease: &dyn Lease| match registry.get(&lease.sandbox()) {
            Some(view) => view,
            None => panic!("no view handed out as {:?}", lease.sandbox()),
        };
        let a = shared.acquire("chat a", false).await.expect("a lease");
        let b = shared.acquire("chat-b", false).await.expect("a lease");
        let (view_a, view_b) = (view_of(&*a), view_of(&*b));
        assert_eq!(view_a.ports(), &[4101]);
        assert_eq!(view_b.ports(), &[4102]);
        assert_eq!(view_a.id(), view_b.id(), "views of one sandbox");
        assert!(view_b
            .default_working_directory()
            .ends_with("/sessions/chat-b"));
        view_a
            .write_text("notes.txt", "from a")
            .await
            .expect("written");
        assert_eq!(view_b.read_text("notes.txt").await.expect("read"), None);
        let sleeper = view_a
            .spawn(Command::new("sleep 30"))
            .await
            .expect("spawned");
        assert_eq!(registry.len(), 2);
        a.suspend().await.expect("suspended");
        assert_eq!(registry.len(), 1, "the view is forgotten with its lease");
        let status = sleeper.control.wait().await.expect("ended");
        assert_ne!(status.code, 0, "the view's process was killed");
        let again = shared.acquire("chat a", true).await.expect("resumed");
        let view = view_of(&*again);
        assert_eq!(view.ports(), &[4101]);
        assert_eq!(
            view.read_text("notes.txt").await.expect("read").as_deref(),
            Some("from a"),
            "a resumed session finds its files"
        );
        again.close().await.expect("closed");
        b.close().await.expect("closed");
        shared.shutdown().await.expect("shut down");
        assert!(registry.is_empty());
    }
}
