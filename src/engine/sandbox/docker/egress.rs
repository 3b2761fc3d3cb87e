//! `allowedHosts`: the only ways out of a container without a network, opened by this process
//! inside the container's namespace ([`super::netns`]) and answered from the host.
//!
//! - A host on the host's loopback with a port (`127.0.0.1:8080`, `localhost:8080`, a model API
//!   mock or a local gateway): a listener on the same port of the container's loopback, each
//!   connection forwarded to that port of the host, and to nothing else.
//! - Any other host (`api.anthropic.com`, `example.com:8443`): through an HTTP `CONNECT` proxy of
//!   ours on the container's `127.0.0.1:`[`PROXY_PORT`] (the container's `HTTPS_PROXY` and
//!   `HTTP_PROXY`), which opens a tunnel to a named host and port (443 when the entry has none)
//!   and refuses anything else with `403`. Plain-HTTP proxy requests are refused: the tunnel is for
//!   TLS.
//!
//! Invariant: the container reaches exactly the entries of its list; every listener ends with its
//! [`Egress`].

use std::net::{Ipv4Addr, SocketAddrV4};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::netns::NetNamespace;
use crate::engine::error::{Result, SessionError};

/// The port of the container's loopback the `CONNECT` proxy listens on.
pub const PROXY_PORT: u16 = 3128;

/// One entry of `allowedHosts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHost {
    /// The host name or address, lower case.
    pub host: String,
    /// The port; `None`: 443.
    pub port: Option<u16>,
}

impl AllowedHost {
    /// Parses `host` or `host:port`.
    ///
    /// # Errors
    ///
    /// An input error at `at` for anything else, or a loopback host without a port.
    pub fn parse(entry: &str, at: &str) -> Result<Self> {
        let refuse = |why: &str| {
            SessionError::input(
                at,
                format!("{at}: {entry:?} {why}: give a host name, or host:port (\"api.anthropic.com\", \"127.0.0.1:8080\")."),
            )
        };
        let (host, port) = match entry.rsplit_once(':') {
            Some((host, port)) => {
                let port: u16 = port.parse().map_err(|_| refuse("has no valid port"))?;
                if port == 0 {
                    return Err(refuse("has no valid port"));
                }
                (host, Some(port))
            }
            None => (entry, None),
        };
        let host = host.to_ascii_lowercase();
        let valid = !host.is_empty()
            && host.len() <= 253
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            && !host.starts_with('-')
            && !host.starts_with('.');
        if !valid {
            return Err(refuse("is not a host"));
        }
        let allowed = AllowedHost { host, port };
        if allowed.is_loopback() && allowed.port.is_none() {
            return Err(refuse("is on the host's loopback and needs a port"));
        }
        Ok(allowed)
    }

    /// Whether it names the host's loopback.
    pub fn is_loopback(&self) -> bool {
        self.host == "localhost"
            || self
                .host
                .parse::<Ipv4Addr>()
                .is_ok_and(|address| address.is_loopback())
    }

    /// As given: `host` or `host:port`.
    pub fn text(&self) -> String {
        match self.port {
            Some(port) => format!("{}:{port}", self.host),
            None => self.host.clone(),
        }
    }

    fn admits(&self, host: &str, port: u16) -> bool {
        !self.is_loopback()
            && self.host.eq_ignore_ascii_case(host)
            && self.port.unwrap_or(443) == port
    }
}

/// Whether some entry goes through the proxy (so the container needs `HTTPS_PROXY`).
pub fn needs_proxy(allowed: &[AllowedHost]) -> bool {
    allowed.iter().any(|entry| !entry.is_loopback())
}

/// The listeners of a container's `allowedHosts`; dropped, they end.
#[derive(Debug)]
pub(crate) struct Egress {
    _running: watch::Sender<()>,
}

