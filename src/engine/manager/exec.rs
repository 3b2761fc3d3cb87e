//! `exec()`: a shell command run in a session's sandbox, exactly as given, without the agent and
//! without a word added to the conversation.
//!
//! Commands and turns of one session never overlap: a command runs under the session's command
//! lock (so a message sent meanwhile waits for it), and waits for a turn under way to end. A
//! suspended session is resumed first, a failed one started again. What the lifecycle decides for
//! [`Command::Exec`] is followed; no status changes. A command run with a `key` has its result
//! kept with the session (in the store): the same key again gives it back without running anything.
//!
//! A command, or a message, waiting for its turn can be cut by its caller ([`Waiting`]): the
//! binding's `abortSignal`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::watch;

use super::command_wait::{CommandWait, StartWait};
use super::entry::{lock, Entry};
use super::{timers, Inner, SessionManager};
use crate::engine::agent::{CommandOutput, CommandRun};
use crate::engine::error::{Result, SessionError};
use crate::engine::session::lifecycle::{decide, Command, Decision, Input};
use crate::engine::session::{ExecResult, KeyedCommand};

/// What `exec()` is given.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// A number for the command, unique in the process: the key of its `abortSignal`.
    pub exec_id: u64,
    /// The shell command, passed to the sandbox unchanged.
    pub command: String,
    /// When given, the result is kept with the session under this key.
    pub key: Option<String>,
    /// The most bytes of each of stdout and stderr the result holds.
    pub max_output_bytes: u64,
}

/// The bound of each output stream when the caller gives none: 1 MiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 1 << 20;
/// The largest bound a caller may give: 64 MiB.
pub const MOST_OUTPUT_BYTES: u64 = 64 << 20;
/// The longest command, in bytes.
pub(super) const MOST_COMMAND_BYTES: usize = 256_000;
/// The longest key, in bytes.
pub(super) const MOST_KEY_BYTES: usize = 1_024;
/// The words of a key given again with another command.
pub(super) const KEY_OF_ANOTHER_COMMAND: &str =
    "This key was given to another command: a key always names the same command.";

/// The commands and turns waiting to start, by number, with the switch that cuts them.
#[derive(Default)]
pub(crate) struct Waiting {
    waiting: Mutex<HashMap<u64, watch::Sender<bool>>>,
}

impl Waiting {
    /// Registers `id` (or finds it registered by [`SessionManager::will_wait`]); its receiver
    /// turns true when the caller cuts it.
    pub(crate) fn enter(&self, id: u64) -> watch::Receiver<bool> {
        lock(&self.waiting)
            .entry(id)
            .or_insert_with(|| watch::channel(false).0)
            .subscribe()
    }

    /// Forgets `id`.
    pub(crate) fn leave(&self, id: u64) {
        lock(&self.waiting).remove(&id);
    }

    /// Cuts `id`, if it waits.
    pub(crate) fn cut(&self, id: u64) {
        if let Some(sender) = lock(&self.waiting).get(&id) {
            sender.send_replace(true);
        }
    }
}

/// `work`, unless the caller cuts it first.
pub(super) async fn cancellable<T>(
    cancel: &mut watch::Receiver<bool>,
    work: impl Future<Output = T>,
) -> Result<T> {
    if *cancel.borrow() {
        return Err(SessionError::CutBeforeStart);
    }
    let cut = async {
        if cancel.wait_for(|cut| *cut).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        value = work => Ok(value),
        () = cut => Err(SessionError::CutBeforeStart),
    }
}

fn check(request: &ExecRequest) -> Result<()> {
    let command = &request.command;
    if command.trim().is_empty() {
        return Err(SessionError::input(
            "command",
            "command must be a non-empty string",
        ));
    }
    if command.len() > MOST_COMMAND_BYTES || command.contains('\0') {
        return Err(SessionError::input(
            "command",
            format!("command must be at most {MOST_COMMAND_BYTES} bytes, without NUL"),
        ));
    }
    if let Some(key) = &request.key {
        if key.is_empty() || key.len() > MOST_KEY_BYTES {
            return Err(SessionError::input(
                "key",
                format!("key must be a string of 1 to {MOST_KEY_BYTES} bytes"),
            ));
        }
    }
    if request.max_output_bytes > MOST_OUTPUT_BYTES {
        return Err(SessionError::input(
            "maxOutputBytes",
            format!("maxOutputBytes must be a whole number from 0 to {MOST_OUTPUT_BYTES}"),
        ));
    }
    Ok(())
}

/// `text` cut to at most `most` bytes, on a character boundary; and how many bytes were cut.
fn bounded(mut text: String, most: u64) -> (String, u64) {
    let most = usize::try_from(most).unwrap_or(usize::MAX);
    if text.len() <= most {
        return (text, 0);
    }
    let mut end = most;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = (text.len() - end) as u64;
    text.truncate(end);
    (text, cut)
}

/// What `output` makes once each stream is bounded.
pub(crate) fn result_of(output: CommandOutput, most: u64) -> ExecResult {
    let (stdout, stdout_cut_bytes) = bounded(output.stdout, most);
    let (stderr, stderr_cut_bytes) = bounded(output.stderr, most);
    ExecResult {
        exit_code: output.exit_code,
        stdout,
        stderr,
        max_output_bytes: most,
        stdout_cut_bytes,
        stderr_cut_bytes,
    }
}

