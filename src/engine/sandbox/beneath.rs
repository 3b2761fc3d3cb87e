//! Paths resolved beneath an open directory: the half of the local sandbox's confinement that
//! needs the file system.
//!
//! A [`Beneath`] holds a descriptor of one of a sandbox's directories (its *root*), opened once
//! and never through a symbolic link. Every path of the file API is resolved from that
//! descriptor, never from its name, so neither a link planted below the root nor the root itself
//! being swapped for a link can lead an operation outside:
//!
//! - where the kernel has `openat2`, with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`: the kernel
//!   follows links only while they stay beneath the root, and fails with `EXDEV` otherwise;
//! - else, or when `openat2` refuses (an absolute link, a rename racing the lookup), by a walk of
//!   one component at a time, each opened with `O_NOFOLLOW` relative to the descriptor of the one
//!   before, links read and followed by hand: a relative link inside the root, or an absolute one
//!   naming a path under it, is followed; anything that climbs above the root fails with `EXDEV`.
//!
//! Links that stay below the root keep working (package managers' links must). Removal
//! ([`remove_tree`]) never follows a link: a link is unlinked, never what it points at.
//!
//! Hard links are out of reach of any of this: a hard link is the file itself, so one that a
//! process of the sandbox made (to a file it could already reach) is read and written like any
//! other file below the root.

