'use strict';
/**
 * A turn as the response of a route handler: the UI message stream as server-sent events, byte
 * for byte as `createUIMessageStreamResponse` of `ai` writes it, with the same five headers.
 */

/** The headers of a UI message stream response, as `ai` sends them. */
const UI_MESSAGE_STREAM_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
};

const { ReadAhead } = require('./read-ahead.js');

const encoder = new TextEncoder();
const DONE = encoder.encode('data: [DONE]\n\n');

/** The encoded bytes queued ahead of a body's reader before the pump waits for it. */
const AHEAD_BYTES = 64 * 1024;

/**
 * Each chunk of `stream` as `data: <json>\n\n`, then `data: [DONE]\n\n`, as bytes: a pump
 * reading `stream` ahead (`ReadAhead`), cheaper than a `TransformStream` piped through. It keeps
 * at most about `AHEAD_BYTES` encoded ahead of the body's reader, then waits for it: a body nobody
 * reads leaves the chunks in `stream` (shared with the turn's other readers, and bounded there by
 * `readerBufferBytes`), not a copy of them as bytes. A failure of `stream` fails the bytes;
 * cancelling the bytes cancels `stream`.
 */
function sseBytes(stream) {
  const reader = new ReadAhead(stream);
  let controller;
  let cancelled = false;
  let wake;
  const bytes = new ReadableStream(
    {
      start(c) {
        controller = c;
      },
      pull() {
        const resume = wake;
        wake = undefined;
        resume?.();
      },
      cancel(reason) {
        cancelled = true;
        const resume = wake;
        wake = undefined;
        resume?.();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: AHEAD_BYTES, size: (chunk) => chunk.byteLength },
  );
  void (async () => {
    try {
      for (;;) {
        if (controller.desiredSize <= 0) {
          await new Promise((resolve) => {
            wake = resolve;
          });
          if (cancelled) return;
        }
        const { done, value } = await reader.read();
        if (done) break;
        if (cancelled) return;
        controller.enqueue(encoder.encode(`data: ${JSON.stringify(value)}\n\n`));
      }
      reader.stop();
      if (cancelled) return;
      controller.enqueue(DONE);
      controller.close();
    } catch (error) {
      // The stream failed, or a chunk could not be written: the bytes fail, the stream is let go.
      reader.cancel(error).catch(() => {});
      if (cancelled) return;
      try {
        controller.error(error);
      } catch {}
    }
  })();
  return bytes;
}

/**
 * `stream` as a `Response`; `init` may set `status`, `statusText` and `headers` (the five
 * stream headers are added unless given).
 */
function toUIMessageStreamResponse(stream, init = {}) {
  const headers = new Headers(init?.headers ?? {});
  for (const [key, value] of Object.entries(UI_MESSAGE_STREAM_HEADERS)) {
    if (!headers.has(key)) headers.set(key, value);
  }
  return new Response(sseBytes(stream), {
    status: init?.status,
    statusText: init?.statusText,
    headers,
  });
}

module.exports = { toUIMessageStreamResponse, UI_MESSAGE_STREAM_HEADERS };
