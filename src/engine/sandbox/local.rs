//! The local sandbox: processes on this host, in a folder of their own. **No isolation.**
//!
//! Each session gets `<root>/<session id>/` with `workspace/` (its working directory), `home/`
//! (its `HOME`) and `tmp/` (its `TMPDIR`). Commands run through `/bin/sh -c` as the user of this
//! process, with a small environment (not this process's, unless `inherit_env`), each in a
//! process group of its own so that a kill or a stop ends what it started. Ports are this host's
//! ports on 127.0.0.1. The file API is confined to the session folder: `..`, other absolute
//! paths and symbolic links that lead out are refused; a process, though, can read and write
//! whatever the user of this server can. Use it for development and tests, never for code you do
//! not trust.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::paths::{self, ConfinedPath, PathPolicy};
use super::process::{process_channel, ExitStatus, OutputWriter};
use super::view::{self, fresh_fork_name, loopback_endpoint, random_u64, validate_ports};
use super::{
    Command, FileStream, ForkOptions, PortEndpoint, PortProtocol, SandboxProcess, SandboxProvider,
    SandboxSession,
};
use crate::engine::error::{Result, SessionError};

/// The size of the chunks a file is read in.
const FILE_CHUNK: usize = 256 * 1024;

/// How a [`LocalSandbox`] makes its sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalSandboxOptions {
    /// The folder that holds one folder per session. Created if missing.
    pub root: PathBuf,
    /// The ports of each session (ports of this host, on 127.0.0.1).
    pub ports: Vec<u16>,
    /// Variables in the environment of every command.
    pub env: Vec<(String, String)>,
    /// Pass this process's whole environment to commands (secrets included). Default: only
    /// `PATH`, `USER`, `LOGNAME`, `LANG`, `LC_ALL` and `TERM` pass.
    pub inherit_env: bool,
}

/// Sandboxes as folders of this host. See the module documentation: no isolation.
#[derive(Debug, Clone)]
pub struct LocalSandbox {
    options: Arc<LocalSandboxOptions>,
}

impl LocalSandbox {
    /// A provider of local sandboxes under `options.root`. Touches nothing until a session is
    /// created.
    ///
    /// # Errors
    ///
    /// An input error for a relative root, bad ports or environment names.
    pub fn new(options: LocalSandboxOptions) -> Result<Self> {
        if !options.root.is_absolute() {
            return Err(SessionError::input(
                "root",
                format!("root: {} is not an absolute path.", options.root.display()),
            ));
        }
        if options.root.to_str().is_none() {
            return Err(SessionError::input(
                "root",
                "root: the path is not valid UTF-8.",
            ));
        }
        validate_ports(&options.ports, "ports")?;
        let mut probe = Command::new("true");
        probe.env = options.env.clone();
        probe.validate()?;
        Ok(LocalSandbox {
            options: Arc::new(options),
        })
    }

    fn folder(&self, name: &str) -> PathBuf {
        self.options.root.join(name)
    }

    fn open_folder(&self, name: String, folder: &Path) -> Result<Arc<dyn SandboxSession>> {
        let folder = std::fs::canonicalize(folder).map_err(|error| io_error(folder, &error))?;
        let folder = folder
            .to_str()
            .ok_or_else(|| SessionError::input("root", "root: the path is not valid UTF-8."))?
            .to_owned();
        let workspace = paths::join(&folder, "workspace");
        let home = paths::join(&folder, "home");
        let tmp = paths::join(&folder, "tmp");
        let policy = PathPolicy::new([folder.clone()], &workspace)?;
        let mut env: Vec<(String, String)> = if self.options.inherit_env {
            std::env::vars().collect()
        } else {
            ["PATH", "USER", "LOGNAME", "LANG", "LC_ALL", "TERM"]
                .iter()
                .filter_map(|name| {
                    std::env::var(name)
                        .ok()
                        .map(|value| ((*name).to_owned(), value))
                })
                .collect()
        };
        if !env.iter().any(|(name, _)| name == "PATH") {
            env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
        }
        env.retain(|(name, _)| name != "HOME" && name != "TMPDIR");
        env.push(("HOME".into(), home.clone()));
        env.push(("TMPDIR".into(), tmp));
        env.extend(self.options.env.iter().cloned());
        let shared = Arc::new(LocalBox {
            name,
            folder,
            home,
            env,
            processes: Mutex::new(HashMap::new()),
            stopped: AtomicBool::new(false),
        });
        Ok(Arc::new(LocalSandboxSession {
            shared,
            view: 0,
            working_directory: workspace,
            ports: self.options.ports.clone(),
            policy,
            owns_directory: false,
        }))
    }
}

