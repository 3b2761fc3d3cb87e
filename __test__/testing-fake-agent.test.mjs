// The fake agent of `testing/`: its sessions keep the rules of HarnessAgent's, its turns follow
// their script, and its streams honour the options of `toUIMessageStream` as `ai` does.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { createDeferred, createFakeAgent } from '../testing/index.mjs';

async function chunksOf(result, options = { generateMessageId: () => 'assistant-1' }) {
  const chunks = [];
  for await (const chunk of result.toUIMessageStream(options)) chunks.push(chunk);
  return chunks;
}

const typesOf = (chunks) => chunks.map((chunk) => chunk.type);
const textOf = (chunks) =>
  chunks
    .filter((chunk) => chunk.type === 'text-delta')
    .map((chunk) => chunk.delta)
    .join('');
/** Whether `promise` is still pending after the tasks queued so far ran. */
const isPending = async (promise) => {
  const marker = Symbol('pending');
  return (await Promise.race([promise.then(() => 'settled', () => 'settled'), new Promise((resolve) => setTimeout(resolve, 10, marker))])) === marker;
};

describe('createFakeAgent', () => {
  it('answers a prompt by default, and records the calls', async () => {
    const agent = createFakeAgent();
    const sandboxSession = { id: 'box' };
    const session = await agent.createSession({ sessionId: 'chat-1', sandboxSession });
    const result = await agent.stream({ session, prompt: 'hello' });

    assert.deepEqual(await chunksOf(result), [
      { type: 'start', messageId: 'assistant-1' },
      { type: 'start-step' },
      { type: 'text-start', id: 'text-1' },
      { type: 'text-delta', id: 'text-1', delta: 'You said: hello' },
      { type: 'text-end', id: 'text-1' },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'stop' },
    ]);
    assert.equal((await result.totalUsage).totalTokens, 3);
    assert.equal(session.sandboxSession, sandboxSession);
    assert.deepEqual(
      agent.calls.map(({ method, sessionId }) => [method, sessionId]),
      [
        ['createSession', 'chat-1'],
        ['stream', 'chat-1'],
      ],
    );
    assert.equal(agent.calls[1].options.prompt, 'hello');
  });

  it('honours the options of toUIMessageStream as ai does', async () => {
    const agent = createFakeAgent({ turns: [{ error: new Error('secret detail') }] });
    const session = await agent.createSession();
    const failed = await agent.stream({ session, prompt: 'x' });
    const assistant = { id: 'assistant-0', role: 'assistant', parts: [] };

    assert.deepEqual((await chunksOf(failed, {})).at(0), { type: 'start' });
    assert.deepEqual((await chunksOf(failed, { originalMessages: [assistant] })).at(0), { type: 'start', messageId: 'assistant-0' });
    assert.deepEqual((await chunksOf(failed)).at(-1), { type: 'error', errorText: 'An error occurred.' });
    assert.deepEqual((await chunksOf(failed, { onError: (error) => error.message })).at(-1), { type: 'error', errorText: 'secret detail' });
    const bare = typesOf(await chunksOf(await agent.stream({ session, prompt: 'y' }), { sendStart: false, sendFinish: false }));
    assert.deepEqual(bare, ['start-step', 'text-start', 'text-delta', 'text-end', 'finish-step']);
  });

  it('calls onEnd with the response message', async () => {
    const agent = createFakeAgent({ turns: [{ text: 'hi', reasoning: 'hmm' }] });
    const session = await agent.createSession();
    let ended;
    await chunksOf(await agent.stream({ session, prompt: 'x' }), { generateMessageId: () => 'a1', onEnd: (event) => (ended = event) });
    assert.equal(ended.responseMessage.id, 'a1');
    assert.deepEqual(
      ended.responseMessage.parts.map((part) => [part.type, part.text]),
      [
        ['step-start', undefined],
        ['reasoning', 'hmm'],
        ['text', 'hi'],
      ],
    );
  });

  it('leaves the turn unfinished on approvals, until continueStream answers them', async () => {
    const agent = createFakeAgent({ turns: [{ text: '', approvals: [{ toolName: 'bash', input: { command: 'ls' }, approvalId: 'ap-1', toolCallId: 'call-1' }] }] });
    const session = await agent.createSession({ sessionId: 'chat-1' });
    const paused = await chunksOf(await agent.stream({ session, prompt: 'list' }));

    assert.deepEqual(paused.slice(2), [
      { type: 'tool-input-available', toolCallId: 'call-1', toolName: 'bash', input: { command: 'ls' } },
      { type: 'tool-approval-request', approvalId: 'ap-1', toolCallId: 'call-1' },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'tool-calls' },
    ]);
    assert.equal(session.hasUnfinishedTurn(), true);
    await assert.rejects(agent.stream({ session, prompt: 'again' }), {
      message: 'Harness session chat-1 has an unfinished turn and must be continued before accepting a new prompt.',
    });

    const continued = await chunksOf(
      await agent.continueStream({ session, toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: 'ap-1', approved: false, reason: 'no' }] }),
    );
    assert.deepEqual(continued[1], { type: 'tool-approval-response', approvalId: 'ap-1', approved: false, reason: 'no' });
    assert.equal(textOf(continued), 'Continued.');
    assert.equal(session.hasUnfinishedTurn(), false);
    await assert.rejects(agent.continueStream({ session }), { message: 'Harness session chat-1 has no unfinished turn to continue.' });
  });

  it('waits for the results of tool calls', async () => {
    const agent = createFakeAgent({ turns: [{ toolCalls: [{ toolName: 'askUserQuestions', toolCallId: 'q-1' }] }, { text: 'Thanks.' }] });
    const session = await agent.createSession();
    const paused = await chunksOf(await agent.stream({ session, prompt: 'ask me' }));
    assert.equal(paused.at(-1).finishReason, 'tool-calls');
    assert.deepEqual(session.pending.toolCalls, [{ toolCallId: 'q-1', toolName: 'askUserQuestions', input: '{}' }]);

    const result = { type: 'tool-result', toolCallId: 'q-1', toolName: 'askUserQuestions', output: { type: 'json', value: {} } };
    assert.equal(textOf(await chunksOf(await agent.continueStream({ session, toolResultContinuations: [result] }))), 'Thanks.');
    assert.deepEqual(agent.calls.at(-1).options.toolResultContinuations, [result]);
  });

  it('stops a session into a JSON resume state that a new session resumes from', async () => {
    const agent = createFakeAgent({ turns: [{}, { approvals: [{ toolName: 'write', approvalId: 'ap-1', toolCallId: 'call-1' }] }] });
    const session = await agent.createSession({ sessionId: 'chat-1' });
    await chunksOf(await agent.stream({ session, prompt: 'one' }));
    await chunksOf(await agent.stream({ session, prompt: 'two' }));
    const state = JSON.parse(JSON.stringify(await session.stop()));

    assert.deepEqual(state, {
      type: 'resume-session',
      harnessId: 'fake',
      specificationVersion: 'harness-v1',
      data: { sessionId: 'chat-1', prompts: ['one', 'two'] },
      continueFrom: {
        type: 'continue-turn',
        harnessId: 'fake',
        specificationVersion: 'harness-v1',
        data: { sessionId: 'chat-1', prompts: ['one', 'two'] },
        pendingToolApprovals: [{ approvalId: 'ap-1', toolCallId: 'call-1', toolName: 'write', input: '{}', kind: 'custom', providerExecuted: false }],
      },
    });
    await assert.rejects(agent.stream({ session, prompt: 'three' }), { message: 'Harness session chat-1 has ended and cannot be reused.' });
    await assert.rejects(session.stop(), { message: 'Harness session chat-1 is not active and cannot be stopped.' });

    const resumed = await agent.createSession({ sessionId: 'chat-1', resumeFrom: state });
    assert.equal(resumed.isResume, true);
    assert.deepEqual(resumed.prompts, ['one', 'two']);
    assert.equal(resumed.hasUnfinishedTurn(), true);
    const continued = await chunksOf(
      await agent.continueStream({ session: resumed, toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: 'ap-1', approved: true }] }),
    );
    assert.deepEqual(typesOf(continued).slice(0, 2), ['start', 'tool-approval-response']);
  });

  it('detaches an idle session without continueFrom, and refuses the state of another harness', async () => {
    const agent = createFakeAgent();
    const session = await agent.createSession({ sessionId: 'chat-1' });
    const state = await session.detach();
    assert.equal(state.continueFrom, undefined);
    assert.equal(session.state, 'detached');
    await assert.rejects(agent.createSession({ resumeFrom: { ...state, harnessId: 'claude-code' } }), /produced by harness 'claude-code'/);
  });

  it('holds a turn until released, refusing a second one meanwhile', async () => {
    const gate = createDeferred();
    const agent = createFakeAgent({ turns: [{ hold: gate.promise, text: 'done' }] });
    const session = await agent.createSession({ sessionId: 'chat-1' });
    const chunks = chunksOf(await agent.stream({ session, prompt: 'slow' }));

    assert.equal(await isPending(chunks), true);
    await assert.rejects(agent.stream({ session, prompt: 'again' }), { message: 'Harness session chat-1 already has a turn in progress.' });
    gate.resolve();
    assert.equal(textOf(await chunks), 'done');
    assert.equal(session.hasUnfinishedTurn(), false);
  });

  it('ends a turn with an abort chunk when its signal aborts, the session reusable', async () => {
    const agent = createFakeAgent({ turns: [{ waitForAbort: true }] });
    const session = await agent.createSession();
    const controller = new AbortController();
    const result = await agent.stream({ session, prompt: 'forever', abortSignal: controller.signal });
    const chunks = chunksOf(result);
    controller.abort(new Error('stop'));

    assert.deepEqual(await chunks, [{ type: 'start', messageId: 'assistant-1' }, { type: 'abort', reason: 'Error: stop' }]);
    await assert.rejects(result.totalUsage, { message: 'stop' });
    assert.equal(textOf(await chunksOf(await agent.stream({ session, prompt: 'next' }))), 'You said: next');
  });

  it('fails the calls its script fails, and makes them wait', async () => {
    const gate = createDeferred();
    const agent = createFakeAgent({
      createSession: [{ fail: new Error('no sandbox') }, { gate: gate.promise }],
      turns: [{ fail: new Error('refused') }],
      stop: [{ delayMs: 20, fail: new Error('stuck') }],
    });
    await assert.rejects(agent.createSession(), { message: 'no sandbox' });
    const opening = agent.createSession({ sessionId: 'chat-2' });
    assert.equal(await isPending(opening), true);
    gate.resolve();
    const session = await opening;

    await assert.rejects(agent.stream({ session, prompt: 'x' }), { message: 'refused' });
    assert.equal(session.hasUnfinishedTurn(), false, 'a refused turn leaves the session as it was');
    await assert.rejects(session.stop(), { message: 'stuck' });
    assert.equal(session.state, 'stopped', 'the handle is dead all the same');
    assert.deepEqual(agent.sessions, [session]);
  });

  it('rejects a waiting createSession when its signal aborts', async () => {
    const agent = createFakeAgent({ createSession: [{ gate: new Promise(() => {}) }] });
    const controller = new AbortController();
    const opening = agent.createSession({ abortSignal: controller.signal });
    controller.abort(new Error('shutdown'));
    await assert.rejects(opening, { message: 'shutdown' });
  });

  it('ends a turn under way with a finish when the session stops, and an error when it is destroyed', async () => {
    const agent = createFakeAgent({ turns: [{ waitForAbort: true }, { waitForAbort: true }] });
    const first = await agent.createSession({ sessionId: 'chat-1' });
    const stopped = chunksOf(await agent.stream({ session: first, prompt: 'x' }));
    const state = await first.stop();
    assert.deepEqual((await stopped).at(-1), { type: 'finish', finishReason: 'other' });
    assert.deepEqual(state.continueFrom, { type: 'continue-turn', harnessId: 'fake', specificationVersion: 'harness-v1', data: { sessionId: 'chat-1', prompts: ['x'] } });

    const second = await agent.createSession({ sessionId: 'chat-2' });
    const destroyed = chunksOf(await agent.stream({ session: second, prompt: 'y' }), { onError: (error) => error.message });
    await second.destroy();
    assert.deepEqual((await destroyed).at(-1), { type: 'error', errorText: 'Harness session chat-2 was destroyed.' });
  });

  it('suspends an unfinished turn, and refuses to suspend an idle session', async () => {
    const agent = createFakeAgent({ turns: [{ toolCalls: [{ toolName: 'lookup', toolCallId: 'call-1' }] }] });
    const session = await agent.createSession({ sessionId: 'chat-1' });
    await assert.rejects(session.suspendTurn(), { message: 'Harness session chat-1 has no unfinished turn to suspend.' });
    await chunksOf(await agent.stream({ session, prompt: 'x' }));
    const state = await session.suspendTurn();
    assert.equal(state.type, 'continue-turn');
    assert.deepEqual(state.pendingToolResults, [{ toolCallId: 'call-1', toolName: 'lookup', input: '{}' }]);
    assert.equal(session.state, 'detached');
  });

  it('gives the usage of its script, and a stream that can be read twice', async () => {
    const agent = createFakeAgent({ turns: [{ usage: { inputTokens: 10, totalTokens: 12 } }] });
    const session = await agent.createSession();
    const result = await agent.stream({ session, prompt: 'x' });
    assert.deepEqual(await chunksOf(result), await chunksOf(result));
    const usage = await result.totalUsage;
    assert.equal(usage.inputTokens, 10);
    assert.equal(usage.outputTokens, 2);
    assert.equal(usage.totalTokens, 12);
  });

  it('takes turns pushed to its script after it was made', async () => {
    const agent = createFakeAgent();
    agent.script.turns.push({ text: 'pushed' });
    const session = await agent.createSession();
    assert.equal(textOf(await chunksOf(await agent.stream({ session, prompt: 'x' }))), 'pushed');
    assert.equal(textOf(await chunksOf(await agent.stream({ session, prompt: 'y' }))), 'You said: y');
  });
});
