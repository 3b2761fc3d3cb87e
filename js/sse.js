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

/**
 * Each chunk of `stream` as `data: <json>\n\n`, then `data: [DONE]\n\n`, as bytes: a pump
 * reading `stream` ahead (`ReadAhead`), cheaper than a `TransformStream` piped through. A failure
 * of `stream` fails the bytes; cancelling the bytes cancels `stream`.
 */
function sseBytes(stream) {
  const reader = new ReadAhead(stream);
  let controller;
  let cancelled = false;
  const bytes = new ReadableStream({
    start(c) {
      controller = c;
    },
    cancel(reason) {
      cancelled = true;
      return reader.cancel(reason);
    },
  });
  void (async () => {
    try {
      for (;;) {
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
