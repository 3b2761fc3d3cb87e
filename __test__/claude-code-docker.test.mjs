// The real Claude Code, end to end, on dockerSandbox: the real HarnessAgent, the real
// `@ai-sdk/harness-claude-code` and the Claude Code CLI its bridge pins, in a container of
// harness-sessions-claude-code:latest (scripts/docker/build-claude-code-image.sh, the bootstrap
// baked in from .cache/claude-code), against the mock of the Anthropic Messages API. The CLI must
// reach nothing but the mock: every test ends by checking the catcher its proxies point at.
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { dockerHost, dockerSkipFor, engine } from './support/docker.mjs';
import {
  answerApprovals,
  freePort,
  lastToolOutput,
  readTurnResponse,
  requestTexts,
  requestToolResults,
  startClaudeCodeWorld,
  textOf,
  until,
  userMessage,
  writeThenRead,
} from './support/claude-code.mjs';

const require = createRequire(import.meta.url);
const execFileAsync = promisify(execFile);
const { createSessionManager, createSqliteSessionStore, dockerSandbox, sandboxPerSession } = require('../index.js');

const image = 'harness-sessions-claude-code:latest';
const root = fileURLToPath(new URL('..', import.meta.url));
let skip = dockerSkipFor(test);
if (skip === false) {
  // The image is built here when missing (about a minute, once; the bootstrap's download cached).
  try {
    if ((await engine(`/images/${encodeURIComponent(image)}/json`)) !== 200) {
      execFileSync('bash', ['scripts/docker/build-claude-code-image.sh'], {
        cwd: root,
        env: { ...process.env, DOCKER_HOST: dockerHost },
        stdio: ['ignore', 'inherit', 'inherit'],
      });
    }
  } catch (error) {
    if (process.env.HARNESS_SESSIONS_REQUIRE_DOCKER === '1') throw error;
    skip = `skipped: the Claude Code image could not be built (${error.message})`;
  }
}
const dockerTest = (name, fn) => test(name, { skip, timeout: 300_000 }, fn);

