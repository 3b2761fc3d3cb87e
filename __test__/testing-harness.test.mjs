// The scripted harness of `testing/`, driven by the real `HarnessAgent` in a fake sandbox, its
// turns read as `useChat` reads them (`readUIMessageStream`). The `facts` tests pin what
// `testing/FACTS.md` says of `HarnessAgent`: they fail when an upgrade changes it.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { getHarnessErrorMessage, HarnessAgent } from '@ai-sdk/harness/agent';
import { readUIMessageStream, tool } from 'ai';
import { z } from 'zod';

import { createFakeSandbox, createScriptedHarness } from '../testing/index.mjs';

/** A session of a new agent on the scripted harness, in a new fake sandbox. */
async function open({ sessionId = 'session-1', harness = createScriptedHarness(), sandbox = createFakeSandbox(), ...settings } = {}) {
  const agent = new HarnessAgent({ harness, ...settings });
  const session = await agent.createSession({ sessionId, sandboxSession: sandbox });
  return { agent, session, sandbox, harness, workDir: join(sandbox.root, `${harness.harnessId}-${sessionId}`) };
}

/** Every chunk of a turn's UI message stream. */
async function chunksOf(result, options = { generateMessageId: () => 'assistant-1' }) {
  const chunks = [];
  for await (const chunk of result.toUIMessageStream(options)) chunks.push(chunk);
  return chunks;
}

/** The assistant message `chunks` make, going on from `message` when given. */
async function messageOf(chunks, message) {
  const stream = new ReadableStream({
    start(controller) {
      chunks.forEach((chunk) => controller.enqueue(chunk));
      controller.close();
    },
  });
  let last = message;
  for await (const snapshot of readUIMessageStream({ message, stream, terminateOnError: true })) last = snapshot;
  return last;
}

const textOf = (message) =>
  message.parts
    .filter((part) => part.type === 'text')
    .map((part) => part.text)
    .join('\n');
const typesOf = (chunks) => chunks.map((chunk) => chunk.type);
const approve = (request, approved = true, reason) => ({
  type: 'tool-approval-response',
  approvalId: request.approvalId,
  approved,
  ...(reason === undefined ? {} : { reason }),
});
const toolResult = (toolCallId, toolName, value) => ({ type: 'tool-result', toolCallId, toolName, output: { type: 'json', value } });

