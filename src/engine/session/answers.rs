//! The answers to what a paused turn waits for: read from what `continue()` is given, merged with
//! what the `approve` policy already decided, and turned into the continuation the agent takes,
//! or into words when the paused turn was lost with a suspension.

use serde_json::{json, Map, Value};

use super::messages::{check_message, tool_name};
use crate::engine::error::{Result, SessionError};
use crate::engine::session::{ApprovalVerdict, PendingInput, SessionStatus};
use crate::engine::ui::UiChunk;

/// The words of a `continue()` that answers nothing the session waits for.
pub const NO_ANSWER: &str = "continue() carries no answer to what the session waits for.";
/// What the agent is told of a denial given without a reason.
pub const DENIED: &str = "The tool call was denied.";
/// The first line of the answers told in words after a suspension.
pub const TOLD_AFTER_SUSPENSION: &str = "The session was suspended while you waited for my answers. Here they are; carry on from there:";

/// The answers a `continue()` sends the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Collected {
    /// `ToolApprovalResponse`s, for `continueStream()`.
    pub approvals: Vec<Value>,
    /// `ToolResultPart`s, for `continueStream()`.
    pub tool_results: Vec<Value>,
    /// One line per answer, for when the paused turn was lost.
    lines: Vec<String>,
}

impl Collected {
    /// The answers in words, for a new prompt: the paused turn was lost with a suspension.
    pub fn words(&self) -> String {
        let mut words = String::from(TOLD_AFTER_SUSPENSION);
        for line in &self.lines {
            words.push('\n');
            words.push_str(line);
        }
        words
    }
}

/// The `ToolApprovalResponse` for `verdict`: a denial without a reason reaches the agent without
/// one.
pub fn approval_response(approval_id: &str, verdict: &ApprovalVerdict) -> Value {
    let mut response = json!({
        "type": "tool-approval-response",
        "approvalId": approval_id,
        "approved": verdict.approved,
    });
    if let (Some(reason), Some(object)) = (&verdict.reason, response.as_object_mut()) {
        object.insert("reason".into(), Value::String(reason.clone()));
    }
    response
}

/// The chunks that put `approvals` and `tool_results` in the paused message, as the client's
/// `addToolApprovalResponse()` and `addToolOutput()` put them in its copy: the agent's
/// continuation does not always say them again (a tool result's output never comes back).
pub fn answer_chunks(approvals: &[Value], tool_results: &[Value]) -> Vec<UiChunk> {
    let mut chunks = Vec::new();
    for response in approvals {
        let mut chunk = json!({
            "type": "tool-approval-response",
            "approvalId": response.get("approvalId").cloned().unwrap_or(Value::Null),
            "approved": response.get("approved").cloned().unwrap_or(Value::Bool(false)),
        });
        if let (Some(reason), Some(object)) = (response.get("reason"), chunk.as_object_mut()) {
            object.insert("reason".into(), reason.clone());
        }
        chunks.extend(UiChunk::from_value(chunk).ok());
    }
    for result in tool_results {
        let call = result.get("toolCallId").cloned().unwrap_or(Value::Null);
        let output = result.get("output").cloned().unwrap_or(Value::Null);
        let chunk = match shown_output(&output) {
            Shown::Error(text) => {
                json!({ "type": "tool-output-error", "toolCallId": call, "errorText": text })
            }
            Shown::Value(value) => {
                json!({ "type": "tool-output-available", "toolCallId": call, "output": value })
            }
        };
        chunks.extend(UiChunk::from_value(chunk).ok());
    }
    chunks
}

/// What a tool result shows in the conversation: an error (`error-text`, `error-json`, and
/// `execution-denied` with its reason or [`DENIED`]), or a value.
enum Shown {
    Error(String),
    Value(Value),
}

