// Awaiting input: tool approvals, tool results, agent questions, the approve hook and continue(),
// with the fake agent and with the real HarnessAgent on our model-free harness, and the useChat
// round trip with the real Chat class of `ai`.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { tool } from 'ai';
import { z } from 'zod';
import { SessionConflictError, SessionInputError } from '../index.js';
import { forkingSandboxes, scriptedAgent } from './support/harness.mjs';
import { createFakeAgent, readTurn, testManager, untilStatus } from './support/sessions.mjs';
import { createMemorySessionStore, createSessionManager } from '../index.js';

const WAITS = 'The session waits for input: answer it with continue() first.';
const NO_ANSWER = 'continue() carries no answer to what the session waits for.';
const NO_INPUT = 'The session waits for no input: send it a message.';
const textOf = (message) => message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
const approve = (approval, approved = true, reason) => ({
  type: 'tool-approval-response',
  approvalId: approval.approvalId,
  approved,
  ...(reason ? { reason } : {}),
});

async function conflict(promise, status, message) {
  await assert.rejects(promise, (error) => {
    assert.ok(SessionConflictError.isInstance(error), String(error));
    assert.equal(error.status, status);
    assert.equal(error.message, message);
    return true;
  });
}

describe('a turn that pauses (fake agent)', () => {
  const pausing = () =>
    createFakeAgent({ turns: [{ approvals: [{ toolName: 'bash', input: { command: 'rm -rf build' } }] }] });

  test('leaves the session awaiting-input with what it waits for', async () => {
    const { sessions } = testManager({ fakeAgent: pausing() });
    await sessions.create({ id: 'p', metadata: {} });
    const { session, chunks } = await readTurn(await sessions.send('p', { message: 'clean up' }));
    assert.equal(session.status, 'awaiting-input');
    const request = chunks.find((c) => c.type === 'tool-approval-request');
    assert.deepEqual(session.pendingInput, {
      approvals: [{ approvalId: request.approvalId, toolCallId: request.toolCallId, toolName: 'bash', input: { command: 'rm -rf build' } }],
      toolCalls: [],
    });
    await sessions.shutdown();
  });

  test('refuses a message, a continue with no answer; continue() answers it into the same message', async () => {
    const { sessions, agent } = testManager({ fakeAgent: pausing() });
    await sessions.create({ id: 'p', metadata: {} });
    const first = await readTurn(await sessions.send('p', { message: 'clean up' }));
    await conflict(sessions.send('p', { message: 'hello?' }), 'awaiting-input', WAITS);
    await conflict(sessions.continue('p', {}), 'awaiting-input', NO_ANSWER);
    await conflict(
      sessions.continue('p', { toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: 'other', approved: true }] }),
      'awaiting-input',
      NO_ANSWER,
    );
    const approval = first.session.pendingInput.approvals[0];
    const second = await readTurn(await sessions.continue('p', { toolApprovalContinuations: [approve(approval, false)] }));
    assert.equal(second.chunks[0].messageId, first.message.id, 'the continuation continues the same message');
    assert.equal(second.session.status, 'idle');
    const continued = agent.calls.find((c) => c.method === 'continueStream');
    assert.deepEqual(continued.options.toolApprovalContinuations, [
      { type: 'tool-approval-response', approvalId: approval.approvalId, approved: false },
    ], 'a denial without a reason reaches the agent without one');
    const record = await sessions.get('p');
    assert.equal(record.messages.length, 2, 'one user message, one assistant message');
    const part = record.messages[1].parts.find((p) => p.type === 'tool-bash');
    assert.equal(part.state, 'approval-responded');
    assert.deepEqual(part.approval, { id: approval.approvalId, approved: false });
    await conflict(sessions.continue('p', { toolApprovalContinuations: [approve(approval)] }), 'idle', NO_INPUT);
    await sessions.shutdown();
  });

  test('the answers are read from the message useChat sends back', async () => {
    const { sessions, agent } = testManager({ fakeAgent: pausing() });
    await sessions.create({ id: 'm', metadata: {} });
    const first = await readTurn(await sessions.send('m', { message: 'clean up' }));
    const approval = first.session.pendingInput.approvals[0];
    const message = structuredClone(first.message);
    const part = message.parts.find((p) => p.type === 'tool-bash');
    part.state = 'approval-responded';
    part.approval = { id: approval.approvalId, approved: true };
    await readTurn(await sessions.continue('m', { message }));
    assert.deepEqual(agent.calls.find((c) => c.method === 'continueStream').options.toolApprovalContinuations, [
      { type: 'tool-approval-response', approvalId: approval.approvalId, approved: true },
    ]);
    await sessions.shutdown();
  });

  test('a malformed answer gets SessionInputError and changes nothing', async () => {
    const { sessions } = testManager({ fakeAgent: pausing() });
    await sessions.create({ id: 'b', metadata: {} });
    await readTurn(await sessions.send('b', { message: 'clean up' }));
    const before = JSON.stringify(await sessions.get('b'));
    for (const [options, path] of [
      [{ toolApprovalContinuations: [{ approvalId: 'x', approved: 'yes' }] }, 'toolApprovalContinuations[0].approved'],
      [{ toolResultContinuations: [{ output: 1 }] }, 'toolResultContinuations[0].toolCallId'],
      [{ message: { role: 'assistant', parts: 'none' } }, 'message.parts'],
    ]) {
      await assert.rejects(sessions.continue('b', options), (error) => {
        assert.ok(SessionInputError.isInstance(error), String(error));
        assert.equal(error.path, path);
        return true;
      });
    }
    assert.equal(JSON.stringify(await sessions.get('b')), before);
    await sessions.shutdown();
  });

  test('answers are one-shot: concurrent continue() calls give one continuation, the rest conflicts', async () => {
    for (let round = 0; round < 20; round++) {
      const { sessions, agent } = testManager({ fakeAgent: pausing() });
      await sessions.create({ id: 'o', metadata: {} });
      const first = await readTurn(await sessions.send('o', { message: 'clean up' }));
      const answer = { toolApprovalContinuations: [approve(first.session.pendingInput.approvals[0])] };
      const n = 2 + (round % 9);
      const results = await Promise.allSettled(Array.from({ length: n }, () => sessions.continue('o', answer)));
      const accepted = results.filter((r) => r.status === 'fulfilled');
      assert.equal(accepted.length, 1);
      for (const r of results.filter((r) => r.status === 'rejected')) assert.ok(SessionConflictError.isInstance(r.reason));
      await readTurn(accepted[0].value);
      assert.equal(agent.calls.filter((c) => c.method === 'continueStream').length, 1);
      await sessions.shutdown();
    }
  });

  test('suspended while it waits: resumed without the paused turn, a message refused, continue() tells the answers in words', async () => {
    const store = createMemorySessionStore();
    const { sessions, agent } = testManager({ fakeAgent: pausing(), store });
    await sessions.create({ id: 's', metadata: {} });
    const first = await readTurn(await sessions.send('s', { message: 'clean up' }));
    const suspended = await sessions.suspend('s');
    assert.equal(suspended.status, 'suspended');
    assert.deepEqual(suspended.pendingInput, first.session.pendingInput);
    const kept = await store.getResumeState('s');
    assert.ok(kept.continueFrom, 'the store keeps the paused turn');
    // A message resumes the session first, then is refused: it still waits for its answers.
    await conflict(sessions.send('s', { message: 'hi' }), 'awaiting-input', WAITS);
    const resumed = agent.calls.filter((c) => c.method === 'createSession').at(-1);
    assert.equal(resumed.options.resumeFrom.continueFrom, undefined, 'the agent resumes without the paused turn');
    const live = await sessions.get('s');
    assert.equal(live.status, 'awaiting-input');
    assert.deepEqual(live.pendingInput, first.session.pendingInput);
    const { session, chunks } = await readTurn(
      await sessions.continue('s', { toolApprovalContinuations: [approve(first.session.pendingInput.approvals[0])] }),
    );
    assert.equal(session.status, 'idle');
    assert.equal(chunks[0].messageId, first.message.id, 'the reply continues the paused message');
    assert.equal(agent.calls.some((c) => c.method === 'continueStream'), false);
    assert.equal(
      agent.calls.filter((c) => c.method === 'stream').at(-1).options.prompt,
      'The session was suspended while you waited for my answers. Here they are; carry on from there:\n' +
        '- I approve bash {"command":"rm -rf build"}',
    );
    await sessions.shutdown();
  });

  test('when the paused turn was lost with the suspension, the agent is told the answers in words', async () => {
    const fake = pausing();
    const agent = {
      ...fake,
      // Claude Code's bridge stops with the suspension: its resume state keeps no paused turn.
      createSession: async (options) => {
        const session = await fake.createSession(options);
        const stop = session.stop.bind(session);
        session.stop = async () => {
          const { continueFrom, ...state } = await stop();
          void continueFrom;
          return state;
        };
        return session;
      },
    };
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 'w', metadata: {} });
    const first = await readTurn(await sessions.send('w', { message: 'clean up' }));
    await sessions.suspend('w');
    const approval = first.session.pendingInput.approvals[0];
    const { session, chunks } = await readTurn(
      await sessions.continue('w', { toolApprovalContinuations: [approve(approval, false, 'not on a Friday')] }),
    );
    const prompt = fake.calls.filter((c) => c.method === 'stream').at(-1).options.prompt;
    assert.equal(
      prompt,
      'The session was suspended while you waited for my answers. Here they are; carry on from there:\n' +
        '- I deny bash {"command":"rm -rf build"}: not on a Friday',
    );
    assert.equal(chunks[0].messageId, first.message.id, 'the answer continues the paused message');
    assert.equal(session.status, 'idle');
    const record = await sessions.get('w');
    assert.equal(record.messages.length, 2);
    assert.equal(record.messages[1].parts.find((p) => p.type === 'tool-bash').state, 'approval-responded');
    await sessions.shutdown();
  });
});

