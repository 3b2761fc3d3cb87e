// A harness whose resume state needs a live process, as Claude Code's and Codex's do: the bridge a
// session runs on, left running by stop() during an unfinished turn and stopped by the suspension.
// With the real HarnessAgent on the scripted harness with `bridge`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createMemorySessionStore, createSessionManager } from '../index.js';
import { forkingSandboxes, scriptedAgent } from './support/harness.mjs';
import { readTurn } from './support/sessions.mjs';

const TOLD = 'The session was suspended while you waited for my answers. Here they are; carry on from there:';

/** Sandboxes whose suspension stops the processes in the sandbox: the session's bridge. */
function stoppingSandboxes(harness) {
  const base = forkingSandboxes();
  return {
    ...base,
    async acquire(sessionId, options) {
      const lease = await base.acquire(sessionId, options);
      return {
        ...lease,
        async suspend() {
          harness.stopBridges(sessionId);
          await lease.suspend();
        },
      };
    },
  };
}

function bridgeManager({ startupTimeoutMs } = {}) {
  const { agent, harness } = scriptedAgent({ bridge: startupTimeoutMs === undefined ? {} : { startupTimeoutMs } });
  const store = createMemorySessionStore();
  const sandboxes = stoppingSandboxes(harness);
  const errors = [];
  const sessions = createSessionManager({
    agent: () => agent,
    sandboxes,
    store,
    onError: (error, context) => errors.push({ error, ...context }),
  });
  return { sessions, agent, harness, store, sandboxes, errors };
}

describe('a bridge-backed harness, suspended while an approval waits', () => {
  // The bridge's startup timeout is Claude Code's two minutes: a resume that waited for the
  // stopped bridge would outlast the test's timeout by far.
  test('answered after the suspension: resumed at once on a new bridge, the agent told the answers in words', { timeout: 60_000 }, async () => {
    const { sessions, harness, store, errors } = bridgeManager();
    await sessions.create({ id: 'b', metadata: {} });
    const first = await readTurn(await sessions.send('b', { message: 'write later.txt: after a nap' }));
    assert.equal(first.session.status, 'awaiting-input');
    await sessions.suspend('b');
    const kept = await store.getResumeState('b');
    assert.ok(kept.continueFrom, 'the store keeps the paused turn');
    assert.ok(kept.data.bridge, 'and the bridge it ran on');
    const [approval] = (await sessions.get('b')).pendingInput.approvals;

    const second = await readTurn(
      await sessions.continue('b', {
        toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved: true }],
      }),
    );

    assert.equal(second.session.status, 'idle');
    assert.equal(second.session.error, undefined);
    assert.deepEqual(
      harness.calls.filter((c) => c.method === 'bridgeWait'),
      [],
      'nothing waited for the bridge the suspension stopped',
    );
    const prompt = harness.calls.filter((c) => c.method === 'doPromptTurn').at(-1).detail.prompt;
    assert.equal(prompt, `${TOLD}\n- I approve write ${JSON.stringify(approval.input)}`);
    assert.equal(second.chunks[0].messageId, first.message.id, 'the reply continues the paused message');
    assert.deepEqual(errors, []);
    await sessions.shutdown();
  });

  test('the harness models the failure: resumed with the stale bridge, it waits for it and loses the turn', { timeout: 60_000 }, async () => {
    const { sessions, agent, harness, store, sandboxes } = bridgeManager({ startupTimeoutMs: 20 });
    await sessions.create({ id: 'm', metadata: {} });
    await readTurn(await sessions.send('m', { message: 'write later.txt: after a nap' }));
    await sessions.suspend('m');
    const kept = await store.getResumeState('m');
    const lease = await sandboxes.acquire('m', { resume: true });
    const session = await agent.createSession({ sessionId: 'm', sandboxSession: lease.sandboxSession, resumeFrom: kept });
    assert.deepEqual(
      harness.calls.filter((c) => c.method === 'bridgeWait').map((c) => c.detail.url),
      [kept.data.bridge.url],
    );
    await session.destroy();
    await lease.close();
    await sessions.shutdown();
  });
});
