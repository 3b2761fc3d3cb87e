// reconnect(): the turn under way from its first chunk, then live, byte for byte what its first
// client got; any number of readers; a reader that cancels never touches the turn.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { readUIMessageStream } from 'ai';
import { createSessionManager } from '../index.js';
import { createDeferred, readTurn, streamAgent, testManager, testSandboxes, until } from './support/sessions.mjs';
import { forkingSandboxes, scriptedAgent } from './support/harness.mjs';

const WORDS = 10_000;

/** A reader of a response body: its bytes so far, read on in the background to its end. */
function bodyReader(response) {
  const reader = response.body.getReader();
  const parts = [];
  let size = 0;
  const finished = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return Buffer.concat(parts);
      parts.push(value);
      size += value.length;
    }
  })();
  return { size: () => size, text: () => Buffer.concat(parts).toString(), finished, cancel: () => reader.cancel() };
}

/** The text a UI message stream body spells, from the deltas of its chunks. */
function textOf(body) {
  return body
    .toString()
    .split('\n\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice(6)))
    .filter((chunk) => chunk.type === 'text-delta')
    .map((chunk) => chunk.delta)
    .join('');
}

/** A turn of `count` text deltas that waits for `gate` after `half` of them. */
function longTurn(count, gate, half = count / 2) {
  return streamAgent(async function* () {
    yield { type: 'text-start', id: 't' };
    for (let i = 0; i < count; i++) {
      if (i === half) await gate.promise;
      yield { type: 'text-delta', id: 't', delta: `w${i} ` };
    }
    yield { type: 'text-end', id: 't' };
    yield { type: 'finish', finishReason: 'stop' };
  });
}

describe('reconnect() with the fake agent', () => {
  test('in the middle of a 10,000-chunk turn: exactly the bytes the first reader got', async () => {
    const gate = createDeferred();
    const { sessions } = testManager({ fakeAgent: longTurn(WORDS, gate) });
    await sessions.create({ id: 's', metadata: {} });
    const turn = await sessions.send('s', { message: 'go' });
    const first = bodyReader(turn.toUIMessageStreamResponse());
    await until(() => first.text().includes(`w${WORDS / 2 - 1} `), 30_000);
    const again = await sessions.reconnect('s');
    assert.ok(again, 'a turn is under way');
    const second = bodyReader(again.toUIMessageStreamResponse());
    gate.resolve();
    const [a, b] = await Promise.all([first.finished, second.finished]);
    assert.ok(a.length > 100_000);
    assert.equal(Buffer.compare(a, b), 0, 'the same bytes');
    assert.equal(textOf(b).split(' ').length - 1, WORDS);
    assert.equal((await again.done).status, 'idle');
  });

  test('three concurrent reconnects; one cancelled touches neither the turn nor the others', async () => {
    const gate = createDeferred();
    const { sessions } = testManager({ fakeAgent: longTurn(3000, gate) });
    await sessions.create({ id: 's', metadata: {} });
    const turn = await sessions.send('s', { message: 'go' });
    const first = bodyReader(turn.toUIMessageStreamResponse());
    await until(() => first.text().includes('w1499 '), 30_000);
    // The first client goes away (a reload): the turn goes on.
    await first.cancel();
    const readers = await Promise.all([1, 2, 3].map(() => sessions.reconnect('s')));
    const bodies = readers.map((r) => bodyReader(r.toUIMessageStreamResponse()));
    await until(() => bodies.every((b) => b.text().includes('w1499 ')), 30_000);
    await bodies[1].cancel();
    gate.resolve();
    const [a, , c] = await Promise.all([bodies[0].finished, bodies[1].finished.catch(() => undefined), bodies[2].finished]);
    assert.equal(Buffer.compare(a, c), 0);
    assert.equal(textOf(a).split(' ').length - 1, 3000);
    assert.match(a.toString(), /"type":"finish"/);
    const session = await turn.done;
    assert.equal(session.status, 'idle');
    const record = await sessions.get('s');
    assert.equal(record.messages.at(-1).parts.find((p) => p.type === 'text').text.split(' ').length - 1, 3000);
  });

  test('after the turn ended, and for an unknown session: undefined', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 's', metadata: {} });
    const turn = await sessions.send('s', { message: 'hi' });
    await readTurn(turn);
    assert.equal(await sessions.reconnect('s'), undefined);
    assert.equal(await sessions.reconnect('nobody'), undefined);
  });

  test('past reconnectBufferChunks: the reply so far rebuilt as chunks, then live', async () => {
    const gate = createDeferred();
    const { sessions } = testManager({ fakeAgent: longTurn(2000, gate), reconnectBufferChunks: 100 });
    await sessions.create({ id: 's', metadata: {} });
    const turn = await sessions.send('s', { message: 'go' });
    const [mine, theirs] = turn.stream.tee();
    const firstMessage = lastMessage(mine);
    const seen = [];
    const reading = (async () => {
      for await (const chunk of theirs) seen.push(chunk);
    })();
    await until(() => seen.length > 1000, 30_000);
    const again = await sessions.reconnect('s');
    const secondMessage = lastMessage(again.stream);
    gate.resolve();
    await reading;
    const [a, b] = await Promise.all([firstMessage, secondMessage]);
    assert.deepEqual(b, a);
    assert.equal(b.parts.find((p) => p.type === 'text').text.split(' ').length - 1, 2000);
  });

  test('reconnectBufferChunks must be a whole number', () => {
    assert.throws(
      () => createSessionManager({ agent: () => ({}), sandboxes: testSandboxes(), reconnectBufferChunks: -1 }),
      { name: 'SessionInputError' },
    );
  });
});

async function lastMessage(stream) {
  let message;
  for await (const snapshot of readUIMessageStream({ stream })) message = snapshot;
  return message;
}

// The scripted harness waits a millisecond a word: a fifth of the words in the inner loop
// (HARNESS_SESSIONS_QUICK=1, `npm run test:quick`).
const HARNESS_WORDS = process.env.HARNESS_SESSIONS_QUICK === '1' ? WORDS / 5 : WORDS;

describe('reconnect() with HarnessAgent', () => {
  test(`in the middle of a ${HARNESS_WORDS}-word answer: the same bytes as the first reader`, async () => {
    const { agent } = scriptedAgent({ wordDelayMs: 1 });
    const sessions = createSessionManager({ agent: () => agent, sandboxes: forkingSandboxes() });
    try {
      await sessions.create({ id: 'h', metadata: {} });
      const words = Array.from({ length: HARNESS_WORDS }, (_, i) => `w${i}`).join(' ');
      const turn = await sessions.send('h', { message: words });
      const first = bodyReader(turn.toUIMessageStreamResponse());
      await until(() => first.text().includes('w200 '), 60_000);
      const again = await sessions.reconnect('h');
      assert.ok(again, 'a turn is under way');
      const second = bodyReader(again.toUIMessageStreamResponse());
      const [a, b] = await Promise.all([first.finished, second.finished]);
      assert.equal(Buffer.compare(a, b), 0, 'the same bytes');
      assert.equal(textOf(b), `You said: ${words}`);
      assert.equal((await again.done).status, 'idle');
    } finally {
      await sessions.shutdown();
    }
  });
});
