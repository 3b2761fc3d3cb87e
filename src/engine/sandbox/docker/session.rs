//! The views of a container ([`super::container`]): the whole container or a fork of it, each a
//! `SandboxSession` with its own working directory and path policy; commands and files go through
//! `exec` as the sandbox's user ([`super::files`]).

use std::sync::Arc;

use async_trait::async_trait;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::StopContainerOptionsBuilder;
use bytes::{Bytes, BytesMut};
use futures::{StreamExt, TryStreamExt};

use super::client::status_of;
use super::container::Container;
use super::forward::PortForwarder;
use super::NetworkMode;
use crate::engine::error::{Result, SessionError};
use crate::engine::sandbox::paths::{self, PathPolicy};
use crate::engine::sandbox::process::{process_channel, ExitStatus, ProcessSink};
use crate::engine::sandbox::sweep::{Sweep, MARKER};
use crate::engine::sandbox::view::{
    fresh_fork_name, loopback_endpoint, random_u64, validate_ports,
};
use crate::engine::sandbox::{
    Command, FileStream, ForkOptions, PortEndpoint, PortProtocol, SandboxProcess, SandboxSession,
};

/// The script every command runs in: it prints its process id on stderr's first line, then
/// becomes the command (`$1`), keeping that id, which leads the process group `docker exec` makes.
const EXEC_WRAPPER: &str = "echo \"$$\" >&2; exec /bin/sh -c \"$1\"";

impl Container {
    /// Listeners on the host for `ports` of a view, when the container has no network of its own.
    async fn forwarder(&self, ports: &[u16]) -> Result<Option<PortForwarder>> {
        if ports.is_empty() || self.settings.network == NetworkMode::Host {
            return Ok(None);
        }
        let namespace = self.namespace().await?;
        PortForwarder::start(&namespace, ports).map(Some)
    }

    /// The view of the whole container.
    pub(crate) async fn root_view(
        self: Arc<Self>,
        working_directory: String,
        ports: Vec<u16>,
    ) -> Result<Arc<dyn SandboxSession>> {
        self.open_egress().await?;
        let forwarder = self.forwarder(&ports).await?;
        let policy = PathPolicy::new(
            [
                working_directory.clone(),
                self.settings.home.clone(),
                "/tmp".to_owned(),
            ],
            &working_directory,
        )?;
        Ok(Arc::new(DockerSandboxSession {
            container: self,
            view: 0,
            working_directory,
            ports,
            forwarder,
            policy,
            owns_directory: false,
        }))
    }
}

/// One view of a Docker sandbox: the whole container, or a fork of it.
#[derive(Debug)]
pub struct DockerSandboxSession {
    container: Arc<Container>,
    view: u64,
    working_directory: String,
    ports: Vec<u16>,
    /// The host's listeners for `ports` (none with the host's network).
    forwarder: Option<PortForwarder>,
    policy: PathPolicy,
    owns_directory: bool,
}

impl DockerSandboxSession {
    /// The container's name.
    pub fn container_name(&self) -> &str {
        &self.container.name
    }

    /// The network of the container.
    pub fn network(&self) -> NetworkMode {
        self.container.settings.network
    }

    /// The mark this view's processes carry ([`MARKER`]).
    fn mark(&self) -> String {
        format!("{}/{:x}", self.container.name, self.view)
    }

