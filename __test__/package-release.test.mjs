// The release's bookkeeping: the workflow (.github/workflows/release.yml) builds and tests every
// target of package.json's napi.targets and no other, each has its npm/<platform> package in step
// with the main one (scripts/version.mjs --check), and the README says which of them this
// project's machines build and run.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { manifest, optionalDependencies, platformOf, platformPackages, versionProblems } from '../scripts/packaging.mjs';
import { runIn } from './support/packaged.mjs';

const ROOT = new URL('..', import.meta.url).pathname;
const workflow = readFileSync(join(ROOT, '.github', 'workflows', 'release.yml'), 'utf8');

/** The `target:` values of one job of the workflow (its text up to the next job). */
function targetsOfJob(job) {
  const start = workflow.indexOf(`\n  ${job}:\n`);
  assert.notEqual(start, -1, `the workflow has a ${job} job`);
  const rest = workflow.slice(start + 1);
  const next = rest.slice(1).search(/\n {2}[a-z-]+:\n/);
  const text = next === -1 ? rest : rest.slice(0, next + 1);
  return [...text.matchAll(/^\s+target: (\S+)$/gm)].map((match) => match[1]);
}

describe('the release workflow and package.json agree', () => {
  const targets = manifest().napi.targets;

  test('the build matrix is napi.targets: linux x64/arm64 gnu and musl, macOS x64/arm64, Windows x64', () => {
    assert.deepEqual([...targetsOfJob('build')].sort(), [...targets].sort());
    assert.deepEqual(targets.map(platformOf).sort(), [
      'darwin-arm64',
      'darwin-x64',
      'linux-arm64-gnu',
      'linux-arm64-musl',
      'linux-x64-gnu',
      'linux-x64-musl',
      'win32-x64-msvc',
    ]);
  });

  test('each build is tested on Node 22 and 24', () => {
    assert.deepEqual([...targetsOfJob('test')].sort(), [...targets].sort());
    const test = workflow.slice(workflow.indexOf('\n  test:\n'), workflow.indexOf('\n  publish:\n'));
    assert.match(test, /node:\n\s+- '22'\n\s+- '24'\n/);
    assert.match(test, /needs: build/);
  });

  test('each build line builds its own target; publishing follows the tests', () => {
    for (const [, target, build] of workflow.matchAll(/target: (\S+)\n\s+build: (.+)/g)) {
      assert.ok(build.includes(`--target ${target}`), `${target}: ${build}`);
      assert.ok(build.includes('--release'), `${target}: ${build}`);
    }
    const publish = workflow.slice(workflow.indexOf('\n  publish:\n'));
    assert.match(publish, /needs: test/);
    assert.match(publish, /napi artifacts/);
    assert.match(publish, /npm publish/);
    assert.equal(manifest().scripts.prepublishOnly, 'napi prepublish -t npm');
  });

  test('each target has its npm/<platform> package, in step with the main package', () => {
    assert.deepEqual(versionProblems(), []);
    runIn(ROOT, process.execPath, ['scripts/version.mjs', '--check']);
    assert.deepEqual(Object.keys(optionalDependencies()).sort(), platformPackages().map(({ name }) => name).sort());
  });

  test('a package out of step is reported', () => {
    const pkg = manifest();
    const problems = versionProblems({ ...pkg, version: '9.9.9' });
    assert.equal(problems.length, targets.length + 2, problems.join('\n'));
    assert.match(problems[0], /is at .*, not 9\.9\.9/);
    const extra = versionProblems({ ...pkg, napi: { ...pkg.napi, targets: targets.slice(1) } });
    assert.ok(extra.some((problem) => /is no target/.test(problem)), extra.join('\n'));
  });

  test('npm run pack, typed as the README gives it, writes the two tarballs (the prepack guard lets it through)', () => {
    const destination = mkdtempSync(join(tmpdir(), 'harness-sessions-npm-run-pack-'));
    try {
      // npm runs the `prepack` script as the pre-hook of the `pack` script: the guard must let it by.
      const { output } = runIn(ROOT, 'npm', ['run', 'pack', '--', destination]);
      assert.match(output, /> harness-sessions@[^ ]+ prepack/, output);
      assert.doesNotMatch(output, /would install without its native addon/, output);
      const version = manifest().version;
      assert.deepEqual(readdirSync(destination).sort(), [`harness-sessions-${version}.tgz`, `harness-sessions-linux-x64-gnu-${version}.tgz`]);
    } finally {
      rmSync(destination, { recursive: true, force: true });
    }
  });

  test('a plain npm pack of the repository is refused: it would give a package without its addon', () => {
    const { status, output } = runIn(ROOT, 'npm', ['pack', '--dry-run'], { allowFailure: true });
    assert.notEqual(status, 0, output);
    assert.match(output, /Run `npm run pack`: it writes the installable tarballs into pack\//);
  });

  test('the README says that only linux-x64-gnu is built and run here', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    assert.match(readme, /only\s+`?linux-x64-gnu`?\s+is\s+built\s+and\s+run/i);
  });
});
