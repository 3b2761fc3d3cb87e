// Options and inputs are checked once, in Rust (src/engine/input.rs and the serde structs of each
// domain): a wrong one is refused with a SessionInputError whose `path` is the field's path and
// whose message starts with it, the same words whichever way the value is wrong. One case per rule
// of each option family: createSessionManager, sharedSandbox, sandboxPerSession, dockerSandbox,
// localSandbox, createSqliteSessionStore, and the turn options of send() and continue().
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import {
  createSessionManager,
  createSqliteSessionStore,
  dockerSandbox,
  localSandbox,
  sandboxPerSession,
  sharedSandbox,
  SessionInputError,
} from '../index.js';
import { createFakeAgent, createFakeSandbox } from '../testing/index.mjs';
import { testManager, testSandboxes, untilStatus } from './support/sessions.mjs';

/** Asserts that `f()` (sync or async) is refused at `path`, with `message` (a string: exactly; a RegExp: matching). */
async function refusedAt(f, path, message, what) {
  let outcome;
  try {
    outcome = { value: await f() };
  } catch (error) {
    outcome = { error };
  }
  assert.ok('error' in outcome, `${what}: accepted`);
  const { error } = outcome;
  assert.ok(SessionInputError.isInstance(error), `${what}: ${error}`);
  assert.equal(error.path, path, `${what}: ${error.message}`);
  if (typeof message === 'string') assert.equal(error.message, message, what);
  else assert.match(error.message, message, what);
  assert.ok(error.message.startsWith(path), `${what}: the message names the path: ${error.message}`);
}

/** `object` with a field `name` whose getter throws. */
const throwing = (object, name) => Object.defineProperty(object, name, { enumerable: true, get: () => { throw new Error('boom'); } });
const DURATION = (name) => `${name} must be a number of milliseconds, zero or more`;

describe('createSessionManager()', () => {
  const base = () => ({ agent: () => createFakeAgent(), sandboxes: testSandboxes() });
  const cases = [
    [{ idleTimeoutMs: -1 }, 'idleTimeoutMs', DURATION('idleTimeoutMs')],
    [{ idleTimeoutMs: Number.NaN }, 'idleTimeoutMs', DURATION('idleTimeoutMs')],
    [{ closeSuspendedAfterMs: Number.POSITIVE_INFINITY }, 'closeSuspendedAfterMs', DURATION('closeSuspendedAfterMs')],
    [{ turnTimeoutMs: 'soon' }, 'turnTimeoutMs', DURATION('turnTimeoutMs')],
    [{ windDownMs: null }, 'windDownMs', DURATION('windDownMs')],
    [{ windDownMs: 10_000, idleTimeoutMs: 0.5 }, undefined],
    [{ windDownMs: [5] }, 'windDownMs', DURATION('windDownMs')],
    [{ suspendIdleWhenFull: 'yes' }, 'suspendIdleWhenFull', 'suspendIdleWhenFull must be a boolean'],
    [{ reconnectBufferChunks: -1 }, 'reconnectBufferChunks', 'reconnectBufferChunks must be a whole number, zero or more'],
    [{ reconnectBufferChunks: 1.5 }, 'reconnectBufferChunks', 'reconnectBufferChunks must be a whole number, zero or more'],
    [{ checkpointIntervalMs: 5 }, 'checkpointIntervalMs', 'checkpointIntervalMs is not an option of createSessionManager()'],
    [{ idleTimeoutMs: 10n }, 'idleTimeoutMs', 'idleTimeoutMs must be JSON data, not a bigint'],
    [{ nope: () => 1 }, 'nope', 'nope must be JSON data, not a function'],
  ];
  for (const [extra, path, message] of cases) {
    test(`${JSON.stringify(extra, (_, v) => (typeof v === 'bigint' ? `${v}n` : typeof v === 'function' ? 'fn' : Number.isNaN(v) ? 'NaN' : v))}`, async () => {
      const make = () => createSessionManager({ ...base(), ...extra });
      if (path === undefined) {
        const sessions = make();
        await sessions.shutdown();
      } else {
        await refusedAt(make, path, message, path);
      }
    });
  }

  test('sandboxes.capacity, and a getter that throws, are refused at their paths', async () => {
    for (const capacity of [0, 1.5, -1, Number.NaN, '2']) {
      await refusedAt(
        () => createSessionManager({ ...base(), sandboxes: { ...testSandboxes(), capacity } }),
        'sandboxes.capacity',
        'sandboxes.capacity must be a whole number, one or more',
        `capacity ${capacity}`,
      );
    }
    await refusedAt(() => createSessionManager(throwing(base(), 'windDownMs')), 'windDownMs', 'windDownMs could not be read: boom', 'getter');
  });
});

