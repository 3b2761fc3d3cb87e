// Figure 4, 1,000 sessions, one turn each: created and sent a turn each, all at once and then one
// after the other, through the manager (memory store, the package's fake agent
// `createFakeAgent()`, whose turns go through `toUIMessageStream` of `ai`); against the same
// sessions driven through the same agent directly, with no manager (`createSession()`,
// `stream()`, the UI message stream read to its end, the sessions kept), and against the
// reference (`ai-sdk-harness-sessions` 0.2.0, see `loadReference()`) on the same agent and
// sandboxes. Each side runs in a fresh process, the sides alternating, after a warm-up of 20
// sessions. Measured: the wall time until every turn is read and done; one after the other, each
// step of a session on its own (`create()` until it answers, `send()` until it answers with the
// started turn, the turn read to its end and `done`); the growth of RSS and of the JS heap with
// the sessions held live (after a forced GC, and RSS at its peak), per session, for 1,000 and
// for 10,000 live sessions.
import { randomUUID } from 'node:crypto';

import { collectGarbage, memory, now, summarize } from './stats.mjs';
import { loadPackage, loadReference, loadTesting, nullSandboxes, runTask, userMessage } from './support.mjs';
import { timeRow, valueRow } from './report.mjs';

export const title = '1,000 sessions, one turn each';

const DIAGNOSTICS = Symbol.for('harness-sessions.diagnostics');

async function drainAll(stream) {
  const reader = stream.getReader();
  let chunks = 0;
  while (!(await reader.read()).done) chunks++;
  return chunks;
}

/**
 * Runs `body(i)` for `count` sessions (all at once, or one after the other when `sequential`):
 * wall time, memory growth after GC and at its peak, the steps' times (`body` fills `steps`).
 */
async function measure(count, body, { sequential = false } = {}) {
  await collectGarbage();
  const before = memory();
  let peak = before.rss;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 5);
  const steps = { create: [], send: [], read: [] };
  const started = now();
  let chunks;
  if (sequential) {
    chunks = [];
    for (let i = 0; i < count; i++) chunks.push(await body(i, steps));
  } else {
    chunks = await Promise.all(Array.from({ length: count }, (_, i) => body(i, steps)));
  }
  const wallMs = now() - started;
  clearInterval(sampler);
  peak = Math.max(peak, process.memoryUsage.rss());
  // At rest (a server between bursts): what each side gives back once its work is over counts
  // as given back (ours trims malloc's free pages 100 ms after its last turn).
  await new Promise((resolve) => setTimeout(resolve, 300));
  await collectGarbage();
  const after = memory();
  const med = (values) => (values.length ? summarize(values).median : null);
  return {
    wallMs,
    rssGrowth: after.rss - before.rss,
    peakRssGrowth: peak - before.rss,
    heapGrowth: after.heapUsed - before.heapUsed,
    externalGrowth: after.external - before.external,
    // V8 keeps the heap it grew to after a GC: RSS less V8's committed heap, plus the heap in use.
    heldGrowth: after.rss - after.heapTotal + after.heapUsed - (before.rss - before.heapTotal + before.heapUsed),
    chunks: chunks.reduce((a, b) => a + b, 0),
    createMs: med(steps.create),
    sendMs: med(steps.send),
    readMs: med(steps.read),
  };
}

/** One session through a manager (ours or the reference): create, send, read, done; each step timed. */
function managerSession(sessions) {
  return async (id, steps) => {
    let at = now();
    await sessions.create({ id, metadata: { title: id } });
    steps.create.push(now() - at);
    at = now();
    const turn = await sessions.send(id, { message: userMessage(randomUUID(), `Hello ${id}`) });
    steps.send.push(now() - at);
    at = now();
    const chunks = await drainAll(turn.stream);
    await turn.done;
    steps.read.push(now() - at);
    return chunks;
  };
}

