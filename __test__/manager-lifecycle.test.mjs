// The lifecycle of the seed, row by row and transition by transition, with a fake agent: what
// each command does in each status, and the words users see.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  createMemorySessionStore,
  SessionCapacityError,
  SessionConflictError,
  SessionError,
  SessionInputError,
  SessionNotFoundError,
} from '../index.js';
import {
  createDeferred,
  createFakeAgent,
  readTurn,
  sleep,
  testManager,
  testSandboxes,
  streamAgent,
  until,
  untilStatus,
} from './support/sessions.mjs';
import { createSessionManager } from '../index.js';

async function conflict(promise, status, message) {
  await assert.rejects(promise, (error) => {
    assert.ok(SessionConflictError.isInstance(error), `a conflict, not ${error}`);
    assert.equal(error.status, status);
    assert.equal(error.statusCode, 409);
    if (message !== undefined) assert.equal(error.message, message);
    return true;
  });
}

describe('create()', () => {
  test('returns the session preparing at once, then it becomes idle', async () => {
    const gate = createDeferred();
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ createSession: [{ gate: gate.promise }] }) });
    const session = await sessions.create({ id: 's1', metadata: { title: 'T' } });
    assert.equal(session.status, 'preparing');
    assert.deepEqual(session.metadata, { title: 'T' });
    assert.equal(session.createdAt, new Date(session.createdAt).toISOString(), 'ISO 8601, as toISOString() writes it');
    assert.equal(session.updatedAt, session.createdAt);
    assert.equal(session.turns, 0);
    assert.deepEqual(session.usage, { inputTokens: 0, outputTokens: 0, totalTokens: 0 });
    assert.equal((await sessions.get('s1')).status, 'preparing');
    gate.resolve();
    await untilStatus(sessions, 's1', 'idle');
    await sessions.shutdown();
  });

  test('gives a new session an id from generateId', async () => {
    let n = 0;
    const { sessions } = testManager({ generateId: () => `id-${++n}` });
    const session = await sessions.create({ metadata: {} });
    assert.equal(session.id, 'id-1');
    await sessions.shutdown();
  });

  test('refuses an id that exists', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 'dup', metadata: {} });
    await untilStatus(sessions, 'dup', 'idle');
    await conflict(sessions.create({ id: 'dup', metadata: {} }), 'idle', 'A session dup already exists.');
    await sessions.shutdown();
  });

  test('refuses metadata that is not JSON, and changes nothing', async () => {
    const { sessions } = testManager();
    await assert.rejects(sessions.create({ id: 'x', metadata: { n: 1n } }), (error) => {
      assert.ok(SessionInputError.isInstance(error));
      assert.equal(error.path, 'metadata');
      assert.equal(error.statusCode, 400);
      return true;
    });
    assert.equal(await sessions.get('x'), undefined);
    assert.deepEqual(await sessions.list(), []);
    await sessions.shutdown();
  });
});

describe('a first message', () => {
  test('waits while the sandbox and the harness session open, then gets its turn', async () => {
    const gate = createDeferred();
    const { sessions, agent } = testManager({ fakeAgent: createFakeAgent({ createSession: [{ gate: gate.promise }] }) });
    await sessions.create({ id: 's', metadata: {} });
    let sent = false;
    const sending = sessions.send('s', { message: 'hello' }).then((turn) => {
      sent = true;
      return turn;
    });
    await sleep(30);
    assert.equal(sent, false, 'send() waits while the session is preparing');
    gate.resolve();
    const { message, session } = await readTurn(await sending);
    assert.equal(session.status, 'idle');
    assert.equal(message.parts.at(-1).text, 'You said: hello');
    assert.deepEqual(
      agent.calls.map((c) => c.method),
      ['createSession', 'stream'],
    );
    await sessions.shutdown();
  });

  test('two sessions start side by side: a slow sandbox does not hold up another session', async () => {
    const slow = createDeferred();
    const sandboxes = testSandboxes({ acquire: (id) => (id === 'slow' ? slow.promise : undefined) });
    const { sessions } = testManager({ sandboxes });
    await sessions.create({ id: 'slow', metadata: {} });
    await sessions.create({ id: 'fast', metadata: {} });
    await untilStatus(sessions, 'fast', 'idle');
    assert.equal((await sessions.get('slow')).status, 'preparing');
    const { session } = await readTurn(await sessions.send('fast', { message: 'hi' }));
    assert.equal(session.status, 'idle');
    slow.resolve();
    await untilStatus(sessions, 'slow', 'idle');
    await sessions.shutdown();
  });

  test('a start that fails leaves the session failed, and the next message tries again', async () => {
    const failure = new Error('the sandbox did not open');
    const { sessions, errors } = testManager({
      fakeAgent: createFakeAgent({ createSession: [{ fail: failure }] }),
    });
    await sessions.create({ id: 'f', metadata: {} });
    await untilStatus(sessions, 'f', 'failed');
    const failed = await sessions.get('f');
    assert.equal(failed.error, 'the sandbox did not open');
    assert.equal(errors[0].error, failure, 'onError gets the very error');
    assert.equal(errors[0].action, 'start');
    assert.equal(errors[0].sessionId, 'f');
    const { session } = await readTurn(await sessions.send('f', { message: 'again' }));
    assert.equal(session.status, 'idle');
    assert.equal(session.error, undefined);
    await sessions.shutdown();
  });

  test('a message sent while a start fails is refused: SessionConflictError, status failed, with the error', async () => {
    const gate = createDeferred();
    const { sessions } = testManager({
      fakeAgent: createFakeAgent({
        createSession: [{ gate: gate.promise, fail: new Error('no sandbox') }, { fail: new Error('still none') }],
      }),
    });
    await sessions.create({ id: 'f', metadata: {} });
    const sending = sessions.send('f', { message: 'hi' });
    gate.resolve();
    await assert.rejects(sending, (error) => {
      assert.equal(SessionConflictError.isInstance(error), true, 'a conflict (409), not the raw start error');
      assert.equal(error.status, 'failed');
      assert.equal(error.message, 'The session is failed: still none.');
      return true;
    });
    await sessions.shutdown();
  });
});