describe('sharedSandbox() and sandboxPerSession()', () => {
  const open = () => createFakeSandbox();
  const create = () => createFakeSandbox();
  test('sharedSandbox()', async () => {
    await refusedAt(() => sharedSandbox({ open, ports: [4001, 0] }), 'ports[1]', 'ports[1] must be a port number (1 to 65535), not 0', 'port 0');
    await refusedAt(() => sharedSandbox({ open, ports: [4001, 4002.5] }), 'ports[1]', 'ports[1] must be a port number (1 to 65535), not 4002.5', 'port 4002.5');
    await refusedAt(() => sharedSandbox({ open, ports: [4001], stopWhenUnused: 1 }), 'stopWhenUnused', 'stopWhenUnused must be a boolean', 'stopWhenUnused');
    await refusedAt(() => sharedSandbox({ open, ports: [4001], capacity: 2 }), 'capacity', 'capacity is not an option of sharedSandbox()', 'unknown');
  });
  test('sandboxPerSession()', async () => {
    for (const maxSessions of [0, -1, 2.5, '2', Number.NaN]) {
      await refusedAt(() => sandboxPerSession({ create, maxSessions }), 'maxSessions', 'maxSessions must be a whole number, one or more', `maxSessions ${maxSessions}`);
    }
    await refusedAt(() => sandboxPerSession({ create, capacity: 2 }), 'capacity', 'capacity is not an option of sandboxPerSession()', 'unknown');
    assert.equal(sandboxPerSession({ create, maxSessions: 2 }).capacity, 2);
  });
});

describe('dockerSandbox() (no engine reached: the options are checked when it is called)', () => {
  const image = 'harness-sessions-test:busybox';
  const cases = [
    [{ user: 'sandbox' }, 'user', /^user: "sandbox" is not a numeric user/],
    [{ user: 1000 }, 'user', 'user must be a string'],
    [{ memory: 'lots' }, 'memory', /^memory: "lots" is not a memory size/],
    [{ memory: 1024 }, 'memory', /^memory: a container needs at least 6 MiB/],
    [{ memory: true }, 'memory', 'memory must be a number of bytes or a size such as "512m"'],
    [{ env: { A: 'a', B: 1 } }, 'env.B', 'env.B must be a string'],
    [{ ports: [4001, 70000] }, 'ports[1]', 'ports[1] must be a port number (1 to 65535), not 70000'],
    [{ pids: 0 }, 'pids', 'pids must be a whole number, one or more'],
    [{ pids: 4 }, 'pids', /^pids: a sandbox needs room for at least 8 processes/],
    [{ cpus: Number.NaN }, 'cpus', 'cpus must be a number'],
    [{ cpus: 0 }, 'cpus', /^cpus: give a number of CPUs/],
    [{ network: 'bridge' }, 'network', /^network: "bridge" is not supported/],
    [{ pull: 'yes' }, 'pull', 'pull must be a boolean'],
    [{ volumes: ['/:/host'] }, 'volumes', 'volumes is not an option of dockerSandbox()'],
    [{ workingDirectory: 'relative' }, 'workingDirectory', /^workingDirectory: "relative" must be an absolute/],
  ];
  for (const [extra, path, message] of cases) {
    test(`${JSON.stringify(extra, (_, v) => (Number.isNaN(v) ? 'NaN' : v))}`, async () => {
      await refusedAt(() => dockerSandbox({ image, host: 'unix:///nowhere.sock', ...extra }), path, message, path);
    });
  }
  test('a numeric user, uid or uid:gid, is taken', () => {
    for (const user of ['1000', '1000:1000', '0:0']) {
      assert.equal(typeof dockerSandbox({ image, host: 'unix:///nowhere.sock', user }).createSession, 'function', user);
    }
  });
});

