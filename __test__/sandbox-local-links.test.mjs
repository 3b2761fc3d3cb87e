// localSandbox(): no link leads its file API out of the session's folder (issue 13, finding 2),
// its folder swapped for a link is refused, and the harness bootstrap folder (issue 11, item 1)
// is reachable and bootstrapped once when two sessions start at once.
//
// The race test swaps a folder of the sandbox for a link to an outside folder, from a process of
// the sandbox, while the file API reads and writes below it: 2,000 swapped operations here, 20,000
// with HARNESS_SESSIONS_LONG=1. Any read of the outside file or write into the outside folder is
// an escape.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { prepareSandboxForHarness } from '@ai-sdk/harness/agent';

const require = createRequire(import.meta.url);
const { localSandbox } = require('../js/sandbox.js');
const { SessionInputError } = require('../js/errors.js');

const LONG = process.env.HARNESS_SESSIONS_LONG === '1';
const base = realpathSync(mkdtempSync(join(tmpdir(), 'hs-links-')));
process.on('exit', () => rmSync(base, { recursive: true, force: true }));
const root = join(base, 'sessions');
const outside = join(base, 'outside');
const bootstrapFolder = join(base, 'harness');
mkdirSync(outside);
writeFileSync(join(outside, 'secret'), 'OUTSIDE');
let counter = 0;
const fresh = (name) => `${name}-${++counter}`;
const sandboxes = localSandbox({ root, allowedPaths: [bootstrapFolder] });

test('a folder swapped for a link to the outside, again and again: no read or write gets out', { timeout: 600_000 }, async () => {
  const session = await sandboxes.createSession({ sessionId: fresh('race') });
  try {
    await session.run({ command: 'mkdir d && printf inside > d/secret' });
    // The swapper: `d` is a folder, then a link to the outside folder, then the folder again.
    const swapper = await session.spawn({
      command: `while :; do mv d d.real; ln -s '${outside}' d; rm d; mv d.real d; done`,
    });
    const attempts = LONG ? 20_000 : 2_000;
    let escapedReads = 0;
    let reads = 0;
    let writes = 0;
    for (let i = 0; i < attempts; i++) {
      const [read, written] = await Promise.allSettled([
        session.readTextFile({ path: 'd/secret' }),
        session.writeTextFile({ path: `d/w${i}`, content: 'x' }),
      ]);
      if (read.status === 'fulfilled') {
        reads++;
        if (read.value === 'OUTSIDE') escapedReads++;
      }
      if (written.status === 'fulfilled') writes++;
    }
    await swapper.kill();
    await swapper.wait().catch(() => {});
    const escapedWrites = readdirSync(outside).filter((name) => name !== 'secret');
    assert.equal(escapedReads, 0, `${escapedReads} reads of ${attempts} got the outside file`);
    assert.deepEqual(escapedWrites, [], `${escapedWrites.length} writes of ${attempts} landed outside`);
    assert.ok(reads > 0 && writes > 0, `the swaps left some operations through (${reads} reads, ${writes} writes)`);
    // Links that stay inside keep working.
    await session.run({ command: 'rm -rf d.real; mkdir -p pkg/real && printf ok > pkg/real/f && ln -s real pkg/link && ln -s ../pkg/real/f pkg/up' });
    assert.equal(await session.readTextFile({ path: 'pkg/link/f' }), 'ok');
    assert.equal(await session.readTextFile({ path: 'pkg/up' }), 'ok');
    await session.writeTextFile({ path: 'pkg/link/g', content: 'written' });
    assert.equal(readFileSync(join(root, session.id, 'workspace', 'pkg', 'real', 'g'), 'utf8'), 'written');
  } finally {
    await session.destroy();
  }
});

