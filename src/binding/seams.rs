//! The engine's seams, implemented by what the application supplied in JavaScript: each call goes
//! through the [`Host`], and JavaScript objects (harness sessions, leases, sandboxes) stay in
//! JavaScript, known here by the number `index.js` keeps them under.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};

use super::error::error_data;
use super::host::{host_error, Host};
use super::protocol::{
    AgentChosen, CommandAnswer, HostOp, LeaseGiven, SandboxWire, SessionOpened, Stopped,
    TurnAnswer, TurnInputWire,
};
use crate::engine::agent::{
    Agent, CommandOutput, CommandRun, HarnessSession, OpenRequest, TurnControl, TurnFeed,
    TurnInput, TurnStart,
};
use crate::engine::client::TurnClients;
use crate::engine::error::{Result, SessionError};
use crate::engine::hooks::{ManagerHooks, SessionEvent};
use crate::engine::lease::{Lease, SandboxRef, SessionSandboxes};
use crate::engine::session::{ApprovalVerdict, PendingApproval, SessionRecord, SessionSummary};
use crate::engine::store::SessionStore;
use crate::engine::ui::UiChunk;

/// The feeds of the turns under way, by turn number: where `feed()` puts what JavaScript reports.
#[derive(Default)]
pub(crate) struct Feeds {
    feeds: Mutex<HashMap<u64, TurnFeed>>,
}

impl Feeds {
    fn open(&self, turn_id: u64, feed: TurnFeed) {
        lock(&self.feeds).insert(turn_id, feed);
    }

    /// The feed of turn `turn_id`.
    pub(crate) fn get(&self, turn_id: u64) -> Option<TurnFeed> {
        lock(&self.feeds).get(&turn_id).cloned()
    }

    /// How many turns have a feed open.
    pub(crate) fn len(&self) -> usize {
        lock(&self.feeds).len()
    }

