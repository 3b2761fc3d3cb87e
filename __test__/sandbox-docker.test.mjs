// dockerSandbox() through the addon, on a real Docker Engine with the test image
// (scripts/docker/start.sh, scripts/docker/build-test-image.sh). Skipped without them, unless
// HARNESS_SESSIONS_REQUIRE_DOCKER=1: then it fails. Its timings are measured by `npm run bench`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { HarnessAgent } from '@ai-sdk/harness/agent';
import { dockerHost as host, dockerSkipFor, image } from './support/docker.mjs';

const require = createRequire(import.meta.url);
const { dockerSandbox, isNativeSandboxSession } = require('../js/sandbox.js');
const { sandboxPerSession, sharedSandbox } = require('../js/strategies.js');
const { SessionInputError, SessionError } = require('../js/errors.js');

const skip = dockerSkipFor(test);
const dockerTest = (name, fn) => test(name, { skip }, fn);

let counter = 0;
const fresh = (name) => `${name}-${process.pid}-${++counter}`;
const options = { image, host, namePrefix: 'hs-jstest-' };

async function text(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

/** `GET url` from the host: the body, retried while the server starts (up to 15 s). */
async function get(url) {
  let last;
  for (let i = 0; i < 150; i++) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(3000) });
      return await response.text();
    } catch (error) {
      last = error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw last;
}

/** Runs `nc` to `host port` from `session`: its exit code and what it said. */
async function connectFrom(session, host, port) {
  const { exitCode, stdout, stderr } = await session.run({ command: `nc -w 3 ${host} ${port} </dev/null` });
  return { exitCode, said: stdout + stderr };
}

function minimalHarness() {
  const state = { type: 'resume-session', harnessId: 'minimal', specificationVersion: 'harness-v1', data: {} };
  const never = () => {
    throw new Error('no turns in this harness');
  };
  return {
    specificationVersion: 'harness-v1',
    harnessId: 'minimal',
    builtinTools: {},
    async doStart({ sessionId }) {
      return {
        sessionId,
        isResume: false,
        doPromptTurn: never,
        doContinueTurn: never,
        doSuspendTurn: never,
        doCompact: never,
        doDetach: async () => state,
        doStop: async () => state,
        doDestroy: async () => {},
      };
    },
  };
}

dockerTest('a container session: run, spawn, abort, files, refusals', async () => {
  const sandboxes = dockerSandbox(options);
  assert.equal(sandboxes.providerId, 'harness-sessions.docker');
  const session = await sandboxes.createSession({ sessionId: fresh('js') });
  try {
    assert.ok(isNativeSandboxSession(session));
    assert.equal(session.defaultWorkingDirectory, '/workspace');
    assert.deepEqual(session.ports, []);
    assert.match(session.description, /non-root user 1000:1000/);
    assert.deepEqual(await session.run({ command: 'id -u; echo e >&2; exit 5' }), { exitCode: 5, stdout: '1000\n', stderr: 'e\n' });
    assert.equal((await session.run({ command: 'echo "$A"', env: { A: 'b' } })).stdout, 'b\n');

    const proc = await session.spawn({ command: 'echo one; sleep 0.2; echo two' });
    const [out, exit] = await Promise.all([text(proc.stdout), proc.wait()]);
    assert.deepEqual([out, exit], ['one\ntwo\n', { exitCode: 0 }]);

    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(new Error('cut')), 150);
    await assert.rejects(session.run({ command: 'sleep 30', abortSignal: controller.signal }), /cut/);
    assert.ok(Date.now() - started < 5000);

    await session.writeTextFile({ path: 'notes/a.txt', content: 'hello\nworld\n' });
    assert.equal(await session.readTextFile({ path: '/workspace/notes/a.txt', startLine: 2 }), 'world\n');
    assert.equal(await text(await session.readFile({ path: 'notes/a.txt' })), 'hello\nworld\n');
    const bytes = new Uint8Array(100000).map((_, i) => (i * 7) % 256);
    await session.writeFile({ path: 'b.bin', content: new Blob([bytes]).stream() });
    assert.deepEqual(await session.readBinaryFile({ path: 'b.bin' }), bytes);
    assert.equal(await session.readTextFile({ path: 'missing' }), null);
    assert.equal(await session.readFile({ path: 'missing/deeper' }), null);
    await session.writeTextFile({ path: '/home/sandbox/.config/c.json', content: '{}' });
    assert.equal((await session.run({ command: 'cat ~/.config/c.json; stat -c %u ~/.config/c.json' })).stdout, '{}1000\n');

    await session.run({ command: 'ln -s /etc out' });
    for (const [action, path] of [
      [() => session.readTextFile({ path: '../etc/passwd' }), '../etc/passwd'],
      [() => session.readTextFile({ path: '/etc/passwd' }), '/etc/passwd'],
      [() => session.writeTextFile({ path: 'out/x', content: 'x' }), 'out/x'],
    ]) {
      await assert.rejects(action(), (error) => SessionInputError.isInstance(error) && error.path === path);
    }
    await assert.rejects(session.getPortEndpoint({ port: 4000 }), /exposes no port/);
  } finally {
    await session.destroy();
  }
});

