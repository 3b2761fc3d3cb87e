//! The arms the command loops of `exec()` and of the turns (`send()`, `continue()`) share: what a
//! command does with a session not ready for it, as the lifecycle decides.
//!
//! Each loop takes the session's command lock ([`CommandWait::lock`]), looks at the session, and
//! either runs (its own arm) or hands the decision to [`CommandWait::follow`]: wait for a start or
//! a turn under way to end, bring the session back (resume it, or start it again) once, or refuse.
//! Every wait gives the command lock up first, so that what it waits for can finish.

use std::sync::Arc;

use tokio::sync::{watch, MutexGuard};

use super::entry::Entry;
use super::exec::cancellable;
use super::Inner;
use crate::engine::error::{Result, SessionError};
use crate::engine::session::lifecycle::Decision;
use crate::engine::session::SessionStatus;

/// Whether a command can be cut by its caller while it waits for the start it set off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StartWait {
    /// `exec()`: its caller can cut it then too.
    Cuttable,
    /// `send()` and `continue()`: they wait for the start to end, then see the cut.
    Whole,
}

/// A command's wait for its session to be ready for it: how it is cut, and whether it brought the
/// session back already (a command does so once: a second start to wait for is refused).
pub(super) struct CommandWait<'a> {
    entry: &'a Arc<Entry>,
    cancel: &'a mut watch::Receiver<bool>,
    start_wait: StartWait,
    brought_back: bool,
}

impl<'a> CommandWait<'a> {
    /// The wait of a command on `entry`, cut when `cancel` turns true.
    pub(super) fn new(
        entry: &'a Arc<Entry>,
        cancel: &'a mut watch::Receiver<bool>,
        start_wait: StartWait,
    ) -> Self {
        CommandWait {
            entry,
            cancel,
            start_wait,
            brought_back: false,
        }
    }

    /// The session's command lock, unless the caller cuts the command first.
    ///
    /// # Errors
    /// [`SessionError::Host`] when the command is cut.
    pub(super) async fn lock(&mut self) -> Result<MutexGuard<'a, ()>> {
        cancellable(self.cancel, self.entry.commands.lock()).await
    }

    /// Follows `decision`, which is not the command's to run, for a session seen with `status`
    /// (and `error`) under `guard`: `Ok` when the command is to look again.
    ///
    /// # Errors
    /// The refusal: the session's status, a conflict in the lifecycle's words, a shut-down
    /// manager, a start that failed; or the cut.
    pub(super) async fn follow(
        &mut self,
        inner: &Arc<Inner>,
        guard: MutexGuard<'a, ()>,
        decision: Decision,
        status: SessionStatus,
        error: Option<&str>,
    ) -> Result<()> {
        let entry = self.entry;
        let refuse = || SessionError::in_status(&entry.id, status, error);
        match decision {
            Decision::WaitReady => {
                drop(guard);
                cancellable(
                    self.cancel,
                    inner.wait_while(entry, SessionStatus::Preparing),
                )
                .await
            }
            Decision::WaitTurnOver => {
                drop(guard);
                cancellable(self.cancel, inner.wait_while(entry, SessionStatus::Busy)).await
            }
            // The start this command waited for failed, or was cut short.
            Decision::Resume | Decision::StartAgain if self.brought_back => Err(refuse()),
            Decision::Resume | Decision::StartAgain
                if inner.shut_down.load(std::sync::atomic::Ordering::SeqCst) =>
            {
                Err(SessionError::ShutDown)
            }
            Decision::Resume | Decision::StartAgain => {
                let resuming = status == SessionStatus::Suspended;
                inner.bring_back(entry, resuming).await?;
                self.brought_back = true;
                drop(guard);
                let started = inner.wait_while(entry, SessionStatus::Preparing);
                match self.start_wait {
                    StartWait::Cuttable => cancellable(self.cancel, started).await,
                    StartWait::Whole => {
                        started.await;
                        Ok(())
                    }
                }
            }
            Decision::Refuse(Some(words)) => Err(SessionError::conflict(&entry.id, status, words)),
            _ => Err(refuse()),
        }
    }
}