describe('one turn at a time', () => {
  test('a message while a turn runs is refused: busy', async () => {
    const hold = createDeferred();
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [{ hold: hold.promise, text: 'slow' }] }) });
    await sessions.create({ id: 'b', metadata: {} });
    const turn = await sessions.send('b', { message: 'first' });
    await conflict(sessions.send('b', { message: 'second' }), 'busy', 'The session is busy.');
    await conflict(sessions.suspend('b'), 'busy', 'The session is busy.');
    hold.resolve();
    const { session } = await readTurn(turn);
    assert.equal(session.status, 'idle');
    await sessions.shutdown();
  });

  test('concurrent messages: exactly one turn runs', async () => {
    const hold = createDeferred();
    const { sessions, agent } = testManager({ fakeAgent: createFakeAgent({ turns: [{ hold: hold.promise }] }) });
    await sessions.create({ id: 'c', metadata: {} });
    await untilStatus(sessions, 'c', 'idle');
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => sessions.send('c', { message: `m${i}` })));
    const started = results.filter((r) => r.status === 'fulfilled');
    assert.equal(started.length, 1);
    for (const r of results.filter((r) => r.status === 'rejected')) {
      assert.ok(SessionConflictError.isInstance(r.reason));
      assert.equal(r.reason.status, 'busy');
    }
    hold.resolve();
    await readTurn(started[0].value);
    assert.equal(agent.calls.filter((c) => c.method === 'stream').length, 1);
    await sessions.shutdown();
  });
});

