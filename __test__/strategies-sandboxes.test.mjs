// sharedSandbox() and sandboxPerSession(): the same tests against localSandbox(), a JavaScript
// sandbox (testing/fake-sandbox.mjs) and dockerSandbox() on a real Docker Engine with the test
// image (scripts/docker/start.sh, scripts/docker/build-test-image.sh). The Docker ones are skipped
// without an engine, unless HARNESS_SESSIONS_REQUIRE_DOCKER=1: then they fail. The time of a fork
// of a shared Docker sandbox is measured by `npm run bench`.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createSessionManager,
  dockerSandbox,
  localSandbox,
  sandboxPerSession,
  SessionCapacityError,
  SessionInputError,
  sharedSandbox,
} from '../index.js';
import { createDeferred, createFakeAgent, createFakeSandbox } from '../testing/index.mjs';
import { dockerHost, dockerSkipFor, image } from './support/docker.mjs';

// ─── Docker, when there is one ────────────────────────────────────────────────────────────────────

const dockerSkip = dockerSkipFor(test);

// ─── The backends ─────────────────────────────────────────────────────────────────────────────────

let counter = 0;
const fresh = (name) => `${name}-${process.pid}-${++counter}`;

/**
 * A backend gives, for one test: `provider()` (a native provider, or `undefined`), `open()` for
 * `sharedSandbox()`, `perSession` (the options of `sandboxPerSession()` but `maxSessions`),
 * `exists(sessionId)` (whether a session's own sandbox is still there), and `cleanup()`.
 */
const backends = [
  {
    name: 'localSandbox()',
    skip: false,
    native: true,
    make() {
      const root = mkdtempSync(join(tmpdir(), 'strategies-local-'));
      const provider = localSandbox({ root });
      return nativeBackend(provider, () => rmSync(root, { recursive: true, force: true }));
    },
  },
  {
    name: 'a JavaScript sandbox (testing/fake-sandbox.mjs)',
    skip: false,
    native: false,
    make: fakeBackend,
  },
  {
    name: 'dockerSandbox()',
    skip: dockerSkip,
    native: true,
    make() {
      const provider = dockerSandbox({ image, host: dockerHost, namePrefix: `${fresh('hs-strat')}-`, network: 'host' });
      const made = new Set(['shared']);
      const backend = nativeBackend(provider, async () => {
        for (const id of made) {
          await provider
            .resumeSession({ sessionId: id })
            .then((session) => session.destroy())
            .catch(() => {});
        }
      });
      backend.track = (id) => made.add(id);
      return backend;
    },
  },
];

function nativeBackend(provider, cleanup) {
  return {
    provider,
    open: () => provider(),
    perSession: { provider },
    track() {},
    async exists(sessionId) {
      return provider.resumeSession({ sessionId }).then(
        () => true,
        () => false,
      );
    },
    cleanup,
  };
}

function fakeBackend() {
  const base = mkdtempSync(join(tmpdir(), 'strategies-fake-'));
  const sharedRoot = join(base, 'shared');
  /** @type {Map<string, import('../testing/index.mjs').FakeSandbox[]>} */
  const made = new Map();
  const gone = (id) => (made.get(id) ?? []).some((sandbox) => sandbox.state === 'destroyed');
  const make = (id) => {
    const sandbox = createFakeSandbox({ root: join(base, 'own', id), id: `own-${id}` });
    made.set(id, [...(made.get(id) ?? []), sandbox]);
    return sandbox;
  };
  return {
    provider: undefined,
    // Each open a sandbox over the same folder: a stopped one cannot run again, as with a real one.
    open: () => createFakeSandbox({ root: sharedRoot, id: 'fake-shared' }),
    perSession: {
      create: async (id) => {
        if (made.has(id) && !gone(id)) throw new Error(`a sandbox exists already for ${id}`);
        made.delete(id);
        return make(id);
      },
      resume: async (id) => (made.has(id) && !gone(id) ? make(id) : undefined),
    },
    track() {},
    async exists(id) {
      return made.has(id) && !gone(id);
    },
    cleanup: () => rmSync(base, { recursive: true, force: true }),
  };
}

/** Whether `sandbox` refuses to run a command: stopped, released or gone. */
async function refuses(sandbox) {
  return sandbox.run({ command: 'true' }).then(
    () => false,
    () => true,
  );
}

