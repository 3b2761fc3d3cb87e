// The records, as `ai-sdk-harness-sessions` 0.2.0 shapes them: ISO 8601 `createdAt`/`updatedAt`,
// `turns`, `usage` with its three counts from creation; kept across suspensions, resumes and a
// restart on SQLite; fields a store was given kept by every store (memory, SQLite, one written in
// JavaScript); and a SQLite file of harness-sessions 0.1 migrated in place.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { createMemorySessionStore, createSqliteSessionStore } from '../index.js';
import { pgStore, postgresSkip } from './support/postgres.mjs';
import { createFakeAgent, readTurn, streamAgent, testManager, testSandboxes, until, untilStatus } from './support/sessions.mjs';

const ZERO = { inputTokens: 0, outputTokens: 0, totalTokens: 0 };
const isIso = (text) => typeof text === 'string' && new Date(text).toISOString() === text;
const later = (a, b) => Date.parse(a) >= Date.parse(b);
const fixtures = new URL('./fixtures/stores/', import.meta.url).pathname;
const tempDir = () => mkdtempSync(join(tmpdir(), 'hs-records-'));
const approval = (pending, approved = true) => ({ type: 'tool-approval-response', approvalId: pending.approvalId, approved });

/** A record of the reference's shape, with fields no version of the package knows. */
function foreignRecord(id, status = 'closed') {
  return {
    id,
    status,
    metadata: { title: 'from elsewhere', nested: { list: [1, 'two', null] } },
    createdAt: '2026-01-02T03:04:05.678Z',
    updatedAt: '2026-01-02T03:04:06.000Z',
    turns: 3,
    usage: { inputTokens: 10, outputTokens: 20, totalTokens: 30 },
    messages: [
      { id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hello' }] },
      { id: 'a1', role: 'assistant', parts: [{ type: 'text', text: 'hi', state: 'done' }], extra: { kept: true } },
    ],
    owner: { name: 'ada', roles: ['admin'] },
    archived: false,
    score: 0.125,
  };
}

function summaryOf({ messages, ...summary }) {
  return summary;
}

describe('the record of a session', () => {
  test('has the reference shape from create() on, and counts turns and usage as it goes', async () => {
    const agent = createFakeAgent({
      turns: [
        { text: 'one', usage: { inputTokens: 5, outputTokens: 7, totalTokens: 12 } },
        { approvals: [{ toolName: 'bash', input: { command: 'ls' } }], usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 } },
        { text: 'ran it', usage: { inputTokens: 2 } },
        { fail: new Error('the model is down') },
        { text: 'back', usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 } },
      ],
    });
    const { sessions } = testManager({ fakeAgent: agent });
    const created = await sessions.create({ id: 'r', metadata: { title: 'T' } });
    assert.deepEqual(Object.keys(created).sort(), ['createdAt', 'id', 'metadata', 'status', 'turns', 'updatedAt', 'usage']);
    assert.ok(isIso(created.createdAt) && created.updatedAt === created.createdAt, JSON.stringify(created));
    assert.equal(created.turns, 0);
    assert.deepEqual(created.usage, ZERO);
    await untilStatus(sessions, 'r', 'idle');

    const first = await readTurn(await sessions.send('r', { message: 'a' }));
    assert.equal(first.session.turns, 1);
    assert.deepEqual(first.session.usage, { inputTokens: 5, outputTokens: 7, totalTokens: 12 });
    assert.ok(isIso(first.session.updatedAt) && later(first.session.updatedAt, created.updatedAt));

    const paused = await readTurn(await sessions.send('r', { message: 'b' }));
    assert.equal(paused.session.status, 'awaiting-input');
    assert.equal(paused.session.turns, 2, 'a turn paused on input counts');
    const answered = await readTurn(await sessions.continue('r', { toolApprovalContinuations: [approval(paused.session.pendingInput.approvals[0])] }));
    assert.equal(answered.session.status, 'idle');
    assert.equal(answered.session.turns, 3, 'continue() is a turn of its own');
    // The fake agent reports its default counts for those a turn's script leaves out.
    assert.deepEqual(answered.session.usage, { inputTokens: 8, outputTokens: 10, totalTokens: 17 });

    // The agent refused the turn before any stream: it does not count (whether send() rejects, as
    // the reference's does, or the turn ends on the error).
    await sessions.send('r', { message: 'c' }).then(readTurn, () => {});
    await untilStatus(sessions, 'r', 'idle');
    assert.equal((await sessions.get('r')).turns, 3);

    // update() is not activity: updatedAt and the order of list() stay.
    await sessions.create({ id: 'newer', metadata: {} });
    await untilStatus(sessions, 'newer', 'idle');
    const before = await sessions.get('r');
    const updated = await sessions.update('r', { metadata: { title: 'renamed' } });
    assert.equal(updated.updatedAt, before.updatedAt);
    assert.deepEqual(updated.metadata, { title: 'renamed' });
    assert.deepEqual((await sessions.list()).map((s) => s.id), ['newer', 'r']);

    // Suspended and resumed: turns and usage kept.
    const suspended = await sessions.suspend('r');
    assert.equal(suspended.status, 'suspended');
    assert.equal(suspended.turns, 3);
    assert.ok(later(suspended.updatedAt, before.updatedAt));
    const resumed = await readTurn(await sessions.send('r', { message: 'd' }));
    assert.equal(resumed.session.turns, 4);
    assert.deepEqual(resumed.session.usage, { inputTokens: 9, outputTokens: 11, totalTokens: 19 });
    const record = await sessions.get('r');
    assert.deepEqual(summaryOf(record), resumed.session);
    assert.deepEqual((await sessions.list()).map((s) => s.id), ['r', 'newer'], 'newest updatedAt first');
    await sessions.shutdown();
  });

  test('a turn approve carries through its continuations counts once, its usage summed over them', async () => {
    const agent = createFakeAgent({
      turns: [
        { approvals: [{ toolName: 'bash', input: { command: 'ls' } }], usage: { inputTokens: 1, outputTokens: 2, totalTokens: 3 } },
        { text: 'done', usage: { inputTokens: 10, outputTokens: 20, totalTokens: 30 } },
      ],
    });
    const { sessions } = testManager({ fakeAgent: agent, approve: () => ({ approved: true }) });
    await sessions.create({ id: 'a', metadata: {} });
    const { session } = await readTurn(await sessions.send('a', { message: 'go' }));
    assert.equal(session.status, 'idle');
    assert.equal(agent.calls.filter((c) => c.method === 'continueStream').length, 1, 'approve continued the turn');
    assert.equal(session.turns, 1);
    assert.deepEqual(session.usage, { inputTokens: 11, outputTokens: 22, totalTokens: 33 });
    await sessions.shutdown();
  });

  test('is kept across a restart on SQLite: times, turns, usage', async () => {
    const path = join(tempDir(), 'sessions.db');
    const first = testManager({ store: createSqliteSessionStore({ path }) });
    await first.sessions.create({ id: 'k', metadata: {} });
    await readTurn(await first.sessions.send('k', { message: 'a' }));
    const done = await readTurn(await first.sessions.send('k', { message: 'b' }));
    await first.sessions.shutdown();

    const store = createSqliteSessionStore({ path });
    const stored = await store.get('k');
    assert.equal(stored.status, 'suspended');
    assert.equal(stored.createdAt, done.session.createdAt);
    assert.ok(isIso(stored.updatedAt) && later(stored.updatedAt, done.session.updatedAt));
    assert.equal(stored.turns, 2);
    assert.deepEqual(stored.usage, { inputTokens: 2, outputTokens: 4, totalTokens: 6 });
    const second = testManager({ store });
    const again = await readTurn(await second.sessions.send('k', { message: 'c' }));
    assert.equal(again.session.turns, 3);
    assert.deepEqual(again.session.usage, { inputTokens: 3, outputTokens: 6, totalTokens: 9 });
    assert.equal(again.session.createdAt, done.session.createdAt);
    await second.sessions.shutdown();
  });
});