    /// Reads stderr frames until the wrapper's first line, the process id; returns it and the rest
    /// of what was read, split by stream.
    async fn read_pid(
        output: &mut (impl futures::Stream<Item = std::result::Result<LogOutput, bollard::errors::Error>>
                  + Unpin),
    ) -> (Option<u32>, Vec<LogOutput>, bool) {
        let mut early = Vec::new();
        let mut line = BytesMut::new();
        while let Some(frame) = output.next().await {
            match frame {
                Ok(LogOutput::StdErr { message }) => {
                    line.extend_from_slice(&message);
                    if let Some(end) = line.iter().position(|byte| *byte == b'\n') {
                        let pid = std::str::from_utf8(&line[..end])
                            .ok()
                            .and_then(|text| text.trim().parse().ok());
                        let rest = line.split_off(end + 1);
                        if !rest.is_empty() {
                            early.push(LogOutput::StdErr {
                                message: rest.freeze(),
                            });
                        }
                        return (pid, early, false);
                    }
                }
                Ok(other) => early.push(other),
                Err(_) => return (None, early, true),
            }
        }
        if !line.is_empty() {
            early.push(LogOutput::StdErr {
                message: line.freeze(),
            });
        }
        (None, early, true)
    }
}

async fn deliver(sink: &ProcessSink, frame: LogOutput) {
    match frame {
        LogOutput::StdOut { message } | LogOutput::Console { message } => {
            sink.stdout.write(message).await
        }
        LogOutput::StdErr { message } => sink.stderr.write(message).await,
        LogOutput::StdIn { .. } => {}
    }
}

#[async_trait]
impl SandboxSession for DockerSandboxSession {
    fn id(&self) -> &str {
        &self.container.name
    }

    fn default_working_directory(&self) -> &str {
        &self.working_directory
    }

    fn ports(&self) -> &[u16] {
        &self.ports
    }

    fn description(&self) -> String {
        let settings = &self.container.settings;
        let listed = self
            .ports
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let network = match settings.network {
            NetworkMode::None if !settings.allowed_hosts.is_empty() => format!(
                "Network: none but {} (other hosts through the proxy in HTTPS_PROXY){}.",
                settings
                    .allowed_hosts
                    .iter()
                    .map(|entry| entry.text())
                    .collect::<Vec<_>>()
                    .join(", "),
                if self.ports.is_empty() {
                    String::new()
                } else {
                    format!("; ports {listed} (listen on them inside) are reached from outside through the host")
                }
            ),
            NetworkMode::None if self.ports.is_empty() => "Network: none.".to_owned(),
            NetworkMode::None => format!(
                "Network: none; ports {listed} (listen on them inside, on any address) are reached from outside through the host."
            ),
            NetworkMode::Host if self.ports.is_empty() => "Network: the host's.".to_owned(),
            NetworkMode::Host => {
                format!("Network: the host's; ports {listed} are reached on 127.0.0.1.")
            }
        };
        let limits = if settings.limits.is_empty() {
            String::new()
        } else {
            format!(" Limits: {}.", settings.limits)
        };
        format!(
            "A Linux container ({}) from the image {}, running as the non-root user {}, with every capability dropped and no-new-privileges.{limits} \
             Working directory: {}. Home: {}. Files can be read and written in {}. {network}",
            self.container.name,
            settings.image,
            settings.user,
            self.working_directory,
            settings.home,
            self.policy.roots().join(", "),
        )
    }

    fn port_endpoint(&self, port: u16, protocol: PortProtocol) -> Result<PortEndpoint> {
        let endpoint = loopback_endpoint(&self.ports, port, protocol)?;
        match &self.forwarder {
            None => Ok(endpoint),
            Some(forwarder) => {
                let host_port = forwarder.host_port(port).ok_or_else(|| {
                    SessionError::internal("a port of a sandbox view has no listener on the host")
                })?;
                Ok(PortEndpoint {
                    url: format!("{}://127.0.0.1:{host_port}", protocol.scheme()),
                    headers: endpoint.headers,
                })
            }
        }
    }

