// examples/script.mjs, run as a user would, under Node and under Bun (from the npm registry): it
// must tell the story it promises and exit by itself, with no server and no model.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

import { bunBinary } from '../scripts/lib.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

/** Runs the script with `runtime`; resolves `{ code, signal, stdout, stderr, ms }`. Kills it after `timeoutMs`. */
function runScript(runtime, timeoutMs = 60_000) {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(runtime, ['examples/script.mjs'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data) => (stdout += data));
    child.stderr.on('data', (data) => (stderr += data));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** What the script must print, whatever the runtime. */
function assertStory({ code, signal, stdout, stderr }) {
  const context = `stdout:\n${stdout}\nstderr:\n${stderr}`;
  assert.equal(signal, null, `the script did not exit by itself\n${context}`);
  assert.equal(code, 0, context);
  const lines = stdout.split('\n');
  const has = (expected) => assert.ok(lines.includes(expected), `missing line ${JSON.stringify(expected)}\n${context}`);

  // Two sessions at once, the policy answering.
  has('alice |   [approved: Writes are allowed in this workspace.]');
  has('alice | < I wrote notes.md.');
  has('bob   |   [denied: The policy forbids rm.]');
  has('bob   | < Running `rm -rf build` was denied (The policy forbids rm.).');
  // Left to a person, answered with continue().
  has('bob   |   (awaiting-input)');
  has('bob   |   waits for: bash {"command":"echo chores done"}');
  has('bob   |   [output] {"exitCode":0,"stdout":"chores done\\n","stderr":""}');
  // Suspended, then resumed by the next message with its memory and its files.
  has('alice |   (suspended)');
  has('alice | < Before this, you said: "write notes.md: buy milk".');
  has('alice | < notes.md says: buy milk');
  // The conversations as get() keeps them.
  has('alice (idle, 6 messages)');
  has('bob (idle, 4 messages)');
  has('  assistant: [write approved] I wrote notes.md.');
  has('  assistant: [bash denied] Running `rm -rf build` was denied (The policy forbids rm.).');
  has('  assistant: [bash approved] `echo chores done` exited with 0: chores done');

  // Both conversations ran at once: bob's first answer came before alice's turn was over.
  const aliceAsked = lines.indexOf('alice | > write notes.md: buy milk');
  const bobAsked = lines.indexOf('bob   | > run rm -rf build');
  const aliceDone = lines.indexOf('alice | < I wrote notes.md.');
  assert.ok(aliceAsked >= 0 && bobAsked > aliceAsked && bobAsked < aliceDone, context);
}

test('examples/script.mjs under Node', async () => {
  const result = await runScript(process.execPath);
  assertStory(result);
  console.log(`# node: ${result.ms} ms`);
});

test('examples/script.mjs under Bun', async () => {
  const result = await runScript(bunBinary());
  assertStory(result);
  console.log(`# bun: ${result.ms} ms`);
});
