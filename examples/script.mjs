// Two conversations side by side, without a server: `node examples/script.mjs` (or `bun`).
//
// It runs the real `HarnessAgent` of `@ai-sdk/harness` on the package's model-free scripted
// harness (`harness-sessions/testing`), in a local sandbox (a folder per session on this host,
// removed at the end), and shows what the session manager does:
//
// 1. two sessions answer at the same time, each in its own folder;
// 2. an approval policy (the `approve` option) answers the approvals it knows — writes are allowed,
//    `rm` is refused — and leaves the others to a person: the script then plays the person,
//    reading `pendingInput` and answering with `continue()`;
// 3. one session is suspended (its harness session stopped, its state kept), then brought back by
//    the next message, remembering what it was told and finding its files;
// 4. the conversations are printed as `get()` keeps them, and `shutdown()` lets the process exit.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { HarnessAgent } from '@ai-sdk/harness/agent';
import { createMemorySessionStore, createSessionManager, localSandbox, sharedSandbox } from 'harness-sessions';
import { createScriptedHarness } from 'harness-sessions/testing';

const root = mkdtempSync(join(tmpdir(), 'harness-sessions-script-'));

// ─── What the sessions run on ──────────────────────────────────────────────────────────────────

/** The agent every session runs: no model, answers from the prompt (see testing/scripted-harness.mjs). */
const agent = new HarnessAgent({
  harness: createScriptedHarness({ wordDelayMs: 5 }),
  // Asks before it writes a file or runs a command, as Claude Code does in this mode.
  permissionMode: 'allow-reads',
});

/**
 * One sandbox for every session — here a folder of this host, without isolation — each session in
 * a folder of its own (`sessions/<id>`) with a port of its own: two live at once.
 */
const sandboxes = sharedSandbox({ open: localSandbox({ root }), ports: [4301, 4302] });

// ─── The policy ────────────────────────────────────────────────────────────────────────────────

/**
 * Answers approvals before anyone sees them: writes are fine, `rm` is not, and any other command
 * is left to a person (`undefined`).
 */
function approve({ toolName, input }) {
  if (toolName === 'write') return { approved: true, reason: 'Writes are allowed in this workspace.' };
  if (toolName === 'bash' && /\brm\b/.test(String(input?.command))) {
    return { approved: false, reason: 'The policy forbids rm.' };
  }
  return undefined;
}

const sessions = createSessionManager({
  agent: () => agent,
  sandboxes,
  store: createMemorySessionStore(),
  approve,
});

// ─── Printing ─────────────────────────────────────────────────────────────────────────────────

const say = (who, text) => console.log(`${who.padEnd(6)}| ${text}`);

/** Sends `text` to session `id` and prints the answer once it has streamed: returns the session. */
async function ask(id, text) {
  say(id, `> ${text}`);
  return reply(id, await sessions.send(id, { message: text }));
}

/** Reads a turn to its end, printing what it did; returns the session as the turn left it. */
async function reply(id, turn) {
  let answer = '';
  for await (const chunk of turn.stream) {
    if (chunk.type === 'text-delta') answer += chunk.delta;
    if (chunk.type === 'tool-input-available') say(id, `  [tool ${chunk.toolName}] ${JSON.stringify(chunk.input)}`);
    if (chunk.type === 'tool-approval-response') {
      say(id, `  [${chunk.approved ? 'approved' : 'denied'}${chunk.reason ? `: ${chunk.reason}` : ''}]`);
    }
    if (chunk.type === 'tool-output-available') say(id, `  [output] ${JSON.stringify(chunk.output)}`);
  }
  if (answer !== '') say(id, `< ${answer.trim()}`);
  const session = await turn.done;
  say(id, `  (${session.status})`);
  return session;
}

/** The text of a message's parts, for the transcript. */
function partsText(message) {
  return message.parts
    .map((part) => {
      if (part.type === 'text') return part.text;
      if (part.type.startsWith('tool-')) {
        const verdict = part.approval === undefined ? '' : part.approval.approved ? ' approved' : ' denied';
        return `[${part.type.slice(5)}${verdict}]`;
      }
      return '';
    })
    .filter(Boolean)
    .join(' ');
}

// ─── The story ────────────────────────────────────────────────────────────────────────────────

try {
  await sessions.create({ id: 'alice', metadata: { title: 'Notes' } });
  await sessions.create({ id: 'bob', metadata: { title: 'Chores' } });

  console.log('— two sessions at once; the policy answers the approvals it knows');
  await Promise.all([ask('alice', 'write notes.md: buy milk'), ask('bob', 'run rm -rf build')]);

  console.log('— an approval the policy leaves to a person');
  const waiting = await ask('bob', 'run echo chores done');
  const [approval] = waiting.pendingInput?.approvals ?? [];
  say('bob', `  waits for: ${approval.toolName} ${JSON.stringify(approval.input)}`);
  await reply(
    'bob',
    await sessions.continue('bob', {
      toolApprovalContinuations: [{ type: 'tool-approval-response', approvalId: approval.approvalId, approved: true }],
    }),
  );

  console.log('— alice is suspended, then brought back by her next message');
  const suspended = await sessions.suspend('alice');
  say('alice', `  (${suspended.status})`);
  await ask('alice', 'what did I say?');
  await ask('alice', 'read notes.md');

  console.log('— the conversations, as get() keeps them');
  for (const { id } of await sessions.list()) {
    const session = await sessions.get(id);
    console.log(`${id} (${session.status}, ${session.messages.length} messages)`);
    for (const message of session.messages) console.log(`  ${message.role}: ${partsText(message)}`);
  }
} finally {
  await sessions.shutdown();
  rmSync(root, { recursive: true, force: true });
}
