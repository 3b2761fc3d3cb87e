// `npm test`: everything, in order: formatting, lints, the engine's Rust tests, the addon built,
// the JavaScript tests on Node 20 (the machine's) and Node 24 (from the npm registry), a type
// check of a consumer file against index.d.ts with the real `ai` types, then, once, the tests of
// the installable package (__test__/package-*.test.mjs but the boundary's): the release addon
// packed, installed into fresh apps, run on Node 20, 22, 24 and Bun, and served by Next.js.
//
// It starts what the tests need when it can (a Docker Engine and the test image, as root); with
// HARNESS_SESSIONS_REQUIRE_DOCKER=1 (CI) a Docker test fails rather than skips when there is none.
// It starts a throwaway PostgreSQL cluster (installing Debian's postgresql first, as root, when it
// is missing: scripts/postgres.mjs) and gives its URL to the cargo and Node tests as
// HARNESS_SESSIONS_TEST_PG_URL; with HARNESS_SESSIONS_REQUIRE_POSTGRES=1 (CI) the PostgreSQL tests
// fail rather than skip when there is none. The cluster is stopped when the run ends.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { buildAddon, ensureDependencies, nodeBinary, root, run, TARGET } from './lib.mjs';
import { installPostgres, startPostgres } from './postgres.mjs';

const started = Date.now();
// Its time, at its end, whether it passed or not.
process.on('exit', (code) => {
  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  console.log(code === 0 ? `\nnpm test: everything passed in ${seconds} s` : `\nnpm test: FAILED after ${seconds} s`);
});
ensureDependencies();
run('cargo', ['fmt', '--all', '--', '--check']);
// Every cargo command builds for napi's target in the dev profile: one target dir, the
// dependencies compiled once for the lints, the engine's tests and the addon.
const cargo = ['--target', TARGET];
run('cargo', ['clippy', ...cargo, '--all-targets', '--', '-D', 'warnings']);
run('cargo', ['clippy', ...cargo, '--no-default-features', '--all-targets', '--', '-D', 'warnings']);

const env = { ...process.env, HARNESS_SESSIONS_TEST: '1' };
startDocker(env);
const postgres = await startTestPostgres(env);
try {
  run('cargo', ['test', ...cargo, '--no-default-features'], { env });
  buildAddon({ release: false });
  run('git', ['diff', '--exit-code', '--stat', '--', 'binding.js', 'binding.d.ts']);
  const only = process.argv.slice(2);
  const all = readdirSync(new URL('../__test__/', import.meta.url))
    .filter((name) => name.endsWith('.test.mjs'))
    .filter((name) => only.length === 0 || only.some((o) => name.includes(o)))
    .sort()
    .map((name) => `__test__/${name}`);
  // The package's end-to-end tests install what they test themselves, on every Node: run once.
  const isPackageTest = (path) => /\/package-(?!boundary)[^/]*\.test\.mjs$/.test(path);
  const tests = all.filter((path) => !isPackageTest(path));
  const packageTests = all.filter(isPackageTest);
  // The real Claude Code's end-to-end tests run once, on this machine's Node, after the others: they
  // start the real CLI (cached bootstrap, about 300 MB) and are the slowest of all.
  const isClaudeCode = (path) => path.startsWith('__test__/claude-code-');
  const main = tests.filter((path) => !isClaudeCode(path));
  const claudeCode = tests.filter(isClaudeCode);
  // The demo's build (the release addon packed, the example's `next build`) takes minutes on a cold
  // machine: done here, once, so that the browser test's time is its test's (it finds it built).
  if (main.some((path) => path.endsWith('/demo-browser.test.mjs'))) {
    run(process.execPath, ['scripts/demo.mjs', '--build-only'], { env });
  }
  if (main.length > 0) {
    run(process.execPath, ['--test', '--test-concurrency=1', '--test-timeout=300000', ...main], { env });
    run(nodeBinary(24), ['--test', '--test-concurrency=1', '--test-timeout=300000', ...main], { env });
  }
  if (claudeCode.length > 0) run(process.execPath, ['--test', '--test-concurrency=1', '--test-timeout=600000', ...claudeCode], { env });
  run(process.execPath, ['scripts/typecheck.mjs']);
  if (packageTests.length > 0) {
    run(process.execPath, ['--test', '--test-concurrency=1', '--test-timeout=900000', ...packageTests], { env });
  }
} finally {
  postgres?.stop();
}

/**
 * Starts the run's PostgreSQL cluster (installed first when missing and this is root) and sets
 * HARNESS_SESSIONS_TEST_PG_URL in `env`; one given in the environment is used as it is.
 */
async function startTestPostgres(env) {
  if (env.HARNESS_SESSIONS_TEST_PG_URL) {
    console.log(`\nPostgreSQL: the tests use HARNESS_SESSIONS_TEST_PG_URL as given.`);
    return undefined;
  }
  try {
    installPostgres();
    const cluster = await startPostgres();
    env.HARNESS_SESSIONS_TEST_PG_URL = cluster.url;
    console.log(`\nPostgreSQL: a throwaway cluster at ${cluster.url} (${cluster.dir})`);
    return cluster;
  } catch (error) {
    if (env.HARNESS_SESSIONS_REQUIRE_POSTGRES === '1') throw error;
    console.log(`\nNo PostgreSQL (${error.message}): the PostgreSQL tests will skip.`);
    return undefined;
  }
}

/** Starts a Docker Engine and builds the test image, when this machine allows it (root). */
function startDocker(env) {
  if (process.getuid?.() !== 0 && env.DOCKER_HOST === undefined) {
    console.log('\nNo Docker Engine can be started without root: the Docker tests will skip.');
    return;
  }
  try {
    const out = execFileSync('bash', ['scripts/docker/start.sh'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
    const host = /DOCKER_HOST=(\S+)/.exec(out)?.[1];
    if (host) env.DOCKER_HOST = host;
    run('bash', ['scripts/docker/build-test-image.sh'], { env });
    run('bash', ['scripts/docker/build-claude-code-image.sh'], { env });
  } catch (error) {
    if (env.HARNESS_SESSIONS_REQUIRE_DOCKER === '1') throw error;
    console.log(`\nNo Docker Engine (${error.message}): the Docker tests will skip.`);
  }
}