dockerTest('stop, resume from a new provider, destroy; errors in words', async () => {
  const id = fresh('resume');
  const first = await dockerSandbox(options).createSession({ sessionId: id });
  await first.writeTextFile({ path: 'kept', content: 'yes' });
  await first.stop();
  await assert.rejects(first.run({ command: 'true' }), /is stopped: resume the session/);
  const again = await dockerSandbox(options).resumeSession({ sessionId: id });
  assert.equal(await again.readTextFile({ path: 'kept' }), 'yes');
  await again.destroy();
  await again.destroy();
  await assert.rejects(again.run({ command: 'true' }), /is gone/);
  await assert.rejects(dockerSandbox(options).resumeSession({ sessionId: id }), (error) => {
    assert.ok(SessionError.isInstance(error));
    assert.match(error.message, /No sandbox container hs-jstest-resume/);
    return true;
  });
  await assert.rejects(
    dockerSandbox({ ...options, image: 'harness-sessions-test:absent' }).createSession({ sessionId: fresh('x') }),
    /The image harness-sessions-test:absent is not on the Docker Engine/,
  );
  await assert.rejects(
    dockerSandbox({ ...options, host: 'unix:///nonexistent.sock' }).createSession({ sessionId: fresh('x') }),
    /No Docker Engine at unix:\/\/\/nonexistent.sock/,
  );
  assert.throws(() => dockerSandbox({ host }), (error) => SessionInputError.isInstance(error) && error.path === 'image');
  assert.throws(() => dockerSandbox({ ...options, memory: 'lots' }), (error) => error.path === 'memory');
});

dockerTest('open() and fork(): views with their own ports and directories', async () => {
  const open = dockerSandbox({ ...options, ports: [41001], name: fresh('shared') });
  const shared = await open();
  try {
    assert.deepEqual(shared.ports, [41001]);
    const view = await shared.fork({ ports: [41002], workingDirectory: 'sessions/s1' });
    assert.ok(isNativeSandboxSession(view));
    assert.equal(view.defaultWorkingDirectory, '/workspace/sessions/s1');
    // The container has no network: the view's port is reached on a port of the host's loopback
    // that the kernel picked for it.
    const { url } = await view.getPortEndpoint({ port: 41002, protocol: 'ws' });
    assert.match(url, /^ws:\/\/127\.0\.0\.1:\d+$/);
    assert.notEqual(url, 'ws://127.0.0.1:41002');
    await view.writeTextFile({ path: 'index.html', content: 'from the view' });
    assert.equal((await view.run({ command: 'httpd -p 41002 -h .' })).exitCode, 0);
    assert.match(await get(url.replace('ws:', 'http:')), /from the view/);
    assert.equal((await view.run({ command: 'pwd' })).stdout, '/workspace/sessions/s1\n');
    const sameAgain = await open();
    assert.equal(sameAgain.id, shared.id);

    // The real HarnessAgent on a caller-owned view, as sharedSandbox() hands it.
    const agent = new HarnessAgent({ harness: minimalHarness() });
    const owned = await agent.createSession({ sessionId: 's1', sandboxSession: view });
    assert.equal((await view.run({ command: 'ls -d minimal-s1' })).exitCode, 0);
    await owned.destroy();
    assert.equal((await shared.run({ command: 'echo still' })).stdout, 'still\n');
  } finally {
    await shared.destroy();
  }
});

dockerTest('the real HarnessAgent creates a session on an agent-owned container', async () => {
  const sandboxes = dockerSandbox(options);
  const agent = new HarnessAgent({ harness: minimalHarness(), sandbox: sandboxes });
  const sessionId = fresh('agent');
  let firstCreate = 0;
  const direct = await sandboxes.createSession({
    sessionId: `${sessionId}-direct`,
    onFirstCreate: async (restricted) => {
      firstCreate += 1;
      assert.equal(restricted.stop, undefined);
      await restricted.writeTextFile({ path: 'first', content: '1' });
    },
  });
  assert.equal(firstCreate, 1);
  assert.equal(await direct.readTextFile({ path: 'first' }), '1');
  await direct.destroy();

  const harnessSession = await agent.createSession({ sessionId });
  const resumed = await sandboxes.resumeSession({ sessionId });
  assert.equal((await resumed.run({ command: `ls -d /workspace/minimal-${sessionId}` })).exitCode, 0);
  await harnessSession.destroy();
  await assert.rejects(sandboxes.resumeSession({ sessionId }), /No sandbox container/);
});

