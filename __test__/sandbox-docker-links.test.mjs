// dockerSandbox(): the file API resolves paths as the sandbox's user inside the container, so no
// link swapped in by a program of the sandbox leads it to a root-only file or into /etc (issue
// 13, finding 1), and its errors carry no path of the host. 1,000 file operations (500 reads, 500
// writes) race the swapping here, 10,000 with HARNESS_SESSIONS_LONG=1. Skipped without the Docker Engine and its test image,
// unless HARNESS_SESSIONS_REQUIRE_DOCKER=1.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { request } from 'node:http';
import { dockerHost as host, dockerSkipFor, image } from './support/docker.mjs';

const require = createRequire(import.meta.url);
const { dockerSandbox } = require('../js/sandbox.js');

const skip = dockerSkipFor(test);
const LONG = process.env.HARNESS_SESSIONS_LONG === '1';
const sandboxes = dockerSandbox({ image, host, namePrefix: 'hs-links-' });

/** POSTs `body` to the engine at `path`: the status and the body's text. */
function post(path, body) {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: host.slice('unix://'.length), path, method: 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** Runs `script` as root in the container `name`, to its end. */
async function asRoot(name, script) {
  const created = await post(`/containers/${encodeURIComponent(name)}/exec`, {
    User: '0',
    Cmd: ['/bin/sh', '-c', script],
    AttachStdout: true,
    AttachStderr: true,
  });
  assert.equal(created.status, 201, created.text);
  const started = await post(`/exec/${JSON.parse(created.text).Id}/start`, { Detach: false, Tty: false });
  assert.equal(started.status, 200, started.text);
}

test('links swapped under the file API reach no root-only file and write nothing in /etc', { skip, timeout: 900_000 }, async () => {
  const session = await sandboxes.createSession({ sessionId: `links-${process.pid}` });
  try {
    // A root-only file (/root is 0700), and /etc, which only root may write.
    await asRoot(session.id, 'mkdir -p /root/s && printf ROOT > /root/s/secret && chmod 600 /root/s/secret');
    const prepared = await session.run({ command: 'mkdir d e && printf inside > d/secret' });
    assert.equal(prepared.exitCode, 0, prepared.stderr);
    const swapper = await session.spawn({
      command: 'while :; do mv d d.real; mv e e.real; ln -s /root/s d; ln -s /etc e; rm d e; mv d.real d; mv e.real e; done',
    });
    const attempts = LONG ? 5_000 : 500;
    let escapedReads = 0;
    let reads = 0;
    let writes = 0;
    const messages = new Set();
    // Four pairs at a time: each exec takes a while on a loaded engine.
    for (let i = 0; i < attempts; i += 4) {
      const settled = await Promise.allSettled(
        [0, 1, 2, 3].flatMap((k) => [
          session.readTextFile({ path: 'd/secret' }),
          session.writeTextFile({ path: `e/w${i + k}`, content: 'x' }),
        ]),
      );
      settled.forEach((result, index) => {
        const isRead = index % 2 === 0;
        if (result.status === 'rejected') messages.add(String(result.reason?.message));
        else if (isRead) {
          reads++;
          if (result.value === 'ROOT') escapedReads++;
        } else writes++;
      });
    }
    await swapper.kill();
    await swapper.wait().catch(() => {});
    const inEtc = await session.run({ command: 'ls /etc | grep -c "^w" || true' });
    assert.equal(escapedReads, 0, `${escapedReads} reads of ${attempts} got the root-only file`);
    console.log(`# docker swaps: ${attempts} reads (${reads} through), ${attempts} writes (${writes} through), 0 escapes`);
    assert.equal(inEtc.stdout.trim(), '0', `${inEtc.stdout.trim()} writes of ${attempts} landed in /etc`);
    assert.ok(reads > 0, `the swaps left some operations through (${reads} reads, ${writes} writes)`);
    for (const message of messages) {
      assert.doesNotMatch(message, /overlay|\/var\/lib\/docker|\/work\/docker/, 'an error names a path of the host');
    }
    // Straight attempts, without a race: refused in words, nothing of the host in them.
    await session.run({ command: 'ln -s /root/s rootlink && ln -s /etc etclink' });
    // (A link into /root reads as missing: the sandbox's user cannot look inside.)
    const throughRoot = await session.readTextFile({ path: 'rootlink/secret' }).catch((error) => error);
    assert.ok(throughRoot === null || throughRoot instanceof Error, `read ${throughRoot}`);
    for (const attempt of [
      () => session.writeTextFile({ path: 'etclink/evil', content: 'x' }),
      () => session.writeTextFile({ path: '/etc/evil', content: 'x' }),
      () => session.readTextFile({ path: '/workspace' }),
    ]) {
      const error = await attempt().then(() => undefined, (error) => error);
      assert.ok(error, `refused: ${attempt}`);
      assert.doesNotMatch(error.message, /overlay|\/var\/lib\/docker|\/work\/docker/);
    }
  } finally {
    await session.destroy();
  }
});
