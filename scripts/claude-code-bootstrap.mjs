// The cache of Claude Code's bootstrap. `@ai-sdk/harness-claude-code` installs its bridge (the
// Claude Agent SDK and the Claude Code CLI, about 300 MB from the npm registry with pnpm) into
// `/tmp/harness/claude-code` of each sandbox the first time a session starts there, and marks it
// done with `.bootstrap-<identity>.ok`, the identity being a hash of the harness's recipe
// (`HarnessAgent` skips a bootstrap whose marker is there).
//
// This module installs that folder once under `.cache/claude-code/` (pnpm's store under
// `.cache/claude-code/pnpm-store`, so a second install downloads nothing), and lays it out with its
// marker where a sandbox finds it:
//
// - `prepareClaudeCodeBootstrap()`: the installed folder in the cache (made when missing), and
//   the marker's name;
// - `seedLocalBootstrap(dir)`: a copy of it in `dir` (default `/tmp/harness/claude-code`, where a
//   localSandbox's bootstrap lands on this host), unless a bootstrap is already marked done there;
// - the Docker image script bakes the same folder into `harness-sessions-claude-code:latest`.
//
// When the recipe or the hashing of `@ai-sdk/harness` changes, the marker no longer matches and the
// harness bootstraps as it would without this cache: slower, never wrong.
//
//   node scripts/claude-code-bootstrap.mjs prepare   # prints `dir=<folder>` and `marker=<name>`
//   node scripts/claude-code-bootstrap.mjs seed [dir]
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cache, root } from './lib.mjs';

/** The version of pnpm that installs the bridge here (the harness leaves it to the sandbox). */
export const PNPM_VERSION = '10.34.9';
/** Where the harness bootstraps in every sandbox. */
export const BOOTSTRAP_DIR = '/tmp/harness/claude-code';

/** The harness's recipe, as `HarnessAgent` gets it, and its identity (the marker's hash). */
export async function claudeCodeRecipe() {
  const { createClaudeCode } = await import(pathToFileURL(join(root, 'node_modules/@ai-sdk/harness-claude-code/dist/index.js')).href);
  const recipe = await createClaudeCode().getBootstrap();
  return { recipe, identity: recipeIdentity(recipe), marker: `.bootstrap-${recipeIdentity(recipe)}.ok` };
}

/**
 * The identity `HarnessAgent` (`@ai-sdk/harness` 1.0.122, `hashHarnessBootstrap`) gives a recipe:
 * the first 8 bytes of a SHA-256 over its fields, each followed by a NUL.
 */
export function recipeIdentity(recipe) {
  const hash = createHash('sha256');
  const push = (value) => hash.update(value, 'utf8').update('\0');
  push(recipe.harnessId);
  push(recipe.bootstrapDir);
  for (const file of [...recipe.files].sort((a, b) => a.path.localeCompare(b.path))) {
    push(file.path);
    push(file.content);
  }
  push(JSON.stringify(recipe.commands));
  push('1');
  return hash.digest('hex').slice(0, 16);
}

/** The path of pnpm's CLI (a JavaScript file) from the npm registry, fetched once. */
export function pnpmCli() {
  const prefix = join(cache, 'pnpm');
  const cli = join(prefix, 'node_modules', 'pnpm', 'bin', 'pnpm.cjs');
  if (!existsSync(cli)) {
    mkdirSync(prefix, { recursive: true });
    exec('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', prefix, `pnpm@${PNPM_VERSION}`]);
  }
  return cli;
}

/**
 * The bootstrap folder installed in the cache, made when missing: `{ dir, marker, identity,
 * installed }` (`installed`: whether this call installed it).
 */
export async function prepareClaudeCodeBootstrap({ log = () => {} } = {}) {
  const { recipe, identity, marker } = await claudeCodeRecipe();
  const dir = join(cache, 'claude-code', `bootstrap-${identity}`);
  if (existsSync(join(dir, marker))) return { dir, marker, identity, installed: false };
  const started = Date.now();
  log(`installing Claude Code's bootstrap into ${dir} (pnpm store .cache/claude-code/pnpm-store)`);
  const work = `${dir}.tmp-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(work, { recursive: true });
  for (const file of recipe.files) writeFileSync(join(work, file.path.slice(recipe.bootstrapDir.length + 1)), file.content);
  const store = join(cache, 'claude-code', 'pnpm-store');
  exec(process.execPath, [pnpmCli(), '--dir', work, 'install', '--frozen-lockfile', '--store-dir', store, '--reporter', 'silent']);
  const installer = join(work, 'node_modules/@anthropic-ai/claude-code/install.cjs');
  if (existsSync(installer)) exec(process.execPath, [installer], { cwd: work });
  exec(join(work, 'node_modules/.bin/claude'), ['--version'], { cwd: work });
  writeFileSync(join(work, marker), '');
  rmSync(dir, { recursive: true, force: true });
  renameSync(work, dir);
  log(`installed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return { dir, marker, identity, installed: true };
}

/**
 * Copies the cached bootstrap into `target` (default `/tmp/harness/claude-code`) unless a bootstrap
 * of the same identity is already marked done there. Resolves to `'present'` or `'seeded'`.
 */
export async function seedLocalBootstrap(target = BOOTSTRAP_DIR, options = {}) {
  const { marker } = await claudeCodeRecipe();
  if (existsSync(join(target, marker))) return 'present';
  const { dir } = await prepareClaudeCodeBootstrap(options);
  const work = `${target}.seed-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(join(work, '..'), { recursive: true });
  // The store stays in the cache: the installed tree's files are hard links or copies of it.
  cpSync(dir, work, { recursive: true, verbatimSymlinks: true });
  if (existsSync(join(target, marker))) {
    rmSync(work, { recursive: true, force: true });
    return 'present';
  }
  rmSync(target, { recursive: true, force: true });
  renameSync(work, target);
  return 'seeded';
}

/** Runs a command, its output on stderr: stdout is this script's answer (`dir=`, `marker=`). */
function exec(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: ['ignore', 2, 2], ...options });
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.status ?? result.signal})`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const [command = 'prepare', target] = process.argv.slice(2);
  const log = (line) => console.error(`claude-code-bootstrap: ${line}`);
  if (command === 'prepare') {
    const { dir, marker, identity } = await prepareClaudeCodeBootstrap({ log });
    console.log(`dir=${dir}\nmarker=${marker}\nidentity=${identity}`);
  } else if (command === 'seed') {
    console.log(await seedLocalBootstrap(target, { log }));
  } else {
    console.error('usage: node scripts/claude-code-bootstrap.mjs prepare | seed [dir]');
    process.exit(2);
  }
}
