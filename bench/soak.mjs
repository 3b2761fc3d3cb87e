// Figure 8, the soak (only with --soak): 20 turns per second for 2 minutes (BENCH_SOAK_SECONDS),
// with about 50 streams under way at once, on the SQLite store. Each turn streams 53 chunks over
// 2.5 s (a delta every 50 ms) from a pool of 64 sessions; a client reads every turn to its end.
// Measured: the time to persist a turn, from the end of the agent's stream to `turn.done`
// (p50/p95/p99; target p99 — no figure was given, so it is reported beside the commit time of
// SQLite on this machine, ~1 ms median, 7 ms p99 with synchronous=FULL), the errors (target 0),
// and the growth of RSS after GC from the end of a 15 s warm-up to the end (target under 10%).
// There is no baseline process: the targets are absolute.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { collectGarbage, now, summarize } from './stats.mjs';
import { chunkAgent, loadPackage, nullSandboxes, readySession, statusWaiter, userMessage } from './support.mjs';
import { timeRow, valueRow } from './report.mjs';

export const title = 'Soak: 20 turns/s, ~50 concurrent streams, SQLite store';

const DELTAS = 48;
const DELTA_MS = 50;
const POOL = 64;
const RATE = 20;

export async function run({ quick, soakSeconds, log }) {
  const seconds = soakSeconds ?? (quick ? 20 : 120);
  const warmupSeconds = quick ? 5 : 15;
  const { createSessionManager, createSqliteSessionStore } = loadPackage();
  const dir = mkdtempSync(join(tmpdir(), 'harness-sessions-bench-soak-'));
  const ended = new Map();
  const agent = chunkAgent((prompt, { start }) => {
    let sent = 0;
    return new ReadableStream({
      start(controller) {
        controller.enqueue(start);
        controller.enqueue({ type: 'start-step' });
        controller.enqueue({ type: 'text-start', id: 'text-1' });
      },
      async pull(controller) {
        if (sent < DELTAS) {
          await sleep(DELTA_MS);
          controller.enqueue({ type: 'text-delta', id: 'text-1', delta: `word${sent} ` });
          sent++;
          return;
        }
        controller.enqueue({ type: 'text-end', id: 'text-1' });
        controller.enqueue({ type: 'finish-step' });
        controller.enqueue({ type: 'finish', finishReason: 'stop' });
        ended.set(prompt, now());
        controller.close();
      },
    });
  });
  const errors = [];
  const onError = (error, context) => errors.push({ message: String(error?.message ?? error), ...context });
  try {
    const store = createSqliteSessionStore({ path: join(dir, 'sessions.db') });
    const sessions = createSessionManager({ agent: () => agent, sandboxes: nullSandboxes(), store, onError });
    const waiter = statusWaiter(sessions);
    const idle = [];
    for (let i = 0; i < POOL; i++) {
      await readySession(sessions, waiter, `soak-${i}`);
      idle.push(`soak-${i}`);
    }
    const persist = [];
    const turnErrors = [];
    let started = 0;
    let finished = 0;
    let skipped = 0;
    let underWay = 0;
    let maxUnderWay = 0;
    const concurrency = [];
    const rss = [];
    const expectedChunks = DELTAS + 6;
    let measuring = false;

    const turn = async (id) => {
      const key = `turn ${randomUUID()}`;
      underWay++;
      maxUnderWay = Math.max(maxUnderWay, underWay);
      try {
        const t = await sessions.send(id, { message: userMessage(randomUUID(), key) });
        const reader = t.stream.getReader();
        let chunks = 0;
        while (!(await reader.read()).done) chunks++;
        await t.done;
        const doneAt = now();
        const endAt = ended.get(key);
        ended.delete(key);
        if (chunks !== expectedChunks) turnErrors.push(`a turn streamed ${chunks} chunks, not ${expectedChunks}`);
        if (endAt === undefined) turnErrors.push('a turn ended without the agent ending its stream');
        else if (measuring) persist.push(doneAt - endAt);
        finished++;
      } catch (error) {
        turnErrors.push(String(error?.message ?? error));
      } finally {
        underWay--;
        idle.push(id);
      }
    };

    const total = seconds + warmupSeconds;
    log(`  ${RATE} turns/s for ${warmupSeconds} s of warm-up, then ${seconds} s measured, on a pool of ${POOL} sessions`);
    const begin = now();
    let rssStart;
    let memoryStart;
    let nextSample = 1;
    const pending = new Set();
    for (;;) {
      const elapsed = (now() - begin) / 1000;
      if (elapsed >= total) break;
      if (!measuring && elapsed >= warmupSeconds) {
        await collectGarbage();
        memoryStart = process.memoryUsage();
        rssStart = memoryStart.rss;
        measuring = true;
        persist.length = 0;
      }
      if (elapsed >= nextSample) {
        const { rss: r, heapTotal, heapUsed } = process.memoryUsage();
        rss.push({ s: Math.round(elapsed), rss: r, heapTotal, heapUsed });
        concurrency.push(underWay);
        nextSample++;
        if (nextSample % 15 === 0) log(`  ${Math.round(elapsed)} s: ${finished} turns done, ${underWay} under way, RSS ${(process.memoryUsage.rss() / 2 ** 20).toFixed(0)} MiB`);
      }
      const due = Math.floor(elapsed * RATE);
      while (started < due) {
        started++;
        const id = idle.shift();
        if (id === undefined) {
          skipped++;
          continue;
        }
        const p = turn(id);
        pending.add(p);
        p.finally(() => pending.delete(p));
      }
      await sleep(5);
    }
    await Promise.all(pending);
    await collectGarbage();
    const memoryEnd = process.memoryUsage();
    const rssEnd = memoryEnd.rss;
    // What the live sessions legitimately hold: their conversations, as JSON.
    let conversationBytes = 0;
    for (const id of idle) conversationBytes += JSON.stringify(await sessions.get(id)).length;
    const held = (m) => m.rss - m.heapTotal + m.heapUsed;
    const heldGrowth = held(memoryEnd) - held(memoryStart);
    const stored = await sessions.list();
    await sessions.shutdown();
    const growth = (rssEnd - rssStart) / rssStart;
    const allErrors = errors.length + turnErrors.length;
    const p = summarize(persist);
    log(`  ${finished} turns, persist p50 ${p.median.toFixed(2)} ms p99 ${p.p99.toFixed(2)} ms, errors ${allErrors}, skipped ${skipped}, RSS ${(rssStart / 2 ** 20).toFixed(0)} → ${(rssEnd / 2 ** 20).toFixed(0)} MiB`);
    const concurrencySummary = summarize(concurrency);
    return {
      rows: [
        timeRow({ id: 'soak.persist', label: 'end of the agent stream → turn.done (SQLite)', ours: persist, baseline: null, tail: 'p99' }),
        valueRow({ id: 'soak.errors', label: `errors in ${finished} turns`, unit: 'errors', ours: allErrors, baseline: null, target: { text: '0', check: () => allErrors === 0, needsRatio: false } }),
        valueRow({ id: 'soak.rss', label: `RSS growth over ${seconds} s (after GC)`, unit: '%', ours: growth * 100, baseline: null, target: { text: '< 10%', check: () => growth < 0.1, needsRatio: false } }),
        valueRow({ id: 'soak.held', label: 'held growth after GC: RSS − V8 committed heap + JS heap used', unit: 'bytes', ours: heldGrowth, baseline: null }),
        valueRow({ id: 'soak.heapUsed', label: 'JS heap used, growth after GC', unit: 'bytes', ours: memoryEnd.heapUsed - memoryStart.heapUsed, baseline: null }),
        valueRow({ id: 'soak.conversations', label: `the ${POOL} conversations at the end, as JSON (what live sessions must hold)`, unit: 'bytes', ours: conversationBytes, baseline: null }),
        valueRow({ id: 'soak.skipped', label: 'turns not started: no idle session in the pool', unit: 'turns', ours: skipped, baseline: null }),
      ],
      notes: [
        `${finished} turns in ${seconds + warmupSeconds} s (${warmupSeconds} s warm-up), streams under way: median ${concurrencySummary.median}, max ${maxUnderWay}; persist p50 ${p.median.toFixed(2)} ms, p95 ${p.p95.toFixed(2)} ms, p99 ${p.p99.toFixed(2)} ms; RSS ${(rssStart / 2 ** 20).toFixed(1)} → ${(rssEnd / 2 ** 20).toFixed(1)} MiB (the ${POOL} live sessions keep their growing conversations in memory).`,
      ],
      checks: { errors: errors.slice(0, 20), turnErrors: turnErrors.slice(0, 20), persist: p, memoryStart, memoryEnd, rss, concurrency: concurrencySummary, stored: stored.length, finished, skipped },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
