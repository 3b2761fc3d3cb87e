//! One open store per SQLite file: an exclusive `flock` on the database file, held by the store
//! for as long as it is open.
//!
//! Invariants:
//! - a second store on the same file, in this process or another one, is refused with an error
//!   saying the file is in use, after [`INHERITED_FOR`] at most: a child process another thread
//!   forks holds a copy of the lock's descriptor from its fork to its exec (`O_CLOEXEC` closes it
//!   only then), so a lock just released can seem held for that moment;
//! - the lock belongs to the open file description this module keeps: it is released when the
//!   store is closed or dropped, and by the kernel when the process dies, however it dies;
//! - `flock` locks are apart from the POSIX record locks SQLite takes on the same file, so the
//!   lock never gets in SQLite's way, nor in that of a tool reading the file.

use std::fs::File;
use std::path::Path;

use crate::engine::error::{Result, SessionError};

/// The exclusive lock a store holds on its file.
#[derive(Debug)]
pub(super) struct FileLock {
    /// Kept open: closing it releases the lock.
    _file: File,
}

/// The pauses between tries of a lock found held, in milliseconds: about 50 ms in all.
const INHERITED_FOR: [u64; 5] = [1, 3, 6, 15, 25];

impl FileLock {
    /// [`FileLock::acquire`], tried again after each of the pauses of [`INHERITED_FOR`] while the
    /// file is in use.
    ///
    /// # Errors
    /// As [`FileLock::acquire`].
    pub(super) async fn acquire_waiting(path: &Path) -> Result<FileLock> {
        for pause in INHERITED_FOR {
            match Self::try_acquire(path) {
                Err(Tried::InUse(_)) => {
                    tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                }
                done => return done.map_err(Tried::into_error),
            }
        }
        Self::acquire(path)
    }

    /// Opens `path` (creating it with mode 0600 when missing, as the store would) and locks it.
    ///
    /// # Errors
    /// [`SessionError::Host`] naming the path: the file is in use by another open store, or it
    /// cannot be opened.
    pub(super) fn acquire(path: &Path) -> Result<FileLock> {
        Self::try_acquire(path).map_err(Tried::into_error)
    }

    fn try_acquire(path: &Path) -> std::result::Result<FileLock, Tried> {
        let fail = |what: String| {
            SessionError::host(format!(
                "could not open the sqlite store at {}: {what}",
                path.display()
            ))
        };
        // The file and its missing folders made as the store makes them (0600, 0700).
        super::schema::create_private_file(path)
            .map_err(|err| Tried::Failed(fail(format!("could not create the file: {err}"))))?;
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600).custom_flags(libc::O_CLOEXEC);
        }
        let file = options
            .open(path)
            .map_err(|err| Tried::Failed(fail(format!("could not create the file: {err}"))))?;
        lock_exclusive(&file).map_err(|err| {
            if err.kind() == std::io::ErrorKind::WouldBlock {
                Tried::InUse(fail(
                    "the file is in use by another open sqlite store (in this process or another \
                     one): one process, one store per file; close or shut down the other first"
                        .to_owned(),
                ))
            } else {
                Tried::Failed(fail(format!("could not lock the file: {err}")))
            }
        })?;
        Ok(FileLock { _file: file })
    }
}

/// Why a try to lock failed.
enum Tried {
    /// Another open file description holds the lock.
    InUse(SessionError),
    /// Anything else.
    Failed(SessionError),
}

impl Tried {
    fn into_error(self) -> SessionError {
        match self {
            Tried::InUse(error) | Tried::Failed(error) => error,
        }
    }
}

/// Takes `flock(LOCK_EX | LOCK_NB)` on `file`: `WouldBlock` when another open file description
/// holds it.
#[cfg(unix)]
fn lock_exclusive(file: &File) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    loop {
        // SAFETY: `flock` on a descriptor `file` keeps open for the whole call; no memory is
        // passed.
        let result = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if result == 0 {
            return Ok(());
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(not(unix))]
fn lock_exclusive(_file: &File) -> std::io::Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use tempfile::TempDir;

    use super::super::{SqliteStore, SqliteStoreOptions};
    use crate::engine::error::SessionError;
    use crate::engine::store::SessionStore;

    async fn open(path: &std::path::Path) -> crate::engine::error::Result<SqliteStore> {
        SqliteStore::open(path, SqliteStoreOptions::default()).await
    }

    fn in_use(result: crate::engine::error::Result<SqliteStore>) -> bool {
        matches!(result, Err(SessionError::Host { message, .. }) if message.contains("in use"))
    }

    #[tokio::test]
    async fn a_second_store_on_the_same_file_is_refused_until_the_first_is_closed() {
        let dir = TempDir::new().expect("temp dir");
        let path = dir.path().join("sessions.db");
        let first = open(&path).await.expect("the first store opens");
        assert!(in_use(open(&path).await), "a second store is refused");
        first.release().await.expect("released");
        first.release().await.expect("releasing twice is fine");
        let second = open(&path).await.expect("the file is free once released");
        let refused = first
            .list()
            .await
            .expect_err("the released store cannot take it back");
        assert!(refused.to_string().contains("in use"), "{refused}");
        drop(second);
        assert!(first.list().await.expect("reopened").is_empty());
        drop(first);
        let third = open(&path).await.expect("the file is free once dropped");
        third.close().await.expect("closed");
        open(&path).await.expect("the file is free once closed");
    }

    #[tokio::test]
    async fn a_refused_store_changes_nothing() {
        let dir = TempDir::new().expect("temp dir");
        let path = dir.path().join("sessions.db");
        let first = open(&path).await.expect("the first store opens");
        let before = std::fs::read(&path).expect("read");
        assert!(in_use(open(&path).await));
        assert_eq!(std::fs::read(&path).expect("read"), before);
        assert!(first
            .list()
            .await
            .expect("the first store still works")
            .is_empty());
    }
}