describe('every store keeps the fields it is given', () => {
  for (const [name, open, skip = false] of [
    ['the memory store', () => createMemorySessionStore()],
    ['the SQLite store', () => createSqliteSessionStore({ path: join(tempDir(), 's.db') })],
    ['the PostgreSQL store', () => pgStore(), postgresSkip],
  ]) {
    test(`${name}: a record of the reference's shape, extra fields and all, round-trips unchanged`, { skip }, async () => {
      const store = open();
      const record = foreignRecord('f');
      await store.save(record, undefined);
      assert.deepEqual(await store.get('f'), record);
      assert.deepEqual(await store.list(), [summaryOf(record)]);
      // Copied in and out: changing what was saved or read changes nothing kept.
      record.owner.name = 'changed';
      const read = await store.get('f');
      assert.equal(read.owner.name, 'ada');
      read.owner.name = 'changed too';
      assert.equal((await store.get('f')).owner.name, 'ada');
      // A record without turns or usage (as 0.1 wrote them) reads with zeros; epoch milliseconds
      // read as ISO 8601.
      await store.save({ id: 'old', status: 'closed', metadata: {}, createdAt: 1_700_000_000_000, updatedAt: 1_700_000_000_001, messages: [] });
      assert.deepEqual(await store.get('old'), {
        id: 'old',
        status: 'closed',
        metadata: {},
        createdAt: '2023-11-14T22:13:20.000Z',
        updatedAt: '2023-11-14T22:13:20.001Z',
        turns: 0,
        usage: ZERO,
        messages: [],
      });
      assert.deepEqual((await store.list()).map((s) => s.id), ['f', 'old'], 'newest updatedAt first');
    });
  }

  test('the manager keeps them, over a store written in JavaScript, through a resume and a turn', async () => {
    // A store as the reference's memory store is: a Map, copies in and out.
    const records = new Map();
    const states = new Map();
    const store = {
      async save(record, resumeState) {
        records.set(record.id, structuredClone(record));
        if (resumeState === undefined) states.delete(record.id);
        else states.set(record.id, structuredClone(resumeState));
      },
      async get(id) {
        return records.has(id) ? structuredClone(records.get(id)) : undefined;
      },
      async list() {
        return [...records.values()].map(({ messages, ...summary }) => structuredClone(summary));
      },
      async getResumeState(id) {
        return states.get(id);
      },
      async delete(id) {
        records.delete(id);
        states.delete(id);
      },
    };
    const record = foreignRecord('js', 'suspended');
    await store.save(record, { type: 'resume-session', harnessId: 'fake', specificationVersion: 'harness-v1', data: { sessionId: 'js', prompts: ['hello'] } });
    const { sessions } = testManager({ store });
    assert.deepEqual(await sessions.get('js'), record);
    assert.deepEqual(await sessions.list(), [summaryOf(record)]);
    const { session } = await readTurn(await sessions.send('js', { message: 'and now?' }));
    assert.equal(session.turns, 4);
    assert.deepEqual(session.usage, { inputTokens: 11, outputTokens: 22, totalTokens: 33 });
    assert.deepEqual(session.owner, record.owner);
    const saved = records.get('js');
    assert.deepEqual([saved.owner, saved.archived, saved.score], [record.owner, false, 0.125], 'written back with its fields');
    assert.equal(saved.createdAt, record.createdAt);
    assert.ok(isIso(saved.updatedAt) && later(saved.updatedAt, record.updatedAt));
    assert.deepEqual(saved.messages.slice(0, 2), record.messages);
    await sessions.shutdown();
  });

  for (const [name, open, skip = false] of [
    ['the SQLite store', () => createSqliteSessionStore({ path: join(tempDir(), 's.db') })],
    ['the PostgreSQL store', () => pgStore(), postgresSkip],
  ]) {
    test(`the manager keeps them over ${name} too`, { skip }, async () => {
      const store = open();
      const record = foreignRecord('sq', 'suspended');
      await store.save(record, { type: 'resume-session', harnessId: 'fake', specificationVersion: 'harness-v1', data: { sessionId: 'sq', prompts: [] } });
      const { sessions } = testManager({ store });
      const { session } = await readTurn(await sessions.send('sq', { message: 'hi' }));
      assert.equal(session.turns, 4);
      const stored = await store.get('sq');
      assert.deepEqual([stored.owner, stored.archived, stored.score], [record.owner, false, 0.125]);
      await sessions.shutdown();
    });
  }
});

