// What a program written for `ai-sdk-harness-sessions` 0.2.0 could still tell apart from us, each
// done as the reference does it (the drop-in issue), with the fake agent.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createMemorySessionStore, sandboxPerSession, SessionConflictError } from '../index.js';
import { createFakeSandbox } from '../testing/index.mjs';
import { createFakeAgent, readTurn, testManager, testSandboxes, untilStatus } from './support/sessions.mjs';

async function conflict(promise, status, message) {
  await assert.rejects(promise, (error) => {
    assert.ok(SessionConflictError.isInstance(error), String(error));
    assert.equal(error.status, status);
    assert.equal(error.message, message);
    return true;
  });
}

const toolParts = (message) => message.parts.filter((p) => p.type.startsWith('tool-')).map((p) => [p.type, p.state]);

const approvalResponse = (approvalId, approved) => ({ type: 'tool-approval-response', approvalId, approved });

/** A session `id` paused on what `turn` asks. */
async function paused(turn, options = {}) {
  const agent = createFakeAgent({ turns: [turn] });
  const made = testManager({ fakeAgent: agent, ...options });
  await made.sessions.create({ id: 'p', metadata: {} });
  const first = await readTurn(await made.sessions.send('p', { message: 'go' }));
  assert.equal(first.session.status, 'awaiting-input');
  return { ...made, agent, first };
}

describe('what a session waiting for input keeps of its message', () => {
  test('close() only drops pendingInput: the message is left as it was', async () => {
    const { sessions } = await paused({ approvals: [{ toolName: 'write' }], toolCalls: [{ toolName: 'pick' }] });
    const before = (await sessions.get('p')).messages;
    const closed = await sessions.close('p');
    assert.equal(closed.status, 'closed');
    assert.equal(closed.pendingInput, undefined);
    const after = (await sessions.get('p')).messages;
    assert.deepEqual(after, before);
    assert.deepEqual(toolParts(after.at(-1)), [
      ['tool-write', 'approval-requested'],
      ['tool-pick', 'input-available'],
    ]);
  });

  test('close() of a session suspended while it waited: pendingInput dropped, the message as it was', async () => {
    const { sessions } = await paused({ approvals: [{ toolName: 'write' }] });
    await sessions.suspend('p');
    const before = (await sessions.get('p')).messages;
    const closed = await sessions.close('p');
    assert.equal(closed.pendingInput, undefined);
    assert.deepEqual((await sessions.get('p')).messages, before);
  });

  test('recovery: a session found live becomes interrupted, its message and pendingInput untouched', async () => {
    const store = createMemorySessionStore();
    await paused({ approvals: [{ toolName: 'write' }] }, { store });
    const before = await store.get('p');
    // A second manager on the store takes the first one's live session for a crashed one's.
    const { sessions } = testManager({ store });
    await untilStatus(sessions, 'p', 'interrupted');
    const after = await sessions.get('p');
    assert.equal(after.error, 'The application stopped without suspending the session.');
    assert.deepEqual(after.messages, before.messages);
    assert.deepEqual(after.pendingInput, before.pendingInput);
    assert.deepEqual(toolParts(after.messages.at(-1)), [['tool-write', 'approval-requested']]);
  });

  test('a turn lost with a suspension: what continue() did not answer stays as it was', async () => {
    const { sessions, agent, first } = await paused({ approvals: [{ toolName: 'write' }, { toolName: 'rm' }] });
    await sessions.suspend('p');
    const [write] = first.session.pendingInput.approvals;
    const turn = await readTurn(
      await sessions.continue('p', { toolApprovalContinuations: [approvalResponse(write.approvalId, true)] }),
    );
    assert.equal(agent.calls.at(-1).method, 'stream', 'told in words');
    assert.equal(turn.session.status, 'idle');
    assert.deepEqual(toolParts((await sessions.get('p')).messages.at(-1)), [
      ['tool-write', 'approval-responded'],
      ['tool-rm', 'approval-requested'],
    ]);
  });
});

describe('starting', () => {
  test("agent() is called before the sandbox is acquired: one that throws acquires none, 'start' is reported, the message refused verbatim", async () => {
    const sandboxes = testSandboxes();
    const thrown = new Error('No agent for this session.');
    const { sessions, errors } = testManager({
      sandboxes,
      agent: () => {
        throw thrown;
      },
    });
    await sessions.create({ id: 'a', metadata: {} });
    await untilStatus(sessions, 'a', 'failed');
    assert.deepEqual(sandboxes.log, [], 'no sandbox was acquired');
    assert.equal((await sessions.get('a')).error, 'No agent for this session.');
    assert.ok(errors.some((e) => e.action === 'start' && e.sessionId === 'a' && e.error === thrown), JSON.stringify(errors));
    // "The session is <status>: <error>." as the reference writes it: the error's period kept.
    await conflict(sessions.send('a', { message: 'hi' }), 'failed', 'The session is failed: No agent for this session..');
    assert.deepEqual(sandboxes.log, []);
  });

  test("a resume whose agent() rejects: no sandbox acquired, 'resume' reported, the session stays suspended", async () => {
    const sandboxes = testSandboxes();
    const fake = createFakeAgent();
    let refusal;
    const { sessions, errors } = testManager({
      sandboxes,
      agent: async () => {
        if (refusal !== undefined) throw refusal;
        return fake;
      },
    });
    await sessions.create({ id: 'r', metadata: {} });
    await untilStatus(sessions, 'r', 'idle');
    await sessions.suspend('r');
    const acquired = sandboxes.log.filter(([what]) => what === 'acquire').length;
    refusal = new Error('Not now');
    await conflict(sessions.send('r', { message: 'hi' }), 'suspended', 'The session is suspended: Not now.');
    assert.equal(sandboxes.log.filter(([what]) => what === 'acquire').length, acquired);
    assert.ok(errors.some((e) => e.action === 'resume' && e.error === refusal));
    refusal = undefined;
    const { session } = await readTurn(await sessions.send('r', { message: 'again' }));
    assert.equal(session.status, 'idle');
  });
});