async function text(sandbox, path) {
  return sandbox.readTextFile({ path });
}

/** Runs `body(backend)` with a backend made for the test, cleaned up after. */
function withBackend(kind, body) {
  return async () => {
    const backend = kind.make();
    try {
      await body(backend);
    } finally {
      await backend.cleanup();
    }
  };
}

/** An `open` that counts its calls, keeps what it opened, and fails the calls listed in `failing`. */
function countingOpen(backend, { failing = [] } = {}) {
  const opened = [];
  let calls = 0;
  const open = async () => {
    calls += 1;
    if (failing.includes(calls)) throw new Error(`open ${calls} failed`);
    const sandbox = await backend.open();
    opened.push(sandbox);
    return sandbox;
  };
  return { open, opened, calls: () => calls };
}

async function until(predicate, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms in vain for ${predicate}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const untilStatus = (sessions, id, status) => until(async () => (await sessions.get(id))?.status === status);

// ─── sharedSandbox() ──────────────────────────────────────────────────────────────────────────────

test('sharedSandbox() refuses empty or repeated ports at once, with a TypeError', () => {
  const open = () => createFakeSandbox();
  const words = 'sharedSandbox() needs at least one port, each listed once.';
  for (const ports of [[], [4001, 4001], [1, 2, 1], undefined, 'x']) {
    assert.throws(
      () => sharedSandbox({ open, ports }),
      (error) => error instanceof TypeError && error.message === words,
      `ports ${JSON.stringify(ports)}`,
    );
  }
  assert.throws(
    () => sharedSandbox({ open, ports: [4001, 70000] }),
    (error) => SessionInputError.isInstance(error) && error.path === 'ports[1]',
  );
  assert.throws(
    () => sharedSandbox({ open: 'nope', ports: [4001] }),
    (error) => SessionInputError.isInstance(error) && error.path === 'open',
  );
  assert.throws(
    () => sharedSandbox({ open, ports: [4001], stopWhenUnused: 'yes' }),
    (error) => SessionInputError.isInstance(error) && error.path === 'stopWhenUnused',
  );
  assert.throws(
    () => sharedSandbox({ open, ports: [4001], port: 1 }),
    (error) => SessionInputError.isInstance(error) && error.path === 'port',
  );
});

test('sharedSandbox() tells a JavaScript fork() the session it is for; a fork() of { ports } alone still works', async () => {
  const root = mkdtempSync(join(tmpdir(), 'hs-fork-session-'));
  try {
    const seen = [];
    const base = createFakeSandbox({ root: join(root, 'told'), id: 'told' });
    // A fork that puts each session in a working directory of its own, the same every time.
    const told = Object.create(base, {
      fork: {
        value: (options) => {
          seen.push(options);
          return base.fork({ ports: options.ports });
        },
      },
    });
    const shared = sharedSandbox({ open: () => told, ports: [4391] });
    const lease = await shared.acquire('chat-7', { resume: false });
    assert.deepEqual(seen, [{ ports: [4391], sessionId: 'chat-7' }]);
    await lease.close();
    // The old shape: fork({ ports }) ignores the session, and works as before.
    const old = createFakeSandbox({ root: join(root, 'old'), id: 'old' });
    const oldShared = sharedSandbox({ open: () => old, ports: [4392] });
    const oldLease = await oldShared.acquire('chat-8', { resume: false });
    assert.deepEqual([...oldLease.sandboxSession.ports], [4392]);
    await oldLease.close();
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

for (const kind of backends) {
  describe(`sharedSandbox() with ${kind.name}`, { skip: kind.skip }, () => {
    test(
      'hands each session a view with a port of its own, and takes the port back once',
      withBackend(kind, async (backend) => {
        const { open, opened } = countingOpen(backend);
        const shared = sharedSandbox({ open, ports: [4301, 4302] });
        assert.equal(shared.capacity, 2);
        const a = await shared.acquire('a', { resume: false });
        const b = await shared.acquire('b', { resume: false });
        assert.equal(opened.length, 1, 'opened once');
        assert.deepEqual([...a.sandboxSession.ports], [4301]);
        assert.deepEqual([...b.sandboxSession.ports], [4302]);
        if (kind.native) {
          assert.equal(a.sandboxSession.id, b.sandboxSession.id, 'views of one sandbox');
          assert.match(a.sandboxSession.defaultWorkingDirectory, /\/sessions\/a$/);
          assert.match(b.sandboxSession.defaultWorkingDirectory, /\/sessions\/b$/);
        } else {
          assert.deepEqual(
            opened[0].forks.map((view) => view.ports),
            [[4301], [4302]],
            'forked with { ports: [port] }',
          );
        }
        await assert.rejects(shared.acquire('c', { resume: false }), (error) => {
          assert.ok(SessionCapacityError.isInstance(error), String(error));
          assert.equal(error.capacity, 2);
          return true;
        });
        await a.suspend();
        await a.suspend();
        await a.close();
        const c = await shared.acquire('c', { resume: false });
        assert.deepEqual([...c.sandboxSession.ports], [4301], "the port a gave back, and only that one");
        await assert.rejects(shared.acquire('d', { resume: false }), (error) => SessionCapacityError.isInstance(error));
        await b.close();
        await c.close();
        await shared.shutdown();
      }),
    );

    test(
      "a suspended session's processes end, and its files are there when it resumes",
      withBackend(kind, async (backend) => {
        const shared = sharedSandbox({ open: backend.open, ports: [4311, 4312] });
        const a = await shared.acquire('a', { resume: false });
        const b = await shared.acquire('b', { resume: false });
        await a.sandboxSession.writeTextFile({ path: 'notes.txt', content: 'from a' });
        if (kind.native) {
          assert.equal(await text(b.sandboxSession, 'notes.txt'), null, 'a working directory each');
        }
        const sleeper = await a.sandboxSession.spawn({ command: 'sleep 30' });
        await a.suspend();
        const { exitCode } = await sleeper.wait();
        assert.notEqual(exitCode, 0, 'the view\'s process was stopped');
        assert.equal(await refuses(b.sandboxSession), false, 'the other session runs on');
        const again = await shared.acquire('a', { resume: true });
        assert.equal(await text(again.sandboxSession, 'notes.txt'), 'from a');
        await again.close();
        await b.close();
        await shared.shutdown();
      }),
    );

    test(
      'a failed open is forgotten, its port freed, and the next acquire opens again',
      withBackend(kind, async (backend) => {
        const { open, calls } = countingOpen(backend, { failing: [1] });
        const shared = sharedSandbox({ open, ports: [4321] });
        await assert.rejects(shared.acquire('a', { resume: false }), /open 1 failed/);
        const a = await shared.acquire('a', { resume: false });
        assert.equal(calls(), 2);
        assert.deepEqual([...a.sandboxSession.ports], [4321], 'the port is free again');
        await a.close();
        await shared.shutdown();
      }),
    );

    test(
      'stopWhenUnused: stopped once no session holds it, opened again with the next',
      withBackend(kind, async (backend) => {
        const { open, opened } = countingOpen(backend);
        const shared = sharedSandbox({ open, ports: [4331, 4332], stopWhenUnused: true });
        const a = await shared.acquire('a', { resume: false });
        const b = await shared.acquire('b', { resume: false });
        await a.suspend();
        assert.equal(await refuses(opened[0]), false, 'b still holds it');
        await b.close();
        assert.equal(await refuses(opened[0]), true, 'stopped');
        const again = await shared.acquire('a', { resume: true });
        assert.equal(opened.length, 2, 'opened again');
        assert.equal(await refuses(again.sandboxSession), false);
        await again.suspend();
        assert.equal(await refuses(opened[1]), true, 'stopped again');
        await shared.shutdown();
      }),
    );

    test(
      'shutdown stops it with stopWhenUnused only: without, it frees the ports and leaves it running',
      withBackend(kind, async (backend) => {
        const { open, opened } = countingOpen(backend);
        const shared = sharedSandbox({ open, ports: [4341] });
        const a = await shared.acquire('a', { resume: false });
        await a.suspend();
        assert.equal(await refuses(opened[0]), false, 'kept running without stopWhenUnused');
        await shared.shutdown();
        assert.equal(await refuses(opened[0]), false, 'still running after shutdown()');
        await opened[0].stop();
        const stopping = countingOpen(backend);
        const stops = sharedSandbox({ open: stopping.open, ports: [4342], stopWhenUnused: true });
        const held = await stops.acquire('b', { resume: false });
        await stops.shutdown();
        assert.equal(await refuses(stopping.opened[0]), true, 'stopped by shutdown() with stopWhenUnused');
        await held.close();
        await stops.shutdown();
      }),
    );

    test(
      'the manager hands the agent the view, suspends the session idle the longest when every port is taken, and refuses when none is idle',
      withBackend(kind, async (backend) => {
        const { open, opened } = countingOpen(backend);
        const holdA = createDeferred();
        const holdC = createDeferred();
        const agent = createFakeAgent({ turns: [{ text: 'a is used' }, { hold: holdA.promise }, { hold: holdC.promise }] });
        const errors = [];
        const sessions = createSessionManager({
          agent: () => agent,
          sandboxes: sharedSandbox({ open, ports: [4351, 4352] }),
          onError: (error, context) => errors.push({ error, context }),
        });
        const portsOf = (id) =>
          agent.calls
            .filter((call) => call.method === 'createSession' && call.sessionId === id)
            .map((call) => [...call.options.sandboxSession.ports]);
        await sessions.create({ id: 'a', metadata: {} });
        await untilStatus(sessions, 'a', 'idle');
        await sessions.create({ id: 'b', metadata: {} });
        await untilStatus(sessions, 'b', 'idle');
        assert.deepEqual(portsOf('a'), [[4351]]);
        assert.deepEqual(portsOf('b'), [[4352]]);
        if (kind.native) assert.equal(agent.calls[0].options.sandboxSession.constructor.name, 'NativeSandboxSession');
        else assert.equal(agent.calls[0].options.sandboxSession, opened[0].forks[0]);
        await (await sessions.send('a', { message: 'use a' })).done;

        await sessions.create({ id: 'c', metadata: {} });
        await untilStatus(sessions, 'c', 'idle');
        assert.equal((await sessions.get('b')).status, 'suspended', 'b was idle the longest');
        assert.deepEqual(portsOf('c'), [[4352]], "c took b's port");

        const busyA = await sessions.send('a', { message: 'hold' });
        const busyC = await sessions.send('c', { message: 'hold' });
        await assert.rejects(sessions.send('b', { message: 'back' }), (error) => {
          assert.ok(SessionCapacityError.isInstance(error), String(error));
          assert.equal(error.capacity, 2);
          return true;
        });
        holdA.resolve();
        await busyA.done;
        holdC.resolve();
        await busyC.done;
        await (await sessions.send('b', { message: 'back' })).done;
        assert.deepEqual(portsOf('b'), [[4352], [4351]], 'b resumed on the port a gave back');
        assert.equal(opened.length, 1, 'one sandbox all along');
        await sessions.shutdown();
        assert.equal(await refuses(opened[0]), false, 'shutdown() leaves the shared sandbox running without stopWhenUnused');
        await opened[0].stop();
        assert.deepEqual(errors, []);
      }),
    );
  });
}

// ─── sandboxPerSession() ──────────────────────────────────────────────────────────────────────────

test('sandboxPerSession() refuses options of the wrong shape', () => {
  const create = () => createFakeSandbox();
  for (const [options, path] of [
    [{}, 'create'],
    [{ create, resume: 1 }, 'resume'],
    [{ create, maxSessions: 0 }, 'maxSessions'],
    [{ create, maxSessions: 1.5 }, 'maxSessions'],
    [{ create, maxSessions: '2' }, 'maxSessions'],
    [{ create, provider: localSandbox({ root: tmpdir() }) }, 'provider'],
    [{ provider: {} }, 'provider.createSession'],
    [{ create, max: 1 }, 'max'],
  ]) {
    assert.throws(
      () => sandboxPerSession(options),
      (error) => SessionInputError.isInstance(error) && error.path === path,
      `${path}: ${Object.keys(options)}`,
    );
  }
  assert.equal(sandboxPerSession({ create }).capacity, undefined, 'unbounded');
  assert.equal(sandboxPerSession({ create, maxSessions: 3 }).capacity, 3);
});

test('sandboxPerSession() calls create and resume (sessionId, { abortSignal? }), as the reference does', async () => {
  const seen = [];
  const sandboxes = [];
  const strategy = sandboxPerSession({
    create: async (sessionId, { abortSignal }) => {
      seen.push(['create', sessionId, abortSignal]);
      const sandbox = createFakeSandbox();
      sandboxes.push(sandbox);
      return sandbox;
    },
    resume: async (sessionId, { abortSignal }) => {
      seen.push(['resume', sessionId, abortSignal]);
      return sandboxes[0];
    },
  });
  const controller = new AbortController();
  const lease = await strategy.acquire('s', { resume: false, abortSignal: controller.signal });
  await lease.suspend();
  const again = await strategy.acquire('s', { resume: true });
  await again.suspend();
  await strategy.discard('s');
  assert.deepEqual(seen, [
    ['create', 's', controller.signal],
    ['resume', 's', undefined],
    ['resume', 's', undefined],
  ]);
});

for (const kind of backends) {
  describe(`sandboxPerSession() with ${kind.name}`, { skip: kind.skip }, () => {
    test(
      'creates a sandbox per session, stops it when suspended, finds it again on resume, destroys it when closed',
      withBackend(kind, async (backend) => {
        const strategy = sandboxPerSession({ ...backend.perSession, maxSessions: 2 });
        assert.equal(strategy.capacity, 2);
        backend.track('a');
        backend.track('b');
        const a = await strategy.acquire('a', { resume: false });
        const b = await strategy.acquire('b', { resume: false });
        assert.notEqual(a.sandboxSession.id, b.sandboxSession.id, 'a sandbox each');
        await a.sandboxSession.writeTextFile({ path: 'notes.txt', content: 'from a' });
        assert.equal(await text(b.sandboxSession, 'notes.txt'), null);
        await assert.rejects(strategy.acquire('c', { resume: false }), (error) => {
          assert.ok(SessionCapacityError.isInstance(error), String(error));
          assert.equal(error.capacity, 2);
          return true;
        });

        await a.suspend();
        await a.suspend();
        assert.equal(await refuses(a.sandboxSession), true, 'stopped');
        assert.equal(await backend.exists('a'), true, 'kept while suspended');
        const again = await strategy.acquire('a', { resume: true });
        assert.equal(await text(again.sandboxSession, 'notes.txt'), 'from a', 'found again with its files');
        await again.close();
        assert.equal(await backend.exists('a'), false, 'destroyed when closed');
        await b.close();
        await b.close();
        assert.equal(await backend.exists('b'), false);
      }),
    );

    test(
      'a resume with nothing to resume creates; discard resumes and destroys',
      withBackend(kind, async (backend) => {
        const strategy = sandboxPerSession(backend.perSession);
        assert.equal(strategy.capacity, undefined);
        backend.track('fresh');
        const lease = await strategy.acquire('fresh', { resume: true });
        assert.equal(await refuses(lease.sandboxSession), false);
        await lease.suspend();
        assert.equal(await backend.exists('fresh'), true);
        await strategy.discard('fresh');
        assert.equal(await backend.exists('fresh'), false, 'discarded');
        await strategy.discard('never-was');
        await strategy.shutdown();
      }),
    );

    test(
      'the manager gives each session its own sandbox, stopped when suspended, destroyed when closed',
      withBackend(kind, async (backend) => {
        const agent = createFakeAgent();
        const sessions = createSessionManager({
          agent: () => agent,
          sandboxes: sandboxPerSession({ ...backend.perSession, maxSessions: 1 }),
          suspendIdleWhenFull: false,
          onError: () => {},
        });
        backend.track('p1');
        backend.track('p2');
        await sessions.create({ id: 'p1', metadata: {} });
        await untilStatus(sessions, 'p1', 'idle');
        const sandboxOf = (id) =>
          agent.calls.filter((call) => call.method === 'createSession' && call.sessionId === id).at(-1).options.sandboxSession;
        const first = sandboxOf('p1');
        await first.writeTextFile({ path: 'kept.txt', content: 'kept' });
        await assert.rejects(sessions.create({ id: 'p2', metadata: {} }), (error) => SessionCapacityError.isInstance(error));
        await sessions.suspend('p1');
        assert.equal(await refuses(first), true, 'stopped with its session');
        await (await sessions.send('p1', { message: 'back' })).done;
        assert.equal(await text(sandboxOf('p1'), 'kept.txt'), 'kept');
        await sessions.close('p1');
        assert.equal(await backend.exists('p1'), false, 'destroyed with its session');
        await sessions.shutdown();
      }),
    );
  });
}
