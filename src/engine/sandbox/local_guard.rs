//! What the local sandbox can hold its commands to, on a host it does not isolate them from.
//!
//! - **Their user.** When this process runs as root, each sandbox's commands run as a user of
//!   their own ([`sandbox_user`]: no name, a uid derived from the sandbox's folder name, one
//!   group shared by the sandboxes' users) that owns the sandbox's folder (`0700`) and nothing
//!   else but what it writes in the shared bootstrap folders ([`open_to_sandboxes`]). As any
//!   other user they run as that user.
//! - **What they inherit.** Every descriptor of this process above stderr is closed across the
//!   `exec` ([`prepare_child`]), `no_new_privs` is set (no setuid program gives privileges back),
//!   and this process is made non-dumpable once ([`hide_server`]), which makes its
//!   `/proc/<pid>/environ` (the server's secrets) and memory unreadable to any other process
//!   that is not root, its own user's included.
//! - **Their ports.** A port is held by one live view of this process at most, and is checked
//!   free (bound) before it is handed out ([`claim_ports`]); a port that is taken is replaced by
//!   one the kernel picks, and the view lists that one.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::{Mutex, MutexGuard, Once};

/// The group of every local sandbox's user when this process is root: the group that may write
/// in the shared bootstrap folders (`allowedPaths`), and nothing else.
pub(crate) const SANDBOX_GROUP: u32 = 200_000;

/// The uid and gid a local sandbox's commands run as, when this process is root: a uid in
/// `200001..300000`, from the SHA-256 of the sandbox's folder name (two sandboxes share one
/// about once in 100,000 pairs), and [`SANDBOX_GROUP`]. `None` when this process is not root.
pub(crate) fn sandbox_user(name: &str) -> Option<(u32, u32)> {
    use sha2::{Digest, Sha256};
    // SAFETY: geteuid(2) takes nothing and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let digest = Sha256::digest(name.as_bytes());
    let number = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    Some((200_001 + number % 99_999, SANDBOX_GROUP))
}

/// Opens a shared bootstrap folder to every sandbox's user, when this process is root: owned by
/// root and [`SANDBOX_GROUP`], mode `3775` (group-writable, new entries keep the group, and an
/// entry can be removed or renamed by its owner only).
///
/// # Errors
///
/// When the folder's owner or mode cannot be changed.
pub(crate) fn open_to_sandboxes(folder: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::os::unix::fs::chown(folder, Some(0), Some(SANDBOX_GROUP))?;
    std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o3775))
}

/// Lets every user search (not list) `folder` and each folder above it: adds the `o+x` bit
/// where it is missing, so that a sandbox's own user reaches its folder by its absolute path
/// (its `HOME`, its `TMPDIR`) below a private folder such as one of `mkdtemp`'s. Run as root
/// only; the sandbox folders themselves stay `0700`, and the root `0711` (not listable).
///
/// # Errors
///
/// When a folder's mode cannot be read or changed.
pub(crate) fn make_searchable(folder: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    for ancestor in folder.ancestors() {
        let meta = std::fs::metadata(ancestor)?;
        let mode = meta.permissions().mode();
        let wanted = if ancestor == folder {
            (mode & !0o006) | 0o011
        } else {
            mode | 0o001
        };
        if mode & 0o7777 != wanted & 0o7777 {
            std::fs::set_permissions(ancestor, std::fs::Permissions::from_mode(wanted & 0o7777))?;
        }
    }
    Ok(())
}

/// Makes this process non-dumpable, once: its `/proc/<pid>/environ`, `mem` and descriptors can
/// then be read by root only, not by the commands of a local sandbox (which run as another user
/// when this process is root, and as this very user otherwise). Core dumps and debuggers that
/// attach as the same user are refused too.
pub(crate) fn hide_server() {
    static HIDDEN: Once = Once::new();
    HIDDEN.call_once(|| {
        // SAFETY: prctl(2) with PR_SET_DUMPABLE takes plain integers and touches no memory.
        unsafe {
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
    });
}

/// What a command's process does between `fork` and `exec`: `no_new_privs`, and every
/// descriptor above stderr marked close-on-exec (the standard library's own error pipe is
/// close-on-exec already, so it still reports a failed `exec`).
///
/// # Errors
///
/// When `prctl` fails.
pub(crate) fn prepare_child() -> std::io::Result<()> {
    // SAFETY: async-signal-safe system calls with plain integer arguments, called in the child
    // between fork and exec.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // close_range(3, ~0, CLOSE_RANGE_CLOEXEC): Linux 5.11 and later; on older kernels the
        // descriptors this process opened itself are close-on-exec already.
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
    }
    Ok(())
}

fn held_ports() -> MutexGuard<'static, BTreeSet<u16>> {
    static HELD: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    HELD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Ports held by a live view of a local sandbox; given back when dropped.
#[derive(Debug, Default)]
pub(crate) struct PortClaim {
    ports: Vec<u16>,
}

impl PortClaim {
    /// The ports held, in the order asked for.
    pub(crate) fn ports(&self) -> &[u16] {
        &self.ports
    }
}

impl Drop for PortClaim {
    fn drop(&mut self) {
        let mut held = held_ports();
        for port in &self.ports {
            held.remove(port);
        }
    }
}

/// Whether `port` can be bound on this host's loopback now.
fn is_free(port: u16) -> bool {
    TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// A port the kernel picks, free now and held by no view.
fn fresh_port(held: &BTreeSet<u16>) -> Option<u16> {
    for _ in 0..32 {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).ok()?;
        let port = listener.local_addr().ok()?.port();
        if !held.contains(&port) {
            return Some(port);
        }
    }
    None
}

/// Holds `wanted` for a view: each port that no live view holds and that is free (checked by
/// binding it), or else one the kernel picks. `clear` runs first for the ports no view holds, to
/// end what the sandbox left listening on them.
pub(crate) fn claim_ports(wanted: &[u16], clear: impl FnOnce(&[u16])) -> PortClaim {
    if wanted.is_empty() {
        return PortClaim::default();
    }
    let unheld: Vec<u16> = {
        let held = held_ports();
        wanted
            .iter()
            .copied()
            .filter(|port| !held.contains(port))
            .collect()
    };
    if unheld.iter().any(|port| !is_free(*port)) {
        clear(&unheld);
    }
    let mut held = held_ports();
    let mut ports = Vec::with_capacity(wanted.len());
    for port in wanted {
        let chosen = if !held.contains(port) && is_free(*port) {
            Some(*port)
        } else {
            fresh_port(&held)
        };
        if let Some(chosen) = chosen {
            held.insert(chosen);
            ports.push(chosen);
        }
    }
    PortClaim { ports }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_is_held_by_one_view_at_most() {
        let listener = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let first = claim_ports(&[port], |_| {});
        assert_eq!(first.ports(), [port]);
        let second = claim_ports(&[port], |_| {});
        assert_eq!(second.ports().len(), 1);
        assert_ne!(
            second.ports()[0],
            port,
            "a held port is not handed out again"
        );
        drop(first);
        let busy = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).unwrap();
        let third = claim_ports(&[port], |_| {});
        assert_ne!(third.ports()[0], port, "a port in use is not handed out");
        drop(busy);
    }
}