use std::collections::VecDeque;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::fs::{self as fs, AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// How many symbolic links one lookup may follow, as the kernel's own limit.
const MAX_LINKS: usize = 40;

/// An open directory that paths are resolved beneath. See the module documentation.
#[derive(Debug)]
pub(crate) struct Beneath {
    fd: OwnedFd,
    path: String,
    device: u64,
    inode: u64,
    /// Who new directories and files beneath it are handed to (`uid`, `gid`).
    owner: Option<(u32, u32)>,
}

/// Whether `error` says that a path leads outside its root.
pub(crate) fn is_outside(error: &io::Error) -> bool {
    error.raw_os_error() == Some(Errno::XDEV.raw_os_error())
}

fn outside() -> io::Error {
    Errno::XDEV.into()
}

impl Beneath {
    /// Opens the directory at the normalized absolute `path`, refusing a symbolic link in its
    /// last component (its parents are the application's to choose, and resolved as usual).
    ///
    /// # Errors
    ///
    /// `ENOENT` when there is nothing there, `ENOTDIR` or `ELOOP` for a link or a file.
    pub(crate) fn open(path: &str) -> io::Result<Self> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = match path.rfind('/') {
            Some(index) if index + 1 < path.len() => {
                let parent = if index == 0 { "/" } else { &path[..index] };
                let parent = fs::open(parent, flags, Mode::empty())?;
                fs::openat(
                    &parent,
                    &path[index + 1..],
                    flags | OFlags::NOFOLLOW,
                    Mode::empty(),
                )?
            }
            _ => fs::open("/", flags, Mode::empty())?,
        };
        let stat = fs::fstat(&fd)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
            return Err(Errno::NOTDIR.into());
        }
        Ok(Beneath {
            fd,
            path: path.to_owned(),
            device: stat.st_dev,
            inode: stat.st_ino,
            owner: None,
        })
    }

    /// The same root, whose new directories and files are handed to `uid:gid` (a local sandbox's
    /// own user, when this process is root).
    pub(crate) fn owned_by(mut self, owner: Option<(u32, u32)>) -> Self {
        self.owner = owner;
        self
    }

    /// Hands `fd` (made beneath this root) to the root's owner, if it has one.
    pub(crate) fn hand_over(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        if let Some((uid, gid)) = self.owner {
            // SAFETY: fchown(2) takes a descriptor borrowed for the call and plain integers.
            if unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// The path the root was opened at.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// Whether the root's path still names the directory opened (links not followed): false once
    /// it was moved away, removed, or replaced by a link.
    pub(crate) fn in_place(&self) -> bool {
        fs::lstat(self.path.as_str()).is_ok_and(|stat| {
            FileType::from_raw_mode(stat.st_mode) == FileType::Directory
                && stat.st_dev == self.device
                && stat.st_ino == self.inode
        })
    }

    /// Opens `components` (below the root, none of them `..`) with `flags`, following links only
    /// while they stay beneath the root.
    ///
    /// # Errors
    ///
    /// `EXDEV` ([`is_outside`]) for a path that leads outside; the errors of `openat` otherwise.
    pub(crate) fn open_at(
        &self,
        components: &[&str],
        flags: OFlags,
        mode: Mode,
    ) -> io::Result<OwnedFd> {
        let flags = flags | OFlags::CLOEXEC;
        if components.is_empty() {
            return Ok(fs::openat(&self.fd, ".", flags, mode)?);
        }
        if !walk_only() {
            let relative = components.join("/");
            let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
            match fs::openat2(&self.fd, relative.as_str(), flags, mode, resolve) {
                Ok(fd) => return Ok(fd),
                // No openat2 (an old kernel, a seccomp filter), a rename during the lookup, or a
                // link the kernel would not follow beneath (an absolute one): the walk decides.
                Err(Errno::XDEV | Errno::NOSYS | Errno::PERM | Errno::AGAIN) => {}
                Err(error) => return Err(error.into()),
            }
        }
        let (directory, name) = self.walk(components)?;
        Ok(fs::openat(
            &directory,
            name.as_str(),
            flags | OFlags::NOFOLLOW,
            mode,
        )?)
    }

    /// The directory at `components`, opened as a path (`O_PATH`) for `*at` calls.
    ///
    /// # Errors
    ///
    /// As [`Beneath::open_at`]; `ENOTDIR` when it is not a directory.
    pub(crate) fn directory(&self, components: &[&str]) -> io::Result<OwnedFd> {
        self.open_at(components, OFlags::PATH | OFlags::DIRECTORY, Mode::empty())
    }

    /// The directory at `components`, made with its missing parents (like `mkdir -p`), every step
    /// beneath the root.
    ///
    /// # Errors
    ///
    /// As [`Beneath::open_at`]; `ENOTDIR` or `EEXIST` when a file is in the way.
    pub(crate) fn make_directories(&self, components: &[&str]) -> io::Result<OwnedFd> {
        let mut directory = self.directory(&[])?;
        for depth in 1..=components.len() {
            directory = match self.directory(&components[..depth]) {
                Ok(directory) => directory,
                Err(error) if error.raw_os_error() == Some(Errno::NOENT.raw_os_error()) => {
                    let made = match fs::mkdirat(
                        &directory,
                        components[depth - 1],
                        Mode::from_raw_mode(0o777),
                    ) {
                        Ok(()) => true,
                        Err(Errno::EXIST) => false,
                        Err(error) => return Err(error.into()),
                    };
                    let directory = self.directory(&components[..depth])?;
                    if made && self.owner.is_some() {
                        // An O_PATH descriptor cannot be fchown'ed: a real one, without
                        // following a link.
                        let opened = fs::openat(
                            &directory,
                            ".",
                            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                            Mode::empty(),
                        )?;
                        self.hand_over(opened.as_fd())?;
                    }
                    directory
                }
                Err(error) => return Err(error),
            };
        }
        Ok(directory)
    }

    /// Resolves `components` by hand, one `O_NOFOLLOW` step at a time: the directory that holds
    /// the last one, and its name there (`.` when the path ends on a directory reached through
    /// `..`). The last component, when a link, is followed too.
    fn walk(&self, components: &[&str]) -> io::Result<(OwnedFd, String)> {
        let mut stack: Vec<OwnedFd> = Vec::new();
        let mut pending: VecDeque<String> =
            components.iter().map(|part| (*part).to_owned()).collect();
        let mut links = 0;
        while let Some(part) = pending.pop_front() {
            if part.is_empty() || part == "." {
                continue;
            }
            if part == ".." {
                if stack.pop().is_none() {
                    return Err(outside());
                }
                continue;
            }
            let current = stack.last().map_or(self.fd.as_fd(), AsFd::as_fd);
            let last = pending.iter().all(|rest| rest.is_empty() || rest == ".");
            let opened = match fs::openat(
                current,
                part.as_str(),
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(opened) => opened,
                Err(Errno::NOENT) if last => return Ok((reopen(current)?, part)),
                Err(error) => return Err(error.into()),
            };
            match FileType::from_raw_mode(fs::fstat(&opened)?.st_mode) {
                FileType::Symlink => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(Errno::LOOP.into());
                    }
                    let target = fs::readlinkat(&opened, "", Vec::new())?;
                    let target =
                        String::from_utf8(target.into_bytes()).map_err(|_| Errno::ILSEQ)?;
                    let rest = if target.starts_with('/') {
                        stack.clear();
                        self.below_root(&target).ok_or_else(outside)?
                    } else {
                        target
                    };
                    for part in rest.rsplit('/') {
                        pending.push_front(part.to_owned());
                    }
                }
                FileType::Directory if !last => stack.push(opened),
                _ if last => return Ok((reopen(current)?, part)),
                _ => return Err(Errno::NOTDIR.into()),
            }
        }
        let current = stack.last().map_or(self.fd.as_fd(), AsFd::as_fd);
        Ok((reopen(current)?, ".".to_owned()))
    }

    /// The part of the absolute `target` below the root, when it names the root or a path under it.
    fn below_root(&self, target: &str) -> Option<String> {
        let normalized: Vec<&str> = target.split('/').filter(|part| !part.is_empty()).collect();
        let root: Vec<&str> = self
            .path
            .split('/')
            .filter(|part| !part.is_empty())
            .collect();
        if normalized.len() < root.len() || normalized[..root.len()] != root[..] {
            return None;
        }
        Some(normalized[root.len()..].join("/"))
    }
}

