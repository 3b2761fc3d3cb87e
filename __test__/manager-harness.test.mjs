// Whole flows with the real HarnessAgent of @ai-sdk/harness driving our model-free harness:
// a text turn, an interrupt, a suspension and resume that keeps the harness's state, and a
// restart of the manager (a new process) on the same SQLite file.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createSessionManager, createSqliteSessionStore } from '../index.js';
import { forkingSandboxes, scriptedAgent } from './support/harness.mjs';
import { readTurn, sleep, untilStatus } from './support/sessions.mjs';

const textOf = (message) =>
  message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

function manager(options = {}) {
  const { agent } = scriptedAgent(options);
  const errors = [];
  const sessions = createSessionManager({
    agent: () => agent,
    sandboxes: forkingSandboxes(),
    onError: (error, context) => errors.push({ error, ...context }),
    ...options.manager,
  });
  return { sessions, errors };
}

describe('with the real HarnessAgent', () => {
  test('a text turn streams the answer, and the session keeps it', async () => {
    const { sessions, errors } = manager();
    await sessions.create({ id: 'text', metadata: {} });
    const { message, chunks, session } = await readTurn(await sessions.send('text', { message: 'hello there' }));
    assert.equal(textOf(message), 'You said: hello there');
    assert.ok(chunks.filter((c) => c.type === 'text-delta').length > 1, 'word by word');
    assert.equal(chunks[0].messageId, message.id);
    assert.equal(session.status, 'idle');
    assert.equal(session.usage.outputTokens > 0, true);
    const record = await sessions.get('text');
    assert.equal(textOf(record.messages[1]), 'You said: hello there');
    assert.deepEqual(errors, []);
    await sessions.shutdown();
  });

  test('interrupt cuts a slow turn; the session takes the next message', async () => {
    const { sessions } = manager();
    await sessions.create({ id: 'slow', metadata: {} });
    const turn = await sessions.send('slow', { message: '/sleep 10000' });
    await sleep(100);
    await sessions.interrupt('slow');
    const { chunks, session } = await readTurn(turn);
    assert.deepEqual(chunks.at(-1), { type: 'abort', reason: 'The turn was interrupted.' });
    assert.equal(session.status, 'idle');
    const next = await readTurn(await sessions.send('slow', { message: 'still there?' }));
    assert.equal(textOf(next.message), 'You said: still there?');
    await sessions.shutdown();
  });

  test('suspended and resumed, the harness remembers the conversation', async () => {
    const { sessions } = manager();
    await sessions.create({ id: 'mem', metadata: {} });
    await readTurn(await sessions.send('mem', { message: 'my favourite fruit is the quince' }));
    assert.equal((await sessions.suspend('mem')).status, 'suspended');
    const { message } = await readTurn(await sessions.send('mem', { message: 'what did I say?' }));
    assert.match(textOf(message), /my favourite fruit is the quince/);
    await sessions.shutdown();
  });

  test('idle for idleTimeoutMs, suspended; the next message resumes it where it was', async () => {
    const { sessions } = manager({ manager: { idleTimeoutMs: 50 } });
    await sessions.create({ id: 'idle', metadata: {} });
    await readTurn(await sessions.send('idle', { message: 'remember the number 42' }));
    await untilStatus(sessions, 'idle', 'suspended');
    const { message } = await readTurn(await sessions.send('idle', { message: '/history' }));
    assert.match(textOf(message), /remember the number 42/);
    await sessions.shutdown();
  });

  test('a restart of the manager on the same SQLite file, in a new process', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hs-restart-'));
    const program = new URL('./fixtures/programs/restart.mjs', import.meta.url).pathname;
    const runStep = (step) => {
      const result = spawnSync(process.execPath, [program, step, dir], { encoding: 'utf8', timeout: 60_000 });
      assert.equal(result.status, 0, `${step}: ${result.stderr}`);
      return JSON.parse(result.stdout.trim().split('\n').at(-1));
    };
    const first = runStep('first');
    assert.equal(first.status, 'suspended', 'shutdown() suspended it');
    const second = runStep('second');
    assert.equal(second.before, 'suspended');
    assert.match(second.answer, /the password is swordfish/);
    assert.equal(second.messages, 4);
    const store = createSqliteSessionStore({ path: join(dir, 'sessions.db') });
    assert.equal((await store.get('kept')).status, 'suspended');
  });
});
