// exec(): a shell command in a session's sandbox, without the agent. With the fake agent (its
// sandbox a folder of this host): the folder, exit codes, bounded output, keys (kept across a
// restart on a SQLite file), serialisation with turns both ways, abortSignal, a suspended session
// resumed first, bad input. With the real HarnessAgent on localSandbox() and dockerSandbox()
// (skipped without Docker unless HARNESS_SESSIONS_REQUIRE_DOCKER=1): the command runs in the
// folder the harness works in.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { HarnessAgent } from '@ai-sdk/harness/agent';
import {
  SessionConflictError,
  SessionInputError,
  createSessionManager,
  createSqliteSessionStore,
  dockerSandbox,
  localSandbox,
  sharedSandbox,
} from '../index.js';
import { freshSchema, pgStore, postgresSkip } from './support/postgres.mjs';
import { createFakeSandbox, createScriptedHarness } from '../testing/index.mjs';
import { dockerHost, dockerSkipFor, image, removeContainers } from './support/docker.mjs';
import { createDeferred, createFakeAgent, readTurn, sleep, testManager, testSandboxes, until, untilStatus } from './support/sessions.mjs';

const textOf = (message) =>
  message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');

/** A manager on the fake agent whose sandbox is a fresh folder; `root` is that folder. */
function folderManager(options = {}) {
  const root = mkdtempSync(join(tmpdir(), 'hs-exec-'));
  const sandbox = createFakeSandbox({ root });
  const sandboxes = testSandboxes();
  const acquire = sandboxes.acquire;
  sandboxes.acquire = async (id, o) => ({ ...(await acquire(id, o)), sandboxSession: sandbox });
  return { root, ...testManager({ sandboxes, ...options }) };
}

