// What the benchmark's figures share: the package under test (the copy scripts/bench.mjs made of
// the release build, so that a rebuild by someone else mid-run cannot swap the addon), the
// chunks of a realistic turn, an agent that serves pre-built chunks, sandboxes that do nothing,
// records to fill stores with, and a waiter for session statuses.
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..');

/** The folder of the package the figures measure: `HARNESS_SESSIONS_BENCH_PACKAGE`, else this repository. */
export const packageDir = process.env.HARNESS_SESSIONS_BENCH_PACKAGE ?? repoRoot;

const require = createRequire(join(packageDir, 'index.js'));

/** `require('harness-sessions')`, from the package under test. */
export function loadPackage() {
  return require(join(packageDir, 'index.js'));
}

/** `harness-sessions/testing`, from the package under test. */
export function loadTesting() {
  return import(pathToFileURL(join(packageDir, 'testing', 'index.mjs')).href);
}

/** `ai`, as the package under test resolves it. */
export function loadAi() {
  return import(pathToFileURL(require.resolve('ai')).href);
}

const WORDS = ['the', 'session', 'keeps', 'its', 'conversation', 'and', 'streams', 'a', 'turn', 'back'];

/**
 * The chunks of a turn, `start` left out (the agent writes it with the message id it is given):
 * `start-step`, `text-start`, `deltas` `text-delta` of a word, `text-end`, four tool chunks,
 * `finish-step`, `finish`. With the `start`, `deltas + 10` chunks: 10,000 for 9,990 deltas.
 */
export function turnChunks(deltas = 9990) {
  const chunks = [{ type: 'start-step' }, { type: 'text-start', id: 'text-1' }];
  for (let i = 0; i < deltas; i++) chunks.push({ type: 'text-delta', id: 'text-1', delta: `${WORDS[i % WORDS.length]} ` });
  chunks.push({ type: 'text-end', id: 'text-1' });
  chunks.push({ type: 'tool-input-start', toolCallId: 'call-1', toolName: 'bash' });
  chunks.push({ type: 'tool-input-delta', toolCallId: 'call-1', inputTextDelta: '{"command":"ls"}' });
  chunks.push({ type: 'tool-input-available', toolCallId: 'call-1', toolName: 'bash', input: { command: 'ls' } });
  chunks.push({ type: 'tool-output-available', toolCallId: 'call-1', output: { stdout: 'README.md\n', exitCode: 0 } });
  chunks.push({ type: 'finish-step' });
  chunks.push({ type: 'finish', finishReason: 'stop' });
  return chunks;
}

/** A short turn: `start-step`, a text of one delta, `finish-step`, `finish` (7 chunks with `start`). */
export const shortTurn = () => turnChunks(1).filter((chunk) => !chunk.type.startsWith('tool-'));

const RESUME_STATE = { type: 'resume-session', harnessId: 'bench', specificationVersion: 'harness-v1', data: {} };

/**
 * An agent (the `SessionAgent` shape) whose turns serve chunks: `source(prompt, options)` gives
 * either an array (enqueued at once into the turn's `ReadableStream`, behind the `start` chunk) or
 * a `ReadableStream` of its own. It keeps nothing of its sessions, so that memory figures see only
 * what the manager keeps.
 *
 * Given `createUIMessageStream` (of `ai`), an array is served as a `HarnessAgent` serves its
 * turns: through `createUIMessageStream`, its `execute` writing each chunk to the writer, with the
 * caller's `originalMessages`, `generateMessageId` and `onError` (`ai`'s stream machinery, not a
 * bare `ReadableStream`).
 */
