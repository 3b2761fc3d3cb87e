//! The disk bound of a Docker sandbox (`diskBytes`): a sparse ext4 image file per container,
//! loop-mounted on this host and bind-mounted into the container over its writable folders (the
//! working directory, `HOME` and `/tmp`).
//!
//! Why this way: `--storage-opt size` needs overlay2 on xfs with project quotas, which a stock
//! engine on ext4 does not have; a file system of a fixed size is bounded by the kernel whatever
//! the engine's storage. Writes past it fail inside the sandbox with `ENOSPC`, and the image
//! never takes more of the host's disk than its size (it is sparse: only what was written).
//!
//! The image stays across stop and resume (its files survive a suspend), is found again after a
//! restart of the server (the container's label names it, and a resume mounts it again if it is
//! not), and is unmounted and removed when the sandbox is destroyed. It needs root, loop devices,
//! `mkfs.ext4` and the engine on this host; without them, a sandbox whose `diskBytes` was not
//! given is made without a bound (said once on standard error), one whose `diskBytes` was given
//! is refused.

use std::path::{Path, PathBuf};
use std::sync::Once;

use crate::engine::error::{Result, SessionError};

use super::client::Endpoint;

/// The default bound: 10 GiB.
pub const DEFAULT_DISK_BYTES: u64 = 10 * 1024 * 1024 * 1024;

/// The smallest bound ext4 makes a file system of with room to spare: 16 MiB.
pub const MIN_DISK_BYTES: u64 = 16 * 1024 * 1024;

/// Where images and their mount points are kept, unless `HARNESS_SESSIONS_DISK_DIR` says.
const DEFAULT_DIRECTORY: &str = "/var/lib/harness-sessions/disks";

/// The folders of an image, bound over the container's working directory, home and `/tmp`.
pub(crate) const FOLDERS: [&str; 3] = ["work", "home", "tmp"];

/// The folder images are kept in.
pub(crate) fn directory() -> PathBuf {
    std::env::var_os("HARNESS_SESSIONS_DISK_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_DIRECTORY), PathBuf::from)
}

/// Why a disk bound cannot be made here, or `None` when it can.
pub(crate) fn unavailable(endpoint: &Endpoint) -> Option<String> {
    match endpoint {
        Endpoint::Tcp(_) => {
            return Some(
                "the Docker Engine is reached over TCP: its disk is not this host's".into(),
            )
        }
        Endpoint::Unix(_) => {}
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("this process is not root (mounting an image needs it)".into());
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("this host has no loop devices (/dev/loop-control)".into());
    }
    if which("mkfs.ext4").is_none() || which("mount").is_none() || which("umount").is_none() {
        return Some("mkfs.ext4, mount or umount is missing".into());
    }
    None
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Says once per process that sandboxes are made without a disk bound, and why.
pub(crate) fn warn_unbounded(why: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        eprintln!(
            "harness-sessions: Docker sandboxes are made without a disk bound: {why} (give diskBytes to require one)."
        );
    });
}

/// An image of a container: its file and where it is mounted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Disk {
    /// The image file.
    pub(crate) image: PathBuf,
    /// Its mount point.
    pub(crate) mount: PathBuf,
}

impl Disk {
    /// A new image for the container `name`, of a name no other create takes (so that a
    /// container in use never loses its image to a create of the same name).
    pub(crate) fn new_for(name: &str) -> Disk {
        let dir = directory();
        let stem = format!("{name}-{:016x}", crate::engine::sandbox::view::random_u64());
        Disk {
            image: dir.join(format!("{stem}.img")),
            mount: dir.join(stem),
        }
    }

    /// The image at `image` (a container's label), when it is one this module names: a file
    /// `*.img` of [`directory`], never any other path a label could name.
    pub(crate) fn from_label(image: &str) -> Option<Disk> {
        let image = PathBuf::from(image);
        if image.parent() != Some(directory().as_path()) {
            return None;
        }
        let stem = image
            .file_name()?
            .to_str()?
            .strip_suffix(".img")?
            .to_owned();
        if stem.is_empty() || stem.contains('/') {
            return None;
        }
        let mount = image.parent()?.join(stem);
        Some(Disk { image, mount })
    }

    /// The host folder bound over the container's `folder` (one of [`FOLDERS`]).
    pub(crate) fn folder(&self, folder: &str) -> String {
        self.mount.join(folder).to_string_lossy().into_owned()
    }

    /// Makes a new image of `bytes`, mounts it, and makes its folders owned by `uid:gid`
    /// (`tmp` open to all, sticky).
    ///
    /// # Errors
    ///
    /// A host error when any step fails; what was made is undone.
    pub(crate) async fn make(&self, bytes: u64, uid: u32, gid: u32) -> Result<()> {
        let disk = self.clone();
        blocking(move || {
            disk.remove_now();
            let made = disk.make_now(bytes, uid, gid);
            if made.is_err() {
                disk.remove_now();
            }
            made
        })
        .await
    }