impl Egress {
    /// Opens the ways out of `allowed` inside `namespace`.
    ///
    /// # Errors
    ///
    /// A host error when a listener cannot be made in the container (its port taken there).
    pub(crate) fn start(namespace: &NetNamespace, allowed: &[AllowedHost]) -> Result<Self> {
        let (running, stopped) = watch::channel(());
        let listen = |port: u16| -> Result<tokio::net::TcpListener> {
            let refuse = |error: std::io::Error| {
                SessionError::host(format!(
                    "Could not listen on port {port} inside the sandbox for allowedHosts: {error}."
                ))
            };
            let listener = namespace.listen(port).map_err(refuse)?;
            listener.set_nonblocking(true).map_err(refuse)?;
            tokio::net::TcpListener::from_std(listener).map_err(refuse)
        };
        for entry in allowed.iter().filter(|entry| entry.is_loopback()) {
            let port = entry.port.unwrap_or(443);
            let listener = listen(port)?;
            tokio::spawn(accept(listener, stopped.clone(), move |inside| {
                forward_to_host(inside, port)
            }));
        }
        if needs_proxy(allowed) {
            let listener = listen(PROXY_PORT)?;
            let allowed: Vec<AllowedHost> = allowed.to_vec();
            tokio::spawn(accept(listener, stopped.clone(), move |inside| {
                tunnel(inside, allowed.clone())
            }));
        }
        Ok(Egress { _running: running })
    }
}

/// Accepts on `listener` until `stopped` closes, each connection served by `serve`.
async fn accept<F, Fut>(
    listener: tokio::net::TcpListener,
    mut stopped: watch::Receiver<()>,
    serve: F,
) where
    F: Fn(tokio::net::TcpStream) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.changed() => return,
        };
        let Ok((inside, _)) = accepted else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let served = serve(inside);
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = served => {}
                _ = stopped.changed() => {}
            }
        });
    }
}

/// Splices `inside` with the host's loopback `port`.
async fn forward_to_host(mut inside: tokio::net::TcpStream, port: u16) {
    if let Ok(mut outside) =
        tokio::net::TcpStream::connect(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).await
    {
        let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
    }
}

/// The most a `CONNECT` request's head may take.
const HEAD_LIMIT: usize = 8 * 1024;

/// Serves one proxy connection: a `CONNECT` to an allowed host and port is tunnelled, anything
/// else refused.
async fn tunnel(mut inside: tokio::net::TcpStream, allowed: Vec<AllowedHost>) {
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        if head.len() > HEAD_LIMIT {
            return;
        }
        match tokio::time::timeout(std::time::Duration::from_secs(30), inside.read(&mut buffer))
            .await
        {
            Ok(Ok(read)) if read > 0 => head.extend_from_slice(&buffer[..read]),
            _ => return,
        }
    }
    let line = String::from_utf8_lossy(&head);
    let mut words = line.lines().next().unwrap_or_default().split_whitespace();
    let target = match (words.next(), words.next()) {
        (Some(method), Some(target)) if method.eq_ignore_ascii_case("CONNECT") => target,
        _ => {
            let _ = inside
                .write_all(
                    b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                )
                .await;
            return;
        }
    };
    let admitted = target.rsplit_once(':').and_then(|(host, port)| {
        let port: u16 = port.parse().ok()?;
        allowed
            .iter()
            .any(|entry| entry.admits(host, port))
            .then(|| (host.to_owned(), port))
    });
    let Some((host, port)) = admitted else {
        let _ = inside
            .write_all(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            .await;
        return;
    };
    let Ok(mut outside) = tokio::net::TcpStream::connect((host.as_str(), port)).await else {
        let _ = inside
            .write_all(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            )
            .await;
        return;
    };
    if inside
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await
        .is_err()
    {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse() {
        assert_eq!(
            AllowedHost::parse("API.anthropic.com", "allowedHosts[0]"),
            Ok(AllowedHost {
                host: "api.anthropic.com".into(),
                port: None
            })
        );
        let local = AllowedHost::parse("127.0.0.1:8080", "allowedHosts[0]").expect("valid");
        assert!(local.is_loopback());
        assert!(
            !local.admits("127.0.0.1", 8080),
            "loopback is never tunnelled"
        );
        for bad in ["", "a b", "x:0", "x:99999", "localhost", "127.0.0.1", "-x"] {
            assert!(AllowedHost::parse(bad, "allowedHosts[0]").is_err(), "{bad}");
        }
        let named = AllowedHost::parse("example.com", "allowedHosts[0]").expect("valid");
        assert!(named.admits("EXAMPLE.com", 443));
        assert!(!named.admits("example.com", 80));
        assert!(!named.admits("example.org", 443));
    }
}
