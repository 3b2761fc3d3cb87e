// A PostgreSQL server for the tests: HARNESS_SESSIONS_TEST_PG_URL when set (`npm test` starts a
// throwaway cluster and sets it), else a throwaway cluster of this test file when the machine has
// Debian's PostgreSQL binaries (stopped when the process exits). With neither, the PostgreSQL
// tests skip, with the reason, unless HARNESS_SESSIONS_REQUIRE_POSTGRES=1 (CI): then they fail.
import { randomBytes } from 'node:crypto';
import { createPostgresSessionStore } from '../../index.js';
import { postgresBinaries, startPostgres, stopPostgres } from '../../scripts/postgres.mjs';

const required = process.env.HARNESS_SESSIONS_REQUIRE_POSTGRES === '1';
const given = process.env.HARNESS_SESSIONS_TEST_PG_URL || undefined;
const started = [];

process.on('exit', () => {
  for (const dir of started) stopPostgres(dir);
});

/** Why the PostgreSQL tests skip here, or `false` when they run (a server is at hand). */
export const postgresSkip =
  given || postgresBinaries() || required
    ? false
    : 'no PostgreSQL here: set HARNESS_SESSIONS_TEST_PG_URL or install postgresql (node scripts/postgres.mjs install); HARNESS_SESSIONS_REQUIRE_POSTGRES=1 fails instead';

let shared;

/** The URL of the tests' server (a throwaway cluster started once per file when none is given). */
export async function postgresUrl() {
  if (given) return given;
  shared ??= startCluster();
  return (await shared).url;
}

/** A throwaway cluster of this file's own (`{ ssl }` for TLS), stopped at exit: `{ url, dir, port }`. */
export async function startCluster(options = {}) {
  if (!postgresBinaries()) {
    throw new Error('no PostgreSQL binaries here: node scripts/postgres.mjs install');
  }
  const cluster = await startPostgres(options);
  started.push(cluster.dir);
  return cluster;
}

/** A schema no other test uses. */
export function freshSchema(what = 't') {
  return `t_${what}_${randomBytes(6).toString('hex')}`;
}

/** A PostgreSQL store on the tests' server, in a schema of its own (or `options.schema`). */
export async function postgresStore(options = {}) {
  return createPostgresSessionStore({ url: await postgresUrl(), schema: freshSchema(), ...options });
}

/** The tests' server's URL, read once at import (`undefined` when the tests skip). */
export const PG_URL = postgresSkip ? undefined : await postgresUrl();

/** `postgresStore()` at once, for a test that runs (not skipped). */
export function pgStore(options = {}) {
  return createPostgresSessionStore({ url: PG_URL, schema: freshSchema(), ...options });
}
