// The strategies through the real HarnessAgent (`@ai-sdk/harness/agent`) and the model-free
// scripted harness, with approvals (`permissionMode: 'allow-reads'`): two sessions side by side in
// one shared sandbox, each in a working directory of its own; and a session suspended by one
// manager process and resumed by another on the same store, finding its files again. Run against
// dockerSandbox() (skipped without a Docker Engine and the test image, unless
// HARNESS_SESSIONS_REQUIRE_DOCKER=1: then they fail), localSandbox() and a JavaScript sandbox.
//
// This file is also the other manager process: run with STRATEGIES_CHILD set, it plays its part
// and exits before any test is declared.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HarnessAgent } from '@ai-sdk/harness/agent';
import { createSessionManager, dockerSandbox, localSandbox, sandboxPerSession, sharedSandbox } from '../index.js';
import { createFakeSandbox, createScriptedHarness } from '../testing/index.mjs';
import { dockerHost, dockerSkipFor, image } from './support/docker.mjs';


// ─── What both processes share ────────────────────────────────────────────────────────────────────

/**
 * The sandboxes of a backend, made again the same in any process from `config`:
 * `{ backend: 'docker' | 'local' | 'fake', strategy: 'shared' | 'per-session', dir, prefix }`.
 */
function sandboxesOf({ backend, strategy, dir, prefix }) {
  if (backend === 'fake') {
    if (strategy === 'shared') {
      return sharedSandbox({ open: () => createFakeSandbox({ root: join(dir, 'shared'), id: 'fake-shared' }), ports: [4501, 4502] });
    }
    const root = (id) => join(dir, 'own', id);
    return sandboxPerSession({
      create: (id) => createFakeSandbox({ root: root(id), id }),
      resume: (id) => (existsSync(root(id)) ? createFakeSandbox({ root: root(id), id }) : undefined),
    });
  }
  const provider =
    backend === 'docker'
      ? dockerSandbox({ image, host: dockerHost, namePrefix: prefix, network: 'host' })
      : localSandbox({ root: dir });
  return strategy === 'shared' ? sharedSandbox({ open: provider, ports: [4501, 4502] }) : sandboxPerSession({ provider });
}

/** A `SessionStore` in a JSON file: what two processes share. */
function fileStore(path) {
  const load = () => (existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : { records: {}, states: {} });
  const write = (data) => writeFileSync(path, JSON.stringify(data));
  return {
    async save(record, resumeState) {
      const data = load();
      data.records[record.id] = record;
      if (resumeState === undefined) delete data.states[record.id];
      else data.states[record.id] = resumeState;
      write(data);
    },
    async get(id) {
      return load().records[id];
    },
    async list() {
      return Object.values(load().records).map(({ messages, ...summary }) => summary);
    },
    async getResumeState(id) {
      return load().states[id];
    },
    async delete(id) {
      const data = load();
      delete data.records[id];
      delete data.states[id];
      write(data);
    },
  };
}

function managerOf(config, store) {
  const agent = new HarnessAgent({ harness: createScriptedHarness(), permissionMode: 'allow-reads' });
  const errors = [];
  const sessions = createSessionManager({
    agent: () => agent,
    sandboxes: sandboxesOf(config),
    store,
    onError: (error, context) => errors.push(`${context.action} ${context.sessionId ?? ''}: ${error?.message ?? error}`),
  });
  return { sessions, errors };
}

/** The text a turn streams, once its session is written. */
async function replyOf(turn) {
  let text = '';
  for await (const chunk of turn.stream) {
    if (chunk.type === 'text-delta') text += chunk.delta;
  }
  await turn.done;
  return text;
}

/** Sends `message`; when the turn waits for approvals, approves them and goes on. */
async function ask(sessions, id, message) {
  let reply = await replyOf(await sessions.send(id, { message }));
  let session = await sessions.get(id);
  while (session.status === 'awaiting-input') {
    const toolApprovalContinuations = session.pendingInput.approvals.map(({ approvalId }) => ({
      type: 'tool-approval-response',
      approvalId,
      approved: true,
    }));
    reply += await replyOf(await sessions.continue(id, { toolApprovalContinuations }));
    session = await sessions.get(id);
  }
  return reply;
}

// ─── The other process ────────────────────────────────────────────────────────────────────────────

