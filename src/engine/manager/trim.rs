//! Giving the memory of finished turns back to the system.
//!
//! A turn allocates and frees much (its batches of chunks as JSON, their decoding, the reply
//! being built), interleaved with what lives on (the records of live sessions). glibc's `malloc`
//! keeps the pages it freed between live blocks for later use, so that after a burst of turns
//! the process holds memory it no longer uses: per live session, several times what the session
//! itself holds. When the last turn under way ends, a trim is scheduled a little later (one at a
//! time, so at most a few a second), and `malloc_trim(0)` hands every whole free page back, on a
//! blocking thread. Elsewhere than glibc it does nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long after the last turn ended the trim runs: turns that follow soon after reuse the
/// memory instead.
const AFTER: Duration = Duration::from_millis(100);

/// Whether a trim is scheduled and not yet done.
static SCHEDULED: AtomicBool = AtomicBool::new(false);

/// No turn is under way: give the memory freed since back to the system soon, unless a trim is
/// already scheduled.
pub(super) fn trim_soon() {
    if SCHEDULED.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(async {
        tokio::time::sleep(AFTER).await;
        let _ = tokio::task::spawn_blocking(trim).await;
        SCHEDULED.store(false, Ordering::SeqCst);
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    unsafe extern "C" {
        /// glibc: releases free memory from the heap's arenas to the system.
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: `malloc_trim` takes a size and touches only the allocator's own state, under its
    // own locks; it is safe to call from any thread at any time.
    unsafe {
        malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}