describe('list() again, after writes', () => {
  for (const [name, open, skip = false] of [
    ['the memory store', () => createMemorySessionStore()],
    ['the SQLite store', () => createSqliteSessionStore({ path: join(tempDir(), 's.db') })],
    ['the PostgreSQL store', () => pgStore(), postgresSkip],
  ]) {
    test(`${name}: each list() shows every write and delete since the last, in copies of its own`, { skip }, async () => {
      const store = open();
      const saved = (id, at, title) => store.save({ id, status: 'closed', metadata: { title, tags: ['a'] }, createdAt: at, updatedAt: at, messages: [] });
      await saved('a', 1_000, 'first');
      await saved('b', 2_000, 'second');
      const first = await store.list();
      assert.deepEqual(first.map((s) => [s.id, s.metadata.title]), [['b', 'second'], ['a', 'first']]);
      // What a caller does to a listed summary reaches neither the store nor the next list().
      first[0].metadata.title = 'changed';
      first[0].metadata.tags.push('b');
      first[1].status = 'idle';
      const second = await store.list();
      assert.deepEqual(second.map((s) => [s.id, s.status, s.metadata.title, s.metadata.tags]), [['b', 'closed', 'second', ['a']], ['a', 'closed', 'first', ['a']]]);
      assert.notEqual(second[0], first[0]);
      // Nothing written since: the same list again, and still copies of its own.
      second[0].metadata.tags.length = 0;
      second.pop();
      const third = await store.list();
      assert.deepEqual(third.map((s) => [s.id, s.metadata.tags]), [['b', ['a']], ['a', ['a']]]);
      assert.notEqual(third[0], second[0]);
      // A rewrite, a new session and a delete since: all three show.
      await saved('a', 3_000, 'rewritten');
      await saved('c', 500, 'third');
      await store.delete('b');
      assert.deepEqual((await store.list()).map((s) => [s.id, s.metadata.title]), [['a', 'rewritten'], ['c', 'third']]);
      // A delete alone is a change too, and so is a save that changes no place in the list.
      await store.delete('c');
      assert.deepEqual((await store.list()).map((s) => s.id), ['a']);
      await saved('c', 500, 'back');
      await saved('a', 3_000, 'rewritten again');
      assert.deepEqual((await store.list()).map((s) => [s.id, s.metadata.title]), [['a', 'rewritten again'], ['c', 'back']]);
      // Two at once each see the whole list.
      const [x, y] = await Promise.all([store.list(), store.list()]);
      assert.deepEqual(x, y);
      assert.equal(x.length, 2);
      assert.notEqual(x[0], y[0]);
      await store.close();
    });
  }

  test('the SQLite store: a list() after another store wrote the file while it was closed shows that write', async () => {
    const path = join(tempDir(), 's.db');
    const store = createSqliteSessionStore({ path });
    const saved = (on, id, at) => on.save({ id, status: 'closed', metadata: {}, createdAt: at, updatedAt: at, messages: [] });
    await saved(store, 'a', 1_000);
    assert.deepEqual((await store.list()).map((s) => s.id), ['a']);
    await store.close();
    const other = createSqliteSessionStore({ path });
    await saved(other, 'b', 2_000);
    await other.delete('a');
    await other.close();
    assert.deepEqual((await store.list()).map((s) => s.id), ['b']);
    await store.close();
  });

  test('an answer that nothing changed gives copies of the last list, or asks again whole when that list is not of its stamp', async () => {
    const { Summaries } = createRequire(import.meta.url)('../js/summaries.js');
    const summaries = new Summaries();
    const asked = [];
    const answers = ['[2,[[2,{"id":"b","m":{"k":[1]}}],[1,{"id":"a"}]]]', '[2]', '[2]', '[5]', '[6,[[6,{"id":"c"}]]]'];
    const fetch = (known) => {
      asked.push(known);
      return answers.shift();
    };
    const first = await summaries.list(fetch);
    first[0].m.k.push(2);
    first.pop();
    const second = await summaries.list(fetch);
    assert.deepEqual(second, [{ id: 'b', m: { k: [1] } }, { id: 'a' }]);
    second[1].id = 'changed';
    assert.deepEqual(await summaries.list(fetch), [{ id: 'b', m: { k: [1] } }, { id: 'a' }]);
    // "Nothing changed since 5": not the stamp of the list kept.
    assert.deepEqual(await summaries.list(fetch), [{ id: 'c' }]);
    assert.deepEqual(asked, [0, 2, 2, 2, 0]);
  });

  test('summaries listed no more are let go of, those still listed kept', async () => {
    const { Summaries } = createRequire(import.meta.url)('../js/summaries.js');
    const summaries = new Summaries();
    const asked = [];
    const answers = [];
    const fetch = (known) => {
      asked.push(known);
      return answers.shift();
    };
    // Four answers of 100 summaries each, every one rewritten since the last (new stamps), the
    // first of them ("keep") never rewritten.
    let next = 1;
    const keep = next++;
    for (let round = 0; round < 4; round++) {
      const rows = [[keep, { id: 'keep' }], ...Array.from({ length: 99 }, (_, i) => [next++, { id: `s${i}`, round }])];
      answers.push(JSON.stringify([next - 1, round === 0 ? rows : [keep, ...rows.slice(1)]]));
      const list = await summaries.list(fetch);
      assert.equal(list.length, 100);
      assert.deepEqual(list[1], { id: 's0', round });
    }
    // The summaries of the first round are let go of: an answer naming one is asked again whole.
    answers.push(`[${next - 1},[${keep},2]]`, JSON.stringify([next - 1, [[keep, { id: 'keep' }]]]));
    assert.deepEqual(await summaries.list(fetch), [{ id: 'keep' }]);
    assert.deepEqual(asked.slice(-2), [next - 1, 0]);
    // The last list's stamps are kept.
    answers.push(`[${next - 1},[${keep}]]`);
    assert.deepEqual(await summaries.list(fetch), [{ id: 'keep' }]);
  });

  test('an answer naming a summary no longer kept is asked again whole', async () => {
    const { Summaries } = createRequire(import.meta.url)('../js/summaries.js');
    const summaries = new Summaries();
    const asked = [];
    const answers = [
      '[2,[[2,{"id":"b","m":{"k":[1,{"x":null}]}}],[1,{"id":"a"}]]]',
      // Stamps 1 and 2 kept; 9 was never given.
      '[3,[2,9]]',
      '[3,[[3,{"id":"c"}],[2,{"id":"b"}]]]',
      '[3,[3,2]]',
    ];
    const fetch = (known) => {
      asked.push(known);
      return answers.shift();
    };
    const first = await summaries.list(fetch);
    assert.deepEqual(first, [{ id: 'b', m: { k: [1, { x: null }] } }, { id: 'a' }]);
    first[0].m.k[1].x = 'changed';
    assert.deepEqual(await summaries.list(fetch), [{ id: 'c' }, { id: 'b' }]);
    assert.deepEqual(await summaries.list(fetch), [{ id: 'c' }, { id: 'b' }]);
    assert.deepEqual(asked, [0, 2, 0, 3]);
  });

  test('a manager: list() after each change shows it, in copies of its own', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 'one', metadata: { title: 'one' } });
    await sessions.create({ id: 'two', metadata: { title: 'two' } });
    const first = await sessions.list();
    assert.deepEqual(first.map((s) => s.id).sort(), ['one', 'two']);
    first[0].metadata.title = 'changed';
    assert.deepEqual((await sessions.list()).map((s) => s.metadata.title).sort(), ['one', 'two']);
    await sessions.update('one', { metadata: { title: 'one, renamed' } });
    await sessions.delete('two');
    assert.deepEqual((await sessions.list()).map((s) => [s.id, s.metadata.title]), [['one', 'one, renamed']]);
    await sessions.shutdown();
  });
});

