// Session ids, the SQLite store's path and its encryption key are checked once, in Rust
// (src/engine/input.rs, src/engine/store/sqlite/key.rs), reading what JavaScript gave as it is
// (src/binding/given.rs): JavaScript passes them through. These pin what every entry point that
// takes them answers, so that a check lost on the way (or one that reads a lone surrogate as
// U+FFFD) fails here.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemorySessionStore, createSqliteSessionStore, localSandbox, sandboxPerSession, SessionError, SessionInputError } from '../index.js';
import { pgStore, postgresSkip } from './support/postgres.mjs';
import { createFakeSandbox } from '../testing/index.mjs';
import { testManager, untilStatus } from './support/sessions.mjs';

/** Bad ids, each with the message it is refused with at `path`. */
const badIds = (path) => [
  ['', `${path} must be a non-empty string`],
  [5, `${path} must be a non-empty string`],
  [null, `${path} must be a non-empty string`],
  [undefined, `${path} must be a non-empty string`],
  [{ toString: () => 'ok' }, `${path} must be a non-empty string`],
  [new String('ok'), `${path} must be a non-empty string`],
  [Symbol('ok'), `${path} must be a non-empty string`],
  [new Proxy({}, { get: () => { throw new Error('proxy'); } }), `${path} must be a non-empty string`],
  ['ok\udc00', `${path} must be well-formed text (it holds a lone surrogate)`],
  ['\ud800', `${path} must be well-formed text (it holds a lone surrogate)`],
];

/** A name for `id` in a failure's text (a Proxy that throws cannot be turned into text). */
const label = (id) => (typeof id === 'string' ? JSON.stringify(id) : typeof id);

/** Asserts `call()` returns a promise (never throws at once) that rejects at `path` with `message`. */
async function rejectsAt(call, path, message, what) {
  let promise;
  assert.doesNotThrow(() => {
    promise = call();
  }, `${what}: thrown at once, not rejected`);
  assert.ok(promise instanceof Promise, `${what}: a promise`);
  await assert.rejects(promise, (error) => {
    assert.ok(SessionInputError.isInstance(error), `${what}: ${error}`);
    assert.equal(error.path, path, what);
    assert.equal(error.message, message, what);
    return true;
  });
}