test('a session folder replaced by a link: refused, not resumed elsewhere, destroy() leaves the outside alone', async () => {
  const id = fresh('swapped');
  const session = await sandboxes.createSession({ sessionId: id });
  await session.writeTextFile({ path: 'notes.txt', content: 'mine' });
  const folder = join(root, session.id);
  const elsewhere = join(base, `elsewhere-${id}`);
  mkdirSync(join(elsewhere, 'workspace'), { recursive: true });
  writeFileSync(join(elsewhere, 'workspace', 'notes.txt'), 'NOT YOURS');
  // One command of the sandbox replaces its own folder with a link. Run as root, the sandbox's
  // commands run as a user of their own who cannot touch the folder that holds the sessions: the
  // test itself swaps the folder then.
  const swap = `mv '${folder}' '${folder}.old' && ln -s '${elsewhere}' '${folder}'`;
  const moved = await session.run({ command: swap });
  if (process.getuid?.() === 0) {
    assert.notEqual(moved.exitCode, 0, "a command of root's sandbox moved its own folder");
    renameSync(folder, `${folder}.old`);
    symlinkSync(elsewhere, folder);
  } else {
    assert.equal(moved.exitCode, 0, moved.stderr);
  }

  await assert.rejects(session.readTextFile({ path: 'notes.txt' }), /moved, removed or replaced/);
  await assert.rejects(session.writeTextFile({ path: 'notes.txt', content: 'x' }), /moved, removed or replaced/);
  await assert.rejects(session.run({ command: 'true' }), /moved, removed or replaced/);
  await assert.rejects(sandboxes.resumeSession({ sessionId: id }), /not a folder/);
  await session.destroy();
  assert.equal(readFileSync(join(elsewhere, 'workspace', 'notes.txt'), 'utf8'), 'NOT YOURS');
  assert.ok(existsSync(join(elsewhere, 'workspace')), 'destroy() followed the link');
  assert.equal(readFileSync(join(`${folder}.old`, 'workspace', 'notes.txt'), 'utf8'), 'mine');
});

test('the bootstrap folder is reachable, confined, and bootstrapped once by two sessions starting at once', { timeout: 120_000 }, async () => {
  const [a, b] = await Promise.all([
    sandboxes.createSession({ sessionId: fresh('boot') }),
    sandboxes.createSession({ sessionId: fresh('boot') }),
  ]);
  try {
    const dir = join(bootstrapFolder, 'claude-code');
    // The real harness's bootstrap (its marker protocol), with an install that notices another
    // install running in the same folder at the same time.
    const recipe = {
      harnessId: 'bootstrap-probe',
      bootstrapDir: dir,
      files: [{ path: join(dir, 'package.json'), content: '{"name":"probe"}' }],
      commands: [
        {
          command: `cd '${dir}' && mkdir installing || { echo overlap >> overlaps; exit 1; }; sleep 1; echo once >> installs; rmdir installing`,
        },
      ],
    };
    const harness = { harnessId: 'bootstrap-probe', getBootstrap: async () => recipe };
    const results = await Promise.allSettled([
      prepareSandboxForHarness({ session: a, harnesses: [harness] }),
      prepareSandboxForHarness({ session: b, harnesses: [harness] }),
    ]);
    assert.deepEqual(results.map((r) => r.status), ['fulfilled', 'fulfilled'], String(results.find((r) => r.reason)?.reason));
    assert.equal(readFileSync(join(dir, 'installs'), 'utf8'), 'once\n');
    assert.equal(existsSync(join(dir, 'overlaps')), false);
    assert.equal(readFileSync(join(dir, 'package.json'), 'utf8'), '{"name":"probe"}');
    // Confined there too: a link out of the bootstrap folder is refused.
    // Made by the test: as root each session runs as a user of its own, and the folder belongs to
    // whichever of the two bootstrapped it, so the other could not write the link itself.
    symlinkSync(outside, join(dir, 'out'));
    await assert.rejects(a.readTextFile({ path: `${dir}/out/secret` }), (error) => SessionInputError.isInstance(error) && /symbolic link/.test(error.message));
    // Folders not allowed stay out of reach.
    await assert.rejects(a.readTextFile({ path: join(outside, 'secret') }), (error) => SessionInputError.isInstance(error));
  } finally {
    await Promise.all([a.destroy(), b.destroy()]);
  }
});

