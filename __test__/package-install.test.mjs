// The installable package, tried as a new user would: `npm run pack`'s tarballs installed into a
// fresh app outside the repository (the other dependencies, `ai` and `@ai-sdk/harness` at their
// latest versions, from the registry), then
// - the tarballs: no binary in the main package, which lists every platform package in its
//   optionalDependencies; the release addon (not the tests' debug one) in linux-x64-gnu's;
// - the install prints no engine warning on Node 22, the Node the README asks for;
// - the README's usage, as written, run as a script on Node 20, 22, 24 and Bun: relative paths
//   against the working directory, nothing created before the first use, the SQLite file's folder
//   created (0700), a turn streamed and read back with `ai`'s own transport and reader;
// - a consumer file type-checks against the fresh `ai` and `@ai-sdk/harness` (two copies of `ai`:
//   the app's and the one `@ai-sdk/harness` pins), `skipLibCheck: false` for our declarations;
// - the main tarball installed alone: loading it names the missing package and how to get it.
//
// Cost (2 cores): about 1 minute on a warm cache (release addon built, npm cache filled); cold,
// add the release build of the addon (about 5 minutes) and the downloads.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import ts from 'typescript';
import { platformPackages, releaseDir } from '../scripts/packaging.mjs';
import { bunBinary, engineWarnings, freshApp, nodeBinary, packed, readmeUsage, runIn } from './support/packaged.mjs';

const ROOT = new URL('..', import.meta.url).pathname;
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
const PLATFORM = `${pkg.name}-linux-x64-gnu`;
const sha = (path) => createHash('sha256').update(readFileSync(path)).digest('hex');

let tarballs;
let app;
before(() => {
  tarballs = packed();
  app = freshApp('hs-fresh-app-', [tarballs.main, tarballs.platform, 'ai@latest', '@ai-sdk/harness@latest', 'typescript@latest', '@types/node@latest']);
});
after(() => {
  if (app !== undefined) rmSync(app.dir, { recursive: true, force: true });
});

describe('the tarballs', () => {
  test('the main package has no binary and lists every platform package, at its version, in optionalDependencies', () => {
    const files = runIn(ROOT, 'tar', ['-tzf', tarballs.main]).stdout.split('\n');
    assert.ok(files.includes('package/index.js') && files.includes('package/binding.js') && files.includes('package/testing/index.mjs'), files.join(' '));
    assert.deepEqual(files.filter((file) => file.endsWith('.node')), []);
    const manifest = JSON.parse(runIn(ROOT, 'tar', ['-xzOf', tarballs.main, 'package/package.json']).stdout);
    assert.deepEqual(
      manifest.optionalDependencies,
      Object.fromEntries(platformPackages(pkg).map(({ name }) => [name, pkg.version])),
    );
    assert.equal(manifest.scripts, undefined, 'the repository scripts stay out of the package');
    assert.deepEqual(manifest.engines, pkg.engines);
    const platformManifest = JSON.parse(runIn(ROOT, 'tar', ['-xzOf', tarballs.platform, 'package/package.json']).stdout);
    assert.deepEqual(platformManifest.engines, { node: '>= 20' }, 'npm on Node 20 skips an optional package it does not fit');
  });

  test('the linux-x64-gnu package holds the release addon, not the debug one the tests build', () => {
    const files = runIn(ROOT, 'tar', ['-tzf', tarballs.platform]).stdout.split('\n').filter(Boolean).sort();
    assert.deepEqual(files, ['package/README.md', `package/harness-sessions.linux-x64-gnu.node`, 'package/package.json']);
    const installed = join(app.dir, 'node_modules', PLATFORM, 'harness-sessions.linux-x64-gnu.node');
    assert.equal(sha(installed), sha(join(releaseDir, 'harness-sessions.linux-x64-gnu.node')));
    const debug = join(ROOT, 'harness-sessions.linux-x64-gnu.node');
    if (existsSync(debug)) assert.notEqual(sha(installed), sha(debug), 'the debug addon was packed');
  });
});