#[async_trait]
impl SandboxProvider for LocalSandbox {
    fn provider_id(&self) -> &str {
        "harness-sessions.local"
    }

    fn resource_name(&self, session_id: &str) -> String {
        self.folder(&view::resource_name(session_id))
            .display()
            .to_string()
    }

    async fn create(&self, session_id: Option<&str>) -> Result<Arc<dyn SandboxSession>> {
        let name = match session_id {
            Some(id) => view::resource_name(id),
            None => format!("session-{:016x}", random_u64()),
        };
        let folder = self.folder(&name);
        tokio::fs::create_dir_all(&self.options.root)
            .await
            .map_err(|error| io_error(&self.options.root, &error))?;
        match tokio::fs::create_dir(&folder).await {
            Ok(()) => {}
            Err(error) if error.kind() == ErrorKind::AlreadyExists => {
                return Err(SessionError::host(format!(
                    "A local sandbox already exists for session {}: {}. Resume it, or destroy it first.",
                    session_id.unwrap_or(&name),
                    folder.display()
                )));
            }
            Err(error) => return Err(io_error(&folder, &error)),
        }
        for sub in ["workspace", "home", "tmp"] {
            let dir = folder.join(sub);
            tokio::fs::create_dir_all(&dir)
                .await
                .map_err(|error| io_error(&dir, &error))?;
        }
        self.open_folder(name, &folder)
    }

    async fn find(&self, session_id: &str) -> Result<Option<Arc<dyn SandboxSession>>> {
        let name = view::resource_name(session_id);
        let folder = self.folder(&name);
        match tokio::fs::metadata(folder.join("workspace")).await {
            Ok(metadata) if metadata.is_dir() => self.open_folder(name, &folder).map(Some),
            Ok(_) => Ok(None),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error(&folder, &error)),
        }
    }
}

/// What every view of one local sandbox shares.
#[derive(Debug)]
struct LocalBox {
    name: String,
    folder: String,
    home: String,
    env: Vec<(String, String)>,
    /// The process groups running, by the view that started them.
    processes: Mutex<HashMap<i32, u64>>,
    stopped: AtomicBool,
}

impl LocalBox {
    fn processes(&self) -> MutexGuard<'_, HashMap<i32, u64>> {
        self.processes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Kills the process groups of `view`, or all of them for `None`.
    fn kill_view(&self, view: Option<u64>) {
        let groups: Vec<i32> = self
            .processes()
            .iter()
            .filter(|(_, owner)| view.is_none_or(|view| **owner == view))
            .map(|(group, _)| *group)
            .collect();
        for group in groups {
            kill_group(group);
        }
    }
}

/// One view of a local sandbox.
#[derive(Debug)]
pub struct LocalSandboxSession {
    shared: Arc<LocalBox>,
    view: u64,
    working_directory: String,
    ports: Vec<u16>,
    policy: PathPolicy,
    owns_directory: bool,
}

impl LocalSandboxSession {
    /// The folder of the whole sandbox.
    pub fn folder(&self) -> &str {
        &self.shared.folder
    }

