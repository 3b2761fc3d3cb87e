//! The protocol between the binding and its JavaScript host: every operation the engine (through
//! the binding) asks of JavaScript, and the answers it reads back.
//!
//! A call crosses as one JSON text, a [`HostOp`] tagged by its `op` field
//! (`{"op":"agent.open","sessionId":...}`); `js/host.js` (`dispatcher`) hands it to the function of
//! that name. The answer crosses back as `{"ok":true,"value":...}` or
//! `{"ok":false,"error":{"message":...,"origin":n}}`, `origin` numbering the original JavaScript
//! error, kept on that side (`js/errors.js`, `keeper`).
//!
//! The map of the operations, and who serves them:
//!
//! | op | asked by | served by | answer |
//! |----|----------|-----------|--------|
//! | `agent.choose`, `agent.forget`, `agent.open` | `seams::JsAgent` | `js/host.js` | [`AgentChosen`], [`SessionOpened`] |
//! | `session.turn`, `.unfinished`, `.stop`, `.destroy`, `.exec` | `seams::JsHarnessSession` | `js/host.js` (`js/turns.js`) | [`TurnAnswer`], [`Stopped`], [`CommandAnswer`] |
//! | `turn.abort`, `client.deliver`, `client.answer`, `client.finish` | `seams::JsTurnControl`, `JsClients` | `js/turns.js` | none (sent) |
//! | `event`, `error`, `clientMessage`, `approve` | `seams::JsHooks` | `js/host.js` | text, verdict |
//! | `store.*` | `seams::JsStore` | the application's `SessionStore` | records |
//! | `sandboxes.*`, `lease.*` | `seams::JsSandboxes` | the application's `SessionSandboxes` | [`LeaseGiven`] |
//! | `sandbox.open`, `.fork`, `.create`, `.resume`, `.release`, `.stop`, `.destroy`, `.forget` | `strategies` | `js/strategies.js` | [`SandboxGiven`] |
//!
//! JavaScript objects (agents, harness sessions, leases, sandboxes) stay in JavaScript: the
//! protocol names them by the numbers `js/handles.js` gives them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::engine::session::{PendingApproval, SessionRecord, SessionSummary};
use crate::engine::ui::UiChunk;