if (process.env.STRATEGIES_CHILD !== undefined) {
  const config = JSON.parse(process.env.STRATEGIES_CHILD);
  const { sessions, errors } = managerOf(config, fileStore(config.store));
  await sessions.create({ id: 'kept', metadata: { title: 'across processes' } });
  const wrote = await ask(sessions, 'kept', 'write keep.txt: written by the first process');
  await sessions.shutdown();
  // The manager refuses everything once shut down: the store says what it left.
  const { status } = await fileStore(config.store).get('kept');
  process.stdout.write(`${JSON.stringify({ wrote, status, errors })}\n`);
  process.exit(0);
}

// ─── The tests ────────────────────────────────────────────────────────────────────────────────────

const dockerSkip = dockerSkipFor(test);

let counter = 0;

/** A configuration for one test, and what removes what it made. */
function configFor(backend, strategy) {
  const dir = mkdtempSync(join(tmpdir(), `strategies-harness-${backend}-`));
  const prefix = `hs-harness-${process.pid}-${++counter}-`;
  const config = { backend, strategy, dir, prefix, store: join(dir, 'sessions.json') };
  const cleanup = async () => {
    if (backend === 'docker') {
      const provider = dockerSandbox({ image, host: dockerHost, namePrefix: prefix, network: 'host' });
      for (const id of ['shared', 'left', 'right', 'kept']) {
        await provider
          .resumeSession({ sessionId: id })
          .then((session) => session.destroy())
          .catch(() => {});
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  return { config, cleanup };
}

/** Runs this file as the other manager process with `config`: what it printed. */
function otherProcess(config) {
  const env = { ...process.env, STRATEGIES_CHILD: JSON.stringify(config) };
  delete env.NODE_TEST_CONTEXT;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(import.meta.url)], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`the other process exited ${code}: ${stderr}`));
      else resolve(JSON.parse(stdout.trim().split('\n').at(-1)));
    });
  });
}

const backends = [
  ['dockerSandbox()', 'docker', dockerSkip],
  ['localSandbox()', 'local', false],
  ['a JavaScript sandbox (testing/fake-sandbox.mjs)', 'fake', false],
];

for (const [name, backend, skip] of backends) {
  describe(`through HarnessAgent, with ${name}`, { skip }, () => {
    test('two sessions side by side in one shared sandbox, each in its own working directory', async () => {
      const { config, cleanup } = configFor(backend, 'shared');
      const { sessions, errors } = managerOf(config, undefined);
      try {
        await sessions.create({ id: 'left', metadata: {} });
        await sessions.create({ id: 'right', metadata: {} });
        // Both turns at once, each asking its approval.
        const [left, right] = await Promise.all([
          ask(sessions, 'left', 'write notes.txt: from the left'),
          ask(sessions, 'right', 'write other.txt: from the right'),
        ]);
        assert.match(left, /I wrote notes\.txt\./);
        assert.match(right, /I wrote other\.txt\./);
        const [leftFiles, rightFiles] = await Promise.all([
          ask(sessions, 'left', 'list files'),
          ask(sessions, 'right', 'list files'),
        ]);
        assert.equal(leftFiles, 'Files in the working directory: notes.txt');
        assert.equal(rightFiles, 'Files in the working directory: other.txt', "the left session's file is not there");
        assert.equal(await ask(sessions, 'right', 'read notes.txt'), 'I could not read notes.txt: no such file');
        assert.equal(await ask(sessions, 'left', 'read notes.txt'), 'notes.txt says: from the left');
        await sessions.shutdown();
        assert.deepEqual(errors, []);
      } finally {
        await cleanup();
      }
    });

    for (const strategy of ['shared', 'per-session']) {
      test(`a session resumed by a new manager process on the same store finds its files (${strategy})`, async () => {
        const { config, cleanup } = configFor(backend, strategy);
        try {
          const first = await otherProcess(config);
          assert.deepEqual(first, { wrote: 'I wrote keep.txt.', status: 'suspended', errors: [] });

          const { sessions, errors } = managerOf(config, fileStore(config.store));
          assert.equal((await sessions.get('kept')).status, 'suspended');
          assert.equal(await ask(sessions, 'kept', 'read keep.txt'), 'keep.txt says: written by the first process');
          assert.equal(
            await ask(sessions, 'kept', 'what did I say?'),
            'Before this, you said: "write keep.txt: written by the first process", then "read keep.txt".',
          );
          await sessions.shutdown();
          assert.deepEqual(errors, []);
        } finally {
          await cleanup();
        }
      });
    }
  });
}
