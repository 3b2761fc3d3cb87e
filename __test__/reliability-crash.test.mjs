// Crashes: a child process (fixtures/programs/crash-worker.mjs) runs a manager on a SQLite store,
// 20 sessions taking turns at once (quick, slow, pausing on approvals, calling tools, streaming a
// tool's input), and is killed with SIGKILL at a random moment, 100 times (1,000 with
// HARNESS_SESSIONS_LONG=1), each time restarted on the same file. The child writes every
// acknowledgement on stdout as it happens (synchronously), so the test knows what was
// acknowledged before the kill. After each kill:
//
// - a second SQLite reader (node:sqlite, on Node 24 when this is Node 20) reads a copy of the
//   files as the crash left them: `PRAGMA integrity_check` is ok, the foreign keys hold, and no
//   record is half-written (every message is JSON and matches its SHA-256 digest, positions have
//   no gap, every JSON column parses, a resume state is kept only by a suspended session, or one
//   resuming from it);
// - the restarted manager recovers the store: no session is left live (busy, idle, preparing,
//   awaiting-input): each is as it was (suspended, closed) or `interrupted`;
// - no acknowledged turn is lost: each acknowledged user message is stored with its text, each
//   acknowledged reply holds the text its client read, each acknowledged suspension or close holds;
// - a suspended session waits only for what its pendingInput says (a session the crash
//   interrupted, or one closed, keeps its message as it was, as the reference's does).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { createRandom, LONG, openSqliteReader, PROGRAMS, roundsOf, seedOf } from './support/hostile.mjs';

const KILLS = Number(process.env.HARNESS_SESSIONS_KILLS) || roundsOf(100, 1000);
const DANGLING = new Set(['input-streaming', 'input-available']);
const textOf = (message) => (message?.parts ?? []).filter((p) => p.type === 'text').map((p) => p.text).join('');

/** Runs the worker once; kills it at `killAt(lines)`'s moment; gives every line it printed. */
function runWorker(args, plan) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(PROGRAMS, 'crash-worker.mjs'), JSON.stringify(args)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const lines = [];
    let stderr = '';
    let timer;
    const kill = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    };
    child.stderr.on('data', (chunk) => (stderr += chunk));
    createInterface({ input: child.stdout }).on('line', (line) => {
      let parsed;
      try {
        parsed = JSON.parse(line);
      } catch {
        parsed = { t: 'noise', line };
      }
      lines.push(parsed);
      if (parsed.t === 'ready' && plan.afterReady !== undefined) timer = setTimeout(kill, plan.afterReady);
    });
    if (plan.afterSpawn !== undefined) timer = setTimeout(kill, plan.afterSpawn);
    const guard = setTimeout(kill, 30_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      clearTimeout(guard);
      resolve({ lines, code, signal, stderr });
    });
  });
}

/** What the lines of one run acknowledged, per session. */
function acknowledgements(lines) {
  const bySession = new Map();
  const of = (id) => {
    if (!bySession.has(id)) bySession.set(id, { events: [], sent: [], done: [], created: false });
    return bySession.get(id);
  };
  for (const line of lines) {
    if (line.id === undefined) continue;
    const session = of(line.id);
    session.events.push(line);
    if (line.t === 'created') session.created = true;
    if (line.t === 'sent') session.sent.push(line);
    if (line.t === 'done') session.done.push(line);
  }
  return bySession;
}

/** Everything the recovered state must show, given what the previous run acknowledged. */
function checkRecovered(state, previous, cycle) {
  const problems = [];
  if (state.live.length > 0) problems.push(`sessions left live after recovery: ${JSON.stringify(state.live)}`);
  const records = new Map(state.records.map((r) => [r.id, r]));
  for (const [id, acks] of previous) {
    const record = records.get(id);
    if (record === undefined) continue; // not asked for (a session of an older run)
    const where = `run ${cycle}, session ${id}`;
    if (record.missing) {
      if (acks.created || acks.sent.length > 0) problems.push(`${where}: acknowledged, but missing from the store`);
      continue;
    }
    if (!['suspended', 'closed', 'interrupted', 'failed'].includes(record.status)) problems.push(`${where}: status ${record.status} after recovery`);
    const byId = new Map(record.messages.map((m) => [m.id, m]));
    for (const sent of acks.sent) {
      const message = byId.get(sent.messageId);
      if (message === undefined) problems.push(`${where}: acknowledged user message ${sent.messageId} lost`);
      else if (textOf(message) !== sent.text) problems.push(`${where}: user message ${sent.messageId} changed: ${JSON.stringify(textOf(message))}`);
    }
    for (const done of acks.done) {
      const reply = byId.get(done.replyId);
      if (reply === undefined) problems.push(`${where}: acknowledged reply ${done.replyId} lost`);
      else if (!textOf(reply).includes(done.text)) problems.push(`${where}: reply ${done.replyId} lacks its acknowledged text ${JSON.stringify(done.text)}: ${JSON.stringify(textOf(reply))}`);
    }
    const last = acks.events.filter((e) => e.t !== 'done' && e.t !== 'refused').at(-1);
    if (last?.t === 'closed' && record.status !== 'closed') problems.push(`${where}: acknowledged closed, found ${record.status}`);
    if (last?.t === 'suspended' && record.status !== 'suspended') problems.push(`${where}: acknowledged suspended, then untouched, found ${record.status}`);
    const waiting = new Set((record.pendingInput?.toolCalls ?? []).map((c) => c.toolCallId));
    for (const message of record.messages) {
      for (const part of message.parts ?? []) {
        if (!(part.type?.startsWith('tool-') || part.type === 'dynamic-tool') || !DANGLING.has(part.state)) continue;
        // A closed or interrupted session keeps its message as it was, as the reference's does.
        if (record.status === 'closed' || record.status === 'interrupted') continue;
        const legit = record.status === 'suspended' && part.state === 'input-available' && waiting.has(part.toolCallId);
        if (!legit) problems.push(`${where}: tool call ${part.toolCallId} left ${part.state} in a ${record.status} session`);
      }
    }
  }
  return problems;
}

