// Figure, a long conversation: one session sent 5,000 turns one after the other (a short turn of
// 7 chunks each, the memory store), each timed from `send()` to `done`; the cost of a turn near
// the 10th against a turn near the 5,000th, so that what is redone per turn over the whole
// conversation (the record copied or written again, the messages serialised again) shows. The
// same on the reference (`ai-sdk-harness-sessions` 0.2.0), in the same process after ours, when
// it is there. Target: turn 5,000 within 1.5 × turn 10.
import { randomUUID } from 'node:crypto';

import { collectGarbage, now, summarize } from './stats.mjs';
import { chunkAgent, loadPackage, loadReference, nullSandboxes, readySession, shortTurn, statusWaiter, userMessage } from './support.mjs';
import { timeRow } from './report.mjs';

export const title = 'A long conversation: turn 10 against turn 5,000';

/** The turns around `at` (the 21 turns centred on it, or the first 21 from the 1st): their times. */
const around = (times, at) => times.slice(Math.max(0, at - 11), Math.max(0, at - 11) + 21);

async function conversation(createSessionManager, turns, log, name) {
  const chunks = shortTurn();
  const agent = chunkAgent(() => chunks);
  const errors = [];
  const sessions = createSessionManager({ agent: () => agent, sandboxes: nullSandboxes(), onError: (e) => errors.push(String(e?.message ?? e)) });
  const waiter = statusWaiter(sessions);
  await readySession(sessions, waiter, 'long');
  const times = [];
  await collectGarbage();
  for (let i = 0; i < turns; i++) {
    const started = now();
    const turn = await sessions.send('long', { message: userMessage(randomUUID(), `Turn ${i + 1}: what next?`) });
    const reader = turn.stream.getReader();
    while (!(await reader.read()).done) {}
    await turn.done;
    times.push(now() - started);
    if ((i + 1) % 250 === 0) log(`  ${name}: turn ${i + 1}, the last 100 ${summarize(times.slice(-100)).median.toFixed(3)} ms at the median`);
  }
  const record = await sessions.get('long');
  await sessions.shutdown();
  return { times, errors: errors.length, messages: record?.messages.length };
}

export async function run({ quick, log }) {
  const { createSessionManager } = loadPackage();
  const turns = quick ? 1000 : 5000;
  const reference = await loadReference();
  const ours = await conversation(createSessionManager, turns, log, 'ours');
  const theirs = reference.module ? await conversation(reference.module.createSessionManager, turns, log, 'reference') : undefined;
  const n = turns.toLocaleString('en');
  return {
    rows: [
      timeRow({
        id: 'long.last',
        label: `a turn around the ${n}th of one session (send() → done; 21 turns)`,
        baselineLabel: 'a turn around the 10th of the same session',
        ours: around(ours.times, turns),
        baseline: around(ours.times, 10),
        reference: theirs && around(theirs.times, turns),
        target: { text: '≤ 1.5 × turn 10', check: (r) => r <= 1.5 },
        chart: `turn ${n} vs turn 10`,
        chartTarget: 1.5,
      }),
      timeRow({
        id: 'long.first',
        label: 'a turn around the 10th of one session (send() → done; 21 turns)',
        ours: around(ours.times, 10),
        reference: theirs && around(theirs.times, 10),
      }),
    ],
    notes: [
      `One session, ${n} turns of 7 chunks one after the other, the memory store; the conversation ends with ${ours.messages} messages.${theirs ? ` The reference's turns around the 10th / ${n}th: ${summarize(around(theirs.times, 10)).median.toFixed(3)} / ${summarize(around(theirs.times, turns)).median.toFixed(3)} ms.` : ''}`,
    ],
    reference: reference.missing ? { missing: reference.missing } : { dir: reference.dir },
    checks: { errors: ours.errors, referenceErrors: theirs?.errors, messages: ours.messages, referenceMessages: theirs?.messages },
  };
}
