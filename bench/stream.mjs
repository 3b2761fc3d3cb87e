// Figure 1, stream throughput (the stream boundary). A 10,000-chunk turn (start, start-step,
// text-start, 9,990 text-delta of a word, text-end, four tool chunks, finish-step, finish) served
// by an agent whose `toUIMessageStream()` goes through `createUIMessageStream` of `ai`, as a
// `HarnessAgent`'s does, timed from `sessions.send()` to the last chunk read from `turn.stream`.
// The baseline is the fastest plain JavaScript way to hand the same chunks of the same agent to a
// consumer: a pump (a `reader.read()` loop enqueueing each chunk into a new `ReadableStream` the
// consumer reads), timed from the call that starts the agent's turn. Target: ours ≥ 1.0 × the
// pump's chunks/s. Ours reads the agent's stream a few reads ahead (js/read-ahead.js); the same
// trick in a plain pump is the second, strongest baseline, reported beside the first. Also the body of `turn.toUIMessageStreamResponse()` read to its end, against
// the body of `createUIMessageStreamResponse()` of `ai` over the pump.
import { randomUUID } from 'node:crypto';

import { interleave, now, summarize } from './stats.mjs';
import { chunkAgent, drain, loadAi, loadPackage, loadReference, nullSandboxes, readySession, statusWaiter, turnChunks, userMessage } from './support.mjs';
import { rateRow, timeRow } from './report.mjs';

export const title = 'Stream throughput: a 10,000-chunk turn';

