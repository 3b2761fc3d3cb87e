//! One harness bootstrap at a time in a folder that sandboxes share.
//!
//! A harness bootstraps a sandbox by reading its marker (`<bootstrapDir>/.bootstrap-<id>.ok`):
//! when it is missing, the harness writes its files, runs its install commands, then writes the
//! marker. Local sandboxes share the bootstrap folder (`/tmp/harness` by default), so two sessions
//! starting at once would both find no marker and install into one folder together.
//!
//! The gate relies on that marker protocol: a read of a marker takes the marker's lock (one per
//! path, for the whole process) first. When the marker is there, the lock is let go at once; when
//! it is missing, the sandbox that read it keeps the lock (a *lease*) until it writes the marker,
//! is stopped, or is dropped. Another sandbox reading the same marker meanwhile waits, then finds
//! the marker and skips the bootstrap. A waiter gives up after [`BOOTSTRAP_WAIT`] (a bootstrap
//! that failed without its sandbox stopping) and reads anyway. Other processes are not gated.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::OwnedMutexGuard;

/// How long a sandbox waits for another's bootstrap before it reads the marker anyway.
pub(crate) const BOOTSTRAP_WAIT: Duration = Duration::from_secs(300);

/// The leases of one sandbox: marker paths whose lock it holds.
#[derive(Debug, Default)]
pub(crate) struct BootstrapGate {
    leases: Mutex<HashMap<String, OwnedMutexGuard<()>>>,
}

/// Whether `absolute` names a harness's bootstrap marker.
pub(crate) fn is_marker(absolute: &str) -> bool {
    let name = absolute.rsplit('/').next().unwrap_or_default();
    name.starts_with(".bootstrap-") && name.ends_with(".ok")
}

/// The process-wide lock of the marker `absolute`.
fn lock_of(absolute: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    locks.entry(absolute.to_owned()).or_default().clone()
}

impl BootstrapGate {
    fn leases(&self) -> MutexGuard<'_, HashMap<String, OwnedMutexGuard<()>>> {
        self.leases
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Before reading `absolute`: waits for the marker's lock unless this sandbox holds it
    /// already, or it is no marker. Give what it returns to [`BootstrapGate::after_read`].
    pub(crate) async fn before_read(&self, absolute: &str) -> Option<OwnedMutexGuard<()>> {
        if !is_marker(absolute) || self.leases().contains_key(absolute) {
            return None;
        }
        tokio::time::timeout(BOOTSTRAP_WAIT, lock_of(absolute).lock_owned())
            .await
            .ok()
    }

    /// After reading `absolute`: a missing marker keeps the lock as this sandbox's lease.
    pub(crate) fn after_read(
        &self,
        absolute: &str,
        guard: Option<OwnedMutexGuard<()>>,
        missing: bool,
    ) {
        if let Some(guard) = guard {
            if missing {
                self.leases().insert(absolute.to_owned(), guard);
            }
        }
    }

    /// After writing `absolute`: the bootstrap is done, its lease let go.
    pub(crate) fn after_write(&self, absolute: &str) {
        if is_marker(absolute) {
            self.leases().remove(absolute);
        }
    }

    /// Lets go of every lease: the sandbox stopped.
    pub(crate) fn release_all(&self) {
        self.leases().clear();
    }
}
