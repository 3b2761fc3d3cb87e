// Figure: the memory of long turns (issue 25, item 6). Peak RSS of a process running one turn of
// HARNESS_BENCH_TURN_MB MB of text (default 200; 1 KB text deltas, each a string of its own, made
// as the agent's stream is read), through the manager:
// - read at full speed by its client;
// - never read (its client's stream is ended at `readerBufferBytes`, the turn goes on);
// - read at full speed, plus 10 `reconnect()`s whose SSE bodies nobody reads (each ended at its
//   bound; before, each held the turn again as bytes);
// and 20 such turns at once, each read at full speed. Each case in a fresh process; peak RSS as the
// kernel counts it (`maxRSS`), less the process's RSS before the turn. Target: stalled readers
// cost a constant each (their bound), not a copy of the turn.
import { randomUUID } from 'node:crypto';

import { loadPackage, nullSandboxes, runTask, statusWaiter, readySession, userMessage, chunkAgent } from './support.mjs';
import { valueRow } from './report.mjs';

export const title = 'Long turns: peak RSS';

const MB = 2 ** 20;

/** An agent whose turn is `count` text deltas of 1 KB, each made when the stream is read. */
function longAgent(count) {
  const base = 'x'.repeat(1016);
  return chunkAgent((_prompt, { start }) => {
    let i = 0;
    let phase = 0;
    return new ReadableStream(
      {
        pull(controller) {
          if (phase === 0) {
            controller.enqueue(start);
            controller.enqueue({ type: 'start-step' });
            controller.enqueue({ type: 'text-start', id: 't' });
            phase = 1;
            return;
          }
          for (let k = 0; k < 64 && i < count; k++, i++) {
            // A string of its own, as one parsed from the network is.
            controller.enqueue({ type: 'text-delta', id: 't', delta: JSON.parse(`"${base}${String(i).padStart(8, '0')}"`) });
          }
          if (i === count) {
            controller.enqueue({ type: 'text-end', id: 't' });
            controller.enqueue({ type: 'finish-step' });
            controller.enqueue({ type: 'finish', finishReason: 'stop' });
            controller.close();
          }
        },
      },
      { highWaterMark: 0 },
    );
  });
}

async function drain(stream) {
  let bytes = 0;
  try {
    for await (const chunk of stream) bytes += chunk.byteLength ?? 1;
  } catch {}
  return bytes;
}

export const tasks = {
  async turn({ mb, mode, turns }) {
    const { createSessionManager } = loadPackage();
    const count = Math.round((mb * MB) / 1024);
    const sessions = createSessionManager({ agent: () => longAgent(count), sandboxes: nullSandboxes() });
    const waiter = statusWaiter(sessions);
    const ids = Array.from({ length: turns }, (_, i) => `long-${i}`);
    for (const id of ids) await readySession(sessions, waiter, id);
    const before = process.memoryUsage.rss();
    const started = Date.now();
    const errors = [];
    await Promise.all(
      ids.map(async (id) => {
        const turn = await sessions.send(id, { message: userMessage(randomUUID(), 'Write a lot.') });
        const stalled = [];
        if (mode === 'stalled10') {
          for (let k = 0; k < 10; k++) stalled.push((await sessions.reconnect(id)).toUIMessageStreamResponse());
        }
        if (mode !== 'never') await drain(turn.stream);
        const done = await turn.done;
        if (done.status !== 'idle') errors.push(done.status);
        for (const body of stalled) await body.text().catch(() => {});
      }),
    );
    const wallMs = Date.now() - started;
    const maxRss = process.resourceUsage().maxRSS * 1024;
    const stored = await sessions.get(ids[0]);
    const textBytes = stored.messages.at(-1).parts.filter((p) => p.type === 'text').reduce((n, p) => n + p.text.length, 0);
    await sessions.shutdown();
    return { before, maxRss, peakGrowth: maxRss - before, wallMs, textBytes, errors };
  },
};

export async function run({ quick, log }) {
  const mb = Number(process.env.HARNESS_BENCH_TURN_MB) || (quick ? 20 : 200);
  const manyMb = Number(process.env.HARNESS_BENCH_MANY_TURN_MB) || mb;
  const cases = [
    { id: 'read', label: `one ${mb} MB turn, read at full speed`, args: { mb, mode: 'read', turns: 1 } },
    { id: 'never', label: `one ${mb} MB turn, never read`, args: { mb, mode: 'never', turns: 1 } },
    { id: 'stalled10', label: `one ${mb} MB turn, read, plus 10 stalled reconnect() bodies`, args: { mb, mode: 'stalled10', turns: 1 } },
    { id: 'many', label: `20 turns of ${manyMb} MB at once, each read at full speed`, args: { mb: manyMb, mode: 'read', turns: 20 } },
  ];
  const results = {};
  for (const c of cases) {
    const result = runTask('turn-memory', 'turn', c.args, { timeoutMs: 1_800_000 });
    results[c.id] = result;
    log(`  ${c.label}: peak RSS +${(result.peakGrowth / MB).toFixed(0)} MiB (${(result.maxRss / MB).toFixed(0)} MiB), ${(result.wallMs / 1000).toFixed(1)} s, text stored ${(result.textBytes / MB).toFixed(0)} MiB${result.errors.length ? `, errors ${result.errors}` : ''}`);
  }
  const baselineLabel = `one ${mb} MB turn read at full speed`;
  return {
    rows: cases.map((c) =>
      valueRow({
        id: `turn-memory.${c.id}`,
        label: `${c.label}: peak RSS growth`,
        baselineLabel: c.id === 'read' ? undefined : baselineLabel,
        unit: 'bytes',
        ours: results[c.id].peakGrowth,
        baseline: c.id === 'read' ? undefined : results.read.peakGrowth,
      }),
    ),
    notes: [
      `1 KB text deltas; readerBufferBytes and the other options at their defaults. Peak RSS growth: the kernel's maxRSS less the RSS before the turn, one fresh process per case.`,
    ],
    checks: Object.fromEntries(Object.entries(results).map(([id, r]) => [id, { wallMs: r.wallMs, textBytes: r.textBytes, errors: r.errors }])),
  };
}
