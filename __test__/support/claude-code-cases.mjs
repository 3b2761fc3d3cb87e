// The end-to-end cases of the real Claude Code, each a function of a suite
// (support/claude-code-suite.mjs) so that they run alike on dockerSandbox and localSandbox.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import {
  answerApprovals,
  freePort,
  lastToolOutput,
  readTurnResponse,
  requestTexts,
  requestToolResults,
  textOf,
  userMessage,
  writeThenRead,
} from './claude-code.mjs';

/** A text turn, read through `toUIMessageStreamResponse()` and `readUIMessageStream`. */
export async function textTurn({ world, manager, ready, fresh }) {
  const { sessions } = await manager();
  const id = fresh('text');
  await ready(sessions, id);
  world.mock.clearReplies();
  world.mock.reply({ text: 'Hello from the mock model.' });
  const before = world.mainRequests().length;
  const turn = await sessions.send(id, { message: userMessage('Say hello') });
  const { message, session, errors } = await readTurnResponse(turn);
  assert.deepEqual(errors, []);
  assert.equal(textOf(message), 'Hello from the mock model.');
  assert.equal(session.status, 'idle');
  const request = world.mainRequests()[before];
  assert.ok(requestTexts(request).some((t) => t.includes('Say hello')), 'the mock received the prompt');
  assert.equal(request.stream, true);
  await sessions.close(id);
  world.assertNothingCaught();
}

/**
 * A Bash command asking approval: `awaiting-input` with its `pendingInput`, `continue()` from the
 * message useChat sends back, the file written (read back by the CLI), the answer.
 */
export async function approval({ world, manager, ready, fresh }) {
  const { sessions } = await manager();
  const id = fresh('approve');
  await ready(sessions, id);
  world.mock.clearReplies();
  const before = world.mainRequests().length;
  world.mock.reply(...writeThenRead('hello.txt', 'hi from Claude Code', 'Written and read back.'));
  const first = await readTurnResponse(await sessions.send(id, { message: userMessage('Write hello.txt') }));
  assert.equal(first.session.status, 'awaiting-input');
  const [asked, ...more] = first.session.pendingInput.approvals;
  assert.equal(more.length, 0);
  assert.match(asked.toolName, /bash/i);
  assert.match(asked.input.command, /> hello\.txt && pwd$/);
  const part = first.message.parts.find((p) => p.state === 'approval-requested');
  assert.equal(part.approval.id, asked.approvalId);

  const answered = answerApprovals(first.message, true);
  const second = await readTurnResponse(await sessions.continue(id, { message: answered }), answered);
  assert.deepEqual(second.errors, []);
  assert.equal(second.session.status, 'idle');
  assert.match(textOf(second.message), /Written and read back\./);
  const [afterBash, afterRead] = world.mainRequests().slice(before + 1);
  assert.match(lastToolOutput(afterBash), /\/claude-code-[^/]+$/m, "the command ran in the session's folder");
  assert.match(lastToolOutput(afterRead), /hi from Claude Code/, 'the file is there, read back by the CLI');
  await sessions.close(id);
  world.assertNothingCaught();
}

