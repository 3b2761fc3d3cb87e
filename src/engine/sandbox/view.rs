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
/// at most 128 bytes), one name per id:
///
/// - an id that already is such a name is kept, unless it ends like a hashed name (`-` and 16
///   hexadecimal digits);
/// - any other id becomes its valid characters (others replaced by `-`, at most 100), `-`, and the
///   first 16 hexadecimal digits of the SHA-256 of the id.
///
/// The two forms never meet (only the second ends like a hashed name), and two ids of the second
/// form share a name only if their SHA-256 digests share 64 bits: found by chance after about 2^32
/// ids, and a second id for a given one only by about 2^64 attempts. So `"team a/chat 1"` and
/// `"team-a-chat-1-9eb9137c31375c19"` get different folders and containers.
pub(crate) fn resource_name(id: &str) -> String {
    use sha2::{Digest, Sha256};
    let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-';
    let clean = !id.is_empty()
        && id.len() <= 128
        && id.chars().all(valid)
        && !id.starts_with('.')
        && !id.starts_with('-');
    if clean && !looks_hashed(id) {
        return id.to_owned();
    }
    let mut name: String = id
        .chars()
        .map(|c| if valid(c) { c } else { '-' })
        .take(100)
        .collect();
    name = name.trim_start_matches(['.', '-']).to_owned();
    let digest = Sha256::digest(id.as_bytes());
    let hash: String = digest[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    if name.is_empty() {
        format!("x-{hash}")
    } else {
        format!("{name}-{hash}")
    }
}

/// Whether `name` ends like a hashed name: `-` and 16 lower-case hexadecimal digits.
fn looks_hashed(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() >= 17
        && bytes[bytes.len() - 17] == b'-'
        && bytes[bytes.len() - 16..]
            .iter()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(byte))
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

    #[test]
    fn names_never_collide_with_a_hashed_name() {
        let hashed = resource_name("team a/chat 1");
        assert!(hashed.starts_with("team-a-chat-1-"), "{hashed}");
        // The id that is the other's name gets a name of its own.
        assert_ne!(resource_name(&hashed), hashed);
        assert_ne!(
            resource_name("team-a-chat-1-9eb9137c31375c19"),
            resource_name("team a/chat 1")
        );
        assert_ne!(
            resource_name("team-a-chat-1-9eb9137c31375c19"),
            "team-a-chat-1-9eb9137c31375c19"
        );
        // Ids that only look alike once cleaned differ too.
        let names: std::collections::HashSet<String> = [
            "a b",
            "a/b",
            "a-b",
            "a:b",
            "a-b-0000000000000000",
            "a-b-000000000000000g",
        ]
        .iter()
        .map(|id| resource_name(id))
        .collect();
        assert_eq!(names.len(), 6);
        assert_eq!(
            resource_name("a-b-000000000000000g"),
            "a-b-000000000000000g"
        );
    }
}
