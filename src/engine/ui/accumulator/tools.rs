//! Tool parts: a call's input streaming, available or in error, its approval asked and answered,
//! and its output (or error, or denial), as `updateToolPart` and `updateDynamicToolPart` of `ai`
//! write them; tool parts are found by `toolCallId`, in the current step first.

use serde_json::{Map, Value};

use super::object::{assign, assign_or_keep, object, set_slot, string, Ghosts, Literal, Slot};
use super::{part_type, AccumulateError, Changed, MessageAccumulator};
use crate::engine::ui::chunk::{
    ToolApprovalRequest, ToolApprovalResponse, ToolInputAvailable, ToolInputDelta, ToolInputError,
    ToolInputStart, ToolOutputAvailable, ToolOutputDenied, ToolOutputError,
};
use crate::engine::ui::js::parse_partial_json;

/// The last fields `updateToolPart` and `updateDynamicToolPart` both set on an existing part.
pub(super) struct ToolTail {
    preliminary: Option<bool>,
    title: Option<Value>,
    tool_metadata: Option<Value>,
    provider_executed: Option<bool>,
    provider_metadata: Option<Value>,
}

/// Sets `tail` on an existing tool part, in the order both updates of `ai` set it: the provider
/// metadata goes to `resultProviderMetadata` for a result, `callProviderMetadata` otherwise.
pub(super) fn assign_tool_tail(
    part: &mut Map<String, Value>,
    ghosts: &mut Ghosts,
    tail: ToolTail,
    is_result: bool,
) {
    assign(
        part,
        ghosts,
        "preliminary",
        tail.preliminary.map(Value::Bool),
    );
    if let Some(title) = tail.title {
        assign(part, ghosts, "title", Some(title));
    }
    if let Some(tool_metadata) = tail.tool_metadata {
        assign(part, ghosts, "toolMetadata", Some(tool_metadata));
    }
    assign_or_keep(
        part,
        ghosts,
        "providerExecuted",
        tail.provider_executed.map(Value::Bool),
    );
    if let Some(provider_metadata) = tail.provider_metadata {
        let key = if is_result {
            "resultProviderMetadata"
        } else {
            "callProviderMetadata"
        };
        assign(part, ghosts, key, Some(provider_metadata));
    }
}

/// The options of `updateToolPart` / `updateDynamicToolPart`.
pub(super) struct ToolUpdate<'a> {
    tool_call_id: &'a str,
    tool_name: Slot,
    state: &'static str,
    input: Slot,
    output: Option<Value>,
    raw_input: Slot,
    error_text: Option<Value>,
    provider_executed: Option<bool>,
    preliminary: Option<bool>,
    provider_metadata: Option<Value>,
    /// `None` is `undefined`: the part's title is left alone.
    title: Option<Value>,
    /// `None` is `undefined`: the part's tool metadata is left alone.
    tool_metadata: Option<Value>,
}

impl<'a> ToolUpdate<'a> {
    pub(super) fn new(tool_call_id: &'a str, state: &'static str) -> ToolUpdate<'a> {
        ToolUpdate {
            tool_call_id,
            tool_name: Slot::Set(None),
            state,
            input: Slot::Set(None),
            output: None,
            raw_input: Slot::Set(None),
            error_text: None,
            provider_executed: None,
            preliminary: None,
            provider_metadata: None,
            title: None,
            tool_metadata: None,
        }
    }

    pub(super) fn is_result(&self) -> bool {
        self.state == "output-available" || self.state == "output-error"
    }
}

/// A tool call whose input is streaming (`partialToolCalls`).
#[derive(Debug)]
pub(super) struct PartialToolCall {
    text: String,
    tool_name: String,
    dynamic: bool,
    title: Option<String>,
    tool_metadata: Option<Map<String, Value>>,
}

impl PartialToolCall {
    /// The input text streamed so far.
    pub(super) fn text(&self) -> &str {
        &self.text
    }
}

