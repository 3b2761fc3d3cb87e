// Structured answers (send(id, { message, output: { schema } })) and the addendum of a continue()
// the agent cannot be told. With the fake agent: the guidance reaches the agent with the prompt
// and not the user message; valid, invalid (422 with instance paths), absent; the candidates'
// rule (the last valid wins); a bad schema refused with nothing changed; the value in the reply's
// metadata after a restart (SQLite store); turn.output undefined without output; a turn paused
// awaiting input; a continuation's addendum told with the next prompt. With the real HarnessAgent
// on localSandbox() and dockerSandbox() (skipped without Docker unless
// HARNESS_SESSIONS_REQUIRE_DOCKER=1): valid, invalid, absent, bad schema, the guidance seen.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { HarnessAgent } from '@ai-sdk/harness/agent';
import {
  createSessionManager,
  createSqliteSessionStore,
  dockerSandbox,
  localSandbox,
  SessionInputError,
  SessionOutputError,
  sharedSandbox,
} from '../index.js';
import { createScriptedHarness } from '../testing/index.mjs';
import { dockerHost, dockerSkipFor, image, removeContainers } from './support/docker.mjs';
import { createFakeAgent, readTurn, testManager, testSandboxes, untilStatus } from './support/sessions.mjs';

const textOf = (message) =>
  message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
const promptsOf = (agent) => agent.calls.filter((c) => c.method === 'stream').map((c) => c.options.prompt);

const schema = {
  type: 'object',
  properties: { title: { type: 'string' }, tags: { type: 'array', items: { type: 'string' } } },
  required: ['title'],
  additionalProperties: false,
};

async function outputError(promise, code) {
  let caught;
  await assert.rejects(promise, (error) => {
    assert.ok(SessionOutputError.isInstance(error), String(error));
    assert.equal(error.statusCode, 422);
    assert.equal(error.code, code);
    caught = error;
    return true;
  });
  return caught;
}

async function refused(promise, path) {
  await assert.rejects(promise, (error) => {
    assert.ok(SessionInputError.isInstance(error), String(error));
    assert.equal(error.path, path);
    return true;
  });
}

