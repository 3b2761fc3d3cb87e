// Figure, store writes: 10,000 session records (a two-message conversation each, as list.mjs
// fills its stores) written through `store.save()` of the package's stores, the memory store and
// the SQLite store (a new file each round), against a plain-JavaScript memory store: a `Map` whose
// `save()` keeps a `structuredClone` of the record, the copy any store must make so that the
// caller's later changes to its object do not reach what is stored. Each store is new each round
// (so that every save is a first write), the variants interleaved. Written one at a time (each
// `save()` awaited before the next: what one session's turns do) and 64 at a time (what many
// sessions do together; the SQLite store commits the saves that wait together in one transaction).
// Target: no slower than the `Map` store.
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { interleave, now, summarize } from './stats.mjs';
import { loadPackage, loadReference, RESTING_STATUSES, saveAll, storedRecord } from './support.mjs';
import { timeRow } from './report.mjs';
import { mapStore } from './list.mjs';

export const title = 'Store writes: 10,000 records';

export async function run({ quick, log }) {
  const { createMemorySessionStore, createSqliteSessionStore } = loadPackage();
  const reference = await loadReference();
  const referenceStore = reference.module?.createMemorySessionStore;
  const count = 10_000;
  const records = Array.from({ length: count }, (_, i) => storedRecord(i, RESTING_STATUSES[i % RESTING_STATUSES.length]));
  const dir = mkdtempSync(join(tmpdir(), 'harness-sessions-bench-writes-'));
  let files = 0;
  const sizes = new Set();
  try {
    /** Writes every record into a new store from `open()`, `concurrency` at a time: the time, in ms. */
    const writes = (open, concurrency) => async () => {
      const store = open();
      const started = now();
      if (concurrency === 1) {
        for (const record of records) await store.save(record);
      } else {
        await saveAll(store, records, { concurrency });
      }
      const ms = now() - started;
      sizes.add((await store.list()).length);
      await store.close?.();
      return ms;
    };
    const sqlite = () => createSqliteSessionStore({ path: join(dir, `writes-${files++}.db`) });
    const reps = quick ? 3 : 12;
    log(`  ${reps} rounds of ${referenceStore ? 7 : 5} variants, interleaved${referenceStore ? ' (the reference\'s memory store included)' : `; the reference is not measured: ${reference.missing}`}`);
    const samples = await interleave(
      {
        memoryOne: writes(createMemorySessionStore, 1),
        mapOne: writes(mapStore, 1),
        memoryMany: writes(createMemorySessionStore, 64),
        mapMany: writes(mapStore, 64),
        sqliteMany: writes(sqlite, 64),
        ...(referenceStore ? { referenceOne: writes(() => referenceStore(), 1), referenceMany: writes(() => referenceStore(), 64) } : {}),
      },
      { reps, warmup: 1, between: () => readdirSync(dir).forEach((file) => rmSync(join(dir, file), { force: true })) },
    );
    const target = { text: '≤ 1.0 × the Map store', check: (r) => r <= 1.0 };
    const baselineLabel = 'JS Map store: save() keeps a structuredClone of the record';
    return {
      rows: [
        timeRow({ id: 'writes.memoryOne', label: 'memory store: 10,000 save(), one at a time', baselineLabel, ours: samples.memoryOne, baseline: samples.mapOne, reference: samples.referenceOne, target, chart: 'store writes, one at a time' }),
        timeRow({ id: 'writes.memoryMany', label: 'memory store: 10,000 save(), 64 at a time', baselineLabel, ours: samples.memoryMany, baseline: samples.mapMany, reference: samples.referenceMany, target, chart: 'store writes, 64 at a time' }),
        timeRow({ id: 'writes.sqliteMany', label: 'SQLite store (on disk, synchronous=FULL): 10,000 save(), 64 at a time', baselineLabel: `${baselineLabel} (in memory)`, ours: samples.sqliteMany, baseline: samples.mapMany }),
      ],
      notes: [
        `Each round writes ${count} records into new stores (a new SQLite file each round); the SQLite store waits for the disk at each commit, the Map store keeps copies in memory: its row shows the cost of durability, it has no target.`,
      ],
      reference: reference.missing ? { missing: reference.missing } : { dir: reference.dir },
      checks: { listedAfter: [...sizes], summary: Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, summarize(v)])) },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
