// Figure 5, memory held per suspended session: N sessions created and sent one turn each, then all
// suspended; after a forced GC (`--expose-gc`), the RSS growth per session and the manager's
// `sessionsInMemory` and JS handles (target: 0 in memory, nothing beyond the store); against the
// same N sessions left live (idle). To tell the store's share from the manager's: the same N
// records saved straight into a memory store with no manager ("store alone"), and the N suspended
// sessions on the SQLite store (records on disk). Each variant runs in a fresh process, in turn,
// growth measured from after a warm-up of 20 sessions, the N sessions added in four batches: the
// figures per session are the slope over the last three (the first pays once for heaps and
// allocator arenas growing), as RSS and as "held" memory (RSS less V8's committed heap, which a GC
// does not give back, plus the JS heap in use).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { collectGarbage, median, memory } from './stats.mjs';
import { chunkAgent, loadPackage, nullSandboxes, runTask, shortTurn, userMessage } from './support.mjs';
import { valueRow } from './report.mjs';

export const title = 'Memory held per suspended session';

const DIAGNOSTICS = Symbol.for('harness-sessions.diagnostics');

async function drainAll(stream) {
  const reader = stream.getReader();
  while (!(await reader.read()).done) {}
}

/** Creates sessions `ids`, sends each a turn, and suspends them when `suspend`, ten at a time. */
async function populate(sessions, ids, suspend) {
  let next = 0;
  const worker = async () => {
    while (next < ids.length) {
      const id = ids[next++];
      await sessions.create({ id, metadata: { title: `Conversation ${id}` } });
      const turn = await sessions.send(id, { message: userMessage(randomUUID(), `Question of ${id}: what does this repository do?`) });
      await drainAll(turn.stream);
      await turn.done;
      if (suspend) await sessions.suspend(id);
    }
  };
  await Promise.all(Array.from({ length: 10 }, worker));
}

/**
 * Runs `add(ids)` over `count` new ids in four batches, with a GC and a reading of memory before
 * and after each: the growth over the whole, and the slope over the last three batches (which
 * leaves out what the first batch costs once: heaps and allocator arenas growing to their size).
 */
const held = (m) => m.rss - m.heapTotal + m.heapUsed;

async function batches(count, add) {
  const size = Math.ceil(count / 4);
  await collectGarbage();
  const readings = [memory()];
  for (let b = 0; b < 4; b++) {
    await add(Array.from({ length: size }, (_, i) => `session-${b * size + i}`));
    await collectGarbage();
    readings.push(memory());
  }
  const first = readings[0];
  const last = readings[4];
  return {
    rssGrowth: last.rss - first.rss,
    rssSlope: (last.rss - readings[1].rss) / (3 * size),
    // V8 keeps the heap it grew to (heapTotal) after a GC: RSS less that, plus the heap in use,
    // is what the sessions hold (native memory and live JS objects).
    heldSlope: (held(last) - held(readings[1])) / (3 * size),
    heapGrowth: last.heapUsed - first.heapUsed,
    heapTotalGrowth: last.heapTotal - first.heapTotal,
    rss: readings.map((r) => r.rss),
  };
}

