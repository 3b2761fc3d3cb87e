//! The Docker sandbox: a container per session on a Docker Engine, through its API (bollard,
//! API 1.41).
//!
//! - **Naming.** The container of session `s` is `<namePrefix><s>` (the id made a valid name, see
//!   [`crate::engine::sandbox::view`]), so that any process finds a suspended session's container
//!   again. Its settings (working directory, home, ports, user, network) are kept in its labels:
//!   a resume reads them back rather than trusting the options of the process that resumes.
//! - **Safe defaults.** A non-root user (`1000:1000`), every capability dropped,
//!   `no-new-privileges`, an init process that reaps orphans, limits on memory (1 GiB, no swap),
//!   CPU (1) and processes (256), and no network at all (`--network none`), ports or not.
//! - **Ports** of a container without a network are served on the host's loopback, each on a
//!   port the kernel picks for that view (so two sessions never share one), forwarded into the
//!   container's own loopback through its network namespace ([`forward`], [`netns`]): the host
//!   reaches the sandbox's ports, the sandbox reaches nothing of the host. This needs root and
//!   the engine on this host. `network: "host"` (the host's network, ports the host's own) stays
//!   possible as an explicit choice, and is a risk: the sandbox then reaches every service of the
//!   host's loopback.
//! - **Images** are used as they are on the engine: nothing is pulled unless `pull` is set. The
//!   image needs `/bin/sh`, `sleep` and `kill`, and for files `readlink -f`, `cat`, `mkdir -p`,
//!   `mv`, `rm`, `wc`, `stat -c` (busybox and GNU coreutils have them).
//! - **Commands** run through `docker exec` as the sandbox user, each the leader of its own process
//!   group, so that a kill ends what it started.
//! - **Files** go through `exec` too, as the sandbox user (`files.rs`): the container's kernel
//!   resolves their paths, links included, with that user's rights, never the daemon as root.
//!   Only the first directories of a new container (before it starts) go through the archive API.
//! - **Leftovers.** Creating a session whose container exists, made for that session and held by
//!   no sandbox of this process (a crashed process left it), removes it and makes a new one.

mod client;
mod container;
pub mod disk;
pub mod egress;
#[cfg(test)]
mod engine_tests;
mod files;
mod forward;
mod netns;
mod session;
pub(crate) mod tar;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bollard::models::{
    ContainerCreateBody, HostConfig, Mount, MountType, MountVolumeOptions,
    MountVolumeOptionsDriverConfig,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, CreateImageOptionsBuilder, InspectContainerOptions,
    StartContainerOptions,
};
use bollard::Docker;
use futures::StreamExt;

pub use client::{Endpoint, API_VERSION};
pub use egress::AllowedHost;
pub use session::DockerSandboxSession;

use super::paths::normalize_absolute;
use super::view::{random_u64, resource_name, validate_ports};
use super::{Command, SandboxProvider, SandboxSession};
use crate::engine::error::{Result, SessionError};
use client::{message_of, status_of};
use container::{Container, Settings};

/// The label that marks a container as a harness-sessions sandbox; its value is the session id.
pub const LABEL_SESSION: &str = "dev.harness-sessions.session-id";
const LABEL_WORKING_DIRECTORY: &str = "dev.harness-sessions.working-directory";
const LABEL_HOME: &str = "dev.harness-sessions.home";
const LABEL_PORTS: &str = "dev.harness-sessions.ports";
const LABEL_USER: &str = "dev.harness-sessions.user";
const LABEL_NETWORK: &str = "dev.harness-sessions.network";
const LABEL_LIMITS: &str = "dev.harness-sessions.limits";
const LABEL_ALLOWED_HOSTS: &str = "dev.harness-sessions.allowed-hosts";
/// The path of the container's disk image ([`disk`]), when it has a disk bound.
const LABEL_DISK: &str = "dev.harness-sessions.disk-image";

/// What keeps a container alive: a shell that sleeps, and leaves at once when stopped.
const KEEP_ALIVE: &str = "trap 'exit 0' TERM INT; while :; do sleep 86400 & wait $!; done";

/// The network of a sandbox's container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkMode {
    /// No network at all, loopback aside (`--network none`); ports are forwarded from the
    /// host's loopback.
    None,
    /// The host's network (`--network host`): ports are the host's, reached on 127.0.0.1, and
    /// the sandbox reaches every service of the host's. Only when asked for.
    Host,
}

