// The installed package in a Next.js app, as the README sets it up: a fresh App Router app (in a
// temporary folder, Next.js 16 and React 19 from the registry, harness-sessions from `npm run
// pack`'s tarballs) whose route creates the manager at its top level, with the README's relative
// paths (`./data/sessions.db`, `./data/sandbox`), on the fake agent of `harness-sessions/testing`
// (no model), and returns `turn.toUIMessageStreamResponse()`.
// - `next build` imports the route and touches no file (no `data/`);
// - `next start` serves it, and a turn streams through `ai`'s own transport and reader;
// - the SQLite file then exists, under the server's working directory.
//
// Cost (2 cores): about 2 minutes warm (the install, `next build` about 40 s); cold, add the
// release build of the addon (about 5 minutes) and the downloads.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DefaultChatTransport, readUIMessageStream } from 'ai';
import { packTarballs } from '../scripts/packaging.mjs';
import { background, engineWarnings, freePort, freshApp, nodeBinary, npmCli, packed, runIn } from './support/packaged.mjs';

const ROOT = new URL('..', import.meta.url).pathname;

const FILES = {
  'next.config.mjs': `// harness-sessions loads a native addon: Node loads it, the bundler leaves it alone.
export default { serverExternalPackages: ['harness-sessions'] };
`,
  'app/layout.js': `export default function RootLayout({ children }) {
  return (
    <html lang="en">
      <body>{children}</body>
    </html>
  );
}
`,
  'app/page.js': `export default function Page() {
  return <p>harness-sessions</p>;
}
`,
  // The README's usage, with the fake agent for a model.
  'app/api/chat/route.js': `import { createSessionManager, createSqliteSessionStore, localSandbox, sharedSandbox } from 'harness-sessions';
import { createFakeAgent } from 'harness-sessions/testing';

const agent = createFakeAgent();

const sessions = (globalThis.sessions ??= createSessionManager({
  agent: () => agent,
  sandboxes: sharedSandbox({ open: localSandbox({ root: './data/sandbox' }), ports: [4501, 4502] }),
  store: createSqliteSessionStore({ path: './data/sessions.db' }),
  idleTimeoutMs: 10 * 60_000,
}));

export const dynamic = 'force-dynamic';

export async function POST(request) {
  const { id, messages } = await request.json();
  const message = messages.at(-1);
  if ((await sessions.get(id)) === undefined) await sessions.create({ id, metadata: { title: 'New' } });
  const turn =
    message.role === 'assistant'
      ? await sessions.continue(id, { message, abortSignal: request.signal })
      : await sessions.send(id, { message, abortSignal: request.signal });
  return turn.toUIMessageStreamResponse();
}
`,
};

let app;
let server;
before(() => {
  const { main, platform } = packed();
  app = freshApp('hs-next-app-', [main, platform, 'next@16', 'react@19', 'react-dom@19', 'ai@latest', '@ai-sdk/harness@latest']);
  for (const [path, text] of Object.entries(FILES)) {
    mkdirSync(join(app.dir, path, '..'), { recursive: true });
    writeFileSync(join(app.dir, path), text);
  }
});
after(async () => {
  await server?.stop();
  if (app !== undefined) rmSync(app.dir, { recursive: true, force: true });
});

test('a Next.js app on the installed package: next build touches no file, next start streams a turn', async () => {
  assert.deepEqual(engineWarnings(app.output), [], 'no engine warning on Node 22');
  const next = join(app.dir, 'node_modules', 'next', 'dist', 'bin', 'next');
  const build = runIn(app.dir, nodeBinary(22), [next, 'build'], { timeout: 600_000 });
  assert.match(build.output, /\/api\/chat/);
  assert.equal(existsSync(join(app.dir, 'data')), false, `next build created data/:\n${build.output}`);

  const port = await freePort();
  server = background(app.dir, nodeBinary(22), [next, 'start', '--port', String(port), '--hostname', '127.0.0.1']);
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 180_000;
  for (;;) {
    assert.equal(server.child.exitCode, null, `next start exited:\n${server.output()}`);
    assert.ok(Date.now() < deadline, `next start did not answer:\n${server.output()}`);
    const ok = await fetch(base).then((response) => response.ok, () => false);
    if (ok) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }

  const transport = new DefaultChatTransport({ api: `${base}/api/chat` });
  const stream = await transport.sendMessages({
    trigger: 'submit-message',
    chatId: 'next-chat',
    messageId: undefined,
    abortSignal: undefined,
    messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hello from Next.js' }] }],
  });
  let last;
  for await (const message of readUIMessageStream({ stream })) last = message;
  assert.equal(last.role, 'assistant');
  const text = last.parts.filter((part) => part.type === 'text').map((part) => part.text).join('');
  assert.equal(text, 'You said: hello from Next.js', server.output());
  assert.ok(existsSync(join(app.dir, 'data', 'sessions.db')), 'the store, under the server\'s working directory');
});

test("the demo's install (examples/next-chat, its lock and the tarballs) prints no engine warning on Node 22", () => {
  packTarballs(join(ROOT, 'pack'));
  const example = join(ROOT, 'examples', 'next-chat');
  const install = (node) => runIn(example, node, [npmCli, 'install', '--dry-run', '--no-save', '--no-audit', '--no-fund']).output;
  assert.deepEqual(engineWarnings(install(nodeBinary(22))), []);
  // On Node 20, which the README does not ask for, npm warns: the check above can fail.
  assert.notDeepEqual(engineWarnings(install(nodeBinary(20))), []);
});