describe('the scripted harness through HarnessAgent', () => {
  it('answers plain words word by word, with words as tokens', async () => {
    const { agent, session } = await open();
    const result = await agent.stream({ session, prompt: 'hello brave world' });
    const chunks = await chunksOf(result);

    assert.deepEqual(chunks[0], { type: 'start', messageId: 'assistant-1' });
    assert.deepEqual(
      chunks.filter((chunk) => chunk.type === 'text-delta').map((chunk) => chunk.delta),
      ['You ', 'said: ', 'hello ', 'brave ', 'world'],
    );
    assert.deepEqual(chunks.slice(-2), [{ type: 'finish-step' }, { type: 'finish', finishReason: 'stop' }]);
    assert.equal(textOf(await messageOf(chunks)), 'You said: hello brave world');
    const usage = await result.totalUsage;
    assert.equal(usage.inputTokens, 3);
    assert.equal(usage.outputTokens, 5);
    assert.equal(usage.totalTokens, 8);
  });

  it('streams its words with the delay it is given', async () => {
    const { agent, session } = await open({ harness: createScriptedHarness({ wordDelayMs: 30 }) });
    const startedAt = Date.now();
    await chunksOf(await agent.stream({ session, prompt: 'one two three' }));
    assert.ok(Date.now() - startedAt >= 4 * 30 - 10, 'five words, four pauses');
  });

  it('keeps the conversation across stop() and a resume in another agent', async () => {
    const sandbox = createFakeSandbox();
    const first = await open({ sandbox });
    await chunksOf(await first.agent.stream({ session: first.session, prompt: 'my name is Ada' }));
    await chunksOf(await first.agent.stream({ session: first.session, prompt: 'I like tea' }));
    const state = JSON.parse(JSON.stringify(await first.session.stop()));

    const agent = new HarnessAgent({ harness: createScriptedHarness() });
    const session = await agent.createSession({ sessionId: 'session-1', sandboxSession: sandbox, resumeFrom: state });
    const message = await messageOf(await chunksOf(await agent.stream({ session, prompt: 'what did I say?' })));

    assert.equal(session.isResume, true);
    assert.equal(textOf(message), 'Before this, you said: "my name is Ada", then "I like tea".');
  });

  it('keeps it across detach() too, and answers /history', async () => {
    const sandbox = createFakeSandbox();
    const first = await open({ sandbox });
    await chunksOf(await first.agent.stream({ session: first.session, prompt: 'remember me' }));
    const state = await first.session.detach();

    const second = new HarnessAgent({ harness: createScriptedHarness() });
    const session = await second.createSession({ sessionId: 'session-1', sandboxSession: sandbox, resumeFrom: state });
    const message = await messageOf(await chunksOf(await second.stream({ session, prompt: '/history' })));
    assert.equal(textOf(message), 'Before this, you said: "remember me".');
  });

  it('lists and reads the files of the working directory without asking', async () => {
    const { agent, session, sandbox, harness } = await open({ permissionMode: 'allow-reads' });
    await sandbox.writeTextFile({ path: `${harness.harnessId}-session-1/notes.md`, content: 'buy milk' });

    const listed = await messageOf(await chunksOf(await agent.stream({ session, prompt: 'list files' })));
    assert.equal(textOf(listed), 'Files in the working directory: notes.md');
    const read = await messageOf(await chunksOf(await agent.stream({ session, prompt: 'read notes.md' })));
    assert.equal(textOf(read), 'notes.md says: buy milk');
    const { state, input, output, providerExecuted } = read.parts.find((part) => part.type === 'tool-read');
    assert.deepEqual({ state, input, output, providerExecuted }, { state: 'output-available', input: { file_path: 'notes.md' }, output: 'buy milk', providerExecuted: true });
  });

  it('reports a missing file as a tool error', async () => {
    const { agent, session } = await open();
    const message = await messageOf(await chunksOf(await agent.stream({ session, prompt: '/read nowhere.md' })));
    const part = message.parts.find((candidate) => candidate.type === 'tool-read');
    assert.equal(part.state, 'output-error');
    assert.equal(part.errorText, 'no such file');
  });

  it('asks approval before it writes, and writes once approved', async () => {
    const { agent, session, workDir } = await open({ permissionMode: 'allow-reads' });
    const paused = await chunksOf(await agent.stream({ session, prompt: 'write hello.txt: hi there' }));

    assert.deepEqual(typesOf(paused), ['start', 'start-step', 'tool-input-available', 'tool-approval-request', 'finish-step', 'finish']);
    assert.equal(paused.at(-1).finishReason, 'tool-calls');
    assert.equal(existsSync(join(workDir, 'hello.txt')), false);
    assert.equal(session.hasUnfinishedTurn(), true);
    const message = await messageOf(paused);
    assert.equal(message.parts.find((part) => part.type === 'tool-write').state, 'approval-requested');

    const request = paused.find((chunk) => chunk.type === 'tool-approval-request');
    const continued = await chunksOf(
      await agent.continueStream({ session, toolApprovalContinuations: [approve(request)] }),
      { originalMessages: [message] },
    );
    const done = await messageOf(continued, message);

    assert.equal(readFileSync(join(workDir, 'hello.txt'), 'utf-8'), 'hi there');
    assert.equal(done.parts.find((part) => part.type === 'tool-write').state, 'output-available');
    assert.equal(textOf(done), 'I wrote hello.txt.');
    assert.equal(session.hasUnfinishedTurn(), false);
  });

  it('does not run a denied command, and says it was denied', async () => {
    const { agent, session, workDir } = await open({ permissionMode: 'allow-edits' });
    const paused = await chunksOf(await agent.stream({ session, prompt: 'run touch ran.txt' }));
    const request = paused.find((chunk) => chunk.type === 'tool-approval-request');
    const message = await messageOf(paused);

    const continued = await chunksOf(
      await agent.continueStream({ session, toolApprovalContinuations: [approve(request, false, 'not now')] }),
      { originalMessages: [message] },
    );
    const done = await messageOf(continued, message);

    assert.equal(existsSync(join(workDir, 'ran.txt')), false);
    assert.equal(textOf(done), 'Running `touch ran.txt` was denied (not now).');
    assert.deepEqual(done.parts.find((part) => part.type === 'tool-bash').approval, { id: request.approvalId, approved: false, reason: 'not now' });
  });

  it('runs an approved command in the working directory', async () => {
    const { agent, session, workDir } = await open({ permissionMode: 'allow-edits' });
    const paused = await chunksOf(await agent.stream({ session, prompt: 'run echo hi > said.txt && cat said.txt' }));
    const request = paused.find((chunk) => chunk.type === 'tool-approval-request');
    const continued = await chunksOf(await agent.continueStream({ session, toolApprovalContinuations: [approve(request)] }));
    const output = continued.find((chunk) => chunk.type === 'tool-output-available').output;
    assert.deepEqual(output, { exitCode: 0, stdout: 'hi\n', stderr: '' });
    assert.equal(readFileSync(join(workDir, 'said.txt'), 'utf-8'), 'hi\n');
  });

  it('writes without asking when the agent allows edits', async () => {
    const { agent, session, workDir } = await open({ permissionMode: 'allow-edits' });
    const message = await messageOf(await chunksOf(await agent.stream({ session, prompt: '/write a/b.txt one two' })));
    assert.equal(textOf(message), 'I wrote a/b.txt.');
    assert.equal(readFileSync(join(workDir, 'a/b.txt'), 'utf-8'), 'one two');
  });

  it('waits for the result of a tool the application runs', async () => {
    const tools = { lookup: tool({ inputSchema: z.object({ q: z.string() }) }) };
    const { agent, session } = await open({ tools });
    const paused = await chunksOf(await agent.stream({ session, prompt: '/tool lookup {"q":"tea"}' }));
    const call = paused.find((chunk) => chunk.type === 'tool-input-available');

    assert.deepEqual(typesOf(paused), ['start', 'start-step', 'tool-input-available', 'finish-step', 'finish']);
    assert.deepEqual(call.input, { q: 'tea' });
    const continued = await chunksOf(
      await agent.continueStream({ session, toolResultContinuations: [toolResult(call.toolCallId, 'lookup', { found: 3 })] }),
    );
    assert.equal(textOf(await messageOf(continued)), 'lookup returned: {"found":3}.');
    assert.equal(session.hasUnfinishedTurn(), false);
  });

  it('takes the output of a tool with an execute in the same turn', async () => {
    const tools = { ping: tool({ inputSchema: z.object({}), execute: async () => ({ pong: true }) }) };
    const { agent, session } = await open({ tools });
    const message = await messageOf(await chunksOf(await agent.stream({ session, prompt: '/tool ping' })));
    assert.equal(message.parts.find((part) => part.type === 'tool-ping').state, 'output-available');
    assert.equal(textOf(message), 'ping returned: {"pong":true}.');
  });

  it('asks a question as Claude Code does, answered as a tool result', async () => {
    const { agent, session } = await open();
    const paused = await chunksOf(await agent.stream({ session, prompt: '/ask Which tea? | Green | Black' }));
    const call = paused.find((chunk) => chunk.type === 'tool-input-available');

    assert.equal(call.toolName, 'askUserQuestions');
    assert.deepEqual(call.input, {
      allowPartialAnswers: false,
      questions: [
        {
          id: 'question-1',
          question: 'Which tea?',
          options: [
            { id: 'option-1', label: 'Green' },
            { id: 'option-2', label: 'Black' },
          ],
        },
      ],
    });
    const answer = { action: 'answered', answers: { 'question-1': { optionIds: ['option-2'] } } };
    const continued = await chunksOf(
      await agent.continueStream({ session, toolResultContinuations: [toolResult(call.toolCallId, 'askUserQuestions', answer)] }),
    );
    assert.equal(textOf(await messageOf(continued)), 'You answered: Black.');
  });

  it('asks several approvals at once, in one pause', async () => {
    const tools = { deploy: tool({ inputSchema: z.object({ env: z.string() }), execute: async ({ env }) => `deployed ${env}` }) };
    const { agent, session } = await open({ tools, toolApproval: { deploy: 'user-approval' } });
    const paused = await chunksOf(
      await agent.stream({ session, prompt: '/tools [{"toolName":"deploy","input":{"env":"staging"}},{"toolName":"deploy","input":{"env":"prod"}}]' }),
    );
    const requests = paused.filter((chunk) => chunk.type === 'tool-approval-request');
    assert.equal(requests.length, 2);
    assert.equal(paused.at(-1).finishReason, 'tool-calls');

    const message = await messageOf(paused);
    const continued = await chunksOf(
      await agent.continueStream({ session, toolApprovalContinuations: [approve(requests[0]), approve(requests[1], false)] }),
    );
    const done = await messageOf(continued, message);
    assert.equal(textOf(done), 'deploy returned: "deployed staging". deploy was denied.');
    assert.deepEqual(
      done.parts.filter((part) => part.type === 'tool-deploy').map((part) => part.state),
      ['output-available', 'approval-responded'],
    );
  });

  it('sends reasoning before its answer', async () => {
    const { agent, session } = await open();
    const message = await messageOf(await chunksOf(await agent.stream({ session, prompt: '/think tea or coffee' })));
    assert.deepEqual(
      message.parts.filter((part) => part.type !== 'step-start').map(({ type, text }) => ({ type, text })),
      [
        { type: 'reasoning', text: 'tea or coffee' },
        { type: 'text', text: 'I thought about it.' },
      ],
    );
  });

  it('fails a turn with an error chunk, masked for a plain Error and passed through for a HarnessError', async () => {
    const { agent, session } = await open();
    const options = { generateMessageId: () => 'assistant-1', onError: getHarnessErrorMessage };

    const plain = await agent.stream({ session, prompt: '/fail the disk is full' });
    assert.deepEqual((await chunksOf(plain, options)).slice(-1), [{ type: 'error', errorText: 'An error occurred.' }]);
    await assert.rejects(plain.totalUsage, { message: 'the disk is full' });

    const harnessError = await agent.stream({ session, prompt: '/fail-harness the bridge is gone' });
    assert.deepEqual((await chunksOf(harnessError, options)).slice(-1), [{ type: 'error', errorText: 'the bridge is gone' }]);

    assert.equal(session.hasUnfinishedTurn(), false);
    const next = await messageOf(await chunksOf(await agent.stream({ session, prompt: 'still there?' })));
    assert.equal(textOf(next), 'You said: still there?');
  });

  it('cuts a slow turn short on abort, and takes the next prompt', async () => {
    const { agent, session } = await open();
    const controller = new AbortController();
    const startedAt = Date.now();
    const result = await agent.stream({ session, prompt: '/sleep 10000', abortSignal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    const chunks = await chunksOf(result);

    assert.ok(Date.now() - startedAt < 5000);
    assert.deepEqual(chunks.at(-1), { type: 'abort', reason: 'AbortError: This operation was aborted' });
    assert.equal(textOf(await messageOf(chunks)), 'Sleeping for 10000 ms.');
    await assert.rejects(result.totalUsage, { name: 'AbortError' });
    assert.equal(session.hasUnfinishedTurn(), false);
    const next = await messageOf(await chunksOf(await agent.stream({ session, prompt: '/sleep 1' })));
    assert.equal(textOf(next), 'Sleeping for 1 ms.\nI slept for 1 ms.');
  });

  it('continues a turn paused on an approval from its suspendTurn() state, in a new agent', async () => {
    const { agent, session, sandbox, workDir } = await open({ permissionMode: 'allow-reads' });
    const paused = await chunksOf(await agent.stream({ session, prompt: 'write later.txt: from another process' }));
    const request = paused.find((chunk) => chunk.type === 'tool-approval-request');
    const state = JSON.parse(JSON.stringify(await session.suspendTurn()));

    assert.equal(state.type, 'continue-turn');
    assert.deepEqual(state.pendingToolApprovals.map((approval) => [approval.approvalId, approval.kind]), [[request.approvalId, 'builtin']]);

    const other = new HarnessAgent({ harness: createScriptedHarness(), permissionMode: 'allow-reads' });
    const resumed = await other.createSession({ sessionId: 'session-1', sandboxSession: sandbox, continueFrom: state });
    assert.equal(resumed.hasUnfinishedTurn(), true);
    const message = await messageOf(paused);
    const continued = await chunksOf(
      await other.continueStream({ session: resumed, toolApprovalContinuations: [approve(request)] }),
      { originalMessages: [message] },
    );

    assert.equal(readFileSync(join(workDir, 'later.txt'), 'utf-8'), 'from another process');
    assert.equal(continued.filter((chunk) => chunk.type === 'tool-input-available').length, 0, 'no event is sent twice');
    assert.equal(textOf(await messageOf(continued, message)), 'I wrote later.txt.');
  });

  it('continues a turn suspended in the middle of its text exactly where it stopped', async () => {
    const { agent, session, sandbox } = await open({ harness: createScriptedHarness({ wordDelayMs: 20 }) });
    const reader = (await agent.stream({ session, prompt: 'one two three four five six' })).toUIMessageStream().getReader();
    const before = [];
    while (before.filter((chunk) => chunk.type === 'text-delta').length < 3) before.push((await reader.read()).value);
    const state = await session.suspendTurn();
    for (let next = await reader.read(); !next.done; next = await reader.read()) before.push(next.value);

    const other = new HarnessAgent({ harness: createScriptedHarness() });
    const resumed = await other.createSession({ sessionId: 'session-1', sandboxSession: sandbox, continueFrom: state });
    const after = await chunksOf(await other.continueStream({ session: resumed }));

    assert.equal(after.some((chunk) => chunk.type === 'text-start'), false, 'it goes on inside the open text block');
    assert.equal(textOf(await messageOf([...before, ...after])), 'You said: one two three four five six');
  });

  it('reports a compaction on the next turn, and keeps the prompts', async () => {
    const { agent, session } = await open();
    await chunksOf(await agent.stream({ session, prompt: 'first words here' }));
    await session.compact('keep it short');
    const message = await messageOf(await chunksOf(await agent.stream({ session, prompt: 'what did I say?' })));
    const compaction = message.parts.find((part) => part.type === 'dynamic-tool');

    assert.equal(compaction.toolName, 'compaction');
    assert.deepEqual(compaction.output, {
      trigger: 'manual',
      summary: 'Dropped the answers, kept 1 prompt: keep it short.',
      tokensBefore: 8,
      tokensAfter: 3,
    });
    assert.equal(textOf(message), 'Before this, you said: "first words here".');
  });

  it('records the calls it receives', async () => {
    const { agent, session, harness } = await open();
    await chunksOf(await agent.stream({ session, prompt: 'hi' }));
    await session.destroy();
    assert.deepEqual(
      harness.calls.map(({ method }) => method),
      ['doStart', 'doPromptTurn', 'doDestroy'],
    );
  });

  it('refuses the state of another harness', async () => {
    const { session } = await open({ harness: createScriptedHarness({ harnessId: 'other' }) });
    const state = await session.stop();
    const agent = new HarnessAgent({ harness: createScriptedHarness() });
    await assert.rejects(
      agent.createSession({ sessionId: 'session-1', sandboxSession: createFakeSandbox(), resumeFrom: state }),
      /produced by harness 'other'/,
    );
  });
});

describe('facts about HarnessAgent (testing/FACTS.md)', () => {
  it('gives the start chunk a messageId only with generateMessageId or an assistant last message', async () => {
    const { agent, session } = await open();
    const firstChunk = async (options) => (await chunksOf(await agent.stream({ session, prompt: 'hi' }), options))[0];
    const user = { id: 'user-1', role: 'user', parts: [] };
    const assistant = { id: 'assistant-0', role: 'assistant', parts: [] };

    assert.deepEqual(await firstChunk({}), { type: 'start' });
    assert.deepEqual(await firstChunk({ originalMessages: [user] }), { type: 'start' });
    assert.deepEqual(await firstChunk({ generateMessageId: () => 'generated' }), { type: 'start', messageId: 'generated' });
    assert.deepEqual(await firstChunk({ originalMessages: [user], generateMessageId: () => 'generated' }), { type: 'start', messageId: 'generated' });
    assert.deepEqual(await firstChunk({ originalMessages: [assistant] }), { type: 'start', messageId: 'assistant-0' });
    assert.deepEqual(await firstChunk({ originalMessages: [assistant], generateMessageId: () => 'generated' }), { type: 'start', messageId: 'assistant-0' });
  });

  it('resolves totalUsage of a paused turn with undefined counts', async () => {
    const { agent, session } = await open({ permissionMode: 'allow-reads' });
    const result = await agent.stream({ session, prompt: 'write x.txt: y' });
    await chunksOf(result);
    const usage = await result.totalUsage;
    assert.equal(usage.inputTokens, undefined);
    assert.equal(usage.totalTokens, undefined);
  });

  it('stop() of a session with an unfinished turn suspends the turn into continueFrom', async () => {
    const { agent, session, harness } = await open({ permissionMode: 'allow-reads' });
    await chunksOf(await agent.stream({ session, prompt: 'write x.txt: y' }));
    const state = await session.stop();

    assert.equal(state.type, 'resume-session');
    assert.equal(state.continueFrom.type, 'continue-turn');
    assert.equal(state.continueFrom.pendingToolApprovals.length, 1);
    assert.deepEqual(state.continueFrom.turnSettings, { skills: [], tools: [] });
    assert.equal(harness.calls.at(-1).method, 'doSuspendTurn', 'doStop is not called');
  });

  it('ends a turn stopped while it runs with a finish of reason other', async () => {
    const { agent, session } = await open();
    const result = await agent.stream({ session, prompt: '/sleep 10000' });
    const chunks = chunksOf(result);
    await new Promise((resolve) => setTimeout(resolve, 50));
    const state = await session.stop();

    assert.deepEqual((await chunks).slice(-1), [{ type: 'finish', finishReason: 'other' }]);
    assert.equal(state.continueFrom.pendingToolApprovals, undefined);
  });

  it('cuts a paused turn with continueStream and an aborted signal, answers or not', async () => {
    const { agent, session, workDir } = await open({ permissionMode: 'allow-reads' });
    const paused = await chunksOf(await agent.stream({ session, prompt: 'write x.txt: y' }));
    const request = paused.find((chunk) => chunk.type === 'tool-approval-request');
    const controller = new AbortController();
    controller.abort();
    const cut = await agent.continueStream({ session, toolApprovalContinuations: [approve(request)], abortSignal: controller.signal });

    assert.deepEqual(typesOf(await chunksOf(cut)), ['start', 'tool-approval-response', 'abort']);
    await assert.rejects(cut.totalUsage);
    assert.equal(session.hasUnfinishedTurn(), false);
    assert.equal(existsSync(join(workDir, 'x.txt')), false);
  });

  it('ends a stream started with an aborted signal with start and abort', async () => {
    const { agent, session } = await open();
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    const chunks = await chunksOf(await agent.stream({ session, prompt: 'hi', abortSignal: controller.signal }));
    assert.deepEqual(chunks, [{ type: 'start', messageId: 'assistant-1' }, { type: 'abort', reason: 'Error: gone' }]);
  });

  it('submits undefined for the short { toolCallId, output } shape of a tool result', async () => {
    const { agent, session } = await open({ tools: { lookup: tool({ inputSchema: z.object({}) }) } });
    const paused = await chunksOf(await agent.stream({ session, prompt: '/tool lookup' }));
    const { toolCallId } = paused.find((chunk) => chunk.type === 'tool-input-available');
    const continued = await chunksOf(await agent.continueStream({ session, toolResultContinuations: [{ toolCallId, output: { found: 1 } }] }));
    assert.equal(textOf(await messageOf(continued)), 'lookup returned: null.');
  });

  it('pauses again, silently, after approving a tool without execute; later approvals of the pause are dropped', async () => {
    const tools = { deploy: tool({ inputSchema: z.object({ env: z.string() }) }) };
    const { agent, session } = await open({ tools, toolApproval: { deploy: 'user-approval' } });
    const paused = await chunksOf(
      await agent.stream({ session, prompt: '/tools [{"toolName":"deploy","input":{"env":"a"}},{"toolName":"deploy","input":{"env":"b"}}]' }),
    );
    const [first, second] = paused.filter((chunk) => chunk.type === 'tool-approval-request');
    const message = await messageOf(paused);

    const answered = await chunksOf(await agent.continueStream({ session, toolApprovalContinuations: [approve(first), approve(second, false)] }));
    assert.deepEqual(answered, [
      { type: 'start', messageId: 'assistant-1' },
      { type: 'tool-approval-response', approvalId: first.approvalId, approved: true, providerExecuted: false },
      { type: 'finish', finishReason: 'other' },
    ]);
    assert.equal(session.hasUnfinishedTurn(), true);

    const done = await chunksOf(
      await agent.continueStream({
        session,
        toolApprovalContinuations: [approve(second, false)],
        toolResultContinuations: [toolResult(first.toolCallId, 'deploy', 'ok')],
      }),
    );
    assert.deepEqual(typesOf(done).slice(0, 2), ['start', 'tool-approval-response'], 'the second approval is answered now');
    assert.equal(textOf(await messageOf(done, await messageOf(answered, message))), 'deploy returned: "ok". deploy was denied.');
  });

  it('drops start and finish with sendStart and sendFinish false', async () => {
    const { agent, session } = await open();
    const chunks = await chunksOf(await agent.stream({ session, prompt: 'hi' }), { sendStart: false, sendFinish: false });
    assert.equal(chunks[0].type, 'start-step');
    assert.equal(chunks.at(-1).type, 'finish-step');
  });

  it('still calls doPromptTurn for a stream started with an aborted signal', async () => {
    const { agent, session, harness } = await open();
    const controller = new AbortController();
    controller.abort();
    await chunksOf(await agent.stream({ session, prompt: 'hi', abortSignal: controller.signal }));
    assert.deepEqual(harness.calls.map(({ method }) => method), ['doStart', 'doPromptTurn']);
  });

  it('kills the handle after stop(), with these messages', async () => {
    const { agent, session } = await open();
    await session.stop();
    await assert.rejects(agent.stream({ session, prompt: 'hi' }), { message: 'Harness session session-1 has ended and cannot be reused.' });
    await assert.rejects(session.detach(), { message: 'Harness session session-1 is not active and cannot be detached.' });
    await session.destroy();
    const { session: idle } = await open();
    await assert.rejects(idle.suspendTurn(), { message: 'Harness session session-1 has no unfinished turn to suspend.' });
  });

  it('ends a turn that runs when the session is destroyed with an error chunk', async () => {
    const { agent, session } = await open();
    const chunks = chunksOf(await agent.stream({ session, prompt: '/sleep 10000' }), { onError: (error) => error.message });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await session.destroy();
    assert.deepEqual((await chunks).at(-1), { type: 'error', errorText: 'Scripted session session-1 ended during its turn.' });
  });

  it('strips the working directory from tool outputs, not from text', async () => {
    const { agent, session, workDir } = await open({ permissionMode: 'allow-all' });
    const ran = await chunksOf(await agent.stream({ session, prompt: 'run pwd' }));
    assert.equal(ran.find((chunk) => chunk.type === 'tool-output-available').output.stdout, '.\n');
    const said = await messageOf(await chunksOf(await agent.stream({ session, prompt: `see ${workDir}/x` })));
    assert.equal(textOf(said), `You said: see ${workDir}/x`);
  });

  it('denies, without a pause, a call to a tool the agent does not have', async () => {
    const { agent, session } = await open();
    const chunks = await chunksOf(await agent.stream({ session, prompt: '/tool unknown' }));
    assert.equal(chunks.find((chunk) => chunk.type === 'tool-input-error').dynamic, true);
    assert.equal(chunks.find((chunk) => chunk.type === 'tool-output-available').output.type, 'execution-denied');
    assert.equal(textOf(await messageOf(chunks)), 'unknown was denied.');
    assert.equal(session.hasUnfinishedTurn(), false);
  });

  it('refuses to continue a turn in an agent without its tools', async () => {
    const { agent, session, sandbox } = await open({ tools: { lookup: tool({ description: 'Look up', inputSchema: z.object({}) }) } });
    await chunksOf(await agent.stream({ session, prompt: '/tool lookup' }));
    const state = await session.suspendTurn();
    assert.deepEqual(state.turnSettings.tools.map(({ name, description }) => [name, description]), [['lookup', 'Look up']]);

    const bare = new HarnessAgent({ harness: createScriptedHarness() });
    const resumed = await bare.createSession({ sessionId: 'session-1', sandboxSession: sandbox, continueFrom: state });
    await assert.rejects(bare.continueStream({ session: resumed }), {
      message: "HarnessAgent cannot continue turn because tool 'lookup' is no longer available.",
    });
  });

  it('needs supportsBuiltinToolApprovals for a permissionMode other than allow-all', () => {
    const harness = { ...createScriptedHarness(), supportsBuiltinToolApprovals: false };
    assert.throws(() => new HarnessAgent({ harness, permissionMode: 'allow-reads' }), /does not support built-in tool approval requests/);
  });

  it('continues an approval with the result on a new step, and the text on another', async () => {
    const { agent, session } = await open({ permissionMode: 'allow-reads' });
    const paused = await chunksOf(await agent.stream({ session, prompt: 'write x.txt: y' }));
    const request = paused.find((chunk) => chunk.type === 'tool-approval-request');
    const continued = await chunksOf(await agent.continueStream({ session, toolApprovalContinuations: [approve(request)] }));
    assert.deepEqual(typesOf(continued), [
      'start',
      'tool-approval-response',
      'start-step',
      'tool-output-available',
      'start-step',
      'text-start',
      'text-delta',
      'text-delta',
      'text-delta',
      'text-end',
      'finish-step',
      'finish',
    ]);
  });
});