pub(super) fn is_tool_type(part_type: &str) -> bool {
    part_type.starts_with("tool-") || part_type == "dynamic-tool"
}

impl MessageAccumulator {
    /// The first tool part of the current step with `tool_call_id` whose type passes `accept`.
    pub(super) fn current_step_tool(
        &self,
        tool_call_id: &str,
        accept: impl Fn(&str) -> bool,
    ) -> Option<usize> {
        let indexes = self.tools.get(tool_call_id)?;
        let parts = self.parts();
        let from = indexes.partition_point(|&i| i < self.step_start);
        indexes[from..]
            .iter()
            .copied()
            .find(|&i| parts.get(i).is_some_and(|p| accept(part_type(p))))
    }

    /// `getToolInvocation`: the call's part in the current step, else its last part anywhere.
    pub(super) fn tool_invocation(&self, tool_call_id: &str) -> Result<usize, AccumulateError> {
        self.current_step_tool(tool_call_id, |_| true)
            .or_else(|| self.tools.get(tool_call_id).and_then(|v| v.last().copied()))
            .ok_or_else(|| AccumulateError::NoToolInvocation {
                tool_call_id: tool_call_id.to_owned(),
            })
    }

    pub(super) fn is_dynamic_part(&self, index: usize) -> bool {
        self.parts()
            .get(index)
            .is_some_and(|p| part_type(p) == "dynamic-tool")
    }

    /// `updateToolPart`.
    pub(super) fn update_tool_part(&mut self, options: ToolUpdate<'_>, existing: Option<usize>) {
        let index = existing
            .or_else(|| self.current_step_tool(options.tool_call_id, |t| t.starts_with("tool-")));
        match index {
            Some(index) => {
                let is_result = options.is_result();
                let Some((part, ghosts)) = self.part_mut(index) else {
                    return;
                };
                assign(part, ghosts, "state", string(options.state));
                set_slot(part, ghosts, "input", options.input);
                assign(part, ghosts, "output", options.output);
                assign(part, ghosts, "errorText", options.error_text);
                set_slot(part, ghosts, "rawInput", options.raw_input);
                assign_tool_tail(
                    part,
                    ghosts,
                    ToolTail {
                        preliminary: options.preliminary,
                        title: options.title,
                        tool_metadata: options.tool_metadata,
                        provider_executed: options.provider_executed,
                        provider_metadata: options.provider_metadata,
                    },
                    is_result,
                );
            }
            None => {
                let is_result = options.is_result();
                let tool_name = match &options.tool_name {
                    Slot::Set(Some(Value::String(name))) => name.clone(),
                    _ => "undefined".to_owned(),
                };
                let (call_metadata, result_metadata) = match options.provider_metadata {
                    Some(m) if is_result => (None, Some(m)),
                    Some(m) => (Some(m), None),
                    None => (None, None),
                };
                let part = Literal::new()
                    .field("type", Some(Value::String(format!("tool-{tool_name}"))))
                    .field("toolCallId", string(options.tool_call_id))
                    .field("state", string(options.state))
                    .field("title", options.title)
                    .field_if("toolMetadata", options.tool_metadata)
                    .field("input", options.input.into_value())
                    .field("output", options.output)
                    .field("rawInput", options.raw_input.into_value())
                    .field("errorText", options.error_text)
                    .field(
                        "providerExecuted",
                        options.provider_executed.map(Value::Bool),
                    )
                    .field("preliminary", options.preliminary.map(Value::Bool))
                    .field_if("resultProviderMetadata", result_metadata)
                    .field_if("callProviderMetadata", call_metadata)
                    .build();
                let index = self.push_part(part);
                self.tools
                    .entry(options.tool_call_id.to_owned())
                    .or_default()
                    .push(index);
            }
        }
    }

