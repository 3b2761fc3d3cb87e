// Figure 6, manager start-up with 10,000 stored sessions: a SQLite file holding a mix of statuses
// (20% live as a crash leaves them: idle, awaiting-input, busy, preparing; the rest suspended,
// closed, interrupted, failed), opened by a new process; the time from opening the store
// (`createSqliteSessionStore()`) and creating the manager until its first `list()` answers (the
// start marks the live sessions `interrupted` first); against opening the same store and calling
// `store.list()` alone. Every run starts from a fresh copy of the file, in a fresh process; the
// two sides alternate. The file is filled once, through `store.save()`, by a process that then exits.
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { median, now } from './stats.mjs';
import { chunkAgent, loadPackage, nullSandboxes, RESTING_STATUSES, runTask, saveAll, shortTurn, storedRecord } from './support.mjs';
import { timeRow } from './report.mjs';

export const title = 'Manager start-up with 10,000 stored sessions (SQLite)';

const LIVE = ['idle', 'idle', 'idle', 'idle', 'idle', 'awaiting-input', 'awaiting-input', 'busy', 'busy', 'preparing'];

/** The status of stored session `i`: one in five live. */
export function statusOf(i) {
  return i % 5 === 0 ? LIVE[(i / 5) % LIVE.length] : RESTING_STATUSES[i % RESTING_STATUSES.length];
}

function recordOf(i) {
  const record = storedRecord(i, statusOf(i));
  if (record.status === 'awaiting-input') {
    record.pendingInput = { approvals: [{ approvalId: `approval-${i}`, toolCallId: `call-${i}`, toolName: 'bash', input: { command: 'rm -rf build' } }], toolCalls: [] };
    record.messages[1].parts.push({ type: 'tool-bash', toolCallId: `call-${i}`, state: 'approval-requested', input: { command: 'rm -rf build' }, approval: { id: `approval-${i}` } });
  }
  return record;
}

const counts = (list) => list.reduce((acc, s) => ((acc[s.status] = (acc[s.status] ?? 0) + 1), acc), {});

export const tasks = {
  async populate({ path, count }) {
    const { createSqliteSessionStore } = loadPackage();
    const store = createSqliteSessionStore({ path });
    const records = Array.from({ length: count }, (_, i) => recordOf(i));
    const started = now();
    await saveAll(store, records, { resumeState: (r) => (r.status === 'suspended' ? { type: 'resume-session', harnessId: 'bench', specificationVersion: 'harness-v1', data: { id: r.id } } : undefined) });
    return { ms: now() - started, statuses: counts(await store.list()) };
  },
  async manager({ path }) {
    const { createSqliteSessionStore, createSessionManager } = loadPackage();
    const agent = chunkAgent(shortTurn);
    const started = now();
    const store = createSqliteSessionStore({ path });
    const opened = now();
    const sessions = createSessionManager({ agent: () => agent, sandboxes: nullSandboxes(), store, onError: () => {} });
    const list = await sessions.list();
    const listed = now();
    await sessions.list();
    const again = now() - listed;
    return { ms: listed - started, openMs: opened - started, secondListMs: again, length: list.length, statuses: counts(list) };
  },
  async store({ path }) {
    const { createSqliteSessionStore } = loadPackage();
    const started = now();
    const store = createSqliteSessionStore({ path });
    const opened = now();
    const list = await store.list();
    return { ms: now() - started, openMs: opened - started, length: list.length, statuses: counts(list) };
  },
};

export async function run({ quick, log }) {
  const count = 10_000;
  const dir = mkdtempSync(join(tmpdir(), 'harness-sessions-bench-start-'));
  try {
    const base = join(dir, 'base.db');
    const filled = runTask('startup', 'populate', { path: base, count });
    log(`  filled ${base} with ${count} sessions through store.save() in ${filled.ms.toFixed(0)} ms: ${JSON.stringify(filled.statuses)}`);
    const copy = (name) => {
      const path = join(dir, `${name}.db`);
      for (const suffix of ['-wal', '-shm', '']) rmSync(path + suffix, { force: true });
      copyFileSync(base, path);
      if (existsSync(`${base}-wal`)) copyFileSync(`${base}-wal`, `${path}-wal`);
      return path;
    };
    const reps = quick ? 3 : 8;
    const runs = { manager: [], store: [] };
    for (let i = 0; i < reps; i++) {
      for (const side of i % 2 === 0 ? ['manager', 'store'] : ['store', 'manager']) {
        const result = runTask('startup', side, { path: copy(side) });
        runs[side].push(result);
        log(`  ${side}: first list() after ${result.ms.toFixed(0)} ms (open ${result.openMs.toFixed(1)} ms${result.secondListMs !== undefined ? `, next list() ${result.secondListMs.toFixed(1)} ms` : ''}), ${JSON.stringify(result.statuses)}`);
      }
    }
    const liveLeft = runs.manager.map((r) => (r.statuses.idle ?? 0) + (r.statuses.busy ?? 0) + (r.statuses['awaiting-input'] ?? 0) + (r.statuses.preparing ?? 0));
    const marked = filled.statuses;
    const liveStored = (marked.idle ?? 0) + (marked.busy ?? 0) + (marked['awaiting-input'] ?? 0) + (marked.preparing ?? 0);
    return {
      rows: [
        timeRow({
          id: 'startup.firstList',
          label: 'open SQLite store + createSessionManager() → first list() answers',
          baselineLabel: 'open the same store + store.list()',
          ours: runs.manager.map((r) => r.ms),
          baseline: runs.store.map((r) => r.ms),
          chart: 'start-up, 10,000 stored sessions',
        }),
        timeRow({ id: 'startup.nextList', label: 'the next sessions.list() of that manager', baselineLabel: 'first store.list() of a fresh process', ours: runs.manager.map((r) => r.secondListMs), baseline: runs.store.map((r) => r.ms - r.openMs) }),
      ],
      notes: [
        `${liveStored} of ${count} stored sessions were live; after the start, live sessions left: ${JSON.stringify(liveLeft)} (should be 0); statuses then: ${JSON.stringify(runs.manager[0]?.statuses)}.`,
        `The start-up (recover() in src/engine/manager/mod.rs) marks each live session with a store.get() and a store.save() of its own, one after the other: ~${(median(runs.manager.map((r) => r.ms)) / Math.max(1, liveStored)).toFixed(2)} ms per live session here.`,
      ],
      checks: { filled, runs },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
