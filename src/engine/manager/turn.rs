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

use super::command_wait::{CommandWait, StartWait};
use super::entry::{lock, CutTurn, Entry, Phase, Turn, TurnSlot};
use super::submissions::{self, SubmissionAsk};
use super::turn_options::{self, starts_step, TurnOptions};
use super::turn_output::{self, OutputSpec, OutputVerdict};
use super::{timers, Inner, APPLICATION_STOPPED, SESSION_CLOSED, TURN_TOO_LONG};
use crate::engine::agent::{TurnEnd, TurnInput, TurnReport, TurnStart};
use crate::engine::error::{Result, SessionError};
use crate::engine::session::answers;
use crate::engine::session::import;
use crate::engine::session::lifecycle::{decide, Command, Decision, Event, Input};
use crate::engine::session::messages::{self, pending_input_of};
use crate::engine::session::{SessionStatus, SessionSummary, StoredMessage};
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
    /// Guidance and limits for this turn.
    pub options: TurnOptions,
    /// The caller's `submissionId`, with the digest of the request.
    pub submission: Option<SubmissionAsk>,
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
    /// Guidance and limits for this turn.
    pub options: TurnOptions,
    /// The caller's `submissionId`, with the digest of the request.
    pub submission: Option<SubmissionAsk>,
}

/// A turn that started.
#[derive(Debug, Clone)]
pub struct TurnStarted {
    /// The id of the assistant message the turn writes.
    pub message_id: String,
    /// The session as the turn started: `busy`; or as it is, for a submission seen before.
    pub session: SessionSummary,
    /// Whether the request's `submissionId` had started this turn before: no turn started now.
    pub replayed: bool,
    /// In many-instance mode, the turn's log: any instance streams the turn from it
    /// ([`super::SessionManager::follow_turn`]).
    pub log: Option<crate::engine::cluster::TurnKey>,
}

/// A command that starts a turn.
pub(super) enum TurnAsk {
    Send(SendRequest),
    Continue(ContinueRequest),
}

impl TurnAsk {
    /// The request as it is handed to the owner of its session, on another instance.
    pub(super) fn to_wire(&self) -> Value {
        use super::many::{options_to_wire, submission_to_wire};
        match self {
            TurnAsk::Send(request) => serde_json::json!({
                "kind": "send",
                "message": request.message,
                "prompt": request.prompt,
                "replyId": request.reply_id,
                "messageId": request.message_id,
                "options": options_to_wire(&request.options),
                "submission": submission_to_wire(request.submission.as_ref()),
            }),
            TurnAsk::Continue(request) => serde_json::json!({
                "kind": "continue",
                "message": request.message,
                "approvals": request.approvals,
                "toolResults": request.tool_results,
                "options": options_to_wire(&request.options),
                "submission": submission_to_wire(request.submission.as_ref()),
            }),
        }
    }

    /// The request's `submissionId`, if it has one.
    fn submission(&self) -> Option<&SubmissionAsk> {
        match self {
            TurnAsk::Send(request) => request.submission.as_ref(),
            TurnAsk::Continue(request) => request.submission.as_ref(),
        }
    }
}

/// The most approvals the `approve` policy answers in one turn.
const MOST_POLICY_ANSWERS: usize = 200;

/// What the driver is given.
struct Plan {
    /// The turn's limits, and its addendum.
    options: TurnOptions,
    turn_id: u64,
    message_id: String,
    input: TurnInput,
    continues: Option<Value>,
    /// Whether the prompt gives the agent the session's imported conversation.
    tells_import: bool,
}