test('allowedPaths: /tmp/harness by default, checked, and [] for none', async () => {
  assert.throws(() => localSandbox({ root, allowedPaths: ['relative'] }), (error) => SessionInputError.isInstance(error) && error.path === 'allowedPaths');
  assert.throws(() => localSandbox({ root, allowedPaths: '/tmp' }), (error) => SessionInputError.isInstance(error) && error.path === 'allowedPaths');
  const none = localSandbox({ root, allowedPaths: [] });
  const session = await none.createSession({ sessionId: fresh('none') });
  try {
    await assert.rejects(session.readTextFile({ path: '/tmp/harness/claude-code/package.json' }), (error) => SessionInputError.isInstance(error) && /outside/.test(error.message));
  } finally {
    await session.destroy();
  }
  const byDefault = localSandbox({ root });
  const other = await byDefault.createSession({ sessionId: fresh('default') });
  try {
    const probe = `/tmp/harness/probe-${process.pid}-${counter}.txt`;
    await other.writeTextFile({ path: probe, content: 'reachable' });
    assert.equal(await other.readTextFile({ path: probe }), 'reachable');
    rmSync(probe);
  } finally {
    await other.destroy();
  }
});

test('two session ids never share a sandbox folder (one id that is the other\'s old name)', async () => {
  const named = localSandbox({ root: join(base, `names-${process.pid}`), allowedPaths: [] });
  const first = await named.createSession({ sessionId: 'team a/chat 1' });
  const second = await named.createSession({ sessionId: 'team-a-chat-1-9eb9137c31375c19' });
  try {
    assert.notEqual(first.id, second.id);
    await first.writeTextFile({ path: 'owner.txt', content: 'first' });
    assert.equal(await second.readTextFile({ path: 'owner.txt' }), null);
    assert.equal((await named.resumeSession({ sessionId: 'team a/chat 1' })).id, first.id);
  } finally {
    await Promise.all([first.destroy(), second.destroy()]);
  }
});

test('every sandbox method given a wrong type answers with a SessionInputError, never napi\'s StringExpected', async () => {
  const session = await sandboxes.createSession({ sessionId: fresh('types') });
  try {
    const calls = {
      'run(command: 1)': () => session.run({ command: 1 }),
      'run(workingDirectory: 1)': () => session.run({ command: 'true', workingDirectory: 1 }),
      'run(env: {a: 1})': () => session.run({ command: 'true', env: { a: 1 } }),
      'spawn(null)': () => session.spawn(null),
      'readFile(path: 1)': () => session.readFile({ path: 1 }),
      'readBinaryFile(path: {})': () => session.readBinaryFile({ path: {} }),
      'readTextFile(undefined)': () => session.readTextFile(undefined),
      'readTextFile(path: null)': () => session.readTextFile({ path: null }),
      'writeFile(path: 1)': () => session.writeFile({ path: 1, content: new ReadableStream() }),
      'writeBinaryFile(path: [])': () => session.writeBinaryFile({ path: [], content: new Uint8Array() }),
      'writeTextFile(path: 1)': () => session.writeTextFile({ path: 1, content: 'x' }),
      'writeTextFile(content: 1)': () => session.writeTextFile({ path: 'x', content: 1 }),
      'getPortEndpoint(port: "80")': () => session.getPortEndpoint({ port: '80' }),
      'getPortUrl(port: 1, protocol: 1)': () => session.getPortUrl({ port: 1, protocol: 1 }),
      'fork(ports: "1")': () => session.fork({ ports: '1' }),
      'fork(workingDirectory: 1)': () => session.fork({ workingDirectory: 1 }),
      'fork(1)': () => session.fork(1),
      'createSession(sessionId: 1)': () => sandboxes.createSession({ sessionId: 1 }),
      'resumeSession(sessionId: 1)': () => sandboxes.resumeSession({ sessionId: 1 }),
      'resumeSession()': () => sandboxes.resumeSession(),
      'open(name: 1)': () => sandboxes({ name: 1 }),
    };
    for (const [name, call] of Object.entries(calls)) {
      const error = await Promise.resolve()
        .then(call)
        .then(() => undefined, (error) => error);
      assert.ok(SessionInputError.isInstance(error), `${name}: ${error?.code ?? ''} ${error}`);
      assert.doesNotMatch(String(error.message), /StringExpected|NumberExpected|ObjectExpected/, name);
    }
  } finally {
    await session.destroy();
  }
});
