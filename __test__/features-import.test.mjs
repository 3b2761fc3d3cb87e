// Imported conversations: create({ id, metadata, initialHistory }) in the portable format
// ({ type: 'user' | 'assistant', text }, { type: 'tool_call', callId, name, arguments },
// { type: 'tool_result', callId, output }). With the fake agent: the items become UIMessages
// (get()), every rule refused naming the item and the rule with the store unchanged, each bound at
// its limit and one past, the transcript told to the agent with the first turn only (and kept for
// the next one when the agent gave no stream), kept across a restart on the SQLite store. With the
// real HarnessAgent (scripted harness) on localSandbox() and dockerSandbox() (skipped without
// Docker unless HARNESS_SESSIONS_REQUIRE_DOCKER=1): the agent sees the imported conversation on
// its first turn and not later.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { HarnessAgent } from '@ai-sdk/harness/agent';
import {
  SessionConflictError,
  SessionInputError,
  createSessionManager,
  createSqliteSessionStore,
  dockerSandbox,
  localSandbox,
  sharedSandbox,
} from '../index.js';
import { createScriptedHarness } from '../testing/index.mjs';
import { dockerHost, dockerSkipFor, image, removeContainers } from './support/docker.mjs';
import { createFakeAgent, readTurn, testManager, untilStatus } from './support/sessions.mjs';

const textOf = (message) =>
  message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
const promptsOf = (agent) => agent.calls.filter((c) => c.method === 'stream').map((c) => c.options.prompt);

const user = (text) => ({ type: 'user', text });
const assistant = (text) => ({ type: 'assistant', text });
const call = (callId, args = { name: 'Atlas' }, name = 'lookup') => ({ type: 'tool_call', callId, name, arguments: args });
const result = (callId, output = '{"available":false}') => ({ type: 'tool_result', callId, output });

/** The example of the portable format. */
const atlas = [user('Check Atlas.'), call('old-lookup'), result('old-lookup'), assistant('Atlas is taken.')];

/** Ids from a counter, so that the messages' ids can be checked. */
function counterIds() {
  let n = 0;
  return () => `id-${++n}`;
}

/** Asserts that `promise` is refused with a SessionInputError at `path` whose message says `rule`. */
async function refused(promise, path, rule) {
  await assert.rejects(promise, (error) => {
    assert.ok(SessionInputError.isInstance(error), String(error));
    assert.equal(error.path, path);
    assert.ok(error.message.startsWith(`${path}: `), error.message);
    assert.match(error.message, rule);
    return true;
  });
}

/** Asserts that the store holds no session `id` and nothing else. */
async function unchanged(sessions, id) {
  assert.equal(await sessions.get(id), undefined);
  assert.deepEqual(await sessions.list(), []);
}

