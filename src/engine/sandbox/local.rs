//! The local sandbox: processes on this host, in a folder of their own. **No isolation.**
//!
//! Each session gets `<root>/<session id>/` with `workspace/` (its working directory), `home/`
//! (its `HOME`) and `tmp/` (its `TMPDIR`). Commands run through `/bin/sh -c` as the user of this
//! process, with a small environment (not this process's, unless `inherit_env`), each in a
//! process group of its own so that a kill or a stop ends what it started. Ports are this host's
//! ports on 127.0.0.1. The file API is confined to the session folder and the allowed folders
//! (`/tmp/harness` by default, where harnesses bootstrap): `..`, other absolute paths and symbolic
//! links that lead out are refused, every path resolved beneath a descriptor of its folder
//! ([`super::beneath`]), so that no link swapped in meanwhile leads out; a session folder replaced
//! by a link is refused. A process, though, can read and write whatever the user of this server
//! can. Use it for development and tests, never for code you do
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

use std::os::fd::AsFd;

use rustix::fs::{self, AtFlags, FileType, Mode, OFlags};

use super::beneath::{self, Beneath};
use super::bootstrap_gate::BootstrapGate;
use super::local_guard::{
    claim_ports, hide_server, make_searchable, open_to_sandboxes, prepare_child, sandbox_user,
    PortClaim,
};
use super::paths::{self, PathPolicy};
use super::process::{process_channel, ExitStatus, OutputWriter};
use super::sweep::{self, Scope, Sweep};
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
    /// Folders of this host, besides the session's folder, that the file API may reach (a
    /// harness bootstraps into one of them): created when missing, shared by every session.
    /// `None`: [`DEFAULT_ALLOWED_PATHS`].
    pub allowed_paths: Option<Vec<PathBuf>>,
}

/// The folders the file API reaches besides the session's folder when none are given: where
/// harnesses bootstrap (`/tmp/harness/claude-code/` for Claude Code).
pub const DEFAULT_ALLOWED_PATHS: &[&str] = &["/tmp/harness"];

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
        for path in options.allowed_paths.iter().flatten() {
            let valid = path
                .to_str()
                .and_then(paths::normalize_absolute)
                .is_some_and(|normalized| normalized != "/");
            if !valid {
                return Err(SessionError::input(
                    "allowedPaths",
                    format!(
                        "allowedPaths: {} is not an absolute path below `/` without `..`.",
                        path.display()
                    ),
                ));
            }
        }
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

    /// The allowed folders, normalized.
    fn allowed_paths(&self) -> Vec<String> {
        match &self.options.allowed_paths {
            Some(allowed) => allowed
                .iter()
                .filter_map(|path| path.to_str().and_then(paths::normalize_absolute))
                .collect(),
            None => DEFAULT_ALLOWED_PATHS
                .iter()
                .map(|path| (*path).to_owned())
                .collect(),
        }
    }

    /// The session folder `name`, opened beneath the root without following a link, and the
    /// allowed folders, made when missing.
    fn open_folder(&self, name: String) -> Result<Arc<dyn SandboxSession>> {
        let root = std::fs::canonicalize(&self.options.root)
            .map_err(|error| io_error(&self.options.root, &error))?;
        let root = root
            .to_str()
            .ok_or_else(|| SessionError::input("root", "root: the path is not valid UTF-8."))?
            .to_owned();
        let folder = paths::join(&root, &name);
        let user = sandbox_user(&name);
        let folder_root = Beneath::open(&folder)
            .map_err(|error| refused_folder(&folder, &error))?
            .owned_by(user);
        let mut beneath = vec![Arc::new(folder_root)];
        for allowed in self.allowed_paths() {
            std::fs::create_dir_all(&allowed)
                .map_err(|error| io_error(Path::new(&allowed), &error))?;
            if user.is_some() {
                open_to_sandboxes(Path::new(&allowed))
                    .map_err(|error| io_error(Path::new(&allowed), &error))?;
            }
            let parent = std::fs::canonicalize(paths::parent(&allowed))
                .map_err(|error| io_error(Path::new(&allowed), &error))?;
            let last = allowed.rsplit('/').next().unwrap_or_default();
            let real = paths::join(parent.to_str().unwrap_or("/"), last);
            // What the file API writes there is the session's own, so that the commands of the
            // session that bootstraps a harness there can finish its install.
            let opened = Beneath::open(&real)
                .map_err(|error| refused_folder(&real, &error))?
                .owned_by(user);
            beneath.push(Arc::new(opened));
        }
        let workspace = paths::join(&folder, "workspace");
        let home = paths::join(&folder, "home");
        let tmp = paths::join(&folder, "tmp");
        let policy = PathPolicy::new(
            beneath.iter().map(|root| root.path().to_owned()),
            &workspace,
        )?;
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
            user,
            folder,
            beneath,
            home,
            env,
            processes: Mutex::new(HashMap::new()),
            stopped: AtomicBool::new(false),
            bootstrap: BootstrapGate::default(),
        });
        let claim = shared.claim_ports(&self.options.ports);
        Ok(Arc::new(LocalSandboxSession {
            shared,
            view: 0,
            working_directory: workspace,
            ports: claim.ports().to_vec(),
            claim: Mutex::new(Some(claim)),
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
        if let Some((uid, gid)) = sandbox_user(&name) {
            // Run as root: the folder is its own user's, and only theirs.
            use std::os::unix::fs::PermissionsExt;
            let root = std::fs::canonicalize(&self.options.root)
                .map_err(|error| io_error(&self.options.root, &error))?;
            make_searchable(&root).map_err(|error| io_error(&root, &error))?;
            for dir in [
                folder.clone(),
                folder.join("workspace"),
                folder.join("home"),
                folder.join("tmp"),
            ] {
                std::os::unix::fs::lchown(&dir, Some(uid), Some(gid))
                    .map_err(|error| io_error(&dir, &error))?;
            }
            std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700))
                .map_err(|error| io_error(&folder, &error))?;
        }
        self.open_folder(name)
    }

    async fn find(&self, session_id: &str) -> Result<Option<Arc<dyn SandboxSession>>> {
        let name = view::resource_name(session_id);
        let folder = self.folder(&name);
        // The folder itself is never followed through a link: one that a command replaced by a
        // link is refused, never resumed elsewhere.
        let root = match tokio::fs::symlink_metadata(&folder).await {
            Ok(metadata) if metadata.is_dir() => match Beneath::open(folder.to_str().unwrap_or("/")) {
                Ok(root) => root,
                Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
                Err(error) => return Err(refused_folder(&folder.display().to_string(), &error)),
            },
            Ok(_) => {
                return Err(SessionError::host(format!(
                    "The local sandbox folder {} is not a folder (a symbolic link?): refusing to use it.",
                    folder.display()
                )))
            }
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(io_error(&folder, &error)),
        };
        match root.directory(&["workspace"]) {
            Ok(_) => self.open_folder(name).map(Some),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error(&folder, &error)),
        }
    }
}