impl NetworkMode {
    /// Parses `none` or `host`.
    ///
    /// # Errors
    ///
    /// Anything else, as an input error at `network`.
    pub fn parse(mode: &str) -> Result<Self> {
        match mode {
            "none" => Ok(NetworkMode::None),
            "host" => Ok(NetworkMode::Host),
            other => Err(SessionError::input(
                "network",
                format!(
                    "network: {other:?} is not supported: give \"none\" (no network) or \"host\" (the host's network, ports on 127.0.0.1)."
                ),
            )),
        }
    }

    /// As Docker names it.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::None => "none",
            NetworkMode::Host => "host",
        }
    }
}

/// How a [`DockerSandbox`] makes its containers.
#[derive(Debug, Clone, PartialEq)]
pub struct DockerSandboxOptions {
    /// The image, present on the engine (built or imported locally).
    pub image: String,
    /// The Docker endpoint: `unix:///path`, a socket path or `tcp://host:port`. Default:
    /// `DOCKER_HOST`, then `/var/run/docker.sock`.
    pub host: Option<String>,
    /// Pull the image when the engine does not have it. Default: no, the image must be there.
    pub pull: bool,
    /// The start of every container name. Default: `harness-sessions-`.
    pub name_prefix: String,
    /// The user commands run as: `uid` or `uid:gid`, numeric. Default: `1000:1000`.
    pub user: String,
    /// The default working directory. Default: `/workspace`.
    pub working_directory: String,
    /// The user's `HOME`. Default: `/home/sandbox`.
    pub home: String,
    /// The ports of each sandbox. Default: none.
    pub ports: Vec<u16>,
    /// Variables in the environment of the container.
    pub env: Vec<(String, String)>,
    /// CPUs the container may use. Default: 1.
    pub cpus: f64,
    /// Bytes of memory the container may use (swap included). Default: 1 GiB.
    pub memory_bytes: i64,
    /// Processes the container may run at once. Default: 256.
    pub pids_limit: i64,
    /// The network; default: none (ports forwarded from the host's loopback).
    pub network: Option<NetworkMode>,
    /// The only hosts a container without a network reaches ([`egress`]). Default: none.
    pub allowed_hosts: Vec<AllowedHost>,
    /// The bytes its working directory, `HOME` and `/tmp` may hold together ([`disk`]). `None`:
    /// 10 GiB where this host can bound it, no bound otherwise; given: required.
    pub disk_bytes: Option<u64>,
}

impl Default for DockerSandboxOptions {
    fn default() -> Self {
        DockerSandboxOptions {
            image: String::new(),
            host: None,
            pull: false,
            name_prefix: "harness-sessions-".into(),
            user: "1000:1000".into(),
            working_directory: "/workspace".into(),
            home: "/home/sandbox".into(),
            ports: Vec::new(),
            env: Vec::new(),
            cpus: 1.0,
            memory_bytes: 1024 * 1024 * 1024,
            pids_limit: 256,
            network: None,
            allowed_hosts: Vec::new(),
            disk_bytes: None,
        }
    }
}

/// Parses a memory size: a number of bytes, or a number with a unit `k`, `m`, `g` (binary
/// multiples, as Docker reads them), `b` optional: `512m`, `1g`, `1.5GB`.
///
/// # Errors
///
/// An input error at `memory` for anything else, or less than 6 MiB (Docker's minimum).
pub fn parse_memory(text: &str) -> Result<i64> {
    let refuse = || {
        SessionError::input(
            "memory",
            format!("memory: {text:?} is not a memory size: give bytes, or a number with k, m or g (\"512m\", \"2g\")."),
        )
    };
    let lower = text.trim().to_ascii_lowercase();
    let lower = lower.strip_suffix('b').unwrap_or(&lower);
    let (number, unit) = match lower.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((index, _)) => (&lower[..index], &lower[index..]),
        None => (lower, ""),
    };
    let multiplier: f64 = match unit {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024.0 * 1024.0,
        "g" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(refuse()),
    };
    let value: f64 = number.trim().parse().map_err(|_| refuse())?;
    memory_from_bytes(value * multiplier)
}

/// Checks a memory size in bytes.
///
/// # Errors
///
/// An input error at `memory` below 6 MiB or not finite.
pub fn memory_from_bytes(bytes: f64) -> Result<i64> {
    if !bytes.is_finite() || !(6.0 * 1024.0 * 1024.0..=9.0e18).contains(&bytes) {
        return Err(SessionError::input(
            "memory",
            "memory: a container needs at least 6 MiB (Docker's minimum).",
        ));
    }
    Ok(bytes as i64)
}

