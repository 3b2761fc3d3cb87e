// localSandbox() through the addon: the shapes HarnessAgent expects, streams, files and their
// refusals, fork, resume, and the real HarnessAgent creating a session on it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HarnessAgent } from '@ai-sdk/harness/agent';

const require = createRequire(import.meta.url);
const { localSandbox, isNativeSandboxSession } = require('../js/sandbox.js');
const { SessionInputError, SessionError } = require('../js/errors.js');

const root = mkdtempSync(join(tmpdir(), 'hs-local-'));
process.on('exit', () => rmSync(root, { recursive: true, force: true }));
let counter = 0;
const fresh = (name) => `${name}-${process.pid}-${++counter}`;
const sandboxes = localSandbox({ root, ports: [4100] });

async function text(stream) {
  const chunks = [];
  for await (const chunk of stream) {
    assert.ok(chunk instanceof Uint8Array);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A model-free harness: enough for HarnessAgent.createSession (notes §2). */
function minimalHarness() {
  return {
    specificationVersion: 'harness-v1',
    harnessId: 'minimal',
    builtinTools: {},
    async doStart({ sessionId }) {
      const never = () => {
        throw new Error('no turns in this harness');
      };
      return {
        sessionId,
        isResume: false,
        doPromptTurn: never,
        doContinueTurn: never,
        doSuspendTurn: never,
        doCompact: never,
        doDetach: async () => ({ type: 'resume-session', harnessId: 'minimal', specificationVersion: 'harness-v1', data: {} }),
        doStop: async () => ({ type: 'resume-session', harnessId: 'minimal', specificationVersion: 'harness-v1', data: {} }),
        doDestroy: async () => {},
      };
    },
  };
}

test('the provider has the HarnessV1SandboxProvider shape and is an open function', () => {
  assert.equal(typeof sandboxes, 'function');
  assert.equal(sandboxes.specificationVersion, 'harness-sandbox-v1');
  assert.equal(sandboxes.providerId, 'harness-sessions.local');
  assert.equal(typeof sandboxes.createSession, 'function');
  assert.equal(typeof sandboxes.resumeSession, 'function');
  assert.throws(() => localSandbox({}), (error) => SessionInputError.isInstance(error) && error.path === 'root');
});

test('run and spawn: output, exit code, env, working directory, abort', async () => {
  const session = await sandboxes.createSession({ sessionId: fresh('exec') });
  try {
    assert.ok(isNativeSandboxSession(session));
    assert.match(session.description, /NOT isolated/);
    assert.deepEqual(await session.run({ command: 'echo out; echo err >&2; echo "$X"; exit 4', env: { X: 'y' } }), {
      exitCode: 4,
      stdout: 'out\ny\n',
      stderr: 'err\n',
    });
    await session.run({ command: 'mkdir -p a/b' });
    assert.equal((await session.run({ command: 'pwd', workingDirectory: 'a/b' })).stdout, `${session.defaultWorkingDirectory}/a/b\n`);

    const proc = await session.spawn({ command: 'echo one; sleep 0.3; echo two >&2; exit 2' });
    assert.equal(typeof proc.pid, 'number');
    assert.ok(proc.stdout instanceof ReadableStream && proc.stderr instanceof ReadableStream);
    const [out, err, exit] = await Promise.all([text(proc.stdout), text(proc.stderr), proc.wait()]);
    assert.deepEqual([out, err, exit], ['one\n', 'two\n', { exitCode: 2 }]);

    const controller = new AbortController();
    const long = await session.spawn({ command: 'sleep 30', abortSignal: controller.signal });
    const started = Date.now();
    setTimeout(() => controller.abort(new Error('stop it')), 100);
    await assert.rejects(long.wait(), /stop it/);
    assert.ok(Date.now() - started < 5000);

    const runController = new AbortController();
    setTimeout(() => runController.abort(new Error('enough')), 100);
    await assert.rejects(session.run({ command: 'sleep 30', abortSignal: runController.signal }), /enough/);

    const killed = await session.spawn({ command: 'sleep 30' });
    await killed.kill();
    await killed.kill();
    assert.notEqual((await killed.wait()).exitCode, 0);

    // Large output arrives whole, in few chunks.
    const big = await session.spawn({ command: 'head -c 3000000 /dev/zero' });
    let chunks = 0;
    let bytes = 0;
    for await (const chunk of big.stdout) {
      chunks += 1;
      bytes += chunk.byteLength;
    }
    assert.equal(bytes, 3000000);
    assert.ok(chunks < 200, `${chunks} chunks`);
  } finally {
    await session.destroy();
  }
});

test('files: text, bytes, streams, missing files, refused paths', async () => {
  const session = await sandboxes.createSession({ sessionId: fresh('files') });
  try {
    assert.equal(await session.readTextFile({ path: 'none.txt' }), null);
    assert.equal(await session.readBinaryFile({ path: 'none.bin' }), null);
    assert.equal(await session.readFile({ path: 'none' }), null);

    await session.writeTextFile({ path: 'dir/lines.txt', content: 'a\nb\nc\nd\n' });
    assert.equal(await session.readTextFile({ path: 'dir/lines.txt' }), 'a\nb\nc\nd\n');
    assert.equal(await session.readTextFile({ path: 'dir/lines.txt', startLine: 2, endLine: 3 }), 'b\nc\n');
    assert.equal(await session.readTextFile({ path: 'dir/lines.txt', startLine: 3, endLine: 99 }), 'c\nd\n');
    await session.writeTextFile({ path: 'latin.txt', content: 'é', encoding: 'latin1' });
    assert.deepEqual([...(await session.readBinaryFile({ path: 'latin.txt' }))], [0xe9]);
    assert.equal(await session.readTextFile({ path: 'latin.txt', encoding: 'latin1' }), 'é');

    const bytes = new Uint8Array(70000).map((_, i) => i % 256);
    await session.writeBinaryFile({ path: `${session.defaultWorkingDirectory}/b.bin`, content: bytes });
    assert.deepEqual(await session.readBinaryFile({ path: 'b.bin' }), bytes);

    const parts = ['stream', 'ed ', 'content'];
    await session.writeFile({
      path: 's/streamed.txt',
      content: new ReadableStream({
        pull(controller) {
          const next = parts.shift();
          if (next === undefined) controller.close();
          else controller.enqueue(new TextEncoder().encode(next));
        },
      }),
    });
    assert.equal(await text(await session.readFile({ path: 's/streamed.txt' })), 'streamed content');
    const failing = new ReadableStream({
      start(controller) {
        controller.enqueue(new Uint8Array([1]));
        controller.error(new Error('source broke'));
      },
    });
    await assert.rejects(session.writeFile({ path: 's/streamed.txt', content: failing }), /source broke/);
    assert.equal(await session.readTextFile({ path: 's/streamed.txt' }), 'streamed content', 'a failed write leaves the file');

    await session.run({ command: 'ln -s /etc out' });
    for (const [action, path, words] of [
      [() => session.readTextFile({ path: '../x' }), '../x', '`..`'],
      [() => session.writeTextFile({ path: '/etc/x', content: 'x' }), '/etc/x', 'outside'],
      [() => session.readBinaryFile({ path: 'out/passwd' }), 'out/passwd', 'symbolic link'],
      [() => session.readFile({ path: 'out/hostname' }), 'out/hostname', 'symbolic link'],
    ]) {
      await assert.rejects(action(), (error) => {
        assert.ok(SessionInputError.isInstance(error), String(error));
        assert.ok(SessionError.isInstance(error));
        assert.equal(error.code, 'SESSION_INPUT');
        assert.equal(error.path, path);
        assert.ok(error.message.includes(words), error.message);
        return true;
      });
    }
  } finally {
    await session.destroy();
  }
});

test('fork: its own port and working directory; restricted(); stop, resume, destroy', async () => {
  const id = fresh('fork');
  const session = await sandboxes.createSession({ sessionId: id });
  assert.deepEqual(session.ports, [4100]);
  const view = await session.fork({ ports: [4101], workingDirectory: 'views/one' });
  assert.ok(isNativeSandboxSession(view));
  assert.equal(view.id, session.id);
  assert.deepEqual(view.ports, [4101]);
  assert.equal(view.defaultWorkingDirectory, `${session.defaultWorkingDirectory}/views/one`);
  assert.deepEqual(await view.getPortEndpoint({ port: 4101, protocol: 'ws' }), { url: 'ws://127.0.0.1:4101' });
  assert.equal(await view.getPortUrl({ port: 4101 }), 'http://127.0.0.1:4101');
  await assert.rejects(view.getPortEndpoint({ port: 4100 }), (error) => SessionInputError.isInstance(error));
  await view.writeTextFile({ path: 'mine.txt', content: 'view' });
  assert.equal(await session.readTextFile({ path: 'views/one/mine.txt' }), 'view');

  const restricted = session.restricted();
  assert.equal(restricted.stop, undefined);
  assert.equal(restricted.destroy, undefined);
  assert.equal((await restricted.run({ command: 'echo r' })).stdout, 'r\n');
  assert.equal(restricted.description, session.description);

  await session.writeTextFile({ path: 'kept.txt', content: 'kept' });
  await session.stop();
  await session.stop();
  const again = await localSandbox({ root, ports: [4100] }).resumeSession({ sessionId: id });
  assert.equal(await again.readTextFile({ path: 'kept.txt' }), 'kept');
  await again.destroy();
  assert.ok(!existsSync(join(root, id)));
  await assert.rejects(sandboxes.resumeSession({ sessionId: id }), /No sandbox/);
});

test('the real HarnessAgent creates a session on a local sandbox, owned or shared', async () => {
  const agent = new HarnessAgent({ harness: minimalHarness(), sandbox: sandboxes });
  const sessionId = fresh('agent');
  const harnessSession = await agent.createSession({ sessionId });
  const folder = join(root, sessionId, 'workspace', `minimal-${sessionId}`);
  assert.ok(existsSync(folder), `${folder} was made by mkdir -p through run`);
  await harnessSession.destroy();
  assert.ok(!existsSync(join(root, sessionId)), 'an agent-owned sandbox is destroyed with the session');

  // Caller-owned: the open() of sharedSandbox(), forked per session.
  const shared = await sandboxes({ name: fresh('shared') });
  const view = await shared.fork({ ports: [4102], workingDirectory: 's1' });
  const owned = await new HarnessAgent({ harness: minimalHarness() }).createSession({ sessionId: 's1', sandboxSession: view });
  assert.ok(existsSync(join(view.defaultWorkingDirectory, 'minimal-s1')));
  await owned.destroy();
  assert.ok(existsSync(view.defaultWorkingDirectory), 'a caller-owned sandbox is left alone');
  await shared.destroy();
});

test('run(): output past 64 MiB on a stream rejects with a SessionError, and the command is killed', { timeout: 120_000 }, async () => {
  const session = await sandboxes.createSession({ sessionId: fresh('flood') });
  try {
    await assert.rejects(session.run({ command: 'head -c 70000000 /dev/zero; sleep 600' }), (error) => {
      assert.ok(SessionError.isInstance(error), String(error));
      assert.match(error.message, /more than 64 MiB to stdout/);
      return true;
    });
    await assert.rejects(session.run({ command: 'head -c 70000000 /dev/zero >&2' }), /more than 64 MiB to stderr/);
    // Just under the bound is kept whole.
    const kept = await session.run({ command: 'head -c 1000000 /dev/zero | tr "\\0" x' });
    assert.equal(kept.stdout.length, 1_000_000);
  } finally {
    await session.destroy();
  }
});

test('the server keeps its secrets and a session its processes: environ, uid, background processes', { timeout: 120_000 }, async () => {
  const session = await sandboxes.createSession({ sessionId: fresh('guard') });
  try {
    const environ = await session.run({ command: `cat /proc/${process.pid}/environ` });
    assert.notEqual(environ.exitCode, 0, 'the server environment was read');
    assert.equal(environ.stdout, '');
    if (process.getuid?.() === 0) {
      const uid = await session.run({ command: 'id -u' });
      assert.notEqual(uid.stdout.trim(), '0', 'a command of a root server ran as root');
      assert.notEqual(uid.stdout.trim(), '', uid.stderr);
    }
    const started = await session.run({
      command: 'setsid sleep 600 >/dev/null 2>&1 & echo $!; nohup sleep 601 >/dev/null 2>&1 & echo $!; sleep 602 >/dev/null 2>&1 & echo $!',
    });
    const pids = started.stdout.split(/\s+/).filter(Boolean).map(Number);
    assert.equal(pids.length, 3, started.stderr);
    await session.destroy();
    for (const pid of pids) {
      let alive = true;
      for (let i = 0; i < 300 && alive; i++) {
        try {
          process.kill(pid, 0);
          await new Promise((resolve) => setTimeout(resolve, 100));
        } catch {
          alive = false;
        }
      }
      assert.equal(alive, false, `process ${pid} outlived close`);
    }
  } finally {
    await session.destroy();
  }
});
