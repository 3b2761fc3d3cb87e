// `npm run demo`: the Next.js example (examples/next-chat), built from whatever a fresh clone lacks
// and started, its URL printed. The example installs harness-sessions as an app does, from
// tarballs packed as `npm run pack` packs them, into .cache/demo-pack (pack/ is left to
// `npm run pack`). Their addon is the dev-profile build by default, the profile of
// `npm run build:debug` and of the tests: the demo does not need the release profile's last percent
// of speed, and on a 2-core machine the release build alone takes about 7 minutes from cold, the
// dev build about 2. DEMO_PROFILE=release packs the release addon instead.
//
// 1. the package's own dependencies (`npm ci`), when node_modules is missing or older than the lock;
// 2. the tarballs: the addon is built only when the Rust sources changed (and Cargo reuses what
//    `npm run build:debug` or `npm test` compiled: same flags);
// 3. the example's dependencies (`npm install --no-save`, from its lock, with the two tarballs
//    named) when it has none, its lock changed or the tarballs changed;
// 4. the example (`next build`) when its sources, its lock or the tarballs changed (digests of
//    their contents, kept in .next/demo-inputs.sha256: a second run builds nothing);
// 5. `next start` on `PORT` (default 3000), once the port is known to be free. Ready when its
//    /api/health answers this run's instance id (a random one, given to the server only): another
//    server on the port cannot pass for it. Any way of stopping it suspends the sessions (the
//    example's shutdown handler) and leaves no process: Ctrl-C, SIGTERM or SIGHUP to this script,
//    SIGTERM to `npm run demo` (npm then kills the shell between them and leaves this script
//    running: it notices its parent is gone), the terminal closed; and should this script die
//    (SIGKILL), the server notices it and stops the same way.
//
// Environment: PORT; DEMO_DATA_DIR (default examples/next-chat/data: the SQLite file and the
// sandbox's folders); DEMO_SANDBOX=docker (with DEMO_DOCKER_IMAGE, DOCKER_HOST);
// DEMO_AGENT=claude-code for the real Claude Code instead of the scripted agent, against a mock
// model in the server unless ANTHROPIC_API_KEY is set (a key alone also picks Claude Code): its
// bootstrap is prepared before the server starts (step 4b); DEMO_PROFILE=release; DEMO_KEEP_ADDON=1
// packs the addon as it is when there is one (to work on the example while the Rust sources change).
// `--build-only` stops after step 4; `--no-build` skips steps 1 to 4 (the tests build once, then
// start the server twice).
//
// The README asks for Node 22 or 24: the example's dependencies (`ai`, `@ai-sdk/harness`) declare
// it, and npm prints an engine warning per package on an older Node. On Node 20 (which runs the
// demo) npm's installs are told to print errors only, and one line says why.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';

import { cache, ensureDependencies, root, run } from './lib.mjs';
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
  const nodeMajor = Number(process.versions.node.split('.')[0]);
  const npmQuiet = nodeMajor < 22 ? ['--loglevel=error'] : [];
  if (npmQuiet.length > 0) {
    console.log(
      `Node ${process.versions.node}: the example's dependencies ask for Node 22 or 24, and run on it here; ` +
        "npm's engine warnings are left out (npm prints errors only).",
    );
  }
  ensureDependencies({ npmArgs: npmQuiet });

  // 2. The tarballs, the addon of the demo's profile in the platform's.
  const profile = process.env.DEMO_PROFILE === 'release' ? 'release' : 'dev';
  const tarballs = packTarballs(join(cache, 'demo-pack'), { keepAddon: process.env.DEMO_KEEP_ADDON === '1', profile });
  console.log(`\nnpm run demo: the ${profile}-profile addon${profile === 'dev' ? ' (DEMO_PROFILE=release for the release one)' : ''}`);
  const tarballsDigest = digestOf([tarballs.main, tarballs.platform]);

  // 3. The example's dependencies, with the tarballs named: npm keeps a package from a tarball at
  // the version it has, whatever the tarball now holds, and the lock's own paths (pack/) are
  // `npm run pack`'s, which may not be there.
  const lock = join(example, 'package-lock.json');
  const lockDigest = digestOf([lock, join(example, 'package.json')]);
  const installStamp = join(example, 'node_modules', '.demo-install.sha256');
  const npm = ['--no-save', '--no-audit', '--no-fund', ...npmQuiet];
  if (!existsSync(installed) || !unchanged(installStamp, lockDigest + tarballsDigest)) {
    run('npm', ['install', ...npm, tarballs.main, tarballs.platform], { cwd: example });
    keep(installStamp, lockDigest + tarballsDigest);
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

// 5. The server, on a port nobody else holds. Next.js leaves SIGTERM and SIGINT to the example
// (NEXT_MANUAL_SIG_HANDLE), which suspends the sessions before it exits.
if (!(await portIsFree(port))) {
  console.error(`\nnpm run demo: port ${port} is in use by another program. Stop it, or start the demo on another port: PORT=3001 npm run demo`);
  process.exit(1);
}
const instance = randomUUID();
const server = spawn(process.execPath, [nextBin, 'start', '--port', String(port)], {
  cwd: example,
  stdio: ['ignore', 'inherit', 'inherit'],
  env: {
    ...process.env,
    NEXT_MANUAL_SIG_HANDLE: 'true',
    NEXT_TELEMETRY_DISABLED: '1',
    // The server answers it at /api/health (readiness), and stops when this process is gone.
    DEMO_INSTANCE_ID: instance,
    DEMO_PARENT_PID: String(process.pid),
  },
});
let stopping = false;
server.on('exit', (code, signal) => process.exit(stopping ? (code ?? 0) : (code ?? (signal ? 1 : 0))));

/** Tells the server to stop (it suspends the sessions), and makes sure it does within a bound. */
function stop(why) {
  if (stopping) return;
  stopping = true;
  console.log(`\nnpm run demo: ${why}: stopping (the sessions are suspended first)…`);
  if (server.exitCode === null && server.signalCode === null) server.kill('SIGTERM');
  // The example's shutdown is bounded by the manager's windDownMs (10 s) per step: well within.
  setTimeout(() => {
    console.error('npm run demo: the server did not stop within 60 s: killed');
    server.kill('SIGKILL');
  }, 60_000).unref();
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => stop(signal));
// `npm run demo` killed: npm kills the shell it ran this script in, and this script is left to
// init (or a subreaper). Its parent changing is the sign.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) stop('npm run demo is gone');
}, 500).unref();

const url = `http://localhost:${port}`;
for (let tries = 0; tries < 1200 && server.exitCode === null && !stopping; tries++) {
  if (await answersHealth(port, instance)) {
    console.log(`\nHarness Chat is running: ${url}\n`);
    break;
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
}

/** Whether nothing listens on `port` (on any address, as `next start` listens). */
function portIsFree(port) {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen({ port, exclusive: true }, () => probe.close(() => resolve(true)));
  });
}

/** Whether the server on `port` is this run's: its /api/health answers `instance`. */
async function answersHealth(port, instance) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/api/health`, { signal: AbortSignal.timeout(2000) });
    if (!response.ok) return false;
    const body = await response.json();
    return body?.instance === instance;
  } catch {
    return false;
  }
}
