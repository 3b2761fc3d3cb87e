//! Sandboxes: where a session's harness runs its commands and keeps its files.
//!
//! Two traits, both pure Rust and async:
//!
//! - [`SandboxSession`]: one view of a sandbox, what `HarnessV1NetworkSandboxSession` is to
//!   JavaScript: run and spawn commands with streamed output, read and write files, ports and
//!   their endpoints, stop, destroy, and [`SandboxSession::fork`], another view of the same sandbox
//!   with ports and a working directory of its own.
//! - [`SandboxProvider`]: makes sessions (`create`), finds them again by session id from any
//!   process (`find`, `resume`), and opens a shared one (`open`).
//!
//! Two implementations ship: [`local::LocalSandbox`] (processes on this host, in a folder of their
//! own, no isolation) and [`docker::DockerSandbox`] (a container per session on a Docker Engine).
//! The binding exposes both to JavaScript, and the session strategies use them natively.
//!
//! Invariant of every implementation: the file API never reaches outside the sandbox's working
//! directories. `..`, absolute paths elsewhere and symbolic links that lead out are refused with
//! [`SessionError::Input`](crate::engine::error::SessionError::Input) ([`paths`]). No link swapped
//! in while an operation runs leads it out either: the local sandbox resolves every path beneath
//! a descriptor of its folder (`beneath.rs`), the Docker sandbox as the sandbox's user inside the
//! container.

pub(crate) mod beneath;
pub(crate) mod bootstrap_gate;
pub mod docker;
pub mod handout;
pub mod local;
pub(crate) mod local_guard;
pub mod paths;
pub mod per_session;
pub mod process;
pub mod shared;
pub(crate) mod sweep;
pub mod view;

#[cfg(test)]
mod conformance;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::TryStreamExt;

use crate::engine::error::{Result, SessionError};
pub use process::{
    Command, CommandOutput, ExitStatus, OutputReader, ProcessControl, SandboxProcess,
};
pub use view::{FileStream, ForkOptions, PortEndpoint, PortProtocol};

/// One view of a sandbox: the native side of `HarnessV1NetworkSandboxSession`.
///
/// Views made by [`SandboxSession::fork`] share the sandbox (its processes, its files) with their
/// parent; each has its own ports and working directory, and [`SandboxSession::stop`] of a fork
/// ends the fork's own processes only.
#[async_trait]
pub trait SandboxSession: Send + Sync + 'static {
    /// The stable identifier of the underlying sandbox (a container name, a folder): the same for
    /// every view of it.
    fn id(&self) -> &str;

    /// Where commands run and relative paths start when none is given.
    fn default_working_directory(&self) -> &str;

    /// The ports this view exposes.
    fn ports(&self) -> &[u16];

    /// A description of the sandbox for an agent's instructions: its working directory, ports,
    /// what it isolates.
    fn description(&self) -> String;

    /// How to connect to `port`, one of [`SandboxSession::ports`].
    ///
    /// # Errors
    ///
    /// An input error for a port this view does not expose, or when the sandbox has no network.
    fn port_endpoint(&self, port: u16, protocol: PortProtocol) -> Result<PortEndpoint>;

    /// Starts `command` through the sandbox's shell; its output streams as it comes.
    ///
    /// # Errors
    ///
    /// A malformed command (input error), or a sandbox that cannot run it: stopped, gone.
    async fn spawn(&self, command: Command) -> Result<SandboxProcess>;

    /// Runs `command` to its end and returns what it printed and its exit code.
    ///
    /// # Errors
    ///
    /// As [`SandboxSession::spawn`].
    async fn run(&self, command: Command) -> Result<CommandOutput> {
        self.spawn(command).await?.collect().await
    }

    /// The contents of the file at `path` as a stream, or `None` when there is no such file.
    ///
    /// # Errors
    ///
    /// A refused path (input error), a directory, or a sandbox that cannot be read.
    async fn read_file(&self, path: &str) -> Result<Option<FileStream>>;

    /// The contents of the file at `path`, or `None` when there is no such file.
    ///
    /// # Errors
    ///
    /// As [`SandboxSession::read_file`].
    async fn read_bytes(&self, path: &str) -> Result<Option<Vec<u8>>> {
        match self.read_file(path).await? {
            None => Ok(None),
            Some(stream) => {
                let chunks: Vec<Bytes> = stream.try_collect().await?;
                Ok(Some(chunks.concat()))
            }
        }
    }

    /// The file at `path` as UTF-8 text (invalid sequences replaced), or `None`.
    ///
    /// # Errors
    ///
    /// As [`SandboxSession::read_file`].
    async fn read_text(&self, path: &str) -> Result<Option<String>> {
        Ok(self
            .read_bytes(path)
            .await?
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }

    /// Writes `content` to the file at `path`, creating its parent directories and replacing a
    /// file that was there.
    ///
    /// # Errors
    ///
    /// A refused path (input error), a directory in the way, an error of the stream itself, or a
    /// sandbox that cannot be written.
    async fn write_file(&self, path: &str, content: FileStream) -> Result<()>;

    /// Writes `content` to the file at `path`, as [`SandboxSession::write_file`].
    ///
    /// # Errors
    ///
    /// As [`SandboxSession::write_file`].
    async fn write_bytes(&self, path: &str, content: Vec<u8>) -> Result<()> {
        let chunk: Result<Bytes> = Ok(Bytes::from(content));
        self.write_file(path, Box::pin(futures::stream::iter([chunk])))
            .await
    }

    /// Writes `content` as UTF-8 to the file at `path`.
    ///
    /// # Errors
    ///
    /// As [`SandboxSession::write_file`].
    async fn write_text(&self, path: &str, content: &str) -> Result<()> {
        self.write_bytes(path, content.as_bytes().to_vec()).await
    }

    /// Stops the sandbox, keeping its files, so that [`SandboxProvider::resume`] can bring it
    /// back; for a fork, ends the processes started through the fork only. Idempotent.
    ///
    /// # Errors
    ///
    /// When the sandbox cannot be reached to stop it.
    async fn stop(&self) -> Result<()>;

    /// Stops the sandbox and removes it with its files; for a fork, stops the fork and removes its
    /// working directory. Idempotent: a sandbox already gone is fine.
    ///
    /// # Errors
    ///
    /// When the sandbox cannot be reached to remove it.
    async fn destroy(&self) -> Result<()>;

    /// Another view of the same sandbox, with `options.ports` and a working directory of its own.
    ///
    /// # Errors
    ///
    /// A refused working directory or port list (input errors), a sandbox whose network cannot
    /// serve ports, or one that cannot create the directory.
    async fn fork(&self, options: ForkOptions) -> Result<Arc<dyn SandboxSession>>;
}