async function runManager(createSessionManager, { count, sequential }) {
  const { createFakeAgent } = await loadTesting();
  const agent = createFakeAgent();
  const errors = [];
  const sessions = createSessionManager({ agent: () => agent, sandboxes: nullSandboxes(), onError: (e) => errors.push(String(e?.message ?? e)) });
  const one = managerSession(sessions);
  await measure(20, (i, steps) => one(`warm-${i}`, steps), { sequential });
  const result = await measure(count, (i, steps) => one(`session-${i}`, steps), { sequential });
  return { ...result, sessions, errors: errors.length, listed: (await sessions.list()).length };
}

export const tasks = {
  async ours(args) {
    const { createSessionManager } = loadPackage();
    const { sessions, ...result } = await runManager(createSessionManager, args);
    return { ...result, diagnostics: sessions[DIAGNOSTICS]?.() };
  },
  async reference(args) {
    const reference = await loadReference();
    if (reference.missing) throw new Error(reference.missing);
    const { sessions, ...result } = await runManager(reference.module.createSessionManager, args);
    return result;
  },
  async direct({ count, sequential }) {
    const { createFakeAgent } = await loadTesting();
    const agent = createFakeAgent();
    const sandboxSession = Object.freeze({ id: 'bench' });
    const kept = [];
    const one = async (id, steps) => {
      let at = now();
      const session = await agent.createSession({ sessionId: id, sandboxSession });
      kept.push(session);
      steps.create.push(now() - at);
      at = now();
      const result = await agent.stream({ session, prompt: `Hello ${id}` });
      steps.send.push(now() - at);
      at = now();
      const messageId = randomUUID();
      const chunks = await drainAll(result.toUIMessageStream({ generateMessageId: () => messageId }));
      await result.totalUsage;
      steps.read.push(now() - at);
      return chunks;
    };
    await measure(20, (i, steps) => one(`warm-${i}`, steps), { sequential });
    const result = await measure(count, (i, steps) => one(`session-${i}`, steps), { sequential });
    return { ...result, kept: kept.length };
  },
};