/// What every view of one local sandbox shares.
#[derive(Debug)]
struct LocalBox {
    name: String,
    /// The user its commands run as (`uid`, `gid`), when this process is root.
    user: Option<(u32, u32)>,
    folder: String,
    /// The session's folder first, then the allowed folders: every path of the file API is
    /// resolved beneath one of them.
    beneath: Vec<Arc<Beneath>>,
    home: String,
    env: Vec<(String, String)>,
    /// The process groups running, by the view that started them.
    processes: Mutex<HashMap<i32, u64>>,
    stopped: AtomicBool,
    /// One harness bootstrap at a time in the shared bootstrap folders.
    bootstrap: BootstrapGate,
}

impl LocalBox {
    fn processes(&self) -> MutexGuard<'_, HashMap<i32, u64>> {
        self.processes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The mark of `view`'s processes ([`sweep::MARKER`]), or the start of every view's mark.
    fn mark(&self, view: Option<u64>) -> String {
        match view {
            Some(view) => format!("{}/{view:x}", self.folder),
            None => format!("{}/", self.folder),
        }
    }

    /// The processes of this sandbox: its user's when it has one, else those carrying its mark.
    fn scope(&self) -> Scope {
        match self.user {
            Some((uid, _)) => Scope::User(uid),
            None => Scope::Marked(self.mark(None)),
        }
    }

    /// Holds `ports` for a view, ending first what this sandbox left listening on them.
    fn claim_ports(&self, ports: &[u16]) -> PortClaim {
        let scope = self.scope();
        claim_ports(ports, |ports| {
            sweep::sweep(
                &scope,
                None,
                &Sweep {
                    ports: ports.to_vec(),
                    ..Sweep::default()
                },
            );
        })
    }