    async fn spawn(&self, command: Command) -> Result<SandboxProcess> {
        command.validate()?;
        let container = self.container.clone();
        let directory = match &command.working_directory {
            Some(directory) if directory.starts_with('/') => directory.clone(),
            Some(directory) => paths::join(&self.working_directory, directory),
            None => self.working_directory.clone(),
        };
        let doing = format!("run a command in the container {}", container.name);
        let exec = container
            .docker
            .create_exec(
                &container.name,
                CreateExecOptions {
                    cmd: Some(vec![
                        "/bin/sh".to_owned(),
                        "-c".to_owned(),
                        EXEC_WRAPPER.to_owned(),
                        "harness-sessions".to_owned(),
                        command.command.clone(),
                    ]),
                    env: Some(
                        command
                            .env
                            .iter()
                            .map(|(name, value)| format!("{name}={value}"))
                            .chain([format!("{MARKER}={}", self.mark())])
                            .collect(),
                    ),
                    working_dir: Some(directory.clone()),
                    user: Some(container.settings.user.clone()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..CreateExecOptions::default()
                },
            )
            .await
            .map_err(|error| container.failure(&doing, error))?;
        let started = container
            .docker
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    output_capacity: Some(64 * 1024),
                    ..StartExecOptions::default()
                }),
            )
            .await
            .map_err(|error| container.failure(&doing, error))?;
        let StartExecResults::Attached { mut output, input } = started else {
            return Err(SessionError::internal("docker started a command detached"));
        };
        let (pid, early, ended) = Self::read_pid(&mut output).await;
        if pid.is_none() && ended {
            // The wrapper never ran: the exec failed to start. Say why in Docker's words.
            let said: Vec<String> = early
                .iter()
                .map(|frame| {
                    String::from_utf8_lossy(&frame.clone().into_bytes())
                        .trim()
                        .to_owned()
                })
                .filter(|text| !text.is_empty())
                .collect();
            let said = said.join(" ");
            if said.contains("chdir") || said.contains("no such file or directory") {
                return Err(SessionError::input(
                    "workingDirectory",
                    format!("The working directory {directory} does not exist in the sandbox."),
                ));
            }
            let inspected = container.docker.inspect_exec(&exec.id).await.ok();
            if let Some(code) = inspected
                .and_then(|inspected| inspected.exit_code)
                .filter(|code| *code != 0)
            {
                return Err(SessionError::host(format!(
                    "The sandbox container {} could not start the command (exit {code}){}",
                    container.name,
                    if said.is_empty() {
                        ".".to_owned()
                    } else {
                        format!(": {said}")
                    }
                )));
            }
            return Err(SessionError::host(format!(
                "The sandbox container {} could not start the command{}",
                container.name,
                if said.is_empty() {
                    ".".to_owned()
                } else {
                    format!(": {said}")
                }
            )));
        }
        if let Some(pid) = pid {
            container.processes().insert(pid, self.view);
        }
        let (process, sink) = process_channel(pid);
        let exec_id = exec.id;
        tokio::spawn(async move {
            // Kept open: the attached connection closes with it.
            let _input = input;
            for frame in early {
                deliver(&sink, frame).await;
            }
            let mut kill_requested = sink.kill_requested.clone();
            let mut failure = None;
            let mut killing = false;
            loop {
                tokio::select! {
                    frame = output.next() => match frame {
                        Some(Ok(frame)) => deliver(&sink, frame).await,
                        Some(Err(error)) => {
                            failure = Some(container.failure("read a command's output", error));
                            break;
                        }
                        None => break,
                    },
                    changed = kill_requested.changed(), if !killing => {
                        match changed {
                            Ok(()) if *kill_requested.borrow() => {
                                killing = true;
                                if let Some(pid) = pid {
                                    let container = container.clone();
                                    tokio::spawn(async move {
                                        let _ = container.kill(&[pid]).await;
                                    });
                                }
                            }
                            Ok(()) => {}
                            Err(_) => killing = true,
                        }
                    }
                }
            }
            sink.stdout.close();
            sink.stderr.close();
            if let Some(pid) = pid {
                container.processes().remove(&pid);
            }
            let status = match failure {
                Some(failure) => Err(failure),
                None => match container.docker.inspect_exec(&exec_id).await {
                    Ok(inspected) => Ok(ExitStatus {
                        code: inspected
                            .exit_code
                            .and_then(|code| i32::try_from(code).ok())
                            .unwrap_or(137),
                        killed: sink.kill_was_requested(),
                    }),
                    Err(error) => Err(container.failure("learn how a command ended", error)),
                },
            };
            sink.finish(status);
        });
        Ok(process)
    }

    async fn read_file(&self, path: &str) -> Result<Option<FileStream>> {
        let confined = self.policy.resolve(path)?;
        self.container
            .read_as_user(&self.policy, path, &confined.absolute)
            .await
    }

    async fn write_file(&self, path: &str, content: FileStream) -> Result<()> {
        let confined = self.policy.resolve(path)?;
        if confined.absolute == confined.root {
            return Err(SessionError::input(
                path,
                format!("The path {path:?} is a directory, not a file."),
            ));
        }
        let content: Vec<Bytes> = content.try_collect().await?;
        self.container
            .write_as_user(&self.policy, path, &confined.absolute, content)
            .await
    }

    async fn stop(&self) -> Result<()> {
        if self.view != 0 {
            let pids: Vec<u32> = self
                .container
                .processes()
                .iter()
                .filter(|(_, view)| **view == self.view)
                .map(|(pid, _)| *pid)
                .collect();
            let killed = self.container.kill(&pids).await;
            // What left its process group (a daemon, `setsid`, `nohup`) and what holds the view's
            // ports end too: the next session handed these ports finds them free.
            self.container
                .sweep(Sweep {
                    mark: Some(self.mark()),
                    ports: self.ports.clone(),
                    everything: false,
                })
                .await;
            return match killed {
                Err(SessionError::Host { message, .. })
                    if message.contains("is stopped") || message.contains("is gone") =>
                {
                    Ok(())
                }
                other => other,
            };
        }
        let options = StopContainerOptionsBuilder::default().t(5).build();
        match self
            .container
            .docker
            .stop_container(&self.container.name, Some(options))
            .await
        {
            Ok(()) => {}
            Err(error) if matches!(status_of(&error), Some(304) | Some(404)) => {}
            Err(error) => {
                return Err(self.container.failure(
                    &format!("stop the container {}", self.container.name),
                    error,
                ))
            }
        }
        self.container.processes().clear();
        Ok(())
    }

    async fn destroy(&self) -> Result<()> {
        if self.view == 0 {
            self.container.processes().clear();
            return self.container.remove().await;
        }
        self.stop().await?;
        if self.owns_directory {
            let code = self
                .container
                .chore(vec![
                    "rm".into(),
                    "-rf".into(),
                    "--".into(),
                    self.working_directory.clone(),
                ])
                .await?;
            if code != 0 {
                return Err(SessionError::host(format!(
                    "Could not remove the working directory {} of a fork of the container {} (rm exited {code}).",
                    self.working_directory, self.container.name
                )));
            }
        }
        Ok(())
    }

    async fn fork(&self, options: ForkOptions) -> Result<Arc<dyn SandboxSession>> {
        validate_ports(&options.ports, "ports")?;
        if !options.ports.is_empty() {
            // A port is checked free before it is handed out: whatever of the sandbox still
            // listens on it (a daemon a closed session left) ends first.
            self.container
                .sweep(Sweep {
                    mark: None,
                    ports: options.ports.clone(),
                    everything: false,
                })
                .await;
        }
        let requested = options.working_directory.unwrap_or_else(fresh_fork_name);
        let confined = self.policy.resolve(&requested)?;
        let directory = confined.absolute.clone();
        self.container
            .make_directory_as_user(&self.policy, &directory, &directory)
            .await?;
        let owns_directory = directory != self.working_directory
            && paths::is_within(&directory, &self.working_directory);
        Ok(Arc::new(DockerSandboxSession {
            container: self.container.clone(),
            view: random_u64() | 1,
            policy: self.policy.with_base(&directory)?,
            working_directory: directory,
            forwarder: self.container.forwarder(&options.ports).await?,
            ports: options.ports,
            owns_directory,
        }))
    }
}
