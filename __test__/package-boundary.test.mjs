// The package's boundary: its exports, error classes across two copies of the package, panics
// that become errors, the turn stream against the real `ai` readers, cancel seen by the engine,
// the SSE response byte for byte, and a process that exits when its script is done.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createUIMessageStreamResponse, readUIMessageStream } from 'ai';
import * as pkg from '../index.js';
import { createDeferred, createFakeAgent, readTurn, streamAgent, testManager, until } from './support/sessions.mjs';

const require = createRequire(import.meta.url);
const root = new URL('..', import.meta.url).pathname;
const DIAGNOSTICS = Symbol.for('harness-sessions.diagnostics');

describe('exports', () => {
  test('what the seed exports, and the stores', () => {
    for (const name of [
      'createSessionManager',
      'createMemorySessionStore',
      'createSqliteSessionStore',
      'getHarnessErrorMessage',
      'SessionError',
      'SessionNotFoundError',
      'SessionConflictError',
      'SessionCapacityError',
      'SessionInputError',
    ]) {
      assert.equal(typeof pkg[name], 'function', name);
    }
  });

  test("the reference's status lists", () => {
    assert.deepEqual(pkg.SESSION_STATUSES, ['preparing', 'idle', 'busy', 'awaiting-input', 'suspended', 'closed', 'failed', 'interrupted']);
    assert.deepEqual(pkg.LIVE_STATUSES, ['preparing', 'idle', 'busy', 'awaiting-input']);
  });

  test('require() and import give the same package', () => {
    assert.equal(require('../index.js').createSessionManager, pkg.createSessionManager);
  });
});

describe('errors', () => {
  test('each class has its code, HTTP status and fields', () => {
    const cases = [
      [new pkg.SessionNotFoundError('a'), 'SESSION_NOT_FOUND', 404, 'No session a.'],
      [new pkg.SessionConflictError('a', 'busy'), 'SESSION_CONFLICT', 409, 'The session is busy.'],
      [new pkg.SessionConflictError('a', 'busy', 'Busy, try later.'), 'SESSION_CONFLICT', 409, 'Busy, try later.'],
      [new pkg.SessionCapacityError(4), 'SESSION_CAPACITY', 503,
        '4 sessions are live, the most the sandboxes take: close or suspend one first.'],
      [new pkg.SessionInputError('message.parts', 'bad'), 'SESSION_INPUT', 400, 'bad'],
      [new pkg.SessionInputError({ path: 'message.parts', message: 'bad' }), 'SESSION_INPUT', 400, 'bad'],
    ];
    for (const [error, code, statusCode, message] of cases) {
      assert.ok(error instanceof pkg.SessionError);
      assert.ok(error instanceof Error);
      assert.ok(pkg.SessionError.isInstance(error));
      assert.equal(error.code, code);
      assert.equal(error.statusCode, statusCode);
      assert.equal(error.message, message);
    }
    assert.equal(pkg.SessionNotFoundError.isInstance(new pkg.SessionConflictError('a', 'idle')), false);
    assert.equal(pkg.SessionError.isInstance(new Error('x')), false);
    assert.equal(pkg.SessionError.isInstance(null), false);
    assert.equal(pkg.SessionError.isInstance({ code: 'SESSION_NOT_FOUND' }), false);
  });

  test('isInstance() recognizes an error thrown by another copy of the package', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hs-copy-'));
    const copy = join(dir, 'harness-sessions');
    cpSync(root, copy, {
      recursive: true,
      filter: (source) => !/\/(target|node_modules|\.cache|\.git|examples|artifacts)(\/|$)/.test(source),
    });
    symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'));
    const other = require(join(copy, 'index.js'));
    assert.notEqual(other.SessionNotFoundError, pkg.SessionNotFoundError, 'two copies loaded');
    const sessions = other.createSessionManager({ agent: () => createFakeAgent(), sandboxes: { acquire: async () => ({}) } });
    const error = await sessions.send('missing', { message: 'x' }).catch((e) => e);
    assert.equal(error instanceof pkg.SessionNotFoundError, false, 'not the same class');
    assert.ok(pkg.SessionNotFoundError.isInstance(error));
    assert.ok(pkg.SessionError.isInstance(error));
    assert.equal(pkg.SessionConflictError.isInstance(error), false);
    assert.equal(error.sessionId, 'missing');
    await sessions.shutdown();
  });

  test('a Rust panic reaches JavaScript as an error, and the process lives on', async () => {
    const binding = require('../binding.js');
    for (const inFuture of [false, true]) {
      await assert.rejects(binding.__panicForTests(inFuture), (error) => {
        // The error crosses as data: its code and details are properties, its message plain text.
        assert.equal(error.code, 'SESSION_INTERNAL');
        assert.deepEqual(error.details, {});
        assert.match(error.message, /^An internal error|a deliberate panic/);
        assert.doesNotMatch(error.message, /^\{/);
        const translated = require('../js/errors.js').fromNative(error);
        assert.ok(pkg.SessionError.isInstance(translated));
        assert.equal(translated.code, 'SESSION_INTERNAL');
        assert.match(translated.message, /a deliberate panic/);
        return true;
      });
    }
    assert.equal(binding.nativeVersion(), require('../package.json').version);
  });
});

