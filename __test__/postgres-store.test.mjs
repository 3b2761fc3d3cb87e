// The PostgreSQL store against a real server (see support/postgres.mjs): processes starting
// together on one new schema (the migrations' lock), TLS used, refused or verified as the URL
// says, an unreachable server or a refused login as a SessionStoreUnavailableError without the
// password, resume states sealed at rest, and a manager whose sessions outlive it.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createServer } from 'node:net';
import { createPostgresSessionStore, SessionError, SessionStoreUnavailableError } from '../index.js';
import { postgresBinaries } from '../scripts/postgres.mjs';
import { freshSchema, PG_URL, pgStore, postgresSkip, startCluster } from './support/postgres.mjs';
import { createFakeAgent, readTurn, testManager } from './support/sessions.mjs';

const root = new URL('..', import.meta.url).pathname;
const bin = postgresBinaries();
// With HARNESS_SESSIONS_REQUIRE_POSTGRES=1 (CI), a test that needs the binaries runs (and fails) without them.
const needsBinaries =
  postgresSkip ||
  (bin || process.env.HARNESS_SESSIONS_REQUIRE_POSTGRES === '1' ? false : 'no PostgreSQL binaries here (psql, initdb) to look at the server or start a second one');

/** One value of `sql` on the server at `url`, through psql. */
function psql(url, sql) {
  return execFileSync(join(bin, 'psql'), [url, '-XAtq', '-c', sql], { encoding: 'utf8' }).trim();
}

/** Runs `source` (an ES module) in a new Node process with `env`; resolves with its stdout. */
function child(source, env) {
  return new Promise((resolve, reject) => {
    const process_ = spawn(process.execPath, ['--input-type=module', '-e', source], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    process_.stdout.on('data', (chunk) => (out += chunk));
    process_.stderr.on('data', (chunk) => (err += chunk));
    process_.on('error', reject);
    process_.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`child exited ${code}: ${err}`))));
  });
}