describe('initialHistory (fake agent)', () => {
  test('the items become the UIMessages get() lists, tool calls with their outputs', async () => {
    const { sessions, agent } = testManager({ generateId: counterIds() });
    const created = await sessions.create({ id: 'a', metadata: { title: 't' }, initialHistory: [...atlas, user('And Borealis?'), assistant('Free.')] });
    assert.equal(created.importPending, true);
    const record = await sessions.get('a');
    assert.deepEqual(record.messages, [
      { id: 'id-1', role: 'user', parts: [{ type: 'text', text: 'Check Atlas.' }] },
      {
        id: 'id-2',
        role: 'assistant',
        parts: [
          { type: 'step-start' },
          { type: 'tool-lookup', toolCallId: 'old-lookup', state: 'output-available', input: { name: 'Atlas' }, output: '{"available":false}' },
          { type: 'step-start' },
          { type: 'text', text: 'Atlas is taken.', state: 'done' },
        ],
      },
      { id: 'id-3', role: 'user', parts: [{ type: 'text', text: 'And Borealis?' }] },
      { id: 'id-4', role: 'assistant', parts: [{ type: 'step-start' }, { type: 'text', text: 'Free.', state: 'done' }] },
    ]);
    assert.equal(record.turns, 0);
    assert.deepEqual((await sessions.list()).map((s) => s.importPending), [true]);
    await untilStatus(sessions, 'a', 'idle');
    assert.deepEqual(promptsOf(agent), [], 'imported calls never run, nothing reaches the agent before a turn');
  });

  test('an empty transcript imports nothing', async () => {
    const { sessions } = testManager();
    const created = await sessions.create({ id: 'e', metadata: {}, initialHistory: [] });
    assert.equal(created.importPending, undefined);
    assert.deepEqual((await sessions.get('e')).messages, []);
  });

  test('the agent is told the imported conversation with the first turn only, not as the user message', async () => {
    const { sessions, agent } = testManager();
    await sessions.create({ id: 'f', metadata: {}, initialHistory: atlas });
    const first = await readTurn(await sessions.send('f', { message: 'And Borealis?', instructionAddendum: 'Be brief.' }));
    const [prompt] = promptsOf(agent);
    assert.match(prompt, /^<imported-conversation>\n/);
    assert.ok(
      prompt.includes('User: Check Atlas.\nTool call lookup({"name":"Atlas"}) → {"available":false}\nAssistant: Atlas is taken.\n</imported-conversation>\n\nAnd Borealis?'),
      prompt,
    );
    assert.match(prompt, /Be brief\.\n<\/instructions-for-this-turn>$/, 'the addendum after the prompt');
    const record = await sessions.get('f');
    assert.equal(record.messages.length, 4);
    assert.deepEqual(record.messages[2].parts, [{ type: 'text', text: 'And Borealis?' }], 'the user message as written');
    assert.equal(record.messages[3].id, first.message.id);
    assert.equal(record.importPending, undefined, 'the mark went with the first turn');
    assert.equal(first.session.importPending, undefined);
    await readTurn(await sessions.send('f', { message: 'again' }));
    assert.equal(promptsOf(agent)[1], 'again', 'not told twice');
  });

  test('a first turn the agent gave no stream for leaves the transcript for the next one', async () => {
    const agent = createFakeAgent({ turns: [{ fail: new Error('the model is down') }] });
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 'g', metadata: {}, initialHistory: atlas });
    await assert.rejects(sessions.send('g', { message: 'first' }), /the model is down/);
    assert.equal((await sessions.get('g')).importPending, true);
    await readTurn(await sessions.send('g', { message: 'second' }));
    const prompts = promptsOf(agent);
    assert.equal(prompts.length, 2);
    assert.match(prompts[1], /^<imported-conversation>\nThe conversation so far[^]*User: Check Atlas\.[^]*\n\nsecond$/);
    assert.equal((await sessions.get('g')).importPending, undefined);
  });

  test('every rule is refused naming the item and the rule; the store is unchanged', async () => {
    const { sessions, agent } = testManager();
    const cases = [
      [[assistant('hi')], 'initialHistory[0].type', /starts with a user item/],
      [[call('a'), result('a')], 'initialHistory[0].type', /starts with a user item/],
      [[user('a'), call('a')], 'initialHistory[1]', /no result/],
      [[user('a'), call('a'), assistant('b'), call('b'), result('b')], 'initialHistory[1]', /"a" has no result/],
      [[user('a'), call('a'), user('b'), result('a')], 'initialHistory[1]', /before the next user item/],
      [[user('a'), result('a')], 'initialHistory[1].callId', /follows its call/],
      [[user('a'), result('a'), call('a')], 'initialHistory[1].callId', /follows its call/],
      [[user('a'), call('a'), result('a'), result('a')], 'initialHistory[3].callId', /has a result already/],
      [[user('a'), call('a'), result('a'), call('a'), result('a')], 'initialHistory[3].callId', /already the id of item 1/],
      [[user('a'), call('a', ['x']), result('a')], 'initialHistory[1].arguments', /must be an object/],
      [[user('a'), call('a', 'x'), result('a')], 'initialHistory[1].arguments', /must be an object/],
      [[user('a'), call('a', null), result('a')], 'initialHistory[1].arguments', /must be an object/],
      [[user('a'), { type: 'tool_call', callId: 'a', name: 'x' }], 'initialHistory[1].arguments', /missing/],
      [[user('a'), { type: 'tool_call', callId: '', name: 'x', arguments: {} }], 'initialHistory[1].callId', /nonempty string/],
      [[user('a'), { type: 'tool_call', callId: 'a', name: 3, arguments: {} }], 'initialHistory[1].name', /nonempty string/],
      [[user('a'), call('a'), { type: 'tool_result', callId: 'a' }], 'initialHistory[2].output', /missing/],
      [[{ type: 'system', text: 'a' }], 'initialHistory[0].type', /must be "user"/],
      [[{ text: 'a' }], 'initialHistory[0].type', /must be "user"/],
      [[{ type: 'user', text: 3 }], 'initialHistory[0].text', /must be a string/],
      [[{ type: 'user' }], 'initialHistory[0].text', /must be a string/],
      [[user('a\ud800b')], 'initialHistory[0].text', /lone surrogate/],
      [[user('a'), { type: 'assistant', text: 'b', reasoning: 'x' }], 'initialHistory[1].reasoning', /no field "reasoning"/],
      [['hello'], 'initialHistory[0]', /must be an object/],
      [[user('a'), null], 'initialHistory[1]', /must be an object/],
    ];
    for (const [initialHistory, path, rule] of cases) {
      await refused(sessions.create({ id: 'r', metadata: {}, initialHistory }), path, rule);
    }
    await assert.rejects(sessions.create({ id: 'r', metadata: {}, initialHistory: { 0: user('a') } }), (error) => {
      assert.ok(SessionInputError.isInstance(error));
      assert.equal(error.path, 'initialHistory');
      assert.match(error.message, /must be an array/);
      return true;
    });
    await unchanged(sessions, 'r');
    assert.deepEqual(agent.calls, [], 'nothing was opened');
  });

  test('each bound at its limit is accepted, one past refused', async () => {
    const { sessions } = testManager();
    let n = 0;
    async function bound(at, past, path, rule) {
      const id = `b${++n}`;
      await refused(sessions.create({ id, metadata: {}, initialHistory: past }), path, rule);
      assert.equal(await sessions.get(id), undefined, `${path}: nothing written`);
      await sessions.create({ id, metadata: {}, initialHistory: at });
      assert.ok((await sessions.get(id)).messages.length > 0);
    }
    // 256 items.
    const items = (count) => [user('a'), ...Array.from({ length: count - 1 }, () => assistant('b'))];
    await bound(items(256), items(257), 'initialHistory[256]', /at most 256 items/);
    // 256,000 UTF-8 bytes of text ('é' is two).
    const text = 'é'.repeat(128_000);
    await bound([user(text)], [user(`${text}a`)], 'initialHistory[0].text', /at most 256000 UTF-8 bytes/);
    // 256,000 bytes of arguments as JSON text: {"k":"…"} is 8 bytes around the value.
    const args = (bytes) => ({ k: 'a'.repeat(bytes - 8) });
    assert.equal(Buffer.byteLength(JSON.stringify(args(256_000))), 256_000);
    await bound(
      [user('a'), call('c', args(256_000)), result('c')],
      [user('a'), call('c', args(256_001)), result('c')],
      'initialHistory[1].arguments',
      /at most 256000 UTF-8 bytes/,
    );
    // 256,000 bytes of output: a string's text, anything else's JSON text.
    await bound(
      [user('a'), call('c'), result('c', 'a'.repeat(256_000))],
      [user('a'), call('c'), result('c', 'a'.repeat(256_001))],
      'initialHistory[2].output',
      /at most 256000 UTF-8 bytes/,
    );
    await bound(
      [user('a'), call('c'), result('c', { k: 'a'.repeat(256_000 - 8) })],
      [user('a'), call('c'), result('c', { k: 'a'.repeat(256_001 - 8) })],
      'initialHistory[2].output',
      /at most 256000 UTF-8 bytes/,
    );
    // 512,000 bytes in all.
    const half = 'a'.repeat(256_000);
    await bound([user(half), assistant(half), user('')], [user(half), assistant(half), user('a')], 'initialHistory[2]', /at most 512000 bytes in all/);
    // 32 levels of nesting, the arguments object the first.
    const nested = (levels) => {
      let value = {};
      for (let i = 1; i < levels; i += 1) value = { a: value };
      return value;
    };
    await bound(
      [user('a'), call('c', nested(32)), result('c')],
      [user('a'), call('c', nested(33)), result('c')],
      'initialHistory[1].arguments',
      /at most 32 levels deep/,
    );
    await bound(
      [user('a'), call('c'), result('c', nested(32))],
      [user('a'), call('c'), result('c', nested(33))],
      'initialHistory[2].output',
      /at most 32 levels deep/,
    );
    // Deeper than the engine's JSON parser reads into values (128): still the same clear error.
    await refused(
      sessions.create({ id: 'deep', metadata: {}, initialHistory: [user('a'), call('c', nested(1000)), result('c')] }),
      'initialHistory[1].arguments',
      /at most 32 levels deep/,
    );
    assert.equal(await sessions.get('deep'), undefined);
    assert.equal((await sessions.list()).length, n);
  });

  test('the transcript is checked before the id: a known id with a bad transcript is bad input, with a good one a conflict', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 'k', metadata: { v: 1 } });
    const before = await sessions.get('k');
    await refused(sessions.create({ id: 'k', metadata: {}, initialHistory: [assistant('x')] }), 'initialHistory[0].type', /user item/);
    await assert.rejects(sessions.create({ id: 'k', metadata: {}, initialHistory: atlas }), (error) => SessionConflictError.isInstance(error));
    const after = await sessions.get('k');
    assert.deepEqual(after.messages, before.messages);
    assert.deepEqual(after.metadata, { v: 1 });
    assert.equal(after.importPending, undefined);
  });

  test('kept across a restart on the SQLite store, the transcript still told with the first turn', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'hs-import-sqlite-')), 'sessions.db');
    const open = () => testManager({ store: createSqliteSessionStore({ path }) });
    const first = open();
    await first.sessions.create({ id: 's', metadata: {}, initialHistory: atlas });
    const imported = (await first.sessions.get('s')).messages;
    await untilStatus(first.sessions, 's', 'idle');
    await first.sessions.shutdown();

    const second = open();
    const kept = await second.sessions.get('s');
    assert.deepEqual(kept.messages, imported);
    assert.equal(kept.importPending, true);
    await readTurn(await second.sessions.send('s', { message: 'And Borealis?' }));
    const [prompt] = promptsOf(second.agent);
    assert.ok(prompt.includes('User: Check Atlas.') && prompt.endsWith('\n\nAnd Borealis?'), prompt);
    await second.sessions.shutdown();

    const third = open();
    const after = await third.sessions.get('s');
    assert.equal(after.importPending, undefined, 'the mark went with the first turn, in the store too');
    assert.deepEqual(after.messages.slice(0, 2), imported);
    await readTurn(await third.sessions.send('s', { message: 'again' }));
    assert.equal(promptsOf(third.agent)[0], 'again');
    await third.sessions.shutdown();
  });
});

