//! What `createPostgresSessionStore()` is given, checked: the connection string (with its TLS
//! mode), the schema, the lease ttl, the instance id, the `LISTEN` connection's string.
//!
//! Invariants:
//! - the URL is a `postgres://` or `postgresql://` connection string that `tokio-postgres` can
//!   read, once `sslmode` and `sslrootcert` (which this module reads itself, with libpq's
//!   meanings) are taken out of it;
//! - the password never appears in a message, a `Debug` output or a listing: errors name the
//!   server as `host:port/database as user` ([`ConnectionTarget::describe`]), and any text that
//!   comes from a parser is scrubbed of the password as written and as decoded;
//! - the schema is a plain identifier (`[A-Za-z_][A-Za-z0-9_]*`, at most 63 bytes), so that it can be
//!   written quoted into SQL with no escaping question.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::engine::error::{Result, SessionError};

/// The schema the store's tables live in when none is given.
pub const DEFAULT_SCHEMA: &str = "harness_sessions";

/// The lease ttl when none is given: 15 s.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);

/// How long connecting to the server may take when the URL does not say (`connect_timeout`).
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How TLS is used, as libpq's `sslmode` says it (default `prefer`, as libpq).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// `disable`: never.
    Disable,
    /// `allow` or `prefer`: TLS when the server offers it, without checking its certificate.
    Prefer,
    /// `require`: TLS or no connection; the certificate checked against `sslrootcert` when one
    /// is given (as libpq does), else not checked.
    Require,
    /// `verify-ca`: TLS, the server's certificate signed by a trusted authority (`sslrootcert`,
    /// or Mozilla's roots), whatever name it bears.
    VerifyCa,
    /// `verify-full`: as `verify-ca`, and the certificate names the host connected to.
    VerifyFull,
}

impl TlsMode {
    fn parse(value: &str) -> Option<TlsMode> {
        Some(match value {
            "disable" => TlsMode::Disable,
            "allow" | "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            _ => return None,
        })
    }
}

/// One server to connect to: its `tokio-postgres` configuration and how TLS is used.
#[derive(Clone)]
pub struct ConnectionTarget {
    /// Everything but TLS (host, port, user, password, database, timeouts...).
    pub(crate) config: tokio_postgres::Config,
    /// How TLS is used.
    pub(crate) tls: TlsMode,
    /// The trusted authorities' certificates (PEM), from `sslrootcert`; `None` for Mozilla's.
    pub(crate) root_cert: Option<PathBuf>,
    /// The password as written and as decoded, to scrub from any text that could hold it.
    secrets: Vec<String>,
}

impl fmt::Debug for ConnectionTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionTarget")
            .field("server", &self.describe())
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl ConnectionTarget {
    /// Reads a `postgres://` connection string; `option` names it in errors (`url`, `listenUrl`).
    ///
    /// # Errors
    /// [`SessionError::Input`] at `option` when it is not a connection string this store can use;
    /// the message never holds the password.
    pub fn parse(url: &str, option: &str) -> Result<ConnectionTarget> {
        let secrets = written_password(url);
        let refuse = |why: String| {
            SessionError::input(
                option,
                scrub(
                    &format!("{option} is not a usable postgres:// connection string: {why}"),
                    &secrets,
                ),
            )
        };
        let lower = url.get(..13).unwrap_or(url).to_ascii_lowercase();
        if !(lower.starts_with("postgres://") || lower.starts_with("postgresql://")) {
            return Err(refuse(
                "it must start with postgres:// or postgresql://".to_owned(),
            ));
        }
        if let Some((userinfo, _)) = authority(url).rsplit_once('@') {
            percent_decode(userinfo)
                .map_err(|why| refuse(format!("its user or password: {why}")))?;
        }
        let (base, query) = match url.split_once('?') {
            Some((base, query)) => (base, Some(query)),
            None => (url, None),
        };
        let mut tls = TlsMode::Prefer;
        let mut root_cert = None;
        let mut kept = Vec::new();
        for pair in query.into_iter().flat_map(|query| query.split('&')) {
            if pair.is_empty() {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded_key = percent_decode(key).map_err(refuse)?;
            match decoded_key.as_str() {
                "sslmode" => {
                    let value = percent_decode(value).map_err(refuse)?;
                    tls = TlsMode::parse(&value).ok_or_else(|| {
                        refuse(
                            "sslmode must be disable, allow, prefer, require, verify-ca or \
                             verify-full"
                                .to_owned(),
                        )
                    })?;
                }
                "sslrootcert" => {
                    let value = percent_decode(value).map_err(refuse)?;
                    // libpq's `system`: the usual authorities, here Mozilla's.
                    root_cert = (value != "system" && !value.is_empty()).then(|| value.into());
                }
                _ => kept.push(pair),
            }
        }
        let rebuilt = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let mut config = tokio_postgres::Config::from_str(&rebuilt)
            .map_err(|error| refuse(lower_first(&super::connection::describe(&error))))?;
        if config.get_hosts().is_empty() {
            return Err(refuse("it names no host".to_owned()));
        }
        if config.get_user().is_none() {
            return Err(refuse("it names no user".to_owned()));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("harness-sessions");
        }
        let mut secrets = secrets;
        if let Some(password) = config.get_password() {
            if let Ok(password) = std::str::from_utf8(password) {
                secrets.push(password.to_owned());
            }
        }
        secrets.retain(|secret| !secret.is_empty());
        Ok(ConnectionTarget {
            config,
            tls,
            root_cert,
            secrets,
        })
    }

    /// The server as errors name it: `host:port/database as user`, never the password.
    pub fn describe(&self) -> String {
        use tokio_postgres::config::Host;
        let ports = self.config.get_ports();
        let hosts = self
            .config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(index, host)| {
                let port = ports
                    .get(index)
                    .or_else(|| ports.first())
                    .copied()
                    .unwrap_or(5432);
                match host {
                    Host::Tcp(name) => format!("{name}:{port}"),
                    #[cfg(unix)]
                    Host::Unix(path) => format!("{}:{port}", path.display()),
                }
            })
            .collect::<Vec<_>>()
            .join(",");
        format!(
            "{hosts}/{} as {}",
            self.config
                .get_dbname()
                .or(self.config.get_user())
                .unwrap_or(""),
            self.config.get_user().unwrap_or("")
        )
    }

    /// `text` with the password, however it was written, replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        scrub(text, &self.secrets)
    }
}