describe('a turn', () => {
  test('is stored: the user message, then the assistant message with the id the client saw', async () => {
    let n = 0;
    const { sessions } = testManager({ generateId: () => `g${++n}` });
    await sessions.create({ id: 't', metadata: {} });
    const { message, chunks } = await readTurn(await sessions.send('t', { message: 'hello' }));
    const start = chunks.find((c) => c.type === 'start');
    const record = await sessions.get('t');
    assert.equal(record.messages.length, 2);
    assert.equal(record.messages[0].role, 'user');
    assert.deepEqual(record.messages[0].parts, [{ type: 'text', text: 'hello' }]);
    assert.equal(record.messages[1].id, start.messageId);
    assert.equal(message.id, start.messageId);
    assert.deepEqual(record.messages[1], JSON.parse(JSON.stringify(message)), 'the server keeps what the client built');
    assert.equal(chunks.filter((c) => c.type === 'start').length, 1);
    assert.equal(chunks.filter((c) => c.type === 'finish').length, 1);
    assert.equal(chunks.at(-1).type, 'finish');
    await sessions.shutdown();
  });

  test('sends the agent `prompt` while the conversation keeps the message', async () => {
    const { sessions, agent } = testManager();
    await sessions.create({ id: 'p', metadata: {} });
    await readTurn(await sessions.send('p', { message: '/fix', prompt: 'Fix the failing test.' }));
    assert.equal(agent.calls.find((c) => c.method === 'stream').options.prompt, 'Fix the failing test.');
    assert.deepEqual((await sessions.get('p')).messages[0].parts, [{ type: 'text', text: '/fix' }]);
    await sessions.shutdown();
  });

  test('a UIMessage keeps its id, and one with an existing id replaces it', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 'u', metadata: {} });
    const message = { id: 'user-1', role: 'user', parts: [{ type: 'text', text: 'one' }] };
    await readTurn(await sessions.send('u', { message }));
    await readTurn(await sessions.send('u', { message: { ...message, parts: [{ type: 'text', text: 'edited' }] } }));
    const record = await sessions.get('u');
    assert.equal(record.messages.length, 2);
    assert.equal(record.messages[0].id, 'user-1');
    assert.deepEqual(record.messages[0].parts, [{ type: 'text', text: 'edited' }]);
    await sessions.shutdown();
  });

  test('sums the usage of its turns', async () => {
    const { sessions } = testManager({
      fakeAgent: createFakeAgent({ turns: [{ usage: { inputTokens: 3, outputTokens: 5 } }, { usage: { inputTokens: 1, outputTokens: 2 } }] }),
    });
    await sessions.create({ id: 'u', metadata: {} });
    await readTurn(await sessions.send('u', { message: 'a' }));
    const { session } = await readTurn(await sessions.send('u', { message: 'b' }));
    assert.deepEqual(session.usage, { inputTokens: 4, outputTokens: 7, totalTokens: 6 });
    assert.equal(session.turns, 2);
    await sessions.shutdown();
  });

  test('is read to its end on the server when the client goes away, and written', async () => {
    const hold = createDeferred();
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [{ hold: hold.promise, text: 'all of it' }] }) });
    await sessions.create({ id: 'g', metadata: {} });
    const turn = await sessions.send('g', { message: 'hi' });
    await turn.stream.cancel();
    hold.resolve();
    const session = await turn.done;
    assert.equal(session.status, 'idle');
    const record = await sessions.get('g');
    assert.equal(record.messages[1].parts.at(-1).text, 'all of it');
    await sessions.shutdown();
  });

  test('the session is written before the client stream closes', async () => {
    const saved = [];
    const store = createMemorySessionStore();
    const spy = {
      save: async (record, state) => {
        saved.push(record.status);
        await store.save(record, state);
      },
      get: (id) => store.get(id),
      list: () => store.list(),
      getResumeState: (id) => store.getResumeState(id),
      delete: (id) => store.delete(id),
    };
    const { sessions } = testManager({ store: spy });
    await sessions.create({ id: 'w', metadata: {} });
    const turn = await sessions.send('w', { message: 'hi' });
    const reader = turn.stream.getReader();
    while (!(await reader.read()).done);
    assert.equal(saved.at(-1), 'idle', 'the idle session was written when the stream closed');
    await sessions.shutdown();
  });

  test('an error reaches the client through errorMessage, the session keeps the full message', async () => {
    const { sessions, errors } = testManager({
      fakeAgent: createFakeAgent({ turns: [{ error: new Error('secret details of the failure') }] }),
      errorMessage: (error) => `Sorry (${error.message.length} characters).`,
    });
    await sessions.create({ id: 'e', metadata: {} });
    const { chunks, session } = await readTurn(await sessions.send('e', { message: 'hi' }));
    const error = chunks.find((c) => c.type === 'error');
    assert.equal(error.errorText, 'Sorry (29 characters).');
    assert.equal(session.status, 'idle');
    assert.equal(session.error, 'secret details of the failure');
    assert.deepEqual(errors, [], 'a failed turn is the session\'s error, not an onError report');
    await sessions.shutdown();
  });

  test('the default errorMessage masks errors that are not the harness\'s', async () => {
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [{ error: new Error('internal') }] }) });
    await sessions.create({ id: 'e', metadata: {} });
    const { chunks } = await readTurn(await sessions.send('e', { message: 'hi' }));
    assert.equal(chunks.find((c) => c.type === 'error').errorText, 'An error occurred.');
    await sessions.shutdown();
  });

  test('an errorMessage that throws or gives no string: the client is shown the masked text', async () => {
    for (const errorMessage of [() => { throw new Error('errorMessage failed'); }, () => 42]) {
      const { sessions } = testManager({
        fakeAgent: createFakeAgent({ turns: [{ error: new Error('secret details') }] }),
        errorMessage,
      });
      await sessions.create({ id: 'm', metadata: {} });
      const { chunks, session } = await readTurn(await sessions.send('m', { message: 'hi' }));
      assert.equal(chunks.find((c) => c.type === 'error').errorText, 'An error occurred.');
      assert.equal(session.error, 'secret details', 'the session keeps the full message');
      await sessions.shutdown();
    }
  });

  test('an agent that refuses the turn: send() rejects with its error, the session stays usable', async () => {
    const refusal = new Error('refused');
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [{ fail: refusal }] }) });
    await sessions.create({ id: 'r', metadata: {} });
    await untilStatus(sessions, 'r', 'idle');
    await assert.rejects(sessions.send('r', { message: 'hi' }), (error) => error === refusal);
    const session = await sessions.get('r');
    assert.equal(session.status, 'idle');
    assert.equal(session.error, 'refused');
    const again = await readTurn(await sessions.send('r', { message: 'again' }));
    assert.equal(again.session.error, undefined);
    await sessions.shutdown();
  });
});

