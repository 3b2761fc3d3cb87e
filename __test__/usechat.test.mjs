// The full useChat round trip: the real Chat class of `ai` (AbstractChat, the class useChat wraps)
// with its DefaultChatTransport, against a route handler built on the manager as the seed README
// shows it, the real HarnessAgent behind it: a message, an approval asked, answered with
// addToolApprovalResponse() (approved, then denied), sent back automatically, continued.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';
import { createSessionManager, SessionConflictError } from '../index.js';
import { forkingSandboxes, scriptedAgent } from './support/harness.mjs';
import { until } from './support/sessions.mjs';

class TestChatState {
  constructor(messages = []) {
    this.messages = messages;
    this.status = 'ready';
    this.error = undefined;
  }
  pushMessage = (message) => {
    this.messages = [...this.messages, message];
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = (value) => structuredClone(value);
}

class Chat extends AbstractChat {
  constructor({ messages, ...init }) {
    super({ ...init, state: new TestChatState(messages) });
  }
  get messages() {
    return this.state.messages;
  }
}

/** The route of the seed README, `continue()` when the last message is the assistant's. */
function chatRoute(sessions) {
  return async function POST(request) {
    const { id, messages } = await request.json();
    const message = messages.at(-1);
    if ((await sessions.get(id)) === undefined) await sessions.create({ id, metadata: { title: 'chat' } });
    try {
      const turn =
        message.role === 'assistant'
          ? await sessions.continue(id, { message, abortSignal: request.signal })
          : await sessions.send(id, { message, abortSignal: request.signal });
      return turn.toUIMessageStreamResponse();
    } catch (error) {
      if (SessionConflictError.isInstance(error)) return new Response(error.message, { status: 409 });
      throw error;
    }
  };
}

function setup() {
  const { agent } = scriptedAgent();
  const sessions = createSessionManager({ agent: () => agent, sandboxes: forkingSandboxes() });
  const POST = chatRoute(sessions);
  const requests = [];
  const fetch = async (url, init) => {
    const request = new Request(new URL(url, 'http://localhost'), init);
    requests.push(await request.clone().json());
    return POST(request);
  };
  const chat = new Chat({
    id: 'chat-1',
    transport: new DefaultChatTransport({ api: '/api/chat', fetch }),
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  });
  return { sessions, chat, requests };
}

const textOf = (message) => message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

describe('useChat against a route on the manager', () => {
  test('a message, an approval answered, the continuation in the same message; the server agrees', async () => {
    const { sessions, chat, requests } = setup();
    await chat.sendMessage({ text: 'write notes.md: remember the milk' });
    await until(() => chat.status === 'ready');
    assert.equal(chat.messages.length, 2);
    const assistant = chat.messages[1];
    const part = assistant.parts.find((p) => p.type === 'tool-write');
    assert.equal(part.state, 'approval-requested');
    assert.equal((await sessions.get('chat-1')).status, 'awaiting-input');

    await chat.addToolApprovalResponse({ id: part.approval.id, approved: true });
    await until(() => chat.status === 'ready' && requests.length === 2);
    assert.equal(requests[1].messages.at(-1).role, 'assistant', 'useChat sent the assistant message back');
    assert.equal(chat.messages.length, 2, 'the continuation stayed in the same message');
    const done = chat.messages[1];
    assert.equal(done.parts.find((p) => p.type === 'tool-write').state, 'output-available');
    assert.match(textOf(done), /notes\.md/);

    const stored = await sessions.get('chat-1');
    assert.equal(stored.status, 'idle');
    assert.equal(stored.messages.length, 2);
    assert.equal(stored.messages[1].id, done.id, 'server and client share the message id');
    assert.equal(textOf(stored.messages[1]), textOf(done));
    await sessions.shutdown();
  });

  test('a denial through useChat continues too (no hang on a denied approval)', async () => {
    const { sessions, chat } = setup();
    await chat.sendMessage({ text: 'run rm -rf /tmp/nothing' });
    await until(() => chat.status === 'ready');
    const part = chat.messages[1].parts.find((p) => p.type === 'tool-bash');
    await chat.addToolApprovalResponse({ id: part.approval.id, approved: false, reason: 'too risky' });
    await until(() => chat.status === 'ready' && /denied/.test(textOf(chat.messages[1])), 10_000);
    assert.equal((await sessions.get('chat-1')).status, 'idle');
    await chat.sendMessage({ text: 'what did I say?' });
    await until(() => chat.status === 'ready' && chat.messages.length === 4);
    assert.match(textOf(chat.messages[3]), /run rm -rf/);
    await sessions.shutdown();
  });
});
