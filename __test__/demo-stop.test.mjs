// `npm run demo` stopped every way a user stops it: SIGTERM to `npm run demo` (npm kills only the
// shell between it and the script), SIGKILL of the script (its server is left to init), SIGHUP
// (the terminal closed). Each time the sessions are suspended and no process nor port is left.
// And a port another server holds, even one answering /api/health, is said plainly: the demo never
// says it is running there. Builds the example first when it is not (`demo.mjs --build-only`).
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { freePort } from './support/packaged.mjs';

const root = new URL('..', import.meta.url).pathname;
const data = mkdtempSync(join(tmpdir(), 'demo-stop-'));

/** Whether any process of the group `pgid` is still there. */
function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Waits until `check()` holds, for at most `ms`. */
async function until(check, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.fail(`not within ${ms} ms: ${what}`);
}

/** Whether something answers HTTP on `port`. */
async function answers(port) {
  try {
    await fetch(`http://127.0.0.1:${port}/api/health`, { signal: AbortSignal.timeout(1000) });
    return true;
  } catch {
    return false;
  }
}

/** Starts `command args` in a process group of its own; resolves once the demo says it runs. */
async function start(command, args, port) {
  const child = spawn(command, args, {
    cwd: root,
    env: { ...process.env, PORT: String(port), DEMO_DATA_DIR: data, NEXT_TELEMETRY_DISABLED: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  child.output = '';
  child.stdout.on('data', (chunk) => (child.output += chunk));
  child.stderr.on('data', (chunk) => (child.output += chunk));
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  await until(() => /Harness Chat is running/.test(child.output) || child.exitCode !== null, 90_000, 'the demo runs');
  assert.match(child.output, /Harness Chat is running/, child.output);
  return child;
}

/** The demo script's pid, the child of the shell npm started. */
function scriptPid(groupId) {
  const out = spawnSync('pgrep', ['-g', String(groupId), '-f', 'scripts/demo.mjs'], { encoding: 'utf8' }).stdout.trim();
  return Number(out.split('\n').filter(Boolean).at(-1));
}

describe('npm run demo, stopped', { timeout: 10 * 60_000 }, () => {
  const groups = [];
  before(() => {
    const build = spawnSync(process.execPath, [join(root, 'scripts', 'demo.mjs'), '--build-only'], { cwd: root, encoding: 'utf8' });
    assert.equal(build.status, 0, `${build.stdout}\n${build.stderr}`);
  });
  after(() => {
    for (const pgid of groups) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {}
    }
    rmSync(data, { recursive: true, force: true });
  });

  test('SIGTERM to npm run demo: the script notices, the sessions are suspended, nothing is left', async () => {
    const port = await freePort();
    const npm = await start('npm', ['run', 'demo', '--', '--no-build'], port);
    groups.push(npm.pid);
    process.kill(npm.pid, 'SIGTERM');
    await until(() => !groupAlive(npm.pid), 60_000, 'every process of the demo gone');
    assert.match(npm.output, /sessions suspended/);
    assert.equal(await answers(port), false, 'the port is free');
  });

  test('SIGKILL of the script: its server notices, suspends the sessions and exits', async () => {
    const port = await freePort();
    const npm = await start('npm', ['run', 'demo', '--', '--no-build'], port);
    groups.push(npm.pid);
    const script = scriptPid(npm.pid);
    assert.ok(script > 0);
    process.kill(script, 'SIGKILL');
    await until(() => !groupAlive(npm.pid), 60_000, 'every process of the demo gone');
    assert.match(npm.output, /npm run demo is gone: suspending the sessions/);
    assert.match(npm.output, /sessions suspended/);
    assert.equal(await answers(port), false, 'the port is free');
  });

  test('SIGHUP (the terminal closed): the sessions are suspended, nothing is left', async () => {
    const port = await freePort();
    const npm = await start('npm', ['run', 'demo', '--', '--no-build'], port);
    groups.push(npm.pid);
    process.kill(-npm.pid, 'SIGHUP');
    await until(() => !groupAlive(npm.pid), 60_000, 'every process of the demo gone');
    assert.match(npm.output, /sessions suspended/);
    assert.equal(await answers(port), false, 'the port is free');
  });

  test('a port another server holds, even one answering /api/health: said plainly, never "running"', async () => {
    const port = await freePort();
    const impostor = createServer((_request, response) => response.end(JSON.stringify({ ok: true, instance: 'someone-else' })));
    await new Promise((resolve) => impostor.listen(port, resolve));
    try {
      const result = spawnSync(process.execPath, [join(root, 'scripts', 'demo.mjs'), '--no-build'], {
        cwd: root,
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, PORT: String(port), DEMO_DATA_DIR: data },
      });
      const output = `${result.stdout}${result.stderr}`;
      assert.equal(result.status, 1, output);
      assert.match(output, new RegExp(`port ${port} is in use by another program`));
      assert.doesNotMatch(output, /Harness Chat is running/);
    } finally {
      impostor.close();
    }
  });
});