impl Inner {
    /// `send()` and `continue()`: waits for a preparing session, resumes a suspended one, starts
    /// a failed one again, then starts the turn; or refuses.
    pub(super) async fn command_turn(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        ask: TurnAsk,
        cancel: &mut tokio::sync::watch::Receiver<bool>,
    ) -> Result<TurnStarted> {
        if let TurnAsk::Send(request) = &ask {
            messages::user_message(&request.message, || request.message_id.clone())?;
        }
        let command = match ask {
            TurnAsk::Send(_) => Command::Send,
            TurnAsk::Continue(_) => Command::Continue,
        };
        let mut wait = CommandWait::new(entry, cancel, StartWait::Whole);
        loop {
            // A command running in the sandbox holds the lock: the message waits for it, unless
            // its caller cuts it.
            let guard = wait.lock().await?;
            self.load(entry).await?;
            let (status, error) = {
                let state = entry.state();
                let record = state.record_ref()?;
                (record.summary.status, record.summary.error.clone())
            };
            // A submission seen before finds its turn, whatever the session does now.
            if let Some(ask) = ask.submission() {
                let seen = {
                    let state = entry.state();
                    let record = state.record_ref()?;
                    submissions::seen(record, ask)?
                        .map(|reply_id| (reply_id, record.summary.clone()))
                };
                if let Some((reply_id, session)) = seen {
                    return Ok(TurnStarted {
                        message_id: reply_id,
                        session,
                        replayed: true,
                        log: self.replayed_log(&entry.id).await,
                    });
                }
            }
            match decide(status, Input::Command(command)) {
                Decision::StartTurn => return self.begin_turn(entry, ask).await,
                other => {
                    wait.follow(self, guard, other, status, error.as_deref())
                        .await?
                }
            }
        }
    }

