// `npm run bench`: the figures of harness-sessions, each beside its baseline measured in the same
// run (interleaved, repeated; medians, p95/p99, ratios), against the RELEASE addon.
//
// 1. builds the release addon (`buildAddon({ release: true })`; skip with `--no-build`);
// 2. copies the package as built (index.js, js/, testing/, binding.js, and the release library
//    from Cargo's target folder) into .cache/bench/package: the figures load that copy, so that a
//    rebuild of the working tree by someone else mid-run cannot swap the addon under them;
// 3. runs each figure (bench/<figure>.mjs) in a Node process of its own, with --expose-gc;
// 4. prints the table, and writes bench/results/latest.json (with the machine), latest.md (the
//    table for docs/performance.md) and ratios.svg (the main ratios).
//
// Options: --quick (few repetitions: a smoke run), --only <figure>[,<figure>...] (the results of
// the other figures are kept from the last latest.json), --soak (adds the soak, 2 minutes; with
// --soak-seconds <n> for another length), --no-build. Figures: stream, first-chunk, reconnect, list,
// store-writes, many-sessions, suspended-memory, startup, docker, claude-code, soak; and `engine`:
// the engine's measurement tests (`#[ignore]`d, so that `cargo test` does not run them: the SQLite
// store's saves and lists), run last in the release profile, their output printed (not tabled).
import { randomUUID } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { buildAddon, ensureDependencies, root, TARGET } from './lib.mjs';
import { machineInfo, textTable, writeResults } from '../bench/report.mjs';

const FIGURES = ['stream', 'first-chunk', 'reconnect', 'list', 'store-writes', 'many-sessions', 'suspended-memory', 'startup', 'docker', 'claude-code', 'soak'];

/** The engine's measurement tests: not a figure of the table, their output is printed. */
const ENGINE = 'engine';

function parseArgs(argv) {
  const options = { quick: false, only: undefined, soak: false, build: true, soakSeconds: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--quick') options.quick = true;
    else if (arg === '--soak') options.soak = true;
    else if (arg === '--no-build') options.build = false;
    else if (arg === '--only') options.only = argv[++i]?.split(',').filter(Boolean);
    else if (arg.startsWith('--only=')) options.only = arg.slice(7).split(',').filter(Boolean);
    else if (arg === '--soak-seconds') options.soakSeconds = Number(argv[++i]);
    else throw new Error(`unknown option ${arg}; options: --quick, --only <figure,...>, --soak, --soak-seconds <n>, --no-build`);
  }
  for (const name of options.only ?? []) {
    if (!FIGURES.includes(name) && name !== ENGINE) throw new Error(`no figure ${name}; figures: ${FIGURES.join(', ')}`);
  }
  return options;
}

/** The release library Cargo built for the addon, and where it came from. */
function releaseLibrary() {
  const targetDir = process.env.CARGO_TARGET_DIR ?? join(root, 'target');
  const library = join(targetDir, TARGET, 'release', 'libharness_sessions.so');
  if (!existsSync(library)) {
    throw new Error(`no release build at ${library}: run without --no-build (with the same CARGO_TARGET_DIR)`);
  }
  return library;
}

/** Copies the package, with the release library as its addon, to a folder of the benchmark's own. */
function snapshotPackage() {
  const library = releaseLibrary();
  const dir = join(root, '.cache', 'bench', 'package');
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const file of ['index.js', 'index.d.ts', 'binding.js', 'binding.d.ts', 'package.json']) copyFileSync(join(root, file), join(dir, file));
  for (const folder of ['js', 'testing']) cpSync(join(root, folder), join(dir, folder), { recursive: true });
  copyFileSync(library, join(dir, 'harness-sessions.linux-x64-gnu.node'));
  return { dir, library, libraryBuiltAt: statSync(library).mtime.toISOString(), librarySize: statSync(library).size };
}

function runFigure(name, options, packageDir) {
  const file = join(tmpdir(), `harness-sessions-bench-${process.pid}-${randomUUID()}.json`);
  const args = ['--expose-gc', join(root, 'bench', 'child.mjs'), name];
  if (options.quick) args.push('--quick');
  const started = Date.now();
  const result = spawnSync(process.execPath, args, {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...process.env,
      HARNESS_SESSIONS_BENCH_PACKAGE: packageDir,
      BENCH_RESULT_FILE: file,
      ...(options.soakSeconds ? { BENCH_SOAK_SECONDS: String(options.soakSeconds) } : {}),
    },
  });
  const seconds = (Date.now() - started) / 1000;
  if (result.status !== 0 || !existsSync(file)) {
    return { name, title: name, seconds, failed: `exited with ${result.status ?? result.signal}`, rows: [{ id: name, label: name, skipped: `the figure failed (${result.status ?? result.signal}); see its output above` }] };
  }
  const figure = JSON.parse(readFileSync(file, 'utf8'));
  rmSync(file, { force: true });
  return { name, ...figure, seconds, measuredAt: new Date().toISOString() };
}

const options = parseArgs(process.argv.slice(2));
const started = Date.now();
ensureDependencies();
if (options.build) buildAddon({ release: true });
const snapshot = snapshotPackage();
console.log(`\nbenchmarking the release addon ${snapshot.library} (built ${snapshot.libraryBuiltAt}), copied to ${snapshot.dir}`);

const measureEngine = options.only === undefined || options.only.includes(ENGINE);
const selected = FIGURES.filter((name) => (options.only ? options.only.includes(name) : name !== 'soak' || options.soak));
const figures = [];
for (const name of selected) {
  console.log(`\n── ${name} ${'─'.repeat(Math.max(0, 60 - name.length))}`);
  const figure = runFigure(name, options, snapshot.dir);
  figures.push(figure);
  console.log(`  (${figure.seconds.toFixed(1)} s)`);
}

// With --only, the other figures of the last run are kept, each with the date it was measured.
const resultsDir = join(root, 'bench', 'results');
let kept = [];
if (options.only && existsSync(join(resultsDir, 'latest.json'))) {
  try {
    const previous = JSON.parse(readFileSync(join(resultsDir, 'latest.json'), 'utf8'));
    kept = (previous.figures ?? []).filter((figure) => !selected.includes(figure.name));
  } catch {}
}
const ordered = [...kept, ...figures].sort((a, b) => FIGURES.indexOf(a.name) - FIGURES.indexOf(b.name));
const results = {
  machine: machineInfo(root),
  addon: { profile: 'release', library: snapshot.library, builtAt: snapshot.libraryBuiltAt, bytes: snapshot.librarySize },
  quick: options.quick,
  only: options.only,
  seconds: (Date.now() - started) / 1000,
  figures: ordered,
};
console.log(`\n${textTable(results)}\n`);
const files = writeResults(resultsDir, results);
console.log(`written: ${Object.values(files).join(', ')} (${results.seconds.toFixed(0)} s)`);

if (measureEngine) {
  console.log(`\n── ${ENGINE} (the engine's measurement tests, release profile) ${'─'.repeat(10)}`);
  const engine = spawnSync(
    'cargo',
    ['test', '--release', '--target', TARGET, '--no-default-features', '--lib', 'measure_', '--', '--ignored', '--nocapture', '--test-threads=1'],
    { cwd: root, stdio: 'inherit' },
  );
  if (engine.status !== 0) {
    console.error(`the engine's measurement tests failed (${engine.status ?? engine.signal})`);
    process.exitCode = 1;
  }
}
