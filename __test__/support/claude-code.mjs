// What the end-to-end tests of the real Claude Code share: the real `HarnessAgent` with the real
// `@ai-sdk/harness-claude-code` (whose bridge drives the real Claude Code CLI) against the mock of
// the Anthropic Messages API, with every other request the CLI tries sent to a catcher that refuses
// and logs it; a reader of turns through `toUIMessageStreamResponse()` and `readUIMessageStream`.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { HarnessAgent } from '@ai-sdk/harness/agent';
import { createClaudeCode } from '@ai-sdk/harness-claude-code';
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from 'ai';
import { createAnthropicMock, createRequestCatcher, requestTexts, requestToolResults } from '../../testing/index.mjs';

export { requestTexts, requestToolResults };

/** The variables that keep the CLI from calling anything but its model: telemetry, reports, updates. */
export const QUIET_CLAUDE_CODE_ENV = {
  DISABLE_TELEMETRY: '1',
  DISABLE_ERROR_REPORTING: '1',
  DISABLE_AUTOUPDATER: '1',
  DISABLE_BUG_COMMAND: '1',
  DISABLE_NON_ESSENTIAL_MODEL_CALLS: '1',
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
  CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY: '1',
  CLAUDE_CODE_DISABLE_TERMINAL_TITLE: '1',
};

/**
 * A free TCP port of this host for a bridge (Docker sandboxes with ports use host networking),
 * picked below the kernel's ephemeral range (32768 and up): a port the kernel hands out to some
 * other process's `listen(0)` while a suspended session's bridge is down would be taken from it.
 */
export async function freePort() {
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    const free = await new Promise((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

/**
 * The mock model and the catcher, started; `env` for the sandbox's processes; `agent()` makes a
 * `HarnessAgent` on the real Claude Code harness pointed at the mock. The main requests of the CLI
 * (those that offer tools) take the queued replies; any other request it makes gets a short text.
 */
export async function startClaudeCodeWorld() {
  const mock = await createAnthropicMock({
    respond: (request) => (Array.isArray(request.body?.tools) && request.body.tools.length > 0 ? undefined : { text: 'Side answer.' }),
    fallback: { text: 'Nothing more is scripted.' },
  });
  const catcher = await createRequestCatcher();
  const env = { ...QUIET_CLAUDE_CODE_ENV, ...catcher.proxyEnv() };
  return {
    mock,
    catcher,
    env,
    agent({ permissionMode = 'allow-reads', ...rest } = {}) {
      const harness = createClaudeCode({ auth: { anthropic: { apiKey: 'sk-ant-mock-key', baseUrl: mock.url } }, ...rest });
      return new HarnessAgent({ harness, permissionMode });
    },
    /** The main requests (those that offer tools), in order. */
    mainRequests() {
      return mock.messageRequests.filter((r) => Array.isArray(r.body?.tools) && r.body.tools.length > 0);
    },
    /** Fails when the CLI tried to reach anything but the mock. */
    assertNothingCaught() {
      assert.deepEqual(catcher.requests, [], 'the CLI tried to reach something other than the mock');
      const stray = mock.requests.filter((r) => r.path !== '/v1/messages' && r.path !== '/v1/messages/count_tokens');
      assert.deepEqual(stray.map((r) => `${r.method} ${r.path}`), [], 'the CLI called endpoints the mock does not serve');
    },
    async close() {
      await Promise.allSettled([mock.close(), catcher.close()]);
    },
  };
}

/**
 * Reads a turn as a browser does: its `toUIMessageStreamResponse()` body parsed as server-sent
 * events, the message built by `readUIMessageStream` (continuing `continues`, as useChat does).
 */
export async function readTurnResponse(turn, continues) {
  const response = turn.toUIMessageStreamResponse();
  assert.equal(response.headers.get('content-type'), 'text/event-stream');
  const chunks = [];
  const parsed = parseJsonEventStream({ stream: response.body, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(result, controller) {
        if (!result.success) throw result.error;
        chunks.push(result.value);
        controller.enqueue(result.value);
      },
    }),
  );
  let message;
  const errors = [];
  for await (const snapshot of readUIMessageStream({ message: continues, stream: parsed, onError: (e) => errors.push(e) })) {
    message = snapshot;
  }
  const session = await turn.done;
  return { chunks, message, session, errors };
}

/** The output of the last tool result of a request, as text. */
export function lastToolOutput(request) {
  const content = requestToolResults(request).at(-1)?.content;
  return typeof content === 'string' ? content : (content ?? []).map((block) => block.text ?? '').join('');
}

/**
 * Replies that write `name` with a Bash command (asking approval) in the CLI's working directory,
 * which the command prints, then read the file back with Read (no approval), then say `done`.
 */
export function writeThenRead(name, content, done) {
  let dir;
  return [
    { text: `I will write ${name}.`, toolUse: { name: 'Bash', input: { command: `printf '%s\\n' '${content}' > ${name} && pwd`, description: `Write ${name}` } } },
    (request) => {
      dir = lastToolOutput(request).trim();
      return { toolUse: { name: 'Read', input: { file_path: `${dir}/${name}` } } };
    },
    { text: done },
  ];
}

/** The text of a UI message's text parts. */
export function textOf(message) {
  return (message?.parts ?? [])
    .filter((p) => p.type === 'text')
    .map((p) => p.text)
    .join('');
}

/** A user's UI message, as useChat sends it. */
export function userMessage(text, id = `user-${Math.random().toString(36).slice(2)}`) {
  return { id, role: 'user', parts: [{ type: 'text', text }] };
}

/** The assistant message with its approvals answered, as useChat sends it back after `addToolApprovalResponse()`. */
export function answerApprovals(message, approved, reason) {
  return {
    ...message,
    parts: message.parts.map((part) =>
      part.state === 'approval-requested'
        ? { ...part, state: 'approval-responded', approval: { ...part.approval, approved, ...(reason ? { reason } : {}) } }
        : part,
    ),
  };
}

/** Waits until `predicate()` holds, polling (at most `ms`). */
export async function until(predicate, ms = 60_000, what = String(predicate)) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await predicate()) return;
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms in vain for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