/// How a [`super::PostgresStore`] is made.
#[derive(Clone)]
pub struct PostgresStoreOptions {
    /// The server for queries (possibly through a transaction-mode pooler).
    pub url: ConnectionTarget,
    /// The server for the one connection that `LISTEN`s (`listenUrl`); `None`: `url`'s.
    pub listen_url: Option<ConnectionTarget>,
    /// The schema the tables live in; checked by [`schema_name`].
    pub schema: String,
    /// How long an instance's lease on a session lasts without renewal.
    pub lease_ttl: Duration,
    /// This instance's id in leases.
    pub instance_id: String,
    /// A 256-bit key to encrypt resume states at rest with (XChaCha20-Poly1305), as the SQLite
    /// store does.
    pub encryption_key: Option<[u8; 32]>,
    /// How many connections the pool keeps at most.
    pub max_connections: usize,
}

impl fmt::Debug for PostgresStoreOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStoreOptions")
            .field("url", &self.url)
            .field("listen_url", &self.listen_url)
            .field("schema", &self.schema)
            .field("lease_ttl", &self.lease_ttl)
            .field("instance_id", &self.instance_id)
            .field(
                "encryption_key",
                &self.encryption_key.as_ref().map(|_| "<redacted>"),
            )
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

impl PostgresStoreOptions {
    /// Options for `url` with every default: schema `harness_sessions`, lease ttl 15 s, a
    /// random instance id, no encryption, 16 connections.
    ///
    /// # Errors
    /// As [`ConnectionTarget::parse`].
    pub fn new(url: &str) -> Result<PostgresStoreOptions> {
        Ok(PostgresStoreOptions {
            url: ConnectionTarget::parse(url, "url")?,
            listen_url: None,
            schema: DEFAULT_SCHEMA.to_owned(),
            lease_ttl: DEFAULT_LEASE_TTL,
            instance_id: random_instance_id(),
            encryption_key: None,
            max_connections: 16,
        })
    }
}

/// `schema` if it is a plain identifier the store can use.
///
/// # Errors
/// [`SessionError::Input`] at `schema` otherwise.
pub fn schema_name(schema: &str) -> Result<String> {
    let mut chars = schema.chars();
    let plain = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && schema.len() <= 63
        && !schema.starts_with("pg_");
    if plain {
        Ok(schema.to_owned())
    } else {
        Err(SessionError::input(
            "schema",
            "schema must be a plain identifier: a letter or _, then letters, digits or _, at \
             most 63 of them, not starting with pg_",
        ))
    }
}

/// `instance_id` if the store can use it: 1 to 200 printable ASCII characters.
///
/// # Errors
/// [`SessionError::Input`] at `instanceId` otherwise.
pub fn instance_id(instance_id: &str) -> Result<String> {
    if !instance_id.is_empty()
        && instance_id.len() <= 200
        && instance_id.bytes().all(|b| b.is_ascii_graphic())
    {
        Ok(instance_id.to_owned())
    } else {
        Err(SessionError::input(
            "instanceId",
            "instanceId must be 1 to 200 printable ASCII characters, no space",
        ))
    }
}

/// A lease ttl in milliseconds if the store can use it: a whole number from 100 ms to a day.
///
/// # Errors
/// [`SessionError::Input`] at `leaseTtlMs` otherwise.
pub fn lease_ttl(millis: f64) -> Result<Duration> {
    if millis.is_finite() && millis.fract() == 0.0 && (100.0..=86_400_000.0).contains(&millis) {
        Ok(Duration::from_millis(millis as u64))
    } else {
        Err(SessionError::input(
            "leaseTtlMs",
            "leaseTtlMs must be a whole number of milliseconds from 100 to 86400000",
        ))
    }
}