export async function run({ quick, log }) {
  const reference = await loadReference();
  if (reference.missing) log(`  the reference is not measured: ${reference.missing}`);
  const sides = reference.missing ? ['ours', 'direct'] : ['ours', 'reference', 'direct'];
  const reps = quick ? 2 : 5;
  const MiB = 2 ** 20;
  /** `reps` processes per side, the order rotating each round. */
  const series = (args) => {
    const runs = Object.fromEntries(sides.map((side) => [side, []]));
    for (let i = 0; i < reps; i++) {
      const order = [...sides.slice(i % sides.length), ...sides.slice(0, i % sides.length)];
      for (const side of order) {
        const result = runTask('many-sessions', side, args);
        runs[side].push(result);
        const steps = result.createMs != null ? `; create ${result.createMs.toFixed(3)} ms, send ${result.sendMs.toFixed(3)} ms, read ${result.readMs.toFixed(3)} ms` : '';
        log(`  ${args.sequential ? 'one by one' : 'all at once'}, ${args.count}: ${side}: ${result.wallMs.toFixed(0)} ms, RSS +${(result.rssGrowth / MiB).toFixed(1)} MiB (peak +${(result.peakRssGrowth / MiB).toFixed(1)} MiB, held +${(result.heldGrowth / MiB).toFixed(1)} MiB, JS heap used +${(result.heapGrowth / MiB).toFixed(1)} MiB)${steps}`);
      }
    }
    return (side, key) => runs[side]?.map((r) => r[key]);
  };
  const concurrent = series({ count: 1000 });
  const sequential = series({ count: 1000, sequential: true });
  const large = quick ? undefined : series({ count: 10_000 });
  const baselineLabel = 'the same sessions through the agent directly, no manager';
  const perSession = (pick, count) => (side, key) => pick(side, key)?.map((v) => v / count);
  const memoryRows = (pick, count) => {
    const per = perSession(pick, count);
    const n = count.toLocaleString('en');
    return [
      valueRow({ id: `many.rssPerSession${count}`, label: `RSS growth after GC per live session (${n} held)`, baselineLabel, unit: 'bytes/session', ours: per('ours', 'rssGrowth'), baseline: per('direct', 'rssGrowth'), reference: per('reference', 'rssGrowth'), chart: count === 1000 ? 'RSS per live session' : undefined }),
      valueRow({ id: `many.heapPerSession${count}`, label: `JS heap used after GC per live session (${n} held)`, baselineLabel, unit: 'bytes/session', ours: per('ours', 'heapGrowth'), baseline: per('direct', 'heapGrowth'), reference: per('reference', 'heapGrowth') }),
      valueRow({ id: `many.heldPerSession${count}`, label: `held after GC per live session: RSS − V8 committed heap + JS heap used (${n} held)`, baselineLabel, unit: 'bytes/session', ours: per('ours', 'heldGrowth'), baseline: per('direct', 'heldGrowth'), reference: per('reference', 'heldGrowth') }),
      valueRow({ id: `many.peakRss${count}`, label: `RSS growth at its peak (${n} sessions)`, baselineLabel, unit: 'bytes', ours: pick('ours', 'peakRssGrowth'), baseline: pick('direct', 'peakRssGrowth'), reference: pick('reference', 'peakRssGrowth') }),
    ];
  };
  const c = concurrent;
  const s = sequential;
  return {
    rows: [
      timeRow({ id: 'many.wall', label: '1,000 × (create + send + read the turn + done), all at once', baselineLabel, ours: c('ours', 'wallMs'), baseline: c('direct', 'wallMs'), reference: c('reference', 'wallMs'), target: { text: '≤ 1.3 × the agent driven directly', check: (r) => r <= 1.3 }, chart: '1,000 sessions at once: wall time', chartTarget: 1.3 }),
      timeRow({ id: 'many.sequential', label: '1,000 × (create + send + read the turn + done), one after the other', baselineLabel, ours: s('ours', 'wallMs'), baseline: s('direct', 'wallMs'), reference: s('reference', 'wallMs'), chart: '1,000 sessions one by one: wall time' }),
      timeRow({ id: 'many.create', label: 'create() until it answers (one after the other; median of the 1,000, per process)', baselineLabel: 'agent.createSession()', ours: s('ours', 'createMs'), baseline: s('direct', 'createMs'), reference: s('reference', 'createMs') }),
      timeRow({ id: 'many.send', label: 'send() until it answers with the started turn (the session\'s start included)', baselineLabel: 'agent.stream()', ours: s('ours', 'sendMs'), baseline: s('direct', 'sendMs'), reference: s('reference', 'sendMs') }),
      timeRow({ id: 'many.read', label: 'the turn read to its end and done', baselineLabel: 'toUIMessageStream() read to its end, totalUsage', ours: s('ours', 'readMs'), baseline: s('direct', 'readMs'), reference: s('reference', 'readMs') }),
      ...memoryRows(c, 1000),
      ...(large ? memoryRows(large, 10_000) : []),
    ],
    notes: [
      `Each process warmed up with 20 sessions first; ${reps} processes per side and per series, the sides in rotating order. The sessions stay live (held in memory, not closed) to the end: the memory rows are per live session.${large ? '' : ' 10,000 live sessions are measured in a full run only.'}`,
    ],
    reference: reference.missing ? { missing: reference.missing } : { dir: reference.dir },
    checks: {
      ours: [c, s].flatMap((pick) => pick('ours', 'errors').map((errors, i) => ({ errors, listed: pick('ours', 'listed')[i], chunks: pick('ours', 'chunks')[i] }))),
      reference: reference.missing ? [] : [c, s].flatMap((pick) => pick('reference', 'errors').map((errors, i) => ({ errors, listed: pick('reference', 'listed')[i], chunks: pick('reference', 'chunks')[i] }))),
      diagnostics: c('ours', 'diagnostics'),
    },
  };
}