    /// [`Self::update_dynamic_tool_part`] when `dynamic`, else [`Self::update_tool_part`].
    fn update_either_tool_part(
        &mut self,
        dynamic: bool,
        options: ToolUpdate<'_>,
        existing: Option<usize>,
    ) {
        if dynamic {
            self.update_dynamic_tool_part(options, existing);
        } else {
            self.update_tool_part(options, existing);
        }
    }

    /// `updateDynamicToolPart`.
    pub(super) fn update_dynamic_tool_part(
        &mut self,
        options: ToolUpdate<'_>,
        existing: Option<usize>,
    ) {
        let index = existing
            .or_else(|| self.current_step_tool(options.tool_call_id, |t| t == "dynamic-tool"));
        match index {
            Some(index) => {
                let is_result = options.is_result();
                let Some((part, ghosts)) = self.part_mut(index) else {
                    return;
                };
                assign(part, ghosts, "state", string(options.state));
                set_slot(part, ghosts, "toolName", options.tool_name);
                set_slot(part, ghosts, "input", options.input);
                assign(part, ghosts, "output", options.output);
                assign(part, ghosts, "errorText", options.error_text);
                // `options.rawInput ?? part.rawInput`
                match options.raw_input {
                    Slot::Set(Some(raw)) if !raw.is_null() => {
                        assign(part, ghosts, "rawInput", Some(raw))
                    }
                    _ => assign_or_keep(part, ghosts, "rawInput", None),
                }
                assign_tool_tail(
                    part,
                    ghosts,
                    ToolTail {
                        preliminary: options.preliminary,
                        title: options.title,
                        tool_metadata: options.tool_metadata,
                        provider_executed: options.provider_executed,
                        provider_metadata: options.provider_metadata,
                    },
                    is_result,
                );
            }
            None => {
                let is_result = options.is_result();
                let (call_metadata, result_metadata) = match options.provider_metadata {
                    Some(m) if is_result => (None, Some(m)),
                    Some(m) => (Some(m), None),
                    None => (None, None),
                };
                let part = Literal::new()
                    .field("type", string("dynamic-tool"))
                    .field("toolName", options.tool_name.into_value())
                    .field("toolCallId", string(options.tool_call_id))
                    .field("state", string(options.state))
                    .field("input", options.input.into_value())
                    .field("output", options.output)
                    .field("errorText", options.error_text)
                    .field("preliminary", options.preliminary.map(Value::Bool))
                    .field(
                        "providerExecuted",
                        options.provider_executed.map(Value::Bool),
                    )
                    .field("title", options.title)
                    .field_if("toolMetadata", options.tool_metadata)
                    .field_if("resultProviderMetadata", result_metadata)
                    .field_if("callProviderMetadata", call_metadata)
                    .build();
                let index = self.push_part(part);
                self.tools
                    .entry(options.tool_call_id.to_owned())
                    .or_default()
                    .push(index);
            }
        }
    }

    /// `tool-input-start`: a call whose input streams.
    pub(super) fn tool_input_start(
        &mut self,
        c: &ToolInputStart,
    ) -> Result<Changed, AccumulateError> {
        self.partial_tool_calls.insert(
            c.tool_call_id.clone(),
            PartialToolCall {
                text: String::new(),
                tool_name: c.tool_name.clone(),
                dynamic: c.dynamic == Some(true),
                title: c.title.clone(),
                tool_metadata: c.tool_metadata.clone(),
            },
        );
        let options = ToolUpdate {
            tool_name: Slot::Set(string(&c.tool_name)),
            provider_executed: c.provider_executed,
            title: c.title.as_deref().and_then(string),
            tool_metadata: object(&c.tool_metadata),
            provider_metadata: object(&c.provider_metadata),
            ..ToolUpdate::new(&c.tool_call_id, "input-streaming")
        };
        self.update_either_tool_part(c.dynamic == Some(true), options, None);
        Ok(Changed::Snapshot)
    }

