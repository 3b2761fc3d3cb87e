// Per-turn guidance (instructionAddendum) and limits (maxSteps, timeoutMs) of send() and
// continue(), with the fake agent and with the real HarnessAgent on the scripted harness (on a fake,
// a local and a Docker sandbox): the
// addendum reaches the agent with the prompt (and with the words a resumed turn is told), is kept
// with the reply and not as the user's words; the bounds at and one past; maxSteps cutting a turn;
// timeoutMs overriding turnTimeoutMs.
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { SessionInputError } from '../index.js';
import { createSessionManager, dockerSandbox, localSandbox, sharedSandbox } from '../index.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dockerHost, dockerSkipFor, image, removeContainers } from './support/docker.mjs';
import { forkingSandboxes, scriptedAgent } from './support/harness.mjs';
import { createFakeAgent, readTurn, streamAgent, testManager, untilStatus } from './support/sessions.mjs';

const textOf = (message) =>
  message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
const promptsOf = (agent) => agent.calls.filter((c) => c.method === 'stream').map((c) => c.options.prompt);
const step = (n) => [
  { type: 'finish-step', finishReason: 'stop', rawFinishReason: undefined, usage: {} },
  { type: 'start-step', request: {}, warnings: [] },
  { type: 'text-start', id: `t${n}` },
  { type: 'text-delta', id: `t${n}`, text: `step ${n} ` },
  { type: 'text-end', id: `t${n}` },
];
/** A turn of `count` steps (the fake agent opens the first itself). */
const steps = (count, more = {}) => ({ text: 'step 1 ', parts: Array.from({ length: count - 1 }, (_, i) => step(i + 2)).flat(), ...more });

async function refused(promise, path) {
  await assert.rejects(promise, (error) => {
    assert.ok(SessionInputError.isInstance(error), String(error));
    if (path !== undefined) assert.equal(error.path, path);
    return true;
  });
}

describe('instructionAddendum (fake agent)', () => {
  test('reaches the agent with the prompt, kept with the reply, not as the user message', async () => {
    const { sessions, agent } = testManager();
    await sessions.create({ id: 'a', metadata: {} });
    const { message } = await readTurn(await sessions.send('a', { message: 'hello', instructionAddendum: 'Answer in French.' }));
    const [prompt] = promptsOf(agent);
    assert.match(prompt, /^hello\n\n/);
    assert.match(prompt, /Answer in French\./);
    const record = await sessions.get('a');
    assert.deepEqual(record.messages[0].parts, [{ type: 'text', text: 'hello' }]);
    assert.equal(JSON.stringify(record.messages[0]).includes('French'), false, 'not in the user message');
    assert.deepEqual(record.messages[1].metadata, { instructionAddendum: 'Answer in French.' });
    assert.equal(message.id, record.messages[1].id);
    // The next turn has none.
    await readTurn(await sessions.send('a', { message: 'again' }));
    assert.equal(promptsOf(agent)[1], 'again');
  });

  test('at most 32,000 UTF-8 bytes and no NUL; a refused one changes nothing', async () => {
    const { sessions, agent } = testManager();
    await sessions.create({ id: 'b', metadata: {} });
    await untilStatus(sessions, 'b', 'idle');
    const at = 'é'.repeat(16_000);
    await refused(sessions.send('b', { message: 'x', instructionAddendum: `${at}a` }), 'instructionAddendum');
    await refused(sessions.send('b', { message: 'x', instructionAddendum: 'a\0b' }), 'instructionAddendum');
    await refused(sessions.send('b', { message: 'x', instructionAddendum: 3 }), 'instructionAddendum');
    assert.deepEqual((await sessions.get('b')).messages, []);
    assert.equal((await sessions.get('b')).status, 'idle');
    await readTurn(await sessions.send('b', { message: 'x', instructionAddendum: at }));
    assert.ok(promptsOf(agent)[0].includes(at));
  });

  test('accompanies the words a resumed turn is told (continue())', async () => {
    const fake = createFakeAgent({ turns: [{ approvals: [{ toolName: 'bash', input: { command: 'ls' } }] }] });
    const agent = {
      ...fake,
      // The resume state keeps no paused turn: continue() tells the answers in words.
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
    await sessions.create({ id: 'c', metadata: {} });
    const first = await readTurn(await sessions.send('c', { message: 'look' }));
    await sessions.suspend('c');
    const approval = first.session.pendingInput.approvals[0];
    await readTurn(
      await sessions.continue('c', {
        toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved: true }],
        instructionAddendum: 'Be quick.',
      }),
    );
    const prompt = promptsOf(fake).at(-1);
    assert.match(prompt, /^The session was suspended while you waited for my answers/);
    assert.match(prompt, /Be quick\.$/m);
  });
});

