//! Turns: how `send()` and `continue()` start one, and how its driver reads it to its end.
//!
//! The driver owns the session while it is `busy`. It starts the agent's turn, reads what the
//! agent reports (building the assistant message with the [`MessageAccumulator`]), writes the
//! reply to the store every `checkpoint_interval` rather than at every chunk, lets the `approve`
//! policy answer approvals (continuing the turn in the same client stream), and at the end writes
//! the session, then sends the held-back `finish` and ends the client's stream.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use super::answers;
use super::entry::{lock, now_ms, Entry, TurnSlot};
use super::messages::{self, pending_input_of};
use super::{timers, Inner, TURN_TOO_LONG};
use crate::engine::agent::{TurnEnd, TurnInput, TurnReport, TurnStart};
use crate::engine::error::{Result, SessionError};
use crate::engine::session::lifecycle::{decide, Command, Decision};
use crate::engine::session::{PendingInput, SessionStatus, SessionSummary, StoredMessage};
use crate::engine::ui::{MessageAccumulator, UiChunk};

/// What `send()` is given.
#[derive(Debug, Clone)]
pub struct SendRequest {
    /// The number of the turn, chosen by the caller: the key of its client stream.
    pub turn_id: u64,
    /// The user message: a string, or a `UIMessage`.
    pub message: Value,
    /// What the agent is told, when not the text of `message`.
    pub prompt: Option<String>,
    /// The id of the assistant message the turn writes.
    pub reply_id: String,
    /// The id the user message gets when it has none.
    pub message_id: String,
}

/// What `continue()` is given.
#[derive(Debug, Clone, Default)]
pub struct ContinueRequest {
    /// The number of the turn, chosen by the caller: the key of its client stream.
    pub turn_id: u64,
    /// The last assistant message as `useChat` sends it back, the answers filled in.
    pub message: Option<Value>,
    /// `ToolApprovalResponse`s.
    pub approvals: Vec<Value>,
    /// `ToolResultPart`s.
    pub tool_results: Vec<Value>,
}

/// A turn that started.
#[derive(Debug, Clone)]
pub struct TurnStarted {
    /// The id of the assistant message the turn writes.
    pub message_id: String,
    /// The session as the turn started: `busy`.
    pub session: SessionSummary,
}

/// A command that starts a turn.
pub(super) enum TurnAsk {
    Send(SendRequest),
    Continue(ContinueRequest),
}

/// The most approvals the `approve` policy answers in one turn.
const MOST_POLICY_ANSWERS: usize = 200;

/// What the driver is given.
struct Plan {
    turn_id: u64,
    message_id: String,
    input: TurnInput,
    continues: Option<Value>,
}

impl Inner {
    /// `send()` and `continue()`: waits for a preparing session, resumes a suspended one, starts
    /// a failed one again, then starts the turn; or refuses.
    pub(super) async fn command_turn(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        ask: TurnAsk,
    ) -> Result<TurnStarted> {
        if let TurnAsk::Send(request) = &ask {
            messages::user_message(&request.message, || request.message_id.clone())?;
        }
        let command = match ask {
            TurnAsk::Send(_) => Command::Send,
            TurnAsk::Continue(_) => Command::Continue,
        };
        let mut brought_back = false;
        loop {
            let guard = entry.commands.lock().await;
            self.load(entry).await?;
            let (status, error, awaits) = {
                let state = entry.state();
                let record = state.record_ref()?;
                let awaits = record
                    .summary
                    .pending_input
                    .as_ref()
                    .is_some_and(|p| !p.is_empty());
                (record.summary.status, record.summary.error.clone(), awaits)
            };
            let refuse = || SessionError::in_status(&entry.id, status, error.as_deref());
            match decide(status, command, awaits) {
                Decision::StartTurn => return self.begin_turn(entry, ask).await,
                Decision::WaitReady => {
                    drop(guard);
                    self.wait_while(entry, SessionStatus::Preparing).await;
                }
                // The start this message waited for failed: the message gets its error.
                Decision::Resume | Decision::StartAgain if brought_back => {
                    let failure = entry.state().start_failure.take();
                    return Err(failure.unwrap_or_else(refuse));
                }
                Decision::Resume | Decision::StartAgain
                    if self.shut_down.load(std::sync::atomic::Ordering::SeqCst) =>
                {
                    return Err(SessionError::ShutDown)
                }
                Decision::Resume | Decision::StartAgain => {
                    let resuming = status == SessionStatus::Suspended;
                    self.bring_back(entry, resuming).await?;
                    brought_back = true;
                    drop(guard);
                    self.wait_while(entry, SessionStatus::Preparing).await;
                }
                Decision::Refuse(Some(words)) => {
                    return Err(SessionError::conflict(&entry.id, status, words))
                }
                _ => return Err(refuse()),
            }
        }
    }

