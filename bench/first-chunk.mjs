// Figure 2, send() → first chunk: the time from `sessions.send()` on an idle session to the
// first chunk read from `turn.stream`, against calling the same agent directly
// (`agent.stream()` + `toUIMessageStream()` → first chunk). The turn is a short one (7 chunks),
// read to its end untimed before the next. Target: under 1 ms more than the direct call, at the
// median and at p95.
import { randomUUID } from 'node:crypto';

import { interleave, now, summarize } from './stats.mjs';
import { chunkAgent, loadPackage, loadReference, nullSandboxes, readySession, shortTurn, statusWaiter, userMessage } from './support.mjs';
import { timeRow } from './report.mjs';

export const title = 'send() → first chunk';

/** Reads the first chunk of `stream`, then the rest untimed: the time of the first. */
async function firstChunk(stream, started) {
  const reader = stream.getReader();
  const first = await reader.read();
  const at = now();
  if (first.done) throw new Error('the turn streamed nothing');
  while (!(await reader.read()).done) {}
  return at - started;
}

export async function run({ quick, log }) {
  const { createSessionManager } = loadPackage();
  const chunks = shortTurn();
  const agent = chunkAgent(() => chunks);
  const errors = [];
  const sessions = createSessionManager({
    agent: () => agent,
    sandboxes: nullSandboxes(),
    onError: (error, context) => errors.push({ message: String(error?.message ?? error), ...context }),
  });
  const waiter = statusWaiter(sessions);
  // The reference on the same agent, when it is there (alternating with ours in the same rounds).
  const reference = await loadReference();
  const theirs = reference.module?.createSessionManager({ agent: () => agent, sandboxes: nullSandboxes(), onError: (error, context) => errors.push({ message: String(error?.message ?? error), ...context, reference: true }) });
  const theirWaiter = theirs && statusWaiter(theirs);
  // A few sessions in turn, each with a conversation that grows slowly, as in use.
  const ids = Array.from({ length: 8 }, (_, i) => `first-${i}`);
  for (const id of ids) await readySession(sessions, waiter, id);
  if (theirs) for (const id of ids) await readySession(theirs, theirWaiter, id);
  let theirRound = 0;
  const direct = await agent.createSession({ sessionId: 'direct' });
  let round = 0;

  const reps = quick ? 60 : 400;
  log(`  ${reps} rounds, interleaved`);
  const samples = await interleave(
    {
      ours: async () => {
        const id = ids[round++ % ids.length];
        const started = now();
        const turn = await sessions.send(id, { message: userMessage(randomUUID(), 'Hello') });
        const ms = await firstChunk(turn.stream, started);
        await turn.done;
        return ms;
      },
      ...(theirs
        ? {
            reference: async () => {
              const id = ids[theirRound++ % ids.length];
              const started = now();
              const turn = await theirs.send(id, { message: userMessage(randomUUID(), 'Hello') });
              const ms = await firstChunk(turn.stream, started);
              await turn.done;
              return ms;
            },
          }
        : {}),
      direct: async () => {
        const started = now();
        const result = await agent.stream({ session: direct, prompt: 'Hello' });
        const messageId = randomUUID();
        return firstChunk(result.toUIMessageStream({ generateMessageId: () => messageId }), started);
      },
    },
    { reps, warmup: quick ? 10 : 40 },
  );
  await sessions.shutdown();
  await theirs?.shutdown();

  const o = summarize(samples.ours);
  const d = summarize(samples.direct);
  const extra = { median: o.median - d.median, p95: o.p95 - d.p95, p99: o.p99 - d.p99 };
  return {
    rows: [
      timeRow({
        id: 'firstChunk',
        label: 'send() → first chunk of turn.stream',
        baselineLabel: 'agent.stream() + toUIMessageStream() → first chunk',
        ours: samples.ours,
        baseline: samples.direct,
        reference: samples.reference,
        target: { text: 'p95 < 1 ms, and < 1 ms more than the agent (median and p95)', check: (_, ours, base) => ours.p95 < 1 && ours.median - base.median < 1 && ours.p95 - base.p95 < 1 },
        chart: 'send() → first chunk',
      }),
    ],
    notes: [
      `send() adds ${extra.median.toFixed(3)} ms at the median, ${extra.p95.toFixed(3)} ms at p95, ${extra.p99.toFixed(3)} ms at p99 over calling the agent directly.`,
    ],
    reference: reference.missing ? { missing: reference.missing } : { dir: reference.dir },
    checks: { errors, extraMs: extra },
  };
}
