// `npm test`: everything, in order: formatting, lints, the engine's Rust tests, the addon built,
// the JavaScript tests on Node 20 (the machine's) and Node 24 (from the npm registry), and a type
// check of a consumer file against index.d.ts with the real `ai` types.
import { readdirSync } from 'node:fs';
import { buildAddon, ensureDependencies, nodeBinary, run } from './lib.mjs';

const started = Date.now();
ensureDependencies();
run('cargo', ['fmt', '--all', '--', '--check']);
run('cargo', ['clippy', '--release', '--all-targets', '--', '-D', 'warnings']);
run('cargo', ['clippy', '--release', '--no-default-features', '--all-targets', '--', '-D', 'warnings']);
run('cargo', ['test', '--release', '--no-default-features']);
buildAddon();
run('git', ['diff', '--exit-code', '--stat', '--', 'binding.js', 'binding.d.ts']);
const tests = readdirSync(new URL('../__test__/', import.meta.url))
  .filter((name) => name.endsWith('.test.mjs'))
  .sort()
  .map((name) => `__test__/${name}`);
const env = { ...process.env, HARNESS_SESSIONS_TEST: '1' };
run(process.execPath, ['--test', '--test-concurrency=1', ...tests], { env });
run(nodeBinary(24), ['--test', '--test-concurrency=1', ...tests], { env });
run('npx', ['tsc', '-p', '__test__/types/tsconfig.json']);
console.log(`\nnpm test: everything passed in ${((Date.now() - started) / 1000).toFixed(0)} s`);
