// The behaviours of `ai-sdk-harness-sessions` 0.2.0 a program can see (the drop-in contract, §3),
// each as the reference does it, with the fake agent.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createMemorySessionStore, SessionConflictError } from '../index.js';
import { createDeferred, createFakeAgent, readTurn, testManager, until, untilStatus } from './support/sessions.mjs';

const TOLD = 'The session was suspended while you waited for my answers. Here they are; carry on from there:';
const NO_ANSWER = 'continue() carries no answer to what the session waits for.';

async function conflict(promise, status, message) {
  await assert.rejects(promise, (error) => {
    assert.ok(SessionConflictError.isInstance(error), String(error));
    assert.equal(error.status, status);
    if (message instanceof RegExp) assert.match(error.message, message);
    else assert.equal(error.message, message);
    return true;
  });
}

/** An agent whose continuations do not say the approval responses again. */
function silentOnAnswers(agent) {
  return {
    ...agent,
    continueStream: async (options) => {
      const result = await agent.continueStream(options);
      const toUIMessageStream = result.toUIMessageStream.bind(result);
      result.toUIMessageStream = (streamOptions) =>
        toUIMessageStream(streamOptions).pipeThrough(
          new TransformStream({
            transform(chunk, controller) {
              if (chunk.type !== 'tool-approval-response') controller.enqueue(chunk);
            },
          }),
        );
      return result;
    },
  };
}

describe('starting and resuming', () => {
  test('a resume with nothing kept: interrupted, written, and the call refused with status interrupted', async () => {
    const store = createMemorySessionStore();
    const { sessions } = testManager({ store });
    await sessions.create({ id: 'n', metadata: {} });
    await untilStatus(sessions, 'n', 'idle');
    await sessions.suspend('n');
    await store.save(await store.get('n')); // the resume state is dropped
    await conflict(sessions.send('n', { message: 'hi' }), 'interrupted', /Nothing was kept to resume the session from\./);
    const kept = await store.get('n');
    assert.equal(kept.status, 'interrupted');
    assert.equal(kept.error, 'Nothing was kept to resume the session from.');
  });

  test('a shutdown that cuts a resume: the message is refused with suspended, the record stays suspended without an error', async () => {
    const gate = createDeferred();
    const agent = createFakeAgent();
    const store = createMemorySessionStore();
    const { sessions } = testManager({ fakeAgent: agent, store });
    await sessions.create({ id: 'r', metadata: {} });
    await untilStatus(sessions, 'r', 'idle');
    await sessions.suspend('r');
    agent.script.createSession.push({ gate: gate.promise });
    const sending = sessions.send('r', { message: 'hi' });
    await untilStatus(sessions, 'r', 'preparing');
    assert.equal((await store.get('r')).status, 'suspended', 'a resume is not written preparing');
    const stopping = sessions.shutdown();
    await conflict(sending, 'suspended', 'The session is suspended.');
    gate.resolve();
    await stopping;
    const kept = await store.get('r');
    assert.equal(kept.status, 'suspended');
    assert.equal(kept.error, undefined);
    assert.ok(await store.getResumeState('r'), 'what it resumes from is kept');
  });
});

describe('a session suspended while a turn waits for input', () => {
  test('continue() tells the agent the answers in words: approvals cut at 200 characters, questions with their freeform text', async () => {
    const questions = {
      questions: [
        { id: 'q1', question: 'Which tea?', options: [{ id: 'o1', label: 'Green' }, { id: 'o2', label: 'Black' }] },
        { id: 'q2', question: 'Milk?' },
      ],
    };
    const agent = createFakeAgent({
      turns: [
        {
          approvals: [{ toolName: 'write', input: { text: 'x'.repeat(300) } }],
          toolCalls: [{ toolName: 'askUserQuestions', input: questions }],
        },
      ],
    });
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 'w', metadata: {} });
    const first = await readTurn(await sessions.send('w', { message: 'make tea' }));
    assert.equal(first.session.status, 'awaiting-input');
    await sessions.suspend('w');
    const [approval] = first.session.pendingInput.approvals;
    const [call] = first.session.pendingInput.toolCalls;
    const { session, chunks } = await readTurn(
      await sessions.continue('w', {
        toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved: false }],
        toolResultContinuations: [
          {
            type: 'tool-result',
            toolCallId: call.toolCallId,
            toolName: call.toolName,
            output: { type: 'json', value: { action: 'answered', answers: { q1: { optionIds: ['o2'], freeform: 'with lemon' } } } },
          },
        ],
      }),
    );
    const input = JSON.stringify(approval.input);
    assert.equal(
      agent.calls.filter((c) => c.method === 'stream').at(-1).options.prompt,
      [TOLD, `- I deny write ${input.slice(0, 197)}...`, '- Which tea? — Black; with lemon', '- Milk? — no answer'].join('\n'),
    );
    assert.equal(agent.calls.some((c) => c.method === 'continueStream'), false);
    assert.equal(chunks[0].messageId, first.message.id, 'the reply continues the paused message');
    assert.equal(session.status, 'idle');
  });
});