describe('the turn stream', () => {
  test('is a ReadableStream the real readUIMessageStream and createUIMessageStreamResponse take', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 's', metadata: {} });
    const turn = await sessions.send('s', { message: 'hello' });
    assert.ok(turn.stream instanceof ReadableStream);
    const response = createUIMessageStreamResponse({ stream: turn.stream });
    const body = await response.text();
    assert.match(body, /^data: \{"type":"start","messageId":"[^"]+"\}\n\n/);
    assert.ok(body.endsWith('data: [DONE]\n\n'));
    assert.equal((await turn.done).status, 'idle');
    await sessions.shutdown();
  });

  test('toUIMessageStreamResponse() is createUIMessageStreamResponse, byte for byte, headers too', async () => {
    const chunks = [
      { type: 'start-step' },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: 'é "quoted" \n \u2028 😀' },
      { type: 'text-end', id: 't' },
      { type: 'data-weather', data: { temperature: 1.5e-7, list: [1, null, true] } },
      { type: 'finish-step' },
      { type: 'finish', finishReason: 'stop' },
    ];
    const agent = streamAgent(async function* () {
      yield* chunks;
    });
    const ids = ['m-user', 'm-reply'];
    const { sessions } = testManager({ fakeAgent: agent, generateId: () => ids.shift() ?? 'x' });
    await sessions.create({ id: 'r', metadata: {} });
    const turn = await sessions.send('r', { message: 'hi' });
    const ours = turn.toUIMessageStreamResponse({ status: 201, headers: { 'x-extra': '1' } });
    const expected = createUIMessageStreamResponse({
      status: 201,
      headers: { 'x-extra': '1' },
      stream: new ReadableStream({
        start(controller) {
          for (const chunk of [{ type: 'start', messageId: 'm-reply' }, ...chunks]) controller.enqueue(chunk);
          controller.close();
        },
      }),
    });
    assert.equal(ours.status, 201);
    assert.deepEqual([...ours.headers], [...expected.headers]);
    assert.deepEqual(Buffer.from(await ours.arrayBuffer()), Buffer.from(await expected.arrayBuffer()));
    await sessions.shutdown();
  });

  test('cancelling it stops that reader only: the turn is read to its end all the same', async () => {
    const hold = createDeferred();
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [{ hold: hold.promise, text: 'the end' }] }) });
    await sessions.create({ id: 'c', metadata: {} });
    const turn = await sessions.send('c', { message: 'hi' });
    const diagnostics = () => sessions[DIAGNOSTICS]();
    assert.equal(diagnostics().clientsGone, 0);
    await turn.stream.cancel('the tab closed');
    // A reader that leaves is no news to the turn (reconnect() may follow): it goes on.
    assert.equal(diagnostics().turnsUnderWay, 1);
    assert.equal((await sessions.get('c')).status, 'busy');
    hold.resolve();
    const session = await turn.done;
    assert.equal(session.status, 'idle');
    assert.match(JSON.stringify((await sessions.get('c')).messages[1]), /the end/);
    assert.equal(diagnostics().turnsUnderWay, 0);
    await sessions.shutdown();
  });

  test('a continuation is read into the same message by one reader', async () => {
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [{ approvals: [{ toolName: 'bash', input: { command: 'ls' } }] }] }) });
    await sessions.create({ id: 'k', metadata: {} });
    const first = await readTurn(await sessions.send('k', { message: 'run ls' }));
    assert.equal(first.session.status, 'awaiting-input');
    const approval = first.session.pendingInput.approvals[0];
    const second = await sessions.continue('k', {
      toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved: true }],
    });
    let last;
    for await (const message of readUIMessageStream({ message: first.message, stream: second.stream })) last = message;
    assert.equal(last.id, first.message.id);
    await sessions.shutdown();
  });
});

describe('the process', () => {
  test('stays alive while a session it created is preparing', () => {
    const script = `
      import { createSessionManager } from ${JSON.stringify(join(root, 'index.js'))};
      import { createFakeAgent } from ${JSON.stringify(join(root, 'testing/index.mjs'))};
      const sessions = createSessionManager({
        agent: () => createFakeAgent({ createSession: [{ delayMs: 300 }] }),
        sandboxes: { acquire: async () => ({ sandboxSession: {}, suspend: async () => {}, close: async () => {} }) },
      });
      sessions.subscribe((event) => { if (event.session?.status === 'idle') console.log('ready'); });
      await sessions.create({ id: 'x', metadata: {} });
    `;
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout.trim(), 'ready');
  });

  test('exits by itself once a script is done with its manager, and stays while a turn runs', () => {
    const script = `
      import { createSessionManager } from ${JSON.stringify(join(root, 'index.js'))};
      import { createFakeAgent } from ${JSON.stringify(join(root, 'testing/index.mjs'))};
      const sessions = createSessionManager({
        agent: () => createFakeAgent({ turns: [{ delayMs: 300, text: 'late answer' }] }),
        sandboxes: { acquire: async () => ({ sandboxSession: {}, suspend: async () => {}, close: async () => {} }) },
        idleTimeoutMs: 60_000,
      });
      await sessions.create({ id: 'x', metadata: {} });
      const turn = await sessions.send('x', { message: 'hi' });
      turn.done.then((s) => console.log('done', s.status));
    `;
    const started = Date.now();
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout.trim(), 'done idle', 'the turn kept the process alive until it was done');
    assert.ok(Date.now() - started < 10_000, 'the idle timer did not keep it alive');
  });
});