describe('cutting a turn short', () => {
  const slow = () => createFakeAgent({ turns: [{ waitForAbort: true, text: 'partial' }] });

  test('turnTimeoutMs: The turn took too long.', async () => {
    const { sessions } = testManager({ fakeAgent: slow(), turnTimeoutMs: 50 });
    await sessions.create({ id: 'to', metadata: {} });
    const { chunks, session } = await readTurn(await sessions.send('to', { message: 'hi' }));
    assert.deepEqual(chunks.at(-1), { type: 'abort', reason: 'The turn took too long.' });
    assert.equal(session.status, 'idle');
    assert.equal(session.error, 'The turn took too long.');
    await sessions.shutdown();
  });

  test('interrupt(id): The turn was interrupted., resolved once the session is written', async () => {
    const { sessions } = testManager({ fakeAgent: slow() });
    await sessions.create({ id: 'i', metadata: {} });
    const turn = await sessions.send('i', { message: 'hi' });
    await sleep(20);
    await sessions.interrupt('i');
    assert.equal((await sessions.get('i')).status, 'idle');
    const { chunks, session } = await readTurn(turn);
    assert.deepEqual(chunks.at(-1), { type: 'abort', reason: 'The turn was interrupted.' });
    assert.equal(session.error, 'The turn was interrupted.');
    await sessions.interrupt('i');
    await sessions.shutdown();
  });

  test("the caller's abortSignal cuts the turn", async () => {
    const { sessions } = testManager({ fakeAgent: slow() });
    await sessions.create({ id: 'a', metadata: {} });
    const controller = new AbortController();
    const turn = await sessions.send('a', { message: 'hi', abortSignal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    const { chunks, session } = await readTurn(turn);
    assert.equal(chunks.at(-1).type, 'abort');
    assert.equal(session.status, 'idle');
    await sessions.shutdown();
  });

  test('close() of a busy session: The session was closed.', async () => {
    const { sessions } = testManager({ fakeAgent: slow() });
    await sessions.create({ id: 'c', metadata: {} });
    const turn = await sessions.send('c', { message: 'hi' });
    await sleep(20);
    const closed = await sessions.close('c');
    assert.equal(closed.status, 'closed');
    const { chunks } = await readTurn(turn);
    assert.deepEqual(chunks.at(-1), { type: 'abort', reason: 'The session was closed.' });
    await sessions.shutdown();
  });
});

describe('idle sessions', () => {
  test('are suspended after idleTimeoutMs: harness stopped, state kept, lease suspended; the next message resumes', async () => {
    const { sessions, agent, sandboxes } = testManager({ idleTimeoutMs: 40 });
    await sessions.create({ id: 'z', metadata: {} });
    await readTurn(await sessions.send('z', { message: 'one' }));
    await untilStatus(sessions, 'z', 'suspended');
    assert.ok(agent.calls.some((c) => c.method === 'stop'));
    assert.deepEqual(sandboxes.log.filter((l) => l[1] === 'z').map((l) => l[0]), ['acquire', 'suspend']);
    const { session } = await readTurn(await sessions.send('z', { message: 'two' }));
    assert.equal(session.status, 'idle');
    const resumed = agent.calls.filter((c) => c.method === 'createSession').at(-1);
    assert.equal(resumed.options.resumeFrom.type, 'resume-session');
    assert.deepEqual(sandboxes.log.filter((l) => l[0] === 'acquire').at(-1), ['acquire', 'z', true]);
    assert.equal((await sessions.get('z')).messages.length, 4);
    await sessions.shutdown();
  });

  test('suspend() suspends an idle session now; again is harmless', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 's', metadata: {} });
    await untilStatus(sessions, 's', 'idle');
    assert.equal((await sessions.suspend('s')).status, 'suspended');
    assert.equal((await sessions.suspend('s')).status, 'suspended');
    await sessions.shutdown();
  });

  test('a resume that fails leaves the session suspended with its error; the next message tries again', async () => {
    const agent = createFakeAgent();
    const { sessions, errors } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 'r', metadata: {} });
    await untilStatus(sessions, 'r', 'idle');
    await sessions.suspend('r');
    agent.script.createSession.push({ fail: new Error('the sandbox is gone') });
    await assert.rejects(sessions.send('r', { message: 'hi' }), (error) => {
      assert.equal(SessionConflictError.isInstance(error), true);
      assert.equal(error.status, 'suspended');
      assert.equal(error.message, 'The session is suspended: the sandbox is gone.');
      return true;
    });
    const record = await sessions.get('r');
    assert.equal(record.status, 'suspended');
    assert.equal(record.error, 'the sandbox is gone');
    assert.equal(errors.at(-1).action, 'resume');
    const { session } = await readTurn(await sessions.send('r', { message: 'hi' }));
    assert.equal(session.status, 'idle');
    await sessions.shutdown();
  });

  test('a harness session that will not stop: The harness session could not be stopped cleanly.', async () => {
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ stop: [{ fail: new Error('stuck') }] }) });
    await sessions.create({ id: 'h', metadata: {} });
    await untilStatus(sessions, 'h', 'idle');
    const summary = await sessions.suspend('h');
    assert.equal(summary.status, 'interrupted');
    assert.equal(summary.error, 'The harness session could not be stopped cleanly.');
    await sessions.shutdown();
  });

  test('a session suspended longer than closeSuspendedAfterMs is closed', async () => {
    const { sessions, sandboxes } = testManager({ closeSuspendedAfterMs: 40 });
    await sessions.create({ id: 'old', metadata: {} });
    await untilStatus(sessions, 'old', 'idle');
    await sessions.suspend('old');
    await untilStatus(sessions, 'old', 'closed');
    assert.ok(sandboxes.log.some((l) => l[0] === 'discard' && l[1] === 'old'));
    await sessions.shutdown();
  });
});

