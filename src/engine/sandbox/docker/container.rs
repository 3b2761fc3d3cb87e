//! A Docker container shared by its views: what it was made with, the processes its views run, the
//! chores done in it as root (directories made through the archive API, processes killed), its
//! removal, and the holds on container names that tell a leftover from a container in use.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{RemoveContainerOptionsBuilder, UploadToContainerOptionsBuilder};
use bollard::Docker;
use bytes::Bytes;
use futures::StreamExt;

use super::client::{message_of, status_of, Endpoint};
use super::disk::Disk;
use super::egress::{AllowedHost, Egress};
use super::netns::NetNamespace;
use super::tar::{self, EntryKind};
use super::{parse_user, NetworkMode};
use crate::engine::error::{Result, SessionError};
use crate::engine::sandbox::sweep::{self, Scope, Sweep};

/// What a container was made with, as far as its views need it.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) image: String,
    pub(crate) user: String,
    pub(crate) home: String,
    pub(crate) network: NetworkMode,
    pub(crate) limits: String,
    /// The only hosts it reaches ([`super::egress`]).
    pub(crate) allowed_hosts: Vec<AllowedHost>,
    /// Its disk image, when it has a disk bound ([`super::disk`]).
    pub(crate) disk: Option<Disk>,
}

/// A container, shared by its views.
#[derive(Debug)]
pub(crate) struct Container {
    pub(super) docker: Docker,
    pub(super) endpoint: Endpoint,
    pub(super) name: String,
    pub(super) settings: Settings,
    /// The process ids (inside the container) of running commands, by the view that started them.
    pub(super) processes: Mutex<HashMap<u32, u64>>,
    /// Its network namespace, once opened (for ports of a container without a network).
    namespace: tokio::sync::Mutex<Option<NetNamespace>>,
    /// The ways out of `allowed_hosts`, once opened.
    egress: tokio::sync::Mutex<Option<Egress>>,
}

impl Container {
    pub(crate) fn new(
        docker: Docker,
        endpoint: Endpoint,
        name: String,
        settings: Settings,
    ) -> Result<Arc<Self>> {
        parse_user(&settings.user)?;
        held(&name, 1);
        Ok(Arc::new(Container {
            docker,
            endpoint,
            name,
            settings,
            processes: Mutex::new(HashMap::new()),
            namespace: tokio::sync::Mutex::new(None),
            egress: tokio::sync::Mutex::new(None),
        }))
    }

