//! The connection to a Docker Engine, pinned to API 1.41, and Docker's failures in words a user
//! can act on.

use bollard::errors::Error as DockerError;
use bollard::{ClientVersion, Docker};

use crate::engine::error::{Result, SessionError};

/// The Engine API version every request speaks: Docker 20.10's, the oldest engine supported.
pub const API_VERSION: ClientVersion = ClientVersion {
    major_version: 1,
    minor_version: 41,
};

/// Seconds a request may take before it fails (a container stop waits a few seconds).
const REQUEST_TIMEOUT_SECONDS: u64 = 120;

/// Where the Docker Engine listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A unix socket at this path.
    Unix(String),
    /// An HTTP address, `host:port`.
    Tcp(String),
}

impl Endpoint {
    /// Parses `unix:///path`, `/path` (a socket), `tcp://host:port` or `http://host:port`; `None`
    /// means `DOCKER_HOST`, then `/var/run/docker.sock`.
    ///
    /// # Errors
    ///
    /// An input error at `host` for anything else (TLS endpoints among them).
    pub fn parse(host: Option<&str>) -> Result<Self> {
        let from_env = std::env::var("DOCKER_HOST")
            .ok()
            .filter(|value| !value.is_empty());
        let host = host
            .map(str::to_owned)
            .or(from_env)
            .unwrap_or_else(|| "unix:///var/run/docker.sock".to_owned());
        if let Some(path) = host.strip_prefix("unix://") {
            return Ok(Endpoint::Unix(path.to_owned()));
        }
        if host.starts_with('/') {
            return Ok(Endpoint::Unix(host));
        }
        if let Some(address) = host
            .strip_prefix("tcp://")
            .or_else(|| host.strip_prefix("http://"))
        {
            return Ok(Endpoint::Tcp(address.to_owned()));
        }
        Err(SessionError::input(
            "host",
            format!(
                "host: {host:?} is not a Docker endpoint this sandbox speaks: give unix:///path/to/docker.sock, a socket path, or tcp://host:port."
            ),
        ))
    }

    /// As users write it: `unix:///var/run/docker.sock`.
    pub fn display(&self) -> String {
        match self {
            Endpoint::Unix(path) => format!("unix://{path}"),
            Endpoint::Tcp(address) => format!("tcp://{address}"),
        }
    }

    /// A client for this endpoint. Does no I/O but checking that a socket exists.
    ///
    /// # Errors
    ///
    /// A socket that does not exist, in words.
    pub fn connect(&self) -> Result<Docker> {
        let connected = match self {
            Endpoint::Unix(path) => {
                Docker::connect_with_unix(path, REQUEST_TIMEOUT_SECONDS, &API_VERSION)
            }
            Endpoint::Tcp(address) => Docker::connect_with_http(
                &format!("tcp://{address}"),
                REQUEST_TIMEOUT_SECONDS,
                &API_VERSION,
            ),
        };
        connected.map_err(|error| self.failure("connect to it", error))
    }

    /// `error`, met while trying to `doing`, in words: the engine unreachable, or what it said.
    pub fn failure(&self, doing: &str, error: DockerError) -> SessionError {
        let endpoint = self.display();
        match error {
            DockerError::SocketNotFoundError(path) => SessionError::host(format!(
                "No Docker Engine at {endpoint}: the socket {path} does not exist. Start Docker \
                 (scripts/docker/start.sh does it on Debian), or point DOCKER_HOST or the sandbox's `host` option at a running engine."
            )),
            DockerError::IOError { .. } | DockerError::HyperLegacyError { .. } | DockerError::HyperResponseError { .. } => {
                SessionError::host(format!(
                    "Cannot reach the Docker Engine at {endpoint} to {doing}: {error}. Is it running, and may this process use it?"
                ))
            }
            DockerError::RequestTimeoutError => SessionError::host(format!(
                "The Docker Engine at {endpoint} did not answer in {REQUEST_TIMEOUT_SECONDS} s when asked to {doing}."
            )),
            DockerError::DockerResponseServerError {
                status_code,
                message,
            } => SessionError::host(format!(
                "The Docker Engine refused to {doing}: {} (HTTP {status_code}).",
                without_host_paths(message.trim().trim_end_matches('.'))
            )),
            other => SessionError::host(format!("Docker failed to {doing}: {other}.")),
        }
    }
}