dockerTest('a sandbox with ports reaches nothing of the host; each session has its own host port', async () => {
  // A server of the test on the host's loopback: what no sandbox may reach.
  const { createServer } = await import('node:net');
  const server = createServer((socket) => socket.end('HOST SERVICE'));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const hostPort = server.address().port;
  const strategy = sandboxPerSession({ provider: dockerSandbox({ ...options, ports: [41011] }) });
  const [a, b] = [await strategy.acquire(fresh('net-a'), { resume: false }), await strategy.acquire(fresh('net-b'), { resume: false })];
  try {
    const [one, two] = [a.sandboxSession, b.sandboxSession];
    assert.deepEqual([...one.ports], [41011]);
    assert.deepEqual([...two.ports], [41011]);
    const urlOne = (await one.getPortEndpoint({ port: 41011 })).url;
    const urlTwo = (await two.getPortEndpoint({ port: 41011 })).url;
    assert.notEqual(urlOne, urlTwo, 'two sessions are handed different host ports');
    for (const [session, text] of [[one, 'session one'], [two, 'session two']]) {
      await session.writeTextFile({ path: 'site/index.html', content: text });
      assert.equal((await session.run({ command: 'httpd -p 41011 -h site' })).exitCode, 0);
    }
    // Its own port still serves the host.
    assert.equal(await get(urlOne), 'session one');
    assert.equal(await get(urlTwo), 'session two');
    // From inside: the host's loopback, the other session's host port, the metadata address.
    const otherPort = new URL(urlTwo).port;
    for (const [host, port] of [['127.0.0.1', hostPort], ['127.0.0.1', otherPort], ['169.254.169.254', 80]]) {
      const { exitCode, said } = await connectFrom(one, host, port);
      assert.notEqual(exitCode, 0, `${host}:${port} was reached from the sandbox: ${said}`);
      assert.match(said, /refused|unreachable/, `${host}:${port}`);
    }
    assert.equal((await one.run({ command: 'ls /sys/class/net' })).stdout, 'lo\n');
  } finally {
    await a.close();
    await b.close();
    server.close();
  }
});

dockerTest('sharedSandbox(): a daemon left by a closed session is gone before its port is handed out again', async () => {
  const provider = dockerSandbox({ ...options, name: fresh('daemons') });
  const shared = sharedSandbox({ open: provider, ports: [41021] });
  const first = await shared.acquire(fresh('first'), { resume: false });
  const view = first.sandboxSession;
  await view.writeTextFile({ path: 'index.html', content: 'left behind' });
  // `httpd` without -f makes itself a daemon; `setsid` and `nohup` would leave the group too.
  assert.equal((await view.run({ command: 'httpd -p 41021 -h . && nohup sleep 600 >/dev/null 2>&1 &' })).exitCode, 0);
  assert.equal(await get((await view.getPortEndpoint({ port: 41021 })).url), 'left behind');
  await first.close();
  const second = await shared.acquire(fresh('second'), { resume: false });
  try {
    assert.deepEqual([...second.sandboxSession.ports], [41021]);
    const { exitCode, said } = await connectFrom(second.sandboxSession, '127.0.0.1', 41021);
    assert.notEqual(exitCode, 0, `the closed session's daemon still answers: ${said}`);
    const sleeping = await second.sandboxSession.run({ command: "ps -o args | grep -c '^sleep 600' || true" });
    assert.equal(sleeping.stdout.trim(), '0', 'a process of the closed session outlived it');
  } finally {
    await second.close();
    await shared.shutdown?.();
    await (await provider()).destroy();
  }
});

dockerTest('diskBytes: writes past the bound fail with ENOSPC; files survive a stop; destroy removes the image', async () => {
  const { readdirSync } = await import('node:fs');
  const directory = process.env.HARNESS_SESSIONS_DISK_DIR || '/var/lib/harness-sessions/disks';
  const images = () => readdirSync(directory).filter((file) => file.startsWith(`hs-jstest-${id}-`) && file.endsWith('.img'));
  assert.throws(
    () => dockerSandbox({ ...options, diskBytes: 'lots' }),
    (error) => SessionInputError.isInstance(error) && error.path === 'diskBytes',
  );
  const id = fresh('disk');
  const session = await dockerSandbox({ ...options, diskBytes: '64m' }).createSession({ sessionId: id });
  try {
    assert.equal(images().length, 1, `no image of ${id} in ${directory}`);
    const written = await session.run({ command: 'dd if=/dev/zero of=/tmp/big bs=1M count=100 2>&1; code=$?; rm -f /tmp/big; exit $code' });
    assert.notEqual(written.exitCode, 0);
    assert.match(written.stdout, /No space left on device/);
    await session.writeTextFile({ path: 'kept', content: 'yes' });
    await session.stop();
    const again = await dockerSandbox({ ...options, diskBytes: '64m' }).resumeSession({ sessionId: id });
    assert.equal(await again.readTextFile({ path: 'kept' }), 'yes');
  } finally {
    await session.destroy();
  }
  assert.deepEqual(images(), [], 'the image is left after destroy');
});
