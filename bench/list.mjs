// Figure 3, list() with 10,000 sessions: `sessions.list()` of a manager over the memory store and
// over the SQLite store (target p50 under 5 ms; p95 reported beside it), and `store.list()` of the same stores called
// directly; against a plain-JavaScript memory store, a `Map` of records whose `list()` maps the
// records to summaries and sorts them by `updatedAt`, as the TypeScript reference does (the
// reference's own store was measured at ~68 ms; not measured here), and the same with a
// `structuredClone` of each summary, closer to what a store that hands out copies does.
// The stores are filled directly through the store API (`store.save()`), with sessions at rest
// (suspended, closed, interrupted, failed: nothing for the manager's start to mark), each with a
// two-message conversation.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { interleave, now, summarize } from './stats.mjs';
import { chunkAgent, loadPackage, loadReference, nullSandboxes, RESTING_STATUSES, saveAll, shortTurn, storedRecord } from './support.mjs';
import { timeRow } from './report.mjs';

export const title = 'list() with 10,000 sessions';

/** The plain-JavaScript memory store of the baseline. */
export function mapStore({ clone = false } = {}) {
  const records = new Map();
  return {
    async save(record) {
      records.set(record.id, structuredClone(record));
    },
    async get(id) {
      const record = records.get(id);
      return record && structuredClone(record);
    },
    async list() {
      return [...records.values()]
        .map(({ messages, ...summary }) => (clone ? structuredClone(summary) : summary))
        .sort((a, b) => (a.updatedAt < b.updatedAt) - (a.updatedAt > b.updatedAt));
    },
    async getResumeState() {
      return undefined;
    },
    async delete(id) {
      records.delete(id);
    },
  };
}