describe('turns', () => {
  test("the caller's abort reason is the one the turn ends with, not a message of ours", async () => {
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [{ waitForAbort: true }] }) });
    await sessions.create({ id: 'a', metadata: {} });
    await untilStatus(sessions, 'a', 'idle');
    const controller = new AbortController();
    const turn = await sessions.send('a', { message: 'hi', abortSignal: controller.signal });
    controller.abort(new Error('stopped by the user'));
    const { chunks, session } = await readTurn(turn);
    assert.equal(chunks.at(-1).type, 'abort');
    assert.match(chunks.at(-1).reason, /stopped by the user/, 'the caller\'s reason reaches the agent');
    assert.equal(session.status, 'idle');
    assert.notEqual(session.error, 'The turn was interrupted.');
  });

  test('after every turn, hasUnfinishedTurn() decides: a failed turn the harness did not finish is awaiting-input', async () => {
    const fake = createFakeAgent({ turns: [{ error: new Error('bridge lost') }, { text: 'fine' }] });
    let unfinished = false;
    const agent = {
      ...fake,
      createSession: async (options) => {
        const session = await fake.createSession(options);
        const own = session.hasUnfinishedTurn.bind(session);
        session.hasUnfinishedTurn = () => unfinished || own();
        return session;
      },
    };
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 'u', metadata: {} });
    await untilStatus(sessions, 'u', 'idle');
    unfinished = true;
    const failed = await readTurn(await sessions.send('u', { message: 'go' }));
    assert.equal(failed.session.error, 'bridge lost');
    assert.equal(failed.session.status, 'awaiting-input');
    assert.deepEqual(failed.session.pendingInput, { approvals: [], toolCalls: [] });
    unfinished = false;
    await sessions.suspend('u');
    assert.equal((await sessions.get('u')).status, 'suspended');
  });
});

describe('approve', () => {
  const policy = ({ toolName }) => (toolName === 'ls' ? { approved: true, reason: 'Reads are fine.' } : undefined);

  test('held-back requests are sent with their answers, one finish; a turn the agent does not echo still ends idle', async () => {
    const agent = silentOnAnswers(createFakeAgent({ turns: [{ approvals: [{ toolName: 'ls', input: { path: '.' } }] }, { text: 'done' }] }));
    const { sessions } = testManager({ fakeAgent: agent, approve: policy });
    await sessions.create({ id: 'p', metadata: {} });
    const { chunks, session, message } = await readTurn(await sessions.send('p', { message: 'list' }));
    const types = chunks.map((c) => c.type);
    const request = types.indexOf('tool-approval-request');
    assert.ok(request >= 0);
    assert.deepEqual(chunks[request + 1], {
      type: 'tool-approval-response',
      approvalId: chunks[request].approvalId,
      approved: true,
      reason: 'Reads are fine.',
    });
    assert.equal(types.filter((t) => t === 'start').length, 1);
    assert.equal(types.filter((t) => t === 'finish').length, 1);
    assert.equal(types.at(-1), 'finish');
    assert.equal(session.status, 'idle', 'the harness holds no unfinished turn: idle, whatever the stream said');
    assert.equal(session.pendingInput, undefined);
    const part = message.parts.find((p) => p.type === 'tool-ls');
    assert.deepEqual(part.approval, { id: chunks[request].approvalId, approved: true, reason: 'Reads are fine.' });
    const stored = (await sessions.get('p')).messages.at(-1).parts.find((p) => p.type === 'tool-ls');
    assert.equal(stored.approval.approved, true);
  });

  test('continue() answers that only repeat the policy\'s decisions are refused', async () => {
    const agent = createFakeAgent({ turns: [{ approvals: [{ toolName: 'ls' }, { toolName: 'rm' }] }] });
    const { sessions } = testManager({ fakeAgent: agent, approve: policy });
    await sessions.create({ id: 'r', metadata: {} });
    const { session } = await readTurn(await sessions.send('r', { message: 'clean' }));
    assert.equal(session.status, 'awaiting-input');
    const [ls, rm] = session.pendingInput.approvals;
    assert.deepEqual(ls.decision, { approved: true, reason: 'Reads are fine.' });
    assert.equal(rm.decision, undefined);
    await conflict(
      sessions.continue('r', { toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: ls.approvalId, approved: false }] }),
      'awaiting-input',
      NO_ANSWER,
    );
    const turn = await readTurn(
      await sessions.continue('r', { toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: rm.approvalId, approved: false }] }),
    );
    const sent = agent.calls.filter((c) => c.method === 'continueStream').at(-1).options.toolApprovalContinuations;
    assert.deepEqual(sent, [
      { type: 'tool-approval-response', approvalId: ls.approvalId, approved: true, reason: 'Reads are fine.' },
      { type: 'tool-approval-response', approvalId: rm.approvalId, approved: false },
    ], 'a denial without a reason reaches the agent without one');
    assert.equal(turn.session.status, 'idle');
  });
});

