// `npm run test:quick`: the inner loop. The engine's Rust tests, the addon's dev build, then the
// JavaScript tests on this machine's Node, without what needs more than the package itself: no
// Docker (DOCKER_HOST is set to nothing usable, so the Docker tests skip), no browser, no package
// install, no real Claude Code; and the randomized tests (races, crashes, hostile input, generated
// streams) run a tenth of their rounds (HARNESS_SESSIONS_QUICK=1). `npm test` stays the whole
// suite (CI runs it).
//
// Names narrow it: `npm run test:quick -- reconnect usechat` runs the JavaScript test files whose
// names contain one of them, and not the Rust tests; `rust` among them runs the Rust tests too
// (`npm run test:quick -- rust` runs them alone). `--no-build` skips the addon's build.
import { readdirSync } from 'node:fs';
import { buildAddon, ensureDependencies, run, TARGET } from './lib.mjs';

const started = Date.now();
process.on('exit', (code) => {
  console.log(`\nnpm run test:quick: ${code === 0 ? 'passed' : 'FAILED'} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
});

const args = process.argv.slice(2);
const build = !args.includes('--no-build');
const names = args.filter((arg) => !arg.startsWith('--'));
const rust = names.length === 0 || names.includes('rust');
const fileNames = names.filter((name) => name !== 'rust');

/** What the quick loop leaves to `npm test`: Docker, browsers, packages, the real Claude Code. */
const slow = (name) =>
  /^(package-(?!boundary)|claude-code-|sandbox-docker|demo-)/.test(name);

const files = readdirSync(new URL('../__test__/', import.meta.url))
  .filter((name) => name.endsWith('.test.mjs') && !slow(name))
  .filter((name) => (names.length === 0 ? true : fileNames.some((wanted) => name.includes(wanted))))
  .sort()
  .map((name) => `__test__/${name}`);
if (names.length > 0 && fileNames.length > 0 && files.length === 0) {
  console.error(`npm run test:quick: no quick test file matches ${fileNames.join(', ')}`);
  process.exit(1);
}

const env = { ...process.env, HARNESS_SESSIONS_TEST: '1', HARNESS_SESSIONS_QUICK: '1', DOCKER_HOST: 'unix:///nonexistent/harness-sessions-test-quick/docker.sock', HARNESS_SESSIONS_REQUIRE_DOCKER: '0' };
try {
  ensureDependencies();
  if (rust) run('cargo', ['test', '--target', TARGET, '--no-default-features'], { env });
  if (files.length > 0) {
    if (build) buildAddon({ release: false });
    run(process.execPath, ['--test', '--test-concurrency=1', '--test-timeout=300000', ...files], { env });
  }
} catch (error) {
  console.error(`\n${error.message}`);
  process.exitCode = 1;
}
