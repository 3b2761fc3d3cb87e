// A turn the agent refuses (its stream() rejects before giving a stream) crosses the boundary
// once: the host's `session.turn` answers with the refusal as data (the error kept in JavaScript,
// and whether the harness session still has an unfinished turn), the engine settles the session
// without asking anything more, sends nothing to the turn's client (its caller drops it), and
// send() rejects with the agent's very error, translated once (js/errors.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { createSessionManager, SessionError } from '../index.js';
import { testSandboxes, untilStatus } from './support/sessions.mjs';

const native = createRequire(import.meta.url)('../js/native.js');

/** Runs `f` with every host operation the managers it makes ask of JavaScript recorded in `ops`. */
async function recordingHostOps(f) {
  const Original = native.NativeManager;
  const ops = [];
  native.NativeManager = function (host, ...rest) {
    const recording = (call) => {
      ops.push(JSON.parse(call).op);
      return host(call);
    };
    return new Original(recording, ...rest);
  };
  try {
    return await f(ops);
  } finally {
    native.NativeManager = Original;
  }
}

/** An agent whose stream() rejects with `refusal`; `unfinished()` is its sessions' `hasUnfinishedTurn`. */
function refusingAgent(refusal, unfinished) {
  const asked = { unfinished: 0 };
  const agent = {
    async createSession() {
      return {
        hasUnfinishedTurn: () => {
          asked.unfinished += 1;
          return unfinished();
        },
        async stop() {
          return {};
        },
        async destroy() {},
      };
    },
    async stream() {
      throw refusal;
    },
    async continueStream() {
      throw refusal;
    },
  };
  return { agent, asked };
}

test('a refused turn crosses once: no session.unfinished, nothing for its client, the very error', async () => {
  await recordingHostOps(async (ops) => {
    const refusal = new Error('the model is down');
    const { agent, asked } = refusingAgent(refusal, () => false);
    const sessions = createSessionManager({ agent: () => agent, sandboxes: testSandboxes(), onError: () => {} });
    try {
      await sessions.create({ id: 's', metadata: {} });
      await untilStatus(sessions, 's', 'idle');
      ops.length = 0;
      asked.unfinished = 0;
      await assert.rejects(sessions.send('s', { message: 'hi' }), (error) => error === refusal);
      const session = await sessions.get('s');
      assert.equal(session.status, 'idle');
      assert.equal(session.error, 'the model is down');
      assert.equal(session.turns, 0);
      assert.deepEqual(
        ops.filter((op) => op !== 'event'),
        ['session.turn'],
        `the host was asked: ${ops.join(', ')}`,
      );
      assert.equal(asked.unfinished, 1, 'hasUnfinishedTurn() asked once');
    } finally {
      await sessions.shutdown();
    }
  });
});

test('a refused turn that leaves an unfinished one settles awaiting-input, from the refusal alone', async () => {
  await recordingHostOps(async (ops) => {
    const refusal = new Error('continueStream failed');
    let unfinished = false;
    const { agent } = refusingAgent(refusal, () => unfinished);
    const sessions = createSessionManager({ agent: () => agent, sandboxes: testSandboxes(), onError: () => {} });
    try {
      await sessions.create({ id: 'u', metadata: {} });
      await untilStatus(sessions, 'u', 'idle');
      unfinished = true;
      ops.length = 0;
      await assert.rejects(sessions.send('u', { message: 'hi' }), (error) => error === refusal);
      assert.equal((await sessions.get('u')).status, 'awaiting-input');
      assert.ok(!ops.includes('session.unfinished'), ops.join(', '));
    } finally {
      await sessions.shutdown();
    }
  });
});

test('when hasUnfinishedTurn() throws, the engine asks again and reports what it throws', async () => {
  await recordingHostOps(async (ops) => {
    const refusal = new Error('refused');
    const broken = new Error('hasUnfinishedTurn broke');
    const { agent } = refusingAgent(refusal, () => {
      throw broken;
    });
    const errors = [];
    const sessions = createSessionManager({ agent: () => agent, sandboxes: testSandboxes(), onError: (error, context) => errors.push({ error, ...context }) });
    try {
      await sessions.create({ id: 'b', metadata: {} });
      await untilStatus(sessions, 'b', 'idle');
      ops.length = 0;
      await assert.rejects(sessions.send('b', { message: 'hi' }), (error) => error === refusal);
      assert.ok(ops.includes('session.unfinished'), ops.join(', '));
      assert.equal((await sessions.get('b')).status, 'idle');
      assert.ok(errors.some((e) => e.action === 'turn' && e.error === broken), errors.map((e) => `${e.action}: ${e.error}`).join('; '));
    } finally {
      await sessions.shutdown();
    }
  });
});

test('an error that is not an Error crosses as itself too', async () => {
  const refusal = { reason: 'not an Error' };
  const { agent } = refusingAgent(refusal, () => false);
  const sessions = createSessionManager({ agent: () => agent, sandboxes: testSandboxes(), onError: () => {} });
  try {
    await sessions.create({ id: 'n', metadata: {} });
    await untilStatus(sessions, 'n', 'idle');
    await assert.rejects(sessions.send('n', { message: 'hi' }), (error) => error === refusal && !SessionError.isInstance(error));
  } finally {
    await sessions.shutdown();
  }
});
