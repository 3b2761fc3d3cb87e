//! Ending what a sandbox's commands leave behind: the processes that left their process group
//! (`setsid`, `nohup`, a plain `&` that outlives its shell) and the daemons that hold a port.
//!
//! Every command of a sandbox runs with [`MARKER`]`=<sandbox>/<view>` in its environment, which its
//! children inherit. A sweep reads `/proc` of this host and kills (`SIGKILL`) the processes of a
//! [`Scope`] that carry the mark of a view (or of any view of the sandbox), or that hold a socket
//! listening on one of the given ports. It sees the processes this process may read: all of them
//! as root (the Docker sandbox's ports need root anyway), its own user's otherwise. A process
//! that cleared its environment escapes the mark, not the ports.
//!
//! Invariant: a sweep only kills processes inside its scope (the container's process namespace,
//! or the sandbox's user), never this process.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;

/// The environment variable that marks a sandbox's processes.
pub(crate) const MARKER: &str = "HARNESS_SESSIONS_VIEW";

/// Which processes of this host belong to the sandbox being swept.
#[derive(Debug, Clone)]
pub(crate) enum Scope {
    /// Those in the process namespace of this inode (a container's).
    Namespace(u64),
    /// Those of this user id (a local sandbox's own user, when run as root).
    User(u32),
    /// Those carrying a mark that starts with this (`<sandbox>/`): a local sandbox run as this
    /// process's user, whose other processes are not the sandbox's.
    Marked(String),
}

/// What a sweep ends.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sweep {
    /// Kill processes whose mark starts with this (`<sandbox>/<view>` or `<sandbox>/`).
    pub(crate) mark: Option<String>,
    /// Kill processes holding a socket that listens on one of these ports.
    pub(crate) ports: Vec<u16>,
    /// Kill every process of the scope (its own user, a namespace of its own).
    pub(crate) everything: bool,
}

/// The inodes of the sockets listening on `ports`, in the network namespace of `pid` (this
/// process's own for `None`).
fn listening(pid: Option<u32>, ports: &[u16]) -> HashSet<u64> {
    let mut inodes = HashSet::new();
    if ports.is_empty() {
        return inodes;
    }
    let base = match pid {
        Some(pid) => format!("/proc/{pid}/net"),
        None => "/proc/self/net".to_owned(),
    };
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("{base}/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            if fields.len() < 10 || fields[3] != "0A" {
                continue;
            }
            let port = fields[1]
                .rsplit(':')
                .next()
                .and_then(|hex| u16::from_str_radix(hex, 16).ok());
            if port.is_some_and(|port| ports.contains(&port)) {
                if let Ok(inode) = fields[9].parse() {
                    inodes.insert(inode);
                }
            }
        }
    }
    inodes
}

/// Whether process `pid` holds one of the sockets `inodes`.
fn holds(pid: u32, inodes: &HashSet<u64>) -> bool {
    if inodes.is_empty() {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    entries.flatten().any(|entry| {
        std::fs::read_link(entry.path())
            .ok()
            .and_then(|target| {
                let target = target.to_str()?.to_owned();
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse::<u64>()
                    .ok()
            })
            .is_some_and(|inode| inodes.contains(&inode))
    })
}

/// Whether process `pid` carries a mark starting with `mark`.
fn marked(pid: u32, mark: &str) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let wanted = format!("{MARKER}={mark}");
    environ
        .split(|byte| *byte == 0)
        .any(|entry| entry.starts_with(wanted.as_bytes()))
}

/// Whether process `pid` is in `scope`.
fn in_scope(pid: u32, scope: &Scope) -> bool {
    match scope {
        Scope::Namespace(inode) => {
            std::fs::metadata(format!("/proc/{pid}/ns/pid")).is_ok_and(|meta| meta.ino() == *inode)
        }
        Scope::User(uid) => {
            std::fs::metadata(format!("/proc/{pid}")).is_ok_and(|meta| meta.uid() == *uid)
        }
        Scope::Marked(mark) => marked(pid, mark),
    }
}

/// Kills what `sweep` names in `scope`; `namespace_of` is a process of the namespace whose
/// sockets the ports are looked up in (`None`: this process's). Returns how many were killed.
/// Runs a few rounds, so that children forked meanwhile end too.
pub(crate) fn sweep(scope: &Scope, namespace_of: Option<u32>, sweep: &Sweep) -> usize {
    let own = std::process::id();
    let mut killed = 0;
    for _ in 0..4 {
        let inodes = listening(namespace_of, &sweep.ports);
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return killed;
        };
        let mut round = 0;
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == own || pid <= 1 || !in_scope(pid, scope) {
                continue;
            }
            let chosen = sweep.everything
                || sweep.mark.as_deref().is_some_and(|mark| marked(pid, mark))
                || holds(pid, &inodes);
            if chosen {
                if let Ok(pid) = i32::try_from(pid) {
                    // SAFETY: kill(2) takes plain integers and has no memory effects.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                    round += 1;
                }
            }
        }
        killed += round;
        if round == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    killed
}