    /// Removes and returns the feed of turn `turn_id`.
    pub(crate) fn close(&self, turn_id: u64) -> Option<TurnFeed> {
        lock(&self.feeds).remove(&turn_id)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// The application's agent function and its `SessionAgent`s.
pub(crate) struct JsAgent {
    pub(crate) host: Arc<Host>,
    pub(crate) feeds: Arc<Feeds>,
    /// Whether the manager's sandboxes are one of the engine's strategies, whose sandboxes are
    /// numbered natively; else they are the application's, numbered by their lease in JavaScript.
    pub(crate) native_sandboxes: bool,
}

#[async_trait]
impl Agent for JsAgent {
    async fn choose(&self, session_id: &str, metadata: &Value) -> Result<Value> {
        let op = HostOp::AgentChoose {
            session_id,
            metadata,
        };
        let chosen: AgentChosen = self.host.call(op).await?;
        Ok(json!(chosen.agent))
    }

    fn forget(&self, chosen: Value) {
        self.host.notify(HostOp::AgentForget { agent: &chosen });
    }

    async fn open(&self, request: OpenRequest) -> Result<Box<dyn HarnessSession>> {
        let op = HostOp::AgentOpen {
            session_id: &request.session_id,
            metadata: &request.metadata,
            sandbox: request.sandbox.number().map(|number| {
                if self.native_sandboxes {
                    SandboxWire::Native(number)
                } else {
                    SandboxWire::Js(number)
                }
            }),
            agent: &request.chosen,
            resume_from: request.resume_from.as_ref(),
        };
        let opened: SessionOpened = self.host.call(op).await?;
        Ok(Box::new(JsHarnessSession {
            host: self.host.clone(),
            feeds: self.feeds.clone(),
            handle: opened.session,
            refused_unfinished: Mutex::new(None),
        }))
    }
}

/// A `HarnessAgentSession` with its agent, kept by JavaScript.
struct JsHarnessSession {
    host: Arc<Host>,
    feeds: Arc<Feeds>,
    handle: u64,
    /// Whether the session had an unfinished turn when the agent refused the last turn, as the
    /// refusal told it: the engine asks right after, and is answered without a crossing.
    refused_unfinished: Mutex<Option<bool>>,
}

#[async_trait]
impl HarnessSession for JsHarnessSession {
    async fn start_turn(&self, turn: TurnStart, feed: TurnFeed) -> Result<Box<dyn TurnControl>> {
        let input = match &turn.input {
            TurnInput::Prompt(prompt) => TurnInputWire::Prompt { prompt },
            TurnInput::Continue {
                approvals,
                tool_results,
            } => TurnInputWire::Continue {
                tool_approval_continuations: approvals,
                tool_result_continuations: tool_results.as_deref(),
            },
        };
        let op = HostOp::SessionTurn {
            session: self.handle,
            turn_id: turn.turn_id,
            input,
            message_id: &turn.message_id,
            drop_start: turn.drop_start,
            continues: turn.continues.as_ref(),
        };
        *lock(&self.refused_unfinished) = None;
        self.feeds.open(turn.turn_id, feed);
        let refused = match self.host.call::<Option<TurnAnswer>>(op).await {
            Ok(answer) => answer.and_then(|answer| answer.refused).map(|refused| {
                *lock(&self.refused_unfinished) = refused.unfinished;
                host_error(Some(&refused.error))
            }),
            Err(error) => Some(error),
        };
        if let Some(error) = refused {
            self.feeds.close(turn.turn_id);
            return Err(error);
        }
        Ok(Box::new(JsTurnControl {
            host: self.host.clone(),
            turn_id: turn.turn_id,
        }))
    }

    async fn has_unfinished_turn(&self) -> Result<bool> {
        if let Some(unfinished) = lock(&self.refused_unfinished).take() {
            return Ok(unfinished);
        }
        let op = HostOp::SessionUnfinished {
            session: self.handle,
        };
        Ok(self.host.call::<Option<bool>>(op).await? == Some(true))
    }

    async fn stop(&self) -> Result<Value> {
        let op = HostOp::SessionStop {
            session: self.handle,
        };
        let stopped: Stopped = self.host.call(op).await?;
        Ok(stopped.resume_state)
    }

    async fn destroy(&self) -> Result<()> {
        let op = HostOp::SessionDestroy {
            session: self.handle,
        };
        self.host.call(op).await
    }

    async fn run_command(&self, run: CommandRun) -> Result<CommandOutput> {
        let op = HostOp::SessionExec {
            session: self.handle,
            exec_id: run.exec_id,
            command: &run.command,
        };
        let answer: CommandAnswer = self.host.call(op).await?;
        let exit_code = answer
            .exit_code
            .ok_or_else(|| SessionError::host("The sandbox's run() gave no whole exitCode."))?;
        Ok(CommandOutput {
            exit_code,
            stdout: answer.stdout,
            stderr: answer.stderr,
        })
    }
}

struct JsTurnControl {
    host: Arc<Host>,
    turn_id: u64,
}

impl TurnControl for JsTurnControl {
    fn abort(&self, reason: &str) {
        self.host.notify(HostOp::TurnAbort {
            turn_id: self.turn_id,
            reason,
        });
    }
}

/// The clients of the turns: the streams `index.js` made for them.
pub(crate) struct JsClients {
    pub(crate) host: Arc<Host>,
}

impl TurnClients for JsClients {
    fn deliver(&self, turn_id: u64, chunks: Vec<UiChunk>) {
        self.host.notify(HostOp::ClientDeliver {
            turn_id,
            chunks: &chunks,
        });
    }

    fn finish(&self, turn_id: u64, session: &SessionSummary) {
        self.host.notify(HostOp::ClientFinish { turn_id, session });
    }

    fn answer(&self, turn_id: u64, outcome: &Value) {
        self.host.notify(HostOp::ClientAnswer { turn_id, outcome });
    }
}

/// `subscribe()`, `onError`, `errorMessage` and `approve`.
pub(crate) struct JsHooks {
    pub(crate) host: Arc<Host>,
    pub(crate) approves: bool,
}

#[async_trait]
impl ManagerHooks for JsHooks {
    fn on_event(&self, event: SessionEvent) {
        let event = match event {
            SessionEvent::Updated(session) => json!({ "type": "updated", "session": session }),
            SessionEvent::Deleted(id) => json!({ "type": "deleted", "sessionId": id }),
        };
        self.host.notify(HostOp::Event { event });
    }

    fn on_error(&self, error: &SessionError, action: &str, session_id: Option<&str>) {
        self.host.notify(HostOp::Error {
            error: error_data(error),
            action,
            session_id,
        });
    }

    async fn client_message(&self, error: &SessionError) -> String {
        let op = HostOp::ClientMessage {
            error: error_data(error),
        };
        // JavaScript alone decides the text (`js/harness-errors.js`, `clientMessenger`) and
        // always gives one; when it cannot be reached, neither can the client it was for.
        self.host.call::<String>(op).await.unwrap_or_default()
    }

    fn approves(&self) -> bool {
        self.approves
    }

    async fn approve(
        &self,
        approval: &PendingApproval,
        session: &SessionSummary,
    ) -> Result<Option<ApprovalVerdict>> {
        let answer: Value = self
            .host
            .call(HostOp::Approve { approval, session })
            .await?;
        if answer.is_null() {
            return Ok(None);
        }
        serde_json::from_value(answer)
            .map(Some)
            .map_err(|e| SessionError::host(format!("approve gave no verdict: {e}")))
    }
}

/// A `SessionStore` written in JavaScript.
pub(crate) struct JsStore {
    pub(crate) host: Arc<Host>,
    /// The sessions whose summaries `list()` could not read: skipped, each reported once.
    pub(crate) unreadable: crate::engine::store::UnreadableRows,
}

fn from_json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    serde_json::from_str(text)
        .map_err(|e| SessionError::host(format!("the store gave {what} of the wrong shape: {e}")))
}

#[async_trait]
impl SessionStore for JsStore {
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()> {
        let op = HostOp::StoreSave {
            record,
            resume_state,
        };
        self.host.call::<()>(op).await?;
        self.unreadable.forget(&record.summary.id);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        let answer = self.host.call_raw(HostOp::StoreGet { id }).await?;
        if answer == "null" {
            return Ok(None);
        }
        let record = from_json(&answer, "a session");
        if let Err(error) = &record {
            self.unreadable.note(id, error.clone());
        }
        record.map(Some)
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        let answer = self.host.call_raw(HostOp::StoreList).await?;
        let entries: Vec<Box<serde_json::value::RawValue>> = from_json(&answer, "a list")?;
        let mut summaries = Vec::with_capacity(entries.len());
        for entry in entries {
            match serde_json::from_str::<SessionSummary>(entry.get()) {
                Ok(summary) => summaries.push(summary),
                Err(error) => {
                    // One summary of the wrong shape is set aside, not fatal to the list.
                    let id = serde_json::from_str::<Value>(entry.get())
                        .ok()
                        .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned));
                    if let Some(id) = id {
                        let error = SessionError::host(format!(
                            "the store gave an unreadable session {id}: {error}"
                        ));
                        self.unreadable.note(&id, error);
                    } else {
                        return Err(SessionError::host(format!(
                            "the store gave a list with an entry of the wrong shape: {error}"
                        )));
                    }
                }
            }
        }
        crate::engine::store::sort_newest_first(&mut summaries);
        Ok(summaries)
    }

    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        let answer: Value = self.host.call(HostOp::StoreGetResumeState { id }).await?;
        Ok((!answer.is_null()).then_some(answer))
    }

    async fn delete(&self, id: &str) -> Result<()> {
        self.host.call::<()>(HostOp::StoreDelete { id }).await?;
        self.unreadable.forget(id);
        Ok(())
    }

    fn take_unreadable(&self) -> Vec<(String, SessionError)> {
        self.unreadable.take()
    }

    fn is_unreadable(&self, id: &str) -> bool {
        self.unreadable.contains(id)
    }
}