    /// `tool-input-delta`: more of a streaming input, read as partial JSON.
    pub(super) fn tool_input_delta(
        &mut self,
        c: &ToolInputDelta,
    ) -> Result<Changed, AccumulateError> {
        let Some(partial) = self.partial_tool_calls.get_mut(&c.tool_call_id) else {
            return Err(AccumulateError::MissingToolCall {
                tool_call_id: c.tool_call_id.clone(),
            });
        };
        partial.text.push_str(&c.input_text_delta);
        let input = parse_partial_json(&partial.text);
        let dynamic = partial.dynamic;
        let options = ToolUpdate {
            tool_name: Slot::Set(string(&partial.tool_name)),
            input: Slot::Set(input),
            title: partial.title.as_deref().and_then(string),
            tool_metadata: object(&partial.tool_metadata),
            ..ToolUpdate::new(&c.tool_call_id, "input-streaming")
        };
        self.update_either_tool_part(dynamic, options, None);
        Ok(Changed::Snapshot)
    }

    /// `tool-input-available`: the whole input of the call.
    pub(super) fn tool_input_available(
        &mut self,
        c: &ToolInputAvailable,
    ) -> Result<Changed, AccumulateError> {
        let options = ToolUpdate {
            tool_name: Slot::Set(string(&c.tool_name)),
            input: Slot::Set(c.input.clone()),
            provider_executed: c.provider_executed,
            provider_metadata: object(&c.provider_metadata),
            title: c.title.as_deref().and_then(string),
            tool_metadata: object(&c.tool_metadata),
            ..ToolUpdate::new(&c.tool_call_id, "input-available")
        };
        self.update_either_tool_part(c.dynamic == Some(true), options, None);
        Ok(Changed::Snapshot)
    }

    /// `tool-input-error`: the input of the call could not be read.
    pub(super) fn tool_input_error(
        &mut self,
        c: &ToolInputError,
    ) -> Result<Changed, AccumulateError> {
        let existing = self.current_step_tool(&c.tool_call_id, |_| true);
        let is_dynamic = match existing {
            Some(index) => self.is_dynamic_part(index),
            None => c.dynamic == Some(true),
        };
        let common = ToolUpdate {
            tool_name: Slot::Set(string(&c.tool_name)),
            error_text: string(&c.error_text),
            provider_executed: c.provider_executed,
            provider_metadata: object(&c.provider_metadata),
            tool_metadata: object(&c.tool_metadata),
            ..ToolUpdate::new(&c.tool_call_id, "output-error")
        };
        if is_dynamic {
            let options = ToolUpdate {
                input: Slot::Set(c.input.clone()),
                ..common
            };
            self.update_dynamic_tool_part(options, None);
        } else {
            let options = ToolUpdate {
                input: Slot::Set(None),
                raw_input: Slot::Set(c.input.clone()),
                ..common
            };
            self.update_tool_part(options, None);
        }
        Ok(Changed::Snapshot)
    }

    /// `tool-approval-request`: the call waits for an approval.
    pub(super) fn tool_approval_request(
        &mut self,
        c: &ToolApprovalRequest,
    ) -> Result<Changed, AccumulateError> {
        let index = self.tool_invocation(&c.tool_call_id)?;
        let (approval, _) = Literal::new()
            .field("id", string(&c.approval_id))
            .field_if(
                "descriptor",
                c.approval_descriptor.clone().filter(|d| !d.is_null()),
            )
            .field_if("requestReason", c.reason.as_deref().and_then(string))
            .field_if(
                "isAutomatic",
                (c.is_automatic == Some(true)).then_some(Value::Bool(true)),
            )
            .field_if("signature", c.signature.as_deref().and_then(string))
            .build();
        if let Some((part, ghosts)) = self.part_mut(index) {
            assign(part, ghosts, "state", string("approval-requested"));
            assign(part, ghosts, "approval", Some(approval));
        }
        Ok(Changed::Snapshot)
    }

