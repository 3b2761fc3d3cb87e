// The last differences a program written for `ai-sdk-harness-sessions` 0.2.0 could see (issue
// 22), each case run on this package and on the reference itself when it is on this machine
// (`support/reference.mjs`): the same program, the same expectations, on both.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createFakeAgent, createFakeSandbox } from '../testing/index.mjs';
import { packages, referenceNote } from './support/reference.mjs';
import { until } from './support/sessions.mjs';

/** Sandboxes that hand every session the same fake sandbox. */
const plainSandboxes = () => ({
  async acquire() {
    return { sandboxSession: createFakeSandbox({}), async suspend() {}, async close() {} };
  },
});

/** Every chunk of a turn, and its `done`. */
async function read(turn) {
  const chunks = [];
  const reader = turn.stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
  }
  return { chunks, session: await turn.done };
}

/** A manager of package `api` with a session `id` ready for a message. */
async function ready(api, options, id = 's') {
  const errors = [];
  const sessions = api.createSessionManager({
    sandboxes: plainSandboxes(),
    onError: (error, context) => errors.push({ error, ...context }),
    ...options,
  });
  await sessions.create({ id, metadata: {} });
  await until(async () => (await sessions.get(id))?.status === 'idle');
  return { sessions, errors };
}

describe(`side by side with the reference (${referenceNote})`, () => {
  for (const { name, api } of packages) {
    describe(name, () => {
      test('a second shutdown() resolves and does nothing, during the first or after it', async () => {
        const log = [];
        const sessions = api.createSessionManager({
          agent: () => createFakeAgent(),
          sandboxes: { ...plainSandboxes(), shutdown: async () => log.push('shutdown') },
          onError: () => {},
        });
        await sessions.create({ id: 'a', metadata: {} });
        const first = sessions.shutdown();
        const during = sessions.shutdown();
        await Promise.all([first, during]);
        await sessions.shutdown();
        assert.deepEqual(log, ['shutdown']);
      });

      test("a sandboxPerSession() lease calls its sandbox at every call, in any order", async () => {
        const log = [];
        const sandbox = (id) => ({
          ...createFakeSandbox({}),
          stop: async () => log.push(`stop ${id}`),
          destroy: async () => log.push(`destroy ${id}`),
        });
        const strategy = api.sandboxPerSession({
          create: async (id) => (log.push(`create ${id}`), sandbox(id)),
          resume: async (id) => (log.push(`resume ${id}`), sandbox(id)),
        });
        const a = await strategy.acquire('a', { resume: false });
        await a.suspend();
        await a.close();
        const b = await strategy.acquire('b', { resume: false });
        await b.close();
        await b.suspend();
        await b.close();
        assert.deepEqual(log, ['create a', 'stop a', 'destroy a', 'create b', 'destroy b', 'stop b', 'destroy b']);
      });

      test('a sharedSandbox() lease gives its view back once, whichever of suspend() and close() come', async () => {
        const log = [];
        const shared = createFakeSandbox({});
        const strategy = api.sharedSandbox({
          ports: [4100],
          open: async () => ({
            ...shared,
            // A view of the same sandbox (the reference's strategy takes `fork()`'s answer as it is).
            fork: () => ({ ...shared, release: async () => log.push('release') }),
          }),
        });
        const a = await strategy.acquire('a', { resume: false });
        await Promise.all([a.suspend(), a.close()]);
        await a.close();
        assert.deepEqual(log, ['release']);
        // Its port is free again.
        const b = await strategy.acquire('b', { resume: false });
        await b.close();
        assert.deepEqual(log, ['release', 'release']);
      });

      for (const approves of [false, true]) {
        test(`approval requests come once their stream ended${approves ? ', then the answers approve gave' : ', without approve'}`, async () => {
          const agent = createFakeAgent({
            turns: [
              {
                text: 'before',
                approvals: [
                  { toolName: 'write', approvalId: 'ap1', toolCallId: 'c1' },
                  { toolName: 'read', approvalId: 'ap2', toolCallId: 'c2' },
                ],
              },
              { text: 'after' },
            ],
          });
          const continued = [];
          const watched = {
            createSession: (options) => agent.createSession(options),
            stream: (options) => agent.stream(options),
            continueStream: (options) => {
              continued.push(Object.keys(options).sort());
              return agent.continueStream(options);
            },
          };
          const { sessions } = await ready(api, {
            agent: () => watched,
            ...(approves ? { approve: async () => ({ approved: true }) } : {}),
          });
          const { chunks, session } = await read(await sessions.send('s', { message: 'go' }));
          const types = chunks.map((chunk) => chunk.type);
          const head = ['start', 'start-step', 'text-start', 'text-delta', 'text-end', 'tool-input-available', 'tool-input-available', 'finish-step', 'tool-approval-request', 'tool-approval-request'];
          if (approves) {
            assert.equal(session.status, 'idle');
            const responses = types.filter((type) => type === 'tool-approval-response');
            assert.ok(responses.length >= 2, types.join(' '));
            assert.deepEqual(types, [...head, ...responses, 'start-step', 'text-start', 'text-delta', 'text-end', 'finish-step', 'finish']);
            // Only the keys the reference passes: no `toolResultContinuations`.
            assert.deepEqual(continued, [['abortSignal', 'session', 'toolApprovalContinuations']]);
          } else {
            assert.equal(session.status, 'awaiting-input');
            assert.deepEqual(types, [...head, 'finish']);
            assert.deepEqual(continued, []);
          }
          await sessions.shutdown();
        });
      }

      test('a send() whose resume shutdown() cuts is refused, and never an unhandled rejection', async () => {
        const unhandled = [];
        const onUnhandled = (reason) => unhandled.push(reason);
        process.on('unhandledRejection', onUnhandled);
        try {
          // The message resumes a suspended session, slowly: the shutdown cuts the resume.
          const agent = createFakeAgent({ createSession: [{}, { delayMs: 100 }] });
          const { sessions } = await ready(api, { agent: () => agent }, 's1');
          await sessions.suspend('s1');
          const p = sessions.send('s1', { message: 'hello' });
          await until(async () => (await sessions.get('s1')).status === 'preparing');
          await sessions.shutdown();
          await assert.rejects(p, (error) => {
            assert.ok(api.SessionConflictError.isInstance(error), String(error));
            assert.equal(error.status, 'suspended');
            return true;
          });
          // A turn of the event loop for Node to report what was left without a handler.
          await new Promise((resolve) => setTimeout(resolve, 20));
          assert.deepEqual(unhandled, []);
        } finally {
          process.off('unhandledRejection', onUnhandled);
        }
      });

      test("a store's method replaced before the manager is made is called", async () => {
        const store = api.createMemorySessionStore();
        const failure = new Error('the disk is full');
        let saves = 0;
        const save = store.save;
        // The first write fails; the next ones are written (so that a shutdown has nothing to wait for).
        store.save = async (...args) => {
          saves += 1;
          if (saves === 1) throw failure;
          return save(...args);
        };
        const errors = [];
        const sessions = api.createSessionManager({
          agent: () => createFakeAgent(),
          sandboxes: plainSandboxes(),
          store,
          onError: (error, context) => errors.push({ error, ...context }),
        });
        await sessions.create({ id: 'w', metadata: {} });
        await until(() => saves > 0 && errors.some((e) => e.action === 'write'));
        assert.ok(errors.some((e) => e.action === 'write' && e.sessionId === 'w' && e.error === failure));
        await sessions.shutdown();
      });

      test('unknown fields of pendingInput are kept, at its level and in its entries', async () => {
        const store = api.createMemorySessionStore();
        const at = '2026-01-01T00:00:00.000Z';
        const pendingInput = {
          note: 'from the old app',
          approvals: [{ approvalId: 'ap1', toolCallId: 'c1', toolName: 'write', input: { path: 'x' }, asked: 'by me' }],
          toolCalls: [{ toolCallId: 'c2', toolName: 'pick', input: {}, why: 'a colour' }],
        };
        await store.save(
          {
            id: 'kept',
            status: 'suspended',
            metadata: { v: 1 },
            createdAt: at,
            updatedAt: at,
            turns: 1,
            usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
            pendingInput,
            messages: [],
          },
          { type: 'resume-session', harnessId: 'fake', specificationVersion: 'harness-v1', data: {} },
        );
        const sessions = api.createSessionManager({ agent: () => createFakeAgent(), sandboxes: plainSandboxes(), store, onError: () => {} });
        assert.deepEqual((await sessions.get('kept')).pendingInput, pendingInput);
        // Written again by the manager: still there.
        await sessions.update('kept', { metadata: { v: 2 } });
        assert.deepEqual((await store.get('kept')).pendingInput, pendingInput);
        assert.deepEqual((await sessions.get('kept')).pendingInput, pendingInput);
        await sessions.shutdown();
      });
    });
  }
});
