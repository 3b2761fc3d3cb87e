// `npm run demo`: the Next.js example (examples/next-chat), built from whatever a fresh clone lacks
// and started, its URL printed.
//
// 1. the package's own dependencies (`npm ci`), when node_modules is missing or older than the lock;
// 2. the native addon (release build), when its .node file is missing or older than src/;
// 3. the example's dependencies (`npm ci` in examples/next-chat), likewise;
// 4. the example (`next build`), when .next is missing or older than its sources;
// 5. `next start` on `PORT` (default 3000), until Ctrl-C or SIGTERM: the sessions are then suspended
//    (the example's shutdown handler) and found again at the next start.
//
// Environment: PORT; DEMO_DATA_DIR (default examples/next-chat/data: the SQLite file and the
// sandbox's folders); DEMO_SANDBOX=docker (with DEMO_DOCKER_IMAGE, DOCKER_HOST);
// DEMO_AGENT=claude-code for the real Claude Code instead of the scripted agent, against a mock
// model in the server unless ANTHROPIC_API_KEY is set (a key alone also picks Claude Code): its
// bootstrap is prepared before the server starts (step 4b); DEMO_KEEP_ADDON=1 uses the addon as it is when
// there is one (to work on the example while the Rust sources change). `--build-only` stops after
// step 4; `--no-build` skips steps 1 to 4 (the tests build once, then start the server twice).
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

import { ensureDependencies, root, run } from './lib.mjs';

const example = join(root, 'examples', 'next-chat');
const addon = join(root, 'harness-sessions.linux-x64-gnu.node');
const buildOnly = process.argv.includes('--build-only');
const noBuild = process.argv.includes('--no-build');
const port = Number(process.env.PORT ?? 3000);
const started = Date.now();

/** The latest modification time of `path`, a file or everything under a folder (0 when missing). */
function newest(path, skip = new Set()) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let latest = stat.mtimeMs;
  for (const entry of readdirSync(path)) {
    if (!skip.has(entry)) latest = Math.max(latest, newest(join(path, entry), skip));
  }
  return latest;
}

const mtime = (path) => (existsSync(path) ? statSync(path).mtimeMs : 0);

const buildId = join(example, '.next', 'BUILD_ID');
const nextBin = join(example, 'node_modules', 'next', 'dist', 'bin', 'next');

if (noBuild) {
  if (!existsSync(addon) || !existsSync(buildId)) {
    console.error('npm run demo --no-build: build first (npm run demo -- --build-only)');
    process.exit(1);
  }
} else {
  // 1. The package's dependencies: the `@ai-sdk/harness` and `ai` its `testing` entry point imports.
  ensureDependencies();

  // 2. The addon.
  const sources = Math.max(newest(join(root, 'src')), mtime(join(root, 'Cargo.toml')), mtime(join(root, 'Cargo.lock')), mtime(join(root, 'build.rs')));
  const keep = process.env.DEMO_KEEP_ADDON === '1' && existsSync(addon);
  if (!keep && (!existsSync(addon) || mtime(addon) < sources)) {
    run('npx', ['napi', 'build', '--platform', '--release', '--js', 'binding.js', '--dts', 'binding.d.ts']);
  }

  // 3. The example's dependencies.
  const lock = join(example, 'package-lock.json');
  const installed = join(example, 'node_modules', '.package-lock.json');
  if (mtime(installed) < mtime(lock)) {
    run('npm', ['ci', '--no-audit', '--no-fund'], { cwd: example });
  }

  // 4. The example, when its sources or its dependencies changed. The package itself is loaded by
  // Node at run time (examples/next-chat/lib/harness-sessions.ts), not bundled: changing it needs
  // no new build.
  const generated = new Set(['node_modules', '.next', 'data', 'next-env.d.ts', 'tsconfig.tsbuildinfo', 'README.md']);
  const exampleSources = Math.max(newest(example, generated), mtime(installed));
  if (mtime(buildId) < exampleSources) {
    run(process.execPath, [nextBin, 'build'], { cwd: example });
  }
  console.log(`\nnpm run demo: ready to start in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (buildOnly) process.exit(0);
}

// 4b. Claude Code's bootstrap (the bridge and the CLI, about 300 MB, cached under .cache/claude-code):
// laid out in /tmp/harness/claude-code for localSandbox, baked into harness-sessions-claude-code:latest
// for dockerSandbox. Quick when it is there already.
if (process.env.DEMO_AGENT === 'claude-code' || process.env.ANTHROPIC_API_KEY) {
  if (process.env.DEMO_SANDBOX === 'docker') {
    if (process.env.DEMO_DOCKER_IMAGE === undefined) run('bash', [join(root, 'scripts', 'docker', 'build-claude-code-image.sh')]);
  } else {
    const { seedLocalBootstrap } = await import('./claude-code-bootstrap.mjs');
    console.log(`\nClaude Code's bootstrap in /tmp/harness/claude-code: ${await seedLocalBootstrap(undefined, { log: (line) => console.log(line) })}`);
  }
}

// 5. The server. Next.js leaves SIGTERM and SIGINT to the example (NEXT_MANUAL_SIG_HANDLE), which
// suspends the sessions before it exits.
const server = spawn(process.execPath, [nextBin, 'start', '--port', String(port)], {
  cwd: example,
  stdio: ['ignore', 'inherit', 'inherit'],
  env: { ...process.env, NEXT_MANUAL_SIG_HANDLE: 'true', NEXT_TELEMETRY_DISABLED: '1' },
});
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => server.kill(signal));
}
server.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));

const url = `http://localhost:${port}`;
for (let tries = 0; tries < 600 && server.exitCode === null; tries++) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/api/sessions`);
    if (response.ok) {
      console.log(`\nHarness Chat is running: ${url}\n`);
      break;
    }
  } catch {}
  await new Promise((resolve) => setTimeout(resolve, 100));
}