    /// Starts the turn of a session ready for it, under its command lock: the session is written
    /// `busy` with the user's message, then the agent's stream is asked for; the agent's refusal
    /// ends the turn and rejects the command.
    async fn begin_turn(self: &Arc<Self>, entry: &Arc<Entry>, ask: TurnAsk) -> Result<TurnStarted> {
        let slot = Arc::new(TurnSlot::default());
        let submission = ask.submission().cloned();
        let (plan, previous, lost) = {
            let mut state = entry.state();
            let previous = state.record_ref()?.clone();
            let lost = match &state.phase {
                Phase::Ready(live) => live.lost_turn,
                _ => {
                    return Err(SessionError::internal(
                        "a session ready for a turn had no harness session",
                    ))
                }
            };
            let record = state.record_mut()?;
            let (plan, index, accumulator) = match ask {
                TurnAsk::Send(request) => {
                    let message =
                        messages::user_message(&request.message, || request.message_id.clone())?;
                    let mut prompt = request
                        .prompt
                        .clone()
                        .unwrap_or_else(|| messages::prompt_of(&message));
                    // The addendum of a continue() the agent could not be told goes with this prompt.
                    let mut options = request.options.clone();
                    options.carried_addendum = turn_options::carried_addendum(
                        record.messages.last().map(StoredMessage::to_value).as_ref(),
                    );
                    // An imported conversation the agent was not given yet comes before the
                    // prompt, once: the mark goes with this turn (kept if the agent gives no
                    // stream), and the user's message in the record stays as they wrote it.
                    let tells_import = import::is_pending(&record.summary.extra);
                    if tells_import {
                        prompt = import::with_transcript(&record.messages, &prompt);
                        import::mark_pending(&mut record.summary.extra, false);
                    }
                    messages::put_user_message(&mut record.messages, &message);
                    let plan = Plan {
                        turn_id: request.turn_id,
                        message_id: request.reply_id.clone(),
                        input: TurnInput::Prompt(options.prompt(prompt)),
                        continues: None,
                        options,
                        tells_import,
                    };
                    let mut accumulator = new_reply(None, request.reply_id)?;
                    if let Some(chunk) = request.options.metadata_chunk(false) {
                        let _ = accumulator.push(&chunk);
                    }
                    (plan, record.messages.len(), accumulator)
                }
                TurnAsk::Continue(request) => {
                    let index = record
                        .messages
                        .iter()
                        .rposition(|m| m.role_str() == Some("assistant"))
                        .ok_or_else(|| {
                            SessionError::conflict(
                                &entry.id,
                                record.summary.status,
                                answers::NO_ANSWER,
                            )
                        })?;
                    let paused = record.messages[index].to_value();
                    let pending = record
                        .summary
                        .pending_input
                        .clone()
                        .unwrap_or_else(|| pending_input_of(&paused, true));
                    let collected = answers::collect(
                        &entry.id,
                        &pending,
                        request.message.as_ref(),
                        &request.approvals,
                        &request.tool_results,
                    )?;
                    let mut options = request.options.clone();
                    // A continuation carries no words: its addendum waits for the next prompt,
                    // which a lost turn's answers are (with any addendum left untold before).
                    options.carried_addendum = lost
                        .then(|| turn_options::carried_addendum(Some(&paused)))
                        .flatten();
                    let input = if lost {
                        TurnInput::Prompt(options.prompt(collected.words()))
                    } else {
                        TurnInput::Continue {
                            approvals: collected.approvals.clone(),
                            tool_results: Some(collected.tool_results.clone()),
                        }
                    };
                    let message_id = paused
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned();
                    // The paused message gets its answers, as the client's copy has them; the
                    // agent continues it, answered (in words when the paused turn was lost).
                    let (approvals, tool_results) =
                        answers::answerable(&paused, &collected.approvals, &collected.tool_results);
                    let mut accumulator = new_reply(Some(paused), message_id.clone())?;
                    for chunk in answers::answer_chunks(&approvals, &tool_results) {
                        let _ = accumulator.push(&chunk);
                    }
                    if options.carried_addendum.is_some() {
                        if let Some(chunk) = turn_options::told_chunk() {
                            let _ = accumulator.push(&chunk);
                        }
                    }
                    if let Some(chunk) = options.metadata_chunk(!lost) {
                        let _ = accumulator.push(&chunk);
                    }
                    let continues = Some(accumulator.message().clone());
                    let plan = Plan {
                        turn_id: request.turn_id,
                        message_id,
                        input,
                        continues,
                        options,
                        tells_import: false,
                    };
                    (plan, index, accumulator)
                }
            };
            record.summary.pending_input = None;
            record.summary.error = None;
            if let Some(ask) = submission.as_ref() {
                submissions::remember(record, ask, &plan.message_id);
            }
            let Phase::Ready(mut live) = std::mem::replace(&mut state.phase, Phase::Kept) else {
                unreachable!("the phase was checked above, under the same lock");
            };
            live.lost_turn = false;
            state.phase = Phase::Busy(
                live,
                Box::new(Turn {
                    slot: slot.clone(),
                    index,
                    reply: accumulator,
                    policy_decisions: None,
                }),
            );
            state.apply(Event::TurnBegan)?;
            (plan, previous, lost)
        };
        let session = match self.save(entry, None).await {
            Ok(summary) => summary,
            Err(error) => {
                let mut state = entry.state();
                if let Phase::Busy(mut live, _) = std::mem::replace(&mut state.phase, Phase::Kept) {
                    live.lost_turn = lost;
                    state.phase = Phase::Ready(live);
                }
                state.record = Some(previous);
                return Err(error);
            }
        };
        entry.notify();
        let log = self.open_log(&entry.id, plan.turn_id).await;
        lock(&self.registry)
            .turns
            .insert(plan.turn_id, Arc::downgrade(&slot));
        let message_id = plan.message_id.clone();
        // Cuts the turn at its timeout, and lets go of it if it does not wind down.
        let timer = self.arm_turn_timeout(entry, &slot, plan.options.timeout);
        let first = {
            let stream = self.start_stream(entry, &slot, &plan, plan.input.clone(), false);
            tokio::pin!(stream);
            tokio::select! {
                first = &mut stream => first,
                // `agent.stream()` does not resolve, and the turn was cut: let go of it here,
                // under the command lock this call holds.
                reason = self.cut_and_wound_down(&slot) => {
                    self.let_go_locked(entry, &reason).await;
                    let error = entry.state().record.as_ref().and_then(|r| r.summary.error.clone());
                    return Err(SessionError::in_status(
                        &entry.id,
                        SessionStatus::Interrupted,
                        error.as_deref(),
                    ));
                }
            }
        };
        let reports = match first {
            Ok(reports) => reports,
            Err(error) => {
                // The agent was given nothing: the imported conversation waits for the next turn.
                if plan.tells_import {
                    if let Some(record) = entry.state().record.as_mut() {
                        import::mark_pending(&mut record.summary.extra, true);
                    }
                }
                let read = Reading {
                    failure: Some(error.clone()),
                    ..Reading::default()
                };
                self.finish_turn(entry, &slot, plan.turn_id, read, &[])
                    .await;
                return Err(error);
            }
        };
        let inner = self.clone();
        let driven = entry.clone();
        tokio::spawn(async move {
            let _timer = timer;
            let drive = inner.drive(&driven, &slot, plan, reports);
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
            replayed: false,
            log,
        })
    }

