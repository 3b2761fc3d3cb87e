//! The sandboxes in JavaScript: providers and sessions as napi classes.
//!
//! `js/sandbox.js` builds the public objects on these classes: `dockerSandbox()` and
//! `localSandbox()` wrap a [`NativeSandboxProvider`], and the sessions they return *are*
//! [`NativeSandboxSession`] instances, their prototype given the methods of
//! `HarnessV1NetworkSandboxSession` (`run`, `spawn`, `readFile`, ...) on top of the `native*`
//! methods here. So a session handed back to Rust (by the session strategies) is recognised as
//! what it is, [`NativeSandboxSession::session`], and forked or stopped natively.
//!
//! Output and file contents cross in batches, never line by line: each `read*` call returns
//! everything buffered (up to 1 MiB), and JavaScript enqueues it into a `ReadableStream`.

// Exports are reached from JavaScript, not from Rust: `pub` is what napi needs of them.
#![allow(unreachable_pub)]
// Test builds do not register napi exports, so the free functions look unused there.
#![cfg_attr(test, allow(dead_code))]

#[path = "sandbox_stream.rs"]
mod stream;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::Buffer;
use napi::Env;
use napi_derive::napi;
use serde::de::{self, Deserializer};
use serde::Deserialize;
use serde_json::Value;

use super::error::{guard, guard_sync, Settled};
use crate::engine::error::SessionError;
use crate::engine::input::{self, Count, Flag, GivenText, Number, Port};
use crate::engine::sandbox::docker::{
    self, AllowedHost, DockerSandbox, DockerSandboxOptions, NetworkMode,
};
use crate::engine::sandbox::local::{LocalSandbox, LocalSandboxOptions};
use crate::engine::sandbox::{Command, ForkOptions, PortProtocol, SandboxProvider, SandboxSession};
pub(crate) use stream::{NativeFileReader, NativeFileWriter, NativeSandboxProcess};

/// The options of `dockerSandbox()`, as `js/sandbox.js` passes them (JSON): their types checked
/// here, their rules by [`DockerSandbox::new`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DockerSandboxInit {
    #[serde(default, deserialize_with = "input::present")]
    image: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    host: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    pull: Option<Flag>,
    #[serde(default, deserialize_with = "input::present")]
    name_prefix: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    name: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    user: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    working_directory: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    home: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    ports: Option<Vec<Port>>,
    #[serde(default, deserialize_with = "input::present")]
    env: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "input::present")]
    cpus: Option<Number>,
    #[serde(default, deserialize_with = "input::present")]
    memory: Option<Memory>,
    #[serde(default, deserialize_with = "input::present")]
    pids: Option<Count<1>>,
    #[serde(default, deserialize_with = "input::present")]
    network: Option<Network>,
    #[serde(default, deserialize_with = "input::present")]
    allowed_hosts: Option<Vec<Allowed>>,
    #[serde(default, deserialize_with = "input::present")]
    disk_bytes: Option<DiskSize>,
}

/// A disk bound: bytes, or a size such as `"10g"` ([`docker::parse_memory`]'s units).
struct DiskSize(u64);

impl<'de> Deserialize<'de> for DiskSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bytes = match Value::deserialize(deserializer)? {
            Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
            Value::String(text) => docker::parse_memory(&text)
                .map(|bytes| bytes as f64)
                .unwrap_or(f64::NAN),
            _ => f64::NAN,
        };
        if (0.0..=1.2e15).contains(&bytes) {
            Ok(DiskSize(bytes as u64))
        } else {
            Err(de::Error::custom(
                "must be a number of bytes or a size such as \"10g\"",
            ))
        }
    }
}

/// An entry of `allowedHosts`: `host` or `host:port` ([`AllowedHost::parse`]).
struct Allowed(AllowedHost);

impl<'de> Deserialize<'de> for Allowed {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let entry = String::deserialize(deserializer)?;
        input::by_rule(AllowedHost::parse(&entry, "allowedHosts")).map(Allowed)
    }
}

/// A memory size: bytes, or a size such as `"512m"` ([`docker::parse_memory`]).
struct Memory(i64);

impl<'de> Deserialize<'de> for Memory {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Number(n) => {
                input::by_rule(docker::memory_from_bytes(n.as_f64().unwrap_or(f64::NAN)))
            }
            Value::String(text) => input::by_rule(docker::parse_memory(&text)),
            _ => Err(de::Error::custom(
                "must be a number of bytes or a size such as \"512m\"",
            )),
        }
        .map(Memory)
    }
}

