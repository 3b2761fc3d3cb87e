// Figure: reconnect(). A live turn of 10,000 chunks (the stream figure's turn, its last chunks held
// back until the figure is done): the memory the turn's kept chunks hold (the JavaScript heap in
// use, after a garbage collection, with the turn live against after it ended), as they are and
// compacted (`reconnectBufferChunks: 0`); and the time from `reconnect()` to the first chunk of
// its stream, against `get()` of the same session.
import { randomUUID } from 'node:crypto';

import { collectGarbage, interleave, memory, now } from './stats.mjs';
import { chunkAgent, loadPackage, nullSandboxes, readySession, statusWaiter, turnChunks, userMessage } from './support.mjs';
import { timeRow, valueRow } from './report.mjs';

export const title = 'reconnect(): a live turn of 10,000 chunks';

/**
 * An agent serving copies of `chunks` (new objects, as a real agent's stream makes them) but for
 * the last two, then waiting for `gate` to end the turn.
 */
function heldAgent(chunks, gate) {
  return chunkAgent(
    (_prompt, { start }) =>
      new ReadableStream({
        async start(controller) {
          controller.enqueue(start);
          for (const chunk of chunks.slice(0, -2)) controller.enqueue({ ...chunk });
          await gate.promise;
          for (const chunk of chunks.slice(-2)) controller.enqueue(chunk);
          controller.close();
        },
      }),
  );
}

function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

/** Reads `stream` in the background; resolves `seen(n)` once `n` chunks were read. */
function reader(stream) {
  let count = 0;
  const waiting = [];
  const done = (async () => {
    for await (const _ of stream) {
      count++;
      for (const w of waiting.filter((w) => count >= w.n)) w.resolve();
    }
  })();
  return {
    seen: (n) => (count >= n ? Promise.resolve() : new Promise((resolve) => waiting.push({ n, resolve }))),
    done,
  };
}

/** The heap a live 10,000-chunk turn holds in a manager with `options`, in bytes. */
async function heldBytes(createSessionManager, chunks, options) {
  const gate = deferred();
  const sessions = createSessionManager({ agent: () => heldAgent(chunks, gate), sandboxes: nullSandboxes(), ...options });
  const waiter = statusWaiter(sessions);
  await readySession(sessions, waiter, 'held');
  const turn = await sessions.send('held', { message: userMessage(randomUUID(), 'Hello') });
  const read = reader(turn.stream);
  await read.seen(chunks.length - 1);
  await collectGarbage();
  const live = memory().heapUsed;
  gate.resolve();
  await read.done;
  await turn.done;
  await collectGarbage();
  const ended = memory().heapUsed;
  await sessions.shutdown();
  return Math.max(0, live - ended);
}

export async function run({ quick, log }) {
  const { createSessionManager } = loadPackage();
  const chunks = turnChunks(9990);
  const rounds = quick ? 3 : 7;
  log(`  memory: ${rounds} rounds each`);
  const kept = [];
  const compacted = [];
  for (let i = 0; i < rounds; i++) {
    kept.push(await heldBytes(createSessionManager, chunks, {}));
    compacted.push(await heldBytes(createSessionManager, chunks, { reconnectBufferChunks: 0 }));
  }

  const gate = deferred();
  const sessions = createSessionManager({ agent: () => heldAgent(chunks, gate), sandboxes: nullSandboxes() });
  const waiter = statusWaiter(sessions);
  await readySession(sessions, waiter, 'live');
  const turn = await sessions.send('live', { message: userMessage(randomUUID(), 'Hello') });
  const first = reader(turn.stream);
  await first.seen(chunks.length - 1);
  const reps = quick ? 30 : 200;
  log(`  reconnect(): ${reps} rounds, interleaved`);
  const samples = await interleave(
    {
      ours: async () => {
        const started = now();
        const again = await sessions.reconnect('live');
        const read = again.stream.getReader();
        await read.read();
        const ms = now() - started;
        await read.cancel();
        return ms;
      },
      get: async () => {
        const started = now();
        await sessions.get('live');
        return now() - started;
      },
    },
    { reps, warmup: quick ? 5 : 20 },
  );
  gate.resolve();
  await first.done;
  await turn.done;
  await sessions.shutdown();

  return {
    rows: [
      valueRow({
        id: 'reconnectMemory',
        label: 'Heap a live 10,000-chunk turn keeps for reconnect()',
        baselineLabel: 'kept compacted (reconnectBufferChunks: 0)',
        unit: 'bytes',
        ours: kept,
        baseline: compacted,
      }),
      timeRow({
        id: 'reconnectFirstChunk',
        label: 'reconnect() → first chunk, 10,000 chunks kept',
        baselineLabel: 'get() of the same session',
        ours: samples.ours,
        baseline: samples.get,
      }),
    ],
    notes: [],
    checks: {},
  };
}