/// Makes sandbox sessions, and finds them again: the native side of `HarnessV1SandboxProvider`.
#[async_trait]
pub trait SandboxProvider: Send + Sync + 'static {
    /// A stable name of the provider: `harness-sessions.docker`, `harness-sessions.local`.
    fn provider_id(&self) -> &str;

    /// What the sandbox of `session_id` is called where it lives (a container name, a folder),
    /// for messages.
    fn resource_name(&self, session_id: &str) -> String;

    /// Creates the sandbox of `session_id` (a fresh name when `None`), ready to run commands.
    ///
    /// # Errors
    ///
    /// When a sandbox of that session exists already, or it cannot be created: no Docker
    /// endpoint, a missing image, a folder that cannot be made.
    async fn create(&self, session_id: Option<&str>) -> Result<Arc<dyn SandboxSession>>;

    /// The sandbox of `session_id`, started again if it was stopped, or `None` if there is none.
    ///
    /// # Errors
    ///
    /// When it exists but cannot be started, or the sandboxes cannot be looked up.
    async fn find(&self, session_id: &str) -> Result<Option<Arc<dyn SandboxSession>>>;

    /// The sandbox of `session_id`, which must exist, started again if it was stopped.
    ///
    /// # Errors
    ///
    /// As [`SandboxProvider::find`], and when there is no such sandbox.
    async fn resume(&self, session_id: &str) -> Result<Arc<dyn SandboxSession>> {
        match self.find(session_id).await? {
            Some(session) => Ok(session),
            None => Err(SessionError::host(format!(
                "No sandbox {} for session {session_id}: it was destroyed, or never created by {}.",
                self.resource_name(session_id),
                self.provider_id()
            ))),
        }
    }

    /// The sandbox named `name`, found again when it exists, created otherwise: the sandbox that
    /// `sharedSandbox()` forks a view of for each session.
    ///
    /// # Errors
    ///
    /// As [`SandboxProvider::find`] and [`SandboxProvider::create`].
    async fn open(&self, name: &str) -> Result<Arc<dyn SandboxSession>> {
        match self.find(name).await? {
            Some(session) => Ok(session),
            None => self.create(Some(name)).await,
        }
    }
}
