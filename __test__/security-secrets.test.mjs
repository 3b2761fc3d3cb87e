// Secrets: a canary placed in a session's resume state (an agent whose stop() returns
// `data.bridge.token = <canary>`) never comes out of the package: not in list(), get(), subscribe()
// events, turn streams, thrown errors, onError, approve or errorMessage arguments (all serialized
// deeply), the diagnostics, nor anything it logs (the default onError included: the child's stdout
// and stderr are searched). The SQLite file holds it only while a session is suspended; with an
// encryption key (the `encryptionKey` option, or HARNESS_SESSIONS_ENCRYPTION_KEY) never at all.
// (That the plaintext state stays in the -wal file after a resume, a close or a delete is a bug:
// reliability-regressions.test.mjs.)
//
// Encryption at rest fails closed, with a SessionError through the JavaScript API and the state
// never handed to the agent: a flipped bit, a row copied from another session, a wrong key, a
// missing key, a plaintext row where a key is configured. The tampering is done with a second
// SQLite connection (node:sqlite, on Node 24 when this is Node 20).
//
// The SQLite version: no JavaScript API reports it; the test reads the version number the
// package's SQLite writes in the file's header (page 1, in the WAL or the file), and finds the
// version check's words in the addon.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { createSessionManager, createSqliteSessionStore, SessionError } from '../index.js';
import { deepText, openSqliteReader, PROGRAMS, ROOT } from './support/hostile.mjs';
import { createFakeAgent, readTurn, testSandboxes, until } from './support/sessions.mjs';

/** Runs crash-secrets.mjs; gives its lines, stdout and stderr. */
function runSecrets(args, env = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(PROGRAMS, 'crash-secrets.mjs'), JSON.stringify(args)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, HARNESS_SESSIONS_ENCRYPTION_KEY: '', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const lines = stdout.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l));
      resolve({ code, stdout, stderr, lines });
    });
  });
}

const newCanary = () => `CANARY-${randomBytes(12).toString('hex')}`;

/** The checks every run shares: nothing shows the canary, and the secret did round trip. */
function checkRun(run, canary) {
  assert.equal(run.code, 0, run.stderr);
  const seen = run.lines.filter((l) => l.t === 'seen');
  assert.ok(seen.length > 50, `the run observed the package (${seen.length} observations)`);
  const kinds = new Set(seen.map((l) => l.what));
  for (const kind of ['list', 'get', 'event', 'chunk', 'thrown', 'onError', 'approve', 'errorMessage', 'diagnostics', 'done']) {
    assert.ok(kinds.has(kind), `the run observed ${kind}`);
  }
  const leaks = seen.filter((l) => l.text.includes(canary)).map((l) => l.what);
  assert.deepEqual(leaks, [], 'the canary leaked through');
  assert.ok(!run.stdout.includes(canary), 'the canary is on stdout');
  assert.ok(!run.stderr.includes(canary), `the canary is in what the package logged:\n${run.stderr}`);
  assert.match(run.stderr, /\[harness-sessions\]/, 'the default onError logged (the search covered it)');
  const resumed = run.lines.find((l) => l.t === 'resumedWith');
  assert.ok(resumed.tokens.length >= 3 && resumed.tokens.every(Boolean), 'every resume handed the agent its secret back');
  return run.lines.filter((l) => l.t === 'files');
}

