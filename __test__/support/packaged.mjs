// The package as a user gets it: the tarballs of `npm run pack` (the main package and
// harness-sessions-linux-x64-gnu with the release addon), installed into fresh apps in temporary
// folders outside the repository, their other dependencies from the npm registry, by the npm of
// Node 22 (the Node the README tells users to run).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { bunBinary, cache, nodeBinary as fetchNode } from '../../scripts/lib.mjs';
import { packTarballs } from '../../scripts/packaging.mjs';

export { bunBinary };

/** A Node binary of `major`: the machine's when it is that one, else from the npm registry. */
export function nodeBinary(major) {
  return process.versions.node.split('.')[0] === String(major) ? process.execPath : fetchNode(major);
}

/** The npm the machine has, run by another Node (npm checks engines against the Node running it). */
export const npmCli = (() => {
  const beside = join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js');
  if (existsSync(beside)) return beside;
  const which = spawnSync('bash', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim();
  return realpathSync(which);
})();

let tarballs;
/** The tarballs, packed once per test file (the release addon is built only when the sources changed). */
export function packed() {
  tarballs ??= packTarballs(join(cache, 'pack-tests'));
  return tarballs;
}

/** Runs `command`, its output captured; throws with that output when it fails. */
export function runIn(cwd, command, args, { env = {}, timeout = 600_000, allowFailure = false } = {}) {
  const result = spawnSync(command, args, {
    cwd,
    encoding: 'utf8',
    timeout,
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1', ...env },
  });
  const output = `${result.stdout ?? ''}${result.stderr ?? ''}`;
  if (!allowFailure && result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} (in ${cwd}) failed (${result.status ?? result.signal}):\n${output.slice(-6000)}`);
  }
  return { status: result.status, stdout: result.stdout ?? '', stderr: result.stderr ?? '', output };
}

/**
 * A new app in a temporary folder: `npm init -y`, then `npm install` of `specs` (tarball paths,
 * registry names) with Node 22's npm. Returns `{ dir, output }`, the install's output included.
 */
export function freshApp(prefix, specs, { node = nodeBinary(22) } = {}) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'fresh-app', version: '1.0.0', private: true }, null, 2)}\n`);
  const { output } = runIn(dir, node, [npmCli, 'install', '--no-audit', '--no-fund', ...specs]);
  return { dir, output };
}

/** The lines of an install's output that are engine warnings. */
export function engineWarnings(output) {
  return output.split('\n').filter((line) => line.includes('EBADENGINE'));
}

/** The README's usage block (the first ```ts block under "## Usage"). */
export function readmeUsage() {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const section = readme.slice(readme.indexOf('## Usage'));
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  if (match === null) throw new Error('README.md has no ```ts block under ## Usage');
  return match[1];
}

/** A free TCP port on 127.0.0.1. */
export async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Starts `command` in the background, its output kept; `stop()` ends it and waits for its exit. */
export function background(cwd, command, args, env = {}) {
  const child = spawn(command, args, { cwd, env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (data) => (output += data));
  child.stderr.on('data', (data) => (output += data));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return {
    child,
    output: () => output,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}