describe('exec() with the fake agent', () => {
  test("runs the command in the sandbox's default folder, adds nothing to the conversation", async () => {
    const { sessions, root, agent } = folderManager();
    await sessions.create({ id: 'e', metadata: {} });
    const before = await sessions.get('e');
    const result = await sessions.exec('e', { command: 'pwd; echo to-err >&2' });
    assert.equal(result.exitCode, 0);
    assert.equal(result.stdout.trim(), root);
    assert.equal(result.stderr, 'to-err\n');
    assert.deepEqual([result.stdoutCutBytes, result.stderrCutBytes, result.maxOutputBytes], [0, 0, 1_048_576]);
    const after = await sessions.get('e');
    assert.deepEqual(after.messages, before.messages);
    assert.equal(after.status, 'idle');
    assert.equal(after.commandResults, undefined, 'nothing kept without a key');
    assert.deepEqual(
      agent.calls.map((c) => c.method),
      ['createSession'],
      'the agent is not called',
    );
  });

  test('a nonzero exit is a result', async () => {
    const { sessions } = folderManager();
    await sessions.create({ id: 'x', metadata: {} });
    const result = await sessions.exec('x', { command: 'echo partial; exit 7' });
    assert.equal(result.exitCode, 7);
    assert.equal(result.stdout, 'partial\n');
    assert.equal((await sessions.exec('x', { command: 'false' })).exitCode, 1);
  });

  test('output is bounded: at the bound nothing is cut, one past it one byte is', async () => {
    const { sessions } = folderManager();
    await sessions.create({ id: 'b', metadata: {} });
    const at = await sessions.exec('b', { command: 'printf hello', maxOutputBytes: 5 });
    assert.deepEqual([at.stdout, at.stdoutCutBytes, at.maxOutputBytes], ['hello', 0, 5]);
    const past = await sessions.exec('b', { command: 'printf hello!; printf 1234567 >&2', maxOutputBytes: 5 });
    assert.deepEqual([past.stdout, past.stdoutCutBytes], ['hello', 1]);
    assert.deepEqual([past.stderr, past.stderrCutBytes], ['12345', 2]);
  });

  test('a key gives the kept result back without running; another command with it is refused', async () => {
    const { sessions, root } = folderManager();
    await sessions.create({ id: 'k', metadata: {} });
    const command = 'echo run >> count; wc -l < count';
    const first = await sessions.exec('k', { command, key: 'count' });
    assert.equal(first.stdout.trim(), '1');
    const again = await sessions.exec('k', { command, key: 'count' });
    assert.deepEqual(again, first);
    assert.equal(readFileSync(join(root, 'count'), 'utf8'), 'run\n', 'ran once');
    await assert.rejects(sessions.exec('k', { command: 'echo other', key: 'count' }), (error) => {
      assert.ok(SessionConflictError.isInstance(error));
      assert.match(error.message, /another command/);
      return true;
    });
    const record = await sessions.get('k');
    assert.deepEqual(record.commandResults, [{ key: 'count', command, result: first }]);
  });

  for (const [name, storeOf, skip = false] of [
    ['the SQLite store', () => {
      const path = join(mkdtempSync(join(tmpdir(), 'hs-exec-sqlite-')), 'sessions.db');
      return () => createSqliteSessionStore({ path });
    }],
    ['the PostgreSQL store', () => {
      const schema = freshSchema('exec');
      return () => pgStore({ schema });
    }, postgresSkip],
  ]) test(`keys are kept across a restart on ${name}`, { skip }, async () => {
    const newStore = storeOf();
    const root = mkdtempSync(join(tmpdir(), 'hs-exec-'));
    const open = () => {
      const sandboxes = testSandboxes();
      const sandbox = createFakeSandbox({ root });
      const acquire = sandboxes.acquire;
      sandboxes.acquire = async (id, o) => ({ ...(await acquire(id, o)), sandboxSession: sandbox });
      return testManager({ sandboxes, store: newStore() }).sessions;
    };
    const command = 'echo run >> count; wc -l < count';
    const first = open();
    await first.create({ id: 'kept', metadata: {} });
    const result = await first.exec('kept', { command, key: 'setup' });
    await first.shutdown();

    const second = open();
    assert.equal((await second.get('kept')).status, 'suspended');
    assert.deepEqual(await second.exec('kept', { command, key: 'setup' }), result);
    assert.equal(readFileSync(join(root, 'count'), 'utf8'), 'run\n', 'not run again');
    assert.equal((await second.get('kept')).status, 'suspended', 'a kept result needs no resume');
    // A new key runs, resuming the session first.
    const next = await second.exec('kept', { command, key: 'next' });
    assert.equal(next.stdout.trim(), '2');
    assert.equal((await second.get('kept')).status, 'idle');
    await second.shutdown();
  });

  test('a command sent during a turn starts only after it', async () => {
    const hold = createDeferred();
    const { sessions, root } = folderManager({ fakeAgent: createFakeAgent({ turns: [{ hold: hold.promise, text: 'slow' }] }) });
    await sessions.create({ id: 's', metadata: {} });
    const order = [];
    const turn = await sessions.send('s', { message: 'first' });
    const reading = readTurn(turn).then((read) => {
      order.push('turn');
      return read;
    });
    const exec = sessions.exec('s', { command: 'touch marker; echo ok' }).then((result) => {
      order.push('exec');
      return result;
    });
    await sleep(300);
    assert.equal(existsSync(join(root, 'marker')), false, 'the command waits for the turn');
    hold.resolve();
    const [read, result] = await Promise.all([reading, exec]);
    assert.equal(result.stdout, 'ok\n');
    assert.deepEqual(order, ['turn', 'exec']);
    assert.equal(read.session.status, 'idle');
  });

  test('a message sent while a command runs waits for it', async () => {
    const { sessions, root } = folderManager();
    await sessions.create({ id: 'm', metadata: {} });
    await untilStatus(sessions, 'm', 'idle');
    const order = [];
    const exec = sessions.exec('m', { command: 'touch started; while [ ! -e go ]; do sleep 0.05; done; echo done' }).then((r) => {
      order.push('exec');
      return r;
    });
    await until(() => existsSync(join(root, 'started')), 10_000);
    const sent = sessions.send('m', { message: 'hello' }).then((t) => {
      order.push('send');
      return t;
    });
    await sleep(300);
    assert.deepEqual(order, [], 'neither is over while the command runs');
    writeFileSync(join(root, 'go'), '');
    const [result, turn] = await Promise.all([exec, sent]);
    assert.equal(result.stdout, 'done\n');
    assert.deepEqual(order, ['exec', 'send']);
    assert.equal((await readTurn(turn)).session.status, 'idle');
  });

  test('abortSignal cuts a command waiting for a turn (it never runs) and a running one', async () => {
    const hold = createDeferred();
    const { sessions, root } = folderManager({ fakeAgent: createFakeAgent({ turns: [{ hold: hold.promise }] }) });
    await sessions.create({ id: 'a', metadata: {} });
    const turn = await sessions.send('a', { message: 'first' });
    const waiting = new AbortController();
    const cut = sessions.exec('a', { command: 'touch never', abortSignal: waiting.signal });
    await sleep(100);
    waiting.abort(new Error('stop waiting'));
    await assert.rejects(cut, /stop waiting/);
    hold.resolve();
    await readTurn(turn);
    const running = new AbortController();
    const long = sessions.exec('a', { command: 'touch started; sleep 30', abortSignal: running.signal });
    await until(() => existsSync(join(root, 'started')), 10_000);
    running.abort(new Error('stop running'));
    await assert.rejects(long);
    assert.equal(existsSync(join(root, 'never')), false);
    // The session goes on.
    assert.equal((await sessions.exec('a', { command: 'echo fine' })).stdout, 'fine\n');
  });

  test('abortSignal cuts a message waiting for a command: no turn starts', async () => {
    const { sessions, root, agent } = folderManager();
    await sessions.create({ id: 'w', metadata: {} });
    await untilStatus(sessions, 'w', 'idle');
    const exec = sessions.exec('w', { command: 'touch started; while [ ! -e go ]; do sleep 0.05; done' });
    await until(() => existsSync(join(root, 'started')), 10_000);
    const controller = new AbortController();
    const sent = sessions.send('w', { message: 'never sent', abortSignal: controller.signal });
    await sleep(100);
    controller.abort(new Error('not any more'));
    await assert.rejects(sent, /not any more/);
    writeFileSync(join(root, 'go'), '');
    await exec;
    assert.deepEqual((await sessions.get('w')).messages, []);
    assert.equal(agent.calls.filter((c) => c.method === 'stream').length, 0);
  });

  test('a suspended session is resumed first; a closed one refuses', async () => {
    const { sessions } = folderManager();
    await sessions.create({ id: 'r', metadata: {} });
    await untilStatus(sessions, 'r', 'idle');
    await sessions.suspend('r');
    assert.equal((await sessions.exec('r', { command: 'echo back' })).stdout, 'back\n');
    assert.equal((await sessions.get('r')).status, 'idle');
    await sessions.close('r');
    await assert.rejects(sessions.exec('r', { command: 'true' }), (error) => SessionConflictError.isInstance(error) && error.status === 'closed');
  });

  test('bad input is refused with SessionInputError', async () => {
    const { sessions } = folderManager();
    await sessions.create({ id: 'i', metadata: {} });
    for (const options of [
      undefined,
      {},
      { command: '' },
      { command: '   ' },
      { command: 'a\0b' },
      { command: 'true', key: '' },
      { command: 'true', key: 3 },
      { command: 'true', maxOutputBytes: -1 },
      { command: 'true', maxOutputBytes: 1.5 },
      { command: 'true', maxOutputBytes: 64 * 1024 * 1024 + 1 },
      { command: 'true', abortSignal: 'no' },
      { command: 'true', other: 1 },
    ]) {
      await assert.rejects(sessions.exec('i', options), (error) => SessionInputError.isInstance(error), JSON.stringify(options));
    }
    assert.equal((await sessions.exec('i', { command: 'true', maxOutputBytes: 64 * 1024 * 1024 })).exitCode, 0);
  });
});