    /// `path` confined to the sandbox folder, symbolic links included.
    async fn confine(&self, path: &str) -> Result<ConfinedPath> {
        let confined = self.policy.resolve(path)?;
        for prefix in confined.prefixes_below_root() {
            match tokio::fs::symlink_metadata(&prefix).await {
                Ok(metadata) if metadata.file_type().is_symlink() => {
                    self.check_link(path, &prefix).await?;
                }
                Ok(_) => {}
                Err(error) if error.kind() == ErrorKind::NotFound || is_not_a_directory(&error) => {
                    break
                }
                Err(error) => return Err(io_error(Path::new(&prefix), &error)),
            }
        }
        Ok(confined)
    }

    /// Follows the symbolic link at `link` to its end, refusing `path` if any hop leads out.
    async fn check_link(&self, path: &str, link: &str) -> Result<()> {
        let mut current = link.to_owned();
        for _ in 0..40 {
            match tokio::fs::canonicalize(&current).await {
                Ok(real) => {
                    let real = real.to_str().unwrap_or("/").to_owned();
                    return match self.policy.contains(&real) {
                        Some(_) => Ok(()),
                        None => Err(self.policy.link_outside(path, &real)),
                    };
                }
                Err(error) if error.kind() == ErrorKind::NotFound => {
                    // A dangling link: follow it by hand, one hop at a time.
                    let target = tokio::fs::read_link(&current)
                        .await
                        .map_err(|error| io_error(Path::new(&current), &error))?;
                    let directory = tokio::fs::canonicalize(paths::parent(&current))
                        .await
                        .map_err(|error| io_error(Path::new(&current), &error))?;
                    let resolved = paths::resolve_link_target(
                        directory.to_str().unwrap_or("/"),
                        target.to_str().unwrap_or("/"),
                    );
                    if self.policy.contains(&resolved).is_none() {
                        return Err(self.policy.link_outside(path, &resolved));
                    }
                    match tokio::fs::symlink_metadata(&resolved).await {
                        Ok(metadata) if metadata.file_type().is_symlink() => current = resolved,
                        _ => return Ok(()),
                    }
                }
                Err(error) => return Err(io_error(Path::new(&current), &error)),
            }
        }
        Err(SessionError::input(
            path,
            format!("The path {path:?} goes through too many symbolic links."),
        ))
    }

    fn check_running(&self) -> Result<()> {
        if self.shared.stopped.load(Ordering::SeqCst) {
            return Err(SessionError::host(format!(
                "The local sandbox {} is stopped: resume its session to use it again.",
                self.shared.folder
            )));
        }
        Ok(())
    }
}

#[async_trait]
impl SandboxSession for LocalSandboxSession {
    fn id(&self) -> &str {
        &self.shared.name
    }

    fn default_working_directory(&self) -> &str {
        &self.working_directory
    }

    fn ports(&self) -> &[u16] {
        &self.ports
    }