describe('every sandbox slot taken', () => {
  test('the session idle the longest is suspended to make room', async () => {
    const { sessions } = testManager({ sandboxes: testSandboxes({ capacity: 2 }) });
    await sessions.create({ id: 'a', metadata: {} });
    await untilStatus(sessions, 'a', 'idle');
    await sessions.create({ id: 'b', metadata: {} });
    await untilStatus(sessions, 'b', 'idle');
    await readTurn(await sessions.send('a', { message: 'a is used' }));
    await sessions.create({ id: 'c', metadata: {} });
    await untilStatus(sessions, 'c', 'idle');
    assert.equal((await sessions.get('b')).status, 'suspended');
    assert.equal((await sessions.get('a')).status, 'idle');
    await sessions.shutdown();
  });

  test('none idle: refused with SessionCapacityError', async () => {
    const hold = createDeferred();
    const { sessions } = testManager({
      sandboxes: testSandboxes({ capacity: 1 }),
      fakeAgent: createFakeAgent({ turns: [{ hold: hold.promise }] }),
    });
    await sessions.create({ id: 'a', metadata: {} });
    const turn = await sessions.send('a', { message: 'busy' });
    await assert.rejects(sessions.create({ id: 'b', metadata: {} }), (error) => {
      assert.ok(SessionCapacityError.isInstance(error));
      assert.equal(error.capacity, 1);
      assert.equal(error.statusCode, 503);
      assert.equal(error.message, '1 sessions are live, the most the sandboxes take: close or suspend one first.');
      return true;
    });
    assert.equal(await sessions.get('b'), undefined, 'nothing was kept of the refused session');
    hold.resolve();
    await readTurn(turn);
    await sessions.shutdown();
  });

  test('suspendIdleWhenFull: false refuses as soon as the slots are taken', async () => {
    const { sessions } = testManager({ sandboxes: testSandboxes({ capacity: 1 }), suspendIdleWhenFull: false });
    await sessions.create({ id: 'a', metadata: {} });
    await untilStatus(sessions, 'a', 'idle');
    await assert.rejects(sessions.create({ id: 'b', metadata: {} }), (e) => SessionCapacityError.isInstance(e));
    await sessions.suspend('a');
    await sessions.create({ id: 'b', metadata: {} });
    await assert.rejects(sessions.send('a', { message: 'back' }), (e) => SessionCapacityError.isInstance(e));
    await sessions.shutdown();
  });
});