/// The checked user: its `uid:gid` and ids.
fn parse_user(user: &str) -> Result<(u64, u64)> {
    let refuse = || {
        SessionError::input(
            "user",
            format!("user: {user:?} is not a numeric user: give \"uid\" or \"uid:gid\", such as \"1000:1000\"."),
        )
    };
    let mut parts = user.splitn(2, ':');
    let uid: u64 = parts
        .next()
        .unwrap_or_default()
        .parse()
        .map_err(|_| refuse())?;
    let gid: u64 = match parts.next() {
        Some(gid) => gid.parse().map_err(|_| refuse())?,
        None => uid,
    };
    Ok((uid, gid))
}

/// Sandboxes as Docker containers. See the module documentation.
#[derive(Debug)]
pub struct DockerSandbox {
    options: DockerSandboxOptions,
    network: NetworkMode,
    endpoint: Endpoint,
    client: Mutex<Option<Docker>>,
    /// Whether this provider swept the disk images left over ([`disk::sweep_orphans`]).
    swept: std::sync::atomic::AtomicBool,
}

impl DockerSandbox {
    /// A provider of containers made with `options`. Does no I/O: the engine is reached at the
    /// first create or resume.
    ///
    /// # Errors
    ///
    /// Input errors for options of the wrong shape.
    pub fn new(options: DockerSandboxOptions) -> Result<Self> {
        if options.image.trim().is_empty() {
            return Err(SessionError::input(
                "image",
                "image: name the Docker image of the sandbox (built or imported on the engine).",
            ));
        }
        let endpoint = Endpoint::parse(options.host.as_deref())?;
        let prefix_ok = options
            .name_prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-')
            && options
                .name_prefix
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric());
        if !prefix_ok {
            return Err(SessionError::input(
                "namePrefix",
                format!("namePrefix: {:?} must start with a letter or digit and hold only letters, digits, `_`, `.` and `-`.", options.name_prefix),
            ));
        }
        parse_user(&options.user)?;
        for (at, directory) in [
            ("workingDirectory", &options.working_directory),
            ("home", &options.home),
        ] {
            if normalize_absolute(directory).as_deref() != Some(directory.as_str())
                || directory == "/"
            {
                return Err(SessionError::input(
                    at,
                    format!(
                        "{at}: {directory:?} must be an absolute, normalized path other than /."
                    ),
                ));
            }
        }
        validate_ports(&options.ports, "ports")?;
        let mut probe = Command::new("true");
        probe.env = options.env.clone();
        probe.validate()?;
        if !(options.cpus.is_finite() && options.cpus >= 0.01 && options.cpus <= 1024.0) {
            return Err(SessionError::input(
                "cpus",
                "cpus: give a number of CPUs between 0.01 and 1024.",
            ));
        }
        memory_from_bytes(options.memory_bytes as f64)?;
        if options.pids_limit < 8 {
            return Err(SessionError::input(
                "pids",
                "pids: a sandbox needs room for at least 8 processes (its shell and init among them).",
            ));
        }
        if options
            .disk_bytes
            .is_some_and(|bytes| !(disk::MIN_DISK_BYTES..=(1u64 << 50)).contains(&bytes))
        {
            return Err(SessionError::input(
                "diskBytes",
                "diskBytes: give a number of bytes between 16 MiB and 1 PiB.",
            ));
        }
        let network = options.network.unwrap_or(NetworkMode::None);
        if network == NetworkMode::Host && !options.allowed_hosts.is_empty() {
            return Err(SessionError::input(
                "allowedHosts",
                "allowedHosts: a sandbox on the host's network reaches every host already; give allowedHosts without network \"host\".",
            ));
        }
        Ok(DockerSandbox {
            options,
            network,
            endpoint,
            client: Mutex::new(None),
            swept: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The endpoint this provider talks to.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The container name of `session_id`.
    pub fn container_name(&self, session_id: &str) -> String {
        format!("{}{}", self.options.name_prefix, resource_name(session_id))
    }

    /// The client, made at first use (and again after a failure to make it).
    fn docker(&self) -> Result<Docker> {
        let mut client = self
            .client
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(docker) = client.as_ref() {
            return Ok(docker.clone());
        }
        let docker = self.endpoint.connect()?;
        *client = Some(docker.clone());
        Ok(docker)
    }

    /// The limits, for labels and descriptions: `1 CPU, 1024 MiB of memory, 256 processes`.
    fn limits_text(&self) -> String {
        let options = &self.options;
        format!(
            "{} CPU, {} MiB of memory, {} processes",
            options.cpus,
            options.memory_bytes / (1024 * 1024),
            options.pids_limit
        )
    }

    fn create_body(&self, session_id: &str, disk: Option<&disk::Disk>) -> ContainerCreateBody {
        let options = &self.options;
        let mut env = vec![format!("HOME={}", options.home)];
        if egress::needs_proxy(&options.allowed_hosts) {
            let given = |name: &str| options.env.iter().any(|(given, _)| given == name);
            let proxy = format!("http://127.0.0.1:{}", egress::PROXY_PORT);
            for name in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
                if !given(name) {
                    env.push(format!("{name}={proxy}"));
                }
            }
            for name in ["NO_PROXY", "no_proxy"] {
                if !given(name) {
                    env.push(format!("{name}=127.0.0.1,localhost"));
                }
            }
        }
        env.extend(
            options
                .env
                .iter()
                .map(|(name, value)| format!("{name}={value}")),
        );
        let mut labels = HashMap::from([
            (LABEL_SESSION.to_owned(), session_id.to_owned()),
            (
                LABEL_WORKING_DIRECTORY.to_owned(),
                options.working_directory.clone(),
            ),
            (LABEL_HOME.to_owned(), options.home.clone()),
            (
                LABEL_PORTS.to_owned(),
                options
                    .ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
            (LABEL_USER.to_owned(), options.user.clone()),
            (LABEL_NETWORK.to_owned(), self.network.as_str().to_owned()),
            (LABEL_LIMITS.to_owned(), self.limits_text()),
            (
                LABEL_ALLOWED_HOSTS.to_owned(),
                options
                    .allowed_hosts
                    .iter()
                    .map(AllowedHost::text)
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        ]);
        // Anonymous volumes of the local driver, each a bind of a folder of the disk image: the
        // engine copies the image's own files there at the first start (as for any empty
        // volume; a plain bind would hide them, such as a harness baked into /tmp), and removes
        // the volume with the container (the folder stays, to the disk's removal).
        let mounts = disk.map(|disk| {
            labels.insert(
                LABEL_DISK.to_owned(),
                disk.image.to_string_lossy().into_owned(),
            );
            [&options.working_directory, &options.home, "/tmp"]
                .iter()
                .zip(disk::FOLDERS)
                .map(|(inside, folder)| Mount {
                    target: Some((*inside).to_owned()),
                    typ: Some(MountType::VOLUME),
                    volume_options: Some(MountVolumeOptions {
                        driver_config: Some(MountVolumeOptionsDriverConfig {
                            name: Some("local".into()),
                            options: Some(HashMap::from([
                                ("type".to_owned(), "none".to_owned()),
                                ("o".to_owned(), "bind".to_owned()),
                                ("device".to_owned(), disk.folder(folder)),
                            ])),
                        }),
                        ..MountVolumeOptions::default()
                    }),
                    ..Mount::default()
                })
                .collect::<Vec<_>>()
        });
        ContainerCreateBody {
            image: Some(options.image.clone()),
            user: Some(options.user.clone()),
            env: Some(env),
            working_dir: Some(options.working_directory.clone()),
            entrypoint: Some(vec!["/bin/sh".into(), "-c".into(), KEEP_ALIVE.into()]),
            cmd: Some(Vec::new()),
            labels: Some(labels),
            stop_timeout: Some(5),
            host_config: Some(HostConfig {
                init: Some(true),
                cap_drop: Some(vec!["ALL".into()]),
                security_opt: Some(vec!["no-new-privileges".into()]),
                memory: Some(options.memory_bytes),
                memory_swap: Some(options.memory_bytes),
                nano_cpus: Some((options.cpus * 1e9) as i64),
                pids_limit: Some(options.pids_limit),
                network_mode: Some(self.network.as_str().into()),
                mounts,
                ..HostConfig::default()
            }),
            ..ContainerCreateBody::default()
        }
    }

    async fn pull(&self, docker: &Docker) -> Result<()> {
        let (image, tag) = match self.options.image.rsplit_once(':') {
            Some((image, tag)) if !tag.contains('/') => (image.to_owned(), tag.to_owned()),
            _ => (self.options.image.clone(), "latest".to_owned()),
        };
        let options = CreateImageOptionsBuilder::default()
            .from_image(&image)
            .tag(&tag)
            .build();
        let mut progress = docker.create_image(Some(options), None, None);
        while let Some(step) = progress.next().await {
            step.map_err(|error| {
                self.endpoint
                    .failure(&format!("pull the image {}", self.options.image), error)
            })?;
        }
        Ok(())
    }

    /// The container of a session, made ready from its inspection: started if it was not running.
    /// Whether the container `name` was made by harness-sessions for `session_id`.
    async fn is_leftover_of(&self, docker: &Docker, name: &str, session_id: &str) -> Result<bool> {
        match docker
            .inspect_container(name, None::<InspectContainerOptions>)
            .await
        {
            Ok(inspected) => Ok(inspected
                .config
                .and_then(|config| config.labels)
                .and_then(|labels| labels.get(LABEL_SESSION).cloned())
                .is_some_and(|label| label == session_id)),
            Err(error) if status_of(&error) == Some(404) => Ok(false),
            Err(error) => Err(self
                .endpoint
                .failure(&format!("inspect the container {name}"), error)),
        }
    }

    /// Creates the container `name` (pulling its image, or reclaiming a leftover of the same
    /// session, when allowed).
    async fn create_container(
        &self,
        docker: &Docker,
        options: &bollard::query_parameters::CreateContainerOptions,
        session_id: &str,
        name: &str,
        hold: &container::Hold,
        disk: Option<&(disk::Disk, u64)>,
    ) -> Result<()> {
        let mut pulled = false;
        let mut reclaimed = false;
        loop {
            match docker
                .create_container(
                    Some(options.clone()),
                    self.create_body(session_id, disk.map(|(disk, _)| disk)),
                )
                .await
            {
                Ok(_) => return Ok(()),
                Err(error)
                    if status_of(&error) == Some(404) && message_of(&error).contains("image") =>
                {
                    if self.options.pull && !pulled {
                        self.pull(docker).await?;
                        pulled = true;
                        continue;
                    }
                    return Err(SessionError::host(format!(
                        "The image {} is not on the Docker Engine at {}: build or import it there first \
                         (scripts/docker/build-test-image.sh makes the test image), or set `pull: true` to pull it.",
                        self.options.image,
                        self.endpoint.display()
                    )));
                }
                Err(error) if status_of(&error) == Some(409) => {
                    // A container of this session that no sandbox of this process holds is what a
                    // crashed process left: reclaimed (removed), then made again. One this process
                    // holds, or one not made for this session, is refused.
                    if !reclaimed
                        && !hold.held_elsewhere()
                        && self.is_leftover_of(docker, name, session_id).await?
                    {
                        reclaimed = true;
                        let leftover = self.disk_of(docker, name).await;
                        Container::remove_named(docker, &self.endpoint, name).await?;
                        if let Some(leftover) = leftover {
                            leftover.remove().await;
                        }
                        continue;
                    }
                    return Err(SessionError::host(format!(
                        "A sandbox container {name} already exists for session {session_id}: resume it, or destroy it first."
                    )));
                }
                Err(error) => {
                    return Err(self.endpoint.failure(
                        &format!("create the container {name} from {}", self.options.image),
                        error,
                    ))
                }
            }
        }
    }

    /// Removes the disk images no container of the engine names, once they are old enough.
    async fn sweep_disks(&self, docker: &Docker) {
        let options = bollard::query_parameters::ListContainersOptionsBuilder::default()
            .all(true)
            .filters(&HashMap::from([("label", vec![LABEL_DISK])]))
            .build();
        let Ok(containers) = docker.list_containers(Some(options)).await else {
            return;
        };
        let in_use = containers
            .into_iter()
            .filter_map(|container| container.labels?.get(LABEL_DISK).map(Into::into))
            .collect();
        disk::sweep_orphans(in_use).await;
    }

    /// The disk image the container `name` names in its label, if any.
    async fn disk_of(&self, docker: &Docker, name: &str) -> Option<disk::Disk> {
        docker
            .inspect_container(name, None::<InspectContainerOptions>)
            .await
            .ok()?
            .config?
            .labels?
            .get(LABEL_DISK)
            .and_then(|image| disk::Disk::from_label(image))
    }

    async fn attach(
        &self,
        docker: Docker,
        name: String,
    ) -> Result<Option<Arc<dyn SandboxSession>>> {
        let inspected = match docker
            .inspect_container(&name, None::<InspectContainerOptions>)
            .await
        {
            Ok(inspected) => inspected,
            Err(error) if status_of(&error) == Some(404) => return Ok(None),
            Err(error) => {
                return Err(self
                    .endpoint
                    .failure(&format!("inspect the container {name}"), error))
            }
        };
        let labels = inspected
            .config
            .as_ref()
            .and_then(|config| config.labels.clone())
            .unwrap_or_default();
        if !labels.contains_key(LABEL_SESSION) {
            return Err(SessionError::host(format!(
                "The container {name} was not made by harness-sessions (it has no {LABEL_SESSION} label): refusing to use it. Remove or rename it."
            )));
        }
        let disk = labels
            .get(LABEL_DISK)
            .and_then(|image| disk::Disk::from_label(image));
        if let Some(disk) = &disk {
            disk.ensure_mounted().await?;
        }
        let state = inspected.state.unwrap_or_default();
        if state.paused == Some(true) {
            docker.unpause_container(&name).await.map_err(|error| {
                self.endpoint
                    .failure(&format!("unpause the container {name}"), error)
            })?;
        } else if state.running != Some(true) {
            match docker
                .start_container(&name, None::<StartContainerOptions>)
                .await
            {
                Ok(()) => {}
                Err(error) if status_of(&error) == Some(304) => {}
                Err(error) => {
                    return Err(self
                        .endpoint
                        .failure(&format!("start the container {name} again"), error))
                }
            }
        }
        let label = |key: &str| labels.get(key).cloned();
        let working_directory = label(LABEL_WORKING_DIRECTORY)
            .unwrap_or_else(|| self.options.working_directory.clone());
        let home = label(LABEL_HOME).unwrap_or_else(|| self.options.home.clone());
        let user = label(LABEL_USER).unwrap_or_else(|| self.options.user.clone());
        let network = label(LABEL_NETWORK)
            .and_then(|network| NetworkMode::parse(&network).ok())
            .unwrap_or(self.network);
        let ports: Vec<u16> = match label(LABEL_PORTS) {
            Some(ports) => ports
                .split(',')
                .filter_map(|port| port.trim().parse().ok())
                .collect(),
            None => self.options.ports.clone(),
        };
        let limits = label(LABEL_LIMITS).unwrap_or_default();
        let allowed_hosts = match label(LABEL_ALLOWED_HOSTS) {
            Some(hosts) => hosts
                .split(',')
                .filter(|entry| !entry.is_empty())
                .filter_map(|entry| AllowedHost::parse(entry, "allowedHosts").ok())
                .collect(),
            None => Vec::new(),
        };
        let settings = Settings {
            allowed_hosts,
            image: inspected
                .config
                .and_then(|config| config.image)
                .unwrap_or_else(|| self.options.image.clone()),
            user,
            home,
            network,
            limits,
            disk,
        };
        let container = Container::new(docker, self.endpoint.clone(), name, settings)?;
        Ok(Some(container.root_view(working_directory, ports).await?))
    }
}

#[async_trait]
impl SandboxProvider for DockerSandbox {
    fn provider_id(&self) -> &str {
        "harness-sessions.docker"
    }

    fn resource_name(&self, session_id: &str) -> String {
        format!("container {}", self.container_name(session_id))
    }

    async fn create(&self, session_id: Option<&str>) -> Result<Arc<dyn SandboxSession>> {
        let generated;
        let session_id = match session_id {
            Some(id) => id,
            None => {
                generated = format!("session-{:016x}", random_u64());
                &generated
            }
        };
        let docker = self.docker()?;
        let name = self.container_name(session_id);
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let hold = container::Hold::new(&name);
        let disk = match (disk::unavailable(&self.endpoint), self.options.disk_bytes) {
            (None, bytes) => Some((disk::Disk::new_for(&name), bytes.unwrap_or(disk::DEFAULT_DISK_BYTES))),
            (Some(why), None) => {
                disk::warn_unbounded(&why);
                None
            }
            (Some(why), Some(_)) => {
                return Err(SessionError::host(format!(
                    "diskBytes cannot be enforced here: {why}. Leave diskBytes out to run without a disk bound."
                )))
            }
        };
        let (uid, gid) = parse_user(&self.options.user)?;
        if disk.is_some() && !self.swept.swap(true, std::sync::atomic::Ordering::Relaxed) {
            self.sweep_disks(&docker).await;
        }
        if let Some((disk, bytes)) = &disk {
            // Before the create: the engine copies the image's files into its folders then.
            let id = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
            disk.make(*bytes, id(uid), id(gid)).await?;
        }
        let created = self
            .create_container(&docker, &options, session_id, &name, &hold, disk.as_ref())
            .await;
        if let Err(error) = created {
            if let Some((disk, _)) = &disk {
                disk.remove().await;
            }
            return Err(error);
        }
        let settings = Settings {
            allowed_hosts: self.options.allowed_hosts.clone(),
            image: self.options.image.clone(),
            user: self.options.user.clone(),
            home: self.options.home.clone(),
            network: self.network,
            limits: self.limits_text(),
            disk: disk.as_ref().map(|(disk, _)| disk.clone()),
        };
        let container = Container::new(
            docker.clone(),
            self.endpoint.clone(),
            name.clone(),
            settings,
        )?;
        let prepared = async {
            container
                .make_directories(
                    &[&self.options.working_directory, &self.options.home],
                    uid,
                    gid,
                )
                .await?;
            docker
                .start_container(&name, None::<StartContainerOptions>)
                .await
                .map_err(|error| {
                    self.endpoint
                        .failure(&format!("start the container {name}"), error)
                })
        }
        .await;
        if let Err(error) = prepared {
            // Leave nothing half made behind.
            let _ = container.remove().await;
            return Err(error);
        }
        let view = container
            .clone()
            .root_view(
                self.options.working_directory.clone(),
                self.options.ports.clone(),
            )
            .await;
        if view.is_err() {
            let _ = container.remove().await;
        }
        view
    }

    async fn find(&self, session_id: &str) -> Result<Option<Arc<dyn SandboxSession>>> {
        let docker = self.docker()?;
        self.attach(docker, self.container_name(session_id)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_parse_like_docker() {
        assert_eq!(parse_memory("512m"), Ok(512 * 1024 * 1024));
        assert_eq!(parse_memory("1g"), Ok(1024 * 1024 * 1024));
        assert_eq!(parse_memory("1.5GB"), Ok(1536 * 1024 * 1024));
        assert_eq!(parse_memory("8388608"), Ok(8388608));
        assert!(parse_memory("1m").is_err());
        assert!(parse_memory("lots").is_err());
    }

    #[test]
    fn options_are_checked() {
        let ok = DockerSandboxOptions {
            image: "x".into(),
            ..DockerSandboxOptions::default()
        };
        assert!(DockerSandbox::new(ok.clone()).is_ok());
        for bad in [
            DockerSandboxOptions {
                image: " ".into(),
                ..ok.clone()
            },
            DockerSandboxOptions {
                user: "sandbox".into(),
                ..ok.clone()
            },
            DockerSandboxOptions {
                working_directory: "work".into(),
                ..ok.clone()
            },
            DockerSandboxOptions {
                ports: vec![1, 1],
                ..ok.clone()
            },
            DockerSandboxOptions {
                cpus: 0.0,
                ..ok.clone()
            },
            DockerSandboxOptions {
                pids_limit: 1,
                ..ok.clone()
            },
            DockerSandboxOptions {
                host: Some("ssh://x".into()),
                ..ok.clone()
            },
        ] {
            assert!(matches!(
                DockerSandbox::new(bad),
                Err(SessionError::Input { .. })
            ));
        }
    }

    #[test]
    fn no_network_unless_the_host_is_asked_for() {
        let with_ports = DockerSandbox::new(DockerSandboxOptions {
            image: "x".into(),
            ports: vec![4000],
            ..DockerSandboxOptions::default()
        });
        assert_eq!(
            with_ports.map(|sandbox| sandbox.network),
            Ok(NetworkMode::None)
        );
    }

    #[test]
    fn container_names_come_from_session_ids() {
        let sandbox = DockerSandbox::new(DockerSandboxOptions {
            image: "x".into(),
            ..DockerSandboxOptions::default()
        })
        .expect("valid options");
        assert_eq!(sandbox.container_name("chat-1"), "harness-sessions-chat-1");
        assert!(sandbox
            .container_name("a/b")
            .starts_with("harness-sessions-a-b-"));
    }
}
