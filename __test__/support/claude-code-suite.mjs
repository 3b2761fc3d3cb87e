// One setup for the end-to-end tests of the real Claude Code, on dockerSandbox or localSandbox:
// the mock model and the catcher started before the file's tests and closed after them, managers
// on the real HarnessAgent and the real `@ai-sdk/harness-claude-code`, the bootstrap cached
// (Docker: the image harness-sessions-claude-code:latest; local: /tmp/harness/claude-code seeded
// from .cache/claude-code), and every manager shut down at the end even when a test failed.
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { seedLocalBootstrap } from '../../scripts/claude-code-bootstrap.mjs';
import { dockerHost, dockerSkipFor, engine, removeContainers } from './docker.mjs';
import { freePort, startClaudeCodeWorld, until } from './claude-code.mjs';

const require = createRequire(import.meta.url);
const execFileAsync = promisify(execFile);
const { createSessionManager, createSqliteSessionStore, dockerSandbox, localSandbox, sandboxPerSession, sharedSandbox } = require('../../index.js');

export const image = 'harness-sessions-claude-code:latest';
const root = fileURLToPath(new URL('../..', import.meta.url));

/** Builds the Claude Code image when it is missing: the `skip` of the Docker tests. */
async function dockerSkip() {
  const skip = dockerSkipFor(test);
  if (skip !== false) return skip;
  try {
    if ((await engine(`/images/${encodeURIComponent(image)}/json`)) !== 200) {
      execFileSync('bash', ['scripts/docker/build-claude-code-image.sh'], {
        cwd: root,
        env: { ...process.env, DOCKER_HOST: dockerHost },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
    }
    return false;
  } catch (error) {
    if (process.env.HARNESS_SESSIONS_REQUIRE_DOCKER === '1') throw error;
    return `skipped: the Claude Code image could not be built (${error.message})`;
  }
}

/**
 * The suite of a test file on `kind` (`'docker'` or `'local'`): `test(name, fn)` registers a test
 * with a generous timeout, `fn` given the suite.
 */
export async function claudeCodeSuite(kind) {
  const skip = kind === 'docker' ? await dockerSkip() : false;
  const scratch = mkdtempSync(join(tmpdir(), `hs-cc-${kind}-`));
  const managers = [];
  let counter = 0;
  // This run's containers: removed at the end, whatever a failed test or a shared sandbox left.
  const containerPrefix = `hs-cctest-${process.pid}-`;
  const suite = {
    kind,
    skip,
    world: undefined,
    scratch,
    /** A session id of this run. */
    fresh: (name) => `cc-${name}-${process.pid}-${++counter}`,
    /** The options of a sandbox provider with `ports`, as a child process can rebuild it. */
    providerConfig(ports, name) {
      if (kind === 'docker') {
        // The container has no network: the mock model on the host's loopback is its one way out.
        const allowedHosts = [new URL(suite.world.mock.url).host];
        return { docker: { image, host: dockerHost, namePrefix: containerPrefix, ports, allowedHosts, env: suite.world.env, memory: '2g', ...(name ? { name } : {}) } };
      }
      const home = join(scratch, 'home');
      mkdirSync(home, { recursive: true });
      // Run as root, each sandbox's commands run as a user of its own, who can write only in its
      // folder: the sandbox's own HOME then (a HOME shared by the sessions would be no one's).
      const shared = process.getuid?.() === 0 ? {} : { HOME: home };
      const env = { ...suite.world.env, ...shared, PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin' };
      return { local: { root: join(scratch, 'sandboxes'), ports, env, ...(name ? { name } : {}) } };
    },
    provider(ports, name) {
      const config = suite.providerConfig(ports, name);
      return config.docker ? dockerSandbox(config.docker) : localSandbox(config.local);
    },
    /** A manager with a sandbox per session; `path` for a SQLite file, `port` for the bridge's. */
    async manager({ path, port } = {}) {
      const bridgePort = port ?? (await freePort());
      const agent = suite.world.agent();
      const errors = [];
      const sessions = createSessionManager({
        agent: () => agent,
        sandboxes: sandboxPerSession({ provider: suite.provider([bridgePort]) }),
        ...(path ? { store: createSqliteSessionStore({ path }) } : {}),
        onError: (error, context) => errors.push({ error, ...context }),
      });
      managers.push(sessions);
      return { sessions, errors, bridgePort };
    },
    /** A manager whose sessions share one sandbox, each with one of `ports`. */
    async sharedManager(ports) {
      const agent = suite.world.agent();
      const sessions = createSessionManager({
        agent: () => agent,
        sandboxes: sharedSandbox({ open: suite.provider(ports, suite.fresh('shared')), ports }),
        onError: () => {},
      });
      managers.push(sessions);
      return { sessions };
    },
    /** Creates session `id` and waits until it is `idle`. */
    async ready(sessions, id) {
      await sessions.create({ id, metadata: {} });
      await until(async () => (await sessions.get(id))?.status !== 'preparing', 240_000, `${id} to start`);
      const session = await sessions.get(id);
      assert.equal(session.status, 'idle', `the session started: ${session.error ?? ''}`);
    },
    /** Runs support/claude-code-child.mjs: a new process sends `prompt` to `id` on the SQLite file `path`. */
    async inNewProcess({ path, id, port, prompt }) {
      const config = { path, id, prompt, mockUrl: suite.world.mock.url, ...suite.providerConfig([port]) };
      // Asynchronously: the mock answers from this process's event loop.
      const { stdout } = await execFileAsync(process.execPath, [fileURLToPath(new URL('./claude-code-child.mjs', import.meta.url)), JSON.stringify(config)], {
        encoding: 'utf8',
        timeout: 240_000,
        env: { ...process.env, HARNESS_SESSIONS_TEST: '1' },
      });
      return JSON.parse(stdout.trim().split('\n').at(-1));
    },
    test(name, fn) {
      test(name, { skip, timeout: 300_000 }, () => fn(suite));
    },
  };
  before(async () => {
    if (kind === 'local' && skip === false) await seedLocalBootstrap();
    suite.world = await startClaudeCodeWorld();
  });
  after(async () => {
    await Promise.allSettled(managers.map((m) => m.shutdown()));
    if (kind === 'docker' && skip === false) await removeContainers(containerPrefix).catch(() => {});
    await suite.world?.close();
    rmSync(scratch, { recursive: true, force: true });
  });
  return suite;
}
