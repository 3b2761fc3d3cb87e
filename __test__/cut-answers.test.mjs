// A cut answer is marked as cut: whichever way a turn ends cut short (interrupt, abort, timeout,
// close, shutdown, crash recovery), its open text and reasoning parts are stored `done` and its
// metadata say why (`cut`), the same words as the session's error where it keeps one; a reader
// of the turn sees the same metadata.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { readUIMessageStream } from 'ai';
import { createSessionManager, createSqliteSessionStore } from '../index.js';
import { streamAgent, testManager, testSandboxes, until } from './support/sessions.mjs';

/** A turn that says a few words, thinks a little, then waits until it is aborted. */
function halfAnswer() {
  return streamAgent(async function* (_input, { signal }) {
    yield { type: 'reasoning-start', id: 'r' };
    yield { type: 'reasoning-delta', id: 'r', delta: 'thinking' };
    yield { type: 'text-start', id: 't' };
    yield { type: 'text-delta', id: 't', delta: 'half an ' };
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  });
}

/** Reads `stream` with the real reader in the background: the last message it built. */
function reading(stream) {
  const seen = [];
  const last = (async () => {
    let message;
    for await (const snapshot of readUIMessageStream({ stream })) {
      message = snapshot;
      seen.push(snapshot);
    }
    return message;
  })();
  return { seen, last };
}

function assertCut(message, reason) {
  assert.equal(message.role, 'assistant');
  assert.deepEqual(
    message.parts.filter((p) => p.type === 'text' || p.type === 'reasoning').map((p) => [p.type, p.state]),
    [
      ['reasoning', 'done'],
      ['text', 'done'],
    ],
  );
  assert.equal(message.parts.find((p) => p.type === 'text').text, 'half an ');
  assert.equal(message.metadata?.cut, reason);
}

async function started(sessions, id, options = {}) {
  await sessions.create({ id, metadata: {} });
  const turn = await sessions.send(id, { message: 'go', ...options });
  const read = reading(turn.stream);
  await until(() => read.seen.some((m) => m.parts.some((p) => p.type === 'text' && p.text === 'half an ')), 30_000);
  return { turn, read };
}

describe('a cut answer is marked as cut', () => {
  test('interrupt()', async () => {
    const { sessions } = testManager({ fakeAgent: halfAnswer() });
    const { turn, read } = await started(sessions, 'i');
    await sessions.interrupt('i');
    const session = await turn.done;
    assert.equal(session.error, 'The turn was interrupted.');
    assertCut((await sessions.get('i')).messages.at(-1), session.error);
    assert.equal((await read.last).metadata?.cut, session.error, 'the reader sees it too');
  });

  test('the caller aborts (abortSignal)', async () => {
    const { sessions } = testManager({ fakeAgent: halfAnswer() });
    const abort = new AbortController();
    const { turn, read } = await started(sessions, 'a', { abortSignal: abort.signal });
    abort.abort();
    const session = await turn.done;
    assertCut((await sessions.get('a')).messages.at(-1), 'The turn was aborted.');
    assert.equal((await read.last).metadata?.cut, 'The turn was aborted.');
    assert.equal(session.status, 'idle');
  });

  test('turnTimeoutMs', async () => {
    const { sessions } = testManager({ fakeAgent: halfAnswer(), turnTimeoutMs: 1500 });
    const { turn } = await started(sessions, 't');
    const session = await turn.done;
    assert.equal(session.error, 'The turn took too long.');
    assertCut((await sessions.get('t')).messages.at(-1), session.error);
  });

  test('close(): the session keeps no error, the answer its reason', async () => {
    const { sessions } = testManager({ fakeAgent: halfAnswer() });
    const { turn } = await started(sessions, 'c');
    const closed = await sessions.close('c');
    assert.equal(closed.error, undefined);
    await turn.done;
    assertCut((await sessions.get('c')).messages.at(-1), 'The session was closed.');
  });

  test('shutdown()', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hs-cut-'));
    const path = join(dir, 's.db');
    const sessions = createSessionManager({ agent: () => halfAnswer(), sandboxes: testSandboxes(), store: createSqliteSessionStore({ path }) });
    await started(sessions, 's');
    await sessions.shutdown();
    const record = await createSqliteSessionStore({ path }).get('s');
    assert.ok(record.error, 'the session keeps an error');
    assertCut(record.messages.at(-1), record.error);
  });

  test('crash recovery: a session found busy at start', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hs-cut-'));
    const path = join(dir, 's.db');
    const first = createSessionManager({ agent: () => halfAnswer(), sandboxes: testSandboxes(), store: createSqliteSessionStore({ path }) });
    await first.create({ id: 'k', metadata: {} });
    await until(async () => (await first.get('k'))?.status === 'idle', 30_000);
    await first.shutdown();
    // What a crash in the middle of a turn leaves: the session busy, its reply half written.
    const store = createSqliteSessionStore({ path });
    const record = await store.get('k');
    record.status = 'busy';
    record.messages.push(
      { id: 'u', role: 'user', parts: [{ type: 'text', text: 'go' }] },
      {
        id: 'm',
        role: 'assistant',
        parts: [
          { type: 'reasoning', text: 'thinking', state: 'streaming' },
          { type: 'text', text: 'half an ', state: 'streaming' },
        ],
      },
    );
    await store.save(record);
    await store.close();
    const second = createSessionManager({ agent: () => halfAnswer(), sandboxes: testSandboxes(), store: createSqliteSessionStore({ path }) });
    try {
      const after = await second.get('k');
      assert.equal(after.status, 'interrupted');
      assertCut(after.messages.at(-1), after.error);
    } finally {
      await second.shutdown();
    }
  });
});