// ─── The real HarnessAgent ────────────────────────────────────────────────────────────────────────

const dockerSkip = dockerSkipFor(test);
// The shared sandbox's container outlives shutdown() (a shared sandbox is kept): removed here.
const dockerPrefix = `hs-import-${process.pid}-`;
after(() => removeContainers(dockerPrefix));

for (const [name, backend, skip] of [
  ['localSandbox()', 'local', false],
  ['dockerSandbox()', 'docker', dockerSkip],
]) {
  describe(`initialHistory through HarnessAgent, with ${name}`, { skip }, () => {
    test('the agent sees the imported conversation on its first turn, not later; get() lists it', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'hs-import-harness-'));
      const provider =
        backend === 'docker'
          ? dockerSandbox({ image, host: dockerHost, namePrefix: dockerPrefix, network: 'host' })
          : localSandbox({ root: dir });
      const harness = createScriptedHarness({ wordDelayMs: 0 });
      const agent = new HarnessAgent({ harness, permissionMode: 'allow-reads' });
      const sessions = createSessionManager({ agent: () => agent, sandboxes: sharedSandbox({ open: provider, ports: [4611] }) });
      try {
        await sessions.create({ id: 'h', metadata: {}, initialHistory: atlas });
        const first = await readTurn(await sessions.send('h', { message: 'And Borealis?' }));
        const said = textOf(first.message);
        assert.match(said, /^You said: <imported-conversation>/);
        assert.ok(said.includes('User: Check Atlas.'), said);
        assert.ok(said.includes('Tool call lookup({"name":"Atlas"}) → {"available":false}'), said);
        assert.ok(said.includes('Assistant: Atlas is taken.'), said);
        assert.ok(said.endsWith('And Borealis?'), said);
        const second = await readTurn(await sessions.send('h', { message: 'again' }));
        assert.equal(textOf(second.message), 'You said: again');
        const record = await sessions.get('h');
        assert.deepEqual(
          record.messages.map((m) => [m.role, textOf(m)]),
          [
            ['user', 'Check Atlas.'],
            ['assistant', 'Atlas is taken.'],
            ['user', 'And Borealis?'],
            ['assistant', said],
            ['user', 'again'],
            ['assistant', 'You said: again'],
          ],
        );
        assert.equal(record.messages[1].parts[1].type, 'tool-lookup');
        assert.equal(record.turns, 2);
      } finally {
        await sessions.shutdown();
      }
    });
  });
}
