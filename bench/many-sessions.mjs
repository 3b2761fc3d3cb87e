// Figure 4, 1,000 sessions created and sent one turn each, all at once: the wall time until every
// turn is read and done, and the growth of RSS (after a forced GC, and at its peak), through the
// manager (memory store, the package's fake agent `createFakeAgent()`, whose turns go through
// `toUIMessageStream` of `ai`); against the same 1,000 sessions driven through the same agent
// directly, with no manager (`createSession()`, `stream()`, the UI message stream read to its end,
// the sessions kept). Each side runs in a fresh process, the two alternating, after a warm-up of
// 20 sessions. Target: ours within 1.3 × driving the agent directly. The reference was measured
// at ~1 s and 7 MB (not measured here).
import { randomUUID } from 'node:crypto';

import { collectGarbage, memory, now, summarize } from './stats.mjs';
import { loadPackage, loadTesting, nullSandboxes, runTask, userMessage } from './support.mjs';
import { timeRow, valueRow } from './report.mjs';

export const title = '1,000 sessions, one turn each';

const DIAGNOSTICS = Symbol.for('harness-sessions.diagnostics');

async function drainAll(stream) {
  const reader = stream.getReader();
  let chunks = 0;
  while (!(await reader.read()).done) chunks++;
  return chunks;
}

async function measure(count, body) {
  await collectGarbage();
  const before = memory();
  let peak = before.rss;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 5);
  const started = now();
  const chunks = await Promise.all(Array.from({ length: count }, (_, i) => body(i)));
  const wallMs = now() - started;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage.rss());
  await collectGarbage();
  const after = memory();
  return {
    wallMs,
    rssGrowth: after.rss - before.rss,
    peakRssGrowth: peak - before.rss,
    heapGrowth: after.heapUsed - before.heapUsed,
    // V8 keeps the heap it grew to after a GC: RSS less V8's committed heap, plus the heap in use.
    heldGrowth: after.rss - after.heapTotal + after.heapUsed - (before.rss - before.heapTotal + before.heapUsed),
    chunks: chunks.reduce((a, b) => a + b, 0),
  };
}

export const tasks = {
  async ours({ count }) {
    const { createSessionManager } = loadPackage();
    const { createFakeAgent } = await loadTesting();
    const agent = createFakeAgent();
    const errors = [];
    const sessions = createSessionManager({ agent: () => agent, sandboxes: nullSandboxes(), onError: (e) => errors.push(String(e?.message ?? e)) });
    const one = async (id) => {
      await sessions.create({ id, metadata: { title: id } });
      const turn = await sessions.send(id, { message: userMessage(randomUUID(), `Hello ${id}`) });
      const chunks = await drainAll(turn.stream);
      await turn.done;
      return chunks;
    };
    await measure(20, (i) => one(`warm-${i}`));
    const result = await measure(count, (i) => one(`session-${i}`));
    const diagnostics = sessions[DIAGNOSTICS]();
    return { ...result, diagnostics, errors: errors.length, listed: (await sessions.list()).length };
  },
  async direct({ count }) {
    const { createFakeAgent } = await loadTesting();
    const agent = createFakeAgent();
    const sandboxSession = Object.freeze({ id: 'bench' });
    const kept = [];
    const one = async (id) => {
      const session = await agent.createSession({ sessionId: id, sandboxSession });
      kept.push(session);
      const result = await agent.stream({ session, prompt: `Hello ${id}` });
      const messageId = randomUUID();
      const chunks = await drainAll(result.toUIMessageStream({ generateMessageId: () => messageId }));
      await result.totalUsage;
      return chunks;
    };
    await measure(20, (i) => one(`warm-${i}`));
    const result = await measure(count, (i) => one(`session-${i}`));
    return { ...result, kept: kept.length };
  },
};

export async function run({ quick, log }) {
  const count = 1000;
  const reps = quick ? 2 : 6;
  const runs = { ours: [], direct: [] };
  for (let i = 0; i < reps; i++) {
    const order = i % 2 === 0 ? ['ours', 'direct'] : ['direct', 'ours'];
    for (const side of order) {
      const result = runTask('many-sessions', side, { count });
      runs[side].push(result);
      log(`  ${side}: ${result.wallMs.toFixed(0)} ms, RSS +${(result.rssGrowth / 2 ** 20).toFixed(1)} MiB (peak +${(result.peakRssGrowth / 2 ** 20).toFixed(1)} MiB, held +${(result.heldGrowth / 2 ** 20).toFixed(1)} MiB, JS heap used +${(result.heapGrowth / 2 ** 20).toFixed(1)} MiB)`);
    }
  }
  const pick = (side, key) => runs[side].map((r) => r[key]);
  const baselineLabel = 'the same 1,000 sessions through the agent directly, no manager';
  return {
    rows: [
      timeRow({ id: 'many.wall', label: '1,000 × (create + send + read the turn + done)', baselineLabel, ours: pick('ours', 'wallMs'), baseline: pick('direct', 'wallMs'), target: { text: '≤ 1.3 × the agent driven directly', check: (r) => r <= 1.3 }, chart: '1,000 sessions: wall time', chartTarget: 1.3 }),
      valueRow({ id: 'many.rss', label: 'RSS growth after GC (1,000 sessions held)', baselineLabel, unit: 'bytes', ours: pick('ours', 'rssGrowth'), baseline: pick('direct', 'rssGrowth'), chart: '1,000 sessions: RSS growth' }),
      valueRow({ id: 'many.held', label: 'held after GC: RSS − V8 committed heap + JS heap used', baselineLabel, unit: 'bytes', ours: pick('ours', 'heldGrowth'), baseline: pick('direct', 'heldGrowth') }),
      valueRow({ id: 'many.peakRss', label: 'RSS growth at its peak', baselineLabel, unit: 'bytes', ours: pick('ours', 'peakRssGrowth'), baseline: pick('direct', 'peakRssGrowth') }),
    ],
    notes: [
      `All 1,000 at once (Promise.all), each process warmed up with 20 sessions first; ${reps} processes per side, alternating. The reference was measured at ~1 s and 7 MB (not measured here).`,
    ],
    checks: {
      ours: runs.ours.map(({ diagnostics, errors, listed, chunks }) => ({ diagnostics, errors, listed, chunks })),
      direct: runs.direct.map(({ kept, chunks }) => ({ kept, chunks })),
      heapGrowth: { ours: summarize(pick('ours', 'heapGrowth')), direct: summarize(pick('direct', 'heapGrowth')) },
    },
  };
}
