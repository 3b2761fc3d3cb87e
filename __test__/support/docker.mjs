// The Docker Engine the tests use, when there is one: found from DOCKER_HOST or the daemon of
// scripts/docker/start.sh, with the test image of scripts/docker/build-test-image.sh. With
// HARNESS_SESSIONS_REQUIRE_DOCKER=1 (CI) a missing engine is a failing test, never a skip.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { fileURLToPath } from 'node:url';

export const image = process.env.HARNESS_SESSIONS_TEST_IMAGE ?? 'harness-sessions-test:busybox';
const localSocket = fileURLToPath(new URL('../../.cache/docker/docker.sock', import.meta.url));
export const dockerHost = process.env.DOCKER_HOST ?? (existsSync(localSocket) ? `unix://${localSocket}` : undefined);
const required = process.env.HARNESS_SESSIONS_REQUIRE_DOCKER === '1';

/** GET `path` on the engine: its status, or an error. */
export function engine(path) {
  return new Promise((resolve, reject) => {
    if (dockerHost === undefined || !dockerHost.startsWith('unix://')) {
      reject(new Error(`no unix Docker endpoint (DOCKER_HOST=${dockerHost ?? 'unset'})`));
      return;
    }
    const req = request({ socketPath: dockerHost.slice('unix://'.length), path, timeout: 3000 }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

async function findProblem() {
  try {
    if ((await engine('/_ping')) !== 200) return 'the Docker Engine does not answer';
    if ((await engine(`/images/${encodeURIComponent(image)}/json`)) !== 200) {
      return `the test image ${image} is missing: run scripts/docker/build-test-image.sh`;
    }
    return undefined;
  } catch (error) {
    return `no Docker Engine: ${error.message}`;
  }
}

/** Why the Docker tests cannot run here, or `undefined` when they can. */
export const dockerProblem = await findProblem();

/**
 * The `skip` option of the Docker tests of a file: `false` when Docker is here; a reason to skip
 * when it is not and not required; when it is required, a failing test is registered with `test`.
 */
export function dockerSkipFor(test) {
  if (dockerProblem === undefined) return false;
  if (required) {
    test('Docker is required (HARNESS_SESSIONS_REQUIRE_DOCKER=1)', () => assert.fail(dockerProblem));
    return false;
  }
  return `skipped: ${dockerProblem}`;
}

/** Removes every container whose name starts with `prefix` (what a test file left): how many. */
export async function removeContainers(prefix) {
  const call = (method, path) =>
    new Promise((resolve, reject) => {
      const req = request({ socketPath: dockerHost.slice('unix://'.length), path, method, timeout: 30_000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (data) => (body += data));
        res.on('end', () => resolve(body));
      });
      req.on('error', reject);
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.end();
    });
  // No engine (its socket is not there): nothing to remove.
  if (dockerHost === undefined || !dockerHost.startsWith('unix://') || !existsSync(dockerHost.slice('unix://'.length))) return 0;
  const filters = encodeURIComponent(JSON.stringify({ name: [prefix] }));
  const containers = JSON.parse(await call('GET', `/containers/json?all=1&filters=${filters}`));
  let removed = 0;
  for (const container of containers) {
    if (!container.Names.some((name) => name.replace(/^\//, '').startsWith(prefix))) continue;
    await call('DELETE', `/containers/${container.Id}?force=1&v=1`);
    removed++;
  }
  return removed;
}