    /// Ends what `view` (every view for `None`) left running: daemons and processes that left
    /// their group included, and whatever of the sandbox listens on `ports`.
    async fn sweep(&self, view: Option<u64>, ports: &[u16]) {
        let scope = self.scope();
        let sweep = Sweep {
            mark: Some(self.mark(view)),
            ports: ports.to_vec(),
            everything: view.is_none() && self.user.is_some(),
        };
        let _ = tokio::task::spawn_blocking(move || sweep::sweep(&scope, None, &sweep)).await;
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
    /// The ports held for this view, until it stops.
    claim: Mutex<Option<PortClaim>>,
    policy: PathPolicy,
    owns_directory: bool,
}

impl LocalSandboxSession {
    /// The folder of the whole sandbox.
    pub fn folder(&self) -> &str {
        &self.shared.folder
    }

    /// `path` checked against the sandbox's directories: the root it lies in, still in place,
    /// and its components below that root.
    fn confine(&self, path: &str) -> Result<Target> {
        let confined = self.policy.resolve(path)?;
        let beneath = self
            .shared
            .beneath
            .iter()
            .find(|root| root.path() == confined.root)
            .cloned()
            .ok_or_else(|| self.policy.outside(path))?;
        if !beneath.in_place() {
            return Err(moved_root(beneath.path()));
        }
        let components = confined
            .components_below_root()
            .into_iter()
            .map(str::to_owned)
            .collect();
        Ok(Target {
            path: path.to_owned(),
            absolute: confined.absolute,
            beneath,
            components,
        })
    }

    /// The error of a lookup of `target` that failed.
    fn lookup_error(&self, target: &Target, error: &std::io::Error) -> SessionError {
        if beneath::is_outside(error) {
            self.policy.leads_out(&target.path)
        } else if error.raw_os_error() == Some(libc::ELOOP) {
            SessionError::input(
                target.path.clone(),
                format!(
                    "The path {:?} goes through too many symbolic links, or one that changed while it was opened.",
                    target.path
                ),
            )
        } else {
            io_error(Path::new(&target.absolute), error)
        }
    }

