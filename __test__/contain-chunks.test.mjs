// A chunk can fail its own turn, never the process (issue 25, items 1 and 5): what an agent's
// stream yields goes through `ai`'s own `toUIMessageStream` (the fake agent's turns do), while
// another session's turn runs. A BigInt in a tool's output, a cycle, a getter that throws, nesting
// 6,000 deep in a tool's input and in message metadata end their turn with a `SESSION_CHUNK`
// error; a lone surrogate becomes U+FFFD for the client and the store alike; a non-string delta
// ends its turn. In every case the process lives, the other turn finishes, and the bad turn's
// stored reply is the message its client read.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createDeferred, readTurn, testManager } from './support/sessions.mjs';

/** An object nested `depth` levels deep. */
function deep(depth) {
  let value = { leaf: true };
  for (let i = 0; i < depth; i++) value = { next: value };
  return value;
}

const cycle = () => {
  const value = { name: 'loop' };
  value.self = value;
  return value;
};

const throwing = () => ({
  get secret() {
    throw new Error('a getter that throws');
  },
});

/** A tool call and its result, as a model's stream has them. */
const toolParts = ({ input = { q: 1 }, output = { ok: true } }) => [
  { type: 'tool-call', toolCallId: 'call-1', toolName: 'lookup', input },
  { type: 'tool-result', toolCallId: 'call-1', toolName: 'lookup', input, output },
];

const CASES = [
  { name: 'a BigInt in a tool output', parts: () => toolParts({ output: { id: 9007199254740993n } }), fails: true },
  { name: 'a cycle in a tool output', parts: () => toolParts({ output: cycle() }), fails: true },
  { name: 'a getter that throws in a tool output', parts: () => toolParts({ output: throwing() }), fails: true },
  { name: 'nesting 6,000 deep in a tool input', parts: () => toolParts({ input: deep(6000) }), fails: true },
  { name: 'nesting 200 deep in a tool input (past the engine)', parts: () => toolParts({ input: deep(200) }), fails: true },
  { name: 'nesting 6,000 deep in message metadata', parts: () => [], metadata: () => deep(6000), fails: true },
  {
    name: 'a lone surrogate in a text delta',
    parts: () => [
      { type: 'text-start', id: 'cut' },
      { type: 'text-delta', id: 'cut', text: 'half an emoji: \ud83d and on' },
      { type: 'text-end', id: 'cut' },
    ],
    fails: false,
    text: 'half an emoji: \ufffd and on',
  },
  { name: 'a lone surrogate in a tool output', parts: () => toolParts({ output: { text: 'x\udc00y' } }), fails: false },
  {
    name: 'a non-string delta',
    parts: () => [
      { type: 'text-start', id: 'n' },
      { type: 'text-delta', id: 'n', text: 'fine ' },
      { type: 'text-delta', id: 'n', text: 5 },
      { type: 'text-end', id: 'n' },
    ],
    fails: true,
  },
];

/** The fake agent, with `metadata()` as each turn's message metadata when given. */
function managerWith(metadataOf) {
  const made = testManager();
  const { agent } = made;
  const stream = agent.stream;
  agent.stream = async (options) => {
    const result = await stream(options);
    const metadata = metadataOf();
    if (metadata === undefined) return result;
    return {
      ...result,
      toUIMessageStream: (streamOptions) => result.toUIMessageStream({ ...streamOptions, messageMetadata: () => metadata }),
    };
  };
  return made;
}

describe('a chunk that cannot be carried fails its own turn', () => {
  for (const c of CASES) {
    test(c.name, async () => {
      let metadata;
      const { sessions, agent, errors } = managerWith(() => metadata);
      const other = await sessions.create({});
      const bad = await sessions.create({});
      const gate = createDeferred();
      agent.script.turns.push({ hold: gate.promise, text: 'the other turn' });
      const otherTurn = await sessions.send(other.id, { message: 'go' });
      agent.script.turns.push({ text: 'before ', parts: c.parts() });
      metadata = c.metadata?.();
      const badTurn = await sessions.send(bad.id, { message: 'bad' });
      metadata = undefined;
      const read = await readTurn(badTurn);
      gate.resolve();
      const good = await readTurn(otherTurn);

      // The other session's turn went on.
      assert.equal(good.session.status, 'idle');
      assert.deepEqual(
        good.message.parts.filter((p) => p.type === 'text').map((p) => p.text),
        ['the other turn'],
      );

      // The bad turn: its stored reply is what its client read.
      const record = await sessions.get(bad.id);
      const stored = record.messages.at(-1);
      if (read.message === undefined) {
        // The first chunk failed: the client read no message, and no reply is stored.
        assert.ok(c.fails);
        assert.equal(stored.role, 'user');
      } else {
        assert.equal(stored.role, 'assistant');
        assert.equal(stored.id, read.message.id);
        // (As JSON: the reader's message holds `undefined` fields no wire carries.)
        const asJson = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));
        assert.deepEqual(stored.parts, asJson(read.message.parts));
        assert.deepEqual(stored.metadata, asJson(read.message.metadata));
      }
      // Nothing a store cannot hold reached it, nor the client.
      assert.equal(JSON.stringify(record).includes('\\ud'), false);
      assert.ok(read.chunks.every((chunk) => JSON.stringify(chunk).isWellFormed()));

      const chunkErrors = errors.filter(({ error }) => error?.code === 'SESSION_CHUNK');
      if (c.fails) {
        assert.equal(chunkErrors.length, 1, JSON.stringify(errors.map((e) => e.error?.message)));
        assert.equal(chunkErrors[0].sessionId, bad.id);
        assert.ok(read.chunks.some((chunk) => chunk.type === 'error'), 'the client is told');
        assert.ok(record.error !== undefined && record.error !== null, 'the session says its turn failed');
      } else {
        assert.deepEqual(chunkErrors, []);
        assert.equal(read.chunks.some((chunk) => chunk.type === 'error'), false);
        if (c.text !== undefined) {
          assert.deepEqual(stored.parts.filter((p) => p.type === 'text').map((p) => p.text), ['before ', c.text]);
        }
      }
      assert.equal(record.status, 'idle');
      // The session takes another turn.
      const next = await readTurn(await sessions.send(bad.id, { message: 'again' }));
      assert.equal(next.session.status, 'idle');
    });
  }
});
