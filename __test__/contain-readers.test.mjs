// Memory bounded per reader (issue 25, item 6): a reader of a turn that does not read (the first
// client's stream, a `reconnect()`, an SSE body) is ended with an error it can see once more than
// `readerBufferBytes` are queued for it; the turn, and its readers that read, go on to the end.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createDeferred, readTurn, streamAgent, testManager } from './support/sessions.mjs';

const BOUND = 64 * 1024;

/** A text of `count` deltas of `size` characters, as a model's stream has it. */
function longText(count, size) {
  const parts = [{ type: 'text-start', id: 'long' }];
  for (let i = 0; i < count; i++) parts.push({ type: 'text-delta', id: 'long', text: String(i % 10).repeat(size) });
  parts.push({ type: 'text-end', id: 'long' });
  return parts;
}

/** Reads `stream` to its end: its chunks, or the error it ended with. */
async function readAll(stream) {
  const chunks = [];
  try {
    for await (const chunk of stream) chunks.push(chunk);
    return { chunks };
  } catch (error) {
    return { chunks, error };
  }
}

test('a reader that does not read is ended past readerBufferBytes; the turn and the others go on', async () => {
  const { sessions, agent, errors } = testManager({ readerBufferBytes: BOUND });
  const session = await sessions.create({});
  const gate = createDeferred();
  // 1 MB of text: sixteen times the bound.
  agent.script.turns.push({ hold: gate.promise, text: '', parts: longText(1000, 1000) });
  const first = await sessions.send(session.id, { message: 'go' });
  const reading = await sessions.reconnect(session.id);
  const stalled = await sessions.reconnect(session.id);
  const stalledBody = (await sessions.reconnect(session.id)).toUIMessageStreamResponse();
  assert.ok(reading && stalled);
  const read = readTurn(reading);
  gate.resolve();
  const { message, session: done } = await read;
  assert.equal(done.status, 'idle');
  const text = message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
  assert.equal(text.length, 1_000_000);

  // The readers that did not read were ended, each with an error it can see.
  for (const stream of [first.stream, stalled.stream]) {
    const { chunks, error } = await readAll(stream);
    assert.equal(error?.code, 'SESSION_READER_BEHIND', String(error));
    assert.match(error.message, /readerBufferBytes/);
    assert.ok(chunks.length < 1000, `${chunks.length} chunks kept for a reader that did not read`);
  }
  await assert.rejects(stalledBody.text());

  // The stored reply is whole.
  const record = await sessions.get(session.id);
  assert.equal(record.messages.at(-1).parts.filter((p) => p.type === 'text').map((p) => p.text).join(''), text);
  assert.deepEqual(errors, []);
});

test('readers that keep up are never ended, however long the turn', async () => {
  const { sessions, agent } = testManager({ readerBufferBytes: BOUND });
  const session = await sessions.create({});
  agent.script.turns.push({ text: '', parts: longText(1000, 1000) });
  const turn = await sessions.send(session.id, { message: 'go' });
  const body = turn.toUIMessageStreamResponse();
  const sse = await body.text();
  assert.ok(sse.endsWith('data: [DONE]\n\n'));
  assert.ok(sse.length > 1_000_000);
  assert.equal((await turn.done).status, 'idle');
});

test('past reconnectBufferBytes, a reconnect is rebuilt from the reply so far, then live', async () => {
  const half = createDeferred();
  const gate = createDeferred();
  const agent = streamAgent(async function* () {
    yield { type: 'start-step' };
    yield { type: 'reasoning-start', id: 'r' };
    yield { type: 'reasoning-delta', id: 'r', delta: 'thinking' };
    yield { type: 'reasoning-end', id: 'r' };
    yield { type: 'tool-input-available', toolCallId: 'c1', toolName: 'look', input: { q: 1 } };
    yield { type: 'tool-output-available', toolCallId: 'c1', output: { found: true } };
    yield { type: 'text-start', id: 'long' };
    for (let i = 0; i < 300; i++) yield { type: 'text-delta', id: 'long', delta: `${i}`.padEnd(1000, '.') };
    half.resolve();
    await gate.promise;
    for (let i = 300; i < 600; i++) yield { type: 'text-delta', id: 'long', delta: `${i}`.padEnd(1000, '.') };
    yield { type: 'text-end', id: 'long' };
    yield { type: 'finish-step' };
    yield { type: 'finish', finishReason: 'stop' };
  });
  const { sessions, errors } = testManager({ fakeAgent: agent, reconnectBufferBytes: 64 * 1024 });
  const session = await sessions.create({});
  const first = await sessions.send(session.id, { message: 'go' });
  const firstRead = readTurn(first);
  await half.promise;
  // The kept chunks are past their bound by now: the reconnect is rebuilt, then goes on live.
  const again = await sessions.reconnect(session.id);
  const againRead = readTurn(again);
  await new Promise((resolve) => setTimeout(resolve, 50));
  gate.resolve();
  const [a, b] = await Promise.all([firstRead, againRead]);
  assert.deepEqual(b.errors, []);
  assert.deepEqual(JSON.parse(JSON.stringify(b.message)), JSON.parse(JSON.stringify(a.message)));
  const text = a.message.parts.find((p) => p.type === 'text').text;
  assert.equal(text.length, 600_000);
  // What the rebuilt reader got is fewer chunks than the turn (the text so far joined).
  assert.ok(b.chunks.length < a.chunks.length, `${b.chunks.length} vs ${a.chunks.length}`);
  const record = await sessions.get(session.id);
  assert.deepEqual(record.messages.at(-1).parts, JSON.parse(JSON.stringify(a.message.parts)));
  assert.deepEqual(errors, []);
});