describe('session ids', () => {
  test('every method of the manager refuses a bad id, as a rejection, nothing changed', async () => {
    const { sessions } = testManager();
    try {
      await sessions.create({ id: 'ok', metadata: {} });
      // A well-formed id holding U+FFFD is an id like any other: the one a lone surrogate would become.
      await sessions.create({ id: 'ok\ufffd', metadata: { replacement: true } });
      await untilStatus(sessions, 'ok', 'idle');
      await untilStatus(sessions, 'ok\ufffd', 'idle');
      const before = JSON.stringify(await sessions.list());
      const calls = {
        get: (id) => sessions.get(id),
        send: (id) => sessions.send(id, { message: 'hi' }),
        continue: (id) => sessions.continue(id, {}),
        exec: (id) => sessions.exec(id, { command: 'true' }),
        update: (id) => sessions.update(id, { metadata: { changed: true } }),
        'update(function)': (id) => sessions.update(id, { metadata: () => ({ changed: true }) }),
        interrupt: (id) => sessions.interrupt(id),
        suspend: (id) => sessions.suspend(id),
        close: (id) => sessions.close(id),
        delete: (id) => sessions.delete(id),
        reconnect: (id) => sessions.reconnect(id),
      };
      for (const [name, call] of Object.entries(calls)) {
        for (const [id, message] of badIds('id')) await rejectsAt(() => call(id), 'id', message, `${name}(${label(id)})`);
      }
      for (const [id, message] of badIds('id').filter(([id]) => id !== undefined)) {
        await rejectsAt(() => sessions.create({ id, metadata: {} }), 'id', message, `create({ id: ${label(id)} })`);
      }
      assert.equal(JSON.stringify(await sessions.list()), before, 'nothing changed');
      assert.deepEqual((await sessions.get('ok\ufffd')).metadata, { replacement: true });
    } finally {
      await sessions.shutdown();
    }
  });

  test("create() without an id takes generateId()'s; with id null it is refused, not generated", async () => {
    const { sessions } = testManager();
    try {
      await rejectsAt(() => sessions.create({ id: null, metadata: {} }), 'id', 'id must be a non-empty string', 'id: null');
      const created = await sessions.create({ metadata: {} });
      assert.equal(typeof created.id, 'string');
      assert.equal((await sessions.list()).length, 1);
    } finally {
      await sessions.shutdown();
    }
  });

  test('the stores refuse a bad id in get(), getResumeState() and delete(), as a rejection', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hs-once-'));
    const stores = { memory: createMemorySessionStore(), sqlite: createSqliteSessionStore({ path: join(dir, 's.db') }) };
    if (!postgresSkip) stores.postgres = pgStore();
    try {
      for (const [kind, store] of Object.entries(stores)) {
        await store.save({ id: 'ok\ufffd', status: 'idle', metadata: {}, createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:00:00.000Z', turns: 0, usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, messages: [] });
        for (const method of ['get', 'getResumeState', 'delete']) {
          for (const [id, message] of badIds('id')) await rejectsAt(() => store[method](id), 'id', message, `${kind} ${method}(${label(id)})`);
        }
        for (const record of [null, undefined, 5, 'record', [], { id: 'no-status' }]) {
          const saving = store.save(record);
          assert.ok(saving instanceof Promise, `${kind} save(${label(record)}): a promise`);
          await assert.rejects(saving, (error) => SessionInputError.isInstance(error) && error.path === 'record' && /^record is not a valid session record/.test(error.message));
        }
        assert.equal((await store.get('ok\ufffd')).id, 'ok\ufffd', `${kind}: the record is still there`);
        assert.equal((await store.list()).length, 1, `${kind}: nothing else was saved`);
      }
    } finally {
      await stores.sqlite.close();
      await stores.postgres?.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a native strategy's acquire() and discard() refuse a bad sessionId, as a rejection", async () => {
    const strategy = sandboxPerSession({ create: async () => createFakeSandbox(), resume: async () => createFakeSandbox() });
    for (const [id, message] of badIds('sessionId')) {
      await rejectsAt(() => strategy.acquire(id, { resume: false }), 'sessionId', message, `acquire(${label(id)})`);
      await rejectsAt(() => strategy.discard(id), 'sessionId', message, `discard(${label(id)})`);
    }
    assert.equal(strategy.capacity, undefined);
  });
});

describe("the SQLite store's encryption key", () => {
  const bytes = Buffer.from(Array.from({ length: 32 }, (_, i) => (i * 7 + 3) & 0xff));
  const record = { id: 's', status: 'suspended', metadata: {}, createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:00:00.000Z', turns: 0, usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 }, messages: [] };
  const state = { type: 'resume-session', secret: 'kept' };

  test('the same key given as bytes (at an offset), hex or base64 opens what another form sealed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hs-key-'));
    const path = join(dir, 's.db');
    const padded = new Uint8Array(40);
    padded.set(bytes, 5);
    const forms = {
      Buffer: bytes,
      'a Uint8Array at an offset': padded.subarray(5, 37),
      hex: bytes.toString('hex'),
      HEX: bytes.toString('hex').toUpperCase(),
      base64: bytes.toString('base64'),
      'base64 with a newline': `${bytes.toString('base64')}\n`,
      base64url: bytes.toString('base64url'),
    };
    try {
      const first = createSqliteSessionStore({ path, encryptionKey: bytes });
      await first.save(record, state);
      await first.close();
      for (const [form, encryptionKey] of Object.entries(forms)) {
        const store = createSqliteSessionStore({ path, encryptionKey });
        try {
          assert.deepEqual(await store.getResumeState('s'), state, form);
        } finally {
          await store.close();
        }
      }
      const other = Buffer.from(bytes);
      other[0] ^= 1;
      const wrong = createSqliteSessionStore({ path, encryptionKey: other });
      await assert.rejects(wrong.getResumeState('s'), (error) => SessionError.isInstance(error) && !error.message.includes(bytes.toString('hex')));
      await wrong.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a key of the wrong size or kind is refused at once, naming encryptionKey, and never shown', () => {
    const path = join(tmpdir(), 'never-opened.db');
    for (const encryptionKey of ['', 'short', 'zz'.repeat(32), 'A'.repeat(44), new Uint8Array(31), new Uint8ClampedArray(32), new Uint16Array(16), new ArrayBuffer(32), 1, {}, []]) {
      assert.throws(
        () => createSqliteSessionStore({ path, encryptionKey }),
        (error) => SessionInputError.isInstance(error) && error.path === 'encryptionKey' && error.message === 'encryptionKey must be 32 bytes: 64 hex digits, or base64',
        String(encryptionKey),
      );
    }
  });

  test('HARNESS_SESSIONS_ENCRYPTION_KEY: empty is no key, a bad one is refused naming the variable', () => {
    const saved = process.env.HARNESS_SESSIONS_ENCRYPTION_KEY;
    const path = join(tmpdir(), 'never-opened.db');
    try {
      process.env.HARNESS_SESSIONS_ENCRYPTION_KEY = '';
      assert.doesNotThrow(() => createSqliteSessionStore({ path }));
      process.env.HARNESS_SESSIONS_ENCRYPTION_KEY = 'short';
      assert.throws(
        () => createSqliteSessionStore({ path }),
        (error) => SessionInputError.isInstance(error) && error.path === 'HARNESS_SESSIONS_ENCRYPTION_KEY' && !error.message.includes('short'),
      );
      // The option wins over the variable, even null (no key).
      assert.doesNotThrow(() => createSqliteSessionStore({ path, encryptionKey: null }));
      assert.doesNotThrow(() => createSqliteSessionStore({ path, encryptionKey: bytes }));
    } finally {
      if (saved === undefined) delete process.env.HARNESS_SESSIONS_ENCRYPTION_KEY;
      else process.env.HARNESS_SESSIONS_ENCRYPTION_KEY = saved;
    }
  });
});

describe("a sandbox's fork()", () => {
  test('ports and workingDirectory are checked by the engine, as sharedSandbox() checks its ports', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hs-fork-'));
    const session = await localSandbox({ root: dir }).createSession({ sessionId: 'f' });
    try {
      const cases = [
        [{ ports: [4001, 0] }, 'ports[1]', 'ports[1] must be a port number (1 to 65535), not 0'],
        [{ ports: [70000] }, 'ports[0]', 'ports[0] must be a port number (1 to 65535), not 70000'],
        [{ ports: [4001.5] }, 'ports[0]', 'ports[0] must be a port number (1 to 65535), not 4001.5'],
        [{ ports: '1' }, 'ports', /^ports must be/],
        [{ workingDirectory: 1 }, 'workingDirectory', /^workingDirectory must be/],
      ];
      for (const [options, path, message] of cases) {
        await assert.rejects(session.fork(options), (error) => {
          assert.ok(SessionInputError.isInstance(error), `${JSON.stringify(options)}: ${error}`);
          assert.equal(error.path, path);
          if (typeof message === 'string') assert.equal(error.message, message);
          else assert.match(error.message, message);
          return true;
        });
      }
      const fork = await session.fork({ ports: null, workingDirectory: null });
      assert.equal(typeof fork.id, 'string');
    } finally {
      await session.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('a sandbox provider', () => {
  test('a session id or name with a lone surrogate is refused, never taken for the one with U+FFFD', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hs-names-'));
    const provider = localSandbox({ root: dir });
    const session = await provider.createSession({ sessionId: 'n\ufffd' });
    try {
      const lone = 'sessionId must be well-formed text (it holds a lone surrogate)';
      await rejectsAt(() => provider.createSession({ sessionId: 'n\udc00' }), 'sessionId', lone, 'createSession');
      await rejectsAt(() => provider.resumeSession({ sessionId: 'n\udc00' }), 'sessionId', lone, 'resumeSession');
      await rejectsAt(() => provider({ name: 'n\ud800' }), 'name', 'name must be well-formed text (it holds a lone surrogate)', 'open');
      assert.equal((await provider.resumeSession({ sessionId: 'n\ufffd' })).id, session.id);
    } finally {
      await session.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