let world;
const dirs = [];
const managers = [];
before(async () => {
  world = await startClaudeCodeWorld();
});
after(async () => {
  await Promise.allSettled(managers.map((m) => m.shutdown()));
  await world?.close();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

let counter = 0;
const fresh = (name) => `cc-${name}-${process.pid}-${++counter}`;

/** A manager on the real Claude Code, a container per session; `path` for a SQLite file. */
async function manager({ path, port } = {}) {
  const bridgePort = port ?? (await freePort());
  const provider = dockerSandbox({ image, host: dockerHost, namePrefix: 'hs-cctest-', ports: [bridgePort], env: world.env, memory: '2g' });
  const agent = world.agent();
  const errors = [];
  const sessions = createSessionManager({
    agent: () => agent,
    sandboxes: sandboxPerSession({ provider }),
    ...(path ? { store: createSqliteSessionStore({ path }) } : {}),
    onError: (error, context) => errors.push({ error, ...context }),
  });
  managers.push(sessions);
  return { sessions, errors, bridgePort };
}

async function ready(sessions, id) {
  await sessions.create({ id, metadata: {} });
  await until(async () => (await sessions.get(id))?.status !== 'preparing', 240_000, `${id} to start`);
  const session = await sessions.get(id);
  assert.equal(session.status, 'idle', `the session started: ${session.error ?? ''}`);
}

dockerTest('a text turn, read through toUIMessageStreamResponse() and readUIMessageStream', async () => {
  const { sessions } = await manager();
  const id = fresh('text');
  await ready(sessions, id);
  world.mock.clearReplies();
  world.mock.reply({ text: 'Hello from the mock model, inside Docker.' });
  const before = world.mainRequests().length;
  const turn = await sessions.send(id, { message: userMessage('Say hello') });
  const { message, session, errors } = await readTurnResponse(turn);
  assert.deepEqual(errors, []);
  assert.equal(textOf(message), 'Hello from the mock model, inside Docker.');
  assert.equal(session.status, 'idle');
  const request = world.mainRequests()[before];
  assert.ok(requestTexts(request).some((t) => t.includes('Say hello')), 'the mock received the prompt');
  assert.equal(request.stream, true);
  await sessions.close(id);
  world.assertNothingCaught();
});

dockerTest('a Bash command asking approval: awaiting-input with its pendingInput, continue() from the message useChat sends back, the file written, the answer', async () => {
  const { sessions } = await manager();
  const id = fresh('approve');
  await ready(sessions, id);
  world.mock.clearReplies();
  const before = world.mainRequests().length;
  world.mock.reply(...writeThenRead('hello.txt', 'hi from Claude Code', 'Written and read back.'));
  const first = await readTurnResponse(await sessions.send(id, { message: userMessage('Write hello.txt') }));
  assert.equal(first.session.status, 'awaiting-input');
  const [approval, ...more] = first.session.pendingInput.approvals;
  assert.equal(more.length, 0);
  assert.match(approval.toolName, /bash/i);
  assert.match(approval.input.command, /> hello\.txt && pwd$/);
  const part = first.message.parts.find((p) => p.state === 'approval-requested');
  assert.equal(part.approval.id, approval.approvalId);

  const answered = answerApprovals(first.message, true);
  const second = await readTurnResponse(await sessions.continue(id, { message: answered }), answered);
  assert.deepEqual(second.errors, []);
  assert.equal(second.session.status, 'idle');
  assert.match(textOf(second.message), /Written and read back\./);
  const [afterBash, afterRead] = world.mainRequests().slice(before + 1);
  assert.match(lastToolOutput(afterBash), /\/claude-code-[^/]+$/m, 'the command ran in the session\'s folder');
  assert.match(lastToolOutput(afterRead), /hi from Claude Code/, 'the file is there, read back by the CLI');
  await sessions.close(id);
  world.assertNothingCaught();
});

dockerTest('a denial: the CLI is told, the file is not written, the session goes on', async () => {
  const { sessions } = await manager();
  const id = fresh('deny');
  await ready(sessions, id);
  world.mock.clearReplies();
  const before = world.mainRequests().length;
  world.mock.reply(
    { toolUse: { name: 'Bash', input: { command: "printf no > denied.txt", description: 'Write denied.txt' } } },
    { text: 'Understood, I did not write it.' },
    { toolUse: { name: 'Glob', input: { pattern: '*.txt' } } },
    { text: 'It is not there.' },
  );
  const first = await readTurnResponse(await sessions.send(id, { message: userMessage('Write denied.txt') }));
  assert.equal(first.session.status, 'awaiting-input');
  const answered = answerApprovals(first.message, false, 'not today');
  const second = await readTurnResponse(await sessions.continue(id, { message: answered }), answered);
  assert.equal(second.session.status, 'idle');
  assert.match(textOf(second.message), /did not write it/);
  const denied = requestToolResults(world.mainRequests()[before + 1]).at(-1);
  assert.equal(denied.is_error, true, 'the CLI got the denial as an error result');
  const third = await readTurnResponse(await sessions.send(id, { message: userMessage('Is it there?') }));
  assert.equal(textOf(third.message), 'It is not there.');
  assert.doesNotMatch(lastToolOutput(world.mainRequests()[before + 3]), /denied\.txt/, 'the file was not written');
  await sessions.close(id);
  world.assertNothingCaught();
});

dockerTest('suspend() then a message: the container restarts and the mock receives the earlier conversation', async () => {
  const { sessions } = await manager();
  const id = fresh('suspend');
  await ready(sessions, id);
  world.mock.clearReplies();
  world.mock.reply({ text: 'The first answer, about apricots.' });
  await readTurnResponse(await sessions.send(id, { message: userMessage('Remember the word apricot') }));
  await sessions.suspend(id);
  assert.equal((await sessions.get(id)).status, 'suspended');
  const before = world.mainRequests().length;
  world.mock.reply({ text: 'You told me apricot.' });
  const { message, session } = await readTurnResponse(await sessions.send(id, { message: userMessage('What word did I say?') }));
  assert.equal(session.status, 'idle');
  assert.equal(textOf(message), 'You told me apricot.');
  const request = world.mainRequests()[before];
  const users = requestTexts(request, 'user').join('\n');
  assert.match(users, /Remember the word apricot/, 'the earlier prompt was sent again');
  assert.match(users, /What word did I say\?/);
  assert.match(requestTexts(request, 'assistant').join('\n'), /The first answer, about apricots\./, 'and the earlier answer');
  await sessions.close(id);
  world.assertNothingCaught();
});

dockerTest('a new process on the same SQLite file resumes the session, the earlier conversation sent to the mock', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hs-cc-sqlite-'));
  dirs.push(dir);
  const path = join(dir, 'sessions.db');
  const { sessions, bridgePort } = await manager({ path });
  const id = fresh('process');
  await ready(sessions, id);
  world.mock.clearReplies();
  world.mock.reply({ text: 'Noted: the code word is quince.' });
  await readTurnResponse(await sessions.send(id, { message: userMessage('The code word is quince') }));
  await sessions.shutdown();
  const before = world.mainRequests().length;
  world.mock.reply({ text: 'The code word was quince.' });
  const docker = { image, host: dockerHost, namePrefix: 'hs-cctest-', ports: [bridgePort], env: world.env, memory: '2g' };
  // Asynchronously: the mock answers from this process's event loop.
  const { stdout: out } = await execFileAsync(process.execPath, [fileURLToPath(new URL('./support/claude-code-child.mjs', import.meta.url)), JSON.stringify({ path, id, docker, mockUrl: world.mock.url, prompt: 'What was the code word?' })], {
    encoding: 'utf8',
    timeout: 240_000,
    env: { ...process.env, HARNESS_SESSIONS_TEST: '1' },
  });
  const result = JSON.parse(out.trim().split('\n').at(-1));
  assert.deepEqual(result, { before: 'suspended', status: 'idle', text: 'The code word was quince.', messages: 4 });
  const request = world.mainRequests()[before];
  assert.match(requestTexts(request, 'user').join('\n'), /The code word is quince/);
  assert.match(requestTexts(request, 'assistant').join('\n'), /Noted: the code word is quince\./);
  // The container of the session, suspended again by the child's shutdown, is removed by a close.
  const { sessions: again } = await manager({ path, port: bridgePort });
  await again.close(id);
  await again.shutdown();
  world.assertNothingCaught();
});