test(`${KILLS} kills with SIGKILL at random moments: the SQLite store stays whole, nothing acknowledged is lost`, { timeout: LONG ? 3_600_000 : 600_000 }, async () => {
  const seed = seedOf();
  const random = createRandom(seed);
  const dir = mkdtempSync(join(tmpdir(), 'hs-crash-'));
  const path = join(dir, 'sessions.db');
  const reader = await openSqliteReader();
  const figures = { kills: 0, killedBeforeReady: 0, killedMidTurn: 0, sent: 0, done: 0, interrupted: 0, toolCallsClosedByRecovery: 0, resumedFromEarlierRuns: 0, refused: 0, onError: 0 };
  const started = Date.now();
  let previous = new Map();
  let dump = [];
  try {
    for (let cycle = 1; cycle <= KILLS + 1; cycle++) {
      const final = cycle === KILLS + 1;
      const plan = final ? {} : random.chance(0.1) ? { afterSpawn: random.int(250) } : { afterReady: random.int(700) };
      const run = await runWorker({ path, seed: (seed + cycle) >>> 0, cycle, dump, final }, plan);
      const context = `seed ${seed} (HARNESS_SESSIONS_SEED=${seed}), run ${cycle}`;
      const noise = run.lines.filter((l) => l.t === 'noise');
      assert.deepEqual(noise, [], `${context}: the worker printed something else: ${JSON.stringify(noise)}\n${run.stderr}`);
      if (final) assert.equal(run.code, 0, `${context}: the last run failed: ${run.stderr}`);
      else assert.equal(run.signal, 'SIGKILL', `${context}: the worker ended on its own (${run.code}): ${run.stderr}`);
      if (!final && !/^\s*$/.test(run.stderr)) assert.fail(`${context}: the worker wrote on stderr: ${run.stderr}`);

      // Killed before its store made the file: nothing can have been acknowledged yet.
      if (!existsSync(path)) {
        assert.ok(!final, `${context}: the last run left no file`);
        assert.equal(previous.size, 0, `${context}: the file is gone after turns were acknowledged`);
        assert.equal(run.lines.filter((l) => l.t !== 'noise').length, 0, `${context}: the worker spoke without a file`);
        figures.kills++;
        figures.killedBeforeReady++;
        continue;
      }
      // The file as the crash left it.
      const check = await reader.ask({ op: 'check', path });
      assert.equal(check.error, undefined, `${context}: ${check.error}`);
      assert.equal(check.integrity, 'ok', `${context}: integrity_check: ${check.integrity}`);
      assert.deepEqual(check.problems, [], `${context}: half-written or inconsistent records`);

      // What the restarted manager recovered, against what the run before acknowledged.
      const state = run.lines.find((l) => l.t === 'state');
      if (state !== undefined) {
        const problems = checkRecovered(state, previous, cycle);
        assert.deepEqual(problems, [], `${context}: after the restart`);
        figures.interrupted += state.records.filter((r) => r.status === 'interrupted').length;
        for (const record of state.records) {
          for (const part of (record.messages ?? []).flatMap((m) => m.parts ?? [])) {
            if (part.state === 'output-error' && /stopped before the tool call ended/.test(part.errorText ?? '')) figures.toolCallsClosedByRecovery++;
          }
        }
      } else {
        // Killed before it said anything: the run before is checked by the next run.
        assert.ok(!final, `${context}: the last run printed no state`);
        for (const line of run.lines) assert.fail(`${context}: unexpected line before the state: ${JSON.stringify(line)}`);
        figures.kills++;
        figures.killedBeforeReady++;
        continue;
      }
      const refused = run.lines.filter((l) => l.t === 'refused');
      for (const r of refused) {
        assert.equal(r.code, 'SESSION_CONFLICT', `${context}: an action failed with something else than a conflict: ${JSON.stringify(r)}`);
      }
      const errors = run.lines.filter((l) => l.t === 'onError');
      for (const e of errors) assert.doesNotMatch(e.message, /sqlite|database|disk I\/O|SQLITE/i, `${context}: a database error reached onError: ${JSON.stringify(e)}`);
      figures.refused += refused.length;
      figures.onError += errors.length;
      if (final) break;

      const acks = acknowledgements(run.lines);
      figures.kills++;
      if (!run.lines.some((l) => l.t === 'ready')) figures.killedBeforeReady++;
      let midTurn = false;
      for (const session of acks.values()) {
        figures.sent += session.sent.length;
        figures.done += session.done.length;
        const last = session.events.at(-1);
        if (last?.t === 'sent' || last?.t === 'continued' || (last?.t === 'intent' && ['send', 'continue'].includes(last.action))) midTurn = true;
      }
      if (midTurn) figures.killedMidTurn++;
      const used = run.lines.filter((l) => l.t === 'use').map((l) => l.id);
      figures.resumedFromEarlierRuns += used.filter((id) => !id.startsWith(`c${cycle}-`)).length;
      // A run killed before it chose its sessions leaves the sessions of the run before to check.
      if (used.length > 0) {
        previous = acks;
        dump = used;
      }
    }
  } finally {
    await reader.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(`# crash: seed ${seed}, ${seconds} s: ${JSON.stringify(figures)}`);
  assert.ok(figures.sent > 0 && figures.done > 0, 'the runs acknowledged turns');
});