/// A `SessionSandboxes` written in JavaScript.
pub(crate) struct JsSandboxes {
    pub(crate) host: Arc<Host>,
    pub(crate) capacity: Option<u32>,
}

#[async_trait]
impl SessionSandboxes for JsSandboxes {
    fn capacity(&self) -> Option<u32> {
        self.capacity
    }

    async fn acquire(&self, session_id: &str, resume: bool) -> Result<Box<dyn Lease>> {
        let op = HostOp::SandboxesAcquire { session_id, resume };
        let given: LeaseGiven = self.host.call(op).await?;
        Ok(Box::new(JsLease {
            host: self.host.clone(),
            handle: given.lease,
            sandbox: SandboxRef::handle(given.lease),
        }))
    }

    async fn discard(&self, session_id: &str) -> Result<()> {
        self.host
            .call(HostOp::SandboxesDiscard { session_id })
            .await
    }

    async fn shutdown(&self) -> Result<()> {
        self.host.call(HostOp::SandboxesShutdown).await
    }
}

struct JsLease {
    host: Arc<Host>,
    handle: u64,
    sandbox: SandboxRef,
}

#[async_trait]
impl Lease for JsLease {
    fn sandbox(&self) -> SandboxRef {
        self.sandbox.clone()
    }

    async fn suspend(&self) -> Result<()> {
        let op = HostOp::LeaseSuspend { lease: self.handle };
        self.host.call(op).await
    }

    async fn close(&self) -> Result<()> {
        let op = HostOp::LeaseClose { lease: self.handle };
        self.host.call(op).await
    }
}