    fn description(&self) -> String {
        let ports = if self.ports.is_empty() {
            "no ports".to_owned()
        } else {
            format!(
                "ports {} on 127.0.0.1",
                self.ports
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        format!(
            "A folder on the server's own machine, NOT isolated: commands run directly on the host as the server's user. \
             Working directory: {}. Home: {}. Files are read and written inside {}. Network: the host's; {ports}.",
            self.working_directory, self.shared.home, self.shared.folder
        )
    }

    fn port_endpoint(&self, port: u16, protocol: PortProtocol) -> Result<PortEndpoint> {
        loopback_endpoint(&self.ports, port, protocol)
    }

    async fn spawn(&self, command: Command) -> Result<SandboxProcess> {
        command.validate()?;
        self.check_running()?;
        let directory = match &command.working_directory {
            Some(directory) if directory.starts_with('/') => directory.clone(),
            Some(directory) => paths::join(&self.working_directory, directory),
            None => self.working_directory.clone(),
        };
        let mut child = tokio::process::Command::new("/bin/sh");
        child
            .arg("-c")
            .arg(&command.command)
            .current_dir(&directory)
            .env_clear()
            .envs(self.shared.env.iter().map(|(name, value)| (name, value)))
            .envs(command.env.iter().map(|(name, value)| (name, value)))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0);
        let mut child = match child.spawn() {
            Ok(child) => child,
            Err(error) if error.kind() == ErrorKind::NotFound || is_not_a_directory(&error) => {
                return Err(SessionError::input(
                    "workingDirectory",
                    format!("The working directory {directory} does not exist in the sandbox."),
                ));
            }
            Err(error) => {
                return Err(SessionError::host(format!(
                    "Could not start a process in the local sandbox: {error}."
                )))
            }
        };
        let pid = child.id();
        let group = pid.and_then(|pid| i32::try_from(pid).ok());
        if let Some(group) = group {
            self.shared.processes().insert(group, self.view);
        }
        let (process, sink) = process_channel(pid);
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let mut kill_requested = sink.kill_requested.clone();
            let waiting = async {
                loop {
                    tokio::select! {
                        status = child.wait() => return status,
                        changed = kill_requested.changed() => {
                            if changed.is_err() {
                                // Every handle is gone: nobody can kill it any more.
                                return child.wait().await;
                            }
                            if *kill_requested.borrow() {
                                if let Some(group) = group {
                                    kill_group(group);
                                }
                            }
                        }
                    }
                }
            };
            let (status, (), ()) = tokio::join!(
                waiting,
                pump(stdout, &sink.stdout),
                pump(stderr, &sink.stderr)
            );
            if let Some(group) = group {
                shared.processes().remove(&group);
            }
            let status = status
                .map(|status| {
                    use std::os::unix::process::ExitStatusExt;
                    ExitStatus {
                        code: status
                            .code()
                            .or_else(|| status.signal().map(|signal| 128 + signal))
                            .unwrap_or(-1),
                        killed: sink.kill_was_requested(),
                    }
                })
                .map_err(|error| {
                    SessionError::host(format!("Lost a process of the local sandbox: {error}."))
                });
            sink.finish(status);
        });
        Ok(process)
    }

    async fn read_file(&self, path: &str) -> Result<Option<FileStream>> {
        let confined = self.confine(path).await?;
        let file = match tokio::fs::File::open(&confined.absolute).await {
            Ok(file) => file,
            Err(error) if error.kind() == ErrorKind::NotFound || is_not_a_directory(&error) => {
                return Ok(None)
            }
            Err(error) => return Err(io_error(Path::new(&confined.absolute), &error)),
        };
        let metadata = file
            .metadata()
            .await
            .map_err(|error| io_error(Path::new(&confined.absolute), &error))?;
        if metadata.is_dir() {
            return Err(SessionError::input(
                path,
                format!("The path {path:?} is a directory, not a file."),
            ));
        }
        let absolute = confined.absolute;
        let stream = futures::stream::unfold(Some(file), move |file| {
            let absolute = absolute.clone();
            async move {
                let mut file = file?;
                let mut buffer = vec![0; FILE_CHUNK];
                match file.read(&mut buffer).await {
                    Ok(0) => None,
                    Ok(read) => {
                        buffer.truncate(read);
                        Some((Ok(Bytes::from(buffer)), Some(file)))
                    }
                    Err(error) => Some((Err(io_error(Path::new(&absolute), &error)), None)),
                }
            }
        });
        Ok(Some(Box::pin(stream)))
    }

    async fn write_file(&self, path: &str, mut content: FileStream) -> Result<()> {
        let confined = self.confine(path).await?;
        let target = PathBuf::from(&confined.absolute);
        if confined.absolute == confined.root {
            return Err(SessionError::input(
                path,
                format!("The path {path:?} is a directory, not a file."),
            ));
        }
        let directory = paths::parent(&confined.absolute).to_owned();
        match tokio::fs::create_dir_all(&directory).await {
            Ok(()) => {}
            Err(error)
                if error.kind() == ErrorKind::AlreadyExists || is_not_a_directory(&error) =>
            {
                return Err(SessionError::input(
                    path,
                    format!("Cannot write {path:?}: a file is in the way of its directory."),
                ));
            }
            Err(error) => return Err(io_error(Path::new(&directory), &error)),
        }
        let previous = tokio::fs::symlink_metadata(&target).await.ok();
        if previous.as_ref().is_some_and(|metadata| metadata.is_dir()) {
            return Err(SessionError::input(
                path,
                format!("The path {path:?} is a directory, not a file."),
            ));
        }
        let temporary = PathBuf::from(format!(
            "{}/.{}.{:016x}.tmp",
            directory,
            target
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("file"),
            random_u64()
        ));
        let written = async {
            let mut file = tokio::fs::File::create(&temporary)
                .await
                .map_err(|error| io_error(&temporary, &error))?;
            while let Some(chunk) = content.next().await {
                file.write_all(&chunk?)
                    .await
                    .map_err(|error| io_error(&temporary, &error))?;
            }
            file.flush()
                .await
                .map_err(|error| io_error(&temporary, &error))?;
            if let Some(metadata) = previous.as_ref().filter(|metadata| metadata.is_file()) {
                tokio::fs::set_permissions(&temporary, metadata.permissions())
                    .await
                    .map_err(|error| io_error(&temporary, &error))?;
            }
            tokio::fs::rename(&temporary, &target)
                .await
                .map_err(|error| io_error(&target, &error))
        }
        .await;
        if written.is_err() {
            let _ = tokio::fs::remove_file(&temporary).await;
        }
        written
    }

    async fn stop(&self) -> Result<()> {
        if self.view == 0 {
            self.shared.stopped.store(true, Ordering::SeqCst);
            self.shared.kill_view(None);
        } else {
            self.shared.kill_view(Some(self.view));
        }
        Ok(())
    }

    async fn destroy(&self) -> Result<()> {
        self.stop().await?;
        let doomed = if self.view == 0 {
            Some(self.shared.folder.clone())
        } else if self.owns_directory {
            Some(self.working_directory.clone())
        } else {
            None
        };
        if let Some(doomed) = doomed {
            match tokio::fs::remove_dir_all(&doomed).await {
                Ok(()) => {}
                Err(error) if error.kind() == ErrorKind::NotFound => {}
                Err(error) => return Err(io_error(Path::new(&doomed), &error)),
            }
        }
        Ok(())
    }

    async fn fork(&self, options: ForkOptions) -> Result<Arc<dyn SandboxSession>> {
        validate_ports(&options.ports, "ports")?;
        self.check_running()?;
        let requested = options.working_directory.unwrap_or_else(fresh_fork_name);
        let confined = self.confine(&requested).await?;
        tokio::fs::create_dir_all(&confined.absolute)
            .await
            .map_err(|error| io_error(Path::new(&confined.absolute), &error))?;
        let owns_directory = confined.absolute != self.working_directory
            && paths::is_within(&confined.absolute, &self.working_directory);
        Ok(Arc::new(LocalSandboxSession {
            shared: self.shared.clone(),
            view: random_u64() | 1,
            policy: self.policy.with_base(&confined.absolute)?,
            working_directory: confined.absolute,
            ports: options.ports,
            owns_directory,
        }))
    }
}

/// Copies a process's output stream into its pipe until it ends.
async fn pump(stream: Option<impl AsyncRead + Unpin>, writer: &OutputWriter) {
    if let Some(mut stream) = stream {
        let mut buffer = vec![0; 64 * 1024];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => writer.write(Bytes::copy_from_slice(&buffer[..read])).await,
            }
        }
    }
    writer.close();
}

/// Sends SIGKILL to the process group `group`.
fn kill_group(group: i32) {
    if group > 1 {
        // SAFETY: kill(2) takes plain integers and has no memory effects; a negative pid names the
        // process group, which each spawned command leads (`process_group(0)`).
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
}

fn is_not_a_directory(error: &std::io::Error) -> bool {
    error.raw_os_error() == Some(libc::ENOTDIR)
}

/// An I/O failure at `path`, in words.
fn io_error(path: &Path, error: &std::io::Error) -> SessionError {
    SessionError::host(format!(
        "The local sandbox failed at {}: {error}.",
        path.display()
    ))
}
