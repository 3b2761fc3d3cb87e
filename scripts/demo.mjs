// `npm run demo`: the Next.js example (examples/next-chat), built from whatever a fresh clone lacks
// and started, its URL printed. The example installs harness-sessions as an app does, from the
// tarballs of `npm run pack`: it runs the release addon, never the tests' debug build.
//
// 1. the package's own dependencies (`npm ci`), when node_modules is missing or older than the lock;
// 2. the tarballs (`npm run pack`): the release addon is built only when the Rust sources changed;
// 3. the example's dependencies (`npm install --no-save`, from its lock) when it has none or its
//    lock changed, then the tarballs when they changed;
// 4. the example (`next build`) when its sources, its lock or the tarballs changed (digests of
//    their contents, kept in .next/demo-inputs.sha256: a second run builds nothing);
// 5. `next start` on `PORT` (default 3000), until Ctrl-C or SIGTERM: the sessions are then suspended
//    (the example's shutdown handler) and found again at the next start.
//
// Environment: PORT; DEMO_DATA_DIR (default examples/next-chat/data: the SQLite file and the
// sandbox's folders); DEMO_SANDBOX=docker (with DEMO_DOCKER_IMAGE, DOCKER_HOST);
// DEMO_AGENT=claude-code for the real Claude Code instead of the scripted agent, against a mock
// model in the server unless ANTHROPIC_API_KEY is set (a key alone also picks Claude Code): its
// bootstrap is prepared before the server starts (step 4b); DEMO_KEEP_ADDON=1 packs the release
// addon as it is when there is one (to work on the example while the Rust sources change).
// `--build-only` stops after step 4; `--no-build` skips steps 1 to 4 (the tests build once, then
// start the server twice).
//
// The README asks for Node 22 or 24: the example's dependencies (`ai`, `@ai-sdk/harness`) declare
// it, and npm prints engine warnings on an older Node.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { ensureDependencies, root, run } from './lib.mjs';
import { digestOf, packTarballs } from './packaging.mjs';

const example = join(root, 'examples', 'next-chat');
const buildOnly = process.argv.includes('--build-only');
const noBuild = process.argv.includes('--no-build');
const port = Number(process.env.PORT ?? 3000);
const started = Date.now();

const buildId = join(example, '.next', 'BUILD_ID');
const nextBin = join(example, 'node_modules', 'next', 'dist', 'bin', 'next');
const installed = join(example, 'node_modules', 'harness-sessions', 'package.json');

/** Whether the digest kept in `stamp` is `digest`. */
const unchanged = (stamp, digest) => existsSync(stamp) && readFileSync(stamp, 'utf8') === digest;
const keep = (stamp, digest) => {
  mkdirSync(join(stamp, '..'), { recursive: true });
  writeFileSync(stamp, digest);
};

if (noBuild) {
  if (!existsSync(installed) || !existsSync(buildId)) {
    console.error('npm run demo --no-build: build first (npm run demo -- --build-only)');
    process.exit(1);
  }
} else {
  // 1. The package's dependencies: the napi CLI that builds the addon.
  ensureDependencies();

  // 2. The tarballs, the release addon in the platform's.
  const tarballs = packTarballs(join(root, 'pack'), { keepAddon: process.env.DEMO_KEEP_ADDON === '1' });
  const tarballsDigest = digestOf([tarballs.main, tarballs.platform]);

  // 3. The example's dependencies, then the tarballs again when they changed: npm keeps a package
  // from a tarball at the version it has, whatever the tarball now holds.
  const lock = join(example, 'package-lock.json');
  const lockDigest = digestOf([lock, join(example, 'package.json')]);
  const installStamp = join(example, 'node_modules', '.demo-lock.sha256');
  const tarballStamp = join(example, 'node_modules', '.demo-tarballs.sha256');
  const npm = ['--no-save', '--no-audit', '--no-fund'];
  if (!existsSync(installed) || !unchanged(installStamp, lockDigest)) {
    run('npm', ['install', ...npm], { cwd: example });
    keep(installStamp, lockDigest);
  }
  if (!unchanged(tarballStamp, tarballsDigest)) {
    run('npm', ['install', ...npm, tarballs.main, tarballs.platform], { cwd: example });
    keep(tarballStamp, tarballsDigest);
  }

  // 4. The example, when its sources, its dependencies or the package changed.
  const generated = new Set(['node_modules', '.next', 'data', 'next-env.d.ts', 'tsconfig.tsbuildinfo', 'README.md']);
  const inputs = digestOf([example], { base: example, skip: generated }) + lockDigest + tarballsDigest;
  const buildStamp = join(example, '.next', 'demo-inputs.sha256');
  if (!existsSync(buildId) || !unchanged(buildStamp, inputs)) {
    run(process.execPath, [nextBin, 'build'], { cwd: example });
    keep(buildStamp, inputs);
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
