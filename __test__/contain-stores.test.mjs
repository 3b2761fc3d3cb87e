// An application's store held to its word (issue 25, item 7): a `save()` that never settles is an
// error after `storeTimeoutMs` (never a hang of its session) and is cut by `shutdown()` within
// `windDownMs`; a `get()` that answers another session's record is refused; a `null` in `list()`
// is set aside, reported to `onError` once, and every other call goes on.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createSessionManager, SessionError } from '../index.js';
import { createFakeAgent, testSandboxes } from './support/sessions.mjs';

/** A store in a Map, as an application writes one, with `faults` to make it misbehave. */
function appStore() {
  const records = new Map();
  const states = new Map();
  const faults = { hangSave: false, wrongGet: undefined, extraEntries: [] };
  const clone = (value) => (value === undefined ? undefined : structuredClone(value));
  return {
    records,
    faults,
    async save(record, resumeState) {
      if (faults.hangSave) return new Promise(() => {});
      records.set(record.id, clone(record));
      if (resumeState === undefined) states.delete(record.id);
      else states.set(record.id, clone(resumeState));
    },
    async get(id) {
      if (faults.wrongGet !== undefined && faults.wrongGet[id] !== undefined) return clone(records.get(faults.wrongGet[id]));
      return clone(records.get(id));
    },
    async list() {
      const summaries = [...records.values()].map(({ messages, ...summary }) => summary);
      return [...summaries, ...faults.extraEntries];
    },
    async getResumeState(id) {
      return clone(states.get(id));
    },
    async delete(id) {
      records.delete(id);
      states.delete(id);
    },
  };
}

async function drain(stream) {
  for await (const _ of stream);
}

function manager(store, options = {}) {
  const errors = [];
  const sessions = createSessionManager({
    agent: () => createFakeAgent(),
    sandboxes: testSandboxes(),
    store,
    onError: (error, context) => errors.push({ error, ...context }),
    ...options,
  });
  return { sessions, errors };
}

test('a save() that never settles: the call fails after storeTimeoutMs, and shutdown() returns within windDownMs', async () => {
  const store = appStore();
  const { sessions, errors } = manager(store, { storeTimeoutMs: 300, windDownMs: 1000 });
  const session = await sessions.create({});
  store.faults.hangSave = true;
  // The write that hangs is reported as a failed write; the session carries on from memory.
  const turn = await sessions.send(session.id, { message: 'hello' });
  await drain(turn.stream);
  const done = await turn.done;
  assert.equal(done.status, 'idle');
  assert.ok(
    errors.some(({ error, action }) => action === 'write' && /did not settle within 300 ms/.test(error.message)),
    JSON.stringify(errors.map(({ error, action }) => [action, error.message])),
  );
  // The store still hangs: shutdown() is bounded by windDownMs, not by the store.
  const { sessions: second, errors: secondErrors } = manager(store, { storeTimeoutMs: 600_000, windDownMs: 1000 });
  store.faults.hangSave = false;
  const other = await second.create({});
  store.faults.hangSave = true;
  const sending = second.send(other.id, { message: 'hello' }).then(async (t) => {
    await drain(t.stream);
    return t.done;
  });
  sending.catch(() => {});
  await new Promise((resolve) => setTimeout(resolve, 200));
  const started = Date.now();
  await second.shutdown().catch(() => {});
  const took = Date.now() - started;
  // Far under the store timeout (10 minutes): the wind-down bound it (1 s, plus a margin for CI).
  assert.ok(took < 15_000, `shutdown() took ${took} ms`);
  await sending.catch(() => {});
  assert.ok(
    secondErrors.some(({ action, error }) => action === 'write' && /wind-down|not called|did not settle/.test(error.message)),
    JSON.stringify(secondErrors.map(({ error, action }) => [action, error.message])),
  );
  store.faults.hangSave = false;
  await sessions.shutdown();
  console.log(`shutdown() with a save() that never settles, windDownMs 1000: ${took} ms`);
});

test("a get() that answers another session's record is refused", async () => {
  const store = appStore();
  const first = manager(store);
  const a = await first.sessions.create({ metadata: { name: 'a' } });
  const b = await first.sessions.create({ metadata: { name: 'b' } });
  await first.sessions.shutdown();
  const before = structuredClone(store.records.get(b.id));

  store.faults.wrongGet = { [a.id]: b.id };
  const { sessions, errors } = manager(store);
  await assert.rejects(sessions.get(a.id), (error) => {
    assert.match(error.message, new RegExp(`answered get\\(\\) of session ${a.id} with session ${b.id}`));
    assert.ok(SessionError.isInstance(error));
    return true;
  });
  await assert.rejects(sessions.send(a.id, { message: 'into the other one?' }));
  // Nothing was written into the other session.
  assert.deepEqual(store.records.get(b.id), before);
  assert.equal((await sessions.get(b.id)).metadata.name, 'b');
  await sessions.shutdown();
  assert.ok(errors.every(({ error }) => !/panic/i.test(String(error?.message))));
});

test('a null in list() is set aside and reported once; every other call goes on', async () => {
  const store = appStore();
  const { sessions, errors } = manager(store, { windDownMs: 1000 });
  const a = await sessions.create({});
  store.faults.extraEntries = [null, 42];
  const first = await sessions.list();
  assert.deepEqual(first.map((s) => s.id), [a.id]);
  const second = await sessions.list();
  assert.deepEqual(second.map((s) => s.id), [a.id]);
  const reported = errors.filter(({ action, error }) => action === 'read' && /not a session/.test(error.message));
  assert.equal(reported.length, 1, JSON.stringify(errors.map(({ error, action }) => [action, error.message])));
  assert.equal(reported[0].sessionId, undefined);
  const turn = await sessions.send(a.id, { message: 'still here' });
  await drain(turn.stream);
  assert.equal((await turn.done).status, 'idle');
  await sessions.create({});
  const started = Date.now();
  await sessions.shutdown();
  assert.ok(Date.now() - started < 15_000);
});
