//! The agent seam: how the engine opens harness sessions and runs their turns.
//!
//! A JavaScript `SessionAgent` (a `HarnessAgent` is one) implements it through the binding; the
//! engine's tests implement it in Rust. A turn's chunks reach the client by the agent's own path
//! (in JavaScript they never cross into Rust on their way to the client) and are *reported* to the
//! engine in batches, through the [`TurnFeed`] the engine hands the agent: the engine builds the
//! conversation from the reports, and decides how the turn ends.

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::engine::error::Result;
use crate::engine::lease::SandboxRef;
use crate::engine::ui::UiChunk;

/// What the engine needs of an agent: a `HarnessAgent`, through the binding, is one.
#[async_trait]
pub trait Agent: Send + Sync {
    /// Picks the agent of a session, `agent({ id, metadata })`, before its sandbox is acquired,
    /// as the reference does: an `agent()` that throws never acquires a sandbox. What it gives is
    /// handed to [`Agent::open`] as [`OpenRequest::chosen`], or to [`Agent::forget`] when the start
    /// ends before. Default: nothing to pick, `open` does it all.
    ///
    /// # Errors
    /// What the application's `agent()` threw.
    async fn choose(&self, _session_id: &str, _metadata: &Value) -> Result<Value> {
        Ok(Value::Null)
    }

    /// Forgets what [`Agent::choose`] gave, the start having ended without opening it.
    fn forget(&self, _chosen: Value) {}

    /// Opens the harness session of a session on its sandbox, with the agent
    /// [`Agent::choose`] picked: `createSession({ sessionId, sandboxSession, resumeFrom })`.
    ///
    /// # Errors
    /// What the application's agent, or its harness, threw.
    async fn open(&self, request: OpenRequest) -> Result<Box<dyn HarnessSession>>;
}

/// What [`Agent::open`] is given.
#[derive(Debug, Clone)]
pub struct OpenRequest {
    /// The session's id, also the harness session's.
    pub session_id: String,
    /// The session's metadata, from which the application picks its agent.
    pub metadata: Value,
    /// The sandbox the lease gave.
    pub sandbox: SandboxRef,
    /// The state to resume from, when the session comes back from `suspended`.
    pub resume_from: Option<Value>,
    /// What [`Agent::choose`] gave.
    pub chosen: Value,
}

/// An open harness session (`HarnessAgentSession`).
#[async_trait]
pub trait HarnessSession: Send + Sync {
    /// Starts a turn; its chunks go to the client as `turn.client` says, and are reported to
    /// `feed`, ending with one [`TurnReport::End`].
    ///
    /// # Errors
    /// When the turn could not start at all; a turn that fails once started reports its failure
    /// through [`TurnReport::End`] instead.
    async fn start_turn(&self, turn: TurnStart, feed: TurnFeed) -> Result<Box<dyn TurnControl>>;

    /// Whether the harness session holds an unfinished turn (`hasUnfinishedTurn()`): a turn paused
    /// on an approval or a tool call, or cut short before its end.
    ///
    /// # Errors
    /// When the harness session could not say.
    async fn has_unfinished_turn(&self) -> Result<bool>;

    /// Stops the harness session and returns the state it resumes from (`stop()`).
    ///
    /// # Errors
    /// When the harness could not be stopped cleanly.
    async fn stop(&self) -> Result<Value>;

    /// Ends the harness session for good (`destroy()`).
    ///
    /// # Errors
    /// When the harness could not be destroyed.
    async fn destroy(&self) -> Result<()>;

    /// Runs `run.command` in the harness session's sandbox (its `run`), in the directory the
    /// harness works in, or the sandbox's default one: `exec()`. The output comes back whole; the
    /// engine bounds it.
    ///
    /// # Errors
    /// When the command could not be run (a nonzero exit is a result); by default, a harness
    /// session that has no sandbox to run it in.
    async fn run_command(&self, run: CommandRun) -> Result<CommandOutput> {
        let _ = run;
        Err(crate::engine::error::SessionError::host(
            "The session has no sandbox to run a command in.",
        ))
    }
}

/// What [`HarnessSession::run_command`] is given.
#[derive(Debug, Clone)]
pub struct CommandRun {
    /// A number for the command, unique in the process: the binding's key for its `abortSignal`.
    pub exec_id: u64,
    /// The shell command, exactly as the caller gave it.
    pub command: String,
}