describe('a SQLite file of harness-sessions 0.1', () => {
  // `fixtures/stores/v2.db` was written by 0.1 (see write-v2.mjs); `v2.json` is what 0.1 read back.
  const before = JSON.parse(readFileSync(join(fixtures, 'v2.json'), 'utf8'));
  const copy = () => {
    const path = join(tempDir(), 'v2.db');
    copyFileSync(join(fixtures, 'v2.db'), path);
    return path;
  };

  test('is migrated in place: every record of the reference shape, nothing else changed', async () => {
    const store = createSqliteSessionStore({ path: copy() });
    for (const [id, { record: old, resumeState }] of Object.entries(before)) {
      const turns = old.messages.filter((m) => m.role === 'assistant').length;
      const usage = {
        inputTokens: old.usage?.inputTokens ?? 0,
        outputTokens: old.usage?.outputTokens ?? 0,
        totalTokens: old.usage?.totalTokens ?? 0,
      };
      const expected = {
        ...old,
        createdAt: new Date(old.createdAt).toISOString(),
        updatedAt: new Date(old.updatedAt).toISOString(),
        turns,
        usage,
      };
      const got = await store.get(id);
      assert.deepEqual(got, expected, id);
      assert.deepEqual(Object.keys(got).slice(0, 7), ['id', 'status', 'metadata', 'createdAt', 'updatedAt', 'turns', 'usage']);
      assert.deepEqual((await store.getResumeState(id)) ?? null, resumeState, `resume state of ${id}`);
    }
    const order = Object.entries(before)
      .sort(([a, x], [b, y]) => y.record.updatedAt - x.record.updatedAt || (a < b ? -1 : 1))
      .map(([id]) => id);
    assert.deepEqual((await store.list()).map((s) => s.id), order);
  });

  test('serves a manager: the live session of the crash is interrupted, a suspended one resumes', async () => {
    const store = createSqliteSessionStore({ path: copy() });
    const { sessions } = testManager({ store, sandboxes: testSandboxes() });
    await until(async () => (await sessions.get('awaiting'))?.status === 'interrupted');
    const { session } = await readTurn(await sessions.send('suspended', { message: 'what was it?' }));
    assert.equal(session.status, 'idle');
    assert.equal(session.turns, 2);
    assert.deepEqual(session.usage, { inputTokens: 8, outputTokens: 4, totalTokens: 12 });
    assert.equal(session.createdAt, new Date(before.suspended.record.createdAt).toISOString());
    await sessions.shutdown();
  });
});

