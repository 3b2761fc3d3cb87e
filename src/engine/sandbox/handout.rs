//! The sandboxes handed to agents, and the [`SandboxRef`]s the agents are given for them.
//!
//! A strategy that hands one of the engine's own sandboxes to an agent (a view of the shared
//! sandbox, a session's own sandbox) asks its [`SandboxHandouts`] for the reference the agent is
//! given, and keeps the [`HandedOut`] it gets back for as long as the lease holds the sandbox:
//! dropping it forgets the reference. What a reference stands for is the business of whoever
//! implements the trait; the engine sees only the opaque reference.
//!
//! [`Handouts`] is the one numbering the engine ships: entries of any kind, numbered from 1 while
//! their [`HandedOut`] lives. `Handouts<Arc<dyn SandboxSession>>` is what a pure-Rust application
//! (and the engine's tests) resolve references with; the binding numbers its own kinds of entry
//! with it.
//!
//! Invariants: a number stands for one entry at most, is never given twice by one registry, and is
//! forgotten exactly once, when its [`HandedOut`] is dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::SandboxSession;
use crate::engine::lease::SandboxRef;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Where the engine's own sandboxes, handed to agents, get the [`SandboxRef`] the agent is given.
pub trait SandboxHandouts: Send + Sync {
    /// A reference to `session` for the agent, known until the returned [`HandedOut`] is dropped.
    fn hand_out(&self, session: Arc<dyn SandboxSession>) -> HandedOut;
}

/// A sandbox's reference while it is handed out: forgotten when this is dropped.
pub struct HandedOut {
    sandbox: SandboxRef,
    forget: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl HandedOut {
    /// `sandbox`, with `forget` to run when it is no longer handed out.
    pub fn new(sandbox: SandboxRef, forget: impl FnOnce() + Send + Sync + 'static) -> Self {
        HandedOut {
            sandbox,
            forget: Some(Box::new(forget)),
        }
    }

    /// The reference the agent is given.
    pub fn sandbox_ref(&self) -> SandboxRef {
        self.sandbox.clone()
    }
}

impl Drop for HandedOut {
    fn drop(&mut self) {
        if let Some(forget) = self.forget.take() {
            forget();
        }
    }
}

/// Entries numbered while they are handed out: what the [`SandboxRef`]s given for them refer to.
/// Clones share one registry.
pub struct Handouts<T> {
    book: Arc<Book<T>>,
}

struct Book<T> {
    next: AtomicU64,
    entries: Mutex<HashMap<u64, T>>,
}

impl<T> Clone for Handouts<T> {
    fn clone(&self) -> Self {
        Handouts {
            book: self.book.clone(),
        }
    }
}

impl<T: Clone + Send + 'static> Default for Handouts<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Clone + Send + 'static> Handouts<T> {
    /// An empty registry.
    pub fn new() -> Self {
        Handouts {
            book: Arc::new(Book {
                next: AtomicU64::new(0),
                entries: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Numbers `entry` until the returned [`HandedOut`] is dropped.
    pub fn register(&self, entry: T) -> HandedOut {
        let number = self.book.next.fetch_add(1, Ordering::Relaxed) + 1;
        lock(&self.book.entries).insert(number, entry);
        let book = Arc::downgrade(&self.book);
        HandedOut::new(SandboxRef::handle(number), move || {
            if let Some(book) = book.upgrade() {
                lock(&book.entries).remove(&number);
            }
        })
    }

    /// The entry `sandbox` refers to, while it is handed out.
    pub fn get(&self, sandbox: &SandboxRef) -> Option<T> {
        let number = sandbox.number()?;
        lock(&self.book.entries).get(&number).cloned()
    }

    /// How many entries are handed out.
    pub fn len(&self) -> usize {
        lock(&self.book.entries).len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl SandboxHandouts for Handouts<Arc<dyn SandboxSession>> {
    fn hand_out(&self, session: Arc<dyn SandboxSession>) -> HandedOut {
        self.register(session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_numbered_while_handed_out() {
        let registry = Handouts::<&'static str>::new();
        let first = registry.register("seven");
        let second = registry.register("eight");
        assert_ne!(first.sandbox_ref(), second.sandbox_ref());
        assert_eq!(registry.get(&first.sandbox_ref()), Some("seven"));
        assert_eq!(registry.get(&SandboxRef::NONE), None);
        let forgotten = first.sandbox_ref();
        drop(first);
        assert_eq!(registry.get(&forgotten), None);
        assert_eq!(registry.len(), 1);
        let third = registry.register("nine");
        assert_ne!(
            third.sandbox_ref(),
            forgotten,
            "a number is never given twice"
        );
        drop((second, third));
        assert!(registry.is_empty());
    }

    #[test]
    fn a_handout_outliving_its_registry_forgets_nothing() {
        let registry = Handouts::<u8>::new();
        let held = registry.register(1);
        drop(registry);
        drop(held);
    }
}
