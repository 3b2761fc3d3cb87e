// What the manager's tests share: a manager on a fake agent, sandboxes that count what they do,
// a reader of turns with the real `ai` reader, and waiting for a status.
import { after } from 'node:test';
import { readUIMessageStream } from 'ai';
import { createSessionManager } from '../../index.js';
import { createDeferred, createFakeAgent, createFakeSandbox } from '../../testing/index.mjs';

export { createDeferred, createFakeAgent };

/**
 * Sandboxes for tests: one fake sandbox, a lease per session, every call counted.
 * @param {{ capacity?: number, acquire?: (sessionId: string, options: any) => Promise<void> | void }} [options]
 */
export function testSandboxes({ capacity, acquire } = {}) {
  const sandbox = createFakeSandbox({});
  const log = [];
  const held = new Set();
  return {
    capacity,
    log,
    held,
    sandbox,
    async acquire(sessionId, options) {
      log.push(['acquire', sessionId, options.resume]);
      await acquire?.(sessionId, options);
      held.add(sessionId);
      return {
        sandboxSession: sandbox,
        async suspend() {
          log.push(['suspend', sessionId]);
          held.delete(sessionId);
        },
        async close() {
          log.push(['close', sessionId]);
          held.delete(sessionId);
        },
      };
    },
    async discard(sessionId) {
      log.push(['discard', sessionId]);
    },
    async shutdown() {
      log.push(['shutdown']);
    },
  };
}

/** Every manager the tests of a file made: shut down at the end, even when a test failed. */
const managers = new Set();
after(async () => {
  await Promise.allSettled([...managers].map((sessions) => sessions.shutdown()));
});

/**
 * A manager on a fake agent, with what the test needs to look at.
 * @param {Record<string, unknown>} [options] options of `createSessionManager`
 */
export function testManager(options = {}) {
  const agent = options.fakeAgent ?? createFakeAgent();
  const sandboxes = options.sandboxes ?? testSandboxes();
  const errors = [];
  const events = [];
  const { fakeAgent, ...rest } = options;
  const sessions = createSessionManager({
    agent: () => agent,
    sandboxes,
    onError: (error, context) => errors.push({ error, ...context }),
    ...rest,
  });
  sessions.subscribe((event) => events.push(event));
  managers.add(sessions);
  return { sessions, agent, sandboxes, errors, events };
}

/**
 * Reads a turn to its end: every chunk, the message the real reader built (continuing `message`
 * when the turn continues one, as useChat does), and `done`.
 */
export async function readTurn(turn, continues) {
  const [forChunks, forMessage] = turn.stream.tee();
  const chunks = [];
  const reading = (async () => {
    const reader = forChunks.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      chunks.push(value);
    }
  })();
  let message;
  const errors = [];
  for await (const snapshot of readUIMessageStream({ message: continues, stream: forMessage, onError: (e) => errors.push(e) })) {
    message = snapshot;
  }
  await reading;
  const session = await turn.done;
  return { chunks, message, session, errors };
}

/** Waits until `predicate()` is true, checking every few milliseconds (at most `ms`). */
export async function until(predicate, ms = 30_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await predicate()) return;
    if (Date.now() > deadline) throw new Error(`waited ${ms} ms in vain for ${predicate}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** Waits until session `id` has `status`. */
export function untilStatus(sessions, id, status, ms) {
  return until(async () => (await sessions.get(id))?.status === status, ms);
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * An agent whose turns stream what `turn(prompt, { signal })` yields, chunk by chunk, through a
 * plain `ReadableStream`: for tests that need to hold a stream in the middle.
 * @param {(input: { prompt?: string, answers?: object }, options: { signal: AbortSignal }) => AsyncIterable<object>} turn
 */
export function streamAgent(turn) {
  const calls = [];
  const session = (sessionId) => ({
    sessionId,
    stop: async () => ({ type: 'resume-session', harnessId: 'stream', specificationVersion: 'harness-v1', data: {} }),
    destroy: async () => {},
    detach: async () => ({ type: 'resume-session', harnessId: 'stream', specificationVersion: 'harness-v1', data: {} }),
  });
  const result = (input, signal) => ({
    totalUsage: Promise.resolve({ inputTokens: 1, outputTokens: 1, totalTokens: 2 }),
    toUIMessageStream: (options = {}) => {
      const iterator = turn(input, { signal })[Symbol.asyncIterator]();
      let started = false;
      const aborted = new Promise((resolve) => {
        if (signal?.aborted) resolve();
        signal?.addEventListener('abort', () => resolve(), { once: true });
      });
      return new ReadableStream({
        async pull(controller) {
          if (!started) {
            started = true;
            controller.enqueue({ type: 'start', messageId: options.generateMessageId?.() });
          }
          const next = await Promise.race([iterator.next(), aborted.then(() => 'aborted')]);
          if (next === 'aborted') {
            controller.enqueue({ type: 'abort', reason: String(signal.reason) });
            controller.close();
          } else if (next.done) controller.close();
          else controller.enqueue(next.value);
        },
      });
    },
  });
  return {
    calls,
    createSession: async ({ sessionId }) => {
      calls.push(['createSession', sessionId]);
      return session(sessionId);
    },
    stream: async ({ prompt, abortSignal }) => {
      calls.push(['stream', prompt]);
      return result({ prompt }, abortSignal);
    },
    continueStream: async ({ abortSignal, ...answers }) => {
      calls.push(['continueStream', answers]);
      return result({ answers }, abortSignal);
    },
  };
}
