//! The engine's seams, implemented by what the application supplied in JavaScript: each call goes
//! through the [`Host`], and JavaScript objects (harness sessions, leases, sandboxes) stay in
//! JavaScript, known here by the number `index.js` keeps them under.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};

use super::host::{error_json, Host};
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

/// A handle number from a host answer.
fn handle(value: &Value, field: &str) -> Result<u64> {
    value
        .get(field)
        .and_then(Value::as_u64)
        .ok_or_else(|| SessionError::internal(format!("the host answered without a {field}")))
}

fn sandbox_json(sandbox: &SandboxRef) -> Value {
    match sandbox {
        SandboxRef::Js(id) => json!({ "js": id }),
        SandboxRef::Native(id) => json!({ "native": id }),
        SandboxRef::None => Value::Null,
    }
}

fn sandbox_ref(value: Option<&Value>) -> SandboxRef {
    let value = value.unwrap_or(&Value::Null);
    if let Some(id) = value.get("js").and_then(Value::as_u64) {
        SandboxRef::Js(id)
    } else if let Some(id) = value.get("native").and_then(Value::as_u64) {
        SandboxRef::Native(id)
    } else {
        SandboxRef::None
    }
}

/// The application's agent function and its `SessionAgent`s.
pub(crate) struct JsAgent {
    pub(crate) host: Arc<Host>,
    pub(crate) feeds: Arc<Feeds>,
}

#[async_trait]
impl Agent for JsAgent {
    async fn choose(&self, session_id: &str, metadata: &Value) -> Result<Value> {
        let payload = json!({ "sessionId": session_id, "metadata": metadata });
        let answer = self.host.call("agent.choose", payload).await?;
        Ok(json!(handle(&answer, "agent")?))
    }

    fn forget(&self, chosen: Value) {
        self.host.notify("agent.forget", json!({ "agent": chosen }));
    }

    async fn open(&self, request: OpenRequest) -> Result<Box<dyn HarnessSession>> {
        let mut payload = json!({
            "sessionId": request.session_id,
            "metadata": request.metadata,
            "sandbox": sandbox_json(&request.sandbox),
            "agent": request.chosen,
        });
        if let (Some(state), Some(object)) = (request.resume_from, payload.as_object_mut()) {
            object.insert("resumeFrom".into(), state);
        }
        let answer = self.host.call("agent.open", payload).await?;
        Ok(Box::new(JsHarnessSession {
            host: self.host.clone(),
            feeds: self.feeds.clone(),
            handle: handle(&answer, "session")?,
        }))
    }
}

/// A `HarnessAgentSession` with its agent, kept by JavaScript.
struct JsHarnessSession {
    host: Arc<Host>,
    feeds: Arc<Feeds>,
    handle: u64,
}

#[async_trait]
impl HarnessSession for JsHarnessSession {
    async fn start_turn(&self, turn: TurnStart, feed: TurnFeed) -> Result<Box<dyn TurnControl>> {
        let input = match turn.input {
            TurnInput::Prompt(prompt) => json!({ "prompt": prompt }),
            TurnInput::Continue {
                approvals,
                tool_results,
            } => {
                json!({ "toolApprovalContinuations": approvals, "toolResultContinuations": tool_results })
            }
        };
        let mut payload = json!({
            "session": self.handle,
            "turnId": turn.turn_id,
            "input": input,
            "messageId": turn.message_id,
            "dropStart": turn.drop_start,
            "holdApprovals": turn.hold_approvals,
        });
        if let (Some(message), Some(object)) = (turn.continues, payload.as_object_mut()) {
            object.insert("continues".into(), message);
        }
        self.feeds.open(turn.turn_id, feed);
        if let Err(error) = self.host.call("session.turn", payload).await {
            self.feeds.close(turn.turn_id);
            return Err(error);
        }
        Ok(Box::new(JsTurnControl {
            host: self.host.clone(),
            turn_id: turn.turn_id,
        }))
    }

    async fn has_unfinished_turn(&self) -> Result<bool> {
        let answer = self
            .host
            .call("session.unfinished", json!({ "session": self.handle }))
            .await?;
        Ok(answer.as_bool() == Some(true))
    }

    async fn stop(&self) -> Result<Value> {
        let answer = self
            .host
            .call("session.stop", json!({ "session": self.handle }))
            .await?;
        Ok(answer.get("resumeState").cloned().unwrap_or(Value::Null))
    }

    async fn destroy(&self) -> Result<()> {
        self.host
            .call("session.destroy", json!({ "session": self.handle }))
            .await
            .map(drop)
    }