    /// Starts the turn of a session ready for it, under its command lock: the session is written
    /// `busy` with the user's message before anything is acknowledged.
    async fn begin_turn(self: &Arc<Self>, entry: &Arc<Entry>, ask: TurnAsk) -> Result<TurnStarted> {
        let slot = Arc::new(TurnSlot::default());
        let (plan, previous) = {
            let mut state = entry.state();
            let previous = state.record_ref()?.clone();
            let lost = state.paused_turn_lost;
            let record = state.record_mut()?;
            let (plan, index, accumulator) = match ask {
                TurnAsk::Send(request) => {
                    let message =
                        messages::user_message(&request.message, || request.message_id.clone())?;
                    let prompt = request
                        .prompt
                        .clone()
                        .unwrap_or_else(|| messages::prompt_of(&message));
                    messages::put_user_message(&mut record.messages, &message);
                    let plan = Plan {
                        turn_id: request.turn_id,
                        message_id: request.reply_id.clone(),
                        input: TurnInput::Prompt(prompt),
                        continues: None,
                    };
                    let accumulator = new_reply(None, request.reply_id)?;
                    (plan, record.messages.len(), accumulator)
                }
                TurnAsk::Continue(request) => {
                    let pending = record.summary.pending_input.clone().unwrap_or_default();
                    let index = record
                        .messages
                        .iter()
                        .rposition(|m| m.role().as_deref() == Some("assistant"))
                        .ok_or_else(|| {
                            SessionError::internal("a session awaiting input had no reply")
                        })?;
                    let paused = record.messages[index].to_value();
                    let collected = answers::collect(&entry.id, &pending, &request)?;
                    let input = if lost {
                        TurnInput::Prompt(collected.words())
                    } else {
                        TurnInput::Continue {
                            approvals: collected.approvals.clone(),
                            tool_results: collected.tool_results.clone(),
                        }
                    };
                    let message_id = paused
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    // The paused message gets its answers, as the client's copy has them; the
                    // agent continues it, answered (in words when the paused turn was lost).
                    let mut accumulator = new_reply(Some(paused), message_id.clone())?;
                    for chunk in
                        answers::answer_chunks(&collected.approvals, &collected.tool_results)
                    {
                        let _ = accumulator.push(&chunk);
                    }
                    let continues = Some(accumulator.message().clone());
                    let plan = Plan {
                        turn_id: request.turn_id,
                        message_id,
                        input,
                        continues,
                    };
                    (plan, index, accumulator)
                }
            };
            record.summary.pending_input = None;
            record.summary.error = None;
            state.paused_turn_lost = false;
            state.reply = Some((index, accumulator));
            state.turn = Some(slot.clone());
            state.set_status(SessionStatus::Busy, now_ms())?;
            (plan, previous)
        };
        let session = match self.save(entry, None).await {
            Ok(summary) => summary,
            Err(error) => {
                let mut state = entry.state();
                state.record = Some(previous);
                state.reply = None;
                state.turn = None;
                return Err(error);
            }
        };
        entry.notify();
        lock(&self.registry)
            .turns
            .insert(plan.turn_id, Arc::downgrade(&slot));
        let message_id = plan.message_id.clone();
        let inner = self.clone();
        let driven = entry.clone();
        tokio::spawn(async move {
            let drive = inner.drive(&driven, &slot, plan);
            if let Err(panic) =
                futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(drive)).await
            {
                let error = SessionError::internal(crate::engine::error::panic_message(&*panic));
                inner.seams.hooks.on_error(&error, "turn", Some(&driven.id));
            }
            inner.release(&driven);
        });
        Ok(TurnStarted {
            message_id,
            session,
        })
    }

    /// Reads the turn to its end, lets the policy answer approvals, and ends it.
    async fn drive(self: &Arc<Self>, entry: &Arc<Entry>, slot: &Arc<TurnSlot>, plan: Plan) {
        // Cuts the turn at its timeout, and lets go of it if it does not wind down.
        let _timer = self.arm_turn_timeout(entry, slot);
        let deadline = self.options.turn_timeout.map(|d| Instant::now() + d);
        let mut read = Reading::default();
        let mut input = plan.input;
        let mut drop_start = false;
        let mut policy = PolicyRounds::default();
        let mut sent = sent_approvals(&input);
        loop {
            let harness = entry.state().harness.clone();
            let Some(harness) = harness else {
                read.failure = Some(SessionError::internal(
                    "a busy session had no harness session",
                ));
                read.tell_client = true;
                break;
            };
            let (feed, mut reports) = crate::engine::agent::TurnFeed::channel();
            let start = TurnStart {
                turn_id: plan.turn_id,
                input: input.clone(),
                message_id: plan.message_id.clone(),
                continues: plan.continues.clone(),
                drop_start,
            };
            match harness.start_turn(start, feed).await {
                Ok(control) => slot.install(control),
                Err(error) => {
                    read.failure = Some(error);
                    read.tell_client = true;
                    break;
                }
            }
            let end = self
                .read_reports(entry, slot, &mut reports, deadline, &mut read)
                .await;
            read.usage = match end.usage {
                Some(usage) => messages::add_usage(read.usage.take(), &usage),
                None => read.usage.take(),
            };
            if let Some(failure) = end.failure {
                read.failure = Some(SessionError::Host {
                    message: failure.message,
                    origin: failure.origin,
                });
                break;
            }
            if slot.cut_reason().is_some() {
                break;
            }
            match self.policy_answers(entry, &mut policy).await {
                Some(approvals) => {
                    sent = approvals.clone();
                    input = TurnInput::Continue {
                        approvals,
                        tool_results: Vec::new(),
                    };
                    drop_start = true;
                    read.finish = None;
                }
                None => break,
            }
        }
        self.end_turn(entry, slot, plan.turn_id, read, &sent).await;
    }

    /// Reads the reports of one agent stream until its end; cuts the turn at its deadline and
    /// writes the reply so far every `checkpoint_interval`.
    async fn read_reports(
        &self,
        entry: &Entry,
        slot: &TurnSlot,
        reports: &mut UnboundedReceiver<TurnReport>,
        deadline: Option<Instant>,
        read: &mut Reading,
    ) -> TurnEnd {
        let interval = self.options.checkpoint_interval;
        let mut next_checkpoint = Instant::now() + interval;
        let mut dirty = false;
        loop {
            let too_long = async {
                match deadline {
                    Some(deadline) if slot.cut_reason().is_none() => {
                        tokio::time::sleep_until(deadline).await
                    }
                    _ => std::future::pending().await,
                }
            };
            let checkpoint = async {
                if dirty {
                    tokio::time::sleep_until(next_checkpoint).await
                } else {
                    std::future::pending().await
                }
            };
            tokio::select! {
                report = reports.recv() => match report {
                    Some(TurnReport::Chunks(chunks)) => {
                        self.take_chunks(entry, chunks, read);
                        dirty = true;
                    }
                    Some(TurnReport::Json(text)) => {
                        match serde_json::from_str::<Vec<UiChunk>>(&text) {
                            Ok(chunks) => self.take_chunks(entry, chunks, read),
                            Err(error) => {
                                let error = SessionError::internal(format!(
                                    "a turn reported chunks that are not UI message chunks: {error}"
                                ));
                                self.seams.hooks.on_error(&error, "turn", Some(&entry.id));
                            }
                        }
                        dirty = true;
                    }
                    Some(TurnReport::End(end)) => return end,
                    None => {
                        return TurnEnd {
                            usage: None,
                            failure: Some(crate::engine::agent::TurnFailure {
                                message: "The turn's stream ended without a word of its end.".into(),
                                origin: None,
                            }),
                        }
                    }
                },
                () = too_long => slot.cut(TURN_TOO_LONG),
                () = checkpoint => {
                    dirty = false;
                    next_checkpoint = Instant::now() + interval;
                    self.save_or_report(entry, None, "save").await;
                }
            }
        }
    }

    /// Adds reported chunks to the reply; a `finish` is held back for the end.
    fn take_chunks(&self, entry: &Entry, chunks: Vec<UiChunk>, read: &mut Reading) {
        let mut state = entry.state();
        let Some((_, reply)) = state.reply.as_mut() else {
            return;
        };
        for chunk in chunks {
            // A protocol error halts the reply as `readUIMessageStream` would; the turn goes on.
            let _ = reply.push(&chunk);
            if chunk.type_name() == "finish" {
                read.finish = Some(chunk);
            }
        }
    }

    /// The answers the `approve` policy gives to the approvals the turn paused on, when it
    /// answers every one of them (the turn then goes on); `None` leaves them to a person, keeping
    /// the policy's answers in `pendingInput.approvals[].decision`.
    async fn policy_answers(&self, entry: &Entry, policy: &mut PolicyRounds) -> Option<Vec<Value>> {
        if !self.seams.hooks.approves() {
            return None;
        }
        let (pending, summary) = {
            let state = entry.state();
            let (_, reply) = state.reply.as_ref()?;
            let pending = pending_input_of(reply.message(), true);
            let summary = state.record.as_ref()?.summary.clone();
            (pending, summary)
        };
        if pending.approvals.is_empty() {
            return None;
        }
        let mut responses = Vec::new();
        let mut decided = pending.clone();
        let previous = std::mem::take(&mut policy.last_round);
        for approval in decided.approvals.iter_mut() {
            let key = (approval.tool_name.clone(), approval.input.clone());
            if previous.contains(&key) || policy.answered >= MOST_POLICY_ANSWERS {
                continue;
            }
            match self.seams.hooks.approve(approval, &summary).await {
                Ok(Some(verdict)) => {
                    policy.answered += 1;
                    policy.last_round.push(key);
                    responses.push(answers::approval_response(&approval.approval_id, &verdict));
                    approval.decision = Some(verdict);
                }
                Ok(None) => {}
                Err(error) => self
                    .seams
                    .hooks
                    .on_error(&error, "approve", Some(&entry.id)),
            }
        }
        let all = decided.approvals.iter().all(|a| a.decision.is_some());
        if all && decided.tool_calls.is_empty() && !responses.is_empty() {
            return Some(responses);
        }
        let mut state = entry.state();
        state.policy_decisions = Some(decided);
        None
    }

    /// Ends the turn: the session written `idle` or `awaiting-input`, then the client told.
    async fn end_turn(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        slot: &TurnSlot,
        turn_id: u64,
        read: Reading,
        sent: &[Value],
    ) {
        // The end of a turn is a change of status like a command's: under the command lock, so
        // that the next message cannot start (and be written) between this status and its write.
        // No command waits for a turn to end while it holds the lock.
        let command = entry.commands.lock().await;
        if !super::bounds::is_current(entry, slot) {
            // Let go of (it did not wind down in time): the session was written without it.
            lock(&self.registry).turns.remove(&turn_id);
            return;
        }
        let cut = slot.cut_reason();
        let failed = read.failure.is_some();
        {
            let mut state = entry.state();
            let decisions = state.policy_decisions.take();
            let reply = state.reply.take();
            state.turn = None;
            let result = (|| -> Result<()> {
                let record = state.record_mut()?;
                let mut pending = PendingInput::default();
                if let Some((index, reply)) = reply {
                    let message = reply.into_message();
                    if !failed && cut.is_none() {
                        pending = pending_input_of(&message, read.paused());
                        if let Some(decisions) = decisions {
                            answers::keep_decisions(&mut pending, &decisions);
                        }
                        answers::keep_sent_answers(&mut pending, sent);
                    }
                    let has_parts = message
                        .get("parts")
                        .and_then(Value::as_array)
                        .is_some_and(|p| !p.is_empty());
                    if index < record.messages.len() {
                        record.messages[index] = StoredMessage::from_value(&message);
                    } else if has_parts {
                        record.messages.push(StoredMessage::from_value(&message));
                    }
                }
                if let Some(usage) = read.usage.as_ref() {
                    record.summary.usage = messages::add_usage(record.summary.usage.take(), usage);
                }
                record.summary.error = read
                    .failure
                    .as_ref()
                    .map(ToString::to_string)
                    .or_else(|| cut.clone());
                let status = if pending.is_empty() {
                    record.summary.pending_input = None;
                    SessionStatus::Idle
                } else {
                    record.summary.pending_input = Some(pending);
                    SessionStatus::AwaitingInput
                };
                state.set_status(status, now_ms())
            })();
            if let Err(error) = result {
                self.seams.hooks.on_error(&error, "turn", Some(&entry.id));
            }
        }
        if let Some(failure) = read.failure.as_ref() {
            self.seams.hooks.on_error(failure, "turn", Some(&entry.id));
        }
        let summary = match self.save(entry, None).await {
            Ok(summary) => summary,
            Err(error) => {
                self.seams.hooks.on_error(&error, "save", Some(&entry.id));
                match entry.snapshot() {
                    Ok(record) => record.summary,
                    Err(_) => return,
                }
            }
        };
        let mut closing = Vec::new();
        if read.tell_client {
            if let Some(failure) = read.failure.as_ref() {
                let text = self.seams.hooks.client_message(failure).await;
                closing.push(UiChunk::error(text));
            }
        }
        if let Some(finish) = read.finish {
            closing.push(finish);
        }
        let gone = slot.client_gone.load(std::sync::atomic::Ordering::SeqCst);
        if !closing.is_empty() && !gone {
            self.seams.clients.deliver(turn_id, closing);
        }
        lock(&self.registry).turns.remove(&turn_id);
        self.seams.clients.finish(turn_id, &summary);
        entry.notify();
        timers::arm_idle(self, entry);
        drop(command);
    }
}