    /// `tool-approval-response`: the answer to the approval.
    pub(super) fn tool_approval_response(
        &mut self,
        c: &ToolApprovalResponse,
    ) -> Result<Changed, AccumulateError> {
        let index = self
            .parts()
            .iter()
            .position(|p| {
                is_tool_type(part_type(p))
                    && p.get("approval")
                        .and_then(|a| a.get("id"))
                        .and_then(Value::as_str)
                        == Some(c.approval_id.as_str())
            })
            .ok_or_else(|| AccumulateError::NoApproval {
                approval_id: c.approval_id.clone(),
            })?;
        let mut approval = match self.part_field(index, "approval") {
            Some(Value::Object(approval)) => approval,
            _ => Map::new(),
        };
        approval.insert("id".to_owned(), Value::String(c.approval_id.clone()));
        approval.insert("approved".to_owned(), Value::Bool(c.approved));
        if let Some(reason) = &c.reason {
            approval.insert("reason".to_owned(), Value::String(reason.clone()));
        }
        if let Some((part, ghosts)) = self.part_mut(index) {
            assign(part, ghosts, "state", string("approval-responded"));
            assign(part, ghosts, "approval", Some(Value::Object(approval)));
            if let Some(provider_executed) = c.provider_executed {
                assign(
                    part,
                    ghosts,
                    "providerExecuted",
                    Some(Value::Bool(provider_executed)),
                );
            }
            if let Some(provider_metadata) = object(&c.provider_metadata) {
                assign(
                    part,
                    ghosts,
                    "callProviderMetadata",
                    Some(provider_metadata),
                );
            }
        }
        Ok(Changed::Snapshot)
    }

    /// `tool-output-denied`: the call was denied.
    pub(super) fn tool_output_denied(
        &mut self,
        c: &ToolOutputDenied,
    ) -> Result<Changed, AccumulateError> {
        let index = self.tool_invocation(&c.tool_call_id)?;
        if let Some((part, ghosts)) = self.part_mut(index) {
            assign(part, ghosts, "state", string("output-denied"));
        }
        Ok(Changed::Snapshot)
    }

    /// `tool-output-available`: the output of the call.
    pub(super) fn tool_output_available(
        &mut self,
        c: &ToolOutputAvailable,
    ) -> Result<Changed, AccumulateError> {
        let index = self.tool_invocation(&c.tool_call_id)?;
        let options = ToolUpdate {
            tool_name: Slot::Keep,
            input: Slot::Keep,
            output: c.output.clone(),
            preliminary: c.preliminary,
            provider_executed: c.provider_executed,
            provider_metadata: object(&c.provider_metadata),
            // `title: part.title` and `toolMetadata: part.toolMetadata` assign a part's
            // own values back: nothing changes.
            ..ToolUpdate::new(&c.tool_call_id, "output-available")
        };
        self.update_either_tool_part(self.is_dynamic_part(index), options, Some(index));
        Ok(Changed::Snapshot)
    }

    /// `tool-output-error`: the call failed.
    pub(super) fn tool_output_error(
        &mut self,
        c: &ToolOutputError,
    ) -> Result<Changed, AccumulateError> {
        let index = self.tool_invocation(&c.tool_call_id)?;
        let options = ToolUpdate {
            tool_name: Slot::Keep,
            input: Slot::Keep,
            error_text: string(&c.error_text),
            provider_executed: c.provider_executed,
            provider_metadata: object(&c.provider_metadata),
            ..ToolUpdate::new(&c.tool_call_id, "output-error")
        };
        if self.is_dynamic_part(index) {
            self.update_dynamic_tool_part(options, Some(index));
        } else {
            let options = ToolUpdate {
                raw_input: Slot::Keep,
                ..options
            };
            self.update_tool_part(options, Some(index));
        }
        Ok(Changed::Snapshot)
    }
}