describe('continue() answers the session does not wait for', () => {
  const sent = (agent) => agent.calls.filter((c) => c.method === 'continueStream').at(-1).options;

  test('an unknown approval id reaches the agent, and the message is left as it was', async () => {
    const { sessions, agent } = await paused({ approvals: [{ toolName: 'write' }] });
    const { session } = await readTurn(await sessions.continue('p', { toolApprovalContinuations: [approvalResponse('nope', true)] }));
    assert.deepEqual(sent(agent).toolApprovalContinuations, [approvalResponse('nope', true)]);
    assert.deepEqual(sent(agent).toolResultContinuations, []);
    assert.equal(session.status, 'idle');
    assert.deepEqual(toolParts((await sessions.get('p')).messages.at(-1)), [['tool-write', 'approval-requested']]);
  });

  test("the message's answers first, then the given ones as they are; a decided approval's answer dropped", async () => {
    const approve = ({ toolName }) => (toolName === 'ls' ? { approved: true } : undefined);
    const { sessions, agent, first } = await paused({ approvals: [{ toolName: 'ls' }, { toolName: 'write' }] }, { approve });
    const [ls, write] = first.session.pendingInput.approvals;
    const message = structuredClone(first.message);
    const part = message.parts.find((p) => p.type === 'tool-write');
    part.state = 'approval-responded';
    part.approval = { ...part.approval, approved: false, reason: 'No.' };
    const ghost = { type: 'tool-result', toolCallId: 'ghost', toolName: 'pick', output: { type: 'json', value: 1 } };
    await readTurn(
      await sessions.continue('p', {
        message,
        toolApprovalContinuations: [approvalResponse('nope', true), approvalResponse(ls.approvalId, false)],
        toolResultContinuations: [ghost],
      }),
    );
    assert.deepEqual(sent(agent).toolApprovalContinuations, [
      approvalResponse(ls.approvalId, true),
      { ...approvalResponse(write.approvalId, false), reason: 'No.' },
      approvalResponse('nope', true),
    ]);
    assert.deepEqual(sent(agent).toolResultContinuations, [ghost]);
  });
});

describe('approve', () => {
  test('two approvals answered in one step: both requests, then both responses, at once', async () => {
    const agent = createFakeAgent({
      turns: [{ approvals: [{ toolName: 'ls', input: { path: 'a' } }, { toolName: 'ls', input: { path: 'b' } }] }, { text: 'done' }],
    });
    const { sessions } = testManager({ fakeAgent: agent, approve: () => ({ approved: true }) });
    await sessions.create({ id: 't', metadata: {} });
    const { chunks, session } = await readTurn(await sessions.send('t', { message: 'list' }));
    const [a, b] = chunks.filter((c) => c.type === 'tool-approval-request').map((c) => c.approvalId);
    const at = chunks.findIndex((c) => c.type === 'tool-approval-request');
    assert.deepEqual(
      chunks.slice(at, at + 4).map((c) => [c.type, c.approvalId]),
      [
        ['tool-approval-request', a],
        ['tool-approval-request', b],
        ['tool-approval-response', a],
        ['tool-approval-response', b],
      ],
    );
    assert.equal(chunks.filter((c) => c.type === 'finish').length, 1);
    assert.equal(session.status, 'idle');
  });
});

describe('sandboxPerSession()', () => {
  test("has no shutdown(), as the reference's: the manager's shutdown() leaves the sandboxes the application holds", async () => {
    const stopped = [];
    const sandbox = (id) => {
      const made = createFakeSandbox({});
      made.stop = async () => {
        stopped.push(id);
      };
      made.destroy = async () => {};
      return made;
    };
    const strategy = sandboxPerSession({ create: async (id) => sandbox(id), resume: async (id) => sandbox(id) });
    assert.equal(strategy.shutdown, undefined);
    const mine = await strategy.acquire('mine', { resume: false });
    const { sessions } = testManager({ sandboxes: strategy });
    await sessions.create({ id: 's', metadata: {} });
    await untilStatus(sessions, 's', 'idle');
    await sessions.shutdown();
    assert.deepEqual(stopped, ['s'], 'the session was suspended; the sandbox held apart was left running');
    await mine.close();
  });
});
