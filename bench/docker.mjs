// Figure 7, Docker sessions (when a Docker Engine is reachable: DOCKER_HOST, or the daemon of
// scripts/docker/start.sh; the image harness-sessions-test:busybox is built by
// scripts/docker/build-test-image.sh when missing). Through the manager, with
// `sandboxPerSession(dockerSandbox())` and a chunk agent: a session from `create()` to `idle`
// (its container created and started), `suspend()` (the container stopped), and the next
// `send()` to its first chunk (resumed: the container started again); with
// `sharedSandbox({ open: dockerSandbox() })`, `create()` to `idle` of a session on the open shared
// sandbox (a fork). Median of 10 each, beside the same with `localSandbox()`, interleaved.
// Target: ready and resume under 1 s each. Also the provider's own calls without the manager
// (`createSession`, `stop`, `resumeSession`, `fork`), to tell the manager's share.
import { randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { now } from './stats.mjs';
import { chunkAgent, loadPackage, readySession, repoRoot, shortTurn, statusWaiter, userMessage } from './support.mjs';
import { skippedRow, timeRow } from './report.mjs';

export const title = 'Docker sandboxes: ready, suspend, resume, fork';

export const IMAGE = process.env.HARNESS_SESSIONS_TEST_IMAGE ?? 'harness-sessions-test:busybox';

export function dockerHost() {
  if (process.env.DOCKER_HOST) return process.env.DOCKER_HOST;
  const socket = join(repoRoot, '.cache', 'docker', 'docker.sock');
  return existsSync(socket) ? `unix://${socket}` : undefined;
}

/** A call to the engine over its unix socket: `{ status, body }`. */
function engine(host, method, path) {
  return new Promise((resolve, reject) => {
    if (!host?.startsWith('unix://')) return reject(new Error(`no unix Docker endpoint (DOCKER_HOST=${host ?? 'unset'})`));
    const req = request({ socketPath: host.slice(7), path, method, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, body }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

/** Why Docker cannot be measured, or `undefined` once the engine answers and the image is there. */
export async function dockerProblem(host, log) {
  try {
    if ((await engine(host, 'GET', '/_ping')).status !== 200) return 'the Docker Engine does not answer';
  } catch (error) {
    return `no Docker Engine reachable (${error.message}): eval "$(scripts/docker/start.sh)" first`;
  }
  if ((await engine(host, 'GET', `/images/${encodeURIComponent(IMAGE)}/json`)).status !== 200) {
    log(`  building ${IMAGE} (scripts/docker/build-test-image.sh)`);
    const built = spawnSync(join(repoRoot, 'scripts', 'docker', 'build-test-image.sh'), [IMAGE], { stdio: 'inherit', env: { ...process.env, DOCKER_HOST: host } });
    if (built.status !== 0) return `the image ${IMAGE} is missing and could not be built`;
  }
  return undefined;
}

/** Removes the containers whose names start with `prefix` (this run's). */
export async function removeContainers(host, prefix) {
  const filters = encodeURIComponent(JSON.stringify({ name: [prefix] }));
  const { body } = await engine(host, 'GET', `/containers/json?all=1&filters=${filters}`);
  let removed = 0;
  for (const container of JSON.parse(body)) {
    if (!container.Names.some((n) => n.replace(/^\//, '').startsWith(prefix))) continue;
    await engine(host, 'DELETE', `/containers/${container.Id}?force=1&v=1`);
    removed++;
  }
  return removed;
}

/**
 * A short pause before each timed call, so that what Docker may still do after the call before
 * (a container being removed, say) does not fall on it.
 */
const settle = () => new Promise((resolve) => setTimeout(resolve, 100));

async function firstChunkThenRest(stream, started) {
  const reader = stream.getReader();
  await reader.read();
  const at = now() - started;
  while (!(await reader.read()).done) {}
  return at;
}

export async function run({ quick, log }) {
  const host = dockerHost();
  const problem = await dockerProblem(host, log);
  if (problem) {
    log(`  skipped: ${problem}`);
    return { rows: [skippedRow({ id: 'docker', label: 'Docker sessions', reason: problem })], notes: [`Skipped: ${problem}.`] };
  }
  const pkg = loadPackage();
  const prefix = `hs-bench-${process.pid}-`;
  const root = mkdtempSync(join(tmpdir(), 'harness-sessions-bench-local-'));
  const agent = chunkAgent(shortTurn);
  const errors = [];
  const onError = (error, context) => errors.push({ message: String(error?.message ?? error), ...context });
  const providers = {
    // A shared sandbox serves a port per session: host networking (loopback) for Docker.
    docker: (name) => pkg.dockerSandbox({ image: IMAGE, host, namePrefix: prefix, name, ...(name ? { network: 'host' } : {}) }),
    local: (name) => pkg.localSandbox({ root, name }),
  };
  const managers = {};
  for (const [backend, make] of Object.entries(providers)) {
    const perSession = pkg.createSessionManager({ agent: () => agent, sandboxes: pkg.sandboxPerSession({ provider: make() }), onError });
    const shared = pkg.createSessionManager({
      agent: () => agent,
      sandboxes: pkg.sharedSandbox({ open: make(`shared-${process.pid}`), ports: Array.from({ length: 16 }, (_, i) => 47001 + i) }),
      onError,
    });
    // The provider alone: the same options as the manager's per-session provider, and a shared
    // sandbox of its own (host networking, as the shared one) to fork.
    managers[backend] = { perSession, shared, perSessionWaiter: statusWaiter(perSession), sharedWaiter: statusWaiter(shared), provider: make(), sharedProvider: make(`raw-shared-${process.pid}`) };
  }
  const reps = quick ? 3 : 10;
  const samples = {};
  const add = (key, value) => (samples[key] ??= []).push(value);
  try {
    // The shared sandboxes open with their first session: timed on its own, not as a fork.
    const rawShared = {};
    for (const [backend, m] of Object.entries(managers)) {
      let started = now();
      await readySession(m.shared, m.sharedWaiter, `open-${backend}`);
      add(`${backend}.sharedOpen`, now() - started);
      started = now();
      rawShared[backend] = await m.sharedProvider();
      add(`${backend}.rawOpen`, now() - started);
    }
    log(`  ${reps} rounds per backend, docker and local in turn`);
    for (let i = 0; i < reps; i++) {
      for (const backend of i % 2 === 0 ? ['docker', 'local'] : ['local', 'docker']) {
        const m = managers[backend];
        const id = `${backend}-${i}-${randomUUID().slice(0, 8)}`;
        await settle();
        let started = now();
        await readySession(m.perSession, m.perSessionWaiter, id);
        add(`${backend}.ready`, now() - started);
        await settle();
        started = now();
        await m.perSession.suspend(id);
        add(`${backend}.suspend`, now() - started);
        await settle();
        started = now();
        const turn = await m.perSession.send(id, { message: userMessage(randomUUID(), 'Hello again') });
        add(`${backend}.resume`, await firstChunkThenRest(turn.stream, started));
        await turn.done;
        await m.perSession.close(id);

        const forkId = `fork-${id}`;
        await settle();
        started = now();
        await readySession(m.shared, m.sharedWaiter, forkId);
        add(`${backend}.fork`, now() - started);
        await m.shared.close(forkId);

        // The provider alone, no manager.
        const provider = m.provider;
        const rawId = `raw-${id}`;
        await settle();
        started = now();
        const session = await provider.createSession({ sessionId: rawId });
        add(`${backend}.rawCreate`, now() - started);
        await settle();
        started = now();
        await session.stop();
        add(`${backend}.rawStop`, now() - started);
        await settle();
        started = now();
        const resumed = await provider.resumeSession({ sessionId: rawId });
        add(`${backend}.rawResume`, now() - started);
        await resumed.destroy();
        await settle();
        started = now();
        const view = await rawShared[backend].fork({ ports: [48001 + i] });
        add(`${backend}.rawFork`, now() - started);
        await view.destroy().catch(() => {});
      }
      log(`  round ${i + 1}: docker ready ${samples['docker.ready'].at(-1).toFixed(0)} ms, resume ${samples['docker.resume'].at(-1).toFixed(0)} ms; local ready ${samples['local.ready'].at(-1).toFixed(1)} ms`);
    }
    for (const m of Object.values(managers)) {
      await m.perSession.shutdown();
      await m.shared.shutdown();
    }
    for (const shared of Object.values(rawShared)) await shared.destroy().catch(() => {});
  } finally {
    const removed = await removeContainers(host, prefix).catch(() => 0);
    if (removed) log(`  removed ${removed} containers left behind`);
    rmSync(root, { recursive: true, force: true });
  }

  const underSecond = { text: 'median < 1 s', check: (_, ours) => ours.median < 1000, needsRatio: false };
  const row = (key, label, extra = {}) =>
    timeRow({ id: `docker.${key}`, label: `Docker: ${label}`, baselineLabel: `localSandbox: the same`, ours: samples[`docker.${key}`], baseline: samples[`local.${key}`], ...extra });
  return {
    rows: [
      row('ready', 'create() → idle (sandboxPerSession, container created and started)', { target: underSecond }),
      row('suspend', 'suspend() (container stopped)'),
      row('resume', 'send() on a suspended session → first chunk (container started again)', { target: underSecond }),
      row('fork', 'create() → idle on the open shared sandbox (sharedSandbox, a fork)'),
      row('sharedOpen', 'first session of a shared sandbox (opens it)'),
      row('rawCreate', 'provider.createSession(), no manager'),
      row('rawStop', 'session.stop(), no manager'),
      row('rawResume', 'provider.resumeSession(), no manager'),
      row('rawFork', 'NativeSandboxSession.fork(), no manager'),
    ],
    notes: [
      `Image ${IMAGE} on ${host}; ${reps} rounds; errors reported to onError: ${errors.length}${errors.length ? ` (${JSON.stringify(errors.slice(0, 3))})` : ''}.`,
      'Per-session sandboxes use the default network (none); the shared sandboxes host networking (they serve a port per session): the raw rows use the same options as the manager rows they sit beside.',
    ],
    checks: { errors, samples },
  };
}
