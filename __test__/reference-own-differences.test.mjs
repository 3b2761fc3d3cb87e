// What issue 22 found where the reference cannot answer (this package's own features, or where it
// deliberately differs, as the README's "Differences from ai-sdk-harness-sessions" says), run on
// this package only.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { toUIMessageStream } from 'ai';
import { createMemorySessionStore, createSqliteSessionStore } from '../index.js';
import { createFakeSandbox } from '../testing/index.mjs';
import { createDeferred, createFakeAgent, readTurn, sleep, streamAgent, testManager, untilStatus } from './support/sessions.mjs';

const folder = mkdtempSync(join(tmpdir(), 'hs-own-differences-'));
after(() => rmSync(folder, { recursive: true, force: true }));

/**
 * An agent through `ai`'s own `toUIMessageStream`, whose turn opens a reasoning part and a text
 * part, then waits for its signal: aborted, the stream ends with the signal's reason as an error
 * (`error`) or with an `abort` chunk (`abort`).
 */
function openPartsAgent(ending) {
  const session = {
    hasUnfinishedTurn: () => false,
    stop: async () => ({ type: 'resume-session', harnessId: 'open', specificationVersion: 'harness-v1', data: {} }),
    destroy: async () => {},
  };
  return {
    createSession: async () => session,
    stream: async ({ abortSignal }) => {
      let controller;
      const parts = new ReadableStream({ start: (opened) => void (controller = opened) });
      for (const part of [
        { type: 'start' },
        { type: 'start-step', request: {}, warnings: [] },
        { type: 'reasoning-start', id: 'r1' },
        { type: 'reasoning-delta', id: 'r1', text: 'thinking' },
        { type: 'text-start', id: 't1' },
        { type: 'text-delta', id: 't1', text: 'hello' },
      ]) {
        controller.enqueue(part);
      }
      abortSignal.addEventListener('abort', () => {
        controller.enqueue(ending === 'error' ? { type: 'error', error: abortSignal.reason } : { type: 'abort', reason: abortSignal.reason?.message });
        controller.close();
      });
      return {
        totalUsage: Promise.resolve({ inputTokens: 1, outputTokens: 1, totalTokens: 2 }),
        toUIMessageStream: (options = {}) => toUIMessageStream({ stream: parts, ...options }),
      };
    },
    continueStream: async () => {
      throw new Error('nothing to continue');
    },
  };
}

describe("a turn cut by the caller's abortSignal", () => {
  for (const ending of ['error', 'abort']) {
    test(`is stored with its open parts closed (the stream ending with ${ending === 'error' ? 'the reason as an error' : 'an abort chunk'})`, async () => {
      const { sessions } = testManager({ fakeAgent: openPartsAgent(ending) });
      await sessions.create({ id: 'a', metadata: {} });
      await untilStatus(sessions, 'a', 'idle');
      const abort = new AbortController();
      const turn = await sessions.send('a', { message: 'go', abortSignal: abort.signal });
      const reading = readTurn(turn);
      await untilStatus(sessions, 'a', 'busy');
      await sleep(20);
      abort.abort(new Error('stopped by the user'));
      const { session } = await reading;
      assert.equal(session.status, 'idle');
      const reply = (await sessions.get('a')).messages.at(-1);
      assert.equal(reply.role, 'assistant');
      assert.deepEqual(
        reply.parts.filter((part) => part.type === 'reasoning' || part.type === 'text').map((part) => [part.type, part.text, part.state]),
        [
          ['reasoning', 'thinking', 'done'],
          ['text', 'hello', 'done'],
        ],
      );
    });
  }
});

describe('limits.timeoutMs', () => {
  test('replaces a shorter turnTimeoutMs: the turn is not cut', async () => {
    const held = createDeferred();
    const agent = createFakeAgent({ turns: [{ text: 'all of it', hold: held.promise }] });
    const { sessions } = testManager({ fakeAgent: agent, turnTimeoutMs: 30 });
    await sessions.create({ id: 't', metadata: {} });
    const turn = await sessions.send('t', { message: 'go', limits: { timeoutMs: 60_000 } });
    const reading = readTurn(turn);
    await sleep(200);
    held.resolve();
    const { session, message } = await reading;
    assert.equal(session.error, undefined);
    assert.equal(session.status, 'idle');
    assert.ok(message.parts.some((part) => part.type === 'text' && part.text === 'all of it'), JSON.stringify(message));
  });

  test('replaces a longer turnTimeoutMs: the turn is cut at it', async () => {
    const agent = createFakeAgent({ turns: [{ text: 'never', hold: new Promise(() => {}) }] });
    const { sessions } = testManager({ fakeAgent: agent, turnTimeoutMs: 60_000 });
    await sessions.create({ id: 't', metadata: {} });
    const { session } = await readTurn(await sessions.send('t', { message: 'go', limits: { timeoutMs: 30 } }));
    assert.equal(session.error, 'The turn took too long.');
  });
});