describe('onError', () => {
  test("the reference's actions: 'stop' for a harness session that would not stop, 'listener' for a subscriber that threw", async () => {
    const stuck = new Error('stuck');
    const { sessions, errors } = testManager({ fakeAgent: createFakeAgent({ stop: [{ fail: stuck }] }) });
    const broken = new Error('broken listener');
    sessions.subscribe(() => {
      throw broken;
    });
    await sessions.create({ id: 'o', metadata: {} });
    await untilStatus(sessions, 'o', 'idle');
    const summary = await sessions.suspend('o');
    assert.equal(summary.status, 'interrupted');
    assert.equal(summary.error, 'The harness session could not be stopped cleanly.');
    assert.ok(errors.some((e) => e.action === 'stop' && e.sessionId === 'o' && e.error === stuck), JSON.stringify(errors.map((e) => e.action)));
    assert.ok(errors.some((e) => e.action === 'listener' && e.error === broken));
  });
});

describe('what get() shows', () => {
  test('a session being suspended has left memory: get() reads the store, which gets the suspended record with its resume state at once', async () => {
    const gate = createDeferred();
    const memory = createMemorySessionStore();
    const reads = [];
    const saves = [];
    const store = {
      save: (record, resumeState) => {
        saves.push([record.status, resumeState !== undefined]);
        return memory.save(record, resumeState);
      },
      get: (id) => {
        reads.push(id);
        return memory.get(id);
      },
      list: () => memory.list(),
      getResumeState: (id) => memory.getResumeState(id),
      delete: (id) => memory.delete(id),
    };
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ stop: [{ gate: gate.promise }] }), store });
    await sessions.create({ id: 'g', metadata: {} });
    await untilStatus(sessions, 'g', 'idle');
    const before = reads.length;
    assert.equal((await sessions.get('g')).status, 'idle');
    assert.equal(reads.length, before, 'a live session is shown from memory');
    const suspending = sessions.suspend('g');
    await until(async () => {
      const shown = await sessions.get('g');
      return reads.length > before && shown.status === 'idle';
    });
    gate.resolve();
    await suspending;
    assert.equal((await sessions.get('g')).status, 'suspended');
    assert.deepEqual(saves.at(-1), ['suspended', true], 'the suspended record and its resume state in one save');
  });
});

describe('denials and closing', () => {
  test('a tool result execution-denied is written as output-error with its reason, or the default words', async () => {
    const agent = createFakeAgent({ turns: [{ toolCalls: [{ toolName: 'pick' }, { toolName: 'pick' }] }] });
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 'd', metadata: {} });
    const { session } = await readTurn(await sessions.send('d', { message: 'pick' }));
    const [one, two] = session.pendingInput.toolCalls;
    await readTurn(
      await sessions.continue('d', {
        toolResultContinuations: [
          { type: 'tool-result', toolCallId: one.toolCallId, toolName: 'pick', output: { type: 'execution-denied', reason: 'Not that one.' } },
          { type: 'tool-result', toolCallId: two.toolCallId, toolName: 'pick', output: { type: 'execution-denied' } },
        ],
      }),
    );
    const parts = (await sessions.get('d')).messages.at(-1).parts.filter((p) => p.type === 'tool-pick');
    assert.deepEqual(
      parts.map((p) => [p.state, p.errorText]),
      [
        ['output-error', 'Not that one.'],
        ['output-error', 'The tool call was denied.'],
      ],
    );
  });

  test('close() of an interrupted session closes it; of a closed one gives it back', async () => {
    const store = createMemorySessionStore();
    const first = testManager({ store });
    await first.sessions.create({ id: 'x', metadata: {} });
    await untilStatus(first.sessions, 'x', 'idle');
    // A second manager on the store takes the first one's live session for a crashed one's.
    const { sessions } = testManager({ store });
    await untilStatus(sessions, 'x', 'interrupted');
    const closed = await sessions.close('x');
    assert.equal(closed.status, 'closed');
    assert.equal(closed.error, undefined);
    assert.deepEqual(await sessions.close('x'), closed);
  });

  test('a turn cut by close() writes nothing itself: subscribers see busy then closed, done gives closed', async () => {
    const { sessions, events } = testManager({ fakeAgent: createFakeAgent({ turns: [{ waitForAbort: true }] }) });
    await sessions.create({ id: 'c', metadata: {} });
    await untilStatus(sessions, 'c', 'idle');
    const turn = await sessions.send('c', { message: 'hi' });
    const closing = sessions.close('c');
    const { session } = await readTurn(turn);
    await closing;
    assert.equal(session.status, 'closed');
    assert.equal(session.error, undefined);
    const statuses = events.filter((e) => e.type === 'updated' && e.session.id === 'c').map((e) => e.session.status);
    assert.deepEqual(statuses.slice(-2), ['busy', 'closed']);
  });
});