describe('output (fake agent)', () => {
  test('a valid answer: turn.output resolves to it, the reply keeps it, the guidance is not the user message', async () => {
    const { sessions, agent } = testManager({
      fakeAgent: createFakeAgent({ turns: [{ text: 'Here it is:\n```json\n{"title": "Hi", "tags": ["a"]}\n```' }] }),
    });
    await sessions.create({ id: 'v', metadata: {} });
    const turn = await sessions.send('v', { message: 'summarise', output: { schema, name: 'summary', description: 'A summary.' } });
    const { message, chunks } = await readTurn(turn);
    assert.deepEqual(await turn.output, { title: 'Hi', tags: ['a'] });
    const [prompt] = promptsOf(agent);
    assert.match(prompt, /^summarise\n\n<answer-format>/);
    assert.match(prompt, /named "summary"/);
    assert.match(prompt, /A summary\./);
    assert.ok(prompt.includes(JSON.stringify(schema, null, 2)), 'the schema is told');
    const record = await sessions.get('v');
    assert.deepEqual(record.messages[0].parts, [{ type: 'text', text: 'summarise' }]);
    assert.deepEqual(record.messages[1].metadata, { output: { title: 'Hi', tags: ['a'] } });
    // The readers see it too.
    assert.deepEqual(message.metadata, { output: { title: 'Hi', tags: ['a'] } });
    assert.ok(chunks.some((c) => c.type === 'message-metadata' && c.messageMetadata.output?.title === 'Hi'));
  });

  test('candidates are tried from the last: the last valid one wins, across fences and bare spans', async () => {
    const text = 'First {"title": "draft"}, then ```json\n{"title": "final"}\n``` and {"other": 1} [not json]';
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [{ text }] }) });
    await sessions.create({ id: 'c', metadata: {} });
    const turn = await sessions.send('c', { message: 'go', output: { schema } });
    await readTurn(turn);
    assert.deepEqual(await turn.output, { title: 'final' });
  });

  test('an invalid answer: 422 output_invalid with each error of the last candidate', async () => {
    const { sessions } = testManager({ fakeAgent: createFakeAgent({ turns: [{ text: '{"title": 5, "tags": ["x", 2]}' }] }) });
    await sessions.create({ id: 'i', metadata: {} });
    const turn = await sessions.send('i', { message: 'go', output: { schema } });
    const { session } = await readTurn(turn);
    assert.equal(session.status, 'idle', 'the turn itself went well');
    const error = await outputError(turn.output, 'output_invalid');
    assert.deepEqual(error.errors.map((e) => e.instancePath).sort(), ['/tags/1', '/title']);
    for (const problem of error.errors) assert.ok(problem.message.length > 0);
    const reply = (await sessions.get('i')).messages[1];
    assert.equal(reply.metadata.output, undefined);
    assert.equal(reply.metadata.outputError.code, 'output_invalid');
  });

  test('an answer without JSON: output_missing; never re-run', async () => {
    const { sessions, agent } = testManager({ fakeAgent: createFakeAgent({ turns: [{ text: 'I would rather not.' }] }) });
    await sessions.create({ id: 'm', metadata: {} });
    const turn = await sessions.send('m', { message: 'go', output: { schema } });
    await readTurn(turn);
    const error = await outputError(turn.output, 'output_missing');
    assert.deepEqual(error.errors, []);
    assert.equal(promptsOf(agent).length, 1, 'the turn is not run again');
  });

  test('a bad schema is refused before the turn, nothing changed', async () => {
    const { sessions, agent } = testManager();
    await sessions.create({ id: 'b', metadata: {} });
    await untilStatus(sessions, 'b', 'idle');
    const before = await sessions.get('b');
    await refused(sessions.send('b', { message: 'x', output: { schema: { type: 'nope' } } }), 'output.schema');
    await refused(sessions.send('b', { message: 'x', output: { schema: { minLength: 'three' } } }), 'output.schema');
    await refused(sessions.send('b', { message: 'x', output: { schema: 'string' } }), 'output.schema');
    await refused(sessions.send('b', { message: 'x', output: {} }), 'output.schema');
    await refused(sessions.send('b', { message: 'x', output: { schema, name: 3 } }), 'output.name');
    await refused(sessions.send('b', { message: 'x', output: { schema, other: 1 } }), 'output');
    await refused(sessions.send('b', { message: 'x', output: 'json' }), 'output');
    await refused(sessions.send('b', { message: 'x', output: { schema: { big: 10n } } }), 'output');
    const after = await sessions.get('b');
    assert.deepEqual(after.messages, []);
    assert.equal(after.status, 'idle');
    assert.equal(after.updatedAt, before.updatedAt);
    assert.equal(promptsOf(agent).length, 0, 'the agent was asked nothing');
  });

  test('without output, turn.output resolves to undefined', async () => {
    const { sessions } = testManager();
    await sessions.create({ id: 'n', metadata: {} });
    const turn = await sessions.send('n', { message: '{"title": "x"}' });
    await readTurn(turn);
    assert.equal(await turn.output, undefined);
    assert.equal((await sessions.get('n')).messages[1].metadata, undefined);
  });

  test('a turn paused awaiting input: output_pending; output on continue() judges the continued answer', async () => {
    const fake = createFakeAgent({
      turns: [{ approvals: [{ toolName: 'bash', input: { command: 'ls' } }] }, { text: 'Done: {"title": "after"}' }],
    });
    const { sessions } = testManager({ fakeAgent: fake });
    await sessions.create({ id: 'p', metadata: {} });
    const first = await sessions.send('p', { message: 'look', output: { schema } });
    const { session } = await readTurn(first);
    assert.equal(session.status, 'awaiting-input');
    await outputError(first.output, 'output_pending');
    const approval = session.pendingInput.approvals[0];
    const second = await sessions.continue('p', {
      toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved: true }],
      output: { schema },
    });
    await readTurn(second);
    assert.deepEqual(await second.output, { title: 'after' });
    assert.deepEqual((await sessions.get('p')).messages[1].metadata.output, { title: 'after' });
  });

  test('the value survives a restart (SQLite store), and a submission replayed finds it', async () => {
    const path = join(mkdtempSync(join(tmpdir(), 'hs-output-')), 's.db');
    const open = () =>
      createSessionManager({
        agent: () => createFakeAgent({ turns: [{ text: '{"title": "kept"}' }] }),
        sandboxes: testSandboxes(),
        store: createSqliteSessionStore({ path }),
      });
    const first = open();
    await first.create({ id: 'r', metadata: {} });
    const request = { message: 'go', output: { schema }, submissionId: 'sub-1' };
    const turn = await first.send('r', request);
    await readTurn(turn);
    assert.deepEqual(await turn.output, { title: 'kept' });
    await first.shutdown();
    const second = open();
    try {
      const record = await second.get('r');
      assert.deepEqual(record.messages[1].metadata, { output: { title: 'kept' } });
      const again = await second.send('r', request);
      await readTurn(again);
      assert.deepEqual(await again.output, { title: 'kept' });
      assert.equal((await second.get('r')).messages.length, 2, 'no second turn');
    } finally {
      await second.shutdown();
    }
  });

  test("a continuation's addendum is told with the next prompt, once", async () => {
    const fake = createFakeAgent({ turns: [{ approvals: [{ toolName: 'bash', input: { command: 'ls' } }] }, { text: 'ok' }] });
    const { sessions } = testManager({ fakeAgent: fake });
    await sessions.create({ id: 'a', metadata: {} });
    const { session } = await readTurn(await sessions.send('a', { message: 'look' }));
    const approval = session.pendingInput.approvals[0];
    await readTurn(
      await sessions.continue('a', {
        toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved: true }],
        instructionAddendum: 'Mention the approval.',
      }),
    );
    const reply = (await sessions.get('a')).messages[1];
    assert.deepEqual(reply.metadata, { instructionAddendum: 'Mention the approval.', instructionAddendumUntold: true });
    await readTurn(await sessions.send('a', { message: 'next' }));
    const told = promptsOf(fake).at(-1);
    assert.match(told, /^next\n\n<instructions-given-with-my-last-answers>\nMention the approval\.\n/);
    assert.equal(textOf((await sessions.get('a')).messages[2]), 'next', 'not the user message');
    await readTurn(await sessions.send('a', { message: 'again' }));
    assert.equal(promptsOf(fake).at(-1), 'again', 'told once');
  });

  test("a continuation's addendum is told with the words of a resumed turn when that comes first", async () => {
    const bash = { approvals: [{ toolName: 'bash', input: { command: 'ls' } }] };
    const fake = createFakeAgent({ turns: [bash, bash, { text: 'ok' }] });
    // The resume state keeps no paused turn: continue() tells the answers in words.
    const agent = {
      ...fake,
      createSession: async (options) => {
        const session = await fake.createSession(options);
        const stop = session.stop.bind(session);
        session.stop = async () => {
          const { continueFrom, ...state } = await stop();
          void continueFrom;
          return state;
        };
        return session;
      },
    };
    const { sessions } = testManager({ fakeAgent: agent });
    await sessions.create({ id: 'w', metadata: {} });
    const approve = (session) => [{ type: 'tool-approval-response', approvalId: session.pendingInput.approvals[0].approvalId, approved: true }];
    const first = await readTurn(await sessions.send('w', { message: 'look' }));
    // Carried on (no words): the addendum waits; the turn pauses again.
    const second = await readTurn(
      await sessions.continue('w', { toolApprovalContinuations: approve(first.session), instructionAddendum: 'Say what you ran.' }),
    );
    assert.equal(second.session.status, 'awaiting-input');
    assert.equal(promptsOf(fake).length, 1, 'no prompt yet');
    await sessions.suspend('w');
    await readTurn(await sessions.continue('w', { toolApprovalContinuations: approve(second.session) }));
    const told = promptsOf(fake).at(-1);
    assert.match(told, /^The session was suspended while you waited for my answers/);
    assert.match(told, /<instructions-given-with-my-last-answers>\nSay what you ran\.\n/);
    const reply = (await sessions.get('w')).messages[1];
    assert.equal(reply.metadata.instructionAddendumUntold, false, 'told now');
    await readTurn(await sessions.send('w', { message: 'next' }));
    assert.equal(promptsOf(fake).at(-1), 'next', 'not told again');
  });
});