describe('update()', () => {
  test('changes the metadata whatever the status, with a value or a function', async () => {
    const hold = createDeferred();
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [{ hold: hold.promise }] }) });
    await sessions.create({ id: 'm', metadata: { n: 1 } });
    assert.deepEqual((await sessions.update('m', { metadata: { n: 2 } })).metadata, { n: 2 });
    const turn = await sessions.send('m', { message: 'hi' });
    assert.deepEqual((await sessions.update('m', { metadata: (m) => ({ n: m.n + 1 }) })).metadata, { n: 3 });
    hold.resolve();
    const { session } = await readTurn(turn);
    assert.deepEqual(session.metadata, { n: 3 }, 'the end of the turn keeps the update');
    await sessions.suspend('m');
    assert.deepEqual((await sessions.update('m', { metadata: { n: 4 } })).metadata, { n: 4 });
    const { session: resumed } = await readTurn(await sessions.send('m', { message: 'back' }));
    assert.equal(resumed.status, 'idle', 'the resume state survived the update');
    await sessions.close('m');
    assert.deepEqual((await sessions.update('m', { metadata: { n: 5 } })).metadata, { n: 5 });
    await sessions.shutdown();
  });
});

describe('close() and delete()', () => {
  test('close ends the session: the harness destroyed, the lease closed; its conversation stays', async () => {
    const { sessions, agent, sandboxes } = testManager();
    await sessions.create({ id: 'c', metadata: {} });
    await readTurn(await sessions.send('c', { message: 'hi' }));
    const closed = await sessions.close('c');
    assert.equal(closed.status, 'closed');
    assert.ok(agent.calls.some((c) => c.method === 'destroy'));
    assert.deepEqual(sandboxes.log.at(-1), ['close', 'c']);
    assert.equal((await sessions.get('c')).messages.length, 2);
    await conflict(sessions.send('c', { message: 'x' }), 'closed', 'The session is closed.');
    const again = await sessions.close('c');
    assert.equal(again.status, 'closed', 'close() of a closed session gives it back');
    assert.equal(again.updatedAt, closed.updatedAt, 'and changes nothing');
    await sessions.shutdown();
  });

  test('close of a suspended session discards what the sandboxes keep', async () => {
    const { sessions, sandboxes } = testManager();
    await sessions.create({ id: 's', metadata: {} });
    await untilStatus(sessions, 's', 'idle');
    await sessions.suspend('s');
    assert.equal((await sessions.close('s')).status, 'closed');
    assert.deepEqual(sandboxes.log.at(-1), ['discard', 's']);
    await sessions.shutdown();
  });

  test('close of a preparing session cuts its start short', async () => {
    const gate = createDeferred();
    const { sessions, sandboxes } = testManager({ fakeAgent: createFakeAgent({ createSession: [{ gate: gate.promise }] }) });
    await sessions.create({ id: 'p', metadata: {} });
    // The start holds its sandbox and waits in createSession() (a loaded machine may not be there
    // yet when create() returns).
    await until(() => sandboxes.log.some((l) => l[0] === 'acquire' && l[1] === 'p'));
    const closed = await sessions.close('p');
    assert.equal(closed.status, 'closed');
    gate.resolve();
    await until(() => sandboxes.log.some((l) => l[0] === 'close' && l[1] === 'p'));
    await sessions.shutdown();
  });

  test('delete forgets the session and tells the subscribers', async () => {
    const { sessions, events } = testManager();
    await sessions.create({ id: 'd', metadata: {} });
    await untilStatus(sessions, 'd', 'idle');
    await sessions.delete('d');
    assert.equal(await sessions.get('d'), undefined);
    assert.deepEqual(events.at(-1), { type: 'deleted', sessionId: 'd' });
    await assert.rejects(sessions.delete('d'), (e) => SessionNotFoundError.isInstance(e));
    await sessions.shutdown();
  });
});