    fn make_now(&self, bytes: u64, uid: u32, gid: u32) -> Result<()> {
        let fail = |doing: &str, error: String| {
            SessionError::host(format!(
                "Cannot make the sandbox's disk (diskBytes) at {}: {doing} failed: {error}",
                self.image.display()
            ))
        };
        if let Some(parent) = self.image.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| fail("making its folder", e.to_string()))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700));
        }
        let file = std::fs::File::create(&self.image)
            .map_err(|e| fail("creating the image", e.to_string()))?;
        file.set_len(bytes)
            .map_err(|e| fail("sizing the image", e.to_string()))?;
        drop(file);
        run(
            "mkfs.ext4",
            &[
                "-q".as_ref(),
                "-F".as_ref(),
                "-m".as_ref(),
                "0".as_ref(),
                "-E".as_ref(),
                "lazy_itable_init=1,lazy_journal_init=1".as_ref(),
                self.image.as_os_str(),
            ],
        )
        .map_err(|e| fail("mkfs.ext4", e))?;
        std::fs::create_dir_all(&self.mount)
            .map_err(|e| fail("making the mount point", e.to_string()))?;
        self.mount_now().map_err(|e| fail("mount", e))?;
        for folder in FOLDERS {
            let path = self.mount.join(folder);
            std::fs::create_dir_all(&path).map_err(|e| fail("making a folder", e.to_string()))?;
            std::os::unix::fs::chown(&path, Some(uid), Some(gid))
                .map_err(|e| fail("chown", e.to_string()))?;
            use std::os::unix::fs::PermissionsExt;
            let mode = if folder == "tmp" { 0o1777 } else { 0o755 };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .map_err(|e| fail("chmod", e.to_string()))?;
        }
        let _ = std::fs::remove_dir_all(self.mount.join("lost+found"));
        Ok(())
    }

    fn is_mounted(&self) -> bool {
        let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return false;
        };
        let target = self.mount.to_string_lossy();
        mounts
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .any(|point| point == target)
    }

    fn mount_now(&self) -> std::result::Result<(), String> {
        run(
            "mount",
            &[
                "-o".as_ref(),
                "loop,nosuid,nodev".as_ref(),
                self.image.as_os_str(),
                self.mount.as_os_str(),
            ],
        )
    }

    /// Mounts the image again if it is not (after a reboot of the host), before its container
    /// starts.
    ///
    /// # Errors
    ///
    /// A host error when the image is gone or cannot be mounted.
    pub(crate) async fn ensure_mounted(&self) -> Result<()> {
        let disk = self.clone();
        blocking(move || {
            if disk.is_mounted() {
                return Ok(());
            }
            if !disk.image.is_file() {
                return Err(SessionError::host(format!(
                    "The sandbox's disk image {} is gone: destroy the session's sandbox and create it again.",
                    disk.image.display()
                )));
            }
            let _ = std::fs::create_dir_all(&disk.mount);
            disk.mount_now().map_err(|error| {
                SessionError::host(format!(
                    "Cannot mount the sandbox's disk image {}: {error}",
                    disk.image.display()
                ))
            })
        })
        .await
    }

    /// Unmounts and removes the image, its mount point too; what is already gone is fine.
    pub(crate) async fn remove(&self) {
        let disk = self.clone();
        let _ = blocking(move || {
            disk.remove_now();
            Ok(())
        })
        .await;
    }

    fn remove_now(&self) {
        // Still busy (a container being removed): detached now, freed when unused.
        if self.is_mounted() && run("umount", &[self.mount.as_os_str()]).is_err() {
            let _ = run("umount", &["-l".as_ref(), self.mount.as_os_str()]);
        }
        let _ = std::fs::remove_dir(&self.mount);
        let _ = std::fs::remove_file(&self.image);
    }
}

/// How old an image with no container naming it must be to count as left over: older than any
/// create under way (an image is made just before its container).
const ORPHAN_AGE: std::time::Duration = std::time::Duration::from_secs(600);

/// Removes the images of [`directory`] that no container names (`in_use`, the images named by
/// the engine's containers) and older than ten minutes: those of containers removed outside
/// harness-sessions (`docker rm`), or of a process that died between the image and the container.
pub(crate) async fn sweep_orphans(in_use: Vec<PathBuf>) {
    let _ = blocking(move || {
        let Ok(entries) = std::fs::read_dir(directory()) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let image = entry.path();
            let Some(disk) = Disk::from_label(&image.to_string_lossy()) else {
                continue;
            };
            let old = entry
                .metadata()
                .and_then(|meta| meta.modified())
                .ok()
                .and_then(|made| made.elapsed().ok())
                .is_some_and(|age| age > ORPHAN_AGE);
            if old && !in_use.contains(&image) {
                disk.remove_now();
            }
        }
        Ok(())
    })
    .await;
}

/// Runs `program` with `args` to its end.
fn run(program: &str, args: &[&std::ffi::OsStr]) -> std::result::Result<(), String> {
    let path = which(program).ok_or_else(|| format!("{program} is missing"))?;
    let output = std::process::Command::new(path)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|error| error.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} exited with {}: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| SessionError::host(format!("A disk chore failed: {error}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_images_of_this_module_only() {
        let dir = directory();
        let at = |name: &str| dir.join(name).to_string_lossy().into_owned();
        let disk = Disk::from_label(&at("harness-sessions-a.img")).expect("an image");
        assert_eq!(disk.mount, dir.join("harness-sessions-a"));
        assert!(Disk::from_label(&at("x.raw")).is_none());
        assert!(Disk::from_label(&at(".img")).is_none());
        assert!(Disk::from_label("/etc/x.img").is_none());
    }
}