    /// Asks the agent for a stream of the turn (`stream()` or `continueStream()`).
    async fn start_stream(
        &self,
        entry: &Entry,
        slot: &TurnSlot,
        plan: &Plan,
        input: TurnInput,
        drop_start: bool,
    ) -> Result<UnboundedReceiver<TurnReport>> {
        let Some(harness) = entry.state().harness() else {
            return Err(SessionError::internal(
                "a busy session had no harness session",
            ));
        };
        let (feed, reports) = crate::engine::agent::TurnFeed::channel();
        let start = TurnStart {
            turn_id: plan.turn_id,
            input,
            message_id: plan.message_id.clone(),
            continues: plan.continues.clone(),
            drop_start,
        };
        let control = harness.start_turn(start, feed).await?;
        slot.install(control);
        Ok(reports)
    }

    /// Reads the turn to its end, lets the policy answer approvals, and ends it.
    async fn drive(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        slot: &Arc<TurnSlot>,
        plan: Plan,
        first: UnboundedReceiver<TurnReport>,
    ) {
        let timeout = plan.options.timeout.or(self.options.turn_timeout);
        let deadline = timeout.map(|d| Instant::now() + d);
        // The agent gave the turn its first stream: it counts in `turns`, however it ends.
        let mut read = Reading {
            got_stream: true,
            max_steps: plan.options.max_steps,
            output: plan.options.output.clone(),
            ..Reading::default()
        };
        let mut policy = PolicyRounds::default();
        let mut sent = sent_approvals(&plan.input);
        let mut reports = first;
        loop {
            let end = self
                .read_reports(entry, slot, &mut reports, deadline, &mut read)
                .await;
            read.usage = match end.usage {
                Some(usage) => messages::add_usage(read.usage.take(), &usage),
                None => read.usage.take(),
            };
            read.caller_aborted |= end.caller_aborted;
            if let Some(failure) = end.failure {
                read.failure = Some(SessionError::Host {
                    message: failure.message,
                    origin: failure.origin,
                });
            }
            let step = if read.failure.is_none() && slot.cut_reason().is_none() {
                self.policy_answers(entry, &mut policy).await
            } else {
                PolicyStep::None
            };
            // The held requests go out now, then the answers the policy gave them (as the
            // reference: every request first, then every response).
            let mut shown = std::mem::take(&mut read.requests);
            let approvals = match step {
                PolicyStep::Continue { responses, chunks } => {
                    shown.extend(chunks);
                    Some(responses)
                }
                PolicyStep::Pause { chunks } => {
                    shown.extend(chunks);
                    None
                }
                PolicyStep::None => None,
            };
            if !shown.is_empty() && !slot.client_gone.load(std::sync::atomic::Ordering::SeqCst) {
                self.seams.clients.deliver(plan.turn_id, shown);
            }
            let Some(approvals) = approvals else {
                break;
            };
            sent = approvals.clone();
            let input = TurnInput::Continue {
                approvals,
                tool_results: None,
            };
            read.finish = None;
            match self.start_stream(entry, slot, &plan, input, true).await {
                Ok(next) => reports = next,
                Err(error) => {
                    read.failure = Some(error);
                    read.tell_client = true;
                    break;
                }
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
                        read.cut_past_steps(slot);
                        dirty = true;
                    }
                    Some(TurnReport::Encoded(encoded)) => {
                        match encoded.decode() {
                            Ok(chunks) => {
                                self.take_chunks(entry, chunks, read);
                                read.cut_past_steps(slot);
                            }
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
                    Some(TurnReport::Reply(answer)) => {
                        let reply = entry
                            .state()
                            .turn()
                            .map(|turn| turn.reply.message_so_far().to_string());
                        let _ = answer.send(reply);
                    }
                    None => {
                        return TurnEnd {
                            usage: None,
                            failure: Some(crate::engine::agent::TurnFailure {
                                message: "The turn's stream ended without a word of its end.".into(),
                                origin: None,
                            }),
                            caller_aborted: false,
                        }
                    }
                },
                () = too_long => slot.cut(TURN_TOO_LONG),
                () = checkpoint => {
                    dirty = false;
                    next_checkpoint = Instant::now() + interval;
                    self.save_or_report(entry, None, "write").await;
                }
            }
        }
    }