export async function run({ quick, log }) {
  const { createSessionManager, createMemorySessionStore, createSqliteSessionStore } = loadPackage();
  const count = 10_000;
  const records = Array.from({ length: count }, (_, i) => storedRecord(i, RESTING_STATUSES[i % RESTING_STATUSES.length]));
  const dir = mkdtempSync(join(tmpdir(), 'harness-sessions-bench-list-'));
  try {
    const memory = createMemorySessionStore();
    const sqlite = createSqliteSessionStore({ path: join(dir, 'sessions.db') });
    const map = mapStore();
    const mapClone = mapStore({ clone: true });
    const reference = await loadReference();
    if (reference.missing) log(`  the reference is not measured: ${reference.missing}`);
    const referenceMemory = reference.module?.createMemorySessionStore();
    for (const [name, store] of Object.entries({ memory, sqlite, map, mapClone, ...(referenceMemory ? { reference: referenceMemory } : {}) })) {
      const started = now();
      await saveAll(store, records, { resumeState: (record) => (record.status === 'suspended' ? { type: 'resume-session', harnessId: 'bench', specificationVersion: 'harness-v1', data: { id: record.id } } : undefined) });
      log(`  filled the ${name} store with ${count} sessions through store.save() in ${(now() - started).toFixed(0)} ms`);
    }
    const agent = chunkAgent(shortTurn);
    const manager = (store) => createSessionManager({ agent: () => agent, sandboxes: nullSandboxes(), store, onError: () => {} });
    const managers = { memory: manager(memory), sqlite: manager(sqlite) };
    const referenceManager = referenceMemory && reference.module.createSessionManager({ agent: () => agent, sandboxes: nullSandboxes(), store: referenceMemory, onError: () => {} });
    if (referenceManager) await referenceManager.list();
    // The first list() of a manager waits for its start (the sessions a crash left live): not timed here.
    for (const sessions of Object.values(managers)) await sessions.list();

    // What a whole list costs (a first list(), or one after another connection wrote the SQLite
    // file): the native list() alone (the kept summaries joined as one JSON text, handed to
    // JavaScript as a string), then JSON.parse of that text. A later list() of either store
    // crosses only the summaries written since, or a stamp alone when none was (js/summaries.js).
    const NATIVE_STORE = Symbol.for('harness-sessions.native-store');
    const nativeOf = (store) => store[NATIVE_STORE];
    const parseTimes = { memory: [], sqlite: [] };
    const nativeList = (store, name) => async () => {
      const started = now();
      const text = await nativeOf(store).list();
      const ms = now() - started;
      const parsing = now();
      JSON.parse(text);
      parseTimes[name].push(now() - parsing);
      jsonBytes = text.length;
      return ms;
    };
    let jsonBytes;
    const lengths = new Set();
    const timed = (f) => async () => {
      const started = now();
      const list = await f();
      const ms = now() - started;
      lengths.add(list.length);
      return ms;
    };
    const reps = quick ? 15 : 60;
    log(`  ${reps} rounds of ${referenceManager ? 10 : 8} variants, interleaved`);
    const samples = await interleave(
      {
        managerMemory: timed(() => managers.memory.list()),
        managerSqlite: timed(() => managers.sqlite.list()),
        storeMemory: timed(() => memory.list()),
        storeSqlite: timed(() => sqlite.list()),
        map: timed(() => map.list()),
        mapClone: timed(() => mapClone.list()),
        ...(referenceManager ? { referenceManager: timed(() => referenceManager.list()), referenceStore: timed(() => referenceMemory.list()) } : {}),
        ...(nativeOf(memory) && nativeOf(sqlite) ? { nativeMemory: nativeList(memory, 'memory'), nativeSqlite: nativeList(sqlite, 'sqlite') } : {}),
      },
      { reps, warmup: 3 },
    );
    // list() right after a write (update() of one session's metadata, through the manager): it
    // crosses that summary and the stamps of the others.
    const afterWrite = { memory: [], sqlite: [] };
    for (let i = 0; i < (quick ? 10 : 30); i++) {
      for (const [name, sessions] of Object.entries(managers)) {
        await sessions.update(records[(i * 331) % count].id, { metadata: { title: `renamed ${i}` } });
        // What the update left to run (its event to subscribers) runs first: not list()'s time.
        await new Promise((resolve) => setImmediate(resolve));
        const started = now();
        await sessions.list();
        afterWrite[name].push(now() - started);
      }
    }
    const first = await managers.sqlite.list();
    const sorted = first.every((s, i) => i === 0 || first[i - 1].updatedAt >= s.updatedAt);
    const target = { text: 'p50 < 5 ms', check: (_, ours) => ours.median < 5, needsRatio: false };
    const baselineLabel = 'JS Map store: map + sort by updatedAt';
    return {
      rows: [
        timeRow({ id: 'list.managerMemory', label: 'sessions.list(), memory store', baselineLabel, ours: samples.managerMemory, baseline: samples.map, reference: samples.referenceManager, target, chart: 'list(), memory store' }),
        timeRow({ id: 'list.managerSqlite', label: 'sessions.list(), SQLite store', baselineLabel, ours: samples.managerSqlite, baseline: samples.map, reference: samples.referenceManager, target, chart: 'list(), SQLite store' }),
        timeRow({ id: 'list.storeMemory', label: 'memory store.list() called directly', baselineLabel, ours: samples.storeMemory, baseline: samples.map, reference: samples.referenceStore }),
        timeRow({ id: 'list.storeSqlite', label: 'SQLite store.list() called directly', baselineLabel, ours: samples.storeSqlite, baseline: samples.map }),
        timeRow({ id: 'list.managerMemoryVsClone', label: 'sessions.list(), memory store', baselineLabel: 'JS Map store with structuredClone of each summary', ours: samples.managerMemory, baseline: samples.mapClone, chart: 'list() vs JS store that clones' }),
      ],
      notes: [
        ...(samples.nativeMemory
          ? [
              `A whole list (a first list(), or one after another connection wrote the SQLite file; medians): the native list() to its JSON text ${summarize(samples.nativeMemory).median.toFixed(1)} ms (memory) / ${summarize(samples.nativeSqlite).median.toFixed(1)} ms (SQLite), then JSON.parse of ${(jsonBytes / 2 ** 20).toFixed(1)} MiB ${summarize(parseTimes.memory).median.toFixed(1)} ms / ${summarize(parseTimes.sqlite).median.toFixed(1)} ms.`,
            ]
          : []),
        `sessions.list() right after an update() of one session's metadata (medians): ${summarize(afterWrite.memory).median.toFixed(1)} ms (memory store) / ${summarize(afterWrite.sqlite).median.toFixed(1)} ms (SQLite store).`,
        `Stores filled through store.save() (${count} sessions at rest: suspended, closed, interrupted, failed; two messages each). The reference's rows are its manager's list() and its memory store's list() on the same 10,000 sessions, filled the same way.`,
      ],
      reference: reference.missing ? { missing: reference.missing } : { dir: reference.dir },
      checks: { lengths: [...lengths], newestFirst: sorted, summary: Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, summarize(v)])) },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