export function chunkAgent(source, { createUIMessageStream } = {}) {
  // A harness session as `HarnessAgent` gives it: the reference calls `hasUnfinishedTurn()`
  // without checking that it is there.
  const session = (sessionId) => ({
    sessionId,
    hasUnfinishedTurn: () => false,
    stop: async () => RESUME_STATE,
    detach: async () => RESUME_STATE,
    destroy: async () => {},
  });
  const result = (prompt, abortSignal) => ({
    totalUsage: Promise.resolve({ inputTokens: 1, outputTokens: 1, totalTokens: 2 }),
    toUIMessageStream: (options = {}) => {
      const start = { type: 'start', messageId: options.generateMessageId?.() };
      const served = source(prompt, { abortSignal, start });
      if (!Array.isArray(served)) return served;
      if (createUIMessageStream !== undefined) {
        return createUIMessageStream({
          originalMessages: options.originalMessages,
          generateId: options.generateMessageId,
          onError: options.onError,
          execute: ({ writer }) => {
            writer.write(start);
            for (const chunk of served) writer.write(chunk);
          },
        });
      }
      return new ReadableStream({
        start(controller) {
          controller.enqueue(start);
          for (const chunk of served) controller.enqueue(chunk);
          controller.close();
        },
      });
    },
  });
  return {
    createSession: async ({ sessionId }) => session(sessionId),
    stream: async ({ prompt, abortSignal }) => result(prompt, abortSignal),
    continueStream: async ({ abortSignal }) => result(undefined, abortSignal),
  };
}

/** Sandboxes that hand every session the same empty sandbox, counting nothing. */
export function nullSandboxes() {
  const sandboxSession = Object.freeze({ id: 'bench' });
  const lease = { sandboxSession, suspend: async () => {}, close: async () => {} };
  return {
    acquire: async () => lease,
    discard: async () => {},
    shutdown: async () => {},
  };
}

/**
 * Reads `stream` to its end: `{ count, bytes, firstAt, lastAt, types }`, `count` the reads, `bytes`
 * their length when they are bytes, times from `now()`, `types` the chunk types in order when asked.
 */
export async function drain(stream, now, { keepTypes = false } = {}) {
  const reader = stream.getReader();
  let count = 0;
  let bytes = 0;
  let firstAt;
  let lastAt;
  const types = keepTypes ? [] : undefined;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    lastAt = now();
    if (count === 0) firstAt = lastAt;
    count += 1;
    if (value instanceof Uint8Array) bytes += value.byteLength;
    else types?.push(value.type);
  }
  return { count, bytes, firstAt, lastAt, types };
}

/**
 * Waits for sessions to reach a status, through one `subscribe()` listener for all of them (a
 * `get()` per check would be a figure of its own).
 */
export function statusWaiter(sessions) {
  const last = new Map();
  const waiting = new Map();
  sessions.subscribe((event) => {
    if (event.type !== 'updated') return;
    const { id, status } = event.session;
    last.set(id, status);
    const waiters = waiting.get(id);
    if (waiters === undefined) return;
    for (const waiter of [...waiters]) {
      if (waiter.statuses.includes(status)) {
        waiters.delete(waiter);
        waiter.resolve(status);
      }
    }
  });
  return {
    /** Resolves once session `id` has one of `statuses` (at once when it had it last). */
    until(id, ...statuses) {
      if (statuses.includes(last.get(id))) return Promise.resolve(last.get(id));
      return new Promise((resolve) => {
        if (!waiting.has(id)) waiting.set(id, new Set());
        waiting.get(id).add({ statuses, resolve });
      });
    },
    forget(id) {
      last.delete(id);
      waiting.delete(id);
    },
  };
}

/** Creates session `id` and waits until it is `idle`. */
export async function readySession(sessions, waiter, id, metadata = { title: id }) {
  const created = await sessions.create({ id, metadata });
  if (created.status !== 'idle') {
    const status = await waiter.until(id, 'idle', 'failed');
    if (status !== 'idle') throw new Error(`session ${id} did not start`);
  }
}

/** A user message as `useChat` sends it. */
export function userMessage(id, text) {
  return { id, role: 'user', parts: [{ type: 'text', text }] };
}

/**
 * The record of a stored session, as `SessionStore.save()` takes it: a short conversation (a
 * question and a reply of a few words), metadata of an application, a status.
 */
