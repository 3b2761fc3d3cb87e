// submissionId: the same id again, with the same message, finds the turn it started (live: as
// reconnect(); over: its recorded reply replayed) rather than starting another or being refused;
// the same id with another message is refused; ids are kept with the session, on SQLite across a
// restart.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { readUIMessageStream } from 'ai';
import { createSessionManager, createSqliteSessionStore, SessionConflictError } from '../index.js';
import { createDeferred, createFakeAgent, readTurn, streamAgent, testManager, testSandboxes } from './support/sessions.mjs';

const bytes = async (turn) => Buffer.from(await turn.toUIMessageStreamResponse().arrayBuffer());

/** Turns that say `count` words, the first waiting for `gate` half-way. */
function words(count, gate) {
  let calls = 0;
  const agent = streamAgent(async function* () {
    const first = calls++ === 0;
    yield { type: 'text-start', id: 't' };
    for (let i = 0; i < count; i++) {
      if (first && gate !== undefined && i === count / 2) await gate.promise;
      yield { type: 'text-delta', id: 't', delta: `w${i} ` };
    }
    yield { type: 'text-end', id: 't' };
    yield { type: 'finish', finishReason: 'stop' };
  });
  return agent;
}

async function lastMessage(stream) {
  let message;
  for await (const snapshot of readUIMessageStream({ stream })) message = snapshot;
  return message;
}

const streamCalls = (agent) => agent.calls.filter(([kind]) => kind === 'stream').length;

describe('submissionId', () => {
  test('retried while the turn runs: the same turn, the same bytes, one turn of the agent', async () => {
    const gate = createDeferred();
    const agent = words(200, gate);
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 's', metadata: {} });
    const message = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'go' }] };
    const first = await sessions.send('s', { message, submissionId: 'u1' });
    const again = await sessions.send('s', { message, submissionId: 'u1' });
    const reading = [bytes(first), bytes(again)];
    gate.resolve();
    const [a, b] = await Promise.all(reading);
    assert.equal(Buffer.compare(a, b), 0);
    assert.equal(streamCalls(agent), 1);
    assert.equal((await again.done).status, 'idle');
    assert.equal((await sessions.get('s')).messages.length, 2);
  });

  test('retried after the turn ended: its reply replayed, done the session as it is; another message refused', async () => {
    const agent = words(20);
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 's', metadata: {} });
    const message = { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'go' }] };
    const { message: first } = await readTurn(await sessions.send('s', { message, submissionId: 'u1' }));
    const again = await sessions.send('s', { message, submissionId: 'u1' });
    const replayed = await lastMessage(again.stream);
    assert.equal(replayed.id, first.id);
    assert.deepEqual(replayed.parts, first.parts);
    const session = await again.done;
    assert.equal(session.status, 'idle');
    assert.equal(session.messages, undefined, 'a summary');
    assert.equal(streamCalls(agent), 1);
    const changed = { ...message, parts: [{ type: 'text', text: 'something else' }] };
    await assert.rejects(sessions.send('s', { message: changed, submissionId: 'u1' }), (error) => SessionConflictError.isInstance(error));
    assert.equal((await sessions.get('s')).messages.length, 2);
    // Without a submissionId, nothing changes: a new turn.
    await readTurn(await sessions.send('s', { message }));
    assert.equal(streamCalls(agent), 2);
  });

  test('a changed message refused while the turn runs too', async () => {
    const gate = createDeferred();
    const { sessions } = testManager({ fakeAgent: words(10, gate) });
    await sessions.create({ id: 's', metadata: {} });
    const first = await sessions.send('s', { message: 'go', submissionId: 'x' });
    await assert.rejects(sessions.send('s', { message: 'stop', submissionId: 'x' }), (error) => SessionConflictError.isInstance(error));
    gate.resolve();
    await readTurn(first);
  });

  test('only the last 100 are kept', async () => {
    const agent = words(1);
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 's', metadata: {} });
    for (let i = 0; i < 101; i++) await readTurn(await sessions.send('s', { message: `m${i}`, submissionId: `id${i}` }));
    await readTurn(await sessions.send('s', { message: 'm100', submissionId: 'id100' }));
    assert.equal(streamCalls(agent), 101);
    await readTurn(await sessions.send('s', { message: 'm0', submissionId: 'id0' }));
    assert.equal(streamCalls(agent), 102, 'the oldest was forgotten: a new turn');
  });

  test('continue() retried after it ended: the continued reply replayed; other answers refused', async () => {
    const agent = createFakeAgent({ turns: [{ approvals: [{ toolName: 'bash', input: { command: 'ls' } }] }] });
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 'p', metadata: {} });
    const first = await readTurn(await sessions.send('p', { message: 'list' }));
    const approval = first.session.pendingInput.approvals[0];
    const answer = (approved) => [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved }];
    const second = await readTurn(await sessions.continue('p', { toolApprovalContinuations: answer(true), submissionId: 'c1' }));
    assert.equal(second.session.status, 'idle');
    const continued = () => agent.calls.filter((c) => c.method === 'continueStream').length;
    assert.equal(continued(), 1);
    const again = await sessions.continue('p', { toolApprovalContinuations: answer(true), submissionId: 'c1' });
    const replayed = await lastMessage(again.stream);
    const stored = (await sessions.get('p')).messages.at(-1);
    assert.equal(replayed.id, stored.id);
    assert.deepEqual(replayed.parts.map((p) => p.type), stored.parts.map((p) => p.type));
    assert.equal((await again.done).status, 'idle');
    assert.equal(continued(), 1, 'no second continuation');
    await assert.rejects(
      sessions.continue('p', { toolApprovalContinuations: answer(false), submissionId: 'c1' }),
      (error) => SessionConflictError.isInstance(error),
    );
  });

  test('a bad submissionId is refused', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 's', metadata: {} });
    for (const submissionId of ['', 5, 'x'.repeat(513)]) {
      await assert.rejects(sessions.send('s', { message: 'hi', submissionId }), { name: 'SessionInputError' });
    }
  });

  test('retried after a restart on the same SQLite file: recognised', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'hs-sub-')), 's.db');
    const agent = words(5);
    const first = createSessionManager({ agent: () => agent, sandboxes: testSandboxes(), store: createSqliteSessionStore({ path }) });
    await first.create({ id: 's', metadata: {} });
    const { message: reply } = await readTurn(await first.send('s', { message: 'go', submissionId: 'k' }));
    await first.shutdown();
    const second = createSessionManager({ agent: () => agent, sandboxes: testSandboxes(), store: createSqliteSessionStore({ path }) });
    try {
      const again = await second.send('s', { message: 'go', submissionId: 'k' });
      const replayed = await lastMessage(again.stream);
      assert.equal(replayed.id, reply.id);
      assert.deepEqual(replayed.parts, reply.parts);
      await again.done;
      assert.equal(streamCalls(agent), 1, 'no second turn');
      await assert.rejects(second.send('s', { message: 'other', submissionId: 'k' }), (error) => SessionConflictError.isInstance(error));
    } finally {
      await second.shutdown();
    }
  });
});