/// `"none"` or `"host"` ([`NetworkMode::parse`]).
struct Network(NetworkMode);

impl<'de> Deserialize<'de> for Network {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mode = String::deserialize(deserializer)?;
        input::by_rule(NetworkMode::parse(&mode)).map(Network)
    }
}

/// The options of `localSandbox()`, as `js/sandbox.js` passes them (JSON): their types checked
/// here, their rules by [`LocalSandbox::new`].
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LocalSandboxInit {
    #[serde(default, deserialize_with = "input::present")]
    root: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    ports: Option<Vec<Port>>,
    #[serde(default, deserialize_with = "input::present")]
    env: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "input::present")]
    inherit_env: Option<Flag>,
    #[serde(default, deserialize_with = "input::present")]
    allowed_paths: Option<Vec<String>>,
    #[serde(default, deserialize_with = "input::present")]
    name: Option<String>,
}

/// The name `open()` uses when it is given none.
const SHARED_NAME: &str = "shared";

/// A command, as `run` and `spawn` take it.
#[napi(object)]
pub struct CommandInit {
    /// The shell command line.
    pub command: String,
    /// Where it runs.
    pub working_directory: Option<String>,
    /// Variables added to the environment.
    pub env: Option<HashMap<String, String>>,
}

/// What `fork()` takes, as JSON: each option checked here, once.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ForkInit {
    /// The ports of the new view.
    #[serde(default, deserialize_with = "input::present")]
    ports: Option<Vec<Port>>,
    /// Its working directory, absolute or relative to the forked view's.
    #[serde(default, deserialize_with = "input::present")]
    working_directory: Option<String>,
}

/// How to connect to a port.
#[napi(object)]
pub struct PortEndpointInfo {
    /// The URL.
    pub url: String,
    /// Headers to send, when there are any.
    pub headers: Option<HashMap<String, String>>,
}

/// What `run` returns.
#[napi(object)]
pub struct CommandResult {
    /// The exit code.
    pub exit_code: i32,
    /// Standard output, as text.
    pub stdout: String,
    /// Standard error, as text.
    pub stderr: String,
}

fn docker_options(init: DockerSandboxInit) -> DockerSandboxOptions {
    let defaults = DockerSandboxOptions::default();
    DockerSandboxOptions {
        image: init.image.unwrap_or_default(),
        host: init.host,
        pull: init.pull.is_some_and(|Flag(pull)| pull),
        name_prefix: init.name_prefix.unwrap_or(defaults.name_prefix),
        user: init.user.unwrap_or(defaults.user),
        working_directory: init.working_directory.unwrap_or(defaults.working_directory),
        home: init.home.unwrap_or(defaults.home),
        ports: init.ports.map(input::ports).unwrap_or_default(),
        env: init.env.unwrap_or_default().into_iter().collect(),
        cpus: init.cpus.map_or(defaults.cpus, |Number(cpus)| cpus),
        memory_bytes: init
            .memory
            .map_or(defaults.memory_bytes, |Memory(bytes)| bytes),
        pids_limit: init
            .pids
            .map_or(defaults.pids_limit, |Count(pids)| i64::from(pids)),
        network: init.network.map(|Network(mode)| mode),
        allowed_hosts: init
            .allowed_hosts
            .unwrap_or_default()
            .into_iter()
            .map(|Allowed(entry)| entry)
            .collect(),
        disk_bytes: init.disk_bytes.map(|DiskSize(bytes)| bytes),
    }
}

fn sorted_env(env: Option<HashMap<String, String>>) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = env.unwrap_or_default().into_iter().collect();
    env.sort();
    env
}

/// A provider of sandboxes: Docker containers, or local folders.
#[napi]
pub struct NativeSandboxProvider {
    inner: Arc<dyn SandboxProvider>,
    /// The name `open()` uses when it is given none: the `name` option, or `shared`.
    shared_name: String,
}

impl NativeSandboxProvider {
    /// The engine's provider, for the session strategies.
    #[allow(dead_code)]
    pub(crate) fn provider(&self) -> Arc<dyn SandboxProvider> {
        self.inner.clone()
    }
}