fn shown_output(output: &Value) -> Shown {
    let value = output.get("value").cloned().unwrap_or(Value::Null);
    match output.get("type").and_then(Value::as_str) {
        Some("error-text") => Shown::Error(value.as_str().unwrap_or_default().to_owned()),
        Some("error-json") => Shown::Error(value.to_string()),
        Some("execution-denied") => Shown::Error(
            output
                .get("reason")
                .and_then(Value::as_str)
                .unwrap_or(DENIED)
                .to_owned(),
        ),
        _ => Shown::Value(value),
    }
}

/// Keeps, as decisions, the answers a continuation sent to approvals that are still pending after
/// it: `HarnessAgent` stops at the first approval of a tool the application runs and drops the
/// answers after it, so they are sent again with the next continuation, unchanged.
pub fn keep_sent_answers(pending: &mut PendingInput, sent: &[Value]) {
    for approval in pending
        .approvals
        .iter_mut()
        .filter(|a| a.decision.is_none())
    {
        let answer = sent.iter().find(|response| {
            response.get("approvalId").and_then(Value::as_str) == Some(&approval.approval_id)
        });
        if let Some(answer) = answer {
            approval.decision = Some(ApprovalVerdict {
                approved: answer.get("approved").and_then(Value::as_bool) == Some(true),
                reason: answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
        }
    }
}

/// The answers `request` gives to what the session waits for (`pending`), as the reference takes
/// them: the `approve` policy's decisions first (they stand); then the answers the message carries
/// to the approvals left open and to the tool calls; then the answers given explicitly, as they
/// are (ids the session does not wait for included: the agent gets them), but those to an approval
/// the policy decided.
///
/// # Errors
/// [`SessionError::Input`] for a malformed answer, [`SessionError::Conflict`] with [`NO_ANSWER`]
/// when the request carries no answer besides the policy's decisions.
pub fn collect(
    session_id: &str,
    pending: &PendingInput,
    message: Option<&Value>,
    approvals: &[Value],
    tool_results: &[Value],
) -> Result<Collected> {
    let mut given_approvals = Vec::new();
    for (index, response) in approvals.iter().enumerate() {
        let path = format!("toolApprovalContinuations[{index}]");
        given_approvals.push(read_approval_response(response, &path)?);
    }
    let mut given_results = Vec::new();
    for (index, part) in tool_results.iter().enumerate() {
        let path = format!("toolResultContinuations[{index}]");
        given_results.push(read_tool_result(part, &path)?);
    }
    let (read_approvals, read_results) = match message {
        Some(message) => read_message_answers(message, pending)?,
        None => (Vec::new(), Vec::new()),
    };
    let decided: Vec<(String, ApprovalVerdict)> = pending
        .approvals
        .iter()
        .filter_map(|a| Some((a.approval_id.clone(), a.decision.clone()?)))
        .collect();
    let is_decided = |id: &str| decided.iter().any(|(decided, _)| decided == id);
    let answered_approvals: Vec<(String, ApprovalVerdict)> = read_approvals
        .into_iter()
        .chain(given_approvals)
        .filter(|(id, _)| !is_decided(id))
        .collect();
    let results: Vec<(String, Option<String>, Value)> =
        read_results.into_iter().chain(given_results).collect();
    if answered_approvals.is_empty() && results.is_empty() {
        return Err(SessionError::conflict(
            session_id,
            SessionStatus::AwaitingInput,
            NO_ANSWER,
        ));
    }
    let mut approvals = Vec::new();
    let mut tool_results = Vec::new();
    let mut lines = Vec::new();
    for (id, verdict) in decided.into_iter().chain(answered_approvals) {
        approvals.push(approval_response(&id, &verdict));
        let call = pending.approvals.iter().find(|a| a.approval_id == id);
        lines.push(approval_line(
            call.map(|c| (c.tool_name.as_str(), &c.input)),
            &verdict,
        ));
    }
    for (id, given_name, output) in results {
        let call = pending.tool_calls.iter().find(|c| c.tool_call_id == id);
        let name = given_name.or_else(|| call.map(|c| c.tool_name.clone()));
        let shown_name = call
            .map(|c| c.tool_name.clone())
            .or_else(|| name.clone())
            .unwrap_or_default();
        lines.push(result_line(
            &shown_name,
            call.map_or(&Value::Null, |c| &c.input),
            &output,
        ));
        let mut part = Map::new();
        part.insert("type".into(), json!("tool-result"));
        part.insert("toolCallId".into(), json!(id));
        if let Some(name) = name {
            part.insert("toolName".into(), json!(name));
        }
        part.insert("output".into(), output);
        tool_results.push(Value::Object(part));
    }
    Ok(Collected {
        approvals,
        tool_results,
        lines,
    })
}

/// The answers of `approvals` and `tool_results` that `message` (the paused one) can take, as
/// the reference writes them in: a verdict to a call whose approval is asked, a result to a call
/// waiting for its output. The others (ids it does not have) reach the agent only.
pub fn answerable(
    message: &Value,
    approvals: &[Value],
    tool_results: &[Value],
) -> (Vec<Value>, Vec<Value>) {
    let parts = tool_parts(message.get("parts"));
    let state =
        |part: &Map<String, Value>| part.get("state").and_then(Value::as_str).map(str::to_owned);
    let asked = |id: &Value| {
        parts.iter().any(|part| {
            state(part).as_deref() == Some("approval-requested")
                && part.get("approval").and_then(|a| a.get("id")) == Some(id)
        })
    };
    let waiting = |id: &Value| {
        parts.iter().any(|part| {
            state(part).as_deref() == Some("input-available") && part.get("toolCallId") == Some(id)
        })
    };
    let approvals = approvals
        .iter()
        .filter(|a| a.get("approvalId").is_some_and(&asked))
        .cloned()
        .collect();
    let tool_results = tool_results
        .iter()
        .filter(|r| r.get("toolCallId").is_some_and(&waiting))
        .cloned()
        .collect();
    (approvals, tool_results)
}

fn read_approval_response(response: &Value, path: &str) -> Result<(String, ApprovalVerdict)> {
    let Value::Object(response) = response else {
        return Err(SessionError::input(
            path,
            format!("{path} must be an object"),
        ));
    };
    let id = string_field(response, "approvalId", path)?;
    let Some(Value::Bool(approved)) = response.get("approved") else {
        return Err(SessionError::input(
            format!("{path}.approved"),
            format!("{path}.approved must be a boolean"),
        ));
    };
    let reason = optional_string(response, "reason", path)?;
    Ok((
        id,
        ApprovalVerdict {
            approved: *approved,
            reason,
        },
    ))
}

fn read_tool_result(part: &Value, path: &str) -> Result<(String, Option<String>, Value)> {
    let Value::Object(part) = part else {
        return Err(SessionError::input(
            path,
            format!("{path} must be an object"),
        ));
    };
    let id = string_field(part, "toolCallId", path)?;
    let name = optional_string(part, "toolName", path)?;
    let output = match part.get("output") {
        Some(Value::Object(output)) if output.get("type").is_some_and(Value::is_string) => {
            Value::Object(output.clone())
        }
        Some(value) => json!({ "type": "json", "value": value }),
        None => {
            return Err(SessionError::input(
                format!("{path}.output"),
                format!("{path}.output is missing"),
            ))
        }
    };
    Ok((id, name, output))
}

/// An approval's id and verdict.
type ApprovalAnswer = (String, ApprovalVerdict);
/// A tool call's id, its tool's name when known, and its output.
type ResultAnswer = (String, Option<String>, Value);

/// Reads the answers a `useChat` message carries to what the session waits for: the verdicts of
/// the approvals no policy decided (a part with that approval and `approved` set), and the
/// outputs of the tool calls (`output-available`, `output-error`), in the order they are awaited.
fn read_message_answers(
    message: &Value,
    pending: &PendingInput,
) -> Result<(Vec<ApprovalAnswer>, Vec<ResultAnswer>)> {
    let Value::Object(object) = message else {
        return Err(SessionError::input(
            "message",
            "message must be a UIMessage object",
        ));
    };
    check_message(object, "message")?;
    let parts = tool_parts(object.get("parts"));
    let mut approvals = Vec::new();
    for open in pending.approvals.iter().filter(|a| a.decision.is_none()) {
        let approval = parts.iter().find_map(|part| {
            let approval = part.get("approval").and_then(Value::as_object)?;
            (approval.get("id").and_then(Value::as_str) == Some(&open.approval_id))
                .then_some(approval)
        });
        let Some(approval) = approval else { continue };
        let Some(approved) = approval.get("approved").and_then(Value::as_bool) else {
            continue;
        };
        let reason = approval
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        approvals.push((
            open.approval_id.clone(),
            ApprovalVerdict { approved, reason },
        ));
    }
    let mut results = Vec::new();
    for call in &pending.tool_calls {
        let part = parts.iter().find(|part| {
            part.get("toolCallId").and_then(Value::as_str) == Some(&call.tool_call_id)
        });
        let output = match part.and_then(|p| p.get("state")).and_then(Value::as_str) {
            Some("output-available") => {
                let value = part
                    .and_then(|p| p.get("output"))
                    .cloned()
                    .unwrap_or(Value::Null);
                json!({ "type": "json", "value": value })
            }
            Some("output-error") => {
                let text = part
                    .and_then(|p| p.get("errorText"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                json!({ "type": "error-text", "value": text })
            }
            _ => continue,
        };
        results.push((
            call.tool_call_id.clone(),
            Some(call.tool_name.clone()),
            output,
        ));
    }
    Ok((approvals, results))
}

fn string_field(object: &Map<String, Value>, field: &str, path: &str) -> Result<String> {
    match object.get(field) {
        Some(Value::String(value)) => Ok(value.clone()),
        _ => Err(SessionError::input(
            format!("{path}.{field}"),
            format!("{path}.{field} must be a string"),
        )),
    }
}

fn optional_string(object: &Map<String, Value>, field: &str, path: &str) -> Result<Option<String>> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.clone())),
        Some(_) => Err(SessionError::input(
            format!("{path}.{field}"),
            format!("{path}.{field} must be a string"),
        )),
    }
}

