//! What a view of a sandbox is made of besides processes: its ports, how to reach them, how a
//! view forks, and file contents as streams.

use std::pin::Pin;

use bytes::Bytes;
use futures::Stream;

use crate::engine::error::{Result, SessionError};

/// A file's contents as a stream of byte chunks.
pub type FileStream = Pin<Box<dyn Stream<Item = Result<Bytes>> + Send + 'static>>;

/// The protocol a port endpoint is asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PortProtocol {
    /// `http://` (the default).
    #[default]
    Http,
    /// `https://`.
    Https,
    /// `ws://`.
    Ws,
}

impl PortProtocol {
    /// Parses `http`, `https` or `ws`.
    ///
    /// # Errors
    ///
    /// Any other protocol, as an input error at `protocol`.
    pub fn parse(protocol: &str) -> Result<Self> {
        match protocol {
            "http" => Ok(PortProtocol::Http),
            "https" => Ok(PortProtocol::Https),
            "ws" => Ok(PortProtocol::Ws),
            other => Err(SessionError::input(
                "protocol",
                format!("The protocol {other:?} is not one of http, https, ws."),
            )),
        }
    }

    /// The URL scheme.
    pub fn scheme(self) -> &'static str {
        match self {
            PortProtocol::Http => "http",
            PortProtocol::Https => "https",
            PortProtocol::Ws => "ws",
        }
    }
}

/// How to connect to a port of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortEndpoint {
    /// The URL: `ws://127.0.0.1:4000` and the like.
    pub url: String,
    /// Headers to send with the connection (none for the local and Docker sandboxes).
    pub headers: Vec<(String, String)>,
}

/// What [`crate::engine::sandbox::SandboxSession::fork`] makes: a view of the same sandbox with
/// ports and a working directory of its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForkOptions {
    /// The ports of the view (its first one is where a harness bridge listens).
    pub ports: Vec<u16>,
    /// Its working directory: absolute, or relative to the forked view's. Created if missing.
    /// Default: a new directory `fork-<random>` in the forked view's working directory; give a
    /// stable one (the session id, say) for a view that must find its files again after a
    /// suspension.
    pub working_directory: Option<String>,
}

/// Refuses port numbers out of range or given twice. `at` names the option.
///
/// # Errors
///
/// An input error at `at`.
pub fn validate_ports(ports: &[u16], at: &str) -> Result<()> {
    for (index, port) in ports.iter().enumerate() {
        if *port == 0 {
            return Err(SessionError::input(
                format!("{at}[{index}]"),
                format!("{at}[{index}]: port 0 is not a port a sandbox can expose."),
            ));
        }
        if ports[..index].contains(port) {
            return Err(SessionError::input(
                format!("{at}[{index}]"),
                format!("{at}[{index}]: port {port} is listed twice."),
            ));
        }
    }
    Ok(())
}

/// The endpoint of `port` on this host's loopback, refusing a port the view does not expose.
///
/// # Errors
///
/// An input error at `port` when `port` is not in `ports`.
pub fn loopback_endpoint(ports: &[u16], port: u16, protocol: PortProtocol) -> Result<PortEndpoint> {
    if !ports.contains(&port) {
        let listed = if ports.is_empty() {
            "it exposes no port".to_owned()
        } else {
            format!(
                "its ports are {}",
                ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Err(SessionError::input(
            "port",
            format!("Port {port} is not a port of this sandbox: {listed}."),
        ));
    }
    Ok(PortEndpoint {
        url: format!("{}://127.0.0.1:{port}", protocol.scheme()),
        headers: Vec::new(),
    })
}

/// A fresh name for a fork's directory: `fork-` and 12 hexadecimal digits.
pub(crate) fn fresh_fork_name() -> String {
    format!("fork-{:012x}", random_u64() & 0xffff_ffff_ffff)
}

/// 64 bits that differ from call to call and from process to process (not for secrets).
pub(crate) fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.as_nanos())
            .unwrap_or_default(),
    );
    hasher.write_u32(std::process::id());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_on_loopback_for_listed_ports_only() {
        assert_eq!(
            loopback_endpoint(&[4000], 4000, PortProtocol::Ws).map(|e| e.url),
            Ok("ws://127.0.0.1:4000".into())
        );
        assert!(loopback_endpoint(&[4000], 4001, PortProtocol::Http).is_err());
        assert!(loopback_endpoint(&[], 1, PortProtocol::Http).is_err());
    }

    #[test]
    fn ports_are_validated() {
        assert!(validate_ports(&[1, 2], "ports").is_ok());
        assert!(validate_ports(&[1, 1], "ports").is_err());
        assert!(validate_ports(&[0], "ports").is_err());
        assert!(PortProtocol::parse("ftp").is_err());
    }

    #[test]
    fn fork_names_differ() {
        assert_ne!(fresh_fork_name(), fresh_fork_name());
    }
}

/// `id` as a name Docker and file systems take (`[A-Za-z0-9_.-]`, not starting with `.` or `-`,
/// at most 128 bytes): unchanged when it already is one, otherwise its invalid characters
/// replaced and a hash of the original appended, so that two ids never share a name.
pub(crate) fn resource_name(id: &str) -> String {
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-';
    let clean = !id.is_empty()
        && id.len() <= 128
        && id.chars().all(valid)
        && !id.starts_with('.')
        && !id.starts_with('-');
    if clean {
        return id.to_owned();
    }
    let mut name: String = id
        .chars()
        .map(|c| if valid(c) { c } else { '-' })
        .take(100)
        .collect();
    name = name.trim_start_matches(['.', '-']).to_owned();
    // FNV-1a, 64 bits: stable across processes and versions.
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    if name.is_empty() {
        format!("x-{hash:016x}")
    } else {
        format!("{name}-{hash:016x}")
    }
}

#[cfg(test)]
mod name_tests {
    use super::resource_name;

    #[test]
    fn clean_ids_are_kept_and_others_hashed() {
        assert_eq!(resource_name("chat-1"), "chat-1");
        assert_eq!(
            resource_name("0b8f5a3e-2c1d-4e5f-9a7b-1c2d3e4f5a6b"),
            "0b8f5a3e-2c1d-4e5f-9a7b-1c2d3e4f5a6b"
        );
        let odd = resource_name("user/1 chat");
        assert!(odd.starts_with("user-1-chat-"), "{odd}");
        assert_ne!(resource_name("a/b"), resource_name("a b"));
        assert!(resource_name("../..").starts_with("x-"));
        assert!(resource_name(&"a".repeat(300)).len() <= 128);
    }
}