    async fn run_command(&self, run: CommandRun) -> Result<CommandOutput> {
        let payload =
            json!({ "session": self.handle, "execId": run.exec_id, "command": run.command });
        let answer = self.host.call("session.exec", payload).await?;
        let text = |field: &str| {
            answer
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let exit_code = answer
            .get("exitCode")
            .and_then(Value::as_i64)
            .ok_or_else(|| SessionError::host("The sandbox's run() gave no whole exitCode."))?;
        Ok(CommandOutput {
            exit_code,
            stdout: text("stdout"),
            stderr: text("stderr"),
        })
    }
}

struct JsTurnControl {
    host: Arc<Host>,
    turn_id: u64,
}

impl TurnControl for JsTurnControl {
    fn abort(&self, reason: &str) {
        self.host.notify(
            "turn.abort",
            json!({ "turnId": self.turn_id, "reason": reason }),
        );
    }
}

/// The clients of the turns: the streams `index.js` made for them.
pub(crate) struct JsClients {
    pub(crate) host: Arc<Host>,
}

impl TurnClients for JsClients {
    fn deliver(&self, turn_id: u64, chunks: Vec<UiChunk>) {
        self.host.notify(
            "client.deliver",
            json!({ "turnId": turn_id, "chunks": chunks }),
        );
    }

    fn finish(&self, turn_id: u64, session: &SessionSummary) {
        self.host.notify(
            "client.finish",
            json!({ "turnId": turn_id, "session": session }),
        );
    }

    fn answer(&self, turn_id: u64, outcome: &Value) {
        self.host.notify(
            "client.answer",
            json!({ "turnId": turn_id, "outcome": outcome }),
        );
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
        self.host.notify("event", event);
    }

    fn on_error(&self, error: &SessionError, action: &str, session_id: Option<&str>) {
        let mut payload = json!({ "error": error_json(error), "action": action });
        if let (Some(id), Some(object)) = (session_id, payload.as_object_mut()) {
            object.insert("sessionId".into(), json!(id));
        }
        self.host.notify("error", payload);
    }

    async fn client_message(&self, error: &SessionError) -> String {
        match self
            .host
            .call("clientMessage", json!({ "error": error_json(error) }))
            .await
        {
            Ok(Value::String(text)) => text,
            _ => "An error occurred.".to_owned(),
        }
    }

    fn approves(&self) -> bool {
        self.approves
    }

    async fn approve(
        &self,
        approval: &PendingApproval,
        session: &SessionSummary,
    ) -> Result<Option<ApprovalVerdict>> {
        let answer = self
            .host
            .call(
                "approve",
                json!({ "approval": approval, "session": session }),
            )
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
        let mut payload = json!({ "record": record });
        if let (Some(state), Some(object)) = (resume_state, payload.as_object_mut()) {
            object.insert("resumeState".into(), state.clone());
        }
        self.host.call("store.save", payload).await?;
        self.unreadable.forget(&record.summary.id);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        let answer = self.host.call_raw("store.get", json!({ "id": id })).await?;
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
        let answer = self.host.call_raw("store.list", json!({})).await?;
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
        let answer = self
            .host
            .call("store.getResumeState", json!({ "id": id }))
            .await?;
        Ok((!answer.is_null()).then_some(answer))
    }

    async fn delete(&self, id: &str) -> Result<()> {
        self.host.call("store.delete", json!({ "id": id })).await?;
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
        let answer = self
            .host
            .call(
                "sandboxes.acquire",
                json!({ "sessionId": session_id, "resume": resume }),
            )
            .await?;
        Ok(Box::new(JsLease {
            host: self.host.clone(),
            handle: handle(&answer, "lease")?,
            sandbox: sandbox_ref(answer.get("sandbox")),
        }))
    }

    async fn discard(&self, session_id: &str) -> Result<()> {
        self.host
            .call("sandboxes.discard", json!({ "sessionId": session_id }))
            .await
            .map(drop)
    }

    async fn shutdown(&self) -> Result<()> {
        self.host
            .call("sandboxes.shutdown", json!({}))
            .await
            .map(drop)
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

    async fn suspend(self: Box<Self>) -> Result<()> {
        self.host
            .call("lease.suspend", json!({ "lease": self.handle }))
            .await
            .map(drop)
    }

    async fn close(self: Box<Self>) -> Result<()> {
        self.host
            .call("lease.close", json!({ "lease": self.handle }))
            .await
            .map(drop)
    }
}