describe('localSandbox()', () => {
  test('each option refused at its path', async () => {
    const root = mkdtempSync(join(tmpdir(), 'hs-options-'));
    try {
      await refusedAt(() => localSandbox({}), 'root', "root: give the folder that holds the sessions' folders.", 'no root');
      await refusedAt(() => localSandbox({ root: 5 }), 'root', 'root must be a string', 'root 5');
      await refusedAt(() => localSandbox({ root, inheritEnv: 'yes' }), 'inheritEnv', 'inheritEnv must be a boolean', 'inheritEnv');
      await refusedAt(() => localSandbox({ root, allowedPaths: ['/tmp', 1] }), 'allowedPaths[1]', 'allowedPaths[1] must be a string', 'allowedPaths');
      await refusedAt(() => localSandbox({ root, env: { A: null } }), 'env.A', 'env.A must be a string', 'env');
      await refusedAt(() => localSandbox({ root, ports: 4001 }), 'ports', 'ports must be an array', 'ports');
      await refusedAt(() => localSandbox({ root, name: 5 }), 'name', 'name must be a string', 'name');
      await refusedAt(() => localSandbox({ root, image: 'x' }), 'image', 'image is not an option of localSandbox()', 'unknown');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  test('a relative root is resolved against the working directory when it is called, and open() uses the name option', async () => {
    const root = mkdtempSync(join(tmpdir(), 'hs-options-'));
    const provider = localSandbox({ root: relative(process.cwd(), root), name: 'mine' });
    try {
      const session = await provider();
      try {
        await session.writeTextFile({ path: 'here.txt', content: 'x' });
        assert.ok(existsSync(join(root, 'mine', 'workspace', 'here.txt')), 'the shared sandbox "mine" is under the root');
      } finally {
        await session.destroy();
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('createSqliteSessionStore()', () => {
  test('path and encryptionKey refused at their paths', async () => {
    for (const path of ['', 'a\0b', 5, '\ud800.db']) {
      await refusedAt(() => createSqliteSessionStore({ path }), 'path', /^path must be the path of a file/, JSON.stringify(path));
    }
    await refusedAt(() => createSqliteSessionStore({ path: join(tmpdir(), 'x.db'), encryptionKey: 'short' }), 'encryptionKey', /^encryptionKey must be 32 bytes/, 'key');
  });
});

describe('send(), continue() and exec()', () => {
  test('each refused at its path, the session unchanged', async () => {
    const { sessions } = testManager();
    try {
      await sessions.create({ id: 't', metadata: {} });
      await untilStatus(sessions, 't', 'idle');
      const before = JSON.stringify(await sessions.get('t'));
      const cases = [
        [{ limits: { timeoutMs: Number.POSITIVE_INFINITY } }, 'limits.timeoutMs', DURATION('limits.timeoutMs')],
        [{ limits: { maxSteps: 0 } }, 'limits.maxSteps', 'limits.maxSteps must be a whole number, one or more'],
        [{ limits: { steps: 1 } }, 'limits.steps', 'limits.steps is not an option of a turn'],
        [{ limits: 'x' }, 'limits', 'limits must be an object'],
        [{ instructionAddendum: 5 }, 'instructionAddendum', 'instructionAddendum must be a string'],
        [{ instructionAddendum: 'a\0' }, 'instructionAddendum', /^instructionAddendum must be at most/],
      ];
      for (const [options, path, message] of cases) {
        await refusedAt(() => sessions.send('t', { message: 'hi', ...options }), path, message, `send ${path}`);
        await refusedAt(() => sessions.continue('t', options), path, message, `continue ${path}`);
      }
      for (const [options, path, message] of [
        [{ command: 5 }, 'command', 'command must be a string'],
        [{ command: '   ' }, 'command', 'command must be a non-empty string'],
        [{ command: 'true', maxOutputBytes: -1 }, 'maxOutputBytes', 'maxOutputBytes must be a whole number of bytes, zero or more'],
        [{ command: 'true', key: 7 }, 'key', 'key must be a string'],
        [{ command: 'true', timeout: 1 }, 'timeout', 'timeout is not an option of exec()'],
      ]) {
        await refusedAt(() => sessions.exec('t', options), path, message, `exec ${path}`);
      }
      await refusedAt(() => sessions.send('t', { message: 'hi', prompt: 5 }), 'prompt', 'prompt must be a string', 'send prompt');
      await refusedAt(() => sessions.send('t', { message: 'hi', prompt: null }), 'prompt', 'prompt must be a string', 'send prompt null');
      await refusedAt(() => sessions.send('t', { message: 'hi', instructionAddendum: null }), 'instructionAddendum', 'instructionAddendum must be a string', 'send addendum null');
      await refusedAt(() => sessions.continue('t', { toolApprovalContinuations: null }), 'toolApprovalContinuations', 'toolApprovalContinuations must be an array', 'continue null');
      await refusedAt(() => dockerSandbox({ image: 'x', host: 'unix:///nowhere.sock', user: null }), 'user', 'user must be a string', 'docker user null');
      await refusedAt(() => sessions.send('t', {}), 'message', 'message must be a string or a UIMessage object', 'send without a message');
      for (const name of ['toolApprovalContinuations', 'toolResultContinuations']) {
        await refusedAt(() => sessions.continue('t', { [name]: 'x' }), name, `${name} must be an array`, `continue ${name}`);
      }
      const unreadable = 'limits could not be read: boom';
      await refusedAt(() => sessions.send('t', throwing({ message: 'hi' }, 'limits')), 'limits', unreadable, 'send getter');
      await refusedAt(() => sessions.continue('t', throwing({}, 'limits')), 'limits', unreadable, 'continue getter');
      assert.equal(JSON.stringify(await sessions.get('t')), before);
    } finally {
      await sessions.shutdown();
    }
  });
});