/// The provider of `dockerSandbox(options)` (its options as JSON). Reaches no engine until a
/// session is created.
#[napi]
pub fn create_docker_sandbox_provider(
    env: Env,
    options_json: String,
) -> napi::Result<NativeSandboxProvider> {
    guard_sync(&env, || {
        let init: DockerSandboxInit =
            input::read_json(&options_json, "options", "dockerSandbox()")?;
        let shared_name = init.name.clone().unwrap_or_else(|| SHARED_NAME.to_owned());
        let inner = DockerSandbox::new(docker_options(init))?;
        Ok(NativeSandboxProvider {
            inner: Arc::new(inner),
            shared_name,
        })
    })
}

/// The provider of `localSandbox(options)` (its options as JSON); a relative `root` is resolved
/// against the working directory now.
#[napi]
pub fn create_local_sandbox_provider(
    env: Env,
    options_json: String,
) -> napi::Result<NativeSandboxProvider> {
    guard_sync(&env, || {
        let init: LocalSandboxInit = input::read_json(&options_json, "options", "localSandbox()")?;
        let root = init.root.filter(|root| !root.is_empty()).ok_or_else(|| {
            SessionError::input(
                "root",
                "root: give the folder that holds the sessions' folders.",
            )
        })?;
        let root = std::path::absolute(&root).map_err(|e| {
            SessionError::input("root", format!("root: {root:?} is not a path: {e}."))
        })?;
        let inner = LocalSandbox::new(LocalSandboxOptions {
            root,
            ports: init.ports.map(input::ports).unwrap_or_default(),
            env: init.env.unwrap_or_default().into_iter().collect(),
            inherit_env: init.inherit_env.is_some_and(|Flag(inherit)| inherit),
            allowed_paths: init
                .allowed_paths
                .map(|paths| paths.into_iter().map(PathBuf::from).collect()),
        })?;
        Ok(NativeSandboxProvider {
            inner: Arc::new(inner),
            shared_name: init.name.unwrap_or_else(|| SHARED_NAME.to_owned()),
        })
    })
}

#[napi]
impl NativeSandboxProvider {
    /// `harness-sessions.docker` or `harness-sessions.local`.
    #[napi(getter)]
    pub fn provider_id(&self) -> String {
        self.inner.provider_id().to_owned()
    }

    /// Creates the sandbox of `sessionId` (a fresh name without one).
    #[napi]
    pub async fn create_session(
        &self,
        #[napi(ts_arg_type = "string | null")] session_id: GivenText,
    ) -> Settled<NativeSandboxSession> {
        let inner = self.inner.clone();
        guard(async move {
            // A lone surrogate would be read as U+FFFD: another session's sandbox.
            let session_id = input::optional_text(session_id, "sessionId")?;
            inner
                .create(session_id.as_deref())
                .await
                .map(NativeSandboxSession::new)
        })
        .await
    }

    /// The sandbox of `sessionId`, started again if it was stopped.
    #[napi]
    pub async fn resume_session(
        &self,
        #[napi(ts_arg_type = "string")] session_id: GivenText,
    ) -> Settled<NativeSandboxSession> {
        let inner = self.inner.clone();
        guard(async move {
            let session_id = input::optional_text(session_id, "sessionId")?
                .ok_or_else(|| SessionError::input("sessionId", "sessionId: expected a string."))?;
            inner
                .resume(&session_id)
                .await
                .map(NativeSandboxSession::new)
        })
        .await
    }

    /// The sandbox named `name` (default: the provider's `name` option, or `shared`), found
    /// again or created: the sandbox `sharedSandbox()` forks.
    #[napi]
    pub async fn open(
        &self,
        #[napi(ts_arg_type = "string | null")] name: GivenText,
    ) -> Settled<NativeSandboxSession> {
        let inner = self.inner.clone();
        let shared_name = self.shared_name.clone();
        guard(async move {
            let name = input::optional_text(name, "name")?.unwrap_or(shared_name);
            inner.open(&name).await.map(NativeSandboxSession::new)
        })
        .await
    }
}

/// A view of a sandbox. `js/sandbox.js` adds the `HarnessV1NetworkSandboxSession` methods.
#[napi]
pub struct NativeSandboxSession {
    inner: Arc<dyn SandboxSession>,
}

impl NativeSandboxSession {
    /// A JavaScript session around an engine session (a fork made natively, say).
    pub(crate) fn new(inner: Arc<dyn SandboxSession>) -> Self {
        NativeSandboxSession { inner }
    }