/** A denial: the CLI is told, the file is not written, the session goes on. */
export async function denial({ world, manager, ready, fresh }) {
  const { sessions } = await manager();
  const id = fresh('deny');
  await ready(sessions, id);
  world.mock.clearReplies();
  const before = world.mainRequests().length;
  world.mock.reply(
    { toolUse: { name: 'Bash', input: { command: 'printf no > denied.txt', description: 'Write denied.txt' } } },
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
}

/** `suspend()` then a message: the sandbox starts again and the mock receives the earlier conversation. */
export async function suspendThenMessage({ world, manager, ready, fresh }) {
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
}

/** A new process on the same SQLite file resumes the session; the mock receives the earlier conversation. */
export async function newProcess({ world, manager, ready, fresh, scratch, inNewProcess }) {
  const path = join(scratch, `${fresh('db')}.db`);
  const { sessions, bridgePort } = await manager({ path });
  const id = fresh('process');
  await ready(sessions, id);
  world.mock.clearReplies();
  world.mock.reply({ text: 'Noted: the code word is quince.' });
  await readTurnResponse(await sessions.send(id, { message: userMessage('The code word is quince') }));
  await sessions.shutdown();
  const before = world.mainRequests().length;
  world.mock.reply({ text: 'The code word was quince.' });
  const result = await inNewProcess({ path, id, port: bridgePort, prompt: 'What was the code word?' });
  assert.deepEqual(result, { before: 'suspended', status: 'idle', text: 'The code word was quince.', messages: 4 });
  const request = world.mainRequests()[before];
  assert.match(requestTexts(request, 'user').join('\n'), /The code word is quince/);
  assert.match(requestTexts(request, 'assistant').join('\n'), /Noted: the code word is quince\./);
  // The session's sandbox, suspended again by the child's shutdown, is freed by a close.
  const { sessions: again } = await manager({ path, port: bridgePort });
  await again.close(id);
  await again.shutdown();
  world.assertNothingCaught();
}

/**
 * An approval pending across a suspension, answered after the resume: the suspension stopped the
 * bridge that held the paused turn, so the resumed CLI is told the answer in words, at once (never
 * after the bridge's two-minute approval timeout), with the earlier conversation.
 */
export async function approvalAcrossSuspension({ world, manager, ready, fresh }) {
  const { sessions } = await manager();
  const id = fresh('pending');
  await ready(sessions, id);
  world.mock.clearReplies();
  const command = "printf '%s\\n' 'answered after a suspension' > later.txt && pwd";
  world.mock.reply({ text: 'I will write later.txt.', toolUse: { name: 'Bash', input: { command, description: 'Write later.txt' } } });
  const first = await readTurnResponse(await sessions.send(id, { message: userMessage('Write later.txt') }));
  assert.equal(first.session.status, 'awaiting-input');
  await sessions.suspend(id);
  const suspended = await sessions.get(id);
  assert.equal(suspended.status, 'suspended');
  assert.equal(suspended.pendingInput?.approvals?.length, 1, 'the approval is still pending while suspended');
  const before = world.mainRequests().length;
  world.mock.reply({ text: 'You approved it after the pause: noted.' });
  const answered = answerApprovals(first.message, true);
  const started = Date.now();
  const second = await readTurnResponse(await sessions.continue(id, { message: answered }), answered);
  const seconds = (Date.now() - started) / 1000;
  assert.equal(second.session.status, 'idle', `the turn went on: ${second.session.error ?? ''}`);
  assert.match(textOf(second.message), /You approved it after the pause: noted\./);
  // A bound far above a resume (seconds) and below the bridge's approval timeout (120 s): what
  // fails here is the answer waiting for that timeout, not a slow machine.
  assert.ok(seconds < 100, `answered after the resume in ${seconds} s`);
  const told = world.mainRequests()[before];
  const users = requestTexts(told, 'user').join('\n');
  assert.match(users, /The session was suspended while you waited for my answers/, 'the CLI is told the answer in words');
  assert.match(users, /- I approve bash .*later\.txt/, 'with the approval of the command');
  assert.match(users, /Write later\.txt/, 'after the earlier conversation');
  await sessions.close(id);
  world.assertNothingCaught();
}

/** Two sessions side by side in one shared sandbox, each with its port and in its own folder. */
export async function twoInOneSandbox({ world, sharedManager, ready, fresh }) {
  const ports = [await freePort(), await freePort()];
  const { sessions } = await sharedManager(ports);
  const ids = [fresh('left'), fresh('right')];
  await Promise.all(ids.map((id) => ready(sessions, id)));
  world.mock.clearReplies();
  const dirs = {};
  for (const id of ids) {
    world.mock.reply({ toolUse: { name: 'Bash', input: { command: `printf '%s' '${id}' > mine.txt && pwd`, description: 'Write mine.txt' } } }, (request) => {
      dirs[id] = lastToolOutput(request).trim();
      return { text: `Wrote it for ${id}.` };
    });
    const first = await readTurnResponse(await sessions.send(id, { message: userMessage('Write mine.txt') }));
    assert.equal(first.session.status, 'awaiting-input');
    const answered = answerApprovals(first.message, true);
    const second = await readTurnResponse(await sessions.continue(id, { message: answered }), answered);
    assert.equal(textOf(second.message), `Wrote it for ${id}.`);
  }
  assert.notEqual(dirs[ids[0]], dirs[ids[1]], 'each session works in a folder of its own');
  for (const id of ids) assert.match(dirs[id], new RegExp(`claude-code-${id}$`), `${dirs[id]} is ${id}'s`);
  await Promise.all(ids.map((id) => sessions.close(id)));
  await sessions.shutdown();
  world.assertNothingCaught();
}
