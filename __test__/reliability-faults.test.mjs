// Faults (issue 13): nothing lost on a full disk, one process per SQLite file, unreadable rows set
// aside, the sandboxes a crash left released, no call that hangs on the application's code.
//
// The full-disk test mounts a 4 MB tmpfs (it needs root, as CI has), fills it, and checks that
// every call returns, every session stays resumable, and that once there is room again every
// session's latest state reaches the file with no further call (polled with a generous deadline,
// then checked again after shutdown(), which waits for the writes).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { createSessionManager, createSqliteSessionStore, dockerSandbox, localSandbox, sandboxPerSession, SessionError } from '../index.js';
import { dockerHost, dockerSkipFor, image } from './support/docker.mjs';
import { openSqliteReader, ROOT } from './support/hostile.mjs';
import { createFakeAgent, readTurn, testSandboxes, until, untilStatus } from './support/sessions.mjs';

const dirs = [];
const temp = (prefix) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};
let reader;
const sqlite = async () => (reader ??= await openSqliteReader());
after(async () => {
  await reader?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const inUse = (error) => SessionError.isInstance(error) && /in use/.test(error.message);

describe('one process per SQLite file', () => {
  test('a second store on the file is refused at its first use, in this process; close() and shutdown() free it', async () => {
    const path = join(temp('hs-lock-'), 'sessions.db');
    const first = createSqliteSessionStore({ path });
    await first.list();
    await assert.rejects(createSqliteSessionStore({ path }).list(), inUse);
    const sessions = createSessionManager({ agent: () => createFakeAgent(), sandboxes: testSandboxes(), store: first, onError: () => {} });
    await sessions.create({ id: 'a', metadata: {} });
    await untilStatus(sessions, 'a', 'idle');
    await assert.rejects(createSqliteSessionStore({ path }).list(), inUse, 'still refused while the manager runs');
    const second = createSessionManager({ agent: () => createFakeAgent(), sandboxes: testSandboxes(), store: first, onError: () => {} });
    await assert.rejects(second.list(), (error) => SessionError.isInstance(error) && /in use by another session manager/.test(error.message), 'a second manager on the same store object is refused');
    assert.equal((await sessions.get('a')).status, 'idle', 'the first one is untouched');
    await sessions.shutdown();
    const reopened = createSqliteSessionStore({ path });
    assert.equal((await reopened.get('a')).status, 'suspended');
    await reopened.close();
    const third = createSqliteSessionStore({ path });
    assert.equal((await third.list()).length, 1);
    await third.close();
  });

  test('a store held by another process is refused; the holder SIGKILLed, the file is free', async () => {
    const path = join(temp('hs-lock-'), 'sessions.db');
    const program = `
      const { createSqliteSessionStore } = require(${JSON.stringify(join(ROOT, 'index.js'))});
      const store = createSqliteSessionStore({ path: ${JSON.stringify(path)} });
      store.save({ id: 'held', status: 'idle', metadata: {}, createdAt: 1, updatedAt: 1, messages: [] })
        .then(() => process.stdout.write('ready\\n'));
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ['-e', program], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await new Promise((resolve, reject) => {
        child.stdout.on('data', (chunk) => String(chunk).includes('ready') && resolve());
        child.once('exit', (code) => reject(new Error(`the holder exited early (${code})`)));
      });
      await assert.rejects(createSqliteSessionStore({ path }).list(), inUse);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    const store = createSqliteSessionStore({ path });
    assert.equal((await store.get('held')).status, 'idle');
    await store.close();
  });
});

test('an unreadable row is set aside: list() and recovery skip it and report it once, get() says so, delete() removes it', async () => {
  const path = join(temp('hs-bad-row-'), 'sessions.db');
  const first = createSessionManager({ agent: () => createFakeAgent(), sandboxes: testSandboxes(), store: createSqliteSessionStore({ path }), onError: () => {} });
  for (const id of ['good', 'bad']) {
    await first.create({ id, metadata: { id } });
    await untilStatus(first, id, 'idle');
  }
  await first.shutdown();
  assert.deepEqual(await (await sqlite()).ask({ op: 'status', path, id: 'bad', status: 'from-a-newer-version' }), { changed: 1 });

  const errors = [];
  const sessions = createSessionManager({
    agent: () => createFakeAgent(),
    sandboxes: testSandboxes(),
    store: createSqliteSessionStore({ path }),
    onError: (error, context) => errors.push({ error, ...context }),
  });
  try {
    assert.deepEqual((await sessions.list()).map((s) => s.id), ['good']);
    assert.deepEqual((await sessions.list()).map((s) => s.id), ['good']);
    const reported = errors.filter((e) => e.sessionId === 'bad');
    assert.equal(reported.length, 1, 'reported once');
    assert.equal(reported[0].action, 'read');
    assert.match(reported[0].error.message, /unreadable session bad/);
    await assert.rejects(sessions.get('bad'), (error) => SessionError.isInstance(error) && /unreadable session bad/.test(error.message));
    const { session } = await readTurn(await sessions.send('good', { message: 'still here?' }));
    assert.equal(session.status, 'idle');
    await sessions.delete('bad');
    assert.equal(await sessions.get('bad'), undefined);
    await sessions.create({ id: 'bad', metadata: {} });
    await untilStatus(sessions, 'bad', 'idle');
  } finally {
    await sessions.shutdown();
  }
});

test('a store of your own: a summary of the wrong shape is set aside, reported once, and delete() removes it', async () => {
  const rows = new Map();
  const bad = { id: 'bad', status: 'from-a-newer-version', metadata: {}, createdAt: 1, updatedAt: 1, messages: [] };
  let badDeleted = false;
  const store = {
    save: async (record) => void rows.set(record.id, structuredClone(record)),
    get: async (id) => (id === 'bad' && !badDeleted ? bad : rows.get(id)),
    list: async () => [...[...rows.values()].map(({ messages, ...summary }) => summary), ...(badDeleted ? [] : [bad])],
    getResumeState: async () => undefined,
    delete: async (id) => {
      if (id === 'bad') badDeleted = true;
      rows.delete(id);
    },
  };
  const errors = [];
  const sessions = createSessionManager({ agent: () => createFakeAgent(), sandboxes: testSandboxes(), store, onError: (error, context) => errors.push({ error, ...context }) });
  try {
    await sessions.create({ id: 'good', metadata: {} });
    await untilStatus(sessions, 'good', 'idle');
    assert.deepEqual((await sessions.list()).map((s) => s.id), ['good']);
    await sessions.list();
    const reported = errors.filter((e) => e.sessionId === 'bad');
    assert.equal(reported.length, 1, 'reported once');
    assert.equal(reported[0].action, 'read');
    await assert.rejects(sessions.get('bad'), (error) => SessionError.isInstance(error));
    await sessions.delete('bad');
    assert.ok(badDeleted, "the store's delete() was called");
    assert.equal(await sessions.get('bad'), undefined);
  } finally {
    await sessions.shutdown();
  }
});

describe('calls that wait on the application are bounded', () => {
  /** An agent whose `stream()` never resolves for the prompt `never`, else the fake agent's. */
  const never = () => {
    const agent = createFakeAgent();
    const stream = agent.stream.bind(agent);
    agent.stream = (options) => (options.prompt === 'never' ? new Promise(() => {}) : stream(options));
    return agent;
  };

  test('interrupt(), close() and shutdown() return against a stream() that never resolves and an approve() that never answers', async () => {
    const errors = [];
    const agent = never();
    agent.script.turns.push({ approvals: [{ toolName: 'bash', input: { command: 'ls' } }] });
    const sessions = createSessionManager({
      agent: () => agent,
      sandboxes: testSandboxes(),
      windDownMs: 1000,
      approve: () => new Promise(() => {}),
      onError: (error, context) => errors.push({ error, ...context }),
    });
    for (const id of ['approve', 'interrupt', 'close', 'shutdown']) {
      await sessions.create({ id, metadata: {} });
      await untilStatus(sessions, id, 'idle');
    }
    const waiting = await sessions.send('approve', { message: 'ls, please' });
    // stream() never resolves: send() waits for it until the turn is cut and let go of.
    const stuck = ['interrupt', 'close', 'shutdown'].map((id) => sessions.send(id, { message: 'never' }).then(() => assert.fail('send() resolved'), (error) => error));
    for (const id of ['approve', 'interrupt', 'close', 'shutdown']) await untilStatus(sessions, id, 'busy');

    await sessions.interrupt('interrupt');
    const interrupted = await sessions.get('interrupt');
    assert.equal(interrupted.status, 'interrupted');
    assert.match(interrupted.error, /^The turn was interrupted\. The turn did not wind down within 1000 ms/);
    assert.equal((await sessions.close('close')).status, 'closed');
    await sessions.interrupt('approve');
    assert.equal((await waiting.done).status, 'interrupted', "the turn's done settles");
    await sessions.shutdown();
    assert.ok(errors.some((e) => e.action === 'turn' && e.sessionId === 'shutdown'), 'the turn let go of is reported');
    for (const error of await Promise.all(stuck)) assert.ok(SessionError.isInstance(error), String(error));
  });

  test('turnTimeoutMs lets go of a turn that never starts', async () => {
    const sessions = createSessionManager({ agent: () => never(), sandboxes: testSandboxes(), turnTimeoutMs: 50, windDownMs: 200, onError: () => {} });
    try {
      await sessions.create({ id: 't', metadata: {} });
      await untilStatus(sessions, 't', 'idle');
      await assert.rejects(sessions.send('t', { message: 'never' }), (error) => SessionError.isInstance(error) && error.status === 'interrupted');
      const session = await sessions.get('t');
      assert.equal(session.status, 'interrupted');
      assert.match(session.error, /^The turn took too long\./);
    } finally {
      await sessions.shutdown();
    }
  });
});

describe('a full disk', () => {
  let mounted;
  after(() => {
    if (mounted !== undefined) execFileSync('umount', ['-l', mounted]);
  });

  test('every call returns, every session stays resumable, and its latest state reaches the file once there is room', async () => {
    const dir = temp('hs-full-');
    mkdirSync(join(dir, 'disk'));
    const disk = join(dir, 'disk');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', disk]);
    mounted = disk;
    const path = join(disk, 'sessions.db');
    const errors = [];
    const sessions = createSessionManager({
      agent: () => createFakeAgent(),
      sandboxes: testSandboxes(),
      store: createSqliteSessionStore({ path }),
      windDownMs: 60_000,
      onError: (error, context) => errors.push({ error, ...context }),
    });
    for (const id of ['a', 'b', 'c']) {
      await sessions.create({ id, metadata: id });
      await untilStatus(sessions, id, 'idle');
      await readTurn(await sessions.send(id, { message: `hello ${id}` }));
    }

    // Fill the disk.
    const filler = join(disk, 'filler');
    const fd = openSync(filler, 'w');
    const block = Buffer.alloc(64 * 1024, 1);
    try {
      for (;;) writeSync(fd, block);
    } catch (error) {
      assert.equal(error.code, 'ENOSPC');
    } finally {
      closeSync(fd);
    }

    assert.equal((await sessions.suspend('a')).status, 'suspended');
    await sessions.update('b', { metadata: 'b, renamed on a full disk' });
    const turn = await readTurn(await sessions.send('c', { message: 'on a full disk' }));
    assert.equal(turn.session.status, 'idle');
    assert.ok(errors.some((e) => e.action === 'write'), 'the failed writes are reported as write');
    assert.equal((await sessions.get('a')).status, 'suspended', 'carried on from memory');
    assert.equal((await sessions.get('b')).metadata, 'b, renamed on a full disk');
    // Suspended on a full disk, it resumes from the state kept in memory.
    const resumed = await readTurn(await sessions.send('a', { message: 'back on a full disk' }));
    assert.equal(resumed.session.status, 'idle');
    assert.equal((await sessions.get('a')).messages.length, 4);

    unlinkSync(filler);
    const want = { a: ['idle', 'a', 4], b: ['idle', 'b, renamed on a full disk', 2], c: ['idle', 'c', 4] };
    const inFile = async () => {
      const { sessions: rows } = await (await sqlite()).ask({ op: 'sessions', path });
      return Object.fromEntries(rows.map((row) => [row.id, [row.status, row.metadata, row.messages]]));
    };
    // Written in the background, with no further call.
    await until(async () => JSON.stringify(await inFile()) === JSON.stringify(want), 60_000);
    await sessions.shutdown();
    const { sessions: rows } = await (await sqlite()).ask({ op: 'sessions', path });
    assert.deepEqual(rows.map((row) => [row.id, row.status]), [['a', 'suspended'], ['b', 'suspended'], ['c', 'suspended']]);
  });
});

describe('what a crash leaves is reclaimed', () => {
  const dockerSkip = dockerSkipFor(test);
  const kinds = [
    (() => {
      const root = temp('hs-crash-local-');
      return { name: 'localSandbox()', skip: false, code: `localSandbox({ root: ${JSON.stringify(root)} })`, make: () => localSandbox({ root }) };
    })(),
    (() => {
      const options = { image, host: dockerHost ?? '', namePrefix: `hs-crash-${process.pid}-` };
      return { name: 'dockerSandbox()', skip: dockerSkip, code: `dockerSandbox(${JSON.stringify(options)})`, make: () => dockerSandbox(options) };
    })(),
  ];
  for (const kind of kinds) {
    test(`sandboxPerSession(${kind.name}): after a SIGKILL the next process interrupts the sessions, releases their sandboxes, and the ids can be created again`, { skip: kind.skip }, async () => {
      const path = join(temp('hs-crash-'), 'sessions.db');
      const program = `
        import { createSessionManager, createSqliteSessionStore, dockerSandbox, localSandbox, sandboxPerSession } from ${JSON.stringify(join(ROOT, 'index.js'))};
        import { createFakeAgent } from ${JSON.stringify(join(ROOT, 'testing', 'index.mjs'))};
        const provider = ${kind.code};
        const sessions = createSessionManager({ agent: () => createFakeAgent(), sandboxes: sandboxPerSession({ provider }), store: createSqliteSessionStore({ path: ${JSON.stringify(path)} }), onError: () => {} });
        for (const id of ['x', 'y']) await sessions.create({ id, metadata: {} });
        for (;;) {
          const list = await sessions.list();
          if (list.length === 2 && list.every((s) => s.status === 'idle')) break;
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        process.stdout.write('ready\\n');
        setInterval(() => {}, 1000);
      `;
      const child = spawn(process.execPath, ['--input-type=module', '-e', program], { stdio: ['ignore', 'pipe', 'inherit'] });
      const exited = new Promise((resolve) => child.once('exit', resolve));
      try {
        await new Promise((resolve, reject) => {
          child.stdout.on('data', (chunk) => String(chunk).includes('ready') && resolve());
          child.once('exit', (code) => reject(new Error(`the crashing process exited early (${code})`)));
        });
      } finally {
        child.kill('SIGKILL');
        await exited;
      }
      const provider = kind.make();
      const exists = (id) => provider.resumeSession({ sessionId: id }).then((session) => session.stop().then(() => true), () => false);
      assert.equal(await exists('x'), true, 'the crash left the sandbox of x');
      const errors = [];
      const sessions = createSessionManager({
        agent: () => createFakeAgent(),
        sandboxes: sandboxPerSession({ provider }),
        store: createSqliteSessionStore({ path }),
        onError: (error, context) => errors.push({ error, ...context }),
      });
      try {
        const list = await sessions.list();
        assert.deepEqual(list.map((s) => [s.id, s.status]).sort(), [['x', 'interrupted'], ['y', 'interrupted']]);
        assert.equal(await exists('x'), false, 'released at start');
        assert.equal(await exists('y'), false, 'released at start');
        await sessions.delete('x');
        await sessions.create({ id: 'x', metadata: {} });
        await untilStatus(sessions, 'x', 'idle', 60_000);
        assert.equal((await sessions.close('y')).status, 'closed', 'close() of an interrupted session closes it');
        assert.deepEqual(errors.filter((e) => e.action !== 'write').map((e) => `${e.action}: ${e.error.message}`), []);
      } finally {
        await sessions.delete('x').catch(() => {});
        await sessions.shutdown();
        // Whatever a failure left behind.
        for (const id of ['x', 'y']) await provider.resumeSession({ sessionId: id }).then((session) => session.destroy(), () => {});
      }
    });
  }
});