// ─── The real HarnessAgent ────────────────────────────────────────────────────────────────────────

const dockerSkip = dockerSkipFor(test);
// The shared sandbox's container outlives shutdown() (a shared sandbox is kept): removed here.
const dockerPrefix = `hs-output-${process.pid}-`;
after(() => removeContainers(dockerPrefix));

for (const [name, backend, skip] of [
  ['localSandbox()', 'local', false],
  ['dockerSandbox()', 'docker', dockerSkip],
]) {
  describe(`output through HarnessAgent, with ${name}`, { skip }, () => {
    test('valid, invalid, absent, a bad schema; the guidance seen by the agent, not stored as the user message', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'hs-output-harness-'));
      const provider =
        backend === 'docker'
          ? dockerSandbox({ image, host: dockerHost, namePrefix: dockerPrefix, network: 'host' })
          : localSandbox({ root: dir });
      const agent = new HarnessAgent({ harness: createScriptedHarness({ wordDelayMs: 0 }), permissionMode: 'allow-reads' });
      const sessions = createSessionManager({ agent: () => agent, sandboxes: sharedSandbox({ open: provider, ports: [4611] }) });
      try {
        await sessions.create({ id: 'h', metadata: {} });
        // The scripted harness echoes a plain prompt: the guidance is in what it was told.
        const echoed = await sessions.send('h', { message: 'hello', output: { schema } });
        const { message } = await readTurn(echoed);
        assert.match(textOf(message), /^You said: hello\n\n<answer-format>/);
        assert.ok(textOf(message).includes('"required"'), 'the schema was told');
        await echoed.output.catch(() => {});
        const valid = await sessions.send('h', { message: '/say Done. {"title": "from the harness"}', output: { schema } });
        await readTurn(valid);
        assert.deepEqual(await valid.output, { title: 'from the harness' });
        const invalid = await sessions.send('h', { message: '/say {"title": 7}', output: { schema } });
        await readTurn(invalid);
        const error = await outputError(invalid.output, 'output_invalid');
        assert.deepEqual(error.errors.map((e) => e.instancePath), ['/title']);
        const absent = await sessions.send('h', { message: '/say No JSON at all.', output: { schema } });
        await readTurn(absent);
        await outputError(absent.output, 'output_missing');
        const before = await sessions.get('h');
        await refused(sessions.send('h', { message: 'x', output: { schema: { type: 12 } } }), 'output.schema');
        const record = await sessions.get('h');
        assert.equal(record.messages.length, before.messages.length, 'the bad schema changed nothing');
        assert.equal(record.messages[0].parts.length, 1);
        assert.equal(textOf(record.messages[0]), 'hello', 'the guidance is not the user message');
        assert.deepEqual(record.messages[3].metadata, { output: { title: 'from the harness' } });
      } finally {
        await sessions.shutdown();
      }
    });
  });
}
