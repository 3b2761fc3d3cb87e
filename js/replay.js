'use strict';
/**
 * A finished reply as a UI message stream: the chunks that rebuild a stored assistant message, for
 * a `submissionId` retried after its turn ended.
 */

/** The chunks that rebuild `message` (a `UIMessage`) with `readUIMessageStream`. */
function messageChunks(message) {
  const chunks = [{ type: 'start', messageId: message.id }];
  if (message.metadata !== undefined) chunks[0].messageMetadata = message.metadata;
  let step = false;
  let n = 0;
  for (const part of message.parts ?? []) {
    const type = part?.type;
    if (type === 'step-start') {
      if (step) chunks.push({ type: 'finish-step' });
      chunks.push({ type: 'start-step' });
      step = true;
    } else if (type === 'text' || type === 'reasoning') {
      const id = `${type}-${n++}`;
      chunks.push({ type: `${type}-start`, id }, { type: `${type}-delta`, id, delta: part.text }, { type: `${type}-end`, id });
    } else if (type === 'dynamic-tool' || (typeof type === 'string' && type.startsWith('tool-'))) {
      chunks.push(...toolChunks(part));
    } else if (type === 'file') {
      chunks.push({ type: 'file', url: part.url, mediaType: part.mediaType });
    } else if (type === 'source-url' || type === 'source-document') {
      const { providerMetadata, ...rest } = part;
      chunks.push(rest);
    } else if (typeof type === 'string' && type.startsWith('data-')) {
      chunks.push({ type, ...(part.id === undefined ? {} : { id: part.id }), data: part.data });
    }
  }
  if (step) chunks.push({ type: 'finish-step' });
  chunks.push({ type: 'finish' });
  return chunks;
}

function toolChunks(part) {
  const dynamic = part.type === 'dynamic-tool';
  const toolName = dynamic ? part.toolName : part.type.slice('tool-'.length);
  const call = {
    toolCallId: part.toolCallId,
    toolName,
    ...(dynamic ? { dynamic: true } : {}),
    ...(part.providerExecuted === undefined ? {} : { providerExecuted: part.providerExecuted }),
  };
  const chunks = [];
  if (part.state === 'input-streaming') {
    chunks.push({ type: 'tool-input-start', ...call });
    return chunks;
  }
  chunks.push({ type: 'tool-input-available', ...call, input: part.input });
  if (part.approval?.id !== undefined) {
    chunks.push({ type: 'tool-approval-request', approvalId: part.approval.id, toolCallId: part.toolCallId });
  }
  if (part.state === 'output-available') {
    chunks.push({ type: 'tool-output-available', toolCallId: part.toolCallId, output: part.output, ...(dynamic ? { dynamic: true } : {}) });
  } else if (part.state === 'output-error') {
    chunks.push({ type: 'tool-output-error', toolCallId: part.toolCallId, errorText: part.errorText, ...(dynamic ? { dynamic: true } : {}) });
  } else if (part.state === 'output-denied') {
    chunks.push({ type: 'tool-output-denied', toolCallId: part.toolCallId });
  }
  return chunks;
}

/**
 * The chunks that bring a reader joining a live turn to where it stands, from `reply` (what the
 * engine's `replySoFar()` gives: the message so far, `inputParts`, and the parts still open): the
 * parts of the turn's own (after the `inputParts` of the message it continues), the open text and
 * reasoning parts under their own ids and left open, a streaming tool input with its text so far,
 * and no `finish-step` or `finish` (the live chunks that follow carry them).
 */
function liveChunks({ message, inputParts = 0, openText = {}, openReasoning = {}, toolInputs = {} }) {
  const chunks = [{ type: 'start', messageId: message.id }];
  if (message.metadata !== undefined) chunks[0].messageMetadata = message.metadata;
  const openIds = new Map();
  for (const [id, index] of Object.entries(openText)) openIds.set(index, id);
  for (const [id, index] of Object.entries(openReasoning)) openIds.set(index, id);
  let step = false;
  let n = 0;
  const parts = message.parts ?? [];
  for (let index = inputParts; index < parts.length; index++) {
    const part = parts[index];
    const type = part?.type;
    if (type === 'step-start') {
      if (step) chunks.push({ type: 'finish-step' });
      chunks.push({ type: 'start-step' });
      step = true;
    } else if (type === 'text' || type === 'reasoning') {
      const open = openIds.get(index);
      const id = open ?? (typeof part.id === 'string' ? part.id : `${type}-rebuilt-${n++}`);
      chunks.push({ type: `${type}-start`, id });
      if (part.text !== '') chunks.push({ type: `${type}-delta`, id, delta: part.text });
      if (open === undefined) chunks.push({ type: `${type}-end`, id });
    } else if ((type === 'dynamic-tool' || (typeof type === 'string' && type.startsWith('tool-'))) && part.state === 'input-streaming') {
      const dynamic = type === 'dynamic-tool';
      chunks.push({
        type: 'tool-input-start',
        toolCallId: part.toolCallId,
        toolName: dynamic ? part.toolName : type.slice('tool-'.length),
        ...(dynamic ? { dynamic: true } : {}),
      });
      const text = toolInputs[part.toolCallId];
      if (typeof text === 'string' && text !== '') chunks.push({ type: 'tool-input-delta', toolCallId: part.toolCallId, inputTextDelta: text });
    } else {
      chunks.push(...messageChunks({ id: message.id, parts: [part] }).slice(1, -1));
    }
  }
  return chunks;
}

/** A stream of `chunks`, closed after the last. */
function streamOf(chunks) {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

module.exports = { liveChunks, messageChunks, streamOf };