    /// The container's first process as this host numbers it, `None` when it is not running.
    ///
    /// # Errors
    ///
    /// When the container cannot be inspected.
    async fn first_process(&self) -> Result<Option<u32>> {
        let inspected = self
            .docker
            .inspect_container(
                &self.name,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .map_err(|error| {
                self.failure(&format!("inspect the container {}", self.name), error)
            })?;
        Ok(inspected
            .state
            .and_then(|state| state.pid)
            .and_then(|pid| u32::try_from(pid).ok())
            .filter(|pid| *pid > 0))
    }

    /// The container's first process as this host numbers it, and the inode of its process
    /// namespace: what a [`crate::engine::sandbox::sweep`] of it needs.
    ///
    /// # Errors
    ///
    /// When the container cannot be inspected or is not running.
    pub(super) async fn init_process(&self) -> Result<(u32, u64)> {
        use std::os::unix::fs::MetadataExt;
        let pid = self.first_process().await?.ok_or_else(|| {
            SessionError::host(format!(
                "The sandbox container {} is stopped: resume the session to start it again.",
                self.name
            ))
        })?;
        let inode = std::fs::metadata(format!("/proc/{pid}/ns/pid"))
            .map(|meta| meta.ino())
            .map_err(|error| {
                SessionError::host(format!(
                    "Cannot see the processes of the sandbox container {} ({error}): that needs the Docker Engine on this host.",
                    self.name
                ))
            })?;
        Ok((pid, inode))
    }

    /// Ends, in the container, what `sweep` names (see [`crate::engine::sandbox::sweep`]). Does
    /// nothing where this process cannot see the container's processes (not root, or another
    /// host).
    pub(super) async fn sweep(&self, sweep: Sweep) {
        let Ok((pid, inode)) = self.init_process().await else {
            return;
        };
        let _ = tokio::task::spawn_blocking(move || {
            sweep::sweep(&Scope::Namespace(inode), Some(pid), &sweep)
        })
        .await;
    }

    /// Opens the ways out of its `allowedHosts`, once (the container runs).
    ///
    /// # Errors
    ///
    /// When its namespace cannot be entered, or a listener made in it.
    pub(super) async fn open_egress(&self) -> Result<()> {
        if self.settings.allowed_hosts.is_empty() || self.settings.network == NetworkMode::Host {
            return Ok(());
        }
        let mut egress = self.egress.lock().await;
        if egress.is_none() {
            let namespace = self.namespace().await?;
            *egress = Some(Egress::start(&namespace, &self.settings.allowed_hosts)?);
        }
        Ok(())
    }

    /// The container's network namespace, opened at the first call (the container runs).
    ///
    /// # Errors
    ///
    /// When the container cannot be inspected, or its namespace entered (see [`NetNamespace`]).
    pub(super) async fn namespace(&self) -> Result<NetNamespace> {
        let mut namespace = self.namespace.lock().await;
        if let Some(namespace) = namespace.as_ref() {
            return Ok(namespace.clone());
        }
        let pid = self.first_process().await?.unwrap_or(0);
        let opened = NetNamespace::open(pid, &self.name)?;
        *namespace = Some(opened.clone());
        Ok(opened)
    }

    /// The running commands' process ids, by the view that started them.
    pub(super) fn processes(&self) -> MutexGuard<'_, HashMap<u32, u64>> {
        self.processes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The container's name.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// The client of its engine.
    pub(super) fn docker(&self) -> &Docker {
        &self.docker
    }

    /// The user its commands and file operations run as.
    pub(super) fn user(&self) -> &str {
        &self.settings.user
    }

    /// A failure of Docker while trying to `doing`, with a gone or stopped container in words.
    pub(super) fn failure(&self, doing: &str, error: bollard::errors::Error) -> SessionError {
        let message = message_of(&error);
        match status_of(&error) {
            Some(404) if message.contains("no such container") => SessionError::host(format!(
                "The sandbox container {} is gone (destroyed, or removed outside harness-sessions): create the session's sandbox again.",
                self.name
            )),
            Some(409) if message.contains("not running") || message.contains("is paused") => {
                SessionError::host(format!(
                    "The sandbox container {} is stopped: resume the session to start it again.",
                    self.name
                ))
            }
            _ => self.endpoint.failure(doing, error),
        }
    }

    /// Creates `directories` (absolute) with their missing parents, owned by `uid:gid`, through
    /// the archive API: it works before the container starts, and as root, whatever the user.
    pub(crate) async fn make_directories(
        &self,
        directories: &[&str],
        uid: u64,
        gid: u64,
    ) -> Result<()> {
        let mut archive = Vec::new();
        for directory in directories {
            let relative = directory.trim_start_matches('/');
            if !relative.is_empty() {
                tar::append_header(
                    &mut archive,
                    relative,
                    EntryKind::Directory,
                    0o755,
                    uid,
                    gid,
                );
            }
        }
        tar::finish(&mut archive);
        self.upload("/", archive).await
    }

    pub(super) async fn upload(&self, directory: &str, archive: Vec<u8>) -> Result<()> {
        let options = UploadToContainerOptionsBuilder::default()
            .path(directory)
            .no_overwrite_dir_non_dir("true")
            .build();
        self.docker
            .upload_to_container(
                &self.name,
                Some(options),
                bollard::body_full(Bytes::from(archive)),
            )
            .await
            .map_err(|error| self.failure(&format!("write files in {directory}"), error))
    }

    /// Runs `argv` as the sandbox user to its end, for the sandbox's own chores.
    pub(super) async fn chore(&self, argv: Vec<String>) -> Result<i64> {
        let doing = format!(
            "run {:?} in the container {}",
            argv.first().map(String::as_str).unwrap_or(""),
            self.name
        );
        let exec = self
            .docker
            .create_exec(
                &self.name,
                CreateExecOptions {
                    cmd: Some(argv),
                    user: Some(self.settings.user.clone()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..CreateExecOptions::default()
                },
            )
            .await
            .map_err(|error| self.failure(&doing, error))?;
        if let StartExecResults::Attached { mut output, .. } = self
            .docker
            .start_exec(&exec.id, None::<StartExecOptions>)
            .await
            .map_err(|error| self.failure(&doing, error))?
        {
            while let Some(frame) = output.next().await {
                frame.map_err(|error| self.failure(&doing, error))?;
            }
        }
        let inspected = self
            .docker
            .inspect_exec(&exec.id)
            .await
            .map_err(|error| self.failure(&doing, error))?;
        Ok(inspected.exit_code.unwrap_or(-1))
    }

    /// Kills the process groups led by `pids`.
    pub(super) async fn kill(&self, pids: &[u32]) -> Result<()> {
        if pids.is_empty() {
            return Ok(());
        }
        let mut script = String::from("for p in \"$@\"; do kill -KILL -- \"-$p\" 2>/dev/null || kill -KILL \"$p\" 2>/dev/null; done; true");
        script.shrink_to_fit();
        let mut argv = vec![
            "/bin/sh".to_owned(),
            "-c".to_owned(),
            script,
            "kill".to_owned(),
        ];
        argv.extend(pids.iter().map(u32::to_string));
        self.chore(argv).await.map(|_| ())
    }

    /// Removes the container and its files, its disk image too; a container already gone is
    /// fine.
    pub(crate) async fn remove(&self) -> Result<()> {
        Container::remove_named(&self.docker, &self.endpoint, &self.name).await?;
        if let Some(disk) = &self.settings.disk {
            disk.remove().await;
        }
        Ok(())
    }

    /// Removes the container `name` and its files; a container already gone is fine.
    pub(crate) async fn remove_named(
        docker: &Docker,
        endpoint: &Endpoint,
        name: &str,
    ) -> Result<()> {
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match docker.remove_container(name, Some(options)).await {
            Ok(()) => Ok(()),
            Err(error) if status_of(&error) == Some(404) => Ok(()),
            Err(error)
                if status_of(&error) == Some(409)
                    && message_of(&error).contains("already in progress") =>
            {
                Ok(())
            }
            Err(error) => Err(endpoint.failure(&format!("remove the container {name}"), error)),
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        held(&self.name, -1);
    }
}

/// The containers this process holds (a [`Container`] of theirs is alive), by name, with the
/// number of those.
fn held_containers() -> std::sync::MutexGuard<'static, HashMap<String, usize>> {
    static HELD: std::sync::OnceLock<Mutex<HashMap<String, usize>>> = std::sync::OnceLock::new();
    HELD.get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Counts one more (`1`) or one fewer (`-1`) holder of the container `name`.
fn held(name: &str, change: i8) {
    let mut containers = held_containers();
    let count = containers.entry(name.to_owned()).or_default();
    if change > 0 {
        *count += 1;
    } else {
        *count = count.saturating_sub(1);
        if *count == 0 {
            containers.remove(name);
        }
    }
}

/// A hold on the container name `name` while it is being created, so that a concurrent create of
/// the same session in this process never takes it for a leftover.
pub(crate) struct Hold(String);

impl Hold {
    /// Holds `name` until dropped.
    pub(crate) fn new(name: &str) -> Hold {
        held(name, 1);
        Hold(name.to_owned())
    }

    /// Whether anything else in this process holds the name: a container created or found, not
    /// yet dropped, or another create under way. A container of that name that nothing holds is a
    /// leftover (of a process that died).
    pub(crate) fn held_elsewhere(&self) -> bool {
        held_containers()
            .get(&self.0)
            .is_some_and(|count| *count > 1)
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        held(&self.0, -1);
    }
}
