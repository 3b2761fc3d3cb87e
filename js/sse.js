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

const encoder = new TextEncoder();
const DONE = encoder.encode('data: [DONE]\n\n');

/** Each chunk as `data: <json>\n\n`, then `data: [DONE]\n\n`, as bytes. */
function sseEncoder() {
  return new TransformStream({
    transform(chunk, controller) {
      controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`));
    },
    flush(controller) {
      controller.enqueue(DONE);
    },
  });
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
  return new Response(stream.pipeThrough(sseEncoder()), {
    status: init?.status,
    statusText: init?.statusText,
    headers,
  });
}

module.exports = { toUIMessageStreamResponse, UI_MESSAGE_STREAM_HEADERS };