    /// Adds reported chunks to the reply; a `finish` is held back for the end, and so are the
    /// approval requests until the stream that carried them ends (with or without `approve`, as
    /// the reference: the client sees them then, followed by the answers `approve` gave).
    fn take_chunks(&self, entry: &Entry, chunks: Vec<UiChunk>, read: &mut Reading) {
        if let Some(many) = &self.many {
            // What the client got of them (the `finish` comes at the end, approval requests
            // once their stream ends) goes to the turn's log.
            let shown: Vec<&UiChunk> = chunks
                .iter()
                .filter(|chunk| !matches!(chunk.type_name(), "finish" | "tool-approval-request"))
                .collect();
            many.log_session_chunks(&entry.id, &shown);
        }
        let mut state = entry.state();
        let Some(turn) = state.turn_mut() else {
            return;
        };
        for chunk in chunks {
            // A protocol error halts the reply as `readUIMessageStream` would; the turn goes on.
            let _ = turn.reply.push(&chunk);
            if starts_step(&chunk) {
                read.steps += 1;
            }
            match chunk.type_name() {
                "finish" => read.finish = Some(chunk),
                "abort" => read.abort = Some(chunk),
                "tool-approval-request" => read.requests.push(chunk),
                _ => {}
            }
        }
    }

    /// What the `approve` policy makes of the approvals a stream of the turn paused on (the
    /// harness session holding an unfinished turn): every one answered, the turn goes on; some
    /// left to a person, the turn pauses with the answers given kept as their `decision`.
    /// The answers are written into the reply.
    async fn policy_answers(&self, entry: &Entry, policy: &mut PolicyRounds) -> PolicyStep {
        if !self.seams.hooks.approves() {
            return PolicyStep::None;
        }
        let (pending, summary, harness) = {
            let state = entry.state();
            let (Some(turn), Some(record)) = (state.turn(), state.record.as_ref()) else {
                return PolicyStep::None;
            };
            let pending = pending_input_of(turn.reply.message(), true);
            (pending, record.summary.clone(), state.harness())
        };
        if pending.approvals.is_empty() {
            return PolicyStep::None;
        }
        let unfinished = match harness {
            Some(harness) => harness.has_unfinished_turn().await.unwrap_or(false),
            None => false,
        };
        if !unfinished {
            return PolicyStep::None;
        }
        let asks = pending.approvals.iter().map(|approval| {
            let key = (approval.tool_name.clone(), approval.input.clone());
            let skip = policy.last_round.contains(&key) || policy.answered >= MOST_POLICY_ANSWERS;
            let summary = &summary;
            async move {
                if skip {
                    return None;
                }
                match self.seams.hooks.approve(approval, summary).await {
                    Ok(verdict) => verdict,
                    Err(error) => {
                        self.seams
                            .hooks
                            .on_error(&error, "approve", Some(&entry.id));
                        None
                    }
                }
            }
        });
        let verdicts = futures::future::join_all(asks).await;
        let mut decided = pending.clone();
        let mut responses = Vec::new();
        for (approval, verdict) in decided.approvals.iter_mut().zip(verdicts) {
            if let Some(verdict) = verdict {
                responses.push(answers::approval_response(&approval.approval_id, &verdict));
                approval.decision = Some(verdict);
            }
        }
        if responses.is_empty() {
            return PolicyStep::None;
        }
        policy.last_round = decided
            .approvals
            .iter()
            .filter(|a| a.decision.is_some())
            .map(|a| (a.tool_name.clone(), a.input.clone()))
            .collect();
        policy.answered += responses.len();
        let chunks = answers::answer_chunks(&responses, &[]);
        let everything =
            responses.len() == decided.approvals.len() && decided.tool_calls.is_empty();
        let mut state = entry.state();
        if let Some(turn) = state.turn_mut() {
            for chunk in &chunks {
                let _ = turn.reply.push(chunk);
            }
            if !everything {
                turn.policy_decisions = Some(decided);
            }
        }
        if everything {
            PolicyStep::Continue { responses, chunks }
        } else {
            PolicyStep::Pause { chunks }
        }
    }