    fn check_running(&self) -> Result<()> {
        if self.shared.stopped.load(Ordering::SeqCst) {
            return Err(SessionError::host(format!(
                "The local sandbox {} is stopped: resume its session to use it again.",
                self.shared.folder
            )));
        }
        if !self.shared.beneath[0].in_place() {
            return Err(moved_root(&self.shared.folder));
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
            self.working_directory,
            self.shared.home,
            self.shared
                .beneath
                .iter()
                .map(|root| root.path())
                .collect::<Vec<_>>()
                .join(", ")
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
            .env(sweep::MARKER, self.shared.mark(Some(self.view)))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0);
        if let Some((uid, gid)) = self.shared.user {
            child.uid(uid).gid(gid);
        }
        hide_server();
        // SAFETY: `prepare_child` makes async-signal-safe system calls only.
        unsafe {
            child.pre_exec(prepare_child);
        }
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
        let target = self.confine(path)?;
        let gate = self.shared.bootstrap.before_read(&target.absolute).await;
        let opened = {
            let beneath = target.beneath.clone();
            let components = target.components.clone();
            blocking(move || {
                let parts: Vec<&str> = components.iter().map(String::as_str).collect();
                // Non-blocking to open: a FIFO planted at the path must not hang the read.
                let fd =
                    beneath.open_at(&parts, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty())?;
                let kind = FileType::from_raw_mode(fs::fstat(&fd)?.st_mode);
                fs::fcntl_setfl(&fd, OFlags::empty())?;
                Ok::<_, std::io::Error>((fd, kind))
            })
            .await
        };
        let missing = matches!(&opened, Err(error) if error.kind() == ErrorKind::NotFound || is_not_a_directory(error));
        self.shared
            .bootstrap
            .after_read(&target.absolute, gate, missing);
        let file = match opened {
            Ok((_, FileType::Directory)) => {
                return Err(SessionError::input(
                    path,
                    format!("The path {path:?} is a directory, not a file."),
                ))
            }
            Ok((_, FileType::Fifo | FileType::Socket)) => {
                return Err(SessionError::input(
                    path,
                    format!("The path {path:?} is a pipe or a socket, not a file."),
                ))
            }
            Ok((fd, _)) => tokio::fs::File::from_std(std::fs::File::from(fd)),
            Err(_) if missing => return Ok(None),
            Err(error) => return Err(self.lookup_error(&target, &error)),
        };
        let absolute = target.absolute;
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
        let target = self.confine(path)?;
        let Some((name, parent)) = target.components.split_last() else {
            return Err(SessionError::input(
                path,
                format!("The path {path:?} is a directory, not a file."),
            ));
        };
        let name = name.clone();
        let temporary = format!(".{name}.{:016x}.tmp", random_u64());
        // The directory (made beneath the root), what is at the path now, and the temporary file,
        // created in that directory without following a link.
        let prepared = {
            let beneath = target.beneath.clone();
            let components = target.components.clone();
            let parent = parent.to_vec();
            let name = name.clone();
            let temporary = temporary.clone();
            blocking(move || {
                let all: Vec<&str> = components.iter().map(String::as_str).collect();
                let parent: Vec<&str> = parent.iter().map(String::as_str).collect();
                let directory = beneath
                    .make_directories(&parent)
                    .map_err(Prepare::Directory)?;
                // A link at the path is replaced, never written through; one that leads out is
                // refused all the same.
                match beneath.open_at(&all, OFlags::PATH, Mode::empty()) {
                    Err(error) if beneath::is_outside(&error) => return Err(Prepare::Other(error)),
                    _ => {}
                }
                let previous =
                    match fs::statat(&directory, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(stat) => Some(stat),
                        Err(rustix::io::Errno::NOENT) => None,
                        Err(error) => return Err(Prepare::Other(error.into())),
                    };
                let previous = match previous {
                    Some(stat) => match FileType::from_raw_mode(stat.st_mode) {
                        FileType::Directory => return Err(Prepare::IsDirectory),
                        FileType::RegularFile => Some(stat.st_mode & 0o7777),
                        _ => None,
                    },
                    None => None,
                };
                let file = fs::openat(
                    &directory,
                    temporary.as_str(),
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o666),
                )
                .map_err(|error| Prepare::Other(error.into()))?;
                beneath.hand_over(file.as_fd()).map_err(Prepare::Other)?;
                Ok::<_, Prepare>((directory, file, previous))
            })
            .await
        };
        let (directory, file, previous) = match prepared {
            Ok(prepared) => prepared,
            Err(Prepare::IsDirectory) => {
                return Err(SessionError::input(
                    path,
                    format!("The path {path:?} is a directory, not a file."),
                ))
            }
            Err(Prepare::Directory(error))
                if error.raw_os_error() == Some(libc::EEXIST) || is_not_a_directory(&error) =>
            {
                return Err(SessionError::input(
                    path,
                    format!("Cannot write {path:?}: a file is in the way of its directory."),
                ));
            }
            Err(Prepare::Directory(error) | Prepare::Other(error)) => {
                return Err(self.lookup_error(&target, &error))
            }
        };
        let directory = Arc::new(directory);
        let shown = PathBuf::from(&target.absolute);
        let written = async {
            let mut file = tokio::fs::File::from_std(std::fs::File::from(file));
            while let Some(chunk) = content.next().await {
                file.write_all(&chunk?)
                    .await
                    .map_err(|error| io_error(&shown, &error))?;
            }
            file.flush()
                .await
                .map_err(|error| io_error(&shown, &error))?;
            let file = file.into_std().await;
            let directory = directory.clone();
            let name = name.clone();
            let temporary = temporary.clone();
            blocking(move || {
                if let Some(mode) = previous {
                    fs::fchmod(&file, Mode::from_raw_mode(mode))?;
                }
                drop(file);
                fs::renameat(&*directory, temporary.as_str(), &*directory, name.as_str())?;
                Ok(())
            })
            .await
            .map_err(|error| io_error(&shown, &error))
        }
        .await;
        if written.is_ok() {
            self.shared.bootstrap.after_write(&target.absolute);
        } else {
            let _ = blocking(move || {
                fs::unlinkat(&*directory, temporary.as_str(), AtFlags::empty())?;
                Ok::<(), std::io::Error>(())
            })
            .await;
        }
        written
    }

    async fn stop(&self) -> Result<()> {
        if self.view == 0 {
            self.shared.stopped.store(true, Ordering::SeqCst);
            self.shared.kill_view(None);
            self.shared.sweep(None, &self.ports).await;
            self.shared.bootstrap.release_all();
        } else {
            self.shared.kill_view(Some(self.view));
            self.shared.sweep(Some(self.view), &self.ports).await;
        }
        // Its processes are gone: its ports may be handed out again.
        self.claim
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        Ok(())
    }