export async function run({ quick, log }) {
  const { createSessionManager } = loadPackage();
  const { createUIMessageStream, createUIMessageStreamResponse } = await loadAi();
  const chunks = turnChunks(9990);
  const total = chunks.length + 1;
  const agent = chunkAgent(() => chunks, { createUIMessageStream });
  const errors = [];
  const sessions = createSessionManager({
    agent: () => agent,
    sandboxes: nullSandboxes(),
    onError: (error, context) => errors.push({ message: String(error?.message ?? error), ...context }),
  });
  const waiter = statusWaiter(sessions);
  // The reference on the same agent, when it is there.
  const reference = await loadReference();
  const theirs = reference.module?.createSessionManager({
    agent: () => agent,
    sandboxes: nullSandboxes(),
    onError: (error, context) => errors.push({ message: String(error?.message ?? error), ...context, reference: true }),
  });
  const theirWaiter = theirs && statusWaiter(theirs);
  const direct = await agent.createSession({ sessionId: 'direct' });
  let count = 0;

  // Each round of ours runs in a new session (created, untimed, and deleted after), so that the
  // conversation does not grow from round to round.
  const ourTurn = async (read, manager = sessions, managerWaiter = waiter) => {
    const id = `stream-${count++}`;
    await readySession(manager, managerWaiter, id);
    const started = now();
    const turn = await manager.send(id, { message: userMessage(randomUUID(), 'Write a long answer.') });
    const seen = await read(turn, started);
    await turn.done;
    await manager.delete(id);
    managerWaiter.forget(id);
    return seen;
  };
  /** The baseline: a reader loop enqueueing into a new stream, a read at a time, nothing reported. */
  const pumped = (source) => {
    let controller;
    const stream = new ReadableStream({ start: (c) => void (controller = c) });
    void (async () => {
      const reader = source.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        controller.enqueue(value);
      }
      controller.close();
    })();
    return stream;
  };
  /** The strongest baseline: the same loop with eight reads kept outstanding, awaited in order. */
  const pumpedAhead = (source) => {
    let controller;
    const stream = new ReadableStream({ start: (c) => void (controller = c) });
    void (async () => {
      const reader = source.getReader();
      const reads = Array.from({ length: 8 }, () => reader.read());
      for (let next = 0; ; next = (next + 1) % 8) {
        const { done, value } = await reads[next];
        if (done) break;
        reads[next] = reader.read();
        controller.enqueue(value);
      }
      controller.close();
    })();
    return stream;
  };
  const pumpTurn = async (read, pump = pumped) => {
    const started = now();
    const result = await agent.stream({ session: direct, prompt: 'Write a long answer.' });
    const messageId = randomUUID();
    // The options the manager gives the agent's turn (js/turns.js).
    const stream = result.toUIMessageStream({ originalMessages: [], generateMessageId: () => messageId, onError: () => 'An error occurred.' });
    return read(pump(stream), started);
  };

  const checks = { oursChunks: [], pumpChunks: [], aheadChunks: [], oursBytes: [], aiBytes: [], referenceChunks: [], referenceBytes: [] };
  const chunkTime = (list) => async (stream, started) => {
    const { count: read, lastAt } = await drain(stream, now);
    list.push(read);
    return lastAt - started;
  };
  const bodyTime = (list) => async (response, started) => {
    const { bytes, lastAt } = await drain(response.body, now);
    list.push(bytes);
    return lastAt - started;
  };

  const reps = quick ? 6 : 30;
  log(`  ${reps} rounds of ${theirs ? 7 : 5} variants, interleaved${theirs ? ' (the reference included)' : `; the reference is not measured: ${reference.missing}`}`);
  const samples = await interleave(
    {
      ours: () => ourTurn((turn, started) => chunkTime(checks.oursChunks)(turn.stream, started)),
      pump: () => pumpTurn(chunkTime(checks.pumpChunks)),
      pumpAhead: () => pumpTurn(chunkTime(checks.aheadChunks), pumpedAhead),
      oursResponse: () => ourTurn((turn, started) => bodyTime(checks.oursBytes)(turn.toUIMessageStreamResponse(), started)),
      aiResponse: () => pumpTurn((stream, started) => bodyTime(checks.aiBytes)(createUIMessageStreamResponse({ stream }), started)),
      ...(theirs
        ? {
            reference: () => ourTurn((turn, started) => chunkTime(checks.referenceChunks)(turn.stream, started), theirs, theirWaiter),
            referenceResponse: () => ourTurn((turn, started) => bodyTime(checks.referenceBytes)(turn.toUIMessageStreamResponse(), started), theirs, theirWaiter),
          }
        : {}),
    },
    { reps, warmup: quick ? 2 : 5 },
  );
  await sessions.shutdown();
  await theirs?.shutdown();

  const unique = (list) => [...new Set(list)];
  return {
    rows: [
      rateRow({
        id: 'stream.throughput',
        label: 'send() → last chunk of turn.stream (10,000 chunks, agent through createUIMessageStream)',
        baselineLabel: 'plain JS pump of the same agent: reader.read() loop → enqueue into the consumer\'s stream',
        items: total,
        ours: samples.ours,
        baseline: samples.pump,
        reference: samples.reference,
        target: { text: '≥ 1.0 × the pump', check: (r) => r >= 1.0 },
        chart: 'stream vs a plain JS pump',
        chartTarget: 1.0,
      }),
      rateRow({
        id: 'stream.throughputVsReadAhead',
        label: 'send() → last chunk of turn.stream, against the strongest pump',
        baselineLabel: 'the same pump reading 8 reads ahead (the trick js/read-ahead.js plays)',
        items: total,
        ours: samples.ours,
        baseline: samples.pumpAhead,
        chart: 'stream vs a read-ahead JS pump',
      }),
      rateRow({
        id: 'stream.response',
        label: 'toUIMessageStreamResponse() body read to end',
        baselineLabel: 'createUIMessageStreamResponse (ai) over the pump',
        items: total,
        ours: samples.oursResponse,
        baseline: samples.aiResponse,
        reference: samples.referenceResponse,
        chart: 'SSE response throughput',
      }),
      timeRow({
        id: 'stream.turnTime',
        label: 'time of the 10,000-chunk turn, send() → last chunk',
        baselineLabel: 'the pump',
        ours: samples.ours,
        baseline: samples.pump,
        reference: samples.reference,
      }),
    ],
    reference: reference.missing ? { missing: reference.missing } : { dir: reference.dir },
    checks: {
      chunksPerTurn: total,
      referenceChunksRead: unique(checks.referenceChunks),
      referenceBodyBytes: unique(checks.referenceBytes),
      oursChunksRead: unique(checks.oursChunks),
      pumpChunksRead: unique(checks.pumpChunks),
      aheadChunksRead: unique(checks.aheadChunks),
      oursBodyBytes: unique(checks.oursBytes),
      aiBodyBytes: unique(checks.aiBytes),
      errors,
    },
    raw: { ...samples, summary: Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, summarize(v)])) },
  };
}