/// A tool call's input (or a result's value) for a message: a string as it is, anything else as
/// JSON; cut to 197 characters and `...` when longer than 200.
fn shortened(input: &Value) -> String {
    let text = match input {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    if text.chars().count() > 200 {
        let mut cut: String = text.chars().take(197).collect();
        cut.push_str("...");
        cut
    } else {
        text
    }
}

/// `- I approve <tool> <input>` or `- I deny <tool> <input>` (`the tool call` for an approval the
/// session does not know), then `: <reason>` when given.
fn approval_line(call: Option<(&str, &Value)>, verdict: &ApprovalVerdict) -> String {
    let said = if verdict.approved {
        "I approve"
    } else {
        "I deny"
    };
    let reason = verdict
        .reason
        .as_deref()
        .map(|reason| format!(": {reason}"))
        .unwrap_or_default();
    let what = match call {
        Some((tool, input)) => format!("{tool} {}", shortened(input)),
        None => "the tool call".to_owned(),
    };
    format!("- {said} {what}{reason}")
}

/// A tool's result in words: the answers to the agent's questions (`askUserQuestions`) by the
/// labels of the options picked; any other value as `- <tool>: <value>`, an error as
/// `- <tool>: error: <text>`.
fn result_line(tool: &str, input: &Value, output: &Value) -> String {
    match shown_output(output) {
        Shown::Error(text) => format!("- {tool}: error: {text}"),
        Shown::Value(value) => question_answers(input, &value)
            .unwrap_or_else(|| format!("- {tool}: {}", shortened(&value))),
    }
}

/// The answers of `output` (`{ action, answers? }`) to the questions of `input` (`questions[]`):
/// `- I <action> your questions.` without answers; else one line per question,
/// `- <question> — <answer>`, the labels of the options picked and the `freeform` text joined by
/// `; `, or `no answer`.
fn question_answers(input: &Value, output: &Value) -> Option<String> {
    let questions = input.get("questions")?.as_array()?;
    let action = output.get("action")?.as_str()?;
    let Some(answers) = output.get("answers").filter(|a| !a.is_null()) else {
        return Some(format!("- I {action} your questions."));
    };
    let lines: Vec<String> = questions
        .iter()
        .map(|question| {
            let answer = question
                .get("id")
                .and_then(Value::as_str)
                .and_then(|id| answers.get(id));
            let options = question.get("options").and_then(Value::as_array);
            let label_of = |id: &str| -> String {
                options
                    .into_iter()
                    .flatten()
                    .find(|o| o.get("id").and_then(Value::as_str) == Some(id))
                    .and_then(|o| o.get("label").and_then(Value::as_str))
                    .unwrap_or(id)
                    .to_owned()
            };
            let mut said: Vec<String> = answer
                .and_then(|a| a.get("optionIds"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(label_of)
                .collect();
            if let Some(text) = answer
                .and_then(|a| a.get("freeform"))
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                said.push(text.to_owned());
            }
            let asked = question
                .get("question")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let said = if said.is_empty() {
                "no answer".to_owned()
            } else {
                said.join("; ")
            };
            format!("- {asked} \u{2014} {said}")
        })
        .collect();
    Some(lines.join("\n"))
}

/// The tool parts (`tool-<name>`, `dynamic-tool`) of a message's `parts`.
fn tool_parts(parts: Option<&Value>) -> Vec<&Map<String, Value>> {
    parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .filter(|part| tool_name(part).is_some())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::session::{PendingApproval, PendingToolCall};

    /// The answers a `continue()` carries.
    #[derive(Default)]
    struct Request {
        message: Option<Value>,
        approvals: Vec<Value>,
        tool_results: Vec<Value>,
    }

    fn collect_request(session_id: &str, pending: &PendingInput, r: &Request) -> Result<Collected> {
        collect(
            session_id,
            pending,
            r.message.as_ref(),
            &r.approvals,
            &r.tool_results,
        )
    }

    fn pending() -> PendingInput {
        PendingInput {
            approvals: vec![PendingApproval {
                approval_id: "a1".into(),
                tool_call_id: "c1".into(),
                tool_name: "write".into(),
                input: json!({"path": "x"}),
                decision: None,
                extra: Default::default(),
            }],
            tool_calls: vec![PendingToolCall {
                tool_call_id: "c2".into(),
                tool_name: "askUserQuestions".into(),
                input: json!({"questions": [{"id": "question-1", "question": "Which colour?", "options": [
                    {"id": "option-1", "label": "Red"}, {"id": "option-2", "label": "Blue"}]}]}),
                extra: Default::default(),
            }],
            extra: Default::default(),
        }
    }

    fn request(approvals: Vec<Value>, tool_results: Vec<Value>) -> Request {
        Request {
            approvals,
            tool_results,
            ..Default::default()
        }
    }

    #[test]
    fn explicit_answers_become_continuations() {
        let request = request(
            vec![json!({"type": "tool-approval-response", "approvalId": "a1", "approved": false})],
            vec![json!({"toolCallId": "c2", "output": 3})],
        );
        let got = collect_request("s", &pending(), &request).unwrap();
        assert_eq!(
            got.approvals,
            vec![json!({"type": "tool-approval-response", "approvalId": "a1", "approved": false})]
        );
        assert_eq!(
            got.tool_results,
            vec![
                json!({"type": "tool-result", "toolCallId": "c2", "toolName": "askUserQuestions", "output": {"type": "json", "value": 3}})
            ]
        );
    }

    #[test]
    fn answers_are_read_from_the_message() {
        let message = json!({"id": "m", "role": "assistant", "parts": [
            {"type": "tool-write", "toolCallId": "c1", "state": "approval-responded", "input": {"path": "x"}, "approval": {"id": "a1", "approved": true}},
            {"type": "tool-askUserQuestions", "toolCallId": "c2", "state": "output-available", "input": {}, "output": {"action": "answered"}},
        ]});
        let request = Request {
            message: Some(message),
            ..Default::default()
        };
        let got = collect_request("s", &pending(), &request).unwrap();
        assert_eq!(
            got.approvals,
            vec![json!({"type": "tool-approval-response", "approvalId": "a1", "approved": true})]
        );
        assert_eq!(
            got.tool_results[0]["output"],
            json!({"type": "json", "value": {"action": "answered"}})
        );
    }

    #[test]
    fn a_policy_decision_cannot_be_overturned() {
        let mut pending = pending();
        pending.approvals[0].decision = Some(ApprovalVerdict {
            approved: false,
            reason: Some("no".into()),
        });
        let request = request(vec![], vec![json!({"toolCallId": "c2", "output": 1})]);
        let got = collect_request("s", &pending, &request).unwrap();
        assert_eq!(got.approvals[0]["approved"], false);
        assert_eq!(got.approvals[0]["reason"], "no");
        let mut overturn = request_with_approval(true);
        overturn
            .tool_results
            .push(json!({"toolCallId": "c2", "output": 1}));
        let got = collect_request("s", &pending, &overturn).unwrap();
        assert_eq!(got.approvals[0]["approved"], false);
    }

    fn request_with_approval(approved: bool) -> Request {
        request(
            vec![json!({"approvalId": "a1", "approved": approved})],
            vec![],
        )
    }

    #[test]
    fn no_answer_is_a_conflict() {
        match collect_request("s", &pending(), &Request::default()) {
            Err(SessionError::Conflict { message, .. }) => assert_eq!(message, NO_ANSWER),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn answers_to_unknown_ids_reach_the_agent_as_the_reference_passes_them() {
        let request = request(
            vec![json!({"approvalId": "unknown", "approved": true})],
            vec![
                json!({"toolCallId": "c9", "toolName": "other", "output": {"type": "json", "value": 1}}),
            ],
        );
        let got = collect_request("s", &pending(), &request).unwrap();
        assert_eq!(
            got.approvals,
            vec![
                json!({"type": "tool-approval-response", "approvalId": "unknown", "approved": true})
            ]
        );
        assert_eq!(
            got.tool_results,
            vec![
                json!({"type": "tool-result", "toolCallId": "c9", "toolName": "other", "output": {"type": "json", "value": 1}})
            ]
        );
        let lines: Vec<String> = got.words().lines().skip(1).map(str::to_owned).collect();
        assert_eq!(lines, vec!["- I approve the tool call", "- other: 1"]);
        let paused = json!({"parts": [
            {"type": "tool-write", "toolCallId": "c1", "state": "approval-requested", "input": {}, "approval": {"id": "a1"}},
            {"type": "tool-askUserQuestions", "toolCallId": "c2", "state": "input-available", "input": {}},
        ]});
        let known =
            json!({"type": "tool-approval-response", "approvalId": "a1", "approved": false});
        let mut approvals = got.approvals.clone();
        approvals.push(known.clone());
        let (approvals, results) = answerable(&paused, &approvals, &got.tool_results);
        assert_eq!(approvals, vec![known]);
        assert!(results.is_empty());
    }

    #[test]
    fn answers_in_words_after_a_suspension() {
        let mut pending = pending();
        pending.approvals[0].input = json!({"text": "y".repeat(300)});
        let request = request(
            vec![json!({"approvalId": "a1", "approved": false})],
            vec![
                json!({"toolCallId": "c2", "output": {"type": "json", "value": {"action": "answered", "answers": {"question-1": {"optionIds": ["option-2", "option-9"], "freeform": "or teal"}}}}}),
            ],
        );
        let words = collect_request("s", &pending, &request).unwrap().words();
        let lines: Vec<&str> = words.lines().collect();
        assert_eq!(lines[0], TOLD_AFTER_SUSPENSION);
        assert!(
            lines[1].starts_with("- I deny write {\"text\":\"yyy"),
            "{}",
            lines[1]
        );
        assert!(
            lines[1].ends_with("y..."),
            "a denial without a reason says none: {}",
            lines[1]
        );
        assert_eq!(lines[1].chars().count(), "- I deny write ".len() + 200);
        assert_eq!(lines[2], "- Which colour? \u{2014} Blue; option-9; or teal");
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn questions_and_results_in_words() {
        let questions = json!({"questions": [
            {"id": "q1", "question": "Tea?", "options": [{"id": "o1", "label": "Yes"}]},
            {"id": "q2", "question": "Milk?"},
        ]});
        let answered = json!({"type": "json", "value": {"action": "answered", "answers": {"q1": {"optionIds": ["o1"]}}}});
        assert_eq!(
            result_line("askUserQuestions", &questions, &answered),
            "- Tea? \u{2014} Yes\n- Milk? \u{2014} no answer"
        );
        let declined = json!({"type": "json", "value": {"action": "declined"}});
        assert_eq!(
            result_line("askUserQuestions", &questions, &declined),
            "- I declined your questions."
        );
        let value = json!({"type": "json", "value": {"n": 1}});
        assert_eq!(
            result_line("count", &json!({}), &value),
            "- count: {\"n\":1}"
        );
        let failed = json!({"type": "error-text", "value": "no disk"});
        assert_eq!(
            result_line("count", &json!({}), &failed),
            "- count: error: no disk"
        );
        let denied = json!({"type": "execution-denied"});
        assert_eq!(
            result_line("count", &json!({}), &denied),
            format!("- count: error: {DENIED}")
        );
    }

    #[test]
    fn an_approval_in_words_says_its_reason_when_it_has_one() {
        let approved = ApprovalVerdict {
            approved: true,
            reason: None,
        };
        assert_eq!(
            approval_line(Some(("bash", &json!({"c": 1}))), &approved),
            "- I approve bash {\"c\":1}"
        );
        let denied = ApprovalVerdict {
            approved: false,
            reason: Some("not now".into()),
        };
        assert_eq!(
            approval_line(Some(("bash", &json!("ls"))), &denied),
            "- I deny bash ls: not now"
        );
    }

    #[test]
    fn answers_that_only_repeat_the_policys_decisions_are_no_answer() {
        let mut pending = pending();
        pending.tool_calls.clear();
        pending.approvals[0].decision = Some(ApprovalVerdict {
            approved: true,
            reason: None,
        });
        match collect_request("s", &pending, &request_with_approval(true)) {
            Err(SessionError::Conflict { message, .. }) => assert_eq!(message, NO_ANSWER),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_answers_name_the_field() {
        let request = request(vec![json!({"approvalId": 1})], vec![]);
        match collect_request("s", &pending(), &request) {
            Err(SessionError::Input { path, .. }) => {
                assert_eq!(path, "toolApprovalContinuations[0].approvalId")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn answers_become_chunks_for_the_stored_message() {
        let chunks = answer_chunks(
            &[json!({"approvalId": "a1", "approved": false, "reason": "no"})],
            &[
                json!({"toolCallId": "c2", "output": {"type": "json", "value": 1}}),
                json!({"toolCallId": "c3", "output": {"type": "error-text", "value": "bad"}}),
                json!({"toolCallId": "c4", "output": {"type": "execution-denied"}}),
                json!({"toolCallId": "c5", "output": {"type": "execution-denied", "reason": "no"}}),
            ],
        );
        let values: Vec<Value> = chunks.iter().map(UiChunk::to_value).collect();
        assert_eq!(
            values,
            vec![
                json!({"type": "tool-approval-response", "approvalId": "a1", "approved": false, "reason": "no"}),
                json!({"type": "tool-output-available", "toolCallId": "c2", "output": 1}),
                json!({"type": "tool-output-error", "toolCallId": "c3", "errorText": "bad"}),
                json!({"type": "tool-output-error", "toolCallId": "c4", "errorText": DENIED}),
                json!({"type": "tool-output-error", "toolCallId": "c5", "errorText": "no"}),
            ]
        );
    }
}