/// `message` with the host's side of the container's file system taken out: a path of the
/// engine's storage (`…/overlay2/<id>/merged/etc/x`) becomes the container's path (`/etc/x`), so
/// that no error shows where the engine keeps containers on the host.
pub(crate) fn without_host_paths(message: &str) -> String {
    const LAYERS: [&str; 3] = ["/merged", "/diff", "/rootfs"];
    message
        .split(' ')
        .map(|word| {
            let Some(storage) = [
                "/overlay2/",
                "/overlay/",
                "/containers/",
                "/volumes/",
                "/var/lib/docker",
            ]
            .iter()
            .filter_map(|marker| word.find(marker))
            .min() else {
                return word.to_owned();
            };
            let start = word[..storage]
                .rfind(['"', '\'', '(', '='])
                .map_or(0, |index| index + 1);
            let after = &word[storage..];
            let inside = LAYERS
                .iter()
                .filter_map(|layer| after.find(layer).map(|index| index + layer.len()))
                .min()
                .map_or("", |end| &after[end..]);
            let inside = if inside.is_empty() || !inside.starts_with('/') {
                format!("/{}", inside.trim_start_matches('/'))
            } else {
                inside.to_owned()
            };
            let inside = if LAYERS.iter().any(|layer| after.contains(layer)) {
                inside
            } else {
                "<engine storage>".to_owned()
            };
            format!("{}{inside}", &word[..start])
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The HTTP status of a response error, if `error` is one.
pub(crate) fn status_of(error: &DockerError) -> Option<u16> {
    match error {
        DockerError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// The message of a response error, lower-cased, or an empty string.
pub(crate) fn message_of(error: &DockerError) -> String {
    match error {
        DockerError::DockerResponseServerError { message, .. } => message.to_lowercase(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_storage_paths_are_taken_out_of_messages() {
        let said = "lstat /var/lib/docker/overlay2/0123abcd/merged/etc/shadow: permission denied";
        assert_eq!(
            without_host_paths(said),
            "lstat /etc/shadow: permission denied"
        );
        let quoted = "open \"/work/docker/root/overlay2/ff/diff/root/x\": no such file";
        assert_eq!(without_host_paths(quoted), "open \"/root/x\": no such file");
        assert_eq!(
            without_host_paths("mount /work/docker/root/volumes/abc failed"),
            "mount <engine storage> failed"
        );
        assert_eq!(
            without_host_paths("no such container: x"),
            "no such container: x"
        );
    }

    #[test]
    fn endpoints_parse() {
        assert_eq!(
            Endpoint::parse(Some("unix:///a/b.sock")),
            Ok(Endpoint::Unix("/a/b.sock".into()))
        );
        assert_eq!(
            Endpoint::parse(Some("/a/b.sock")),
            Ok(Endpoint::Unix("/a/b.sock".into()))
        );
        assert_eq!(
            Endpoint::parse(Some("tcp://127.0.0.1:2375")),
            Ok(Endpoint::Tcp("127.0.0.1:2375".into()))
        );
        assert!(Endpoint::parse(Some("ssh://x")).is_err());
    }

    #[test]
    fn a_missing_socket_says_what_to_do() {
        let endpoint = Endpoint::Unix("/nonexistent/docker.sock".into());
        let message = endpoint
            .connect()
            .err()
            .map(|error| error.to_string())
            .unwrap_or_default();
        assert!(
            message.starts_with("No Docker Engine at unix:///nonexistent/docker.sock"),
            "{message}"
        );
        assert!(message.contains("DOCKER_HOST"), "{message}");
    }
}