    async fn destroy(&self) -> Result<()> {
        self.stop().await?;
        // Removal never follows a link: the session's folder is removed from its parent (a link
        // put in its place is unlinked, not followed), a fork's folder beneath the session's.
        let (parent, name) = if self.view == 0 {
            let folder = self.shared.folder.clone();
            let name = folder.rsplit('/').next().unwrap_or_default().to_owned();
            let parent = paths::parent(&folder).to_owned();
            let opened = blocking(move || Beneath::open(&parent)).await;
            match opened {
                Ok(parent) => (parent.directory(&[]), name),
                Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
                Err(error) => return Err(io_error(Path::new(&folder), &error)),
            }
        } else if self.owns_directory {
            let target = match self.confine(&self.working_directory) {
                Ok(target) => target,
                Err(_) => return Ok(()),
            };
            let Some((name, parent)) = target.components.split_last() else {
                return Ok(());
            };
            let parts: Vec<&str> = parent.iter().map(String::as_str).collect();
            (target.beneath.directory(&parts), name.clone())
        } else {
            return Ok(());
        };
        let directory = match parent {
            Ok(directory) => directory,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(io_error(Path::new(&self.working_directory), &error)),
        };
        blocking(move || beneath::remove_tree(directory.as_fd(), &name))
            .await
            .map_err(|error| io_error(Path::new(&self.working_directory), &error))
    }

    async fn fork(&self, options: ForkOptions) -> Result<Arc<dyn SandboxSession>> {
        validate_ports(&options.ports, "ports")?;
        self.check_running()?;
        let requested = options.working_directory.unwrap_or_else(fresh_fork_name);
        let target = self.confine(&requested)?;
        let made = {
            let beneath = target.beneath.clone();
            let components = target.components.clone();
            blocking(move || {
                let parts: Vec<&str> = components.iter().map(String::as_str).collect();
                beneath.make_directories(&parts).map(drop)
            })
            .await
        };
        made.map_err(|error| self.lookup_error(&target, &error))?;
        let confined = target;
        let owns_directory = confined.absolute != self.working_directory
            && paths::is_within(&confined.absolute, &self.working_directory);
        let claim = self.shared.claim_ports(&options.ports);
        Ok(Arc::new(LocalSandboxSession {
            shared: self.shared.clone(),
            view: random_u64() | 1,
            policy: self.policy.with_base(&confined.absolute)?,
            working_directory: confined.absolute,
            ports: claim.ports().to_vec(),
            claim: Mutex::new(Some(claim)),
            owns_directory,
        }))
    }
}

/// A path of the file API once checked: the root it lies in and its components below it.
struct Target {
    /// The path as given, for errors.
    path: String,
    /// The normalized absolute path, for messages.
    absolute: String,
    beneath: Arc<Beneath>,
    components: Vec<String>,
}

/// Why a write could not be prepared.
enum Prepare {
    /// Its directory could not be made.
    Directory(std::io::Error),
    /// The path is a directory.
    IsDirectory,
    /// Anything else.
    Other(std::io::Error),
}

/// Runs the blocking file system calls `work` on tokio's blocking threads.
async fn blocking<T: Send + 'static, E: From<std::io::Error> + Send + 'static>(
    work: impl FnOnce() -> std::result::Result<T, E> + Send + 'static,
) -> std::result::Result<T, E> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|error| Err(std::io::Error::other(error.to_string()).into()))
}

impl From<std::io::Error> for Prepare {
    fn from(error: std::io::Error) -> Self {
        Prepare::Other(error)
    }
}

/// The refusal of a sandbox folder that is not a plain folder (a link, a file).
fn refused_folder(folder: &str, error: &std::io::Error) -> SessionError {
    match error.raw_os_error() {
        Some(libc::ENOTDIR | libc::ELOOP) => SessionError::host(format!(
            "The local sandbox folder {folder} is not a folder (a symbolic link?): refusing to use it."
        )),
        _ => io_error(Path::new(folder), error),
    }
}

