//! Sandbox slots: how many sessions may be live at once (`sandboxes.capacity`), and which idle
//! session makes room for another when every slot is taken (`suspendIdleWhenFull`).
//!
//! A slot is taken when a session becomes `preparing` and handed back when it leaves the live
//! statuses. The registry's lock is always taken before an entry's state lock, never after.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use super::entry::{lock, Entry, TurnSlot};
use super::Inner;
use crate::engine::error::{Result, SessionError};
use crate::engine::session::SessionStatus;

/// The sessions in memory and the slots they hold.
#[derive(Default)]
pub(crate) struct Registry {
    /// Every session in memory, by id.
    pub(crate) entries: HashMap<String, Arc<Entry>>,
    /// The sessions holding a slot.
    holders: HashSet<String>,
    /// The sessions chosen to be suspended to make room.
    evicting: HashSet<String>,
    /// The turns under way, by number.
    pub(crate) turns: HashMap<u64, Weak<TurnSlot>>,
}

impl Inner {
    /// Takes a slot for `entry`. When every slot is taken, picks the session idle the longest to
    /// make room (it is returned, marked, to be suspended before the new session opens).
    ///
    /// # Errors
    /// [`SessionError::Capacity`] when no slot can be had.
    pub(super) fn reserve_slot(&self, entry: &Entry) -> Result<Option<Arc<Entry>>> {
        let capacity = self.seams.sandboxes.capacity();
        let mut registry = lock(&self.registry);
        if registry.holders.contains(&entry.id) {
            return Ok(None);
        }
        let Some(capacity) = capacity else {
            registry.holders.insert(entry.id.clone());
            return Ok(None);
        };
        if (registry.holders.len() as u64) < u64::from(capacity) {
            registry.holders.insert(entry.id.clone());
            return Ok(None);
        }
        if !self.options.suspend_idle_when_full {
            return Err(SessionError::Capacity { capacity });
        }
        let victim = registry
            .holders
            .iter()
            .filter(|id| !registry.evicting.contains(*id) && **id != entry.id)
            .filter_map(|id| registry.entries.get(id))
            .filter_map(|candidate| {
                let state = candidate.state();
                let idle =
                    state.record.as_ref().map(|r| r.summary.status) == Some(SessionStatus::Idle);
                idle.then(|| (state.last_active, candidate.clone()))
            })
            .min_by_key(|(last_active, _)| *last_active)
            .map(|(_, candidate)| candidate);
        let Some(victim) = victim else {
            return Err(SessionError::Capacity { capacity });
        };
        registry.evicting.insert(victim.id.clone());
        // The new session takes the victim's slot now; the victim no longer counts.
        registry.holders.remove(&victim.id);
        registry.holders.insert(entry.id.clone());
        Ok(Some(victim))
    }

    /// Hands back the slot of session `id`, if it holds one.
    pub(super) fn release_slot(&self, id: &str) {
        lock(&self.registry).holders.remove(id);
    }

    /// The victim was suspended, or will not be: it is no longer being evicted.
    pub(super) fn unmark_victim(&self, victim: Option<&Arc<Entry>>) {
        if let Some(victim) = victim {
            lock(&self.registry).evicting.remove(&victim.id);
        }
    }

    /// The victim could not be suspended (it got busy meanwhile): it takes its slot back.
    pub(super) fn restore_victim(&self, victim: &Arc<Entry>) {
        let mut registry = lock(&self.registry);
        registry.evicting.remove(&victim.id);
        if victim.status().is_some_and(SessionStatus::is_live) {
            registry.holders.insert(victim.id.clone());
        }
    }

    /// Whether session `id` is being evicted.
    pub(super) fn is_evicting(&self, id: &str) -> bool {
        lock(&self.registry).evicting.contains(id)
    }

    /// Every session in memory.
    pub(super) fn all_entries(&self) -> Vec<Arc<Entry>> {
        lock(&self.registry).entries.values().cloned().collect()
    }
}