test('a turn of many deltas of interleaved parts is stored as its client read it', async () => {
  const words = (n, tag) => Array.from({ length: n }, (_, i) => `${tag}${i} `);
  const agent = streamAgent(async function* () {
    yield { type: 'start-step' };
    yield { type: 'reasoning-start', id: 'r' };
    yield { type: 'text-start', id: 't' };
    yield { type: 'text-start', id: 'u' };
    for (const [i, word] of words(600, 'w').entries()) {
      yield { type: 'text-delta', id: i % 3 === 0 ? 'u' : 't', delta: word };
      if (i % 50 === 0) yield { type: 'reasoning-delta', id: 'r', delta: word };
      // A delta with provider metadata, and deltas read in bursts (a batch may span them).
      if (i === 300) yield { type: 'text-delta', id: 't', delta: '[meta]', providerMetadata: { p: { k: 1 } } };
      if (i % 97 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    yield { type: 'text-end', id: 'u' };
    yield { type: 'text-end', id: 't' };
    yield { type: 'reasoning-end', id: 'r' };
    yield { type: 'finish-step' };
    yield { type: 'finish', finishReason: 'stop' };
  });
  const { sessions } = testManager({ fakeAgent: agent });
  await sessions.create({ id: 'deltas', metadata: {} });
  const turn = await sessions.send('deltas', { message: { id: 'q', role: 'user', parts: [{ type: 'text', text: 'go' }] } });
  const { message, chunks } = await readTurn(turn);
  assert.ok(chunks.filter((c) => c.type === 'text-delta').length > 600);
  const stored = (await sessions.get('deltas')).messages.at(-1);
  // What was stored is what the client's reader built (as JSON: no undefined fields).
  assert.deepEqual(stored.parts, JSON.parse(JSON.stringify(message.parts)));
  assert.equal(stored.parts.find((p) => p.type === 'text' && p.providerMetadata !== undefined)?.providerMetadata.p.k, 1);
  await sessions.shutdown();
});