describe('a secret in the resume state', () => {
  test('never shows in what the package gives or logs; the file holds it only while a session is suspended', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hs-secrets-'));
    const canary = newCanary();
    try {
      const files = checkRun(await runSecrets({ dir, canary }), canary);
      const suspended = files.find((f) => f.phase === 'suspended');
      assert.ok(suspended.db || suspended.wal, 'while suspended, the plaintext state is in the file (the search works)');
      for (const f of files) {
        if (f.suspended.length === 0) assert.equal(f.db, false, `${f.phase}: no session is suspended, yet the database file holds the secret`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const [how, args, env] of [
    ['the encryptionKey option', (key) => ({ encryptionKey: key }), () => ({})],
    ['HARNESS_SESSIONS_ENCRYPTION_KEY', () => ({}), (key) => ({ HARNESS_SESSIONS_ENCRYPTION_KEY: key })],
  ]) {
    test(`encrypted with ${how}: never in the database file nor its WAL, at any moment`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'hs-secrets-'));
      const canary = newCanary();
      const key = randomBytes(32).toString(how.includes('option') ? 'hex' : 'base64');
      try {
        const files = checkRun(await runSecrets({ dir, canary, ...args(key) }, env(key)), canary);
        assert.ok(files.length >= 8);
        for (const f of files) assert.deepEqual([f.phase, f.db, f.wal], [f.phase, false, false], `${f.phase}: the secret is in the files`);
        for (const name of readdirSync(dir)) assert.ok(!readFileSync(join(dir, name)).includes(canary), `${name} holds the secret`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});

/** An agent whose resume states hold `canary`, recording what each createSession was given. */
function secretAgent(canary) {
  const inner = createFakeAgent();
  const opened = [];
  return {
    ...inner,
    opened,
    async createSession(options) {
      opened.push({ sessionId: options.sessionId, resumeFrom: options.resumeFrom });
      const session = await inner.createSession(options);
      const stop = session.stop.bind(session);
      session.stop = async () => {
        const state = await stop();
        state.data.bridge = { token: canary };
        return state;
      };
      return session;
    },
  };
}

/** Two suspended sessions, `a` and `b`, in a store sealed with `key`. */
async function twoSuspended(path, key, canary) {
  const agent = secretAgent(canary);
  const sessions = createSessionManager({ agent: () => agent, sandboxes: testSandboxes(), store: createSqliteSessionStore({ path, encryptionKey: key }), onError: () => {} });
  for (const id of ['a', 'b']) {
    await sessions.create({ id, metadata: {} });
    await until(async () => (await sessions.get(id)).status === 'idle');
    await readTurn(await sessions.send(id, { message: `hello ${id}` }));
    await sessions.suspend(id);
  }
  await sessions.shutdown();
}

/** What a manager and the store's own API say of session `id` on `store`: both must refuse. */
async function refuses(store, id, canary) {
  const agent = secretAgent(canary);
  const errors = [];
  const sessions = createSessionManager({ agent: () => agent, sandboxes: testSandboxes(), store, onError: (error) => errors.push(error) });
  const thrown = [];
  await assert.rejects(store.getResumeState(id), (error) => {
    thrown.push(error);
    return SessionError.isInstance(error);
  });
  await assert.rejects(sessions.send(id, { message: 'resume' }), (error) => {
    thrown.push(error);
    return SessionError.isInstance(error);
  });
  const after = await sessions.get(id);
  assert.equal(after.status, 'suspended', 'the session is left suspended, its state untouched');
  assert.deepEqual(agent.opened.filter((o) => o.sessionId === id), [], 'the agent never saw a state that failed to open');
  for (const error of [...thrown, ...errors]) assert.ok(!deepText(error).includes(canary), 'an error names the secret');
  await sessions.shutdown();
  return thrown;
}

describe('encryption at rest fails closed', () => {
  const KEY = randomBytes(32).toString('hex');
  let reader;
  const setup = async () => {
    reader ??= await openSqliteReader();
    const dir = mkdtempSync(join(tmpdir(), 'hs-seal-'));
    const path = join(dir, 'sessions.db');
    const canary = newCanary();
    await twoSuspended(path, KEY, canary);
    return { dir, path, canary };
  };

  test('the untampered state resumes (the baseline), and never shows in the files', async () => {
    const { dir, path, canary } = await setup();
    try {
      const agent = secretAgent(canary);
      const sessions = createSessionManager({ agent: () => agent, sandboxes: testSandboxes(), store: createSqliteSessionStore({ path, encryptionKey: KEY }) });
      await readTurn(await sessions.send('a', { message: 'back' }));
      assert.equal(agent.opened.at(-1).resumeFrom.data.bridge.token, canary);
      await sessions.shutdown();
      for (const name of readdirSync(dir)) assert.ok(!readFileSync(join(dir, name)).includes(canary), name);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  for (const offset of [0, 23, 24, 40, undefined]) {
    test(`a flipped bit (byte ${offset ?? 'last'} of the sealed row)`, async () => {
      const { dir, path, canary } = await setup();
      try {
        assert.deepEqual(await reader.ask({ op: 'flip', path, id: 'a', offset }), { changed: 1 });
        await refuses(createSqliteSessionStore({ path, encryptionKey: KEY }), 'a', canary);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  test("a swapped row (session a's resume state copied onto session b's)", async () => {
    const { dir, path, canary } = await setup();
    try {
      assert.deepEqual(await reader.ask({ op: 'swap', path, from: 'a', to: 'b' }), { changed: 1 });
      await refuses(createSqliteSessionStore({ path, encryptionKey: KEY }), 'b', canary);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a wrong key', async () => {
    const { dir, path, canary } = await setup();
    try {
      await refuses(createSqliteSessionStore({ path, encryptionKey: randomBytes(32) }), 'a', canary);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a missing key (no option, no environment variable)', async () => {
    const { dir, path, canary } = await setup();
    const saved = process.env.HARNESS_SESSIONS_ENCRYPTION_KEY;
    delete process.env.HARNESS_SESSIONS_ENCRYPTION_KEY;
    try {
      await refuses(createSqliteSessionStore({ path }), 'a', canary);
    } finally {
      if (saved !== undefined) process.env.HARNESS_SESSIONS_ENCRYPTION_KEY = saved;
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a plaintext row where a key is configured (a downgrade)', async () => {
    const { dir, path, canary } = await setup();
    try {
      const body = JSON.stringify({ type: 'resume-session', harnessId: 'fake', specificationVersion: 'harness-v1', data: { sessionId: 'a', prompts: [], bridge: { token: canary } } });
      assert.deepEqual(await reader.ask({ op: 'plain', path, id: 'a', body }), { changed: 1 });
      await refuses(createSqliteSessionStore({ path, encryptionKey: KEY }), 'a', canary);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the key itself is checked: 32 bytes, or a SessionInputError', () => {
    const path = join(tmpdir(), `hs-key-${process.pid}.db`);
    for (const key of ['00'.repeat(31), 'zz'.repeat(32), 'c2hvcnQ=', new Uint8Array(16), new Uint8Array(33)]) {
      assert.throws(() => createSqliteSessionStore({ path, encryptionKey: key }), (error) => error.code === 'SESSION_INPUT' && error.path === 'encryptionKey');
    }
    assert.ok(!existsSync(path), 'nothing was created');
  });

  after(async () => {
    await reader?.close();
  });
});

test('the SQLite the package links is at least 3.51.3, and the addon checks it at start', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hs-version-'));
  const path = join(dir, 'v.db');
  try {
    const store = createSqliteSessionStore({ path });
    await store.save({ id: 'v', status: 'idle', metadata: {}, createdAt: 1, updatedAt: 1, messages: [] });
    // "SQLITE_VERSION_NUMBER of the library that most recently modified the database": offset 96
    // of page 1, in the file or, newer, in the WAL's last frame of page 1.
    let version = readFileSync(path).readUInt32BE(96);
    if (existsSync(`${path}-wal`)) {
      const wal = readFileSync(`${path}-wal`);
      const pageSize = wal.readUInt32BE(8);
      for (let at = 32; at + 24 + pageSize <= wal.length; at += 24 + pageSize) {
        if (wal.readUInt32BE(at) === 1) version = wal.readUInt32BE(at + 24 + 96);
      }
    }
    const dotted = `${Math.floor(version / 1e6)}.${Math.floor(version / 1e3) % 1000}.${version % 1000}`;
    console.log(`# sqlite: the package's SQLite is ${dotted} (${version}); no JavaScript API reports it`);
    assert.ok(version >= 3_051_003, `the package wrote the file with SQLite ${dotted}, older than 3.51.3`);
    const addon = readdirSync(ROOT).find((name) => name.endsWith('.node'));
    const bytes = readFileSync(join(ROOT, addon));
    assert.ok(bytes.includes('older than 3.51.3 which fixes a corruption of WAL databases: refusing to open the sqlite store'), 'the version check is in the addon');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