// ─── The real HarnessAgent ────────────────────────────────────────────────────────────────────────

const dockerSkip = dockerSkipFor(test);
// The shared sandbox's container outlives shutdown() (a shared sandbox is kept): removed here.
const dockerPrefix = `hs-exec-${process.pid}-`;
after(() => removeContainers(dockerPrefix));

for (const [name, backend, skip] of [
  ['localSandbox()', 'local', false],
  ['dockerSandbox()', 'docker', dockerSkip],
]) {
  describe(`exec() through HarnessAgent, with ${name}`, { skip }, () => {
    test('runs in the folder the harness works in; exit codes; keys', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'hs-exec-harness-'));
      const provider =
        backend === 'docker'
          ? dockerSandbox({ image, host: dockerHost, namePrefix: dockerPrefix, network: 'host' })
          : localSandbox({ root: dir });
      const harness = createScriptedHarness({ wordDelayMs: 0 });
      const agent = new HarnessAgent({ harness, permissionMode: 'allow-reads' });
      const sessions = createSessionManager({ agent: () => agent, sandboxes: sharedSandbox({ open: provider, ports: [4601] }) });
      try {
        await sessions.create({ id: 'h', metadata: {} });
        const where = await sessions.exec('h', { command: 'pwd' });
        assert.equal(where.exitCode, 0);
        assert.match(where.stdout.trim(), new RegExp(`/${harness.harnessId}-h$`), 'the harness working directory');
        await sessions.exec('h', { command: 'echo hi > made.txt' });
        const turn = await sessions.send('h', { message: 'list files' });
        const { message } = await readTurn(turn);
        assert.equal(textOf(message), 'Files in the working directory: made.txt');
        assert.equal((await sessions.exec('h', { command: 'exit 3' })).exitCode, 3);
        const kept = await sessions.exec('h', { command: 'cat made.txt', key: 'cat' });
        assert.equal(kept.stdout, 'hi\n');
        assert.deepEqual(await sessions.exec('h', { command: 'cat made.txt', key: 'cat' }), kept);
        const record = await sessions.get('h');
        assert.equal(record.messages.length, 2, 'the commands added nothing to the conversation');
      } finally {
        await sessions.shutdown();
      }
    });
  });
}