/// The refusal of a sandbox whose folder `folder` was moved, removed or replaced since it was
/// opened.
fn moved_root(folder: &str) -> SessionError {
    SessionError::host(format!(
        "The local sandbox folder {folder} was moved, removed or replaced (by a symbolic link?) since the sandbox was opened: refusing to use it. Resume the session to open it again."
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pipe_planted_at_a_path_is_refused_not_waited_on() {
        let temp = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let provider = LocalSandbox::new(LocalSandboxOptions {
            root: temp.path().to_path_buf(),
            allowed_paths: Some(Vec::new()),
            ..LocalSandboxOptions::default()
        })
        .unwrap_or_else(|error| panic!("{error}"));
        let session = provider
            .create(Some("fifo"))
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        let made = session
            .run(Command::new("mkfifo pipe"))
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(made.exit_code, 0, "{}", made.stderr);
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            session.read_text("pipe"),
        )
        .await
        .unwrap_or_else(|_| panic!("the read of a pipe hung"));
        assert!(
            matches!(&read, Err(SessionError::Input { message, .. }) if message.contains("pipe")),
            "{read:?}"
        );
        session
            .destroy()
            .await
            .unwrap_or_else(|error| panic!("{error}"));
    }

    /// Whether process `pid` is gone, waiting up to 30 s (a zombie counts as gone).
    async fn gone(pid: u32) -> bool {
        for _ in 0..300 {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'));
            if state.is_empty() || zombie {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        false
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commands_keep_nothing_of_the_server_and_end_at_stop() {
        let temp = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let provider = LocalSandbox::new(LocalSandboxOptions {
            root: temp.path().join("sandboxes"),
            allowed_paths: Some(Vec::new()),
            ..LocalSandboxOptions::default()
        })
        .unwrap_or_else(|error| panic!("{error}"));
        let session = provider
            .create(Some("guarded"))
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        let run = |script: String| {
            let session = session.clone();
            async move {
                session
                    .run(Command::new(script))
                    .await
                    .unwrap_or_else(|error| panic!("{error}"))
            }
        };
        // A descriptor of the server's without close-on-exec is not inherited.
        let path = std::ffi::CString::new("/dev/null").unwrap_or_default();
        // SAFETY: open(2) with a valid C string; the descriptor is closed below.
        let leaked = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY) };
        let server = std::process::id();
        let environ = run(format!("cat /proc/{server}/environ")).await;
        assert_ne!(environ.exit_code, 0, "the server's environment was read");
        let descriptors = run("ls /proc/$$/fd".to_owned()).await;
        // SAFETY: closes the descriptor opened above.
        unsafe { libc::close(leaked) };
        assert!(
            !descriptors
                .stdout
                .split_whitespace()
                .any(|fd| fd == leaked.to_string()),
            "the server's descriptor {leaked} was inherited: {}",
            descriptors.stdout
        );
        let privileges = run("grep NoNewPrivs /proc/self/status".to_owned()).await;
        assert!(privileges.stdout.contains('1'), "{}", privileges.stdout);
        // SAFETY: geteuid(2) takes nothing.
        if unsafe { libc::geteuid() } == 0 {
            let uid = run("id -u".to_owned()).await;
            assert_ne!(
                uid.stdout.trim(),
                "0",
                "a command of root's sandbox ran as root"
            );
            assert!(!uid.stdout.trim().is_empty(), "{uid:?}");
            let shadow = run("cat /etc/shadow".to_owned()).await;
            assert_ne!(shadow.exit_code, 0, "/etc/shadow was read");
            let signal = run(format!("kill -0 {server}")).await;
            assert_ne!(signal.exit_code, 0, "the server could be signalled");
            session
                .write_text("made-by-the-server.txt", "x")
                .await
                .unwrap_or_else(|error| panic!("{error}"));
            let append = run("echo y >> made-by-the-server.txt && mkdir -p a/b".to_owned()).await;
            assert_eq!(append.exit_code, 0, "{}", append.stderr);
        }
        // Processes that leave the command's group, or outlive its shell, end at stop().
        let started = run(
            "setsid sleep 300 >/dev/null 2>&1 & echo $!; nohup sleep 301 >/dev/null 2>&1 & echo $!; (sleep 302 >/dev/null 2>&1 &) ; sleep 303 >/dev/null 2>&1 & echo $!"
                .to_owned(),
        )
        .await;
        let mut pids: Vec<u32> = started
            .stdout
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect();
        let orphan = run(
            "pgrep -f 'sleep 302' || ps -eo pid,args | awk '/sleep 302$/ {print $1}'".to_owned(),
        )
        .await;
        pids.extend(
            orphan
                .stdout
                .split_whitespace()
                .filter_map(|pid| pid.parse::<u32>().ok()),
        );
        assert!(pids.len() >= 3, "{started:?} {orphan:?}");
        session
            .stop()
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        for pid in pids {
            assert!(gone(pid).await, "process {pid} outlived stop()");
        }
        session
            .destroy()
            .await
            .unwrap_or_else(|error| panic!("{error}"));
    }
}