describe('the approve policy (fake agent)', () => {
  test('undefined leaves the approval to a person; a throw is reported to onError as approve', async () => {
    const seen = [];
    const { sessions, errors } = testManager({
      fakeAgent: createFakeAgent({ turns: [{ approvals: [{ toolName: 'a' }, { toolName: 'b' }] }] }),
      approve: (approval, { session }) => {
        seen.push([approval.toolName, session.id, session.status]);
        if (approval.toolName === 'b') throw new Error('policy broke');
        return undefined;
      },
    });
    await sessions.create({ id: 'u', metadata: {} });
    const { session } = await readTurn(await sessions.send('u', { message: 'go' }));
    assert.deepEqual(seen, [['a', 'u', 'busy'], ['b', 'u', 'busy']]);
    assert.equal(session.status, 'awaiting-input');
    assert.ok(session.pendingInput.approvals.every((a) => a.decision === undefined));
    const reported = errors.find((e) => e.action === 'approve');
    assert.equal(reported.error.message, 'policy broke');
    assert.equal(reported.sessionId, 'u');
    await sessions.shutdown();
  });

  test('a pause answered partly: the decisions are kept, sent with the person\'s, and cannot be overturned', async () => {
    const { sessions, agent } = testManager({
      fakeAgent: createFakeAgent({ turns: [{ approvals: [{ toolName: 'read', input: { p: 1 } }, { toolName: 'rm', input: { p: 2 } }] }] }),
      approve: (approval) => (approval.toolName === 'read' ? { approved: true } : undefined),
    });
    await sessions.create({ id: 'd', metadata: {} });
    const { session } = await readTurn(await sessions.send('d', { message: 'go' }));
    const [read, rm] = session.pendingInput.approvals;
    assert.deepEqual(read.decision, { approved: true });
    assert.equal(rm.decision, undefined);
    await readTurn(
      await sessions.continue('d', { toolApprovalContinuations: [approve(read, false), approve(rm, false, 'no')] }),
    );
    const sent = agent.calls.find((c) => c.method === 'continueStream').options.toolApprovalContinuations;
    assert.deepEqual(sent, [
      { type: 'tool-approval-response', approvalId: read.approvalId, approved: true },
      { type: 'tool-approval-response', approvalId: rm.approvalId, approved: false, reason: 'no' },
    ]);
    await sessions.shutdown();
  });
});

