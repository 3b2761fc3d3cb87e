// Figure, store writes on PostgreSQL: the 10,000 records of store-writes.mjs written through
// `save()` of the PostgreSQL store (a new schema each round) against the SQLite store (a new file
// each round), both durable: the server is a throwaway cluster of the benchmark's own with
// `fsync` and `synchronous_commit` on (HARNESS_SESSIONS_TEST_PG_URL when set, as it is). Written
// one at a time (each `save()` awaited: one session's turns) and 64 at a time (many sessions;
// the PostgreSQL store runs them on its pool of 16 connections, each save one transaction of one
// round trip once its statements are prepared). No target: it shows what the server costs.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { interleave, now, summarize } from './stats.mjs';
import { loadPackage, RESTING_STATUSES, saveAll, storedRecord } from './support.mjs';
import { skippedRow, timeRow } from './report.mjs';
import { postgresBinaries, startPostgres } from '../scripts/postgres.mjs';

export const title = 'Store writes on PostgreSQL: 10,000 records';

export async function run({ quick, log }) {
  const { createPostgresSessionStore, createSqliteSessionStore } = loadPackage();
  let url = process.env.HARNESS_SESSIONS_TEST_PG_URL;
  let cluster;
  if (!url) {
    if (!postgresBinaries()) {
      const reason = 'no PostgreSQL here: node scripts/postgres.mjs install';
      log(`  skipped: ${reason}`);
      return { rows: [skippedRow({ id: 'writes.postgresMany', label: 'PostgreSQL store writes', reason })], notes: [`Skipped: ${reason}.`] };
    }
    cluster = await startPostgres({ settings: ['fsync=on', 'synchronous_commit=on'] });
    url = cluster.url;
  }
  const count = 10_000;
  const records = Array.from({ length: count }, (_, i) => storedRecord(i, RESTING_STATUSES[i % RESTING_STATUSES.length]));
  const dir = mkdtempSync(join(tmpdir(), 'harness-sessions-bench-pgwrites-'));
  let files = 0;
  const sizes = new Set();
  try {
    const writes = (open, concurrency) => async () => {
      const store = open();
      // Connected and migrated before the clock starts, as a running application's store is.
      await store.list();
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
    const postgres = () => createPostgresSessionStore({ url, schema: `bench_${randomBytes(6).toString('hex')}` });
    const sqlite = () => createSqliteSessionStore({ path: join(dir, `writes-${files++}.db`) });
    const reps = quick ? 2 : 6;
    log(`  ${reps} rounds of 4 variants, interleaved (server ${cluster ? 'of its own, fsync on' : 'from HARNESS_SESSIONS_TEST_PG_URL'})`);
    const samples = await interleave(
      {
        postgresOne: writes(postgres, 1),
        sqliteOne: writes(sqlite, 1),
        postgresMany: writes(postgres, 64),
        sqliteMany: writes(sqlite, 64),
      },
      { reps, warmup: 1, between: () => readdirSync(dir).forEach((file) => rmSync(join(dir, file), { force: true })) },
    );
    const baselineLabel = 'SQLite store (on disk, synchronous=FULL), the same saves';
    return {
      rows: [
        timeRow({ id: 'writes.postgresOne', label: 'PostgreSQL store (loopback, fsync on): 10,000 save(), one at a time', baselineLabel, ours: samples.postgresOne, baseline: samples.sqliteOne, chart: 'store writes on PostgreSQL' }),
        timeRow({ id: 'writes.postgresMany', label: 'PostgreSQL store (loopback, fsync on): 10,000 save(), 64 at a time', baselineLabel, ours: samples.postgresMany, baseline: samples.sqliteMany, chart: 'store writes on PostgreSQL' }),
      ],
      notes: [
        `Each round writes ${count} records into a new schema (PostgreSQL) or a new file (SQLite). One at a time, each save waits for its commit to reach the disk on both; 64 at a time, the SQLite store commits the saves that wait together in one transaction, the PostgreSQL store runs them on 16 connections whose commits the server flushes together.`,
      ],
      checks: { listedAfter: [...sizes], summary: Object.fromEntries(Object.entries(samples).map(([k, v]) => [k, summarize(v)])) },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    cluster?.stop();
  }
}