export function storedRecord(index, status, at = Date.UTC(2026, 0, 1)) {
  const id = `session-${String(index).padStart(5, '0')}`;
  const record = {
    id,
    status,
    metadata: { title: `Conversation ${index}`, agent: index % 3 === 0 ? 'reviewer' : 'coder', owner: `user-${index % 97}` },
    createdAt: new Date(at + index * 1000).toISOString(),
    // Not in creation order, so that the sort has work to do.
    updatedAt: new Date(at + ((index * 7919) % 100_000) * 1000 + index).toISOString(),
    turns: 1,
    usage: { inputTokens: 120, outputTokens: 80, totalTokens: 200 },
    messages: [
      userMessage(`${id}-m1`, `Question ${index}: what does this repository do?`),
      {
        id: `${id}-m2`,
        role: 'assistant',
        parts: [{ type: 'step-start' }, { type: 'text', text: 'It keeps the conversations of its users with their coding agents.', state: 'done' }],
      },
    ],
  };
  if (status === 'failed' || status === 'interrupted') record.error = 'The application stopped without suspending the session.';
  return record;
}

/** The statuses of stored sessions, in the proportions of a store in use: none of them live. */
export const RESTING_STATUSES = ['suspended', 'suspended', 'suspended', 'suspended', 'closed', 'closed', 'closed', 'interrupted', 'failed', 'suspended'];

/** Saves `records` through `store.save()`, `concurrency` at a time (the SQLite store commits them in groups). */
export async function saveAll(store, records, { concurrency = 64, resumeState } = {}) {
  let next = 0;
  const worker = async () => {
    while (next < records.length) {
      const record = records[next++];
      await store.save(record, resumeState?.(record));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

export { RESUME_STATE };

/**
 * Runs task `task` of figure module `figure` (its `tasks[task](args)`) in a new Node process with
 * `--expose-gc`, and returns what it gave. For figures whose measures need a fresh process (RSS,
 * start-up).
 */
export function runTask(figure, task, args = {}, { timeoutMs = 300_000 } = {}) {
  const file = join(tmpdir(), `harness-sessions-bench-${process.pid}-${randomUUID()}.json`);
  const result = spawnSync(process.execPath, ['--expose-gc', join(repoRoot, 'bench', 'child.mjs'), figure, '--task', task, JSON.stringify(args)], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, BENCH_RESULT_FILE: file },
    timeout: timeoutMs,
  });
  if (result.status !== 0) throw new Error(`task ${figure}/${task} failed (${result.status ?? result.signal})`);
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } finally {
    rmSync(file, { force: true });
  }
}

/**
 * The reference, `ai-sdk-harness-sessions` 0.2.0 compiled from its source, when it is beside the
 * repository: `../shared/reference/ai-sdk-harness-sessions-0.2.0` from the repository's folder or
 * its parent (or only the folder `HARNESS_SESSIONS_REFERENCE` names). It is copied under `.cache/reference/`
 * (git-ignored), where this repository's `node_modules` serve its bare imports (`ai`,
 * `@ai-sdk/harness`), and imported from there. Resolves `{ module, dir }`, or `{ missing }` saying
 * why it is not there: the figures then run without it.
 */
export async function loadReference() {
  // HARNESS_SESSIONS_REFERENCE, when set, is the only place looked at (a folder that is not
  // there runs the figures without the reference).
  const candidates = process.env.HARNESS_SESSIONS_REFERENCE
    ? [process.env.HARNESS_SESSIONS_REFERENCE]
    : [
        join(repoRoot, '..', 'shared', 'reference', 'ai-sdk-harness-sessions-0.2.0'),
        join(repoRoot, '..', '..', 'shared', 'reference', 'ai-sdk-harness-sessions-0.2.0'),
      ];
  const source = candidates.find((dir) => existsSync(join(dir, 'dist', 'index.js')));
  if (source === undefined) return { missing: `the reference is not at ${candidates.join(' or ')}` };
  const dir = join(repoRoot, '.cache', 'reference', 'ai-sdk-harness-sessions-0.2.0');
  try {
    if (!existsSync(join(dir, 'dist', 'index.js')) || statSync(join(source, 'package.json')).mtimeMs > statSync(join(dir, 'package.json')).mtimeMs) {
      rmSync(dir, { recursive: true, force: true });
      mkdirSync(dirname(dir), { recursive: true });
      cpSync(source, dir, { recursive: true });
    }
    const module = await import(pathToFileURL(join(dir, 'dist', 'index.js')).href);
    return { module, dir: source };
  } catch (error) {
    return { missing: `the reference at ${source} could not be loaded: ${error?.message ?? error}` };
  }
}
