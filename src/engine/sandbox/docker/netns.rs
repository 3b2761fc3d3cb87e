//! The host's way into a container that has no network (`--network none`): its network
//! namespace, entered by a short-lived thread of this process.
//!
//! A container on `--network none` has a loopback of its own and nothing else: no route to the
//! host, nor anywhere. This process (as root, on the engine's host) opens the namespace through
//! `/proc/<container's init>/ns/net`, and a thread made for one call `setns()`es into it, makes
//! its socket there (a connection to the container's own loopback, or a listener on it), and
//! ends. A socket stays in the namespace it was made in, whichever thread then uses it, so the
//! rest of the work (copying bytes) runs on tokio as usual, and nothing in the container gets a
//! socket of the host's namespace: it has no way back.
//!
//! Needs `CAP_SYS_ADMIN` (root) and the engine on this host (its process ids are ours). Where
//! that does not hold, [`NetNamespace::open`] says so, and the sandbox refuses ports.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use crate::engine::error::{Result, SessionError};

/// The network namespace of a running container, held open (it lives while this is held, even
/// if the container stops; then nothing listens in it).
#[derive(Debug, Clone)]
pub(crate) struct NetNamespace {
    file: Arc<File>,
}

impl NetNamespace {
    /// Opens the namespace of the process `pid` (the container's init) and checks that a thread
    /// of this process may enter it.
    ///
    /// # Errors
    ///
    /// A host error when it cannot be opened or entered (not root, or an engine on another host).
    pub(crate) fn open(pid: u32, container: &str) -> Result<Self> {
        let refuse = |why: String| {
            SessionError::host(format!(
                "The ports of the sandbox container {container} are reached through its network namespace, which this process cannot enter ({why}): \
                 that needs root and the Docker Engine on this host. Run the server as root, or give the sandbox no ports, or network \"host\" (a risk: the sandbox then reaches the host's services)."
            ))
        };
        if pid == 0 {
            return Err(refuse("the container is not running".to_owned()));
        }
        let path = format!("/proc/{pid}/ns/net");
        let file = File::open(&path).map_err(|error| refuse(format!("{path}: {error}")))?;
        let namespace = NetNamespace {
            file: Arc::new(file),
        };
        namespace
            .inside(|| Ok(()))
            .map_err(|error| refuse(format!("setns: {error}")))?;
        Ok(namespace)
    }

    /// Runs `work` on a thread of its own that entered the namespace, and returns what it made.
    fn inside<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    ) -> std::io::Result<T> {
        let file = self.file.clone();
        std::thread::Builder::new()
            .name("harness-sessions-netns".into())
            .spawn(move || {
                // SAFETY: setns(2) takes a descriptor this thread's `file` keeps open and a flag;
                // it changes the namespace of this thread only, a thread made for this call that
                // ends right after `work`.
                let entered = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                if entered != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                work()
            })?
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the namespace thread panicked")))
    }

    /// Connects to `port` on the container's loopback.
    pub(crate) async fn connect(&self, port: u16) -> std::io::Result<TcpStream> {
        let namespace = self.clone();
        tokio::task::spawn_blocking(move || {
            namespace
                .inside(move || TcpStream::connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)))
        })
        .await
        .unwrap_or_else(|error| Err(std::io::Error::other(error.to_string())))
    }

    /// A listener on `port` of the container's loopback, made in its namespace.
    pub(crate) fn listen(&self, port: u16) -> std::io::Result<std::net::TcpListener> {
        self.inside(move || {
            std::net::TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port))
        })
    }
}