    /// Ends the turn under the command lock: see [`Inner::finish_turn`].
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
        let _command = entry.commands.lock().await;
        if !super::bounds::is_current(entry, slot) {
            // Let go of (it did not wind down in time): the session was written without it.
            lock(&self.registry).turns.remove(&turn_id);
            return;
        }
        self.finish_turn(entry, slot, turn_id, read, sent).await;
    }

    /// Ends the turn, the caller holding the command lock: `awaiting-input` when the harness
    /// session still holds an unfinished turn, `idle` otherwise, however the turn ended; written,
    /// then the client told (a turn the agent refused has none: its caller is told instead). A turn cut short by a close or a shutdown writes nothing itself:
    /// whoever ends the session writes it and finishes the client.
    async fn finish_turn(
        self: &Arc<Self>,
        entry: &Arc<Entry>,
        slot: &TurnSlot,
        turn_id: u64,
        read: Reading,
        sent: &[Value],
    ) {
        let cut = slot.cut_reason();
        let owned = matches!(cut.as_deref(), Some(SESSION_CLOSED | APPLICATION_STOPPED));
        let harness = entry.state().harness();
        let unfinished = match harness {
            Some(harness) => match harness.has_unfinished_turn().await {
                Ok(unfinished) => unfinished,
                Err(error) => {
                    self.seams.hooks.on_error(&error, "turn", Some(&entry.id));
                    false
                }
            },
            None => false,
        };
        let mut closing = Vec::new();
        let mut verdict = None;
        let gone = slot.client_gone.load(std::sync::atomic::Ordering::SeqCst);
        // Why the reply ends cut short, if it does: it is marked so, and its readers told.
        // A stream cut by the caller's own signal is a cut too, whether it ended with an `abort`
        // chunk or with the error of the signal's reason.
        let cut_for = cut.clone().or_else(|| {
            (read.abort.is_some() || read.caller_aborted).then(|| {
                read.failure
                    .as_ref()
                    .map_or(messages::TURN_ABORTED.to_owned(), ToString::to_string)
            })
        });
        if let Some(chunk) = cut_for.as_deref().and_then(messages::cut_chunk) {
            closing.push(chunk);
        }
        closing.extend(read.abort.clone());
        {
            let mut state = entry.state();
            let (live, turn) = match std::mem::replace(&mut state.phase, Phase::Kept) {
                Phase::Busy(live, turn) => (live, turn),
                other => {
                    state.phase = other;
                    return;
                }
            };
            state.phase = Phase::Ready(live);
            let result = (|| -> Result<()> {
                let record = state.record_mut()?;
                let Turn {
                    index,
                    reply,
                    policy_decisions,
                    ..
                } = *turn;
                let mut message = reply.into_message();
                if let Some(reason) = cut_for.as_deref() {
                    messages::mark_cut(&mut message, reason);
                }
                // The structured answer is judged once the turn ends (not while it pauses), kept
                // with the reply, and shown to its readers.
                if let Some(spec) = read.output.as_ref() {
                    let judged = if unfinished {
                        OutputVerdict::Pending
                    } else {
                        spec.judge(&message)
                    };
                    if let Some((key, value)) = judged.metadata() {
                        turn_output::put_metadata(&mut message, key, value.clone());
                        if let Some(chunk) = turn_output::metadata_chunk(key, value) {
                            closing.insert(0, chunk);
                        }
                    }
                    verdict = Some(judged);
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
                // A turn counts once it got a stream from the agent, however it ended; the
                // continuations `approve` carried it through are the same turn.
                if read.got_stream {
                    record.summary.turns += 1;
                }
                record.summary.pending_input = unfinished.then(|| {
                    let mut pending =
                        policy_decisions.unwrap_or_else(|| pending_input_of(&message, true));
                    answers::keep_sent_answers(&mut pending, sent);
                    pending
                });
                if let Some(usage) = read.usage.as_ref() {
                    record.summary.usage.add(usage);
                }
                if !owned {
                    record.summary.error = read
                        .failure
                        .as_ref()
                        .map(ToString::to_string)
                        .or_else(|| cut.clone());
                }
                Ok(())
            })();
            if let Err(error) = result {
                self.seams.hooks.on_error(&error, "turn", Some(&entry.id));
            }
            if owned {
                closing.extend(read.finish.clone());
                state.cut_turn = Some(CutTurn {
                    turn_id,
                    closing,
                    client_gone: gone,
                });
                drop(state);
                entry.notify();
                return;
            }
            if let Err(error) = state.apply(Event::TurnEnded { unfinished }) {
                self.seams.hooks.on_error(&error, "turn", Some(&entry.id));
            }
        }
        let summary = match self.save(entry, None).await {
            Ok(summary) => summary,
            Err(error) => {
                self.seams.hooks.on_error(&error, "write", Some(&entry.id));
                match entry.snapshot() {
                    Ok(record) => record.summary,
                    Err(_) => return,
                }
            }
        };
        // A turn the agent refused has no reader: its `send()` or `continue()` fails with the
        // refusal, and the caller drops the client stream; nothing crosses to it.
        let has_reader = read.got_stream;
        if has_reader {
            if read.tell_client {
                if let Some(failure) = read.failure.as_ref() {
                    let text = self.seams.hooks.client_message(failure).await;
                    closing.push(UiChunk::error(text));
                }
            }
            if let Some(finish) = read.finish {
                closing.push(finish);
            }
            if !closing.is_empty() && !gone {
                self.seams.clients.deliver(turn_id, closing);
            }
        }
        let idle = {
            let mut registry = lock(&self.registry);
            registry.turns.remove(&turn_id);
            registry.turns.is_empty()
        };
        if idle {
            super::trim::trim_soon();
        }
        if !has_reader {
            // No client to finish: the turn's log is closed here.
            if let Some(many) = &self.many {
                many.end_turn_log(turn_id);
            }
        }
        if has_reader {
            if let Some(verdict) = verdict.as_ref() {
                self.seams.clients.answer(turn_id, &verdict.to_json());
            }
            self.seams.clients.finish(turn_id, &summary);
        }
        entry.notify();
        timers::arm_idle(self, entry);
    }
}