function freePort() {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

describe('the PostgreSQL store', { skip: postgresSkip }, () => {
  test('four processes starting together on a new schema migrate it once, and all of them write', { skip: needsBinaries }, async () => {
    const schema = freshSchema('race');
    const source = `
      import { createPostgresSessionStore } from './index.js';
      const store = createPostgresSessionStore({ url: process.env.URL, schema: process.env.SCHEMA, instanceId: process.env.ID });
      await store.save({ id: process.env.ID, status: 'closed', metadata: { by: process.env.ID }, createdAt: 1, updatedAt: 1, messages: [] });
      console.log(JSON.stringify((await store.list()).length));
      await store.close();
    `;
    const ids = ['p1', 'p2', 'p3', 'p4'];
    const outputs = await Promise.all(ids.map((id) => child(source, { URL: PG_URL, SCHEMA: schema, ID: id })));
    for (const output of outputs) assert.ok(Number(output.trim()) >= 1, output);
    assert.equal(psql(PG_URL, `SELECT count(*) FROM "${schema}".migrations`), '1', 'migrated once');
    const store = createPostgresSessionStore({ url: PG_URL, schema });
    assert.deepEqual((await store.list()).map((s) => s.id).sort(), ids);
    for (const table of ['leases', 'turns', 'submissions', 'turn_events', 'commands', 'instances']) {
      assert.equal(psql(PG_URL, `SELECT count(*) FROM "${schema}".${table}`), '0', `${table} exists`);
    }
    await store.close();
  });

  test('a store keeps its connections on their own backends (pg_backend_pid), apart from other clients', { skip: needsBinaries }, async () => {
    const schema = freshSchema('backends');
    const stores = [0, 1].map((n) => createPostgresSessionStore({ url: PG_URL, schema, instanceId: `b${n}` }));
    await Promise.all(stores.map((store, n) => store.save({ id: `s${n}`, status: 'closed', metadata: {}, createdAt: 1, updatedAt: 1, messages: [] })));
    const backends = Number(psql(PG_URL, "SELECT count(DISTINCT pid) FROM pg_stat_activity WHERE application_name = 'harness-sessions' AND pid <> pg_backend_pid()"));
    assert.ok(backends >= 2, `two stores are at least two backends (saw ${backends})`);
    await Promise.all(stores.map((store) => store.close()));
  });

  test('an unreachable server is a SessionStoreUnavailableError naming it, never the password, at the first use', async () => {
    const port = await freePort();
    const store = createPostgresSessionStore({ url: `postgres://app:hunter2secret@127.0.0.1:${port}/db?connect_timeout=2` });
    for (const call of [() => store.list(), () => store.get('a'), () => store.save({ id: 'a', status: 'closed', metadata: {}, createdAt: 1, updatedAt: 1, messages: [] })]) {
      await assert.rejects(call(), (error) => {
        assert.ok(SessionStoreUnavailableError.isInstance(error), `${error?.name}: ${error?.message}`);
        assert.ok(error instanceof SessionError);
        assert.equal(error.code, 'SESSION_STORE_UNAVAILABLE');
        assert.equal(error.statusCode, 503);
        assert.match(error.message, new RegExp(`127\\.0\\.0\\.1:${port}/db as app`));
        assert.doesNotMatch(error.message, /hunter2/);
        return true;
      });
    }
    // A manager on it: the call fails with the same class, and the manager keeps working.
    const { sessions } = testManager({ store });
    await assert.rejects(sessions.create({ id: 'x', metadata: {} }), (error) => SessionStoreUnavailableError.isInstance(error));
    // Its shutdown lets go of the store, which it could never reach: that too is said, with the class.
    await sessions.shutdown().catch((error) => assert.ok(SessionStoreUnavailableError.isInstance(error), String(error)));
  });

  test('a bad URL is a SessionInputError at once, without the password', () => {
    for (const url of ['mysql://u:topsecret@h/d', 'postgres://u:topsecret@h/d?sslmode=sometimes', 'postgres://u:topsecret@h:port/d', 'postgres://u:topsecret@h/d?nonsense=1']) {
      assert.throws(
        () => createPostgresSessionStore({ url }),
        (error) => error.name === 'SessionInputError' && error.path === 'url' && !error.message.includes('topsecret'),
        url,
      );
    }
    assert.throws(() => createPostgresSessionStore({ url: PG_URL, listenUrl: 'http://x' }), (error) => error.path === 'listenUrl');
  });

  test('TLS: used when the URL asks for it, refused by a server without it, verified against sslrootcert', { skip: needsBinaries }, async () => {
    const tls = await startCluster({ ssl: true });
    const plain = await startCluster();
    /** Whether the store's connection to `url` is encrypted (pg_stat_ssl, by its application_name). */
    const encrypted = async (url, serverUrl) => {
      const applicationName = `hs-tls-${Math.random().toString(36).slice(2)}`;
      const joined = `${url}${url.includes('?') ? '&' : '?'}application_name=${applicationName}`;
      const store = createPostgresSessionStore({ url: joined, schema: freshSchema('tls') });
      try {
        await store.list();
        return psql(serverUrl, `SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = '${applicationName}'`) === 't';
      } finally {
        await store.close();
      }
    };
    assert.equal(await encrypted(`${tls.url}?sslmode=require`, tls.url), true, 'sslmode=require');
    assert.equal(await encrypted(tls.url, tls.url), true, 'no sslmode: prefer, as libpq');
    assert.equal(await encrypted(`${tls.url}?sslmode=disable`, tls.url), false, 'sslmode=disable');
    assert.equal(await encrypted(plain.url, plain.url), false, 'prefer, with a server that offers none');
    await assert.rejects(encrypted(`${plain.url}?sslmode=require`, plain.url), (error) => SessionStoreUnavailableError.isInstance(error));
    const ca = join(tls.dir, 'ca.crt');
    const byName = `postgres://postgres@localhost:${tls.port}/postgres`;
    assert.equal(await encrypted(`${byName}?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}`, tls.url), true, 'verify-full');
    await assert.rejects(encrypted(`${tls.url}?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}`, tls.url), (error) => SessionStoreUnavailableError.isInstance(error), 'verify-full: 127.0.0.1 is not the name on the certificate');
    await assert.rejects(encrypted(`${byName}?sslmode=verify-full`, tls.url), (error) => SessionStoreUnavailableError.isInstance(error), "verify-full: Mozilla's roots do not know the test authority");
    tls.stop();
    plain.stop();
  });

  test('resume states are sealed at rest with an encryption key, and a manager resumes from them after a restart', { skip: needsBinaries }, async () => {
    const schema = freshSchema('sealed');
    const encryptionKey = 'ab'.repeat(32);
    const open = () => testManager({ store: createPostgresSessionStore({ url: PG_URL, schema, encryptionKey }), fakeAgent: createFakeAgent({ turns: [{ text: 'one' }, { text: 'two' }] }) });
    const first = open();
    await first.sessions.create({ id: 'kept', metadata: { title: 'kept' } });
    const { message } = await readTurn(await first.sessions.send('kept', { message: 'hello' }));
    assert.match(JSON.stringify(message.parts), /one/);
    await first.sessions.suspend('kept');
    const body = psql(PG_URL, `SELECT encode(body, 'escape') FROM "${schema}".resume_states WHERE session_id = 'kept'`);
    assert.ok(body.length > 0, 'a resume state is kept while suspended');
    assert.doesNotMatch(body, /resume-session|hello/, 'not in clear');
    await first.sessions.shutdown();

    const second = open();
    const record = await second.sessions.get('kept');
    assert.equal(record.status, 'suspended');
    assert.equal(record.messages.length, 2);
    const next = await readTurn(await second.sessions.send('kept', { message: 'again' }));
    assert.equal(next.session.status, 'idle');
    assert.equal((await second.sessions.get('kept')).messages.length, 4);
    await second.sessions.shutdown();
    // Another key cannot read it.
    const other = createPostgresSessionStore({ url: PG_URL, schema, encryptionKey: 'cd'.repeat(32) });
    await other.save({ ...(await other.get('kept')) }, { type: 'resume-session', data: { secret: 'x' } });
    const otherKey = createPostgresSessionStore({ url: PG_URL, schema, encryptionKey });
    await assert.rejects(otherKey.getResumeState('kept'), /could not be decrypted/);
    await Promise.all([other.close(), otherKey.close()]);
  });

  test('pgStore is a SessionStore of the manager like any other', async () => {
    const store = pgStore();
    const { sessions } = testManager({ store });
    await sessions.create({ id: 'a', metadata: { n: 1 } });
    await sessions.update('a', { metadata: (m) => ({ n: m.n + 1 }) });
    assert.deepEqual((await store.get('a')).metadata, { n: 2 });
    assert.deepEqual((await sessions.list()).map((s) => s.id), ['a']);
    await sessions.delete('a');
    assert.equal(await store.get('a'), undefined);
    await sessions.shutdown();
  });
});