/// What a command gave, whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandOutput {
    /// Its exit code.
    pub exit_code: i64,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// How a turn starts.
#[derive(Debug, Clone)]
pub struct TurnStart {
    /// A number for the turn, unique in the process: the binding's key for the client stream.
    pub turn_id: u64,
    /// What the agent is told.
    pub input: TurnInput,
    /// The id of the assistant message the turn writes: its `start` chunk must carry it.
    pub message_id: String,
    /// The assistant message the turn continues, when it continues one.
    pub continues: Option<Value>,
    /// Whether the `start` chunk must be kept from the client: the turn continues, in the same
    /// client stream, one whose `start` the client already has.
    pub drop_start: bool,
}

/// What the agent is told in a turn.
#[derive(Debug, Clone)]
pub enum TurnInput {
    /// `agent.stream({ prompt })`.
    Prompt(String),
    /// `agent.continueStream({ toolApprovalContinuations, toolResultContinuations })`.
    Continue {
        /// `ToolApprovalResponse`s, as JSON.
        approvals: Vec<Value>,
        /// `ToolResultPart`s, as JSON; `None` for the continuation `approve` starts, which the
        /// reference calls with `toolApprovalContinuations` only.
        tool_results: Option<Vec<Value>>,
    },
}

/// Cuts a running turn short.
pub trait TurnControl: Send + Sync {
    /// Aborts the turn with `reason`: its stream ends with an `abort` chunk carrying it.
    fn abort(&self, reason: &str);
}

/// What an agent reports of a running turn.
#[derive(Debug)]
pub enum TurnReport {
    /// Chunks, in order. Every chunk but `finish` has already gone to the client (but `start`,
    /// when the turn was told to drop it, and `tool-approval-request`, when told to hold them);
    /// `finish` is held back for the engine to send at the end.
    Chunks(Vec<UiChunk>),
    /// Chunks still in the form the agent reported them in (JSON text from JavaScript): decoded
    /// by the engine's turn loop, off the reporter's thread.
    Encoded(EncodedChunks),
    /// The turn's stream ended.
    End(TurnEnd),
}

/// Chunks not decoded yet, and how to decode them: the agent's own format stays the agent's.
pub struct EncodedChunks(Box<dyn FnOnce() -> std::result::Result<Vec<UiChunk>, String> + Send>);

impl EncodedChunks {
    /// Chunks that `decode` gives, in order, or the reason they cannot be read.
    pub fn new(
        decode: impl FnOnce() -> std::result::Result<Vec<UiChunk>, String> + Send + 'static,
    ) -> Self {
        EncodedChunks(Box::new(decode))
    }

    /// The chunks, or why they are not UI message chunks.
    ///
    /// # Errors
    /// The reason the decode gave.
    pub fn decode(self) -> std::result::Result<Vec<UiChunk>, String> {
        (self.0)()
    }
}

impl std::fmt::Debug for EncodedChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EncodedChunks")
    }
}

/// How a turn's stream ended.
#[derive(Debug, Clone, Default)]
pub struct TurnEnd {
    /// The tokens the turn used (`totalUsage`), when known.
    pub usage: Option<Value>,
    /// The error the turn failed with, when it failed.
    pub failure: Option<TurnFailure>,
    /// Whether the caller's own `abortSignal` cut the stream (however it ended: an `abort` chunk
    /// or an error): its open parts are closed, as any cut's.
    pub caller_aborted: bool,
}

/// A turn that failed: what the session keeps, and what the client was told.
#[derive(Debug, Clone)]
pub struct TurnFailure {
    /// The full message, kept in the session's `error`.
    pub message: String,
    /// The original JavaScript error, kept by the binding for `onError`.
    pub origin: Option<u64>,
}

/// Where an agent reports a turn: the sending half of the engine's channel.
#[derive(Debug, Clone)]
pub struct TurnFeed {
    sender: mpsc::UnboundedSender<TurnReport>,
}

impl TurnFeed {
    /// A feed and the receiver the engine reads it from.
    pub fn channel() -> (TurnFeed, mpsc::UnboundedReceiver<TurnReport>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (TurnFeed { sender }, receiver)
    }

    /// Reports `report`; false when the engine no longer listens.
    pub fn report(&self, report: TurnReport) -> bool {
        self.sender.send(report).is_ok()
    }
}
