//! The leases one instance holds, by session, and the channel that tells its manager of a lease
//! lost: the bookkeeping every [`Cluster`](super::Cluster) implementation keeps beside its leases.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::broadcast;

use super::{Fence, LeaseEvent};

/// The epochs of the leases held, by session, and the lost-lease channel.
pub struct HeldLeases {
    epochs: Mutex<HashMap<String, u64>>,
    lost: broadcast::Sender<LeaseEvent>,
}

impl Default for HeldLeases {
    fn default() -> Self {
        Self {
            epochs: Mutex::new(HashMap::new()),
            lost: broadcast::channel(256).0,
        }
    }
}

impl HeldLeases {
    fn epochs(&self) -> MutexGuard<'_, HashMap<String, u64>> {
        self.epochs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes `fence` as held (a claim or a takeover that succeeded).
    pub fn hold(&self, fence: &Fence) {
        self.epochs().insert(fence.session_id.clone(), fence.epoch);
    }

    /// Forgets `fence` when it is the one held; answers whether it was.
    pub fn forget(&self, fence: &Fence) -> bool {
        let mut epochs = self.epochs();
        let held = epochs.get(&fence.session_id) == Some(&fence.epoch);
        if held {
            epochs.remove(&fence.session_id);
        }
        held
    }

    /// Forgets `fence` and tells the manager it was lost, once.
    pub fn lose(&self, fence: &Fence) {
        if self.forget(fence) {
            let _ = self.lost.send(LeaseEvent::Lost(fence.clone()));
        }
    }

    /// The leases held now.
    pub fn fences(&self) -> Vec<Fence> {
        self.epochs()
            .iter()
            .map(|(id, epoch)| Fence {
                session_id: id.clone(),
                epoch: *epoch,
            })
            .collect()
    }

    /// The lost leases from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<LeaseEvent> {
        self.lost.subscribe()
    }
}