describe('get(), list() and subscribe()', () => {
  test('list gives every session newest first, without messages', async () => {
    const { sessions } = testManager();
    for (const id of ['one', 'two', 'three']) {
      await sessions.create({ id, metadata: {} });
      await untilStatus(sessions, id, 'idle');
    }
    await readTurn(await sessions.send('one', { message: 'hi' }));
    const list = await sessions.list();
    assert.deepEqual(list.map((s) => s.id), ['one', 'three', 'two']);
    assert.ok(list.every((s) => !('messages' in s)));
    await sessions.shutdown();
  });

  test('get gives a live session as it stands right now, mid-turn', async () => {
    const hold = createDeferred();
    const agent = streamAgent(async function* () {
      yield { type: 'start-step' };
      yield { type: 'text-start', id: 't' };
      yield { type: 'text-delta', id: 't', delta: 'first words' };
      await hold.promise;
      yield { type: 'text-end', id: 't' };
      yield { type: 'finish-step' };
      yield { type: 'finish' };
    });
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 'g', metadata: {} });
    const turn = await sessions.send('g', { message: 'hi' });
    await until(async () => (await sessions.get('g')).messages[1]?.parts.some((p) => p.type === 'text'));
    const record = await sessions.get('g');
    assert.equal(record.status, 'busy');
    assert.deepEqual(record.messages[1].parts.at(-1), { type: 'text', text: 'first words', state: 'streaming' });
    hold.resolve();
    await readTurn(turn);
    await sessions.shutdown();
  });

  test('subscribe sends every change; unsubscribe stops them', async () => {
    const { sessions } = testManager();
    const seen = [];
    const unsubscribe = sessions.subscribe((event) => seen.push(`${event.type}:${event.session?.status}`));
    await sessions.create({ id: 'e', metadata: {} });
    await untilStatus(sessions, 'e', 'idle');
    await readTurn(await sessions.send('e', { message: 'hi' }));
    await sessions.suspend('e');
    assert.deepEqual(seen, ['updated:preparing', 'updated:idle', 'updated:busy', 'updated:idle', 'updated:suspended']);
    unsubscribe();
    await sessions.close('e');
    assert.equal(seen.length, 5);
    await sessions.shutdown();
  });

  test('unknown ids get SessionNotFoundError', async () => {
    const { sessions } = testManager();
    assert.equal(await sessions.get('nope'), undefined);
    for (const call of [
      () => sessions.send('nope', { message: 'x' }),
      () => sessions.update('nope', { metadata: {} }),
      () => sessions.update('nope', { metadata: (m) => m }),
      () => sessions.interrupt('nope'),
      () => sessions.suspend('nope'),
      () => sessions.close('nope'),
      () => sessions.delete('nope'),
      () => sessions.continue('nope', { toolApprovalContinuations: [] }),
    ]) {
      await assert.rejects(call(), (error) => {
        assert.ok(SessionNotFoundError.isInstance(error), String(error));
        assert.equal(error.message, 'No session nope.');
        assert.equal(error.sessionId, 'nope');
        assert.equal(error.statusCode, 404);
        return true;
      });
    }
    await sessions.shutdown();
  });
});

describe('shutdown()', () => {
  test('cuts turns short, suspends every live session, then refuses everything', async () => {
    const { sessions, sandboxes } = testManager({ fakeAgent: createFakeAgent({ turns: [{ waitForAbort: true }] }) });
    await sessions.create({ id: 'busy', metadata: {} });
    await sessions.create({ id: 'idle', metadata: {} });
    const turn = await sessions.send('busy', { message: 'hi' });
    await untilStatus(sessions, 'idle', 'idle');
    await sessions.shutdown();
    const { chunks, session } = await readTurn(turn);
    assert.deepEqual(chunks.at(-1), {
      type: 'abort',
      reason: 'The turn was cut short: the application stopped. Send the message again.',
    });
    // The cut turn wrote nothing itself: its done gives the session the shutdown suspended.
    assert.equal(session.status, 'suspended');
    assert.equal(session.error, 'The turn was cut short: the application stopped. Send the message again.');
    assert.deepEqual(sandboxes.log.at(-1), ['shutdown']);
    await assert.rejects(sessions.list(), (error) => {
      assert.ok(SessionError.isInstance(error));
      assert.equal(error.message, 'The session manager is shut down.');
      return true;
    });
  });

  test('the next manager on the same store resumes the sessions on their next message', async () => {
    const store = createMemorySessionStore();
    const first = testManager({ store });
    await first.sessions.create({ id: 'kept', metadata: { title: 'kept' } });
    await readTurn(await first.sessions.send('kept', { message: 'remember me' }));
    await first.sessions.shutdown();
    assert.equal((await store.get('kept')).status, 'suspended');
    assert.equal((await store.getResumeState('kept')).type, 'resume-session');
    const second = testManager({ store });
    const { session } = await readTurn(await second.sessions.send('kept', { message: 'back' }));
    assert.equal(session.status, 'idle');
    assert.equal((await store.getResumeState('kept')), undefined, 'the resume state goes with the suspension');
    await second.sessions.shutdown();
  });

  test('a session still preparing: failed, The application stopped before the session was ready.', async () => {
    const gate = createDeferred();
    const store = createMemorySessionStore();
    const { sessions } = testManager({ store, fakeAgent: createFakeAgent({ createSession: [{ gate: gate.promise }] }) });
    await sessions.create({ id: 'p', metadata: {} });
    await sessions.shutdown();
    const record = await store.get('p');
    assert.equal(record.status, 'failed');
    assert.equal(record.error, 'The application stopped before the session was ready.');
    gate.resolve();
  });
});