describe('limits (fake agent)', () => {
  test('maxSteps: a turn of 3 steps runs whole at 3', async () => {
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [steps(3)] }) });
    await sessions.create({ id: 's', metadata: {} });
    const whole = await readTurn(await sessions.send('s', { message: 'go', limits: { maxSteps: 3 } }));
    assert.equal(whole.chunks.filter((c) => c.type === 'start-step').length, 3);
    assert.equal(whole.session.error, undefined);
  });

  test('maxSteps: a turn starting its third step at 2 is cut short', async () => {
    // Three steps, then a turn that would go on until cut.
    const agent = streamAgent(async function* () {
      for (let n = 1; n <= 3; n += 1) {
        yield { type: 'start-step' };
        yield { type: 'text-start', id: `t${n}` };
        yield { type: 'text-delta', id: `t${n}`, delta: `step ${n} ` };
        yield { type: 'text-end', id: `t${n}` };
        yield { type: 'finish-step' };
      }
      await new Promise(() => {});
    });
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 'c', metadata: {} });
    const cut = await readTurn(await sessions.send('c', { message: 'go', limits: { maxSteps: 2 } }));
    assert.equal(cut.session.error, 'The turn reached its limit of 2 steps.');
    assert.deepEqual(cut.chunks.at(-1), { type: 'abort', reason: 'The turn reached its limit of 2 steps.' });
    assert.equal(cut.session.status, 'idle');
  });

  test('timeoutMs overrides turnTimeoutMs for the turn', async () => {
    const { sessions } = testManager({
      turnTimeoutMs: 600_000,
      fakeAgent: createFakeAgent({ turns: [{ text: 'waiting', waitForAbort: true }] }),
    });
    await sessions.create({ id: 't', metadata: {} });
    const { session } = await readTurn(await sessions.send('t', { message: 'go', limits: { timeoutMs: 50 } }));
    assert.equal(session.error, 'The turn took too long.');
  });

  test('bad limits are refused', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 'l', metadata: {} });
    for (const [limits, path] of [
      [{ maxSteps: 0 }, 'limits.maxSteps'],
      [{ maxSteps: 1.5 }, 'limits.maxSteps'],
      [{ timeoutMs: -1 }, 'limits.timeoutMs'],
      [{ timeoutMs: Number.NaN }, 'limits.timeoutMs'],
      [{ other: 1 }, 'limits.other'],
      [3, 'limits'],
    ]) {
      await refused(sessions.send('l', { message: 'x', limits }), path);
    }
    assert.deepEqual((await sessions.get('l')).messages, []);
  });
});

const dockerSkip = dockerSkipFor(test);
// The shared sandbox's container outlives shutdown() (a shared sandbox is kept): removed here.
const dockerPrefix = `hs-turnopts-${process.pid}-`;
after(() => removeContainers(dockerPrefix));

for (const [name, backend, skip] of [
  ['a fake sandbox', 'fake', false],
  ['localSandbox()', 'local', false],
  ['dockerSandbox()', 'docker', dockerSkip],
]) {
  describe(`with the real HarnessAgent, on ${name}`, { skip }, () => {
    test('the addendum is seen by the agent and absent from the stored user message; maxSteps cuts a turn', async () => {
      const { agent } = scriptedAgent({ permissionMode: 'allow-all', wordDelayMs: 5 });
      const sandboxes =
        backend === 'fake'
          ? forkingSandboxes()
          : sharedSandbox({
              open:
                backend === 'docker'
                  ? dockerSandbox({ image, host: dockerHost, namePrefix: dockerPrefix, network: 'host' })
                  : localSandbox({ root: mkdtempSync(join(tmpdir(), 'hs-turnopts-')) }),
              ports: [4621],
            });
      const sessions = createSessionManager({ agent: () => agent, sandboxes });
      try {
        await sessions.create({ id: 'h', metadata: {} });
        const { message } = await readTurn(await sessions.send('h', { message: 'hello', instructionAddendum: 'Say it twice.' }));
        assert.match(textOf(message), /^You said: hello/);
        assert.match(textOf(message), /Say it twice\./, 'the agent saw it');
        const record = await sessions.get('h');
        assert.equal(textOf(record.messages[0]), 'hello');
        assert.deepEqual(record.messages[1].metadata, { instructionAddendum: 'Say it twice.' });
        // 'list files' takes two steps: whole at 2, cut at 1.
        const whole = await readTurn(await sessions.send('h', { message: 'list files', limits: { maxSteps: 2 } }));
        assert.equal(whole.session.error, undefined);
        const cut = await readTurn(await sessions.send('h', { message: 'list files', limits: { maxSteps: 1 } }));
        assert.equal(cut.session.error, 'The turn reached its limit of 1 steps.');
        assert.equal(cut.session.status, 'idle');
      } finally {
        await sessions.shutdown();
      }
    });
  });
}
