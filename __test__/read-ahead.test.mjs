// Reading with reads kept outstanding (js/read-ahead.js), as the turn's pump and the SSE body do:
// every chunk in order whatever the source's pace, a failure seen once and never as an unhandled
// rejection, a cancel reaching the source; and the SSE body (js/sse.js) failing and cancelling as
// the stream it writes does.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';

const require = createRequire(import.meta.url);
const { ReadAhead } = require('../js/read-ahead.js');
const { toUIMessageStreamResponse } = require('../js/sse.js');

/** A stream that gives `count` numbers from `pull`, some at once and some after a timer. */
function paced(count, { failAt } = {}) {
  let next = 0;
  return new ReadableStream({
    async pull(controller) {
      if (next % 3 === 0) await new Promise((resolve) => setTimeout(resolve, 1));
      if (next === failAt) throw new Error(`failed at ${next}`);
      if (next === count) controller.close();
      else controller.enqueue(next++);
    },
  });
}

/** Collects the unhandled rejections while `run` runs, and a few turns of the loop after. */
async function unhandledDuring(run) {
  const seen = [];
  const listener = (reason) => seen.push(reason);
  process.on('unhandledRejection', listener);
  try {
    await run();
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('unhandledRejection', listener);
  }
  return seen;
}

test('every chunk is read once, in order, whatever the pace of the stream', async () => {
  for (const count of [0, 1, 7, 8, 9, 100]) {
    const reader = new ReadAhead(paced(count));
    const got = [];
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      got.push(value);
    }
    reader.stop();
    assert.deepEqual(got, Array.from({ length: count }, (_, i) => i), `count ${count}`);
  }
});

test('a failure is seen once, in its place, and the reads left are no unhandled rejections', async () => {
  const got = [];
  let failure;
  const unhandled = await unhandledDuring(async () => {
    const reader = new ReadAhead(paced(50, { failAt: 20 }));
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        got.push(value);
      }
    } catch (error) {
      failure = error;
    }
    reader.stop();
  });
  assert.deepEqual(got, Array.from({ length: 20 }, (_, i) => i));
  assert.equal(failure?.message, 'failed at 20');
  assert.deepEqual(unhandled, []);
});

test('cancel() reaches the stream with its reason', async () => {
  let reason;
  const stream = new ReadableStream({
    pull(controller) {
      controller.enqueue('chunk');
    },
    cancel(why) {
      reason = why;
    },
  });
  const reader = new ReadAhead(stream);
  assert.deepEqual(await reader.read(), { done: false, value: 'chunk' });
  await reader.cancel('enough');
  assert.equal(reason, 'enough');
});

test('the SSE body fails when the stream it writes fails, after the events before', async () => {
  const chunks = [{ type: 'start' }, { type: 'text-start', id: 't' }];
  let controller;
  const stream = new ReadableStream({ start: (c) => void (controller = c) });
  const body = toUIMessageStreamResponse(stream).body.getReader();
  for (const chunk of chunks) controller.enqueue(chunk);
  const decoder = new TextDecoder();
  assert.equal(decoder.decode((await body.read()).value), 'data: {"type":"start"}\n\n');
  assert.equal(decoder.decode((await body.read()).value), 'data: {"type":"text-start","id":"t"}\n\n');
  controller.error(new Error('the turn failed'));
  await assert.rejects(body.read(), /the turn failed/);
});

test('a chunk that cannot be written fails the SSE body and lets the stream go', async () => {
  let cancelled;
  const stream = new ReadableStream({
    start(controller) {
      controller.enqueue({ type: 'data-big', data: 1n });
    },
    cancel(reason) {
      cancelled = reason;
    },
  });
  const body = toUIMessageStreamResponse(stream).body.getReader();
  await assert.rejects(body.read(), TypeError);
  assert.ok(cancelled instanceof TypeError);
});

test('cancelling the SSE body cancels the stream it writes, with the reason', async () => {
  let cancelled;
  const stream = new ReadableStream({
    start(controller) {
      controller.enqueue({ type: 'start' });
    },
    cancel(reason) {
      cancelled = reason;
    },
  });
  const body = toUIMessageStreamResponse(stream).body.getReader();
  assert.ok((await body.read()).value.byteLength > 0);
  await body.cancel('the client left');
  assert.equal(cancelled, 'the client left');
  assert.deepEqual(await body.read(), { done: true, value: undefined });
});