/// What the `approve` policy made of a pause of the turn.
enum PolicyStep {
    /// Nothing: the turn ends there.
    None,
    /// Every approval answered: the turn goes on with `responses`; `chunks` show them.
    Continue {
        responses: Vec<Value>,
        chunks: Vec<UiChunk>,
    },
    /// Some answered (shown by `chunks`), the rest left to a person: the turn pauses.
    Pause { chunks: Vec<UiChunk> },
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

/// What the driver learned of the turn so far.
#[derive(Default)]
struct Reading {
    /// The `finish` chunk held back for the end.
    finish: Option<UiChunk>,
    /// The approval requests of the last stream, held back until it ends.
    requests: Vec<UiChunk>,
    /// Whether the caller's `abortSignal` cut a stream of the turn.
    caller_aborted: bool,
    /// The tokens used, summed over the agent's streams.
    usage: Option<Value>,
    /// The error the turn failed with.
    failure: Option<SessionError>,
    /// Whether the client must be told of the failure (it never reached the agent's stream).
    tell_client: bool,
    /// The steps the turn started (`start-step` chunks), over all its streams.
    steps: u32,
    /// The most it may start (`limits.maxSteps`).
    max_steps: Option<u32>,
    /// The `abort` chunk the agent's stream ended with (its caller aborted it), held back for
    /// the end.
    abort: Option<UiChunk>,
    /// Whether the agent gave a stream: the turn then counts in `turns`.
    got_stream: bool,
    /// The structured answer the turn was asked for.
    output: Option<OutputSpec>,
}

impl Reading {
    /// Cuts the turn once it started more steps than it may.
    fn cut_past_steps(&self, slot: &TurnSlot) {
        if let Some(most) = self.max_steps {
            if self.steps > most {
                slot.cut(&TurnOptions::steps_reached(most));
            }
        }
    }
}