describe('a crash', () => {
  test('sessions a crashed process left live become interrupted at the next start', async (t) => {
    const store = createMemorySessionStore();
    const crashed = testManager({ store, fakeAgent: createFakeAgent({ turns: [{ hold: new Promise(() => {}), text: 'half' }] }), });
    t.after(() => crashed.sessions.shutdown());
    await crashed.sessions.create({ id: 'busy', metadata: {} });
    await crashed.sessions.create({ id: 'idle', metadata: {} });
    await untilStatus(crashed.sessions, 'idle', 'idle');
    await crashed.sessions.send('busy', { message: 'hi' });
    crashed.agent.script.createSession.push({ gate: new Promise(() => {}) });
    await crashed.sessions.create({ id: 'preparing', metadata: {} });
    await until(() => crashed.agent.calls.some((c) => c.method === 'createSession' && c.sessionId === 'preparing'));
    await crashed.sessions.create({ id: 'suspended', metadata: {} });
    await untilStatus(crashed.sessions, 'suspended', 'idle');
    await crashed.sessions.suspend('suspended');
    // A new manager on the same store: the first one "crashed" (it is simply abandoned).
    const next = testManager({ store });
    const list = await next.sessions.list();
    const byId = Object.fromEntries(list.map((s) => [s.id, s]));
    assert.equal(byId.busy.status, 'interrupted');
    assert.equal(byId.busy.error, 'The application stopped without suspending the session.');
    assert.equal(byId.idle.status, 'interrupted');
    assert.equal(byId.preparing.status, 'interrupted');
    assert.equal(byId.preparing.error, 'The application stopped without suspending the session.');
    assert.equal(byId.suspended.status, 'suspended', 'a suspended session is kept as it is');
    await conflict(next.sessions.send('busy', { message: 'x' }), 'interrupted',
      'The session is interrupted: The application stopped without suspending the session..');
    assert.equal((await next.sessions.get('busy')).messages[0].parts[0].text, 'hi', 'its conversation can still be read');
    await next.sessions.shutdown();
  });
});

describe('bad input', () => {
  test('every method checks its arguments: SessionInputError naming the field, nothing changed', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 'ok', metadata: {} });
    await untilStatus(sessions, 'ok', 'idle');
    const before = JSON.stringify(await sessions.get('ok'));
    const cases = [
      [() => sessions.send('ok', { message: 42 }), 'message'],
      [() => sessions.send('ok', { message: { role: 'user' } }), 'message.parts'],
      [() => sessions.send('ok', { message: { role: 'user', parts: [{ type: 3 }] } }), 'message.parts[0].type'],
      [() => sessions.send('ok', { message: { role: 'assistant', parts: [] } }), 'message.role'],
      [() => sessions.send('ok', { message: 'x', prompt: 5 }), 'prompt'],
      [() => sessions.send('ok', { message: 'x', abortSignal: {} }), 'abortSignal'],
      [() => sessions.send('', { message: 'x' }), 'id'],
      [() => sessions.send(5, { message: 'x' }), 'id'],
      [() => sessions.get(null), 'id'],
      [() => sessions.update('ok', { metadata: { x: () => 1, y: 1n } }), 'metadata'],
      [() => sessions.update('ok', {}), 'metadata'],
      [() => sessions.create({ id: '', metadata: {} }), 'id'],
      [() => sessions.continue('ok', { toolApprovalContinuations: 'x' }), 'toolApprovalContinuations'],
    ];
    for (const [call, path] of cases) {
      await assert.rejects(call(), (error) => {
        assert.ok(SessionInputError.isInstance(error), `${path}: ${error}`);
        assert.equal(error.path, path);
        return true;
      });
    }
    assert.equal(JSON.stringify(await sessions.get('ok')), before);
    await sessions.shutdown();
  });

  test('createSessionManager checks its options', () => {
    const sandboxes = testSandboxes();
    const cases = [
      [{ sandboxes }, 'agent'],
      [{ agent: () => {} }, 'sandboxes'],
      [{ agent: () => {}, sandboxes, idleTimeoutMs: -1 }, 'idleTimeoutMs'],
      [{ agent: () => {}, sandboxes, turnTimeoutMs: 'soon' }, 'turnTimeoutMs'],
      [{ agent: () => {}, sandboxes, suspendIdleWhenFull: 1 }, 'suspendIdleWhenFull'],
      [{ agent: () => {}, sandboxes, onError: 'x' }, 'onError'],
      [{ agent: () => {}, sandboxes, store: {} }, 'store.save'],
      [{ agent: () => {}, sandboxes, nope: 1 }, 'nope'],
      [{ agent: () => {}, sandboxes: { ...sandboxes, capacity: 0 } }, 'sandboxes.capacity'],
    ];
    for (const [options, path] of cases) {
      assert.throws(() => createSessionManager(options), (error) => {
        assert.ok(SessionInputError.isInstance(error), `${path}: ${error}`);
        assert.equal(error.path, path);
        return true;
      });
    }
  });
});