async function variant({ count, suspend, sqlite }) {
  const pkg = loadPackage();
  const agent = chunkAgent(shortTurn);
  const dir = sqlite ? mkdtempSync(join(tmpdir(), 'harness-sessions-bench-mem-')) : undefined;
  try {
    const store = sqlite ? pkg.createSqliteSessionStore({ path: join(dir, 'sessions.db') }) : pkg.createMemorySessionStore();
    const errors = [];
    const sessions = pkg.createSessionManager({ agent: () => agent, sandboxes: nullSandboxes(), store, onError: (e) => errors.push(String(e?.message ?? e)) });
    const warm = Array.from({ length: 20 }, (_, i) => `warm-${i}`);
    await populate(sessions, warm, true);
    for (const id of warm) await sessions.delete(id);
    const measured = await batches(count, (ids) => populate(sessions, ids, suspend));
    const diagnostics = sessions[DIAGNOSTICS]();
    const statuses = {};
    for (const s of await sessions.list()) statuses[s.status] = (statuses[s.status] ?? 0) + 1;
    return { ...measured, diagnostics, statuses, errors: errors.length };
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

export const tasks = {
  live: ({ count }) => variant({ count, suspend: false }),
  suspended: ({ count }) => variant({ count, suspend: true }),
  suspendedSqlite: ({ count }) => variant({ count, suspend: true, sqlite: true }),
  /** The records and resume states of N suspended sessions, saved into a memory store with no manager. */
  async storeAlone({ count }) {
    const pkg = loadPackage();
    const agent = chunkAgent(shortTurn);
    const source = pkg.createMemorySessionStore();
    const sessions = pkg.createSessionManager({ agent: () => agent, sandboxes: nullSandboxes(), store: source, onError: () => {} });
    await populate(sessions, ['model'], true);
    const record = await source.get('model');
    const resumeState = await source.getResumeState('model');
    const store = pkg.createMemorySessionStore();
    for (let i = 0; i < 20; i++) await store.save({ ...record, id: `warm-${i}` }, resumeState);
    for (let i = 0; i < 20; i++) await store.delete(`warm-${i}`);
    const measured = await batches(count, async (ids) => {
      for (const id of ids) await store.save({ ...record, id, metadata: { title: `Conversation ${id}` } }, resumeState);
    });
    return { ...measured, diagnostics: null, statuses: { suspended: (await store.list()).length }, errors: 0 };
  },
};

export async function run({ quick, log }) {
  const count = quick ? 500 : 2000;
  const reps = quick ? 1 : 3;
  const names = ['suspended', 'live', 'storeAlone', 'suspendedSqlite'];
  const runs = Object.fromEntries(names.map((n) => [n, []]));
  for (let i = 0; i < reps; i++) {
    const order = [...names.slice(i % names.length), ...names.slice(0, i % names.length)];
    for (const name of order) {
      const result = runTask('suspended-memory', name, { count });
      runs[name].push(result);
      log(`  ${name}: RSS +${(result.rssGrowth / 2 ** 20).toFixed(1)} MiB (${(result.rssGrowth / count / 1024).toFixed(2)} KiB/session; over the last 3 batches ${(result.rssSlope / 1024).toFixed(2)} KiB/session, held ${(result.heldSlope / 1024).toFixed(2)} KiB/session; JS heap +${(result.heapGrowth / 1024).toFixed(0)} KiB), in memory ${result.diagnostics?.sessionsInMemory ?? '–'}, handles ${JSON.stringify(result.diagnostics?.handles ?? null)}, statuses ${JSON.stringify(result.statuses)}`);
    }
  }
  const perSession = (name) => runs[name].map((r) => r.rssSlope);
  const overall = (name) => runs[name].map((r) => r.rssGrowth / count);
  const heldPer = (name) => runs[name].map((r) => r.heldSlope);
  const inMemory = (name) => runs[name].map((r) => r.diagnostics?.sessionsInMemory ?? NaN);
  const suspendedInMemory = Math.max(...inMemory('suspended'), ...inMemory('suspendedSqlite'));
  const handles = runs.suspended.map((r) => r.diagnostics.handles);
  return {
    rows: [
      valueRow({ id: 'memory.suspendedVsLive', label: `RSS per suspended session, slope over the last 3/4 (memory store, N=${count})`, baselineLabel: 'the same sessions live (idle)', unit: 'bytes/session', ours: perSession('suspended'), baseline: perSession('live'), chart: 'suspended vs live session: RSS' }),
      valueRow({ id: 'memory.suspendedVsStore', label: 'RSS per suspended session, slope (memory store)', baselineLabel: 'the same records in a memory store, no manager', unit: 'bytes/session', ours: perSession('suspended'), baseline: perSession('storeAlone'), chart: 'suspended session vs store alone: RSS' }),
      valueRow({ id: 'memory.suspendedSqlite', label: 'RSS per suspended session, slope (SQLite store: records on disk)', baselineLabel: 'the same sessions live, memory store', unit: 'bytes/session', ours: perSession('suspendedSqlite'), baseline: perSession('live') }),
      valueRow({ id: 'memory.heldSuspendedVsLive', label: 'held per suspended session (RSS − V8 committed heap + JS heap used), memory store', baselineLabel: 'live', unit: 'bytes/session', ours: heldPer('suspended'), baseline: heldPer('live'), chart: 'suspended vs live: held memory' }),
      valueRow({ id: 'memory.heldSuspendedVsStore', label: 'held per suspended session, memory store', baselineLabel: 'the same records in a memory store, no manager', unit: 'bytes/session', ours: heldPer('suspended'), baseline: heldPer('storeAlone') }),
      valueRow({ id: 'memory.heldSqlite', label: 'held per suspended session, SQLite store', baselineLabel: 'live, memory store', unit: 'bytes/session', ours: heldPer('suspendedSqlite'), baseline: heldPer('live') }),
      valueRow({ id: 'memory.overall', label: 'RSS growth / N over all of it, suspended (memory store)', baselineLabel: 'live', unit: 'bytes/session', ours: overall('suspended'), baseline: overall('live') }),
      valueRow({
        id: 'memory.sessionsInMemory',
        label: 'sessionsInMemory after suspending them all',
        baselineLabel: 'live',
        unit: 'sessions',
        ours: median(inMemory('suspended')),
        baseline: median(inMemory('live')),
        target: { text: '0 in memory', check: () => suspendedInMemory === 0 && handles.every((h) => h.sessions === 0 && h.leases === 0), needsRatio: false },
      }),
    ],
    notes: [
      `After suspending ${count} sessions: sessionsInMemory ${JSON.stringify(inMemory('suspended'))} (SQLite: ${JSON.stringify(inMemory('suspendedSqlite'))}), JS handles ${JSON.stringify(handles)}; live: ${JSON.stringify(inMemory('live'))}.`,
    ],
    checks: runs,
  };
}