impl SessionManager {
    /// Runs a shell command in the session's sandbox: see the module documentation.
    ///
    /// # Errors
    /// [`SessionError::NotFound`], [`SessionError::Input`] for a bad request, a conflict for a
    /// closed or interrupted session or a key given to another command, [`SessionError::Host`]
    /// when the sandbox could not run it or the caller cut it before it started.
    pub async fn exec(&self, id: &str, request: ExecRequest) -> Result<ExecResult> {
        let exec_id = request.exec_id;
        let mut cancel = self.inner.waiting.enter(exec_id);
        let result = async {
            self.inner.ready().await?;
            check(&request)?;
            let entry = self.inner.entry(id);
            let wire = self.inner.many.as_ref().map(|_| {
                serde_json::json!({
                    "kind": "exec",
                    "command": request.command,
                    "key": request.key,
                    "maxOutputBytes": request.max_output_bytes,
                })
            });
            let route = match wire {
                Some(wire) => self.inner.route(id, move || wire.clone()).await,
                None => Ok(super::Route::Here),
            };
            let result = match route {
                Ok(super::Route::Here) => self.inner.exec(&entry, request, &mut cancel).await,
                Ok(super::Route::There(answer)) => super::many::answer(answer),
                Err(error) => Err(error),
            };
            self.inner.release(&entry);
            result
        }
        .await;
        self.inner.waiting.leave(exec_id);
        result
    }

    /// Registers command or turn `id` before it is asked for, so that its caller can cut it from
    /// then on ([`SessionManager::cancel_waiting`]); the command or turn forgets it when it ends.
    pub fn will_wait(&self, id: u64) {
        drop(self.inner.waiting.enter(id));
    }

    /// Forgets `id` registered by [`SessionManager::will_wait`] for a command never asked for.
    pub fn forget_waiting(&self, id: u64) {
        self.inner.waiting.leave(id);
    }

    /// The caller of the command or turn `id` cut it: if it still waits to start, it never does.
    pub fn cancel_waiting(&self, id: u64) {
        self.inner.waiting.cut(id);
    }
}

impl Inner {
    async fn exec(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        request: ExecRequest,
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<ExecResult> {
        let mut wait = CommandWait::new(entry, cancel, StartWait::Cuttable);
        loop {
            let guard = wait.lock().await?;
            self.load(entry).await?;
            let (status, error, kept) = {
                let state = entry.state();
                let record = state.record_ref()?;
                let kept = request.key.as_ref().and_then(|key| {
                    record
                        .command_results
                        .iter()
                        .find(|kept| &kept.key == key)
                        .cloned()
                });
                (record.summary.status, record.summary.error.clone(), kept)
            };
            if let Some(kept) = kept {
                if kept.command == request.command {
                    return Ok(kept.result);
                }
                return Err(SessionError::conflict(
                    &entry.id,
                    status,
                    KEY_OF_ANOTHER_COMMAND,
                ));
            }
            match decide(status, Input::Command(Command::Exec)) {
                Decision::RunCommand => return self.run_command(entry, request).await,
                other => {
                    wait.follow(self, guard, other, status, error.as_deref())
                        .await?
                }
            }
        }
    }

    /// Runs the command, the caller holding the command lock of a session `idle` or
    /// `awaiting-input`; keeps a keyed result with the session.
    async fn run_command(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        request: ExecRequest,
    ) -> Result<ExecResult> {
        let harness = entry.state().harness().ok_or_else(|| {
            SessionError::internal("a session ready for a command had no harness session")
        })?;
        let output = harness
            .run_command(CommandRun {
                exec_id: request.exec_id,
                command: request.command.clone(),
            })
            .await;
        {
            // The session did something: its idle timeout starts again.
            let mut state = entry.state();
            state.last_active = Instant::now();
            state.generation += 1;
        }
        timers::arm_idle(self, entry);
        let result = result_of(output?, request.max_output_bytes);
        if let Some(key) = request.key {
            entry
                .state()
                .record_mut()?
                .command_results
                .push(KeyedCommand {
                    key,
                    command: request.command,
                    result: result.clone(),
                });
            self.save(entry, None).await?;
        }
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_cut_on_a_character_boundary() {
        assert_eq!(bounded("abc".into(), 3), ("abc".into(), 0));
        assert_eq!(bounded("abcd".into(), 3), ("abc".into(), 1));
        // 'é' is two bytes: a bound inside it keeps the character out whole.
        assert_eq!(bounded("aé".into(), 2), ("a".into(), 2));
        assert_eq!(bounded("x".into(), 0), (String::new(), 1));
    }

    #[test]
    fn requests_are_checked() {
        let ok = ExecRequest {
            exec_id: 1,
            command: "true".into(),
            key: None,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        };
        assert!(check(&ok).is_ok());
        for bad in [
            ExecRequest {
                command: " ".into(),
                ..ok.clone()
            },
            ExecRequest {
                command: "a\0b".into(),
                ..ok.clone()
            },
            ExecRequest {
                key: Some(String::new()),
                ..ok.clone()
            },
            ExecRequest {
                max_output_bytes: MOST_OUTPUT_BYTES + 1,
                ..ok.clone()
            },
        ] {
            assert!(matches!(check(&bad), Err(SessionError::Input { .. })));
        }
    }
}