    /// The engine session behind this one, for the session strategies.
    #[allow(dead_code)]
    pub(crate) fn session(&self) -> Arc<dyn SandboxSession> {
        self.inner.clone()
    }
}

#[napi]
impl NativeSandboxSession {
    /// The stable id of the underlying sandbox.
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.inner.id().to_owned()
    }

    /// The default working directory.
    #[napi(getter)]
    pub fn default_working_directory(&self) -> String {
        self.inner.default_working_directory().to_owned()
    }

    /// The ports of this view.
    #[napi(getter)]
    pub fn ports(&self) -> Vec<u32> {
        self.inner
            .ports()
            .iter()
            .map(|port| u32::from(*port))
            .collect()
    }

    /// What the sandbox is, for an agent's instructions.
    #[napi(getter)]
    pub fn description(&self) -> String {
        self.inner.description()
    }

    /// How to connect to `port`.
    #[napi]
    pub fn native_port_endpoint(
        &self,
        env: Env,
        port: u32,
        protocol: Option<String>,
    ) -> napi::Result<PortEndpointInfo> {
        guard_sync(&env, || {
            let protocol = protocol
                .as_deref()
                .map(PortProtocol::parse)
                .transpose()?
                .unwrap_or_default();
            let port = u16::try_from(port).map_err(|_| {
                SessionError::input("port", format!("{port} is not a port number (1 to 65535)."))
            })?;
            let endpoint = self.inner.port_endpoint(port, protocol)?;
            Ok(PortEndpointInfo {
                url: endpoint.url,
                headers: (!endpoint.headers.is_empty())
                    .then(|| endpoint.headers.into_iter().collect()),
            })
        })
    }

    /// Starts a command; its output is read with the process's `read*` methods.
    #[napi]
    pub async fn native_spawn(&self, options: CommandInit) -> Settled<NativeSandboxProcess> {
        let inner = self.inner.clone();
        guard(async move {
            let command = Command {
                command: options.command,
                working_directory: options.working_directory,
                env: sorted_env(options.env),
            };
            inner.spawn(command).await.map(NativeSandboxProcess::new)
        })
        .await
    }

    /// The file at `path`, or `null`.
    #[napi]
    pub async fn native_read_bytes(&self, path: String) -> Settled<Option<Buffer>> {
        let inner = self.inner.clone();
        guard(async move { Ok(inner.read_bytes(&path).await?.map(Buffer::from)) }).await
    }

    /// A reader of the file at `path`, or `null`.
    #[napi]
    pub async fn native_open_read(&self, path: String) -> Settled<Option<NativeFileReader>> {
        let inner = self.inner.clone();
        guard(async move { Ok(inner.read_file(&path).await?.map(NativeFileReader::new)) }).await
    }

    /// Writes `content` to the file at `path`.
    #[napi]
    pub async fn native_write_bytes(&self, path: String, content: Buffer) -> Settled<()> {
        let inner = self.inner.clone();
        let content = content.to_vec();
        guard(async move { inner.write_bytes(&path, content).await }).await
    }

    /// A writer of the file at `path`: chunks go in with `write`, `finish` commits them.
    #[napi]
    pub async fn native_open_write(&self, path: String) -> Settled<NativeFileWriter> {
        let inner = self.inner.clone();
        guard(async move { Ok(NativeFileWriter::start(inner, path)) }).await
    }

    /// Stops the sandbox (or, for a fork, its processes).
    #[napi]
    pub async fn native_stop(&self) -> Settled<()> {
        let inner = self.inner.clone();
        guard(async move { inner.stop().await }).await
    }

    /// Stops and removes the sandbox (or, for a fork, its working directory).
    #[napi]
    pub async fn native_destroy(&self) -> Settled<()> {
        let inner = self.inner.clone();
        guard(async move { inner.destroy().await }).await
    }

    /// A view of the same sandbox with its own ports and working directory: `{ ports?,
    /// workingDirectory? }` as JSON.
    #[napi]
    pub async fn native_fork(&self, options_json: String) -> Settled<NativeSandboxSession> {
        let inner = self.inner.clone();
        guard(async move {
            let options: ForkInit = input::read_json(&options_json, "options", "fork()")?;
            let fork = ForkOptions {
                ports: options.ports.map(input::ports).unwrap_or_default(),
                working_directory: options.working_directory,
            };
            inner.fork(fork).await.map(NativeSandboxSession::new)
        })
        .await
    }
}