/// A random id for this process: `<hostname-ish>-<pid>-<16 hex digits>`.
pub fn random_instance_id() -> String {
    let mut bytes = [0u8; 8];
    // The OS's randomness; a failure leaves the time and pid to tell instances apart.
    let _ = getrandom_bytes(&mut bytes);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.subsec_nanos());
    let random = u64::from_le_bytes(bytes) ^ u64::from(nanos);
    format!("hs-{}-{random:016x}", std::process::id())
}

fn getrandom_bytes(bytes: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(bytes)
}

/// The password of `url` as written (between `:` and `@` of its authority) and percent-decoded.
fn written_password(url: &str) -> Vec<String> {
    let Some((userinfo, _)) = authority(url).rsplit_once('@') else {
        return Vec::new();
    };
    let Some((_, password)) = userinfo.split_once(':') else {
        return Vec::new();
    };
    let mut secrets = vec![password.to_owned()];
    if let Ok(decoded) = percent_decode(password) {
        secrets.push(decoded);
    }
    secrets.retain(|secret| !secret.is_empty());
    secrets
}

/// The authority of `url`: between `://` and the first `/` or `?` after it.
fn authority(url: &str) -> &str {
    let Some((_, rest)) = url.split_once("://") else {
        return "";
    };
    &rest[..rest.find(['/', '?']).unwrap_or(rest.len())]
}

/// `text` with each of `secrets` replaced by `***`, longest first. Our own messages never hold
/// the password; this catches a parser's message quoting the string. A secret shorter than 4
/// characters is left (it would mangle words, and no message quotes more than one character of
/// the string it could not read).
fn scrub(text: &str, secrets: &[String]) -> String {
    let mut sorted: Vec<&String> = secrets.iter().collect();
    sorted.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    let mut text = text.to_owned();
    for secret in sorted {
        if secret.chars().count() >= 4 {
            text = text.replace(secret.as_str(), "***");
        }
    }
    text
}

/// `%XX` escapes decoded, `+` kept; the result must be UTF-8.
fn percent_decode(text: &str) -> std::result::Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = bytes
                .get(index + 1..index + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| "a % escape is not two hex digits".to_owned())?;
            out.push(hex);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "a % escape is not UTF-8".to_owned())
}

fn lower_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_url_and_its_tls_mode() {
        let target = ConnectionTarget::parse(
            "postgres://app:s3cr%40t@db.example:6543/sessions?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&connect_timeout=3",
            "url",
        )
        .unwrap();
        assert_eq!(target.tls, TlsMode::VerifyFull);
        assert_eq!(target.root_cert, Some(PathBuf::from("/tmp/ca.pem")));
        assert_eq!(target.describe(), "db.example:6543/sessions as app");
        assert_eq!(target.config.get_password(), Some(&b"s3cr@t"[..]));
        assert_eq!(
            target.config.get_connect_timeout(),
            Some(&Duration::from_secs(3))
        );
        assert!(!format!("{target:?}").contains("s3cr"));
        assert_eq!(target.scrub("x s3cr@t y s3cr%40t"), "x *** y ***");
        let plain = ConnectionTarget::parse("postgresql://u@h/d", "url").unwrap();
        assert_eq!(plain.tls, TlsMode::Prefer);
        assert_eq!(plain.describe(), "h:5432/d as u");
    }

    #[test]
    fn refuses_bad_urls_without_the_password() {
        for (url, words) in [
            ("mysql://u:pw1234@h/d", "must start with postgres://"),
            (
                "postgres://u:pw1234@h/d?sslmode=sometimes",
                "sslmode must be",
            ),
            ("postgres://u:pw1234@h/d?frobnicate=1", "unknown option"),
            ("postgres://u:pw1234@h:notaport/d", "not a usable"),
            ("postgres://u:pw%zz@h/d", "not a usable"),
            ("postgres:///d", "not a usable"),
        ] {
            let error = ConnectionTarget::parse(url, "url").unwrap_err();
            let SessionError::Input { path, message } = &error else {
                panic!("{url}: {error:?}");
            };
            assert_eq!(path, "url");
            assert!(message.contains(words), "{url}: {message}");
            assert!(!message.contains("pw1234"), "{url}: {message}");
        }
    }

    #[test]
    fn checks_schema_instance_and_ttl() {
        assert_eq!(schema_name("harness_sessions").unwrap(), "harness_sessions");
        for bad in ["", "1abc", "a-b", "a\"b", "pg_catalog", &"x".repeat(64)] {
            assert!(schema_name(bad).is_err(), "{bad}");
        }
        assert!(instance_id("web-1").is_ok());
        assert!(instance_id("web 1").is_err());
        assert!(instance_id("").is_err());
        assert_eq!(lease_ttl(1000.0).unwrap(), Duration::from_secs(1));
        assert!(lease_ttl(1.5).is_err());
        assert!(lease_ttl(f64::NAN).is_err());
        assert!(lease_ttl(50.0).is_err());
        assert_ne!(random_instance_id(), random_instance_id());
    }
}