/// An operation the binding asks of JavaScript, with its arguments.
#[derive(Serialize)]
#[serde(tag = "op")]
pub(crate) enum HostOp<'a> {
    /// The application's `agent({ id, metadata })`: the `SessionAgent` of a session.
    #[serde(rename = "agent.choose", rename_all = "camelCase")]
    AgentChoose {
        session_id: &'a str,
        metadata: &'a Value,
    },
    /// A chosen agent that will not be opened.
    #[serde(rename = "agent.forget")]
    AgentForget { agent: &'a Value },
    /// `agent.createSession({ sessionId, sandboxSession, resumeFrom? })`.
    #[serde(rename = "agent.open", rename_all = "camelCase")]
    AgentOpen {
        session_id: &'a str,
        metadata: &'a Value,
        sandbox: Option<SandboxWire>,
        agent: &'a Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        resume_from: Option<&'a Value>,
    },
    /// Starts a turn of a harness session (`stream` or `continueStream`).
    #[serde(rename = "session.turn", rename_all = "camelCase")]
    SessionTurn {
        session: u64,
        turn_id: u64,
        input: TurnInputWire<'a>,
        message_id: &'a str,
        drop_start: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        continues: Option<&'a Value>,
    },
    /// Whether the harness session has a turn it did not finish.
    #[serde(rename = "session.unfinished")]
    SessionUnfinished { session: u64 },
    /// `session.stop()`: its resume state.
    #[serde(rename = "session.stop")]
    SessionStop { session: u64 },
    /// `session.destroy()`.
    #[serde(rename = "session.destroy")]
    SessionDestroy { session: u64 },
    /// A command of `exec()`, run through the sandbox's `run()`.
    #[serde(rename = "session.exec", rename_all = "camelCase")]
    SessionExec {
        session: u64,
        exec_id: u64,
        command: &'a str,
    },
    /// Aborts a turn's agent stream.
    #[serde(rename = "turn.abort", rename_all = "camelCase")]
    TurnAbort { turn_id: u64, reason: &'a str },
    /// Chunks for the clients of a turn.
    #[serde(rename = "client.deliver", rename_all = "camelCase")]
    ClientDeliver { turn_id: u64, chunks: &'a [UiChunk] },
    /// The turn is over and its session written.
    #[serde(rename = "client.finish", rename_all = "camelCase")]
    ClientFinish {
        turn_id: u64,
        session: &'a SessionSummary,
    },
    /// The structured answer of a turn (`turn.output`): `{ value }`, or `{ code, message,
    /// errors }`; sent before `client.finish`.
    #[serde(rename = "client.answer", rename_all = "camelCase")]
    ClientAnswer { turn_id: u64, outcome: &'a Value },
    /// A change for `subscribe()`'s listeners.
    #[serde(rename = "event")]
    Event { event: Value },
    /// A failure for `onError`.
    #[serde(rename = "error", rename_all = "camelCase")]
    Error {
        error: Value,
        action: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        session_id: Option<&'a str>,
    },
    /// What a client is told of an error (`errorMessage`).
    #[serde(rename = "clientMessage")]
    ClientMessage { error: Value },
    /// The application's `approve(approval, { session })`.
    #[serde(rename = "approve")]
    Approve {
        approval: &'a PendingApproval,
        session: &'a SessionSummary,
    },
    /// `store.save(record, resumeState?)`.
    #[serde(rename = "store.save", rename_all = "camelCase")]
    StoreSave {
        record: &'a SessionRecord,
        #[serde(skip_serializing_if = "Option::is_none")]
        resume_state: Option<&'a Value>,
    },
    /// `store.get(id)`.
    #[serde(rename = "store.get")]
    StoreGet { id: &'a str },
    /// `store.list()`.
    #[serde(rename = "store.list")]
    StoreList,
    /// `store.getResumeState(id)`.
    #[serde(rename = "store.getResumeState")]
    StoreGetResumeState { id: &'a str },
    /// `store.delete(id)`.
    #[serde(rename = "store.delete")]
    StoreDelete { id: &'a str },
    /// `sandboxes.acquire(sessionId, { resume })`.
    #[serde(rename = "sandboxes.acquire", rename_all = "camelCase")]
    SandboxesAcquire { session_id: &'a str, resume: bool },
    /// `sandboxes.discard(sessionId)`.
    #[serde(rename = "sandboxes.discard", rename_all = "camelCase")]
    SandboxesDiscard { session_id: &'a str },
    /// `sandboxes.shutdown()`.
    #[serde(rename = "sandboxes.shutdown")]
    SandboxesShutdown,
    /// `lease.suspend()`.
    #[serde(rename = "lease.suspend")]
    LeaseSuspend { lease: u64 },
    /// `lease.close()`.
    #[serde(rename = "lease.close")]
    LeaseClose { lease: u64 },
    /// `sharedSandbox()`'s `open()`.
    #[serde(rename = "sandbox.open")]
    SandboxOpen,
    /// `sandbox.fork({ ports: [port], sessionId })`.
    #[serde(rename = "sandbox.fork", rename_all = "camelCase")]
    SandboxFork {
        sandbox: u64,
        session_id: &'a str,
        port: u16,
    },
    /// `sandboxPerSession()`'s `create(sessionId)`.
    #[serde(rename = "sandbox.create", rename_all = "camelCase")]
    SandboxCreate { session_id: &'a str },
    /// `sandboxPerSession()`'s `resume(sessionId)`.
    #[serde(rename = "sandbox.resume", rename_all = "camelCase")]
    SandboxResume { session_id: &'a str },
    /// A shared sandbox's view given back (`release()`, else `stop()`).
    #[serde(rename = "sandbox.release")]
    SandboxRelease { sandbox: u64 },
    /// `sandbox.stop()`.
    #[serde(rename = "sandbox.stop")]
    SandboxStop { sandbox: u64 },
    /// `sandbox.destroy()`.
    #[serde(rename = "sandbox.destroy")]
    SandboxDestroy { sandbox: u64 },
    /// A sandbox Rust no longer names.
    #[serde(rename = "sandbox.forget")]
    SandboxForget { sandbox: u64 },
}

impl HostOp<'_> {
    /// The call as the JSON text JavaScript reads.
    pub(crate) fn to_json(&self) -> String {
        // Every field is plain data: writing it cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// The name of the operation of `call`, the JSON text of a [`HostOp`] (its first field), for
/// the errors that name it.
pub(crate) fn op_name(call: &str) -> &str {
    call.strip_prefix(r#"{"op":""#)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or("?")
}

/// A sandbox as an agent is handed it: a JavaScript object by its lease's number, or one of the
/// engine's own by its number in the binding.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) enum SandboxWire {
    /// The `sandboxSession` of the lease of that number, in JavaScript.
    Js(u64),
    /// A native sandbox handed out under that number.
    Native(u64),
}

/// What a turn starts from.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum TurnInputWire<'a> {
    /// A new prompt.
    Prompt { prompt: &'a str },
    /// Answers to what the previous turn asked.
    #[serde(rename_all = "camelCase")]
    Continue {
        tool_approval_continuations: &'a [Value],
        /// Absent for the continuation `approve` starts (as the reference's).
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_result_continuations: Option<&'a [Value]>,
    },
}

/// The answer of `agent.choose`.
#[derive(Deserialize)]
pub(crate) struct AgentChosen {
    /// The chosen agent's number.
    pub(crate) agent: u64,
}

/// The answer of `agent.open`.
#[derive(Deserialize)]
pub(crate) struct SessionOpened {
    /// The harness session's number.
    pub(crate) session: u64,
}

/// The answer of `session.turn`: `null` when the agent's stream exists; when the agent refused the
/// turn (its `stream()` or `continueStream()` threw), `{ refused }`, so that the refusal crosses
/// once, with what the engine asks next.
#[derive(Deserialize)]
pub(crate) struct TurnAnswer {
    /// Why the turn did not start.
    #[serde(default)]
    pub(crate) refused: Option<TurnRefused>,
}

/// A turn the agent refused.
#[derive(Deserialize)]
pub(crate) struct TurnRefused {
    /// The failure, `{ message, origin }`, as a failed operation answers it.
    pub(crate) error: Value,
    /// Whether the harness session still has an unfinished turn; absent when that could not be
    /// read (the engine then asks with `session.unfinished`, and hears why).
    #[serde(default)]
    pub(crate) unfinished: Option<bool>,
}

/// The answer of `session.stop`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Stopped {
    /// What the harness session resumes from.
    #[serde(default)]
    pub(crate) resume_state: Value,
}

/// The answer of `session.exec`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CommandAnswer {
    /// The command's exit code.
    pub(crate) exit_code: Option<i64>,
    /// What it wrote to stdout.
    #[serde(default)]
    pub(crate) stdout: String,
    /// What it wrote to stderr.
    #[serde(default)]
    pub(crate) stderr: String,
}

/// The answer of `sandboxes.acquire`.
#[derive(Deserialize)]
pub(crate) struct LeaseGiven {
    /// The lease's number; its `sandboxSession` is the sandbox an agent is handed.
    pub(crate) lease: u64,
}

/// The answer of the `sandbox.*` operations that give a sandbox: a JavaScript one by its number,
/// or a native one handed over (`NativeSessionSandboxes.adopt`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum SandboxGiven {
    /// A sandbox kept in JavaScript.
    Sandbox(u64),
    /// A native sandbox handed over under that number.
    Native(u64),
}