/// Another descriptor of the directory `directory`.
fn reopen(directory: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    Ok(fs::openat(
        directory,
        ".",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Whether lookups skip `openat2` and always walk: for the tests of the walk
/// (`HARNESS_SESSIONS_BENEATH_WALK=1`), as on a kernel without `openat2`.
fn walk_only() -> bool {
    static WALK_ONLY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WALK_ONLY.get_or_init(|| {
        std::env::var_os("HARNESS_SESSIONS_BENEATH_WALK").is_some_and(|value| value == "1")
    })
}

/// Removes `name` in `directory` and, for a directory, everything in it, never following a link
/// (a link is unlinked, what it points at is left alone). Nothing there is fine.
///
/// # Errors
///
/// When something cannot be removed.
pub(crate) fn remove_tree(directory: BorrowedFd<'_>, name: &str) -> io::Result<()> {
    let name = CString::new(name).map_err(|_| Errno::INVAL)?;
    if unlink(directory, &name)? {
        return Ok(());
    }
    // Depth first, one descriptor per level held open (never a recursion: a deep tree made by a
    // hostile process cannot overflow the stack).
    let mut frames: Vec<(OwnedFd, CString)> = Vec::new();
    match open_for_removal(directory, &name)? {
        Some(top) => frames.push((top, name)),
        None => return Ok(()),
    }
    while let Some((current, _)) = frames.last() {
        let mut subdirectory = None;
        for entry in Dir::read_from(current)? {
            let entry = entry?;
            let entry_name = entry.file_name();
            if entry_name.to_bytes() == b"." || entry_name.to_bytes() == b".." {
                continue;
            }
            if !unlink(current.as_fd(), entry_name)? {
                subdirectory = Some(entry_name.to_owned());
                break;
            }
        }
        match subdirectory {
            Some(child) => {
                if let Some(opened) = open_for_removal(current.as_fd(), &child)? {
                    frames.push((opened, child));
                }
            }
            None => {
                if let Some((done, done_name)) = frames.pop() {
                    drop(done);
                    let parent = frames.last().map_or(directory, |(fd, _)| fd.as_fd());
                    match fs::unlinkat(parent, done_name.as_c_str(), AtFlags::REMOVEDIR) {
                        Ok(()) | Err(Errno::NOENT) => {}
                        Err(error) => return Err(error.into()),
                    }
                }
            }
        }
    }
    Ok(())
}

/// Unlinks `name` unless it is a directory: `true` when it is gone (or was never there).
fn unlink(directory: BorrowedFd<'_>, name: &std::ffi::CStr) -> io::Result<bool> {
    match fs::unlinkat(directory, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => Ok(true),
        Err(Errno::ISDIR | Errno::PERM) => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// The directory `name` opened for reading its entries, never through a link; `None` when it
/// became something else meanwhile and is gone now.
fn open_for_removal(
    directory: BorrowedFd<'_>,
    name: &std::ffi::CStr,
) -> io::Result<Option<OwnedFd>> {
    for _ in 0..3 {
        match fs::openat(
            directory,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(opened) => return Ok(Some(opened)),
            Err(Errno::NOENT) => return Ok(None),
            // Swapped for a link or a file since: unlink that instead.
            Err(Errno::NOTDIR | Errno::LOOP) => {
                if unlink(directory, name)? {
                    return Ok(None);
                }
            }
            Err(error) => return Err(error.into()),
        }
    }
    Err(Errno::BUSY.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, Beneath, String) {
        let temp = tempfile::tempdir().unwrap_or_else(|error| panic!("{error}"));
        let base = std::fs::canonicalize(temp.path()).unwrap_or_else(|error| panic!("{error}"));
        let base = base.to_str().unwrap_or_default().to_owned();
        let root = format!("{base}/root");
        std::fs::create_dir_all(format!("{root}/a/b")).unwrap_or_else(|error| panic!("{error}"));
        std::fs::create_dir_all(format!("{base}/outside"))
            .unwrap_or_else(|error| panic!("{error}"));
        std::fs::write(format!("{root}/a/b/file"), "inside")
            .unwrap_or_else(|error| panic!("{error}"));
        std::fs::write(format!("{base}/outside/secret"), "secret")
            .unwrap_or_else(|error| panic!("{error}"));
        let beneath = Beneath::open(&root).unwrap_or_else(|error| panic!("{error}"));
        (temp, beneath, base)
    }

    fn read(beneath: &Beneath, path: &str) -> io::Result<String> {
        let parts: Vec<&str> = path.split('/').collect();
        let fd = beneath.open_at(&parts, OFlags::RDONLY, Mode::empty())?;
        std::io::read_to_string(std::fs::File::from(fd))
    }

    #[test]
    fn links_that_stay_beneath_are_followed_both_ways() {
        let (_temp, beneath, base) = tree();
        let root = format!("{base}/root");
        let ok = |result: io::Result<()>| result.unwrap_or_else(|error| panic!("{error}"));
        ok(symlink("a/b", format!("{root}/relative")));
        ok(symlink(format!("{root}/a/b"), format!("{root}/absolute")));
        ok(symlink("../b/file", format!("{root}/a/b/up")));
        for path in ["a/b/file", "relative/file", "absolute/file", "a/b/up"] {
            assert_eq!(
                read(&beneath, path).ok().as_deref(),
                Some("inside"),
                "{path}"
            );
            let (directory, name) = {
                let parts: Vec<&str> = path.split('/').collect();
                beneath
                    .walk(&parts)
                    .unwrap_or_else(|error| panic!("{path}: {error}"))
            };
            let fd = fs::openat(&directory, name.as_str(), OFlags::RDONLY, Mode::empty());
            assert!(fd.is_ok(), "{path}");
        }
    }

    #[test]
    fn links_that_lead_out_are_refused_by_the_kernel_and_by_the_walk() {
        let (_temp, beneath, base) = tree();
        let root = format!("{base}/root");
        let ok = |result: io::Result<()>| result.unwrap_or_else(|error| panic!("{error}"));
        ok(symlink("../outside", format!("{root}/up")));
        ok(symlink(
            format!("{base}/outside"),
            format!("{root}/absolute"),
        ));
        ok(symlink("/proc/self/root", format!("{root}/magic")));
        for path in ["up/secret", "absolute/secret", "magic/etc/hostname"] {
            let error = read(&beneath, path).err();
            assert!(error.as_ref().is_some_and(is_outside), "{path}: {error:?}");
            let parts: Vec<&str> = path.split('/').collect();
            let walked = beneath.walk(&parts).err();
            assert!(
                walked.as_ref().is_some_and(is_outside),
                "{path}: {walked:?}"
            );
        }
    }

    #[test]
    fn a_root_swapped_for_a_link_is_not_followed() {
        let (_temp, beneath, base) = tree();
        let root = format!("{base}/root");
        let ok = |result: io::Result<()>| result.unwrap_or_else(|error| panic!("{error}"));
        assert!(beneath.in_place());
        ok(std::fs::rename(&root, format!("{root}.old")));
        ok(symlink(format!("{base}/outside"), &root));
        assert!(!beneath.in_place());
        assert_eq!(read(&beneath, "a/b/file").ok().as_deref(), Some("inside"));
        assert!(read(&beneath, "secret").is_err());
        let reopened = Beneath::open(&root).err();
        assert!(reopened.is_some(), "a root that is a link opens");
    }

    #[test]
    fn removal_never_follows_a_link() {
        let (_temp, beneath, base) = tree();
        let root = format!("{base}/root");
        let ok = |result: io::Result<()>| result.unwrap_or_else(|error| panic!("{error}"));
        ok(symlink(format!("{base}/outside"), format!("{root}/a/link")));
        let mut deep = format!("{root}/deep");
        for _ in 0..200 {
            deep.push_str("/d");
        }
        ok(std::fs::create_dir_all(&deep));
        let parent = Beneath::open(&base).unwrap_or_else(|error| panic!("{error}"));
        drop(beneath);
        ok(remove_tree(parent.fd.as_fd(), "root"));
        assert!(std::fs::symlink_metadata(&root).is_err());
        assert!(std::path::Path::new(&format!("{base}/outside/secret")).exists());
        ok(symlink(format!("{base}/outside"), &root));
        ok(remove_tree(parent.fd.as_fd(), "root"));
        assert!(std::path::Path::new(&format!("{base}/outside/secret")).exists());
    }

    #[test]
    fn directories_are_made_beneath() {
        let (_temp, beneath, base) = tree();
        let root = format!("{base}/root");
        let ok = |result: io::Result<()>| result.unwrap_or_else(|error| panic!("{error}"));
        ok(symlink("../outside", format!("{root}/up")));
        assert!(beneath.make_directories(&["x", "y", "z"]).is_ok());
        assert!(std::path::Path::new(&format!("{root}/x/y/z")).is_dir());
        let escaped = beneath.make_directories(&["up", "made"]).err();
        assert!(escaped.as_ref().is_some_and(is_outside), "{escaped:?}");
        assert!(!std::path::Path::new(&format!("{base}/outside/made")).exists());
    }
}
