// The fake sandbox of `testing/`: commands and files in a folder of this host, views with ports of
// their own, and the counts and log tests assert on.

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { HarnessAgent } from '@ai-sdk/harness/agent';

import { createFakeSandbox, createScriptedHarness } from '../testing/index.mjs';

const bytesOf = (text) => new TextEncoder().encode(text);
const streamOf = (text) =>
  new ReadableStream({
    start(controller) {
      controller.enqueue(bytesOf(text));
      controller.close();
    },
  });

describe('createFakeSandbox', () => {
  it('runs commands with sh in its folder, with their env and exit code', async () => {
    const sandbox = createFakeSandbox({ env: { GREETING: 'hello' } });
    const result = await sandbox.run({ command: 'echo "$GREETING $NAME"; pwd; echo oops >&2; exit 3', env: { NAME: 'Ada' } });
    assert.deepEqual(result, { exitCode: 3, stdout: `hello Ada\n${sandbox.root}\n`, stderr: 'oops\n' });
    assert.equal(sandbox.defaultWorkingDirectory, sandbox.root);

    await sandbox.run({ command: 'mkdir -p sub && touch here', workingDirectory: '.' });
    const inSub = await sandbox.run({ command: 'pwd', workingDirectory: 'sub' });
    assert.equal(inSub.stdout, `${join(sandbox.root, 'sub')}\n`);
  });

  it('kills a command when its signal aborts, rejecting with the reason', async () => {
    const sandbox = createFakeSandbox();
    const controller = new AbortController();
    const startedAt = Date.now();
    const running = sandbox.run({ command: 'sleep 10', abortSignal: controller.signal });
    setTimeout(() => controller.abort(new Error('enough')), 30);
    await assert.rejects(running, { message: 'enough' });
    assert.ok(Date.now() - startedAt < 5000);
  });

  it('spawns a process whose output streams and that can be killed', async () => {
    const sandbox = createFakeSandbox();
    const child = await sandbox.spawn({ command: 'echo ready; sleep 10' });
    const { value } = await child.stdout.getReader().read();
    assert.equal(new TextDecoder().decode(value), 'ready\n');
    await child.kill();
    assert.equal((await child.wait()).exitCode, 137);
  });

  it('reads and writes text, bytes and streams, creating parent folders', async () => {
    const sandbox = createFakeSandbox();
    await sandbox.writeTextFile({ path: 'a/b/notes.md', content: 'one\ntwo\nthree' });
    await sandbox.writeBinaryFile({ path: join(sandbox.root, 'bytes.bin'), content: bytesOf('raw') });
    await sandbox.writeFile({ path: 'streamed.txt', content: streamOf('flowing') });

    assert.equal(readFileSync(join(sandbox.root, 'a/b/notes.md'), 'utf-8'), 'one\ntwo\nthree');
    assert.equal(await sandbox.readTextFile({ path: 'a/b/notes.md', startLine: 2, endLine: 2 }), 'two');
    assert.equal(await sandbox.readTextFile({ path: 'a/b/notes.md', startLine: 3, endLine: 10 }), 'three');
    assert.deepEqual(await sandbox.readBinaryFile({ path: 'bytes.bin' }), bytesOf('raw'));
    assert.equal(await new Response(await sandbox.readFile({ path: 'streamed.txt' })).text(), 'flowing');
  });

  it('reads a missing file as null', async () => {
    const sandbox = createFakeSandbox();
    assert.equal(await sandbox.readTextFile({ path: 'nope.txt' }), null);
    assert.equal(await sandbox.readBinaryFile({ path: 'nope.txt' }), null);
    assert.equal(await sandbox.readFile({ path: 'nope.txt' }), null);
  });

  it('gives the endpoint of its ports only', async () => {
    const sandbox = createFakeSandbox({ ports: [4100, 4101] });
    assert.deepEqual(await sandbox.getPortEndpoint({ port: 4101, protocol: 'ws' }), { url: 'ws://127.0.0.1:4101' });
    assert.equal(await sandbox.getPortUrl({ port: 4100 }), 'http://127.0.0.1:4100');
    await assert.rejects(sandbox.getPortEndpoint({ port: 5000 }), /Port 5000 is not exposed/);
  });

  it('forks views with ports of their own over the same files, and counts the calls', async () => {
    const sandbox = createFakeSandbox({ id: 'box', ports: [4000] });
    const view = sandbox.fork({ ports: [4001] });
    await view.writeTextFile({ path: 'shared.txt', content: 'from the view' });

    assert.equal(view.id, 'box/fork-1');
    assert.deepEqual(view.ports, [4001]);
    assert.equal(await sandbox.readTextFile({ path: 'shared.txt' }), 'from the view');
    await assert.rejects(view.getPortEndpoint({ port: 4000 }), /not exposed/);
    assert.deepEqual(sandbox.counts, { fork: 1, release: 0, stop: 0, destroy: 0 });
    assert.deepEqual(sandbox.forks, [view]);
    assert.deepEqual(
      sandbox.log.map(({ op, id }) => `${op} ${id}`),
      ['fork box', 'write box/fork-1', 'read box'],
    );
  });

  it('releases a view: its processes die, the sandbox runs on', async () => {
    const sandbox = createFakeSandbox();
    const view = sandbox.fork({ ports: [4001] });
    const child = await view.spawn({ command: 'sleep 10' });
    await view.release();

    assert.equal((await child.wait()).exitCode, 137);
    assert.equal(view.state, 'released');
    assert.equal(view.counts.release, 1);
    await assert.rejects(view.run({ command: 'true' }), /is released/);
    assert.equal((await sandbox.run({ command: 'true' })).exitCode, 0);
  });

  it('stops: every view with it, and nothing runs any more', async () => {
    const sandbox = createFakeSandbox();
    const view = sandbox.fork({ ports: [4001] });
    const child = await view.spawn({ command: 'sleep 10' });
    await sandbox.stop();

    assert.equal((await child.wait()).exitCode, 137);
    assert.equal(sandbox.state, 'stopped');
    assert.equal(view.state, 'stopped');
    await assert.rejects(sandbox.run({ command: 'true' }), /is stopped/);
    await assert.rejects(view.readTextFile({ path: 'x' }), /is stopped/);
    assert.throws(() => sandbox.fork({ ports: [4002] }), /is stopped/);
    assert.equal(sandbox.counts.stop, 1);
  });

  it('removes its own folder when destroyed, never one it was given', async () => {
    const owned = createFakeSandbox();
    await owned.destroy();
    assert.equal(existsSync(owned.root), false);
    assert.equal(owned.state, 'destroyed');

    const root = mkdtempSync(join(tmpdir(), 'given-'));
    writeFileSync(join(root, 'keep.txt'), 'kept');
    const given = createFakeSandbox({ root });
    await given.destroy();
    assert.equal(readFileSync(join(root, 'keep.txt'), 'utf-8'), 'kept');

    const again = createFakeSandbox({ root });
    assert.equal(await again.readTextFile({ path: 'keep.txt' }), 'kept', 'a new sandbox on the folder finds its files');
  });

  it('gives a restricted view that cannot stop it', async () => {
    const sandbox = createFakeSandbox();
    const restricted = sandbox.restricted();
    assert.deepEqual(Object.keys(restricted).sort(), [
      'description',
      'readBinaryFile',
      'readFile',
      'readTextFile',
      'run',
      'spawn',
      'writeBinaryFile',
      'writeFile',
      'writeTextFile',
    ]);
    assert.equal((await restricted.run({ command: 'echo hi' })).stdout, 'hi\n');
  });

  it('is a sandbox HarnessAgent creates sessions in, which it never stops', async () => {
    const sandbox = createFakeSandbox();
    const view = sandbox.fork({ ports: [4001] });
    const agent = new HarnessAgent({ harness: createScriptedHarness() });
    const session = await agent.createSession({ sessionId: 'chat-1', sandboxSession: view });
    await session.stop();

    assert.equal(existsSync(join(sandbox.root, 'scripted-chat-1')), true);
    assert.deepEqual(sandbox.log[1], { op: 'run', id: view.id, command: 'mkdir -p "$WORK_DIR"' });
    assert.deepEqual(view.counts, { fork: 0, release: 0, stop: 0, destroy: 0 });
  });
});
