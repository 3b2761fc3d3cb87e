// Figure 1, stream throughput (the stream boundary). A 10,000-chunk turn (start, start-step,
// text-start, 9,990 text-delta of a word, text-end, four tool chunks, finish-step, finish) served
// pre-built by the agent's `toUIMessageStream()`, timed from `sessions.send()` to the last chunk
// read from `turn.stream`; against a pure-JavaScript pass-through of the same agent's stream
// (`agent.stream()` → `toUIMessageStream()` → `TransformStream` → read to its end), timed from
// the call that starts the turn. Target: ours ≥ 0.9 × the pass-through's chunks/s.
// Also the body of `turn.toUIMessageStreamResponse()` read to its end, against the body of
// `createUIMessageStreamResponse()` of `ai` over the pass-through. And, as a second and tighter
// baseline, a plain JavaScript pump shaped as ours (a reader loop enqueueing each chunk into a new
// `ReadableStream`, nothing reported anywhere): the pipe of a `TransformStream` costs more per
// chunk than such a pump, so the pump shows what reporting the chunks to Rust costs.
import { randomUUID } from 'node:crypto';

import { interleave, now, summarize } from './stats.mjs';
import { chunkAgent, drain, loadAi, loadPackage, nullSandboxes, readySession, statusWaiter, turnChunks, userMessage } from './support.mjs';
import { rateRow, timeRow } from './report.mjs';

export const title = 'Stream throughput: a 10,000-chunk turn';

export async function run({ quick, log }) {
  const { createSessionManager } = loadPackage();
  const { createUIMessageStreamResponse } = await loadAi();
  const chunks = turnChunks(9990);
  const total = chunks.length + 1;
  const agent = chunkAgent(() => chunks);
  const errors = [];
  const sessions = createSessionManager({
    agent: () => agent,
    sandboxes: nullSandboxes(),
    onError: (error, context) => errors.push({ message: String(error?.message ?? error), ...context }),
  });
  const waiter = statusWaiter(sessions);
  const direct = await agent.createSession({ sessionId: 'direct' });
  let count = 0;

  // Each round of ours runs in a new session (created, untimed, and deleted after), so that the
  // conversation does not grow from round to round.
  const ourTurn = async (read) => {
    const id = `stream-${count++}`;
    await readySession(sessions, waiter, id);
    const started = now();
    const turn = await sessions.send(id, { message: userMessage(randomUUID(), 'Write a long answer.') });
    const seen = await read(turn, started);
    await turn.done;
    await sessions.delete(id);
    waiter.forget(id);
    return seen;
  };
  const directTurn = async (read) => {
    const started = now();
    const result = await agent.stream({ session: direct, prompt: 'Write a long answer.' });
    const messageId = randomUUID();
    const stream = result.toUIMessageStream({ generateMessageId: () => messageId }).pipeThrough(new TransformStream());
    return read(stream, started);
  };

  /** A reader loop enqueueing into a new stream, as js/turns.js does, without the reports. */
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
  const pumpTurn = async (read) => {
    const started = now();
    const result = await agent.stream({ session: direct, prompt: 'Write a long answer.' });
    const messageId = randomUUID();
    return read(pumped(result.toUIMessageStream({ generateMessageId: () => messageId })), started);
  };

  const checks = { oursChunks: [], passThroughChunks: [], pumpChunks: [], oursBytes: [], aiBytes: [] };
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
  log(`  ${reps} rounds of 5 variants, interleaved`);
  const samples = await interleave(
    {
      ours: () => ourTurn((turn, started) => chunkTime(checks.oursChunks)(turn.stream, started)),
      passThrough: () => directTurn(chunkTime(checks.passThroughChunks)),
      pump: () => pumpTurn(chunkTime(checks.pumpChunks)),
      oursResponse: () => ourTurn((turn, started) => bodyTime(checks.oursBytes)(turn.toUIMessageStreamResponse(), started)),
      aiResponse: () => directTurn((stream, started) => bodyTime(checks.aiBytes)(createUIMessageStreamResponse({ stream }), started)),
    },
    { reps, warmup: quick ? 2 : 5 },
  );
  await sessions.shutdown();

  const unique = (list) => [...new Set(list)];
  return {
    rows: [
      rateRow({
        id: 'stream.throughput',
        label: 'send() → last chunk of turn.stream (10,000 chunks)',
        baselineLabel: 'pure-JS pass-through (TransformStream)',
        items: total,
        ours: samples.ours,
        baseline: samples.passThrough,
        target: { text: '≥ 0.9 × pass-through', check: (r) => r >= 0.9 },
        chart: 'stream throughput',
        chartTarget: 0.9,
      }),
      rateRow({
        id: 'stream.vsPump',
        label: 'send() → last chunk of turn.stream (10,000 chunks)',
        baselineLabel: 'plain JS pump: reader loop → enqueue (no reports)',
        items: total,
        ours: samples.ours,
        baseline: samples.pump,
        chart: 'stream vs a plain JS pump',
      }),
      rateRow({
        id: 'stream.response',
        label: 'toUIMessageStreamResponse() body read to end',
        baselineLabel: 'createUIMessageStreamResponse (ai) over the pass-through',
        items: total,
        ours: samples.oursResponse,
        baseline: samples.aiResponse,
        chart: 'SSE response throughput',
      }),
      timeRow({
        id: 'stream.turnTime',
        label: 'time of the 10,000-chunk turn, send() → last chunk',
        baselineLabel: 'pass-through',
        ours: samples.ours,
        baseline: samples.passThrough,
      }),
    ],
    checks: {
      chunksPerTurn: total,
      oursChunksRead: unique(checks.oursChunks),
      passThroughChunksRead: unique(checks.passThroughChunks),
      pumpChunksRead: unique(checks.pumpChunks),
      oursBodyBytes: unique(checks.oursBytes),
      aiBodyBytes: unique(checks.aiBytes),
      errors,
    },
    raw: { ...samples, summary: Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, summarize(v)])) },
  };
}