describe('a fresh app', () => {
  test('installs with no engine warning on Node 22', () => {
    assert.deepEqual(engineWarnings(app.output), []);
    const installed = (name) => JSON.parse(readFileSync(join(app.dir, 'node_modules', name, 'package.json'), 'utf8')).version;
    assert.equal(installed('harness-sessions'), pkg.version);
    assert.equal(installed(PLATFORM), pkg.version);
    console.log(`# fresh app: ai ${installed('ai')}, @ai-sdk/harness ${installed('@ai-sdk/harness')}, typescript ${installed('typescript')}`);
  });

  const runtimes = [
    ['Node 20', () => nodeBinary(20)],
    ['Node 22', () => nodeBinary(22)],
    ['Node 24', () => nodeBinary(24)],
    ['Bun', () => bunBinary()],
  ];
  for (const [name, binary] of runtimes) {
    test(`runs the README's usage as written on ${name}`, () => {
      const script = join(app.dir, 'readme-usage.mjs');
      if (!existsSync(script)) writeFileSync(script, usageScript());
      // Its own working directory: the README's relative paths land there.
      const cwd = join(app.dir, `run-${name.replace(' ', '').toLowerCase()}`);
      mkdirSync(cwd);
      const { stdout, output } = runIn(cwd, binary(), [script], { timeout: 120_000 });
      const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
      assert.ok(line, output);
      const result = JSON.parse(line.slice('RESULT '.length));
      assert.equal(result.createdBeforeUse, false, 'nothing is created before the first use of the manager');
      assert.match(result.text, /hello from the README/);
      assert.equal(result.status, 'idle');
      assert.equal(result.owner, 'readme-user', 'the session keeps its owner in its metadata');
      assert.deepEqual(result.otherOwner, { stream: 403, stop: 403, post: 403 }, 'another user is refused by every route');
      assert.equal(result.addon.includes(`node_modules/${PLATFORM}/`), true, `the addon came from ${result.addon}`);
      // As root, the README's localSandbox (its root below this folder) makes the folders above
      // its root searchable (o+x, not listable) for its sandboxes' own users: README, localSandbox.
      const dataMode = process.getuid?.() === 0 ? 0o701 : 0o700;
      assert.equal(result.modes.data, dataMode, `the SQLite file's missing folder is created 0700 (${dataMode.toString(8)} as root)`);
      assert.equal(result.modes.db, 0o600);
      assert.ok(existsSync(join(cwd, 'data', 'sandbox')), 'the relative sandbox root is the working directory\'s');
    });
  }

  test('a consumer file type-checks with the fresh ai and @ai-sdk/harness, our declarations checked', () => {
    const copies = ['ai', '@ai-sdk/harness/node_modules/ai'].filter((path) => existsSync(join(app.dir, 'node_modules', path, 'package.json')));
    console.log(`# copies of ai in the fresh app: ${copies.length}`);
    writeFileSync(
      join(app.dir, 'consumer.ts'),
      `import type { HarnessV1 } from '@ai-sdk/harness';\ndeclare const harness: HarnessV1;\ndeclare function currentUser(request: Request): Promise<string>;\n${readmeUsage()}\n${CONSUMER_EXTRA}`,
    );
    writeFileSync(
      join(app.dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', lib: ['ES2022', 'DOM'], types: ['node'], skipLibCheck: false },
        files: ['consumer.ts'],
      }),
    );
    const { output } = runIn(app.dir, nodeBinary(22), [join(app.dir, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.', '--pretty', 'false'], { allowFailure: true });
    const errors = output.split('\n').filter((line) => /error TS\d+/.test(line));
    const ours = errors.filter((line) => !line.startsWith('node_modules/') || line.startsWith(`node_modules/${pkg.name}/`));
    for (const line of errors.filter((l) => !ours.includes(l))) console.log(`# upstream (not ours): ${line}`);
    assert.deepEqual(ours, [], output);
  });
});

test('the main tarball alone: loading it names the missing platform package and how to get it', () => {
  const alone = freshApp('hs-alone-', [tarballs.main]);
  try {
    assert.equal(existsSync(join(alone.dir, 'node_modules', PLATFORM)), false);
    const { status, stderr } = runIn(alone.dir, process.execPath, ['-e', "require('harness-sessions')"], { allowFailure: true });
    assert.notEqual(status, 0);
    const message = stderr.split('\n').find((line) => line.startsWith('Error: '));
    assert.ok(message, stderr);
    assert.match(message, new RegExp(`the package ${PLATFORM} is not installed`));
    assert.ok(message.includes(`npm install ${PLATFORM}@${pkg.version}`), message);
    assert.doesNotMatch(message, /npm has a bug/);
  } finally {
    rmSync(alone.dir, { recursive: true, force: true });
  }
});

/** What the consumer file adds to the README's usage: the test doubles' types, on the fresh `ai`. */
const CONSUMER_EXTRA = `
import { createFakeAgent, createScriptedHarness } from 'harness-sessions/testing';
import { HarnessAgent as Agent } from '@ai-sdk/harness/agent';
import type { UIMessageChunk } from 'ai';

export const fake = createSessionManager({ agent: () => createFakeAgent(), sandboxes: sharedSandbox({ open: localSandbox({ root: '/tmp/x' }), ports: [1] }) });
export const scripted = createSessionManager({
  agent: async () => new Agent({ harness: createScriptedHarness(), permissionMode: 'allow-reads' }),
  sandboxes: sharedSandbox({ open: localSandbox({ root: '/tmp/x' }), ports: [1] }),
});
export async function chunks(id: string): Promise<UIMessageChunk[]> {
  const turn = await fake.send(id, { message: 'hi' });
  const out: UIMessageChunk[] = [];
  for await (const chunk of turn.stream) out.push(chunk);
  return out;
}
`;

/** The README's usage, compiled to JavaScript as it stands, with a harness and a driver around it. */
function usageScript() {
  const usage = ts.transpileModule(readmeUsage(), {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false },
  }).outputText;
  return `// The README's usage, as written; \`harness\` is the model-free scripted one, \`currentUser\`
// the app's authentication: here a header of the driver's requests.
import { createScriptedHarness } from 'harness-sessions/testing';
const harness = createScriptedHarness();
const currentUser = async (request) => request.headers.get('x-test-user') ?? 'readme-user';
${usage}
// ─── The driver: one turn through the route, read with ai's transport and reader ───
import { existsSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { DefaultChatTransport, readUIMessageStream } from 'ai';

const createdBeforeUse = existsSync('data');
const transport = new DefaultChatTransport({ api: 'http://app.test/api/chat', fetch: async (url, init) => POST(new Request(url, init)) });
const stream = await transport.sendMessages({
  trigger: 'submit-message',
  chatId: 'readme',
  messageId: undefined,
  abortSignal: undefined,
  messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hello from the README' }] }],
});
let last;
for await (const message of readUIMessageStream({ stream })) last = message;
const session = await sessions.get('readme');
const require = createRequire(import.meta.url);
const addon = Object.keys(require.cache).find((path) => path.endsWith('.node')) ?? require.resolve('${PLATFORM}');
// Another user: every route refuses the session.
const other = { 'x-test-user': 'someone-else' };
const params = { params: Promise.resolve({ id: 'readme' }) };
const otherOwner = {
  stream: (await GET(new Request('http://app.test/api/chat/readme/stream', { headers: other }), params)).status,
  stop: (await stop(new Request('http://app.test/api/sessions/readme/interrupt', { method: 'POST', headers: other }), params)).status,
  post: (await POST(new Request('http://app.test/api/chat', { method: 'POST', headers: { ...other, 'content-type': 'application/json' }, body: JSON.stringify({ id: 'readme', messages: [{ id: 'm2', role: 'user', parts: [{ type: 'text', text: 'not mine' }] }] }) }))).status,
};
const result = {
  createdBeforeUse,
  owner: session.metadata.owner,
  otherOwner,
  text: last.parts.filter((part) => part.type === 'text').map((part) => part.text).join(''),
  status: session.status,
  addon,
  modes: { data: statSync('data').mode & 0o777, db: statSync('data/sessions.db').mode & 0o777 },
};
await sessions.shutdown();
console.log('RESULT ' + JSON.stringify(result));
`;
}