/// The approval answers a continuation sends.
fn sent_approvals(input: &TurnInput) -> Vec<Value> {
    match input {
        TurnInput::Continue { approvals, .. } => approvals.clone(),
        TurnInput::Prompt(_) => Vec::new(),
    }
}

/// The accumulator of a turn's reply, continuing `message` when given.
fn new_reply(message: Option<Value>, id: String) -> Result<MessageAccumulator> {
    MessageAccumulator::try_new(message, Some(id))
        .map_err(|e| SessionError::internal(format!("the reply could not be continued: {e}")))
}

/// What the `approve` policy answered in a turn: how many approvals (at most
/// [`MOST_POLICY_ANSWERS`]), and which calls in its last round, so that a call asked again right
/// after it was answered, with the same tool and input, is left to a person.
#[derive(Default)]
struct PolicyRounds {
    answered: usize,
    last_round: Vec<(String, Value)>,
}

impl Reading {
    /// Whether the agent's stream ended on a pause (`finishReason` `tool-calls` or `other`),
    /// rather than at the end of its answer.
    fn paused(&self) -> bool {
        let reason = self
            .finish
            .as_ref()
            .map(UiChunk::to_value)
            .and_then(|finish| {
                finish
                    .get("finishReason")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
        matches!(reason.as_deref(), Some("tool-calls" | "other"))
    }
}

/// What the driver learned of the turn so far.
#[derive(Default)]
struct Reading {
    /// The `finish` chunk held back for the end.
    finish: Option<UiChunk>,
    /// The tokens used, summed over the agent's streams.
    usage: Option<Value>,
    /// The error the turn failed with.
    failure: Option<SessionError>,
    /// Whether the client must be told of the failure (it never reached the agent's stream).
    tell_client: bool,
}