describe('with the real HarnessAgent', () => {
  function manager(options = {}) {
    const { agent, harness } = scriptedAgent(options);
    const sandboxes = forkingSandboxes();
    const errors = [];
    const sessions = createSessionManager({
      agent: () => agent,
      sandboxes,
      onError: (error, context) => errors.push({ error, ...context }),
      ...options.manager,
    });
    return { sessions, sandboxes, harness, errors };
  }
  const fileIn = (sandboxes, name) => readFileSync(join(sandboxes.root, name), 'utf8');

  test('a host tool approved: the file is written for real', async () => {
    const { sessions, sandboxes } = manager();
    await sessions.create({ id: 'w', metadata: {} });
    const first = await readTurn(await sessions.send('w', { message: 'write hello.txt: hi there' }));
    assert.equal(first.session.status, 'awaiting-input');
    const [approval] = first.session.pendingInput.approvals;
    assert.equal(approval.toolName, 'write');
    const second = await readTurn(await sessions.continue('w', { toolApprovalContinuations: [approve(approval)] }));
    assert.equal(second.session.status, 'idle');
    const record = await sessions.get('w');
    const part = record.messages[1].parts.find((p) => p.type === 'tool-write');
    assert.equal(part.state, 'output-available');
    const written = await sessions.send('w', { message: 'read hello.txt' });
    const read = await readTurn(written);
    assert.match(textOf(read.message), /hi there/);
    void fileIn;
    await sessions.shutdown();
  });

  test('a command denied: it does not run, and the agent says so', async () => {
    const { sessions } = manager();
    await sessions.create({ id: 'd', metadata: {} });
    const first = await readTurn(await sessions.send('d', { message: 'run touch ran.txt' }));
    const [approval] = first.session.pendingInput.approvals;
    assert.equal(approval.toolName, 'bash');
    const second = await readTurn(await sessions.continue('d', { toolApprovalContinuations: [approve(approval, false)] }), first.message);
    assert.equal(second.session.status, 'idle');
    assert.match(textOf(second.message), /denied/);
    const listed = await readTurn(await sessions.send('d', { message: 'list files' }));
    assert.doesNotMatch(JSON.stringify(listed.message), /ran\.txt/);
    await sessions.shutdown();
  });

  test("a client tool's result, from toolResultContinuations", async () => {
    const tools = { lookup: tool({ description: 'Look a word up', inputSchema: z.object({ q: z.string() }) }) };
    const { sessions } = manager({ tools });
    await sessions.create({ id: 't', metadata: {} });
    const first = await readTurn(await sessions.send('t', { message: '/tool lookup {"q":"tea"}' }));
    assert.equal(first.session.status, 'awaiting-input');
    const [call] = first.session.pendingInput.toolCalls;
    assert.deepEqual([call.toolName, call.input], ['lookup', { q: 'tea' }]);
    const second = await readTurn(
      await sessions.continue('t', {
        toolResultContinuations: [{ type: 'tool-result', toolCallId: call.toolCallId, toolName: 'lookup', output: { type: 'json', value: { meaning: 'a drink' } } }],
      }),
      first.message,
    );
    assert.equal(second.session.status, 'idle');
    assert.match(textOf(second.message), /a drink/);
    const stored = (await sessions.get('t')).messages[1].parts.find((p) => p.type === 'tool-lookup');
    assert.equal(stored.state, 'output-available');
    assert.deepEqual(stored.output, { meaning: 'a drink' });
    await sessions.shutdown();
  });

  test('a question answered, from the message useChat sends back', async () => {
    const { sessions } = manager();
    await sessions.create({ id: 'q', metadata: {} });
    const first = await readTurn(await sessions.send('q', { message: '/ask Which tea? | Green | Black' }));
    const [call] = first.session.pendingInput.toolCalls;
    assert.equal(call.toolName, 'askUserQuestions');
    const message = structuredClone(first.message);
    const part = message.parts.find((p) => p.toolCallId === call.toolCallId);
    part.state = 'output-available';
    part.output = { action: 'answered', answers: { 'question-1': { optionIds: ['option-2'] } } };
    const second = await readTurn(await sessions.continue('q', { message }), message);
    assert.equal(textOf(second.message).endsWith('You answered: Black.'), true, textOf(second.message));
    await sessions.shutdown();
  });

  test('a pause answered partly by the policy', async () => {
    const tools = { deploy: tool({ inputSchema: z.object({ env: z.string() }), execute: async ({ env }) => `deployed ${env}` }) };
    const { sessions } = manager({
      tools,
      toolApproval: { deploy: 'user-approval' },
      manager: { approve: ({ input }) => (input.env === 'staging' ? { approved: true } : undefined) },
    });
    await sessions.create({ id: 'pp', metadata: {} });
    const first = await readTurn(
      await sessions.send('pp', { message: '/tools [{"toolName":"deploy","input":{"env":"staging"}},{"toolName":"deploy","input":{"env":"prod"}}]' }),
    );
    assert.equal(first.session.status, 'awaiting-input');
    const [staging, prod] = first.session.pendingInput.approvals;
    assert.deepEqual(staging.decision, { approved: true });
    assert.equal(prod.decision, undefined);
    const second = await readTurn(await sessions.continue('pp', { toolApprovalContinuations: [approve(prod, false)] }), first.message);
    assert.equal(second.session.status, 'idle');
    assert.match(textOf(second.message), /deployed staging/);
    assert.match(textOf(second.message), /deploy was denied/);
    await sessions.shutdown();
  });

  test('the policy answers before anyone sees it: the same stream, one start and one finish', async () => {
    const { sessions } = manager({ manager: { approve: () => ({ approved: true }) } });
    await sessions.create({ id: 'auto', metadata: {} });
    const { chunks, session, message } = await readTurn(await sessions.send('auto', { message: 'write auto.txt: by policy' }));
    assert.equal(session.status, 'idle');
    const types = chunks.map((c) => c.type);
    assert.equal(types.filter((t) => t === 'start').length, 1);
    assert.equal(types.filter((t) => t === 'finish').length, 1);
    assert.equal(types.at(-1), 'finish');
    const request = types.indexOf('tool-approval-request');
    const response = types.indexOf('tool-approval-response');
    assert.ok(request >= 0 && response > request, 'the request, then its response');
    assert.equal(message.parts.find((p) => p.type === 'tool-write').state, 'output-available');
    await sessions.shutdown();
  });

  test('suspended while it waits, then continued: the agent is told the answers in words, in the same message', async () => {
    const { sessions, harness } = manager();
    await sessions.create({ id: 'sw', metadata: {} });
    const first = await readTurn(await sessions.send('sw', { message: 'write later.txt: after a nap' }));
    await sessions.suspend('sw');
    const [approval] = (await sessions.get('sw')).pendingInput.approvals;
    const second = await readTurn(await sessions.continue('sw', { toolApprovalContinuations: [approve(approval)] }));
    assert.equal(second.session.status, 'idle');
    assert.equal(second.chunks[0].messageId, first.message.id);
    const prompt = harness.calls.filter((c) => c.method === 'doPromptTurn').at(-1).detail.prompt;
    assert.equal(
      prompt,
      'The session was suspended while you waited for my answers. Here they are; carry on from there:\n' +
        `- I approve write ${JSON.stringify(approval.input)}`,
    );
    const stored = (await sessions.get('sw')).messages.at(-1);
    assert.equal(stored.parts.find((p) => p.type === 'tool-write').state, 'approval-responded');
    await sessions.shutdown();
  });
});