describe('a store whose save() keeps failing, at shutdown()', () => {
  test('is tried again backing off, alone, and each failure is reported once', async () => {
    const inner = createMemorySessionStore();
    let failing = false;
    let saves = 0;
    const store = {
      save: async (record, resumeState) => {
        if (!failing) return inner.save(record, resumeState);
        saves += 1;
        throw new Error('the disk is full');
      },
      get: (id) => inner.get(id),
      list: () => inner.list(),
      getResumeState: (id) => inner.getResumeState(id),
      delete: (id) => inner.delete(id),
    };
    // windDownMs bounds the shutdown's wait for the store: 1 s here, 10 s by default.
    const { sessions, errors } = testManager({ store, windDownMs: 1_000 });
    await sessions.create({ id: 'w', metadata: {} });
    await untilStatus(sessions, 'w', 'idle');
    failing = true;
    await sessions.shutdown();
    // The suspension's write, then the shutdown's tries 50 ms apart doubling (0, 50, 150, 350,
    // 750 ms): a handful, not one every few hundred milliseconds, nor a second caller at once.
    assert.ok(saves >= 2 && saves <= 8, `save() called ${saves} times`);
    const writes = errors.filter((e) => e.action === 'write');
    // The write that failed, once; then what the shutdown could not write, once.
    assert.equal(writes.length, 2, writes.map((e) => e.error.message).join('\n'));
    assert.match(writes[1].error.message, /could not be written before the shutdown/);
  });
});

describe("a native store's methods", () => {
  test('replaced after createSessionManager() are not seen: read once, as the README says', async () => {
    const store = createMemorySessionStore();
    const { sessions, errors } = testManager({ store });
    let called = 0;
    store.save = async () => {
      called += 1;
      throw new Error('not called');
    };
    await sessions.create({ id: 'n', metadata: {} });
    await untilStatus(sessions, 'n', 'idle');
    assert.equal(called, 0);
    assert.deepEqual(errors, []);
  });
});

describe('a submissionId sent three times at the same moment', () => {
  /** A turn of `deltas` text deltas, a macrotask apart. */
  const longTurn = (deltas) =>
    streamAgent(async function* () {
      yield { type: 'start-step' };
      yield { type: 'text-start', id: 't' };
      for (let i = 0; i < deltas; i += 1) {
        await new Promise((resolve) => setImmediate(resolve));
        yield { type: 'text-delta', id: 't', delta: `${i} ` };
      }
      yield { type: 'text-end', id: 't' };
      yield { type: 'finish-step' };
      yield { type: 'finish', finishReason: 'stop' };
    });
  const expected = Array.from({ length: 100 }, (_, i) => `${i} `).join('');

  for (const kind of ['memory', 'sqlite']) {
    test(`gives every caller the live turn (${kind} store, 30 rounds)`, async () => {
      const store = kind === 'memory' ? createMemorySessionStore() : createSqliteSessionStore({ path: join(folder, 'three.sqlite') });
      const { sessions } = testManager({ fakeAgent: longTurn(100), store });
      for (let round = 0; round < 30; round += 1) {
        const id = `r${round}`;
        await sessions.create({ id, metadata: {} });
        await untilStatus(sessions, id, 'idle');
        const sent = await Promise.all(
          [0, 1, 2].map(
            () =>
              new Promise((resolve, reject) => {
                setTimeout(() => sessions.send(id, { message: 'same', submissionId: 'once' }).then(resolve, reject), 0);
              }),
          ),
        );
        const read = await Promise.all(sent.map((turn) => readTurn(turn)));
        for (const [caller, { session, message, chunks }] of read.entries()) {
          const where = `round ${round}, caller ${caller}: ${chunks.length} chunks`;
          assert.equal(session.status, 'idle', where);
          assert.equal(chunks.at(-1)?.type, 'finish', where);
          const text = message.parts.filter((part) => part.type === 'text').map((part) => part.text).join('');
          assert.equal(text, expected, where);
        }
        const record = await sessions.get(id);
        assert.equal(record.turns, 1, 'one turn for the three');
      }
    });
  }
});
