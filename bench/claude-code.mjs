// Figure 8, the real Claude Code (`@ai-sdk/harness-claude-code` 1.0.41, the CLI its bridge pins)
// through the manager, against the mock of the Anthropic Messages API of harness-sessions/testing,
// on localSandbox and on dockerSandbox (a sandbox per session):
//
// - `create()` to `idle` with the bootstrap cached (Docker: harness-sessions-claude-code:latest,
//   the bootstrap baked in; local: /tmp/harness/claude-code seeded from .cache/claude-code), and
//   once without (Docker: harness-sessions-claude-code:base, the harness installing its bridge
//   from the npm registry in the container; local: /tmp/harness/claude-code removed first);
// - `send()` on an idle session to the first `text-delta` (the CLI asked the mock and streamed);
// - a resume: `send()` on a suspended session to the first `text-delta`;
// - a whole turn: `send()` to `done`;
// each of the last three beside the same done with `HarnessAgent` driven directly on a sandbox of
// the same provider (`provider.createSession()`, `agent.createSession()`, `agent.stream()` read
// from its UI message stream; `stop()` of both and `provider.resumeSession()` +
// `agent.createSession({ resumeFrom })` for the resume), the two alternating round by round.
//
// BENCH_CLAUDE_CODE_BACKENDS=docker (or local) measures one backend only. Each backend is measured
// when it can run here: Docker needs an engine (its images are built
// when missing), and either backend that fails to start a session is reported skipped with the
// reason, never failing `npm run bench`.
import { randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { now } from './stats.mjs';
import { loadPackage, loadTesting, repoRoot, statusWaiter, userMessage } from './support.mjs';
import { skippedRow, timeRow } from './report.mjs';
import { BOOTSTRAP_DIR, pnpmCli, seedLocalBootstrap } from '../scripts/claude-code-bootstrap.mjs';

export const title = 'The real Claude Code: ready, first chunk, resume';

const QUIET = {
  DISABLE_TELEMETRY: '1',
  DISABLE_ERROR_REPORTING: '1',
  DISABLE_AUTOUPDATER: '1',
  DISABLE_NON_ESSENTIAL_MODEL_CALLS: '1',
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
};

function dockerHost() {
  if (process.env.DOCKER_HOST) return process.env.DOCKER_HOST;
  const socket = join(repoRoot, '.cache', 'docker', 'docker.sock');
  return existsSync(socket) ? `unix://${socket}` : undefined;
}

function ping(host) {
  return new Promise((resolve) => {
    if (!host?.startsWith('unix://')) return resolve(false);
    const req = request({ socketPath: host.slice(7), path: '/_ping', timeout: 3000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/** A free port below the kernel's ephemeral range (see __test__/support/claude-code.mjs). */
async function freePort() {
  const { createServer } = await import('node:net');
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    const free = await new Promise((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
    });
    if (free) return port;
  }
}

/** Reads a turn's stream; resolves to the time of its first `text-delta` from `started`. */
async function firstTextDelta(stream, started) {
  return (await textTimes(stream, started)).first;
}

/** Reads a turn's stream to its end: the times of its first `text-delta` and of its end, from `started`. */
async function textTimes(stream, started) {
  const reader = stream.getReader();
  let at;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (at === undefined && value.type === 'text-delta') at = now() - started;
  }
  if (at === undefined) throw new Error('the turn streamed no text');
  return { first: at, end: now() - started };
}

/**
 * One round of `HarnessAgent` driven directly on a sandbox of `provider` (no manager): a turn
 * (first text, and whole, to its `totalUsage`), both stopped, then resumed to a second turn's
 * first text. The times in ms.
 */
async function directRound(agent, provider, id) {
  const sandbox = await provider.createSession({ sessionId: id });
  let session = await agent.createSession({ sessionId: id, sandboxSession: sandbox });
  let started = now();
  let result = await agent.stream({ session, prompt: 'Say something short' });
  const messageId = randomUUID();
  const turn = await textTimes(result.toUIMessageStream({ generateMessageId: () => messageId }), started);
  await result.totalUsage;
  const whole = now() - started;
  const resumeFrom = await session.stop();
  await sandbox.stop();
  started = now();
  const resumed = await provider.resumeSession({ sessionId: id });
  session = await agent.createSession({ sessionId: id, sandboxSession: resumed, resumeFrom });
  result = await agent.stream({ session, prompt: 'And again' });
  const again = randomUUID();
  const resume = await firstTextDelta(result.toUIMessageStream({ generateMessageId: () => again }), started);
  await result.totalUsage;
  await session.destroy();
  await (resumed.destroy?.() ?? resumed.stop?.());
  return { send: turn.first, turn: whole, resume };
}

export async function run({ quick, log }) {
  const pkg = loadPackage();
  const { createAnthropicMock, createRequestCatcher } = await loadTesting();
  const { HarnessAgent } = await import('@ai-sdk/harness/agent');
  const { createClaudeCode } = await import('@ai-sdk/harness-claude-code');
  const mock = await createAnthropicMock({ fallback: { text: 'A short answer from the mock model.' } });
  const catcher = await createRequestCatcher();
  const env = { ...QUIET, ...catcher.proxyEnv() };
  const agent = new HarnessAgent({
    harness: createClaudeCode({ auth: { anthropic: { apiKey: 'sk-ant-mock-key', baseUrl: mock.url } } }),
    permissionMode: 'allow-reads',
  });
  const scratch = mkdtempSync(join(tmpdir(), 'harness-sessions-bench-cc-'));
  const home = join(scratch, 'home');
  mkdirSync(home);
  const host = dockerHost();
  const reps = quick ? 2 : 5;
  const rows = [];
  const notes = [];
  const errors = [];
  const onError = (error, context) => errors.push({ message: String(error?.message ?? error), ...context });

  const backends = {
    local: {
      label: 'localSandbox',
      async available() {
        await seedLocalBootstrap(BOOTSTRAP_DIR, { log: (line) => log(`  ${line}`) });
        return undefined;
      },
      provider: async (cached) => {
        if (!cached) rmSync(BOOTSTRAP_DIR, { recursive: true, force: true });
        // pnpm on the PATH: the harness's own bootstrap runs it on this host when nothing is cached.
        const path = `${join(pnpmCli(), '..', '..', '..', '.bin')}:${process.env.PATH}`;
        const proxies = cached ? env : { ...env, ...catcher.proxyEnv({ noProxy: ['127.0.0.1', 'localhost', 'registry.npmjs.org'] }) };
        // The CA bundle of this host too, when Node is told of one (a registry behind a TLS proxy).
        const ca = process.env.NODE_EXTRA_CA_CERTS ? { NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS } : {};
        return pkg.localSandbox({ root: join(scratch, `local-${randomUUID().slice(0, 8)}`), ports: [await freePort()], env: { ...proxies, ...ca, HOME: home, PATH: path } });
      },
    },
    docker: {
      label: 'dockerSandbox',
      async available() {
        if (!(await ping(host))) return 'no Docker Engine reachable (DOCKER_HOST, or scripts/docker/start.sh)';
        const built = spawnSync('bash', [join(repoRoot, 'scripts', 'docker', 'build-claude-code-image.sh')], { stdio: 'inherit', env: { ...process.env, DOCKER_HOST: host } });
        return built.status === 0 ? undefined : 'the Claude Code images could not be built';
      },
      provider: async (cached) =>
        pkg.dockerSandbox({
          image: cached ? 'harness-sessions-claude-code:latest' : 'harness-sessions-claude-code:base',
          host,
          namePrefix: `hs-bench-cc-${process.pid}-`,
          ports: [await freePort()],
          // Uncached, the harness's bootstrap runs pnpm in the container: the npm registry past the catcher.
          env: cached ? env : { ...env, ...catcher.proxyEnv({ noProxy: ['127.0.0.1', 'localhost', 'registry.npmjs.org'] }) },
          memory: '2g',
        }),
    },
  };

  try {
    const only = process.env.BENCH_CLAUDE_CODE_BACKENDS?.split(',');
    for (const [name, backend] of Object.entries(backends)) {
      if (only && !only.includes(name)) continue;
      const problem = await backend.available().catch((error) => error.message);
      if (problem) {
        log(`  ${name}: skipped: ${problem}`);
        rows.push(skippedRow({ id: `claude-code.${name}`, label: `Claude Code on ${backend.label}`, reason: problem }));
        continue;
      }
      const samples = { ready: [], readyUncached: [], send: [], turn: [], resume: [], directSend: [], directTurn: [], directResume: [] };
      try {
        const managers = [];
        const manager = async (cached) => {
          const sessions = pkg.createSessionManager({ agent: () => agent, sandboxes: pkg.sandboxPerSession({ provider: await backend.provider(cached) }), onError });
          managers.push(sessions);
          return { sessions, waiter: statusWaiter(sessions) };
        };
        const ready = async ({ sessions, waiter }, id) => {
          const started = now();
          const created = await sessions.create({ id, metadata: {} });
          if (created.status !== 'idle' && (await waiter.until(id, 'idle', 'failed')) !== 'idle') {
            throw new Error(`a session did not start: ${(await sessions.get(id))?.error ?? 'no error given'}`);
          }
          return now() - started;
        };
        try {
          // Uncached first (once: it downloads the bridge, about 300 MB), so that the cached rounds
          // after it find the bootstrap again.
          const uncached = await manager(false);
          samples.readyUncached.push(await ready(uncached, `cold-${randomUUID().slice(0, 8)}`));
          log(`  ${name}: create() → idle without the cache ${(samples.readyUncached[0] / 1000).toFixed(1)} s`);
          await uncached.sessions.shutdown();
          if (name === 'local') await seedLocalBootstrap();
          const m = await manager(true);
          const directProvider = await backend.provider(true);
          for (let i = 0; i < reps; i++) {
            const id = `bench-${name}-${i}-${randomUUID().slice(0, 8)}`;
            // HarnessAgent driven directly first in even rounds, after the manager in odd ones.
            const direct = async () => {
              const times = await directRound(agent, directProvider, `direct-${id}`);
              samples.directSend.push(times.send);
              samples.directTurn.push(times.turn);
              samples.directResume.push(times.resume);
              log(`  ${name} round ${i + 1}, HarnessAgent directly: send → text ${times.send.toFixed(0)} ms, turn ${times.turn.toFixed(0)} ms, resume → text ${times.resume.toFixed(0)} ms`);
            };
            if (i % 2 === 0) await direct();
            samples.ready.push(await ready(m, id));
            let started = now();
            let turn = await m.sessions.send(id, { message: userMessage(randomUUID(), 'Say something short') });
            samples.send.push(await firstTextDelta(turn.stream, started));
            await turn.done;
            samples.turn.push(now() - started);
            await m.sessions.suspend(id);
            started = now();
            turn = await m.sessions.send(id, { message: userMessage(randomUUID(), 'And again') });
            samples.resume.push(await firstTextDelta(turn.stream, started));
            await turn.done;
            await m.sessions.close(id);
            log(`  ${name} round ${i + 1}: ready ${samples.ready.at(-1).toFixed(0)} ms, send → text ${samples.send.at(-1).toFixed(0)} ms, turn ${samples.turn.at(-1).toFixed(0)} ms, resume → text ${samples.resume.at(-1).toFixed(0)} ms`);
            if (i % 2 === 1) await direct();
          }
        } finally {
          await Promise.allSettled(managers.map((m) => m.shutdown()));
        }
        const row = (key, label, baseline) =>
          timeRow({
            id: `claude-code.${name}.${key}`,
            label: `Claude Code on ${backend.label}: ${label}`,
            ...(baseline
              ? {
                  baselineLabel: 'HarnessAgent driven directly, same provider, no manager',
                  baseline: samples[baseline],
                  target: { text: 'within 5% or 50 ms of HarnessAgent directly', check: (_, ours, base) => ours.median - base.median <= Math.max(50, 0.05 * base.median) },
                  chart: `Claude Code ${name}: ${key}`,
                }
              : {}),
            ours: samples[key],
          });
        rows.push(
          row('ready', 'create() → idle, bootstrap cached'),
          row('readyUncached', 'create() → idle, bootstrap not cached (downloaded)'),
          row('send', 'send() → first text-delta', 'directSend'),
          row('turn', 'send() → turn.done (a whole turn)', 'directTurn'),
          row('resume', 'send() on a suspended session → first text-delta (resume)', 'directResume'),
        );
      } catch (error) {
        log(`  ${name}: failed: ${error.message}`);
        rows.push(skippedRow({ id: `claude-code.${name}`, label: `Claude Code on ${backend.label}`, reason: `failed here: ${error.message}` }));
      }
    }
  } finally {
    await Promise.allSettled([mock.close(), catcher.close()]);
    rmSync(scratch, { recursive: true, force: true });
  }
  notes.push(
    `${reps} rounds per backend (the uncached start once); the mock model answers at once, so the figures are the harness's, the bridge's and the CLI's own. Requests refused by the catcher: ${catcher.requests.length}; errors reported to onError: ${errors.length}.`,
  );
  return { rows, notes, checks: { errors, caught: catcher.requests } };
}
