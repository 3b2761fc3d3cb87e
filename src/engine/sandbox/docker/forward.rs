//! The ports of a container without a network, served on the host: for each port of a view, a
//! listener on `127.0.0.1:<a port the kernel picks>` of the host, and for each connection it
//! accepts, a connection made inside the container's namespace ([`super::netns`]) to the
//! container's own loopback port, the two spliced until either side closes.
//!
//! Invariants: the host port is bound by this process before it is handed out (so it is free and
//! no two views share one); every listener and connection ends when its [`PortForwarder`] is
//! dropped; the container is given no socket of the host's, only bytes.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};

use tokio::sync::watch;

use super::netns::NetNamespace;
use crate::engine::error::{Result, SessionError};

/// Listeners on the host for the ports of one view, each forwarding into the container.
#[derive(Debug)]
pub(crate) struct PortForwarder {
    /// The host port of each container port.
    host_ports: HashMap<u16, u16>,
    /// Closed (dropped) to end every listener and connection.
    _running: watch::Sender<()>,
}

impl PortForwarder {
    /// Listens on the host for each of `ports`, forwarding into `namespace`.
    ///
    /// # Errors
    ///
    /// A host error when a listener cannot be made, or when called outside tokio.
    pub(crate) fn start(namespace: &NetNamespace, ports: &[u16]) -> Result<Self> {
        let (running, stopped) = watch::channel(());
        let mut host_ports = HashMap::new();
        for port in ports {
            let refuse = |error: std::io::Error| {
                SessionError::host(format!(
                    "Could not listen on the host's loopback for the sandbox's port {port}: {error}."
                ))
            };
            let listener = std::net::TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))
                .map_err(refuse)?;
            listener.set_nonblocking(true).map_err(refuse)?;
            let host_port = listener.local_addr().map_err(refuse)?.port();
            let listener = tokio::net::TcpListener::from_std(listener).map_err(refuse)?;
            host_ports.insert(*port, host_port);
            tokio::spawn(serve(listener, namespace.clone(), *port, stopped.clone()));
        }
        Ok(PortForwarder {
            host_ports,
            _running: running,
        })
    }

    /// The host port that reaches the container's `port`.
    pub(crate) fn host_port(&self, port: u16) -> Option<u16> {
        self.host_ports.get(&port).copied()
    }
}

/// Accepts connections on `listener` until `stopped` closes, each forwarded to `port` inside.
async fn serve(
    listener: tokio::net::TcpListener,
    namespace: NetNamespace,
    port: u16,
    mut stopped: watch::Receiver<()>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.changed() => return,
        };
        let Ok((mut outside, _)) = accepted else {
            // Out of descriptors, say: wait a little rather than spin.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let namespace = namespace.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let inside = match namespace.connect(port).await {
                Ok(inside) => inside,
                // Nothing listens inside yet: the client sees its connection closed.
                Err(_) => return,
            };
            if inside.set_nonblocking(true).is_err() {
                return;
            }
            let Ok(mut inside) = tokio::net::TcpStream::from_std(inside) else {
                return;
            };
            let _ = outside.set_nodelay(true);
            let _ = inside.set_nodelay(true);
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut outside, &mut inside) => {}
                _ = stopped.changed() => {}
            }
        });
    }
}
